"""Horovod's collective operations on torch tensors, run by edt's engine.

Tensors cross into C++ as (data pointer, shape, dtype). A contiguous CPU
tensor of a type the runtime carries is reduced or overwritten in place,
without a copy; any other tensor (non-contiguous, on another device, int8,
int16 or bool) travels through a contiguous CPU copy of a type the runtime
carries, and the result is copied back into it.

Every collective takes Horovod's `process_set=` (edt.common.process_sets):
it then runs on that set's own engine, among its members only; roots are
still global ranks, and the ranks and sizes a result depends on (rows of an
allgather, splits of an alltoall) are the set's.
"""

import itertools
import threading

import torch

from edt import _runtime
from edt.common import process_sets as _process_sets

from edt.common.basics import Adasum, Average, Max, Min, Product, Sum, _ENGINE_OP, _OP_NAME  # noqa: F401
from edt.common.basics import engine_op as _engine_op, resolve_op as _resolve_op

# The engine's request kinds (engine::OpType).
_ALLREDUCE, _ALLGATHER, _BROADCAST, _ALLTOALL, _REDUCESCATTER, _BARRIER = range(6)
_KIND_NAME = ["allreduce", "allgather", "broadcast", "alltoall", "reducescatter", "barrier"]

# The runtime's element types (edt::DataType).
_DTYPE = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3,
          torch.int32: 4, torch.int64: 5, torch.uint8: 6}
# Types the runtime does not carry travel as a wider one.
_CARRIER = {torch.int8: torch.int32, torch.int16: torch.int32, torch.bool: torch.uint8}

_lock = threading.Lock()
_handles = {}  # handle -> _Pending
_next_handle = itertools.count(1)
_noname = {}   # (process set key, kind) -> counter for unnamed requests of the current runtime
_noname_epoch = None  # the _runtime.epoch() that _noname counts for


class _Pending:
    """A submitted Python-level request: the Runtime (global or a process
    set's) and its engine handles it waits for, the buffers they use (kept
    alive until then) and how to build the result from the engine's
    outputs."""

    def __init__(self, runtime, engine_handles, buffers, finish):
        self.runtime = runtime
        self.engine_handles = engine_handles
        self.buffers = buffers
        self.finish = finish


def _group(process_set, what):
    """The engine and ranks `process_set` runs on (see process_sets.group)."""
    return _process_sets.group(process_set, what)


def _name(kind, name, group):
    if name is not None:
        return str(name)
    with _lock:
        global _noname_epoch
        if _noname_epoch != _runtime.epoch():
            _noname.clear()
            _noname_epoch = _runtime.epoch()
        n = _noname.get((group.key, kind), 0)
        _noname[(group.key, kind)] = n + 1
    return "%s.noname.%d" % (_KIND_NAME[kind], n)


def _work(tensor, copy=False):
    """The contiguous CPU tensor the engine works on for `tensor`, and
    whether it is a copy whose result must be copied back."""
    t = tensor.detach()
    carrier = _CARRIER.get(t.dtype, t.dtype)
    if carrier not in _DTYPE:
        raise ValueError("edt cannot communicate tensors of dtype %s" % t.dtype)
    if not copy and t.device.type == "cpu" and t.dtype == carrier and t.is_contiguous():
        return t, False
    return t.to(device="cpu", dtype=carrier, copy=True).contiguous(), True


def _submit(group, kind, name, work, op=0, root=0, prescale=1.0, postscale=1.0, splits=()):
    # The optimizer submits every gradient from inside backward(): this
    # path stays short.
    try:
        return group.runtime.submit(name, kind, _DTYPE[work.dtype], op, root, prescale, postscale, work.shape,
                                     [int(s) for s in splits] if splits else (), work.data_ptr())
    except Exception as e:
        raise _translated(e, submitting=True)


def _translated(error, submitting=False):
    """An edt._edt.EdtError as Horovod's exception; any other error as is."""
    from edt import _edt
    if isinstance(error, _edt.EdtError):
        error = _runtime.translate(error, submitting)
        error.__suppress_context__ = True
    return error


def _register(runtime, engine_handles, buffers, finish):
    handle = next(_next_handle)
    with _lock:
        _handles[handle] = _Pending(runtime, engine_handles, buffers, finish)
    return handle


def _from_bytes(data, shape, dtype):
    if data is None or data.size == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.from_numpy(data).view(dtype).reshape(shape)


def forget_pending():
    """Drops every request not synchronized yet: their engine, of a
    membership generation that ended, is gone (elastic.run calls this)."""
    with _lock:
        _handles.clear()


