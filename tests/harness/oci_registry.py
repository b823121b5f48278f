"""A registry of one OCI image layout, read-only, over plain http on
loopback, for the tests that pull (tests/images, tests/contract): what an
edtd with `--registry-mirror NAME=http://127.0.0.1:PORT` asks first.

It speaks the OCI distribution protocol's reads: GET /v2/, manifests by
tag (the layout's org.opencontainers.image.ref.name annotation; "latest"
is a layout's only manifest when none is named) or digest, and blobs. It
wants an anonymous Bearer token, as Docker Hub does: a 401 names its realm
(/token on the same server), which answers any scope and records it in
`scopes`. Any repository name serves the same layout. serve() returns the
server, running on a daemon thread until its shutdown().

Also the real one: make_ca() and start_distribution() run Debian's
docker-registry (the CNCF distribution registry) on loopback with TLS from
a CA made here and htpasswd (bcrypt) auth, for tests/images and
bench/images/pull_bench.py.
"""
import http.server
import json
import os
import shutil
import socket
import subprocess
import threading
import time


class _Handler(http.server.BaseHTTPRequestHandler):
    layout = None
    scopes = None
    token = None

    def log_message(self, *args):
        pass

    def answer(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def manifest_digest(self, tag):
        manifests = json.load(open(self.layout + "/index.json"))["manifests"]
        named = [m["digest"] for m in manifests if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag]
        if not named and tag == "latest" and len(manifests) == 1:
            named = [manifests[0]["digest"]]
        return named[0] if named else None

    def do_GET(self):
        if self.path.startswith("/token?"):
            self.scopes.append(self.path)
            return self.answer(200, json.dumps({"token": self.token}).encode())
        if self.headers.get("Authorization") != "Bearer " + self.token:
            challenge = 'Bearer realm="http://127.0.0.1:%d/token",service="edt-test"' % self.server.server_address[1]
            return self.answer(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}', [("WWW-Authenticate", challenge)])
        if self.path == "/v2/":
            return self.answer(200, b"{}")
        parts = self.path.split("/")
        kind, ref = parts[-2], parts[-1]
        if kind == "manifests" and not ref.startswith("sha256:"):
            ref = self.manifest_digest(ref)
        path = self.layout + "/blobs/sha256/" + (ref or "")[len("sha256:"):]
        if not ref or not os.path.isfile(path):
            return self.answer(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}')
        media = "application/vnd.oci.image.manifest.v1+json" if kind == "manifests" else "application/octet-stream"
        with open(path, "rb") as f:
            body = f.read()
        if kind != "blobs" or not self.server.rate:
            return self.answer(200, body, [("Content-Type", media)])
        self.send_response(200)
        self.send_header("Content-Type", media)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        chunk = 64 << 10
        for at in range(0, len(body), chunk):  # at `rate` bytes a second
            self.wfile.write(body[at:at + chunk])
            time.sleep(chunk / self.server.rate)


def serve(layout):
    """Serves `layout` on 127.0.0.1 (a free port); .scopes lists the token
    requests; setting .rate (bytes a second) slows the blobs down."""
    handler = type("Handler", (_Handler,), {"layout": layout, "scopes": [], "token": "test-token-%d" % os.getpid()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.scopes = handler.scopes
    server.rate = None
    server.url = "http://127.0.0.1:%d" % server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _run(*argv):
    return subprocess.run(argv, check=True, capture_output=True, text=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_ca(d):
    """A CA (d/ca.crt, and d/certs/ca.crt for skopeo's --*-cert-dir) and a server certificate for 127.0.0.1."""
    _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=edt test CA",
         "-keyout", d + "/ca.key", "-out", d + "/ca.crt")
    _run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
         "-keyout", d + "/server.key", "-out", d + "/server.csr")
    with open(d + "/ext", "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    _run("openssl", "x509", "-req", "-in", d + "/server.csr", "-CA", d + "/ca.crt", "-CAkey", d + "/ca.key",
         "-CAcreateserial", "-days", "2", "-extfile", d + "/ext", "-out", d + "/server.crt")
    os.makedirs(d + "/certs")
    shutil.copy(d + "/ca.crt", d + "/certs/ca.crt")


def start_distribution(d, port, user, password):
    """docker-registry on 127.0.0.1:port, TLS with make_ca(d)'s certificate, `user` by htpasswd; its process."""
    with open(d + "/htpasswd", "w") as f:
        f.write(_run("htpasswd", "-Bbn", user, password).stdout)
    config = {"version": 0.1, "log": {"level": "error"},
              "storage": {"filesystem": {"rootdirectory": d + "/storage"}},
              "http": {"addr": "127.0.0.1:%d" % port, "tls": {"certificate": d + "/server.crt", "key": d + "/server.key"}},
              "auth": {"htpasswd": {"realm": "edt-test", "path": d + "/htpasswd"}}}
    with open(d + "/config.yml", "w") as f:
        json.dump(config, f)  # JSON is YAML
    proc = subprocess.Popen(["docker-registry", "serve", d + "/config.yml"], stdout=open(d + "/registry.log", "w"),
                            stderr=subprocess.STDOUT)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("docker-registry did not listen: " + open(d + "/registry.log").read())
