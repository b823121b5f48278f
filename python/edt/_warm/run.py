"""The worker's command, run as a fresh `python3 ...` would run it: the
script (or -m module) as __main__, its exit status or exception as Python
reports it, and the interpreter's exit as far as a program can see it.

A traceback shows the command's frames only: those of this module, which
calls the command, are cut (user_frames).
"""

import builtins
import importlib.machinery
import io
import os
import signal
import sys


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
    main.__builtins__ = builtins
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
