"""Horovod's TensorFlow 2 API on edt: `import edt.tensorflow as hvd` (and
`import horovod.tensorflow as hvd` where no real Horovod is installed).

Same names, arguments and semantics as horovod.tensorflow; the collectives
are TensorFlow ops (see mpi_ops), so they work eagerly and inside
tf.function. CPU tensors; the global process set. Start the job with edtrun
(`edtrun -np 2 python3 train.py`, or `horovodrun`); a script started without
it is a job of one rank.
"""

import pickle

import numpy as np
import tensorflow as tf

from edt.common import basics as _basics
from edt.common.basics import (ccl_built, cross_rank, cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled,
                               is_homogeneous, is_initialized, local_rank, local_size, mpi_built, mpi_enabled,
                               mpi_threads_supported, nccl_built, rank, rocm_built, shutdown, size)
from edt.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from edt.common.process_sets import ProcessSet, global_process_set
from edt.tensorflow import mpi_ops
from edt.tensorflow.compression import Compression
from edt.tensorflow.mpi_ops import Adasum, Average, Max, Min, Product, Sum, allgather, broadcast  # noqa: F401


def init(comm=None, process_sets=None):
    """Joins the job (see edt.common.basics.init) and hands its engine to
    the TensorFlow ops."""
    _basics.init(comm, process_sets)
    if not _basics._runtime.elastic_mode():
        mpi_ops._adopt()


def allreduce(tensor, average=None, device_dense="", device_sparse="", compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, name=None, process_set=global_process_set,
              ignore_name_scope=False):
    """The reduction of `tensor` over every rank (op: hvd.Average, the
    default, Sum, Min, Max or Product). A tf.IndexedSlices (a sparse
    gradient) is gathered instead, its values divided by size() for
    Average, as in Horovod."""
    op = _basics.resolve_op(op, average)
    if isinstance(tensor, tf.IndexedSlices):
        if op not in (Average, Sum):
            raise NotImplementedError("allreduce of a tf.IndexedSlices supports hvd.Average and hvd.Sum only")
        values = allgather(tensor.values, name=None if name is None else name + ".values", process_set=process_set)
        indices = allgather(tensor.indices, name=None if name is None else name + ".indices",
                            process_set=process_set)
        if op == Average:
            values = values / tf.cast(size(), values.dtype)
        return tf.IndexedSlices(values, indices, dense_shape=tensor.dense_shape)
    compressed, context = compression.compress(tf.convert_to_tensor(tensor))
    reduced = mpi_ops._allreduce(compressed, name=name, op=op, prescale_factor=prescale_factor,
                                 postscale_factor=postscale_factor, process_set=process_set)
    return compression.decompress(reduced, context)


def grouped_allreduce(tensors, average=None, device_dense="", device_sparse="", compression=Compression.none,
                      op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """allreduce of each tensor; the engine fuses them into one buffer."""
    return [allreduce(t, average=average, compression=compression, op=op, prescale_factor=prescale_factor,
                      postscale_factor=postscale_factor, process_set=process_set) for t in tensors]


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Assigns root_rank's value to each variable on every rank."""
    return tf.group(*[v.assign(broadcast(v, root_rank, process_set=process_set)) for v in variables])


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=global_process_set):
    """root_rank's picklable `obj`, on every rank (eagerly)."""
    name = name or type(obj).__name__
    payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8) if rank() == root_rank else np.zeros(0, np.uint8)
    length = broadcast(tf.constant([payload.size], tf.int64), root_rank, name=name + ".size",
                       process_set=process_set)
    if rank() != root_rank:
        payload = np.zeros(int(length.numpy()[0]), np.uint8)
    data = broadcast(tf.constant(payload), root_rank, name=name + ".data", process_set=process_set)
    return pickle.loads(data.numpy().tobytes())


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """Every rank's picklable `obj`, as a list in rank order (eagerly)."""
    name = name or type(obj).__name__
    payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    sizes = allgather(tf.constant([payload.size], tf.int64), name=name + ".sizes", process_set=process_set).numpy()
    data = allgather(tf.constant(payload), name=name + ".data", process_set=process_set).numpy()
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    return [pickle.loads(data[offsets[i]:offsets[i + 1]].tobytes()) for i in range(len(sizes))]


