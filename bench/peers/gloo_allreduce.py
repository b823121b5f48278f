"""The torch.distributed (Gloo) peer of edt-bench allreduce.

Same size sweep, timing and CSV columns as edt-bench, so
bench/compare_allreduce can put both in one table. Reads torch.distributed's
RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT from the environment.

Timing: per size, warm-up iterations, a barrier, then `iters` back-to-back
allreduces; time = elapsed / iters on rank 0.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist

DTYPES = {"float32": torch.float32, "float64": torch.float64, "int32": torch.int32, "int64": torch.int64}
UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_bytes(text):
    text = text.lower().rstrip("ib")
    unit = text[-1] if text and text[-1] in UNITS else ""
    return int(float(text[: len(text) - len(unit)]) * UNITS[unit])


def iters_for(nbytes):
    """~2 GB moved per size, 5 to 1000 iterations: the rule every peer uses."""
    return int(max(5, min(1000, 2e9 / max(nbytes, 1))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-bytes", default="4")
    parser.add_argument("--max-bytes", default="256M")
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    parser.add_argument("--iters", type=int, default=0, help="timed iterations per size (default: by size)")
    parser.add_argument("--csv")
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    dtype = DTYPES[args.dtype]
    elem = torch.tensor([], dtype=dtype).element_size()
    nbytes = max(parse_bytes(args.min_bytes), elem)
    max_bytes = parse_bytes(args.max_bytes)
    rows = []
    if rank == 0:
        print(f"{'size(B)':>12} {'count':>12} {'type':>8} {'op':>5} {'time(us)':>12} {'algbw':>10} {'busbw':>10}")
    while nbytes <= max_bytes:
        count = nbytes // elem
        tensor = torch.zeros(count, dtype=dtype)
        iters = args.iters or iters_for(nbytes)
        for _ in range(iters // 10 + 2):
            dist.all_reduce(tensor)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(tensor)
        elapsed = (time.perf_counter() - start) / iters
        algbw = nbytes / elapsed / 1e9
        busbw = algbw * 2 * (size - 1) / size
        if rank == 0:
            print(f"{nbytes:>12} {count:>12} {args.dtype:>8} {'sum':>5} {elapsed * 1e6:>12.2f} {algbw:>10.3f} {busbw:>10.3f}", flush=True)
            rows.append(f"{nbytes},{count},{args.dtype},sum,{elapsed * 1e6:.3f},{algbw:.4f},{busbw:.4f},0")
        nbytes *= 2
    if rank == 0 and args.csv:
        with open(args.csv, "w") as out:
            out.write("bytes,count,dtype,op,time_us,algbw_gbps,busbw_gbps,wrong\n")
            out.write("\n".join(rows) + "\n")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
