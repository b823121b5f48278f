"""edt's tools inside an image not built for edt (docs/images.md, "edt
inside any image").

The image has its own Python at /usr/local (an interpreter, its standard
library and the libraries they link, nothing else of the host's: no
libstdc++, no libspdlog or libfmt, no OpenSSH, no numpy) over the host's
bash and C library (harness/oci_layout.py's tiny_root). A cluster of 2
containers of it runs `edtrun -np 2 --hostfile /etc/mpi/hostfile python3`
as the image's User: edtrun and edt's runtime library (libedt_capi, loaded
by the package's ctypes layer) need only glibc; the hop to the worker is
edt's ssh. The two ranks allreduce and each says which Python it is.

--python names the interpreter the image gets (default: the host's), so
the same test shows other Python versions where a machine has them.
--edtd may be an installed one: packaging's test runs this one against the
Debian package's edtd, with --tools-at /run/edt-install (where an
installed edtd binds them, edtd_flags.h).
"""
import argparse
import os
import subprocess
import sys
import tempfile

from harness.oci_layout import Layout, add_dir, add_file, add_trainer, tiny_root
from harness.edtd import ScratchEdtd, cleanup

FAILURES = []
# What edtrun's remote start runs besides sh and env (launcher/ssh.cc):
# util-linux's and coreutils', in every Debian and Ubuntu image.
BASE_TOOLS = ("setsid", "sleep")
SKIPPED_STDLIB = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "pydoc_data", "__pycache__",
                  "site-packages", "dist-packages"}

# In the image at PROBE: each rank allreduces rank + 1 over 4 floats
# (edt.torch's numbers for allreduce, float32 and sum) through the ctypes
# layer, without numpy.
PROBE = "usr/local/share/edt-probe.py"
PROGRAM = b"""
import ctypes, sys
from edt import _edt
rt = _edt.Runtime()
buf = (ctypes.c_float * 4)(*[rt.rank + 1.0] * 4)
rt.wait(rt.submit("any.image", 0, 0, 0, 0, 1.0, 1.0, [4], [], ctypes.addressof(buf)))
print("rank %d of %d: %s, Python %s at %s" % (rt.rank, rt.size, list(buf), sys.version.split()[0], sys.executable))
"""


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILURES.append(what)


def interpreter_facts(python):
    script = "import sys, sysconfig; print(sys.executable); print(sysconfig.get_paths()['stdlib']); " \
             "print('%d.%d' % sys.version_info[:2])"
    return subprocess.run([python, "-c", script], check=True, capture_output=True, text=True).stdout.split("\n")[:3]


def linked(paths):
    """Every library ldd names for `paths`."""
    found = set()
    for path in paths:
        out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
        found.update(word for word in out.split() if word.startswith("/"))
    return found


def python_layer(python):
    """A layer adder: `python` at /usr/local/bin, its standard library at
    /usr/local/lib/pythonX.Y (where it finds it from its own place), and the
    libraries both link, at their own paths."""
    executable, stdlib, version = interpreter_facts(python)
    dynload = [os.path.join(root, f) for root, _, files in os.walk(stdlib) for f in files if f.endswith(".so")]
    libraries = sorted(linked([os.path.realpath(executable)] + dynload + ["/usr/bin/" + t for t in BASE_TOOLS]))

    files = [(os.path.realpath(executable), "usr/local/bin/python" + version),
             (os.path.realpath(executable), "usr/local/bin/python3")]
    files += [(os.path.join("/usr/bin", tool), "usr/bin/" + tool) for tool in BASE_TOOLS]
    for library in libraries:
        where = os.path.join(os.path.realpath(os.path.dirname(library)), os.path.basename(library))
        files.append((os.path.realpath(library), where.lstrip("/")))
    names = [name for _, name in files] + ["usr/local/lib/python" + version, PROBE]
    parents = sorted({name[:i] for name in names for i in range(len(name)) if name[i] == "/"})

    def add(tar):
        for parent in parents:
            add_dir(tar, parent)
        for real, name in files:
            tar.add(real, arcname=name)
        tar.add(stdlib, arcname="usr/local/lib/python" + version,
                filter=lambda info: None if os.path.basename(info.name) in SKIPPED_STDLIB else info)
        add_file(tar, PROBE, PROGRAM)
    return add, version, libraries