def _allreduce_grads_fn(name, compression, sparse_as_dense, op, gradient_predivide_factor):
    """A function that averages (or sums) a list of gradients over every
    rank, under the name scope `name`_Allreduce. gradient_predivide_factor
    splits Average's division: by the factor before the sum, by
    size()/factor after it."""
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor is supported with op=hvd.Average only")

    def reduce_one(grad):
        if grad is None:
            return None
        if sparse_as_dense and isinstance(grad, tf.IndexedSlices):
            grad = tf.convert_to_tensor(grad)
        if gradient_predivide_factor != 1.0:
            return allreduce(grad, compression=compression, op=Sum, prescale_factor=1.0 / gradient_predivide_factor,
                             postscale_factor=gradient_predivide_factor / size())
        return allreduce(grad, compression=compression, op=op)

    def allreduce_grads(grads):
        with tf.name_scope(name + "_Allreduce"):
            return [reduce_one(g) for g in grads]
    return allreduce_grads


class _DistributedGradientTape(tf.GradientTape):
    """A GradientTape whose gradient() averages the gradients over every
    rank. Made by DistributedGradientTape around a tape that recorded the
    forward pass: it takes over that tape's recording."""

    def __init__(self, tape, compression, sparse_as_dense, op, gradient_predivide_factor, persistent=False,
                 watch_accessed_variables=True, scale_local_gradients=True):
        super(self.__class__, self).__init__(persistent, watch_accessed_variables)
        self._tape = tape
        self._allreduce_grads = _allreduce_grads_fn("DistributedGradientTape", compression, sparse_as_dense, op,
                                                    gradient_predivide_factor)
        self._local_sources = set()
        self.scale_local_gradients = scale_local_gradients

    def register_local_source(self, source):
        """Gradients of `source` stay this rank's own (divided by size()
        when scale_local_gradients, as in Horovod)."""
        self._local_sources.add(source.ref())

    def gradient(self, target, sources, output_gradients=None, use_generic_names=False):
        gradients = super(self.__class__, self).gradient(target, sources, output_gradients)
        flat_sources = tf.nest.flatten(sources)
        flat_grads = tf.nest.flatten(gradients, expand_composites=False)
        shared = [i for i, s in enumerate(flat_sources) if s.ref() not in self._local_sources]
        reduced = self._allreduce_grads([flat_grads[i] for i in shared])
        for i, g in zip(shared, reduced):
            flat_grads[i] = g
        if self.scale_local_gradients:
            for i, s in enumerate(flat_sources):
                if s.ref() in self._local_sources and flat_grads[i] is not None:
                    flat_grads[i] = _scaled(flat_grads[i], 1.0 / size())
        return tf.nest.pack_sequence_as(gradients, flat_grads)


def _scaled(grad, factor):
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values * factor, grad.indices, grad.dense_shape)
    return grad * factor


def DistributedGradientTape(gradtape, device_dense="", device_sparse="", compression=Compression.none,
                            sparse_as_dense=False, op=Average, gradient_predivide_factor=1.0, num_groups=0,
                            groups=None, process_set=global_process_set, scale_local_gradients=True):
    """`gradtape` (a tf.GradientTape that recorded the forward pass) as a tape
    whose gradient() returns the gradients averaged (op) over every rank.
    num_groups and groups are accepted: the engine fuses every gradient of a
    step anyway."""
    mpi_ops._global_only(process_set, "DistributedGradientTape")
    if op not in (Average, Sum, Adasum):
        raise ValueError("DistributedGradientTape: op must be hvd.Average or hvd.Sum")
    cls = type(gradtape.__class__.__name__, (gradtape.__class__,), dict(_DistributedGradientTape.__dict__))
    return cls(gradtape._tape, compression, sparse_as_dense, op, gradient_predivide_factor,
               gradtape._persistent, gradtape._watch_accessed_variables, scale_local_gradients)


__all__ = [
    "init", "shutdown", "is_initialized", "size", "rank", "local_size", "local_rank", "cross_size", "cross_rank",
    "is_homogeneous", "ProcessSet", "global_process_set", "allreduce", "grouped_allreduce", "allgather",
    "broadcast", "broadcast_variables", "broadcast_object", "allgather_object", "DistributedGradientTape",
    "Average", "Sum", "Adasum", "Min", "Max", "Product", "Compression", "HorovodInternalError",
    "HostsUpdatedInterrupt", "mpi_threads_supported", "mpi_enabled", "mpi_built", "gloo_enabled", "gloo_built",
    "nccl_built", "ddl_built", "ccl_built", "cuda_built", "rocm_built",
]
