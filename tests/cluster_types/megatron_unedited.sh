#!/bin/bash
# The distributed lines of Megatron-LM's examples/gpt3/train_gpt3_175b_distributed.sh
# as it comes, unedited, with `--no-python true` for pretrain_gpt.py and its
# arguments: run in every container at once through edtrun --per-host, each
# torchrun would start a single-node job of its own, and edt's torchrun
# check says so (scripts/demo_cluster_types.py looks for its warning).

GPUS_PER_NODE=8
# Change for multinode config
MASTER_ADDR=localhost
MASTER_PORT=6000
NUM_NODES=1
NODE_RANK=0
WORLD_SIZE=$(($GPUS_PER_NODE*$NUM_NODES))

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
    --master_addr $MASTER_ADDR
    --master_port $MASTER_PORT
)

torchrun ${DISTRIBUTED_ARGS[@]} --no-python true
