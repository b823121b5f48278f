"""edtd for a test: started on a data dir, waited for, stopped, cleaned up.

Contract:
- Edtd(binary, data_dir, ...) starts nothing; start() runs
  `edtd --data-dir DATA --listen HOST:PORT [--ssh-port N] FLAGS...` with its
  output appended to log_path, waits until /healthz answers 200 and
  <data dir>/admin.token exists, and reads the token into .token.
  Failing that (edtd exited, or no answer within `timeout` seconds) it
  raises `error` (EdtdError unless the caller names its own exception
  class) with the tail of edtd's log.
- The differences between the tests' edtds are options, not copies: the
  flags, the environment (`env`, and per start `env_extra`/`env_drop`),
  a fresh port for every start (`new_port_each_start`, for a test that
  restarts edtd while the old port may linger), a preexec_fn, the log's
  open mode.
- stop() is SIGTERM (containers keep running, edtd's own contract), then
  SIGKILL after `grace` seconds if `kill_after`; kill() is SIGKILL.
  restart() stops and starts edtd again on the same data dir and port.
  Both raise `error` when edtd, asked to stop, does not exit with status 0
  (a sanitizer's finding at exit, a crash in the stop); an edtd that had
  exited before stop() is the test's to judge, not stop()'s.
- cleanup(path) detaches the mounts edtd left below `path` (loop-mounted
  disks) and removes it: call it after stop(), on success or failure.
- send()/get_json() speak HTTP to edtd's API with or without the token;
  they never raise for an HTTP status, only for a dead connection.

wait_healthy() and stop_process() serve a caller that starts edtd itself
(the demo's runner keeps its own Popen); they are what Edtd uses.
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

from . import mounts
from .ports import free_port


class EdtdError(RuntimeError):
    """edtd did not start, answer or stop as the test needs."""


def read_tail(path, offset=0, limit=6000):
    """The last `limit` characters of the file at `path` from `offset` ("" if it is missing)."""
    try:
        with open(path, errors="replace") as f:
            f.seek(offset)
            return f.read()[-limit:]
    except OSError:
        return ""


def probe(url, timeout=2):
    """Whether GET url/healthz answers 200 now."""
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=timeout) as r:
            return r.status == 200
    except OSError:  # refused, reset, timed out, or an HTTP error status
        return False


def wait_healthy(process, url, log_path, timeout=20, error=EdtdError, what="come up", token_file=None,
                 log_offset=0):
    """Polls url/healthz (and waits for token_file if given) until both are
    there; raises `error` with the log's tail if `process` exits first or
    `timeout` seconds pass."""
    deadline = time.time() + timeout
    while True:
        if probe(url) and (token_file is None or os.path.exists(token_file)):
            return
        if process.poll() is not None:
            raise error("edtd did not %s: it exited with code %s; its log:\n%s"
                        % (what, process.returncode, read_tail(log_path, log_offset)))
        if time.time() > deadline:
            raise error("edtd did not %s: no answer on %s within %d s; its log:\n%s"
                        % (what, url, timeout, read_tail(log_path, log_offset)))
        time.sleep(0.05)


def stop_process(process, grace=30, kill_after=True):
    """SIGTERM, then (kill_after) SIGKILL if it is still there after `grace`
    seconds; returns False if it had to be killed."""
    if process.poll() is not None:
        return True
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(grace)
        return True
    except subprocess.TimeoutExpired:
        if not kill_after:
            raise
        process.kill()
        process.wait()
        return False


class Edtd:
    """One edtd on one data dir; at most one process at a time (see the module's contract)."""

    def __init__(self, binary, data_dir, flags=(), *, log_path=None, host="127.0.0.1", port=None, ssh_port=None,
                 env=None, error=EdtdError, timeout=20, new_port_each_start=False, preexec_fn=None, log_mode="ab"):
        self.binary = binary
        self.data = data_dir
        self.flags = list(flags)
        self.log_path = log_path or os.path.join(os.path.dirname(os.path.abspath(data_dir)), "edtd.log")
        self.host = host
        self.port = port or free_port()
        # ssh_port=False: no --ssh-port (edtd's default, or a backend without one).
        self.ssh_port = free_port() if ssh_port is None else ssh_port
        self.env = env
        self.error = error
        self.timeout = timeout
        self.new_port_each_start = new_port_each_start
        self.preexec_fn = preexec_fn
        self.log_mode = log_mode
        self.log_offset = 0
        self.proc = None
        self.token = None

    @property
    def url(self):
        """http://HOST:PORT, the API's base."""
        return "http://%s:%d" % (self.host, self.port)

    def argv(self, extra=()):
        ssh = ["--ssh-port", str(self.ssh_port)] if self.ssh_port else []
        return [self.binary, "--data-dir", self.data, "--listen", "%s:%d" % (self.host, self.port), *ssh,
                *self.flags, *extra]

    def start(self, extra=(), env_extra=None, env_drop=(), timeout=None):
        """Starts edtd and waits for it (module contract); returns self."""
        if self.new_port_each_start and self.proc is not None:
            self.port = free_port()
        env = dict(self.env if self.env is not None else os.environ)
        for name in env_drop:
            env.pop(name, None)
        env.update(env_extra or {})
        self._spawn(self.argv(extra), env)
        self._wait("come up", timeout or self.timeout)
        return self

    def _spawn(self, argv, env):
        self.log_offset = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
        with open(self.log_path, self.log_mode) as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=log, env=env, preexec_fn=self.preexec_fn)
        self._env = env

    def _wait(self, what, timeout):
        token_file = os.path.join(self.data, "admin.token")
        wait_healthy(self.proc, self.url, self.log_path, timeout, self.error, what, token_file, self.log_offset)
        with open(token_file) as f:
            self.token = f.read().strip()

    def healthy(self):
        """Whether edtd answers /healthz now; raises `error` if it has exited."""
        if self.proc.poll() is not None:
            raise self.error("edtd exited (%s); its log:\n%s" % (self.proc.returncode, self.log()))
        return probe(self.url, timeout=5)

    def restart(self, flags=(), between=None, timeout=30):
        """SIGTERM (its containers keep running), between() if given, then
        the same argv with `flags` added, on the same data dir and port."""
        argv = list(self.proc.args)
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=timeout)
        self._expect_clean_stop()
        if between:
            between()
        self._spawn([*argv, *flags], self._env)
        self._wait("come back", timeout)

    def stop(self, grace=30, kill_after=True):
        """SIGTERM, SIGKILL after `grace` s (kill_after); raises `error` if it
        had to be killed or did not exit with 0 (module contract)."""
        if not self.proc or self.proc.poll() is not None:
            return
        if not stop_process(self.proc, grace, kill_after):
            raise self.error("edtd did not stop within %d s of SIGTERM; its log:\n%s" % (grace, self.log()))
        self._expect_clean_stop()

    def _expect_clean_stop(self):
        if self.proc.returncode != 0:
            raise self.error("edtd exited with %s after SIGTERM; its log:\n%s" % (self.proc.returncode, self.log()))

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def log(self, limit=6000):
        """The tail of what this start of edtd logged."""
        return read_tail(self.log_path, self.log_offset, limit)

    def send(self, method, path, body=None, token=None, raw=None, timeout=60):
        """(status, content type, body text) of one request; path is the full path."""
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if token:
            request.add_header("Authorization", "Bearer " + token)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as r:
                return r.status, r.headers.get("Content-Type", ""), r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Content-Type", ""), e.read().decode()

    def cli_env(self, base=None):
        """The environment the edt CLI needs to reach this edtd (EDT_API, EDT_TOKEN) on top of `base`."""
        return dict(base if base is not None else os.environ, EDT_API=self.url, EDT_TOKEN=self.token)


