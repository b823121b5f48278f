#!/usr/bin/env python3
"""edtd --backend slurm --slurm-mode user on a real Slurm cluster that
refuses root's jobs (docs/slurm.md, "--slurm-mode user").

tests/harness/slurm.py builds 3 nodes (network namespaces with their own
hostname and slurmd, 2 CPUs and 2 GPUs each, Slurm's own cgroups; static
nodes, or with --nodes-style dynamic dynamic ones) and slurmctld, with
DisableRootJobs=YES. edtd runs on the "login node" as the service account
edt-svc (made here if the machine lacks it), never as root; its data dir
and the shared directory belong to edt-svc and are 0700, so nothing but
edt-svc can work in them, as on a root-squashed NFS export. Checked:
  - bad input: edtd as root with --slurm-mode user, --address-range with
    it, a malformed --slurm-ports: each refused, naming the fix;
  - Slurm here refuses a root job (the site's setting holds);
  - create `tthvd` (horovod, 2 containers, a GPU each): Running; each a
    Slurm job of edt-svc; the GPU Slurm gave as CUDA's 0, its device bound; every process of each job (helper, bubblewrap, sshd, sessions)
    runs as edt-svc; in the container `id -un` is edt-svc; /etc/hosts gives
    each container its node's address, and /etc/mpi/ssh_config its own port;
    no network namespace of its own (the node's); ssh, mpirun and edtrun
    (MNIST, 5000 samples each) across the nodes; edt ssh and Jupyter from
    edtd's host;
  - a second cluster's container on the same nodes: its key does not log
    in to tthvd's sshd;
  - a cluster of framework slurm (its daemons need root) is refused,
    saying so;
  - an image imported into the store in the shared directory (written as
    edt-svc): a cluster of it runs with the image's files;
  - scale to 3: the third container's node and port in the files;
  - every file edtd and the jobs wrote in the shared directory and the data
    dir is edt-svc's;
  - delete: nothing of edtd's is left in squeue;
  - a port of --slurm-ports taken on every node by another program: the
    container given it fails, its message saying why (sshd's words).

  slurm_user_mode_test.py --edtd build/src/control/edtd --edt build/src/cli/edt --build build
                          [--nodes-style dynamic]
"""
import argparse
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile

import check_run  # the example's own checks of its epoch lines (examples/mnist, on PYTHONPATH)
from harness.oci_layout import Layout, add_file, add_trainer, tiny_root
from harness.slurm import SlurmHarness
from slurm_backend_test import Edtd as SlurmEdtd, Failed, check, get, helper_pid, sandbox_pid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NAME = "tthvd"  # slurm_backend_test.Edtd's cluster
USER = "edt-svc"
TRAIN = "train_mnist.py"
PORTS = "41000-41099"


def service_account():
    """edt-svc's passwd entry, made (a system user without a login) if missing."""
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--user-group", "--home-dir", "/nonexistent", "--no-create-home",
                        "--shell", "/usr/sbin/nologin", USER], check=True)
        return pwd.getpwnam(USER)


def as_service(account):
    def become():
        os.setgid(account.pw_gid)
        os.setgroups([])
        os.setuid(account.pw_uid)
    return become


def user_mode_flags(shared, ports=PORTS):
    return ["--backend", "slurm", "--slurm-partition", "edt", "--slurm-shared-dir", shared, "--slurm-mode", "user",
            "--slurm-ports", ports, "--grace", "2s"]


class Edtd(SlurmEdtd):
    """edtd --backend slurm --slurm-mode user, run as edt-svc."""

    def __init__(self, args, h, account, shared, data):
        self.account = account
        super().__init__(args, h, shared, data, preexec_fn=as_service(account))

    def backend_flags(self, partition="edt"):
        return user_mode_flags(self.shared)


