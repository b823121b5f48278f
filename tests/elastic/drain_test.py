#!/usr/bin/python3
"""The drain contract, end to end: a cluster scaled down under a running
elastic job loses no work.

    tests/elastic/drain_test.py [--build DIR] [--case short|long|both] [--drain-timeout 30s]

Starts edtd on a temporary data dir (containers in 127.86.0.0/24, this
test's own block), creates cluster `drain` with 4 containers, and for each
case runs an elastic edt.torch job on it (drain_worker.py under
`edtrun -np 4 --min-np 2 --max-np 4 --hostfile /etc/mpi/hostfile`), scales the
cluster to 2 once all 4 workers train, and checks that

  - the job goes on at 2: no failure generation, no blacklisted host, no
    worker that failed (edtrun's output), no rollback (the workers' logs);
  - every sample of the epoch was trained exactly once (the union of the
    batches the workers logged), some of them by the 2 that stayed;
  - the scale ends with 2 Running containers; each leaving container was
    Drained (an event), none timed out.

Then a scale back to 4 whose new containers cannot start (their volume's
directory moved away) must go back to 2, and `edt cluster scale --wait`
must say so and exit 1.

Cases: `short` (steps of a few ms) and `long` (each step sleeps 1.5 s, more
than edtrun takes to see the hostfile, so a container stopped at once would
kill its worker mid-step). Prints how long each scale took. Exits non-zero
at the first check that fails; removes everything it made.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ADDRESSES = "127.86.0.0/24"  # this test's own block (grep --address-range for the others)
CLUSTER = "drain"
WORKER = "drain_worker.py"
# samples, batch size, seconds per step: each case's epoch outlasts the
# scale, and each runs in well under a minute.
CASES = {
    "short": dict(samples=800, batch=4, step=0.0),
    "long": dict(samples=96, batch=4, step=1.5),
}
GENERATION = re.compile(r"generation (\d+): (\d+) workers \(([^)]*)\)(.*)")


from demo import Failed, Job, check, say  # the demo's job runner and checks (scripts/, on PYTHONPATH)
import harness.edtd
from harness.ports import free_port


class Platform:
    """edtd on a temporary data dir, and the edt CLI pointed at it."""

    def __init__(self, build):
        self.build = build
        self.data_dir = tempfile.mkdtemp(prefix="edt-drain-")
        self.api = "http://127.0.0.1:%d" % free_port()
        self.env = dict(os.environ)
        self.edtd = None

    def start(self):
        self.edtd = harness.edtd.Edtd(os.path.join(self.build, "src/control/edtd"), self.data_dir,
                                      ["--network", "loopback", "--address-range", ADDRESSES, "--grace", "2s",
                                       # Its volume a plain directory, which failed_scale() moves away
                                       # (a disk's mount point cannot be renamed).
                                       "--volume-size", "0"],
                                      log_path=os.path.join(self.data_dir, "edtd.log"), log_mode="w",
                                      port=int(self.api.rsplit(":", 1)[1]), error=Failed, timeout=10)
        self.edtd.start()
        self.env.update(EDT_API=self.api, EDT_TOKEN=self.edtd.token)

    def edtd_log(self):
        with open(os.path.join(self.data_dir, "edtd.log")) as f:
            return f.read()

    def edt(self, *args, check_exit=True, timeout=300):
        run = subprocess.run([os.path.join(self.build, "src/cli/edt"), *args], env=self.env, capture_output=True,
                             text=True, timeout=timeout)
        if check_exit and run.returncode != 0:
            raise Failed("`edt %s` failed (exit code %d):\n%s%s" % (" ".join(args), run.returncode, run.stdout,
                                                                    run.stderr))
        return run

    def cluster(self):
        return json.loads(self.edt("cluster", "get", CLUSTER, "-o", "json").stdout)

    def events(self):
        return json.loads(self.edt("cluster", "events", CLUSTER, "-o", "json").stdout)

    def stop(self, failed):
        if self.edtd is None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            return
        if failed:
            print("drain_test: the end of edtd's log:\n" + "\n".join(self.edtd_log().splitlines()[-40:]),
                  file=sys.stderr)
        if self.edtd.proc is not None and self.edtd.proc.poll() is None:
            self.edt("cluster", "delete", CLUSTER, "--wait", check_exit=False)
            harness.edtd.stop_process(self.edtd.proc)
        harness.edtd.cleanup(self.data_dir)


class DrainTest:
    def __init__(self, args):
        self.args = args
        self.platform = Platform(os.path.abspath(args.build))
        self.figures = {}

    def setup(self):
        p = self.platform
        say("starting edtd: data dir %s, containers in %s" % (p.data_dir, ADDRESSES))
        p.start()
        p.edt("volume", "create", "drain")
        volumes = json.loads(p.edt("volume", "list", "-o", "json").stdout)
        self.volume = next(v["host_path"] for v in volumes if v["name"] == "drain")
        shutil.copy(os.path.join(HERE, WORKER), self.volume)
        args = ["cluster", "create", CLUSTER, "--containers", "4", "--mount", "drain:",
                "--drain-timeout", self.args.drain_timeout, "--wait"]
        say("edt " + " ".join(args))
        p.edt(*args)
        shown = p.edt("cluster", "get", CLUSTER).stdout
        check("drain:      %s " % self.args.drain_timeout in shown, "edt cluster get does not show the drain "
              "timeout %s:\n%s" % (self.args.drain_timeout, shown))

    def run_case(self, name):
        case = CASES[name]
        p = self.platform
        if len(p.cluster()["status"]["containers"]) != 4:
            p.edt("cluster", "scale", CLUSTER, "--containers", "4", "--wait")
        logs = os.path.join(self.volume, "logs-" + name)
        os.makedirs(logs)
        # The volume's owner, as for a directory uploaded through the API: with
        # user namespaces, the containers' root is that owner, not the host's.
        owner = os.stat(self.volume)
        os.chown(logs, owner.st_uid, owner.st_gid)
        command = ("cd ~/drain && edtrun -np 4 --min-np 2 --max-np 4 --hostfile /etc/mpi/hostfile python3 %s "
                   "--samples %d --batch-size %d --step-seconds %g --log-dir ~/drain/logs-%s"
                   % (WORKER, case["samples"], case["batch"], case["step"], name))
        say("%s steps: edt run %s -- %s" % (name, CLUSTER, command))
        started = time.time()
        job = Job([os.path.join(p.build, "src/cli/edt"), "run", CLUSTER, "--", "sh", "-c", command], p.env)
        try:
            # Scale once every one of the 4 workers has trained a batch.
            job.wait_for("4 workers training", lambda lines: trained_by_size(lines, 4) >= 4, 120)
            seconds, seen_draining = self.scale_down()
            code = job.finish(120)
        finally:
            if job.process.poll() is None:
                job.process.send_signal(signal.SIGINT)
                job.process.wait(30)
        say("%s steps: the job ran %.1f s" % (name, time.time() - started))
        self.figures[name] = (seconds, seen_draining)
        check(code == 0, "the job ended with exit code %d:\n%s" % (code, job.output()))
        check_launcher_output(job.output())
        batches = check_worker_logs(logs, case["samples"])
        self.check_cluster_after()
        say("%s steps: scale 4 -> 2 took %.2f s (Draining seen: %s); the job went on at 2 (batches trained at 4: "
            "%d, at 2: %d), every sample trained once, no failure, rollback or blacklisted host"
            % (name, seconds, seen_draining, batches[4], batches[2]))

    def scale_down(self):
        """Scales to 2 and waits until it is done; polls the containers'
        phases meanwhile. Returns (seconds, whether a container was seen
        Draining)."""
        p = self.platform
        say("edt cluster scale %s --containers 2 --wait   (while it trains)" % CLUSTER)
        start = time.time()
        scale = subprocess.Popen([os.path.join(p.build, "src/cli/edt"), "cluster", "scale", CLUSTER,
                                  "--containers", "2", "--wait"], env=p.env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
        seen_draining = False
        while True:
            phases = [c["phase"] for c in p.cluster()["status"]["containers"]]
            seen_draining = seen_draining or "Draining" in phases
            try:
                scale.wait(0.1)  # the scale ending, or the next look at the phases
                break
            except subprocess.TimeoutExpired:
                pass
        seconds = time.time() - start
        out = scale.stdout.read()
        check(scale.returncode == 0, "the scale failed:\n" + out)
        print("    " + out.strip().replace("\n", "\n    "), flush=True)
        return seconds, seen_draining

    def failed_scale(self):
        """A scale whose new containers cannot start (their volume's directory
        is gone) goes back to the former size; `--wait` says so and fails."""
        p = self.platform
        say("a scale that fails: the volume's directory moved away, edt cluster scale %s --containers 4 --wait"
            % CLUSTER)
        os.rename(self.volume, self.volume + ".away")
        try:
            run = p.edt("cluster", "scale", CLUSTER, "--containers", "4", "--wait", check_exit=False)
        finally:
            os.rename(self.volume + ".away", self.volume)
        check(run.returncode == 1 and "Running with 2 containers, not 4: scale to 4 failed" in run.stderr
              and "is gone from the host" in run.stderr,
              "the failed scale: exit code %d, it said:\n%s%s" % (run.returncode, run.stdout, run.stderr))
        c = p.cluster()
        check(c["containers"] == 2 and len(c["status"]["containers"]) == 2, "after the failed scale: %s" % c)
        print("    " + run.stderr.strip().splitlines()[-1], flush=True)

    def check_cluster_after(self):
        c = self.platform.cluster()
        phases = [k["phase"] for k in c["status"]["containers"]]
        check(c["status"]["phase"] == "Running" and phases == ["Running", "Running"],
              "after the scale the cluster is %s with containers %s" % (c["status"]["phase"], phases))
        events = self.platform.events()
        timed_out = [e["message"] for e in events if e["type"] == "DrainTimedOut"]
        check(not timed_out, "a drain timed out:\n" + "\n".join(timed_out))
        drained = [e["message"] for e in events if e["type"] == "Drained"]
        for name in ("drain-worker-1", "drain-worker-2"):
            check(any(m.startswith(name + " drained") for m in drained[-2:]), "no Drained event for %s: %s"
                  % (name, drained))

    def summary(self):
        print()
        print("scale 4 -> 2 under an elastic job (edt cluster scale --wait), this machine (%d cores):"
              % os.cpu_count())
        for name, (seconds, draining) in self.figures.items():
            case = CASES[name]
            print("  %-5s steps (%s per step): %.2f s%s" % (name, "%g s sleep" % case["step"] if case["step"]
                                                            else "no sleep", seconds,
                                                            ", Draining seen" if draining else ""))


def trained_by_size(lines, size):
    return sum(1 for line in lines if "trained epoch=1 size=%d " % size in line)


def check_launcher_output(output):
    """edtrun's own account: generations without failures, no blacklist."""
    generations = [m for m in map(GENERATION.search, output.splitlines()) if m]
    check(generations, "edtrun announced no generation:\n" + output)
    failures = [m.group(0) for m in generations if "after a failure" in m.group(4)]
    check(not failures, "a failure generation:\n" + "\n".join(failures) + "\n\n" + output)
    for bad in ("blacklisted", "the others go on without it", "error:", "Traceback"):
        check(bad not in output, "edtrun's output says '%s':\n%s" % (bad, output))
    sizes = [int(m.group(2)) for m in generations]
    check(sizes[0] == 4 and sizes[-1] == 2, "the generations had %s workers, not 4 then 2:\n%s" % (sizes, output))


