#!/usr/bin/env python3
"""A job's files against a plain host user, and their lifetime (issue 34,
B6; docs/security.md, "The data dir"). An edtd with user namespaces on
(the data dir 0711, so that containers' roots pass through it) and
--job-log-limit 64KiB; alice's cluster jf runs jobs:

  modes: as nobody (setpriv), jobs/ cannot be listed, a job's log and
    edtd.db-wal cannot be read; jobs/ is 0700, its files and the store's
    edtd.db, -wal and -shm 0600.
  bound: a job that writes 8 MiB leaves a log under 64 KiB and two marker
    lines, with its first and last lines and the count dropped.
  lifetime: an ended job is deleted (DELETE /jobs/{id}, then 404), a running
    one refused (409); deleting the cluster takes its jobs' rows and files.

  job_files_test.py --edtd build/src/control/edtd
"""
import argparse
import os
import subprocess
import sys
import time

from harness import users
from harness.edtd import ScratchEdtd
from harness.users import TIMEOUT


LIMIT = 64 << 10
FLOOD = "i=0; while [ $i -lt 8 ]; do head -c 1048576 /dev/zero | tr '\\0' x; i=$((i+1)); done; echo; echo the-end"


class JobFiles(users.Tenants):
    def data(self, *parts):
        return os.path.join(self.edtd.dir, "data", *parts)

    def job(self, token, command):
        status, job = self.api("POST", "/clusters/jf/jobs", {"command": command}, token)
        if status != 201:
            raise RuntimeError(f"POST /clusters/jf/jobs: {status} {job}")
        return str(job["id"])

    def wait_ended(self, token, job):
        deadline = time.time() + TIMEOUT
        while time.time() < deadline:
            status, body = self.api("GET", "/jobs/" + job, token=token)
            if status == 200 and body["state"] != "Running":
                return body
            time.sleep(0.05)
        raise RuntimeError(f"job {job} still running after {TIMEOUT} s")

    def as_nobody(self, *argv):
        return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv],
                              capture_output=True, text=True, timeout=TIMEOUT)

    def modes(self, token, job):
        for argv, what in ((["ls", self.data("jobs")], "list jobs/"),
                           (["cat", self.data("jobs", job + ".log")], "read a job's log"),
                           (["cat", self.data("edtd.db-wal")], "read edtd.db-wal"),
                           (["cat", self.data("edtd.db")], "read edtd.db")):
            got = self.as_nobody(*argv)
            self.check(got.returncode != 0 and "Permission denied" in got.stderr,
                       f"a plain host user could {what}: rc {got.returncode} {got.stderr[-200:]!r}")
        for path, mode in ((self.data("jobs"), 0o700), (self.data("jobs", job + ".log"), 0o600),
                           (self.data("jobs", job + ".exit"), 0o600)) + tuple(
                               (self.data("edtd.db" + s), 0o600) for s in ("", "-wal", "-shm")):
            got = os.stat(path).st_mode & 0o7777 if os.path.exists(path) else None
            self.check(got == mode, f"{path} is {oct(got) if got is not None else 'missing'}, not {oct(mode)}")

    def bound(self, token):
        job = self.job(token, FLOOD)
        self.wait_ended(token, job)
        size = os.path.getsize(self.data("jobs", job + ".log"))
        self.check(size <= LIMIT + 512, f"a job that wrote 8 MiB left a log of {size} bytes, over {LIMIT}")
        status, text = self.api("GET", f"/jobs/{job}/log?follow=false", token=token)
        self.check(status == 200 and text.startswith("x" * 100) and text.endswith("x\nthe-end\n")
                   and "bytes of this job's output were dropped here" in text,
                   f"the bounded log's head, marker and tail: {status} {text[:80]!r} ... {text[-200:]!r}")
        return job

    def lifetime(self, token, bob, ended):
        running = self.job(token, "sleep 600")
        got = self.api("DELETE", "/jobs/" + running, token=token)
        self.check(got[0] == 409, f"a running job was deleted: {got}")
        self.check(self.api("DELETE", "/jobs/" + ended, token=bob)[0] == 404, "bob deleted alice's job")
        status, listed = self.api("GET", "/clusters/jf/jobs", token=token)
        ids = [str(j["id"]) for j in listed.get("jobs", [])] if status == 200 else []
        self.check(ended in ids and running in ids, f"GET /clusters/jf/jobs: {status} {listed}")
        got = self.api("DELETE", "/jobs/" + ended, token=token)
        self.check(got[0] == 200, f"an ended job was not deleted: {got}")
        self.check(self.api("GET", "/jobs/" + ended, token=token)[0] == 404, "a deleted job is still there")
        self.check(not os.path.exists(self.data("jobs", ended + ".log")), "a deleted job's log is still there")
        kept = self.job(token, "echo kept")
        self.wait_ended(token, kept)
        self.api("DELETE", "/clusters/jf", token=token)
        deadline = time.time() + TIMEOUT
        while time.time() < deadline and self.api("GET", "/clusters/jf", token=token)[0] != 404:
            time.sleep(0.1)
        # The files go at the reconciler's next resync.
        left = []
        while time.time() < deadline:
            left = [n for n in os.listdir(self.data("jobs")) if n.split(".")[0] in (running, kept)]
            if not left:
                break
            time.sleep(0.2)
        self.check(not left, f"files of the deleted cluster's jobs remain: {left}")

    def run(self):
        alice, bob = self.make_user("alice"), self.make_user("bob")
        status, body = self.api("POST", "/clusters", {"name": "jf", "framework": "horovod", "containers": 2}, alice)
        if status != 201:
            raise RuntimeError(f"POST /clusters: {status} {body}")
        self.wait_running("jf", alice, 2)
        first = self.job(alice, "echo secret-output")
        self.wait_ended(alice, first)
        self.modes(alice, first)
        ended = self.bound(alice)
        self.lifetime(alice, bob, ended)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edtd", required=True)
    args = parser.parse_args()
    edtd = ScratchEdtd(args.edtd, None, ["--user-namespaces", "on", "--job-log-limit", "64KiB"])
    test = JobFiles(edtd)
    try:
        test.run()
    finally:
        edtd.stop()
    return test.report("job file")


if __name__ == "__main__":
    sys.exit(main())
