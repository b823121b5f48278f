#!/usr/bin/python3
"""The reference scenario, end to end, narrated one line per step.

    scripts/demo.py [--build DIR] [--framework tensorflow|torch] [--tf-step-divisor K] [--epochs N]
                    [--elastic-epochs MAX] [--backend slurm]

Starts edtd on a temporary data dir (with a simulated GPU inventory when the
machine has no GPU), creates the Horovod cluster `tthvd` with 2 containers,
runs Horovod's tensorflow2_mnist.py with `horovodrun -np N --hostfile
/etc/mpi/hostfile` on 2 and then on 4 containers (--framework torch:
trains MNIST with `edtrun ... train_mnist.py` instead), then runs the
PyTorch MNIST training in elastic mode: the cluster grows
from 2 to 4 containers while the job trains (the new workers forked from
edtd's warm interpreter), one worker is killed, and the cluster shrinks to 2
containers (the leaving worker drains at its commit). It checks every step (sample counts, sizes, kept processes, accuracy), prints
what it measured, and removes everything it made: the cluster, edtd and the
data dir. Exits non-zero at the first step that fails.

With --backend slurm (`make demo-slurm`) the same scenario runs with edtd
on the "login node" of a real Slurm cluster that tests/harness/slurm.py
builds on this machine (4 nodes, each a network namespace with its own
slurmd): each container is a Slurm job on a node, and the worker killed in
the elastic run is ended by scancel of its container's job.

`make demo` runs it after installing and building, `make demo-torch` with
--framework torch; ctest runs them as demo_scenario and demo_torch_scenario,
and as demo_slurm with --backend slurm --framework torch. README.md says
why the TensorFlow example runs through tests/horovod/run_tf2_example.py and
1/K of its steps.
"""

import argparse
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A program run from a checkout (`make demo`, or by hand), not a test: it
# finds the test harness and the example's checks itself.
sys.path[:0] = [os.path.join(ROOT, "tests"), os.path.join(ROOT, "examples/mnist")]
import check_run  # noqa: E402  (the example's own checks of its epoch lines)
import harness.edtd  # noqa: E402  (edtd started, waited for and stopped)
from harness import mounts  # noqa: E402
from harness.ports import free_port  # noqa: E402  (ports outside the ephemeral range)
from harness.slurm import SlurmHarness  # noqa: E402  (the Slurm cluster of --backend slurm)

PYTHON = "/usr/bin/python3"
# The demo's own bridge and block, apart from an installed edtd's (edt0,
# 198.19.0.0/16): each container in a network namespace of its own, edtd's default.
BRIDGE = "edtdemo0"
ADDRESSES = "198.18.88.0/24"
EPOCH = check_run.LINE
GENERATION = re.compile(r"generation rank=(\d+) size=(\d+) host=(\S+) pid=(\d+) epoch=(\d+) done=(\d+) at=([\d.]+)")
TRAIN = "train_mnist.py"
# The seed's script: Horovod's TensorFlow 2 example, pinned unmodified, and
# the runner that gives it MNIST offline and runs 1/K of its steps.
TF_EXAMPLE = os.path.join(ROOT, "tests/third_party/horovod/examples/tensorflow2/tensorflow2_mnist.py")
TF_RUNNER = os.path.join(ROOT, "tests/horovod/run_tf2_example.py")
TF_MNIST = os.environ.get("EDT_MNIST_DIR", "/opt/edt/data/mnist")  # make deps installs it
TF_MNIST_DATA = "mnist-real"  # its copy in the volume, for the TensorFlow example
TF_SHARE = re.compile(r"run_tf2_example: rank (\d+) on (\S+): the example's take\((\d+)\), run as take\((\d+)\)")
TF_STEP = re.compile(r"Step #(\d+)\s+Loss: ([\d.]+)")
STOP_FILE = "elastic.stop"  # in the mnist volume (~/mnist in the containers)


class Failed(Exception):
    pass


