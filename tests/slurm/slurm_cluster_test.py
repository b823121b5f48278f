#!/usr/bin/env python3
"""A cluster of type slurm is a working Slurm cluster of its own
(docs/cluster-types.md, "Slurm"), checked with Slurm's own commands.

An edtd (simulated GPUs NVIDIA-P4=4) makes cluster `ts` of 2 containers,
1 GPU each, with a volume mounted at ~/work; then, in its launcher:
  - sinfo shows 2 idle nodes within seconds of Running, each declared with
    its GPU (scontrol show node: Gres=gpu:NVIDIA-P4:1);
  - srun -N 2 hostname prints both containers' hostnames;
  - srun --gres=gpu:1 env shows the GPU Slurm chose (CUDA_VISIBLE_DEVICES);
  - sbatch runs a job whose output lands in ~/work; squeue lists a job
    that sleeps, scancel ends it;
  - srun -N 2 --ntasks-per-node 1 python3 train_mnist.py trains with
    edt.torch without edtrun: each of the 2 workers 5000 samples;
  - the munge key is the cluster's own, mode 0400;
  - another slurm cluster's slurmctld serves its own launcher and refuses
    ts's root, who points a slurm.conf of its own at it;
  - scaled to 4: sinfo shows 4 idle nodes, srun -N 4 hostname all four;
    MNIST under srun -N 4 and under `salloc -N 4 edtrun -np 4` (hosts from
    the allocation): each of the 4 workers 2500 samples; the hostfile
    lists 4;
  - scaled to 2: the two highest nodes leave Slurm (sinfo shows 2), and a
    batch job that ran on all 4 is requeued (pending, Restarts=1);
  - the launcher killed (every process of its sandbox): edtd starts it
    again, and its slurmctld still knows that job (its state is the
    cluster's, not the container's), with both nodes;
  - deleted: no munged, slurmctld or slurmd of this edtd is left.

The same with --bridge: each container in its own network namespace on
edtd's bridge (edtd --network bridge).

  slurm_cluster_test.py --edtd build/src/control/edtd --build build [--bridge]
"""
import argparse
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time

from harness import users
from harness.edtd import ScratchEdtd


ADDRESSES = "127.83.0.0/24"  # this test's own block (grep --address-range for the others)
BRIDGE = "edtslurm0"  # --bridge: edtd's bridge, and its own block (its gateway is .1)
BRIDGE_ADDRESSES = "198.18.183.0/24"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAME = "ts"


def sandbox_processes(data_dir, container=None):
    """(pid, comm) of the processes of this edtd's sandboxes (of `container`
    alone, when given)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/comm" % pid) as f:
                comm = f.read().strip()
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if ("EDT_SANDBOX_HOME=" + data_dir).encode() in env and (
                container is None or ("EDT_SANDBOX_CONTAINER=" + container).encode() in env):
            found.append((int(pid), comm))
    return found


def our_daemons(data_dir):
    """The munged, slurmctld and slurmd processes of this edtd's sandboxes."""
    return ["%d %s" % (pid, comm) for pid, comm in sandbox_processes(data_dir)
            if comm in ("munged", "slurmctld", "slurmd", "slurmstepd")]


class SlurmTest(users.Tenants):
    def __init__(self, edtd):
        super().__init__(edtd)
        self.launcher = None

    def sh(self, command, timeout=users.TIMEOUT, cluster=NAME, address=None):
        """Runs `command` in `cluster`'s container at `address` (ts's launcher)."""
        return self.ssh(cluster, address or self.launcher, command, timeout=timeout)

    def wait_for(self, command, want, what, seconds=30, **where):
        """Runs `command` in the launcher (or as sh() is told by `where`)
        until want(stdout) holds; the seconds it took, or None (a failed
        check) when it never did."""
        start = time.time()
        last = None
        while time.time() - start < seconds:
            last = self.sh(command, **where)
            if last.returncode == 0 and want(last.stdout):
                return time.time() - start
            time.sleep(0.2)
        self.check(False, "%s: `%s` never gave what was wanted in %d s; last: %s %s"
                   % (what, command, seconds, last.stdout, last.stderr))
        return None

    def scale(self, containers):
        status, body = self.api("PATCH", "/clusters/" + NAME, {"containers": containers})
        if status != 200:
            raise RuntimeError("scale to %d: %s %s" % (containers, status, body))
        return self.wait_running(NAME, self.edtd.token, containers)


