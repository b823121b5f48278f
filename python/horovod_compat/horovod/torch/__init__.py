from edt.torch import *  # noqa: F401,F403
from edt.torch import __all__  # noqa: F401
from edt.torch import elastic  # noqa: F401
