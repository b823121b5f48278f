"""What runs inside any image needs of it only glibc 2.35 or later
(docs/images.md, "edt inside any image"): the programs given (edtrun,
edt-warm-run) and libedt_capi, given last (the Python package's runtime,
loaded by its ctypes layer into the image's Python), name no library but
glibc's and libgcc_s, no symbol version past GLIBC_2.35, and no CPython
symbol (so no Python version). The library exports only its C ABI
(python/src/capi.h).

--tf-ops names edt's TensorFlow ops (_edt_tf_ops.so): the same, but it
needs libtensorflow_framework.so.2 too, and of it only TensorFlow's C API
(TF_* functions, no C++ symbol), so one build loads into any TensorFlow
that has those functions (python/src/tensorflow/ops.cc)."""
import argparse
import re
import subprocess
import sys

GLIBC_FLOOR = (2, 35)  # Ubuntu 22.04's; Debian 12 has 2.36
SYSTEM = {"libc.so.6", "libm.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2"}


def out(*argv):
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def dynamic_symbols(path):
    """(defined names, undefined names, GLIBC versions) of `path`'s dynamic symbols."""
    defined, undefined, versions = set(), set(), set()
    for line in out("objdump", "-T", path).splitlines():
        fields = line.split()
        if len(fields) < 4 or not re.match(r"^[0-9a-f]{16}$", fields[0]):
            continue
        name = fields[-1]
        if "*UND*" in line and fields[1] == "w":
            continue  # weak: libstdc++'s optional hooks (transactional memory), unresolved and unused
        (undefined if "*UND*" in line else defined).add(name)
        versions.update(tuple(int(n) for n in v.split(".")) for v in re.findall(r"GLIBC_([0-9.]+)", line))
    return defined, undefined, versions


def check(path, library, tensorflow=False):
    failures = []
    allowed = SYSTEM | ({"libtensorflow_framework.so.2"} if tensorflow else set())
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^]]+)\]", out("readelf", "-d", path)))
    if needed - allowed:
        failures.append("%s needs %s beyond %s" % (path, sorted(needed - allowed), sorted(allowed)))
    defined, undefined, versions = dynamic_symbols(path)
    past = sorted(v for v in versions if v > GLIBC_FLOOR)
    if past:
        failures.append("%s needs GLIBC_%s, past %d.%d" % (path, ".".join(map(str, past[-1])), *GLIBC_FLOOR))
    python = sorted(n for n in undefined if n.startswith(("Py", "_Py")))
    if python:
        failures.append("%s uses CPython's %s" % (path, python[:5]))
    cxx = sorted(n for n in undefined if n.startswith("_Z"))
    if cxx:
        failures.append("%s uses C++ symbols of another library: %s" % (path, cxx[:5]))
    if tensorflow and not any(n.startswith("TF_") for n in undefined):
        failures.append("%s uses no TF_* function: is it TensorFlow's ops?" % path)
    if library:
        foreign = sorted(n for n in defined if not n.startswith("edt_") and n not in ("", "Base"))
        if foreign or not defined:
            failures.append("%s exports %s beyond edt_*" % (path, foreign[:10]))
    print("%s: needs %s; GLIBC up to %s" % (path, sorted(needed), ".".join(map(str, max(versions)))))
    return failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("programs", nargs="+")
    parser.add_argument("library")
    parser.add_argument("--tf-ops")
    args = parser.parse_args()
    failures = [f for program in args.programs for f in check(program, False)] + check(args.library, True)
    if args.tf_ops:
        failures += check(args.tf_ops, True, tensorflow=True)
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
