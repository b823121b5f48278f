#!/usr/bin/python3
"""Where a Horovod user's elastic loop spends a scale-up: user_loop.py under
`edtrun --hostfile F --min-np 1 --max-np 4`, grown from 2 to 4 workers by
rewriting the hostfile (as the platform does), on this machine's loopback.

    bench/resize_torch/user_loop_resize.py [--build DIR] [--repeat 3] [--warm] [--params N] [--import edt]
                                           [--job-env NAME=VALUE ...]
    bench/resize_torch/user_loop_resize.py --platform [--remote-env EDT_LOG_LEVEL=debug] [--log FILE] ...

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

--platform: as a user runs it in a platform cluster. A real edtd (as
scripts/demo.py starts it; needs root, run under flock
/tmp/edt-integration.lock), a cluster of 2 containers, and the job started
in the launcher over `edt ssh` (which passes the --job-env variables the way
ssh passes a user's LANG and LC_*) as `edtrun -np 2 --hostfile
/etc/mpi/hostfile --min-np 2 --max-np 4 python3 user_loop.py`; then `edt cluster scale NAME
--containers 4` --repeat times (back to 2 between), each timed from the
scale request, with the moment edtd rewrote the hostfile as one more phase.
"""
import argparse
import json
import os
import shutil
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

    def __init__(self, argv, env, typed=None):
        """typed: a line written to the process's input (kept open), as to a shell."""
        self.events, self.stderr, self.lock = [], [], threading.Lock()
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                        start_new_session=True, stdin=subprocess.PIPE if typed else None)
        if typed:
            self.process.stdin.write(typed + "\n")
            self.process.stdin.flush()
        threading.Thread(target=self._read, args=(self.process.stdout, True), daemon=True).start()
        threading.Thread(target=self._read, args=(self.process.stderr, False), daemon=True).start()

    def _read(self, stream, events):
        for line in stream:
            if not events:
                self.stderr.append("%.3f %s" % (time.time(), line))  # arrival time: when a debug log came
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
        if self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGINT)
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def phases(job, start, first, joiners, survivors):
    """Each phase's last event (of the joiners or the survivors), in seconds from `start`."""
    def at(kind, workers):
        times = [e["t"] for e in job.of(kind, lambda e: e["worker"] in workers and e["t"] >= start - 1)]
        return max(times) - start if times else float("nan")

    return {
        "joiners started warm (of %d)" % len(joiners):
            float(sum(e["warm"] for e in job.of("exec", lambda e: e["worker"] in joiners))),
        "joiners: process started (exec)": at("exec", joiners),
        "joiners: torch and Horovod imported": at("imported", joiners),
        "joiners: hvd.init() returned": at("init", joiners),
        "joiners: model and TorchState built": at("built", joiners),
        "survivors: commit raised HostsUpdatedInterrupt": at("interrupted", survivors),
        "joiners: training function entered": at("enter", joiners),
        "survivors: reset callback ran": at("reset", survivors),
        "first step at 4": first["t"] - start,
    }


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
        return phases(job, changed, first, ("w2", "w3"), ("w0", "w1"))
    finally:
        job.stop()


def platform_runs(args):
    """The runs in a cluster of a real edtd (--platform): the phases of each scale-up, from the request."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    sys.path.insert(0, HERE)
    import demo  # the demo's edtd, volume and cluster steps
    import platform_run  # its hostfile watch
    d = demo.Demo(argparse.Namespace(build=args.build, mnist_dir=None, epochs=1, elastic_epochs=1, min_acc=0))
    runs, ok = [], False
    try:
        d.start_edtd()
        d.make_volume()
        shutil.copy(os.path.join(HERE, "user_loop.py"), d.mnist_volume)
        d.create_cluster()
        watch = platform_run.HostfileWatch(os.path.join(d.files_dir, "clusters/tthvd/mpi/hostfile"))
        command = ("cd ~/mnist && %sedtrun -np 2 --hostfile /etc/mpi/hostfile --min-np 2 --max-np 4 python3 user_loop.py "
                   "--step-ms %s --params %d --import %s" % ("".join(v + " " for v in args.remote_env), args.step_ms,
                                                              args.params, args.module))
        env = dict(d.env, **dict(item.partition("=")[::2] for item in args.job_env))
        # Typed into the launcher's login shell, as in a user's `edt ssh` session.
        demo.say("edt ssh tthvd, then: %s%s" % (command, "".join(" (" + e + ")" for e in args.job_env)))
        job = Job([d.edt_cli, "ssh", "tthvd"], env, typed=command)
        try:
            job.wait("step", lambda e: e["size"] == 2 and e["step"] >= 30, 180, "30 steps at size 2")
            for _ in range(args.repeat):
                runs.append(platform_scale_up(d, job, watch))
                print("run %d: " % len(runs) + ", ".join("%s %.3f" % kv for kv in runs[-1].items()), flush=True)
        finally:
            watch.stop = True
            if args.log:
                with open(args.log, "w") as f:
                    f.writelines("%.3f %s\n" % (e["t"], json.dumps(e)) for e in job.events)
                    f.writelines(job.stderr)
            job.stop()
        ok = True
    finally:
        d.teardown(failed=not ok)
    return runs


def platform_scale_up(d, job, watch):
    """`edt cluster scale tthvd --containers 4`, the phases from the request; then back to 2."""
    before = {e["worker"] for e in job.of("step", lambda e: e["size"] == 2)}
    asked = time.time()
    d.edt("cluster", "scale", "tthvd", "--containers", "4")
    first = job.wait("step", lambda e: e["size"] == 4 and e["t"] > asked, 120, "a step at size 4")
    time.sleep(0.5)
    joiners = tuple({e["worker"] for e in job.of("exec", lambda e: e["t"] > asked)})
    survivors = tuple(before - set(joiners))
    figures = phases(job, asked, first, joiners, survivors)
    figures["edtd rewrote the hostfile"] = (watch.when(4, asked) or float("nan")) - asked
    shrunk = time.time()
    d.edt("cluster", "scale", "tthvd", "--containers", "2", "--wait")
    job.wait("step", lambda e: e["size"] == 2 and e["t"] > shrunk, 120, "a step at size 2 after the scale-down")
    time.sleep(1)
    return figures


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
    parser.add_argument("--platform", action="store_true", help="in a cluster of a real edtd (needs root)")
    parser.add_argument("--remote-env", action="append", default=[], metavar="NAME=VALUE",
                        help="--platform: set in the launcher's shell before edtrun (EDT_LOG_LEVEL=debug)")
    parser.add_argument("--log", help="--platform: write the job's events and stderr here")
    args = parser.parse_args()
    if args.platform:
        return report(args, platform_runs(args), "platform, from the scale request")
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
    return report(args, runs, ("warm" if args.warm else "cold") + " start, from the hostfile change")


def report(args, runs, what):
    print("\n%s%s, %d parameters, import %s, %d runs, load average %s: seconds, median (min-max)\n"
          % (what, "".join(" " + e for e in args.job_env), args.params, args.module, len(runs),
             " ".join("%.1f" % v for v in os.getloadavg())))
    print("| phase | s |\n|---|---:|")
    for name in runs[0]:
        values = sorted(r[name] for r in runs)
        print("| %s | %.3f (%.3f-%.3f) |" % (name, statistics.median(values), values[0], values[-1]))


if __name__ == "__main__":
    sys.exit(main())