def poll(handle):
    """True when the request behind `handle` has finished."""
    with _lock:
        pending = _handles.get(handle)
    if pending is None:
        raise ValueError("unknown handle %r (already synchronized?)" % (handle,))
    return all(pending.runtime.poll(h) for h in pending.engine_handles)


def synchronize(handle):
    """Waits for the request behind `handle` and returns its result."""
    with _lock:
        pending = _handles.pop(handle, None)
    if pending is None:
        raise ValueError("unknown handle %r (already synchronized?)" % (handle,))
    outputs, error = [], None
    for h in pending.engine_handles:  # wait for all, even after an error, so no buffer is freed early
        try:
            outputs.append(pending.runtime.wait(h))
        except Exception as e:
            error = error or e
    if error is not None:
        raise _translated(error)
    return pending.finish(outputs)


def _copy_back(target, work, copied):
    if copied:
        target.copy_(work)
    return target


# allreduce

def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                     process_set=None):
    """Starts an in-place allreduce of `tensor`; returns a handle for
    synchronize()."""
    engine_op = _engine_op(_resolve_op(op, average))
    group = _group(process_set, "Allreduce")
    work, copied = _work(tensor)
    h = _submit(group, _ALLREDUCE, _name(_ALLREDUCE, name, group), work, engine_op, prescale=prescale_factor,
                postscale=postscale_factor)
    return _register(group.runtime, [h], [work], lambda _: _copy_back(tensor, work, copied))


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                    process_set=None):
    """Starts an allreduce of a copy of `tensor`; synchronize() returns the
    result as a new tensor."""
    return allreduce_async_(tensor.detach().clone(memory_format=torch.contiguous_format), average, name, op,
                            prescale_factor, postscale_factor, process_set)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
               process_set=None):
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor, postscale_factor, process_set))


class _AllreduceFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale, postscale, process_set):
        ctx.args = (op, prescale, postscale, process_set)
        return synchronize(allreduce_async(tensor, None, name, op, prescale, postscale, process_set))

    @staticmethod
    def backward(ctx, grad):
        op, prescale, postscale, process_set = ctx.args
        reduced = allreduce(grad, op=op, prescale_factor=prescale, postscale_factor=postscale,
                            process_set=process_set)
        return reduced, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=None):
    """The reduction of `tensor` over all ranks (default: the average), as a
    new tensor. Differentiable: the gradient is allreduced the same way."""
    from edt.torch.compression import Compression
    compression = compression or Compression.none
    op = _resolve_op(op, average)
    compressed, ctx = compression.compress(tensor)
    if compressed.requires_grad:
        reduced = _AllreduceFunction.apply(compressed, name, op, prescale_factor, postscale_factor, process_set)
    else:
        reduced = synchronize(allreduce_async(compressed, None, name, op, prescale_factor, postscale_factor,
                                              process_set))
    return compression.decompress(reduced, ctx)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=None):
    """Starts in-place allreduces of several tensors, fused together."""
    engine_op = _engine_op(_resolve_op(op, average))
    group = _group(process_set, "Allreduce")
    base = _name(_ALLREDUCE, name, group)
    works, handles = [], []
    for i, t in enumerate(tensors):
        work, copied = _work(t)
        works.append((t, work, copied))
        handles.append(_submit(group, _ALLREDUCE, "%s.%d" % (base, i), work, engine_op,
                               prescale=prescale_factor, postscale=postscale_factor))

    return _register(group.runtime, handles, works, lambda _: [_copy_back(t, w, c) for t, w, c in works])


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=None):
    copies = [t.detach().clone(memory_format=torch.contiguous_format) for t in tensors]
    return grouped_allreduce_async_(copies, average, name, op, prescale_factor, postscale_factor, process_set)


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                       process_set=None):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor, postscale_factor,
                                                process_set))


class _GroupedAllreduceFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale, postscale, process_set, *tensors):
        ctx.args = (op, prescale, postscale, process_set)
        return tuple(synchronize(grouped_allreduce_async(list(tensors), None, name, op, prescale, postscale,
                                                         process_set)))

    @staticmethod
    def backward(ctx, *grads):
        op, prescale, postscale, process_set = ctx.args
        reduced = grouped_allreduce(list(grads), op=op, prescale_factor=prescale, postscale_factor=postscale,
                                    process_set=process_set)
        return (None, None, None, None, None, *reduced)


