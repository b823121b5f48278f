"""Horovod's elastic API for PyTorch: run, TorchState, ObjectState,
ElasticSampler. As in Horovod, the state objects live in state.py and the
sampler in sampler.py; run() is edt.common.elastic's (shared with
edt.tensorflow.elastic, which says how it works), given PyTorch's
collectives here.

ElasticSampler wraps edt's C++ ElasticSampler (include/edt/elastic.h):
every sample of an epoch is trained exactly once across the job, and its
state records the progress of the whole job.
"""

import torch

from edt.common import elastic as _common
from edt.torch import functions, mpi_ops
from edt.torch.elastic.sampler import ElasticSampler
from edt.torch.elastic.state import ObjectState, State, TorchState


def _broadcast_flag(value):
    flag = torch.tensor([value], dtype=torch.int32)
    return mpi_ops.broadcast(flag, root_rank=0, name="elastic.check_host_updates").item()


_TORCH = _common.Framework(name="torch", broadcast_flag=_broadcast_flag, allgather_object=functions.allgather_object,
                           forget_pending=mpi_ops.forget_pending, guard=lambda func: func,
                           enter_generation=lambda: None)


def run(func):
    """Decorator: runs func(state, ...) until it returns. On
    HorovodInternalError rolls back to the last commit and re-forms the
    job, on HostsUpdatedInterrupt re-forms it keeping the state
    (edt.common.elastic)."""
    return _common.run_fn(func, _TORCH)


__all__ = ["run", "State", "ObjectState", "TorchState", "ElasticSampler"]
