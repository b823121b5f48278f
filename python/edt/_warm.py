"""A warm Python interpreter that starts workers on demand.

    python3 -m edt._warm --socket PATH [--preload torch,edt.torch]

It imports the preloaded modules once (torch takes 1.5 s and 240 MB), then
waits on a Unix socket. `edt-warm-run python3 train.py ...` (edtrun puts it
in front of a Python worker's command) connects, sends its argv, environment
and its stdin/stdout/stderr, and gets a worker forked from this interpreter,
with torch already imported, in place of a fresh `python3 train.py`.

The worker is made to be what a fresh process started by the client would
be: it joins the client's container cgroups (its pids, memory and CPU bounds),
enters its namespaces (mount, UTS, IPC, network, PID) and root directory,
takes its working directory, user, groups, capabilities and resource
limits, gets the client's environment, argv and standard streams,
a new session, fresh random seeds, default signal handling, and runs the
script as `__main__`. The client relays signals to it and exits with its
status. Requests that cannot be served exactly (another interpreter, Python
options other than -u, -B and -m, start-up variables that differ, a
PYTHONPATH that would import another torch, a client in its own user
namespace, in a cgroup other than the server's and a container's own, or
under a seccomp filter other than edtd's containers' (--seccomp), which
the worker loads) are answered "cold": the client then
starts the command itself, as it would without this server.

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

Fork safety: the server stays single-threaded (it checks before each fork)
and reads nothing from a client itself: it keeps four relays forked ahead,
each waiting to accept one client, so a slow or hostile client holds only
its own relay, and a client does not wait for the server to fork.

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

Protocol (SOCK_SEQPACKET, one JSON object a message):
  client -> relay  {"argv": [...], "env": ["K=V", ...]} + SCM_RIGHTS [0, 1, 2]
                   (+ "host", "cwd", "marker" for another container)
  relay -> client  {"started": pid | null} | {"cold": "reason"}
                   (pid: the worker's in the client's PID namespace)
  client -> relay  {"signal": N}                     (any number of times)
  relay -> client  {"exit": code} | {"killed": N}    (once, at the end)
"""

import argparse
import array
import ctypes
import gc
import importlib.machinery
import io
import json
import os
import resource
import select
import re
import signal
import site
import socket
import struct
import sys
import time

MAX_MESSAGE = 256 * 1024
MAX_RELAYS = 256  # connections served at once; more are closed (the client starts cold)
SPARES = 4  # relays forked ahead: as many clients at once pay no fork of the server
# Spares taken are forked again only once clients have stopped coming for
# REFILL_AFTER seconds, so that a scale's new workers do not share the CPU
# with those forks, unless fewer than REFILL_BELOW are left.
REFILL_AFTER = 1.0
REFILL_BELOW = 2
REQUEST_TIMEOUT = 10.0
HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/games"  # sshd's for a session without PATH

# Variables Python reads at start-up that a forked interpreter cannot change.
STARTUP_VARIABLES = (
    "PYTHONHASHSEED", "PYTHONOPTIMIZE", "PYTHONDEBUG", "PYTHONINSPECT", "PYTHONNOUSERSITE", "PYTHONUSERBASE",
    "PYTHONHOME", "PYTHONSAFEPATH", "PYTHONMALLOC", "PYTHONDEVMODE", "PYTHONWARNINGS", "PYTHONPLATLIBDIR",
    "PYTHONUTF8", "PYTHONCOERCECLOCALE", "PYTHONEXECUTABLE", "PYTHONTRACEMALLOC", "PYTHONPROFILEIMPORTTIME",
    "PYTHONFAULTHANDLER", "PYTHONNODEBUGRANGES", "PYTHONINTMAXSTRDIGITS", "LC_ALL", "LC_CTYPE", "LANG",
)
STATUS_FIELDS = ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp",
                 "Seccomp_filters")
NAMESPACES = ("ipc", "uts", "net", "mnt")  # user is entered first, pid by the relay

libc = ctypes.CDLL(None, use_errno=True)
PR_SET_NAME, PR_SET_PDEATHSIG, PR_SET_KEEPCAPS, PR_CAPBSET_DROP = 15, 1, 8, 24
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE = 38, 47, 2
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
# getsockopt(SOL_SOCKET, SO_PEERPIDFD): Linux 6.5; Python 3.11 has no name
# for it. 77 is asm-generic's (x86-64, arm64, riscv64).
SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77 if os.uname().machine in ("x86_64", "aarch64", "riscv64") else None)

