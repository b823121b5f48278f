"""Fixture of the tests that run on one of make deps' PyPI environments
(torch2.cmake, keras3.cmake): the environment is there, was made from
today's lock, and holds the distribution at the major version named,
whose version it prints. Otherwise it fails and says what to do.

    venv_check.py PYTHON LOCK DISTRIBUTION MAJOR
"""

import hashlib
import os
import subprocess
import sys


def main(python, lock, distribution, major):
    venv = os.path.dirname(os.path.dirname(python))
    make_deps = ("run `make deps` (docs/install.md), which makes the environment of python/requirements/%s"
                 % os.path.basename(lock))
    if not os.access(python, os.X_OK):
        return "%s is missing: %s" % (python, make_deps)
    with open(lock, "rb") as f:
        want = hashlib.sha256(f.read()).hexdigest()
    try:
        with open(os.path.join(venv, "edt-requirements.stamp")) as f:
            held = f.read().split()[0]
    except (OSError, IndexError):
        held = None
    if held != want:
        return "%s was not made from today's %s: %s" % (venv, lock, make_deps)
    # The metadata, not an import: importing torch or TensorFlow takes 10 to
    # 40 s on a loaded machine, and the tests that follow do it anyway.
    found = subprocess.run([python, "-c", "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))",
                            distribution], capture_output=True, text=True)
    version = found.stdout.strip()
    if found.returncode != 0 or version.split(".")[0] != major:
        return "%s has no %s %s (%s): %s" % (python, distribution, major, version or found.stderr.strip()[-500:],
                                             make_deps)
    print("%s %s in %s" % (distribution, version, venv))
    return None


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
