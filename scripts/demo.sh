#!/usr/bin/env bash
# The demo `make demo` runs after installing and building: for now, the
# allreduce comparison of edt against torch.distributed (Gloo) and OpenMPI,
# 2 ranks on this host, printed as a table (and a PNG plot under out/).
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
echo "== edt demo: allreduce, 2 ranks on this host, edt vs Gloo vs OpenMPI"
/usr/bin/python3 "$root/bench/compare_allreduce" --np 2 --min-bytes 4 --max-bytes 64M \
  --build "$root/$build" --out "$root/out/demo"
