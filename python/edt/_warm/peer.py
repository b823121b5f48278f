"""The client that connected, identified by the kernel and read through
/proc, never by a pid another process may hold.

Who asks: the relay takes a pidfd of the process that connected from the
kernel (SO_PEERPIDFD, Linux 6.5), not its pid (SO_PEERCRED's pid is a
number that another process may hold by the time it is read: a client
that connects and exits at once would otherwise have its worker made in
the image of whatever process took its pid next, such as host root). It
reads the client's /proc/<pid> through a directory opened while the pidfd
showed it running, and checks that it still runs after the last read: a
process that runs held its pid all along. A client that exited is answered
cold, and so is every request where the kernel has no SO_PEERPIDFD (the
server says so once in its log). The worker takes the client's credentials
and seccomp filter before it looks at any path the request names. The
client learns the worker's pid as its own PID namespace sees it, or none
(a worker in another container): never a host pid.

Peer holds what the worker needs of the client (its namespaces, root,
working directory, status, limits, cgroups, the first host ids of its
user namespace, whether it is under the containers' seccomp filter), all
read before the final check_alive(); enter_container() aims it at another
container of the client's cluster instead (containers.py).
"""

import os
import socket
import struct

from edt._warm import seccomp
from edt._warm.cgroups import same_cgroups_but_a_containers
from edt._warm.kernel import SO_PEERPIDFD
from edt._warm.procfs import Process, parse_limits, parse_status, read_status
from edt._warm.protocol import Cold

NAMESPACES = ("ipc", "uts", "net", "mnt")  # user is entered first, pid by the relay


def peer_pidfd(conn):
    """A pidfd of the very process that connected (recorded by the kernel at
    connect(), so never another that took its pid since)."""
    if SO_PEERPIDFD is None:
        raise Cold("this platform has no SO_PEERPIDFD")
    try:
        return struct.unpack("i", conn.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD, 4))[0]
    except OSError as e:
        raise Cold("no pidfd of the client (SO_PEERPIDFD): %s" % e.strerror) from None


def peer_pidfd_missing():
    """Why this kernel gives no SO_PEERPIDFD (before Linux 6.5), or None."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        os.close(peer_pidfd(a))
        return None
    except Cold as e:
        return str(e)
    finally:
        a.close()
        b.close()


class Peer:
    """What the relay learned of the client, as descriptors opened in the
    host's view, through a pidfd of the process that connected: a client
    that exited (and whose pid another process may hold) is answered cold."""

    def __init__(self, conn):
        self.process = Process(peer_pidfd(conn), "the client")
        p = self.process
        self.status = parse_status(p.read("status"))
        self.ns = {kind: p.open("ns/" + kind) for kind in NAMESPACES + ("pid", "user")}
        self.root = p.open("root", os.O_DIRECTORY)
        self.cwd = p.open("cwd", os.O_DIRECTORY)
        self.limits = parse_limits(p.read("limits"))
        self.first_ids = first_ids(p)
        self.cgroups = p.read("cgroup")
        if not same_cgroups_but_a_containers(self.cgroups):
            raise Cold("the client is in another cgroup")
        # Filters are inherited and never removed: a client under the
        # server's filters and no more has as many as the server; one more
        # is the filter edtd gives its containers, which the worker loads.
        mine = read_status("/proc/self/status")
        self.confine = False
        if any(self.status.get(f) != mine.get(f) for f in ("Seccomp", "Seccomp_filters")):
            extra = int(self.status["Seccomp_filters"][0]) - int(mine["Seccomp_filters"][0])
            if not (seccomp.container_filter and self.status["Seccomp"][0] == "2" and extra == 1):
                raise Cold("the client runs under a seccomp filter the warm interpreter does not have")
            self.confine = True
        # Everything above named the process that asked if it still runs.
        p.check_alive()
        self.container_env = {}

    def enter_container(self, container):
        """Aims the worker at another container: its namespaces and root,
        with the client's credentials and limits (the containers of a
        cluster are made alike), in a working directory the request names."""
        p = container.process
        ns = {kind: p.open("ns/" + kind) for kind in NAMESPACES + ("pid", "user")}
        root = p.open("root", os.O_DIRECTORY)
        cgroups = p.read("cgroup")
        if not same_cgroups_but_a_containers(cgroups):
            raise Cold("%s is in a cgroup of its own" % container.name)
        ids = first_ids(p)
        if os.fstat(ns["pid"]).st_ino != container.pid_ns:
            raise Cold("%s stopped" % container.name)
        p.check_alive()
        for fd in list(self.ns.values()) + [self.root, self.cwd]:
            os.close(fd)
        self.ns, self.root, self.cwd, self.container_env = ns, root, None, container.env
        self.cgroups, self.first_ids = cgroups, ids


def first_ids(process):
    """The host's first uid and gid of the user namespace of a Process: 0, 0
    in ours; a container's of edtd's --user-namespaces maps its ids from 0
    as one range ("0 FIRST COUNT")."""
    firsts = []
    for name in ("uid_map", "gid_map"):
        rows = [line.split() for line in process.read(name).splitlines()]
        if len(rows) != 1 or len(rows[0]) != 3 or rows[0][0] != "0":
            raise Cold("the client's user namespace maps its ids otherwise than edtd's containers: %r" % rows)
        firsts.append(int(rows[0][1]))
    return tuple(firsts)
