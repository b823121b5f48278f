#!/usr/bin/env python3
"""Pull and unpack of a generated image from a loopback registry: edt beside
skopeo+umoci (and podman pull, when installed), and the disk's sequential
write rate, interleaved in one run (bench/images/RESULTS.md keeps figures).

The image: `image_bench --write-layout` (N gzip layers of 64 KiB files, half
random bytes, half text), pushed with skopeo to Debian's docker-registry on
127.0.0.1 with TLS (a CA made here) and htpasswd auth, as tests/images runs
it (tests/harness/oci_registry.py). Each round, in alternating order:

  - dd: 2 GiB of zeros written with O_DIRECT (the disk's sequential rate);
  - edt: `edt-image pull` into a fresh store: the library edtd's
    POST /api/v1/images/pull runs (fetch, verify, unpack with its checks and
    diff IDs, hard-link root, fsync/syncfs before each rename);
  - skopeo+umoci: `skopeo copy docker://... oci:DIR` then
    `umoci unpack --rootless` of it; the times of a `sync` after each tool
    are shown too (edt's own writes are on disk when it ends, theirs not).

  pull_bench.py --image-bench BUILD/bench/images/image_bench --edt-image BUILD/src/image/edt-image
                [--baseline OTHER/edt-image] [--edt-only] [--rounds 3] [--layers 10] [--layer-mb 100]
                [--dir /var/tmp/edt-pull-bench]
"""
import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))
from harness import oci_registry  # noqa: E402

USER, PASSWORD = "bench", "bench-Pa55-%d" % os.getpid()


def run(*argv, env=None):
    return subprocess.run(argv, check=True, capture_output=True, text=True, env=env)


def timed(fn):
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def load():
    return open("/proc/loadavg").read().split()[0]


def disk_rate(d):
    """MB/s of 2 GiB of zeros written with O_DIRECT."""
    path = d + "/dd"
    s = timed(lambda: run("dd", "if=/dev/zero", "of=" + path, "bs=1M", "count=2048", "oflag=direct"))
    os.unlink(path)
    return (2048 << 20) / 1e6 / s


def fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    run("sync")


def cpu_of_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bench_edt(edt_image, d, ref):
    """(seconds, seconds with a sync after, unpacked bytes, fetched bytes, CPU seconds)."""
    store = d + "/store"
    fresh(store)
    env = dict(os.environ, EDT_REGISTRY_PASSWORD=PASSWORD)
    out = []
    cpu = cpu_of_children()
    s = timed(lambda: out.append(run(edt_image, "--store", store, "pull", ref, "--name", "bench",
                                     "--ca-file", d + "/ca.crt", "--username", USER, env=env).stdout))
    cpu = cpu_of_children() - cpu
    synced = s + timed(lambda: run("sync"))
    record = json.loads(run(edt_image, "--store", store, "inspect", "bench").stdout)
    unpacked = sum(layer["unpacked_bytes"] for layer in record["layers"])
    fetched = int(re.search(r"fetched \d+ blobs, (\d+) bytes", out[0]).group(1))
    shutil.rmtree(store)
    return s, synced, unpacked, fetched, cpu


def bench_skopeo_umoci(d, ref):
    oci, bundle = d + "/oci", d + "/bundle"
    fresh(oci)
    fresh(bundle)
    copy = timed(lambda: run("skopeo", "copy", "--quiet", "--src-cert-dir", d + "/certs", "--src-creds",
                             USER + ":" + PASSWORD, "docker://" + ref, "oci:%s:latest" % oci))
    copy_sync = timed(lambda: run("sync"))
    unpack = timed(lambda: run("umoci", "unpack", "--rootless", "--image", oci + ":latest", bundle))
    unpack_sync = timed(lambda: run("sync"))
    shutil.rmtree(oci)
    shutil.rmtree(bundle)
    return copy, unpack, copy + unpack, copy + copy_sync + unpack + unpack_sync


def bench_podman(d, ref):
    if shutil.which("podman") is None:
        return None
    root = d + "/podman"
    fresh(root)
    s = timed(lambda: run("podman", "--root", root, "--runroot", root + "-run", "pull", "--cert-dir", d + "/certs",
                          "--creds", USER + ":" + PASSWORD, ref))
    shutil.rmtree(root, ignore_errors=True)
    return s


