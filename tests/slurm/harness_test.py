#!/usr/bin/python3
"""The Slurm harness (tests/harness/slurm.py) builds a real cluster, and takes it all down.

Run as root; prints each check; exits non-zero if any fails:
  - up: 3 nodes IDLE in partition edt, each with 2 CPUs, 4096 MB and
    gpu:NVIDIA-P4:2: static nodes of slurm.conf whose slurmd is a daemon
    (--nodes-style static, the default), or dynamic nodes (slurmd -D -Z,
    --nodes-style dynamic); Slurm's commands work on the login node with only
    SLURM_CONF; a second `up` is refused while one is up;
  - srun -N3 hostname prints the 3 node hostnames; each node sees its own
    address on eth0; a macvlan on a node's eth0 in a namespace of its own
    (a container's) is reached from the login node and from another node;
  - sbatch --gres=gpu:NVIDIA-P4:1: the job sees CUDA_VISIBLE_DEVICES;
  - --config site (the default; Slurm's cgroups) or site-tmpfs: a job's one
    GPU is CUDA's 0 with SLURM_JOB_GPUS the node's index, and its devices
    cgroup lets it use that GPU's device alone; site-tmpfs: its /tmp is its
    own (job_container/tmpfs); --config plain: none of these;
  - a job asking more than is free is PENDING (Resources); scancel removes it;
  - a GRES type that does not exist, or more memory than a node has, is refused;
  - kill_slurmd while a job's script runs: the node goes DOWN and the job ends
    NODE_FAIL within 35 s
    (the time is printed); start_slurmd: the node is IDLE again and runs jobs;
  - after the `with` block, and after `down` following a killed `up`:
    no namespace, link, daemon, state directory or Slurm cgroup is left.

  tests/slurm/harness_test.py [--state-dir /tmp/edt-slurm-test] [--nodes-style dynamic] [--config plain|site-tmpfs]
"""
import argparse
import ipaddress
import os
import re
import signal
import subprocess
import sys
import time

from harness import slurm

HARNESS = slurm.__file__  # run as a command too: `tests/harness/slurm.py up`
FAILURES = []


def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        FAILURES.append(what)
    return ok


def wait_for(probe, timeout, step=0.1):
    """Calls probe() until it returns something true; (that, seconds), or (None, seconds)."""
    started = time.monotonic()
    while True:
        got = probe()
        if got or time.monotonic() - started > timeout:
            return got, time.monotonic() - started
        time.sleep(step)


def job_state(h, job):
    out = h.run(["squeue", "-h", "-t", "all", "-j", job, "-o", "%T"], check=False).stdout.strip()
    if out:
        return out
    line = [x for x in read(h.path("log", "jobcomp.log")).splitlines() if x.startswith(f"JobId={job} ")]
    return re.search(r"JobState=(\S+)", line[0]).group(1) if line else ""


def sbatch(h, *args):
    return h.run(["sbatch", "--parsable", "-o", h.path("job-%j.out")] + list(args)).stdout.strip().split(";")[0]


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def leftovers(state_dir):
    """What of a harness is left: namespaces, links, live daemons, the state dir."""
    left = slurm.our_namespaces()
    names = re.findall(r"^\d+: ([^:@\s]+)", slurm.sh(["ip", "-o", "link", "show"]), re.M)
    left += [n for n in names if n.startswith(slurm.PREFIX)]
    for pid, comm, cmdline, _, _ in slurm.processes():
        status = read(f"/proc/{pid}/status")
        if comm in slurm.DAEMONS and state_dir in cmdline and "State:\tZ" not in status:
            left.append(f"{comm} (pid {pid})")
    left += [p for p in (state_dir, slurm.job_tmp_dir(state_dir)) if os.path.exists(p)]
    return left + slurm.slurm_cgroups()


