"""edt._edt: edt's C++ runtime (a Communicator and the Engine behind it,
the elastic job, the sampler, the rendezvous store) through its C ABI,
libedt_capi.so beside this file (python/src/capi.h), with ctypes.

Why ctypes over a C ABI: the package then works in whatever Python an
image has (3.8 and later, any build), with nothing built per Python
version; the library has its C++ runtime inside and needs only glibc
2.35 or later (docs/images.md). ctypes releases the GIL for every call,
so a collective that waits never holds up the process's other threads.

Errors are EdtError(code name, message), a RuntimeError. A process set is
a Runtime of its own over some of the job's ranks (Runtime.subgroup).
"""

import ctypes
import os
import sys

_c_int64_p = ctypes.POINTER(ctypes.c_int64)
_c_uint64_p = ctypes.POINTER(ctypes.c_uint64)


class EdtError(RuntimeError):
    """A failure of edt's runtime: args are (status code name, message)."""


def _load():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libedt_capi.so")
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        raise ImportError("edt cannot load its runtime library %s: %s (it needs glibc 2.35 or later; "
                          "rebuild edt, or use an image based on Debian 12, Ubuntu 22.04 or later)" % (path, e))


_lib = _load()

_SIGNATURES = {
    # name: (result type, argument types)
    "edt_error_code": (ctypes.c_char_p, []),
    "edt_error_message": (ctypes.c_char_p, []),
    "edt_set_callback_error": (None, [ctypes.c_char_p]),
    "edt_free": (None, [ctypes.c_void_p]),
    "edt_expand_slurm_nodelist": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]),
    "edt_store_server_new": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_uint16, ctypes.POINTER(ctypes.c_void_p)]),
    "edt_store_server_port": (ctypes.c_int, [ctypes.c_void_p]),
    "edt_store_server_free": (None, [ctypes.c_void_p]),
    "edt_runtime_new": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p)]),
    "edt_runtime_subgroup": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int,
                                            ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]),
    "edt_runtime_free": (None, [ctypes.c_void_p]),
    "edt_runtime_field": (ctypes.c_int64, [ctypes.c_void_p, ctypes.c_int]),
    "edt_runtime_cycle_time_ms": (ctypes.c_double, [ctypes.c_void_p]),
    "edt_runtime_transport": (ctypes.c_char_p, [ctypes.c_void_p]),
    "edt_runtime_submit": (ctypes.c_int64, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
                                            ctypes.c_int, ctypes.c_int, ctypes.c_double, ctypes.c_double,
                                            _c_int64_p, ctypes.c_int, _c_int64_p, ctypes.c_int, ctypes.c_void_p]),
    "edt_runtime_submit_join": (ctypes.c_int64, [ctypes.c_void_p]),
    "edt_runtime_poll": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_int)]),
    "edt_runtime_shutdown": (ctypes.c_int, [ctypes.c_void_p]),
    "edt_runtime_engine_port": (ctypes.c_void_p, [ctypes.c_void_p]),
    "edt_runtime_wait": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p)]),
    "edt_output_has_data": (ctypes.c_int, [ctypes.c_void_p]),
    "edt_output_data": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]),
    "edt_output_shape": (_c_int64_p, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]),
    "edt_output_recv_splits": (_c_int64_p, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]),
    "edt_output_last_joined_rank": (ctypes.c_int, [ctypes.c_void_p]),
    "edt_output_free": (None, [ctypes.c_void_p]),
    "edt_sampler_new": (ctypes.c_int, [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int,
                                       ctypes.POINTER(ctypes.c_void_p)]),
    "edt_sampler_free": (None, [ctypes.c_void_p]),
    "edt_sampler_set_epoch": (None, [ctypes.c_void_p, ctypes.c_uint64]),
    "edt_sampler_reset": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]),
    "edt_sampler_record_batch": (None, [ctypes.c_void_p, ctypes.c_uint64]),
    "edt_sampler_steps_left": (ctypes.c_uint64, [ctypes.c_void_p, ctypes.c_uint64]),
    "edt_sampler_batch": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_uint64, ctypes.POINTER(_c_uint64_p),
                                         ctypes.POINTER(ctypes.c_size_t)]),
    "edt_sampler_shard": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(_c_uint64_p),
                                         ctypes.POINTER(ctypes.c_size_t)]),
    "edt_sampler_field": (ctypes.c_uint64, [ctypes.c_void_p, ctypes.c_int]),
    "edt_sampler_serialize": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                             ctypes.POINTER(ctypes.c_size_t)]),
    "edt_sampler_deserialize": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]),
    "edt_release_owner": (None, [ctypes.c_void_p]),
    "edt_elastic_job_new": (ctypes.c_int, [ctypes.POINTER(ctypes.c_void_p)]),
    "edt_elastic_job_free": (None, [ctypes.c_void_p]),
    "edt_elastic_job_add": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]),
    "edt_elastic_job_run": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                           ctypes.POINTER(ctypes.c_int)]),
    "edt_elastic_job_placement": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int),
                                                 ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int),
                                                 ctypes.POINTER(ctypes.c_void_p)]),
    "edt_elastic_job_save": (None, [ctypes.c_void_p]),
    "edt_elastic_job_restore": (ctypes.c_int, [ctypes.c_void_p]),
    "edt_elastic_job_field": (ctypes.c_int64, [ctypes.c_void_p, ctypes.c_int]),
}
for _name, (_result, _args) in _SIGNATURES.items():
    _fn = getattr(_lib, _name)
    _fn.restype, _fn.argtypes = _result, _args


