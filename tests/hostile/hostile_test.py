#!/usr/bin/env python3
"""edtd under careless and hostile requests: each is answered 2xx, or 4xx with
an error body naming what was wrong; never 5xx, and edtd stays up.

Starts its own edtd (tests/contract's Edtd: a fresh data dir, a free loopback
port, containers in 127.84.0.0/24), makes a cluster, then sends, over raw
sockets so that any byte can go on the wire:
  - bytes that are not UTF-8 in every path parameter of every documented
    operation, and in a query parameter;
  - a value nested 100,000 deep in every field of every request body;
  - a value of each wrong JSON type in every field (and sub-field) of every
    request body, as the document's schemas type them;
  - every body with a key twice, and with a field its schema does not list;
  - a POST and a PATCH without Content-Length, and a chunked one;
  - a 10 KB URL, a 100 KB Authorization header, and the bearer scheme in
    lower and upper case;
  - a file uploaded into a volume: paths that leave it ('..', absolute,
    encoded), control characters, over-long names, a symbolic link a
    container left in it; a Content-Length over the upload limit (and over
    the body limit without a token); another user's volume;
  - filters of a cluster's events and jobs with values they do not take;
  - another user: the admin's cluster, volume and GPU holders must look to
    them as if absent, the admin's tokens are not theirs to list; a revoked
    token is refused at once, an expired one once its time is up, a deleted
    user's token at once;
checking each answer's status and error.field, that error.message and
error.fix say something, that the status is one the document lists for the
operation, and that edtd is alive after it. Then a bounded fuzz run: FUZZ
requests mutated from the valid ones (byte flips, type swaps, deletions,
deep nesting, huge values, duplicate keys, other methods and paths), seeded,
must get no 5xx and leave edtd alive.

  hostile_test.py --edtd build/src/control/edtd --document api/openapi.json [--fuzz N] [--seed S]
"""
import argparse
import copy
import json
import os
import random
import re
import socket
import sys
import time

from contract import contract_test  # the document's checks (Contract, METHODS)
from harness.edtd import ScratchEdtd


ADDRESSES = "127.84.0.0/24"  # this test's own block (grep --address-range for the others)
CLUSTER = "hostile"
DEEP = 100_000
# A valid body for every request schema, with every optional field present,
# so that every field gets its wrong types.
BODIES = {
    "ClusterSpec": {"name": "hostile-two", "framework": "horovod", "containers": 2, "image": "edt",
                    "gpu": {"model": "NVIDIA-P4", "count": 1}, "shm": "64M", "cpus": "1.5",
                    "mounts": [{"volume": "hostile-vol", "path": "/data", "read_only": False}],
                    "env": {"A": "b"}, "drain_timeout": "10s"},
    "Scale": {"containers": 2, "drain_timeout": "10s"},
    # No such container: a request that passes reading starts no process.
    "JobRequest": {"command": "true", "container": CLUSTER + "-worker-9"},
    "VolumeRequest": {"name": "hostile-vol-two", "host_path": "/tmp"},
    "ImageRequest": {"name": "hostile-image", "root": "/", "frameworks": ["horovod"]},
    # No such file: a request that passes reading imports nothing.
    "ImageImportRequest": {"name": "hostile-import", "path": "/nonexistent-hostile/image.tar"},
    # A registry on a closed loopback port: a request that passes reading pulls nothing.
    "ImagePullRequest": {"reference": "127.0.0.1:1/hostile/none:1", "name": "hostile-pull", "username": "u",
                         "password": "p", "frameworks": ["horovod"]},
    "UserRequest": {"name": "hostile-user"},
    "TokenRequest": {"expires_in": "90d", "description": "hostile"},
    "TerminalRequest": {},
    "JupyterRequest": {},
    "TeamRequest": {"name": "hostile-team"},
    "QuotaRequest": {"guaranteed": 1, "borrow_limit": 0},
    "UserTeam": {"team": ""},
}
# One value of each JSON type; a field gets each that is not of its type.
VALUES = {"string": "x", "integer": 5, "number": 2.5, "boolean": True, "null": None, "array": [1], "object": {"a": 1}}


