from edt.tensorflow import *  # noqa: F401,F403
from edt.tensorflow import __all__  # noqa: F401
from edt.tensorflow.util import _executing_eagerly  # noqa: F401
from horovod.tensorflow import util  # noqa: F401
from horovod.tensorflow import elastic  # noqa: F401
