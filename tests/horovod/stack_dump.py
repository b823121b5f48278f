"""pytest plugin for run_test_torch.py: SIGUSR2 makes a rank write every
thread's Python stack to $EDT_STACK_DIR/stacks-rank<R>-<pid>.txt. The
faulthandler writes from the signal handler itself, so it answers while the
rank is blocked in native code, where a Python-level handler never runs."""
import faulthandler
import os
import signal

_stack_file = None


def pytest_configure(config):
    global _stack_file
    directory = os.environ.get("EDT_STACK_DIR")
    if directory and _stack_file is None:
        name = "stacks-rank%s-%d.txt" % (os.environ.get("HOROVOD_RANK", "unknown"), os.getpid())
        _stack_file = open(os.path.join(directory, name), "w")
        faulthandler.register(signal.SIGUSR2, file=_stack_file, all_threads=True)


def pytest_runtest_logstart(nodeid, location):
    """Names the running test at the head of the stack file."""
    if _stack_file is not None:
        _stack_file.seek(0)
        _stack_file.truncate()
        _stack_file.write("running %s\n" % nodeid)
        _stack_file.flush()
