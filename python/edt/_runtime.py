"""The process-wide runtime behind edt.torch: one edt._edt.Runtime (a
communicator and its engine) between init() and shutdown().

init() may follow shutdown() in the same process (Horovod's tests and some
notebooks do so), and forms a new runtime too when another rank's
shutdown() ended this one (as in Horovod, one rank's shutdown ends the
collectives of all): every communicator a process forms meets its peers under
a store prefix of its own, the n-th init of every rank under the n-th
prefix, so ranks that init and shut down alike find each other again.

In edtrun's elastic mode (EDT_ELASTIC=1) init() makes the job's
edt._edt.ElasticJob and waits for the first membership generation that
lists this worker, as Horovod's init() waits for its first rendezvous: from
then on rank(), size(), local_rank() ... are this worker's place in the
current generation. The Runtime itself exists inside hvd.elastic.run, one
per generation (enter_generation / leave_generation), because ranks and
peers change between generations; the Runtime of the generation in which
the training function returned stays until shutdown(), so collectives after
hvd.elastic.run (a final evaluation) work as in Horovod. Collectives between
init() and the first hvd.elastic.run (a resume epoch broadcast from rank 0)
run on a Runtime of their own over the members of the generation init()
joined, formed by the first of them (_before_run); run() stops it before its
first generation forms. Those members are the workers that start together;
a worker that joins a running job meets nobody there (the others are inside
run(), as in Horovod, where its collective would wait forever) and gets
HorovodInternalError after the collective timeout.

Process sets (edt.common.process_sets) are formed on the current Runtime
and stop with it, before it (process_sets registers that with on_stop())."""

import atexit
import collections
import os
import sys
import threading

from edt.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt

_lock = threading.Lock()
_runtime = None
_elastic_job = None
_placement = None  # elastic mode between generations: a Placement
_first_generation = None  # elastic mode: the generation init() joined, until run() starts
_formed = 0        # communicators this process formed (outside elastic mode)
_epoch = 0         # Runtimes this process has made current: unnamed requests count per epoch
_stop_hooks = []   # on_stop(): run before a Runtime stops (the process sets formed on it)

Placement = collections.namedtuple("Placement", "rank size local_rank local_size cross_rank cross_size")


def elastic_mode():
    return os.environ.get("EDT_ELASTIC") == "1"


def placement_of(rank, hosts):
    """rank, size, local and cross numbers of `rank` among members on
    `hosts` (one per rank, a host's ranks consecutive), numbered as
    Horovod numbers them: cross ranks group the workers with the same
    local rank, hosts in order."""
    host = hosts[rank]
    local_rank = hosts[:rank].count(host)
    order = list(dict.fromkeys(hosts))  # hosts in rank order
    cross = [h for h in order if hosts.count(h) > local_rank]
    return Placement(rank, len(hosts), local_rank, hosts.count(host), cross.index(host), len(cross))


def _form_runtime(_edt):
    """A Runtime whose communicator meets its peers under this process's
    next store prefix (the first under EDT_GENERATION, as edtrun set it)."""
    global _formed
    saved = os.environ.get("EDT_GENERATION")
    if _formed:
        os.environ["EDT_GENERATION"] = "%s.init%d" % (saved or "0", _formed)
    try:
        runtime = _edt.Runtime()
    finally:
        if saved is None:
            os.environ.pop("EDT_GENERATION", None)
        else:
            os.environ["EDT_GENERATION"] = saved
    _formed += 1
    return runtime


def _join_elastic(_edt):
    """Waits for the first generation listing this worker; ends the process
    cleanly when the job finished before it could join (or it was removed)."""
    global _elastic_job, _placement, _first_generation
    if _elastic_job is None:
        _elastic_job = _edt.ElasticJob()
    if _runtime is not None or _placement is not None:
        return
    joined = _elastic_job.placement()
    if joined is None:
        print("edt: the elastic job ended or this worker left it before it joined; nothing to do",
              file=sys.stderr, flush=True)
        raise SystemExit(0)
    _first_generation, rank, hosts = joined
    _placement = placement_of(rank, list(hosts))


def _before_run():
    """The Runtime for collectives before hvd.elastic.run (see the module
    notes): the members of the generation init() joined, under a store
    prefix of that generation's own."""
    global _runtime
    from edt import _edt
    saved = {name: os.environ.get(name) for name in ("EDT_RANK", "EDT_SIZE", "EDT_GENERATION")}
    os.environ.update(EDT_RANK=str(_placement.rank), EDT_SIZE=str(_placement.size),
                      EDT_GENERATION="elastic-before-run.%d" % _first_generation)
    try:
        _runtime = _edt.Runtime()
    except _edt.EdtError as e:
        error = translate(e)
        raise type(error)("a collective before hvd.elastic.run: %s (such collectives run among the workers "
                          "that start together; a worker that joins a running job has no peers for them)"
                          % error) from None
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    _new_epoch()
    return _runtime