def say(text):
    print("==> " + text, flush=True)


def show(text):
    for line in text.rstrip("\n").splitlines():
        print("    " + line, flush=True)


class Job:
    """`edt run ...` in the background; its output lines with arrival times."""

    def __init__(self, argv, env):
        self.lines = []
        self.cond = threading.Condition()
        self.process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            with self.cond:
                self.lines.append((time.time(), line.rstrip("\n")))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def wait_for(self, what, predicate, timeout):
        """Waits until predicate(lines) is true; returns its value."""
        deadline = time.time() + timeout
        with self.cond:
            while True:
                value = predicate([text for _, text in self.lines])
                if value:
                    return value
                if self.process.poll() is not None and not self.cond.wait(0.2):
                    raise Failed("the job ended (exit code %s) before %s; its output:\n%s"
                                 % (self.process.returncode, what, "\n".join(t for _, t in self.lines)))
                if time.time() > deadline:
                    raise Failed("no %s within %d s; the job's output:\n%s"
                                 % (what, timeout, "\n".join(t for _, t in self.lines)))
                self.cond.wait(0.5)

    def output(self):
        with self.cond:
            return "\n".join(text for _, text in self.lines)

    def finish(self, timeout):
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise Failed("the job did not end within %d s:\n%s" % (timeout, self.output()))