def bad_input(args, h, shared, data):
    def refused(argv, user, words, what):
        run = subprocess.run([args.edtd, "--data-dir", data, "--listen", "127.0.0.1:1", *argv], env=h.env,
                             capture_output=True, text=True, timeout=60, preexec_fn=user)
        said = (run.stderr + run.stdout).strip()
        check(run.returncode != 0 and all(w in said for w in words), what + ": " + said.splitlines()[-1])
    flags = user_mode_flags(shared)
    refused(flags, None, ["--slurm-mode user", "runuser"], "edtd as root with --slurm-mode user is refused")
    account = pwd.getpwnam(USER)
    refused(flags + ["--address-range", "198.18.190.128/25"], as_service(account), ["--address-range", "drop it"],
            "--address-range with --slurm-mode user is refused")
    refused(user_mode_flags(shared, "41000-40000"), as_service(account),
            ["--slurm-ports", "FIRST-LAST"], "a malformed --slurm-ports is refused")
    check(not os.path.exists(os.path.join(data, "edtd.db")), "and edtd made no store")
    run = subprocess.run(["sbatch", "--wrap", "true"], env=h.env, capture_output=True, text=True)
    check(run.returncode != 0, "this Slurm refuses root's jobs (DisableRootJobs=YES): " + run.stderr.strip())


def job_user(h, job):
    out = subprocess.run(["squeue", "-h", "-j", str(job), "-o", "%u"], env=h.env, capture_output=True, text=True)
    return out.stdout.strip()


