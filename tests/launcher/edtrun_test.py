"""Integration tests of edtrun with real processes.

Several hosts are modelled by addresses of 127.0.0.0/8: a real OpenSSH sshd,
started here with a throwaway host key and client key, listens on 127.0.0.2
and 127.0.0.3; edtrun reaches them with -p and -i like any remote host.
Workers write their pids to files so the tests can check that nothing is
left running.

Run by CTest with EDTRUN set to the edtrun binary (and EDT_BENCH to
edt-bench when it is built).
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from harness import sshd as sshd_harness
from harness.sshd import HOSTS

EDTRUN = os.environ.get("EDTRUN", "edtrun")
PYTHON = "/usr/bin/python3"


@pytest.fixture(scope="module")
def sshd():
    with sshd_harness.running("edtrun-sshd-") as server:
        yield server


@pytest.fixture
def workdir(tmp_path):
    """A directory that exists on every "host" (they share this machine)."""
    return str(tmp_path)


def edtrun(args, cwd, timeout=60, env=None):
    started = time.monotonic()
    result = subprocess.run([EDTRUN] + args, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                            env=env if env is not None else os.environ)
    result.elapsed = time.monotonic() - started
    return result


def lines_of(stream, tag="stdout"):
    """{rank: [lines]} from edtrun's prefixed output."""
    by_rank = {}
    for line in stream.splitlines():
        m = re.match(r"\[(\d+)\]<%s>: (.*)$" % tag, line)
        if m:
            by_rank.setdefault(int(m.group(1)), []).append(m.group(2))
    return by_rank


def alive(pid):
    """Running, not a zombie waiting to be reaped."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def wait_dead(pids, limit=10.0):
    end = time.monotonic() + limit
    while time.monotonic() < end and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def processes_in(directory, limit=10.0):
    """Live processes whose working directory is `directory`: every worker
    starts there, so after a job none may be left."""
    end = time.monotonic() + limit
    while True:
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                if os.readlink("/proc/%s/cwd" % entry) == directory and alive(int(entry)):
                    found.append(int(entry))
            except OSError:
                pass
        if not found or time.monotonic() >= end:
            return found
        time.sleep(0.05)


def read_pids(directory, count, limit=30.0):
    """The pids the workers wrote to directory/pid.<rank>[.child]."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        names = [n for n in os.listdir(directory) if n.startswith("pid.") and not n.endswith(".tmp")]
        if len(names) >= count:
            return [int(open(os.path.join(directory, n)).read()) for n in names]
        time.sleep(0.05)
    raise AssertionError("only %s of %d pid files appeared" % (os.listdir(directory), count))


# A worker that records its pid and a child's, then sleeps; pid files are
# written under a temporary name and renamed so they are never read half done.
SLEEPER = textwrap.dedent("""\
    import os, subprocess, sys, time
    rank = os.environ["EDT_RANK"]
    child = subprocess.Popen(["sleep", "300"])
    for name, pid in (("pid.%s" % rank, os.getpid()), ("pid.%s.child" % rank, child.pid)):
        with open(name + ".tmp", "w") as f:
            f.write(str(pid))
        os.rename(name + ".tmp", name)
    fail = os.environ.get("FAIL_RANK")
    if fail is not None and fail == rank:
        # Fail once every rank has recorded its pids, so the test can check
        # that all of them are stopped, however slowly ssh starts them.
        names = ["pid.%d%s" % (r, c) for r in range(int(os.environ["EDT_SIZE"])) for c in ("", ".child")]
        end = time.monotonic() + 60
        while not all(os.path.exists(n) for n in names) and time.monotonic() < end:
            time.sleep(0.02)
        sys.exit(int(os.environ["FAIL_CODE"]))
    time.sleep(300)
    """)

ENV_DUMP = ("import json, os; print(json.dumps(dict(os.environ)))")

PLACEMENT_KEYS = ["RANK", "SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE", "HOSTNAME"]