def check_worker_logs(directory, samples):
    """The workers' own logs: no rollback, two left cleanly, two finished,
    and every sample of the epoch trained exactly once."""
    counts = {}
    ended = {"left": 0, "finished": 0}
    trained_at = {4: 0, 2: 0}
    texts = []
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name)) as f:
            text = f.read()
        texts.append("--- %s\n%s" % (name, text))
        step_open = False
        for line in text.splitlines():
            m = re.match(r"loaded before=(\d+) after=(\d+)", line)
            check(not m or (int(m.group(2)) >= int(m.group(1)) and not step_open),
                  "%s rolled back: its state was restored (%s) %s:\n%s"
                  % (name, line, "in the middle of a step" if step_open else "to an older commit", text))
            step_open = line.startswith("begin ") or (step_open and not line.startswith("trained "))
            m = re.match(r"trained epoch=1 size=(\d+) indices=([\d,]+)", line)
            if m:
                trained_at[int(m.group(1))] = trained_at.get(int(m.group(1)), 0) + 1
                for i in map(int, m.group(2).split(",")):
                    counts[i] = counts.get(i, 0) + 1
            if line in ended:
                ended[line] += 1
        check("Traceback" not in text, "%s has a traceback:\n%s" % (name, text))
        check(not step_open, "%s ends in the middle of a step: the worker was killed:\n%s" % (name, text))
    all_logs = "\n".join(texts)
    check(len(texts) == 4, "%d worker logs, not 4 (a worker was restarted or never started):\n%s"
          % (len(texts), all_logs))
    check(ended == {"left": 2, "finished": 2}, "workers ended as %s, not 2 left and 2 finished:\n%s"
          % (ended, all_logs))
    check(trained_at[2] > 0, "no batch was trained at 2 workers: the epoch ended before the scale took effect "
          "(make the epoch longer)")
    twice = sorted(i for i, n in counts.items() if n > 1)
    missing = sorted(set(range(samples)) - set(counts))
    check(not twice and not missing and set(counts) == set(range(samples)),
          "samples trained more than once: %s; never: %s" % (twice[:20], missing[:20]))
    return trained_at


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="the build directory (default: build)")
    p.add_argument("--case", choices=["short", "long", "both"], default="both")
    p.add_argument("--drain-timeout", default="30s", help="the cluster's drain timeout (default 30s)")
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("drain_test: edtd makes sandboxes with bubblewrap and needs root; run it with sudo")
    test = DrainTest(args)
    failed = True
    try:
        test.setup()
        for name in (["short", "long"] if args.case == "both" else [args.case]):
            test.run_case(name)
        test.failed_scale()
        failed = False
    except Failed as e:
        print("drain_test: FAILED: %s" % e, file=sys.stderr)
    finally:
        test.platform.stop(failed)
    if failed:
        return 1
    test.summary()
    return 0


if __name__ == "__main__":
    sys.exit(main())
