#!/usr/bin/python3
"""A stand-in for deepspeed.launcher.launch, for tests (DeepSpeed is not
packaged for Debian 12): what DeepSpeed's launcher runs on each node.

    python3 -m deepspeed_launch --world_info=BASE64 --node_rank=N --master_addr=A --master_port=P SCRIPT ARGS...

world_info is DeepSpeed's: base64 (URL-safe) of the JSON {host: [local GPU
ids]}, hosts in node order. Node N starts one process per id of its host,
global ranks counted over the hosts in order, each with DeepSpeed's
variables (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
CROSS_RANK, CROSS_SIZE, LOCAL_SIZE, CUDA_VISIBLE_DEVICES) and
`--local_rank=I` before the script's arguments, and waits for them; one
failing ends the others. It prints one line saying what it started and the
EDT_DEMO_* variables it was given (the tests export one through
.deepspeed_env).
"""

import argparse
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--world_info", required=True)
    p.add_argument("--node_rank", type=int, required=True)
    p.add_argument("--master_addr", required=True)
    p.add_argument("--master_port", type=int, required=True)
    p.add_argument("user_script")
    p.add_argument("user_args", nargs=argparse.REMAINDER)
    args = p.parse_args()
    world_info = json.loads(base64.urlsafe_b64decode(args.world_info))
    nodes = list(world_info)
    if not 0 <= args.node_rank < len(nodes):
        sys.exit("deepspeed_launch: node_rank %d is outside the %d nodes of world_info" % (args.node_rank, len(nodes)))
    first_rank = {}
    world_size = 0
    for node in nodes:
        first_rank[node] = world_size
        world_size += len(world_info[node])
    node = nodes[args.node_rank]
    local_ids = world_info[node]
    env = dict(os.environ, MASTER_ADDR=args.master_addr, MASTER_PORT=str(args.master_port),
               WORLD_SIZE=str(world_size), CROSS_RANK=str(args.node_rank), CROSS_SIZE=str(len(nodes)),
               LOCAL_SIZE=str(len(local_ids)), CUDA_VISIBLE_DEVICES=",".join(map(str, local_ids)))
    given = " ".join("%s=%s" % (k, v) for k, v in sorted(os.environ.items()) if k.startswith("EDT_DEMO_"))
    ranks = [first_rank[node] + i for i in range(len(local_ids))]
    print("deepspeed_launch: node_rank=%d host=%s (world_info's %s) ranks=%s world_size=%d %s"
          % (args.node_rank, socket.gethostname(), node, ranks, world_size, given), flush=True)
    processes = []
    for local_rank, rank in enumerate(ranks):
        argv = [sys.executable, "-u", args.user_script, "--local_rank=%d" % local_rank] + args.user_args
        processes.append(subprocess.Popen(argv, env=dict(env, RANK=str(rank), LOCAL_RANK=str(local_rank))))
    code = 0
    while processes:
        for process in list(processes):
            if process.poll() is None:
                continue
            processes.remove(process)
            if process.returncode != 0 and code == 0:
                code = process.returncode
                for other in processes:
                    other.send_signal(signal.SIGTERM)
        time.sleep(0.1)
    sys.exit(code)


if __name__ == "__main__":
    main()