def descendants(pid):
    """`pid` and every process below it."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry))
            except (OSError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def uids(pids):
    found = set()
    for pid in pids:
        try:
            with open("/proc/%d/status" % pid) as f:
                found |= {int(x) for line in f if line.startswith("Uid:") for x in line.split()[1:]}
        except OSError:
            pass
    return found


def put_mnist(e, account):
    """The MNIST example and its data in volume `mnist`, written as edt-svc (the volume is its)."""
    e.edt("volume", "create", "mnist")
    path = next(v["host_path"] for v in json.loads(e.edt("volume", "list", "-o", "json").stdout)
                if v["name"] == "mnist")
    cached = os.path.join(os.path.abspath(e.args.build), "mnist-data")
    if os.path.isfile(os.path.join(cached, "t10k-labels-idx1-ubyte")):
        copy = ["cp", "-r", cached, os.path.join(path, "mnist-data")]
    else:
        copy = [sys.executable, "-m", "edt.datasets.mnist_synthetic", "--out", os.path.join(path, "mnist-data")]
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.abspath(e.args.build), "python"))
    for argv in (copy, ["cp", os.path.join(ROOT, "examples", "mnist", TRAIN), path]):
        subprocess.run(argv, check=True, env=env, preexec_fn=as_service(account), cwd="/")


def create_and_train(e, h, account):
    e.edt("cluster", "create", NAME, "--framework", "horovod", "--containers", "2", "--cpus", "2",
          "--gpu", "NVIDIA-P4:1", "--shm", "128Mi", "--mount", "mnist:", "--wait")
    containers = e.containers()
    check(all(c["phase"] == "Running" for c in containers) and len({c["node"] for c in containers}) == 2,
          "2 containers Running on 2 nodes: %s" % [(c["name"], c["node"], c["phase"]) for c in containers])
    for c in containers:
        check(job_user(h, c["slurm_job"]) == USER, "%s's Slurm job %s is %s's" % (c["name"], c["slurm_job"], USER))
        helper = helper_pid(e.shared, c["slurm_job"])
        found = uids(descendants(helper))
        check(found == {account.pw_uid}, "every process of %s's job runs as %s (uids %s)" % (c["name"], USER, found))
        net = os.stat("/proc/%d/ns/net" % helper).st_ino
        sandbox = sandbox_pid(e.shared, c["slurm_job"])
        check(os.stat("/proc/%d/ns/net" % sandbox).st_ino == net, "%s is on its node's network" % c["name"])
    nodes = {c["name"]: h.node_address(c["node"]) for c in containers}
    check(all(c["address"] == nodes[c["name"]] for c in containers),
          "the API shows each container at its node's address: %s"
          % [(c["name"], c["address"], c["node"]) for c in containers])
    gpu = e.run_in("echo CUDA=$CUDA_VISIBLE_DEVICES HOST=$EDT_HOST_GPUS $(ls /dev/nvidia*)").stdout.strip()
    found = re.match(r"CUDA=0 HOST=(\d+) /dev/nvidia(\d+)$", gpu)
    check(found is not None and found.group(1) == found.group(2),
          "the GPU Slurm gave is CUDA's 0 and its device file is bound, unprivileged: " + gpu)
    out = e.run_in("id -un; cat /etc/hosts /etc/mpi/ssh_config; ssh %s-worker-0 id -un" % NAME).stdout
    check(out.splitlines()[0] == USER and out.splitlines()[-1] == USER,
          "in the launcher and, over ssh, in the worker: %s (id -un)" % USER)
    check(all(re.search(r"^%s\t%s$" % (re.escape(a), n), out, re.M) for n, a in nodes.items()),
          "/etc/hosts gives each container its node's address")
    ports = re.findall(r"Port (\d+)", out)
    check(len(set(ports)) == 2 and all(41000 <= int(p) <= 41099 for p in ports),
          "/etc/mpi/ssh_config gives each its own port of --slurm-ports: %s" % ports)
    # OpenMPI's own lines ("[host:pid] plm:rsh: Warning: setpgid ... failed in parent" when the
    # ssh it forked has already exec'd) are not hostnames.
    mpi = e.run_in("mpirun -np 2 --hostfile /etc/mpi/hostfile hostname")
    names = sorted(line for line in mpi.stdout.splitlines() if line and not line.startswith("["))
    check(mpi.returncode == 0 and names == [NAME + "-launcher", NAME + "-worker-0"],
          "mpirun runs on both containers:\n" + mpi.stdout)
    out = e.run_in("cd ~/mnist && edtrun -np 2 --hostfile /etc/mpi/hostfile python3 %s --epochs 1" % TRAIN).stdout
    errors = check_run.split_errors(check_run.epoch_lines(out), 2, 1)
    check(not errors, "edtrun -np 2 trains MNIST across 2 nodes, 5000 samples each%s"
          % ("" if not errors else ":\n" + "\n".join(errors) + "\n" + out))
    out = e.edt("ssh", NAME, NAME + "-worker-0", "hostname").stdout.strip()
    check(out == NAME + "-worker-0", "edt ssh from edtd's host reaches a container at its node's port: " + out)
    link = e.edt("jupyter", NAME).stdout.strip()
    status, body = get(e.url + "/c/%s/jupyter/api/status" % NAME, e.env["EDT_TOKEN"])
    check(status == 200 and "started" in body, "Jupyter in the launcher, proxied by edtd: %s -> %d" % (link, status))


def tenants_apart(e):
    e.edt("cluster", "create", "other", "--framework", "horovod", "--containers", "2", "--cpus", "1",
          "--shm", "64Mi", "--wait")
    target = next(c for c in e.containers() if c["name"] == NAME + "-worker-0")
    with open(os.path.join(e.shared, "clusters", NAME, "mpi", "ssh_config")) as f:
        port = re.search(r"Host %s-worker-0\n  HostName (\S+)\n  Port (\d+)" % NAME, f.read())
    out = e.run_in("ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -p %s %s "
                   "hostname 2>&1; echo rc=$?" % (port.group(2), port.group(1)), name="other").stdout
    check("Permission denied" in out and "rc=255" in out,
          "another cluster's container cannot log in to %s (on %s): %s" % (target["name"], target["node"],
                                                                           " / ".join(out.split("\n")).strip()))
    e.edt("cluster", "delete", "other", "--wait")
    run = e.edt("cluster", "create", "sl", "--framework", "slurm", "--containers", "2", "--cpus", "1", "--wait",
                check_rc=False, timeout=120)
    listed = e.edt("cluster", "list", "-o", "json").stdout
    check(run.returncode != 0 and "--slurm-mode" in run.stderr and '"sl"' not in listed,
          "a cluster of framework slurm is refused, saying why, and not made: " + " ".join(run.stderr.split()))


def scale_and_delete(e, h, account):
    e.edt("cluster", "scale", NAME, "--containers", "3", "--wait")
    third = next(c for c in e.containers() if c["name"] == NAME + "-worker-1")
    out = e.run_in("grep %s-worker-1 /etc/hosts; ssh %s-worker-1 hostname" % (NAME, NAME)).stdout.split()
    check(out == [h.node_address(third["node"]), NAME + "-worker-1", NAME + "-worker-1"],
          "scale to 3: the new container's node address in /etc/hosts, ssh reaches it: %s" % out)
    for top in (e.shared, e.data):
        strangers = [p for p in walk(top) if os.lstat(p).st_uid != account.pw_uid]
        check(not strangers, "every file in %s is %s's: %s" % (top, USER, strangers[:5]))
    e.edt("cluster", "delete", NAME, "--wait")
    out = subprocess.run(["squeue", "-h", "-o", "%j"], env=h.env, capture_output=True, text=True).stdout
    check(not [j for j in out.split() if j.startswith("edt-")], "delete: no job of edtd's is left in squeue")


def stored_image(e, top):
    """An image imported as edt-svc into the store in the shared directory: a
    cluster of it runs, as edt-svc, with the image's own files. Its User
    (trainer) cannot apply where a container maps one id: it runs as edt-svc."""
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
    e.edt("cluster", "create", "tiny", "--framework", "horovod", "--image", "tiny", "--containers", "2",
          "--cpus", "1", "--wait")
    out = e.edt("run", "tiny", "--", "sh", "-c", "pwd; cat marker /proc/self/status").stdout.split("\n")
    uid = next((line.split()[1] for line in out if line.startswith("Uid:")), None)
    check(out[:2] == ["/work", "from the stored image"] and uid == str(e.account.pw_uid),
          "a cluster of it runs with its files, as %s: %r, uid %s" % (USER, out[:2], uid))
    e.edt("cluster", "delete", "tiny", "--wait")


def port_taken(e, h):
    """Every node's first port of --slurm-ports taken by another program: the
    container given it fails, and its message says why (sshd's words)."""
    hold = ("import socket, sys, time\ns = socket.socket()\ns.bind(('0.0.0.0', %s))\ns.listen()\n"
            "print('held', flush=True)\ntime.sleep(300)" % PORTS.split("-")[0])
    holders = [subprocess.Popen(["ip", "netns", "exec", h.netns(n), sys.executable, "-c", hold],
                                stdout=subprocess.PIPE, text=True) for n in h.node_names]
    try:
        for holder in holders:
            holder.stdout.readline()
        run = e.edt("cluster", "create", "taken", "--containers", "2", "--cpus", "1", "--shm", "64Mi", "--wait",
                    check_rc=False, timeout=120)
        check(run.returncode != 0 and "ended on its own" in run.stderr and "Address already in use" in run.stderr,
              "a container whose port is taken on its node fails, saying why: "
              + " ".join(run.stderr[run.stderr.find("edt: error:"):].split()))
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()
    e.edt("cluster", "delete", "taken", "--wait")


def walk(top):
    for root, dirs, files in os.walk(top):
        yield root
        for name in dirs + files:
            yield os.path.join(root, name)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--edtd", required=True)
    p.add_argument("--edt", required=True)
    p.add_argument("--build", required=True)
    p.add_argument("--state-dir", default="/tmp/edt-slurm-user-test")
    p.add_argument("--nodes-style", choices=("static", "dynamic"), default="static")
    args = p.parse_args()
    account = service_account()
    top = tempfile.mkdtemp(prefix="edt-slurm-user-")
    os.chmod(top, 0o755)
    site, login = os.path.join(top, "site"), os.path.join(top, "login")
    for d in (site, login):
        os.mkdir(d, 0o755)
    # Its own, and no one else's: what root squash leaves edtd (docs/slurm.md).
    shared = os.path.join(site, "shared")
    for d in (shared, os.path.join(login, "data")):
        os.mkdir(d, 0o700)
        os.chown(d, account.pw_uid, account.pw_gid)
    e = None
    try:
        with SlurmHarness(state_dir=args.state_dir, nodes=3, gpus=2, cpus=2, memory_mb=4096, hidden=[login],
                          nodes_style=args.nodes_style, root_jobs=False) as h:
            bad_input(args, h, shared, os.path.join(login, "data"))
            e = Edtd(args, h, account, shared, os.path.join(login, "data"))
            e.log_path = os.path.join(top, "edtd.log")
            try:
                e.start()
                put_mnist(e, account)
                create_and_train(e, h, account)
                tenants_apart(e)
                stored_image(e, top)
                scale_and_delete(e, h, account)
                port_taken(e, h)
            except BaseException:
                print("edtd's log:\n" + e.log(), flush=True)
                subprocess.run(["squeue", "-t", "all"], env=h.env)
                raise
            finally:
                if e.proc and e.proc.poll() is None:
                    e.edt("cluster", "delete", NAME, "--wait", check_rc=False)
                    e.stop()
                subprocess.run(["scancel", "-u", USER], env=h.env)
    except Failed as f:
        print("FAILED: %s" % f, flush=True)
        return 1
    finally:
        shutil.rmtree(top, ignore_errors=True)
    print("slurm_user_mode: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
