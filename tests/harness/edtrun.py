"""edtrun for a test: elastic jobs in the background, their workers' JSON
events parsed as they come, and the checks every scenario ends with.

Contract:
- Job(args, worker_args) runs `edtrun ARGS -- WORKER WORKER_ARGS` (edtrun
  from $EDTRUN, the worker from $EDT_BENCH_ELASTIC unless given) and
  collects each "{...}" line a worker prints as an event dict ("event":
  start, reset, step, epoch, end; "seen" is when it arrived). wait_for()
  raises AssertionError with edtrun's stderr; finish() kills edtrun past
  its timeout and re-raises.
- assert_nothing_left(job): every worker pid the job reported has ended
  (zombies count as ended) within 10 s.
- write_hostfile() replaces a hostfile as the platform does (write, then
  rename), so edtrun's inotify watch sees one IN_MOVED_TO.
- HOSTS: three names of this machine, distinct hosts to edtrun.
"""
import json
import os
import socket
import subprocess
import threading
import time

HOSTS = ["localhost", "127.0.0.1", socket.gethostname()]


class Job:
    """edtrun in the background; its output parsed as it comes."""

    def __init__(self, args, worker_args, timeout=120, edtrun=None, worker=None):
        self.events = []
        self.stderr_lines = []
        self.lock = threading.Lock()
        edtrun = edtrun or os.environ["EDTRUN"]
        worker = worker or os.environ["EDT_BENCH_ELASTIC"]
        self.process = subprocess.Popen([edtrun] + args + ["--", worker] + worker_args,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.timeout = timeout
        self.readers = [threading.Thread(target=self._read_stdout, daemon=True),
                        threading.Thread(target=self._read_stderr, daemon=True)]
        for r in self.readers:
            r.start()

    def _read_stdout(self):
        for line in self.process.stdout:
            # "[w3]<stdout>: {...}"
            _, _, body = line.partition(": ")
            try:
                event = json.loads(body)
            except ValueError:
                continue
            event["seen"] = time.time()
            with self.lock:
                self.events.append(event)

    def _read_stderr(self):
        for line in self.process.stderr:
            with self.lock:
                self.stderr_lines.append(line.rstrip("\n"))

    def of(self, kind):
        with self.lock:
            return [e for e in self.events if e.get("event") == kind]

    def wait_for(self, predicate, limit=30.0, what="a condition"):
        end = time.time() + limit
        while time.time() < end:
            found = [e for e in self.of("step") if predicate(e)]
            if found:
                return found[0]
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError(f"no step with {what} within {limit} s; stderr:\n" + self.stderr())

    def finish(self):
        try:
            code = self.process.wait(self.timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise
        for r in self.readers:
            r.join(5)
        return code

    def stderr(self):
        with self.lock:
            return "\n".join(self.stderr_lines)

    def pids(self):
        return {e["worker"]: e["pid"] for e in self.of("start")}


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def assert_nothing_left(job):
    end = time.time() + 10
    pids = list(job.pids().values())
    while time.time() < end and any(alive(p) for p in pids):
        time.sleep(0.05)
    assert not [p for p in pids if alive(p)], "workers left running"


def assert_exactly_once(job):
    epochs = job.of("epoch")
    assert epochs, "no epoch finished; stderr:\n" + job.stderr()
    assert all(e["exactly_once"] for e in epochs), epochs


def write_hostfile(path, lines):
    # As the platform does it: write, then rename (inotify sees IN_MOVED_TO).
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.rename(tmp, path)
