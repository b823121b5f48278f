"""Elastic edtrun scenarios with real processes.

Modelled on what Horovod's elastic integration tests check. The worker is
edt-bench-elastic, which logs one JSON line per event (start, reset, step,
epoch, end) and checks at the end of every epoch that its model counts each
sample exactly once. Several hosts are names that all mean this machine
(localhost, 127.0.0.1 and its host name), so workers are forked directly and
the communicator still sees distinct hosts (TCP between them).
"""
import os
import signal
import subprocess
import time

import pytest

import harness.sshd
from harness.edtrun import HOSTS, Job, assert_exactly_once, assert_nothing_left, write_hostfile

EDTRUN = os.environ["EDTRUN"]
WORKER = os.environ["EDT_BENCH_ELASTIC"]


@pytest.fixture(scope="module")
def sshd():
    with harness.sshd.running("edt-elastic-sshd-") as server:
        yield server


@pytest.fixture
def hostfile(tmp_path):
    return str(tmp_path / "hostfile")


def test_hosts_added_then_removed(hostfile):
    write_hostfile(hostfile, [f"{HOSTS[0]} slots=1", f"{HOSTS[1]} slots=1"])
    job = Job(["-np", "2", "--min-np", "1", "--max-np", "4", "--hostfile", hostfile],
              ["--samples", "24000", "--batch", "8", "--step-ms", "3", "--epochs", "2"])
    job.wait_for(lambda e: e["size"] == 2 and e["step"] >= 20, what="size 2")
    write_hostfile(hostfile, [f"{HOSTS[0]} slots=1", f"{HOSTS[1]} slots=1", f"{HOSTS[2]} slots=2"])
    grown = job.wait_for(lambda e: e["size"] == 4, what="size 4")
    job.wait_for(lambda e: e["size"] == 4 and e["step"] >= grown["step"] + 30, what="30 steps at size 4")
    write_hostfile(hostfile, [f"{HOSTS[0]} slots=1", f"{HOSTS[1]} slots=1"])
    job.wait_for(lambda e: e["size"] == 2 and e["gen"] >= 3, what="size 2 again")
    assert job.finish() == 0, job.stderr()
    assert_exactly_once(job)
    # The two first workers were never restarted and kept ranks 0 and 1.
    starts = job.of("start")
    assert [s["worker"] for s in starts].count("w0") == 1 and [s["worker"] for s in starts].count("w1") == 1
    for worker, rank in (("w0", 0), ("w1", 1)):
        assert {e["rank"] for e in job.of("reset") if e["worker"] == worker} == {rank}
        sizes = [e["size"] for e in job.of("reset") if e["worker"] == worker]
        assert sizes == [2, 4, 2], sizes
    # The newcomers ran on the added host and left when it was removed.
    newcomers = {s["worker"]: s["host"] for s in starts if s["worker"] not in ("w0", "w1")}
    assert set(newcomers.values()) == {HOSTS[2]} and len(newcomers) == 2
    assert_nothing_left(job)


def test_sigkill_of_one_worker_fixed_hosts(hostfile):
    job = Job(["-np", "3", "--min-np", "2", "-H", f"{HOSTS[0]}:2,{HOSTS[1]}:1"],
              ["--samples", "12000", "--batch", "8", "--step-ms", "3", "--commit-every", "5"])
    job.wait_for(lambda e: e["size"] == 3 and e["step"] >= 40, what="size 3")
    victim = job.pids()["w2"]
    killed = time.time()
    os.kill(victim, signal.SIGKILL)
    after = job.wait_for(lambda e: e["size"] == 2 and e["t"] > killed, what="size 2 after the kill")
    assert after["t"] - killed < 2.0, after["t"] - killed
    assert job.finish() == 0, job.stderr()
    assert_exactly_once(job)
    assert "w2 on host 127.0.0.1 was killed by signal 9" in job.stderr()
    assert sorted(s["worker"] for s in job.of("start")) == ["w0", "w1", "w2"]  # no restart, no replacement
    assert_nothing_left(job)


def test_exception_in_one_rank(hostfile):
    job = Job(["-np", "3", "--min-np", "1", "-H", f"{HOSTS[0]}:2,{HOSTS[1]}:1"],
              ["--samples", "6000", "--batch", "8", "--step-ms", "2", "--commit-every", "3",
               "--fail-at-step", "25", "--fail-host", HOSTS[1]])
    assert job.finish() == 0, job.stderr()
    assert_exactly_once(job)
    assert "host 127.0.0.1 is blacklisted" in job.stderr()
    assert {e["size"] for e in job.of("epoch")} == {2}
    assert_nothing_left(job)


