from edt.torch.elastic import *  # noqa: F401,F403