def _error():
    return EdtError(_lib.edt_error_code().decode(), _lib.edt_error_message().decode(errors="replace"))


def _check(result):
    if result < 0:
        raise _error()
    return result


def _made(fn, *args):
    """The object fn(*args, &out) makes."""
    out = ctypes.c_void_p()
    _check(fn(*args, ctypes.byref(out)))
    return out.value


def _taken_string(pointer):
    """A C string the library allocated, as str; freed."""
    try:
        return ctypes.string_at(pointer).decode()
    finally:
        _lib.edt_free(pointer)


def _int64s(values):
    values = list(values)
    return (ctypes.c_int64 * len(values))(*values), len(values)


def expand_slurm_nodelist(nodelist):
    """Slurm's compact node list ("tt-worker-[0-2]") as host names, parsed as
    edtrun parses it (launcher/slurm_allocation.h)."""
    names = ctypes.c_void_p()
    _check(_lib.edt_expand_slurm_nodelist(nodelist.encode(), ctypes.byref(names)))
    joined = _taken_string(names)
    return joined.split("\n") if joined else []


class _Owned:
    """A Python object over an object of the library's (its `_handle`),
    freed with it by the class's `_free`."""

    _free = None

    def __del__(self):
        if getattr(self, "_handle", None):
            type(self)._free(self._handle)
            self._handle = None


class StoreServer(_Owned):
    """The job's rendezvous store when no edtrun hosts one (under srun, rank
    0 serves it; edt/_slurm.py). Serves until the object is collected."""

    _free = _lib.edt_store_server_free

    def __init__(self, host, port):
        self._handle = _made(_lib.edt_store_server_new, host.encode(), port)

    @property
    def port(self):
        return _lib.edt_store_server_port(self._handle)


_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE, _CROSS_RANK, _CROSS_SIZE, _ENDED, _FUSED_BATCHES, _FUSION_THRESHOLD = range(9)


def _runtime_field(index):
    return property(lambda self: _lib.edt_runtime_field(self._handle, index))


