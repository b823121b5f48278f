#!/usr/bin/env python3
"""What an elastic commit costs: edt.torch.elastic's TorchState.commit()
against the copy Horovod's TorchState makes at every commit, for the state
of a ResNet-18 (11.7M parameters, as torchvision's resnet18(), built here so
that torchvision is not needed) with SGD's momentum, in the same processes
of the same run.

    edtrun -np 2 --min-np 1 --max-np 2 -H localhost:2 /usr/bin/python3 bench/elastic_commit/elastic_commit.py [--rounds 10]

Per commit it reports the median (min-max) wall time of
  edt commit     state.commit() inside hvd.elastic.run: the copy into the
                 buffers kept from the previous commit, through the job's
                 commit, and the check for new hosts (a broadcast);
  edt copy       state.save() alone: the copy;
  horovod copy   copy.deepcopy of the model's and the optimizer's
                 state_dict(), kept until the next one replaces it, as
                 horovod.torch.elastic.TorchState.save() keeps it (its
                 commit adds a broadcast of the host updates);
  torch.save     the whole state serialized into memory, which edt's commit
                 did before it became a copy (now only a joiner's state is).
The modes alternate in rounds, so drift on a shared machine hits all of them
alike; the ranks meet (an allreduce, not timed) before each measurement, so
that the commit's broadcast does not time another rank's previous mode. Rank 0 prints a markdown table and whether edt's commit costs no
more than Horovod's copy.
"""

import argparse
import copy
import io
import statistics
import time

import torch

import edt.torch as hvd


def conv_bn(cin, cout, kernel, stride):
    return [torch.nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False), torch.nn.BatchNorm2d(cout)]


class BasicBlock(torch.nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.body = torch.nn.Sequential(*conv_bn(cin, cout, 3, stride), torch.nn.ReLU(), *conv_bn(cout, cout, 3, 1))
        self.down = torch.nn.Sequential(*conv_bn(cin, cout, 1, stride)) if stride != 1 or cin != cout else None

    def forward(self, x):
        return torch.relu(self.body(x) + (self.down(x) if self.down is not None else x))


def resnet18(classes=1000):
    layers = [*conv_bn(3, 64, 7, 2), torch.nn.ReLU(), torch.nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
        cin = cout
    layers += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(512, classes)]
    return torch.nn.Sequential(*layers)


class HorovodCopy:
    """horovod/torch/elastic/state.py: ModelStateHandler and
    OptimizerStateHandler save copy.deepcopy(x.state_dict()), which replaces
    the previous copy."""

    def __init__(self, state):
        self.state, self.saved = state, None

    def __call__(self):
        self.saved = (copy.deepcopy(self.state.model.state_dict()), copy.deepcopy(self.state.optimizer.state_dict()))


def torch_save(state):
    torch.save(state._state_dict(), io.BytesIO())


def timed(fn):
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def summary(times):
    return "%.1f (%.1f-%.1f)" % (statistics.median(times), min(times), max(times))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()

    hvd.init()
    torch.manual_seed(0)
    model = resnet18()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for p in model.parameters():  # one step, so that the momentum buffers exist
        p.grad = torch.randn_like(p)
    optimizer.step()
    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)
    modes = {"edt commit": state.commit, "edt copy": state.save,
             "horovod copy": HorovodCopy(state), "torch.save": lambda: torch_save(state)}

    @hvd.elastic.run
    def measure(state):
        state.commit()  # the first commit makes the buffers
        times = {name: [] for name in modes}
        for _ in range(args.rounds):
            for name, fn in modes.items():
                hvd.allreduce(torch.zeros(1), name="elastic_commit.meet")
                times[name].append(timed(fn))
        return times

    times = measure(state)
    if hvd.rank() == 0:
        params = sum(p.numel() for p in model.parameters())
        print("elastic_commit: %d ranks, ResNet-18 state: %.1fM parameters, SGD momentum, %d rounds, torch %s"
              % (hvd.size(), params / 1e6, args.rounds, torch.__version__))
        print("\n| per commit | ms, median (min-max) |\n|---|---:|")
        for name, values in times.items():
            print("| %s | %s |" % (name, summary(values)))
        edt, horovod = statistics.median(times["edt commit"]), statistics.median(times["horovod copy"])
        print("\nedt commit / horovod copy: %.2f; goal <= 1: %s" % (edt / horovod, "met" if edt <= horovod else "not met"))


if __name__ == "__main__":
    main()
