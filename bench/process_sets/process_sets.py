#!/usr/bin/env python3
"""How long forming a process set takes: edt.torch's hvd.add_process_set
(an agreement over the job, then a communicator and an engine among the
members) against torch.distributed's new_group on Gloo, in the same
processes of the same run.

    edtrun -np 4 /usr/bin/python3 bench/process_sets/process_sets.py [--rounds 20]

Each round forms the set of the even ranks and runs one allreduce in it
(a set is usable only once its members are connected; Gloo connects
lazily on the first collective), then removes it (edt) or destroys it
(Gloo). Times are per round, from Python, between two global barriers;
rank 0 prints the medians and maxima as a markdown table.
"""

import argparse
import datetime
import statistics
import time

import torch
import torch.distributed as dist

import edt.torch as hvd


def edt_round(members):
    hvd.barrier()
    start = time.perf_counter()
    ps = hvd.add_process_set(members)
    if ps.included():
        hvd.allreduce(torch.ones(1), name="bench.set", process_set=ps)
    formed = time.perf_counter() - start
    hvd.barrier()
    start = time.perf_counter()
    hvd.remove_process_set(ps)
    return formed, time.perf_counter() - start


def gloo_round(members):
    dist.barrier()
    start = time.perf_counter()
    group = dist.new_group(members, backend="gloo")
    if hvd.rank() in members:
        dist.all_reduce(torch.ones(1), group=group)
    formed = time.perf_counter() - start
    dist.barrier()
    start = time.perf_counter()
    dist.destroy_process_group(group)
    return formed, time.perf_counter() - start


def row(name, times):
    formed = [1e3 * f for f, _ in times]
    gone = [1e3 * g for _, g in times]
    return "| %s | %.1f | %.1f | %.1f |" % (name, statistics.median(formed), max(formed), statistics.median(gone))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=20)
    args = p.parse_args()
    hvd.init()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    members = list(range(0, hvd.size(), 2))
    edt_times = [edt_round(members) for _ in range(args.rounds)]
    gloo_times = [gloo_round(members) for _ in range(args.rounds)]
    if hvd.rank() == 0:
        print("process set of ranks %s at -np %d, %d rounds" % (members, hvd.size(), args.rounds))
        print("| | formed + first allreduce, median ms | max ms | removed, median ms |")
        print("|---|---|---|---|")
        print(row("edt add_process_set", edt_times))
        print(row("Gloo new_group", gloo_times))
    dist.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()
