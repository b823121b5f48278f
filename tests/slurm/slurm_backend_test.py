#!/usr/bin/env python3
"""edtd --backend slurm on a real Slurm cluster (docs/slurm.md).

tests/harness/slurm.py builds 5 compute nodes (network namespaces with
their own hostname and slurmd, 2 CPUs, 4 GiB and 2 GRES GPUs NVIDIA-P4
each) and slurmctld. --nodes-style static (the default) sets Slurm up as
sites do: the nodes declared in slurm.conf, each slurmd a daemon;
--nodes-style dynamic runs dynamic nodes (slurmd -D -Z). --config site (the
default) runs Slurm's own cgroups (proctrack/cgroup, task/cgroup,
ConstrainCores, ConstrainRAMSpace, ConstrainDevices); --config plain none;
--config site-tmpfs adds job_container/tmpfs. edtd runs on the
"login node" (the host) with umask 077 (a site's root may have it; Slurm
gives the jobs the same) and makes its shared directory, and the directory
above it, under a 0755 directory of /tmp. Each container asks for 2 CPUs,
so Slurm puts each on a node of its own. Checked, with Slurm's own view
beside edt's:
  - bad input: an unknown partition stops edtd before it makes anything;
    a GPU model the partition does not have is refused, nothing submitted;
  - edtd counts the partition's GPUs (10 NVIDIA-P4);
  - a sandbox that fails to start (on every node, a directory it binds
    from that its root cannot enter): the cluster is Failed with
    bubblewrap's own reason, not the network step that found it gone;
  - create `tthvd` (horovod, 2 containers, 1 GPU each, a volume): Running;
    each container a Slurm job on a different node (the job's helper runs
    in that node's network namespace), its node and job in `edt cluster get`
    (table and -o json), the GPU Slurm gave as CUDA's 0 (the node's index
    in EDT_HOST_GPUS and the device file's name), the container's init in
    its job's cgroups (--config site), the hostfile of
    2, mpirun across the nodes, edt ssh from edtd's host, Jupyter in the
    launcher through edtd's proxy;
  - scale to 4: 4 nodes; edtrun -np 4 trains MNIST, 2500 samples each;
  - another cluster's container cannot connect to tthvd's (each container's
    own filter lets in its cluster and edtd's host only); edtd's host can;
    tthvd's launcher cannot open a connection to a server on edtd's host;
  - scale to 6: one new container runs on the fifth node, the other stays
    Pending with Slurm's reason (Resources) while the cluster runs on 5;
    scale to 4: both go, and their jobs with them;
  - scancel of worker-3's job: it is restarted in a new job, the event says
    why;
  - a node that crashes (its slurmd and every process of its jobs killed):
    the container there is replaced on the free node once Slurm says
    NODE_FAIL;
  - a node whose slurmd alone is killed: Slurm ends its job NODE_FAIL while
    the container lives on; its helper ends it (so the address is free for
    its replacement on another node);
  - edtd killed (SIGKILL) right after a scale to 5 is asked, and started
    again: the scale completes, no job is left twice;
  - delete: nothing of this edtd is left in squeue;
  - an image imported into edtd's store lands in the shared directory, and
    a cluster of it runs in its WorkingDir with its files.
No node sees edtd's data dir (the harness covers it on the nodes), as at a
site, where it is on the login node's own disk.

  slurm_backend_test.py --edtd build/src/control/edtd --edt build/src/cli/edt --build build [--nodes-style dynamic]
                        [--config site|site-tmpfs|plain]
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import check_run  # the example's own checks of its epoch lines (examples/mnist, on PYTHONPATH)
import harness.edtd
from harness.oci_layout import Layout, add_file, add_trainer, tiny_root
from harness.slurm import CONFIGS, SlurmHarness

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

NAME = "tthvd"
TRAIN = "train_mnist.py"


class Failed(Exception):
    pass


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        raise Failed(what)


class Edtd(harness.edtd.Edtd):
    """edtd --backend slurm on the login node, with the edt CLI."""

    def __init__(self, args, h, shared, data, preexec_fn=lambda: os.umask(0o077)):
        self.args, self.h, self.shared = args, h, shared
        super().__init__(args.edtd, data, self.backend_flags(), ssh_port=False, env=dict(h.env), error=Failed,
                         timeout=30, preexec_fn=preexec_fn)
        self.api = self.url

    def backend_flags(self, partition="edt"):
        return ["--backend", "slurm", "--slurm-partition", partition, "--slurm-shared-dir", self.shared,
                "--address-range", self.h.address_range_for_containers, "--grace", "2s"]

    def argv_for(self, partition):
        """edtd's argv with another partition."""
        return [self.binary, "--data-dir", self.data, "--listen", self.api[7:], *self.backend_flags(partition)]

    def start(self):
        super().start()
        self.env.update(EDT_API=self.api, EDT_TOKEN=self.token)

    def log(self):
        return harness.edtd.read_tail(self.log_path)

    def edt(self, *argv, check_rc=True, timeout=300):
        run = subprocess.run([self.args.edt, *argv], env=self.env, capture_output=True, text=True, timeout=timeout)
        if check_rc and run.returncode != 0:
            raise Failed("`edt %s` failed (%d):\n%s%s" % (" ".join(argv), run.returncode, run.stdout, run.stderr))
        return run

    def cluster(self, name=NAME):
        return json.loads(self.edt("cluster", "get", name, "-o", "json").stdout)

    def containers(self, name=NAME):
        return self.cluster(name)["status"]["containers"]

    def run_in(self, command, timeout=600, name=NAME):
        """`edt run` in the launcher (through srun --overlap into its job)."""
        return self.edt("run", name, "--", "sh", "-c", command, timeout=timeout)


