"""Horovod's elastic training without a framework: the State and ObjectState
bases and run(), which edt.torch.elastic and edt.tensorflow.elastic share,
as Horovod's torch and tensorflow elastic modules share its
common/elastic.py. A framework gives run() what it needs of it as a
Framework (its broadcast of a flag and of objects, ...); nothing here
imports a framework.

State objects keep a committed copy of the training state in memory
(commit()), go back to it after a failure (restore()) and make every worker
equal to rank 0 (sync()).

Under edtrun's elastic mode (--min-np/--max-np) this is a thin layer over
edt::elastic::State and run() (include/edt/elastic.h, through
edt._edt.ElasticJob): the State object is registered with the job (_attach,
once: a job runs one State object) as a state object that keeps its
committed copy itself, in memory; commit() copies it and asks, through the
engine, whether rank 0 saw a new membership generation
(HostsUpdatedInterrupt); a failed collective (HorovodInternalError) rolls
every survivor back to its last commit. Each generation gets a fresh engine
over its own communicator; survivors keep their process and memory, and
newcomers receive the committed state of the member with the most recent
commit (committed_bytes(), then deserialize()).

Without elastic mode, run(func) calls func(state) after a sync() and rolls
back to the last commit on HorovodInternalError, but a job of fixed size
cannot re-form: run() then raises the error with a message that says so.
"""

import collections
import copy
import functools
import os
import pickle

from edt import _runtime
from edt.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt

# What run() needs of a framework:
#   name                       the state's name in the job ("edt.<name>.elastic.state")
#   broadcast_flag(int) -> int rank 0's integer, on every rank (one small collective)
#   allgather_object(obj, name=) -> list   every rank's picklable object, in rank order
#   forget_pending()           drops requests a generation cut short left behind
#   guard(func) -> func        func with the framework's collective failures raised as
#                              Horovod's exceptions (HorovodInternalError, HostsUpdatedInterrupt)
#   enter_generation()         called once a generation's Runtime is current, before func
Framework = collections.namedtuple("Framework",
                                   "name broadcast_flag allgather_object forget_pending guard enter_generation")

_attached = None  # the State registered with the elastic job


class State:
    """Horovod's elastic State: commit(), restore(), sync(), reset callbacks."""

    def __init__(self):
        self._reset_callbacks = []
        self._job = None  # edt._edt.ElasticJob once run() registered this state
        self._framework = None  # the Framework of the run() that registered it
        self._committed = False  # inside commit(): its check need not save again
        # Horovod's own elastic test script sets this before it waits on
        # _host_messages; kept so that it runs unchanged.
        self._last_updated_timestamp = 0

    @property
    def _host_messages(self):
        """Horovod's queue of host-change notices from its driver, which
        scripts poll with empty(): here empty until this worker saw a new
        membership generation announced (the next commit raises
        HostsUpdatedInterrupt)."""
        return _HostMessages(self)

    def register_reset_callbacks(self, callbacks):
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Copies the state in memory; a failure rolls back to here."""
        if self._job is not None:
            self._job.save()
        else:
            self.save()
        self._committed = True
        try:
            self.check_host_updates()
        finally:
            self._committed = False

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every rank when rank 0 has seen a
        new membership generation (all ranks leave at the same step, which
        is committed first, so the next generation starts from it). Cheaper
        than commit() when nothing changed: a loop may check every batch and
        commit less often. edtrun without elastic mode never changes membership."""
        if self._job is None:
            return
        if self._framework.broadcast_flag(1 if self._job.membership_changed else 0):
            if not self._committed:
                self._job.save()
            raise HostsUpdatedInterrupt(skip_sync=True)

    def _attach(self, job, framework):
        """Registers this state with the elastic job (once, before its run)."""
        global _attached
        if self._job is job:
            return
        if _attached is not None:
            raise ValueError("hvd.elastic.run: a job runs one State object; pass the same one every time")
        _attached = self
        self._job = job
        self._framework = framework
        job.add("edt.%s.elastic.state" % framework.name, _Registered(self))

    def serialize(self):
        """The whole state as it is now, as bytes."""
        return self._encode(self._state_dict())

    def committed_bytes(self):
        """The committed copy as bytes, for a worker that joins."""
        return self._encode(self._committed_state())

    def committed_views(self):
        """committed_bytes() as a list of buffers that the job sends one
        after the other, read where they lie (a framework's tensors need no
        copy into one bytes object)."""
        return [self.committed_bytes()]

    def deserialize(self, data):
        self._load_state(self._decode(data))

    # How a state moves to a worker that joins: pickle, unless a framework
    # has a faster way for its tensors (edt.torch's reads them in place).
    @staticmethod
    def _encode(state):
        return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def _decode(data):
        return pickle.loads(data)

    def _state_dict(self):
        raise NotImplementedError

    def _committed_state(self):
        """The committed copy, laid out as _state_dict()."""
        raise NotImplementedError

    def _restore_saved(self):
        """Puts the committed copy back."""
        self._load_state(self._committed_state())

    def _load_state(self, state):
        raise NotImplementedError

    def _placed(self, rank, size):
        """A new generation gave this worker `rank` of `size`."""

    def _generation_ended(self):
        """The engine of the generation is gone; drop what refers to it."""

    def _settings(self):
        """What reset callbacks change and the committed state does not
        carry to a newcomer (it has the old generation's values): sent after
        the callbacks, as Horovod's sync() after on_reset() sends it."""
        return None

    def _load_settings(self, settings):
        pass

    def _replica_digest(self):
        """What must be bit-identical on every rank at the end of run(), as
        [(name, digest)]; None: nothing to compare."""
        return None

    def save(self):
        raise NotImplementedError

    def restore(self):
        raise NotImplementedError

    def sync(self):
        raise NotImplementedError


