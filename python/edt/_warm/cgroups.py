"""A container's cgroups (edtd's cgroups.h): which of a process's cgroups are
a container's bounds (pids, memory, CPU under edt-<key>), whether a client
is where the server is but for those, and joining them (the worker, while
it still sees the host's /sys/fs/cgroup).
"""

from edt._warm.procfs import read_text
from edt._warm.protocol import Cold

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
