#!/usr/bin/env python3
"""Where a step of Horovod's synthetic benchmark goes, per rank.

The loop of examples/pytorch/pytorch_synthetic_benchmark.py (a torchvision
model, random images, SGD under hvd.DistributedOptimizer), with each step
split into forward, backward (which submits the gradients' allreduces from
its hooks), synchronize() (waiting for them) and the optimizer's update;
plus what the launcher gave the rank (torch's thread count, the
environment variables that set threads or the collectives, its session
and autogroup: the kernel's autogroup scheduling shares the CPU by
session) and the CPU time of each of the process's threads while it
sleeps after init (what the background thread costs the cores when idle)
and during the timed steps.
Runs under any launcher (`bench/horovod/run profile`); prints one JSON line
per rank, prefixed `PROFILE `.
"""
import argparse
import json
import os
import re
import time

import torch
import torch.nn.functional as F
import torch.optim as optim
from torchvision import models

import horovod.torch as hvd

ENV = re.compile(r"^(OMP_|MKL_|OPENBLAS_|KMP_|GOMP_|HOROVOD_|EDT_|GLOO_|NCCL_|TORCH_)")
TICKS = os.sysconf("SC_CLK_TCK")


def thread_cpu():
    """{thread id: (name, CPU seconds)} of this process's threads."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # the thread ended meanwhile
        name = "main" if int(tid) == os.getpid() else stat[stat.index("(") + 1:stat.rindex(")")] + ":" + tid
        fields = stat[stat.rindex(")") + 2:].split()
        out[tid] = (name, (int(fields[11]) + int(fields[12])) / TICKS)
    return out


def autogroup():
    try:
        with open("/proc/self/autogroup") as f:
            return f.read().strip()
    except OSError:
        return None  # a kernel without autogroup scheduling


def cpu_delta(before, after, seconds):
    """Per thread: CPU seconds used between the two samples, as a share of
    `seconds` of wall time, busiest first (threads under 1% left out)."""
    rows = []
    for tid, (name, t) in after.items():
        used = t - before.get(tid, (name, 0.0))[1]
        if used / seconds >= 0.01:
            rows.append({"tid": int(tid), "name": name, "cpu_share": round(used / seconds, 3)})
    return sorted(rows, key=lambda r: -r["cpu_share"])


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", default="mobilenet_v3_small")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--idle", type=float, default=2.0, help="seconds to sleep after init, sampling threads' CPU")
    args = p.parse_args()

    hvd.init()
    threads_at_start = torch.get_num_threads()
    before = thread_cpu()
    time.sleep(args.idle)
    idle = cpu_delta(before, thread_cpu(), args.idle)

    model = getattr(models, args.model)()
    optimizer = optim.SGD(model.parameters(), lr=0.01 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    submitted = []  # (bytes, seconds in the hook's submit) of the current step
    submit = optimizer._allreduce_grad_async

    def counted(param):
        t = time.perf_counter()
        result = submit(param)
        submitted.append((param.grad.numel() * param.grad.element_size(), time.perf_counter() - t))
        return result
    optimizer._allreduce_grad_async = counted  # the hooks look the method up on the instance

    data = torch.randn(args.batch_size, 3, 224, 224)
    target = torch.LongTensor(args.batch_size).random_() % 1000
    phases = {k: [] for k in ("forward", "backward", "synchronize", "update", "step", "submit", "cpu_forward",
                              "cpu_backward", "cpu_synchronize", "cpu_step")}
    sizes = []
    for i in range(args.warmup + args.steps):
        if i == args.warmup:
            before, started = thread_cpu(), time.perf_counter()
        submitted.clear()
        t0, c0 = time.perf_counter(), time.thread_time()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        t1, c1 = time.perf_counter(), time.thread_time()
        loss.backward()
        t2, c2 = time.perf_counter(), time.thread_time()
        optimizer.synchronize()
        t3, c3 = time.perf_counter(), time.thread_time()
        with optimizer.skip_synchronize():
            optimizer.step()
        t4, c4 = time.perf_counter(), time.thread_time()
        if i >= args.warmup:
            for k, dt in zip(("forward", "backward", "synchronize", "update", "step"),
                             (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0)):
                phases[k].append(dt * 1e3)
            for k, dt in zip(("forward", "backward", "synchronize", "step"), (c1 - c0, c2 - c1, c3 - c2, c4 - c0)):
                phases["cpu_" + k].append(dt * 1e3)
            sizes.append(sorted(b for b, _ in submitted))
            phases["submit"].append(sum(s for _, s in submitted) * 1e3)
    busy = cpu_delta(before, thread_cpu(), time.perf_counter() - started)

    step_sizes = sizes[-1] if sizes else []
    record = {
        "rank": hvd.rank(), "size": hvd.size(), "pid": os.getpid(),
        "torch": torch.__version__, "horovod": getattr(hvd, "__file__", "?"),
        "num_threads": threads_at_start, "num_interop_threads": torch.get_num_interop_threads(),
        "cores": len(os.sched_getaffinity(0)),
        # Where the kernel shares the CPU by session (autogroup), ranks in
        # one session share one share against the host's other sessions.
        "session": os.getsid(0), "autogroup": autogroup(),
        "env": {k: v for k, v in sorted(os.environ.items()) if ENV.match(k)},
        "ms_median": {k: round(sorted(v)[len(v) // 2], 1) for k, v in phases.items() if v},
        "ms_each": {k: [round(x, 1) for x in v] for k, v in phases.items()},
        "allreduces_per_step": len(step_sizes), "bytes_per_step": sum(step_sizes),
        "under_64KiB": sum(1 for b in step_sizes if b < 65536), "largest": max(step_sizes, default=0),
        "idle_threads": idle, "busy_threads": busy,
        "images_per_s": round(args.batch_size * 1e3 / (sum(phases["step"]) / max(len(phases["step"]), 1)), 2),
    }
    print("PROFILE " + json.dumps(record), flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
