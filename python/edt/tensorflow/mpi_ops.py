"""Horovod's collective operations on TensorFlow tensors, as graph ops.

The ops (EdtAllreduce, EdtAllgather, EdtBroadcast, EdtAlltoall,
EdtReducescatter, EdtBarrier, EdtJoin) are kernels in _edt_tf_ops.so
(python/src/tensorflow/ops.cc, on TensorFlow's C API, so any TensorFlow
2.13 or later loads them), loaded with tf.load_op_library, so they run
eagerly and inside tf.function alike. They reach the engine of edt's
current Runtime through a port this module hands to the library whenever
the Runtime changes (_adopt); hvd.shutdown() withdraws it, and an op run
then fails with FailedPreconditionError.

Process sets (edt.common.process_sets, the same sets edt.torch uses): a
set's members run its collectives on the set's own engine, which this
module hands to the library under the set's id the first time an op of the
set is made; the op carries the id (process_set_id). Roots are global
ranks, as in Horovod; the op carries the set's rank of the root.

Names: ranks match requests by name. Inside a graph an op is named after
its tensor (Horovod's HorovodAllreduce_<tensor> becomes EdtAllreduce_<tensor>)
and the engine uses the node's full name, the same on every rank that builds
the same graph. Eager calls have no node name: unnamed ones are numbered per
process set, as edt.torch numbers its unnamed requests.

Types the engine does not carry (int8, int16, uint16, bool) travel as a
wider one and come back in their own.
"""

import ctypes
import os
import re
import threading

import tensorflow as tf

from edt import _runtime
from edt.common.basics import Adasum, Average, Max, Min, Product, Sum, _OP_NAME, engine_op  # noqa: F401
from edt.common import process_sets as _process_sets

_LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_edt_tf_ops.so")
if not os.path.exists(_LIBRARY):
    raise ImportError("edt's TensorFlow ops are not built (%s is missing): build edt where its venv's TensorFlow "
                      "is installed (make deps, then cmake; the build names the TensorFlow it found)" % _LIBRARY)
try:
    _ops = tf.load_op_library(_LIBRARY)
except tf.errors.NotFoundError as e:  # a TensorFlow without the C API functions the ops call
    raise ImportError("edt's TensorFlow ops need TensorFlow 2.13 or later, whose C API has asynchronous kernels; "
                      "this is TensorFlow %s (%s)" % (tf.__version__, str(e).strip())) from None
_lib = ctypes.CDLL(_LIBRARY)  # the same loaded object: its edt_tf_adopt_port
_lib.edt_tf_adopt_port.argtypes = [ctypes.c_int, ctypes.c_void_p]
_lib.edt_tf_adopt_port.restype = None

_CARRIER = {tf.int8: tf.int32, tf.int16: tf.int32, tf.uint16: tf.int32, tf.bool: tf.uint8}

_lock = threading.Lock()
_adopted = {}        # process set id -> the Runtime whose engine the ops of that id use now
_set_objects = {}    # process set id -> its ProcessSet, for the gradients (which see the id only)
_noname = {}         # (set id, kind) -> counter of unnamed eager requests in the current runtime epoch
_noname_epoch = None


class _Target:
    """Where an op runs: its process set id and the Group (Runtime, ranks)."""

    def __init__(self, set_id, group):
        self.set_id = set_id
        self.group = group


def _target(process_set, what):
    """The _Target of `process_set` (None: the global set), its engine
    handed to the ops if it is not theirs yet. ValueError for a set this
    rank is not in or that is not registered."""
    group = _process_sets.group(process_set, what)
    set_id = 0 if group.ranks is None else process_set.process_set_id
    with _lock:
        if _adopted.get(set_id) is not group.runtime:
            _lib.edt_tf_adopt_port(set_id, group.runtime.engine_port())
            _adopted[set_id] = group.runtime
            _set_objects[set_id] = process_set if set_id else _process_sets.global_process_set
    return _Target(set_id, group)


def _adopt():
    """Hands the current Runtime's engine to the ops, if it is not theirs yet."""
    _target(None, "init")


def _withdraw():
    with _lock:
        _lib.edt_tf_adopt_port(-1, None)
        _adopted.clear()
        _set_objects.clear()


_runtime.on_stop(_withdraw)


def _process_set_of(op):
    """The ProcessSet a made op runs on (for its gradient)."""
    return _set_objects.get(op.get_attr("process_set_id"), _process_sets.global_process_set)


def _normalize_name(name):
    return re.sub("[^a-zA-Z0-9_]", "_", name)