# edtd's containers' seccomp filter (--seccomp): a client under exactly one
# filter more than the server's gets this one loaded in its worker.
container_filter = None


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class Cold(Exception):
    """The request is served by a fresh process instead; the message says why."""


def check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise Cold("%s: %s" % (what, os.strerror(err)))


# ---- messages ---------------------------------------------------------------

def send(conn, message):
    conn.sendmsg([json.dumps(message).encode()])


def receive(conn, max_fds=0):
    data, ancdata, flags, _ = conn.recvmsg(MAX_MESSAGE, socket.CMSG_SPACE(max_fds * 4) if max_fds else 0)
    fds = array.array("i")
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
        for fd in fds:
            os.close(fd)
        raise Cold("the request is larger than %d bytes" % MAX_MESSAGE)
    if not data:
        return None, list(fds)
    return json.loads(data), list(fds)


class Request:
    """The checked request: argv (list of str), env (dict), and for a worker
    in another container of the client's cluster its host, working
    directory and the line it prints before the command runs."""

    def __init__(self, message, fds):
        if len(fds) != 3:
            raise Cold("the request must carry exactly 3 descriptors (stdin, stdout, stderr), not %d" % len(fds))
        if not isinstance(message, dict):
            raise Cold("the request is not a JSON object")
        argv, env = message.get("argv"), message.get("env")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) and "\0" not in a for a in argv):
            raise Cold("'argv' must be a non-empty list of strings")
        if not isinstance(env, list) or not all(isinstance(e, str) and "=" in e and "\0" not in e for e in env):
            raise Cold("'env' must be a list of NAME=VALUE strings")
        self.argv, self.env, self.fds = argv, dict(e.split("=", 1) for e in env), fds
        self.host, self.cwd, self.marker = message.get("host"), message.get("cwd"), message.get("marker", "")
        if self.host is not None and not (isinstance(self.host, str) and HOST_NAME.fullmatch(self.host)):
            raise Cold("'host' must be a container's name")
        if self.host is not None and not (isinstance(self.cwd, str) and self.cwd.startswith("/") and "\0" not in self.cwd):
            raise Cold("'cwd' must be an absolute path")
        if not isinstance(self.marker, str) or "\n" in self.marker:
            raise Cold("'marker' must be one line")


# ---- what the worker runs ------------------------------------------------------

def parse_command(argv):
    """(options, kind, target, args) of `python3 [-u] [-B] (script | -m module) args...`."""
    options, i = set(), 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
        flag = argv[i]
        if flag == "-m":
            if i + 1 >= len(argv):
                raise Cold("-m needs a module name")
            return options, "module", argv[i + 1], argv[i + 2:]
        if flag in ("-u", "-B", "-uB", "-Bu"):
            options.update(flag[1:])
        else:
            raise Cold("the Python option %s is not served warm" % flag)
        i += 1
    if i >= len(argv):
        raise Cold("no script to run")
    return options, "script", argv[i], argv[i + 1:]


def which(program, path):
    if "/" in program:
        return program
    for directory in path.split(":"):
        candidate = os.path.join(directory or ".", program)
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    raise Cold("%s is not on PATH" % program)


def check_interpreter(argv, env, interpreter_id):
    found = os.stat(which(argv[0], env.get("PATH", os.defpath)))
    if (found.st_dev, found.st_ino) != interpreter_id:
        raise Cold("%s is not the interpreter this server runs (%s)" % (argv[0], sys.executable))


def check_startup_variables(env):
    for name in STARTUP_VARIABLES:
        if env.get(name) != os.environ.get(name):
            raise Cold("%s differs from the warm interpreter's" % name)
    for name in set(env) | set(os.environ):
        if name.startswith("TORCH_") and env.get(name) != os.environ.get(name):
            raise Cold("%s (read when torch is imported) differs from the warm interpreter's" % name)


def module_path(first, env):
    """sys.path as a fresh interpreter with `env` would have it: `first`,
    then PYTHONPATH, then the standard entries, with the user's site
    directory where site.py puts it."""
    ours = [p for p in os.environ.get("PYTHONPATH", "").split(":") if p]
    ours += [os.path.abspath(p) for p in ours]
    theirs = [p for p in env.get("PYTHONPATH", "").split(":") if p]
    base = [p for p in sys.path[1:] if p not in ours and p != site.USER_SITE]
    if site.ENABLE_USER_SITE and env.get("HOME"):
        user = os.path.join(env["HOME"], ".local/lib/python%d.%d/site-packages" % sys.version_info[:2])
        if os.path.isdir(user):
            system = [i for i, p in enumerate(base) if p in site.getsitepackages()]
            base.insert(system[0] if system else len(base), user)
    return [first] + theirs + base


