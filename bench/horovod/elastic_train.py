"""A Horovod elastic training script, as Horovod's docs write one, for the
resize benchmark (bench/horovod/run elastic): the same file runs under the
real horovodrun's elastic driver and under edtrun's elastic mode.

hvd.elastic.run around the loop, a TorchState committed every step,
DistributedOptimizer over a small model. Rank 0 appends one JSON line per
step to --steps-file: the wall-clock time, the job's size and the step.

--state-size BYTES adds that much state to the model, as a buffer (float32,
no gradient): what a worker that joins must receive, as a large model's
parameters and optimizer state are (bench/net/resize --state-sizes).
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F

import horovod.torch as hvd

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--steps-file", required=True, help="rank 0's step log (JSON lines)")
parser.add_argument("--steps", type=int, default=100000)
parser.add_argument("--step-ms", type=float, default=10.0, help="compute time of a step, slept")
parser.add_argument("--features", type=int, default=256)
parser.add_argument("--state-size", type=float, default=0, help="bytes of extra state in the model (a buffer)")
args = parser.parse_args()

torch.set_num_threads(1)
hvd.init()
model = torch.nn.Sequential(torch.nn.Linear(args.features, args.features), torch.nn.ReLU(),
                            torch.nn.Linear(args.features, 10))
if args.state_size:
    model.register_buffer("state", torch.ones(int(args.state_size) // 4))
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01 * hvd.size()),
                                     named_parameters=model.named_parameters())
data, target = torch.randn(32, args.features), torch.randint(0, 10, (32,))


@hvd.elastic.run
def train(state):
    with open(args.steps_file, "a", buffering=1) as log:
        while state.step < args.steps:
            optimizer.zero_grad()
            F.cross_entropy(model(data), target).backward()
            optimizer.step()
            time.sleep(args.step_ms / 1000)
            state.step += 1
            if hvd.rank() == 0:
                log.write(json.dumps({"t": time.time(), "size": hvd.size(), "step": state.step}) + "\n")
            state.commit()


def on_reset():
    for group in optimizer.param_groups:
        group["lr"] = 0.01 * hvd.size()


state = hvd.elastic.TorchState(model, optimizer, step=0)
state.register_reset_callbacks([on_reset])
train(state)
