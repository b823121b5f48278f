"""Horovod's process sets on edt: subsets of the job's ranks that run
collectives among themselves, concurrently with the rest of the job.

Every process keeps the same table of sets (id -> ranks). As in Horovod,
add_process_set(), remove_process_set() and init(process_sets=[...]) are
called by every process of the job alike and in the same order; each call
first checks over the whole job that every process made the same call (a
mismatch is a ValueError on every rank, never a hang). A set's members then
form a communicator and an engine of their own (edt._edt.Runtime.subgroup)
that meet under a store scope named by how many sets the job formed since
init(), so a set added again never meets an earlier one's keys; the other
processes form nothing. Ids are Horovod's: 0 is the global set, a removed
set's id goes to the next set added (first freed, first reused).

A set lives until it is removed, or until the runtime it was formed on
stops: hvd.shutdown(), or the reset of an elastic generation (the global set
is the only one that survives a reset, as in Horovod, whose reset is a
shutdown and an init). Then every ProcessSet object of it is invalidated
(process_set_id None), so a collective on it raises ValueError instead of
running on another set that reused its id.

Thread safety: the table is guarded by one lock; add and remove are meant
for the training thread, as in Horovod.
"""

import collections
import hashlib
import itertools
import threading

from edt import _runtime


class ProcessSet:
    """A set of the job's ranks, by their global ranks. Pass it to
    hvd.init(process_sets=[...]) or hvd.add_process_set(); once registered
    it has a process_set_id, and collectives take it as `process_set=`."""

    process_set_id = None
    ranks = None
    mpi_comm = None

    def __init__(self, ranks_or_comm):
        try:
            ranks = sorted(ranks_or_comm)
        except TypeError:
            raise ValueError("edt builds a ProcessSet from a list of ranks (it has no MPI, so no mpi4py "
                             "communicator); got %r" % (ranks_or_comm,)) from None
        if any(isinstance(r, bool) or not isinstance(r, int) for r in ranks):
            raise ValueError("ProcessSet should be initialized with a list of process ranks (ints); got %r"
                             % (ranks_or_comm,))
        self.ranks = ranks

    def _invalidate(self):
        self.process_set_id = None

    def size(self):
        """The number of ranks in the set; None if it is not registered."""
        if self.process_set_id is None:
            return None
        return len(_entry(self).ranks)

    def rank(self):
        """This process's rank within the set (an index into its ranks);
        None if it is not registered. Collectives still name roots by
        their global rank, as in Horovod."""
        if self.process_set_id is None:
            return None
        entry = _entry(self)
        if entry.runtime is None:
            raise ValueError("Process is not part of provided process set.")
        return entry.runtime.rank

    def included(self):
        """Whether this process is in the set; None without ranks."""
        if self.ranks is None:
            return None
        return _runtime.place().rank in self.ranks

    def __str__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s, mpi_comm=None)" % (self.process_set_id, self.ranks)

    __repr__ = __str__


class _GlobalProcessSet(ProcessSet):
    """Every rank of the job (id 0); its ranks follow the job's size, which
    an elastic job changes between generations."""

    def __init__(self):
        self.process_set_id = 0

    @property
    def ranks(self):
        return list(range(_runtime.place().size)) if _runtime.is_initialized() else []

    def _invalidate(self):
        pass  # the global set is never removed

    def size(self):
        return _runtime.place().size

    def rank(self):
        return _runtime.place().rank

    def included(self):
        return True


global_process_set = _GlobalProcessSet()

# A registered set: its ranks, the Runtime this process runs its collectives
# on (None for a non-member), its store scope and the objects bound to it.
_Entry = collections.namedtuple("_Entry", "ranks runtime scope objects")

# The engine's request kind and element type _agree sends
# (engine::OpType::kAllgather, edt::DataType::kUInt8).
_ALLGATHER, _UINT8 = 1, 6

_lock = threading.RLock()
_owner = None       # the global Runtime the table belongs to
_sets = {}          # process_set_id -> _Entry
_free_ids = collections.deque()
_next_id = 1
_scopes = itertools.count()
_calls = itertools.count()


class Group:
    """What a collective needs of its process set: the Runtime it runs on,
    and the set's global ranks (None: the whole job)."""

    def __init__(self, runtime, ranks, key):
        self.runtime = runtime
        self.ranks = ranks
        self.key = key  # names unnamed requests apart per set

    @property
    def rank(self):
        return self.runtime.rank

    @property
    def size(self):
        return self.runtime.size

    def root(self, root_rank, what):
        """The set's rank of the process whose global rank is root_rank."""
        if self.ranks is None:
            return root_rank
        if root_rank not in self.ranks:
            raise ValueError("%s: root rank %s is not in the process set %s; roots are global ranks of "
                             "members of the set" % (what, root_rank, self.ranks))
        return self.ranks.index(root_rank)


def group(process_set, what):
    """The Group a collective named `what` (Horovod's spelling, such as
    "Allreduce") runs on for `process_set` (None: the global set)."""
    if process_set is None or process_set is global_process_set or process_set.process_set_id == 0:
        return Group(_runtime.get(), None, "")
    if not isinstance(process_set, ProcessSet):
        raise ValueError("%s: process_set must be a hvd.ProcessSet, got %r" % (what, process_set))
    entry = _entry(process_set)
    if entry.runtime is None:
        raise ValueError("%s: Rank %d is not a member of the provided process set." % (what, _runtime.get().rank))
    return Group(entry.runtime, entry.ranks, entry.scope)