class Answer:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return None


def complete(raw):
    """Whether `raw` holds a whole answer: its head, and its Content-Length's bytes or the last chunk."""
    head, found, body = raw.partition(b"\r\n\r\n")
    if not found:
        return False
    length = re.search(rb"\r\ncontent-length: *([0-9]+)", head, re.IGNORECASE)
    if length:
        return len(body) >= int(length.group(1))
    return body.endswith(b"0\r\n\r\n")


def exchange(port, data, timeout=30):
    """Sends raw request bytes on a new connection; reads one answer (until it
    is complete or edtd closes)."""
    chunks = []
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # edtd answered early and closed; its answer is still readable
        while not complete(b"".join(chunks)):
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    raw = b"".join(chunks)
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    if not lines[0].startswith("HTTP/1.1 "):
        return Answer(0, {}, raw.decode("latin-1"))
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    return Answer(int(lines[0].split()[1]), headers, body.decode("utf-8", "replace"))


def request(method, target, body=None, token=None, headers=None, length=True):
    """Request bytes; body is bytes, str (JSON text) or a JSON value."""
    if body is not None and not isinstance(body, (bytes, str)):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode()
    target = target.encode("latin-1") if isinstance(target, str) else target
    lines = [method.encode() + b" " + target + b" HTTP/1.1", b"Host: 127.0.0.1", b"Connection: close"]
    if token:
        lines.append(b"Authorization: Bearer " + token.encode())
    if body is not None:
        lines.append(b"Content-Type: application/json")
        if length:
            lines.append(b"Content-Length: " + str(len(body)).encode())
    for name, value in (headers or {}).items():
        lines.append(name.encode() + b": " + (value if isinstance(value, bytes) else value.encode()))
    return b"\r\n".join(lines) + b"\r\n\r\n" + (body or b"")


def announces_more(data):
    """Whether the request's Content-Length (read as edtd's HTTP library reads it) is over its body's size."""
    head, _, body = data.partition(b"\r\n\r\n")
    length = re.search(rb"\r\ncontent-length:[ \t]*([0-9]*)", head, re.IGNORECASE)
    return bool(length and length.group(1) and int(length.group(1)) > len(body))


def deep(depth):
    return "[" * depth + "]" * depth


def path_text(path):
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + part
    return out


def set_at(body, path, value):
    body = copy.deepcopy(body)
    node = body
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return body


