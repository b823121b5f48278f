# horovod.keras: Horovod's API for standalone Keras. The Keras that
# TensorFlow 2.15 ships is tf.keras, so it is edt.tensorflow.keras's.
from edt.tensorflow.keras import *  # noqa: F401,F403
from edt.tensorflow.keras import __all__, callbacks  # noqa: F401