class Demo:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build)
        self.edt_cli = os.path.join(self.build, "src/cli/edt")
        self.edtd_bin = os.path.join(self.build, "src/control/edtd")
        self.data_dir = tempfile.mkdtemp(prefix="edt-demo-")
        self.api = "http://127.0.0.1:%d" % free_port()
        self.addresses = ADDRESSES
        self.network = ["--network", "bridge:" + BRIDGE]  # edtd's --network flag
        self.edtd = None
        self.mnist_volume = None
        self.env = dict(os.environ)
        # Where edtd keeps the clusters' files: its data dir, or with Slurm
        # the shared directory (<data dir>/shared; edtd's own is <data dir>/edtd).
        self.files_dir = self.data_dir
        self.slurm = None
        if getattr(args, "backend", "local") == "slurm":  # demo_cluster_types.py has no --backend
            os.chmod(self.data_dir, 0o711)  # containers' roots bind from the shared directory in it
            self.files_dir = os.path.join(self.data_dir, "shared")
            os.makedirs(self.files_dir, mode=0o711)
            self.slurm = SlurmHarness(state_dir=os.path.join(self.data_dir, "slurm"), nodes=4, gpus=2,
                                              cpus=2, memory_mb=4096, log=lambda text: None)
            self.addresses = self.slurm.address_range_for_containers
            self.network = ["--backend", "slurm", "--slurm-partition", self.slurm.partition, "--slurm-shared-dir",
                            self.files_dir]
            self.env.update(self.slurm.env)
        self.figures = {}

    # ---- helpers ----
    def edt(self, *args, check=True, timeout=300):
        run = subprocess.run([self.edt_cli, *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and run.returncode != 0:
            raise Failed("`edt %s` failed (exit code %d):\n%s%s"
                         % (" ".join(args), run.returncode, run.stdout, run.stderr))
        return run

    def timed_edt(self, *args):
        start = time.time()
        self.edt(*args)
        return time.time() - start

    def in_launcher(self, command):
        """The argv of `edt run tthvd` for a command run in ~/mnist."""
        return [self.edt_cli, "run", "tthvd", "--", "sh", "-c", "cd ~/mnist && " + command]

    def hostfile(self):
        return self.edt("hostfile", "tthvd").stdout

    # ---- steps ----
    def start_slurm(self):
        say("a Slurm cluster on this machine (tests/harness/slurm.py): slurmctld and %d nodes, each a network "
            "namespace with its own hostname and slurmd, 2 CPUs, 4 GiB and 2 GPUs (GRES %s)"
            % (self.slurm.nodes, self.slurm.gpu_type))
        self.slurm.up()
        show(subprocess.run(["sinfo"], env=self.env, capture_output=True, text=True).stdout)

    def start_edtd(self):
        # Without a GPU, edtd is given a simulated inventory it hands out
        # like real devices (CUDA_VISIBLE_DEVICES, slots in the hostfile).
        # With Slurm the GPUs are the partition's GRES.
        simulated = not has_gpus() and not self.slurm
        flags = ["--gpus", "SIMULATED-GPU=4"] if simulated else []
        label = ("4 simulated GPUs (this machine has none; edtd hands them out like real ones)" if simulated
                 else "the partition's GPUs" if self.slurm else "the GPUs nvidia-smi lists")
        if self.slurm:
            self.start_slurm()
        say("starting edtd: data dir %s, API %s, containers in %s%s, %s"
            % (self.data_dir, self.api, self.addresses, " (" + " ".join(self.network) + ")" if self.network else "",
               label))
        edtd_data = os.path.join(self.data_dir, "edtd") if self.slurm else self.data_dir
        self.edtd = harness.edtd.Edtd(self.edtd_bin, edtd_data,
                                      ["--address-range", self.addresses, "--grace", "2s", *self.network, *flags],
                                      log_path=os.path.join(self.data_dir, "edtd.log"), log_mode="w",
                                      port=int(self.api.rsplit(":", 1)[1]), env=self.env, error=Failed, timeout=10)
        self.edtd.start()
        self.env.update(EDT_API=self.api, EDT_TOKEN=self.edtd.token)
        # One GPU per container needs 4 of one model for the scale to 4.
        models = collections.Counter(g["model"] for g in json.loads(self.edt("gpu", "list", "-o", "json").stdout))
        self.gpu_model = next((m for m, n in models.most_common(1) if n >= 4), None)
        if not self.gpu_model:
            say("fewer than 4 GPUs of one model: the containers get none")

    def edtd_log(self):
        with open(os.path.join(self.data_dir, "edtd.log")) as f:
            return f.read()

    def remove_stop_file(self):
        try:
            os.unlink(os.path.join(self.mnist_volume, STOP_FILE))
        except FileNotFoundError:
            pass

    def make_volume(self):
        self.edt("volume", "create", "mnist")
        volumes = json.loads(self.edt("volume", "list", "-o", "json").stdout)
        path = next(v["host_path"] for v in volumes if v["name"] == "mnist")
        data = os.path.join(path, "mnist-data")
        if self.args.mnist_dir:
            shutil.copytree(self.args.mnist_dir, data)
            what = "the MNIST files of " + self.args.mnist_dir
        else:
            # The synthetic MNIST-like set (10,000 training and 2,000 test
            # images); the build keeps a copy for the tests.
            cached = os.path.join(self.build, "mnist-data")
            if os.path.isfile(os.path.join(cached, "t10k-labels-idx1-ubyte")):
                shutil.copytree(cached, data)
            else:
                subprocess.run([PYTHON, "-m", "edt.datasets.mnist_synthetic", "--out", data], check=True,
                               env=dict(self.env, PYTHONPATH=os.path.join(self.build, "python")))
            what = "a synthetic MNIST-like set, 10,000 training and 2,000 test images (--mnist-dir for real MNIST)"
        shutil.copy(os.path.join(ROOT, "examples/mnist", TRAIN), path)
        scripts = TRAIN
        if getattr(self.args, "framework", "torch") == "tensorflow":  # demo_cluster_types.py has none
            for script in (TF_EXAMPLE, TF_RUNNER):
                shutil.copy(script, path)
            scripts = "%s, Horovod's %s with %s" % (TRAIN, os.path.basename(TF_EXAMPLE), os.path.basename(TF_RUNNER))
            if os.path.isfile(os.path.join(TF_MNIST, "t10k-labels-idx1-ubyte")):
                shutil.copytree(TF_MNIST, os.path.join(path, TF_MNIST_DATA))
                scripts += " (on the real MNIST of %s, in %s/)" % (TF_MNIST, TF_MNIST_DATA)
        self.mnist_volume = path
        say("volume mnist (mounted at ~/mnist in every container): %s and %s" % (scripts, what))

    def create_cluster(self):
        gpu = ["--gpu", self.gpu_model + ":1"] if self.gpu_model else []
        args = ["cluster", "create", "tthvd", "--framework", "horovod", "--containers", "2", *gpu, "--shm", "1Gi",
                "--mount", "mnist:", "--wait"]
        say("edt " + " ".join(args))
        seconds = self.timed_edt(*args)
        self.figures["create"] = seconds
        say("tthvd is Running: 2 containers in %.2f s; its hostfile (/etc/mpi/hostfile):" % seconds)
        text = self.hostfile()
        show(text)
        check(len(text.splitlines()) == 2, "the hostfile has %d lines, not 2" % len(text.splitlines()))

    def train_fixed(self, np_):
        command = "edtrun -np %d --hostfile /etc/mpi/hostfile python3 %s --epochs %d" % (np_, TRAIN, self.args.epochs)
        say("edt run tthvd -- " + command + "   (in ~/mnist)")
        run = subprocess.run(self.in_launcher(command), env=self.env, capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            raise Failed("the training on %d workers failed (exit code %d):\n%s%s"
                         % (np_, run.returncode, run.stdout, run.stderr))
        lines = sorted((int(m.group(1)), int(m.group(2)), m.group(0)) for m in EPOCH.finditer(run.stdout))
        show("\n".join(text for _, _, text in lines))
        seen = check_run.epoch_lines(run.stdout)
        errors = check_run.split_errors(seen, np_, self.args.epochs)
        check(not errors, "the training on %d workers:\n%s" % (np_, "\n".join(errors)))
        self.figures["epoch_np%d" % np_] = seen[(self.args.epochs, 0)][3]
        say("each of the %d workers trained %d samples per epoch" % (np_, 10000 // np_))

    def train_tensorflow(self, np_):
        """The seed's step: horovodrun -np N --hostfile /etc/mpi/hostfile
        python tensorflow2_mnist.py, through the runner (MNIST offline,
        1/K of the steps); checks every rank's share, 10000 // N steps."""
        divisor = self.args.tf_step_divisor
        real = os.path.isdir(os.path.join(self.mnist_volume, TF_MNIST_DATA))
        script = "%s%s%s %s" % (os.path.basename(TF_RUNNER), " --mnist-dir " + TF_MNIST_DATA if real else "",
                                " --step-divisor %d" % divisor if divisor > 1 else "", os.path.basename(TF_EXAMPLE))
        command = "horovodrun -np %d --hostfile /etc/mpi/hostfile python %s" % (np_, script)
        say("edt run tthvd -- " + command + "   (in ~/mnist)")
        start = time.time()
        run = subprocess.run(self.in_launcher(command), env=self.env, capture_output=True, text=True, timeout=3600)
        seconds = time.time() - start
        if run.returncode != 0:
            raise Failed("horovodrun -np %d failed (exit code %d):\n%s%s"
                         % (np_, run.returncode, run.stdout, run.stderr))
        shares = {int(m.group(1)): m for m in TF_SHARE.finditer(run.stdout)}
        steps = [m for m in TF_STEP.finditer(run.stdout)]
        show("\n".join([m.group(0) for _, m in sorted(shares.items())] + [m.group(0) for m in steps[:1] + steps[-1:]]))
        check(sorted(shares) == list(range(np_)), "not every rank of %d said what it trains:\n%s" % (np_, run.stdout))
        for m in shares.values():
            check(int(m.group(3)) == 10000 // np_, "rank %s was asked for %s steps, not %d"
                  % (m.group(1), m.group(3), 10000 // np_))
        runs = int(shares[0].group(4))
        check(steps and int(steps[-1].group(1)) == (runs - 1) // 10 * 10,
              "rank 0's last step line is not step %d of %d:\n%s" % ((runs - 1) // 10 * 10, runs, run.stdout))
        self.figures["tf_np%d" % np_] = (seconds, runs)
        say("each of the %d workers (%s) took %d steps of 128 images: the example's 10000 // %d = %d%s"
            % (np_, ", ".join(m.group(2) for _, m in sorted(shares.items())), runs, np_, 10000 // np_,
               ", 1/%d of them (--tf-step-divisor)" % divisor if divisor > 1 else ""))

    def scale(self, containers):
        say("edt cluster scale tthvd --containers %d --wait" % containers)
        seconds = self.timed_edt("cluster", "scale", "tthvd", "--containers", str(containers), "--wait")
        text = self.hostfile()
        check(len(text.splitlines()) == containers, "the hostfile has %d lines, not %d"
              % (len(text.splitlines()), containers))
        return seconds, text

    def elastic(self):
        # It trains until the scenario has grown, hurt and shrunk it: the
        # stop file ends it at the end of that epoch, on a fast machine or a slow one.
        self.remove_stop_file()
        command = ("edtrun -np 2 --min-np 2 --max-np 4 --hostfile /etc/mpi/hostfile python3 %s --elastic --epochs %d "
                   "--until %s" % (TRAIN, self.args.elastic_epochs, STOP_FILE))
        say("elastic: edt run tthvd -- " + command)
        job = Job(self.in_launcher(command), self.env)
        try:
            self._elastic_steps(job)
        finally:
            if job.process.poll() is None:
                job.process.send_signal(signal.SIGINT)
                job.finish(60)

    def _elastic_steps(self, job):
        first = job.wait_for("a generation of 2 workers", lambda lines: generation(lines, 2), 180)
        show_generation(first)
        # Grow the cluster under it, and kill a worker once it has grown: each
        # step waits for the state it needs, never for the machine to be slow.
        say("while it trains:")
        grow = time.time()
        seconds, _ = self.scale(4)
        # When edtd wrote the hostfile of 4, not when the scale command saw it.
        listed = os.stat(os.path.join(self.files_dir, "clusters/tthvd/mpi/hostfile")).st_mtime
        grown = job.wait_for("a generation of 4 workers", lambda lines: generation(lines, 4), 180)
        show_generation(grown)
        kept = {g["host"]: g["pid"] for g in first}
        for g in grown:
            if g["host"] in kept:
                check(g["pid"] == kept[g["host"]], "the worker on %s was restarted (pid %s, then %s)"
                      % (g["host"], kept[g["host"]], g["pid"]))
        check(set(kept) <= {g["host"] for g in grown}, "a first worker is missing from the generation of 4")
        at4 = min(g["at"] for g in grown)
        self.figures.update(grow_containers=seconds, grow_hostfile_to_4=at4 - listed, grow_total=at4 - grow)
        how = ("started on their nodes" if self.slurm else
               "forked from edtd's warm interpreter (torch already imported)")
        say("the job grew to 4 workers %.2f s after the hostfile listed 4: the 2 new workers were %s while the "
            "first 2 kept training (to epoch %d, %d samples done) in their same processes (%s)"
            % (at4 - listed, how, grown[0]["epoch"], grown[0]["done"],
               ", ".join("%s pid %d" % hp for hp in kept.items())))

        victim = "tthvd-worker-2"
        # Only what comes after the kill: the scale-up may have passed through
        # a generation of 3 (the hostfile listing 3 containers for a moment).
        before = len(job.lines)
        killed = self.kill_worker(victim)
        left = job.wait_for("a generation of 3 workers", lambda lines: generation(lines[before:], 3), 120)
        show_generation(left)
        show("\n".join(t for _, t in job.lines if "edtrun:" in t))
        check(victim not in {g["host"] for g in left}, "the killed worker's host is still in the job")
        at3 = min(g["at"] for g in left)
        self.figures["recover"] = at3 - killed
        say("the job goes on with 3 workers %.2f s after the kill, from its last commit (epoch %d, %d samples done)"
            % (at3 - killed, left[0]["epoch"], left[0]["done"]))
        self._shrink(job)

        say("done with it: touch ~/mnist/%s (the job ends at the end of this epoch)" % STOP_FILE)
        with open(os.path.join(self.mnist_volume, STOP_FILE), "w"):
            pass
        code = job.finish(600)
        lines = [text for _, text in job.lines]
        check(code == 0, "the elastic job ended with exit code %d:\n%s" % (code, "\n".join(lines)))
        epochs = [m for m in map(EPOCH.search, lines) if m]
        check(epochs, "no epoch line:\n" + "\n".join(lines))
        accuracy = float(epochs[-1].group(6))
        self.figures["accuracy"] = accuracy
        check(accuracy >= self.args.min_acc, "test accuracy %.4f is below %.2f" % (accuracy, self.args.min_acc))
        for m in (m for m in map(EPOCH.search, lines) if m and m.group(2) == "0"):
            show(m.group(0))
        count = epochs[-1].group(1)
        say("the elastic job finished: %s epoch%s, test accuracy %.4f" % (count, "" if count == "1" else "s", accuracy))

    def kill_worker(self, victim):
        """Ends the worker in container `victim`: SIGKILL, or with Slurm the
        end of the container's job (scancel); returns when it was asked."""
        if not self.slurm:
            say("edt exec %s -- pkill -9 -f %s   (SIGKILL one worker)" % (victim, TRAIN))
            killed = time.time()
            self.edt("exec", victim, "--", "pkill", "-9", "-f", "[t]rain_mnist")
            return killed
        cluster = json.loads(self.edt("cluster", "get", "tthvd", "-o", "json").stdout)
        job = next(c["slurm_job"] for c in cluster["status"]["containers"] if c["name"] == victim)
        say("scancel %d   (the Slurm job of %s on %s: the container and its worker end; edtd starts it again "
            "in a new job)" % (job, victim, next(c["node"] for c in cluster["status"]["containers"]
                                                 if c["name"] == victim)))
        killed = time.time()
        subprocess.run(["scancel", str(job)], env=self.env, check=True)
        return killed

    def _shrink(self, job):
        """Scales the cluster to 2 under the job: the leaving container's
        worker leaves at its next commit (the drain), with no failure."""
        say("while it trains: edt cluster scale tthvd --containers 2 (the highest containers drain first)")
        before = len(job.lines)
        events_before = len(self.edt("cluster", "events", "tthvd").stdout.splitlines())
        asked = time.time()
        self.scale(2)
        two = job.wait_for("a generation of 2 workers", lambda lines: generation(lines[before:], 2), 120)
        show_generation(two)
        after = [t for _, t in job.lines[before:] if "edtrun:" in t]
        show("\n".join(after))
        check(not any("failure" in t or "blacklisted" in t for t in after),
              "the scale-down made a failure generation:\n" + "\n".join(after))
        events = self.edt("cluster", "events", "tthvd").stdout.splitlines()[events_before:]
        show("\n".join(l for l in events if "drain" in l.lower()))
        self.figures["shrink"] = min(g["at"] for g in two) - asked
        say("the job goes on with 2 workers %.2f s after the scale was asked: the leaving worker left at its "
            "commit, then its container stopped (no failure, no rollback)" % self.figures["shrink"])

    def teardown(self, failed):
        if self.edtd is None:
            if self.slurm:
                self.slurm.down()
            shutil.rmtree(self.data_dir, ignore_errors=True)
            return
        if failed:
            print("demo: the end of edtd's log:\n" + "\n".join(self.edtd_log().splitlines()[-30:]), file=sys.stderr)
        if self.edtd.proc is not None and self.edtd.proc.poll() is None:
            clusters = self.edt("cluster", "list", "-o", "json", check=False)
            try:
                names = [c["name"] for c in json.loads(clusters.stdout)]
            except ValueError:
                names = []
            for name in names:
                say("edt cluster delete %s --wait" % name)
                self.edt("cluster", "delete", name, "--wait", check=False)
            if self.mnist_volume:
                say("edt volume delete mnist")
                self.edt("volume", "delete", "mnist", check=False)
            harness.edtd.stop_process(self.edtd.proc)
        if self.slurm:
            self.slurm.down()
        left = processes_mentioning(self.data_dir + "/")
        mounted = mounts.unmount_under(self.data_dir)
        shutil.rmtree(self.data_dir, ignore_errors=True)
        check(not left, "processes left behind:\n" + "\n".join(left))
        check(not mounted, "%d disks left mounted under the data dir" % mounted)
        say("edtd stopped, data dir removed: nothing left behind")

    def summary(self):
        f = self.figures
        print()
        print("What this run measured (this machine: %d cores)" % os.cpu_count())
        rows = [
            ("create tthvd, 2 containers -> Running", "%.2f s" % f["create"]),
            ("scale 2 -> 4 containers -> Running, hostfile of 4", "%.2f s" % f["scale"]),
        ]
        if "tf_np2" in f:
            rows += [("horovodrun -np %d tensorflow2_mnist.py, %d steps per worker" % (np_, f["tf_np%d" % np_][1]),
                      "%.2f s" % f["tf_np%d" % np_][0]) for np_ in (2, 4)]
        else:
            rows += [("MNIST epoch, 2 workers (5000 samples each)", "%.2f s" % f["epoch_np2"]),
                     ("MNIST epoch, 4 workers (2500 samples each)", "%.2f s" % f["epoch_np4"])]
        rows += [
            ("elastic: hostfile of 4 -> training on 4 workers", "%.2f s" % f["grow_hostfile_to_4"]),
            ("elastic: scale asked -> training on 4 workers", "%.2f s" % f["grow_total"]),
            ("elastic: %s -> training on 3" % ("scancel of a worker's container" if self.slurm else
                                                "SIGKILL of a worker"), "%.2f s" % f["recover"]),
            ("elastic: scale 4 -> 2 containers asked -> training on 2", "%.2f s" % f["shrink"]),
            ("elastic: survivors restarted", "0"),
            ("test accuracy after the elastic job", "%.4f" % f["accuracy"]),
        ]
        width = max(len(r[0]) for r in rows)
        for name, value in rows:
            print("  %-*s  %s" % (width, name, value))
        if os.cpu_count() < 4:
            print("  (all containers share this machine's %d cores; on 4 machines each worker has its own)"
                  % os.cpu_count())

    def run(self):
        self.start_edtd()
        self.make_volume()
        self.create_cluster()
        train = self.train_tensorflow if self.args.framework == "tensorflow" else self.train_fixed
        train(2)
        seconds, text = self.scale(4)
        self.figures["scale"] = seconds
        say("tthvd has 4 containers Running after %.2f s; the hostfile edtd rewrote:" % seconds)
        show(text)
        train(4)
        if "epoch_np2" in self.figures:
            say("epoch time: 2 workers %.2f s, 4 workers %.2f s"
                % (self.figures["epoch_np2"], self.figures["epoch_np4"]))
        self.scale(2)
        # The elastic part is PyTorch's in both (README.md, "The scenario `make demo` runs", says why).
        self.elastic()


def check(ok, message):
    if not ok:
        raise Failed(message)


def has_gpus():
    """Whether nvidia-smi lists a GPU."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "GPU 0:" in out


def generations(lines):
    """The job's generation lines as dicts, in order of arrival."""
    out = []
    for text in lines:
        m = GENERATION.search(text)
        if m:
            rank, size, host, pid, epoch, done, at = m.groups()
            out.append(dict(rank=int(rank), size=int(size), host=host, pid=int(pid), epoch=int(epoch),
                            done=int(done), at=float(at)))
    return out


def generation(lines, size):
    """The lines of the latest generation of `size` workers, once all are in."""
    of_size = [g for g in generations(lines) if g["size"] == size]
    latest = {}
    for g in of_size:
        latest[g["rank"]] = g
    return sorted(latest.values(), key=lambda g: g["rank"]) if len(latest) == size else None


def show_generation(gen):
    show("generation of %d: %s; epoch %d, %d samples done"
         % (len(gen), ", ".join("rank %d %s pid %d" % (g["rank"], g["host"], g["pid"]) for g in gen),
            gen[0]["epoch"], gen[0]["done"]))


def processes_mentioning(text):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and int(pid) != os.getpid():
            found.append("%s: %s" % (pid, cmdline))
    return found


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="the build directory (default: build)")
    p.add_argument("--framework", choices=["tensorflow", "torch"], default="tensorflow",
                   help="the fixed-size runs: tensorflow (the seed's horovodrun ... tensorflow2_mnist.py, `make demo`) "
                        "or torch (edtrun ... train_mnist.py, `make demo-torch`)")
    p.add_argument("--tf-step-divisor", type=int, default=50,
                   help="run 1/K of the 10000 // N steps tensorflow2_mnist.py asks each worker for (default 50: "
                        "100 steps on 2 workers, 50 on 4; 1 runs them all, about 50 minutes on 2 cores)")
    p.add_argument("--epochs", type=int, default=1, help="epochs of the torch fixed-size runs")
    p.add_argument("--elastic-epochs", type=int, default=100,
                   help="the most epochs of the elastic run; it ends at the end of the epoch in which the scenario "
                        "is done growing it, killing a worker and shrinking it")
    p.add_argument("--min-acc", type=float, default=0.9, help="the test accuracy the elastic run must reach")
    p.add_argument("--mnist-dir", help="MNIST's IDX files to train on (default: a synthetic MNIST-like set)")
    p.add_argument("--backend", choices=["local", "slurm"], default="local",
                   help="slurm: edtd places the containers on a Slurm cluster that tests/harness/slurm.py builds "
                        "on this machine")
    args = p.parse_args()
    if args.tf_step_divisor < 1:
        p.error("--tf-step-divisor must be 1 or more")
    if os.geteuid() != 0:
        sys.exit("demo: edtd makes sandboxes with bubblewrap and needs root; run it with sudo")
    if args.mnist_dir and not os.path.isfile(os.path.join(args.mnist_dir, "train-images-idx3-ubyte")):
        sys.exit("demo: --mnist-dir %s has no train-images-idx3-ubyte; give the directory of MNIST's four "
                 "(uncompressed) IDX files" % args.mnist_dir)
    for binary in ("src/cli/edt", "src/control/edtd", "src/launcher/edtrun"):
        if not os.access(os.path.join(args.build, binary), os.X_OK):
            sys.exit("demo: %s/%s is missing; build first (make build BUILD=%s)" % (args.build, binary, args.build))
    run_scenario(Demo(args), "demo")


def run_scenario(scenario, name):
    """Runs `scenario` (run(), then always teardown()); exits 1 if a step
    failed, else prints its summary."""
    start = time.time()
    # SIGTERM and SIGHUP end it like Ctrl-C: with the teardown.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.default_int_handler)
    ok = False
    try:
        scenario.run()
        ok = True
    except Failed as e:
        print("%s: FAILED: %s" % (name, e), file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        print("%s: interrupted" % name, file=sys.stderr)
    except BrokenPipeError:
        # The reader went away; clean up all the same, quietly.
        sys.stdout = sys.stderr = open(os.devnull, "w")
    finally:
        try:
            scenario.teardown(failed=not ok)
        except Failed as e:
            print("%s: FAILED: %s" % (name, e), file=sys.stderr)
            ok = False
    if not ok:
        sys.exit(1)
    scenario.summary()
    print("\n%s: all steps passed in %.0f s" % (name, time.time() - start))


if __name__ == "__main__":
    main()
