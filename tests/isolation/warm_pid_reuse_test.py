#!/usr/bin/env python3
"""The warm interpreter (python/edt/_warm/) cannot be driven into host
root by pid reuse (issue 34, B1; docs/security.md, "Channels from a
container to the host").

The attack: a client connects to the warm socket and exits at once; its pid
is freed, and a host root process (unconfined: all capabilities, no seccomp
filter) takes it; the client's connection, kept open by another process,
then asks for a worker. A relay that trusts the pid the kernel recorded at
connect() (SO_PEERCRED) makes the worker in the image of the process that
now holds it: host root. This test makes that happen deterministically:
the pid goes to a `sleep` forked right after writing pid-1 into
/proc/sys/kernel/ns_last_pid (retried a bounded number of times if another
fork on the machine takes it first), then the stale connection asks for a
worker that writes its own Uid, CapEff and Seccomp to a file. It must be
answered cold, with no worker.

And the warm start still works, without telling a host pid into a PID
namespace:
  - a live client running as nobody gets a warm worker with its uid and no
    capabilities, and the pid it is told is the worker's;
  - a client in a PID namespace of its own is told the worker's pid as its
    namespace sees it, not the host's.

Needs root (ns_last_pid, setresuid, unshare). Starts its own server with
the build's python/ directory (--pythonpath: a directory holding
edt/_warm/, so an older copy can be tested too); every process it starts
is ended, and its directory removed, pass or fail.
  warm_pid_reuse_test.py --pythonpath build/python
"""
import argparse
import array
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

PYTHON = "/usr/bin/python3"
NOBODY = 65534
CLONE_NEWPID = 0x20000000
TRIES = 50  # to make a process take a freed pid before another fork on the machine does
TIMEOUT = 30.0

# The worker: what it is, as JSON in the file argv[1].
REPORT = """\
import json, os, sys
status = {k: v.split() for k, _, v in (l.partition(":") for l in open("/proc/self/status"))}
with open(sys.argv[1], "w") as f:
    json.dump({"pid": os.getpid(), "Uid": status["Uid"], "CapEff": status["CapEff"][0],
               "Seccomp": status["Seccomp"][0], "NSpid": status["NSpid"]}, f)
"""


class Failure(Exception):
    pass


def wait_for(condition, what, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise Failure("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(0.01)


class WarmServer:
    def __init__(self, directory, pythonpath):
        self.socket = os.path.join(directory, "python.sock")
        self.script = os.path.join(directory, "report.py")
        self.log = os.path.join(directory, "server.log")
        self.env = dict(os.environ, PYTHONPATH=pythonpath)
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([PYTHON, "-m", "edt._warm", "--socket", self.socket, "--preload", ""],
                                         env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        wait_for(lambda: "serving on" in self.read_log() or self.proc.poll() is not None, "the warm server")
        if self.proc.poll() is not None:
            raise Failure("the warm server did not start: " + self.read_log())

    def read_log(self):
        with open(self.log) as f:
            return f.read()

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def request(self, out):
        """A worker request as edt-warm-run sends it (warm_client.cc): the
        worker writes its report to `out`."""
        env = ["%s=%s" % kv for kv in self.env.items()]
        return json.dumps({"argv": [PYTHON, self.script, out], "env": env}).encode()


def ask(conn, message):
    """Sends a request with /dev/null as the three streams; the answer, and
    once the worker started, how it ended."""
    null = os.open("/dev/null", os.O_RDWR)
    try:
        conn.sendmsg([message], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [null] * 3))])
    finally:
        os.close(null)
    conn.settimeout(TIMEOUT)
    answer = json.loads(conn.recv(65536))
    end = json.loads(conn.recv(65536)) if "started" in answer else None
    return answer, end


