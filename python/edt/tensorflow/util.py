"""horovod.tensorflow.util's helpers that scripts and Horovod's tests use,
and edt's own for what Keras 2 and Keras 3 name differently."""

import tensorflow as tf


def variable_key(variable):
    """A hashable key of a variable, by identity: a tf.Variable's ref(), or
    the object's id where it has no ref() (Keras 3's keras.Variable)."""
    return variable.ref() if hasattr(variable, "ref") else id(variable)


def optimizer_variables(optimizer):
    """An optimizer's variables: a method in Keras 2, a property in Keras 3."""
    if optimizer is None:
        return []
    variables = optimizer.variables
    return list(variables() if callable(variables) else variables)


def _executing_eagerly():
    """Whether TensorFlow runs eagerly here (False inside a tf.function)."""
    return tf.executing_eagerly()
