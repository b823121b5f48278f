"""Horovod's examples/elastic/tensorflow2/tensorflow2_mnist_elastic.py
(v0.28.1, pinned unmodified in tests/third_party/horovod) under horovodrun's
elastic mode, on MNIST (run_tf2_example.py: the real one make deps installs):

    test.py --horovodrun PATH --python VENV_PYTHON

The job starts on 2 workers of one host, as Horovod's own elastic runs do:
`horovodrun -np 2 --min-np 2 --max-np 4 --host-discovery-script ...`.
Once it trains, the discovery script lists a second host with 2 slots: the
job grows to 4 without restarting the first 2. Then one of the new workers
is SIGKILLed: the survivors roll back to their last commit and go on
without its host. The job must end with exit code 0, which includes
hvd.elastic.run's own check that every rank ends with the same parameters
(EDT_ELASTIC_CHECK_REPLICAS), and rank 0's checkpoint.

--start-timeout 180s: a worker that starts imports TensorFlow before it
reports to horovodrun, which takes far longer than Python alone on a loaded
machine. The example takes 100 // size() steps per generation, counted afresh after
each reset, so nothing is capped; each step waits for the condition it
needs, never for a fixed time.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "third_party", "horovod", "examples", "elastic", "tensorflow2",
                       "tensorflow2_mnist_elastic.py")
GENERATION = re.compile(r"generation (\d+): (\d+) workers \((.*)\)")
STEP = re.compile(r"Step #(\d+)")


class Output:
    """A process's merged output lines, read as they come."""

    def __init__(self, process):
        self.lines, self.cond = [], threading.Condition()
        self.process = process
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            sys.stdout.write(line)
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()

    def wait_for(self, what, predicate, timeout, start=0):
        deadline = time.time() + timeout
        with self.cond:
            while True:
                found = [m for m in map(predicate, self.lines[start:]) if m]
                if found:
                    return found[-1], len(self.lines)
                if self.process.poll() is not None or time.time() > deadline:
                    sys.exit("FAILED: no %s within %d s (the job %s)"
                             % (what, timeout, "ended" if self.process.poll() is not None else "runs on"))
                self.cond.wait(0.5)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--horovodrun", required=True)
    p.add_argument("--python", required=True, help="the Python with TensorFlow (edt's venv)")
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="edt-tf2-elastic-")
    hosts = os.path.join(work, "hosts")
    with open(hosts, "w") as f:
        f.write("localhost:2\n")
    discover = os.path.join(work, "discover.sh")
    with open(discover, "w") as f:
        f.write("#!/bin/sh\ncat %s\n" % hosts)
    os.chmod(discover, 0o755)
    argv = [args.horovodrun, "-np", "2", "--min-np", "2", "--max-np", "4", "--host-discovery-script", discover,
            "--discovery-interval", "200ms", "--start-timeout", "180s", args.python, os.path.join(HERE, "run_tf2_example.py"), EXAMPLE]
    # Unbuffered: rank 0's step lines tell the test when to act.
    job = subprocess.Popen(argv, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=dict(os.environ, PYTHONUNBUFFERED="1"))
    out = Output(job)
    try:
        run(out, hosts)
        code = job.wait(600)
    finally:
        if job.poll() is None:
            job.terminate()  # horovodrun stops its workers
            job.wait(30)
    check(code == 0, "horovodrun exited with %s" % code)
    check(any(name.startswith("checkpoint") for name in os.listdir(work)), "rank 0 saved no checkpoint")
    print("PASSED: grew 2 -> 4, survived a killed worker, ended with the same parameters on every rank")


def run(out, hosts):
    _, at = out.wait_for("step 10 on 2 workers", lambda l: STEP.search(l) and int(STEP.search(l).group(1)) >= 10,
                         300)
    with open(hosts + ".tmp", "w") as f:
        f.write("localhost:2\n127.0.0.1:2\n")
    os.replace(hosts + ".tmp", hosts)
    grown, at = out.wait_for("a generation of 4", lambda l: _generation(l, 4), 300, at)
    print("TEST: grew to 4: %s" % grown.group(3), flush=True)
    _, at = out.wait_for("a step on 4 workers", STEP.search, 300, at)
    victims = [pid for pid in _examples() if _host_of(pid) == "127.0.0.1"]
    check(victims, "no worker of host 127.0.0.1 found to kill")
    print("TEST: SIGKILL worker pid %d on 127.0.0.1" % victims[0], flush=True)
    os.kill(victims[0], signal.SIGKILL)
    after, at = out.wait_for("a generation after the kill", lambda l: _generation(l, 2), 300, at)
    check("127.0.0.1" not in after.group(3), "the killed worker's host is still in the job: " + after.group(3))
    out.wait_for("a step after the kill", STEP.search, 300, at)


def _generation(line, size):
    m = GENERATION.search(line)
    return m if m and int(m.group(2)) == size else None


def _examples():
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if any(a.endswith(b"tensorflow2_mnist_elastic.py") for a in argv) and b"python" in os.path.basename(argv[0]):
            pids.append(int(pid))
    return pids


def _host_of(pid):
    """The host edtrun started worker `pid` for (its EDT_HOSTNAME)."""
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
    except OSError:
        return None
    return env.get(b"EDT_HOSTNAME", b"").decode()


def check(ok, message):
    if not ok:
        sys.exit("FAILED: " + message)


if __name__ == "__main__":
    main()
