"""An edt.torch elastic loop that watches its commits (commit_test.py):
every step commits, and for each commit it reports how many times the state
was serialized (torch.save, pickle) and which buffers hold the committed
tensors. After --restore-at commits it trains one step without committing,
calls state.restore() and reports whether the model and the optimizer are
bit-identical to the last commit. At step --fail-commit-at the state's copy
fails inside the library's commit; the worker reports the error commit()
raised and exits with 3. At the end every rank reports a digest of
its parameters and optimizer state. One JSON event per line
(tests/harness/edtrun.py).
"""
import argparse
import hashlib
import json
import os
import pickle
import sys
import time

import torch

import edt.common.elastic
import edt.torch as hvd

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--step-ms", type=float, default=5)
parser.add_argument("--restore-at", type=int, default=-1)
parser.add_argument("--grow-to", type=int, default=0, help="go on past --steps until 5 steps ran at this size")
parser.add_argument("--fail-commit-at", type=int, default=-1)
args = parser.parse_args()

WORKER = os.environ.get("EDT_WORKER_ID", "static")
serializations = [0]


def counted(function):
    def wrapper(*a, **k):
        serializations[0] += 1
        return function(*a, **k)
    return wrapper


torch.save = counted(torch.save)
pickle.dumps = counted(pickle.dumps)
pickle.Pickler = type("CountedPickler", (pickle.Pickler,), {"__init__": counted(pickle.Pickler.__init__)})


def emit(**event):
    event["worker"] = WORKER
    print(json.dumps(event), flush=True)


def tensors(tree):
    if isinstance(tree, torch.Tensor):
        yield tree
    elif isinstance(tree, dict):
        for value in tree.values():
            yield from tensors(value)
    elif isinstance(tree, (list, tuple)):
        for value in tree:
            yield from tensors(value)


def digest(model, optimizer):
    h = hashlib.sha256()
    for t in list(tensors(model.state_dict())) + list(tensors(optimizer.state_dict())):
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


hvd.init()
emit(event="start", pid=os.getpid(), rank=hvd.rank(), size=hvd.size())
torch.manual_seed(7 + hvd.rank())
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
                                     named_parameters=model.named_parameters())
state = hvd.elastic.TorchState(model, optimizer, step=0, at_size=0)


def train_step(step):
    data = torch.Generator().manual_seed(step * 100 + hvd.rank())
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(torch.randn(4, 32, generator=data)), torch.randn(4, 8, generator=data))
    loss.backward()
    optimizer.step()


def out_of_memory(registered):
    raise MemoryError("the state cannot be copied: out of memory")


@hvd.elastic.run
def train(state):
    while state.step < args.steps or (args.grow_to and state.at_size < 5):
        train_step(state.step)
        state.step += 1
        state.at_size += hvd.size() == args.grow_to
        emit(event="step", step=state.step, size=hvd.size(), rank=hvd.rank())
        before = serializations[0]
        if state.step == args.fail_commit_at:
            edt.common.elastic._Registered.commit = out_of_memory
        state.commit()
        # Where the committed tensors are (none to report where the state
        # keeps its commit as bytes).
        committed = getattr(state, "_committed_state", dict)()
        buffers = sorted(t.data_ptr() for t in tensors(committed))
        emit(event="commit", step=state.step, serializations=serializations[0] - before, buffers=buffers)
        if state.step == args.restore_at:
            committed = (digest(model, optimizer), state.step)
            train_step(state.step)
            state.step += 1
            changed = digest(model, optimizer) != committed[0]
            state.restore()
            emit(event="restore", changed=changed, identical=(digest(model, optimizer), state.step) == committed)
        time.sleep(args.step_ms / 1000)


try:
    train(state)
except MemoryError as e:
    emit(event="commit-error", step=state.step, message=str(e))
    sys.exit(3)
emit(event="end", rank=hvd.rank(), size=hvd.size(), digest=digest(model, optimizer), step=state.step)