def check_up(h):
    states = h.node_states()
    check(sorted(states) == h.node_names and all(slurm.in_state(s, "IDLE") for s in states.values()),
          f"3 nodes IDLE: {states}")
    minimal = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SLURM_CONF": h.conf}
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %P %c %m %G %T"], env=minimal, capture_output=True,
                         text=True).stdout.split("\n")
    want = [f"{n} edt* 2 4096 gpu:NVIDIA-P4:2 idle" for n in h.node_names]
    got = sorted(line.strip() for line in out if line.strip())
    check(got == want, f"sinfo with only SLURM_CONF: {got}")
    dynamic = {n for n, parts in states.items() if "DYNAMIC_NORM" in parts}
    check(dynamic == (set(h.node_names) if h.nodes_style == "dynamic" else set()),
          f"{h.nodes_style} nodes (dynamic ones: {sorted(dynamic)})")
    if h.nodes_style == "static":
        parents = {n: read(f"/proc/{h.daemon_pid(n)}/stat").rsplit(")", 1)[-1].split()[1:2] for n in h.node_names}
        check(all(p and int(p[0]) != os.getpid() for p in parents.values()),
              f"each slurmd runs as a daemon, not a child of the harness (parents: {parents})")
    try:
        slurm.SlurmHarness(h.state_dir + "-second", log=lambda _: None).up()
        check(False, "a second up is refused")
    except slurm.HarnessError as e:
        check("already up" in str(e), f"a second up is refused: {e}")


def check_nodes_run_jobs(h):
    out = h.run(["srun", "-N3", "hostname"]).stdout.split()
    check(sorted(out) == h.node_names, f"srun -N3 hostname: {out}")
    out = h.run(["srun", "-N3", "ip", "-4", "-o", "addr", "show", "eth0"]).stdout
    seen = sorted(re.findall(r"inet (\S+)/24", out))
    check(seen == [h.node_address(n) for n in h.node_names], f"srun -N3 ip -4 -o addr show eth0: {seen}")
    out = h.run(["srun", "-N3", "sh", "-c", 'echo "$(hostname) $(ip -4 -o addr show eth0)"']).stdout
    pairs = dict(re.findall(r"^(\S+) .* inet (\S+)/24", out, re.M))
    check(pairs == {n: h.node_address(n) for n in h.node_names}, f"each node has its own address: {pairs}")


SERVER = """
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7000))
s.listen()
while True:
    c, _ = s.accept()
    c.sendall(b"container")
    c.close()
"""
CLIENT = "import socket, sys; print(socket.create_connection((sys.argv[1], 7000), 5).recv(64).decode())"


