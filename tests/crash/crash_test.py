#!/usr/bin/env python3
"""edtd killed at every step of create, scale up, scale down and delete: after
a restart on the same data dir, what runs is what the store records.

For each fault point that `edtd --fault-points` lists, and each operation it
names, edtd is restarted with EDT_FAULT=<point> (it abort()s there, as a
kill -9 would leave things), the operation is asked for, edtd must die at
that point, and it is started again without the fault. Then, once the
operation has finished, the invariants are checked against the real
processes (the sandboxes' inits, found by the label in their environment,
and the sockets in /proc/net/tcp), not only against the store:
  - every sandbox belongs to a recorded container (same cluster, name, pid
    and start time): none is untracked;
  - every container is Running and has its sandbox;
  - every address is held by one container, and exactly the containers'
    addresses listen on the SSH port, each once;
  - every GPU is held by one container, and each container's GPUs are the
    ones held for it;
  - each container has its directory and no other directory is left;
  - a bystander cluster that was Running before the crash keeps the same
    sandboxes (they were re-adopted, not restarted);
  - the operation finished: the cluster has the size asked for, or is gone;
  - the next create succeeds (a cluster made and deleted after the check).
Then the same with a real kill -9 (SIGKILL) of edtd during a scale-up, at
moments told by what a new container has on disk or in the store (its
directory, bubblewrap's info file, its recorded pid, sshd listening), and
during a delete once the first container row is gone.
At the end everything is deleted and nothing may be left: no labelled
process, no container directory, no row.
SIGTERM stops edtd cleanly (exit status 0, "stopping on signal" in its log)
whenever it comes: every thread of a running edtd blocks SIGTERM and
SIGINT, so none takes them with their default action (the end of edtd,
mid-step), and a SIGTERM sent while edtd is still starting stops it once
it has started.

  crash_test.py --edtd build/src/control/edtd [--point NAME]
"""
import argparse
import http.client
import json
import os
import re
import resource
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import harness.edtd

ADDRESSES = "127.85.0.0/24"  # this test's own block (grep --address-range for the others)
GPUS = "NVIDIA-P4=8"
OPERATIONS = ["create", "scale-up", "scale-down", "delete"]
CLUSTER = "crash"  # the cluster the operations act on
BYSTANDER = "steady"  # Running throughout; its sandboxes must survive every crash
TIMEOUT = 60  # seconds for any one state to be reached


def wait_for(what, check, timeout=TIMEOUT, state=lambda: ""):
    """Polls check() until it returns a true value; fails naming `what` and
    what state() says at that time."""
    deadline = time.time() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}{state()}")
        time.sleep(0.05)


def watch_passage(path, until, narrowed):
    """Polls the mode of `path` until `until` is set; appends the first one
    without o+x to `narrowed`."""
    while not until.is_set():
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            continue
        if not mode & stat.S_IXOTH:
            narrowed.append(oct(stat.S_IMODE(mode)))
            return


