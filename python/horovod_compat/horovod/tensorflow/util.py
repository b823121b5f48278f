from edt.tensorflow.util import _executing_eagerly  # noqa: F401
