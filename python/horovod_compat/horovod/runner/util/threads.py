"""horovod.runner.util.threads: the thread helpers Horovod's own test
utilities import."""

import threading


def in_thread(target, args=(), name=None, daemon=True, silent=False):
    """Runs target(*args) on a new thread and returns the started thread.
    silent=True: an exception of target is swallowed instead of printed."""
    if silent:
        def run():
            try:
                target(*args)
            except BaseException:
                pass
        thread = threading.Thread(target=run, name=name, daemon=daemon)
    else:
        thread = threading.Thread(target=target, args=args, name=name, daemon=daemon)
    thread.start()
    return thread
