#!/usr/bin/env python3
"""Runs a train_mnist.py job and checks its per-epoch lines: every rank
reports every epoch, each with samples = 10000 / np, and the last epoch's
accuracy reaches --min-acc.

    check_run.py --np 2 --epochs 3 --min-acc 0.95 -- edtrun -np 2 python3 train_mnist.py ...
"""

import argparse
import re
import subprocess
import sys

LINE = re.compile(r"epoch=(\d+) rank=(\d+) size=(\d+) samples=(\d+) loss=([\d.]+) acc=([\d.]+) time=([\d.]+)")


def epoch_lines(output):
    """{(epoch, rank): (size, samples, acc, time)} from a job's output."""
    seen = {}
    for m in LINE.finditer(output):
        epoch, rank, size, samples = (int(g) for g in m.groups()[:4])
        seen[(epoch, rank)] = (size, samples, float(m.group(6)), float(m.group(7)))
    return seen


def split_errors(seen, np_, epochs, train_samples=10000):
    """What is wrong with the lines of a job of np_ workers: a missing line, a
    worker whose size or sample count is not np_ and train_samples/np_, or a
    rank that should not exist."""
    errors = []
    for epoch in range(1, epochs + 1):
        for rank in range(np_):
            if (epoch, rank) not in seen:
                errors.append("no line for epoch %d rank %d" % (epoch, rank))
                continue
            size, samples, _, _ = seen[(epoch, rank)]
            if size != np_ or samples != train_samples // np_:
                errors.append("epoch %d rank %d: size=%d samples=%d, expected size=%d samples=%d"
                              % (epoch, rank, size, samples, np_, train_samples // np_))
    for epoch, rank in sorted(seen):
        if rank >= np_:
            errors.append("epoch %d: a line from rank %d in a job of %d workers" % (epoch, rank, np_))
    return errors


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--np", type=int, required=True)
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("--min-acc", type=float, required=True)
    p.add_argument("--train-samples", type=int, default=10000)
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    run = subprocess.run(command, capture_output=True, text=True, timeout=580)
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    if run.returncode != 0:
        sys.exit("the job failed with exit code %d" % run.returncode)
    seen = epoch_lines(run.stdout)
    errors = split_errors(seen, args.np, args.epochs, args.train_samples)
    final = [seen[(args.epochs, r)][2] for r in range(args.np) if (args.epochs, r) in seen]
    if final and min(final) < args.min_acc:
        errors.append("final accuracy %.4f is below %.2f" % (min(final), args.min_acc))
    if errors:
        sys.exit("\n".join(errors))
    times = [seen[(e, 0)][3] for e in range(1, args.epochs + 1)]
    print("check_run: ok: %d workers, accuracy %.4f, epoch times %s s"
          % (args.np, min(final), ", ".join("%.2f" % t for t in times)))


if __name__ == "__main__":
    main()
