"""The worker of the drain test (drain_test.py): an elastic job in edt.torch
(Horovod's API) over a small MNIST-shaped set (28x28 images, 10 classes,
made from a seed, so every worker holds the same samples).

    edtrun -np 4 --min-np 2 --max-np 4 --hostfile /etc/mpi/hostfile \
        python3 drain_worker.py --samples N --batch-size B --step-seconds S --log-dir DIR

One epoch. Every step trains one batch of ElasticSampler's share and
commits, so a worker whose host left the hostfile leaves the job at the end
of the step it is in. --step-seconds makes a step last that long (time spent
before the backward pass, as a slow model would), so that a step outlasts
the moment edtrun sees the hostfile change.

Each worker writes its own log, DIR/<host>-<pid>.log, one line per event,
flushed at once (the test reads it even if the worker is killed):

    start host=H pid=P
    generation rank=R size=N epoch=E done=D      a generation began
    begin epoch=E size=N                         a step began
    trained epoch=E size=N indices=i,j,...       the step's batch was trained, before its commit
    loaded before=D1 after=D2                    a committed state was put into this worker
                                                 (D: samples of the epoch done, as this worker knew)
    left                                         its host left; it ends cleanly
    finished                                     the epoch is over

A rollback (a survivor going back to its last commit after a failed
collective) shows as a `loaded` line while a step is open (a `begin`
without its `trained`), or whose `after` is below `before`. A worker
killed mid-step leaves a log that ends with an open step.
"""

import argparse
import os
import socket
import sys
import time

import torch

import edt.torch as hvd


class Log:
    def __init__(self, directory):
        self.path = os.path.join(directory, "%s-%d.log" % (socket.gethostname(), os.getpid()))
        self.file = open(self.path, "a", buffering=1)

    def __call__(self, text):
        self.file.write(text + "\n")
        self.file.flush()
        print(text, flush=True)


class LoggedState(hvd.elastic.TorchState):
    """TorchState that logs every committed state put into it."""

    def __init__(self, log, **kwargs):
        self._log = log
        super().__init__(**kwargs)

    def _load_state(self, state):
        before = self.sampler.processed_count
        super()._load_state(state)
        self._log("loaded before=%d after=%d" % (before, self.sampler.processed_count))


def dataset(samples, seed):
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (samples,), generator=g)
    images = torch.rand(samples, 1, 28, 28, generator=g) * 0.5
    images[torch.arange(samples), 0, labels * 2, :] += 1.0  # a learnable mark per class
    return images, labels


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--samples", type=int, required=True)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--step-seconds", type=float, default=0.0)
    p.add_argument("--log-dir", required=True)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()

    log = Log(args.log_dir)
    log("start host=%s pid=%d" % (socket.gethostname(), os.getpid()))
    hvd.init()
    torch.manual_seed(args.seed)
    images, labels = dataset(args.samples, args.seed)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(28 * 28, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    sampler = hvd.elastic.ElasticSampler(range(args.samples), shuffle=True, seed=args.seed)
    state = LoggedState(log, model=model, optimizer=optimizer, sampler=sampler, epoch=1)

    @hvd.elastic.run
    def train(state):
        log("generation rank=%d size=%d epoch=%d done=%d" % (hvd.rank(), hvd.size(), state.epoch,
                                                             state.sampler.processed_count))
        while state.epoch <= 1:
            indices = list(iter(state.sampler))
            for batch, start in enumerate(range(0, len(indices), args.batch_size)):
                chunk = indices[start:start + args.batch_size]
                log("begin epoch=%d size=%d" % (state.epoch, hvd.size()))
                loss = torch.nn.functional.cross_entropy(state.model(images[chunk]), labels[chunk])
                if args.step_seconds:
                    time.sleep(args.step_seconds)
                state.optimizer.zero_grad()
                loss.backward()
                state.optimizer.step()
                state.sampler.record_batch(batch, args.batch_size)
                log("trained epoch=%d size=%d indices=%s" % (state.epoch, hvd.size(), ",".join(map(str, chunk))))
                state.commit()
            state.epoch += 1
            state.commit()

    try:
        train(state)
    except SystemExit as e:
        if e.code in (0, None):
            log("left")
        raise
    log("finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