class ScratchEdtd(Edtd):
    """edtd on a fresh temporary dir, started: loopback networking unless
    `extra` names a network, a console stub, `gpus` simulated GPUs (4
    NVIDIA-P4 unless given, as --gpus MODEL=N), a block of 127.25x unless
    `addresses`. The contract, hostile, isolation, Slurm cluster and
    scheduler tests use it; stop() deletes its clusters and removes the dir."""

    def __init__(self, binary, addresses=None, extra=(), gpus="NVIDIA-P4=4"):
        self.dir = tempfile.mkdtemp(prefix="edt-contract-")
        os.chmod(self.dir, 0o711)  # with user namespaces, containers' roots bind from the data dir in it
        web = os.path.join(self.dir, "web")
        os.makedirs(web)
        with open(os.path.join(web, "index.html"), "w") as f:
            f.write("<title>edt console</title>\n")
        # Apart from edtd_integration_test's blocks (127.100-199); the console tests use bridges.
        second = 250 + os.getpid() % 5
        # Loopback networking unless the caller chose a network (edtd's default is a bridge).
        network = [] if "--network" in extra else ["--network", "loopback"]
        super().__init__(binary, os.path.join(self.dir, "data"),
                         ["--address-range", addresses or f"127.{second}.0.0/24", "--gpus", gpus,
                          "--grace", "2s", "--web-dir", web, *network, *extra],
                         log_path=os.path.join(self.dir, "edtd.log"))
        self.base = self.url
        self.start()

    def read_log(self):
        return read_tail(self.log_path, 0, 4000)

    def api(self, method, path, body=None):
        status, _, text = self.send(method, "/api/v1" + path, body, self.token)
        return status, (json.loads(text) if text.startswith("{") else text)

    def stop(self):
        """Deletes the clusters (when edtd still runs), stops edtd and removes its dir."""
        if self.proc.poll() is None:  # an edtd that died has nothing to delete (and its log is what matters)
            status, listed = self.api("GET", "/clusters")
            for c in listed.get("clusters", []) if status == 200 else []:
                self.api("DELETE", "/clusters/" + c["name"])
            deadline = time.time() + 60
            while time.time() < deadline and self.api("GET", "/clusters")[1].get("clusters"):
                time.sleep(0.2)
        try:
            super().stop()
        finally:
            cleanup(self.dir)


def cleanup(path):
    """Detaches the mounts below `path` (a failed test's disks) and removes it."""
    mounts.unmount_under(path)
    shutil.rmtree(path, ignore_errors=True)