def check_placement(envs, expected):
    """`expected`: per rank (host, local_rank, local_size, cross_rank, cross_size)."""
    size = len(expected)
    assert sorted(envs) == list(range(size))
    coordinators = set()
    for rank, (host, local_rank, local_size, cross_rank, cross_size) in enumerate(expected):
        env = envs[rank]
        want = dict(RANK=rank, SIZE=size, LOCAL_RANK=local_rank, LOCAL_SIZE=local_size, CROSS_RANK=cross_rank,
                    CROSS_SIZE=cross_size, HOSTNAME=host)
        for key, value in want.items():
            assert env["EDT_" + key] == str(value), (rank, key, env["EDT_" + key])
            assert env["HOROVOD_" + key] == str(value), (rank, key)
        assert env["RANK"] == str(rank)
        assert env["WORLD_SIZE"] == str(size)
        assert env["LOCAL_RANK"] == str(local_rank)
        assert env["LOCAL_WORLD_SIZE"] == str(local_size)
        coordinators.add(env["EDT_COORDINATOR"].rsplit(":", 1)[1])
        assert env["MASTER_PORT"] != env["EDT_COORDINATOR"].rsplit(":", 1)[1]
    assert len(coordinators) == 1, "every rank must find the same store"
    assert len({envs[r]["MASTER_PORT"] for r in envs}) == 1
    assert len({envs[r]["MASTER_ADDR"] for r in envs if envs[r]["EDT_HOSTNAME"] == envs[0]["EDT_HOSTNAME"]}) == 1


def test_local_workers_get_every_variable(workdir):
    env = dict(os.environ, EDT_TRANSPORT="tcp")
    env.pop("OMP_NUM_THREADS", None)
    result = edtrun(["-np", "4", "-x", "EXTRA=a b", PYTHON, "-c", ENV_DUMP], workdir, env=env)
    assert result.returncode == 0, result.stderr
    envs = {rank: json.loads(lines[0]) for rank, lines in lines_of(result.stdout).items()}
    check_placement(envs, [("localhost", r, 4, 0, 1) for r in range(4)])
    for e in envs.values():
        assert e["EDT_COORDINATOR"].startswith("127.0.0.1:")
        assert e["MASTER_ADDR"] == "127.0.0.1"
        assert e["OMP_NUM_THREADS"] == "1"
        assert e["EDT_TRANSPORT"] == "tcp"
        assert e["EXTRA"] == "a b"
    # The coordinator is a live TCP store while the job runs: a worker connects to it.
    probe = ("import os, socket; h, p = os.environ['EDT_COORDINATOR'].rsplit(':', 1); "
             "socket.create_connection((h, int(p)), timeout=5).close(); print('reached')")
    result = edtrun(["-np", "2", PYTHON, "-c", probe], workdir, env=dict(os.environ, OMP_NUM_THREADS="3"))
    assert result.returncode == 0, result.stderr
    assert lines_of(result.stdout) == {0: ["reached"], 1: ["reached"]}


def test_user_omp_num_threads_is_kept(workdir):
    result = edtrun(["-np", "1", "sh", "-c", "echo $OMP_NUM_THREADS"], workdir,
                    env=dict(os.environ, OMP_NUM_THREADS="3"))
    assert result.stdout == "[0]<stdout>: 3\n", result.stderr


