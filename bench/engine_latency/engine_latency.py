#!/usr/bin/env python3
"""The latency of small requests through edt.torch's engine, against
torch.distributed on Gloo in the same processes of the same run.

    edtrun -np 2 /usr/bin/python3 bench/engine_latency/engine_latency.py [--iters 500]

Two cases, each the median over --rounds rounds of --iters iterations:
  one 4 KiB   a synchronous allreduce of 1024 float32 (hvd.allreduce_
              against dist.all_reduce);
  8 grads     the 8 gradients of the MNIST example's CNN (47 K parameters),
              submitted asynchronously and then waited for, as
              DistributedOptimizer does each step (allreduce_async_ +
              synchronize against all_reduce(async_op=True) + wait()).
Times are per iteration, in microseconds, from Python: they include the
bindings, the engine's negotiation of names and the collective itself.
Rank 0 prints a markdown table and the ratios.
"""

import argparse
import statistics
import time

import torch
import torch.distributed as dist

import edt.torch as hvd

# The MNIST example's parameters (examples/mnist/train_mnist.py, Net).
GRAD_SIZES = (16 * 25, 16, 32 * 16 * 25, 32, 512 * 64, 64, 64 * 10, 10)


def per_iteration(fn, iters):
    hvd.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - start) / iters * 1e6


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--iters", type=int, default=500)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    hvd.init()
    dist.init_process_group("gloo")
    one = torch.ones(1024)
    grads = [torch.ones(n) for n in GRAD_SIZES]

    def edt_one():
        hvd.allreduce_(one, name="one", op=hvd.Sum)

    def gloo_one():
        dist.all_reduce(one)

    def edt_grads():
        handles = [hvd.allreduce_async_(g, name="g%d" % i) for i, g in enumerate(grads)]
        for h in handles:
            hvd.synchronize(h)

    def gloo_grads():
        for w in [dist.all_reduce(g, async_op=True) for g in grads]:
            w.wait()

    cases = [("one 4 KiB", edt_one, gloo_one), ("8 grads", edt_grads, gloo_grads)]
    results = {name: ([], []) for name, _, _ in cases}
    for _ in range(args.rounds):  # alternate, so drift hits both alike
        for name, e, g in cases:
            results[name][0].append(per_iteration(e, args.iters))
            results[name][1].append(per_iteration(g, args.iters))
    if hvd.rank() == 0:
        print("| case | edt (us) | Gloo (us) | edt/Gloo time |")
        print("|---|---:|---:|---:|")
        for name, _, _ in cases:
            e, g = (statistics.median(v) for v in results[name])
            print("| %s | %.1f | %.1f | %.2fx |" % (name, e, g, e / g))
    dist.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()