def other_controller_refuses(t, on_bridge):
    """Another slurm cluster's slurmctld serves its own cluster, and refuses
    ts's root, who knows its address and writes a slurm.conf naming it: the
    munge key is each cluster's own (and on a bridge the filter stops the
    connection first)."""
    status, body = t.api("POST", "/clusters", {"name": "tb", "framework": "slurm", "containers": 2})
    if status != 201:
        raise RuntimeError("create tb: %s %s" % (status, body))
    other = t.wait_running("tb", t.edtd.token, 2)
    address = next(c["address"] for c in other["status"]["containers"] if c["name"] == "tb-launcher")
    t.wait_for("sinfo -h -o '%D %t'", idle_nodes(2), "sinfo in tb's launcher", 20, cluster="tb", address=address)
    forged = t.sh("sed 's/^SlurmctldHost=.*/SlurmctldHost=tb-launcher(%s)/; s/^ClusterName=.*/ClusterName=tb/' "
                  "/etc/slurm/slurm.conf > /tmp/tb.conf && grep -c 'tb-launcher(%s)' /tmp/tb.conf && "
                  "SLURM_CONF=/tmp/tb.conf timeout 60 sinfo -h; echo rc=$?" % (address, address))
    print("ts's root at tb's slurmctld: " + " ".join((forged.stdout + forged.stderr).split()), flush=True)
    t.check(forged.stdout.startswith("1\n") and "rc=0" not in forged.stdout and "idle" not in forged.stdout,
            "ts's root asking tb's slurmctld with a slurm.conf of its own: %s %s" % (forged.stdout, forged.stderr))
    # Sharing the host's network, the request gets there and the key stops
    # it; on a bridge it gets nowhere.
    log = os.path.join(t.edtd.dir, "data", "containers", "tb-launcher", "disk", "var", "log", "slurm", "slurmctld.log")
    with open(log) as f:
        refused = "Munge decode failed: Invalid credential" in f.read()
    t.check("connect failure" in forged.stderr if on_bridge else refused,
            "why tb's slurmctld did not answer: %s (its log says munge refused it: %s)" % (forged.stderr, refused))
    t.api("DELETE", "/clusters/tb")
    deadline = time.time() + 60
    while time.time() < deadline and t.api("GET", "/clusters/tb")[0] != 404:
        time.sleep(0.2)


