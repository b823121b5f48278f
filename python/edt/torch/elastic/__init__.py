"""Horovod's elastic API for PyTorch: run, TorchState, ObjectState,
ElasticSampler.

State objects keep a committed copy of the training state in memory
(commit()), go back to it after a failure (restore()) and make every worker
equal to rank 0 (sync()). ElasticSampler wraps edt's C++ ElasticSampler
(include/edt/elastic.h): every sample of an epoch is trained exactly once
across the job, and its state records the progress of the whole job.

run(func) calls func(state) after a sync() and, as Horovod's does, rolls
back to the last commit on HorovodInternalError. Forming a new membership
generation after a worker failed or hosts changed needs edtrun's elastic
mode, which this build does not have yet: run() then raises the error with
a message that says so, instead of retrying with peers that are gone.
"""

import copy
import functools

import torch

from edt import _runtime
from edt.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from edt.torch import functions, mpi_ops


class State:
    """Horovod's elastic State: commit(), restore(), sync(), reset callbacks."""

    def __init__(self):
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state in memory; a failure rolls back to here."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt when membership changed. edtrun
        without elastic mode never changes membership."""

    def save(self):
        raise NotImplementedError

    def restore(self):
        raise NotImplementedError

    def sync(self):
        raise NotImplementedError


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
        self._sampler.reset(mpi_ops._runtime.get().rank, mpi_ops.size())

    @property
    def epoch(self):
        return self._sampler.epoch

    def reset(self):
        rt = _runtime.get()
        self._sampler.reset(rt.rank, rt.size)

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
        self._sampler.deserialize(state["sampler"])
        self.reset()

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
        if self.model is not None:
            self.model.load_state_dict(self._saved_model)
        if self.optimizer is not None:
            self.optimizer.load_state_dict(self._saved_optimizer)
        for name, sampler in self._samplers.items():
            sampler.load_state_dict(self._saved_samplers[name])
        super().restore()

    def sync(self):
        if self.model is not None:
            functions.broadcast_parameters(self.model.state_dict(), root_rank=0)
        if self.optimizer is not None:
            functions.broadcast_optimizer_state(self.optimizer, root_rank=0)
        for name, sampler in self._samplers.items():
            sampler.load_state_dict(functions.broadcast_object(sampler.state_dict(), root_rank=0,
                                                               name="elastic.sampler." + name))
        super().sync()


def _reset():
    raise HorovodInternalError(
        "a worker failed or the hosts changed, and re-forming the job needs edtrun's elastic mode, "
        "which this build of edt does not have yet; restart the job from a checkpoint")


def run(func):
    """Decorator: runs func(state, ...) after state.sync(); on
    HorovodInternalError rolls back to the last commit and re-forms the
    job (see the module notes), on HostsUpdatedInterrupt re-forms it."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
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
