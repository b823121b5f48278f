#!/usr/bin/env python3
"""edtd against its API contract (api/openapi.json).

Starts a real edtd (a fresh data dir, simulated GPUs, a loopback port; root
and bubblewrap, as the platform's other integration tests), makes a cluster,
a job, a volume, an image (and one imported from an OCI layout) and a user, then sends a request to every path and
method the document lists: a valid one, an invalid one where the operation
takes a body, and one without a token where it needs one. Each answer's
status must be one the document lists for that operation, and each JSON body
must validate against the schema documented for that status (jsonschema,
with OpenAPI 3.0's `nullable` read as JSON Schema). A path the document does
not have must get the documented 404 error, and GET /openapi.json must serve
the file itself.

  contract_test.py --edtd build/src/control/edtd --document api/openapi.json
"""
import argparse
import hashlib
import io
import json
import os
import sys
import tarfile
import tempfile
import time

import jsonschema

from harness import oci_registry
from harness.edtd import ScratchEdtd

METHODS = ("get", "post", "patch", "put", "delete")
# The body of an operation that takes raw bytes (application/octet-stream).
RAW_EXAMPLE = b"contract bytes\n"
CLUSTER = "contract"
# A valid request body for each documented request schema. A new schema with
# no example here fails the test: add one.
EXAMPLES = {
    "ClusterSpec": {"name": "contract-two", "framework": "horovod", "containers": 2, "shm": "64M", "cpus": "0.5"},
    "Scale": {"containers": 2},
    "JobRequest": {"command": "echo contract"},
    "VolumeRequest": {"name": "contract-vol-two"},
    "ImageRequest": {"name": "contract-image", "root": "/", "frameworks": ["horovod"]},
    "UserRequest": {"name": "contract-user-two"},
    "TokenRequest": {"expires_in": "90d", "description": "contract"},
    "TerminalRequest": {},
    "JupyterRequest": {},
    "TeamRequest": {"name": "contract-team-two"},
    "QuotaRequest": {"guaranteed": 2, "borrow_limit": 1},
    "UserTeam": {"team": "contract-team"},
    # "path" is filled in by write_oci_layout(), outside edtd's data dir.
    "ImageImportRequest": {"name": "contract-imported", "path": "/nonexistent"},
    # registry.invalid is reached through its mirror, harness/oci_registry.py, serving the layout below.
    "ImagePullRequest": {"reference": "registry.invalid/contract/image", "name": "contract-pulled"},
}


