"""Integration tests of the warm start: python/edt/_warm/ (the server) and
edt-warm-run (the client) with real processes.

Each test compares a worker forked from the warm interpreter with what a
fresh `python3` would be: argv, __main__, sys.path, working directory,
environment, standard streams, exit status, signals, credentials and PID
namespace; and checks that requests the server cannot serve exactly start
cold, with the reason.

Run by CTest with EDT_WARM_RUN (the client), EDTRUN and EDT_PYTHONPATH (the
build's python/ directory).
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

PYTHON = "/usr/bin/python3"
WARM_RUN = os.environ.get("EDT_WARM_RUN", "edt-warm-run")
EDTRUN = os.environ.get("EDTRUN", "edtrun")
PYTHONPATH = os.environ.get("EDT_PYTHONPATH", "")

# The worker reports what it is as one JSON line.
REPORT = textwrap.dedent("""\
    import json, os, signal, sys
    print(json.dumps({
        "argv": sys.argv, "name": __name__, "file": __file__, "path0": sys.path[0], "cwd": os.getcwd(),
        "env": os.environ.get("WARM_TEST"), "pid": os.getpid(), "sid": os.getsid(0) == os.getpid(),
        "uid": os.getuid(), "caps": [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0],
        "sigint": str(signal.getsignal(signal.SIGINT)), "sigterm": str(signal.getsignal(signal.SIGTERM)),
        "fds": sorted(int(f) for f in os.listdir("/proc/self/fd")),
        "cmdline": open("/proc/self/cmdline", "rb").read().rstrip(b"\\0").replace(b"\\0", b" ").decode(),
        "torch_loaded": "torch" in sys.modules, "pidns": os.readlink("/proc/self/ns/pid"),
        "seed": __import__("random").random(),
    }), flush=True)
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
""")


def start_server(args, env):
    """A warm server, once it serves. Its stderr goes to a file, not a pipe
    nobody reads after the first line: a full pipe would block it."""
    log = tempfile.NamedTemporaryFile("w+", prefix="edt-warm-server-", suffix=".log", delete=False)
    proc = subprocess.Popen([PYTHON, "-m", "edt._warm"] + args, env=env, stderr=log, text=True)
    proc.log = log.name
    deadline = time.monotonic() + 120
    while "serving on" not in read(log.name):
        assert proc.poll() is None and time.monotonic() < deadline, "the warm server did not start:\n" + read(log.name)
        time.sleep(0.05)
    return proc


def stop_server(proc):
    """SIGTERM, as edtd stops it; what it was doing if it does not end."""
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        state = {f: read("/proc/%d/%s" % (proc.pid, f)) for f in ("wchan", "status", "stack")}
        threads = os.listdir("/proc/%d/task" % proc.pid)
        proc.kill()
        pytest.fail("the warm server did not end 30 s after SIGTERM; threads %s, %s\nits stderr:\n%s"
                    % (threads, state, read(proc.log)))


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError as e:
        return "(%s)" % e


@pytest.fixture(scope="module")
def server():
    directory = tempfile.mkdtemp(prefix="edt-warm-test-")
    sock = os.path.join(directory, "python.sock")
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    proc = start_server(["--socket", sock], env)
    yield {"socket": sock, "env": env, "dir": directory, "pid": proc.pid}
    stop_server(proc)
    assert not os.path.exists(sock), "the server left its socket behind"


def test_a_sigterm_while_the_server_forks_ends_it(tmp_path):
    """SIGTERM inside a callback of os.fork() (as logging's lock release
    runs when the server forks a spare), where an exception its handler
    raised would be lost, still ends the server, with status 0."""
    (tmp_path / "sigterm_at_fork.py").write_text(
        "import os, signal\n"
        "os.register_at_fork(after_in_parent=lambda: signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL\n"
        "                    and os.kill(os.getpid(), signal.SIGTERM))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PYTHONPATH, str(tmp_path)]))
    ended = subprocess.run([PYTHON, "-m", "edt._warm", "--socket", str(tmp_path / "python.sock"),
                            "--preload", "sigterm_at_fork"], env=env, capture_output=True, text=True, timeout=60)
    assert ended.returncode == 0 and "Exception ignored" not in ended.stderr, ended.stderr
    assert not (tmp_path / "python.sock").exists(), "the server left its socket behind"


def script(server, text, name="worker.py"):
    path = os.path.join(server["dir"], name)
    with open(path, "w") as f:
        f.write(text)
    return path


def run(server, argv, extra_env=None, warm=True, **kwargs):
    env = dict(server["env"], EDT_WARM_SOCKET=server["socket"], EDT_LOG_LEVEL="debug", **(extra_env or {}))
    if not warm:
        env["EDT_WARM_START"] = "0"
    return subprocess.run([WARM_RUN, *argv], env=env, capture_output=True, text=True, timeout=60, **kwargs)


def report(result):
    lines = [l for l in result.stdout.splitlines() if l.startswith("{")]
    assert lines, "no report: stdout %r stderr %r" % (result.stdout, result.stderr)
    return json.loads(lines[0])


def test_warm_worker_is_what_a_fresh_one_would_be(server):
    path = script(server, REPORT)
    cwd = os.path.join(server["dir"], "work")
    os.makedirs(cwd, exist_ok=True)
    warm = run(server, [PYTHON, path, "7"], {"WARM_TEST": "x y"}, cwd=cwd)
    cold = run(server, [PYTHON, path, "7"], {"WARM_TEST": "x y"}, warm=False, cwd=cwd)
    assert warm.returncode == cold.returncode == 7
    assert "declined" not in warm.stderr, warm.stderr
    w, c = report(warm), report(cold)
    assert w["torch_loaded"] and not c["torch_loaded"], "the warm worker was not forked from the server"
    for key in ("argv", "name", "file", "path0", "cwd", "env", "uid", "caps", "sigint", "sigterm", "pidns", "fds"):
        assert w[key] == c[key], key
    assert w["sid"], "the worker leads a session of its own"
    assert w["fds"] == c["fds"], "descriptors of the server or relay leaked into the worker: %s" % w["fds"]
    assert w["cmdline"] == "%s %s 7" % (PYTHON, path), "ps shows the server's command line"


def test_streams_exit_codes_and_exceptions(server):
    path = script(server, textwrap.dedent("""\
        import sys
        line = sys.stdin.readline()
        print("out:" + line.strip())
        print("err", file=sys.stderr)
        raise ValueError("boom")
    """), "streams.py")
    result = run(server, [PYTHON, "-u", path], input="hello\n")
    assert result.returncode == 1
    assert result.stdout == "out:hello\n"
    assert "err\n" in result.stderr
    assert 'File "%s", line 5, in <module>' % path in result.stderr and "ValueError: boom" in result.stderr
    assert "/edt/_warm" not in result.stderr, "the traceback shows the server's frames:\n" + result.stderr
    assert "declined" not in result.stderr


def test_module_mode(server):
    package = os.path.join(server["dir"], "pkg_dir")
    os.makedirs(os.path.join(package, "warmpkg"), exist_ok=True)
    with open(os.path.join(package, "warmpkg", "__init__.py"), "w"):
        pass
    with open(os.path.join(package, "warmpkg", "main.py"), "w") as f:
        f.write("import sys, os\nprint(__name__, sys.argv[1:], sys.path[0] == os.getcwd())\n")
    result = run(server, [PYTHON, "-m", "warmpkg.main", "a", "b"], cwd=package)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "__main__ ['a', 'b'] True\n"
    assert "declined" not in result.stderr


def test_signals_reach_the_worker_and_its_end_is_the_clients(server):
    path = script(server, textwrap.dedent("""\
        import signal, sys, time
        signal.signal(signal.SIGUSR1, lambda *a: print("usr1", flush=True))
        print("ready", flush=True)
        while True:
            time.sleep(0.05)
    """), "signals.py")
    env = dict(server["env"], EDT_WARM_SOCKET=server["socket"])
    client = subprocess.Popen([WARM_RUN, PYTHON, path], env=env, stdout=subprocess.PIPE, text=True)
    assert client.stdout.readline() == "ready\n"
    client.send_signal(signal.SIGUSR1)
    assert client.stdout.readline() == "usr1\n"
    client.send_signal(signal.SIGTERM)
    assert client.wait(30) == -signal.SIGTERM


def test_killing_the_client_kills_the_worker(server):
    path = script(server, "import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(600)\n", "sleeper.py")
    env = dict(server["env"], EDT_WARM_SOCKET=server["socket"])
    client = subprocess.Popen([WARM_RUN, PYTHON, path], env=env, stdout=subprocess.PIPE, text=True)
    worker = int(client.stdout.readline())
    assert worker != client.pid, "the worker ran cold"
    client.kill()
    client.wait()
    deadline = time.monotonic() + 30
    while alive(worker):
        assert time.monotonic() < deadline, "the worker outlived its client"
        time.sleep(0.02)


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("argv_tail, extra_env, reason", [
    (["-c", "print(1)"], {}, "the Python option -c is not served warm"),
    (["-O", "{script}"], {}, "the Python option -O is not served warm"),
    (["{script}"], {"PYTHONHASHSEED": "3"}, "PYTHONHASHSEED differs"),
    (["{script}"], {"PYTHONPATH": "{shadow}"}, "on this PYTHONPATH torch would come from"),
])
def test_requests_not_served_exactly_start_cold(server, argv_tail, extra_env, reason):
    path = script(server, "import sys\nprint('ran', 'torch' in sys.modules)\n", "cold.py")
    shadow = os.path.join(server["dir"], "shadow")
    os.makedirs(os.path.join(shadow, "torch"), exist_ok=True)
    with open(os.path.join(shadow, "torch", "__init__.py"), "w"):
        pass
    argv = [PYTHON] + [a.format(script=path) for a in argv_tail]
    env = {k: v.format(shadow=shadow + ":" + PYTHONPATH) for k, v in extra_env.items()}
    result = run(server, argv, env)
    assert result.returncode == 0, result.stderr
    assert reason in result.stderr, result.stderr
    assert "True" not in result.stdout, "a cold start has no torch imported: %r" % result.stdout


def test_a_venvs_python_starts_cold(server):
    """A venv's python is a link to the server's interpreter but runs with
    the venv's packages (TensorFlow in edt's venv): it starts cold, never as
    a worker of the server's packages."""
    venv = os.path.join(server["dir"], "venv")
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", venv], check=True)
    path = script(server, "import sys\nprint('ran', sys.prefix)\n", "venv.py")
    result = run(server, [os.path.join(venv, "bin", "python3"), path])
    assert result.returncode == 0, result.stderr
    assert "runs in the environment %s" % venv in result.stderr, result.stderr
    assert "ran %s" % venv in result.stdout, result.stdout


