"""The torchrun side of bench/resize_latency and bench/net/resize: a Gloo
allreduce loop that logs, per step, the world size and its pid as JSON lines
(like edt-bench-elastic). It runs until the file named by STOP_FILE exists.

    train.py [GRAD_ELEMS] [--state-size BYTES --checkpoint FILE --checkpoint-every N] [--step-ms MS]

With --state-size, each worker also holds that much state (float32), as a
large model's parameters and optimizer state, and recovers it as torchrun's
users do: rank 0 saves it with the step to --checkpoint (torch.save, then a
rename) every N steps, and every worker that starts loads the checkpoint if
there is one and goes on from its step. torchrun restarts every worker when
a node joins, so the steps since the last checkpoint are done again."""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("grad_elems", type=int, nargs="?", default=1024)
    p.add_argument("--state-size", type=float, default=0)
    p.add_argument("--checkpoint")
    p.add_argument("--checkpoint-every", type=int, default=100)
    p.add_argument("--step-ms", type=float, default=5.0)
    return p.parse_args()


def load_state(args):
    """(state, step): the checkpoint's, else new."""
    if args.checkpoint and os.path.exists(args.checkpoint):
        saved = torch.load(args.checkpoint)
        return saved["state"], saved["step"]
    return torch.ones(int(args.state_size) // 4), 0


def save_state(args, state, step):
    torch.save({"state": state, "step": step}, args.checkpoint + ".tmp")
    os.replace(args.checkpoint + ".tmp", args.checkpoint)


def main():
    args = parse()
    stop_file = os.environ["STOP_FILE"]
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    print(json.dumps({"event": "start", "pid": os.getpid(), "rank": rank, "size": size, "t": time.time(),
                      "restart": int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))}), flush=True)
    state, step = load_state(args) if args.state_size else (None, 0)
    if state is not None:
        print(json.dumps({"event": "loaded", "rank": rank, "step": step, "t": time.time()}), flush=True)
    grad = torch.ones(args.grad_elems)
    while not os.path.exists(stop_file):
        dist.all_reduce(grad)
        grad.fill_(1.0)
        step += 1
        print(json.dumps({"event": "step", "pid": os.getpid(), "rank": rank, "size": size, "step": step,
                          "t": time.time()}), flush=True)
        if state is not None and args.checkpoint and rank == 0 and step % args.checkpoint_every == 0:
            save_state(args, state, step)
        time.sleep(args.step_ms / 1000)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
