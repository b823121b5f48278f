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

install_venv() {
  local venv=${EDT_VENV:-/opt/edt/venv}
  [[ "$venv" == none ]] && { echo "install-deps: EDT_VENV=none: no virtual environment"; return 0; }
  [[ "$venv" == /* ]] || { echo "install-deps: EDT_VENV '$venv' is not an absolute path" >&2; exit 1; }
  local requirements="$here/../python/requirements/venv.txt"
  # What the venv holds: this lock on this Python.
  local want
  want="$(sha256sum <"$requirements" | cut -d' ' -f1) $(/usr/bin/python3 -c 'import sys; print(sys.version.split()[0])')"
  if [[ -f "$venv/edt-requirements.stamp" && "$(cat "$venv/edt-requirements.stamp")" == "$want" ]]; then
    echo "install-deps: $venv holds python/requirements/venv.txt"
    return 0
  fi
  [[ -w "$(dirname "$venv")" || -w "$venv" ]] || need_root "make $venv"
  echo "install-deps: making $venv (python/requirements/venv.txt)"
  local started=$SECONDS
  # Readable by every user (a container's root may be an unprivileged uid).
  $sudo mkdir -p -m 0755 "$(dirname "$venv")"
  $sudo sh -c 'umask 022 && "$@"' sh /usr/bin/python3 -m venv --clear --system-site-packages --without-pip "$venv"
  # Debian's pip (python3-pip), seen through the system site, installs into
  # the venv: wheels only, each pinned and hashed, none of their
  # dependencies beyond the lock's.
  $sudo sh -c 'umask 022 && "$@"' sh "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check \
    --no-input --require-hashes --no-deps --only-binary :all: --requirement "$requirements"
  $sudo sh -c 'umask 022 && printf "%s\n" "$1" > "$2"' sh "$want" "$venv/edt-requirements.stamp"
  echo "install-deps: $venv made in $((SECONDS - started)) s"
}

install_debian_packages
install_venv
