#!/usr/bin/env python3
"""One training step of a ~10M-parameter MLP on CPU, with edt.torch's
DistributedOptimizer against torch DistributedDataParallel on Gloo, in the
same processes of the same run.

    edtrun -np 2 /usr/bin/python3 bench/torch_step/torch_step.py [--steps 20] [--plot step.png]

Per step it reports the median wall time of
  local    forward + backward + SGD step with no communication at all;
  edt      the same with edt.torch.DistributedOptimizer;
  ddp      the same with DistributedDataParallel (Gloo, 25 MiB buckets);
and the communication time of each, the step time less the local step:
the time the step waits for gradients, after what backward overlaps. It
also times the gradient allreduce alone (no compute to overlap with): edt's
engine on all gradients against Gloo's allreduce of the same bytes in DDP's
bucket size. The modes alternate in rounds, so drift on a shared machine
hits all of them alike. Rank 0 prints a markdown table and the ratios.
"""

import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist

import edt.torch as hvd


def make_model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(1280, 2048), torch.nn.ReLU(),
        torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
        torch.nn.Linear(2048, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 10))


def step_fn(model, optimizer, x, y):
    def step():
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    return step


def timed(fn, steps):
    times = []
    for _ in range(steps):
        hvd.barrier()  # every rank starts the step together
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20, help="timed steps per mode (in rounds of 5)")
    p.add_argument("--batch", type=int, default=8, help="samples per rank and step")
    p.add_argument("--plot", help="write a PNG bar chart here")
    args = p.parse_args()

    hvd.init()
    dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from edtrun
    torch.manual_seed(hvd.rank())
    x, y = torch.randn(args.batch, 1280), torch.randint(0, 10, (args.batch,))

    local_model = make_model()
    edt_model = make_model()
    ddp_model = torch.nn.parallel.DistributedDataParallel(make_model())
    params = sum(p.numel() for p in local_model.parameters())
    edt_opt = hvd.DistributedOptimizer(torch.optim.SGD(edt_model.parameters(), lr=0.01),
                                       named_parameters=edt_model.named_parameters())
    modes = {
        "local": step_fn(local_model, torch.optim.SGD(local_model.parameters(), lr=0.01), x, y),
        "edt": step_fn(edt_model, edt_opt, x, y),
        "ddp": step_fn(ddp_model, torch.optim.SGD(ddp_model.parameters(), lr=0.01), x, y),
    }

    grads = [torch.randn_like(p) for p in local_model.parameters()]
    flat = torch.cat([g.flatten() for g in grads])
    bucket = 25 * 1024 * 1024 // 4

    def edt_allreduce():
        hvd.grouped_allreduce_(grads, name="bench.grads")

    def gloo_allreduce():
        for begin in range(0, flat.numel(), bucket):
            dist.all_reduce(flat[begin:begin + bucket])
    modes["edt-allreduce"] = edt_allreduce
    modes["gloo-allreduce"] = gloo_allreduce

    for fn in modes.values():  # warm up: allocations, caches, connections
        timed(fn, 2)
    samples = {m: [] for m in modes}
    for _ in range(max(1, args.steps // 5)):
        for mode, fn in modes.items():
            samples[mode] += timed(fn, 5)
    med = {m: statistics.median(t) * 1000 for m, t in samples.items()}

    if hvd.rank() == 0:
        comm_edt = max(med["edt"] - med["local"], 0.0)
        comm_ddp = max(med["ddp"] - med["local"], 0.0)
        print("torch_step: %d ranks, MLP with %.1fM parameters (%.1f MiB of gradients), batch %d per rank, "
              "OMP_NUM_THREADS=%s, transport %s"
              % (hvd.size(), params / 1e6, params * 4 / 2**20, args.batch, os.environ.get("OMP_NUM_THREADS", "-"),
                 hvd._runtime.get().transport))
        print()
        print("| | edt.torch | DDP (Gloo) | edt / DDP |")
        print("|---|---:|---:|---:|")
        print("| step time (ms, median) | %.1f | %.1f | %.2f |" % (med["edt"], med["ddp"], med["edt"] / med["ddp"]))
        print("| communication per step (ms, step - local %.1f) | %.1f | %.1f | %.2f |"
              % (med["local"], comm_edt, comm_ddp, comm_edt / comm_ddp if comm_ddp else float("nan")))
        print("| gradient allreduce alone (ms) | %.1f | %.1f | %.2f |"
              % (med["edt-allreduce"], med["gloo-allreduce"], med["edt-allreduce"] / med["gloo-allreduce"]))
        print()
        if comm_ddp > 0:
            comm_goal = "met" if comm_edt <= 0.5 * comm_ddp else "MISSED"
        else:
            comm_goal = "not measurable in this run (the local step varied more than DDP's communication)"
        print("goals: communication <= 0.5x DDP's: %s; step time <= DDP's: %s"
              % (comm_goal, "met" if med["edt"] <= med["ddp"] else "MISSED"))
        if args.plot:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            fig, ax = plt.subplots(figsize=(7, 4))
            labels = ["step", "communication", "allreduce alone"]
            edt_v = [med["edt"], comm_edt, med["edt-allreduce"]]
            ddp_v = [med["ddp"], comm_ddp, med["gloo-allreduce"]]
            pos = range(len(labels))
            ax.bar([i - 0.2 for i in pos], edt_v, 0.4, label="edt.torch")
            ax.bar([i + 0.2 for i in pos], ddp_v, 0.4, label="DDP (Gloo)")
            ax.set_xticks(list(pos), labels)
            ax.set_ylabel("ms (median)")
            ax.set_title("one step, %.1fM-parameter MLP, %d ranks" % (params / 1e6, hvd.size()))
            ax.legend()
            fig.tight_layout()
            fig.savefig(args.plot)
            print("plot: %s" % args.plot)
    dist.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()
