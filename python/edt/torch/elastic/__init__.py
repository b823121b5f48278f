"""Horovod's elastic API for PyTorch: run, TorchState, ObjectState,
ElasticSampler. As in Horovod, the state objects live in state.py and the
sampler in sampler.py; run() is here.

State objects keep a committed copy of the training state in memory
(commit()), go back to it after a failure (restore()) and make every worker
equal to rank 0 (sync()). ElasticSampler wraps edt's C++ ElasticSampler
(include/edt/elastic.h): every sample of an epoch is trained exactly once
across the job, and its state records the progress of the whole job.

Under edtrun's elastic mode (--min-np/--max-np) this is a thin layer over
edt::elastic::State and run() (include/edt/elastic.h, through
edt._edt.ElasticJob): the State object is registered with the job as one
serialized blob (torch.save of the model, optimizer, samplers and
attributes); commit() saves it in C++ and asks, through the engine, whether
rank 0 saw a new membership generation (HostsUpdatedInterrupt); a failed
collective (HorovodInternalError) rolls every survivor back to its last
commit. Each generation gets a fresh engine over its own communicator;
survivors keep their process and memory, and newcomers receive the
committed state of the member with the most recent commit.

Without elastic mode, run(func) calls func(state) after a sync() and rolls
back to the last commit on HorovodInternalError, but a job of fixed size
cannot re-form: run() then raises the error with a message that says so.
"""

import functools

from edt import _runtime
from edt.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from edt.torch import mpi_ops
from edt.torch.elastic.sampler import ElasticSampler
from edt.torch.elastic.state import ObjectState, State, TorchState


def _reset():
    raise HorovodInternalError(
        "a worker failed or the hosts changed, and this job cannot re-form: it was not started by edtrun in "
        "elastic mode (--min-np/--max-np); restart the job from a checkpoint")


def _run_elastic(func, state, args, kwargs):
    job = _runtime.elastic_job()
    state._attach(job)
    result, resets_seen = [], [0]

    def generation(runtime):
        _runtime.enter_generation(runtime)
        returned = False
        try:
            if job.resets > resets_seen[0]:
                resets_seen[0] = job.resets
                state.on_reset()
            result[:] = [func(state, *args, **kwargs)]
            returned = True
        finally:
            _runtime.leave_generation(keep=returned)
            if not returned:
                mpi_ops.forget_pending()
                state._generation_ended()

    # A Runtime kept from an earlier run() drives the communicator that
    # this run's first reset replaces: it stops first, on every rank alike.
    _runtime.shutdown()

    from edt import _edt
    try:
        stayed = job.run(generation)
    except _edt.EdtError as e:
        raise _runtime.translate(e) from None
    if not stayed:
        raise SystemExit(0)  # this worker's host left the host list: a clean end
    return result[0]


def run(func):
    """Decorator: runs func(state, ...) until it returns. On
    HorovodInternalError rolls back to the last commit and re-forms the
    job, on HostsUpdatedInterrupt re-forms it keeping the state (see the
    module notes)."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        if _runtime.elastic_mode():
            return _run_elastic(func, state, args, kwargs)
        reset_required, skip_sync = False, False
        while True:
            if reset_required:
                _reset()
                state.on_reset()
            try:
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HorovodInternalError:
                state.restore()
                skip_sync = False
            except HostsUpdatedInterrupt as e:
                skip_sync = e.skip_sync
            reset_required = True
    return wrapper


__all__ = ["run", "State", "ObjectState", "TorchState", "ElasticSampler"]
