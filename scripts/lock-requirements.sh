#!/usr/bin/env bash
# Resolves python/requirements/NAME.in (NAME: the argument, default venv;
# torch2 for the PyTorch 2 environment, keras3 for the Keras 3 one) into
# python/requirements/NAME.txt:
# every package the environment needs, top-level or not, at an exact version
# with the SHA-256 of each of its files on PyPI, so that `make deps`
# (install-deps.sh: pip install --require-hashes --no-deps) takes nothing
# else. Run it after editing NAME.in, commit both files. Needs PyPI; works in
# a throwaway venv on the Python the venv is built on (EDT_PYTHON, default
# Debian's /usr/bin/python3), so the resolution matches its version.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${EDT_PYTHON:-/usr/bin/python3}
name=${1:-venv}
[[ -f "$root/python/requirements/$name.in" ]] || { echo "lock-requirements: no python/requirements/$name.in" >&2; exit 1; }
# The locking tool, pinned: the same input gives the same file.
pip_tools=pip-tools==7.4.1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet --disable-pip-version-check "$pip_tools"
cd "$root"
CUSTOM_COMPILE_COMMAND="scripts/lock-requirements.sh${1:+ $1}" PIP_FIND_LINKS= \
  "$tmp/venv/bin/pip-compile" --quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url \
  --no-emit-find-links --no-emit-trusted-host --rebuild --cache-dir "$tmp/cache" \
  --output-file "python/requirements/$name.txt" "python/requirements/$name.in"
echo "lock-requirements: $(grep -c '^[a-z0-9]' "python/requirements/$name.txt") packages in python/requirements/$name.txt"
