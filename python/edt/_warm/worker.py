"""The worker: the forked process that becomes the client's, in this order,
before it runs the command (run.py).

It joins the client's container cgroups, enters its namespaces (user
first) and root directory, and takes its resource limits, credentials,
capabilities and seccomp filter (take_credentials) before it looks at any
path the request names: as host root, its checks would see what the
client cannot. Only then, as the client, it enters another container's
working directory (for a request naming a "host"), checks the command
(command.py), takes the client's descriptors and environment, and makes
itself a fresh interpreter (fresh.py). Any step that cannot be done
exactly raises Cold: the relay tells the client, which starts cold.
"""

import os
import resource
import signal
import site
import struct
import sys

from edt._warm import seccomp
from edt._warm.cgroups import join_cgroups
from edt._warm.command import (check_interpreter, check_preloaded, check_startup_variables, module_path, take_locale,
                               venv_site)
from edt._warm.fresh import make_stdio, reset_signals, reseed, set_title, size_blas_threads
from edt._warm.kernel import (PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, PR_CAPBSET_DROP, PR_SET_KEEPCAPS,
                              PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG, check, libc)
from edt._warm.peer import NAMESPACES
from edt._warm.procfs import STATUS_FIELDS, own_namespace, read_status, read_text
from edt._warm.protocol import Cold

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/games"  # sshd's for a session without PATH


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
    venv = check_interpreter(request.argv, env, server.interpreter_id)
    if kind == "script" and not os.access(target, os.R_OK):
        raise Cold("cannot read %s" % target)
    first = os.path.dirname(os.path.realpath(target)) if kind == "script" else os.getcwd()
    path = module_path(first, env, venv)
    check_preloaded(path, server.packages)
    check_startup_variables(env)
    take_locale(env)
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
    # sys.path as a fresh interpreter with the client's environment starts
    # with (command.module_path): part of being that interpreter.
    if venv:
        # The venv's interpreter: its prefix, and its .pth files run.
        sys.prefix = sys.exec_prefix = venv
        site.addsitedir(venv_site(venv))
    sys.path[:] = path
    sys.orig_argv = list(request.argv)
    sys.argv = [target] + args if kind == "script" else ["-m"] + args
    if request.marker:
        os.write(1, (request.marker + "\n").encode())
    return kind, target


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
        seccomp.load_container_filter()
