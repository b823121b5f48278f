#!/bin/sh
# GET /api/v1/clusters under wrk (closed loop, as fast as it goes) against an
# edtd that control_bench holds up with 100 clusters:
#   build/bench/control/control_bench --runs 0 --seconds 5 --hold 40 &
#   bench/control/run_wrk.sh URL TOKEN
set -eu
exec wrk -t2 -c8 -d10s --latency -H "Authorization: Bearer $2" "$1/api/v1/clusters"
