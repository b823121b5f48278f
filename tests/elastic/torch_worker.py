"""A small TorchState training for the elastic scenarios: a linear model
trained with DistributedOptimizer over an ElasticSampler, committed every
few steps. It logs one JSON line per event (start, reset, step, epoch, end).

The model also counts, in a buffer that is part of the committed state, how
often each sample of the epoch was trained by the whole job (an allreduce of
every worker's batch). Rollbacks restore the counts with the rest of the
state, so at the end of an epoch every count is 1 exactly when each sample
was trained once among committed work.

With --process-sets every generation adds two process sets, the even ranks
and the ranks but 0, at the start of the training function (sets end at
every reset, as in Horovod), and every step allreduces over the sets this
worker is in; the step's `sets_ok` says the results were right and the
sets of the previous generation were invalidated.
"""
import argparse
import json
import os
import time

import torch

import edt.torch as hvd


def log(event, **fields):
    print(json.dumps(dict(event=event, worker=os.environ.get("EDT_WORKER_ID"), pid=os.getpid(), t=time.time(),
                          **fields)), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--samples", type=int, default=480)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--commit-every", type=int, default=5)
    p.add_argument("--check-every-step", action="store_true", help="check_host_updates() between commits")
    p.add_argument("--step-ms", type=float, default=20)
    # Where the loop calls sampler.set_epoch(): at the end of an epoch for
    # the next (docs/python.md), or at the start of every epoch, re-entered
    # after every reset (Horovod's examples).
    p.add_argument("--set-epoch-at", choices=["start", "end"], default="end")
    p.add_argument("--process-sets", action="store_true")
    args = p.parse_args()

    hvd.init()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(args.samples, 4, generator=g)
    y = x @ torch.tensor([1.0, -2.0, 0.5, 3.0])
    torch.manual_seed(1)
    model = torch.nn.Linear(4, 1)
    model.register_buffer("trained", torch.zeros(args.samples))
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05),
                                         named_parameters=model.named_parameters())
    sampler = hvd.elastic.ElasticSampler(range(args.samples), shuffle=True, seed=3)
    state = hvd.elastic.TorchState(model=model, optimizer=optimizer, sampler=sampler, epoch=0, step=0)
    state.register_reset_callbacks([lambda: log("reset", rank=hvd.rank(), size=hvd.size())])
    log("start", host=os.environ.get("EDT_HOSTNAME"))

    generation_sets = []

    def add_sets():
        stale = all(ps.process_set_id is None for ps in generation_sets)
        generation_sets[:] = [hvd.add_process_set(range(0, hvd.size(), 2)),
                              hvd.add_process_set(range(1, hvd.size()))]
        return stale

    def sets_ok():
        ok = True
        for i, ps in enumerate(generation_sets):
            if ps.included():
                total = hvd.allreduce(torch.ones(1), op=hvd.Sum, name="set%d" % i, process_set=ps)
                ok = ok and int(total) == len(ps.ranks) == ps.size()
        return ok

    @hvd.elastic.run
    def train(state):
        stale_invalidated = add_sets() if args.process_sets else True
        while state.epoch < args.epochs:
            if args.set_epoch_at == "start":
                state.sampler.set_epoch(state.epoch)
            shard = list(state.sampler)
            loss = torch.zeros(())
            for b in range(state.sampler.steps_left(args.batch)):
                batch = shard[b * args.batch:(b + 1) * args.batch]
                optimizer.zero_grad()
                loss = ((model(x[batch]).squeeze(1) - y[batch]) ** 2).sum() / args.batch
                loss.backward()
                optimizer.step()
                seen = torch.zeros(args.samples)
                seen[batch] = 1
                with torch.no_grad():
                    model.trained += hvd.allreduce(seen, op=hvd.Sum, name="trained")
                state.sampler.record_batch(b, args.batch)
                state.step += 1
                log("step", rank=hvd.rank(), size=hvd.size(), step=state.step, epoch=state.epoch,
                    sets_ok=stale_invalidated and sets_ok())
                time.sleep(args.step_ms / 1000)
                if state.step % args.commit_every == 0:
                    state.commit()
                elif args.check_every_step:
                    state.check_host_updates()
            exactly_once = bool((model.trained == 1).all())
            log("epoch", epoch=state.epoch, rank=hvd.rank(), size=hvd.size(), exactly_once=exactly_once,
                trained=int(model.trained.sum()), loss=float(loss))
            with torch.no_grad():
                model.trained.zero_()
            state.epoch += 1
            if args.set_epoch_at == "end":
                state.sampler.set_epoch(state.epoch)
            state.commit()
        return state.epoch, hvd.rank(), hvd.size()

    epochs, rank, size = train(state)
    log("end", epochs=epochs, rank=rank, size=size)


if __name__ == "__main__":
    main()
