"""The process-wide runtime behind edt.torch: one edt._edt.Runtime (a
communicator and its engine) between init() and shutdown().

In edtrun's elastic mode (EDT_ELASTIC=1) init() makes the job's
edt._edt.ElasticJob instead; the Runtime then exists only inside
hvd.elastic.run, one per membership generation (enter_generation /
leave_generation), because ranks and peers change between generations."""

import atexit
import os
import threading

from edt.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt

_lock = threading.Lock()
_runtime = None
_elastic_job = None


def elastic_mode():
    return os.environ.get("EDT_ELASTIC") == "1"


def init():
    global _runtime, _elastic_job
    with _lock:
        from edt import _edt
        try:
            if elastic_mode():
                if _elastic_job is None:
                    _elastic_job = _edt.ElasticJob()
                return _runtime
            if _runtime is None:
                _runtime = _edt.Runtime()
        except _edt.EdtError as e:
            raise translate(e) from None
    return _runtime


def _stop(runtime):
    if runtime is not None:
        try:
            runtime.shutdown()
        except Exception:
            pass  # leaving a broken job must not raise


def shutdown():
    global _runtime
    with _lock:
        runtime, _runtime = _runtime, None
    _stop(runtime)


def elastic_job():
    if _elastic_job is None:
        raise ValueError("hvd.elastic.run needs hvd.init() first, in a job started by edtrun in elastic mode")
    return _elastic_job


def enter_generation(runtime):
    global _runtime
    with _lock:
        _runtime = runtime


def leave_generation():
    """Stops the engine of the generation that ends (every rank of a healthy
    generation does so at the same commit; a broken engine stops at once)."""
    shutdown()


def get():
    if _runtime is None:
        if _elastic_job is not None:
            raise ValueError("in elastic mode the job's ranks exist only inside a function run by hvd.elastic.run")
        raise ValueError("edt has not been initialized; call hvd.init() first")
    return _runtime


def placement():
    """(rank, size) now; (0, 1) in elastic mode outside hvd.elastic.run,
    where the next generation's reset sets the real ones."""
    if _runtime is None and _elastic_job is not None:
        return 0, 1
    rt = get()
    return rt.rank, rt.size


def is_initialized():
    return _runtime is not None or _elastic_job is not None


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


def _leave_elastic_job():
    # Before the interpreter tears down: stops the job's heartbeat and
    # watcher threads while the Python objects it holds are still valid.
    global _elastic_job
    _elastic_job = None


atexit.register(_leave_elastic_job)
atexit.register(shutdown)
