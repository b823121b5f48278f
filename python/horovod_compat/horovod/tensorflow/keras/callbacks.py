from edt.tensorflow.keras.callbacks import *  # noqa: F401,F403
