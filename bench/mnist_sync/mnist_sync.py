#!/usr/bin/env python3
"""Where a 2-worker MNIST epoch's time goes: the example's CNN and data,
trained by the same processes in five modes, alternating epoch by epoch.

    edtrun -np 2 /usr/bin/python3 bench/mnist_sync/mnist_sync.py [--rounds 3] [--data-dir DIR]

  alone    rank 0 trains on all 10,000 samples while the others wait: the
           1-worker epoch, in the same minutes as the rest;
  local    each rank trains on its share, without communication: the
           ranks drift apart (what two independent jobs get);
  barrier  the same with a barrier after every step: what synchronous
           steps alone cost on this machine (the ranks wait for each
           other and compute at the same moments), no gradients moved;
  edt      edt.torch.DistributedOptimizer, as the example trains;
  ddp      DistributedDataParallel on Gloo.

Each epoch is the example's: 10,000 samples split over the ranks, batches
of 32, SGD with momentum, one thread per rank. Rank 0 prints each mode's
median epoch time and its ratio to alone's, forward and backward medians
per step, and edt against barrier (edt's own cost) and against ddp (the
peer).
"""

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples/mnist"))
import train_mnist  # noqa: E402  (the example's model and data)

hvd = train_mnist.hvd
MODES = ["alone", "local", "barrier", "edt", "ddp"]


def make(mode, lr):
    torch.manual_seed(0)
    model = train_mnist.Net()
    if mode == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    if mode == "edt":
        optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    return model, optimizer


def epoch(mode, model, optimizer, train_x, train_y, indices, batch_size):
    """(epoch seconds, forward times, backward times)"""
    forward, backward = [], []
    # Epochs start and end with Gloo's barrier, which blocks without using
    # the CPU: the ranks that wait while rank 0 trains alone leave it the
    # machine, as in a 1-worker job.
    dist.barrier()
    start = time.perf_counter()
    if mode == "alone" and hvd.rank() != 0:
        indices = []
    for b in range(0, len(indices), batch_size):
        batch = indices[b:b + batch_size]
        t0 = time.perf_counter()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(train_mnist.inputs(train_x[batch])), train_y[batch])
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        optimizer.step()
        if mode == "barrier":
            hvd.barrier()
        loss.item()
        forward.append(t1 - t0)
        backward.append(t2 - t1)
    seconds = time.perf_counter() - start
    dist.barrier()
    return seconds, forward, backward


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="epochs per mode, alternating")
    p.add_argument("--data-dir", default=os.path.join(ROOT, "build", "mnist-data"))
    p.add_argument("--batch-size", type=int, default=32)
    args = p.parse_args()

    hvd.init()
    dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from edtrun
    train_x, train_y, _, _ = train_mnist.load(args.data_dir)
    generator = torch.Generator().manual_seed(1)
    order = torch.randperm(len(train_y), generator=generator)
    share = order[hvd.rank()::hvd.size()]
    models = {mode: make(mode, 0.01 * (1 if mode == "alone" else hvd.size())) for mode in MODES}
    seconds = {mode: [] for mode in MODES}
    forward = {mode: [] for mode in MODES}
    backward = {mode: [] for mode in MODES}
    for r in range(args.rounds + 1):  # round 0 warms up
        for k in range(len(MODES)):
            mode = MODES[(k + r) % len(MODES)]
            indices = order if mode == "alone" else share
            t, f, b = epoch(mode, *models[mode], train_x, train_y, indices, args.batch_size)
            if r > 0:
                seconds[mode].append(t)
                forward[mode] += f
                backward[mode] += b
    if hvd.rank() != 0:
        return
    med = {mode: statistics.median(seconds[mode]) for mode in MODES}
    print("MNIST example's CNN, %d ranks, %d samples per rank and epoch (alone: %d), %d epochs per mode"
          % (hvd.size(), len(share), len(order), args.rounds))
    print()
    print("| mode | epoch (s, median) | min | max | vs alone | forward (ms/step) | backward (ms/step) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for mode in MODES:
        print("| %s | %.2f | %.2f | %.2f | %.2fx | %.2f | %.2f |"
              % (mode, med[mode], min(seconds[mode]), max(seconds[mode]), med[mode] / med["alone"],
                 1e3 * statistics.median(forward[mode]), 1e3 * statistics.median(backward[mode])))
    print()
    print("synchronous steps (barrier vs local): %.2fx" % (med["barrier"] / med["local"]))
    print("edt vs barrier (edt's own cost): %.2fx" % (med["edt"] / med["barrier"]))
    print("edt vs ddp on Gloo: %.2fx" % (med["edt"] / med["ddp"]))


if __name__ == "__main__":
    main()
