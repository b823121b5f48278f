from edt.tensorflow.keras import *  # noqa: F401,F403
from edt.tensorflow.keras import __all__, callbacks  # noqa: F401
from horovod.tensorflow.keras import elastic  # noqa: F401
