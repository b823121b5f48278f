from edt.tensorflow import *  # noqa: F401,F403
from edt.tensorflow import __all__  # noqa: F401
