#!/bin/sh
# torchrun, as `edtrun --per-host` puts it first on each worker's PATH: it
# checks torchrun's command line against the job edtrun started, says on
# stderr what does not fit, then runs the next torchrun on PATH unchanged.
#
# Why: Megatron-LM's example scripts set NUM_NODES=1, NODE_RANK=0 and
# MASTER_ADDR=localhost themselves. Run unedited on every host at once,
# each host starts a single-node job of its own: nothing fails, the hosts
# never meet, and each trains alone. Warned of, not refused: one
# independent job per host (a sweep) is a legitimate use of --per-host.
#
# It checks only when the job has more than one host, and only torchrun's
# own options (those before the training script). The job's size and this
# host's rank come from EDT_SIZE and EDT_RANK: the script may well have
# overwritten NNODES, NODE_RANK and MASTER_ADDR, as Megatron-LM's do.

die() {
  echo "torchrun (edtrun --per-host): $*" >&2
  exit 127
}

nodes=${EDT_SIZE:-1} rank=${EDT_RANK:-0}
nnodes=1 node_rank=0 master_addr= standalone= rdzv_backend=static
if [ "$nodes" -gt 1 ] 2>/dev/null; then
  skip_value=
  for arg in "$@"; do
    if [ -n "$skip_value" ]; then
      eval "$skip_value=\$arg"
      skip_value=
      continue
    fi
    value=${arg#*=}
    case $arg in
      --nnodes=*) nnodes=$value ;;
      --node[-_]rank=*) node_rank=$value ;;
      --master[-_]addr=*) master_addr=$value ;;
      --rdzv[-_]backend=*) rdzv_backend=$value ;;
      --nnodes) skip_value=nnodes ;;
      --node[-_]rank) skip_value=node_rank ;;
      --master[-_]addr) skip_value=master_addr ;;
      --rdzv[-_]backend) skip_value=rdzv_backend ;;
      --standalone) standalone=1 ;;
      --no[-_]python | --run[-_]path | -m | --module | -h | --help) ;;
      --*=* | -?*=*) ;;
      -?*) skip_value=ignored ;;  # every other option of torchrun takes a value
      *) break ;;                 # the training script: its own arguments follow
    esac
  done
  problems=
  [ -n "$standalone" ] && problems="$problems --standalone"
  # --nnodes MIN:MAX (elastic) fits when MAX is the job's host count.
  [ "${nnodes#*:}" != "$nodes" ] && problems="$problems --nnodes $nnodes"
  case $master_addr in
    localhost | 127.* | ::1) problems="$problems --master_addr $master_addr" ;;
  esac
  # With the static rendezvous (torchrun's default) each host must be told
  # its own rank; all of them 0 (the default) is no job at all.
  if [ "$rdzv_backend" = static ] && [ -z "$standalone" ] && [ "$node_rank" != "$rank" ]; then
    problems="$problems --node_rank $node_rank"
  fi
  if [ -n "$problems" ]; then
    cat >&2 <<END
edtrun --per-host: WARNING: torchrun on $(hostname) (node $rank of $nodes) was given$problems:
  it will not join the other hosts; each of the $nodes runs a job of its own. torchrun needs the job's
  --nnodes $nodes --node_rank $rank and the master edtrun found: edtrun sets NNODES, NUM_NODES, NODE_RANK,
  MASTER_ADDR and MASTER_PORT on every host, and a script that sets them itself overrides them. In a
  Megatron-LM example script, delete the lines that set GPUS_PER_NODE, MASTER_ADDR, MASTER_PORT, NUM_NODES
  (or NNODES) and NODE_RANK, and add --node_rank \$NODE_RANK to its torchrun arguments (docs/cluster-types.md).
END
  fi
fi

# The next torchrun on PATH that is not this one.
self_dir=$(cd "$(dirname "$0")" && pwd -P) || die "cannot find its own directory from $0"
old_ifs=$IFS
IFS=:
for dir in $PATH; do
  IFS=$old_ifs
  [ -n "$dir" ] || dir=.
  [ -x "$dir/torchrun" ] && [ ! -d "$dir/torchrun" ] || continue
  [ "$(cd "$dir" 2>/dev/null && pwd -P)" = "$self_dir" ] && continue
  exec "$dir/torchrun" "$@"
done
die "no torchrun on PATH besides edt's check ($self_dir); install PyTorch (torchrun comes with it) or put its bin on PATH"
