"""Horovod's PyTorch API on edt: `import edt.torch as hvd`.

Same names, arguments and semantics as horovod.torch. Start the job with
edtrun (`edtrun -np 4 python3 train.py`); a script started without it is a
job of one rank.
"""

from edt import _runtime
from edt.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from edt.common.process_sets import ProcessSet, add_process_set, global_process_set, remove_process_set
from edt.torch.compression import Compression
from edt.torch.functions import allgather_object, broadcast_object, broadcast_optimizer_state, broadcast_parameters
from edt.torch.mpi_ops import (Adasum, Average, Max, Min, Product, Sum, allgather, allgather_async, allreduce,
                               allreduce_, allreduce_async, allreduce_async_, alltoall, alltoall_async, barrier,
                               broadcast, broadcast_, broadcast_async, broadcast_async_, grouped_allreduce,
                               grouped_allgather, grouped_allgather_async, grouped_allreduce_,
                               grouped_allreduce_async, grouped_allreduce_async_, grouped_reducescatter,
                               grouped_reducescatter_async, join, poll,
                               reducescatter, reducescatter_async, sparse_allreduce_async, synchronize)
from edt.torch.optimizer import DistributedOptimizer
from edt.torch import elastic  # noqa: E402  (hvd.elastic, as in Horovod)


def init(comm=None, process_sets=None):
    """Joins the job edtrun started (EDT_* variables), or starts a job of
    one rank. `process_sets`: "dynamic" (edt always allows
    hvd.add_process_set later) or a list of hvd.ProcessSet to form now, on
    every process alike. `comm` (an MPI communicator) is not offered."""
    from edt.common import process_sets as sets
    if comm is not None:
        raise NotImplementedError("edt has no MPI: call init() without comm (edtrun starts the job)")
    static = sets.static_sets(process_sets)
    if static and _runtime.elastic_mode():
        raise ValueError("in elastic mode process sets end at every reset: add them with hvd.add_process_set() "
                         "inside the function hvd.elastic.run runs, not in init()")
    _runtime.init()
    for process_set in static:
        sets.add_process_set(process_set)


def shutdown():
    """Leaves the job; init() may be called again afterwards."""
    _runtime.shutdown()


def is_initialized():
    return _runtime.is_initialized()


def size():
    return _runtime.place().size


def rank():
    return _runtime.place().rank


def local_size():
    return _runtime.place().local_size


def local_rank():
    return _runtime.place().local_rank


def cross_size():
    return _runtime.place().cross_size


def cross_rank():
    return _runtime.place().cross_rank


def is_homogeneous():
    """True: edtrun fills every host's slots before the next."""
    return True


# What this build has, asked by scripts that pick code paths: edt has its
# own collectives (shared memory and TCP) and no MPI, Gloo or NCCL.
def mpi_threads_supported():
    return False


def mpi_enabled():
    return False


def mpi_built():
    return False


def gloo_enabled():
    return False


def gloo_built():
    return False


def nccl_built():
    return 0


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    return False


def rocm_built():
    return False


__all__ = [
    "init", "shutdown", "is_initialized", "size", "rank", "local_size", "local_rank", "cross_size", "cross_rank",
    "is_homogeneous", "ProcessSet", "global_process_set", "add_process_set", "remove_process_set",
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_", "grouped_allreduce",
    "grouped_allreduce_", "grouped_allreduce_async", "grouped_allreduce_async_", "allgather", "allgather_async",
    "grouped_allgather", "grouped_allgather_async", "grouped_reducescatter", "grouped_reducescatter_async",
    "broadcast", "broadcast_", "broadcast_async", "broadcast_async_", "alltoall", "alltoall_async",
    "reducescatter", "reducescatter_async", "sparse_allreduce_async", "barrier", "join", "poll", "synchronize", "Average", "Sum", "Adasum",
    "Min", "Max", "Product", "Compression", "broadcast_parameters", "broadcast_optimizer_state",
    "broadcast_object", "allgather_object", "DistributedOptimizer", "HorovodInternalError",
    "HostsUpdatedInterrupt", "mpi_threads_supported", "mpi_enabled", "mpi_built", "gloo_enabled", "gloo_built",
    "nccl_built", "ddl_built", "ccl_built", "cuda_built", "rocm_built",
]
