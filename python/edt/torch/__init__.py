"""Horovod's PyTorch API on edt: `import edt.torch as hvd`.

Same names, arguments and semantics as horovod.torch. Start the job with
edtrun (`edtrun -np 4 python3 train.py`); a script started without it is a
job of one rank.
"""

from edt import _runtime  # noqa: F401  (bench/torch_step reads hvd._runtime)
from edt.common.basics import (ccl_built, cross_rank, cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled,
                               init, is_homogeneous, is_initialized, local_rank, local_size, mpi_built, mpi_enabled,
                               mpi_threads_supported, nccl_built, rank, rocm_built, shutdown, size)
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
