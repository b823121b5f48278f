"""edt under srun without edtrun (edt/_slurm.py): Slurm's compact node
lists, the EDT_* variables a task derives from Slurm's, and a real job of
2 processes formed from Slurm's variables alone (no Slurm needed: the
variables are what srun would set on one node)."""

import os
import subprocess
import sys

import pytest

from edt import _slurm
from edt._slurm import SlurmEnvironmentError, expand_nodelist, job_environment

from harness.ports import free_port  # tests/harness, on PYTHONPATH (ports outside the ephemeral range)


@pytest.mark.parametrize("nodelist, hosts", [
    ("tt-launcher", ["tt-launcher"]),
    ("tt-launcher,tt-worker-0", ["tt-launcher", "tt-worker-0"]),
    ("tt-worker-[0-2]", ["tt-worker-0", "tt-worker-1", "tt-worker-2"]),
    ("tt-launcher,tt-worker-[0,2-3]", ["tt-launcher", "tt-worker-0", "tt-worker-2", "tt-worker-3"]),
    ("n[08-11]", ["n08", "n09", "n10", "n11"]),
    ("a[1-2]-b[3-4]", ["a1-b3", "a1-b4", "a2-b3", "a2-b4"]),
    ("x[1-2],y[5]", ["x1", "x2", "y5"]),
    (" rack[1]-gpu ", ["rack1-gpu"]),
])
def test_expands_the_compact_form(nodelist, hosts):
    assert expand_nodelist(nodelist) == hosts


@pytest.mark.parametrize("nodelist, words", [
    ("", "empty"),
    ("n[1-2", "'[' without ']'"),
    ("n1-2]", "']' without '['"),
    ("n[2-1]", "'2-1' is not a number or a range"),
    ("n[a-b]", "'a-b' is not a number"),
    ("n1,,n2", "an empty name"),
    ("n[0-999999]", "too large"),
    ("a[0-999]-b[0-999]", "names more than 100000 hosts"),
])
def test_refuses_a_malformed_list_naming_it(nodelist, words):
    with pytest.raises(SlurmEnvironmentError) as error:
        expand_nodelist(nodelist)
    assert words in str(error.value)


def slurm_env(**changes):
    env = {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0", "SLURM_NODEID": "1",
           "SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURMD_NODENAME": "tt-worker-0",
           "SLURM_STEP_NODELIST": "tt-launcher,tt-worker-0", "SLURM_JOB_NODELIST": "tt-launcher,tt-worker-[0-2]"}
    env.update(changes)
    return {k: v for k, v in env.items() if v is not None}


def test_a_task_of_srun_gets_its_place_and_rank_0s_store():
    job = job_environment(slurm_env())
    assert job["EDT_RANK"] == "1" and job["EDT_SIZE"] == "2" and job["EDT_HOSTNAME"] == "tt-worker-0"
    # The step's node list, not the allocation's; rank 0 is on its first node.
    assert job["EDT_COORDINATOR"] == "tt-launcher:%d" % (20000 + 7 * 16)
    assert job_environment(slurm_env(SLURM_STEP_ID="3"))["EDT_COORDINATOR"] == "tt-launcher:%d" % (20000 + 7 * 16 + 3)
    assert job_environment(slurm_env(EDT_SLURM_PORT="31000"))["EDT_COORDINATOR"] == "tt-launcher:31000"
    # Without a step's list (a batch script's shell), the allocation's.
    assert job_environment(slurm_env(SLURM_STEP_NODELIST=None))["EDT_COORDINATOR"].startswith("tt-launcher:")


def test_what_is_not_a_task_of_srun_is_left_alone():
    assert _slurm.under_srun(slurm_env())
    assert not _slurm.under_srun(slurm_env(EDT_SIZE="2"))        # edtrun's worker, inside an allocation
    assert not _slurm.under_srun(slurm_env(SLURM_STEP_ID=None))  # salloc's or sbatch's shell
    assert not _slurm.under_srun({})


@pytest.mark.parametrize("changes, words", [
    ({"SLURM_PROCID": "x"}, "SLURM_PROCID='x' is not a number"),
    ({"SLURM_PROCID": "2"}, "SLURM_PROCID=2 is not below SLURM_NTASKS=2"),
    ({"SLURMD_NODENAME": "elsewhere"}, "this node, elsewhere, is not in the step's node list"),
    ({"EDT_SLURM_PORT": "80x"}, "EDT_SLURM_PORT='80x' is not a number"),
])
def test_bad_slurm_variables_are_named(changes, words):
    with pytest.raises(SlurmEnvironmentError) as error:
        job_environment(slurm_env(**changes))
    assert words in str(error.value)


WORKER = r"""
import torch, edt.torch as hvd
hvd.init()
total = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum)
print("rank %d of %d: %g" % (hvd.rank(), hvd.size(), total.item()), flush=True)
hvd.shutdown()
"""


def test_two_tasks_form_a_job_from_slurms_variables_alone():
    base = {k: v for k, v in os.environ.items() if not k.startswith(("EDT_", "HOROVOD_", "SLURM"))}
    base.update(SLURM_NTASKS="2", SLURM_JOB_ID=str(os.getpid()), SLURM_STEP_ID="0", SLURMD_NODENAME="localhost",
                SLURM_STEP_NODELIST="localhost", SLURM_NODEID="0", EDT_SLURM_PORT="0")
    # Port 0 would be a random one that rank 1 cannot know: pick a free one.
    base["EDT_SLURM_PORT"] = str(free_port())
    procs = [subprocess.Popen([sys.executable, "-c", WORKER], env=dict(base, SLURM_PROCID=str(r), SLURM_LOCALID=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(2)]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert "rank 0 of 2: 3" in outputs[0] and "rank 1 of 2: 3" in outputs[1], outputs