class _HostMessages:
    def __init__(self, state):
        self._state = state

    def empty(self):
        job = self._state._job
        return job is None or not job.membership_changed


class ObjectState(State):
    """State made of picklable attributes: ObjectState(bcast_object,
    epoch=0, batch=0); bcast_object(obj, root_rank=, name=) is the
    framework's broadcast_object."""

    def __init__(self, bcast_object, get_rank=None, **kwargs):
        super().__init__()
        self._bcast_object = bcast_object
        self._saved_state = kwargs
        self._set_attrs()

    def _set_attrs(self):
        for name, value in self._saved_state.items():
            setattr(self, name, copy.deepcopy(value))

    def save(self):
        self._saved_state = {name: copy.deepcopy(getattr(self, name)) for name in self._saved_state}

    def restore(self):
        if self._job is not None:
            self._job.restore()  # the job's commit, through _Registered.restore()
            return
        self._restore_saved()

    def _state_dict(self):
        return {name: getattr(self, name) for name in self._saved_state}

    def _committed_state(self):
        return dict(self._saved_state)

    def _load_state(self, state):
        self._saved_state = state
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state, root_rank=0, name="elastic.object_state")
            self._set_attrs()

    def _settings(self):
        # The attributes as they are: after a reset they hold the commit,
        # and what the reset callbacks set.
        return {"objects": ObjectState._state_dict(self)}

    def _load_settings(self, settings):
        self._saved_state = settings["objects"]
        self._set_attrs()


class _Registered:
    """What edt._edt.ElasticJob calls: a State as an edt::elastic::StateObject
    that keeps its committed copy itself (commit, restore, committed_bytes)."""

    def __init__(self, state):
        self._state = state

    def serialize(self):
        return self._state.serialize()

    def deserialize(self, data):
        self._state.deserialize(data)

    def commit(self):
        self._state.save()
        return True

    def restore(self):
        self._state._restore_saved()

    def committed_bytes(self):
        return self._state.committed_bytes()

    def committed_views(self):
        return self._state.committed_views()

    def on_reset(self, rank, size):
        self._state._placed(rank, size)


def _reset():
    raise HorovodInternalError(
        "a worker failed or the hosts changed, and this job cannot re-form: it was not started by edtrun in "
        "elastic mode (--min-np/--max-np); restart the job from a checkpoint")


def _run_elastic(framework, func, state, args, kwargs):
    job = _runtime.elastic_job()
    state._attach(job, framework)
    result, resets_seen = [], [0]

    def generation(runtime):
        _runtime.enter_generation(runtime)
        returned = False
        try:
            framework.enter_generation()
            reset_here = job.resets > resets_seen[0]
            if reset_here:
                resets_seen[0] = job.resets
                state.on_reset()
            _sync_settings(framework, state, reset_here)
            result[:] = [func(state, *args, **kwargs)]
            returned = True
        finally:
            _runtime.leave_generation(keep=returned)
            if not returned:
                framework.forget_pending()
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
    _check_replicas(framework, state)
    return result[0]


def _sync_settings(framework, state, reset_here):
    """Horovod's run_fn calls state.sync() after the reset callbacks. Here
    the committed state already reached every member (the generation's
    sync); what the callbacks changed (the learning rate scaled with
    hvd.size()) comes from the lowest rank that ran them, so that a
    newcomer, which ran none, trains with the same settings. Survivors
    that ran them agree already."""
    everyone = framework.allgather_object(state._settings() if reset_here else None, name="elastic.settings")
    settings = next((s for s in everyone if s is not None), None)
    if settings is not None and not reset_here:
        state._load_settings(settings)


def _check_replicas(framework, state):
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
    everyone = framework.allgather_object(digest, name="elastic.replica_check")
    for rank, theirs in enumerate(everyone):
        differ = [name for (name, a), (_, b) in zip(everyone[0], theirs) if a != b]
        if differ:
            raise RuntimeError(
                "after hvd.elastic.run the model's parameters differ between ranks 0 and %d (%s%s): the replicas "
                "drifted apart, so the trained model depends on the rank that saves it. Look for settings or "
                "parameters a rank changes alone; EDT_ELASTIC_CHECK_REPLICAS=0 skips this check"
                % (rank, ", ".join(differ[:3]), " and %d more" % (len(differ) - 3) if len(differ) > 3 else ""))


def run_fn(func, framework):
    """Horovod's hvd.elastic.run for `framework`: func(state, ...) run
    until it returns. On HorovodInternalError rolls back to the last commit
    and re-forms the job, on HostsUpdatedInterrupt re-forms it keeping the
    state (see the module notes)."""
    func = framework.guard(func)

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        if _runtime.elastic_mode():
            return _run_elastic(framework, func, state, args, kwargs)
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
