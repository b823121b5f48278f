"""edtd pulls images from a real registry (docs/images.md, "Pulls").

Debian's docker-registry (the CNCF distribution registry) on loopback, with
TLS from a CA this test makes (openssl) and htpasswd (bcrypt) auth. Images
are written here as an OCI layout from small trees (the host's bash and its
libraries, no OpenSSH: containers run edt's own sshd) and pushed with skopeo. An anonymous
Bearer mirror (harness/oci_registry.py, serving the test's layout over
http) stands for a registry that cannot be reached. Then edtd pulls:

  - an image (gzip layers), by the CLI with --password-stdin, then a cluster
    of it runs a command with the image's Env and WorkingDir, as its User
    (a name in its /etc/passwd, with a group it lists it in), at a writable
    home that holds what the image had there; `edt ssh` logs in as that
    user, and ssh from the launcher reaches a worker as it (mpirun's way);
  - a second image sharing its base layer: only the new blobs are fetched
    (bytes counted), and a third pushed with zstd layers;
  - a manifest list of linux/arm64 and linux/amd64: amd64 is chosen;
  - an image through the mirror (Bearer token flow) of an unreachable registry;
  - refusals: wrong credentials (clear, no password in the answer, the log
    or the database), a manifest whose layer size lies, a blob whose digest
    is wrong (the registry's storage corrupted), a missing tag;
  - a pull killed (kill -9 of edtd) at several points, then a retry that
    succeeds, leaving no image record behind the killed ones.
"""
import argparse
import base64
import hashlib
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from harness import oci_registry
from harness.oci_layout import Layout, add_dir, add_file, add_trainer, tiny_root
from harness.edtd import ScratchEdtd, cleanup

USER, PASSWORD = "puller", "s3cret-Pa55-%d" % os.getpid()
FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILURES.append(what)