def test_a_venv_over_the_systems_packages_is_served_warm_with_its_own(server):
    """A venv made with --system-site-packages (edt's, with TensorFlow) is
    served warm: the worker has the server's torch and the venv's prefix and
    packages, as the venv's own interpreter would. One of its packages that
    shadows a preloaded one starts it cold."""
    venv = os.path.join(server["dir"], "venv-system")
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", "--system-site-packages", venv], check=True)
    site_dir = os.path.join(venv, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
    with open(os.path.join(site_dir, "venv_only.py"), "w") as f:
        f.write("WHERE = 'venv'\n")
    path = script(server, "import sys, venv_only\nprint('ran', sys.prefix, venv_only.WHERE, 'torch' in sys.modules)\n",
                  "venv_warm.py")
    result = run(server, [os.path.join(venv, "bin", "python3"), path])
    assert result.returncode == 0, result.stderr
    assert "ran %s venv True" % venv in result.stdout, (result.stdout, result.stderr)
    os.makedirs(os.path.join(site_dir, "torch"))
    with open(os.path.join(site_dir, "torch", "__init__.py"), "w"):
        pass
    result = run(server, [os.path.join(venv, "bin", "python3"), path])
    assert "torch would come from" in result.stderr, result.stderr
    assert "ran %s venv False" % venv in result.stdout, (result.stdout, result.stderr)


LOCALE_REPORT = ("import locale, sys\nprint(locale.setlocale(locale.LC_CTYPE), sys.getfilesystemencoding(), "
                 "sys.stdout.encoding, sys.flags.utf8_mode, 'torch' in sys.modules)\n")


def test_a_locale_of_the_same_encoding_is_served_warm_and_taken():
    """ssh passes a user's LANG and LC_* into a container: another name of
    an installed locale with the server's encoding starts warm, in that
    locale, as a fresh python3 would be; another encoding, or a locale that
    is not installed (a fresh python3 falls back to C), starts cold."""
    directory = tempfile.mkdtemp(prefix="edt-warm-locale-")
    env = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LC_CTYPE")}
    env.update(LANG="C.UTF-8", PYTHONPATH=PYTHONPATH)
    proc = start_server(["--socket", os.path.join(directory, "python.sock")], env)
    try:
        served = {"socket": os.path.join(directory, "python.sock"), "env": env, "dir": directory}
        path = script(served, LOCALE_REPORT, "locale_report.py")
        for extra, reason in (({"LC_ALL": "C.utf8"}, None),
                              ({"LANG": "C"}, "has another encoding than the warm interpreter's"),
                              ({"LC_CTYPE": "xx_XX.UTF-8"}, "the locale xx_XX.UTF-8 is not installed")):
            warm = run(served, [PYTHON, path], extra)
            fresh = subprocess.run([PYTHON, path], env=dict(env, **extra), capture_output=True, text=True, timeout=60)
            assert warm.returncode == 0, warm.stderr
            if reason:
                assert reason in warm.stderr, (extra, warm.stderr)
            else:
                assert "declined" not in warm.stderr, (extra, warm.stderr)
            *what, loaded = warm.stdout.split()
            assert what == fresh.stdout.split()[:-1] and loaded == str(reason is None), (extra, warm.stdout, fresh.stdout)
    finally:
        stop_server(proc)


def test_a_script_beside_a_package_of_a_preloaded_name_starts_cold(server):
    directory = os.path.join(server["dir"], "beside")
    os.makedirs(os.path.join(directory, "numpy"), exist_ok=True)
    with open(os.path.join(directory, "numpy", "__init__.py"), "w"):
        pass
    path = os.path.join(directory, "beside.py")
    with open(path, "w") as f:
        f.write("print('ran')\n")
    result = run(server, [PYTHON, path])
    assert result.returncode == 0 and result.stdout == "ran\n", result.stderr
    assert "numpy would come from %s/numpy/__init__.py" % directory in result.stderr, result.stderr


def test_turned_off_or_no_server_runs_the_command_itself(server):
    path = script(server, "import os\nprint(os.getpid())\n", "self.py")
    off = run(server, [PYTHON, path], warm=False)
    missing = subprocess.run([WARM_RUN, PYTHON, path], capture_output=True, text=True, timeout=60,
                             env=dict(server["env"], EDT_WARM_SOCKET=os.path.join(server["dir"], "none.sock")))
    for result in (off, missing):
        assert result.returncode == 0 and result.stdout.strip().isdigit(), result.stderr
    not_python = run(server, ["/bin/sh", "-c", "exit 3"])
    assert not_python.returncode == 3


def test_workers_get_fresh_random_state(server):
    path = script(server, REPORT, "seed.py")
    seeds = {report(run(server, [PYTHON, path]))["seed"] for _ in range(3)}
    assert len(seeds) == 3, "workers forked from one interpreter drew the same random numbers"


@pytest.mark.skipif(os.geteuid() != 0, reason="changing to another user and PID namespace needs root")
def test_worker_takes_the_clients_user_capabilities_and_pid_namespace(server):
    path = script(server, REPORT, "creds.py")
    os.chmod(server["dir"], 0o755)
    os.chmod(path, 0o644)
    env = dict(server["env"], EDT_WARM_SOCKET=server["socket"])
    as_nobody = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "--inh-caps=-all"]
    warm = subprocess.run(as_nobody + [WARM_RUN, PYTHON, path], env=env, capture_output=True, text=True, timeout=60)
    cold = subprocess.run(as_nobody + [PYTHON, path], env=env, capture_output=True, text=True, timeout=60)
    w, c = report(warm), report(cold)
    assert w["torch_loaded"], "started cold: " + warm.stderr
    assert (w["uid"], w["caps"]) == (c["uid"], c["caps"]) == (65534, "0000000000000000")
    boxed = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", WARM_RUN, PYTHON, path], env=env,
                           capture_output=True, text=True, timeout=60)
    b = report(boxed)
    assert b["torch_loaded"], boxed.stderr
    assert b["pidns"] != w["pidns"] and b["pid"] < 10, "the worker is not in the client's PID namespace: %s" % b