def test_all_ranks_failing_ends_the_job(hostfile):
    job = Job(["-np", "2", "--min-np", "1", "-H", f"{HOSTS[0]}:1,{HOSTS[1]}:1"],
              ["--samples", "6000", "--batch", "8", "--fail-at-step", "10"], timeout=60)
    assert job.finish() == 1
    err = job.stderr()
    assert "every host is blacklisted" in err, err
    assert "exited with code 3" in err
    assert_nothing_left(job)


def test_minimum_not_reached_within_the_timeout(hostfile):
    began = time.time()
    job = Job(["-np", "1", "--min-np", "2", "--elastic-timeout", "2", "-H", f"{HOSTS[0]}:1"],
              ["--samples", "100"], timeout=60)
    assert job.finish() == 1
    took = time.time() - began
    err = job.stderr()
    assert "had 1 usable slots" in err and "needs at least 2 (--min-np)" in err, err
    assert 2.0 <= took < 10.0, took
    assert_nothing_left(job)


def test_reset_limit(hostfile):
    job = Job(["-np", "3", "--min-np", "1", "--reset-limit", "0", "-H", f"{HOSTS[0]}:2,{HOSTS[1]}:1"],
              ["--samples", "60000", "--batch", "8", "--step-ms", "2",
               "--fail-at-step", "20", "--fail-host", HOSTS[1]], timeout=60)
    assert job.finish() == 1
    err = job.stderr()
    assert "reset limit (--reset-limit 0) after 1 resets" in err, err
    assert_nothing_left(job)


def test_blacklisted_host_comes_back_after_its_cooldown(hostfile):
    job = Job(["-np", "2", "--min-np", "1", "--blacklist-cooldown-range", "1", "2",
               "-H", f"{HOSTS[0]}:1,{HOSTS[1]}:1"],
              ["--samples", "16000", "--batch", "8", "--step-ms", "3",
               "--fail-at-step", "20", "--fail-host", HOSTS[1]])
    job.wait_for(lambda e: e["size"] == 1, what="size 1 after the failure")
    back = job.wait_for(lambda e: e["size"] == 2 and e["worker"] == "w2", limit=20, what="the host back")
    assert job.finish() == 0, job.stderr()
    assert_exactly_once(job)
    assert "host 127.0.0.1 is blacklisted for 1 s" in job.stderr()
    assert "host 127.0.0.1 is back from its blacklist cooldown" in job.stderr()
    assert {s["worker"]: s["host"] for s in job.of("start")}["w2"] == HOSTS[1]
    assert back["rank"] == 1
    assert_nothing_left(job)


def test_silent_worker_is_detected_by_heartbeats(hostfile):
    job = Job(["-np", "2", "--min-np", "1", "--heartbeat-timeout", "3s", "-H", f"{HOSTS[0]}:1,{HOSTS[1]}:1"],
              ["--samples", "12000", "--batch", "8", "--step-ms", "3",
               "--fail-at-step", "30", "--fail-host", HOSTS[1], "--fail-mode", "hang"])
    hung = job.wait_for(lambda e: e["step"] >= 30, what="step 30")
    after = job.wait_for(lambda e: e["size"] == 1, limit=20, what="size 1 after the hang")
    assert after["t"] - hung["t"] < 10.0
    assert job.finish() == 0, job.stderr()
    assert_exactly_once(job)
    assert "sent no heartbeat for 3 s" in job.stderr()
    assert_nothing_left(job)


def test_discovery_script_scales_up(hostfile):
    # The script prints what the file holds; the file is the "cluster".
    with open(hostfile, "w") as f:
        f.write(f"{HOSTS[0]}:1\n")
    job = Job(["-np", "1", "--min-np", "1", "--max-np", "3", "--discovery-interval", "200ms",
               "--host-discovery-script", f"cat {hostfile}", "--slots-per-host", "2"],
              ["--samples", "12000", "--batch", "8", "--step-ms", "3"])
    job.wait_for(lambda e: e["size"] == 1 and e["step"] >= 20, what="size 1")
    with open(hostfile, "w") as f:
        f.write(f"{HOSTS[0]}:1\n{HOSTS[1]}\n")  # a bare host: --slots-per-host 2, capped by --max-np 3
    job.wait_for(lambda e: e["size"] == 3, what="size 3")
    assert job.finish() == 0, job.stderr()
    assert_exactly_once(job)
    assert [s["worker"] for s in job.of("start")].count("w0") == 1
    assert_nothing_left(job)


