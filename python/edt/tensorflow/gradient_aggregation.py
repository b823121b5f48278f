"""Local gradient aggregation (Horovod's backward_passes_per_step above 1)
for the Keras DistributedOptimizer and DistributedGradientTape.

A GradientAggregator sums each pass's gradients into variables of its own,
on this rank; on every Nth pass it reduces the sums over the ranks (one
allreduce per N passes instead of N), divides them by N when
average_aggregated_gradients, and starts again from zero. The caller applies
only on that pass: apply() runs its closure when the counter is back at 0
and otherwise counts the pass in the optimizer's iterations, as Horovod's
optimizer does. The state lives in tf.Variables, so the same code runs
eagerly and inside tf.function (tf.cond picks the branch)."""

import tensorflow as tf

from edt.tensorflow.util import variable_key


class GradientAggregator:
    """The sums and the pass counter (`counter`: passes since the last
    reduction, Horovod's `_agg_helper.counter`) of one optimizer or one set
    of a tape's sources."""

    def __init__(self, backward_passes_per_step, average_aggregated_gradients, sparse_as_dense):
        if int(backward_passes_per_step) < 1:
            raise ValueError("backward_passes_per_step must be 1 or more (the passes summed before one allreduce); "
                             "got %r" % (backward_passes_per_step,))
        self.backward_passes_per_step = int(backward_passes_per_step)
        self.average_aggregated_gradients = average_aggregated_gradients
        self.sparse_as_dense = sparse_as_dense
        self._sums = {}
        with tf.init_scope():  # a variable of the program, even when first made inside a tf.function
            self.counter = tf.Variable(0, trainable=False, dtype=tf.int32, name="edt_aggregation_counter")

    def _dense(self, grad):
        if isinstance(grad, tf.IndexedSlices):
            if not self.sparse_as_dense:
                raise ValueError("backward_passes_per_step > 1 sums gradients in dense variables, and a gradient is "
                                 "a tf.IndexedSlices (tf.gather, Embedding): pass sparse_as_dense=True")
            return tf.convert_to_tensor(grad)
        return grad

    def _sum_of(self, position, grad, source):
        """The variable holding the sum of `source`'s gradients, made (zero)
        at its first gradient."""
        key = source.ref() if isinstance(source, tf.Variable) else position
        if key not in self._sums:
            shape = source.shape if isinstance(source, tf.Variable) else grad.shape
            with tf.init_scope():
                self._sums[key] = tf.Variable(tf.zeros(shape, grad.dtype), trainable=False,
                                              name="edt_aggregated_gradient")
        return self._sums[key]

    def add(self, grads, sources, reduce_fn):
        """Adds this pass's `grads` (of `sources`; None stays None) to the
        sums and returns them, except on the Nth pass: then the reduced sums,
        reduce_fn(list aligned with sources), over N when averaged, after
        which the sums and the counter restart from zero."""
        grads = list(grads)
        present = [i for i, g in enumerate(grads) if g is not None]
        sums = []
        for i in present:
            grad = self._dense(grads[i])
            total = self._sum_of(i, grad, sources[i])
            total.assign_add(grad)
            sums.append(total.read_value())
        self.counter.assign_add(1)
        if not present:
            return grads
        last = tf.equal(self.counter, self.backward_passes_per_step)
        summed = tf.cond(last, lambda: self._reduce_and_restart(sums, present, len(grads), reduce_fn),
                         lambda: [tf.identity(s) for s in sums])
        for i, g in zip(present, summed):
            grads[i] = g
        return grads

    def _reduce_and_restart(self, sums, present, count, reduce_fn):
        aligned = [None] * count
        for i, s in zip(present, sums):
            aligned[i] = s
        reduced = reduce_fn(aligned)
        reduced = [tf.convert_to_tensor(reduced[i]) for i in present]
        if self.average_aggregated_gradients:
            reduced = [g / tf.cast(self.backward_passes_per_step, g.dtype) for g in reduced]
        with tf.control_dependencies(reduced):
            self.counter.assign(0)
            for total in self._sums.values():
                total.assign(tf.zeros_like(total))
        return reduced

    def apply(self, apply_fn, optimizer):
        """apply_fn() on a pass that reduced (its result, eagerly); on the
        others only the optimizer's `iterations` moves on."""
        def skip():
            iterations = getattr(optimizer, "iterations", None)
            if iterations is not None:
                iterations.assign_add(1)

        if tf.executing_eagerly():
            if int(self.counter.numpy()) == 0:
                return apply_fn()
            return skip()

        def applied():
            apply_fn()
            return tf.constant(True)

        def skipped():
            skip()
            return tf.constant(False)
        return tf.cond(tf.equal(self.counter, 0), applied, skipped)


def aggregator_of(sources, backward_passes_per_step, average_aggregated_gradients, sparse_as_dense):
    """The GradientAggregator of a DistributedGradientTape's `sources`. A
    training loop makes a new tape each pass, so the sums belong to the
    sources (variables, by identity), not to the tape: each pass's tape over
    the same variables adds to the same sums. The aggregators are kept on
    the first source, so they live as long as the variables do (the cycle
    through the keys' refs is the garbage collector's), not as long as the
    process."""
    key = (tuple(variable_key(s) for s in sources), int(backward_passes_per_step), bool(average_aggregated_gradients),
           bool(sparse_as_dense))
    kept = sources[0].__dict__.setdefault("_edt_aggregators", {})
    if key not in kept:
        kept[key] = GradientAggregator(backward_passes_per_step, average_aggregated_gradients, sparse_as_dense)
    return kept[key]