def _names(kind, tensor, name, target):
    """(node name, engine name) of a request: see the module notes. A
    variable is named by its own name, not by the read of it (whose number
    depends on what the graph read before)."""
    if not tf.executing_eagerly():
        if name:
            return name, ""
        if not hasattr(tensor, "name"):
            tensor = tf.convert_to_tensor(tensor)
        return "Edt%s_%s" % (kind.capitalize(), _normalize_name(tensor.name)), ""
    if name is not None:
        return None, str(name)
    global _noname_epoch
    with _lock:
        if _noname_epoch != _runtime.epoch():
            _noname.clear()
            _noname_epoch = _runtime.epoch()
        n = _noname.get((target.set_id, kind), 0)
        _noname[(target.set_id, kind)] = n + 1
    return None, "tf.%s.noname.%d" % (kind, n)


def _carried(run, tensor):
    """run(tensor) on a type the engine carries, the result in tensor's type."""
    tensor = tf.convert_to_tensor(tensor)
    carrier = _CARRIER.get(tensor.dtype)
    if carrier is None:
        return run(tensor)
    return tf.cast(run(tf.cast(tensor, carrier)), tensor.dtype)


def _allreduce(tensor, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0, process_set=None,
               ignore_name_scope=False):
    """The elementwise reduction of a dense tensor over every rank of the set."""
    target = _target(process_set, "Allreduce")
    reduce_op = engine_op(op)
    node, tensor_name = _names("allreduce", tensor, name, target)

    def run(t):
        return _ops.edt_allreduce(t, reduce_op=reduce_op, prescale_factor=prescale_factor,
                                  postscale_factor=postscale_factor, tensor_name=tensor_name,
                                  process_set_id=target.set_id, name=node)
    return _carried(run, tensor)


def allgather(tensor, name=None, ignore_name_scope=False, process_set=None):
    """Every rank's tensor, concatenated along the first dimension in rank
    order (the first dimension may differ between ranks)."""
    target = _target(process_set, "Allgather")
    node, tensor_name = _names("allgather", tensor, name, target)

    def run(t):
        return _ops.edt_allgather(t, tensor_name=tensor_name, process_set_id=target.set_id, name=node)
    return _carried(run, tensor)


def grouped_allgather(tensors, name=None, ignore_name_scope=False, process_set=None):
    """allgather of each tensor (named <name>.<i>); the engine runs them together."""
    return [allgather(t, name=None if name is None else "%s.%d" % (name, i), process_set=process_set)
            for i, t in enumerate(tensors)]


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False, process_set=None):
    """root_rank's tensor (a global rank, a member of the set), on every rank."""
    target = _target(process_set, "Broadcast")
    if not 0 <= root_rank < _runtime.get().size:
        raise ValueError("broadcast: root_rank %s is not a rank of this job (0..%d)"
                         % (root_rank, _runtime.get().size - 1))
    root = target.group.root(root_rank, "Broadcast")
    node, tensor_name = _names("broadcast", tensor, name, target)

    def run(t):
        return _ops.edt_broadcast(t, root_rank=root, tensor_name=tensor_name, process_set_id=target.set_id,
                                  name=node)
    return _carried(run, tensor)


def broadcast_(variables, root_rank, name=None, process_set=None):
    """Assigns root_rank's value to each variable, in place; returns their
    new values."""
    return [v.assign(broadcast(v, root_rank, name=None if name is None else "%s.%d" % (name, i),
                               process_set=process_set))
            for i, v in enumerate(variables)]


def alltoall(tensor, splits=None, name=None, ignore_name_scope=False, process_set=None):
    """Rows splits[d] of `tensor` (consecutive, by destination) go to rank d
    of the set; without splits the first dimension is divided evenly.
    Returns the rows every rank sent here, in rank order, and with splits
    also how many came from each rank (Horovod's received_splits)."""
    target = _target(process_set, "Alltoall")
    node, tensor_name = _names("alltoall", tensor, name, target)
    splits_ = tf.constant([], tf.int32) if splits is None else tf.cast(splits, tf.int32)
    received = []

    def run(t):
        output, received_splits = _ops.edt_alltoall(t, splits_, tensor_name=tensor_name,
                                                    process_set_id=target.set_id, name=node)
        received.append(received_splits)
        return output
    output = _carried(run, tensor)
    return output if splits is None else (output, received[0])


