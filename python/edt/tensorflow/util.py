"""horovod.tensorflow.util's helpers that scripts and Horovod's tests use."""

import tensorflow as tf


def _executing_eagerly():
    """Whether TensorFlow runs eagerly here (False inside a tf.function)."""
    return tf.executing_eagerly()