def write_oci_layout(directory):
    """A one-layer OCI image layout (a root of /usr and /etc) at `directory`."""
    def blob(data):
        digest = hashlib.sha256(data).hexdigest()
        os.makedirs(os.path.join(directory, "blobs", "sha256"), exist_ok=True)
        with open(os.path.join(directory, "blobs", "sha256", digest), "wb") as f:
            f.write(data)
        return {"digest": "sha256:" + digest, "size": len(data)}

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in ("usr", "etc"):
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
    layer = out.getvalue()
    config = {"architecture": "amd64", "os": "linux", "config": {"Env": ["CONTRACT=1"], "WorkingDir": "/"},
              "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer).hexdigest()]}}
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **blob(json.dumps(config).encode())},
                "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **blob(layer)}]}
    index = {"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                                  **blob(json.dumps(manifest).encode())}]}
    with open(os.path.join(directory, "index.json"), "w") as f:
        json.dump(index, f)
    with open(os.path.join(directory, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)


def to_json_schema(node):
    """OpenAPI 3.0 schema objects as JSON Schema: nullable: true -> or null."""
    if isinstance(node, list):
        return [to_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: to_json_schema(v) for k, v in node.items() if k != "nullable"}
    if node.get("nullable"):
        return {"anyOf": [out, {"type": "null"}]}
    return out


class Contract:
    def __init__(self, document):
        self.doc = document
        self.components = to_json_schema(document["components"])
        self.failures = []
        self.seen = set()  # (path, method) exercised

    def resolve(self, node):
        while "$ref" in node:
            kind, name = node["$ref"].split("/")[-2:]
            node = self.doc["components"][kind][name]
        return node

    def operation(self, path, method):
        return self.doc["paths"][path][method]

    def request_schema_name(self, path, method):
        body = self.operation(path, method).get("requestBody")
        if not body or "application/json" not in body["content"]:
            return None
        return body["content"]["application/json"]["schema"]["$ref"].split("/")[-1]

    def takes_bytes(self, path, method):
        return "application/octet-stream" in self.operation(path, method).get("requestBody", {}).get("content", {})

    def needs_token(self, path, method):
        return self.operation(path, method).get("security", self.doc["security"]) != []

    def check(self, path, method, status, content_type, body, what):
        """Records a failure unless the answer is one the document lists."""
        self.seen.add((path, method))
        where = f"{method.upper()} {path} ({what})"
        responses = self.operation(path, method)["responses"]
        if str(status) not in responses:
            self.failures.append(f"{where}: status {status} is not documented (documented: {sorted(responses)}); body: {body[:300]!r}")
            return
        response = self.resolve(responses[str(status)])
        content = response.get("content", {})
        if not content:
            return
        kind = content_type.split(";")[0].strip()
        if kind not in content:
            self.failures.append(f"{where}: {status} came as {kind}, documented as {sorted(content)}")
            return
        if kind != "application/json":
            return
        try:
            value = json.loads(body)
        except ValueError as e:
            self.failures.append(f"{where}: {status} body is not JSON ({e}): {body[:300]!r}")
            return
        schema = {"allOf": [to_json_schema(content[kind]["schema"])], "components": self.components}
        errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(value), key=lambda e: list(e.path))
        for e in errors[:3]:
            self.failures.append(f"{where}: {status} body does not match its schema at {list(e.absolute_path)}: {e.message}")
        if status >= 400 and not errors and value["error"]["status"] != status:
            self.failures.append(f"{where}: error.status {value['error']['status']} is not the HTTP status {status}")


class Run:
    """One pass over the document against one edtd."""

    def __init__(self, contract, edtd):
        self.c = contract
        self.edtd = edtd
        self.valid_done = set()
        self.values = {}

    def url(self, path, method="get"):
        prefix = self.c.doc["paths"][path].get("servers", self.c.doc["servers"])[0]["url"].rstrip("/")
        filled = path
        for param, value in self.params(path).items():
            filled = filled.replace("{" + param + "}", value)
        return prefix + filled + self.query(path, method)

    @staticmethod
    def query(path, method):
        """A volume's file: written (put), read, deleted; its folder: listed."""
        if path.endswith("/log"):
            return "?follow=false"
        if path.endswith("/files"):
            return "?path=contract" if method == "get" else "?path=contract/file.txt"
        return "?path=contract/file.txt" if path.endswith("/files/content") else ""

    def params(self, path):
        """The existing object each path parameter names."""
        owner = {"/clusters": "cluster", "/volumes": "volume", "/users": "user", "/jobs": "job", "/teams": "team",
                 "/images": "image"}
        first = "/" + path.split("/")[1]
        out = {}
        if "{name}" in path:
            out["name"] = self.values[owner[first]]
        if "{id}" in path:
            out["id"] = self.values["token" if first == "/users" else "job"]
        if "{container}" in path:
            out["container"] = self.values["cluster"] + "-launcher"
        if "{model}" in path:
            out["model"] = "NVIDIA-P4"
        return out

    def send(self, path, method, what, body=None, raw=None, token=True, url=None):
        status, kind, text = self.edtd.send(method.upper(), url or self.url(path, method), body,
                                            self.edtd.token if token else None, raw)
        self.c.check(path, method, status, kind, text, what)
        return status, text

    def valid(self, path, method, body=None):
        schema = self.c.request_schema_name(path, method)
        if schema and body is None:
            if schema not in EXAMPLES:
                self.c.failures.append(f"{method.upper()} {path}: no example body for {schema} in contract_test.py")
                return None
            body = EXAMPLES[schema]
        raw = RAW_EXAMPLE if self.c.takes_bytes(path, method) else None
        status, text = self.send(path, method, "a valid request", body=body, raw=raw)
        self.valid_done.add((path, method))
        if status >= 300:
            self.c.failures.append(f"{method.upper()} {path}: a valid request was refused ({status}): {text[:300]}")
            return None
        return json.loads(text) if text.startswith("{") else text

    def wait_running(self):
        deadline = time.time() + 120
        while time.time() < deadline:
            status, cluster = self.edtd.api("GET", "/clusters/" + CLUSTER)
            if status == 200 and cluster["status"]["phase"] == "Running":
                return
            time.sleep(0.2)
        raise RuntimeError("the cluster did not become Running; edtd's log:\n" + self.edtd.read_log())

    def setup(self):
        """A Running cluster with a finished job, a volume and a user."""
        self.values = {"cluster": CLUSTER, "volume": "contract-vol", "user": "contract-user", "team": "contract-team",
                       "image": EXAMPLES["ImageImportRequest"]["name"]}
        self.valid("/teams", "post", {"name": self.values["team"]})
        self.valid("/clusters", "post", {"name": CLUSTER, "framework": "horovod", "containers": 2})
        self.wait_running()
        job = self.valid("/clusters/{name}/jobs", "post", {"command": "true"})
        self.values["job"] = str(job["id"]) if job else "0"
        self.valid("/volumes", "post", {"name": self.values["volume"]})
        self.valid("/volumes/{name}/files", "put")  # the file the files routes read
        user = self.valid("/users", "post", {"name": self.values["user"]})
        self.values["token"] = str(user["id"]) if user else "0"
        deadline = time.time() + 30
        while time.time() < deadline and self.edtd.api("GET", "/jobs/" + self.values["job"])[1].get("state") == "Running":
            time.sleep(0.1)

    def operations(self, methods=METHODS):
        for path, item in self.c.doc["paths"].items():
            for method in methods:
                if method in item:
                    yield path, method

    def sweep(self):
        for path, method in self.operations(("get", "post", "patch", "put")):
            if (path, method) not in self.valid_done:
                self.valid(path, method)
        for path, method in self.operations():
            if self.c.request_schema_name(path, method):
                self.send(path, method, "a body that is not JSON", raw=b"not json")
                self.send(path, method, "an empty object", body={})
            if self.c.needs_token(path, method):
                self.send(path, method, "no token", token=False)
        self.send("/clusters/{name}", "get", "an unknown cluster", url="/api/v1/clusters/no-such-cluster")
        self.send("/jobs/{id}", "get", "an unknown job", url="/api/v1/jobs/999999")
        events, jobs = "/clusters/{name}/events", "/clusters/{name}/jobs"
        for path, query in ((events, "type=Scaling&since=2026-01-01T00:00:00Z"), (jobs, "state=Succeeded&container=contract-launcher"),
                            (events, "type=scaling"), (events, "since=now"), (jobs, "state=done"), (jobs, "colour=red")):
            self.send(path, "get", "a filter: " + query, url=self.url(path) + "?" + query)
        files = "/volumes/{name}/files"
        for query in ("path=../escape", "path=%2Fetc%2Fpasswd", "", "path=a&path=b"):
            self.send(files, "put", "a bad path: " + query, raw=RAW_EXAMPLE, url=self.url(files).split("?")[0] + "?" + query)

    def undocumented_route(self):
        for url in ("/api/v1/no-such-route", "/api/v1/clusters/x/y/z"):
            status, kind, text = self.edtd.send("GET", url, token=self.edtd.token)
            not_found = self.c.doc["components"]["responses"]["NotFound"]["content"]["application/json"]["schema"]
            schema = {"allOf": [not_found], "components": self.c.components}
            if status != 404 or not kind.startswith("application/json"):
                self.c.failures.append(f"GET {url} (undocumented): {status} {kind}, not the documented 404 error")
                continue
            for e in jsonschema.Draft7Validator(schema).iter_errors(json.loads(text)):
                self.c.failures.append(f"GET {url} (undocumented): the 404 body does not match Error: {e.message}")

    def deletes(self):
        # A resource's parts (a volume's file) before the resource.
        for path, method in sorted(self.operations(("delete",)), key=lambda op: -op[0].count("/")):
            self.valid(path, method)

    def served_document(self, text):
        status, _, served = self.edtd.send("GET", "/api/v1/openapi.json")
        if status != 200 or served != text:
            self.c.failures.append("GET /api/v1/openapi.json does not serve api/openapi.json as written")

    def examples(self):
        """The test's own request bodies must be valid by the document."""
        for name, body in EXAMPLES.items():
            schema = {"allOf": [{"$ref": "#/components/schemas/" + name}], "components": self.c.components}
            for e in jsonschema.Draft7Validator(schema).iter_errors(body):
                self.c.failures.append(f"the example {name} in contract_test.py is not valid: {e.message}")

    def coverage(self):
        for path, method in self.operations():
            if (path, method) not in self.c.seen:
                self.c.failures.append(f"{method.upper()} {path}: documented but never requested")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edtd", required=True)
    parser.add_argument("--document", required=True)
    args = parser.parse_args()
    with open(args.document) as f:
        text = f.read()
    contract = Contract(json.loads(text))
    layout = tempfile.TemporaryDirectory(prefix="edt-contract-image-")
    write_oci_layout(layout.name)
    EXAMPLES["ImageImportRequest"]["path"] = layout.name
    mirror = oci_registry.serve(layout.name)
    edtd = ScratchEdtd(args.edtd, extra=["--registry-mirror", "registry.invalid=" + mirror.url])
    try:
        run = Run(contract, edtd)
        run.served_document(text)
        run.examples()
        run.setup()
        run.sweep()
        run.undocumented_route()
        run.deletes()
        run.coverage()
    finally:
        edtd.stop()
        mirror.shutdown()
        layout.cleanup()
    operations = sum(1 for _ in run.operations())
    for failure in contract.failures:
        print("FAIL:", failure)
    print(f"{operations} documented operations checked; {len(contract.failures)} disagreements")
    return 1 if contract.failures else 0


if __name__ == "__main__":
    sys.exit(main())