def check_preloaded(path, packages):
    """Each preloaded package would be imported from the same file. Only
    entries the server's own sys.path lacks (the script's directory, the
    client's PYTHONPATH, its user site) can change that, unless the order of
    the shared ones changed: those are listed once, and a package whose name
    appears in one is looked up in full."""
    ours = set(sys.path[1:])
    shared = [p for p in path[1:] if p in ours]
    kept = set(shared)
    if shared != [p for p in sys.path[1:] if p in kept]:
        suspects = set(packages)
    else:
        suspects = set()
        for entry in (p for p in path if p not in ours):
            try:
                names = os.listdir(entry or ".")
            except OSError:
                continue
            suspects.update(n.partition(".")[0] for n in names)
    for name in sorted(suspects & set(packages)):
        module = sys.modules.get(name)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        origin = spec.origin if spec and spec.origin else None
        if module is not None and (origin is None or os.path.realpath(origin) != os.path.realpath(module.__file__)):
            raise Cold("on this PYTHONPATH %s would come from %s, not %s" % (name, origin or "nowhere", module.__file__))


# ---- becoming the client's process --------------------------------------------

class Process:
    """A process named by a pidfd, with its /proc directory opened while the
    pidfd showed it running. What is read through that directory is this
    process's and never another's that took its pid later: the directory
    stays bound to the process it was opened for (reads fail once it is
    gone), and the pidfd to the process it was made for. Callers call
    check_alive() after their last read: a process that still runs held its pid
    all along, so every read named it."""

    def __init__(self, pidfd, what):
        self.pidfd, self.what, self.dir = pidfd, what, -1
        try:
            self.pid = pidfd_pid(pidfd)
            if self.pid <= 0:  # -1: it exited; 0: it is not in our PID namespace
                raise Cold("%s exited" % what if self.pid < 0 else "%s is outside the host's PID namespace" % what)
            self.dir = os.open("/proc/%d" % self.pid, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            self.check_alive()
        except (OSError, ValueError, Cold) as e:
            self.close()
            raise e if isinstance(e, Cold) else Cold("%s exited" % what) from None

    def check_alive(self):
        if select.select([self.pidfd], [], [], 0)[0]:
            raise Cold("%s exited" % self.what)

    def open(self, name, flags=0):
        return os.open(name, os.O_RDONLY | os.O_CLOEXEC | flags, dir_fd=self.dir)

    def read(self, name):
        with open(self.open(name)) as f:
            return f.read()

    def inode(self, name):
        fd = self.open(name)
        try:
            return os.fstat(fd).st_ino
        finally:
            os.close(fd)

    def close(self):
        for fd in (self.dir, self.pidfd):
            if fd >= 0:
                os.close(fd)
        self.dir = self.pidfd = -1


def pidfd_pid(pidfd):
    """The pid of a pidfd's process in the host's PID namespace: -1 once it
    exited, 0 where that namespace does not see it."""
    for line in read_text("/proc/self/fdinfo/%d" % pidfd).splitlines():
        if line.startswith("Pid:"):
            return int(line.split()[1])
    raise Cold("the kernel does not say which process a pidfd names")


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
            if not (container_filter and self.status["Seccomp"][0] == "2" and extra == 1):
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


# ---- another container of the client's cluster ----------------------------------

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


def read_text(path):
    with open(path) as f:
        return f.read()


# ---- cgroups: a container's bounds (edtd's cgroups.h) -----------------------

BOUNDING_CONTROLLERS = {"pids", "memory", "cpu"}


def container_cgroups(text):
    """The cgroups of a /proc/<pid>/cgroup text that are a container's (edtd
    makes them under edt-<key>): {controllers: path}, "" for cgroup v2, and
    a v1 hierarchy by its name there ("cpu", or "cpu,cpuacct" where the two
    are mounted together)."""
    out = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3 or not parts[2].startswith("/edt-"):
            continue
        if parts[1] == "" or BOUNDING_CONTROLLERS & set(parts[1].split(",")):
            out[parts[1]] = parts[2]
    return out


def same_cgroups_but_a_containers(text):
    """Whether a process in cgroups `text` is where this one is, but for a
    container's own cgroups, which its worker joins."""
    mine, theirs = read_text("/proc/self/cgroup").splitlines(), text.splitlines()
    if len(mine) != len(theirs):
        return False
    edt = container_cgroups(text)
    return all(a == b or b.split(":", 2)[1] in edt for a, b in zip(mine, theirs))


def join_cgroups(text, fs_root="/sys/fs/cgroup"):
    """Moves this process into the container's cgroups of `text`."""
    for controllers, path in container_cgroups(text).items():
        if "/.." in path:
            raise Cold("a cgroup path with '..': %r" % path)
        where = fs_root + ("/" + controllers if controllers else "") + path + "/cgroup.procs"
        with open(where, "w") as f:
            f.write("0")  # the writer


def read_status(path):
    return parse_status(read_text(path))


def parse_status(text):
    fields = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name in STATUS_FIELDS:
            fields[name] = value.split()
    return fields


def parse_limits(text):
    """{RLIMIT_*: (soft, hard)} from /proc/<pid>/limits, whose rows are in
    the order of the RLIMIT_* numbers."""
    def value(text):
        return resource.RLIM_INFINITY if text == "unlimited" else int(text)
    limits = {}
    for number, line in enumerate(text.splitlines()[1:]):
        fields = line[26:].split()  # the name column is 26 wide
        if len(fields) >= 2:
            limits[number] = (value(fields[0]), value(fields[1]))
    return limits


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


def own_namespace(fd, kind):
    """Whether `fd` (opened from /proc/<pid>/ns/<kind>) names this process's own namespace."""
    return os.fstat(fd).st_ino == os.stat("/proc/self/ns/" + kind).st_ino


def same_file(a, b):
    sa, sb = os.stat(a), os.stat(b)
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def enter_namespaces(peer):
    # The user namespace first: it owns the others. Until take_credentials()
    # this process's ids are the host's root's, which it does not map.
    if not own_namespace(peer.ns["user"], "user"):
        check(libc.setns(peer.ns["user"], 0), "enter the client's user namespace")
    for kind in NAMESPACES:
        if not own_namespace(peer.ns[kind], kind):
            check(libc.setns(peer.ns[kind], 0), "enter the client's %s namespace" % kind)
    if not same_file(peer.root, "/"):
        os.fchdir(peer.root)
        check(libc.chroot(b"."), "enter the client's root directory")
    if peer.cwd is not None:
        os.fchdir(peer.cwd)


def take_credentials(peer):
    for r, limits in peer.limits.items():
        resource.prlimit(0, r, limits)
    mine = read_status("/proc/self/status")
    if all(mine.get(f) == peer.status.get(f) for f in STATUS_FIELDS):
        return
    caps = {f: int(peer.status[f][0], 16) for f in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}
    check(libc.prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0), "keep capabilities")
    # A container's processes cannot regain what they lack by exec as root:
    # the worker's bounding set is what its client holds.
    bounding = caps["CapBnd"] & (caps["CapPrm"] if peer.confine else ~0)
    for cap in range(int(read_text("/proc/sys/kernel/cap_last_cap")) + 1):
        if not bounding >> cap & 1:
            check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop capability %d" % cap)
    first_uid, first_gid = peer.first_ids  # /proc shows the host's ids; these are the namespace's
    os.setgroups([int(g) - first_gid for g in peer.status.get("Groups", [])])
    os.setresgid(*[int(g) - first_gid for g in peer.status["Gid"][:3]])
    os.setresuid(*[int(u) - first_uid for u in peer.status["Uid"][:3]])
    header = struct.pack("Ii", 0x20080522, 0)
    data = struct.pack("6I", caps["CapEff"] & 0xFFFFFFFF, caps["CapPrm"] & 0xFFFFFFFF, caps["CapInh"] & 0xFFFFFFFF,
                       caps["CapEff"] >> 32, caps["CapPrm"] >> 32, caps["CapInh"] >> 32)
    check(libc.capset(header, data), "set the client's capabilities")
    for cap in range(64):
        if caps["CapAmb"] >> cap & 1:
            check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0), "raise ambient capability %d" % cap)
    check(libc.prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0), "stop keeping capabilities")
    if peer.status.get("NoNewPrivs", ["0"])[0] == "1" or peer.confine:
        check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "set no_new_privs")
    if peer.confine:
        program = ctypes.create_string_buffer(container_filter, len(container_filter))
        fprog = SockFprog(len(container_filter) // 8, ctypes.addressof(program))
        check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0),
              "load the container's seccomp filter")