def get(url, token):
    request = urllib.request.Request(url, headers={"Authorization": "Bearer " + token})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def our_jobs(h):
    """{job id: (name, state, node)} of every job in squeue named edt-*."""
    out = subprocess.run(["squeue", "-h", "-o", "%i|%j|%T|%N"], env=h.env, capture_output=True, text=True,
                         check=True).stdout
    jobs = {}
    for line in out.splitlines():
        job, name, state, node = line.split("|")
        if name.startswith("edt-"):
            jobs[int(job)] = (name, state, node)
    return jobs


def wait(what, test, seconds):
    start = time.time()
    last = None
    while time.time() - start < seconds:
        last = test()
        if last:
            return time.time() - start
        time.sleep(0.2)
    raise Failed("%s: not within %d s" % (what, seconds))


def sandbox_pid(shared, job):
    """The pid of job `job`'s sandbox, as its node wrote it."""
    with open(os.path.join(shared, "slurm", "jobs", str(job))) as f:
        return int(f.read().split()[0])


def helper_pid(shared, job):
    """The pid of job `job`'s `edtd slurm-node` process (above its sandbox)."""
    pid = sandbox_pid(shared, job)
    while pid > 1:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            if b"slurm-node" in f.read():
                return pid
        with open("/proc/%d/stat" % pid) as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    raise Failed("no slurm-node process above the sandbox of job %d" % job)


def helper_netns(shared, job):
    """The network namespace inode of job `job`'s `edtd slurm-node` process."""
    return os.stat("/proc/%d/ns/net" % helper_pid(shared, job)).st_ino


def check_placement(e, h, count):
    containers = e.containers()
    check(len(containers) == count and all(c["phase"] == "Running" for c in containers),
          "%d containers Running: %s" % (count, [(c["name"], c["phase"], c["message"]) for c in containers]))
    jobs = our_jobs(h)
    nodes = set()
    for c in containers:
        job = c.get("slurm_job")
        check(job in jobs and jobs[job][1] == "RUNNING" and jobs[job][2] == c["node"],
              "%s is Slurm job %s on %s, as squeue says (%s)" % (c["name"], job, c["node"], jobs.get(job)))
        check(helper_netns(e.shared, job) == os.stat("/run/netns/" + h.netns(c["node"])).st_ino,
              "%s's job runs in the network namespace of node %s" % (c["name"], c["node"]))
        nodes.add(c["node"])
    check(len(nodes) == count, "the %d containers are on %d different nodes" % (count, len(nodes)))
    return containers


