#!/usr/bin/env python3
"""The MNIST example's model trained with plain torch.distributed (gloo,
DistributedDataParallel), for the launchers of other worlds: torchrun (as
Megatron-LM is started), DeepSpeed's launcher, or edtrun.

    torchrun --nproc_per_node 1 --nnodes 2 --node_rank 0 --master_addr A --master_port P train_mnist_ddp.py
    edtrun -np 2 --hostfile /etc/mpi/hostfile python3 train_mnist_ddp.py

It reads its place from the environment every such launcher sets (RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and takes --local_rank as
DeepSpeed's launcher passes it. Each worker prints where it runs, then one
line per epoch in train_mnist.py's form (check_run.py reads both scripts'):

    placement rank=1 local_rank=0 world_size=2 host=tmg-worker-0 master=tmg-launcher:29500
    epoch=1 rank=1 size=2 samples=5000 loss=0.7037 acc=0.9625 time=1.85

MNIST's IDX files are read from --data-dir (make them with
`python3 -m edt.datasets.mnist_synthetic --out DIR`, or use real MNIST).
"""

import argparse
import gc
import os
import socket
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from edt.datasets import idx
import train_mnist
from train_mnist import Net, inputs


def load(data_dir):
    """train_mnist's data set; here the files must exist (no ranks to agree
    on who writes them)."""
    if not idx.present(data_dir):
        raise SystemExit("no MNIST files in %s: make them with python3 -m edt.datasets.mnist_synthetic --out %s"
                         % (data_dir, data_dir))
    return train_mnist.load(data_dir)


def evaluate(model, test_x, test_y, rank, size):
    """Accuracy on the whole test set; each worker scores its share."""
    model.eval()
    share = torch.arange(rank, len(test_y), size)
    with torch.no_grad():
        correct = (model(inputs(test_x[share])).argmax(1) == test_y[share]).sum()
    model.train()
    totals = torch.tensor([float(correct), float(len(share))])
    dist.all_reduce(totals)
    return (totals[0] / totals[1]).item()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir", default=os.path.join(os.getcwd(), "mnist-data"))
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.01, help="learning rate per worker (scaled by the workers)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--local_rank", "--local-rank", type=int, default=None,
                   help="as DeepSpeed's launcher passes it; LOCAL_RANK otherwise")
    args = p.parse_args()

    local_rank = args.local_rank if args.local_rank is not None else int(os.environ.get("LOCAL_RANK", "0"))
    dist.init_process_group("gloo")  # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    rank, size = dist.get_rank(), dist.get_world_size()
    print("placement rank=%d local_rank=%d world_size=%d host=%s master=%s:%s"
          % (rank, local_rank, size, socket.gethostname(), os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]),
          flush=True)
    train_x, train_y, test_x, test_y = load(args.data_dir)
    torch.manual_seed(args.seed)
    model = DistributedDataParallel(Net())  # broadcasts rank 0's parameters
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * size, momentum=0.9)
    sampler = torch.utils.data.distributed.DistributedSampler(range(len(train_y)), num_replicas=size, rank=rank,
                                                              shuffle=True, seed=args.seed)
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        indices = torch.tensor(list(iter(sampler)))
        start = time.time()
        samples, loss = train_mnist.train_epoch(args, model, optimizer, train_x, train_y, indices, rank=rank)
        seconds = time.time() - start
        acc = evaluate(model, test_x, test_y, rank, size)
        print("epoch=%d rank=%d size=%d samples=%d loss=%.4f acc=%.4f time=%.2f"
              % (epoch, rank, size, samples, loss, acc, seconds), flush=True)
    # The model goes first, while the group still holds the process group:
    # with torch 1.13 (Debian 12's), a DDP model freed after
    # destroy_process_group() takes the Gloo process group down with it
    # while holding the GIL, and ~ProcessGroupGloo joins a Gloo worker that
    # is waiting for the GIL to free a tensor of the last collective, so the
    # process hangs at exit. Freed here, only the process group's own
    # Python object holds it, and that one lets go of the GIL while it is
    # destroyed. (gc.collect(): in case a reference cycle holds the model.)
    del model, optimizer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
