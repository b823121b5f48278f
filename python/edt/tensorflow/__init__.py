"""Horovod's TensorFlow 2 API on edt: `import edt.tensorflow as hvd` (and
`import horovod.tensorflow as hvd` where no real Horovod is installed).

Same names, arguments and semantics as horovod.tensorflow; the collectives
are TensorFlow ops (see mpi_ops), so they work eagerly and inside
tf.function. CPU tensors; every collective takes Horovod's `process_set=`
(hvd.add_process_set, the same sets as edt.torch's). Start the job with edtrun
(`edtrun -np 2 python3 train.py`, or `horovodrun`); a script started without
it is a job of one rank.
"""

import os
import pickle

import numpy as np
import tensorflow as tf

from edt.common import basics as _basics
from edt.common.basics import (ccl_built, cross_rank, cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled,
                               is_homogeneous, is_initialized, local_rank, local_size, mpi_built, mpi_enabled,
                               mpi_threads_supported, nccl_built, rank, rocm_built, shutdown, size)
from edt.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from edt.common.process_sets import ProcessSet, add_process_set, global_process_set, remove_process_set
from edt.tensorflow import mpi_ops
from edt.tensorflow.compression import Compression
from edt.tensorflow.gradient_aggregation import aggregator_of
from edt.tensorflow.util import variable_key
from edt.tensorflow.mpi_ops import (Adasum, Average, Max, Min, Product, Sum, allgather, alltoall,  # noqa: F401
                                    barrier, broadcast, broadcast_, grouped_allgather, join, local_rank_op,
                                    local_size_op, process_set_included_op, rank_op, size_op)


def init(comm=None, process_sets=None):
    """Joins the job (see edt.common.basics.init) and hands its engine to
    the TensorFlow ops."""
    _basics.init(comm, process_sets)
    _share_cores()
    if not _basics._runtime.elastic_mode():
        mpi_ops._adopt()


