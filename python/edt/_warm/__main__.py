"""python3 -m edt._warm: the warm interpreter's entry point (edtd's
warm_interpreter.cc and the tests start it so). Reads the flags, loads the
containers' seccomp filter, preloads and serves (server.py); in a forked
worker, runs the client's command (run.py) and exits with its status.
"""

import argparse
import os
import signal
import sys

from edt import _warm
from edt._warm import seccomp
from edt._warm.run import run_worker
from edt._warm.server import Server


def main():
    parser = argparse.ArgumentParser(prog="python3 -m edt._warm", description=_warm.__doc__.split("\n\n")[0])
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
        seccomp.read_container_filter(args.seccomp)
    server = Server(args.socket, [m for m in args.preload.split(",") if m], args.containers)
    server.stop_on(signal.SIGTERM)
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
