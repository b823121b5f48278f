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
edt._edt.ElasticJob): the State object is registered with the job as a
state object that keeps its committed copy itself, in memory (state.py);
commit() copies it and asks, through the engine, whether rank 0 saw a new
membership generation (HostsUpdatedInterrupt); a failed
collective (HorovodInternalError) rolls every survivor back to its last
commit. Each generation gets a fresh engine over its own communicator;
survivors keep their process and memory, and newcomers receive the
committed state of the member with the most recent commit.

Without elastic mode, run(func) calls func(state) after a sync() and rolls
back to the last commit on HorovodInternalError, but a job of fixed size
cannot re-form: run() then raises the error with a message that says so.
"""

import functools
import os

from edt import _runtime
from edt.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from edt.torch import functions, mpi_ops
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
            reset_here = job.resets > resets_seen[0]
            if reset_here:
                resets_seen[0] = job.resets
                state.on_reset()
            _sync_settings(state, reset_here)
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
    _check_replicas(state)
    return result[0]


def _sync_settings(state, reset_here):
    """Horovod's run_fn calls state.sync() after the reset callbacks. Here
    the committed state already reached every member (the generation's
    sync); what the callbacks changed (the learning rate scaled with
    hvd.size()) comes from the lowest rank that ran them, so that a
    newcomer, which ran none, trains with the same settings. Survivors
    that ran them agree already."""
    everyone = functions.allgather_object(state._settings() if reset_here else None, name="elastic.settings")
    settings = next((s for s in everyone if s is not None), None)
    if settings is not None and not reset_here:
        state._load_settings(settings)


def _check_replicas(state):
    """Replicas that drifted apart (a rank trained with other settings, or
    changed its parameters alone) make run() raise instead of returning
    as if the job succeeded: Horovod does not check, and its jobs then end
    with silently different models. EDT_ELASTIC_CHECK_REPLICAS=0 skips it
    (for a model whose parameters are meant to differ between ranks)."""
    if os.environ.get("EDT_ELASTIC_CHECK_REPLICAS", "1") == "0":
        return
    digest = state._replica_digest()
    if digest is None:
        return
    everyone = functions.allgather_object(digest, name="elastic.replica_check")
    for rank, theirs in enumerate(everyone):
        differ = [name for (name, a), (_, b) in zip(everyone[0], theirs) if a != b]
        if differ:
            raise RuntimeError(
                "after hvd.elastic.run the model's parameters differ between ranks 0 and %d (%s%s): the replicas "
                "drifted apart, so the trained model depends on the rank that saves it. Look for settings or "
                "parameters a rank changes alone; EDT_ELASTIC_CHECK_REPLICAS=0 skips this check"
                % (rank, ", ".join(differ[:3]), " and %d more" % (len(differ) - 3) if len(differ) > 3 else ""))


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
