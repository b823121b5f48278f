"""bench/resize_latency --platform: the PyTorch job of worker.py in a cluster
of a real edtd, as the demo makes it, scaled 2 -> 4 -> 2 containers with
`edt cluster scale`, warm (edtd's warm interpreter) and cold
(EDT_WARM_START=0 in the job), one job per configuration.

Figures per scale-up: "scale asked -> first step at 4" from the moment the
command is given, and "hostfile change -> first step at 4" from the moment
edtd rewrote the cluster's hostfile (watched on the host).
"""
import argparse
import json
import os
import shutil
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import demo  # noqa: E402  (the demo's edtd, volume and cluster steps)


class HostfileWatch:
    """Records when the cluster's hostfile (on the host) lists `n` lines."""

    def __init__(self, path):
        self.path, self.changes, self.stop = path, [], False
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        last = None
        while not self.stop:
            try:
                with open(self.path) as f:
                    count = len(f.read().splitlines())
            except OSError:
                count = None
            if count != last:
                self.changes.append((time.time(), count))
                last = count
            time.sleep(0.002)

    def when(self, count, after):
        for t, n in self.changes:
            if n == count and t >= after:
                return t
        return None


def steps(lines):
    out = []
    for text in lines:
        body = text[text.find("{"):] if "{" in text else ""
        try:
            event = json.loads(body)
        except ValueError:
            continue
        if event.get("event") == "step":
            out.append(event)
    return out


def first_step(job, size, after, what):
    found = job.wait_for(what, lambda lines: [e for e in steps(lines) if e["size"] == size and e["t"] > after], 120)
    return min(e["t"] for e in found)


def run_config(d, label, prefix, repeat):
    command = prefix + "edtrun -np 2 --min-np 2 --max-np 4 --hostfile /etc/mpi/hostfile python3 worker.py --step-ms 20"
    demo.say("%s: edt run tthvd -- %s" % (label, command))
    job = demo.Job(d.in_launcher(command), d.env)
    watch = HostfileWatch(os.path.join(d.data_dir, "clusters/tthvd/mpi/hostfile"))
    figures = {"scale asked -> first step at 4": [], "hostfile change -> first step at 4": [],
               "scale asked -> hostfile change": []}
    try:
        first_step(job, 2, 0, "steps at size 2")
        for _ in range(repeat):
            asked = time.time()
            d.scale(4)
            at4 = first_step(job, 4, asked, "a step at size 4")
            changed = watch.when(4, asked)
            figures["scale asked -> first step at 4"].append(at4 - asked)
            figures["hostfile change -> first step at 4"].append(at4 - changed)
            figures["scale asked -> hostfile change"].append(changed - asked)
            shrunk = time.time()
            d.scale(2)
            first_step(job, 2, shrunk, "a step at size 2 after the scale-down")
        starts = [text for _, text in job.lines if '"event": "start"' in text]
        figures["survivor restarts"] = [len(starts) - 2 - 2 * repeat]
    finally:
        watch.stop = True
        if job.process.poll() is None:
            job.process.send_signal(2)
            job.finish(60)
    return figures


def summarize(label, figures):
    out = {}
    for name, values in figures.items():
        values = sorted(values)
        key = "platform %s: %s" % (label, name)
        if name == "survivor restarts":
            out[key] = values[-1]
            continue
        out[key] = values[len(values) // 2]
        if len(values) > 1:
            out[key + " (min-max)"] = (values[0], values[-1])
    return out


def bench(build, repeat):
    args = argparse.Namespace(build=build, mnist_dir=None, epochs=1, elastic_epochs=1, min_acc=0)
    d = demo.Demo(args)
    results = {}
    ok = False
    try:
        d.start_edtd()
        d.make_volume()
        volume = next(v["host_path"] for v in json.loads(d.edt("volume", "list", "-o", "json").stdout)
                      if v["name"] == "mnist")
        shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py"), volume)
        d.create_cluster()
        for label, prefix in (("PyTorch warm", ""), ("PyTorch cold", "EDT_WARM_START=0 ")):
            results.update(summarize(label, run_config(d, label, prefix, repeat)))
        ok = True
    finally:
        d.teardown(failed=not ok)
    return results