def check_macvlan(h):
    """A macvlan on a node's eth0, in a namespace of its own (what a job's
    helper makes for a container), is reached from the login node and from
    a job on another node."""
    ns, node = slurm.NETNS_PREFIX + "c1", h.node_names[0]
    address = str(ipaddress.ip_network(h.address_range_for_containers).network_address + 2)
    server = None
    try:
        slurm.sh(["ip", "netns", "add", ns])
        slurm.sh(["ip", "-n", h.netns(node), "link", "add", "mv0", "link", h.interface, "type", "macvlan",
                    "mode", "bridge"])
        slurm.sh(["ip", "-n", h.netns(node), "link", "set", "mv0", "netns", ns])
        slurm.sh(["ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "mv0"])
        slurm.sh(["ip", "-n", ns, "link", "set", "mv0", "up"])
        server = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", SERVER, address])
        got, _ = wait_for(lambda: subprocess.run([sys.executable, "-c", CLIENT, address], capture_output=True,
                                                 text=True).stdout.strip(), 10)
        check(got == "container", f"the login node reaches a macvlan on {node}'s eth0 at {address}: {got!r}")
        out = h.run(["srun", "-w", h.node_names[1], sys.executable, "-c", CLIENT, address], check=False)
        check(out.stdout.strip() == "container", f"a job on {h.node_names[1]} reaches it: {out.stdout.strip()!r} "
              f"{out.stderr.strip()}")
    finally:
        if server:
            server.kill()
            server.wait()
        slurm.sh(["ip", "netns", "del", ns], check=False)


def check_gpus(h):
    job = sbatch(h, "--gres=gpu:NVIDIA-P4:1", "--wrap", 'echo "CVD=$CUDA_VISIBLE_DEVICES GPUS=$SLURM_JOB_GPUS"')
    state, took = wait_for(lambda: job_state(h, job) == "COMPLETED", 30)
    out = read(h.path(f"job-{job}.out"))
    check(state and re.search(r"CVD=\d GPUS=\d", out) is not None,
          f"sbatch --gres=gpu:NVIDIA-P4:1 sees its GPU in {took:.2f} s: {out.strip()!r}")
    bad = h.run(["sbatch", "--gres=gpu:NVIDIA-A100:1", "--wrap", "true"], check=False)
    check(bad.returncode != 0, f"a GRES type that does not exist is refused: {bad.stderr.strip()}")
    bad = h.run(["sbatch", "--mem=4097", "--wrap", "true"], check=False)
    check(bad.returncode != 0, f"more memory than a node has is refused: {bad.stderr.strip()}")


# In the job: its GPUs' numbers, the devices its cgroup lets it make (mknod
# asks the devices cgroup as open does: EPERM where it denies), its /tmp.
CONSTRAINED = """\
echo "CVD=$CUDA_VISIBLE_DEVICES GPUS=$SLURM_JOB_GPUS"
dir=$(mktemp -d)
for minor in $MINORS; do
  mknod $dir/gpu$minor c $MAJOR $minor 2>/dev/null && echo "may $minor" || echo "not $minor"
done
rm -r $dir
echo job-tmp > /tmp/job-tmp-$SLURM_JOB_ID
"""


def check_constrained(h):
    """config site: ConstrainDevices numbers a job's GPUs 0..n-1 and denies it
    the node's others; job_container/tmpfs gives it a /tmp of its own."""
    node = h.node_names[0]
    minors = [str(m) for m in range(h.gpus)]  # node 1's fake GPUs
    job = sbatch(h, "-w", node, "--gres=gpu:NVIDIA-P4:1",
                 f"--export=ALL,MAJOR={slurm.GPU_MAJOR},MINORS={' '.join(minors)}", "--wrap", CONSTRAINED)
    state, took = wait_for(lambda: job_state(h, job) == "COMPLETED", 30)
    out = read(h.path(f"job-{job}.out"))
    given = re.search(r"CVD=(\S*) GPUS=(\d+)", out)
    check(state and given and given.group(1) == "0",
          f"ConstrainDevices: the job's one GPU is CUDA's 0, SLURM_JOB_GPUS the node's index: {out.splitlines()[:1]}")
    if given:
        may = sorted(re.findall(r"^may (\d+)$", out, re.M))
        check(may == [given.group(2)], f"its devices cgroup lets it use its own GPU alone: may {may} of {minors}")
    private = not os.path.exists(f"/tmp/job-tmp-{job}")
    if h.config == "site-tmpfs":
        check(private, "job_container/tmpfs: what the job wrote in /tmp is its own")
    elif not private:
        os.unlink(f"/tmp/job-tmp-{job}")


def check_pending(h):
    big = sbatch(h, "-N3", "--gres=gpu:NVIDIA-P4:2", "--wrap", "sleep 300")
    _, took = wait_for(lambda: job_state(h, big) == "RUNNING", 30)
    check(job_state(h, big) == "RUNNING", f"a job on all GPUs runs {took:.2f} s after sbatch")
    more = sbatch(h, "--gres=gpu:NVIDIA-P4:1", "--wrap", "sleep 300")
    reason = lambda: h.run(["squeue", "-h", "-j", more, "-o", "%T %r"]).stdout.strip()  # noqa: E731
    _, took = wait_for(lambda: reason() == "PENDING Resources", 30)
    check(reason() == "PENDING Resources", f"a job asking more than is free: `{reason()}` after {took:.2f} s")
    h.run(["scancel", big, more])
    gone = lambda: not h.run(["squeue", "-h", "-j", f"{big},{more}", "-o", "%i"], check=False).stdout.strip()  # noqa: E731
    _, took = wait_for(gone, 30)
    check(gone(), f"scancel removes both jobs from squeue in {took:.2f} s")


def check_node_failure(h):
    node = h.node_names[1]
    # RUNNING is the controller's word as soon as it allocates the node; a
    # slurmd killed before the batch script started is a launch failure, and
    # Slurm requeues those (PENDING), JobRequeue=0 or not. The script says
    # when it runs.
    job = sbatch(h, "-w", node, "--wrap", "echo running; exec sleep 300")
    running, took = wait_for(lambda: "running" in read(h.path(f"job-{job}.out")), 30)
    check(running and job_state(h, job) == "RUNNING", f"a job on {node} runs its script {took:.2f} s after sbatch")
    started = time.monotonic()
    h.kill_slurmd(node)
    try:
        down = h.wait_nodes_state("DOWN", [node], 60)
        check(True, f"{node} is DOWN {down:.1f} s after its slurmd was killed (SlurmdTimeout=10)")
    except slurm.HarnessError as e:
        check(False, str(e))
    state, _ = wait_for(lambda: job_state(h, job) not in ("RUNNING", "COMPLETING"), 60, 0.2)
    took = time.monotonic() - started
    check(state and job_state(h, job) == "NODE_FAIL" and took <= 35,
          f"its job ended {job_state(h, job)} {took:.1f} s after the kill")
    h.start_slurmd(node)
    back = h.wait_nodes_state("IDLE", [node], 60)
    out = h.run(["srun", "-w", node, "hostname"]).stdout.strip()
    check(out == node, f"start_slurmd: {node} IDLE again in {back:.1f} s, and runs jobs ({out})")


def check_down_after_killed_up(state_dir, nodes_style):
    """A killed `slurm.py up` leaves things half made; `down` removes them all."""
    style = ["--dynamic"] if nodes_style == "dynamic" else []
    up = subprocess.Popen([sys.executable, HARNESS, "up", "--state-dir", state_dir] + style,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: slurm.our_namespaces() or up.poll() is not None, 20, 0.01)
    time.sleep(0.2)
    up.send_signal(signal.SIGKILL)
    up.wait()
    made = slurm.our_namespaces()
    subprocess.run([sys.executable, HARNESS, "down"], check=True, stdout=subprocess.DEVNULL)
    _, _ = wait_for(lambda: not leftovers(state_dir), 10)
    left = leftovers(state_dir)
    check(not left, f"down after a SIGKILLed up (it had made {made}): left {left or 'nothing'}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--state-dir", default="/tmp/edt-slurm-test")
    p.add_argument("--nodes-style", choices=slurm.NODES_STYLES, default="static")
    p.add_argument("--config", choices=slurm.CONFIGS, default="site")
    args = p.parse_args()
    if os.geteuid() != 0:
        print("harness_test: needs root", file=sys.stderr)
        return 1
    started = time.monotonic()
    try:
        with slurm.SlurmHarness(args.state_dir, nodes=3, gpus=2, cpus=2, memory_mb=4096,
                                nodes_style=args.nodes_style, config=args.config) as h:
            check(True, f"up in {time.monotonic() - started:.1f} s")
            check_up(h)
            check_nodes_run_jobs(h)
            check_macvlan(h)
            check_gpus(h)
            if h.config != "plain":
                check_constrained(h)
            check_pending(h)
            check_node_failure(h)
    except Exception as e:  # a check that could not even run
        check(False, f"{type(e).__name__}: {e}")
    _, _ = wait_for(lambda: not leftovers(args.state_dir), 10)
    left = leftovers(args.state_dir)
    check(not left, f"after the with block: left {left or 'nothing'}")
    check_down_after_killed_up(args.state_dir, args.nodes_style)
    print(f"harness_test: {len(FAILURES)} failure(s) in {time.monotonic() - started:.1f} s", flush=True)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