def _entry(process_set):
    with _lock:
        _forget_if_stale()
        entry = _sets.get(process_set.process_set_id)
        if process_set.process_set_id is None or entry is None or entry.ranks != process_set.ranks:
            raise ValueError("Process set does not exist or has not been registered: %s (add it with "
                             "hvd.add_process_set(); sets end when removed, at hvd.shutdown() and at an elastic "
                             "reset)" % process_set)
        return entry


def _forget_if_stale():
    """Drops the table when the runtime it was formed on is gone."""
    if _owner is not None and _runtime.current() is not _owner:
        stop_all()


def _agree(owner, call):
    """Checks that every process of the job made `call` (a description of
    the same add/remove), over the global Runtime: ValueError otherwise."""
    import numpy
    digest = numpy.frombuffer(hashlib.sha256(repr(call).encode()).digest()[:8], dtype=numpy.uint8).copy()
    name = "edt.process_sets.%d" % next(_calls)
    try:
        handle = owner.submit(name, _ALLGATHER, _UINT8, 0, 0, 1.0, 1.0, [8], [], digest.ctypes.data)
        data, _shape, _, _ = owner.wait(handle)
    except Exception as e:
        raise _translated(e) from None
    others = [r for r in range(owner.size) if bytes(data[8 * r:8 * r + 8]) != digest.tobytes()]
    if others:
        raise ValueError("%s on rank %d, but ranks %s made a different call: every process must add and remove "
                         "the same process sets in the same order" % (call, owner.rank, others))


def _translated(error):
    from edt import _edt
    return _runtime.translate(error) if isinstance(error, _edt.EdtError) else error


def _check_ranks(ranks, size):
    if not ranks:
        raise ValueError("a process set needs at least one rank")
    bad = [r for r in ranks if r < 0 or r >= size]
    if bad:
        raise ValueError("process set %s: ranks %s are not ranks of this job (0..%d)" % (ranks, bad, size - 1))
    if len(set(ranks)) != len(ranks):
        raise ValueError("process set %s lists a rank twice" % (ranks,))


def _is_duplicate(ranks, size):
    return ranks == list(range(size)) or any(e.ranks == ranks for e in _sets.values())


def _register(owner, process_set):
    """Gives the set an id and forms it on its members."""
    global _next_id, _owner
    set_id = _free_ids.popleft() if _free_ids else _next_id
    if set_id == _next_id:
        _next_id += 1
    scope = "process_set.%d" % next(_scopes)
    runtime = None
    if owner.rank in process_set.ranks:
        try:
            runtime = owner.subgroup(process_set.ranks, scope)
        except Exception as e:
            _free_ids.appendleft(set_id)
            raise _translated(e) from None
    _owner = owner
    _sets[set_id] = _Entry(list(process_set.ranks), runtime, scope, [process_set])
    process_set.process_set_id = set_id
    return process_set


def add_process_set(process_set):
    """Registers a set of ranks (a ProcessSet or a list) and forms it;
    returns the ProcessSet. Every process calls it alike. ValueError for a
    set that exists already (the global one included)."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    with _lock:
        owner = _runtime.get()
        _forget_if_stale()
        _agree(owner, ("hvd.add_process_set(%s)" % process_set.ranks,))
        _check_ranks(process_set.ranks, owner.size)
        if _is_duplicate(process_set.ranks, owner.size):
            raise ValueError("Attempted to add a duplicate process set: %s" % process_set)
        return _register(owner, process_set)


def remove_process_set(process_set):
    """Removes a registered set (its members stop its engine together) and
    invalidates it; False for the global set or one not registered. Every
    process calls it alike."""
    set_id = process_set.process_set_id
    if set_id is None or set_id == 0:
        return False
    with _lock:
        owner = _runtime.get()
        _forget_if_stale()
        _agree(owner, ("hvd.remove_process_set(%s)" % process_set.ranks,))
        entry = _sets.get(set_id)
        if entry is None or entry.ranks != process_set.ranks:
            process_set._invalidate()
            return False
        del _sets[set_id]
        _free_ids.append(set_id)
        _stop(entry)
    return True


def static_sets(process_sets):
    """The sets hvd.init(process_sets=...) forms, checked before init:
    none for None or "dynamic" (edt always allows adding sets later), else
    the list, each a ProcessSet of ranks and none a duplicate."""
    if process_sets is None or (isinstance(process_sets, str) and process_sets.lower() == "dynamic"):
        return []
    process_sets = list(process_sets)
    seen = set()
    for i, ps in enumerate(process_sets):
        if not isinstance(ps, ProcessSet) or ps.ranks is None:
            raise ValueError("process_sets entry number %d is not a hvd.ProcessSet of ranks: %r" % (i, ps))
        if tuple(ps.ranks) in seen:
            raise ValueError("edt could not be initialized because process_sets entry number %d is a duplicate: %s"
                             % (i, ps))
        seen.add(tuple(ps.ranks))
    return process_sets


def _stop(entry):
    for ps in entry.objects:
        ps._invalidate()
    if entry.runtime is not None:
        try:
            entry.runtime.shutdown()
        except Exception:
            pass  # a set of a broken job stops without raising, as the global runtime does


def stop_all():
    """Stops every set (the global runtime stops: shutdown or a reset)."""
    global _owner, _next_id, _scopes, _calls
    with _lock:
        entries = list(_sets.values())
        _sets.clear()
        _free_ids.clear()
        _next_id, _owner = 1, None
        _scopes, _calls = itertools.count(), itertools.count()
    for entry in entries:
        _stop(entry)


# Sets are formed on the global Runtime: they stop with it, before it.
_runtime.on_stop(stop_all)