def build_image(d, python):
    tiny_root(d + "/root")
    layout = Layout(d + "/layout")
    base = layout.layer(lambda tar: [tar.add(d + "/root/" + t, arcname=t) for t in sorted(os.listdir(d + "/root"))])
    add_python, version, libraries = python_layer(python)
    layout.image("any", [base, layout.layer(add_python), layout.layer(lambda tar: add_trainer(tar, d + "/root"))],
                 {"User": "trainer", "Env": ["PATH=/usr/local/bin:/usr/bin:/bin"]})
    return layout.path, version, libraries


def test_runtime_in_image(edtd, edt, d, python, tools_at):
    layout, version, libraries = build_image(d, python)
    foreign = [lib for lib in libraries if any(name in lib for name in ("libstdc++", "libspdlog", "libfmt"))]
    check(not foreign, "the image's Python links no C++ runtime of the host's: %s" % foreign)
    env = edtd.cli_env()

    def cli(*args, timeout=300):
        return subprocess.run([edt, *args], capture_output=True, text=True, env=env, timeout=timeout)

    out = cli("image", "import", layout, "--name", "any")
    check(out.returncode == 0, "the image imports: " + out.stdout + out.stderr)
    out = cli("cluster", "create", "any", "--image", "any", "--containers", "2", "--wait")
    check(out.returncode == 0, "a cluster of 2 containers of it: " + out.stdout + out.stderr)
    probe = "for f in libstdc++.so.6 libspdlog.so.1.10 libfmt.so.9; do ls /usr/lib/x86_64-linux-gnu/$f; done " \
            "2>/dev/null; command -v sshd numpy; python3 -c 'import numpy' 2>/dev/null && echo numpy; true"
    seen = cli("exec", "any-worker-0", "--", "sh", "-c", probe)
    check(seen.returncode == 0 and seen.stdout.strip() == "",
          "the container has no libstdc++, libspdlog, libfmt, sshd or numpy of its own: %r" % seen.stdout)
    if tools_at:
        where = cli("exec", "any-worker-0", "--", "sh", "-c",
                    "command -v edtrun; python3 -c 'import edt._edt as e; print(e.__file__)'")
        lines = where.stdout.split()
        check(where.returncode == 0 and len(lines) == 2 and all(line.startswith(tools_at + "/") for line in lines),
              "edtrun and the package are the ones under %s: %r %r" % (tools_at, where.stdout, where.stderr))
    out = cli("exec", "any-launcher", "--", "edtrun", "-np", "2", "--hostfile", "/etc/mpi/hostfile", "python3",
              "/" + PROBE, timeout=180)
    lines = sorted(line.split(": ", 1)[1] for line in out.stdout.split("\n") if "<stdout>: rank " in line)
    expected = ["rank %d of 2: [3.0, 3.0, 3.0, 3.0], Python %s" % (r, version) for r in range(2)]
    check(out.returncode == 0 and [line[:len(e)] for line, e in zip(lines, expected)] == expected and
          all(line.endswith("at /usr/local/bin/python3") for line in lines),
          "edtrun -np 2 in the image allreduces through edt's runtime on the image's Python %s: %r %r"
          % (version, out.stdout, out.stderr[-2000:]))
    cli("cluster", "delete", "--wait", "any")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--edtd", required=True)
    parser.add_argument("--edt", required=True)
    parser.add_argument("--python", default=sys.executable, help="the interpreter the image gets")
    parser.add_argument("--addresses", default="127.237.0.0/24", help="edtd's --address-range")
    parser.add_argument("--tools-at", help="where the containers' edtrun and edt package must be")
    args = parser.parse_args()
    d = tempfile.mkdtemp(prefix="edt-any-image-")
    os.chmod(d, 0o755)
    edtd = None
    try:
        edtd = ScratchEdtd(args.edtd, addresses=args.addresses)
        test_runtime_in_image(edtd, args.edt, d, args.python, args.tools_at)
    finally:
        if edtd:
            if FAILURES:
                print(edtd.read_log())
            edtd.stop()
        cleanup(d)
    print("%d failures" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