def _share_cores():
    """Several workers on one host share its cores: each gets its share of
    TensorFlow's intra-op threads (the cores it may run on / the workers on
    the host, at least 1) instead of TensorFlow's default of one per core in
    every worker, which runs more busy threads than cores and starves the
    threads that communicate (as edtrun's OMP_NUM_THREADS=1 does for
    PyTorch). Kept: TF_NUM_INTRAOP_THREADS, a count set before init(), and
    TensorFlow's own once it has started its threads."""
    workers = _basics.local_size()
    if workers < 2 or "TF_NUM_INTRAOP_THREADS" in os.environ:
        return
    if tf.config.threading.get_intra_op_parallelism_threads() != 0:
        return
    try:
        tf.config.threading.set_intra_op_parallelism_threads(max(1, len(os.sched_getaffinity(0)) // workers))
    except RuntimeError:  # TensorFlow's runtime has started: its threads are made
        pass


def allreduce(tensor, average=None, device_dense="", device_sparse="", compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, name=None, process_set=global_process_set,
              ignore_name_scope=False):
    """The reduction of `tensor` over every rank (op: hvd.Average, the
    default, Sum, Min, Max or Product). A tf.IndexedSlices (a sparse
    gradient) is gathered instead, its values divided by the set's size
    for Average, as in Horovod."""
    op = _basics.resolve_op(op, average)
    if isinstance(tensor, tf.IndexedSlices):
        if op not in (Average, Sum):
            raise NotImplementedError("allreduce of a tf.IndexedSlices supports hvd.Average and hvd.Sum only")
        if prescale_factor != 1.0 or postscale_factor != 1.0:
            raise NotImplementedError("allreduce of a tf.IndexedSlices takes no prescale_factor or postscale_factor "
                                      "(it gathers the slices; scale the values instead)")
        values = allgather(tensor.values, name=None if name is None else name + ".values", process_set=process_set)
        indices = allgather(tensor.indices, name=None if name is None else name + ".indices",
                            process_set=process_set)
        if op == Average:
            values = values / tf.cast(mpi_ops._set_size(process_set), values.dtype)
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


def reducescatter(tensor, device_dense="", compression=Compression.none, op=Average, name=None,
                  process_set=global_process_set, ignore_name_scope=False, prescale_factor=1.0,
                  postscale_factor=1.0):
    """The reduction of `tensor` over the set (op: hvd.Average, the default,
    or Sum), of which this rank keeps its rows of the first dimension (the
    first ranks one more when it does not divide evenly). Differentiable."""
    compressed, context = compression.compress(tf.convert_to_tensor(tensor))
    reduced = mpi_ops._reducescatter(compressed, name=name, op=op, process_set=process_set,
                                     prescale_factor=prescale_factor, postscale_factor=postscale_factor)
    return compression.decompress(reduced, context)


def grouped_reducescatter(tensors, device_dense="", compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """reducescatter of each tensor; the engine runs them together."""
    return [reducescatter(t, compression=compression, op=op, process_set=process_set,
                          prescale_factor=prescale_factor, postscale_factor=postscale_factor) for t in tensors]


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Assigns root_rank's value to each variable on every rank."""
    return tf.group(*[v.assign(broadcast(v, root_rank, process_set=process_set)) for v in variables])


def broadcast_global_variables(root_rank):
    """TensorFlow 1's graph mode: broadcasts every global variable
    (tf.compat.v1.global_variables()). Eagerly there are none to find:
    RuntimeError, as in Horovod."""
    if tf.executing_eagerly():
        raise RuntimeError("hvd.broadcast_global_variables() does not support eager execution; use "
                           "hvd.broadcast_variables(<model/optimizer variables>) instead")
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


def _to_numpy(tensor, session):
    """A tensor's value: eagerly its own, in graph mode run in `session`
    (TensorFlow 1's, else the default session)."""
    if tf.executing_eagerly():
        return tensor.numpy()
    session = session or tf.compat.v1.get_default_session()
    if session is None:
        raise ValueError("in graph mode this call runs its collectives in a session: pass session= or call it "
                         "inside `with tf.compat.v1.Session() as session:`")
    return session.run(tensor)


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """A function that broadcasts its argument from root_rank (Horovod's
    graph-mode helper; eagerly it is broadcast_object)."""
    return lambda obj: broadcast_object(obj, root_rank, session, name, process_set)


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=global_process_set):
    """root_rank's picklable `obj`, on every rank (eagerly)."""
    name = name or type(obj).__name__
    payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8) if rank() == root_rank else np.zeros(0, np.uint8)
    length = _to_numpy(broadcast(tf.constant([payload.size], tf.int64), root_rank, name=name + ".size",
                                 process_set=process_set), session)
    if rank() != root_rank:
        payload = np.zeros(int(length[0]), np.uint8)
    data = broadcast(tf.constant(payload), root_rank, name=name + ".data", process_set=process_set)
    return pickle.loads(_to_numpy(data, session).tobytes())


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """Every rank's picklable `obj`, as a list in rank order (eagerly)."""
    name = name or type(obj).__name__
    payload = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
    sizes = _to_numpy(allgather(tf.constant([payload.size], tf.int64), name=name + ".sizes",
                                process_set=process_set), session)
    data = _to_numpy(allgather(tf.constant(payload), name=name + ".data", process_set=process_set), session)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    return [pickle.loads(data[offsets[i]:offsets[i + 1]].tobytes()) for i in range(len(sizes))]


def _allreduce_grads_fn(name, compression, sparse_as_dense, op, gradient_predivide_factor,
                        process_set=global_process_set):
    """A function that averages (or sums) a list of gradients over the
    ranks of the set, under the name scope `name`_Allreduce; a rank outside
    the set keeps its own. gradient_predivide_factor splits Average's
    division: by the factor before the sum, by the set's size/factor after
    it."""
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor is supported with op=hvd.Average only")

    def reduce_one(grad):
        if grad is None:
            return None
        if sparse_as_dense and isinstance(grad, tf.IndexedSlices):
            grad = tf.convert_to_tensor(grad)
        if gradient_predivide_factor != 1.0:
            return allreduce(grad, compression=compression, op=Sum, prescale_factor=1.0 / gradient_predivide_factor,
                             postscale_factor=gradient_predivide_factor / mpi_ops._set_size(process_set),
                             process_set=process_set)
        return allreduce(grad, compression=compression, op=op, process_set=process_set)

    def allreduce_grads(grads):
        if not process_set.included():
            return list(grads)
        with tf.name_scope(name + "_Allreduce"):
            return [reduce_one(g) for g in grads]
    return allreduce_grads


class _DistributedGradientTape(tf.GradientTape):
    """A GradientTape whose gradient() averages the gradients over every
    rank. Made by DistributedGradientTape around a tape that recorded the
    forward pass: it takes over that tape's recording."""

    def __init__(self, tape, compression, sparse_as_dense, op, gradient_predivide_factor, persistent=False,
                 watch_accessed_variables=True, scale_local_gradients=True, process_set=global_process_set,
                 aggregation=None):
        super(self.__class__, self).__init__(persistent, watch_accessed_variables)
        self._tape = tape
        self._allreduce_grads = _allreduce_grads_fn("DistributedGradientTape", compression, sparse_as_dense, op,
                                                    gradient_predivide_factor, process_set)
        self._process_set = process_set
        self._local_sources = set()
        self.scale_local_gradients = scale_local_gradients
        self._aggregation = aggregation  # (backward_passes_per_step, average_aggregated_gradients, sparse_as_dense)
        self._aggregator = None

    def register_local_source(self, source):
        """Gradients of `source` stay this rank's own (divided by the set's
        size when scale_local_gradients, as in Horovod)."""
        self._local_sources.add(variable_key(source))

    def get_local_and_global_gradients(self, target, sources, output_gradients=None, use_generic_names=False):
        """gradient(), split: ([(source, gradient)] of the local sources,
        [(source, gradient)] of the others)."""
        gradients = self.gradient(target, sources, output_gradients, use_generic_names)
        pairs = list(zip(tf.nest.flatten(sources), tf.nest.flatten(gradients)))
        local = [(s, g) for s, g in pairs if variable_key(s) in self._local_sources]
        return local, [(s, g) for s, g in pairs if variable_key(s) not in self._local_sources]

    def gradient(self, target, sources, output_gradients=None, use_generic_names=False):
        """The gradients reduced; with backward_passes_per_step N, summed
        over the passes and reduced on every Nth only (apply_gradients)."""
        gradients = super(self.__class__, self).gradient(target, sources, output_gradients)
        flat_sources = tf.nest.flatten(sources)

        def reduce(grads):
            return _reduce_shared(self._allreduce_grads, grads, flat_sources, self._local_sources,
                                  self.scale_local_gradients, self._process_set)
        flat_grads = tf.nest.flatten(gradients, expand_composites=False)
        if self._aggregation is None:
            return tf.nest.pack_sequence_as(gradients, reduce(flat_grads))
        self._aggregator = aggregator_of(flat_sources, *self._aggregation)
        return tf.nest.pack_sequence_as(gradients, self._aggregator.add(flat_grads, flat_sources, reduce))

    def apply_gradients(self, optimizer, grads_and_vars, **kwargs):
        """optimizer.apply_gradients(grads_and_vars, **kwargs); with
        backward_passes_per_step N only on the passes whose gradient()
        reduced (the others move optimizer.iterations on), eagerly and
        inside tf.function."""
        grads_and_vars = list(grads_and_vars)
        if self._aggregation is None:
            return optimizer.apply_gradients(grads_and_vars, **kwargs)
        if self._aggregator is None:
            raise RuntimeError("DistributedGradientTape.apply_gradients: call gradient() first (with "
                               "backward_passes_per_step > 1 it decides whether this pass applies)")
        return self._aggregator.apply(lambda: optimizer.apply_gradients(grads_and_vars, **kwargs), optimizer)


def _reduce_shared(allreduce_grads, grads, sources, local_sources, scale_local, process_set):
    """The gradients of `sources`: reduced by allreduce_grads, but those of
    the sources in `local_sources` (refs) stay this rank's own, divided by
    the set's size when scale_local (as in Horovod)."""
    grads = list(grads)
    shared = [i for i, s in enumerate(sources) if variable_key(s) not in local_sources]
    for i, g in zip(shared, allreduce_grads([grads[i] for i in shared])):
        grads[i] = g
    if scale_local:
        for i, s in enumerate(sources):
            if variable_key(s) in local_sources and grads[i] is not None:
                grads[i] = _scaled(grads[i], 1.0 / mpi_ops._set_size(process_set))
    return grads


def _scaled(grad, factor):
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values * factor, grad.indices, grad.dense_shape)
    return grad * factor


