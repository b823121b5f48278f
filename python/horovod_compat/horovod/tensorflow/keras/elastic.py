from edt.tensorflow.keras.elastic import *  # noqa: F401,F403
from edt.tensorflow.keras.elastic import TensorFlowKerasState  # noqa: F401  (there in Horovod's module too)