def bad_input(e, h):
    run = subprocess.run(e.argv_for("nope"), env=h.env, capture_output=True, text=True, timeout=60)
    check(run.returncode != 0 and "no such partition" in run.stderr + run.stdout,
          "an unknown partition stops edtd: " + (run.stderr + run.stdout).strip().splitlines()[-1])
    check(not os.path.exists(e.data), "and it made no data dir")
    e.start()
    gpus = json.loads(e.edt("gpu", "list", "-o", "json").stdout)
    check(len(gpus) == 10 and {g["model"] for g in gpus} == {"NVIDIA-P4"},
          "edtd counts the partition's GPUs: %d %s" % (len(gpus), sorted({g["model"] for g in gpus})))
    run = e.edt("cluster", "create", "bad", "--containers", "2", "--gpu", "NVIDIA-T4:1", check_rc=False)
    check(run.returncode != 0 and "NVIDIA-T4" in run.stderr, "a GPU model Slurm lacks is refused: "
          + " / ".join(line.strip() for line in run.stderr.splitlines()))
    check(not our_jobs(h), "and nothing was submitted")


def unenterable_etc_links(h, shared, on):
    """On every node (in its slurmd's mount namespace, which its jobs share),
    a root-owned 0700 directory bound over <shared>/etc-links, or that
    undone: the sandbox's root cannot enter it to bind the container's /etc."""
    hidden = os.path.join(os.path.dirname(shared), "unenterable")
    os.makedirs(hidden, mode=0o700, exist_ok=True)
    target = os.path.join(shared, "etc-links")
    os.makedirs(target, exist_ok=True)
    for node in h.node_names:
        mount = ["mount", "--bind", hidden, target] if on else ["umount", target]
        subprocess.run(["nsenter", "-m", "-t", str(h.daemon_pid(node)), "--"] + mount, check=True)


def sandbox_failure(e, h):
    """A sandbox that dies as it starts: the cluster's message says why (bwrap's words)."""
    unenterable_etc_links(h, e.shared, True)
    try:
        run = e.edt("cluster", "create", "broken", "--containers", "2", "--shm", "64Mi", "--wait", check_rc=False,
                    timeout=120)
    finally:
        unenterable_etc_links(h, e.shared, False)
    message = json.loads(e.edt("cluster", "get", "broken", "-o", "json").stdout)["status"].get("message", "")
    check(run.returncode != 0 and "bwrap: Can't find source path" in message and "Permission denied" in message
          and "RTNETLINK" not in message and "its interface" not in message,
          "a sandbox that fails to start: the cluster's message has bubblewrap's reason: " + message)
    e.edt("cluster", "delete", "broken", "--wait")
    wait("cluster broken's jobs gone", lambda: not our_jobs(h), 30)


def make_volume(e):
    e.edt("volume", "create", "mnist")
    volumes = json.loads(e.edt("volume", "list", "-o", "json").stdout)
    path = next(v["host_path"] for v in volumes if v["name"] == "mnist")
    check(path.startswith(e.shared + "/"), "the volume is in the shared directory: " + path)
    cached = os.path.join(e.args.build, "mnist-data")
    if os.path.isfile(os.path.join(cached, "t10k-labels-idx1-ubyte")):
        shutil.copytree(cached, os.path.join(path, "mnist-data"))
    else:
        subprocess.run([sys.executable, "-m", "edt.datasets.mnist_synthetic", "--out",
                        os.path.join(path, "mnist-data")], check=True,
                       env=dict(os.environ, PYTHONPATH=os.path.join(e.args.build, "python")))
    shutil.copy(os.path.join(ROOT, "examples", "mnist", TRAIN), path)
    # The containers' root writes its checkpoints there.
    for root, dirs, files in os.walk(path):
        os.chmod(root, 0o777)


