"""Users and tenants of a test's edtd: its API as a tenant sees it, its
clusters waited for by state, its users made, and ssh into a container
with the cluster's own key.

Contract: Tenants(edtd) takes a started harness.edtd.ScratchEdtd; its checks
are counted and their failures collected (report() gives the exit code);
wait_running() and make_user() raise RuntimeError with edtd's log.
"""
import json
import os
import subprocess
import time

TIMEOUT = 60


class Tenants:
    """Checks counted and failures collected against one edtd (harness.edtd.ScratchEdtd)."""

    def __init__(self, edtd):
        self.edtd = edtd
        self.failures = []
        self.checks = 0

    def check(self, ok, what):
        self.checks += 1
        if not ok:
            self.failures.append(what)

    def report(self, what):
        """Prints each failure and the count of `what` checks; the exit code."""
        for failure in self.failures:
            print("FAIL:", failure)
        print(f"{self.checks} {what} checks, {len(self.failures)} failed")
        return 1 if self.failures else 0

    def api(self, method, path, body=None, token=None):
        status, _, text = self.edtd.send(method, "/api/v1" + path, body, token or self.edtd.token)
        return status, (json.loads(text) if text.startswith("{") else text)

    def wait_running(self, name, token, size):
        deadline = time.time() + TIMEOUT
        while time.time() < deadline:
            status, c = self.api("GET", "/clusters/" + name, token=token)
            phases = [x["phase"] for x in c.get("status", {}).get("containers", [])] if status == 200 else []
            if c.get("status", {}).get("phase") == "Running" and len(phases) == size and set(phases) == {"Running"}:
                return c
            time.sleep(0.05)
        raise RuntimeError(f"cluster {name} not Running with {size} containers within {TIMEOUT} s: {c}\n"
                           + self.edtd.read_log())

    def make_user(self, name):
        status, body = self.api("POST", "/users", {"name": name})
        if status != 201:
            raise RuntimeError(f"POST /users {name}: {status} {body}")
        return body["token"]

    def ssh(self, cluster, address, command, stdin=None, timeout=TIMEOUT):
        key = os.path.join(self.edtd.dir, "data", "clusters", cluster, "ssh", "id_ed25519")
        argv = ["ssh", "-i", key, "-p", str(self.edtd.ssh_port), "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
                "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", f"root@{address}", command]
        return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout)