class Runtime(_Owned):
    """A communicator and the engine over it: Runtime() from edtrun's
    environment (a job of one rank without it)."""

    _free = _lib.edt_runtime_free

    def __init__(self, _handle=None):
        self._handle = _handle if _handle is not None else _made(_lib.edt_runtime_new)

    rank = _runtime_field(_RANK)
    size = _runtime_field(_SIZE)
    local_rank = _runtime_field(_LOCAL_RANK)
    local_size = _runtime_field(_LOCAL_SIZE)
    cross_rank = _runtime_field(_CROSS_RANK)
    cross_size = _runtime_field(_CROSS_SIZE)
    fused_batches = _runtime_field(_FUSED_BATCHES)
    fusion_threshold = _runtime_field(_FUSION_THRESHOLD)

    @property
    def ended(self):
        return bool(_lib.edt_runtime_field(self._handle, _ENDED))

    @property
    def cycle_time_ms(self):
        return _lib.edt_runtime_cycle_time_ms(self._handle)

    @property
    def transport(self):
        return _lib.edt_runtime_transport(self._handle).decode()

    def submit(self, name, type, dtype, op, root, prescale, postscale, shape, splits, data):
        shape_array, ndim = _int64s(shape)
        splits_array, nsplits = _int64s(splits)
        return _check(_lib.edt_runtime_submit(self._handle, name.encode(), type, dtype, op, root, prescale, postscale,
                                              shape_array, ndim, splits_array, nsplits, data))

    def submit_join(self):
        return _check(_lib.edt_runtime_submit_join(self._handle))

    def poll(self, handle):
        done = ctypes.c_int()
        _check(_lib.edt_runtime_poll(self._handle, handle, ctypes.byref(done)))
        return bool(done.value)

    def wait(self, handle):
        """(bytes as a uint8 array or None, shape, recv_splits, last joined rank)"""
        output = _made(_lib.edt_runtime_wait, self._handle, handle)
        owner = _Output(output)
        return owner.data(), owner.shape(), owner.recv_splits(), _lib.edt_output_last_joined_rank(output)

    def subgroup(self, members, scope):
        members = list(members)
        array = (ctypes.c_int * len(members))(*members)
        return Runtime(_made(_lib.edt_runtime_subgroup, self._handle, array, len(members), scope.encode()))

    def engine_port(self):
        """The address of a new std::shared_ptr<EnginePort> over this engine,
        for edt's TensorFlow ops to take over (engine_port.h)."""
        return _lib.edt_runtime_engine_port(self._handle)

    def shutdown(self):
        _check(_lib.edt_runtime_shutdown(self._handle))


class _Output(_Owned):
    """A finished collective's output; its bytes are read in place by the
    array data() returns, which keeps this alive."""

    _free = _lib.edt_output_free

    def __init__(self, handle):
        self._handle = handle

    def data(self):
        if not _lib.edt_output_has_data(self._handle):
            return None
        size = ctypes.c_size_t()
        address = _lib.edt_output_data(self._handle, ctypes.byref(size))
        import numpy  # only here: the runtime alone works without it
        if size.value == 0:
            return numpy.zeros(0, dtype=numpy.uint8)
        buffer = (ctypes.c_uint8 * size.value).from_address(address)
        buffer._owner = self  # the array holds the buffer, the buffer this
        return numpy.frombuffer(buffer, dtype=numpy.uint8)

    def shape(self):
        return self._int64s(_lib.edt_output_shape)

    def recv_splits(self):
        return self._int64s(_lib.edt_output_recv_splits)

    def _int64s(self, fn):
        count = ctypes.c_int()
        values = fn(self._handle, ctypes.byref(count))
        return [values[i] for i in range(count.value)]


def _indices(fn, *args):
    pointer, count = _c_uint64_p(), ctypes.c_size_t()
    _check(fn(*args, ctypes.byref(pointer), ctypes.byref(count)))
    try:
        return pointer[:count.value]
    finally:
        _lib.edt_free(pointer)


_EPOCH, _EPOCH_DONE, _PROCESSED, _REMAINING = range(4)


def _sampler_field(index, kind=int):
    return property(lambda self: kind(_lib.edt_sampler_field(self._handle, index)))


class ElasticSampler(_Owned):
    """edt::elastic::ElasticSampler: this worker's share of the samples not
    yet processed in this epoch, kept across membership changes."""

    _free = _lib.edt_sampler_free

    def __init__(self, num_samples, seed, shuffle):
        self._handle = _made(_lib.edt_sampler_new, num_samples, seed, 1 if shuffle else 0)

    epoch = _sampler_field(_EPOCH)
    epoch_done = _sampler_field(_EPOCH_DONE, bool)
    processed_count = _sampler_field(_PROCESSED)
    remaining_count = _sampler_field(_REMAINING)

    def set_epoch(self, epoch):
        _lib.edt_sampler_set_epoch(self._handle, epoch)

    def reset(self, rank, size):
        if _lib.edt_sampler_reset(self._handle, rank, size) < 0:
            raise ValueError(_lib.edt_error_message().decode())

    def batch(self, batch_size):
        return _indices(_lib.edt_sampler_batch, self._handle, batch_size)

    def shard(self):
        return _indices(_lib.edt_sampler_shard, self._handle)

    def record_batch(self, batch_size):
        _lib.edt_sampler_record_batch(self._handle, batch_size)

    def steps_left(self, batch_size):
        return _lib.edt_sampler_steps_left(self._handle, batch_size)

    def serialize(self):
        pointer, size = ctypes.c_void_p(), ctypes.c_size_t()
        _check(_lib.edt_sampler_serialize(self._handle, ctypes.byref(pointer), ctypes.byref(size)))
        try:
            return ctypes.string_at(pointer, size.value)
        finally:
            _lib.edt_free(pointer)

    def deserialize(self, data):
        data = bytes(data)
        _check(_lib.edt_sampler_deserialize(self._handle, data, len(data)))


