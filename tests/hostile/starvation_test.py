#!/usr/bin/env python3
"""edtd under clients that hold connections: slow ones, idle ones and long
streams must not keep another user's requests from being answered.

Starts its own edtd (tests/contract's Edtd, containers in 127.87.0.0/24) with
a Running cluster and a running job, then, each while another user sends
GET /api/v1/clusters from 127.0.0.1 every 20 ms:
  - 40 slow clients from 127.0.0.2, each sending one header line every 2 s
    (the request never ends): edtd must close each within its header
    deadline (10 s of its first byte, checked with 5 s to spare);
  - 20 follow streams of the running job's log;
  - idle connections from 127.0.0.3 up to edtd's bound per address: the
    next one is answered 503 naming the address.
Every request of the other user must be answered 200 (none may wait past
the client's 5 s timeout) and their median within 100 ms.

  starvation_test.py --edtd build/src/control/edtd
"""
import argparse
import json
import os
import socket
import statistics
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "contract"))
import contract_test  # noqa: E402  (Edtd)

ADDRESSES = "127.87.0.0/24"  # this test's own block (grep --address-range for the others)
CLUSTER = "starve"
PER_ADDRESS = 100  # HttpServerOptions::max_connections_per_address


class Prober(threading.Thread):
    """Another user's GET /api/v1/clusters every 20 ms, each timed."""

    def __init__(self, edtd, token):
        super().__init__(daemon=True)
        self.edtd, self.token = edtd, token
        self.latencies, self.failures = [], []
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.is_set():
            request = urllib.request.Request(self.edtd.base + "/api/v1/clusters")
            request.add_header("Authorization", "Bearer " + self.token)
            start = time.monotonic()
            try:
                with urllib.request.urlopen(request, timeout=5) as r:
                    r.read()
                    if r.status != 200:
                        self.failures.append(f"status {r.status}")
            except Exception as e:  # noqa: BLE001 (any failure to answer is the finding)
                self.failures.append(repr(e))
            self.latencies.append(time.monotonic() - start)
            time.sleep(0.02)

    def finish(self, what):
        self.stopping.set()
        self.join()
        median = statistics.median(self.latencies) * 1000
        print(f"{what}: {len(self.latencies)} requests of another user, median {median:.2f} ms, "
              f"max {max(self.latencies) * 1000:.1f} ms, {len(self.failures)} unanswered")
        problems = [f"{what}: another user's request failed: {f}" for f in self.failures[:3]]
        if median > 100:
            problems.append(f"{what}: another user's median latency is {median:.1f} ms (> 100 ms)")
        return problems


def connect(edtd, source):
    s = socket.socket()
    s.bind((source, 0))
    s.connect(("127.0.0.1", edtd.port))
    return s


def closed(sock, timeout):
    """Whether the peer closed `sock` within `timeout` seconds."""
    sock.settimeout(timeout)
    try:
        while sock.recv(4096):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def slow_clients(edtd, token):
    probe = Prober(edtd, token)
    probe.start()
    slow = [connect(edtd, "127.0.0.2") for _ in range(40)]
    started = time.monotonic()
    for s in slow:
        s.sendall(b"GET /api/v1/clusters HTTP/1.1\r\n")
    problems = []
    # One header line each every 2 s, for as long as edtd keeps them open.
    open_ = list(slow)
    while open_ and time.monotonic() - started < 15:
        time.sleep(2)
        for s in list(open_):
            try:
                s.sendall(b"X-Slow: 1\r\n")
            except OSError:
                open_.remove(s)
    problems += probe.finish("40 slow clients")
    still = [s for s in slow if not closed(s, max(0.1, started + 15 - time.monotonic()))]
    if still:
        problems.append(f"{len(still)} of 40 slow clients were still open 15 s after their first byte")
    for s in slow:
        s.close()
    return problems


def follow_streams(edtd, token, job):
    probe = Prober(edtd, token)
    probe.start()
    streams = []
    for _ in range(20):
        s = connect(edtd, "127.0.0.1")
        s.sendall(f"GET /api/v1/jobs/{job}/log?follow=true HTTP/1.1\r\nHost: x\r\n"
                  f"Authorization: Bearer {edtd.token}\r\n\r\n".encode())
        streams.append(s)
    problems = []
    for s in streams:
        s.settimeout(10)
        if not s.recv(4096).startswith(b"HTTP/1.1 200"):
            problems.append("a follow stream was not answered 200")
    time.sleep(1)  # the streams stay open while the prober keeps asking
    problems += probe.finish("20 follow streams")
    for s in streams:
        s.close()
    return problems


def idle_connections(edtd, token):
    probe = Prober(edtd, token)
    probe.start()
    held = [connect(edtd, "127.0.0.3") for _ in range(PER_ADDRESS)]
    over = connect(edtd, "127.0.0.3")
    over.settimeout(10)
    try:
        answer = over.recv(65536).decode(errors="replace")
    except socket.timeout:
        answer = "(no answer within 10 s)"
    problems = probe.finish(f"{PER_ADDRESS} idle connections")
    if not answer.startswith("HTTP/1.1 503") or "127.0.0.3" not in answer:
        problems.append(f"connection {PER_ADDRESS + 1} from one address: not a 503 naming it: {answer[:300]!r}")
    for s in held + [over]:
        s.close()
    return problems


def setup(edtd):
    status, made = edtd.api("POST", "/users", {"name": "other"})
    assert status == 201, made
    status, made_cluster = edtd.api("POST", "/clusters", {"name": CLUSTER, "framework": "horovod", "containers": 2})
    assert status == 201, made_cluster
    deadline = time.time() + 120
    while edtd.api("GET", "/clusters/" + CLUSTER)[1]["status"]["phase"] != "Running":
        if time.time() > deadline:
            raise RuntimeError("the cluster did not become Running; edtd's log:\n" + edtd.read_log())
        time.sleep(0.2)
    status, job = edtd.api("POST", f"/clusters/{CLUSTER}/jobs", {"command": "echo started; sleep 60"})
    assert status == 201, job
    return made["token"], job["id"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--edtd", required=True)
    args = parser.parse_args()
    edtd = contract_test.Edtd(args.edtd, ADDRESSES)
    problems = []
    try:
        token, job = setup(edtd)
        problems += slow_clients(edtd, token)
        problems += follow_streams(edtd, token, job)
        problems += idle_connections(edtd, token)
        if edtd.proc.poll() is not None:
            problems.append("edtd died; its log:\n" + edtd.read_log())
    finally:
        edtd.stop()
    for p in problems:
        print("FAIL:", p)
    print(json.dumps({"problems": len(problems)}))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
