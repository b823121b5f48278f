"""The scheduler on a real edtd with real elastic jobs: the scenario that
tests/sched/sched_live_test.py checks and bench/sched_live times.

edtd with 8 simulated GPUs (NVIDIA-P4, one per container) and 3 teams,
each with a user, set up with the edt CLI:

    team  guaranteed  borrow  limit
    ta    4           2       6
    tb    2           4       6
    tc    2           4       6

  1. tb's elastic cluster `eb` (2..8 containers) is placed and grows to 6,
     its team's limit; an elastic edt.torch job (tests/elastic/drain_worker.py
     under `edtrun --min-np 2 --max-np 8`) trains on it.
  2. tc creates `c1` (2 containers): placed in the 2 idle GPUs.
  3. ta creates `a1` (4 containers, its guarantee): eb's 4 borrowed
     containers drain at their job's next commit and a1 gets their GPUs
     ("guaranteed request -> GPUs granted, drain included").
  4. tc deletes c1: its 2 GPUs go idle and eb, waiting to grow, takes them
     ("idle GPU -> taken"); then ta deletes a1: eb grows back to 6.

Meanwhile a sampler reads GET /teams every 100 ms (no team may hold more
than its limit, draining containers included) and another GET /gpus every
20 ms (when a GPU goes idle and when it is taken). At the end the workers'
own logs say whether a committed step was lost (a sample trained twice, a
state restored to an older commit) or a survivor restarted (a second log
on eb-launcher or eb-worker-0, whose containers are never taken).

run(build) returns a Result: the figures, and the problems found (empty
when everything held). It removes everything it made.
"""

import json
import os
import re
import shutil
import subprocess
import threading
import time

import harness.edtd

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
WORKER = os.path.join(ROOT, "tests", "elastic", "drain_worker.py")
ADDRESSES = "127.88.0.0/24"  # this scenario's own block (grep --address-range for the others)
MODEL = "NVIDIA-P4"
GPUS = 8
TEAMS = {"ta": (4, 2), "tb": (2, 4), "tc": (2, 4)}  # guaranteed, borrow limit
SURVIVORS = ("eb-launcher", "eb-worker-0")  # eb's floor: never drained


class Result:
    def __init__(self):
        self.figures = {}  # name -> seconds (or GPUs)
        self.problems = []

    def check(self, ok, message):
        if not ok:
            self.problems.append(message)
        return ok


class Sampler(threading.Thread):
    """Calls `sample()` every `period` s until stopped."""

    def __init__(self, period, sample):
        super().__init__(daemon=True)
        self.period, self.sample, self.done = period, sample, threading.Event()

    def run(self):
        while not self.done.is_set():
            self.sample()
            self.done.wait(self.period)