class Hostile:
    def __init__(self, contract, edtd):
        self.c = contract
        self.edtd = edtd
        self.failures = contract.failures
        self.cases = 0
        self.slowest = (0.0, "")  # (seconds, case)

    def send(self, data):
        return exchange(self.edtd.port, data)

    def alive(self, where):
        """edtd runs and answers /healthz; raises with its log if not."""
        problem = None
        if self.edtd.proc.poll() is not None:
            problem = f"edtd died (exit {self.edtd.proc.returncode})"
        else:
            try:
                answer = exchange(self.edtd.port, request("GET", "/healthz"), timeout=10)
                if answer.status != 200:
                    problem = f"GET /healthz answered {answer.status} {answer.body[:200]!r}"
            except OSError as e:
                problem = f"edtd runs but GET /healthz failed ({e})"
        if problem:
            raise RuntimeError(f"{problem} after {where}; its log:\n" + self.edtd.read_log())

    def expect(self, what, data, status, field=None, operation=None, message_has=None):
        """One case: the answer's status, error.field, message and fix; documented; edtd alive."""
        self.cases += 1
        start = time.time()
        answer = self.send(data)
        self.slowest = max(self.slowest, (time.time() - start, what))
        self.alive(what)
        got = answer.json()
        error = got.get("error") if isinstance(got, dict) else None
        if answer.status != status:
            self.failures.append(f"{what}: status {answer.status}, expected {status}: {answer.body[:300]!r}")
            return answer
        if status < 400:
            return answer
        if not isinstance(error, dict):
            self.failures.append(f"{what}: {status} without an error body: {answer.body[:300]!r}")
            return answer
        if field is not None and error.get("field") != field:
            self.failures.append(f"{what}: error.field is {error.get('field')!r}, expected {field!r}: {error}")
        if not error.get("message") or not error.get("fix") or "request failed" in error["message"]:
            self.failures.append(f"{what}: the error does not say what was wrong and what to do: {error}")
        if message_has and message_has not in error.get("message", ""):
            self.failures.append(f"{what}: the message does not say {message_has!r}: {error}")
        if operation:
            self.c.check(*operation, answer.status, answer.headers.get("Content-Type", ""), answer.body, what)
        return answer

    # The document's operations.

    def operations(self):
        for path, item in self.c.doc["paths"].items():
            for method in contract_test.METHODS:
                if method in item:
                    yield path, method

    def target(self, path, values):
        prefix = self.c.doc["paths"][path].get("servers", self.c.doc["servers"])[0]["url"].rstrip("/")
        for name, value in values.items():
            path = path.replace("{" + name + "}", value)
        return prefix + path

    def valid_parameters(self, path):
        return {"name": "hostile-user" if path.startswith("/users") else CLUSTER, "id": "1",
                "container": CLUSTER + "-launcher", "model": "NVIDIA-P4"}

    def body_schema(self, path, method):
        name = self.c.request_schema_name(path, method)
        return name, (BODIES[name] if name else None)

    # The cases.

    def not_utf8(self):
        for path, method in self.operations():
            body_name, body = self.body_schema(path, method)
            for param in ("name", "id", "container"):
                if "{" + param + "}" not in path:
                    continue
                for bad in ("%ff", "a%C0%AF", "%ED%A0%80", "x%e2%82"):
                    values = self.valid_parameters(path)
                    values[param] = bad
                    self.expect(f"{method.upper()} {path} with {param}={bad}",
                                request(method.upper(), self.target(path, values), body if body is not None else b"",
                                        self.edtd.token), 400, param, (path, method), "not UTF-8")
        self.expect("GET /jobs/{id}/log?follow=%ff",
                    request("GET", "/api/v1/jobs/1/log?follow=%ff", token=self.edtd.token), 400, "follow",
                    ("/jobs/{id}/log", "get"), "not UTF-8")
        self.expect("GET /clusters?%fe=1", request("GET", "/api/v1/clusters?%fe=1", token=self.edtd.token), 400,
                    "query", ("/clusters", "get"))

    def body_operations(self):
        for path, method in self.operations():
            name, body = self.body_schema(path, method)
            if name:
                yield path, method, name, body

    def nesting(self):
        for path, method, name, body in self.body_operations():
            target = self.target(path, self.valid_parameters(path))
            keys = list(body) or ["anything"]
            for key in keys:
                text = json.dumps({k: v for k, v in body.items() if k != key})[:-1]
                text += (", " if len(text) > 1 else "") + json.dumps(key) + ": " + deep(DEEP) + "}"
                self.expect(f"{method.upper()} {path} with {key} nested {DEEP} deep",
                            request(method.upper(), target, text, self.edtd.token), 400, None, (path, method),
                            "more than")
            self.expect(f"{method.upper()} {path}: the body nested {DEEP} deep",
                        request(method.upper(), target, deep(DEEP), self.edtd.token), 400, None, (path, method),
                        "more than")

    def schema_types(self, schema):
        schema = self.c.resolve(schema)
        types = set()
        for option in schema.get("oneOf", []) + schema.get("anyOf", []):
            types |= self.schema_types(option)
        if "type" in schema:
            types.add(schema["type"])
        if schema.get("nullable"):
            types.add("null")
        if "number" in types:
            types.add("integer")
        return types

    def wrong_types(self, schema, value, path):
        """(path, wrong value) for every node of `value` and each type its schema does not allow."""
        schema = self.c.resolve(schema)
        if path:
            allowed = self.schema_types(schema)
            for kind, wrong in VALUES.items():
                if kind not in allowed:
                    yield path, wrong
        if isinstance(value, dict):
            for key, item in value.items():
                sub = schema.get("properties", {}).get(key) or schema.get("additionalProperties")
                if isinstance(sub, dict):
                    yield from self.wrong_types(sub, item, path + [key])
        if isinstance(value, list) and "items" in schema:
            for i, item in enumerate(value):
                yield from self.wrong_types(schema["items"], item, path + [i])

    def types(self):
        for path, method, name, body in self.body_operations():
            target = self.target(path, self.valid_parameters(path))
            schema = {"$ref": "#/components/schemas/" + name}
            for where, wrong in self.wrong_types(schema, body, []):
                self.expect(f"{method.upper()} {path} with {path_text(where)} = {json.dumps(wrong)}",
                            request(method.upper(), target, set_at(body, where, wrong), self.edtd.token), 422,
                            path_text(where), (path, method), "must be")

    def keys(self):
        for path, method, name, body in self.body_operations():
            target = self.target(path, self.valid_parameters(path))
            self.expect(f"{method.upper()} {path} with an unknown field",
                        request(method.upper(), target, dict(body, bogus=1), self.edtd.token), 422, "bogus",
                        (path, method), "unknown field")
            for key in body:
                text = "{" + json.dumps(key) + ": " + json.dumps(body[key]) + ", " + json.dumps(body)[1:]
                self.expect(f"{method.upper()} {path} with {key} twice",
                            request(method.upper(), target, text, self.edtd.token), 400, key, (path, method), "twice")
        cluster = BODIES["ClusterSpec"]
        for where in (["gpu", "bogus"], ["mounts", 0, "bogus"]):
            self.expect(f"POST /clusters with {path_text(where)}",
                        request("POST", "/api/v1/clusters", set_at(cluster, where, 1), self.edtd.token), 422,
                        path_text(where), ("/clusters", "post"), "unknown field")
        text = json.dumps(cluster).replace('"count": 1', '"count": 1, "count": 2')
        self.expect("POST /clusters with gpu.count twice", request("POST", "/api/v1/clusters", text, self.edtd.token),
                    400, "gpu.count", ("/clusters", "post"), "twice")

    def framing(self):
        token = self.edtd.token
        for method, path in (("POST", "/volumes"), ("PATCH", "/clusters/{name}"), ("POST", "/users/{name}/tokens")):
            target = self.target(path, self.valid_parameters(path))
            self.expect(f"{method} {path} without Content-Length",
                        request(method, target, b'{"containers": 2}', token, length=False), 411, "Content-Length",
                        (path, method.lower()))
            self.expect(f"{method} {path} chunked",
                        request(method, target, b"2\r\n{}\r\n0\r\n\r\n", token, {"Transfer-Encoding": "chunked"},
                                length=False), 411, "Content-Length", (path, method.lower()))
        self.expect("a 10 KB URL", request("GET", "/api/v1/clusters/" + "a" * 10_000, token=token), 414, "",
                    ("/clusters/{name}", "get"), "bytes")
        self.expect("a 100 KB Authorization header",
                    request("GET", "/api/v1/clusters", headers={"Authorization": "Bearer " + "a" * 100_000}), 431, "",
                    ("/clusters", "get"), "header")
        self.expect("an empty POST body", request("POST", "/api/v1/volumes", b"", token), 400, "",
                    ("/volumes", "post"), "empty")
        self.expect("a body that is not UTF-8", request("POST", "/api/v1/volumes", b'{"name": "\xff"}', token), 400, "",
                    ("/volumes", "post"), "UTF-8")
        for scheme in ("bearer", "BEARER", "Bearer  "):
            self.expect(f"the scheme written {scheme!r}",
                        request("GET", "/api/v1/whoami", headers={"Authorization": f"{scheme} {token}"}), 200)
        self.expect("the Basic scheme", request("GET", "/api/v1/whoami", headers={"Authorization": "Basic " + token}),
                    401, "Authorization", ("/whoami", "get"), "Basic")

    def another_user(self):
        admin = self.edtd.token
        made = self.send(request("POST", "/api/v1/users", {"name": "hostile-other"}, admin))
        if made.status != 201:
            raise RuntimeError(f"POST /users: {made.status} {made.body[:300]}")
        other = made.json()["token"]
        for method, path, name in (("GET", "/clusters/{name}", CLUSTER), ("DELETE", "/clusters/{name}", CLUSTER),
                                   ("GET", "/clusters/{name}/events", CLUSTER),
                                   ("DELETE", "/volumes/{name}", "hostile-vol")):
            what = f"{method} {path} of the admin's {name} by another user"
            theirs = self.expect(what, request(method, "/api/v1" + path.replace("{name}", name), token=other), 404,
                                 "name", (path, method.lower()))
            absent = self.send(request(method, "/api/v1" + path.replace("{name}", "no-such"), token=other))
            if theirs.body.replace(name, "NAME") != absent.body.replace("no-such", "NAME"):
                self.failures.append(f"{what}: not the answer for an absent one: {theirs.body} vs {absent.body}")
        gpus = self.expect("GET /gpus by another user", request("GET", "/api/v1/gpus", token=other), 200).json()
        shown = [(g["holder"], g["held"]) for g in gpus["gpus"]]
        seen_by_admin = self.send(request("GET", "/api/v1/gpus", token=admin)).json()["gpus"]
        if shown != [("", bool(g["holder"])) for g in seen_by_admin] or not any(g["holder"] for g in seen_by_admin):
            self.failures.append(f"GET /gpus by another user names or hides the admin's holders: {shown}")
        self.expect("GET /users/admin/tokens by another user",
                    request("GET", "/api/v1/users/admin/tokens", token=other), 403, "name", ("/users/{name}/tokens", "get"))
        self.expect("DELETE /users/admin/tokens/1 by another user",
                    request("DELETE", "/api/v1/users/admin/tokens/1", token=other), 403, "name",
                    ("/users/{name}/tokens/{id}", "delete"))
        self.another_users_volume(other)
        self.tokens_end(other, admin)

    def tokens_end(self, other, admin):
        def whoami(token):
            return self.send(request("GET", "/api/v1/whoami", token=token)).status
        short = self.send(request("POST", "/api/v1/users/hostile-other/tokens", {"expires_in": 3}, other)).json()
        if whoami(short["token"]) != 200:
            self.failures.append("a token with 3 s to live was refused at once")
        deadline = time.time() + 15
        while whoami(short["token"]) == 200 and time.time() < deadline:
            time.sleep(0.2)
        self.expect("a token past its expiry", request("GET", "/api/v1/whoami", token=short["token"]), 401,
                    "Authorization", ("/whoami", "get"))
        listed = self.send(request("GET", "/api/v1/users/hostile-other/tokens", token=other)).json()["tokens"]
        if [t["expired"] for t in listed if t["id"] == short["id"]] != [True]:
            self.failures.append(f"the expired token is not listed as expired: {listed}")
        spare = self.send(request("POST", "/api/v1/users/hostile-other/tokens", {}, other)).json()
        self.expect("revoke a token", request("DELETE", f"/api/v1/users/hostile-other/tokens/{spare['id']}",
                                              token=other), 200, None, ("/users/{name}/tokens/{id}", "delete"))
        self.expect("a revoked token", request("GET", "/api/v1/whoami", token=spare["token"]), 401, "Authorization")
        self.expect("delete a user", request("DELETE", "/api/v1/users/hostile-other", token=admin), 200, None,
                    ("/users/{name}", "delete"))
        self.expect("a deleted user's token", request("GET", "/api/v1/whoami", token=other), 401, "Authorization")

    def volume_files(self):
        token, files = self.edtd.token, ("/volumes/{name}/files", "put")
        volume_dir = os.path.join(self.edtd.dir, "data", "volumes", "hostile-vol")
        target = "/api/v1/volumes/hostile-vol/files?path="
        for path in ("..%2F..%2Fescape", "%2Fescape", "a%2F%2e%2e%2F%2e%2e%2F%2e%2e%2Fescape", "%2e%2e", "a%2F.%2Fb", "a%00b",
                     "a%0d%0ab", "a%1bb", "a%7f", "a%2F%2Fb", "a%2F", "x" * 256, "ab%2F" * 400 + "c", "", "%ff"):
            self.expect(f"PUT a file at path={path[:40]}", request("PUT", target + path, b"x", token), 400, "path", files)
        self.expect("PUT a file with path twice", request("PUT", target + "a&path=b", b"x", token), 400, "path", files)
        os.symlink(self.edtd.dir, os.path.join(volume_dir, "out"))
        self.expect("PUT a file through a link in the volume", request("PUT", target + "out%2Fescape", b"x", token), 409,
                    "path", files)
        os.symlink(os.path.join(self.edtd.dir, "edtd.log"), os.path.join(volume_dir, "log"))
        self.expect("PUT a file over a link in the volume", request("PUT", target + "log", b"x", token), 409, "path", files)
        if any(os.path.exists(os.path.join(d, "escape")) for d in (self.edtd.dir, os.path.join(self.edtd.dir, "data"),
                                                                      os.path.dirname(self.edtd.dir), "/escape")):
            self.failures.append("an upload wrote a file outside its volume")
        over = {"Content-Length": str(32 * 1024 * 1024 + 1)}
        self.expect("PUT a file over the upload limit", request("PUT", target + "big", b"", token, over, False), 413, "",
                    files)
        self.expect("PUT 2 MiB without a token", request("PUT", target + "big", b"", None, {"Content-Length": str(2 << 20)},
                                                         False), 413, "", files)
        self.expect("PUT a file without Content-Length", request("PUT", target + "big", b"x", token, length=False), 411,
                    "Content-Length", files)
        if os.path.exists(os.path.join(volume_dir, "big")):
            self.failures.append("a refused upload left a file")
        data = bytes(range(256)) * 4
        self.expect("PUT a file of every byte", request("PUT", target + "dir%2Fevery%20byte.bin", data, token), 200, None,
                    files)
        with open(os.path.join(volume_dir, "dir", "every byte.bin"), "rb") as f:
            if f.read() != data:
                self.failures.append("the uploaded file does not hold the bytes sent")
        for path, query, field in (("/clusters/{name}/events", "type=nope", "type"), ("/clusters/{name}/events", "since=1", "since"),
                                   ("/clusters/{name}/events", "since=2026-02-30T00:00:00Z", "since"),
                                   ("/clusters/{name}/jobs", "state=%00", "state"), ("/clusters/{name}/jobs", "container=..", "container"),
                                   ("/clusters/{name}/jobs", "state=Running&state=Failed", "state")):
            self.expect(f"GET {path}?{query}", request("GET", self.target(path, {"name": CLUSTER}) + "?" + query, token=token),
                        400, field, (path, "get"))

    def another_users_volume(self, other):
        what = "PUT a file into the admin's volume by another user"
        theirs = self.expect(what, request("PUT", "/api/v1/volumes/hostile-vol/files?path=x", b"x", other), 404, "name",
                             ("/volumes/{name}/files", "put"))
        absent = self.send(request("PUT", "/api/v1/volumes/no-such/files?path=x", b"x", other))
        if theirs.body.replace("hostile-vol", "NAME") != absent.body.replace("no-such", "NAME"):
            self.failures.append(f"{what}: not the answer for an absent one: {theirs.body} vs {absent.body}")

    def setup(self):
        for method, path, body in (("POST", "/api/v1/volumes", {"name": "hostile-vol"}),
                                   ("POST", "/api/v1/users", {"name": "hostile-user"}),
                                   ("POST", "/api/v1/clusters", {"name": CLUSTER, "framework": "horovod",
                                                                 "containers": 2,
                                                                 "gpu": {"model": "NVIDIA-P4", "count": 2}})):
            answer = self.send(request(method, path, body, self.edtd.token))
            if answer.status != 201:
                raise RuntimeError(f"{method} {path}: {answer.status} {answer.body[:300]}")