def test_output_filename_in_elastic_mode(tmp_path):
    """DIR/rank.N holds worker N's streams (N: the [N] of its terminal lines)."""
    result = subprocess.run([EDTRUN, "-np", "2", "--min-np", "1", "-H", "localhost:2", "--output-filename",
                             str(tmp_path), "--", WORKER, "--samples", "64", "--batch", "8"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    for n in (0, 1):
        assert '"event":"end"' in (tmp_path / ("rank.%d" % n) / "stdout").read_text()


def test_ssh_hosts_added_then_removed(hostfile, sshd):
    write_hostfile(hostfile, ["localhost slots=1", "127.0.0.2 slots=1"])
    job = Job(["-np", "2", "--min-np", "1", "--max-np", "4", "--hostfile", hostfile] + sshd.args(),
              ["--samples", "16000", "--batch", "8", "--step-ms", "3"])
    job.wait_for(lambda e: e["size"] == 2 and e["step"] >= 20, what="size 2")
    write_hostfile(hostfile, ["localhost slots=1", "127.0.0.2 slots=1", "127.0.0.3 slots=1"])
    grown = job.wait_for(lambda e: e["size"] == 3, what="size 3 with the ssh host")
    job.wait_for(lambda e: e["size"] == 3 and e["step"] >= grown["step"] + 20, what="20 steps at size 3")
    write_hostfile(hostfile, ["localhost slots=1", "127.0.0.3 slots=1"])
    job.wait_for(lambda e: e["size"] == 2 and e["gen"] >= 3, what="size 2 without 127.0.0.2")
    assert job.finish() == 0, job.stderr()
    assert_exactly_once(job)
    hosts = {s["worker"]: s["host"] for s in job.of("start")}
    assert hosts == {"w0": "localhost", "w1": "127.0.0.2", "w2": "127.0.0.3"}, hosts
    # w1 left at a commit, without a failure.
    assert "failure" not in job.stderr()
    assert {e["worker"] for e in job.of("epoch")} == {"w0", "w2"}
    assert_nothing_left(job)


def test_horovodrun_spellings_of_the_elastic_flags(hostfile):
    """--min-num-proc, --max-num-proc, --log-level and a two-value
    --blacklist-cooldown-range before the command, without a `--`, as
    Horovod's own elastic tests write them."""
    result = subprocess.run([EDTRUN, "-np", "1", "--min-num-proc", "1", "--max-num-proc", "2", "--log-level", "DEBUG",
                             "-H", f"{HOSTS[0]}:1", "--blacklist-cooldown-range", "1", "2",
                             "/bin/sh", "-c", "echo ran $HOROVOD_ELASTIC"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "ran 1" in result.stdout, result.stdout
    assert "elastic job: min-np 1, max-np 2" in result.stderr, result.stderr


@pytest.mark.parametrize("args,message", [
    (["--blacklist-cooldown-range", "1", "true"], "--blacklist-cooldown-range"),
    (["--min-np", "1", "--blacklist-cooldown-range", "2", "1", "true"], "need 0 < MIN <= MAX seconds"),
    (["--min-num-proc", "none", "true"], "--min-np"),
    (["--no-such-flag", "true"], "unknown option --no-such-flag"),
])
def test_bad_elastic_arguments_exit_2(args, message):
    result = subprocess.run([EDTRUN, "-np", "1", "-H", f"{HOSTS[0]}:1"] + args,
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert message in result.stderr, result.stderr


def test_workers_get_horovods_start_placement(hostfile):
    """HOROVOD_HOSTNAME, HOROVOD_RANK (the start rank) ... as Horovod's
    elastic driver sets them at spawn."""
    result = subprocess.run([EDTRUN, "-np", "3", "--min-np", "1", "-H", f"{HOSTS[0]}:2,{HOSTS[1]}:1",
                             "/bin/sh", "-c", "echo $HOROVOD_HOSTNAME $HOROVOD_RANK $HOROVOD_SIZE $HOROVOD_LOCAL_RANK "
                             "$HOROVOD_LOCAL_SIZE $HOROVOD_CROSS_RANK $HOROVOD_CROSS_SIZE $HOROVOD_ELASTIC"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = sorted(line.partition(": ")[2] for line in result.stdout.splitlines())
    assert lines == sorted([f"{HOSTS[0]} 0 3 0 2 0 2 1", f"{HOSTS[0]} 1 3 1 2 0 1 1",
                            f"{HOSTS[1]} 2 3 0 1 1 2 1"]), lines