def set_title(argv, env):
    """ps and pkill -f see the worker's command, and /proc/<pid>/environ its
    environment (edtd's drain looks there for EDT_COORDINATOR), not the
    server's: written over this process's own argument and environment
    areas, as setproctitle does (call it once the environment lives
    elsewhere). What does not fit is cut: the command at the end of the
    argument area, the environment after the EDT_ variables."""
    name = os.path.basename(argv[0]).encode()[:15]
    libc.prctl(PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)
    fields = read_text("/proc/self/stat").rpartition(")")[2].split()
    arg_start, arg_end, env_start, env_end = (int(f) for f in fields[45:49])  # 48-51 in proc(5)
    title = b"\0".join(os.fsencode(a) for a in argv)[:arg_end - arg_start - 1]
    entries = sorted((os.fsencode("%s=%s" % kv) for kv in env.items()), key=lambda e: not e.startswith(b"EDT_"))
    block = b""
    for entry in entries:
        if len(block) + len(entry) + 1 > env_end - env_start:
            break
        block += entry + b"\0"
    ctypes.memset(arg_start, 0, arg_end - arg_start)
    ctypes.memmove(arg_start, title, len(title))
    ctypes.memset(env_start, 0, env_end - env_start)
    ctypes.memmove(env_start, block, len(block))