def no_core_dumps():
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class Edtd(harness.edtd.Edtd):
    """One data dir, restartable; at most one edtd process at a time. Each
    start gets a fresh port, no core dumps, and EDT_FAULT only if asked."""

    def __init__(self, binary, root):
        super().__init__(binary, os.path.join(root, "data"),
                         ["--network", "loopback", "--address-range", ADDRESSES, "--gpus", GPUS, "--grace", "2s",
                          "--warm-start", "off"],
                         log_path=os.path.join(root, "edtd.log"), error=AssertionError, new_port_each_start=True,
                         preexec_fn=no_core_dumps)
        self.home = os.path.realpath(self.data)

    def start(self, fault=None):
        """Starts edtd; fails if the data dir lost others' passage (o+x) at
        any moment of the start: a sandbox the edtd before started may be
        binding its files through it, as its container's root."""
        narrowed, started = [], threading.Event()
        watcher = threading.Thread(target=watch_passage, args=(self.data, started, narrowed))
        watcher.start()
        try:
            super().start(env_drop=["EDT_FAULT"], env_extra={"EDT_FAULT": fault} if fault else None)
        finally:
            started.set()
            watcher.join()
        if narrowed:
            raise AssertionError(f"edtd made its data dir mode {narrowed[0]} while it started: the containers' root "
                                 "could not pass through it")

    def api(self, method, path, body=None):
        """(status, JSON body); (0, None) when edtd died before answering."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/api/v1{path}", data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")
        except (urllib.error.URLError, ConnectionError, http.client.HTTPException) as failure:
            # edtd died while answering (the reconciler reached the fault
            # point before the answer was sent), or this is a real failure.
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                raise failure
            return 0, None

    def stop(self):
        """SIGTERM: edtd stops, the containers keep running."""
        super().stop(kill_after=False)

    def expect_abort(self, point):
        try:
            self.proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"edtd did not reach fault point {point} within {TIMEOUT} s")
        if self.proc.returncode != -signal.SIGABRT or f"fault point {point} reached" not in self.log():
            raise AssertionError(f"edtd exited with {self.proc.returncode}, not at fault point {point}; "
                                 f"its log:\n{self.log()}")

    def container_entries(self):
        """(directories, disks): the names of containers/ entries, <name>
        and <name>.disk (the disk of its writable dirs)."""
        path = os.path.join(self.data, "containers")
        names = os.listdir(path) if os.path.isdir(path) else []
        return ([n for n in names if not n.endswith(".disk")],
                [n[:-len(".disk")] for n in names if n.endswith(".disk")])

    def rows(self):
        """The store as edtd left it: clusters, containers and GPU holders."""
        db = sqlite3.connect(os.path.join(self.data, "edtd.db"), timeout=10)
        try:
            clusters = {name: {"containers": json.loads(spec)["containers"], "phase": phase}
                        for name, spec, phase in db.execute("SELECT name, spec, phase FROM clusters")}
            containers = [dict(zip(("name", "cluster", "address", "gpus", "phase", "leaving", "pid", "pid_start"), r))
                          for r in db.execute("SELECT name, cluster, address, gpus, phase, leaving, pid, pid_start "
                                              "FROM containers")]
            holders = list(db.execute("SELECT idx, container FROM gpu_holders"))
        finally:
            db.close()
        return clusters, containers, holders


def read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def sandboxes(home):
    """The inits of the sandboxes labelled with `home`: (cluster, name, pid, start time)."""
    mark = b"\0EDT_SANDBOX_HOME=" + home.encode() + b"\0"
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        env = b"\0" + read(f"/proc/{entry}/environ")
        if mark not in env:
            continue
        stat = read(f"/proc/{entry}/stat").decode(errors="replace")
        fields = stat[stat.rfind(")") + 2:].split()
        if not fields or fields[0] in ("Z", "X"):
            continue
        nspid = [line.split()[1:] for line in read(f"/proc/{entry}/status").decode().splitlines()
                 if line.startswith("NSpid:")]
        if not nspid or len(nspid[0]) < 2 or nspid[0][-1] != "1":
            continue  # bubblewrap's monitor, or a process inside a sandbox
        label = dict(item.split(b"=", 1) for item in env.split(b"\0") if item.startswith(b"EDT_SANDBOX_"))
        found.append((label[b"EDT_SANDBOX_CLUSTER"].decode(), label[b"EDT_SANDBOX_CONTAINER"].decode(), int(entry),
                      int(fields[19])))
    return found


def blocked_signals(pid, tid):
    """The signal mask (SigBlk) of thread `tid` of `pid`, 0 when it is gone."""
    found = re.search(rb"^SigBlk:\s*([0-9a-f]+)", read(f"/proc/{pid}/task/{tid}/status"), re.M)
    return int(found.group(1), 16) if found else 0


def threads_taking(pid, signals):
    """The threads of `pid` but its main one that do not block every one of
    `signals`: one of them would take such a signal with its default
    action. (The main thread waits for them in sigwait, which unblocks
    them while it waits.)"""
    mask = sum(1 << (s - 1) for s in signals)
    return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")
            if int(tid) != pid and blocked_signals(pid, tid) & mask != mask]


def expect_clean_stop(edtd, when):
    edtd.proc.send_signal(signal.SIGTERM)
    code = edtd.proc.wait(timeout=TIMEOUT)
    if code != 0 or "stopping on signal" not in edtd.log():
        raise AssertionError(f"SIGTERM {when} ended edtd with status {code}, not a clean stop; its log:\n{edtd.log()}")


def check_signals(edtd):
    """A running edtd's threads all block SIGTERM and SIGINT; SIGTERM stops
    it cleanly while it serves, and when sent while edtd starts (as soon
    as its main thread blocks it). Leaves edtd running."""
    taking = threads_taking(edtd.proc.pid, (signal.SIGTERM, signal.SIGINT))
    if taking:
        raise AssertionError(f"edtd's threads {taking} do not block SIGTERM and SIGINT: a signal that reaches one "
                             "ends edtd without its stop")
    expect_clean_stop(edtd, "while edtd served")
    edtd.port = harness.edtd.free_port()
    edtd._spawn(edtd.argv(), {k: v for k, v in os.environ.items() if k != "EDT_FAULT"})
    deadline = time.time() + TIMEOUT
    while not blocked_signals(edtd.proc.pid, edtd.proc.pid) & (1 << (signal.SIGTERM - 1)):
        if edtd.proc.poll() is not None or time.time() > deadline:
            raise AssertionError(f"edtd never blocked SIGTERM as it started; its log:\n{edtd.log()}")
        time.sleep(0.0005)
    expect_clean_stop(edtd, "while edtd was starting")
    edtd.start()
    print("SIGTERM stops edtd cleanly while it starts and while it serves; all its threads block it", flush=True)


def labelled_processes(home):
    mark = b"\0EDT_SANDBOX_HOME=" + home.encode() + b"\0"
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and mark in b"\0" + read(f"/proc/{e}/environ")
            and read(f"/proc/{e}/stat").decode(errors="replace").rpartition(")")[2].split()[:1] not in (["Z"], ["X"])]


def listeners(port):
    """The addresses with a socket listening on `port`, one entry per socket."""
    out = []
    for line in read("/proc/net/tcp").decode().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == port:
            out.append(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
    return out


def settled(edtd, expected):
    """Whether every cluster of `expected` (name -> containers, or None for
    gone) has that many containers, all Running, and nothing else exists."""
    clusters, containers, _ = edtd.rows()
    want = {name: n for name, n in expected.items() if n is not None}
    if set(clusters) != set(want):
        return False
    for name, n in want.items():
        mine = [c for c in containers if c["cluster"] == name]
        if clusters[name]["phase"] != "Running" or clusters[name]["containers"] != n or len(mine) != n:
            return False
        if any(c["phase"] != "Running" or c["leaving"] for c in mine):
            return False
    return True


def check_invariants(edtd, expected, bystander_pids, where):
    wait_for(f"the clusters to be {expected} ({where})", lambda: settled(edtd, expected),
             state=lambda: f"; the store has {edtd.rows()}; edtd's log:\n{edtd.log()}")
    clusters, containers, holders = edtd.rows()
    problems = []
    recorded = {(c["cluster"], c["name"], c["pid"], c["pid_start"]) for c in containers}
    running = sandboxes(edtd.home)
    for s in running:
        if s not in recorded:
            problems.append(f"sandbox {s} belongs to no recorded container")
    for c in containers:
        if (c["cluster"], c["name"], c["pid"], c["pid_start"]) not in running:
            problems.append(f"container {c['name']} ({c['phase']}) has no sandbox with pid {c['pid']}")
    addresses = sorted(c["address"] for c in containers)
    if len(set(addresses)) != len(addresses):
        problems.append(f"an address is held twice: {addresses}")
    listening = sorted(listeners(edtd.ssh_port))
    if listening != addresses:
        problems.append(f"listening on port {edtd.ssh_port}: {listening}; the containers' addresses: {addresses}")
    held = {}
    for idx, container in holders:
        held.setdefault(container, []).append(idx)
    for c in containers:
        if sorted(json.loads(c["gpus"])) != sorted(held.pop(c["name"], [])):
            problems.append(f"container {c['name']} lists GPUs {c['gpus']}; the holders table differs")
    if held:
        problems.append(f"GPUs held by containers that do not exist: {held}")
    directories, disks = edtd.container_entries()
    names = sorted(c["name"] for c in containers)
    if sorted(directories) != names:
        problems.append(f"container directories {sorted(directories)}; containers {names}")
    if not set(disks) <= set(names):
        problems.append(f"container disks {sorted(disks)}; containers {names}")
    now = {c["name"]: (c["pid"], c["pid_start"]) for c in containers if c["cluster"] == BYSTANDER}
    if now != bystander_pids:
        problems.append(f"the bystander's sandboxes changed: {bystander_pids} -> {now}")
    if problems:
        raise AssertionError(f"after {where}:\n  " + "\n  ".join(problems) + f"\nedtd's log:\n{edtd.log()}")


def create(edtd, name, containers):
    status, body = edtd.api("POST", "/clusters", {"name": name, "framework": "horovod", "containers": containers,
                                                  "image": "edt", "gpu": {"model": "NVIDIA-P4", "count": 1}})
    return status, body


def ask(edtd, operation):
    """Asks for `operation` on CLUSTER; (status, body), status 0 if edtd died answering."""
    if operation == "create":
        return create(edtd, CLUSTER, 2)
    if operation == "scale-up":
        return edtd.api("PATCH", f"/clusters/{CLUSTER}", {"containers": 3})
    if operation == "scale-down":
        return edtd.api("PATCH", f"/clusters/{CLUSTER}", {"containers": 2})
    return edtd.api("DELETE", f"/clusters/{CLUSTER}")


# The size CLUSTER has once each operation is done (None: gone).
SIZE_AFTER = {"create": 2, "scale-up": 3, "scale-down": 2, "delete": None}


def next_create(edtd, expected, bystander_pids, where):
    status, body = create(edtd, "next", 2)
    if status != 201:
        raise AssertionError(f"the next create after {where} answered {status}: {body}")
    check_invariants(edtd, {**expected, "next": 2}, bystander_pids, f"the next create after {where}")
    status, body = edtd.api("DELETE", "/clusters/next")
    if status != 202:
        raise AssertionError(f"deleting the next create's cluster answered {status}: {body}")
    wait_for(f"the next create's cluster to be deleted (after {where})", lambda: settled(edtd, expected))


def run_point(edtd, point, operations, bystander_pids):
    """The four operations on CLUSTER, edtd crashing at `point` in those of `operations`."""
    expected = {BYSTANDER: 2}
    for operation in OPERATIONS:
        where = f"{operation} with a crash at {point}" if operation in operations else f"{operation} (no crash)"
        if operation in operations:
            edtd.stop()
            edtd.start(fault=point)
        status, body = ask(edtd, operation)
        if status not in (0, 200, 201, 202):
            raise AssertionError(f"{where}: the request answered {status}: {body}")
        if operation in operations:
            edtd.expect_abort(point)
            edtd.start()
        expected[CLUSTER] = SIZE_AFTER[operation]
        check_invariants(edtd, expected, bystander_pids, where)
        if operation in operations:
            next_create(edtd, expected, bystander_pids, where)
    print(f"  {point}: crashed in {' '.join(o for o in OPERATIONS if o in operations)}; invariants held", flush=True)


def scale(edtd, containers, where):
    status, body = edtd.api("PATCH", f"/clusters/{CLUSTER}", {"containers": containers})
    if status != 200:
        raise AssertionError(f"{where}: scaling {CLUSTER} to {containers} answered {status}: {body}; "
                             f"the store has {edtd.rows()}")


def kill_when(edtd, what, moment):
    """SIGKILLs edtd as soon as moment() is true (or edtd is done without it)."""
    wait_for(what, moment, TIMEOUT)
    edtd.proc.kill()
    edtd.proc.wait()


def new_container(edtd, name):
    return next((c for c in edtd.rows()[1] if c["name"] == name), {})


def run_sigkills(edtd, bystander_pids):
    """kill -9 during a scale-up of CLUSTER (2 -> 3) at each of four moments, then during its delete."""
    new = CLUSTER + "-worker-1"
    directory = os.path.join(edtd.data, "containers", new)
    moments = {
        "directory exists": lambda: os.path.isdir(directory),
        "info file from bubblewrap exists": lambda: os.path.exists(os.path.join(directory, "info.json")),
        "pid is recorded": lambda: new_container(edtd, new).get("pid", 0) != 0,
        "sshd listens": lambda: b"Server listening" in read(os.path.join(directory, "log")),
    }
    create(edtd, CLUSTER, 2)
    check_invariants(edtd, {BYSTANDER: 2, CLUSTER: 2}, bystander_pids, "a create")
    for moment, check in moments.items():
        where = f"kill -9 of edtd in a scale-up once the new container's {moment}"
        scale(edtd, 3, where)
        kill_when(edtd, moment, check)
        edtd.start()
        check_invariants(edtd, {BYSTANDER: 2, CLUSTER: 3}, bystander_pids, where)
        next_create(edtd, {BYSTANDER: 2, CLUSTER: 3}, bystander_pids, where)
        scale(edtd, 2, f"the scale-down after {where}")
        check_invariants(edtd, {BYSTANDER: 2, CLUSTER: 2}, bystander_pids, f"the scale-down after {where}")
    edtd.api("DELETE", f"/clusters/{CLUSTER}")
    kill_when(edtd, "a container row of the deleted cluster to go",
              lambda: len([c for c in edtd.rows()[1] if c["cluster"] == CLUSTER]) < 2)
    edtd.start()
    check_invariants(edtd, {BYSTANDER: 2}, bystander_pids, "kill -9 of edtd during a delete")
    print(f"  kill -9: in a scale-up once the new container's {', '.join(moments)}; in a delete; invariants held",
          flush=True)


def fault_points(binary):
    out = subprocess.run([binary, "--fault-points"], check=True, capture_output=True, text=True).stdout
    points = [line.split("\t") for line in out.splitlines() if line]
    for name, operations, _ in points:
        unknown = set(operations.split()) - set(OPERATIONS)
        if unknown:
            raise AssertionError(f"fault point {name} names operations this test does not know: {unknown}")
    return [(name, operations.split()) for name, operations, _ in points]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--edtd", required=True)
    parser.add_argument("--point", action="append", help="only these fault points (default: all)")
    parser.add_argument("--keep", action="store_true", help="keep the data dir and edtd's log")
    args = parser.parse_args()
    points = [(n, o) for n, o in fault_points(args.edtd) if not args.point or n in args.point]
    if not points:
        raise AssertionError(f"no fault point matches {args.point}")
    root = tempfile.mkdtemp(prefix="edt-crash-")
    os.chmod(root, 0o711)  # with user namespaces, containers' roots bind from the data dir in it
    edtd = Edtd(args.edtd, root)
    started = time.time()
    try:
        edtd.start()
        if create(edtd, BYSTANDER, 2)[0] != 201:
            raise AssertionError("the bystander cluster could not be created")
        wait_for("the bystander to be Running", lambda: settled(edtd, {BYSTANDER: 2}))
        bystander_pids = {c["name"]: (c["pid"], c["pid_start"]) for c in edtd.rows()[1]}
        check_signals(edtd)
        print(f"{len(points)} fault points, each crashed in the operations it lists:", flush=True)
        for point, operations in points:
            run_point(edtd, point, operations, bystander_pids)
        run_sigkills(edtd, bystander_pids)
        edtd.api("DELETE", f"/clusters/{BYSTANDER}")
        wait_for("every cluster to be deleted", lambda: settled(edtd, {}))
        left = labelled_processes(edtd.home)
        directories = edtd.container_entries()
        if left or any(directories) or any(edtd.rows()[i] for i in range(3)):
            raise AssertionError(f"left after deleting everything: processes {left}, directories and disks {directories}, "
                                 f"rows {edtd.rows()}")
        print(f"crash_test: {sum(len(o) for _, o in points)} crashes at fault points and 5 kill -9, invariants "
              f"held after each "
              f"({time.time() - started:.0f} s)")
    finally:
        edtd.stop()
        for pid in labelled_processes(edtd.home):  # a failed run's sandboxes
            os.kill(pid, signal.SIGKILL)
        if args.keep:
            print(f"kept {root}")
        else:
            harness.edtd.cleanup(root)


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"crash_test: FAILED: {e}", file=sys.stderr)
        sys.exit(1)
