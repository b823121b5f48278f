"""Broadcasting model and optimizer state, and moving Python objects."""

import io
import pickle

import torch

from edt.torch import mpi_ops


def _named(params):
    if isinstance(params, dict):
        return sorted(params.items())
    if isinstance(params, list) and params and isinstance(params[0], tuple):
        return params
    raise ValueError("broadcast_parameters expects a state_dict or named_parameters(), got %s" % type(params))


def broadcast_parameters(params, root_rank, process_set=None):
    """Overwrites every rank's parameters (a state_dict or
    model.named_parameters()) with root_rank's, in place (on the members of
    `process_set` only, if given; root_rank is a global rank)."""
    handles = []
    for name, p in _named(params):
        if p is None or not torch.is_tensor(p):
            continue
        handles.append(mpi_ops.broadcast_async_(p.data if isinstance(p, torch.nn.Parameter) else p, root_rank,
                                                name="broadcast_parameters." + name, process_set=process_set))
    for h in handles:
        mpi_ops.synchronize(h)


def _zero_grads(optimizer, model):
    """Gives every trainable parameter without a gradient a zero one, as
    Horovod's broadcast_optimizer_state does: sparse for SparseAdam and for
    the sparse embeddings of `model`."""
    sparse = set()
    if model is not None:
        sparse = {id(p) for m in model.modules() if isinstance(m, torch.nn.Embedding) and m.sparse
                  for p in m.parameters()}
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad and p.grad is None:
                p.grad = p.data.new(p.size()).zero_()
                if isinstance(optimizer, torch.optim.SparseAdam) or id(p) in sparse:
                    p.grad = p.grad.to_sparse()


def broadcast_optimizer_state(optimizer, root_rank, model=None):
    """Makes every rank's optimizer state (moments, step counts, and the
    hyper-parameters of each parameter group) equal to root_rank's.
    `model` names the sparse embeddings whose gradients are sparse."""
    _zero_grads(optimizer, model)
    state = broadcast_object(optimizer.state_dict() if mpi_ops._runtime.get().rank == root_rank else None,
                             root_rank, name="broadcast_optimizer_state")
    optimizer.load_state_dict(state)


def _to_bytes(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer, pickle_protocol=pickle.HIGHEST_PROTOCOL)
    return torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)


def _from_bytes(t):
    # Any picklable object, as in Horovod (cloudpickle) and as torch.save
    # wrote it on a rank of this job: weights_only (torch 2.6's default)
    # would refuse all but tensors and plain containers.
    return torch.load(io.BytesIO(t.numpy().tobytes()), weights_only=False)


def broadcast_object(obj, root_rank=0, name=None, process_set=None):
    """root_rank's `obj` (anything picklable, tensors included) on every rank
    (of `process_set`; root_rank is a global rank)."""
    name = name or "broadcast_object"
    is_root = mpi_ops.rank() == root_rank
    if is_root:
        payload = _to_bytes(obj)
        length = torch.tensor([payload.numel()], dtype=torch.int64)
    else:
        length = torch.zeros(1, dtype=torch.int64)
    mpi_ops.broadcast_(length, root_rank, name=name + ".size", process_set=process_set)
    if not is_root:
        payload = torch.empty(int(length[0]), dtype=torch.uint8)
    mpi_ops.broadcast_(payload, root_rank, name=name + ".data", process_set=process_set)
    return obj if is_root else _from_bytes(payload)


def allgather_object(obj, name=None, process_set=None):
    """The list of every rank's `obj` (of `process_set`), in rank order."""
    name = name or "allgather_object"
    payload = _to_bytes(obj)
    sizes = mpi_ops.allgather(torch.tensor([payload.numel()], dtype=torch.int64), name=name + ".sizes",
                              process_set=process_set)
    data = mpi_ops.allgather(payload, name=name + ".data", process_set=process_set)
    out, offset = [], 0
    for n in sizes.tolist():
        out.append(_from_bytes(data[offset:offset + n]))
        offset += n
    return out
