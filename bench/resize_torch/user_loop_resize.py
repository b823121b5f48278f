#!/usr/bin/python3
"""Where a Horovod user's elastic loop spends a scale-up: user_loop.py under
`edtrun --hostfile F --min-np 1 --max-np 4`, grown from 2 to 4 workers by
rewriting the hostfile (as the platform does), on this machine's loopback.

    bench/resize_torch/user_loop_resize.py [--build DIR] [--repeat 3] [--warm] [--params N] [--import edt]
                                           [--job-env NAME=VALUE ...]

Prints, per run, the timeline of the scale-up from the hostfile change:
the joiners' process start (exec), their imports of torch and Horovod,
hvd.init(), the model built, and their first training function; the
survivors' interrupt, reset callback and re-entry; the first step at 4.
Then the medians of each phase across runs. --warm starts a warm
interpreter (python -m edt._warm, as edtd keeps one per host) and lets
edtrun fork the joiners from it; without it they start cold
(EDT_WARM_START=0), as they do under edtrun where no warm interpreter runs.
--job-env sets a variable for the job only (edtrun and its workers), not for
the warm interpreter: a locale that ssh passed in, for example.
"""
import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PYTHON = "/usr/bin/python3"
HOSTS = ["localhost", "127.0.0.1", socket.gethostname()]


def write_hostfile(path, lines):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.rename(tmp, path)
    return time.time()


class Job:
    """edtrun with the user loop; its JSON events as they come."""

    def __init__(self, argv, env):
        self.events, self.stderr, self.lock = [], [], threading.Lock()
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                        start_new_session=True)
        threading.Thread(target=self._read, args=(self.process.stdout, True), daemon=True).start()
        threading.Thread(target=self._read, args=(self.process.stderr, False), daemon=True).start()

    def _read(self, stream, events):
        for line in stream:
            if not events:
                self.stderr.append(line)
                continue
            try:
                event = json.loads(line.partition(": ")[2])
            except ValueError:
                continue
            with self.lock:
                self.events.append(event)

    def of(self, kind, pred=lambda e: True):
        with self.lock:
            return [e for e in self.events if e["event"] == kind and pred(e)]

    def wait(self, kind, pred, limit, what):
        end = time.time() + limit
        while time.time() < end:
            found = self.of(kind, pred)
            if found:
                return found[0]
            if self.process.poll() is not None:
                break
            time.sleep(0.01)
        raise SystemExit("user_loop_resize: no %s within %d s; stderr:\n%s" % (what, limit, "".join(self.stderr)))

    def stop(self):
        os.killpg(self.process.pid, signal.SIGINT)
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def one_run(args, env):
    hostfile = os.path.join(tempfile.mkdtemp(prefix="edt-userloop-"), "hostfile")
    write_hostfile(hostfile, [f"{HOSTS[0]} slots=1", f"{HOSTS[1]} slots=1"])
    job = Job([os.path.join(args.build, "src/launcher/edtrun"), "-np", "2", "--min-np", "1", "--max-np", "4",
               "--hostfile", hostfile, "--", PYTHON, os.path.join(HERE, "user_loop.py"), "--step-ms",
               str(args.step_ms), "--params", str(args.params), "--import", args.module], env)
    try:
        job.wait("step", lambda e: e["size"] == 2 and e["step"] >= 30, 120, "30 steps at size 2")
        changed = write_hostfile(hostfile, [f"{HOSTS[0]} slots=1", f"{HOSTS[1]} slots=1", f"{HOSTS[2]} slots=2"])
        first = job.wait("step", lambda e: e["size"] == 4, 60, "a step at size 4")
        time.sleep(0.3)
        joiners = ("w2", "w3")

        def at(kind, workers, pick=max):
            times = [e["t"] for e in job.of(kind, lambda e: e["worker"] in workers and e["t"] >= changed - 1)]
            return pick(times) - changed if times else float("nan")

        return {
            "joiners started warm (of 2)": float(sum(e["warm"] for e in job.of("exec", lambda e: e["worker"] in joiners))),
            "joiners: process started (exec)": at("exec", joiners),
            "joiners: torch and Horovod imported": at("imported", joiners),
            "joiners: hvd.init() returned": at("init", joiners),
            "joiners: model and TorchState built": at("built", joiners),
            "survivors: commit raised HostsUpdatedInterrupt": at("interrupted", ("w0", "w1")),
            "joiners: training function entered": at("enter", joiners),
            "survivors: reset callback ran": at("reset", ("w0", "w1")),
            "first step at 4": first["t"] - changed,
        }
    finally:
        job.stop()


class WarmInterpreter:
    """python3 -m edt._warm on a socket of its own (as bench/resize_latency)."""

    def __init__(self, env):
        self.socket = os.path.join(tempfile.mkdtemp(prefix="edt-warm-"), "python.sock")
        self.process = subprocess.Popen([PYTHON, "-m", "edt._warm", "--socket", self.socket], env=env,
                                        stderr=subprocess.PIPE, text=True)
        ready = self.process.stderr.readline()
        if "serving on" not in ready:
            raise SystemExit("user_loop_resize: the warm interpreter did not start: " + ready)

    def stop(self):
        self.process.terminate()
        self.process.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warm", action="store_true")
    parser.add_argument("--params", type=int, default=1 << 20)
    parser.add_argument("--step-ms", type=float, default=20)
    parser.add_argument("--import", dest="module", choices=["horovod", "edt"], default="horovod")
    parser.add_argument("--job-env", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    python = os.path.join(args.build, "python")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([python, os.path.join(python, "horovod_compat")]))
    server = None
    if args.warm:
        server = WarmInterpreter(env)
        env["EDT_WARM_SOCKET"] = server.socket
    else:
        env["EDT_WARM_START"] = "0"
    env.update(item.partition("=")[::2] for item in args.job_env)
    try:
        runs = []
        for i in range(args.repeat):
            runs.append(one_run(args, env))
            print("run %d: " % (i + 1) + ", ".join("%s %.3f" % (k, v) for k, v in runs[-1].items()), flush=True)
    finally:
        if server:
            server.stop()
    print("\n%s start%s, %d parameters, import %s, %d runs: seconds from the hostfile change, median (min-max)\n"
          % ("warm" if args.warm else "cold", "".join(" " + e for e in args.job_env), args.params, args.module,
             len(runs)))
    print("| phase | s |\n|---|---:|")
    for name in runs[0]:
        values = sorted(r[name] for r in runs)
        print("| %s | %.3f (%.3f-%.3f) |" % (name, statistics.median(values), values[0], values[-1]))


if __name__ == "__main__":
    sys.exit(main())