def test_edtrun_starts_python_workers_warm(server):
    path = script(server, REPORT, "edtrun_worker.py")
    env = dict(server["env"], EDT_WARM_SOCKET=server["socket"])
    result = subprocess.run([EDTRUN, "-np", "2", PYTHON, path], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    reports = [json.loads(l[l.index("{"):]) for l in result.stdout.splitlines() if "{" in l]
    assert len(reports) == 2 and all(r["torch_loaded"] for r in reports), result.stdout + result.stderr
    off = subprocess.run([EDTRUN, "-np", "2", PYTHON, path], env=dict(env, EDT_WARM_START="0"),
                         capture_output=True, text=True, timeout=120)
    assert off.returncode == 0 and '"torch_loaded": false' in off.stdout, off.stdout + off.stderr


# ---- another container of the client's cluster ------------------------------------

class FakeContainer:
    """A stand-in for a container of edtd's local backend: a process that is
    the init of a PID namespace of its own, recorded as edtd records one
    (<containers>/<name>/info.json and session.json)."""

    def __init__(self, containers, name, cluster, env):
        self.proc = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "sleep", "600"])
        deadline = time.time() + 10
        while True:
            children = open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)).read().split()
            if children or time.time() > deadline:
                break
            time.sleep(0.01)
        self.pid = int(children[0])
        os.makedirs(os.path.join(containers, name))
        with open(os.path.join(containers, name, "session.json"), "w") as f:
            json.dump({"cluster": cluster, "env": env}, f)
        with open(os.path.join(containers, name, "info.json"), "w") as f:  # as bwrap's --info-fd
            json.dump({"child-pid": self.pid, "pid-namespace": os.stat("/proc/%d/ns/pid" % self.pid).st_ino}, f)
        self.pidns = os.readlink("/proc/%d/ns/pid" % self.pid)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def cluster():
    """A server that serves cross-container requests, and containers a-0 and
    a-1 of cluster a, b-0 of cluster b."""
    directory = tempfile.mkdtemp(prefix="edt-warm-cluster-")
    containers = os.path.join(directory, "containers")
    os.makedirs(containers)
    boxes = {name: FakeContainer(containers, name, name[0], {"WARM_TEST": "session of " + name})
             for name in ("a-0", "a-1", "b-0")}
    sock = os.path.join(directory, "python.sock")
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    proc = start_server(["--socket", sock, "--containers", containers], env)
    yield {"socket": sock, "env": env, "dir": directory, "boxes": boxes, "containers": containers}
    stop_server(proc)
    for box in boxes.values():
        box.stop()


