"""The elastic state objects, as in Horovod's torch/elastic/state.py:
State, ObjectState, TorchState.

A State keeps a committed copy of the training state in memory (commit()),
goes back to it after a failure (restore()) and makes every worker equal to
rank 0 (sync()). Under edtrun's elastic mode the State is registered with
the job (_attach, once: a job runs one State object) as one serialized
blob, kept by edt::elastic::State in C++; commit() then saves it there and
raises HostsUpdatedInterrupt on every rank when rank 0 saw a new
membership generation.
"""

import copy
import hashlib
import io

import torch

from edt.common.exceptions import HostsUpdatedInterrupt
from edt.torch import functions, mpi_ops
from edt.torch.elastic.sampler import ElasticSampler


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

    def _settings(self):
        # The attributes as they are: after a reset they hold the commit,
        # and what the reset callbacks set.
        return {"objects": ObjectState._state_dict(self)}

    def _load_settings(self, settings):
        self._saved_state = settings["objects"]
        self._set_attrs()


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

    def _settings(self):
        settings = super()._settings()
        if self.optimizer is not None:
            # The hyperparameters (lr, momentum ...): what a reset callback
            # scales with hvd.size(). The optimizer's state is committed.
            settings["param_groups"] = [{k: v for k, v in group.items() if k != "params"}
                                        for group in self.optimizer.param_groups]
        return settings

    def _load_settings(self, settings):
        super()._load_settings(settings)
        for group, values in zip(self.optimizer.param_groups if self.optimizer is not None else [],
                                 settings.get("param_groups", [])):
            group.update(values)

    def _replica_digest(self):
        # Parameters only: buffers (BatchNorm's running statistics) are
        # each rank's own in Horovod's training as in edt's.
        if self.model is None:
            return None
        return [(name, _digest(p)) for name, p in self.model.named_parameters()]

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


def _digest(tensor):
    t = tensor.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16; the bits are what count
        t = t.view(torch.int16)
    return hashlib.blake2b(t.reshape(-1).numpy().view("u1"), digest_size=8).hexdigest()


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
