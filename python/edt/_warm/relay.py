"""The relay: one forked process per client, which reads its request,
identifies it (peer.py), forks its worker (worker.py) and supervises it.

A relay serves exactly one client and holds nothing of another: a slow or
hostile client holds only its own relay. It answers cold (and exits)
whenever the request cannot be served exactly; otherwise it tells the
client the worker's pid as the client's PID namespace sees it (or none,
for a worker in another container: never a host pid), relays the client's
signals to the worker's process group, and reports how the worker ended.
A worker whose client is gone is killed.
"""

import os
import select
import signal

from edt._warm.command import parse_command
from edt._warm.containers import cluster_container
from edt._warm.kernel import check, libc
from edt._warm.peer import Peer
from edt._warm.procfs import own_namespace
from edt._warm.protocol import Cold, Request, receive, send
from edt._warm.worker import become_worker

REQUEST_TIMEOUT = 10.0


def relay(conn, server):
    """Serves one client. Returns (in the forked worker only) what to run."""
    try:
        conn.settimeout(REQUEST_TIMEOUT)
        request = Request(*receive(conn, 3))
        command = parse_command(request.argv)
        if server.no_peer_pidfd:
            raise Cold(server.no_peer_pidfd)
        peer = Peer(conn)
        if request.host is not None:
            peer.enter_container(cluster_container(server.containers, request.host, peer))
        if not own_namespace(peer.ns["pid"], "pid"):
            check(libc.setns(peer.ns["pid"], 0), "enter the client's PID namespace")
    except Exception as e:  # noqa: B902 (whatever it is, the client starts cold and says why)
        answer_cold(conn, e if isinstance(e, (Cold, OSError)) else "%r" % e)
    report_r, report_w = os.pipe()
    worker = os.fork()
    if worker == 0:
        os.close(report_r)
        conn.close()
        try:
            plan = become_worker(peer, request, command, server)
        except BaseException as e:  # noqa: B036 (told to the client, which starts cold)
            os.write(report_w, ("cold: " + str(e) if isinstance(e, Cold) else "cold: %r" % e).encode())
            os._exit(0)
        # Its pid in its own PID namespace: the client's, unless it runs in another container.
        os.write(report_w, b"ok %d" % os.getpid())
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # the relay's and the server's: nothing leaks
        return plan
    os.close(report_w)
    for fd in request.fds:
        os.close(fd)
    supervise(conn, worker, report_r, request.host is None)


def answer_cold(conn, why):
    try:
        send(conn, {"cold": str(why)})
    except OSError:
        pass
    os._exit(0)


def supervise(conn, worker, report_r, visible):
    """Tells the client whether its worker runs, relays its signals, reports
    its end. The client learns the worker's pid as its own PID namespace
    sees it (`visible`: the worker is in it), else none; never the host's."""
    report = b""
    while True:
        chunk = os.read(report_r, 4096)
        if not chunk:
            break
        report += chunk
    ok, _, seen_pid = report.decode(errors="replace").partition(" ")
    if ok != "ok" or not seen_pid.isdigit():
        os.waitpid(worker, 0)
        answer_cold(conn, report.decode(errors="replace").partition("cold: ")[2] or "the worker did not start")
    conn.settimeout(None)
    pidfd = os.pidfd_open(worker)  # the relay's child, not reaped: the pid is its
    try:
        send(conn, {"started": int(seen_pid) if visible else None})
        while pidfd not in select.select([conn, pidfd], [], [])[0]:
            message, _ = receive(conn)
            if not isinstance(message, dict):
                break  # the client is gone (or speaks nonsense): its worker goes too
            sig = message.get("signal")
            if isinstance(sig, int) and 0 < sig < signal.NSIG:
                kill_group(worker, sig)
    except (OSError, ValueError, Cold):
        pass
    if not select.select([pidfd], [], [], 0)[0]:
        kill_group(worker, signal.SIGKILL)
    _, status = os.waitpid(worker, 0)
    try:
        send(conn, {"killed": os.WTERMSIG(status)} if os.WIFSIGNALED(status) else {"exit": os.WEXITSTATUS(status)})
    except OSError:
        pass
    os._exit(0)


def kill_group(pid, sig):
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
