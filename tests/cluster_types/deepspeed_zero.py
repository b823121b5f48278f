"""Trains a small model with DeepSpeed's ZeRO stage 1, then stage 2, on CPU
(torch's gloo), started by DeepSpeed's own launcher (`deepspeed --hostfile
/job/hostfile deepspeed_zero.py`, its pdsh or its openmpi runner).

For each stage every rank prints one line:

    zero stage=S rank=R local_rank=L world_size=W host=H loss=X params=SUM agree=MAXDIFF reference=MAXDIFF env=V

`agree` is the largest difference between this rank's parameters and rank
0's after training (0 when ZeRO gathered the same update everywhere);
`reference` the largest difference from the same model trained without
DeepSpeed on the whole global batch (ZeRO's partitioned step must do the
same arithmetic), `env` the value of EDT_DS_ENV (from .deepspeed_env).
tests/cluster_types/deepspeed_cluster_test.py checks the lines.
"""

import argparse
import copy
import os
import socket
import sys

import deepspeed
import torch
import torch.distributed as dist

STEPS = 4
MICRO_BATCH = 8
FEATURES = 16


def make_model():
    torch.manual_seed(1234)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))


def batch(step, rank):
    """Rank `rank`'s micro-batch of step `step`: the same on every run."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(MICRO_BATCH, FEATURES, generator=g)
    return x, x.sum(dim=1, keepdim=True).sin()


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def reference(world_size, lr):
    """The same training without DeepSpeed: one process, the global batch."""
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for step in range(STEPS):
        parts = [batch(step, r) for r in range(world_size)]
        x, y = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    return flat(model)


def train(stage, lr):
    rank, world_size = dist.get_rank(), dist.get_world_size()
    model = make_model()
    config = {
        "train_micro_batch_size_per_gpu": MICRO_BATCH,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": 0.0,  # DeepSpeed clips at 1.0 unless told; the reference does not clip
        "zero_optimization": {"stage": stage, "reduce_bucket_size": 200, "allgather_bucket_size": 200},
        "steps_per_print": 1000,
    }
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=torch.optim.Adam(model.parameters(), lr=lr),
                                           config=config)
    for step in range(STEPS):
        x, y = batch(step, rank)
        loss = torch.nn.functional.mse_loss(engine(x), y)
        engine.backward(loss)
        engine.step()
    mine = flat(engine.module)
    # The loss of the trained model on one batch that every rank shares.
    x, y = batch(STEPS, 0)
    with torch.no_grad():
        final = torch.nn.functional.mse_loss(engine.module(x), y).item()
    rank0 = mine.clone()
    dist.broadcast(rank0, 0)
    agree = (mine - rank0).abs().max().item()
    ref = (mine - reference(world_size, lr)).abs().max().item()
    line = ("zero stage=%d rank=%d local_rank=%s world_size=%d host=%s loss=%.6f params=%.6f agree=%.3g "
            "reference=%.3g env=%s\n" % (stage, rank, os.environ.get("LOCAL_RANK"), world_size, socket.gethostname(),
                                         final, mine.sum().item(), agree, ref, os.environ.get("EDT_DS_ENV", "-")))
    sys.stdout.flush()
    os.write(1, line.encode())  # one write: the line and its newline together
    engine.destroy()
    del engine, model


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--local_rank", type=int, default=-1, help="given by DeepSpeed's pdsh launcher")
    p.add_argument("--stages", default="1,2")
    p.add_argument("--lr", type=float, default=0.05)
    args = p.parse_args()
    deepspeed.init_distributed(dist_backend="gloo")
    for stage in [int(s) for s in args.stages.split(",")]:
        train(stage, args.lr)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