def grouped_allreduce(tensors, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=None):
    """The reductions of several tensors, fused. Differentiable, as allreduce."""
    op = _resolve_op(op, average)
    if any(t.requires_grad for t in tensors):
        return list(_GroupedAllreduceFunction.apply(name, op, prescale_factor, postscale_factor, process_set,
                                                    *tensors))
    return synchronize(grouped_allreduce_async(tensors, None, name, op, prescale_factor, postscale_factor,
                                               process_set))


def sparse_allreduce_async(tensor, name, op, process_set=None):
    """Starts the reduction of a sparse tensor as Horovod does it: the
    indices and the values of every rank are allgathered (a sparse tensor
    whose duplicate indices sum), the values divided by the set's size for
    op=Average. Returns a callable that waits and returns the result."""
    if op not in (Average, Sum):
        raise NotImplementedError("sparse_allreduce_async supports hvd.Average and hvd.Sum, not %s"
                                  % _OP_NAME.get(op, op))
    group = _group(process_set, "Allgather")
    t = tensor.coalesce() if not tensor.is_coalesced() else tensor
    # allgather concatenates along dimension 0: indices travel as rows of
    # (nnz, sparse_dim), transposed back after.
    indices = allgather_async(t._indices().transpose(0, 1).contiguous(), name="%s.indices" % name,
                              process_set=process_set)
    values = allgather_async(t._values(), name="%s.values" % name, process_set=process_set)

    def handle():
        gathered_values = synchronize(values)
        gathered_indices = synchronize(indices)
        if op == Average:
            gathered_values = gathered_values / group.size
        return torch.sparse_coo_tensor(gathered_indices.transpose(0, 1), gathered_values, t.size())
    return handle


# allgather

def allgather_async(tensor, name=None, process_set=None):
    """Starts an allgather: the tensors of all ranks concatenated along
    dimension 0 (which may differ between ranks)."""
    group = _group(process_set, "Allgather")
    work, _ = _work(tensor)
    h = _submit(group, _ALLGATHER, _name(_ALLGATHER, name, group), work)

    def finish(outputs):
        data, shape, _, _ = outputs[0]
        return _from_bytes(data, shape, work.dtype).to(device=tensor.device, dtype=tensor.dtype)
    return _register(group.runtime, [h], [work], finish)


def _my_rows(grad, rows, process_set):
    """This rank's rows of `grad`, a tensor of every member's rows in rank
    order, where this rank contributed `rows` of them."""
    counts = allgather(torch.tensor([rows], dtype=torch.int64), process_set=process_set)
    offset = int(counts[:_group(process_set, "Allgather").rank].sum())
    return grad.narrow(0, offset, rows)


class _AllgatherFunction(torch.autograd.Function):
    # The adjoint of a concatenation: every rank's gradient of the gathered
    # tensor, averaged, then this rank's rows of it (as Horovod defines it).
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.rows = tensor.shape[0]
        ctx.process_set = process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad):
        reduced = allreduce(grad, op=Average, process_set=ctx.process_set)
        return _my_rows(reduced, ctx.rows, ctx.process_set), None, None


def allgather(tensor, name=None, process_set=None):
    """Every rank's `tensor`, concatenated along dimension 0 in rank order.
    Differentiable: the gradient is this rank's rows of the averaged
    gradient of the result."""
    if tensor.requires_grad:
        return _AllgatherFunction.apply(tensor, name, process_set)
    return synchronize(allgather_async(tensor, name, process_set))


class _GroupedAllgatherFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.rows = [t.shape[0] for t in tensors]
        ctx.process_set = process_set
        return tuple(synchronize(grouped_allgather_async(list(tensors), name, process_set)))

    @staticmethod
    def backward(ctx, *grads):
        reduced = grouped_allreduce(list(grads), op=Average, process_set=ctx.process_set)
        return (None, None, *[_my_rows(g, rows, ctx.process_set) for g, rows in zip(reduced, ctx.rows)])


def grouped_allgather_async(tensors, name=None, process_set=None):
    """Starts allgathers of several tensors (named <name>.<i>)."""
    base = _name(_ALLGATHER, name, _group(process_set, "Allgather"))
    parts = [allgather_async(t, "%s.%d" % (base, i), process_set) for i, t in enumerate(tensors)]
    return _combine(parts)


def grouped_allgather(tensors, name=None, process_set=None):
    """allgather of every tensor of the list, as one request."""
    if any(t.requires_grad for t in tensors):
        return list(_GroupedAllgatherFunction.apply(name, process_set, *tensors))
    return synchronize(grouped_allgather_async(tensors, name, process_set))