def init():
    global _runtime
    with _lock:
        from edt import _edt, _slurm
        try:
            _slurm.apply(_edt)  # a task of srun, without edtrun
            if elastic_mode():
                _join_elastic(_edt)
                return _runtime
            if _runtime is not None and _runtime.ended:
                # Another rank shut the job down (Horovod ends every rank's
                # collectives then): its ranks init() again alike.
                _stop(_runtime)
                _runtime = None
            if _runtime is None:
                _runtime = _form_runtime(_edt)
                _new_epoch()
        except _edt.EdtError as e:
            raise translate(e) from None
    return _runtime


def _new_epoch():
    global _epoch
    _epoch += 1


def epoch():
    """Changes whenever another Runtime becomes current: every rank of the
    new one starts numbering its unnamed requests afresh, whatever the
    ranks did before (a rank that skipped a collective and left)."""
    return _epoch


def on_stop(hook):
    """Registers hook(), called whenever a Runtime stops, before it does:
    what is formed on a Runtime ends with it. edt.common.process_sets
    registers its stop_all() when it is imported (it depends on this
    module, not this module on it)."""
    _stop_hooks.append(hook)


def _stop(runtime):
    if runtime is not None:
        for hook in _stop_hooks:
            hook()
        try:
            runtime.shutdown()
        except Exception:
            pass  # leaving a broken job must not raise


def shutdown():
    global _runtime, _placement
    with _lock:
        runtime, _runtime = _runtime, None
        if runtime is not None and _elastic_job is not None:
            _placement = _placement_of_runtime(runtime)
    _stop(runtime)


def elastic_job():
    """The job, for run(): from then on no collective forms a Runtime
    before run() any more."""
    global _first_generation
    _first_generation = None
    if _elastic_job is None:
        raise ValueError("hvd.elastic.run needs hvd.init() first, in a job started by edtrun in elastic mode")
    return _elastic_job


def _placement_of_runtime(rt):
    return Placement(rt.rank, rt.size, rt.local_rank, rt.local_size, rt.cross_rank, rt.cross_size)


def enter_generation(runtime):
    """Makes `runtime` the current one; the Runtime kept from a run() that
    returned (see the module notes) is shut down first."""
    global _runtime
    with _lock:
        previous, _runtime = _runtime, runtime
        if previous is not runtime:
            _new_epoch()
    if previous is not None and previous is not runtime:
        _stop(previous)


def leave_generation(keep=False):
    """The generation ends. keep=False (it ends by a reset): its engine stops
    (every rank of a healthy generation does so at the same commit; a broken
    engine stops at once). keep=True (the training function returned): the
    Runtime stays, for collectives after run(), until shutdown()."""
    global _placement
    if keep:
        with _lock:
            if _runtime is not None:
                _placement = _placement_of_runtime(_runtime)
        return
    shutdown()


def get():
    """The Runtime that runs collectives now."""
    if _runtime is None:
        if _elastic_job is not None and _first_generation is not None and _placement is not None:
            with _lock:
                return _runtime or _before_run()
        if _elastic_job is not None:
            raise ValueError("in elastic mode collectives run between hvd.init() and the first hvd.elastic.run, "
                             "inside the function it runs and after it returned, until hvd.shutdown(); "
                             "rank() and size() work from hvd.init() on")
        raise ValueError("edt has not been initialized; call hvd.init() first")
    return _runtime


def current():
    """The Runtime that runs collectives now, or None."""
    return _runtime


def place():
    """This worker's place (rank, size, local_rank ...): the Runtime's, or in
    elastic mode between generations the current generation's."""
    if _runtime is None and _elastic_job is not None and _placement is not None:
        return _placement
    return get()


def placement():
    """(rank, size) now: the current generation's in elastic mode."""
    p = place()
    return p.rank, p.size


def is_initialized():
    return _runtime is not None or _elastic_job is not None


def translate(error, submitting=False):
    """An edt._edt.EdtError as the exception Horovod raises for it: a
    request refused before any communication is a ValueError; a failure
    while it ran (a peer died, the ranks disagreed) is HorovodInternalError,
    as Horovod's synchronize() raises it."""
    code, message = error.args if len(error.args) == 2 else ("Internal", str(error))
    if code == "HostsUpdated":
        return HostsUpdatedInterrupt()
    if submitting and code == "InvalidArgument":
        return ValueError(message)
    return HorovodInternalError(message)


def _leave_elastic_job():
    # Before the interpreter tears down: stops the job's heartbeat and
    # watcher threads while the Python objects it holds are still valid.
    global _elastic_job
    _elastic_job = None


atexit.register(_leave_elastic_job)
atexit.register(shutdown)