def test_ssh_hosts_and_a_local_one(sshd, workdir):
    # localhost:1 is forked; the 127.0.0.2/3 workers go through sshd, as
    # SSH_CONNECTION (set by sshd, never forwarded) shows.
    result = edtrun(["-np", "5", "-H", "localhost:1,127.0.0.2:2,127.0.0.3:2"] + sshd.args() +
                    ["-x", "FROM_X=yes", PYTHON, "-c", ENV_DUMP], workdir,
                    env=dict(os.environ, EDT_TRANSPORT="tcp", HOSTNAME="launcher-only"))
    assert result.returncode == 0, result.stderr
    envs = {rank: json.loads(lines[0]) for rank, lines in lines_of(result.stdout).items()}
    check_placement(envs, [("localhost", 0, 1, 0, 3), ("127.0.0.2", 0, 2, 1, 3), ("127.0.0.2", 1, 2, 0, 2),
                           ("127.0.0.3", 0, 2, 2, 3), ("127.0.0.3", 1, 2, 1, 2)])
    assert "SSH_CONNECTION" not in envs[0] or envs[0]["SSH_CONNECTION"] == os.environ.get("SSH_CONNECTION")
    for rank, host in ((1, "127.0.0.2"), (2, "127.0.0.2"), (3, "127.0.0.3"), (4, "127.0.0.3")):
        e = envs[rank]
        assert e["SSH_CONNECTION"].split()[2] == host, e["SSH_CONNECTION"]
        assert e["EDT_TRANSPORT"] == "tcp" and e["FROM_X"] == "yes"
        assert e.get("HOSTNAME") != "launcher-only", "host-specific variables are not forwarded"
        assert e["PWD"] == workdir
        assert e["MASTER_ADDR"] == "127.0.0.1"  # rank 0 runs on the launching machine
        assert e["OMP_NUM_THREADS"] == "1"


def test_ssh_worker_reaches_the_coordinator(sshd, workdir):
    probe = ("import os, socket; h, p = os.environ['EDT_COORDINATOR'].rsplit(':', 1); "
             "socket.create_connection((h, int(p)), timeout=5).close(); print('reached', os.environ['MASTER_ADDR'])")
    result = edtrun(["-np", "2", "-H", "127.0.0.2:1,127.0.0.3:1"] + sshd.args() + [PYTHON, "-c", probe], workdir)
    assert result.returncode == 0, result.stderr
    # Rank 0 is remote, so MASTER_ADDR is its host.
    assert lines_of(result.stdout) == {0: ["reached 127.0.0.2"], 1: ["reached 127.0.0.2"]}


def run_failing_job(args, workdir, fail_rank, code, count):
    with open(os.path.join(workdir, "sleeper.py"), "w") as f:
        f.write(SLEEPER)
    env = dict(os.environ, FAIL_RANK=str(fail_rank), FAIL_CODE=str(code))
    result = edtrun(args + [PYTHON, "sleeper.py"], workdir, env=env)
    pids = read_pids(workdir, 2 * count, limit=1)
    return result, pids


def test_local_worker_failure_stops_the_others(workdir):
    result, pids = run_failing_job(["-np", "3"], workdir, fail_rank=1, code=7, count=3)
    assert result.returncode == 7, result.stderr
    assert "rank 1 on host localhost exited with code 7" in result.stderr
    assert result.elapsed < 15
    assert wait_dead(pids, limit=5) == []
    assert processes_in(workdir) == []


def test_ssh_worker_failure_stops_the_others(sshd, workdir):
    result, pids = run_failing_job(["-np", "4", "-H", "localhost:1,127.0.0.2:1,127.0.0.3:2"] + sshd.args(), workdir,
                                   fail_rank=3, code=5, count=4)
    assert result.returncode == 5, result.stderr
    assert "rank 3 on host 127.0.0.3 exited with code 5" in result.stderr
    assert result.elapsed < 20
    assert wait_dead(pids, limit=10) == []