def DistributedGradientTape(gradtape, device_dense="", device_sparse="", compression=Compression.none,
                            sparse_as_dense=False, op=Average, gradient_predivide_factor=1.0, num_groups=0,
                            groups=None, process_set=global_process_set, scale_local_gradients=True,
                            backward_passes_per_step=1, average_aggregated_gradients=False):
    """`gradtape` (a tf.GradientTape that recorded the forward pass) as a tape
    whose gradient() returns the gradients averaged (op) over every rank.
    num_groups and groups are accepted: the engine fuses every gradient of a
    step anyway. backward_passes_per_step N above 1 (edt's; Horovod's tape
    has no such argument): gradient() sums each pass's gradients on this
    rank and reduces the sums on every Nth pass (divided by N when
    average_aggregated_gradients), returning the local sums on the others;
    tape.apply_gradients(optimizer, grads_and_vars) applies on the Nth only."""
    if op not in (Average, Sum, Adasum):
        raise ValueError("DistributedGradientTape: op must be hvd.Average or hvd.Sum")
    aggregation = None
    if backward_passes_per_step != 1:
        aggregation = (backward_passes_per_step, average_aggregated_gradients, sparse_as_dense)
    cls = type(gradtape.__class__.__name__, (gradtape.__class__,), dict(_DistributedGradientTape.__dict__))
    return cls(gradtape._tape, compression, sparse_as_dense, op, gradient_predivide_factor,
               gradtape._persistent, gradtape._watch_accessed_variables, scale_local_gradients, process_set,
               aggregation)


