"""Finding another container of the client's cluster, and checking that
the client may start a worker there.

Another container of the client's cluster (--containers, given by edtd):
a request that names a "host" gets its worker in that container instead:
its namespaces and root, the request's working directory, the container's
session environment (what its sshd gives a session) under the request's,
and the client's credentials and limits, as over ssh but without it. Only
a client inside a container of the same cluster may ask: the relay finds
the client's container by its PID namespace, which the client cannot
choose, among those edtd recorded for that cluster. A container's init is
the process bwrap recorded in info.json, taken by a pidfd, which counts
only if it is the init of the PID namespace bwrap recorded and started no
later than the record (a process that took the pid since started after
it). The worker prints the request's "marker" line before the command runs.

Container reads what edtd recorded on the host; find_init() takes the
container's init by a pidfd (procfs.Process); cluster_container() answers
whether the client's own container belongs to the same cluster.
"""

import json
import os
import time

from edt._warm.procfs import Process
from edt._warm.protocol import Cold


class Container:
    """A container of edtd's local backend, as edtd recorded it on the host
    in <containers>/<name>/: session.json ({"cluster", "env"}) and bwrap's
    info.json (the host pid of the sandbox's init)."""

    def __init__(self, containers, name):
        base = os.path.join(containers, name)
        try:
            with open(os.path.join(base, "session.json")) as f:
                session = json.load(f)
        except (OSError, ValueError):
            raise Cold("%s is not a container on this host" % name) from None
        self.name, self.cluster, self.env = name, session.get("cluster"), session.get("env")
        if not isinstance(self.cluster, str) or not isinstance(self.env, dict) or \
                not all(isinstance(v, str) for v in self.env.values()):
            raise Cold("%s has no valid session.json" % name)
        self.base, self.process, self.pid_ns = base, None, None

    def find_init(self):
        """The container's init, as a Process, and its PID namespace; Cold
        if it does not run. bwrap recorded the init's pid and PID namespace
        in info.json as it started it. The process now holding that pid
        counts only if it is the init of that very namespace and started no
        later than the record: a namespace's number is reused only once
        the namespace is gone, and with it that init, so a process that
        took the pid since started after the record."""
        info_path = os.path.join(self.base, "info.json")
        try:
            with open(info_path) as f:
                info = json.load(f)
            pid, pid_ns = info.get("child-pid"), info.get("pid-namespace")
            recorded = boot_time_of(os.stat(info_path).st_mtime)
            if not (isinstance(pid, int) and pid > 0 and isinstance(pid_ns, int)):
                raise ValueError("no child-pid or pid-namespace")
            process = Process(os.pidfd_open(pid), self.name)
        except (OSError, ValueError, AttributeError, Cold):
            raise Cold("%s is not running" % self.name) from None
        try:
            status = process.read("status")
            nspid = next((line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), [])
            ns = process.inode("ns/pid")
            started = start_time(process.read("stat"))
            if len(nspid) < 2 or nspid[-1] != "1" or ns != pid_ns or not recorded - 10 <= started <= recorded + 0.05:
                raise Cold("another process holds its pid")
            process.check_alive()
        except (OSError, ValueError, Cold):
            process.close()
            raise Cold("%s is not running" % self.name) from None
        self.process, self.pid_ns = process, ns
        return self

    def close(self):
        if self.process:
            self.process.close()


def start_time(stat):
    """When a process started (its /proc/<pid>/stat), in seconds of CLOCK_BOOTTIME."""
    return int(stat.rpartition(")")[2].split()[19]) / os.sysconf("SC_CLK_TCK")


def boot_time_of(wall):
    """A time of the wall clock (a file's mtime) in seconds of CLOCK_BOOTTIME."""
    return wall - (time.clock_gettime(time.CLOCK_REALTIME) - time.clock_gettime(time.CLOCK_BOOTTIME))


def cluster_container(containers, host, client):
    """The running container `host` if the client runs in a container of
    the same cluster (by its PID namespace, which it cannot choose)."""
    if not containers:
        raise Cold("this warm interpreter starts workers only in the client's own container")
    client_ns = os.fstat(client.ns["pid"]).st_ino
    if client_ns == os.stat("/proc/self/ns/pid").st_ino:
        raise Cold("only a process in a container may start a worker in another container")
    target = Container(containers, host).find_init()
    for name in os.listdir(containers):
        try:
            member = Container(containers, name)
            if member.cluster == target.cluster and member.find_init().pid_ns == client_ns:
                member.close()
                return target
            member.close()
        except Cold:
            continue
    target.close()
    raise Cold("%s is not a container of the client's cluster" % host)