def test_worker_killed_by_signal(workdir):
    result = edtrun(["-np", "2", "sh", "-c", 'if [ "$EDT_RANK" = 1 ]; then kill -KILL $$; fi; sleep 60'], workdir)
    assert result.returncode == 128 + 9, result.stderr
    assert "rank 1 on host localhost was killed by signal 9" in result.stderr
    assert result.elapsed < 15


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_edtrun_stops_every_worker(sshd, workdir, sig):
    with open(os.path.join(workdir, "sleeper.py"), "w") as f:
        f.write(SLEEPER)
    process = subprocess.Popen([EDTRUN, "-np", "4", "-H", "localhost:2,127.0.0.2:1,127.0.0.3:1"] + sshd.args() +
                               [PYTHON, "sleeper.py"], cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    pids = read_pids(workdir, 8)
    assert all(alive(p) for p in pids)
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 128 + sig, stderr
    assert "stopping every worker" in stderr
    assert wait_dead(pids, limit=10) == []
    assert processes_in(workdir) == []


def test_sigkilled_edtrun_leaves_no_worker(sshd, workdir):
    # Nothing can catch SIGKILL: local workers get SIGTERM from the kernel
    # (parent-death signal), remote ones see their ssh channel close.
    with open(os.path.join(workdir, "sleeper.py"), "w") as f:
        f.write(SLEEPER)
    process = subprocess.Popen([EDTRUN, "-np", "3", "-H", "localhost:1,127.0.0.2:2"] + sshd.args() +
                               [PYTHON, "sleeper.py"], cwd=workdir, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    read_pids(workdir, 6)  # every worker and its child are up
    process.kill()
    process.wait()
    worker_pids = [int(open(os.path.join(workdir, "pid.%d" % r)).read()) for r in range(3)]
    assert wait_dead(worker_pids, limit=15) == []


def test_worker_ignoring_sigterm_is_killed_after_the_grace_period(workdir):
    # The pid file is renamed into place so read_pids never sees it empty.
    script = "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); " \
             "name = 'pid.%s' % os.environ['EDT_RANK']; " \
             "open(name + '.tmp', 'w').write(str(os.getpid())); os.rename(name + '.tmp', name); " \
             "time.sleep(300)"
    process = subprocess.Popen([EDTRUN, "-np", "2", PYTHON, "-c", script], cwd=workdir,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = read_pids(workdir, 2)
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=30)
    assert 4 < time.monotonic() - started < 15
    assert process.returncode == 128 + signal.SIGTERM
    assert wait_dead(pids, limit=5) == []


def test_refused_host_fails_fast_naming_it(sshd, workdir):
    with open(os.path.join(workdir, "sleeper.py"), "w") as f:
        f.write(SLEEPER)
    result = edtrun(["-np", "2", "-H", "localhost:1,127.0.0.9:1"] + sshd.args() + [PYTHON, "sleeper.py"], workdir)
    assert result.returncode != 0
    assert "cannot reach host 127.0.0.9 over ssh" in result.stderr
    assert "Connection refused" in result.stderr
    assert result.elapsed < 15
    assert processes_in(workdir) == []


def test_silent_host_fails_within_the_start_timeout(sshd, workdir):
    # A listener that accepts and never speaks SSH: only the timeout ends it.
    silent = socket.socket()
    silent.bind(("127.0.0.4", 0))
    silent.listen(8)
    try:
        result = edtrun(["-np", "1", "-H", "127.0.0.4", "-p", str(silent.getsockname()[1]), "-i", sshd.key,
                         "--start-timeout", "2", "true"], workdir)
    finally:
        silent.close()
    assert result.returncode != 0
    assert "127.0.0.4" in result.stderr
    assert result.elapsed < 8, result.elapsed


def test_missing_command(sshd, workdir):
    local = edtrun(["-np", "2", "no-such-command-edt"], workdir)
    assert local.returncode == 127
    assert "command 'no-such-command-edt' not found in PATH" in local.stderr
    remote = edtrun(["-np", "1", "-H", "127.0.0.2"] + sshd.args() + ["no-such-command-edt"], workdir)
    assert remote.returncode == 127
    assert "rank 0 on host 127.0.0.2 could not start" in remote.stderr
    assert "command no-such-command-edt not found" in remote.stderr


@pytest.mark.parametrize("args,message,code", [
    (["-np", "5", "-H", "a:2,b:2"], "-np 5 asks for more workers than the 4 slots of -H (a:2,b:2)", 2),
    (["-np", "3"], None, 0),
    (["-np", "0"], "-np 0 asks for no workers", 2),
    (["-np", "-2"], "asks for no workers", 2),
    (["-np", "2", "-H", "a:2,a:1"], "-H entry 2: host 'a' is listed again (first at -H entry 1)", 2),
    (["-np", "2", "-H", "a:two"], "-H entry 1: 'a:two'", 2),
    (["-np", "1", "--start-timeout", "soon"], "--start-timeout soon is not a positive duration", 2),
    (["-np", "1", "-x", "UNSET_VARIABLE_EDT"], "-x UNSET_VARIABLE_EDT=VALUE", 2),
    (["-np", "1", "-H", "no-such-host.invalid"], "cannot resolve host 'no-such-host.invalid'", 1),
    (["-np", "1", "--hostfile", "/nonexistent/hostfile"], "cannot read hostfile /nonexistent/hostfile", 2),
    (["-np", "1", "-H", "a", "--hostfile", "/x"], "-H and --hostfile both given", 2),
])
def test_bad_arguments(workdir, args, message, code):
    result = edtrun(args + ["true"], workdir)
    assert result.returncode == code, result.stderr
    if message:
        assert message in result.stderr


def test_log_level(workdir):
    """horovodrun's --log-level spelling; --verbose is its debug level."""
    env = {k: v for k, v in os.environ.items() if k != "EDT_LOG_LEVEL"}
    quiet = edtrun(["-np", "1", "true"], workdir, env=env)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    for args in (["--log-level", "DEBUG"], ["--log-level", "debug"], ["--verbose"]):
        result = edtrun(["-np", "1"] + args + ["true"], workdir, env=env)
        assert result.returncode == 0, result.stderr
        assert "edtrun: store listening on port" in result.stderr, (args, result.stderr)
    quieter = edtrun(["-np", "1", "--log-level", "warning", "--verbose", "true"], workdir, env=env)
    assert quieter.returncode == 0 and "store listening" not in quieter.stderr, quieter.stderr
    bad = edtrun(["-np", "1", "--log-level", "LOUD", "true"], workdir, env=env)
    assert bad.returncode == 2
    assert "--log-level LOUD: unknown log level 'loud'" in bad.stderr, bad.stderr


def test_hostfile_errors_name_the_line(workdir):
    path = os.path.join(workdir, "hostfile")
    with open(path, "w") as f:
        f.write("# cluster\nnode1 slots=2\nnode2 slots=x\n")
    result = edtrun(["-np", "2", "--hostfile", path, "true"], workdir)
    assert result.returncode == 2
    assert path + ":3: 'node2 slots=x'" in result.stderr
    with open(path, "w") as f:
        f.write("localhost slots=2\n")
    result = edtrun(["-np", "3", "-hostfile", path, "true"], workdir)
    assert "the 2 slots of --hostfile " + path in result.stderr
    result = edtrun(["-np", "2", "-hostfile", path, "sh", "-c", "echo $EDT_LOCAL_SIZE"], workdir)
    assert result.returncode == 0, result.stderr
    assert lines_of(result.stdout) == {0: ["2"], 1: ["2"]}


def test_output_lines_stay_whole(workdir):
    # Each worker writes long lines in small pieces; no line may be mixed.
    script = textwrap.dedent("""\
        import os, sys, time
        r = os.environ['EDT_RANK']
        for i in range(50):
            for piece in range(10):
                sys.stdout.write(r * 100)
                sys.stdout.flush()
            sys.stdout.write('\\n')
            sys.stderr.write('e%s\\n' % r)
        sys.stdout.write('no newline at the end')
        """)
    result = edtrun(["-np", "3", PYTHON, "-c", script], workdir)
    assert result.returncode == 0, result.stderr
    out = lines_of(result.stdout)
    for rank in range(3):
        assert out[rank][:50] == [str(rank) * 1000] * 50
        assert out[rank][50:] == ["no newline at the end"]
        assert lines_of(result.stderr, "stderr")[rank] == ["e%d" % rank] * 50


def test_output_filename_writes_one_folder_per_rank(sshd, workdir):
    out = os.path.join(workdir, "logs")
    result = edtrun(["-np", "2", "-H", "localhost:1,127.0.0.2:1"] + sshd.args() +
                    ["--output-filename", out, "sh", "-c", "echo out $EDT_RANK; echo err $EDT_RANK >&2"], workdir)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    for rank in range(2):
        assert open(os.path.join(out, "rank.%d" % rank, "stdout")).read() == "out %d\n" % rank
        assert open(os.path.join(out, "rank.%d" % rank, "stderr")).read() == "err %d\n" % rank


TORCH_SCRIPT = textwrap.dedent("""\
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    print("rank", dist.get_rank(), "of", dist.get_world_size(), "sum", t.item())
    dist.destroy_process_group()
    """)


@pytest.mark.parametrize("hosts", [[], ["-H", "127.0.0.2:1,127.0.0.3:1"]], ids=["local", "ssh"])
def test_torch_distributed_gloo_runs_unchanged(sshd, workdir, hosts):
    with open(os.path.join(workdir, "allreduce.py"), "w") as f:
        f.write(TORCH_SCRIPT)
    args = ["-np", "2"] + (hosts + sshd.args() if hosts else []) + [PYTHON, "allreduce.py"]
    result = edtrun(args, workdir, timeout=120)
    assert result.returncode == 0, result.stderr
    assert lines_of(result.stdout) == {0: ["rank 0 of 2 sum 3.0"], 1: ["rank 1 of 2 sum 3.0"]}


EDTRUN_PROBE = os.environ.get("EDTRUN_PROBE", "edtrun-probe")


@pytest.mark.parametrize("hosts,transport,expected", [
    ("localhost:3", "auto", "shm"),
    ("127.0.0.2:2,127.0.0.3:2", "auto", "shm+tcp"),
    ("localhost:1,127.0.0.2:1,127.0.0.3:1", "tcp", "tcp"),
], ids=["local", "ssh-hosts", "tcp"])
def test_libedt_communicator_forms_from_edtruns_environment(sshd, workdir, hosts, transport, expected):
    size = sum(int(h.split(":")[1]) for h in hosts.split(","))
    result = edtrun(["-np", str(size), "-H", hosts] + sshd.args() + [EDTRUN_PROBE], workdir,
                    env=dict(os.environ, EDT_TRANSPORT=transport), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    out = lines_of(result.stdout)
    total = size * (size + 1) // 2
    assert sorted(out) == list(range(size))
    for rank, lines in out.items():
        assert len(lines) == 1 and lines[0].startswith("rank %d/%d " % (rank, size)), lines
        assert lines[0].endswith("transport %s sum %d" % (expected, total)), lines


EDT_BENCH = os.environ.get("EDT_BENCH")


@pytest.mark.skipif(not EDT_BENCH, reason="edt-bench is not part of this build")
def test_edt_bench_allreduce_over_ssh_hosts(sshd, workdir):
    # Correctness, not speed: a few iterations per size keep the test short
    # on a machine with fewer cores than ranks.
    result = edtrun(["-np", "4", "-H", "127.0.0.2:2,127.0.0.3:2"] + sshd.args() +
                    [EDT_BENCH, "allreduce", "--check", "--max-bytes", "1M", "--iters", "5", "--warmup", "1"],
                    workdir, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    out = lines_of(result.stdout)
    assert "4 ranks on 2 host(s)" in out[0][0], out[0][0]
    rows = [line.split() for line in out[0] if re.match(r"\s*\d+\s+\d+\s", line)]
    assert [int(row[0]) for row in rows] == [4 << i for i in range(19)], rows
    for row in rows:
        assert row[-1] == "0", "wrong elements: %s" % row


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))
