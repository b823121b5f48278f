"""Horovod's Keras API on edt: `import horovod.tensorflow.keras as hvd`
(tf.keras, Keras 2 as TensorFlow 2.15 ships it).

DistributedOptimizer averages the gradients over every rank before the
wrapped optimizer applies them, inside model.fit's tf.function as in a
custom loop: compute_gradients() (which minimize() and model.fit call)
returns them reduced, and apply_gradients() reduces those that did not come
from it. The callbacks are in edt.tensorflow.keras.callbacks."""

import tensorflow as tf

from edt.tensorflow import (Adasum, Average, Compression, Max, Min, Product, Sum, allgather,  # noqa: F401
                            allgather_object, allreduce, broadcast, broadcast_object, ccl_built, cross_rank,
                            cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled, global_process_set, init,
                            is_initialized, local_rank, local_size, mpi_built, mpi_enabled, mpi_threads_supported,
                            nccl_built, rank, rocm_built, shutdown, size)
from edt.tensorflow import _allreduce_grads_fn, _local_layer_weights, _reduce_shared, broadcast_variables
from edt.tensorflow.gradient_aggregation import GradientAggregator
from edt.tensorflow.util import variable_key
from edt.tensorflow.keras import callbacks  # noqa: F401


class _Reduced:
    """The gradients compute_gradients() returned reduced, held (a plain
    object, which Keras does not track) until apply_gradients() takes them."""

    def __init__(self, grads=()):
        self.grads = list(grads)

    def includes(self, grads):
        return all(any(g is r for r in self.grads) for g in grads)


class _DistributedOptimizer:
    """Methods of the optimizer class DistributedOptimizer derives."""

    _edt_local_vars = frozenset()
    _edt_scale_local = True
    _edt_process_set = global_process_set
    _edt_reduced = _Reduced()
    _agg_helper = None  # a GradientAggregator with backward_passes_per_step > 1 (Horovod's name)

    def register_local_var(self, var):
        """The gradient of `var` stays this rank's own (divided by the set's
        size when scale_local_gradients, as in Horovod)."""
        self._edt_local_vars = set(self._edt_local_vars) | {variable_key(var)}

    def _edt_reduce(self, grads_and_vars):
        """The gradients reduced; with backward_passes_per_step N, summed
        here and reduced on every Nth pass only (see GradientAggregator)."""
        grads_and_vars = list(grads_and_vars)
        variables = [v for _, v in grads_and_vars]

        def reduce(grads):
            return _reduce_shared(self._edt_allreduce_grads, grads, variables, self._edt_local_vars,
                                  self._edt_scale_local, self._edt_process_set)
        grads = [g for g, _ in grads_and_vars]
        reduced = reduce(grads) if self._agg_helper is None else self._agg_helper.add(grads, variables, reduce)
        return list(zip(reduced, variables))

    def compute_gradients(self, loss, var_list, tape=None):
        return self._compute_gradients(loss, var_list, tape=tape)

    def _compute_gradients(self, loss, var_list, grad_loss=None, tape=None):
        """The gradients, reduced; the apply_gradients() that follows
        (minimize(), model.fit) does not reduce them again."""
        tape = tf.GradientTape() if tape is None else tape
        base = super(self.__class__, self)
        if hasattr(base, "_compute_gradients"):  # Keras's legacy optimizers (OptimizerV2)
            computed = base._compute_gradients(loss, var_list, grad_loss, tape=tape)
        else:
            computed = base.compute_gradients(loss, var_list, tape=tape)
        reduced = self._edt_reduce(computed)
        self._edt_reduced = _Reduced(g for g, _ in reduced)
        return reduced

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        grads_and_vars = list(grads_and_vars)
        if not self._edt_reduced.includes([g for g, _ in grads_and_vars]):
            grads_and_vars = self._edt_reduce(grads_and_vars)
        self._edt_reduced = _Reduced()
        if self._agg_helper is None:
            return super(self.__class__, self).apply_gradients(grads_and_vars, *args, **kwargs)
        return self._agg_helper.apply(
            lambda: super(self.__class__, self).apply_gradients(grads_and_vars, *args, **kwargs), self)


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="", compression=Compression.none,
                         sparse_as_dense=False, gradient_predivide_factor=1.0, op=Average,
                         backward_passes_per_step=1, average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """`optimizer` (a tf.keras optimizer) as one whose apply_gradients()
    first averages (op) the gradients over the ranks of `process_set`.
    With backward_passes_per_step N above 1 the gradients of N passes are
    summed on each rank (divided by N when average_aggregated_gradients),
    reduced on the Nth, and applied only then; the other passes move only
    `iterations` on, as in Horovod."""
    if op not in (Average, Sum):
        raise ValueError("DistributedOptimizer: op must be hvd.Average or hvd.Sum")
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedOptimizer.__dict__))
    distributed = cls.from_config(optimizer.get_config())
    distributed._edt_allreduce_grads = _allreduce_grads_fn(name or "Distributed%s" % optimizer.__class__.__name__,
                                                           compression, sparse_as_dense, op,
                                                           gradient_predivide_factor, process_set)
    distributed._edt_scale_local = scale_local_gradients
    distributed._edt_process_set = process_set
    if backward_passes_per_step != 1:
        distributed._agg_helper = GradientAggregator(backward_passes_per_step, average_aggregated_gradients,
                                                     sparse_as_dense)
    return distributed


def PartialDistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                                compression=Compression.none, sparse_as_dense=False, gradient_predivide_factor=1.0,
                                op=Average, backward_passes_per_step=1, average_aggregated_gradients=False,
                                groups=None, process_set=global_process_set, local_layers=None,
                                scale_local_gradients=True):
    """DistributedOptimizer whose gradients of the weights of `local_layers`
    (tf.keras layers) stay this rank's own."""
    distributed = DistributedOptimizer(optimizer, name, device_dense, device_sparse, compression, sparse_as_dense,
                                       gradient_predivide_factor, op, backward_passes_per_step,
                                       average_aggregated_gradients, groups=groups, process_set=process_set,
                                       scale_local_gradients=scale_local_gradients)
    for var in _local_layer_weights(local_layers):
        distributed.register_local_var(var)
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
    "DistributedOptimizer", "PartialDistributedOptimizer", "callbacks", "Compression", "Average", "Sum", "Adasum", "Min", "Max", "Product",
]
from edt.tensorflow.keras import elastic  # noqa: E402,F401  (hvd.elastic, as in Horovod)
