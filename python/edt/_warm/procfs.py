"""A process read through /proc without racing pid reuse, and the parsers of
what it shows.

Process: a pidfd and the /proc/<pid> directory opened while the pidfd
showed the process running. Every read goes through that directory, which
stays bound to the process it was opened for; a caller that calls
check_alive() after its last read knows every read named that process and
no other that took its pid later. read_text, parse_status, parse_limits:
/proc's text formats; own_namespace: whether a namespace is this process's.
"""

import os
import resource
import select

from edt._warm.protocol import Cold

STATUS_FIELDS = ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp",
                 "Seccomp_filters")


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


def read_text(path):
    with open(path) as f:
        return f.read()


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


def own_namespace(fd, kind):
    """Whether `fd` (opened from /proc/<pid>/ns/<kind>) names this process's own namespace."""
    return os.fstat(fd).st_ino == os.stat("/proc/self/ns/" + kind).st_ino