def _combine(handles):
    """One handle whose result is the list of the results of `handles`
    (requests of one process set)."""
    with _lock:
        parts = [_handles.pop(h) for h in handles]
    engine_handles = [eh for p in parts for eh in p.engine_handles]
    bounds = list(itertools.accumulate(len(p.engine_handles) for p in parts))

    def finish(outputs):
        starts = [0] + bounds[:-1]
        return [p.finish(outputs[s:e]) for p, s, e in zip(parts, starts, bounds)]
    runtime = parts[0].runtime if parts else _runtime.get()
    return _register(runtime, engine_handles, [p.buffers for p in parts], finish)


# broadcast

def broadcast_async_(tensor, root_rank, name=None, process_set=None):
    """Starts an in-place broadcast of root_rank's `tensor` to every rank
    (root_rank is a global rank, a member of the process set)."""
    group = _group(process_set, "Broadcast")
    root = group.root(root_rank, "Broadcast")
    work, copied = _work(tensor)
    h = _submit(group, _BROADCAST, _name(_BROADCAST, name, group), work, root=root)
    return _register(group.runtime, [h], [work], lambda _: _copy_back(tensor, work, copied))


def broadcast_async(tensor, root_rank, name=None, process_set=None):
    return broadcast_async_(tensor.detach().clone(memory_format=torch.contiguous_format), root_rank, name,
                            process_set)


def broadcast_(tensor, root_rank, name=None, process_set=None):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


class _BroadcastFunction(torch.autograd.Function):
    # Only the root's tensor reaches the result: its gradient is the
    # average over ranks of the result's; the others' is zero.
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad):
        reduced = allreduce(grad, op=Average, process_set=ctx.process_set)
        if rank() != ctx.root_rank:
            reduced = torch.zeros_like(reduced)
        return reduced, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=None):
    """root_rank's `tensor` on every rank, as a new tensor. Differentiable."""
    if tensor.requires_grad:
        return _BroadcastFunction.apply(tensor, root_rank, name, process_set)
    return synchronize(broadcast_async(tensor, root_rank, name, process_set))


# alltoall

def _alltoall_splits(tensor, splits, n):
    """The rows `tensor` sends to each of the n ranks, as a list of ints."""
    if splits is None:
        if tensor.dim() == 0 or tensor.shape[0] % n:
            raise ValueError("alltoall without splits needs a first dimension divisible by the number of "
                             "ranks (%d); got shape %s" % (n, list(tensor.shape)))
        return [tensor.shape[0] // n] * n
    if torch.is_tensor(splits):
        if splits.dtype not in (torch.int32, torch.int64) or splits.dim() != 1:
            raise ValueError("alltoall splits must be a 1-D tensor of int32 or int64 (one count of rows per "
                             "rank); got %s of shape %s" % (splits.dtype, list(splits.shape)))
        splits = splits.tolist()
    if len(splits) != n or any(not isinstance(s, int) or s < 0 for s in splits):
        raise ValueError("alltoall splits must be %d non-negative integers (one per rank); got %r" % (n, splits))
    return splits


def alltoall_async(tensor, splits=None, name=None, process_set=None):
    """Starts an alltoall: rows splits[d] of `tensor` (consecutive, by
    destination) go to rank d (of the process set). Without splits,
    dimension 0 is divided evenly."""
    group = _group(process_set, "Alltoall")
    splits = _alltoall_splits(tensor, splits, group.size)
    work, _ = _work(tensor)
    h = _submit(group, _ALLTOALL, _name(_ALLTOALL, name, group), work, splits=splits)

    def finish(outputs):
        data, shape, received, _ = outputs[0]
        out = _from_bytes(data, shape, work.dtype).to(device=tensor.device, dtype=tensor.dtype)
        return out, torch.tensor(received, dtype=torch.int32)
    return _register(group.runtime, [h], [work], finish)


class _AlltoallFunction(torch.autograd.Function):
    # The adjoint of an alltoall is the alltoall back: each rank returns the
    # gradient rows to the rank they came from.
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        out, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.received = received
        ctx.process_set = process_set
        ctx.mark_non_differentiable(received)
        return out, received

    @staticmethod
    def backward(ctx, grad, _):
        back, _ = synchronize(alltoall_async(grad.contiguous(), ctx.received, process_set=ctx.process_set))
        return back, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=None):
    """The rows every rank sent to this one, in rank order; with `splits`,
    also the rows received from each rank (as Horovod returns them).
    Differentiable."""
    if tensor.requires_grad:
        out, received = _AlltoallFunction.apply(tensor, splits, name, process_set)
    else:
        out, received = synchronize(alltoall_async(tensor, splits, name, process_set))
    return out if splits is None else (out, received)