def _reducescatter(tensor, name=None, op=Sum, ignore_name_scope=False, process_set=None, prescale_factor=1.0,
                   postscale_factor=1.0):
    """This rank's rows of the reduction (Sum or Average) over the set: the
    first ranks take one more row when the first dimension does not divide."""
    if op not in (Sum, Average):
        raise NotImplementedError("reducescatter supports hvd.Sum and hvd.Average, not %s" % _OP_NAME.get(op, op))
    target = _target(process_set, "Reducescatter")
    node, tensor_name = _names("reducescatter", tensor, name, target)

    def run(t):
        return _ops.edt_reducescatter(t, reduce_op=engine_op(op), prescale_factor=prescale_factor,
                                      postscale_factor=postscale_factor, tensor_name=tensor_name,
                                      process_set_id=target.set_id, name=node)
    return _carried(run, tensor)


def barrier(process_set=None):
    """Returns (eagerly; inside a graph it is a stateful op) once every rank
    of the set ran it."""
    target = _target(process_set, "Barrier")
    node, tensor_name = _names("barrier", None, "EdtBarrier" if not tf.executing_eagerly() else None, target)
    return _ops.edt_barrier(tensor_name=tensor_name, process_set_id=target.set_id, name=node)


def join():
    """This rank has no more data: until every rank joined, the others'
    allreduces go on with this rank adding zeros. Returns the rank that
    joined last (an int32 scalar)."""
    target = _target(None, "Join")
    node, tensor_name = _names("join", None, "EdtJoin" if not tf.executing_eagerly() else None, target)
    return _ops.edt_join(tensor_name=tensor_name, name=node)


def _set_size(process_set):
    return _process_sets.group(process_set, "size").size


def size_op(process_set_id=0, name=None):
    """The number of ranks of the set, as an int32 tensor."""
    process_set = _set_objects.get(process_set_id, _process_sets.global_process_set)
    return tf.constant(_set_size(process_set), tf.int32, name=name)


def process_set_included_op(process_set_id=0, name=None):
    """1 when this rank is in the set, else 0, as an int32 tensor."""
    process_set = _set_objects.get(process_set_id, _process_sets.global_process_set)
    return tf.constant(int(bool(process_set.included())), tf.int32, name=name)


def rank_op(name=None):
    return tf.constant(_runtime.place().rank, tf.int32, name=name)


def local_rank_op(name=None):
    return tf.constant(_runtime.place().local_rank, tf.int32, name=name)


def local_size_op(name=None):
    return tf.constant(_runtime.place().local_size, tf.int32, name=name)


# Gradients, as Horovod defines them: an allreduce's is the same allreduce
# of the gradient; an allgather's this rank's rows of the averaged gradient;
# a broadcast's the averaged gradient on the root and zero elsewhere; an
# alltoall's the alltoall back (the rows return whence they came); a
# reducescatter's the gathered gradient, times the set's size for Sum and the
# scale factors.
@tf.RegisterGradient("EdtAllreduce")
def _allreduce_grad(op, grad):
    reduce_op = op.get_attr("reduce_op")
    if reduce_op not in (engine_op(Sum), engine_op(Average)):
        raise NotImplementedError("edt: the gradient of an allreduce exists for hvd.Sum and hvd.Average only")
    horovod_op = Sum if reduce_op == engine_op(Sum) else Average
    return _allreduce(grad, op=horovod_op, prescale_factor=op.get_attr("prescale_factor"),
                      postscale_factor=op.get_attr("postscale_factor"), process_set=_process_set_of(op))


@tf.RegisterGradient("EdtAllgather")
def _allgather_grad(op, grad):
    process_set = _process_set_of(op)
    group = _process_sets.group(process_set, "Allgather")
    grad = _allreduce(grad, op=Average, process_set=process_set)
    rows = tf.reshape(allgather(tf.reshape(tf.shape(op.inputs[0])[0], [1]), process_set=process_set), [group.size])
    return tf.split(grad, num_or_size_splits=rows, axis=0)[group.rank]


@tf.RegisterGradient("EdtBroadcast")
def _broadcast_grad(op, grad):
    process_set = _process_set_of(op)
    reduced = _allreduce(grad, op=Average, process_set=process_set)
    if _process_sets.group(process_set, "Broadcast").rank != op.get_attr("root_rank"):
        return reduced * 0
    return reduced


@tf.RegisterGradient("EdtAlltoall")
def _alltoall_grad(op, grad, _received_splits_grad):
    back, _ = alltoall(grad, splits=op.outputs[1], process_set=_process_set_of(op))
    return [back, None]


@tf.RegisterGradient("EdtReducescatter")
def _reducescatter_grad(op, grad):
    process_set = _process_set_of(op)
    factor = op.get_attr("prescale_factor") * op.get_attr("postscale_factor")
    if op.get_attr("reduce_op") == engine_op(Sum):
        factor *= _set_size(process_set)
    if factor != 1.0:
        grad = grad * factor
    return allgather(grad, process_set=process_set)
