#!/usr/bin/python3
"""Plots sched_sim's CSV (--csv): mean and p99 job completion time, and
utilization while work is queued, by cluster size and policy. On the mean,
a black line marks the bound no policy beats (every job at its max from
its arrival).

    /usr/bin/python3 bench/sched/plot.py results.csv bench/sched/sched.png
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(source, target):
    rows = list(csv.DictReader(open(source)))
    sizes = sorted({int(r["gpus"]) for r in rows})
    policies = ["fifo", "static", "edt"]
    panels = [("mean_jct_s", "mean JCT (h)", 3600), ("p99_jct_s", "p99 JCT (h)", 3600),
              ("utilization_queued", "GPUs busy while jobs wait (%)", 0.01)]
    fig, axes = plt.subplots(1, len(panels), figsize=(13, 4))
    width = 0.8 / len(policies)
    for ax, (field, title, unit) in zip(axes, panels):
        for k, policy in enumerate(policies):
            values = [next(float(r[field]) / unit for r in rows if int(r["gpus"]) == g and r["policy"] == policy)
                      for g in sizes]
            ax.bar([i + k * width for i in range(len(sizes))], values, width, label=policy)
        ax.set_xticks([i + width for i in range(len(sizes))], [f"{g} GPUs" for g in sizes])
        ax.set_title(title)
    bounds = {int(r["gpus"]): float(r["mean_jct_s"]) / 3600 for r in rows if r["policy"] == "bound"}
    for i, g in enumerate(sizes):
        if g in bounds:
            axes[0].hlines(bounds[g], i - width / 2, i + (len(policies) - 0.5) * width, colors="black",
                           label="bound" if i == 0 else None)
    axes[0].legend()
    fig.suptitle("bench/sched: one generated Philly-shaped trace per size, three policies")
    fig.tight_layout()
    fig.savefig(target, dpi=100)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: plot.py RESULTS.csv OUT.png")
    main(sys.argv[1], sys.argv[2])
