#!/usr/bin/env python3
"""edtd under clients that hold connections: slow ones, idle ones and long
streams must not keep another user's requests from being answered.

Starts its own edtd (tests/contract's Edtd, containers in 127.87.0.0/24) with
users alice and bob, each with a Running cluster and a running job, then,
each while bob sends GET /api/v1/clusters from 127.0.0.1 every 20 ms:
  - 40 slow clients from 127.0.0.2, each sending one header line every 2 s
    (the request never ends): edtd must close each within its header
    deadline (10 s of its first byte, checked with 5 s to spare);
  - 20 follow streams of alice's job (the admin's token);
  - alice, from bob's address (127.0.0.1), opens 110 kept-alive
    connections that each show her token (more than the old bound of 100
    per address), then asks on the 64 she is given for 64 follow streams
    of her job (the old bound in all): past her own bounds (64
    connections, 32 streams) she is answered 503 naming them, and
    meanwhile bob's requests and his own follow stream are answered;
  - idle connections from 127.0.0.3 that sent no token, up to edtd's small
    allowance per address: the next one is answered 503 naming the address.
Every request of bob's must be answered 200 (none may wait past the
client's 5 s timeout) and their median within 100 ms.

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

from harness.edtd import ScratchEdtd


ADDRESSES = "127.87.0.0/24"  # this test's own block (grep --address-range for the others)
CLUSTER = "starve"
# HttpServerOptions' bounds (docs/security.md's table).
PER_ADDRESS = 32   # max_connections_per_address: connections that sent no valid token yet
PER_USER = 64      # max_connections_per_user
STREAMS_PER_USER = 32  # max_streams_per_user


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

    def answer_more(self, n, timeout=10):
        """Waits until `n` more requests have been answered (or failed), at most `timeout` s."""
        goal, deadline = len(self.latencies) + n, time.monotonic() + timeout
        while len(self.latencies) < goal and time.monotonic() < deadline:
            time.sleep(0.01)

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
    problems = []
    # One after another: a user's requests at once are bounded (8 in flight).
    for _ in range(20):
        s, first = ask(edtd, edtd.token, f"/api/v1/jobs/{job}/log?follow=true")
        streams.append(s)
        if not first.startswith("HTTP/1.1 200"):
            problems.append(f"a follow stream was not answered 200: {first[:300]!r}")
    time.sleep(1)  # the streams stay open while the prober keeps asking
    problems += probe.finish("20 follow streams")
    for s in streams:
        s.close()
    return problems


def answer_of(sock, timeout=10):
    """The next reply on `sock`: its head, and its body when it has a
    Content-Length (a stream's: what came with the head), read whole so
    that the connection can be asked again."""
    sock.settimeout(timeout)
    got = b""
    try:
        while b"\r\n\r\n" not in got:
            part = sock.recv(65536)
            if not part:
                break
            got += part
        head, _, body = got.partition(b"\r\n\r\n")
        length = [int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
        while length and len(body) < length[0]:
            part = sock.recv(65536)
            if not part:
                break
            body += part
        return (head + b"\r\n\r\n" + body).decode(errors="replace")
    except socket.timeout:
        return got.decode(errors="replace") + f"(no whole answer within {timeout} s)"
    except ConnectionResetError:
        return got.decode(errors="replace") + "(reset)"


def idle_connections(edtd, token):
    probe = Prober(edtd, token)
    probe.start()
    held = [connect(edtd, "127.0.0.3") for _ in range(PER_ADDRESS)]
    over = connect(edtd, "127.0.0.3")
    answer = answer_of(over)
    problems = probe.finish(f"{PER_ADDRESS} idle connections without a token")
    if not answer.startswith("HTTP/1.1 503") or "127.0.0.3 without a valid token" not in answer:
        problems.append(f"connection {PER_ADDRESS + 1} from one address without a token: "
                        f"not a 503 naming it: {answer[:300]!r}")
    for s in held + [over]:
        s.close()
    return problems


def ask(edtd, token, path, s=None):
    """`s` (else a new connection from 127.0.0.1) after it sent `path` with `token`, and the answer."""
    s = s or connect(edtd, "127.0.0.1")
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    return s, answer_of(s)


def tally(answers, what, allowed, bound_words, problems):
    """Checks that the first `allowed` of `answers` were 200 and the rest 503 naming alice's bound."""
    ok = sum(a.startswith("HTTP/1.1 200") for a in answers)
    refused = [a for a in answers if a.startswith("HTTP/1.1 503")]
    print(f"alice's {what}: {len(answers)} asked, {ok} answered 200, {len(refused)} refused 503")
    if ok != allowed or len(refused) != len(answers) - allowed:
        others = [a[:200] for a in answers if not a.startswith(("HTTP/1.1 200", "HTTP/1.1 503"))]
        problems.append(f"alice's {what}: {ok} answered 200 and {len(refused)} 503 of {len(answers)}, "
                        f"expected {allowed} and the rest 503; others: {others[:2]!r}")
    if refused and bound_words not in refused[0]:
        problems.append(f"alice's {what}: the 503 does not name her bound ({bound_words!r}): {refused[0][:400]!r}")


def one_user_holds_all_she_may(edtd, alice, bob, alices_job, bobs_job):
    """alice takes all her bounds from bob's address; bob is served throughout."""
    probe = Prober(edtd, bob)
    probe.start()
    problems = []
    idle = [ask(edtd, alice, "/api/v1/whoami") for _ in range(110)]
    tally([a for _, a in idle], "kept-alive connections", PER_USER, "connections of the user alice", problems)
    probe.answer_more(20)  # bob asks while alice holds all her connections
    held = [s for s, a in idle if a.startswith("HTTP/1.1 200")]
    streams = [ask(edtd, alice, f"/api/v1/jobs/{alices_job}/log?follow=true", s) for s in held]
    tally([a for _, a in streams], "follow streams", min(len(held), STREAMS_PER_USER),
          "streams open of the user alice", problems)
    bobs_stream, answer = ask(edtd, bob, f"/api/v1/jobs/{bobs_job}/log?follow=true")
    if not answer.startswith("HTTP/1.1 200"):
        problems.append(f"bob's follow stream while alice holds hers: not 200: {answer[:300]!r}")
    probe.answer_more(20)  # and while she holds all her streams
    problems += probe.finish(f"alice's {STREAMS_PER_USER} streams and {PER_USER} connections from bob's address")
    for s, _ in idle + [(bobs_stream, "")]:
        s.close()
    return problems


def as_user(edtd, token, method, path, body=None):
    status, _, text = edtd.send(method, "/api/v1" + path, body, token)
    return status, (json.loads(text) if text.startswith("{") else text)


def running_job(edtd, token, cluster):
    """A Running cluster of the token's user with a job that runs for 120 s: its id."""
    status, made = as_user(edtd, token, "POST", "/clusters", {"name": cluster, "framework": "horovod", "containers": 2})
    assert status == 201, made
    deadline = time.time() + 120
    while (phase := as_user(edtd, token, "GET", "/clusters/" + cluster)[1]["status"]["phase"]) != "Running":
        if time.time() > deadline or phase == "Failed":
            raise RuntimeError(f"the cluster {cluster} did not become Running: "
                               f"{as_user(edtd, token, 'GET', '/clusters/' + cluster)[1]}; edtd's log:\n"
                               + edtd.read_log())
        time.sleep(0.2)
    status, job = as_user(edtd, token, "POST", f"/clusters/{cluster}/jobs", {"command": "echo started; sleep 120"})
    assert status == 201, job
    return job["id"]


def setup(edtd):
    tokens = {}
    for name in ("alice", "bob"):
        status, made = edtd.api("POST", "/users", {"name": name})
        assert status == 201, made
        tokens[name] = made["token"]
    jobs = {name: running_job(edtd, tokens[name], CLUSTER + name[0]) for name in tokens}
    return tokens, jobs


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--edtd", required=True)
    args = parser.parse_args()
    edtd = ScratchEdtd(args.edtd, ADDRESSES)
    problems = []
    try:
        tokens, jobs = setup(edtd)
        bob = tokens["bob"]
        problems += slow_clients(edtd, bob)
        problems += follow_streams(edtd, bob, jobs["alice"])
        problems += one_user_holds_all_she_may(edtd, tokens["alice"], bob, jobs["alice"], jobs["bob"])
        problems += idle_connections(edtd, bob)
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