# reducescatter

def reducescatter_async(tensor, name=None, compression=None, op=Average, process_set=None,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Starts a reducescatter: the reduction over ranks, of which this rank
    keeps its share of dimension 0 (the first ranks take one more row when
    it does not divide evenly)."""
    if op not in (Average, Sum):
        # NotImplementedError: the RuntimeError family, as Horovod raises it.
        raise NotImplementedError("reducescatter supports hvd.Average and hvd.Sum, not %s" % _OP_NAME.get(op, op))
    group = _group(process_set, "Reducescatter")
    work, _ = _work(tensor)
    h = _submit(group, _REDUCESCATTER, _name(_REDUCESCATTER, name, group), work, _ENGINE_OP[op],
                prescale=prescale_factor, postscale=postscale_factor)

    def finish(outputs):
        data, shape, _, _ = outputs[0]
        return _from_bytes(data, shape, work.dtype).to(device=tensor.device, dtype=tensor.dtype)
    return _register(group.runtime, [h], [work], finish)


def _scatter_grad(grad, op, prescale, postscale, process_set):
    # The adjoint of "reduce, keep my rows": every member's gradient rows,
    # gathered, times the reduction's own factor (the set's size for Sum, 1
    # for Average, as Horovod scales it) and the scale factors.
    size_ = _group(process_set, "Reducescatter").size
    factor = (size_ if op == Sum else 1) * prescale * postscale
    return allgather(grad * factor if factor != 1 else grad, process_set=process_set)


class _ReducescatterFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale, postscale, process_set):
        ctx.args = (op, prescale, postscale, process_set)
        return synchronize(reducescatter_async(tensor, name, None, op, process_set, prescale, postscale))

    @staticmethod
    def backward(ctx, grad):
        return _scatter_grad(grad, *ctx.args), None, None, None, None, None


def reducescatter(tensor, name=None, compression=None, op=Average, process_set=None, prescale_factor=1.0,
                  postscale_factor=1.0):
    """The reduction over ranks of which this rank keeps its rows.
    Differentiable."""
    if tensor.requires_grad:
        return _ReducescatterFunction.apply(tensor, name, op, prescale_factor, postscale_factor, process_set)
    return synchronize(reducescatter_async(tensor, name, compression, op, process_set, prescale_factor,
                                           postscale_factor))


class _GroupedReducescatterFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale, postscale, process_set, *tensors):
        ctx.args = (op, prescale, postscale, process_set)
        return tuple(synchronize(grouped_reducescatter_async(list(tensors), name, None, op, process_set, prescale,
                                                             postscale)))

    @staticmethod
    def backward(ctx, *grads):
        return (None, None, None, None, None, *[_scatter_grad(g, *ctx.args) for g in grads])


def grouped_reducescatter_async(tensors, name=None, compression=None, op=Average, process_set=None,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Starts reducescatters of several tensors (named <name>.<i>)."""
    base = _name(_REDUCESCATTER, name, _group(process_set, "Reducescatter"))
    parts = [reducescatter_async(t, "%s.%d" % (base, i), None, op, process_set, prescale_factor, postscale_factor)
             for i, t in enumerate(tensors)]
    return _combine(parts)


def grouped_reducescatter(tensors, name=None, compression=None, op=Average, process_set=None,
                          prescale_factor=1.0, postscale_factor=1.0):
    """reducescatter of every tensor of the list, as one request."""
    if any(t.requires_grad for t in tensors):
        return list(_GroupedReducescatterFunction.apply(name, op, prescale_factor, postscale_factor, process_set,
                                                        *tensors))
    return synchronize(grouped_reducescatter_async(tensors, name, compression, op, process_set, prescale_factor,
                                                   postscale_factor))


# barrier and join

def barrier(process_set=None):
    """Returns once every rank (of the process set) has called barrier()."""
    group = _group(process_set, "Barrier")
    empty = torch.empty(0, dtype=torch.uint8)
    h = _submit(group, _BARRIER, _name(_BARRIER, None, group), empty)
    synchronize(_register(group.runtime, [h], [empty], lambda _: None))


def join(device=-1):
    """Declares that this rank has no more data: until every rank joined,
    allreduces of the others go on with this rank adding zeros. Returns the
    rank that joined last."""
    rt = _runtime.get()
    try:
        h = rt.submit_join()
    except Exception as e:
        raise _translated(e, submitting=True)
    return synchronize(_register(rt, [h], [], lambda outputs: outputs[0][3]))


def size():
    return _runtime.get().size


def rank():
    return _runtime.get().rank
