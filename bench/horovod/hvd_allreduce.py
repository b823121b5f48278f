"""Allreduce through Horovod's PyTorch API: one script for every launcher.

Under the real `horovodrun --gloo` or `--mpi` (the benchmark venv) it
measures Horovod; under `edtrun` (edt's horovod compatibility package) it
measures edt through the same calls. Same size sweep, timing and CSV columns
as edt-bench allreduce and bench/peers/gloo_allreduce.py, so
bench/compare_allreduce's reader and tables apply.

Timing: per size, two warm-up sums that rank 0 times to choose `iters` (as
many as fill --budget seconds, 3 to 1000, broadcast so that every rank runs
the same count), hvd.barrier(), then `iters` back-to-back in-place sums
(hvd.allreduce_, each waited for); time = elapsed / iters on rank 0;
busbw = algbw * 2(n-1)/n. Sizes grow by --factor.
"""
import argparse
import os
import sys
import time

import torch
import horovod.torch as hvd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peers"))
from gloo_allreduce import DTYPES, parse_bytes  # noqa: E402


def iters_for(tensor, name, budget):
    """Times two warm-up sums; rank 0's estimate decides for every rank."""
    start = time.perf_counter()
    for _ in range(2):
        hvd.allreduce_(tensor, op=hvd.Sum, name=name)
    each = (time.perf_counter() - start) / 2
    chosen = torch.tensor([max(3, min(1000, int(budget / max(each, 1e-6))))], dtype=torch.int64)
    return int(hvd.broadcast(chosen, root_rank=0, name=name + ".iters")[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-bytes", default="4K")
    parser.add_argument("--max-bytes", default="256M")
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    parser.add_argument("--factor", type=int, default=2, help="each size is the previous one times this")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds of timed sums per size (about)")
    parser.add_argument("--csv")
    args = parser.parse_args()
    torch.set_num_threads(1)
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    dtype = DTYPES[args.dtype]
    elem = torch.tensor([], dtype=dtype).element_size()
    nbytes, max_bytes = max(parse_bytes(args.min_bytes), elem), parse_bytes(args.max_bytes)
    rows = []
    while nbytes <= max_bytes:
        count = nbytes // elem
        tensor = torch.zeros(count, dtype=dtype)
        name = "ar.%d" % nbytes
        iters = iters_for(tensor, name, args.budget)
        hvd.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            hvd.allreduce_(tensor, op=hvd.Sum, name=name)
        elapsed = (time.perf_counter() - start) / iters
        algbw = nbytes / elapsed / 1e9
        busbw = algbw * 2 * (size - 1) / size
        if rank == 0:
            print(f"{nbytes:>12} {elapsed * 1e6:>12.2f} us {busbw:>10.3f} GB/s busbw", flush=True)
            rows.append(f"{nbytes},{count},{args.dtype},sum,{elapsed * 1e6:.3f},{algbw:.4f},{busbw:.4f},0")
        nbytes *= args.factor
    if rank == 0 and args.csv:
        with open(args.csv, "w") as out:
            out.write("bytes,count,dtype,op,time_us,algbw_gbps,busbw_gbps,wrong\n")
            out.write("\n".join(rows) + "\n")
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
