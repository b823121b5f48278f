#!/usr/bin/env python3
"""Train a small CNN on MNIST with Horovod's API on edt.

    edtrun -np 2 python3 examples/mnist/train_mnist.py [--data-dir DIR] [--epochs 3]

Reads MNIST's IDX files from --data-dir (real MNIST works; when the files
are missing a synthetic MNIST-like set is generated there). Each worker
trains on its share of the 10,000 training images per epoch and prints one
line per epoch:

    epoch=1 rank=0 size=2 samples=5000 loss=0.2104 acc=0.9635 time=3.41

`acc` is the accuracy on the whole test set, `time` the epoch's training
time in seconds. With --elastic the job survives resizes (edtrun --min-np
--max-np): training state is committed every --commit-every batches, every
other batch checks for joining workers (check_host_updates()), and
ElasticSampler gives every sample of an epoch to exactly one worker; each
worker prints a line whenever a membership generation starts:

    generation rank=0 size=4 host=tthvd-launcher pid=41 epoch=1 done=2560 at=1796000000.123

(`done`: samples of the epoch the job had committed; `at`: the wall clock).
With --until FILE an elastic job ends at the end of the first epoch after
FILE exists (rank 0 looks, every rank follows), --epochs at most.

The script is a plain Horovod script: `import horovod.torch as hvd` works in
its place.
"""

import argparse
import os
import shutil
import socket
import sys
import time

import torch
import torch.nn.functional as F

import edt.torch as hvd
from edt.datasets import idx


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 5)
        self.conv2 = torch.nn.Conv2d(16, 32, 5)
        self.fc1 = torch.nn.Linear(32 * 4 * 4, 64)
        self.fc2 = torch.nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def load(data_dir, elastic=False):
    """(train images, train labels, test images, test labels) as tensors
    (images as uint8: see inputs()), generating the synthetic set first when the files are missing."""
    if not idx.present(data_dir):
        from edt.datasets import mnist_synthetic
        if elastic:
            # No ranks yet (they exist inside elastic.run), and workers may
            # join at any time: each writes the (deterministic) set aside and
            # the first to finish moves it into place.
            private = "%s.%d" % (data_dir, os.getpid())
            mnist_synthetic.write_dataset(private)
            try:
                os.rename(private, data_dir)
            except OSError:
                shutil.rmtree(private)
        else:
            if hvd.rank() == 0:
                print("no MNIST files in %s: generating the synthetic set" % data_dir, flush=True)
                mnist_synthetic.write_dataset(data_dir)
            hvd.barrier()  # the others wait for rank 0's files

    def images(name):
        # Kept as bytes: a batch becomes floats when it is used (inputs()),
        # so a worker that joins a running job loads in a few milliseconds.
        return torch.from_numpy(idx.read(os.path.join(data_dir, name))).unsqueeze(1)

    def labels(name):
        return torch.from_numpy(idx.read(os.path.join(data_dir, name)).astype("int64"))

    return (images(idx.TRAIN_IMAGES), labels(idx.TRAIN_LABELS), images(idx.TEST_IMAGES), labels(idx.TEST_LABELS))


def inputs(images):
    """The model's input for a batch of load()'s images: floats in [0, 1]."""
    return images.float().div_(255)


def progress(done, total, start):
    width = 30
    filled = width * done // max(total, 1)
    sys.stdout.write("\r[%s%s] %d/%d %.1fs" % ("#" * filled, "." * (width - filled), done, total,
                                               time.time() - start))
    if done == total:
        sys.stdout.write("\r" + " " * (width + 40) + "\r")
    sys.stdout.flush()


def evaluate(model, test_x, test_y):
    """Accuracy on the whole test set; each worker scores its share."""
    model.eval()
    share = torch.arange(hvd.rank(), len(test_y), hvd.size())
    with torch.no_grad():
        correct = (model(inputs(test_x[share])).argmax(1) == test_y[share]).sum()
    model.train()
    totals = hvd.allreduce(torch.tensor([float(correct), float(len(share))]), name="eval", op=hvd.Sum)
    return (totals[0] / totals[1]).item()


def train_epoch(args, model, optimizer, train_x, train_y, indices, on_batch=None, rank=None):
    """One pass over `indices`; returns (samples, mean loss). `rank`: this
    worker's, where it is not hvd.rank() (a torch.distributed script)."""
    show = (hvd.rank() if rank is None else rank) == 0 and sys.stdout.isatty()
    start = time.time()
    samples, loss_sum, batches = 0, 0.0, 0
    for b in range(0, len(indices), args.batch_size):
        batch = indices[b:b + args.batch_size]
        optimizer.zero_grad()
        loss = F.cross_entropy(model(inputs(train_x[batch])), train_y[batch])
        loss.backward()
        optimizer.step()
        samples += len(batch)
        loss_sum += loss.item()
        batches += 1
        if on_batch:
            on_batch(len(batch))
        if show:
            progress(samples, len(indices), start)
    return samples, loss_sum / max(batches, 1)