def create_and_train(e, h, figures):
    started = time.time()
    e.edt("cluster", "create", NAME, "--framework", "horovod", "--containers", "2", "--gpu", "NVIDIA-P4:1",
          "--cpus", "2", "--shm", "256Mi", "--mount", "mnist:", "--wait")
    figures["create 2 -> Running"] = time.time() - started
    check_placement(e, h, 2)
    table = e.edt("cluster", "get", NAME).stdout
    check("NODE" in table and "SLURM JOB" in table, "edt cluster get shows each container's node and job")
    out = e.run_in("echo CUDA=$CUDA_VISIBLE_DEVICES HOST=$EDT_HOST_GPUS $(ls /dev/nvidia*); cat /etc/mpi/hostfile; "
                   "mpirun --allow-run-as-root -np 2 --hostfile /etc/mpi/hostfile hostname").stdout
    # The GPU Slurm gave the job (SLURM_JOB_GPUS: the node's index) is CUDA's 0 in the container, as
    # under ConstrainDevices, whatever that index is.
    gpu = re.match(r"CUDA=0 HOST=(\d+) /dev/nvidia(\d+)$", out.splitlines()[0])
    check(gpu is not None and gpu.group(1) == gpu.group(2),
          "the GPU Slurm gave is CUDA's 0, the node's index in EDT_HOST_GPUS and /dev/nvidia<i>: "
          + out.splitlines()[0])
    if e.h.config != "plain":
        # No cgroup of edtd's on the nodes: the container's init stays in its job's (proctrack/cgroup
        # tracks it, ConstrainDevices holds for it).
        init = e.run_in("cat /proc/1/cgroup").stdout
        job = next(c["slurm_job"] for c in e.containers() if c["name"] == NAME + "-launcher")
        check(re.search(r"/job_%s/" % job, init) is not None,
              "the container's init is in its Slurm job's cgroups: " + " ".join(init.split()))
    check(sorted(line for line in out.splitlines() if line.startswith(NAME + "-") and " " not in line)
          == [NAME + "-launcher", NAME + "-worker-0"], "mpirun runs on both containers:\n" + out)
    link = e.edt("jupyter", NAME).stdout.strip()
    status, body = get(e.api + "/c/%s/jupyter/api/status" % NAME, e.env["EDT_TOKEN"])
    check(status == 200 and "started" in body,
          "Jupyter in the launcher (started through srun, proxied by edtd): %s -> %d" % (link, status))
    out = e.edt("ssh", NAME, NAME + "-worker-0", "hostname").stdout.strip()
    check(out == NAME + "-worker-0", "edt ssh from edtd's host reaches a container on its node: " + out)
    started = time.time()
    e.edt("cluster", "scale", NAME, "--containers", "4", "--wait")
    figures["scale 2 -> 4"] = time.time() - started
    check_placement(e, h, 4)
    out = e.run_in("cd ~/mnist && edtrun -np 4 --hostfile /etc/mpi/hostfile python3 %s --epochs 1" % TRAIN).stdout
    errors = check_run.split_errors(check_run.epoch_lines(out), 4, 1)
    check(not errors, "edtrun -np 4 trains MNIST across 4 nodes, 2500 samples each%s"
          % ("" if not errors else ":\n" + "\n".join(errors) + "\n" + out))


def connects(address, port=2222):
    try:
        socket.create_connection((address, port), timeout=3).close()
        return True
    except OSError:
        return False


def probe(address, port):
    """A shell command that prints whether it could connect to address:port."""
    return ("python3 -c \"import socket; s = socket.socket(); s.settimeout(3); "
            "print('reached' if s.connect_ex(('%s', %d)) == 0 else 'refused')\"" % (address, port))


def tenants_apart(e, h):
    """Another cluster's containers cannot connect to tthvd's; edtd's host
    can. No container opens a connection to edtd's host."""
    e.edt("cluster", "create", "other", "--containers", "2", "--shm", "64Mi", "--wait")
    target = next(c for c in e.containers() if c["name"] == NAME + "-worker-0")["address"]
    own = e.edt("run", NAME, "--", "sh", "-c", probe(target, 2222)).stdout.strip()
    other = e.edt("run", "other", "--", "sh", "-c", probe(target, 2222)).stdout.strip()
    check(own == "reached" and other == "refused",
          "tthvd-worker-0's sshd: reached from tthvd's launcher (%s), not from cluster other's (%s)" % (own, other))
    check(connects(target), "and reached from edtd's host (the login address)")
    with socket.socket() as listener:
        listener.bind((h.login_address, 0))
        listener.listen()
        port = listener.getsockname()[1]
        out = e.edt("run", NAME, "--", "sh", "-c", probe(h.login_address, port)).stdout.strip()
    check(out == "refused", "a server on edtd's host (%s:%d) from tthvd's launcher: %s" % (h.login_address, port, out))
    e.edt("cluster", "delete", "other", "--wait")
    wait("cluster other's jobs gone", lambda: len(our_jobs(h)) == 4, 30)


