#!/usr/bin/python3
"""Plots sched_sim's CSV (--csv): mean and p99 job completion time, and
utilization while work is queued, by cluster size and policy. On the mean,
a black line marks the bound no policy beats (every job at its max from
its arrival). With a second CSV (the same sizes under another arrival
process, e.g. `sched_sim --arrivals poisson`), its figures are drawn as
black dots on the bars, labelled with that file's name.

    /usr/bin/python3 bench/sched/plot.py results.csv bench/sched/sched.png [poisson.csv]
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def value(rows, gpus, policy, field, unit):
    return next(float(r[field]) / unit for r in rows if int(r["gpus"]) == gpus and r["policy"] == policy)


def main(source, target, other=None):
    rows = list(csv.DictReader(open(source)))
    other_rows = list(csv.DictReader(open(other))) if other else None
    sizes = sorted({int(r["gpus"]) for r in rows})
    policies = ["fifo", "static", "edt"]
    panels = [("mean_jct_s", "mean JCT (h)", 3600), ("p99_jct_s", "p99 JCT (h)", 3600),
              ("utilization_queued", "GPUs busy while jobs wait (%)", 0.01)]
    fig, axes = plt.subplots(1, len(panels), figsize=(13, 4))
    width = 0.8 / len(policies)
    for ax, (field, title, unit) in zip(axes, panels):
        for k, policy in enumerate(policies):
            xs = [i + k * width for i in range(len(sizes))]
            ax.bar(xs, [value(rows, g, policy, field, unit) for g in sizes], width, label=policy)
            if other_rows:
                ax.plot(xs, [value(other_rows, g, policy, field, unit) for g in sizes], "k.",
                        label=os.path.basename(other) if k == 0 and field == "mean_jct_s" else None)
        ax.set_xticks([i + width for i in range(len(sizes))], [f"{g} GPUs" for g in sizes])
        ax.set_title(title)
    bounds = {int(r["gpus"]): float(r["mean_jct_s"]) / 3600 for r in rows if r["policy"] == "bound"}
    for i, g in enumerate(sizes):
        if g in bounds:
            axes[0].hlines(bounds[g], i - width / 2, i + (len(policies) - 0.5) * width, colors="black",
                           label="bound" if i == 0 else None)
    axes[0].legend(loc="upper right", fontsize="small")
    fig.suptitle("bench/sched: one generated Philly/Helios-shaped trace per size, three policies")
    fig.tight_layout()
    fig.savefig(target, dpi=100)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: plot.py RESULTS.csv OUT.png [OTHER_ARRIVALS.csv]")
    main(*sys.argv[1:])
