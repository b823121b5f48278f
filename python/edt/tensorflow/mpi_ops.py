"""Horovod's collective operations on TensorFlow tensors, as graph ops.

The ops (EdtAllreduce, EdtAllgather, EdtBroadcast) are C++ kernels in
_edt_tf_ops.so (python/src/tensorflow/ops.cc), loaded with
tf.load_op_library, so they run eagerly and inside tf.function alike. They
reach the engine of edt's current Runtime through a port this module hands
to the library whenever the Runtime changes (_adopt); hvd.shutdown()
withdraws it, and an op run then fails with FailedPreconditionError.

Names: ranks match requests by name. Inside a graph an op is named after
its tensor (Horovod's HorovodAllreduce_<tensor> becomes EdtAllreduce_<tensor>)
and the engine uses the node's full name, the same on every rank that builds
the same graph. Eager calls have no node name: unnamed ones are numbered,
as edt.torch numbers its unnamed requests.

Types the engine does not carry (int8, int16, uint16, bool) travel as a
wider one and come back in their own.
"""

import ctypes
import os
import re
import threading

import tensorflow as tf

from edt import _runtime
from edt.common.basics import Adasum, Average, Max, Min, Product, Sum, engine_op  # noqa: F401
from edt.common import process_sets as _process_sets

_LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_edt_tf_ops.so")
if not os.path.exists(_LIBRARY):
    raise ImportError("edt's TensorFlow ops are not built (%s is missing): build edt where its venv's TensorFlow "
                      "is installed (make deps, then cmake; the build names the TensorFlow it found)" % _LIBRARY)
_ops = tf.load_op_library(_LIBRARY)
_lib = ctypes.CDLL(_LIBRARY)  # the same loaded object: its edt_tf_adopt_port
_lib.edt_tf_adopt_port.argtypes = [ctypes.c_void_p]
_lib.edt_tf_adopt_port.restype = None

_CARRIER = {tf.int8: tf.int32, tf.int16: tf.int32, tf.uint16: tf.int32, tf.bool: tf.uint8}

_lock = threading.Lock()
_adopted = None      # the Runtime whose engine the ops use now
_noname = {}         # kind -> counter of unnamed eager requests in the current runtime epoch
_noname_epoch = None


def _adopt():
    """Hands the current Runtime's engine to the ops, if it is not theirs yet."""
    global _adopted
    runtime = _runtime.get()
    with _lock:
        if runtime is not _adopted:
            _lib.edt_tf_adopt_port(runtime.engine_port())
            _adopted = runtime


def _withdraw():
    global _adopted
    with _lock:
        _lib.edt_tf_adopt_port(None)
        _adopted = None


_runtime.on_stop(_withdraw)


def _normalize_name(name):
    return re.sub("[^a-zA-Z0-9_]", "_", name)


def _names(kind, tensor, name):
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
        n = _noname.get(kind, 0)
        _noname[kind] = n + 1
    return None, "tf.%s.noname.%d" % (kind, n)


def _global_only(process_set, what):
    if process_set is not None and process_set is not _process_sets.global_process_set \
            and process_set.process_set_id != 0:
        raise NotImplementedError("%s: edt's TensorFlow ops run on the global process set only" % what)


def _carried(run, tensor):
    """run(tensor) on a type the engine carries, the result in tensor's type."""
    tensor = tf.convert_to_tensor(tensor)
    carrier = _CARRIER.get(tensor.dtype)
    if carrier is None:
        return run(tensor)
    return tf.cast(run(tf.cast(tensor, carrier)), tensor.dtype)


def _allreduce(tensor, name=None, op=Sum, prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """The elementwise reduction of a dense tensor over every rank."""
    _global_only(process_set, "allreduce")
    _adopt()
    reduce_op = engine_op(op)
    node, tensor_name = _names("allreduce", tensor, name)

    def run(t):
        return _ops.edt_allreduce(t, reduce_op=reduce_op, prescale_factor=prescale_factor,
                                  postscale_factor=postscale_factor, tensor_name=tensor_name, name=node)
    return _carried(run, tensor)


def allgather(tensor, name=None, ignore_name_scope=False, process_set=None):
    """Every rank's tensor, concatenated along the first dimension in rank
    order (the first dimension may differ between ranks)."""
    _global_only(process_set, "allgather")
    _adopt()

    node, tensor_name = _names("allgather", tensor, name)

    def run(t):
        return _ops.edt_allgather(t, tensor_name=tensor_name, name=node)
    return _carried(run, tensor)


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False, process_set=None):
    """root_rank's tensor, on every rank."""
    _global_only(process_set, "broadcast")
    _adopt()
    if not 0 <= root_rank < _runtime.get().size:
        raise ValueError("broadcast: root_rank %s is not a rank of this job (0..%d)"
                         % (root_rank, _runtime.get().size - 1))

    node, tensor_name = _names("broadcast", tensor, name)

    def run(t):
        return _ops.edt_broadcast(t, root_rank=root_rank, tensor_name=tensor_name, name=node)
    return _carried(run, tensor)


# Gradients, as Horovod defines them: an allreduce's is the allreduce of the
# gradient, an allgather's this rank's rows of the summed gradient, a
# broadcast's the summed gradient on the root and zero elsewhere.
@tf.RegisterGradient("EdtAllreduce")
def _allreduce_grad(op, grad):
    reduce_op = op.get_attr("reduce_op")
    if reduce_op not in (engine_op(Sum), engine_op(Average)):
        raise NotImplementedError("edt: the gradient of an allreduce exists for hvd.Sum and hvd.Average only")
    horovod_op = Sum if reduce_op == engine_op(Sum) else Average
    return _allreduce(grad, op=horovod_op, prescale_factor=op.get_attr("prescale_factor"),
                      postscale_factor=op.get_attr("postscale_factor"))


@tf.RegisterGradient("EdtAllgather")
def _allgather_grad(op, grad):
    grad = _allreduce(grad)
    rows = tf.reshape(allgather(tf.reshape(tf.shape(op.inputs[0])[0], [1])), [_runtime.get().size])
    return tf.split(grad, num_or_size_splits=rows, axis=0)[_runtime.get().rank]


@tf.RegisterGradient("EdtBroadcast")
def _broadcast_grad(op, grad):
    reduced = _allreduce(grad)
    if _runtime.get().rank != op.get_attr("root_rank"):
        return reduced * 0
    return reduced

