"""What makes a forked worker look and behave as a fresh interpreter: its
title and environment in ps and /proc, default signal handling, fresh
random seeds, standard streams over the client's descriptors, and an
OpenBLAS pool sized as a fresh process would size it.
"""

import ctypes
import io
import os
import signal
import sys

from edt._warm.kernel import PR_SET_NAME, libc
from edt._warm.procfs import read_text


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
