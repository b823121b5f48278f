"""The kernel's interfaces that Python has no names for, and check(): a
failed libc call as Cold, so that the request starts cold and says why.

libc (prctl, setns, chroot, capset) through ctypes, with errno kept; the
prctl numbers the relay and the worker use; SO_PEERPIDFD (Linux 6.5),
which Python 3.11 does not name.
"""

import ctypes
import os
import socket

from edt._warm.protocol import Cold

libc = ctypes.CDLL(None, use_errno=True)
PR_SET_NAME, PR_SET_PDEATHSIG, PR_SET_KEEPCAPS, PR_CAPBSET_DROP = 15, 1, 8, 24
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE = 38, 47, 2
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
# getsockopt(SOL_SOCKET, SO_PEERPIDFD): Linux 6.5; Python 3.11 has no name
# for it. 77 is asm-generic's (x86-64, arm64, riscv64).
SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77 if os.uname().machine in ("x86_64", "aarch64", "riscv64") else None)


def check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise Cold("%s: %s" % (what, os.strerror(err)))
