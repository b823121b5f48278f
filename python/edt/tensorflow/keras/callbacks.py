"""Horovod's Keras callbacks (horovod.tensorflow.keras.callbacks) on edt.
Keras runs callbacks eagerly: their collectives are eager calls, numbered
alike on every rank."""

import tensorflow as tf

import edt.tensorflow as hvd
from edt.tensorflow.util import optimizer_variables, variable_key


class BroadcastGlobalVariablesCallback(tf.keras.callbacks.Callback):
    """Makes every rank's model and optimizer state root_rank's, after the
    first batch (when the optimizer's variables exist), as Horovod does;
    `local_variables` keep each rank's own values."""

    def __init__(self, root_rank, device="", local_variables=None):
        super().__init__()
        self.root_rank = root_rank
        self.local_variables = {variable_key(v) for v in (local_variables or [])}
        self.broadcast_done = False

    def on_batch_end(self, batch, logs=None):
        if self.broadcast_done:
            return
        shared = [v for v in self.model.variables if variable_key(v) not in self.local_variables]
        hvd.broadcast_variables(shared, root_rank=self.root_rank)
        hvd.broadcast_variables(optimizer_variables(self.model.optimizer), root_rank=self.root_rank)
        self.broadcast_done = True


class MetricAverageCallback(tf.keras.callbacks.Callback):
    """Replaces each epoch's metrics in `logs` by their average over every
    rank, in sorted order so that every rank reduces them alike."""

    def __init__(self, device=""):
        super().__init__()

    def on_epoch_end(self, epoch, logs=None):
        for metric in sorted(logs or {}):
            value = tf.constant(logs[metric], tf.float64)
            logs[metric] = float(hvd.allreduce(value, op=hvd.Average, name="MetricAverage.%s" % metric).numpy())


def _set_lr(model, lr):
    model.optimizer.learning_rate.assign(lr)  # a tf.Variable, or Keras 3's keras.Variable


class LearningRateScheduleCallback(tf.keras.callbacks.Callback):
    """Sets the learning rate to initial_lr * multiplier(epoch) from
    start_epoch until end_epoch; multiplier may be a number. Without
    staircase the epoch is fractional (steps_per_epoch, or Keras's
    params["steps"])."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None):
        super().__init__()
        self.initial_lr = initial_lr
        self.multiplier = multiplier if callable(multiplier) else (lambda epoch: multiplier)
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = 0

    def _active(self, epoch):
        return epoch >= self.start_epoch and (self.end_epoch is None or epoch < self.end_epoch)

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch
        if self.staircase and self._active(epoch):
            _set_lr(self.model, self.initial_lr * self.multiplier(epoch))

    def _steps(self):
        return self.steps_per_epoch or self.params.get("steps") or 1

    def _fractional_epoch(self, batch):
        return self.current_epoch + float(batch) / self._steps()

    def on_batch_begin(self, batch, logs=None):
        if self.staircase or not self._active(self.current_epoch):
            return
        _set_lr(self.model, self.initial_lr * self.multiplier(self._fractional_epoch(batch)))


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Raises the learning rate from initial_lr / size() to initial_lr over
    warmup_epochs (Goyal et al., as Horovod does)."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True, steps_per_epoch=None, verbose=0):
        def multiplier(epoch):
            return 1.0 / hvd.size() * (epoch * (hvd.size() - 1) / warmup_epochs + 1)
        super().__init__(initial_lr, multiplier, start_epoch=0, end_epoch=warmup_epochs, staircase=False,
                         momentum_correction=momentum_correction, steps_per_epoch=steps_per_epoch)
        self.verbose = verbose

    def _fractional_epoch(self, batch):
        # One step ahead, as Horovod counts: the last warmup batch runs at
        # initial_lr itself.
        return super()._fractional_epoch(batch) + 1.0 / self._steps()

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.end_epoch - 1 and self.verbose > 0 and hvd.rank() == 0:
            print("\nEpoch %d: finished gradual learning rate warmup to %g." % (epoch + 1, self.initial_lr))