_SERIALIZE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                              ctypes.POINTER(ctypes.c_size_t))
_DESERIALIZE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
_ON_RESET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int)
_COMMIT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int))
_RESTORE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_VIEWS = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t),
                          ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p))
_GENERATION = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


class _Callbacks(ctypes.Structure):
    _fields_ = [("context", ctypes.c_void_p), ("serialize", _SERIALIZE), ("deserialize", _DESERIALIZE),
                ("on_reset", _ON_RESET), ("commit", _COMMIT), ("restore", _RESTORE),
                ("committed_bytes", _SERIALIZE), ("committed_views", _VIEWS)]


class _Lent:
    """The library's hold on bytes it lent; released with the last view."""

    def __init__(self, owner):
        self._owner = owner

    def __del__(self):
        _lib.edt_release_owner(self._owner)


class _StateAdapter:
    """A Python state object (serialize() -> bytes, deserialize(buffer),
    on_reset(rank, size); optionally commit() -> bool, restore(),
    committed_bytes() -> bytes, committed_views() -> [buffer]) as the
    library's edt_state_callbacks. It keeps what it hands out alive: bytes
    until the next call, views until the next commit or committed_views."""

    def __init__(self, target):
        self._target = target
        self._held = None
        self._lent = []
        self.error = None  # the first exception of a callback, until raise_error()
        guard = self._guarded
        self.callbacks = _Callbacks(
            None, _SERIALIZE(guard(lambda _, data, size: self._hand_out(target.serialize(), data, size))),
            _DESERIALIZE(guard(self._deserialize)),
            _ON_RESET(guard(lambda _, rank, size: target.on_reset(rank, size))),
            _COMMIT(guard(self._commit)), _RESTORE(guard(lambda _: target.restore())),
            _SERIALIZE(guard(lambda _, data, size: self._hand_out(target.committed_bytes(), data, size))),
            _VIEWS(guard(self._committed_views)))

    def _guarded(self, fn):
        """fn as a callback the library calls: 0, or -1 with the exception's
        text as the callback's error. The library reports the failures of
        deserialize and restore; the others (serialize, on_reset, commit,
        ...) it cannot, so the exception is kept, and ElasticJob raises it
        once the library's call returns (raise_error)."""
        def called(*args):
            try:
                fn(*args)
                return 0
            except BaseException as e:  # noqa: B902 - nothing may unwind into C
                if self.error is None:
                    self.error = e
                _lib.edt_set_callback_error(("%s: %s" % (type(e).__name__, e)).encode(errors="replace"))
                return -1
        return called

    def raise_error(self):
        error, self.error = self.error, None
        if error is not None:
            raise error

    def _hand_out(self, value, data, size):
        self._held = bytes(value)
        data[0] = ctypes.cast(ctypes.c_char_p(self._held), ctypes.c_void_p).value
        size[0] = len(self._held)

    def _deserialize(self, _, data, size, owner):
        """The received bytes, read in place through a memoryview."""
        if not size:
            _lib.edt_release_owner(owner)
            self._target.deserialize(memoryview(b""))
            return
        buffer = (ctypes.c_uint8 * size).from_address(data)
        buffer._lent = _Lent(owner)
        self._target.deserialize(memoryview(buffer).cast("B"))

    def _commit(self, _, kept):
        self._lent = []  # what was lent is of the commit this one replaces
        commit = getattr(self._target, "commit", None)
        kept[0] = 1 if commit is not None and commit() else 0

    def _committed_views(self, _, count, addresses, sizes):
        self._lent = []
        count[0] = 0
        views = getattr(self._target, "committed_views", None)
        if views is None:
            return
        import numpy
        try:
            arrays = [numpy.frombuffer(item, dtype=numpy.uint8) for item in views()]
        except (TypeError, ValueError):
            return  # then committed_bytes(), which says what is wrong
        where = (ctypes.c_uint64 * len(arrays))(*[a.ctypes.data for a in arrays])
        lengths = (ctypes.c_uint64 * len(arrays))(*[a.nbytes for a in arrays])
        self._lent = [arrays, where, lengths]
        addresses[0] = ctypes.addressof(where)
        sizes[0] = ctypes.addressof(lengths)
        count[0] = len(arrays)