def reset_signals():
    """Signal handling as a fresh interpreter has it."""
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def reseed():
    """Fresh random state: a forked worker must not repeat its siblings' draws.
    torch's CPU generator only: the server never starts CUDA (or another
    device), so a worker's device generators start as a fresh process's."""
    import random
    random.seed()
    if "torch" in sys.modules:
        sys.modules["torch"].default_generator.seed()
    if "numpy.random" in sys.modules:
        sys.modules["numpy.random"].seed()


def make_stdio(env, unbuffered):
    """sys.stdin/stdout/stderr over the client's descriptors, buffered as Python would."""
    encoding, _, errors = (env.get("PYTHONIOENCODING") or "").partition(":")
    encoding = encoding or sys.stdout.encoding
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        raw = io.FileIO(fd, "rb" if fd == 0 else "wb", closefd=False)
        interactive = raw.isatty()
        buffered = raw if unbuffered and fd != 0 else (io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw))
        stream = io.TextIOWrapper(buffered, encoding=encoding,
                                  errors=errors or ("backslashreplace" if fd == 2 else "strict"),
                                  line_buffering=not unbuffered and (interactive or fd == 2),
                                  write_through=unbuffered and fd != 0)
        setattr(sys, name, stream)
        setattr(sys, "__%s__" % name, stream)


def become_worker(peer, request, command, server):
    """In the forked worker: the client's process, ready to run its command."""
    options, kind, target, args = command
    os.setsid()
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    join_cgroups(peer.cgroups)  # before the mount namespace hides the host's /sys/fs/cgroup
    enter_namespaces(peer)
    # The client's credentials, limits and seccomp filter before any path
    # the request names (working directory, PATH, script, PYTHONPATH) is
    # looked at: as host root, its checks would see what the client cannot.
    take_credentials(peer)
    env = request.env
    if request.host is not None:
        env = enter_directory(request, peer)
    check_interpreter(request.argv, env, server.interpreter_id)
    if kind == "script" and not os.access(target, os.R_OK):
        raise Cold("cannot read %s" % target)
    first = os.path.dirname(os.path.realpath(target)) if kind == "script" else os.getcwd()
    path = module_path(first, env)
    check_preloaded(path, server.packages)
    check_startup_variables(env)
    for i, fd in enumerate(request.fds):
        os.dup2(fd, i)
        os.close(fd)
    os.environ.clear()
    os.environ.update(env)
    size_blas_threads(env)
    set_title(request.argv, env)
    reset_signals()
    reseed()
    make_stdio(env, "u" in options or bool(env.get("PYTHONUNBUFFERED")))
    sys.dont_write_bytecode = "B" in options or bool(env.get("PYTHONDONTWRITEBYTECODE"))
    sys.path[:] = path
    sys.orig_argv = list(request.argv)
    sys.argv = [target] + args if kind == "script" else ["-m"] + args
    if request.marker:
        os.write(1, (request.marker + "\n").encode())
    return kind, target


