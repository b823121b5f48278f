"""Horovod's elastic API for PyTorch: run, TorchState, ObjectState,
ElasticSampler.

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

import copy
import functools
import io

import torch

from edt import _runtime
from edt.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from edt.torch import functions, mpi_ops


_attached = None  # the State registered with the elastic job


class State:
    """Horovod's elastic State: commit(), restore(), sync(), reset callbacks."""

    def __init__(self):
        self._reset_callbacks = []
        self._job = None  # edt._edt.ElasticJob once run() registered this state
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
        """Saves the state in memory; a failure rolls back to here."""
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
        flag = torch.tensor([1 if self._job.membership_changed else 0], dtype=torch.int32)
        if mpi_ops.broadcast(flag, root_rank=0, name="elastic.check_host_updates").item():
            if not self._committed:
                self._job.save()
            raise HostsUpdatedInterrupt(skip_sync=True)

    def _attach(self, job):
        """Registers this state with the elastic job (once, before its run)."""
        global _attached
        if self._job is job:
            return
        if _attached is not None:
            raise ValueError("hvd.elastic.run: a job runs one State object; pass the same one every time")
        _attached = self
        self._job = job
        job.add("edt.torch.elastic.state", _Registered(self))

    def serialize(self):
        """The whole state as bytes (the C++ commit keeps these)."""
        buffer = io.BytesIO()
        torch.save(self._state_dict(), buffer)
        return buffer.getvalue()

    def deserialize(self, data):
        self._load_state(torch.load(io.BytesIO(data)))

    def _state_dict(self):
        raise NotImplementedError

    def _load_state(self, state):
        raise NotImplementedError

    def _placed(self, rank, size):
        """A new generation gave this worker `rank` of `size`."""

    def _generation_ended(self):
        """The engine of the generation is gone; drop what refers to it."""

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
    """State made of picklable attributes: ObjectState(epoch=0, batch=0)."""

    def __init__(self, bcast_object=functions.broadcast_object, get_rank=None, **kwargs):
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
            self._job.restore()  # the C++ commit, through deserialize()
            return
        self._set_attrs()

    def _state_dict(self):
        return {name: getattr(self, name) for name in self._saved_state}

    def _load_state(self, state):
        self._saved_state = state
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state, root_rank=0, name="elastic.object_state")
            self._set_attrs()


class ElasticSampler(torch.utils.data.Sampler):
    """Horovod's ElasticSampler: this worker's share of the samples of the
    epoch not yet processed by the job. Call record_batch() after every
    step (on every worker), set_epoch() at each new epoch."""

    def __init__(self, dataset, shuffle=True, seed=0):
        from edt import _edt
        self.dataset = dataset
        self._sampler = _edt.ElasticSampler(len(dataset), seed, shuffle)
        self.reset()

    def set_epoch(self, epoch):
        self._sampler.set_epoch(epoch)
        self.reset()

    @property
    def epoch(self):
        return self._sampler.epoch

    def reset(self, rank=None, size=None):
        if rank is None:
            rank, size = _runtime.placement()
        self._sampler.reset(rank, size)

    def record_batch(self, batch_idx, batch_size):
        """Every worker finished its batch of `batch_size` samples."""
        self._sampler.record_batch(batch_size)

    def get_indices(self, batch_idx, batch_size):
        shard = self._sampler.shard()
        return shard[batch_idx * batch_size:(batch_idx + 1) * batch_size]

    def steps_left(self, batch_size):
        return self._sampler.steps_left(batch_size)

    @property
    def processed_count(self):
        return self._sampler.processed_count

    def state_dict(self):
        return {"sampler": self._sampler.serialize()}

    def load_state_dict(self, state):
        # Re-partitions with the sampler's current rank and size.
        self._sampler.deserialize(state["sampler"])

    def __iter__(self):
        return iter(self._sampler.shard())

    def __len__(self):
        return len(self._sampler.shard())


class TorchState(ObjectState):
    """The state of a PyTorch job: model, optimizer, ElasticSampler and any
    other attributes (epoch=..., batch=...)."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        self.model = model
        self.optimizer = optimizer
        self._samplers = {k: v for k, v in kwargs.items() if isinstance(v, ElasticSampler)}
        for name, sampler in self._samplers.items():
            setattr(self, name, sampler)
        plain = {k: v for k, v in kwargs.items() if k not in self._samplers}
        super().__init__(**plain)
        self._saved_model = self._saved_optimizer = None
        self._saved_samplers = {}
        self.save()

    def save(self):
        if self.model is not None:
            self._saved_model = copy.deepcopy(self.model.state_dict())
        if self.optimizer is not None:
            self._saved_optimizer = copy.deepcopy(self.optimizer.state_dict())
        self._saved_samplers = {n: s.state_dict() for n, s in self._samplers.items()}
        super().save()

    def restore(self):
        if self._job is not None:
            super().restore()
            return
        if self.model is not None:
            self.model.load_state_dict(self._saved_model)
        if self.optimizer is not None:
            self.optimizer.load_state_dict(self._saved_optimizer)
        for name, sampler in self._samplers.items():
            sampler.load_state_dict(self._saved_samplers[name])
        super().restore()

    def _state_dict(self):
        state = {"objects": super()._state_dict(),
                 "samplers": {n: s.state_dict() for n, s in self._samplers.items()}}
        if self.model is not None:
            state["model"] = self.model.state_dict()
        if self.optimizer is not None:
            state["optimizer"] = self.optimizer.state_dict()
        return state

    def _load_state(self, state):
        if self.model is not None:
            self.model.load_state_dict(state["model"])
        if self.optimizer is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        for name, sampler in self._samplers.items():
            sampler.load_state_dict(state["samplers"][name])
        super()._load_state(state["objects"])

    def _placed(self, rank, size):
        for sampler in self._samplers.values():
            sampler.reset(rank, size)

    def _generation_ended(self):
        # A step cut short by a failure left gradient requests of the old
        # engine behind; the next generation starts its steps afresh.
        reset = getattr(self.optimizer, "_forget_pending", None)
        if reset is not None:
            reset()

    def sync(self):
        if self.model is not None:
            functions.broadcast_parameters(self.model.state_dict(), root_rank=0)
        if self.optimizer is not None:
            functions.broadcast_optimizer_state(self.optimizer, root_rank=0)
        for name, sampler in self._samplers.items():
            sampler.load_state_dict(functions.broadcast_object(sampler.state_dict(), root_rank=0,
                                                               name="elastic.sampler." + name))
        super().sync()


class _Registered:
    """What edt._edt.ElasticJob calls: a State as an edt::elastic::StateObject."""

    def __init__(self, state):
        self._state = state

    def serialize(self):
        return self._state.serialize()

    def deserialize(self, data):
        self._state.deserialize(data)

    def on_reset(self, rank, size):
        self._state._placed(rank, size)


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