def idle_nodes(n):
    return lambda out: out.split() == ["%d" % n, "idle"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--edtd", required=True)
    p.add_argument("--build", required=True, help="the build dir (its mnist-data, if made, is used)")
    p.add_argument("--bridge", action="store_true", help="containers on edtd's bridge (--network bridge)")
    args = p.parse_args()
    if args.bridge:
        edtd = ScratchEdtd(args.edtd, addresses=BRIDGE_ADDRESSES, extra=["--network", "bridge:" + BRIDGE])
    else:
        edtd = ScratchEdtd(args.edtd, addresses=ADDRESSES)
    t = SlurmTest(edtd)
    data_dir = os.path.realpath(os.path.join(edtd.dir, "data"))
    try:
        status, volume = t.api("POST", "/volumes", {"name": "work"})
        if status != 201:
            raise RuntimeError("POST /volumes: %s %s" % (status, volume))
        work = volume["host_path"]
        shutil.copy(os.path.join(ROOT, "examples", "mnist", "train_mnist.py"), work)
        cached = os.path.join(args.build, "mnist-data")
        if os.path.isfile(os.path.join(cached, "t10k-labels-idx1-ubyte")):
            shutil.copytree(cached, os.path.join(work, "mnist-data"))
        else:  # the synthetic MNIST-like set, as make demo makes it
            subprocess.run([sys.executable, "-m", "edt.datasets.mnist_synthetic", "--out",
                            os.path.join(work, "mnist-data")], check=True,
                           env=dict(os.environ, PYTHONPATH=os.path.join(args.build, "python")))

        started = time.time()
        status, body = t.api("POST", "/clusters", {"name": NAME, "framework": "slurm", "containers": 2,
                                                   "gpu": {"model": "NVIDIA-P4", "count": 1},
                                                   "mounts": [{"volume": "work"}]})
        if status != 201:
            raise RuntimeError("create: %s %s" % (status, body))
        cluster = t.wait_running(NAME, edtd.token, 2)
        print("Running in %.2f s" % (time.time() - started), flush=True)
        containers = {c["name"]: c for c in cluster["status"]["containers"]}
        t.launcher = containers[NAME + "-launcher"]["address"]
        names2 = sorted(containers)

        took = t.wait_for("sinfo -h -o '%D %t'", idle_nodes(2), "2 idle nodes after create", 10)
        if took is not None:
            print("sinfo: 2 idle nodes %.2f s after Running" % took, flush=True)
        node = t.sh("scontrol show node %s-worker-0" % NAME)
        t.check("Gres=gpu:NVIDIA-P4:1" in node.stdout, "the worker's node declares its GPU: " + node.stdout)
        t.check("State=IDLE" in node.stdout, "the worker's node is idle: " + node.stdout)
        addr = containers[NAME + "-worker-0"]["address"]
        t.check("NodeAddr=%s " % addr in node.stdout, "the worker's node is reached at its address: " + node.stdout)

        run = t.sh("srun -N 2 hostname")
        t.check(run.returncode == 0 and sorted(run.stdout.split()) == names2,
                "srun -N 2 hostname: %s %s" % (run.stdout, run.stderr))
        gpu = t.sh("srun --gres=gpu:1 env")
        chosen = re.findall(r"^CUDA_VISIBLE_DEVICES=(\S+)$", gpu.stdout, re.M)
        t.check(gpu.returncode == 0 and len(chosen) == 1 and chosen[0].isdigit(),
                "srun --gres=gpu:1 env shows one GPU: %s %s" % (chosen, gpu.stderr))
        over = t.sh("srun --gres=gpu:2 true")
        t.check(over.returncode != 0 and "Requested node configuration is not available" in over.stderr,
                "srun --gres=gpu:2 (1 per node) is refused: %s" % over.stderr)

        batch = t.sh("cd ~/work && sbatch --parsable -o batch-%j.out --wrap 'echo from $(hostname) in $PWD'")
        job = batch.stdout.strip()
        t.check(batch.returncode == 0 and job.isdigit(), "sbatch: %s %s" % (batch.stdout, batch.stderr))
        out = os.path.join(work, "batch-%s.out" % job)
        deadline = time.time() + 30
        while time.time() < deadline and not (os.path.exists(out) and open(out).read().strip()):
            time.sleep(0.2)
        text = open(out).read() if os.path.exists(out) else ""
        t.check(re.match(r"from %s-(launcher|worker-0) in /root/work$" % NAME, text.strip()) is not None,
                "the batch job's output in ~/work: %r" % text)

        sleeper = t.sh("sbatch --parsable --wrap 'sleep 300'").stdout.strip()
        t.wait_for("squeue -h -j %s -o %%T" % sleeper, lambda o: o.strip() == "RUNNING", "squeue shows the job")
        t.sh("scancel %s" % sleeper)
        t.wait_for("squeue -h -j %s -o %%T 2>/dev/null; true" % sleeper, lambda o: o.strip() in ("", "CANCELLED"),
                   "scancel ends the job")

        key = os.path.join(data_dir, "clusters", NAME, "munge", "munge.key")
        mode = stat.S_IMODE(os.stat(key).st_mode)
        t.check(mode == 0o400 and os.path.getsize(key) == 1024, "the munge key: mode %o" % mode)
        seen = t.sh("ls -l /etc/munge/munge.key && munge -n | unmunge | grep STATUS")
        t.check("Success" in seen.stdout, "munge works in the launcher: %s %s" % (seen.stdout, seen.stderr))
        other_controller_refuses(t, args.bridge)

        train = t.sh("cd ~/work && srun -N 2 --ntasks-per-node 1 python3 train_mnist.py --epochs 1", timeout=400)
        lines = re.findall(r"epoch=1 rank=(\d) size=(\d) samples=(\d+)", train.stdout)
        t.check(train.returncode == 0 and sorted(lines) == [("0", "2", "5000"), ("1", "2", "5000")],
                "srun MNIST on 2 nodes, 5000 samples each: %s\n%s" % (lines, train.stdout[-2000:] + train.stderr[-2000:]))
        print("\n".join(l for l in train.stdout.splitlines() if l.startswith("epoch=")), flush=True)

        t.scale(4)
        took = t.wait_for("sinfo -h -o '%D %t'", idle_nodes(4), "4 idle nodes after the scale to 4", 15)
        if took is not None:
            print("sinfo: 4 idle nodes %.2f s after Running" % took, flush=True)
        run = t.sh("srun -N 4 hostname")
        names4 = names2 + ["%s-worker-1" % NAME, "%s-worker-2" % NAME]
        t.check(run.returncode == 0 and sorted(run.stdout.split()) == sorted(names4),
                "srun -N 4 hostname: %s %s" % (run.stdout, run.stderr))
        train = t.sh("cd ~/work && srun -N 4 --ntasks-per-node 1 python3 train_mnist.py --epochs 1", timeout=400)
        lines = re.findall(r"epoch=1 rank=(\d) size=(\d) samples=(\d+)", train.stdout)
        t.check(train.returncode == 0 and sorted(lines) == [(str(r), "4", "2500") for r in range(4)],
                "srun MNIST on 4 nodes, 2500 samples each: %s\n%s" % (lines, train.stdout[-2000:] + train.stderr[-2000:]))
        print("\n".join(l for l in train.stdout.splitlines() if l.startswith("epoch=")), flush=True)
        # edtrun in an allocation, without a hostfile: the allocation's nodes.
        train = t.sh("cd ~/work && salloc -N 4 edtrun -np 4 python3 train_mnist.py --epochs 1", timeout=400)
        lines = re.findall(r"epoch=1 rank=(\d) size=(\d) samples=(\d+)", train.stdout)
        t.check(train.returncode == 0 and sorted(lines) == [(str(r), "4", "2500") for r in range(4)],
                "salloc -N 4 edtrun -np 4 MNIST, 2500 samples each: %s\n%s"
                % (lines, train.stdout[-2000:] + train.stderr[-2000:]))
        hostfile = t.sh("cat /etc/mpi/hostfile").stdout
        t.check(len(hostfile.splitlines()) == 4, "the hostfile lists 4: " + hostfile)

        # A batch job on the nodes that leave is requeued.
        wide = t.sh("sbatch --parsable -N 4 --wrap 'sleep 300'").stdout.strip()
        t.wait_for("squeue -h -j %s -o %%T" % wide, lambda o: o.strip() == "RUNNING", "the 4-node job runs")
        t.scale(2)
        t.wait_for("sinfo -h -N -o %N | sort | tr '\\n' ' '", lambda o: o.split() == names2,
                   "the two highest nodes leave Slurm on the scale to 2", 20)
        t.wait_for("scontrol show job %s" % wide, lambda o: "Restarts=1" in o and "JobState=PENDING" in o,
                   "the job on the nodes that left is requeued", 20)

        # The launcher dies (every process of its sandbox killed) and edtd
        # starts it again: its slurmctld finds the pending job in its state.
        for pid, _ in sandbox_processes(data_dir, NAME + "-launcher"):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        def restarted():
            return any(e["type"] == "Restarted" for e in t.api("GET", "/clusters/%s/events" % NAME)[1]["events"])
        deadline = time.time() + 30
        while time.time() < deadline and not restarted():
            time.sleep(0.2)
        t.check(restarted(), "edtd starts the killed launcher again (a Restarted event)")
        t.wait_running(NAME, edtd.token, 2)
        # (Its state may change again: the launcher's node went down with it.)
        t.wait_for("scontrol show job %s" % wide, lambda o: "JobId=%s " % wide in o,
                   "the job outlives a restart of the launcher", 30)
        t.wait_for("sinfo -h -N -o %N | sort | tr '\\n' ' '", lambda o: o.split() == names2,
                   "both nodes in Slurm after the launcher's restart", 30)
        t.sh("scancel %s" % wide)

        status, _ = t.api("DELETE", "/clusters/" + NAME)
        t.check(status in (200, 202), "delete: %s" % status)
        deadline = time.time() + 60
        while time.time() < deadline and t.api("GET", "/clusters/" + NAME)[0] != 404:
            time.sleep(0.2)
        left = our_daemons(data_dir)
        t.check(not left, "Slurm or munge daemons left after the delete: %s" % left)
    finally:
        log = edtd.read_log()
        edtd.stop()
    for f in t.failures:
        print("FAIL: " + f, flush=True)
    print("%d checks, %d failed" % (t.checks, len(t.failures)))
    if t.failures:
        print(log)
    return 1 if t.failures else 0


if __name__ == "__main__":
    sys.exit(main())
