"""A Horovod user's elastic training loop, as Horovod's examples write it
(examples/elastic/pytorch/pytorch_mnist_elastic.py): `import horovod.torch`,
a TorchState with the model, the optimizer and a step counter, a reset
callback that scales the learning rate with hvd.size(), a commit every step.
Every rank starts from different random parameters, so only the state's
sync makes them equal. Prints one JSON event per line (tests/harness/edtrun.py).

Options: --broadcast-before-run (a resume-epoch broadcast between init and
hvd.elastic.run), --drift-rank R (rank R changes its parameters alone once,
so the replicas drift apart), --exit-code N (sys.exit(N) after run returns),
--until-size K (train past --steps until the job has had K workers for 20
steps, so a test that grows the job does not race the loop's end; the step
it first had K is part of the state, so every rank stops at the same step).
"""
import argparse
import json
import os
import sys
import time

import torch

import horovod.torch as hvd

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--step-ms", type=float, default=30)
parser.add_argument("--lr", type=float, default=0.001)
parser.add_argument("--broadcast-before-run", action="store_true")
parser.add_argument("--drift-rank", type=int, default=-1)
parser.add_argument("--exit-code", type=int, default=0)
parser.add_argument("--until-size", type=int, default=0)
args = parser.parse_args()

WORKER = os.environ.get("EDT_WORKER_ID", "static")


def emit(**event):
    event["worker"] = WORKER
    print(json.dumps(event), flush=True)


hvd.init()
emit(event="start", pid=os.getpid(), rank=hvd.rank(), size=hvd.size())
torch.manual_seed(1000 + hvd.rank())
resume_from_epoch = 0
if args.broadcast_before_run:
    resume_from_epoch = 7 if hvd.rank() == 0 else 0
    resume_from_epoch = hvd.broadcast(torch.tensor(resume_from_epoch), root_rank=0, name="resume_from_epoch").item()
    emit(event="resume", resume_from_epoch=resume_from_epoch, rank=hvd.rank())

model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())


def on_state_reset():
    for param_group in optimizer.param_groups:
        param_group["lr"] = args.lr * hvd.size()
    emit(event="reset", size=hvd.size(), lr=[g["lr"] for g in optimizer.param_groups])


state = hvd.elastic.TorchState(model, optimizer, step=0, full_at=-1)
state.register_reset_callbacks([on_state_reset])


def more_steps(state):
    if state.step < args.steps:
        return True
    if not args.until_size:
        return False
    if state.full_at < 0 and hvd.size() >= args.until_size:
        state.full_at = state.step
    return state.full_at < 0 or state.step < state.full_at + 20


@hvd.elastic.run
def train(state):
    while more_steps(state):
        data = torch.Generator().manual_seed(state.step * 100 + hvd.rank())
        x, y = torch.randn(8, 16, generator=data), torch.randn(8, 4, generator=data)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        if state.step == 5 and hvd.rank() == args.drift_rank:
            with torch.no_grad():
                model[0].weight.add_(0.01)
        emit(event="step", step=state.step, size=hvd.size(), rank=hvd.rank(),
             lr=optimizer.param_groups[0]["lr"])
        state.step += 1
        time.sleep(args.step_ms / 1000)
        state.commit()


train(state)
flat = torch.cat([p.detach().flatten() for p in model.parameters()])
everyone = hvd.allgather(flat.unsqueeze(0))
emit(event="end", rank=hvd.rank(), size=hvd.size(), maxdiff=(everyone - everyone[0]).abs().max().item(),
     lr=optimizer.param_groups[0]["lr"])
sys.exit(args.exit_code)
