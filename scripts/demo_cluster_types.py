#!/usr/bin/python3
"""DeepSpeed and Megatron-LM clusters used the way their own launchers use
machines, narrated one line per step (docs/cluster-types.md shows a run).

    scripts/demo_cluster_types.py [--build DIR] [--bridge NAME]

Starts edtd on a temporary data dir with containers on a bridge of their
own (each in its network namespace with an eth0, as on real hosts), a
simulated GPU inventory when the machine has no GPU, and a volume `mnist`
holding the MNIST example and its data.

DeepSpeed (cluster `tds`, 2 containers, the default image): /job/hostfile,
pdsh over ssh to every container, `hostname -I` in the launcher giving the
address the others reach, DeepSpeed's OpenMPI runner's mpirun command, and
then a torch.distributed MNIST job started exactly as DeepSpeed's pdsh
runner starts one (tests/cluster_types/deepspeed_runner.py and
deepspeed_launch.py stand in for DeepSpeed, which Debian does not package),
with a variable from ~/.deepspeed_env on every node.

Megatron-LM (cluster `tmg`, tensor x pipeline parallel 1 x 2): the
environment its scripts read, a scale that would break the parallel sizes
refused, then torchrun on every container at once through
`edtrun --per-host`, on 2 and, after a scale, on 4 containers.

Each step is checked (hosts, ranks, world sizes, samples per worker, the
accuracy); it removes everything it made and exits non-zero at the first
step that fails. ctest runs it as cluster_types_scenario.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

import demo
from demo import Failed, check, say, show

ROOT = demo.ROOT
PYTHON = demo.PYTHON
DDP = "train_mnist_ddp.py"
# torchrun as Megatron-LM's example scripts call it, with what edtrun
# --per-host gives each container. Debian 12's torch 1.13 on Python 3.11
# cannot read torchrun's default --redirects 0, hence --redirects 1 --tee 1.
TORCHRUN = ("python3 -m torch.distributed.run --redirects 1 --tee 1 --nproc_per_node $GPUS_PER_NODE "
            "--nnodes $NNODES --node_rank $NODE_RANK --master_addr $MASTER_ADDR --master_port $MASTER_PORT")
PLACEMENT = re.compile(r"placement rank=(\d+) local_rank=(\d+) world_size=(\d+) host=(\S+) master=(\S+)")
DS_LAUNCH = re.compile(r"deepspeed_launch: node_rank=(\d+) host=(\S+) \(world_info's (\S+)\) ranks=\[([\d, ]*)\] "
                       r"world_size=(\d+) ?(.*)")


class ClusterTypes(demo.Demo):
    def __init__(self, args):
        super().__init__(args)
        self.addresses = args.addresses
        self.network = ["--network", "bridge:" + args.bridge]
        self.gpu_flag = []

    def run_in(self, cluster, command, check_exit=True):
        """`edt run CLUSTER -- sh -c COMMAND` in ~/mnist of the launcher; its output."""
        try:
            run = self.edt("run", cluster, "--", "sh", "-c", "cd ~/mnist && " + command, check=False,
                           timeout=self.args.job_timeout)
        except subprocess.TimeoutExpired as e:
            raise Failed("`edt run %s -- %s` did not end within %d s; its output:\n%s%s\nwhat ran then:\n%s"
                         % (cluster, command, self.args.job_timeout, e.stdout or "", e.stderr or "",
                            self.processes(cluster)))
        if check_exit and run.returncode != 0:
            raise Failed("`edt run %s -- %s` failed (exit code %d):\n%s%s"
                         % (cluster, command, run.returncode, run.stdout, run.stderr))
        return run.stdout

    def processes(self, cluster):
        """The Python processes in each container of `cluster` and the ends of torchrun's logs, for a
        job that hangs."""
        out = ""
        listing = json.loads(self.edt("cluster", "get", cluster, "-o", "json", check=False).stdout or "{}")
        for c in listing.get("status", {}).get("containers", []):
            run = self.edt("exec", c["name"], "--", "sh", "-c",
                           "ps -eo pid,etime,wchan:20,args | grep -e python -e edtrun | grep -v grep | cut -c1-160; "
                           "for f in $(find /tmp/torchelastic_* -type f 2>/dev/null); do echo $f; tail -3 $f; done",
                           check=False, timeout=30)
            out += "%s:\n%s%s" % (c["name"], run.stdout, run.stderr)
        return out

    def create(self, name, framework, containers, *extra):
        args = ["cluster", "create", name, "--framework", framework, "--containers", str(containers),
                *self.gpu_flag, "--mount", "mnist:", *extra, "--wait"]
        say("edt " + " ".join(args))
        seconds = self.timed_edt(*args)
        say("%s is Running: %d containers in %.2f s" % (name, containers, seconds))
        return json.loads(self.edt("cluster", "get", name, "-o", "json").stdout)

    def make_volume(self):
        super().make_volume()
        for path in ("examples/mnist/" + DDP, "tests/cluster_types/deepspeed_runner.py",
                     "tests/cluster_types/deepspeed_launch.py"):
            shutil.copy(os.path.join(ROOT, path), self.mnist_volume)
        say("also in it: %s (the same model with torch.distributed) and the DeepSpeed stand-ins" % DDP)

    # ---- DeepSpeed ----
    def deepspeed(self):
        cluster = self.create("tds", "deepspeed", 2)
        launcher = cluster["status"]["containers"][0]
        say("/job/hostfile, in DeepSpeed's form (slots = the container's GPUs):")
        hostfile = self.run_in("tds", "cat /job/hostfile")
        show(hostfile)
        check(hostfile == "tds-launcher slots=1\ntds-worker-0 slots=1\n", "/job/hostfile is %r" % hostfile)

        say("edt run tds -- pdsh -w ^/job/hostnames hostname   (PDSH_RCMD_TYPE=ssh is set)")
        out = self.run_in("tds", "pdsh -w ^/job/hostnames hostname")
        show(out)
        check(sorted(out.splitlines()) == ["tds-launcher: tds-launcher", "tds-worker-0: tds-worker-0"],
              "pdsh answered %r" % out)
        say("edt run tds -- pdsh -S -f 1024 -w tds-launcher,tds-worker-0 'echo $(hostname) rank %n'"
            "   (DeepSpeed's own form)")
        out = self.run_in("tds", "pdsh -S -f 1024 -w tds-launcher,tds-worker-0 'echo $(hostname) rank %n'")
        show(out)
        check(sorted(out.splitlines()) == ["tds-launcher: tds-launcher rank 0", "tds-worker-0: tds-worker-0 rank 1"],
              "pdsh answered %r" % out)

        say("edt run tds -- ssh tds-launcher hostname -I   (how DeepSpeed's runner finds the master's address)")
        out = self.run_in("tds", "ssh tds-launcher hostname -I")
        show(out)
        check(out.split()[:1] == [launcher["address"]],
              "the launcher's hostname -I says %r, not its address %s" % (out, launcher["address"]))

        mpirun = ("mpirun -n 2 -hostfile /job/hostfile --mca btl ^openib --mca btl_tcp_if_include eth0 "
                  "-x UCX_TLS=tcp hostname")
        say("edt run tds -- " + mpirun + "   (DeepSpeed's OpenMPI runner)")
        out = self.run_in("tds", mpirun)
        show(out)
        # OpenMPI's rsh launcher warns when its setpgid() on a child comes
        # after the child's exec (EACCES): a race inside mpirun, which goes on.
        ran = [line.strip() for line in out.splitlines()
               if line.strip() and not re.search(r"plm:rsh: Warning: setpgid\(.*\) failed", line)]
        check(sorted(ran) == ["tds-launcher", "tds-worker-0"], "mpirun printed %r" % out)

        say("edt run tds -- sh -c 'echo EDT_DEMO_FROM=deepspeed_env > ~/.deepspeed_env'")
        self.run_in("tds", "echo EDT_DEMO_FROM=deepspeed_env > ~/.deepspeed_env")
        command = "python3 deepspeed_runner.py --hostfile /job/hostfile %s --epochs %d" % (DDP, self.args.epochs)
        say("edt run tds -- " + command + "   (in ~/mnist)")
        out = self.run_in("tds", command)
        lines = [line for line in out.splitlines()
                 if "deepspeed_runner" in line or "deepspeed_launch" in line or PLACEMENT.search(line)
                 or demo.EPOCH.search(line)]
        show("\n".join(sorted(lines, key=lambda text: ("deepspeed_runner" not in text, text.split(": ", 1)[-1]))))
        check("master_addr=%s;" % launcher["address"] in out, "the runner did not take the launcher's address")
        launches = sorted(DS_LAUNCH.findall(out))
        check([(n, h, w, r, s) for n, h, w, r, s, _ in launches] ==
              [("0", "tds-launcher", "tds-launcher", "0", "2"), ("1", "tds-worker-0", "tds-worker-0", "1", "2")],
              "the nodes started %s" % launches)
        check(all(given == "EDT_DEMO_FROM=deepspeed_env" for *_, given in launches),
              ".deepspeed_env did not reach every node: %s" % launches)
        self.check_training(out, 2, "tds-launcher", "DeepSpeed")
        self.edt("cluster", "delete", "tds", "--wait")
        say("edt cluster delete tds --wait")

    def check_training(self, out, np_, master_host, what):
        placements = sorted((int(r), int(w), h) for r, _, w, h, _ in PLACEMENT.findall(out))
        check([(r, w) for r, w, _ in placements] == [(r, np_) for r in range(np_)],
              "%s: the ranks and world sizes were %s" % (what, placements))
        masters = {m for *_, m in PLACEMENT.findall(out)}
        check(len(masters) == 1, "%s: the workers were given different masters: %s" % (what, masters))
        seen = demo.check_run.epoch_lines(out)
        errors = demo.check_run.split_errors(seen, np_, self.args.epochs)
        check(not errors, "%s training on %d workers:\n%s" % (what, np_, "\n".join(errors)))
        acc = seen[(self.args.epochs, 0)][2]
        check(acc >= self.args.min_acc, "%s: test accuracy %.4f is below %.2f" % (what, acc, self.args.min_acc))
        self.figures["%s_np%d" % (what, np_)] = (seen[(self.args.epochs, 0)][3], acc)
        say("%s: %d workers, ranks 0..%d of world size %d, %d samples each, accuracy %.4f"
            % (what, np_, np_ - 1, np_, 10000 // np_, acc))

    # ---- Megatron-LM ----
    def megatron(self):
        self.create("tmg", "megatron", 2, "--pipeline-parallel", "2")
        say("what Megatron-LM's scripts read, in each container:")
        for container in ("tmg-launcher", "tmg-worker-0"):
            out = self.edt("exec", container, "--", "sh", "-c",
                           "echo $(hostname): MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT NODE_RANK=$NODE_RANK "
                           "GPUS_PER_NODE=$GPUS_PER_NODE CUDA_DEVICE_MAX_CONNECTIONS=$CUDA_DEVICE_MAX_CONNECTIONS").stdout
            show(out)
            rank = "0" if container.endswith("launcher") else "1"
            check("MASTER_ADDR=tmg-launcher MASTER_PORT=6000 NODE_RANK=%s GPUS_PER_NODE=1 "
                  "CUDA_DEVICE_MAX_CONNECTIONS=1" % rank in out, "%s's environment: %r" % (container, out))
        say("edt cluster scale tmg --containers 3   (3 GPUs cannot hold pipeline parallel 2)")
        refused = self.edt("cluster", "scale", "tmg", "--containers", "3", check=False)
        show(refused.stdout + refused.stderr)
        check(refused.returncode != 0 and "pipeline_parallel 2" in refused.stderr + refused.stdout,
              "the scale to 3 was not refused: %r" % (refused.stdout + refused.stderr))
        self.train_megatron(2)
        say("edt cluster scale tmg --containers 4 --wait")
        self.edt("cluster", "scale", "tmg", "--containers", "4", "--wait")
        self.train_megatron(4)

    def train_megatron(self, np_):
        command = "edtrun --per-host --hostfile /etc/mpi/hostfile sh -c '%s %s --epochs %d'" % (
            TORCHRUN, DDP, self.args.epochs)
        say("edt run tmg -- " + command + "   (in ~/mnist)")
        out = self.run_in("tmg", command)
        lines = [line for line in out.splitlines() if PLACEMENT.search(line) or demo.EPOCH.search(line)]
        show("\n".join(sorted(lines, key=lambda text: (demo.EPOCH.search(text) is not None, text))))
        self.check_training(out, np_, "tmg-launcher", "Megatron-LM")
        hosts = sorted((int(r), h) for r, _, _, h, _ in PLACEMENT.findall(out))
        expected = [(i, "tmg-launcher" if i == 0 else "tmg-worker-%d" % (i - 1)) for i in range(np_)]
        check(hosts == expected, "Megatron-LM: node ranks and hosts were %s, not %s" % (hosts, expected))

    def summary(self):
        print()
        print("What this run measured (this machine: %d cores)" % os.cpu_count())
        for key, (seconds, acc) in self.figures.items():
            if isinstance(seconds, float) and "_np" in key:
                what, np_ = key.rsplit("_np", 1)
                print("  %-12s MNIST epoch on %s workers  %.2f s, test accuracy %.4f" % (what, np_, seconds, acc))

    def run(self):
        self.start_edtd()
        self.gpu_flag = ["--gpu", self.gpu_model + ":1"] if self.gpu_model else []
        self.make_volume()
        if "deepspeed" in self.args.types:
            self.deepspeed()
        if "megatron" in self.args.types:
            self.megatron()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="the build directory (default: build)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--types", default="deepspeed,megatron", type=lambda text: text.split(","),
                   help="the scenarios to run, of deepspeed and megatron (default: both)")
    p.add_argument("--job-timeout", type=int, default=240, help="seconds each training job may take")
    p.add_argument("--min-acc", type=float, default=0.9, help="the test accuracy each training must reach")
    p.add_argument("--bridge", default="edtctypes0", help="the name of the bridge edtd makes for the containers")
    p.add_argument("--addresses", default="198.18.214.0/25", help="the containers' addresses, on the bridge")
    p.add_argument("--mnist-dir", help="MNIST's IDX files to train on (default: a synthetic MNIST-like set)")
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("demo_cluster_types: edtd makes sandboxes and a bridge and needs root; run it with sudo")
    for binary in ("src/cli/edt", "src/control/edtd", "src/launcher/edtrun"):
        if not os.access(os.path.join(args.build, binary), os.X_OK):
            sys.exit("demo_cluster_types: %s/%s is missing; build first" % (args.build, binary))
    for tool in ("pdsh", "mpirun"):
        if not shutil.which(tool):
            sys.exit("demo_cluster_types: %s is not installed; run make deps (scripts/debian-packages.txt)" % tool)
    demo.run_scenario(ClusterTypes(args), "demo_cluster_types")


if __name__ == "__main__":
    main()
