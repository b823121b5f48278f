"""edt: elastic distributed training.

`import edt.torch as hvd` gives Horovod's PyTorch API. This module stays
light (no torch import) because the horovod fallback hook imports it at
interpreter start-up.
"""

__version__ = "0.1.0"
