"""Horovod's elastic integration scenarios (v0.28.1's
test/integration/elastic_common.py) run against edtrun, with Horovod's own
training script test/integration/data/elastic_torch_main.py, pinned
unmodified in tests/third_party/horovod.

elastic_common.py itself drives Horovod's launcher in-process
(horovod.runner.launch._run_elastic, with mock patches of its driver), so it
cannot run against another launcher: its _run() is reimplemented here with
the same discovery script (hosts by epoch, keyed on the log's line count),
the same command line (horovodrun's flags, spelled as Horovod writes them,
given to edtrun) and the same assertions. Where Horovod patches its
driver's constants, the equivalent edtrun flag is given: the discovery
interval (DISCOVER_HOSTS_FREQUENCY_SECS) and --elastic-timeout
(ELASTIC_TIMEOUT_SECS). Horovod's "job failed" is a RuntimeError from its
launcher; here it is edtrun's exit code 1 and its message.

One difference is given on the script's command line: --discovery-wait 30
(the script's default is 3 s). At a host change, rank 0 waits that long for
the driver's notice (state._host_messages). Horovod's driver sends it when
it discovers the change; edt announces a change when its new generation is
formed, once the new workers are up, which on a loaded machine can take
longer than 3 s (Python and torch start in each). See docs/elastic.md.

Run by CTest (horovod_elastic_scenarios) with EDTRUN set.
"""
import json
import os
import subprocess
import sys
import tempfile

import pytest

EDTRUN = os.environ["EDTRUN"]
HERE = os.path.dirname(os.path.abspath(__file__))
MAIN = os.path.join(HERE, "..", "third_party", "horovod", "test", "integration", "data",
                    "elastic_torch_main.py")

# The discovery script of elastic_common.py: the hosts of the epoch the log
# has reached (one line per finished epoch).
SCRIPT_HEAD = """#!/bin/bash
epoch=0
if [ -f {logfile} ]; then
    epoch=$(< {logfile} wc -l | tr -d '[:space:]')
fi
"""


def discovery_script(path, logfile, schedule):
    lines = [SCRIPT_HEAD.format(logfile=logfile)]
    for i, (epoch, hosts) in enumerate(schedule):
        echo = "\n".join('echo "%s"' % h for h in hosts) + "\n"
        first, last = i == 0, i == len(schedule) - 1
        if first and last:
            lines.append(echo)
        elif first:
            lines.append('if [ "$epoch" == "%s" ]; then\n' % epoch + echo)
        elif not last:
            lines.append('elif [ "$epoch" == "%s" ]; then\n' % epoch + echo)
        else:
            lines.append("else\n" + echo + "fi\n")
    with open(path, "w") as f:
        f.write("".join(lines))
    os.chmod(path, 0o755)


class Failed(Exception):
    """edtrun ended the job with a non-zero exit code."""


def run(discovery_schedule=None, exit_schedule=None, exit_mode="exception", num_proc=2, min_num_proc=2,
        max_num_proc=4, hosts=None, reset_limit=None, cooldown_range=None, epoch_wait=None, epochs=None,
        elastic_timeout=None, discovery_wait=30):
    """elastic_common.BaseElasticTests._run with edtrun: the results (one
    dict per epoch, logged by rank 0), or Failed(edtrun's stderr)."""
    with tempfile.TemporaryDirectory(prefix="edt-horovod-elastic-") as work:
        logfile, script = os.path.join(work, "log.txt"), os.path.join(work, "discover.sh")
        discovery_script(script, logfile, discovery_schedule or [(None, hosts.split(","))])
        args = [EDTRUN, "-np", str(num_proc), "--min-num-proc", str(min_num_proc), "--log-level", "DEBUG"]
        if hosts is not None:
            args += ["-H", hosts]
        else:
            args += ["--host-discovery-script", script, "--max-num-proc", str(max_num_proc),
                     "--discovery-interval", "100ms"]
        if reset_limit is not None:
            args += ["--reset-limit", str(reset_limit)]
        if cooldown_range is not None:
            args += ["--blacklist-cooldown-range", str(cooldown_range[0]), str(cooldown_range[1])]
        if elastic_timeout is not None:
            args += ["--elastic-timeout", str(elastic_timeout)]
        args += [sys.executable, MAIN, "--logfile", logfile, "--discovery-wait", str(discovery_wait)]
        if discovery_schedule:
            args += ["--discovery-schedule", json.dumps(discovery_schedule)]
        if epoch_wait:
            args += ["--epoch-wait", json.dumps(epoch_wait)]
        if epochs:
            args += ["--epochs", json.dumps(epochs)]
        if exit_schedule:
            args += ["--exit-schedule", json.dumps(exit_schedule), "--exit-mode", exit_mode]
        result = subprocess.run(args, capture_output=True, text=True, timeout=240)
        if result.returncode != 0:
            raise Failed("edtrun exited with %d:\n%s" % (result.returncode, result.stderr[-4000:]))
        with open(logfile) as f:
            lines = [json.loads(line) for line in f]
        print(result.stderr[-3000:])
        return lines


