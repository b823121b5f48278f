"""The elastic state objects, as in Horovod's torch/elastic/state.py:
State, ObjectState, TorchState.

A State keeps a committed copy of the training state in memory (commit()),
goes back to it after a failure (restore()) and makes every worker equal to
rank 0 (sync()). Under edtrun's elastic mode the State is registered with
the job (_attach, once: a job runs one State object) as an
edt::elastic::StateObject that keeps its committed copy itself; commit()
then commits it there and raises HostsUpdatedInterrupt on every rank when
rank 0 saw a new membership generation.

The committed copy is in memory, as Horovod's: tensors are copied into
buffers kept from the previous commit (no allocation, no serialization:
a commit costs a memory copy of the state), other values are deep-copied.
The copy is serialized only when it moves to a worker that joins: a pickled
outline of the state, then each tensor's raw bytes, which the joiner reads
in place (torch.frombuffer); torch.save's zip format would cost a CRC and a
copy of every byte on each side.
"""

import copy
import hashlib
import io
import pickle
import struct
import warnings

import torch

from edt.common import elastic as _common
from edt.torch import functions
from edt.torch.elastic.sampler import ElasticSampler


class State(_common.State):
    """Horovod's elastic State: commit(), restore(), sync(), reset callbacks
    (edt.common.elastic), its tensors moved to a joiner by _to_bytes."""

    @staticmethod
    def _encode(state):
        return _to_bytes(state)

    @staticmethod
    def _decode(data):
        return _from_bytes(data)

    def committed_views(self):
        return _to_views(self._committed_state())


class ObjectState(State, _common.ObjectState):
    """State made of picklable attributes: ObjectState(epoch=0, batch=0)."""

    def __init__(self, bcast_object=functions.broadcast_object, get_rank=None, **kwargs):
        _common.ObjectState.__init__(self, bcast_object, get_rank, **kwargs)


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
        self._saved_tensors = {}  # "model", "optimizer": state_dicts whose tensors are buffers of ours
        self._saved_samplers = {}
        self.save()

    def save(self):
        self._saved_tensors = _copy_into(self._tensor_state(), self._saved_tensors)
        self._saved_samplers = {n: s.state_dict() for n, s in self._samplers.items()}
        super().save()

    def _tensor_state(self):
        state = {}
        if self.model is not None:
            state["model"] = self.model.state_dict()
        if self.optimizer is not None:
            state["optimizer"] = self.optimizer.state_dict()
        return state

    def _state_dict(self):
        return dict(self._tensor_state(), objects=super()._state_dict(),
                    samplers={n: s.state_dict() for n, s in self._samplers.items()})

    def _committed_state(self):
        return dict(self._saved_tensors, objects=super()._committed_state(), samplers=dict(self._saved_samplers))

    def _load_state(self, state):
        # From the committed copy or a joiner's received bytes, copied into
        # the model's parameters and the optimizer's state.
        if self.model is not None:
            self.model.load_state_dict(state["model"])
        if self.optimizer is not None:
            _load_optimizer(self.optimizer, state["optimizer"])
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


def _map(value, leaf, previous=None):
    """`value` (state_dicts: dicts, lists and tuples of tensors and plain
    values) copied, with each leaf replaced by leaf(it, what is at its place
    in `previous`, or None). Dicts keep their type and attributes (a
    state_dict's _metadata)."""
    if isinstance(value, dict):
        before = previous if isinstance(previous, dict) else {}
        copied = copy.copy(value)
        if hasattr(value, "_metadata"):
            copied._metadata = copy.deepcopy(value._metadata)
        for key, item in value.items():
            copied[key] = _map(item, leaf, before.get(key))
        return copied
    if type(value) in (list, tuple):
        before = previous if type(previous) is type(value) and len(previous) == len(value) else [None] * len(value)
        return type(value)(_map(v, leaf, p) for v, p in zip(value, before))
    return leaf(value, previous)


def _copy_into(value, previous):
    """A copy of `value` whose tensors are copied into those of `previous`,
    an earlier copy, where shape, dtype and device match (new ones where
    not), so that a commit allocates nothing once the state's layout is
    stable."""
    return _map(value, _copy_leaf, previous)


def _copy_leaf(value, previous):
    if not isinstance(value, torch.Tensor):
        return copy.deepcopy(value)
    if (isinstance(previous, torch.Tensor) and previous.shape == value.shape and previous.dtype == value.dtype
            and previous.device == value.device and previous.layout == value.layout == torch.strided):
        with torch.no_grad():
            return previous.copy_(value)
    return value.detach().clone()


def _cloned(value):
    return _copy_into(value, None)


