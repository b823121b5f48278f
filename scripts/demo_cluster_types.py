#!/usr/bin/python3
"""DeepSpeed and Megatron-LM clusters used the way their own launchers use
machines, narrated one line per step (docs/cluster-types.md shows a run).

    scripts/demo_cluster_types.py [--build DIR] [--types deepspeed,megatron] [--ds-launcher pdsh|openmpi]

Starts edtd on a temporary data dir with containers on a bridge of their
own (each in its network namespace with an eth0, as on real hosts), a
simulated GPU inventory when the machine has no GPU, edt's PyTorch 2
environment (--venv, default /opt/edt/venv-torch2: torch 2, DeepSpeed and
Megatron-core from PyPI, which `make deps` installs) bound into every
container, and a volume `mnist` that holds the job's scripts.

DeepSpeed (cluster `tds`, the default image): /job/hostfile, pdsh over ssh
to every container, then DeepSpeed's own `deepspeed --hostfile
/job/hostfile` (its pdsh runner, or with --ds-launcher openmpi its OpenMPI
runner) training a small model with ZeRO stage 1 and then stage 2 on CPU
(gloo), on 2 containers and, after a scale, on 4, with variables from
~/.deepspeed_env on every node.

Megatron-LM (cluster `tmg`, tensor x pipeline parallel 1 x 2): the
environment its scripts read, a scale that would break the parallel sizes
refused, Megatron-LM's example script run unedited (edt's torchrun check
warns every host that it would train alone), then Megatron-core's
model-parallel groups formed across the containers by torchrun on every
container at once through `edtrun --per-host`, after a scale to 4.

Each step is checked (hosts, ranks, world sizes, losses and parameters,
groups); it removes everything it made and exits non-zero at the first
step that fails. ctest runs it as cluster_types_deepspeed_pdsh,
cluster_types_deepspeed_openmpi and cluster_types_megatron.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

import demo
from demo import Failed, check, say, show

ROOT = demo.ROOT
VENV = "/opt/edt/venv-torch2"
ZERO = "deepspeed_zero.py"
GROUPS = "megatron_groups.py"
UNEDITED = "megatron_unedited.sh"
# What ~/.deepspeed_env gives every node: DeepSpeed's CPU accelerator, and a
# variable the test looks for in each rank.
DS_ENV = "DS_ACCELERATOR=cpu\nEDT_DS_ENV=from-deepspeed_env"
# mpirun relays each rank's output in pieces: a line may end glued to the
# next rank's, so a value ends where the next line's start is.
ZERO_LINE = re.compile(r"zero stage=(\d) rank=(\d+) local_rank=(\S+) world_size=(\d+) host=(\S+) loss=(\S+) "
                       r"params=(\S+) agree=(\S+) reference=(\S+) env=(\S+?)(?=zero stage=|\s|$)")
# torchrun as Megatron-LM's example scripts call it, with what edtrun
# --per-host gives each container.
TORCHRUN = ("torchrun --nproc-per-node $GPUS_PER_NODE --nnodes $NNODES --node_rank $NODE_RANK "
            "--master_addr $MASTER_ADDR --master_port $MASTER_PORT")
MEGATRON_LINE = re.compile(r"megatron rank=(\d+) world_size=(\d+) host=(\S+) node_rank=(\S+) pp_rank=(\d+) "
                           r"dp_rank=(\d+) dp_sum=(\d+) version=(\S+)")


class ClusterTypes(demo.Demo):
    def __init__(self, args):
        super().__init__(args)
        self.addresses = args.addresses
        # edtd's flags beyond demo.Demo's: the bridge, and the PyTorch 2
        # environment bound into every container, its bin on PATH.
        self.network = ["--network", "bridge:" + args.bridge, "--venv", args.venv]
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
        for name in (ZERO, GROUPS, UNEDITED):
            shutil.copy(os.path.join(ROOT, "tests/cluster_types", name), self.mnist_volume)
        say("also in it: %s (ZeRO stages 1 and 2 on CPU), %s (Megatron-core's groups) and %s (the distributed "
            "lines of Megatron-LM's example script, unedited)" % (ZERO, GROUPS, UNEDITED))
        if "deepspeed" in self.args.types:
            self.deepspeed_ops()

    def deepspeed_ops(self):
        """DeepSpeed's shared-memory comm op, which its init_distributed
        builds on CPU: compiled once into the build tree (unless the venv
        has it prebuilt) and put in the volume, whose path .deepspeed_env
        gives every node as TORCH_EXTENSIONS_DIR."""
        python = os.path.join(self.args.venv, "bin/python3")
        probe = ("from deepspeed.git_version_info import installed_ops as i; print(i.get('deepspeed_shm_comm'))")
        env = dict(self.env, DS_ACCELERATOR="cpu", PATH=os.path.join(self.args.venv, "bin") + ":" + self.env["PATH"])
        if subprocess.run([python, "-c", probe], env=env, capture_output=True, text=True).stdout.strip() == "True":
            return
        # torch's loader runs ninja, which rebuilds only what is older than
        # its sources and headers (a venv made anew): quick when up to date.
        cache = os.path.join(self.build, "torch-extensions")
        say("DeepSpeed's shm comm op, built in %s unless up to date there (its first init_distributed on CPU "
            "would build it in every container)" % cache)
        start = time.time()
        run = subprocess.run([python, "-c", "from deepspeed.comm.torch import build_shm_op; build_shm_op()"],
                             env=dict(env, TORCH_EXTENSIONS_DIR=cache), capture_output=True, text=True)
        check(run.returncode == 0, "building DeepSpeed's shm comm op failed:\n%s%s" % (run.stdout, run.stderr))
        say("ready after %.0f s" % (time.time() - start))
        copy = os.path.join(self.mnist_volume, "torch-extensions")
        shutil.copytree(cache, copy)
        # A container's root is another user of this machine: torch takes a
        # lock file in the op's directory and ninja rewrites its log there.
        for top, dirs, files in os.walk(copy):
            for name in [top] + [os.path.join(top, f) for f in files]:
                os.chmod(name, 0o777 if os.path.isdir(name) else 0o666)

    # ---- DeepSpeed ----
    def deepspeed(self):
        cluster = self.create("tds", "deepspeed", 2)
        say("/job/hostfile, in DeepSpeed's form (slots = the container's GPUs):")
        hostfile = self.run_in("tds", "cat /job/hostfile")
        show(hostfile)
        check(hostfile == "tds-launcher slots=1\ntds-worker-0 slots=1\n", "/job/hostfile is %r" % hostfile)

        say("edt run tds -- pdsh -w ^/job/hostnames hostname   (PDSH_RCMD_TYPE=ssh is set)")
        out = self.run_in("tds", "pdsh -w ^/job/hostnames hostname")
        show(out)
        check(sorted(out.splitlines()) == ["tds-launcher: tds-launcher", "tds-worker-0: tds-worker-0"],
              "pdsh answered %r" % out)

        env = DS_ENV + ("\nTORCH_EXTENSIONS_DIR=/root/mnist/torch-extensions"
                        if os.path.isdir(os.path.join(self.mnist_volume, "torch-extensions")) else "")
        say("edt run tds -- sh -c 'printf \"%s\\n\" > ~/.deepspeed_env'" % env.replace("\n", "\\n"))
        self.run_in("tds", "printf '%s\\n' > ~/.deepspeed_env" % env)
        self.train_deepspeed(cluster, 2)
        say("edt cluster scale tds --containers 4 --wait")
        self.edt("cluster", "scale", "tds", "--containers", "4", "--wait")
        self.train_deepspeed(json.loads(self.edt("cluster", "get", "tds", "-o", "json").stdout), 4)
        self.edt("cluster", "delete", "tds", "--wait")
        say("edt cluster delete tds --wait")

    def check_mpi4py(self):
        """DeepSpeed's OpenMPI runner starts the script under mpirun, and
        deepspeed.init_distributed then asks mpi4py for the ranks."""
        python = os.path.join(self.args.venv, "bin/python3")
        run = subprocess.run([python, "-c", "import mpi4py"], capture_output=True, text=True)
        check(run.returncode == 0, "DeepSpeed's OpenMPI runner needs mpi4py in %s (deepspeed.init_distributed "
              "reads the ranks through it under mpirun); add it to python/requirements/torch2.in and run make "
              "deps:\n%s" % (self.args.venv, run.stderr))

    def train_deepspeed(self, cluster, np_):
        launcher = [] if self.args.ds_launcher == "pdsh" else ["--launcher", self.args.ds_launcher]
        command = " ".join(["deepspeed", *launcher, "--hostfile", "/job/hostfile", ZERO])
        say("edt run tds -- %s   (in ~/mnist; the real DeepSpeed, %s runner)" % (command, self.args.ds_launcher))
        start = time.time()
        out = self.run_in("tds", command)
        seconds = time.time() - start
        lines = ZERO_LINE.findall(out)
        shown = [line for line in out.splitlines() if ZERO_LINE.search(line) or "Using IP address of" in line
                 or re.search(r"\bcmd = ", line)]
        show("\n".join(line[:300] for line in shown))
        names = [c["name"] for c in sorted(cluster["status"]["containers"], key=lambda c: c["index"])]
        for stage in ("1", "2"):
            ranks = sorted((int(r), h, w, lr, env) for st, r, lr, w, h, *_, env in lines if st == stage)
            check([(r, h, w) for r, h, w, *_ in ranks] == [(r, names[r], str(np_)) for r in range(np_)],
                  "ZeRO stage %s on %d containers: ranks, hosts and world sizes were %s, not ranks 0..%d on %s"
                  "\n%s" % (stage, np_, [(r, h, w) for r, h, w, *_ in ranks], np_ - 1, names, out))
            check(all(lr == "0" and env == "from-deepspeed_env" for *_, lr, env in ranks),
                  "ZeRO stage %s: LOCAL_RANK and EDT_DS_ENV (from ~/.deepspeed_env) were %s"
                  % (stage, [(lr, env) for *_, lr, env in ranks]))
            mine = [l for l in lines if l[0] == stage]
            check(len({(loss, params) for *_, loss, params, _, _, _ in mine}) == 1 and
                  all(float(agree) == 0 for *_, agree, _, _ in mine),
                  "ZeRO stage %s: the ranks' losses and parameters differ: %s" % (stage, mine))
            worst = max(float(ref) for *_, ref, _ in mine)
            check(worst < 1e-4, "ZeRO stage %s: the parameters differ from training without DeepSpeed by %g"
                  % (stage, worst))
        if self.args.ds_launcher == "pdsh":
            check("Using IP address of %s for node" % cluster["status"]["containers"][0]["address"] in out,
                  "DeepSpeed's runner did not take the launcher's address (hostname -I)")
        self.figures["DeepSpeed_np%d" % np_] = seconds
        say("DeepSpeed (%s): ZeRO stages 1 and 2 on ranks 0..%d, one per container, the same loss and "
            "parameters on every rank, as trained without DeepSpeed; %.1f s" % (self.args.ds_launcher, np_ - 1,
                                                                                 seconds))

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
        self.unedited_megatron()
        # Megatron-core's import is most of a job's time: its groups are
        # formed once, after the scale (NNODES read from the new hostfile).
        say("edt cluster scale tmg --containers 4 --wait")
        self.edt("cluster", "scale", "tmg", "--containers", "4", "--wait")
        self.megatron_groups(4)

    def unedited_megatron(self):
        """Megatron-LM's example, unedited (--nnodes 1 --master_addr
        localhost): every host is told, on stderr, that it trains alone."""
        command = "edtrun --per-host --hostfile /etc/mpi/hostfile bash %s" % UNEDITED
        say("edt run tmg -- " + command + "   (Megatron-LM's example as it comes)")
        out = self.run_in("tmg", command + " 2>&1")
        warnings = sorted(line for line in out.splitlines() if "WARNING: torchrun on" in line)
        show("\n".join(warnings))
        check(len(warnings) == 2 and "(node 0 of 2) was given --nnodes 1 --master_addr localhost:" in warnings[0]
              and "tmg-worker-0 (node 1 of 2) was given --nnodes 1 --master_addr localhost --node_rank 0:"
              in warnings[1], "edt's torchrun check did not warn each host:\n%s" % out)

    def megatron_groups(self, np_):
        pp = 2
        command = "edtrun --per-host --hostfile /etc/mpi/hostfile sh -c '%s %s --pipeline-model-parallel-size %d'" % (
            TORCHRUN, GROUPS, pp)
        say("edt run tmg -- " + command + "   (in ~/mnist)")
        start = time.time()
        out = self.run_in("tmg", command)
        seconds = time.time() - start
        lines = sorted(MEGATRON_LINE.findall(out), key=lambda m: int(m[0]))
        show("\n".join(line for line in out.splitlines() if MEGATRON_LINE.search(line)))
        dp = np_ // pp
        # Megatron-core's default order puts pipeline stages outermost: each
        # stage a block of dp consecutive ranks, one data-parallel group.
        expected = [(str(r), str(np_), "tmg-launcher" if r == 0 else "tmg-worker-%d" % (r - 1), str(r), str(r // dp),
                     str(r % dp), str(sum(range(r // dp * dp, r // dp * dp + dp)))) for r in range(np_)]
        check([line[:7] for line in lines] == expected,
              "Megatron-core on %d containers: (rank, world size, host, node rank, pipeline rank, data-parallel "
              "rank, data-parallel sum) were\n%s\nnot\n%s" % (np_, [line[:7] for line in lines], expected))
        self.figures["Megatron-core_np%d" % np_] = seconds
        say("Megatron-core %s: ranks 0..%d on one node each, pipeline parallel %d x data parallel %d; %.1f s"
            % (lines[0][7], np_ - 1, pp, dp, seconds))

    def summary(self):
        print()
        print("What this run measured (this machine: %d cores, load average %.1f)"
              % (os.cpu_count(), os.getloadavg()[0]))
        for key, seconds in self.figures.items():
            what, np_ = key.rsplit("_np", 1)
            print("  %-14s job on %s containers  %.1f s" % (what, np_, seconds))

    def run(self):
        if "deepspeed" in self.args.types and self.args.ds_launcher == "openmpi":
            self.check_mpi4py()
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
    p.add_argument("--venv", default=VENV, help="the PyTorch 2 environment with DeepSpeed and Megatron-core "
                   "(default: %s, from make deps)" % VENV)
    p.add_argument("--ds-launcher", choices=["pdsh", "openmpi"], default="pdsh",
                   help="DeepSpeed's runner (deepspeed --launcher); default: pdsh, DeepSpeed's own default")
    p.add_argument("--types", default="deepspeed,megatron", type=lambda text: text.split(","),
                   help="the scenarios to run, of deepspeed and megatron (default: both)")
    p.add_argument("--job-timeout", type=int, default=240, help="seconds each training job may take")
    p.add_argument("--bridge", default="edtctypes0", help="the name of the bridge edtd makes for the containers")
    p.add_argument("--addresses", default="198.18.214.0/25", help="the containers' addresses, on the bridge")
    p.add_argument("--mnist-dir", help="MNIST's IDX files to train on (default: a synthetic MNIST-like set)")
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("demo_cluster_types: edtd makes sandboxes and a bridge and needs root; run it with sudo")
    for binary in ("src/cli/edt", "src/control/edtd", "src/launcher/edtrun"):
        if not os.access(os.path.join(args.build, binary), os.X_OK):
            sys.exit("demo_cluster_types: %s/%s is missing; build first" % (args.build, binary))
    for tool in ("deepspeed", "torchrun"):
        if not os.access(os.path.join(args.venv, "bin", tool), os.X_OK):
            sys.exit("demo_cluster_types: %s/bin/%s is missing; run make deps (python/requirements/torch2.txt)"
                     % (args.venv, tool))
    for tool in ("pdsh", "mpirun"):
        if not shutil.which(tool):
            sys.exit("demo_cluster_types: %s is not installed; run make deps (scripts/debian-packages.txt)" % tool)
    demo.run_scenario(ClusterTypes(args), "demo_cluster_types")


if __name__ == "__main__":
    main()
