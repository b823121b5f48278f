"""Processes a harness started and must see gone.

kill_until_gone(find, what): SIGKILLs the pids find() returns, again and
again, until it returns none; past `timeout` seconds it raises `error` naming
`what` and the pids left. A pid that is gone meanwhile is no error.
"""

import os
import signal
import time


def kill_until_gone(find, what, timeout=10, error=RuntimeError, pause=0.02):
    deadline = time.monotonic() + timeout
    while True:
        pids = find()
        if not pids:
            return
        if time.monotonic() > deadline:
            raise error(f"processes {pids} of {what} would not die")
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(pause)  # let the kernel reap them before the next look