def report(epoch, samples, loss, acc, seconds):
    print("epoch=%d rank=%d size=%d samples=%d loss=%.4f acc=%.4f time=%.2f"
          % (epoch, hvd.rank(), hvd.size(), samples, loss, acc, seconds), flush=True)


def run_fixed(args, model, optimizer, data):
    train_x, train_y, test_x, test_y = data
    sampler = torch.utils.data.distributed.DistributedSampler(range(len(train_y)), num_replicas=hvd.size(),
                                                              rank=hvd.rank(), shuffle=True, seed=args.seed)
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        indices = torch.tensor(list(iter(sampler)))
        start = time.time()
        samples, loss = train_epoch(args, model, optimizer, train_x, train_y, indices)
        seconds = time.time() - start
        report(epoch, samples, loss, evaluate(model, test_x, test_y), seconds)


def told_to_stop(path):
    """Whether `path` exists, as rank 0 sees it (the same answer on every rank)."""
    return hvd.broadcast_object(os.path.exists(path) if hvd.rank() == 0 else None, root_rank=0, name="until")


def run_elastic(args, model, optimizer, data):
    train_x, train_y, test_x, test_y = data
    sampler = hvd.elastic.ElasticSampler(range(len(train_y)), shuffle=True, seed=args.seed)
    state = hvd.elastic.TorchState(model=model, optimizer=optimizer, sampler=sampler, epoch=1, samples=0)

    @hvd.elastic.run
    def train(state):
        # One line per worker and membership generation: where it runs, and
        # how far into the epoch the job's committed state is.
        print("generation rank=%d size=%d host=%s pid=%d epoch=%d done=%d at=%.3f"
              % (hvd.rank(), hvd.size(), socket.gethostname(), os.getpid(), state.epoch,
                 state.sampler.processed_count, time.time()), flush=True)
        # The size changes between generations; so does the scaled rate.
        for group in state.optimizer.param_groups:
            group["lr"] = args.lr * hvd.size()
        while state.epoch <= args.epochs:
            indices = torch.tensor(list(iter(state.sampler)))
            start, batches = time.time(), [0]

            def on_batch(n):
                state.samples += n
                state.sampler.record_batch(batches[0], args.batch_size)
                batches[0] += 1
                if batches[0] % args.commit_every == 0:
                    state.commit()
                else:
                    # Cheap when nothing changed; when workers joined, the
                    # job re-forms at this batch, not at the next commit.
                    state.check_host_updates()
            _, loss = train_epoch(args, state.model, state.optimizer, train_x, train_y, indices, on_batch)
            seconds = time.time() - start
            report(state.epoch, state.samples, loss, evaluate(state.model, test_x, test_y), seconds)
            state.epoch += 1
            state.samples = 0
            state.sampler.set_epoch(state.epoch)
            state.commit()
            if args.until and told_to_stop(args.until):
                break

    train(state)


def main():
    p = argparse.ArgumentParser(description="MNIST with edt.torch (Horovod's API)")
    p.add_argument("--data-dir", default=os.path.join(os.getcwd(), "mnist-data"))
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.01, help="learning rate per worker (scaled by the workers)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--elastic", action="store_true", help="survive resizes (edtrun --min-np/--max-np)")
    # A commit of this model costs about 0.6 ms, a batch 25 ms; between
    # commits every batch checks for joining workers (check_host_updates()).
    p.add_argument("--commit-every", type=int, default=5, help="batches between elastic commits")
    p.add_argument("--until", metavar="FILE", help="elastic: end after the epoch in which FILE (on rank 0) appears")
    args = p.parse_args()

    if args.elastic:
        # The data first: a worker that joins a running job is placed in its
        # next generation by init(), and the others wait for it from there.
        data = load(args.data_dir, elastic=True)
    hvd.init()
    if not args.elastic:
        data = load(args.data_dir)
    torch.manual_seed(args.seed)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    if args.elastic:
        # Ranks exist inside elastic.run, whose first generation gives every
        # worker rank 0's state.
        run_elastic(args, model, optimizer, data)
        return
    for group in optimizer.param_groups:
        group["lr"] = args.lr * hvd.size()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    run_fixed(args, model, optimizer, data)
    hvd.shutdown()


if __name__ == "__main__":
    main()
