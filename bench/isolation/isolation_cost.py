#!/usr/bin/env python3
"""What a container's isolation costs a training job (docs/security.md).

For each of edtd's modes, one after the other (--modes, default all three):
  off-loopback  --user-namespaces off --network loopback: container root is
                the host's root, containers share the host's network
  on-loopback   --user-namespaces on  --network loopback
  on-bridge     --user-namespaces on  --network bridge (edtd's defaults): each container in a
                network namespace of its own on edtd's bridge
starts edtd on a temporary data dir, creates a cluster of 2 containers (one
GPU-less host, so its traffic goes through the kernel: the containers have
IPC namespaces of their own and share no memory) and, --rounds times:
  - allreduce of 64 MiB float32 between the two containers: `edt-bench
    allreduce` under edtrun, its own iteration count (about 2 GB moved),
    time per op and bus bandwidth;
  - one MNIST epoch (the example, 2 workers, 5000 samples each, the
    synthetic set the build keeps), rank 0's epoch time.
Prints a table of medians (and ranges). Needs root; run it on a quiet
machine, under flock /tmp/edt-integration.lock.

  isolation_cost.py [--build build] [--rounds 3] [--modes off-loopback,on-loopback,on-bridge]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from demo import TRAIN, Failed, check_run  # noqa: E402
import harness.edtd  # noqa: E402  (tests/harness: importing the demo put tests/ on the path)

MODES = {
    "off-loopback": ["--user-namespaces", "off", "--network", "loopback", "--address-range", "127.81.0.0/24"],
    "on-loopback": ["--user-namespaces", "on", "--network", "loopback", "--address-range", "127.81.1.0/24"],
    "on-bridge": ["--user-namespaces", "on", "--network", "bridge:edtbench0", "--address-range", "198.18.81.0/24"],
}
# edt-bench's row (after edtrun's "[0]<stdout>:"): size, count, type, op, time (us), algbw, busbw (GB/s), wrong.
ROW = re.compile(r"\s67108864\s+\d+\s+\S+\s+\S+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", re.M)


class Edtd:
    """edtd in one mode on a temporary data dir, with a 2-container cluster."""

    def __init__(self, build, flags):
        self.build, self.flags = build, flags
        self.data_dir = tempfile.mkdtemp(prefix="edt-cost-")
        self.env = dict(os.environ)
        self.edtd = None

    def edt(self, *args, timeout=600):
        run = subprocess.run([os.path.join(self.build, "src/cli/edt"), *args], env=self.env, capture_output=True,
                             text=True, timeout=timeout)
        if run.returncode != 0:
            raise Failed("`edt %s` failed (exit code %d):\n%s%s" % (" ".join(args), run.returncode, run.stdout,
                                                                    run.stderr))
        return run.stdout

    def start(self):
        self.edtd = harness.edtd.Edtd(os.path.join(self.build, "src/control/edtd"), self.data_dir, self.flags,
                                      log_path=os.path.join(self.data_dir, "edtd.log"), log_mode="w", error=Failed,
                                      timeout=10)
        self.edtd.start()
        self.env.update(EDT_API=self.edtd.url, EDT_TOKEN=self.edtd.token)
        self.edt("volume", "create", "mnist")
        volume = next(v["host_path"] for v in json.loads(self.edt("volume", "list", "-o", "json"))
                      if v["name"] == "mnist")
        shutil.copytree(os.path.join(self.build, "mnist-data"), os.path.join(volume, "mnist-data"))
        shutil.copy(os.path.join(ROOT, "examples/mnist", TRAIN), volume)
        self.edt("cluster", "create", "cost", "--containers", "2", "--shm", "1Gi", "--mount", "mnist:", "--wait")

    def run(self, command):
        return self.edt("run", "cost", "--", "sh", "-c", "cd ~/mnist && " + command)

    def allreduce(self):
        """(microseconds per op, bus bandwidth in GB/s) of 64 MiB."""
        out = self.run("edtrun -np 2 --hostfile /etc/mpi/hostfile %s allreduce --min-bytes 64M --max-bytes 64M"
                       % os.path.join(self.build, "bench/edt-bench"))
        found = ROW.search(out)
        if not found:
            raise Failed("no 64 MiB row in edt-bench's output:\n" + out)
        return float(found.group(1)), float(found.group(3))

    def epoch(self):
        out = self.run("edtrun -np 2 --hostfile /etc/mpi/hostfile python3 %s --epochs 1" % TRAIN)
        seen = check_run.epoch_lines(out)
        errors = check_run.split_errors(seen, 2, 1)
        if errors:
            raise Failed("the MNIST epoch:\n" + "\n".join(errors))
        return seen[(1, 0)][3]

    def close(self):
        if self.edtd and self.edtd.proc and self.edtd.proc.poll() is None:
            subprocess.run([os.path.join(self.build, "src/cli/edt"), "cluster", "delete", "cost", "--wait"],
                           env=self.env, capture_output=True, timeout=120)
            harness.edtd.stop_process(self.edtd.proc)
        shutil.rmtree(self.data_dir, ignore_errors=True)


def spread(values, unit, digits):
    return "%.*f %s (%.*f-%.*f)" % (digits, statistics.median(values), unit, digits, min(values), digits,
                                    max(values))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--modes", default=",".join(MODES))
    args = p.parse_args()
    build = os.path.abspath(args.build)
    rows = []
    for mode in args.modes.split(","):
        if mode not in MODES:
            sys.exit("isolation_cost: unknown mode '%s'; choose from %s" % (mode, ", ".join(MODES)))
        edtd = Edtd(build, MODES[mode])
        try:
            edtd.start()
            measured = [(edtd.allreduce(), edtd.epoch()) for _ in range(args.rounds)]
        finally:
            edtd.close()
        us = [m[0][0] for m in measured]
        busbw = [m[0][1] for m in measured]
        epoch = [m[1] for m in measured]
        rows.append((mode, spread([u / 1000 for u in us], "ms", 1), spread(busbw, "GB/s", 2), spread(epoch, "s", 2)))
        print("%-13s allreduce 64 MiB %s, busbw %s; MNIST epoch (2 workers) %s" % rows[-1], flush=True)
    print("\n| mode | allreduce 64 MiB | bus bandwidth | MNIST epoch, 2 workers |\n|---|---|---|---|")
    for row in rows:
        print("| %s | %s | %s | %s |" % row)


if __name__ == "__main__":
    main()
