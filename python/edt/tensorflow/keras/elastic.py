"""Horovod's elastic API for Keras (`hvd.elastic` of `import
horovod.tensorflow.keras as hvd`): run, KerasState, and the callbacks that
commit the state and keep its epoch and batch while model.fit trains.
run() and the state are edt.tensorflow.elastic's."""

import tensorflow as tf

from edt.tensorflow.elastic import TensorFlowKerasState, run  # noqa: F401  (run: hvd.elastic.run)


class KerasState(TensorFlowKerasState):
    """The state of a tf.keras model and its optimizer (the compiled one if
    None), and any other attributes (epoch=0, batch=0 for the callbacks)."""

    def __init__(self, model, optimizer=None, **kwargs):
        super().__init__(model, optimizer=optimizer, backend=tf.keras.backend, **kwargs)


class CommitStateCallback(tf.keras.callbacks.Callback):
    """Commits `state` every `batches_per_commit` batches and at the end of
    every epoch."""

    def __init__(self, state, batches_per_commit=1):
        super().__init__()
        self.state = state
        self.batches_per_commit = batches_per_commit
        self.batches_remaining = batches_per_commit

    def on_train_begin(self, logs=None):
        # Counted afresh after every reset, alike on every rank.
        self.batches_remaining = self.batches_per_commit

    def on_batch_end(self, batch, logs=None):
        self.batches_remaining -= 1
        if self.batches_remaining == 0:
            self.state.commit()
            self.batches_remaining = self.batches_per_commit

    def on_epoch_end(self, epoch, logs=None):
        self.state.commit()


class UpdateBatchStateCallback(tf.keras.callbacks.Callback):
    """Keeps state.batch at the batch just trained (0 at an epoch's end).
    With steps_per_epoch, the first epoch after a reset is shortened by the
    batches that epoch had already trained."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self.steps_per_epoch = None

    def on_train_begin(self, logs=None):
        self.steps_per_epoch = None

    def on_epoch_begin(self, epoch, logs=None):
        if self.params.get("steps"):
            if self.steps_per_epoch is None:
                self.steps_per_epoch = self.params.get("steps")
            self.params["steps"] = self.steps_per_epoch - self.state.batch

    def on_batch_end(self, batch, logs=None):
        self.state.batch = batch

    def on_epoch_end(self, epoch, logs=None):
        self.state.batch = 0


class UpdateEpochStateCallback(tf.keras.callbacks.Callback):
    """Keeps state.epoch at the number of epochs trained, across resets
    (Keras counts each fit() from 0)."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self.initial_epoch = self.state.epoch

    def on_train_begin(self, logs=None):
        self.initial_epoch = self.state.epoch

    def on_epoch_end(self, epoch, logs=None):
        # + 1: a reset after state.batch went back to 0 must not train the
        # finished epoch again.
        self.state.epoch = self.initial_epoch + epoch + 1


__all__ = ["run", "KerasState", "CommitStateCallback", "UpdateBatchStateCallback", "UpdateEpochStateCallback"]