class Scenario:
    def __init__(self, build):
        self.build = build
        self.result = Result()
        self.edtd = harness.edtd.ScratchEdtd(os.path.join(build, "src/control/edtd"), addresses=ADDRESSES,
                                             gpus="%s=%d" % (MODEL, GPUS))
        self.tokens = {"admin": self.edtd.token}
        self.over_limit = 0  # the most GPUs any team held beyond its limit in a sample
        self.team_samples = 0
        self.holders = {}  # GPU index -> [(time, holding container or "")], every 20 ms
        self.job = None

    # --- the platform ----------------------------------------------------

    def edt(self, user, *args):
        env = self.edtd.cli_env()
        env["EDT_TOKEN"] = self.tokens[user]
        run = subprocess.run([os.path.join(self.build, "src/cli/edt"), *args], env=env, capture_output=True,
                             text=True, timeout=120)
        if run.returncode != 0:
            raise RuntimeError("`edt %s` (as %s) failed, exit code %d:\n%s%s"
                               % (" ".join(args), user, run.returncode, run.stdout, run.stderr))
        return run.stdout

    def cluster(self, name):
        status, body = self.edtd.api("GET", "/clusters/" + name)
        return body if status == 200 else None

    def held_by(self, name):
        """GPUs the cluster's containers hold (leaving ones included)."""
        c = self.cluster(name)
        return sum(len(k["gpus"]) for k in c["status"]["containers"]) if c else 0

    def wait(self, what, predicate, timeout=180, period=0.02):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if predicate():
                return time.time()
            time.sleep(period)
        raise RuntimeError("gave up after %d s waiting for %s" % (timeout, what))

    # --- the samplers ----------------------------------------------------

    def sample_teams(self):
        status, body = self.edtd.api("GET", "/teams")
        if status != 200:
            return
        self.team_samples += 1
        for team in body["teams"]:
            for q in team["quotas"]:
                over = q["in_use"] - (q["guaranteed"] + q["borrow_limit"])
                self.over_limit = max(self.over_limit, over)
                self.result.check(over <= 0, "team %s held %d %s GPUs, over its limit of %d"
                                  % (team["name"], q["in_use"], q["gpu_model"], q["guaranteed"] + q["borrow_limit"]))

    def sample_gpus(self):
        status, body = self.edtd.api("GET", "/gpus")
        if status != 200:
            return
        now = time.time()
        for g in body["gpus"]:
            self.holders.setdefault(g["index"], []).append((now, g["holder"] if g["held"] else ""))

    def last_gpu_sample(self):
        return max((samples[-1][0] for samples in list(self.holders.values()) if samples), default=0)

    def idle_to_taken(self, since, cluster="eb"):
        """The longest any GPU that `cluster` took after `since` was idle
        before: from the first GET /gpus sample that shows it idle (or, if
        no sample caught it idle, the last that showed its former holder,
        an upper bound) to the first that shows `cluster` holding it."""
        longest = None
        for samples in list(self.holders.values()):
            # From the last sample before `since`: a sampler that a loaded
            # machine held back past the whole handover still bounds it.
            before = [(t, holder) for t, holder in samples if t < since][-1:]
            after = before + [(t, holder) for t, holder in samples if t >= since]
            mine = [i for i, (_, holder) in enumerate(after) if holder.startswith(cluster + "-")]
            if not mine or mine[0] == 0 or after[0][1].startswith(cluster + "-"):
                continue  # not taken by it after `since`
            taken = mine[0]
            idle = next((i for i in range(taken) if after[i][1] == ""), taken - 1)
            seconds = after[taken][0] - after[idle][0]
            longest = seconds if longest is None else max(longest, seconds)
        return longest

    # --- the steps -------------------------------------------------------

    def setup(self):
        for team, (guaranteed, borrow) in TEAMS.items():
            user = "u" + team[1]
            self.tokens[user] = self.edt("admin", "user", "create", user).strip()
            self.edt("admin", "team", "create", team)
            self.edt("admin", "team", "quota", "set", team, MODEL, "--guaranteed", str(guaranteed),
                     "--borrow", str(borrow))
            self.edt("admin", "user", "team", user, team)
        self.edt("ub", "volume", "create", "sched")
        volumes = json.loads(self.edt("ub", "volume", "list", "-o", "json"))
        self.volume = next(v["host_path"] for v in volumes if v["name"] == "sched")
        shutil.copy(WORKER, self.volume)
        self.logs = os.path.join(self.volume, "logs")
        os.makedirs(self.logs)
        os.chmod(self.logs, 0o777)  # whoever the containers' root maps to (user namespaces)

    def start_job(self):
        from demo import Job  # the demo's job runner (scripts/, on PYTHONPATH)
        self.edt("ub", "cluster", "create", "eb", "--containers", "2", "--max", "8", "--gpu", MODEL + ":1",
                 "--mount", "sched:", "--wait")
        self.wait("eb to grow to its team's limit of 6", lambda: self.held_by("eb") == 6)
        command = ("cd ~/sched && edtrun -np 2 --min-np 2 --max-np 8 --hostfile /etc/mpi/hostfile python3 "
                   "drain_worker.py --samples 200000 --batch-size 4 --step-seconds 0.1 --log-dir ~/sched/logs")
        env = self.edtd.cli_env()
        env["EDT_TOKEN"] = self.tokens["ub"]
        self.job = Job([os.path.join(self.build, "src/cli/edt"), "run", "eb", "--", "sh", "-c", command], env)
        self.wait_size(6)

    def wait_size(self, size, timeout=240):
        """Until the job has trained a step at `size` workers since the last call."""
        start = len(self.job.output().splitlines())
        pattern = "trained epoch=1 size=%d " % size
        self.job.wait_for("the job training at %d" % size,
                          lambda lines: any(pattern in line for line in lines[start:]), timeout)

    def guaranteed_request(self):
        self.edt("uc", "cluster", "create", "c1", "--containers", "2", "--gpu", MODEL + ":1")
        self.wait("c1 placed in the idle GPUs", lambda: self.held_by("c1") == 2, timeout=30)
        asked = time.time()
        out = self.edt("ua", "cluster", "create", "a1", "--containers", "4", "--gpu", MODEL + ":1")
        self.result.check("queued" in out, "a1 was not queued while eb's borrowed containers drain: " + out)
        shown = self.edt("ua", "cluster", "get", "a1")
        self.result.check("queued:     #1" in shown, "edt cluster get shows no queue position:\n" + shown)
        granted = self.wait("a1's GPUs", lambda: self.held_by("a1") == 4, timeout=60)
        self.result.figures["guaranteed request -> GPUs granted, drain included (s)"] = granted - asked
        running = self.wait("a1 Running", lambda: self.cluster("a1")["status"]["phase"] == "Running", timeout=120)
        self.result.figures["guaranteed request -> Running (s)"] = running - asked
        self.result.check(self.held_by("eb") == 2, "eb holds %d GPUs after a1, not its 2" % self.held_by("eb"))
        self.wait_size(2)

    def idle_taken(self, cluster, user, freed, size):
        since = time.time()
        self.edt(user, "cluster", "delete", cluster)
        taken = self.wait("eb to take the %d idle GPUs" % freed, lambda: self.held_by("eb") == size, timeout=120)
        self.wait("the GPU sampler's next look", lambda: self.last_gpu_sample() > taken, timeout=30)
        seconds = self.idle_to_taken(since)
        self.result.check(seconds is not None, "the GPU sampler never saw eb take a GPU after deleting " + cluster)
        self.result.figures["idle GPU -> taken by eb (%s deleted; longest of its GPUs) (s)" % cluster] = seconds
        self.wait_size(size)

    # --- the workers' logs ----------------------------------------------

    def check_logs(self):
        counts, logs = {}, {}
        for name in sorted(os.listdir(self.logs)):
            with open(os.path.join(self.logs, name)) as f:
                text = f.read()
            # A worker's pid may repeat in a container started again: count its starts, not its files.
            for m in re.finditer(r"^start host=(\S+) pid=(\d+)$", text, re.M):
                logs.setdefault(m.group(1), []).append(name)
            step_open = False
            for line in text.splitlines():
                m = re.match(r"loaded before=(\d+) after=(\d+)", line)
                self.result.check(not m or (int(m.group(2)) >= int(m.group(1)) and not step_open),
                                  "%s: a committed state was lost (%s)" % (name, line))
                step_open = line.startswith("begin ") or (step_open and not line.startswith("trained "))
                m = re.match(r"trained epoch=1 size=\d+ indices=([\d,]+)", line)
                for i in map(int, m.group(1).split(",")) if m else ():
                    counts[i] = counts.get(i, 0) + 1
            self.result.check("Traceback" not in text, "%s has a traceback:\n%s" % (name, text[-3000:]))
        twice = sorted(i for i, n in counts.items() if n > 1)
        self.result.check(not twice, "%d samples trained twice (a committed step lost and redone): %s"
                          % (len(twice), twice[:10]))
        for host in SURVIVORS:
            self.result.check(len(logs.get(host, [])) == 1, "survivor %s has worker logs %s: restarted, or never ran"
                              % (host, logs.get(host)))
        self.result.figures["samples trained"] = len(counts)
        self.result.figures["committed steps lost"] = len(twice)
        self.result.figures["survivors restarted"] = sum(len(logs.get(h, [])) != 1 for h in SURVIVORS)

    def check_job_output(self):
        output = self.job.output()
        for bad in ("after a failure", "blacklisted", "the others go on without it", "Traceback"):
            self.result.check(bad not in output, "edtrun's output says '%s':\n%s" % (bad, output[-3000:]))
        restarted = [e for e in json.loads(self.edt("ub", "cluster", "events", "eb", "-o", "json"))
                     if e["type"] == "Restarted"]
        self.result.check(not restarted, "eb's containers restarted: %s" % restarted)

    def run(self):
        teams, gpus = Sampler(0.1, self.sample_teams), Sampler(0.02, self.sample_gpus)
        try:
            self.setup()
            teams.start()
            gpus.start()
            self.start_job()
            self.guaranteed_request()
            self.idle_taken("c1", "uc", 2, 4)
            self.idle_taken("a1", "ua", 4, 6)
            self.check_job_output()
            self.check_logs()
        finally:
            teams.done.set()
            gpus.done.set()
            self.result.figures["max GPUs over a team's limit, any sample"] = self.over_limit
            self.result.figures["team samples"] = self.team_samples
            if self.job and self.job.process.poll() is None:
                self.job.process.kill()
                self.job.process.wait(30)
            self.edtd.stop()
        return self.result


def run(build):
    return Scenario(os.path.abspath(build)).run()