def loaded_openblas():
    """The OpenBLAS library this process has loaded (numpy's, torch's), or None."""
    for line in read_text("/proc/self/maps").splitlines():
        path = line.split(None, 5)[-1]
        if "openblas" in os.path.basename(path) or "/openblas" in path:
            try:
                library = ctypes.CDLL(path)
                return library if hasattr(library, "openblas_set_num_threads") else None
            except OSError:
                return None
    return None


def size_blas_threads(env):
    """The server loads OpenBLAS with one thread (main()); a worker's pool is
    sized as a fresh process's would be: by its variables, else one thread
    per CPU it may run on."""
    library = loaded_openblas()
    if library is None:
        return
    wanted = next((env[k] for k in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
                   if env.get(k, "").strip().isdigit() and int(env[k]) > 0), None)
    library.openblas_set_num_threads(int(wanted) if wanted else len(os.sched_getaffinity(0)))


def enter_directory(request, peer):
    """In another container: the request's working directory, and the
    environment of a session there (the container's, then the request's)."""
    try:
        os.chdir(request.cwd)
    except OSError as e:
        raise Cold("cannot enter %s in %s: %s" % (request.cwd, request.host, e.strerror))
    env = {"PATH": DEFAULT_PATH}
    env.update(login_environment(int(peer.status["Uid"][0]) - peer.first_ids[0]))
    env.update(peer.container_env)
    env.update(request.env)
    env["PWD"] = request.cwd
    return env


def login_environment(uid):
    """USER, LOGNAME, HOME and SHELL of `uid` from this root's /etc/passwd, as sshd sets them."""
    try:
        with open("/etc/passwd") as f:
            for line in f:
                fields = line.rstrip("\n").split(":")
                if len(fields) >= 7 and fields[2] == str(uid):
                    return {"USER": fields[0], "LOGNAME": fields[0], "HOME": fields[5], "SHELL": fields[6] or "/bin/sh"}
    except OSError:
        pass
    return {}


# ---- relay: one per client ------------------------------------------------------

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


# ---- the server ---------------------------------------------------------------------

