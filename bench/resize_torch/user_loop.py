"""A Horovod user's elastic loop, instrumented, for bench/resize_torch/user_loop_resize.py.

As Horovod's examples write it (examples/elastic/pytorch/): `import
horovod.torch as hvd` (or edt.torch: --import edt), a model, SGD with
momentum wrapped in DistributedOptimizer, a TorchState with the model, the
optimizer and a step counter, a reset callback that scales the learning
rate with hvd.size(), a commit every step. --params sets the model's size
(parameters; the committed state is twice that with the momentum).

Prints one JSON object per line, each with the worker, the event and its
wall time t:
  exec        when the kernel started the process (from /proc/self/stat);
              warm: forked from the warm interpreter (torch already imported);
              its locale variables and UTF-8 mode
  imported    torch and Horovod (or edt.torch) imported
  init        hvd.init() returned (this worker is in a generation)
  built       the model, the optimizer and the TorchState built
  interrupted a survivor's commit raised HostsUpdatedInterrupt
  reset       the reset callback ran (survivors, at each new generation)
  enter       the training function was entered (every generation)
  step        a step ended (rank, size, step)
"""
import argparse
import json
import os
import sys
import time

T_EXEC = None


def _exec_time():
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))


T_EXEC = _exec_time()
parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=100000)
parser.add_argument("--step-ms", type=float, default=20)
parser.add_argument("--params", type=int, default=1 << 20)
parser.add_argument("--import", dest="module", choices=["horovod", "edt"], default="horovod")
args = parser.parse_args()
WORKER = os.environ.get("EDT_WORKER_ID", "")


def emit(event, **fields):
    print(json.dumps(dict(event=event, worker=WORKER, t=fields.pop("t", None) or time.time(), **fields)), flush=True)


emit("exec", t=T_EXEC, pid=os.getpid(), warm="torch" in sys.modules,
     locale={k: os.environ[k] for k in ("LC_ALL", "LC_CTYPE", "LANG") if k in os.environ}, utf8_mode=sys.flags.utf8_mode)
import torch  # noqa: E402
if args.module == "horovod":
    import horovod.torch as hvd  # noqa: E402
else:
    import edt.torch as hvd  # noqa: E402
emit("imported")

hvd.init()
emit("init", rank=hvd.rank(), size=hvd.size())
width = max(1, int(args.params ** 0.5))
model = torch.nn.Sequential(torch.nn.Linear(64, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
                            torch.nn.ReLU(), torch.nn.Linear(width, 8))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * hvd.size(), momentum=0.9)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())


def on_state_reset():
    for group in optimizer.param_groups:
        group["lr"] = 0.01 * hvd.size()
    emit("reset", size=hvd.size())


state = hvd.elastic.TorchState(model, optimizer, step=0)
state.register_reset_callbacks([on_state_reset])
emit("built", params=sum(p.numel() for p in model.parameters()))


def commit():
    try:
        state.commit()
    except hvd.HostsUpdatedInterrupt:
        emit("interrupted")
        raise


@hvd.elastic.run
def train(state):
    emit("enter", rank=hvd.rank(), size=hvd.size(), step=state.step)
    while state.step < args.steps:
        optimizer.zero_grad()
        model(torch.randn(8, 64)).pow(2).mean().backward()
        time.sleep(args.step_ms / 1000)
        optimizer.step()
        state.step += 1
        emit("step", rank=hvd.rank(), size=hvd.size(), step=state.step)
        commit()


train(state)
