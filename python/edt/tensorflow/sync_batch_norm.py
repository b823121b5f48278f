"""Horovod's SyncBatchNormalization: a tf.keras BatchNormalization whose
training batch statistics are those of every rank's batch together."""

import tensorflow as tf

from edt.common.basics import Sum, size


class SyncBatchNormalization(tf.keras.layers.BatchNormalization):
    """BatchNormalization over the union of the ranks' batches (equal batch
    sizes on every rank, as in Horovod). Not fused: the statistics are
    combined between the moments and the normalization."""

    def __init__(self, fused=False, **kwargs):
        if fused in (True, None):
            raise ValueError("SyncBatchNormalization does not support fused=True.")
        kwargs.setdefault("name", None)
        kwargs["name"] = kwargs["name"] or "sync_batch_normalization"
        super().__init__(fused=fused, **kwargs)

    def _moments(self, inputs, reduction_axes, keep_dims, **kwargs):
        mean, variance = super()._moments(inputs, reduction_axes, keep_dims=keep_dims, **kwargs)
        if size() == 1:
            return mean, variance
        # The job's mean and E[X^2] are the means of the ranks' (equal
        # batches); Var[X] = E[X^2] - E[X]^2.
        from edt.tensorflow.mpi_ops import _allreduce
        stacked = _allreduce(tf.stack([mean, variance + tf.math.square(mean)]), op=Sum) / size()
        job_mean, job_mean_of_square = tf.unstack(stacked)
        return job_mean, job_mean_of_square - tf.math.square(job_mean)
