"""A warm Python interpreter that starts workers on demand.

    python3 -m edt._warm --socket PATH [--preload torch,edt.torch]

It imports the preloaded modules once (torch takes 1.5 s and 240 MB), then
waits on a Unix socket. `edt-warm-run python3 train.py ...` (edtrun puts it
in front of a Python worker's command) connects, sends its argv, environment
and its stdin/stdout/stderr, and gets a worker forked from this interpreter,
with torch already imported, in place of a fresh `python3 train.py`.

The package, by seam (each module's docstring states its contract):
  __main__    the entry point: flags, then the server; in a worker, the command
  server      preloads, listens, keeps relays forked ahead (fork safety)
  relay       one per client: request, identification, worker, supervision
  protocol    the messages, the checked Request, Cold
  peer        who asks: the client by SO_PEERPIDFD and its pinned /proc
  procfs      a process by pidfd and /proc directory; /proc's formats
  containers  another container of the client's cluster
  cgroups     a container's cgroups, which the worker joins
  worker      the forked worker becomes the client's process, in order
  seccomp     edtd's containers' filter, checked by peer, loaded by worker
  command     what the request runs, and whether warm can run it exactly
  fresh       what makes the worker look like a fresh interpreter
  run         the command run as __main__, and the interpreter's exit
  kernel      libc through ctypes, prctl numbers, SO_PEERPIDFD, check()
"""
