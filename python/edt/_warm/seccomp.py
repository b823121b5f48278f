"""edtd's containers' seccomp filter (--seccomp): read once by main() before
the server forks; the relay checks that a client is under it (Peer), and
the worker loads it after taking the client's credentials.
"""

import ctypes

from edt._warm.kernel import PR_SET_SECCOMP, SECCOMP_MODE_FILTER, check, libc

# edtd's containers' seccomp filter (--seccomp): a client under exactly one
# filter more than the server's gets this one loaded in its worker.
container_filter = None


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def read_container_filter(path):
    """Reads the filter (classic BPF) from `path`, before the server forks."""
    global container_filter
    with open(path, "rb") as f:
        container_filter = f.read()


def load_container_filter():
    """Loads the filter in this process (no_new_privs is already set)."""
    program = ctypes.create_string_buffer(container_filter, len(container_filter))
    fprog = SockFprog(len(container_filter) // 8, ctypes.addressof(program))
    check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0),
          "load the container's seccomp filter")
