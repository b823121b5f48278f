from edt.tensorflow.elastic import *  # noqa: F401,F403
