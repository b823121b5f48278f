"""A Horovod user's elastic loop (horovod_user_loop.py: `import horovod.torch`,
a reset callback scaling the learning rate, a commit every step) under
edtrun's elastic mode, end to end:
- a grow from 2 to 3 workers: the newcomer trains with the survivors'
  learning rate and every rank ends with bit-identical parameters;
- replicas that drift apart make the job fail, not return 0;
- non-zero exits after hvd.elastic.run returned are edtrun's exit code, as
  in the static mode;
- collectives between hvd.init() and hvd.elastic.run work.
"""
import os
import subprocess
import sys

import pytest

from harness.edtrun import HOSTS, Job, assert_nothing_left, write_hostfile

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "horovod_user_loop.py")
EDTRUN = os.environ["EDTRUN"]


@pytest.fixture
def hostfile(tmp_path):
    return str(tmp_path / "hostfile")


def elastic_job(hostfile, worker_args, hosts=2, timeout=90):
    write_hostfile(hostfile, [f"{h} slots=1" for h in HOSTS[:hosts]])
    return Job(["-np", str(hosts), "--min-np", "1", "--max-np", "4", "--hostfile", hostfile],
               [WORKER] + worker_args, worker=sys.executable, timeout=timeout)


def test_a_newcomer_trains_with_the_survivors_learning_rate(hostfile):
    job = elastic_job(hostfile, ["--steps", "80", "--step-ms", "30", "--until-size", "3"])
    job.wait_for(lambda e: e["size"] == 2 and e["step"] >= 10, what="size 2")
    write_hostfile(hostfile, [f"{h} slots=1" for h in HOSTS])
    grown = job.wait_for(lambda e: e["size"] == 3, limit=60, what="size 3")
    assert job.finish() == 0, job.stderr()
    at_three = [e for e in job.of("step") if e["size"] == 3]
    assert {e["worker"] for e in at_three} == {"w0", "w1", "w2"}, at_three
    # lr * hvd.size() on every rank, the newcomer w2 included.
    assert {round(e["lr"], 9) for e in at_three} == {0.003}, sorted({(e["worker"], e["lr"]) for e in at_three})
    ends = job.of("end")
    assert len(ends) == 3 and all(e["maxdiff"] == 0.0 for e in ends), ends
    # 20 steps at size 3 past the grow, at the least.
    assert max(e["step"] for e in at_three) >= grown["step"] + 19, at_three
    assert_nothing_left(job)


def test_replicas_that_drift_apart_fail_the_job(hostfile):
    job = elastic_job(hostfile, ["--steps", "12", "--step-ms", "5", "--drift-rank", "1"])
    code = job.finish()
    assert code != 0, job.stderr()
    assert "differ between ranks" in job.stderr(), job.stderr()


@pytest.mark.parametrize("elastic", [False, True])
def test_exits_after_run_are_the_exit_code(hostfile, elastic):
    if elastic:
        job = elastic_job(hostfile, ["--steps", "5", "--step-ms", "5", "--exit-code", "3"])
    else:
        job = Job(["-np", "2"], [WORKER, "--steps", "5", "--step-ms", "5", "--exit-code", "3"],
                  worker=sys.executable, timeout=90)
    assert job.finish() == 3, job.stderr()
    assert len(job.of("end")) == 2


def test_collectives_before_run(hostfile):
    job = elastic_job(hostfile, ["--steps", "5", "--step-ms", "5", "--broadcast-before-run"])
    assert job.finish() == 0, job.stderr()
    resumed = job.of("resume")
    assert sorted(e["rank"] for e in resumed) == [0, 1], resumed
    assert {e["resume_from_epoch"] for e in resumed} == {7}, resumed
    assert len(job.of("end")) == 2
    assert_nothing_left(job)