def pending_scale(e, h):
    e.edt("cluster", "scale", NAME, "--containers", "6")

    new = (NAME + "-worker-3", NAME + "-worker-4")

    def one_pending():
        cs = [c for c in e.containers() if c["name"] in new]
        phases = sorted(c["phase"] for c in cs)
        return phases == ["Pending", "Running"] and all("Resources" in c["message"] for c in cs
                                                       if c["phase"] == "Pending")
    try:
        wait("one new container Running, the other Pending with Slurm's reason", one_pending, 60)
    finally:
        print("      " + "; ".join("%s %s %s" % (c["name"], c["phase"], c["message"]) for c in e.containers()))
    pending = next(c for c in e.containers() if c["phase"] == "Pending")
    check(True, "%s Pending: %s" % (pending["name"], pending["message"]))
    hostfile = e.edt("hostfile", NAME).stdout
    check(len(hostfile.splitlines()) == 5, "the hostfile lists the 5 Running containers")
    e.edt("cluster", "scale", NAME, "--containers", "4", "--wait")
    wait("4 jobs left", lambda: len(our_jobs(h)) == 4 and all(s == "RUNNING" for _, s, _ in our_jobs(h).values()), 30)
    check(True, "scaled back to 4: worker-3 and worker-4 left, with their jobs")


def survive_scancel(e, h):
    before = {c["name"]: c["slurm_job"] for c in e.containers()}
    victim = NAME + "-worker-2"
    subprocess.run(["scancel", str(before[victim])], env=h.env, check=True)
    wait("worker-2 back in a new job",
         lambda: all(c["phase"] == "Running" for c in e.containers())
         and next(c for c in e.containers() if c["name"] == victim)["slurm_job"] != before[victim], 60)
    events = e.edt("cluster", "events", NAME).stdout
    check("CANCELLED" in events and "started again" in events,
          "scancel of %s's job: restarted, and the event says why:\n%s"
          % (victim, [line for line in events.splitlines() if "CANCELLED" in line]))
    check_placement(e, h, 4)


def survive_node_crash(e, h):
    victim = next(c for c in e.containers() if c["name"] == NAME + "-worker-1")
    killed = h.crash_node(victim["node"])
    started = time.time()

    def replaced():
        c = next(c for c in e.containers() if c["name"] == victim["name"])
        return c["phase"] == "Running" and c["slurm_job"] != victim["slurm_job"]
    wait("worker-1 replaced", replaced, 120)
    check(True, "node %s crashed (%d processes killed): worker-1 replaced in %.1f s"
          % (victim["node"], killed, time.time() - started))
    check_placement(e, h, 4)
    h.start_slurmd(victim["node"])
    h.wait_nodes_state("IDLE", [victim["node"]], 60)


def survive_slurmd_kill(e, h):
    """A node whose slurmd alone is killed: Slurm ends its jobs NODE_FAIL while
    their processes live on; the container's helper ends it."""
    victim = next(c for c in e.containers() if c["name"] == NAME + "-worker-0")
    old = sandbox_pid(e.shared, victim["slurm_job"])
    h.kill_slurmd(victim["node"])
    started = time.time()

    def replaced():
        c = next(c for c in e.containers() if c["name"] == victim["name"])
        return c["phase"] == "Running" and c["slurm_job"] != victim["slurm_job"]
    wait("worker-0 replaced", replaced, 120)
    took = time.time() - started
    wait("the old container on %s ended" % victim["node"], lambda: not os.path.exists("/proc/%d" % old), 30)
    check(True, "slurmd of %s killed: worker-0 replaced in %.1f s, its old sandbox there ended %.1f s after the kill"
          % (victim["node"], took, time.time() - started))
    check_placement(e, h, 4)
    h.start_slurmd(victim["node"])
    h.wait_nodes_state("IDLE", [victim["node"]], 60)


def survive_edtd_kill(e, h):
    e.edt("cluster", "scale", NAME, "--containers", "5")
    time.sleep(0.3)
    e.kill()
    e.start()
    wait("5 Running after the restart", lambda: sum(c["phase"] == "Running" for c in e.containers()) == 5, 90)
    jobs = our_jobs(h)
    check(len(jobs) == 5, "edtd killed mid-scale and restarted: 5 containers, 5 jobs (%s)" % sorted(jobs))
    check_placement(e, h, 5)


def delete(e, h):
    e.edt("cluster", "delete", NAME, "--wait")
    wait("no job left", lambda: not our_jobs(h), 30)
    check(True, "deleted: nothing of edtd's left in squeue")
    left = os.listdir(os.path.join(e.shared, "containers"))
    check(not left, "and no container directory left: %s" % left)