def run(*argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


free_port, make_ca = oci_registry.free_port, oci_registry.make_ca


def start_registry(d, port):
    return oci_registry.start_distribution(d, port, USER, PASSWORD)


def build_images(d):
    """A layout with tags a, b, zst, big (24 MiB), liar, corrupt, ghost: each the base layer and a layer of its own
    (/work, the User's entries in /etc, its home); ghost's User is a name its /etc/passwd lacks."""
    tiny_root(d + "/root")
    layout = Layout(d + "/layout")
    base = layout.layer(lambda tar: [tar.add(d + "/root/" + top, arcname=top) for top in sorted(os.listdir(d + "/root"))])
    for tag, size in (("a", 1000), ("b", 2000), ("zst", 3000), ("big", 24 << 20), ("liar", 4000), ("corrupt", 5000),
                      ("ghost", 6000)):
        data = b"in image %s\n" % tag.encode() + os.urandom(size)

        def add(tar, data=data):
            add_dir(tar, "work")
            add_file(tar, "work/marker", data)
            add_trainer(tar, d + "/root")
        layout.image(tag, [base, layout.layer(add)],
                     {"WorkingDir": "/work", "Env": ["PATH=/usr/bin:/bin", "EDT_PULLED=" + tag],
                      "User": "ghost" if tag == "ghost" else "trainer",
                      "Labels": {"org.example.tag": tag}})
    return layout.path


def push(d, layout, tag, port, repo, compress=None):
    extra = ["--dest-compress-format", compress, "--dest-compress"] if compress else []
    run("skopeo", "copy", "--quiet", "--dest-cert-dir", d + "/certs", "--dest-creds", USER + ":" + PASSWORD, *extra,
        "oci:%s:%s" % (layout, tag), "docker://127.0.0.1:%d/%s" % (port, repo))


class Registry:
    """Requests to the test's registry, as its admin (for what skopeo cannot make)."""

    def __init__(self, d, port):
        self.base = "https://127.0.0.1:%d" % port
        self.ctx = ssl.create_default_context(cafile=d + "/ca.crt")
        self.auth = "Basic " + base64.b64encode((USER + ":" + PASSWORD).encode()).decode()

    def request(self, method, path, body=None, content_type=None, accept=None):
        r = urllib.request.Request(self.base + path, data=body, method=method)
        r.add_header("Authorization", self.auth)
        if content_type:
            r.add_header("Content-Type", content_type)
        r.add_header("Accept", accept or "application/vnd.oci.image.manifest.v1+json")
        with urllib.request.urlopen(r, context=self.ctx) as answer:
            return answer.read(), answer.headers

    def manifest(self, repo, ref):
        body, headers = self.request("GET", "/v2/%s/manifests/%s" % (repo, ref))
        return json.loads(body), body, headers.get("Content-Type")

    def put_manifest(self, repo, ref, doc, media_type):
        body = json.dumps(doc).encode()
        self.request("PUT", "/v2/%s/manifests/%s" % (repo, ref), body, media_type)
        return "sha256:" + hashlib.sha256(body).hexdigest()


def pull(edtd, reference, name=None, creds=True, timeout=120):
    body = {"reference": reference}
    if name:
        body["name"] = name
    if creds:
        body.update(username=USER, password=PASSWORD if creds is True else creds)
    status, _, text = edtd.send("POST", "/api/v1/images/pull", body, edtd.token, timeout=timeout)
    return status, json.loads(text) if text.startswith("{") else text


def edt_cli(args, env, stdin=None):
    return subprocess.run(args, input=stdin, capture_output=True, text=True, env=env, timeout=300)


def test_pull_and_run(edtd, reg, edt):
    """The CLI pulls image a with --password-stdin; a cluster of it runs a command in its Env and WorkingDir."""
    env = edtd.cli_env()
    out = edt_cli([edt, "image", "pull", reg + "/edt/a:1", "--name", "pulled-a", "--username", USER, "--password-stdin"],
                  env, PASSWORD + "\n")
    check(out.returncode == 0 and "pulled-a" in out.stdout, "edt image pull: " + out.stdout + out.stderr)
    status, listed = edtd.api("GET", "/images")
    image = [i for i in listed["images"] if i["name"] == "pulled-a"]
    check(len(image) == 1 and image[0]["source"] == reg + "/edt/a:1" and image[0]["user"] == "trainer"
          and image[0]["labels"].get("org.example.tag") == "a" and "EDT_PULLED=a" in image[0]["env"],
          "the pulled image's record: %s" % image)
    made = edt_cli([edt, "cluster", "create", "pulled", "--image", "pulled-a", "--containers", "2", "--wait"], env)
    check(made.returncode == 0, "a cluster of the pulled image: " + made.stdout + made.stderr)
    seen = edt_cli([edt, "exec", "pulled-worker-0", "--", "sh", "-c", 'pwd; read line < marker; echo "$line"; echo "$EDT_PULLED"'],
                   env)
    check(seen.stdout.split("\n")[:3] == ["/work", "in image a", "a"], "a command in the container: %r %r"
          % (seen.stdout, seen.stderr))
    check_user(edtd, edt, env)
    edt_cli([edt, "cluster", "delete", "--wait", "pulled"], env)


def check_user(edtd, edt, env):
    """The image's User runs the cluster's jobs and SSH sessions, at its home."""
    who = 'echo "$EUID $USER $HOME"; echo ${GROUPS[*]}; cat ~/from-image; echo made > ~/made && cat ~/made; ' \
          'touch /work/x 2>/dev/null || echo "/work is read-only"'
    seen = edt_cli([edt, "exec", "pulled-worker-0", "--", "bash", "-c", who], env)
    lines = seen.stdout.split("\n")
    check(lines[0] == "1234 trainer /home/trainer" and sorted(lines[1].split()) == ["1234", "2345"],
          "a job runs as the image's User trainer, in its groups: %r %r" % (seen.stdout, seen.stderr))
    check(lines[2:5] == ["the image's home", "made", "/work is read-only"],
          "its home holds the image's files and is writable; the image is not: %r" % seen.stdout)
    status, access = edtd.api("GET", "/clusters/pulled/ssh")
    check(status == 200 and access["user"] == "trainer", "GET /ssh names the login user: %s" % access.get("user"))
    hop = 'echo "$EUID $USER $PWD"; ssh pulled-worker-0 \'echo "$USER@$(cat /etc/hostname)"\''
    seen = edt_cli([edt, "ssh", "pulled", "pulled-launcher", "--", "bash", "-c", hop], env)
    check(seen.stdout.split("\n")[:2] == ["1234 trainer /home/trainer", "trainer@pulled-worker-0"],
          "edt ssh logs in as trainer, and its ssh reaches a worker as trainer: %r %r" % (seen.stdout, seen.stderr))


def test_shared_layers(edtd, reg, registry):
    """b shares a's base layer: its manifest, config and one layer are fetched, the base reused."""
    status, got = pull(edtd, reg + "/edt/b:1", "pulled-b")
    check(status == 201, "pull b: %s %s" % (status, got))
    if status == 201:
        check(got["fetched_blobs"] == 3 and got["reused_blobs"] == 1 and got["fetched_bytes"] < 64 << 10,
              "b fetched only its new blobs: %s" % {k: got[k] for k in ("fetched_blobs", "fetched_bytes", "reused_blobs")})
    layers = registry.manifest("edt/zst", "1")[0]["layers"]
    check(layers[-1]["mediaType"].endswith("+zstd"), "skopeo pushed zst's new layer as zstd: %s" % layers)
    status, got = pull(edtd, reg + "/edt/zst:1", "pulled-zst")
    check(status == 201 and got["fetched_blobs"] == 3, "pull the zstd image: %s %s" % (status, got))


def test_index(edtd, reg, registry):
    """A manifest list of linux/arm64 (b's manifest) and linux/amd64 (a's): a's."""
    entries = []
    for tag, arch in (("b", "arm64"), ("a", "amd64")):
        _, body, media_type = registry.manifest("edt/a", "1" if tag == "a" else tag)
        entries.append({"mediaType": media_type, "size": len(body), "digest": "sha256:" + hashlib.sha256(body).hexdigest(),
                        "platform": {"os": "linux", "architecture": arch}})
    media = "application/vnd.oci.image.index.v1+json"
    registry.put_manifest("edt/a", "multi", {"schemaVersion": 2, "mediaType": media, "manifests": entries}, media)
    status, got = pull(edtd, reg + "/edt/a:multi", "pulled-multi")
    check(status == 201 and got["image"]["digest"] == entries[1]["digest"] and got["fetched_blobs"] == 1,
          "an index resolves to linux/amd64: %s %s" % (status, got))


def test_mirror(edtd, gone, mirror):
    """The registry `gone` is unreachable; its mirror (anonymous Bearer) has the image: all 4 blobs come from it."""
    status, got = pull(edtd, gone + "/edt/anything:a", "mirrored", creds=False)
    check(status == 201 and got["fetched_blobs"] == 4, "a pull through the mirror: %s %s" % (status, got))
    check(any("scope=repository%3Aedt%2Fanything%3Apull" in s for s in mirror.scopes),
          "the mirror's token was asked for the repository's pull scope: %s" % mirror.scopes)


def watch_pulls(edtd, token, name, cli, first_only=False):
    """What GET /images/pulls said of pull `name`, 5 times a second, until the
    `cli` process ends (or 60 s), or until it is first listed."""
    seen, deadline = [], time.monotonic() + 60
    while cli.poll() is None and time.monotonic() < deadline and not (first_only and seen):
        status, _, text = edtd.send("GET", "/api/v1/images/pulls", None, token)
        seen += [p for p in json.loads(text)["pulls"] if p["name"] == name] if status == 200 else [status]
        time.sleep(0.2)
    return seen


def test_progress(edtd, gone, mirror, edt):
    """big (its 24 MiB layer served at 8 MiB/s by the mirror), pulled by the CLI: GET /images/pulls shows the
    pull to a user who is not the admin, from its request to its answer, its bytes growing within the layer;
    a second pull of its name meanwhile is refused; the CLI prints each step on stderr."""
    _, made = edtd.api("POST", "/users", {"name": "watcher"})
    mirror.rate = 8 << 20
    try:
        cli = subprocess.Popen([edt, "image", "pull", gone + "/edt/anything:big", "--name", "slow"], env=edtd.cli_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = watch_pulls(edtd, made["token"], "slow", cli, first_only=True)
        second = pull(edtd, gone + "/edt/anything:a", "slow", creds=False)
        seen += watch_pulls(edtd, made["token"], "slow", cli)
        out, err = cli.communicate(timeout=60)
    finally:
        mirror.rate = None
    check(cli.returncode == 0 and "image slow pulled" in out, "edt image pull through the slowed mirror: %s %s" % (out, err))
    check(seen and all(isinstance(p, dict) and p["reference"] == gone + "/edt/anything:big" for p in seen),
          "GET /images/pulls, as a user, lists the pull while it runs (%d answers)" % len(seen))
    dicts = [p for p in seen if isinstance(p, dict)]
    fetched = [p["bytes_fetched"] for p in dicts if p["phase"] == "fetching"]
    check(any(0 < p["bytes_fetched"] < p["bytes"] and p["layers"] == 2 and p["bytes"] > 24 << 20 for p in dicts)
          and fetched == sorted(fetched), "its bytes grow within the layer: %s" % [(p["phase"], p["layers_fetched"],
                                                                                    p["bytes_fetched"]) for p in dicts])
    check(second[0] == 409 and "being pulled" in str(second[1]), "a second pull of its name meanwhile: %s" % (second,))
    check(edtd.api("GET", "/images/pulls") == (200, {"pulls": []}), "no pull is listed once it ended")
    check("pulling slow: fetching: layers 1/2 fetched" in err, "the CLI's steps on stderr: %r" % err)
    check(edtd.api("DELETE", "/images/slow")[0] == 200, "delete slow (its layer is the kill test's)")


def test_refusals(edtd, reg, registry, d):
    status, got = pull(edtd, reg + "/edt/a:1", "wrong-creds", creds="not-the-password")
    text = json.dumps(got)
    check(status == 422 and got["error"]["field"] == "password" and "refused the credentials of user 'puller'" in text
          and "not-the-password" not in text, "wrong credentials: %s %s" % (status, text))
    status, got = pull(edtd, reg + "/edt/a:1", "no-creds", creds=False)
    check(status == 422 and "asks for credentials" in json.dumps(got), "no credentials: %s %s" % (status, got))
    status, got = pull(edtd, reg + "/edt/a:nosuchtag", "no-tag")
    check(status == 422 and "MANIFEST_UNKNOWN" in json.dumps(got), "a missing tag: %s %s" % (status, got))
    # A manifest that declares its new layer 100 bytes shorter than it is.
    doc, _, media = registry.manifest("edt/liar", "1")
    doc["layers"][-1]["size"] -= 100
    registry.put_manifest("edt/liar", "lies", doc, media)
    status, got = pull(edtd, reg + "/edt/liar:lies", "liar")
    check(status == 422 and "longer than the" in json.dumps(got), "a lying size: %s %s" % (status, got))
    # The registry's copy of corrupt's new layer, its bytes changed, its size not.
    doc, _, _ = registry.manifest("edt/corrupt", "1")
    hexd = doc["layers"][-1]["digest"].split(":")[1]
    data = "%s/storage/docker/registry/v2/blobs/sha256/%s/%s/data" % (d, hexd[:2], hexd)
    with open(data, "r+b") as f:
        f.seek(os.path.getsize(data) // 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0xFF]))
    status, got = pull(edtd, reg + "/edt/corrupt:1", "corrupt")
    check(status == 422 and "its content's digest is" in json.dumps(got), "a wrong digest: %s %s" % (status, got))
    status, got = pull(edtd, reg + "/edt/ghost:1", "ghost")
    check(status == 422 and "the image's User 'ghost': no user 'ghost' in the image's /etc/passwd" in json.dumps(got),
          "a User the image's /etc/passwd lacks: %s %s" % (status, got))
    names = [i["name"] for i in edtd.api("GET", "/images")[1]["images"]]
    check(not set(names) & {"wrong-creds", "no-creds", "no-tag", "liar", "corrupt", "ghost"},
          "no refused image is listed: %s" % names)


def test_kill_mid_pull(edtd, reg):
    """kill -9 of edtd at 20 to 600 ms into a pull of a 24 MiB layer; edtd restarts, lists no such image; the retry succeeds."""
    for delay in (0.02, 0.1, 0.25, 0.6):
        body = json.dumps({"reference": reg + "/edt/big:1", "name": "big", "username": USER, "password": PASSWORD})
        def send():
            try:
                edtd.send("POST", "/api/v1/images/pull", raw=body.encode(), token=edtd.token, timeout=30)
            except OSError:
                pass  # edtd was killed mid-answer
        sender = threading.Thread(target=send, daemon=True)
        try:
            sender.start()
            time.sleep(delay)
        finally:
            edtd.kill()
        sender.join(30)
        edtd.start()
        names = [i["name"] for i in edtd.api("GET", "/images")[1]["images"]]
        if "big" in names:  # the pull finished before the kill
            check(edtd.api("DELETE", "/images/big")[0] == 200, "delete big, pulled before the kill at %.2fs" % delay)
    status, got = pull(edtd, reg + "/edt/big:1", "big")
    check(status == 201, "the retry after kill -9: %s %s" % (status, got))
    left = os.listdir(os.path.join(edtd.data, "images", "tmp"))
    check(left == [], "the store's tmp/ is empty after the retry: %s" % left)


def test_secrets(edtd):
    """The password is nowhere in edtd's log or data directory (its database included)."""
    with open(edtd.log_path, "rb") as f:
        check(PASSWORD.encode() not in f.read(), "the password is not in edtd's log")
    found = []
    for top, _, files in os.walk(os.path.join(edtd.data)):
        for name in files:
            path = os.path.join(top, name)
            if "/images/" in path or not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                if PASSWORD.encode() in f.read():
                    found.append(path)
    check(not found, "the password is in no file of edtd's data dir: %s" % found)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--edtd", required=True)
    parser.add_argument("--edt", required=True)
    args = parser.parse_args()
    for tool in ("docker-registry", "skopeo", "htpasswd", "openssl"):
        if not shutil.which(tool):
            print("SKIP: %s is not installed (scripts/debian-packages.txt)" % tool)
            return 77
    d = tempfile.mkdtemp(prefix="edt-pull-")
    os.chmod(d, 0o755)
    registry_proc, mirror, edtd = None, None, None
    try:
        make_ca(d)
        port, gone = free_port(), "127.0.0.1:%d" % free_port()
        registry_proc = start_registry(d, port)
        layout = build_images(d)
        reg = "127.0.0.1:%d" % port
        for tag in ("a", "b", "big", "liar", "corrupt", "ghost"):
            push(d, layout, tag, port, "edt/%s:1" % tag)
        push(d, layout, "b", port, "edt/a:b")  # an index names manifests of its own repository
        push(d, layout, "zst", port, "edt/zst:1", compress="zstd")
        mirror = oci_registry.serve(layout)
        edtd = ScratchEdtd(args.edtd, addresses="127.236.0.0/24",
                           extra=["--registry-ca-file", d + "/ca.crt", "--registry-mirror", gone + "=" + mirror.url])
        registry = Registry(d, port)
        test_mirror(edtd, gone, mirror)
        test_progress(edtd, gone, mirror, args.edt)
        test_pull_and_run(edtd, reg, args.edt)
        test_shared_layers(edtd, reg, registry)
        test_index(edtd, reg, registry)
        test_refusals(edtd, reg, registry, d)
        test_kill_mid_pull(edtd, reg)
        test_secrets(edtd)
    finally:
        if edtd:
            if FAILURES:
                print(edtd.read_log())
            edtd.stop()
        if mirror:
            mirror.shutdown()
        if registry_proc:
            registry_proc.kill()
            registry_proc.wait()
        cleanup(d)
    print("%d failures" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
