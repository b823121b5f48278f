#!/usr/bin/python3
"""Create of a 2-container cluster of an image in edtd's store, beside one of
the host's image, in the same run (issue goal: <= 1 s from the cached image).

The stored image is written here as an OCI layout (the host's sshd, bash and
their libraries, as tests/images builds it, plus a /work layer of --work-mib
of files) and imported once into a fresh edtd (`POST /images/import`): from
then on it is cached, its layers unpacked and its root assembled. Each round
then times, for each image in turn (the order alternates), POST /clusters of
2 containers until GET /clusters/NAME says Running with both containers
Running, and deletes the cluster (not timed). Needs root, as edtd does.

  bench/images/create_bench.py --edtd build/src/control/edtd [--rounds 10]
      [--network loopback|bridge:NAME] [--user-namespaces off|on]

On a bridge, the containers take addresses of 198.18.222.0/24 (a block of
the benchmark-testing range that no test of edt's uses).
"""
import argparse
import io
import os
import statistics
import sys
import tarfile
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests"))

from harness.edtd import ScratchEdtd, cleanup  # noqa: E402
from harness.oci_layout import Layout, tiny_root  # noqa: E402


def write_layout(d, work_mib):
    """An OCI layout of one image, "bench": the tiny root, then /work with work_mib MiB in 1 MiB files."""
    tiny_root(d + "/root")
    layout = Layout(d + "/layout")
    base = layout.layer(lambda tar: [tar.add(d + "/root/" + top, arcname=top) for top in sorted(os.listdir(d + "/root"))])

    def work(tar):
        top = tarfile.TarInfo("work")
        top.type, top.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(top)
        for i in range(work_mib):
            info = tarfile.TarInfo("work/file-%03d" % i)
            info.size, info.mode = 1 << 20, 0o644
            tar.addfile(info, io.BytesIO(os.urandom(1 << 20)))
    layout.image("bench", [base, layout.layer(work)], {"WorkingDir": "/work", "Env": ["PATH=/usr/bin:/bin"]})
    return layout.path


def time_create(edtd, name, image, timeout=60):
    """Seconds from POST /clusters to both containers Running."""
    body = {"name": name, "framework": "horovod", "containers": 2}
    if image:
        body["image"] = image
    started = time.monotonic()
    status, answer = edtd.api("POST", "/clusters", body)
    if status != 201:
        raise RuntimeError("create %s: %s %s" % (name, status, answer))
    while time.monotonic() - started < timeout:
        _, got = edtd.api("GET", "/clusters/" + name)
        containers = got.get("status", {}).get("containers", [])
        if got.get("status", {}).get("phase") == "Running" and len(containers) == 2 and \
                all(c.get("phase") == "Running" for c in containers):
            return time.monotonic() - started
        time.sleep(0.005)
    raise RuntimeError("%s was not Running within %d s: %s" % (name, timeout, got))


def delete(edtd, name):
    edtd.api("DELETE", "/clusters/" + name)
    deadline = time.monotonic() + 60
    while edtd.api("GET", "/clusters/" + name)[0] != 404 and time.monotonic() < deadline:
        time.sleep(0.05)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--edtd", required=True)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--work-mib", type=int, default=64, help="the size of the image's /work layer")
    p.add_argument("--network", default="loopback")
    p.add_argument("--user-namespaces", default="off", choices=("off", "on"))
    args = p.parse_args()
    if os.geteuid() != 0:
        print("create_bench: needs root (edtd makes containers)", file=sys.stderr)
        return 1
    d = tempfile.mkdtemp(prefix="edt-create-bench-")
    os.chmod(d, 0o755)
    edtd = None
    try:
        layout = write_layout(d, args.work_mib)
        edtd = ScratchEdtd(args.edtd, addresses=None if args.network == "loopback" else "198.18.222.0/24",
                           extra=["--network", args.network, "--user-namespaces", args.user_namespaces])
        started = time.monotonic()
        status, image = edtd.api("POST", "/images/import", {"name": "cached", "path": layout})
        if status != 201:
            raise RuntimeError("import: %s %s" % (status, image))
        print("imported image cached (%d MiB unpacked) in %.2f s; network %s, user namespaces %s; load %.1f"
              % (image["size_bytes"] >> 20, time.monotonic() - started, args.network, args.user_namespaces,
                 os.getloadavg()[0]), flush=True)
        times = {"host": [], "cached": []}
        for r in range(args.rounds):
            order = ["host", "cached"] if r % 2 == 0 else ["cached", "host"]
            for which in order:
                name = "bench-%s-%d" % (which, r)
                times[which].append(time_create(edtd, name, None if which == "host" else "cached"))
                delete(edtd, name)
            print("round %d: host image %.3f s, cached image %.3f s (load %.1f)"
                  % (r + 1, times["host"][-1], times["cached"][-1], os.getloadavg()[0]), flush=True)
        for which, got in times.items():
            print("%-6s image: create of 2 containers -> Running: median %.3f s, min %.3f, max %.3f (%d rounds)"
                  % (which, statistics.median(got), min(got), max(got), len(got)))
        median = statistics.median(times["cached"])
        print("goal: create from a cached image <= 1 s: %s (median %.3f s)" % ("met" if median <= 1 else "NOT met", median))
        return 0
    finally:
        if edtd:
            edtd.stop()
        cleanup(d)


if __name__ == "__main__":
    sys.exit(main())