def one_round(args, d, ref, i):
    row = {"round": i + 1, "load_before": load(), "disk": disk_rate(d)}
    steps = [("edt", lambda: bench_edt(args.edt_image, d, ref)), ("su", lambda: bench_skopeo_umoci(d, ref)),
             ("podman", lambda: bench_podman(d, ref))]
    if args.baseline:
        steps.insert(1, ("baseline", lambda: bench_edt(args.baseline, d, ref)))
    if args.edt_only:
        steps = [step for step in steps if step[0] in ("edt", "baseline")]
    for name, fn in (steps if i % 2 == 0 else list(reversed(steps))):
        row[name] = fn()
    row["load_after"] = load()
    return row


def report(rows, image_mb):
    print("\n| round | load (before/after) | disk dd O_DIRECT MB/s | edt pull (CPU) | edt MB/s | edt vs disk |"
          " baseline edt (CPU) | skopeo copy | umoci unpack | skopeo+umoci | (+sync) | edt vs skopeo+umoci | podman pull |")
    print("|" + "---|" * 13)
    for r in rows:
        edt_s, edt_synced, _, _, edt_cpu = r["edt"]
        rate = image_mb / edt_s
        base = "%.2f s (%.1f s)" % (r["baseline"][0], r["baseline"][4]) if "baseline" in r else "-"
        podman = "%.2f s" % r["podman"] if r.get("podman") is not None else "-"
        others = "- | - | - | - | -"
        if "su" in r:
            copy, unpack, su, su_synced = r["su"]
            others = "%.2f s | %.2f s | %.2f s | %.2f s | %.2fx (%.2fx synced)" % (
                copy, unpack, su, su_synced, su / edt_s, su_synced / edt_synced)
        print("| %d | %s / %s | %.0f | %.2f s (%.1f s) | %.0f | %.0f%% | %s | %s | %s |"
              % (r["round"], r["load_before"], r["load_after"], r["disk"], edt_s, edt_cpu, rate, 100 * rate / r["disk"],
                 base, others, podman))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--image-bench", required=True)
    p.add_argument("--edt-image", required=True)
    p.add_argument("--baseline", help="another edt-image (an older build) timed in the same rounds")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--edt-only", action="store_true", help="time edt (and --baseline) only, for more rounds")
    p.add_argument("--layers", type=int, default=10)
    p.add_argument("--layer-mb", type=int, default=100)
    p.add_argument("--dir", default="/var/tmp/edt-pull-bench")
    args = p.parse_args()
    for tool in ("docker-registry", "skopeo", "umoci", "openssl", "htpasswd"):
        if shutil.which(tool) is None:
            sys.exit("pull_bench: %s is not installed (apt-get install docker-registry skopeo umoci apache2-utils)" % tool)
    d = args.dir
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    registry = None
    try:
        oci_registry.make_ca(d)
        port = oci_registry.free_port()
        registry = oci_registry.start_distribution(d, port, USER, PASSWORD)
        run(args.image_bench, "--write-layout", d + "/layout", "--layers", str(args.layers),
            "--layer-mb", str(args.layer_mb))
        ref = "127.0.0.1:%d/bench:latest" % port
        run("skopeo", "copy", "--quiet", "--dest-cert-dir", d + "/certs", "--dest-creds", USER + ":" + PASSWORD,
            "oci:%s/layout:latest" % d, "docker://" + ref)
        shutil.rmtree(d + "/layout")
        rows = []
        for i in range(args.rounds):
            rows.append(one_round(args, d, ref, i))
            print("round %d: %s" % (i + 1, rows[-1]), flush=True)
        _, _, unpacked, fetched, _ = rows[0]["edt"]
        print("image: %d layers, %.0f MB fetched (gzip), %.0f MB unpacked; %d cores"
              % (args.layers, fetched / 1e6, unpacked / 1e6, os.cpu_count()))
        report(rows, unpacked / 1e6)
    finally:
        if registry:
            registry.kill()
            registry.wait()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
