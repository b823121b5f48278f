"""edt.torch.elastic under edtrun's elastic mode, end to end: a TorchState
training (torch_worker.py) through a scale-up from 2 to 3 hosts and the
SIGKILL of a worker. Uses the edtrun scenario harness (tests/harness/edtrun.py:
Job, hostfile helpers) with the Python worker; the hosts are
names of this machine, so workers are forked directly and talk over TCP.

Run by CTest (python_elastic_scenarios), not by the python_np* suites: it
starts edtrun itself.

Each job trains for about 13 s at its starting size before it grows (the
steps' --step-ms): a joiner starts a fresh Python and torch, which takes
2 to 5 s here and more on a loaded machine, and a job that finished its
epochs first never reaches the size the test waits for.
"""
import os
import signal
import sys
import time

import pytest

from harness.edtrun import HOSTS, Job, assert_exactly_once, assert_nothing_left, write_hostfile

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "torch_worker.py")
EPOCHS = 3
SAMPLES = 1200


def python_job(args, worker_args, **options):
    """A harness Job whose worker is a Python script (WORKER, first of worker_args)."""
    return Job(args, worker_args, worker=sys.executable, **options)


@pytest.fixture
def hostfile(tmp_path):
    return str(tmp_path / "hostfile")


def test_torch_state_survives_scale_up_and_sigkill(hostfile):
    h0, h1, h2 = HOSTS
    write_hostfile(hostfile, [f"{h0} slots=1", f"{h1} slots=1"])
    job = python_job(["-np", "2", "--min-np", "2", "--max-np", "4", "--hostfile", hostfile],
                [WORKER, "--samples", str(SAMPLES), "--batch", "4", "--epochs", str(EPOCHS),
                 "--commit-every", "5", "--step-ms", "25"], timeout=90)
    job.wait_for(lambda e: e["size"] == 2 and e["step"] >= 15, what="size 2")
    write_hostfile(hostfile, [f"{h0} slots=1", f"{h1} slots=1", f"{h2} slots=1"])
    grown = job.wait_for(lambda e: e["size"] == 3, what="size 3")
    job.wait_for(lambda e: e["size"] == 3 and e["step"] >= grown["step"] + 12, what="12 steps at size 3")
    # Kill a worker that was there from the start (the newcomer holds the
    # state it received, w0 the one it kept).
    victim = job.pids()["w1"]
    killed = time.time()
    os.kill(victim, signal.SIGKILL)
    job.wait_for(lambda e: e["size"] == 2 and e["seen"] > killed, what="size 2 after the kill")
    assert job.finish() == 0, job.stderr()

    epochs = job.of("epoch")
    assert epochs and all(e["exactly_once"] and e["trained"] == SAMPLES for e in epochs), epochs
    # Every epoch was finished (by the workers alive at its end), in order.
    assert sorted({e["epoch"] for e in epochs}) == list(range(EPOCHS))
    ends = job.of("end")
    assert {e["worker"] for e in ends} == {"w0", "w2"} and {e["epochs"] for e in ends} == {EPOCHS}, ends
    # w0 kept its process and rank 0 throughout; w2 joined at size 3.
    starts = [s["worker"] for s in job.of("start")]
    assert sorted(starts) == ["w0", "w1", "w2"], starts
    sizes = [e["size"] for e in job.of("reset") if e["worker"] == "w0"]
    assert sizes[0] == 3 and sizes[-1] == 2, sizes
    assert {e["rank"] for e in job.of("reset") if e["worker"] == "w0"} == {0}
    assert f"w1 on host {h1} was killed by signal 9" in job.stderr()
    assert_nothing_left(job)


def test_process_sets_are_formed_again_in_every_generation(hostfile):
    """Each generation adds the sets {evens} and {all but rank 0} and
    reduces over them every step, through a scale-up from 2 to 3 workers
    and the SIGKILL of a member of a set: the sets of the generation before
    are invalidated, the new ones reduce over their members only."""
    h0, h1, h2 = HOSTS
    write_hostfile(hostfile, [f"{h0} slots=1", f"{h1} slots=1"])
    job = python_job(["-np", "2", "--min-np", "2", "--max-np", "4", "--hostfile", hostfile],
                [WORKER, "--samples", "600", "--batch", "4", "--epochs", "2", "--commit-every", "5",
                 "--step-ms", "80", "--process-sets"], timeout=90)
    job.wait_for(lambda e: e["size"] == 2 and e["step"] >= 10, what="size 2")
    write_hostfile(hostfile, [f"{h0} slots=1", f"{h1} slots=1", f"{h2} slots=1"])
    grown = job.wait_for(lambda e: e["size"] == 3, what="size 3")
    job.wait_for(lambda e: e["size"] == 3 and e["step"] >= grown["step"] + 10, what="10 steps at size 3")
    killed = time.time()
    os.kill(job.pids()["w1"], signal.SIGKILL)  # rank 1: a member of {1, 2}
    job.wait_for(lambda e: e["size"] == 2 and e["seen"] > killed, what="size 2 after the kill")
    assert job.finish() == 0, job.stderr()
    steps = job.of("step")
    assert {e["size"] for e in steps} == {2, 3}, steps
    assert all(e["sets_ok"] for e in steps), [e for e in steps if not e["sets_ok"]]
    assert_nothing_left(job)


@pytest.mark.parametrize("set_epoch_at, loop", [
    ("start", ["--commit-every", "3"]),
    ("end", ["--commit-every", "3"]),
    ("end", ["--commit-every", "1000000", "--check-every-step"]),
])
def test_exactly_once_through_grow_and_shrink_with_either_set_epoch_pattern(hostfile, set_epoch_at, loop):
    """2,000 samples, grown from 2 to 4 workers and shrunk back to 2 in the
    middle of epochs. set_epoch at the start of every epoch (Horovod's
    examples; the loop calls it again after each reset) and at its end
    (docs/python.md) both train every sample exactly once per epoch; so does
    a loop that never commits inside the epoch but calls
    check_host_updates() every step (the step it leaves at is committed)."""
    h0, h1, h2 = HOSTS
    write_hostfile(hostfile, [f"{h0} slots=1", f"{h1} slots=1"])
    job = python_job(["-np", "2", "--min-np", "2", "--max-np", "4", "--hostfile", hostfile],
                [WORKER, "--samples", "2000", "--batch", "10", "--epochs", "2", "--step-ms", "60",
                 "--set-epoch-at", set_epoch_at] + loop, timeout=120)
    job.wait_for(lambda e: e["size"] == 2 and e["step"] >= 15, what="size 2")
    write_hostfile(hostfile, [f"{h0} slots=1", f"{h1} slots=1", f"{h2} slots=2"])
    grown = job.wait_for(lambda e: e["size"] == 4, what="size 4")
    job.wait_for(lambda e: e["size"] == 4 and e["step"] >= grown["step"] + 10, what="10 steps at size 4")
    write_hostfile(hostfile, [f"{h0} slots=1", f"{h1} slots=1"])
    job.wait_for(lambda e: e["size"] == 2 and e["step"] > grown["step"], what="size 2 again")
    assert job.finish() == 0, job.stderr()
    epochs = [e for e in job.of("epoch") if e["rank"] == 0]
    assert [e["epoch"] for e in epochs] == [0, 1], epochs
    assert all(e["exactly_once"] and e["trained"] == 2000 for e in epochs), epochs
    assert_nothing_left(job)
