"""A small elastic PyTorch job for bench/resize_latency --worker torch.

Run under `edtrun --min-np/--max-np`: a 256x256 linear model trained with
edt.torch's DistributedOptimizer in hvd.elastic.run, committing every step.
Prints one JSON object per line, as edt-bench-elastic does:
  {"event":"start","worker":..,"host":..,"pid":..,"t":..}       when the script starts
  {"event":"reset","worker":..,"rank":..,"size":..,"step":..,"t":..}  each generation
  {"event":"step","worker":..,"rank":..,"size":..,"step":..,"t":..}
"""
import argparse
import json
import os
import time

import torch

import edt.torch as hvd

WORKER = os.environ.get("EDT_WORKER_ID", "")


def emit(event, **fields):
    print(json.dumps(dict(event=event, worker=WORKER, t=time.time(), **fields)), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100000)
    parser.add_argument("--step-ms", type=float, default=5.0, help="compute time per step to simulate")
    args = parser.parse_args()
    emit("start", host=os.environ.get("EDT_HOSTNAME", ""), pid=os.getpid())
    hvd.init()
    model = torch.nn.Linear(256, 256)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                         named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model=model, optimizer=optimizer, step=0)

    @hvd.elastic.run
    def train(state):
        emit("reset", rank=hvd.rank(), size=hvd.size(), step=state.step)
        while state.step < args.steps:
            optimizer.zero_grad()
            model(torch.randn(32, 256)).pow(2).mean().backward()
            time.sleep(args.step_ms / 1000.0)
            optimizer.step()
            state.step += 1
            emit("step", rank=hvd.rank(), size=hvd.size(), step=state.step)
            state.commit()

    train(state)


if __name__ == "__main__":
    main()