def run_on(cluster, client_box, host, worker_env=None, **kwargs):
    """edt-warm-run --on HOST from inside `client_box` (None: the host), as
    edtrun runs it for a remote worker; the fallback prints 'fallback'."""
    path = script(cluster, REPORT, "remote.py")
    worker = {"argv": [PYTHON, path], "cwd": cluster["dir"],
              "env": ["%s=%s" % kv for kv in dict(cluster["env"], **(worker_env or {})).items()]}
    env = dict(cluster["env"], EDT_WARM_SOCKET=cluster["socket"], EDT_LOG_LEVEL="debug",
               EDT_WARM_WORKER=json.dumps(worker))
    enter = ["nsenter", "--target", str(client_box.pid), "--pid", "--"] if client_box else []
    argv = enter + [WARM_RUN, "--on", host, "--", "sh", "-c", "echo fallback; echo \"worker: ${EDT_WARM_WORKER:-gone}\""]
    keep_open, writer = os.pipe()  # edtrun keeps the input open until it stops the worker
    try:
        return subprocess.run(argv, env=env, stdin=keep_open, capture_output=True, text=True, timeout=60, **kwargs)
    finally:
        os.close(keep_open)
        os.close(writer)


def test_a_worker_starts_in_another_container_of_the_clients_cluster(cluster):
    boxes = cluster["boxes"]
    result = run_on(cluster, boxes["a-0"], "a-1", {"EXTRA": "1"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "edtrun: worker started", result.stdout + result.stderr
    r = json.loads(lines[1])
    assert r["torch_loaded"], result.stderr
    assert r["pidns"] == boxes["a-1"].pidns and r["pid"] < 10, "not in a-1's PID namespace: %s" % r
    assert r["cwd"] == cluster["dir"]
    assert r["env"] == "session of a-1", "the container's session environment is missing: %s" % r


def test_the_request_environment_comes_over_the_containers(cluster):
    result = run_on(cluster, cluster["boxes"]["a-0"], "a-1", {"WARM_TEST": "from edtrun"})
    assert report(result)["env"] == "from edtrun", result.stdout + result.stderr


@pytest.mark.parametrize("client,host,reason", [
    (None, "a-1", "only a process in a container"),
    ("b-0", "a-1", "not a container of the client's cluster"),
    ("a-0", "nosuch", "not a container on this host"),
    ("a-0", "../a-1", "must be a container's name"),
])
def test_other_clients_and_hosts_get_the_fallback(cluster, client, host, reason):
    result = run_on(cluster, cluster["boxes"][client] if client else None, host)
    assert result.stdout == "fallback\nworker: gone\n", result.stdout + result.stderr
    assert reason in result.stderr, result.stderr


def test_the_end_of_input_stops_a_remote_worker(cluster):
    path = script(cluster, "import time\nprint('up', flush=True)\ntime.sleep(60)\n", "sleeper.py")
    worker = {"argv": [PYTHON, path], "cwd": cluster["dir"], "env": ["%s=%s" % kv for kv in cluster["env"].items()]}
    env = dict(cluster["env"], EDT_WARM_SOCKET=cluster["socket"], EDT_WARM_WORKER=json.dumps(worker))
    argv = ["nsenter", "--target", str(cluster["boxes"]["a-0"].pid), "--pid", "--", WARM_RUN, "--on", "a-1", "--",
            "false"]
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "edtrun: worker started\n"
    assert proc.stdout.readline() == "up\n"
    proc.stdin.close()
    assert proc.wait(30) == -signal.SIGTERM
