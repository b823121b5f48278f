#!/usr/bin/env bash
# fuzz/run.sh FUZZ_BUILD TARGET SECONDS: runs one fuzz target (targets.txt)
# for SECONDS, from its seed corpus (fuzz/corpus/TARGET) and what earlier
# runs found (FUZZ_BUILD/corpus/TARGET, where new inputs go). An input that
# crashes it or breaks one of its checks is saved under FUZZ_BUILD/crashes/
# and the run fails; `FUZZ_BUILD/TARGET FILE` replays it (docs/testing.md).
set -euo pipefail
if [[ $# -ne 3 ]]; then
  echo "usage: $0 FUZZ_BUILD TARGET SECONDS (e.g. $0 build/fuzz units 60)" >&2
  exit 2
fi
build=$1 target=$2 seconds=$3
src=$(cd "$(dirname "$0")" && pwd)
if [[ ! -x $build/$target ]]; then
  echo "$0: no fuzz target $build/$target: build edt with -DEDT_FUZZ=ON (the default) first;" \
       "targets are: $(tr '\n' ' ' < "$src/targets.txt")" >&2
  exit 2
fi
mkdir -p "$build/corpus/$target" "$build/crashes"
args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
      -artifact_prefix="$build/crashes/$target-")
if [[ -f $src/$target.dict ]]; then args+=(-dict="$src/$target.dict"); fi
exec "$build/$target" "${args[@]}" "$build/corpus/$target" "$src/corpus/$target"
