"""What an elastic commit costs (edt.torch.elastic, commit_worker.py under
edtrun's elastic mode): a commit is a copy in memory, as Horovod's, not a
serialization of the state:
- no commit calls torch.save or pickle, and from the second commit on the
  committed tensors stay in the same buffers (nothing allocated per commit);
- state.restore() puts back the last commit bit for bit (model, optimizer
  state, attributes);
- a worker that joins receives the committed state (the one place it is
  serialized): after a grow from 2 to 3, every rank's parameters and
  optimizer state are bit-identical;
- a state whose copy fails inside the library's commit (edt._edt's
  callbacks) makes commit() raise that error on every rank.
The time a commit takes is measured by bench/elastic_commit, not here.
"""
import os
import sys

import pytest

from harness.edtrun import HOSTS, Job, assert_nothing_left, write_hostfile

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "commit_worker.py")


@pytest.fixture
def hostfile(tmp_path):
    return str(tmp_path / "hostfile")


def elastic_job(hostfile, worker_args, timeout=90):
    write_hostfile(hostfile, [f"{h} slots=1" for h in HOSTS[:2]])
    return Job(["-np", "2", "--min-np", "1", "--max-np", "4", "--hostfile", hostfile],
               [WORKER] + worker_args, worker=sys.executable, timeout=timeout)


def test_a_commit_copies_in_memory_and_restore_is_bit_identical(hostfile):
    job = elastic_job(hostfile, ["--steps", "8", "--restore-at", "5"])
    assert job.finish() == 0, job.stderr()
    commits = job.of("commit")
    assert len(commits) == 16, commits
    assert all(c["serializations"] == 0 for c in commits), [(c["worker"], c["serializations"]) for c in commits]
    for worker in ("w0", "w1"):
        buffers = [c["buffers"] for c in commits if c["worker"] == worker]
        assert buffers[0] and all(b == buffers[0] for b in buffers), "%s: a commit allocated new buffers" % worker
    restores = job.of("restore")
    assert len(restores) == 2 and all(r["changed"] and r["identical"] for r in restores), restores
    assert_nothing_left(job)


def test_a_joiner_receives_the_committed_state(hostfile):
    job = elastic_job(hostfile, ["--steps", "40", "--step-ms", "30", "--grow-to", "3"])
    job.wait_for(lambda e: e["size"] == 2 and e["step"] >= 8, what="size 2")
    write_hostfile(hostfile, [f"{h} slots=1" for h in HOSTS])
    job.wait_for(lambda e: e["size"] == 3, limit=60, what="size 3")  # a joiner starts cold here
    assert job.finish() == 0, job.stderr()
    ends = job.of("end")
    assert {e["worker"] for e in ends} == {"w0", "w1", "w2"}, ends
    assert len({e["digest"] for e in ends}) == 1 and len({e["step"] for e in ends}) == 1, ends
    # Commits at size 3 copy in memory too, the newcomer's included.
    at_three = [c for c in job.of("commit") if c["worker"] == "w2"]
    assert at_three and all(c["serializations"] == 0 for c in at_three), at_three
    assert_nothing_left(job)


def test_a_commit_that_cannot_copy_the_state_raises_its_error(hostfile):
    job = elastic_job(hostfile, ["--steps", "8", "--fail-commit-at", "3"])
    assert job.finish() != 0, job.stderr()
    errors = job.of("commit-error")
    assert {e["worker"] for e in errors} == {"w0", "w1"}, (errors, job.stderr())
    assert all(e["step"] == 3 and "out of memory" in e["message"] for e in errors), errors
    assert [c["step"] for c in job.of("commit") if c["worker"] == "w0"] == [1, 2], job.of("commit")
    assert_nothing_left(job)
