"""horovodrun: edtrun under Horovod's name (a symlink beside edtrun), with
horovodrun's flags and exit codes; and horovodrun's flags as edtrun takes
them. Real processes on localhost.

Run by CTest (horovodrun_integration) with EDTRUN set to the edtrun binary
(horovodrun lies beside it) and EDT_PYTHON_DIR to the built package.
"""
import os
import re
import subprocess
import textwrap

import pytest

EDTRUN = os.environ["EDTRUN"]
HOROVODRUN = os.path.join(os.path.dirname(EDTRUN), "horovodrun")
SHOW_ENV = ["sh", "-c", "echo fusion=$HOROVOD_FUSION_THRESHOLD cycle=$HOROVOD_CYCLE_TIME "
                        "cache=$HOROVOD_CACHE_CAPACITY stall=$HOROVOD_STALL_CHECK_TIME_SECONDS"]


def run(program, args, cwd, env=None):
    return subprocess.run([program] + args, cwd=cwd, capture_output=True, text=True, timeout=60,
                          env=env if env is not None else os.environ)


def test_horovodrun_runs_a_two_rank_job(tmp_path):
    result = run(HOROVODRUN, ["-np", "2", "-H", "localhost:2", "sh", "-c", "echo rank $HOROVOD_RANK of $HOROVOD_SIZE"],
                 tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(re.findall(r"\[(\d)\]<stdout>: rank (\d) of 2", result.stdout)) == [("0", "0"), ("1", "1")]


@pytest.mark.parametrize("flag", ["-v", "--version"])
def test_version(tmp_path, flag):
    hvd = run(HOROVODRUN, [flag], tmp_path)
    assert hvd.returncode == 0 and hvd.stdout.startswith("0.28.1+edt (edt "), hvd.stdout + hvd.stderr
    edt = run(EDTRUN, [flag], tmp_path)
    assert edt.returncode == 0 and edt.stdout.startswith("edt "), edt.stdout + edt.stderr
    assert "-np is missing" not in hvd.stderr + edt.stderr


@pytest.mark.parametrize("flag", ["-cb", "--check-build"])
def test_check_build_names_what_edt_provides(tmp_path, flag):
    env = dict(os.environ, PYTHONPATH=os.environ["EDT_PYTHON_DIR"])
    result = run(HOROVODRUN, [flag], tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert "Available Frameworks:" in result.stdout and "[ ] MXNet" in result.stdout
    assert "[X] edt" in result.stdout and "[ ] MPI" in result.stdout and "[ ] Gloo" in result.stdout
    torch = subprocess.run(["python3", "-c", "import torch"], capture_output=True).returncode == 0
    assert ("[X] PyTorch" in result.stdout) == torch, result.stdout


@pytest.mark.parametrize("args,expected", [
    (["--fusion-threshold-mb", "32"], "fusion=33554432 "),
    (["--cycle-time-ms", "2.5"], "cycle=2.5 "),
    (["--cache-capacity", "512"], "cache=512 "),
    (["--stall-check-warning-time-seconds", "90"], "stall=90"),
    (["--no-stall-check"], "stall=0"),
])
def test_tunables_reach_the_workers(tmp_path, args, expected):
    result = run(HOROVODRUN, ["-np", "1"] + args + SHOW_ENV, tmp_path)
    assert result.returncode == 0, result.stderr
    assert expected in result.stdout, result.stdout
    assert "ignored" not in result.stderr, result.stderr


@pytest.mark.parametrize("args", [
    ["--network-interface", "lo"], ["--network-interfaces", "lo,eth0"], ["--gloo"], ["--mpi"],
    ["--timeline-filename", "t.json"], ["--timeline-mark-cycles"], ["--hierarchical-allreduce"],
    ["--hierarchical-allgather"], ["--torus-allreduce"], ["--autotune"], ["--autotune-log-file", "a.csv"],
    ["--autotune-warmup-samples", "3"], ["--autotune-steps-per-sample", "10"],
    ["--autotune-bayes-opt-max-samples", "20"], ["--autotune-gaussian-process-noise", "0.8"],
    ["--stall-check-shutdown-time-seconds", "600"], ["--mpi-args=--bind-to none"], ["--binding-args", "x"],
    ["--mpi-threads-disable"], ["--num-nccl-streams", "2"], ["--thread-affinity", "1"],
    ["--gloo-timeout-seconds", "60"], ["--log-with-timestamp"], ["--tcp"], ["--disable-cache"], ["--jsrun"],
])
def test_flags_without_an_edt_counterpart_are_ignored_with_a_note(tmp_path, args):
    result = run(HOROVODRUN, ["-np", "1"] + args + ["true"], tmp_path)
    assert result.returncode == 0, result.stderr
    flag = args[0].split("=")[0]
    notes = [line for line in result.stderr.splitlines() if "ignored" in line]
    assert len(notes) == 1 and notes[0].startswith("horovodrun: warning: %s is ignored: " % flag), result.stderr


@pytest.mark.parametrize("args", [["--stall-check"], ["--no-autotune"], ["--no-hierarchical-allreduce"],
                                  ["--log-without-timestamp"], ["--verbose"], ["--log-level", "WARNING"]])
def test_flags_asking_for_what_edt_does_are_silent(tmp_path, args):
    result = run(EDTRUN, ["-np", "1"] + args + ["true"], tmp_path)
    assert result.returncode == 0 and "ignored" not in result.stderr, result.stderr


def test_prefix_timestamp_is_not_the_ssh_port(tmp_path):
    for flag in ("-prefix-timestamp", "--prefix-output-with-timestamp"):
        result = run(HOROVODRUN, ["-np", "1", flag, "echo", "hi"], tmp_path)
        assert result.returncode == 0, result.stderr
        assert re.match(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\[0\]<stdout>: hi$", result.stdout), result.stdout


def test_config_file_and_the_command_line_over_it(tmp_path):
    config = tmp_path / "horovod.yaml"
    config.write_text(textwrap.dedent("""\
        # Horovod's config file
        controller: gloo
        params:
          fusion_threshold_mb: 16
          cycle_time_ms: 4
          hierarchical_allreduce: false
        stall_check:
          enabled: false
        logging:
          level: WARNING
        """))
    result = run(HOROVODRUN, ["-np", "1", "--config-file", str(config), "--cycle-time-ms", "1"] + SHOW_ENV, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "fusion=16777216 cycle=1 " in result.stdout and "stall=0" in result.stdout, result.stdout
    assert "--gloo is ignored" in result.stderr and "hierarchical" not in result.stderr, result.stderr
    config.write_text("params:\n  fusion_threshold_mb 16\n")
    bad = run(HOROVODRUN, ["-np", "1", "--config-file", str(config), "true"], tmp_path)
    assert bad.returncode == 2 and "line 2: 'fusion_threshold_mb 16' is not 'key: value'" in bad.stderr, bad.stderr


def test_horovods_exit_codes(tmp_path):
    failing = ["-np", "2", "sh", "-c", "exit 3"]
    assert run(EDTRUN, failing, tmp_path).returncode == 3
    assert run(HOROVODRUN, failing, tmp_path).returncode == 1  # horovodrun raises: exit 1
    assert run(HOROVODRUN, ["-np", "0", "true"], tmp_path).returncode == 2
    missing = run(HOROVODRUN, ["true"], tmp_path)
    assert missing.returncode == 2 and "-np is missing" in missing.stderr


def test_a_real_horovodrun_on_path_runs_instead(tmp_path):
    real = tmp_path / "bin" / "horovodrun"
    real.parent.mkdir()
    real.write_text("#!/bin/sh\necho real horovodrun \"$@\"\n")
    real.chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (real.parent, os.environ["PATH"]))
    result = run(HOROVODRUN, ["-np", "2", "true"], tmp_path, env=env)
    assert result.returncode == 0 and result.stdout == "real horovodrun -np 2 true\n", result.stdout + result.stderr
    # Ours, found on PATH (a link to edtrun), does not count as a real one.
    env = dict(os.environ, PATH="%s:%s" % (os.path.dirname(EDTRUN), os.environ["PATH"]))
    ours = run(HOROVODRUN, ["-np", "1", "echo", "ours"], tmp_path, env=env)
    assert ours.returncode == 0 and "<stdout>: ours" in ours.stdout, ours.stdout + ours.stderr


def test_elastic_output_filename(tmp_path):
    out = tmp_path / "out"
    result = run(HOROVODRUN, ["-np", "2", "--min-np", "2", "--max-np", "2", "-H", "localhost:2", "--output-filename",
                              str(out), "sh", "-c", "echo out; echo err >&2"], tmp_path)
    assert result.returncode == 0, result.stderr
    for rank in (0, 1):
        assert (out / ("rank.%d" % rank) / "stdout").read_text() == "out\n"
        assert (out / ("rank.%d" % rank) / "stderr").read_text() == "err\n"