class Server:
    def __init__(self, socket_path, preload, containers=None):
        self.containers = containers
        before = set(sys.modules)
        for name in preload:
            __import__(name)
        # What a worker would otherwise load on first use, in every worker:
        # numpy's seeding (10 ms), edt's extension (75 ms).
        reseed()
        if "edt.torch" in sys.modules:
            importlib.import_module("edt._edt")
        self.packages = sorted({m.partition(".")[0] for m in set(sys.modules) - before
                                if getattr(sys.modules[m], "__file__", None) and not m.startswith("__")})
        # What the workers share stays shared: the collector leaves it alone.
        gc.collect()
        gc.freeze()
        exe = os.stat(sys.executable)
        self.interpreter_id = (exe.st_dev, exe.st_ino)
        self.path = socket_path
        if os.path.exists(socket_path):
            os.unlink(socket_path)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(socket_path)
        os.chmod(socket_path, 0o666)  # anyone may ask; the worker gets only what the asker has
        self.inode = os.stat(socket_path).st_ino
        self.listener.listen(128)
        self.pid = os.getpid()
        self.relays, self.spares = set(), set()
        # Without a pidfd of the client, its pid could name another process
        # by the time the relay reads /proc: every request then starts cold.
        self.no_peer_pidfd = peer_pidfd_missing()
        if self.no_peer_pidfd:
            print("edt._warm: %s (Linux 6.5 or later has it); every request starts cold" % self.no_peer_pidfd,
                  file=sys.stderr, flush=True)

    def close(self):
        """Stops listening; removes the socket unless a newer server bound the path since."""
        for pid in self.spares:
            os.kill(pid, signal.SIGKILL)
        self.listener.close()
        try:
            if os.stat(self.path).st_ino == self.inode:
                os.unlink(self.path)
        except FileNotFoundError:
            pass

    def reap(self):
        for pid in list(self.relays):
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                self.relays.discard(pid)
                self.spares.discard(pid)

    def serve(self):
        """Keeps SPARES relays forked ahead, each waiting for a client, until
        SIGTERM; returns (in a forked relay) what to run. A spare that took
        a client says so on a pipe; others are forked in the place of those
        taken once no client came for REFILL_AFTER seconds (at once when
        fewer than REFILL_BELOW are left)."""
        taken_r, taken_w = os.pipe()
        last_taken = 0.0
        while True:
            self.reap()
            quiet = time.monotonic() - last_taken
            wanted = SPARES if quiet >= REFILL_AFTER else REFILL_BELOW
            while len(self.spares) < wanted and len(self.relays) < MAX_RELAYS and \
                    len(os.listdir("/proc/self/task")) == 1:
                pid = os.fork()
                if pid == 0:
                    os.close(taken_r)
                    return self.spare(taken_w)
                self.relays.add(pid)
                self.spares.add(pid)
            # Without a spare (too many relays), clients are turned away: they start cold.
            waiting = [taken_r] + ([] if self.spares else [self.listener])
            refill = len(self.spares) < SPARES and quiet < REFILL_AFTER
            ready = select.select(waiting, [], [], REFILL_AFTER - quiet if refill else 1.0)[0]
            if taken_r in ready:
                last_taken = time.monotonic()
                data = os.read(taken_r, 4 * SPARES)
                self.spares.difference_update(struct.unpack("%di" % (len(data) // 4), data[:len(data) // 4 * 4]))
            if self.listener in ready:
                self.listener.accept()[0].close()

    def spare(self, taken_w):
        """A relay forked ahead: waits for one client, then serves it. It
        dies with the server until it has one."""
        os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != self.pid:
            os._exit(0)
        conn, _ = self.listener.accept()
        libc.prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0)
        os.write(taken_w, struct.pack("i", os.getpid()))
        os.close(taken_w)
        self.listener.close()
        return relay(conn, self)


# ---- the worker's command ---------------------------------------------------------

def run_worker(kind, target):
    """Runs the command as a fresh `python3 ...` would, then exits as it would."""
    try:
        run_main(kind, target)
        code = 0
    except SystemExit as e:
        code = exit_code(e.code)
    except BaseException as e:  # noqa: B036 (printed as Python prints it, without this module's frames)
        tb = user_frames(e.__traceback__)
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        code = -signal.SIGINT if isinstance(e, KeyboardInterrupt) else 1
    finish(code)


def user_frames(tb):
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    return tb


def run_main(kind, target):
    if kind == "module":
        import runpy
        runpy._run_module_as_main(target, alter_argv=True)
        return
    import types
    main = types.ModuleType("__main__")
    main.__file__ = os.path.abspath(target)
    main.__builtins__ = __builtins__
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", main.__file__)
    sys.modules["__main__"] = main
    with io.open_code(target) as f:
        code = compile(f.read(), target, "exec")
    exec(code, main.__dict__)


def exit_code(code):
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def finish(code):
    """The interpreter's exit as far as a program can see it (threads joined,
    atexit run, streams flushed), without tearing down the modules it
    shares with the server: that would write to every page and copy them."""
    import atexit
    import threading
    getattr(threading, "_shutdown", lambda: None)()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


def main():
    parser = argparse.ArgumentParser(prog="python3 -m edt._warm", description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket", required=True, help="the Unix socket to serve on")
    parser.add_argument("--preload", default="torch,edt.torch",
                        help="modules to import before serving (default: torch,edt.torch)")
    parser.add_argument("--containers",
                        help="edtd's directory of containers: a client in one of them may start a worker in "
                             "another container of its cluster")
    parser.add_argument("--seccomp", help="the seccomp filter (classic BPF) of edtd's containers")
    args = parser.parse_args()
    # OpenBLAS (numpy's, torch's) starts a thread per CPU when it is loaded,
    # and the server forks only while it has one thread: the preloaded one
    # has none, and each worker sizes its pool as a fresh process would
    # (size_blas_threads).
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    if args.seccomp:
        global container_filter
        with open(args.seccomp, "rb") as f:
            container_filter = f.read()
    server = Server(args.socket, [m for m in args.preload.split(",") if m], args.containers)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("edt._warm: serving on %s (pid %d, preloaded %s)" % (args.socket, os.getpid(), ", ".join(server.packages)),
          file=sys.stderr, flush=True)
    try:
        plan = server.serve()  # returns only in a forked worker
    except (SystemExit, KeyboardInterrupt):
        server.close()
        raise
    run_worker(*plan)


if __name__ == "__main__":
    main()
