"""Fixture of the *_torch2 tests (torch2.cmake): the PyTorch 2 environment
is there, was made from today's python/requirements/torch2.txt, and holds
a torch 2, whose version it prints. Otherwise it fails and says what to do.

    torch2_venv.py PYTHON LOCK
"""

import hashlib
import os
import subprocess
import sys

MAKE_DEPS = "run `make deps` (docs/install.md), which makes the PyTorch 2 environment the *_torch2 tests run on"


def main(python, lock):
    venv = os.path.dirname(os.path.dirname(python))
    if not os.access(python, os.X_OK):
        return "%s is missing: %s" % (python, MAKE_DEPS)
    with open(lock, "rb") as f:
        want = hashlib.sha256(f.read()).hexdigest()
    try:
        with open(os.path.join(venv, "edt-requirements.stamp")) as f:
            held = f.read().split()[0]
    except (OSError, IndexError):
        held = None
    if held != want:
        return "%s was not made from today's %s: %s" % (venv, lock, MAKE_DEPS)
    # torch's metadata, not `import torch`: the import takes 10 to 40 s on a
    # loaded machine, and the tests that follow make it anyway.
    found = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('torch'))"],
                           capture_output=True, text=True)
    version = found.stdout.strip()
    if found.returncode != 0 or not version.startswith("2."):
        return "%s has no torch 2 (%s): %s" % (python, (version or found.stderr.strip()[-500:]), MAKE_DEPS)
    print("PyTorch %s in %s" % (version, venv))
    return None


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