def in_child(body):
    """Runs body() in a forked child; its JSON result, or the error it raised."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            result = {"ok": body()}
        except BaseException as e:  # noqa: B036 (told to the parent)
            result = {"error": repr(e)}
        os.write(w, json.dumps(result).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        data = f.read()
    os.waitpid(pid, 0)
    result = json.loads(data) if data else {"error": "the child said nothing"}
    if "error" in result:
        raise Failure(result["error"])
    return result["ok"]


def read_report(out):
    with open(out) as f:
        return json.load(f)


def check_live_client(server, out_dir):
    """A live client running as nobody gets a warm worker with its
    credentials, and is told the worker's pid (it shares the PID namespace)."""
    out = os.path.join(out_dir, "nobody.json")

    def client():
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as conn:
            conn.connect(server.socket)
            return ask(conn, server.request(out))

    answer, end = in_child(client)
    if "started" not in answer:
        raise Failure("a live client was not served warm: %s" % answer)
    report = read_report(out)
    if report["Uid"][0] != str(NOBODY) or int(report["CapEff"], 16) != 0 or end != {"exit": 0}:
        raise Failure("the worker of a client running as nobody is not nobody's: %s, end %s" % (report, end))
    if answer["started"] != report["pid"]:
        raise Failure("the client was told pid %s, the worker is %s" % (answer["started"], report["pid"]))


def check_client_in_pid_namespace(server, out_dir):
    """A client in a PID namespace of its own is told the worker's pid as
    that namespace sees it: never the host's."""
    out = os.path.join(out_dir, "pidns.json")

    def client():
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_NEWPID) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWPID)")
        return in_child(lambda: ask_from_here(server, out))  # pid 1 of the new namespace

    answer, end = in_child(client)
    if "started" not in answer:
        raise Failure("a client in a PID namespace was not served warm: %s" % answer)
    report = read_report(out)
    host_pid, own_pid = report["NSpid"][0], report["NSpid"][-1]
    if len(report["NSpid"]) != 2 or str(report["pid"]) != own_pid:
        raise Failure("the worker is not in the client's PID namespace: %s" % report)
    if str(answer["started"]) != own_pid:
        raise Failure("a client in a PID namespace was told pid %s; the worker is %s there (%s on the host)" %
                      (answer["started"], own_pid, host_pid))


def ask_from_here(server, out):
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as conn:
        conn.connect(server.socket)
        return ask(conn, server.request(out))


def stale_connection(server):
    """A connection whose client connected and exited (reaped); its pid."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        try:
            conn.connect(server.socket)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    return conn, pid


def fork_onto(pid, argv):
    """A child running argv with exactly `pid`, or None if another fork took it first."""
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(pid - 1))
    child = os.fork()
    if child == 0:
        os.execv(argv[0], argv)
    if child == pid:
        return child
    os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
    return None


def check_reused_pid(server, out_dir):
    """A stale connection whose pid a host root process took is answered
    cold, and no worker runs."""
    out = os.path.join(out_dir, "reused.json")
    for _ in range(TRIES):
        conn, pid = stale_connection(server)
        holder = fork_onto(pid, ["/bin/sleep", "60"])
        if holder is None:
            conn.close()
            continue
        try:
            answer, end = ask(conn, server.request(out))
        finally:
            conn.close()
            os.kill(holder, signal.SIGKILL)
            os.waitpid(holder, 0)
        if os.path.exists(out):
            raise Failure("the worker of a connection whose pid host root took ran as %s (answer %s, end %s)" %
                          (read_report(out), answer, end))
        if "cold" not in answer:
            raise Failure("a stale connection was not answered cold: %s" % answer)
        print("pid %d (taken by host root): answered cold: %s" % (pid, answer["cold"]))
        return
    raise Failure("could not make a process take a freed pid in %d tries: the machine forks too often" % TRIES)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pythonpath", required=True, help="a directory holding edt/_warm/")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root", file=sys.stderr)
        return 1
    directory = tempfile.mkdtemp(prefix="edt-warm-reuse-")
    os.chmod(directory, 0o755)
    out_dir = os.path.join(directory, "out")
    os.mkdir(out_dir)
    os.chmod(out_dir, 0o1777)
    with open(os.path.join(directory, "report.py"), "w") as f:
        f.write(REPORT)
    server, failures = None, []
    try:
        server = WarmServer(directory, os.path.abspath(args.pythonpath))
        for check in (check_live_client, check_client_in_pid_namespace, check_reused_pid):
            try:
                check(server, out_dir)
                print("ok   %s" % check.__name__)
            except (Failure, OSError, ValueError) as e:
                failures.append("%s: %s" % (check.__name__, e))
                print("FAIL %s: %s" % (check.__name__, e))
    except Failure as e:
        failures.append(str(e))
    finally:
        if server:
            server.stop()
            if failures:
                print("server log:\n" + server.read_log())
        shutil.rmtree(directory, ignore_errors=True)
    print("FAILED: %d" % len(failures) if failures else "PASSED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
