"""What every framework's Horovod API shares (edt.torch, edt.tensorflow):
joining the job, the process's place in it, and what the build has."""

from edt import _runtime

# Horovod's reduction constants, with Horovod's values.
Average = 0
Sum = 1
Adasum = 2
Min = 3
Max = 4
Product = 5

# The engine's number (edt::ReduceOp) and Horovod's name of each.
_ENGINE_OP = {Sum: 0, Average: 1, Min: 2, Max: 3, Product: 4}
_OP_NAME = {Average: "Average", Sum: "Sum", Adasum: "Adasum", Min: "Min", Max: "Max", Product: "Product"}


def resolve_op(op, average):
    """Horovod's op from its `op` and deprecated `average` arguments."""
    if average is not None:
        if op is not None:
            raise ValueError("The op parameter supersedes average. Please provide only one of them.")
        return Average if average else Sum
    return Average if op is None else op


def engine_op(op):
    if op == Adasum:
        raise NotImplementedError("edt does not implement Adasum; use op=hvd.Average or hvd.Sum")
    if op not in _ENGINE_OP:
        raise ValueError("unknown reduction op %r; use hvd.Average, Sum, Min, Max or Product" % (op,))
    return _ENGINE_OP[op]


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
    "is_homogeneous", "mpi_threads_supported", "mpi_enabled", "mpi_built", "gloo_enabled", "gloo_built",
    "nccl_built", "ddl_built", "ccl_built", "cuda_built", "rocm_built",
]
