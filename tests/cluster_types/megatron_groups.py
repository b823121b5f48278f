"""Megatron-core's model-parallel groups across the containers of a cluster,
started as Megatron-LM's scripts start pretrain_gpt.py: torchrun on every
node (`edtrun --per-host ... torchrun --nnodes $NNODES --node_rank
$NODE_RANK ...`). Training itself needs GPUs (Megatron-core's layers are
CUDA's); forming the groups and a collective in each runs on gloo.

Every rank prints

    megatron rank=R world_size=W host=H node_rank=N pp_rank=P dp_rank=D dp_sum=S version=V

where dp_sum is the sum of the global ranks of its data-parallel group (an
all_reduce over that group), checked by scripts/demo_cluster_types.py.
"""

import argparse
import os
import socket
import warnings

import torch
import torch.distributed as dist

# Megatron-core warns at import that Transformer Engine and Apex are absent
# (GPU libraries): not this check's concern.
warnings.filterwarnings("ignore", message=".*Transformer Engine and Apex.*")
import megatron.core  # noqa: E402
from megatron.core import parallel_state  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tensor-model-parallel-size", type=int, default=1)
    p.add_argument("--pipeline-model-parallel-size", type=int, default=1)
    args = p.parse_args()
    dist.init_process_group("gloo")
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=args.tensor_model_parallel_size,
                                             pipeline_model_parallel_size=args.pipeline_model_parallel_size)
    total = torch.tensor([float(dist.get_rank())])
    dist.all_reduce(total, group=parallel_state.get_data_parallel_group())
    print("megatron rank=%d world_size=%d host=%s node_rank=%s pp_rank=%d dp_rank=%d dp_sum=%d version=%s"
          % (dist.get_rank(), dist.get_world_size(), socket.gethostname(), os.environ.get("GROUP_RANK"),
             parallel_state.get_pipeline_model_parallel_rank(), parallel_state.get_data_parallel_rank(),
             int(total.item()), megatron.core.__version__), flush=True)
    parallel_state.destroy_model_parallel()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
