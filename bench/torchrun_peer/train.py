"""The torchrun side of bench/resize_latency: a Gloo allreduce loop that logs,
per step, the world size and its pid as JSON lines (like edt-bench-elastic).
It runs until the file named by STOP_FILE exists."""
import json
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    grad_elems = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    stop_file = os.environ["STOP_FILE"]
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    print(json.dumps({"event": "start", "pid": os.getpid(), "rank": rank, "size": size, "t": time.time(),
                      "restart": int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))}), flush=True)
    grad = torch.ones(grad_elems)
    step = 0
    while not os.path.exists(stop_file):
        dist.all_reduce(grad)
        grad.fill_(1.0)
        step += 1
        print(json.dumps({"event": "step", "pid": os.getpid(), "rank": rank, "size": size, "step": step,
                          "t": time.time()}), flush=True)
        time.sleep(0.005)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
