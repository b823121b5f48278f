"""Horovod's Keras API on edt: `import horovod.tensorflow.keras as hvd`
(tf.keras, Keras 2 as TensorFlow 2.15 ships it).

DistributedOptimizer averages the gradients over every rank before the
wrapped optimizer applies them, inside model.fit's tf.function as in a
custom loop; the callbacks are in edt.tensorflow.keras.callbacks."""

import tensorflow as tf

from edt.tensorflow import (Adasum, Average, Compression, Max, Min, Product, Sum, allgather,  # noqa: F401
                            allgather_object, allreduce, broadcast, broadcast_object, ccl_built, cross_rank,
                            cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled, global_process_set, init,
                            is_initialized, local_rank, local_size, mpi_built, mpi_enabled, mpi_threads_supported,
                            nccl_built, rank, rocm_built, shutdown, size)
from edt.tensorflow import _allreduce_grads_fn, broadcast_variables, mpi_ops
from edt.tensorflow.keras import callbacks  # noqa: F401


class _DistributedOptimizer:
    """Methods of the optimizer class DistributedOptimizer derives."""

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        grads_and_vars = list(grads_and_vars)
        reduced = self._edt_allreduce_grads([g for g, _ in grads_and_vars])
        return super(self.__class__, self).apply_gradients(
            list(zip(reduced, [v for _, v in grads_and_vars])), *args, **kwargs)


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="", compression=Compression.none,
                         sparse_as_dense=False, gradient_predivide_factor=1.0, op=Average,
                         backward_passes_per_step=1, average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """`optimizer` (a tf.keras optimizer) as one whose apply_gradients()
    first averages (op) the gradients over every rank."""
    mpi_ops._global_only(process_set, "DistributedOptimizer")
    if backward_passes_per_step != 1:
        raise NotImplementedError("edt's Keras DistributedOptimizer runs with backward_passes_per_step=1 only")
    if op not in (Average, Sum):
        raise ValueError("DistributedOptimizer: op must be hvd.Average or hvd.Sum")
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedOptimizer.__dict__))
    distributed = cls.from_config(optimizer.get_config())
    distributed._edt_allreduce_grads = _allreduce_grads_fn(name or "Distributed%s" % optimizer.__class__.__name__,
                                                           compression, sparse_as_dense, op,
                                                           gradient_predivide_factor)
    return distributed


def broadcast_global_variables(root_rank):
    """Horovod's Keras call: in TensorFlow 2 there are no global variables
    to find; broadcast a model's with BroadcastGlobalVariablesCallback or
    hvd.broadcast_variables."""
    raise NotImplementedError("broadcast_global_variables needs TensorFlow 1's global variables; use "
                              "hvd.callbacks.BroadcastGlobalVariablesCallback or hvd.broadcast_variables")


__all__ = [
    "init", "shutdown", "is_initialized", "size", "rank", "local_size", "local_rank", "cross_size", "cross_rank",
    "allreduce", "allgather", "broadcast", "broadcast_variables", "broadcast_object", "allgather_object",
    "DistributedOptimizer", "callbacks", "Compression", "Average", "Sum", "Adasum", "Min", "Max", "Product",
]