class Fuzz:
    """Requests mutated from valid ones; counts the answers by status."""

    def __init__(self, hostile, seed):
        self.h = hostile
        self.rng = random.Random(seed)
        self.statuses = {}
        self.server_errors = []
        self.templates_ = self.templates()

    def templates(self):
        out = [("GET", "/api/v1/clusters", None), ("GET", f"/api/v1/clusters/{CLUSTER}/events", None),
               ("GET", "/api/v1/jobs/1/log?follow=false", None), ("DELETE", "/api/v1/volumes/nothing", None)]
        for path, method in self.h.operations():
            name, body = self.h.body_schema(path, method)
            values = self.h.valid_parameters(path)
            if method == "delete":
                values["name"] = "hostile-two"  # not the cluster the other requests need
            out.append((method.upper(), self.h.target(path, values), body))
        return out

    def random_value(self):
        r = self.rng.random()
        if r < 0.15:
            return deep(self.rng.choice([1, 31, 32, 33, 1000, 100_000]))
        if r < 0.3:
            return "x" * self.rng.choice([0, 1, 64, 65_536, 600_000])
        if r < 0.45:
            return self.rng.choice([2 ** 63, 2 ** 64, -(2 ** 63) - 1, 10 ** 30, -1, 0, 1.5, 1e308])
        return self.rng.choice(list(VALUES.values()))

    def mutate_value(self, body):
        """A type swap, deletion or huge value somewhere in the body (as JSON text)."""
        body = copy.deepcopy(body) if body is not None else {}
        nodes = [[]]
        stack = [([], body)]
        while stack:
            path, node = stack.pop()
            items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
            for key, item in items:
                nodes.append(path + [key])
                stack.append((path + [key], item))
        where = self.rng.choice(nodes)
        value = self.random_value()
        text_value = value if isinstance(value, str) and value.startswith("[") else json.dumps(value)
        if not where:
            return text_value if self.rng.random() < 0.5 else json.dumps(body)
        marker = "\u2603hostile-marker\u2603"
        if self.rng.random() < 0.3:
            parent = body
            for part in where[:-1]:
                parent = parent[part]
            del parent[where[-1]]
            return json.dumps(body)
        return json.dumps(set_at(body, where, marker)).replace(json.dumps(marker), text_value, 1)

    def mutate_bytes(self, data):
        data = bytearray(data)
        for _ in range(self.rng.randint(1, 8)):
            if data:
                data[self.rng.randrange(len(data))] = self.rng.randrange(256)
        return bytes(data)

    def one(self):
        method, target, body = self.rng.choice(self.templates_)
        token = self.h.edtd.token
        r = self.rng.random()
        if r < 0.1:
            method = self.rng.choice(["GET", "POST", "PATCH", "DELETE", "PUT", "OPTIONS", "HEAD"])
        if 0.1 <= r < 0.2:
            target = target + "/" + self.rng.choice(["%ff", "..", "%00", "x" * 300, "%2e%2e", "?a=%ff&b"])
        text = json.dumps(body) if body is not None else None
        if body is not None and self.rng.random() < 0.7:
            text = self.mutate_value(body)
        if text is not None and self.rng.random() < 0.2:
            key = self.rng.choice(list(body) or ["k"])
            text = "{" + json.dumps(key) + ": 1, " + text[1:] if text.startswith("{") else text
        data = request(method, target, text, token)
        if self.rng.random() < 0.25:
            head, _, rest = data.partition(b"\r\n\r\n")
            # Byte flips in the body, or in the request line and headers.
            data = head + b"\r\n\r\n" + self.mutate_bytes(rest) if rest and self.rng.random() < 0.6 else \
                self.mutate_bytes(head) + b"\r\n\r\n" + rest
        return method, target, data

    def run(self, count):
        start = time.time()
        for i in range(count):
            method, target, data = self.one()
            # A flip that made Content-Length larger than the body: edtd waits
            # for the rest (its read timeout), as for any slow client; not
            # waited for here.
            short = announces_more(data)
            try:
                answer = exchange(self.h.edtd.port, data, timeout=0.5 if short else 30)
            except socket.timeout:
                answer = Answer(-1, {}, "")
                if not short:
                    self.server_errors.append(f"{method} {target[:80]}: no answer in 30 s; sent {data[:300]!r}")
            self.statuses[answer.status] = self.statuses.get(answer.status, 0) + 1
            if answer.status >= 500:
                self.server_errors.append(f"{method} {target[:80]}: {answer.status} {answer.body[:200]!r}; sent {data[:300]!r}")
            if i % 100 == 0:
                self.h.alive(f"fuzz request {i}")
                self.clean_up()
        self.h.alive("the fuzz run")
        self.clean_up()
        return time.time() - start

    def clean_up(self):
        """Deletes the clusters a mutated create made, so they do not pile up."""
        status, listed = self.h.edtd.api("GET", "/clusters")
        for c in listed.get("clusters", []) if status == 200 else []:
            if c["name"] != CLUSTER and not c["status"]["phase"] == "Deleting":
                self.h.edtd.api("DELETE", "/clusters/" + c["name"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edtd", required=True)
    parser.add_argument("--document", required=True)
    parser.add_argument("--fuzz", type=int, default=3000, help="mutated requests in the fuzz run")
    parser.add_argument("--seed", type=int, default=int(os.environ.get("EDT_HOSTILE_SEED", "14")))
    args = parser.parse_args()
    with open(args.document) as f:
        contract = contract_test.Contract(json.load(f))
    edtd = ScratchEdtd(args.edtd, ADDRESSES)
    try:
        hostile = Hostile(contract, edtd)
        hostile.setup()
        for case in (hostile.not_utf8, hostile.nesting, hostile.types, hostile.keys, hostile.framing,
                     hostile.volume_files, hostile.another_user):
            case()
        fuzz = Fuzz(hostile, args.seed)
        seconds = fuzz.run(args.fuzz)
        answer = exchange(edtd.port, request("GET", "/healthz"))
        if answer.status != 200:
            contract.failures.append(f"GET /healthz after the fuzz run: {answer.status}")
    finally:
        edtd.stop()
    for failure in contract.failures + fuzz.server_errors[:20]:
        print("FAIL:", failure)
    print(f"{hostile.cases} hostile cases, {len(contract.failures)} failed; fuzz: {args.fuzz} requests "
          f"(seed {args.seed}) in {seconds:.1f} s, by status {dict(sorted(fuzz.statuses.items()))}, "
          f"{len(fuzz.server_errors)} 5xx; edtd alive; the slowest case: {hostile.slowest[1]} "
          f"({hostile.slowest[0]:.2f} s)")
    return 1 if contract.failures or fuzz.server_errors else 0


if __name__ == "__main__":
    sys.exit(main())