def _load_optimizer(optimizer, saved):
    """optimizer.load_state_dict(saved) without its copies: each saved
    tensor is copied into the optimizer's own where it has one of that shape
    and dtype, else given to it as a copy cast as load_state_dict casts it
    (never `saved`'s tensors themselves: the optimizer's steps change its
    state in place). Parameter groups that do not match go to
    load_state_dict."""
    groups, saved_groups = optimizer.param_groups, saved["param_groups"]
    if len(groups) != len(saved_groups) or any(len(g["params"]) != len(s["params"])
                                               for g, s in zip(groups, saved_groups)):
        optimizer.load_state_dict(_cloned(saved))  # it raises what does not match
        return
    for group, saved_group in zip(groups, saved_groups):
        for param, index in zip(group["params"], saved_group["params"]):
            live, values = optimizer.state[param], saved["state"].get(index, {})
            for key in [k for k in live if k not in values]:
                del live[key]
            for key, value in values.items():
                live[key] = _assign(live.get(key), value, param, key)
        group.update({k: copy.deepcopy(v) for k, v in saved_group.items() if k != "params"})


def _assign(live, value, param, key):
    if not isinstance(value, torch.Tensor):
        return copy.deepcopy(value)
    # As load_state_dict: to the parameter's device (and floating dtype),
    # but "step", which optimizers keep where it is.
    device, dtype = value.device, value.dtype
    if key != "step":
        device, dtype = param.device, param.dtype if param.is_floating_point() else value.dtype
    if (isinstance(live, torch.Tensor) and live.shape == value.shape and live.dtype == dtype
            and live.device == device):
        with torch.no_grad():
            return live.copy_(value)
    return value.detach().to(device=device, dtype=dtype, copy=True)


_MAGIC = b"edt.state/1\n"
_ALIGN = 64  # each tensor's bytes start at a multiple of this in the blob


class _TensorAt:
    """In the pickled outline: the tensor whose bytes are the i-th of the blob."""

    def __init__(self, index):
        self.index = index


def _to_bytes(state):
    """_MAGIC, the outline's length, the outline (the state with each tensor
    replaced by a _TensorAt, and each tensor's dtype, shape and offset), then
    the tensors' bytes. A state with tensors that have no plain bytes
    (sparse, quantized) goes through torch.save."""
    return b"".join(_to_views(state))


def _to_views(state):
    """_to_bytes(state) as the buffers it joins: the header, then each
    tensor's bytes as a view of the tensor (no copy of a CPU tensor) and its
    padding."""
    tensors = []

    def outline(value, _):
        if not isinstance(value, torch.Tensor):
            return value
        tensors.append(value.detach().cpu().contiguous())
        return _TensorAt(len(tensors) - 1)

    skeleton = _map(state, outline)
    if any(t.layout != torch.strided or t.is_quantized for t in tensors):
        buffer = io.BytesIO()
        torch.save(state, buffer)
        return [buffer.getvalue()]
    table, parts, at = [], [], 0
    for t in tensors:
        nbytes = t.numel() * t.element_size()
        table.append((t.dtype, tuple(t.shape), at))
        parts.append(t.reshape(-1).view(torch.uint8).numpy() if nbytes else b"")
        pad = -nbytes % _ALIGN
        parts.append(bytes(pad))
        at += nbytes + pad
    head = pickle.dumps((skeleton, table), protocol=pickle.HIGHEST_PROTOCOL)
    start = -(len(_MAGIC) + 8 + len(head)) % _ALIGN
    return [b"".join([_MAGIC, struct.pack("<Q", len(head) + start), head, bytes(start)])] + parts


def _from_bytes(data):
    """The state _to_bytes wrote (bytes, or a buffer such as the memoryview
    of a received state); its tensors read `data` in place."""
    if bytes(memoryview(data)[:len(_MAGIC)]) != _MAGIC:
        # A whole state as torch.save wrote it on a rank of this job: any
        # object, which weights_only (torch 2.6's default) would refuse.
        return torch.load(io.BytesIO(data), weights_only=False)
    (length,) = struct.unpack_from("<Q", data, len(_MAGIC))
    base = len(_MAGIC) + 8 + length
    skeleton, table = pickle.loads(memoryview(data)[len(_MAGIC) + 8:base])

    def tensor(dtype, shape, at):
        count = 1
        for n in shape:
            count *= n
        if count == 0:
            return torch.empty(shape, dtype=dtype)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # `data` is read-only: the state copies out of it, never into it
            return torch.frombuffer(data, dtype=dtype, count=count, offset=base + at).view(shape)

    return _map(skeleton, lambda value, _: tensor(*table[value.index]) if isinstance(value, _TensorAt) else value)


def _digest(tensor):
    t = tensor.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16; the bits are what count
        t = t.view(torch.int16)
    return hashlib.blake2b(t.reshape(-1).numpy().view("u1"), digest_size=8).hexdigest()