@pytest.mark.parametrize("slots,num_proc,min_num_proc,max_num_proc", [(2, 2, 2, 4), (1, 1, 1, 2)])
def test_hosts_added_and_removed(slots, num_proc, min_num_proc, max_num_proc):
    schedule = [
        (0, ["localhost:{}".format(slots)]),
        (1, ["localhost:{}".format(slots), "127.0.0.1:{}".format(slots)]),
        (None, ["127.0.0.1:{}".format(slots)]),
    ]
    results = run(schedule, num_proc=num_proc, min_num_proc=min_num_proc, max_num_proc=max_num_proc)
    assert len(results) == 3, results
    assert (results[0]["start_rank"], results[0]["size"], results[0]["hostname"]) == (0, slots, "localhost")
    assert (results[1]["start_rank"], results[1]["size"], results[1]["hostname"]) == (0, slots * 2, "localhost")
    assert (results[2]["start_rank"], results[2]["size"], results[2]["hostname"]) == (slots, slots, "127.0.0.1")
    assert results[2]["rendezvous"] == 3


def _after_rank_0_failed(results):
    assert len(results) == 3, results
    assert (results[0]["start_rank"], results[0]["size"], results[0]["rendezvous"]) == (0, 4, 1)
    assert (results[1]["start_rank"], results[1]["size"], results[1]["rendezvous"]) == (2, 2, 2)
    assert (results[2]["start_rank"], results[2]["size"], results[2]["rendezvous"]) == (2, 2, 2)


@pytest.mark.parametrize("exit_mode", ["exception", "kill"])
def test_single_rank_failure(exit_mode):
    results = run([(None, ["localhost:2", "127.0.0.1:2"])], exit_schedule={str((1, 0)): [0]}, exit_mode=exit_mode)
    _after_rank_0_failed(results)


@pytest.mark.parametrize("exit_mode", ["exception", "kill"])
def test_fault_tolerance_without_scaling(exit_mode):
    results = run(hosts="localhost:2,127.0.0.1:2", exit_schedule={str((1, 0)): [0]}, exit_mode=exit_mode)
    _after_rank_0_failed(results)


def test_all_ranks_failure():
    with pytest.raises(Failed, match="every host is blacklisted"):
        run([(None, ["localhost:2", "127.0.0.1:2"])], exit_schedule={str((1, 0)): [0, 1, 2, 3]})


def test_all_hosts_blacklisted():
    with pytest.raises(Failed, match="every host is blacklisted"):
        run([(None, ["localhost:2", "127.0.0.1:2"])], exit_schedule={str((1, 0)): [0, 2]})


def test_min_hosts_timeout():
    with pytest.raises(Failed, match="needs at least 4 \\(--min-np\\)"):
        run([(None, ["localhost:2", "127.0.0.1:2"])], exit_schedule={str((1, 0)): [0]}, num_proc=4, min_num_proc=4,
            elastic_timeout=1)


def test_reset_limit():
    schedule = [(0, ["localhost:2"]), (1, ["localhost:2", "127.0.0.1:2"]), (None, ["127.0.0.1:2"])]
    with pytest.raises(Failed, match="reset limit \\(--reset-limit 1\\)"):
        run(schedule, num_proc=2, min_num_proc=2, max_num_proc=4, reset_limit=1, elastic_timeout=1)
    results = run(schedule, num_proc=2, min_num_proc=2, max_num_proc=4, reset_limit=2, elastic_timeout=1)
    assert len(results) == 3, results


def test_resurrecting_blacklisted_hosts_exponential_backoff():
    results = run(discovery_schedule=[(None, ["localhost:2", "127.0.0.1:2"])],
                  exit_schedule={str((1, 0)): [3], str((3, 0)): [3]}, exit_mode="exception",
                  epoch_wait=0.25, epochs=5, cooldown_range=[1, 2])
    assert len(results) == 5, results
    assert (results[0]["start_rank"], results[0]["size"], results[0]["rendezvous"]) == (0, 4, 1)
    for i in (1, 2, 4):
        assert (results[i]["start_rank"], results[i]["size"], results[i]["rendezvous"]) == (0, 2, 2), results


def test_workers_arriving_after_the_work_is_done_do_not_train_again():
    """Not one of Horovod's: its hosts_added_and_removed schedule without
    rank 0's wait for the host change (--discovery-wait 0) and with epochs
    of 0.25 s, so the first worker finishes every epoch (and its host
    leaves the list) before the added host's worker is up.
    Those must not form a generation of their own and train from epoch 0:
    every epoch is logged once, and edtrun exits 0."""
    schedule = [(0, ["localhost:1"]), (1, ["localhost:1", "127.0.0.1:1"]), (None, ["127.0.0.1:1"])]
    results = run(schedule, num_proc=1, min_num_proc=1, max_num_proc=2, discovery_wait=0, epoch_wait=0.25)
    assert [r["epoch"] for r in results] == [0, 1, 2], results
