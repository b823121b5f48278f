"""A job started by Slurm's srun, without edtrun: `srun -N 2
--ntasks-per-node 1 python3 train.py` forms the job from what Slurm gives
each task, as Horovod and torch users expect under srun.

Slurm gives every task SLURM_PROCID (its rank), SLURM_NTASKS (the size),
SLURM_LOCALID, SLURM_NODEID, SLURMD_NODENAME and the step's node list
(SLURM_STEP_NODELIST; SLURM_JOB_NODELIST in an allocation's shell) in
Slurm's compact form ("tt-worker-[0-2,5],tt-launcher"). Rank 0 runs on
the first node of the step (srun's block and cyclic distributions both
start there) and serves the job's rendezvous store on that node's address;
its port comes from the job and step ids (EDT_SLURM_PORT overrides it), so
every task computes the same address without talking to the others.

apply() turns that into the EDT_* variables edtrun would have given; it does
nothing when edtrun's are there (EDT_SIZE) or Slurm's are not (a plain
`python3 train.py` stays a job of one)."""

import os
import socket

_server = None  # rank 0's StoreServer, alive as long as the process


class SlurmEnvironmentError(RuntimeError):
    pass


def expand_nodelist(nodelist):
    """The host names of a node list in Slurm's compact form, in order, as
    `scontrol show hostnames` prints them. The parser is edtrun's own
    (src/launcher/slurm_allocation.h), reached through the extension: one
    parser for edtrun inside an allocation and for a task of srun."""
    # Imported here, not at the top: the extension is there wherever a job
    # runs (edt's runtime imports it before apply()), and this module stays
    # importable without it.
    from edt import _edt
    try:
        return _edt.expand_slurm_nodelist(nodelist or "")
    except _edt.EdtError as error:
        raise SlurmEnvironmentError(error.args[1]) from None


def _int(env, name):
    value = env.get(name, "")
    if not value.isdigit():
        raise SlurmEnvironmentError("%s=%r is not a number; is this a task of srun?" % (name, value))
    return int(value)


def coordinator_port(env):
    if env.get("EDT_SLURM_PORT"):
        return _int(env, "EDT_SLURM_PORT")
    job, step = _int(env, "SLURM_JOB_ID"), int(env.get("SLURM_STEP_ID", "0") or 0)
    # 20000-39999, apart per job and step.
    return 20000 + (job * 16 + step) % 20000


def under_srun(env):
    return "EDT_SIZE" not in env and "SLURM_PROCID" in env and "SLURM_STEP_ID" in env


def job_environment(env):
    """The EDT_* variables for this task of an srun step (a dict), from
    Slurm's variables in `env`."""
    rank, size = _int(env, "SLURM_PROCID"), _int(env, "SLURM_NTASKS")
    if rank >= size:
        raise SlurmEnvironmentError("SLURM_PROCID=%d is not below SLURM_NTASKS=%d" % (rank, size))
    nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST", "")
    nodes = expand_nodelist(nodelist)
    node = env.get("SLURMD_NODENAME") or socket.gethostname()
    if node not in nodes:
        raise SlurmEnvironmentError("this node, %s, is not in the step's node list %s" % (node, nodelist))
    return {
        "EDT_RANK": str(rank),
        "EDT_SIZE": str(size),
        "EDT_HOSTNAME": node,
        "EDT_COORDINATOR": "%s:%d" % (nodes[0], coordinator_port(env)),
        "EDT_GENERATION": "slurm-%s.%s" % (env.get("SLURM_JOB_ID", "0"), env.get("SLURM_STEP_ID", "0")),
    }


def apply(_edt):
    """Under srun without edtrun: sets the EDT_* variables and, on rank 0,
    starts the rendezvous store. Returns whether it did."""
    global _server
    env = os.environ
    if not under_srun(env):
        return False
    job = job_environment(env)
    if job["EDT_RANK"] == "0" and _server is None:
        host, port = job["EDT_COORDINATOR"].rsplit(":", 1)
        if job["EDT_HOSTNAME"] != host:
            raise SlurmEnvironmentError("rank 0 runs on %s, not on the step's first node %s; use srun's block or "
                                        "cyclic distribution" % (job["EDT_HOSTNAME"], host))
        _server = _edt.StoreServer(socket.gethostbyname(host), int(port))
    env.update(job)
    return True
