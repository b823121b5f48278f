"""The process-wide runtime behind edt.torch: one edt._edt.Runtime (a
communicator and its engine) between init() and shutdown()."""

import atexit
import threading

from edt.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt

_lock = threading.Lock()
_runtime = None


def init():
    global _runtime
    with _lock:
        if _runtime is None:
            from edt import _edt
            try:
                _runtime = _edt.Runtime()
            except _edt.EdtError as e:
                raise translate(e) from None
    return _runtime


def shutdown():
    global _runtime
    with _lock:
        runtime, _runtime = _runtime, None
    if runtime is not None:
        try:
            runtime.shutdown()
        except Exception:
            pass  # leaving a broken job must not raise


def get():
    if _runtime is None:
        raise ValueError("edt has not been initialized; call hvd.init() first")
    return _runtime


def is_initialized():
    return _runtime is not None


def translate(error, submitting=False):
    """An edt._edt.EdtError as the exception Horovod raises for it: a
    request refused before any communication is a ValueError; a failure
    while it ran (a peer died, the ranks disagreed) is HorovodInternalError,
    as Horovod's synchronize() raises it."""
    code, message = error.args if len(error.args) == 2 else ("Internal", str(error))
    if code == "HostsUpdated":
        return HostsUpdatedInterrupt()
    if submitting and code == "InvalidArgument":
        return ValueError(message)
    return HorovodInternalError(message)


atexit.register(shutdown)