def PartialDistributedGradientTape(gradtape, device_dense="", device_sparse="", compression=Compression.none,
                                   sparse_as_dense=False, op=Average, gradient_predivide_factor=1.0, num_groups=0,
                                   groups=None, process_set=global_process_set, local_layers=None,
                                   scale_local_gradients=True):
    """DistributedGradientTape whose gradients of the weights of
    `local_layers` (tf.keras layers) stay this rank's own."""
    tape = DistributedGradientTape(gradtape, device_dense, device_sparse, compression, sparse_as_dense, op,
                                   gradient_predivide_factor, num_groups, groups, process_set, scale_local_gradients)
    for var in _local_layer_weights(local_layers):
        tape.register_local_source(var)
    return tape


def _local_layer_weights(local_layers):
    """The trainable weights of `local_layers`: None, a tf.keras layer or
    a list of them (Horovod's local_layers argument)."""
    if local_layers is None:
        local_layers = []
    elif isinstance(local_layers, tf.keras.layers.Layer):
        local_layers = [local_layers]
    elif not all(isinstance(layer, tf.keras.layers.Layer) for layer in local_layers):
        raise ValueError("All local layers must be of tf.keras.layers.Layer type.")
    return [v for layer in local_layers for v in layer.trainable_weights]


__all__ = [
    "init", "shutdown", "is_initialized", "size", "rank", "local_size", "local_rank", "cross_size", "cross_rank",
    "is_homogeneous", "ProcessSet", "global_process_set", "add_process_set", "remove_process_set", "allreduce",
    "grouped_allreduce", "allgather", "grouped_allgather", "broadcast", "broadcast_", "alltoall", "reducescatter",
    "grouped_reducescatter", "barrier", "join", "size_op", "rank_op", "local_size_op", "local_rank_op",
    "process_set_included_op", "broadcast_variables", "broadcast_object", "broadcast_object_fn",
    "allgather_object", "broadcast_global_variables", "DistributedGradientTape", "PartialDistributedGradientTape",
    "SyncBatchNormalization",
    "Average", "Sum", "Adasum", "Min", "Max", "Product", "Compression", "HorovodInternalError",
    "HostsUpdatedInterrupt", "mpi_threads_supported", "mpi_enabled", "mpi_built", "gloo_enabled", "gloo_built",
    "nccl_built", "ddl_built", "ccl_built", "cuda_built", "rocm_built",
]
from edt.tensorflow.sync_batch_norm import SyncBatchNormalization  # noqa: E402
from edt.tensorflow import elastic  # noqa: E402,F401  (hvd.elastic, as in Horovod)
