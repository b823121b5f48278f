#!/usr/bin/env bash
# Makes the benchmark environment (`make bench-deps`): the peers that bench/
# runs beside edt, which neither `make deps`, `make test` nor CI need. Safe
# to run again; needs root (or sudo) to write under /opt/edt.
#
# At $EDT_BENCH_VENV, default /opt/edt/venv-bench: a virtual environment on
# Debian's /usr/bin/python3 with its packages visible (--system-site-packages),
# so that Horovod builds against and runs on Debian's python3-torch 1.13, the
# torch edt uses, holding exactly python/requirements/bench.txt, each file
# checked against its hash. Horovod 0.28.1 is compiled here from its sdist
# (10 to 30 minutes on 2 cores: BENCH_JOBS, default 2, niced) with PyTorch,
# Gloo and MPI (Debian's OpenMPI, libopenmpi-dev), without TensorFlow and
# MXNet. A stamp records which bench.txt the venv holds: while that file is
# unchanged this does nothing; after a change the venv is made again.
#
# edt's own venv (/opt/edt/venv) is not touched. In this venv the real
# Horovod wins over edt's compatibility package: edt's fallback finder
# (python/edt/_horovod_fallback.py) is consulted only when no `horovod` is
# on sys.path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${EDT_BENCH_VENV:-/opt/edt/venv-bench}
jobs=${BENCH_JOBS:-2}
requirements="$here/../python/requirements/bench.txt"
[[ "$venv" == /* ]] || { echo "install-bench-deps: EDT_BENCH_VENV '$venv' is not an absolute path" >&2; exit 1; }

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-bench-deps: need root to write $venv" >&2; exit 1; }
  sudo="sudo"
fi

# What Horovod's build needs from Debian (scripts/debian-packages.txt has
# most of it already: make deps first).
for tool in cmake mpicxx g++; do
  command -v "$tool" >/dev/null || {
    echo "install-bench-deps: '$tool' is missing: run make deps (cmake, g++, libopenmpi-dev)" >&2; exit 1; }
done
/usr/bin/python3 -c 'import torch, setuptools, wheel' 2>/dev/null || {
  echo "install-bench-deps: Debian's python3-torch, python3-setuptools or python3-wheel is missing: run make deps" >&2
  exit 1; }

# Debian packages only the benchmarks use: torchvision for Horovod's
# pytorch_synthetic_benchmark.py (its models, built for Debian's torch).
bench_debian=(python3-torchvision)
missing=()
for pkg in "${bench_debian[@]}"; do
  [[ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)" == "install ok installed" ]] || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "install-bench-deps: installing ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

want="$(sha256sum <"$requirements" | cut -d' ' -f1) $(/usr/bin/python3 -c 'import sys; print(sys.version.split()[0])')"
if [[ -f "$venv/edt-bench-requirements.stamp" && "$(cat "$venv/edt-bench-requirements.stamp")" == "$want" ]]; then
  echo "install-bench-deps: $venv holds python/requirements/bench.txt"
  exit 0
fi

echo "install-bench-deps: making $venv (python/requirements/bench.txt; Horovod compiles for 10+ minutes)"
started=$SECONDS
$sudo mkdir -p -m 0755 "$(dirname "$venv")"
$sudo sh -c 'umask 022 && "$@"' sh /usr/bin/python3 -m venv --clear --system-site-packages --without-pip "$venv"
# Debian's pip (through the system site) installs into the venv. No build
# isolation: Horovod's setup.py must see Debian's torch to build its
# extension against it, and setuptools/wheel are Debian's too.
$sudo env HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 \
  HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 \
  MAKEFLAGS="-j$jobs" \
  sh -c 'umask 022 && exec nice -n 10 "$@"' sh "$venv/bin/python3" -m pip install --disable-pip-version-check \
  --no-input --no-cache-dir --require-hashes --no-deps --no-build-isolation --requirement "$requirements"
# Horovod must have built all three, or the comparison is not the one asked.
check=$("$venv/bin/horovodrun" --check-build)
echo "$check"
for part in PyTorch Gloo MPI; do
  grep -Eq "\[X\] $part\b" <<<"$check" || { echo "install-bench-deps: Horovod was built without $part" >&2; exit 1; }
done
$sudo sh -c 'umask 022 && printf "%s\n" "$1" > "$2"' sh "$want" "$venv/edt-bench-requirements.stamp"
echo "install-bench-deps: $venv made in $((SECONDS - started)) s"