def stored_image(e, h, top):
    """An image imported into edtd's store lands in the shared directory (the
    store's default with --backend slurm), and a cluster of it runs on nodes
    that do not see edtd's data dir, with the image's own files."""
    root, layout = os.path.join(top, "image-root"), Layout(os.path.join(top, "layout"))
    tiny_root(root)
    base = layout.layer(lambda tar: [tar.add(os.path.join(root, t), arcname=t) for t in sorted(os.listdir(root))])

    def work(tar):
        add_file(tar, "work/marker", b"from the stored image\n")
        add_trainer(tar, root)
    layout.image("tiny", [base, layout.layer(work)],
                 {"WorkingDir": "/work", "Env": ["PATH=/usr/bin:/bin"], "User": "trainer"})
    e.edt("image", "import", layout.path, "--name", "tiny")
    image = next(i for i in json.loads(e.edt("image", "list", "-o", "json").stdout) if i["name"] == "tiny")
    check(image["root"].startswith(os.path.join(e.shared, "images") + "/"),
          "the imported image's root is in the shared directory's store: " + image["root"])
    e.edt("cluster", "create", "tiny", "--framework", "horovod", "--image", "tiny", "--containers", "2", "--wait")
    nodes = {c["name"]: c["node"] for c in json.loads(e.edt("cluster", "get", "tiny", "-o", "json").stdout)["status"]["containers"]}
    out = e.edt("run", "tiny", "--", "sh", "-c", 'pwd; cat marker; echo "$USER $HOME"; cat ~/from-image').stdout.split("\n")
    check(out[:4] == ["/work", "from the stored image", "trainer /home/trainer", "the image's home"],
          "a cluster of it runs on nodes %s with its files, as its User: %r" % (sorted(nodes.values()), out))
    hop = 'echo "$USER"; ssh tiny-worker-0 \'echo "$USER@$(cat /etc/hostname)"\''
    out = e.edt("ssh", "tiny", "tiny-launcher", "--", "bash", "-c", hop).stdout.split("\n")
    check(out[:2] == ["trainer", "trainer@tiny-worker-0"], "edt ssh logs in as trainer, who reaches a worker: %r" % out)
    e.edt("cluster", "delete", "tiny", "--wait")
    e.edt("image", "rm", "tiny")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--edtd", required=True)
    p.add_argument("--edt", required=True)
    p.add_argument("--build", required=True)
    p.add_argument("--state-dir", default="/tmp/edt-slurm-backend-test")
    p.add_argument("--nodes-style", choices=("static", "dynamic"), default="static")
    p.add_argument("--config", choices=CONFIGS, default="site")
    args = p.parse_args()
    # A job's /tmp is its own under job_container/tmpfs: the shared directory is elsewhere, as at sites.
    top = tempfile.mkdtemp(prefix="edt-slurm-backend-", dir="/var/tmp" if args.config == "site-tmpfs" else None)
    os.chmod(top, 0o755)
    shared = os.path.join(top, "site", "shared")  # edtd makes both
    figures = {}
    e = None
    try:
        # edtd's data dir is on the login node alone, as at sites: no node sees it.
        login = os.path.join(top, "login")
        os.mkdir(login, 0o755)
        with SlurmHarness(state_dir=args.state_dir, nodes=5, gpus=2, cpus=2, memory_mb=4096,
                          nodes_style=args.nodes_style, config=args.config, hidden=[login]) as h:
            e = Edtd(args, h, shared, os.path.join(login, "data"))
            try:
                bad_input(e, h)
                sandbox_failure(e, h)
                make_volume(e)
                create_and_train(e, h, figures)
                tenants_apart(e, h)
                pending_scale(e, h)
                survive_scancel(e, h)
                survive_node_crash(e, h)
                survive_slurmd_kill(e, h)
                survive_edtd_kill(e, h)
                delete(e, h)
                stored_image(e, h, top)
            except BaseException:
                print("edtd's log:\n" + e.log(), flush=True)
                subprocess.run(["squeue", "-t", "all"], env=h.env)
                raise
            finally:
                if e.proc and e.proc.poll() is None:
                    e.edt("cluster", "delete", NAME, "--wait", check_rc=False)
                e.stop()
                subprocess.run(["scancel", "--name"] + [j[0] for j in our_jobs(h).values()] if our_jobs(h) else
                               ["true"], env=h.env)
    except Failed as f:
        print("FAILED: %s" % f, flush=True)
        return 1
    finally:
        shutil.rmtree(top, ignore_errors=True)
    for what, seconds in figures.items():
        print("%-22s %.2f s" % (what, seconds))
    print("slurm_backend: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