_JOB_MEMBERSHIP_CHANGED, _JOB_GENERATION, _JOB_COMMIT_ID, _JOB_RESETS = range(4)
_DONE, _HOSTS_UPDATED, _COLLECTIVE_FAILED, _RAISED = range(4)


def _job_field(index, kind=int):
    return property(lambda self: kind(_lib.edt_elastic_job_field(self._handle, index)))


class ElasticJob(_Owned):
    """edt::elastic::State and run(), from edtrun's environment: each
    membership generation gets a fresh Runtime over that generation's
    communicator; registered state objects take part in commits, rollbacks
    and the sync to newcomers."""

    _free = _lib.edt_elastic_job_free

    def __init__(self):
        self._handle = _made(_lib.edt_elastic_job_new)
        self._objects = []

    membership_changed = _job_field(_JOB_MEMBERSHIP_CHANGED, bool)
    generation = _job_field(_JOB_GENERATION)
    commit_id = _job_field(_JOB_COMMIT_ID)
    resets = _job_field(_JOB_RESETS)

    def add(self, name, object):
        """Every worker registers the same objects in the same order, before run()."""
        adapter = _StateAdapter(object)
        self._objects.append(adapter)
        _check(_lib.edt_elastic_job_add(self._handle, name.encode(), ctypes.byref(adapter.callbacks)))

    def run(self, fn):
        """Calls fn(runtime) once per generation until it returns. fn raising
        HostsUpdatedInterrupt moves to the next generation keeping the
        state; HorovodInternalError rolls back to the last commit first. Any
        other exception ends run() with it. Returns False when this worker
        left the job because its host was removed."""
        from edt.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt
        raised = []

        def generation(_, handle):
            try:
                self._raise_callback_error()  # of the reset before this generation (on_reset, the sync)
                fn(Runtime(handle))
                return _DONE
            except HostsUpdatedInterrupt:
                return _HOSTS_UPDATED
            except HorovodInternalError:
                return _COLLECTIVE_FAILED
            except BaseException:  # noqa: B902 - raised again below, after the library returned
                raised.append(sys.exc_info()[1])
                return _RAISED

        stayed, callback = ctypes.c_int(), _GENERATION(generation)
        result = _lib.edt_elastic_job_run(self._handle, ctypes.cast(callback, ctypes.c_void_p), None,
                                          ctypes.byref(stayed))
        if raised:
            raise raised[0]
        self._raise_callback_error()
        _check(result)
        return bool(stayed.value)

    def placement(self):
        """(generation, rank, hosts of every rank) now, or of the first
        generation (waited for); None when the job ended or this worker left it."""
        present, generation, rank, hosts = ctypes.c_int(), ctypes.c_int64(), ctypes.c_int(), ctypes.c_void_p()
        _check(_lib.edt_elastic_job_placement(self._handle, ctypes.byref(present), ctypes.byref(generation),
                                              ctypes.byref(rank), ctypes.byref(hosts)))
        if not present.value:
            return None
        joined = _taken_string(hosts)
        return generation.value, rank.value, joined.split("\n") if joined else []

    def save(self):
        _lib.edt_elastic_job_save(self._handle)
        self._raise_callback_error()

    def restore(self):
        result = _lib.edt_elastic_job_restore(self._handle)
        self._raise_callback_error()
        _check(result)

    def _raise_callback_error(self):
        """The first exception a state object's callback raised inside the
        library since the last call, raised here."""
        for adapter in self._objects:
            adapter.raise_error()
