#!/usr/bin/python3
"""A stand-in for DeepSpeed's `deepspeed` command on several nodes (its
runner and PDSHRunner), for tests: DeepSpeed itself is not packaged for
Debian 12, so the tests check a cluster against what it does.

    deepspeed_runner.py --hostfile /job/hostfile [--master_addr A] [--master_port P] SCRIPT ARGS...

As DeepSpeed's runner does, it reads the hostfile ("host slots=N" lines,
"#" comments), exports to every node the variables of ~/.deepspeed_env and
./.deepspeed_env ("KEY=VALUE" lines) and those of its own environment whose
names start with NCCL, PYTHON, MV2, UCX or MLFLOW (PYTHONPATH with the
current directory in front), asks the first host for its address with
`ssh HOST hostname -I` unless --master_addr is given, and runs on every host
at once:

    pdsh -S -f 1024 -w h1,h2 'export K=V; ... cd CWD; python3 -u -m deepspeed_launch
        --world_info=BASE64 --node_rank=%n --master_addr=A --master_port=P SCRIPT ARGS'

with PDSH_RCMD_TYPE=ssh. deepspeed_launch.py (in the current directory,
which must be the same path on every node) stands in for
deepspeed.launcher.launch. The exit code is pdsh's.
"""

import argparse
import base64
import json
import os
import shlex
import subprocess
import sys

EXPORT_PREFIXES = ("MLFLOW", "NCCL", "PYTHON", "MV2", "UCX")
ENV_FILE = ".deepspeed_env"
FAN_OUT = 1024


def read_hostfile(path):
    """{host: slots}, in the file's order."""
    hosts = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            try:
                host, slots = line.split()
                key, value = slots.split("=")
                if key != "slots":
                    raise ValueError
                hosts[host] = int(value)
            except ValueError:
                sys.exit("%s:%d: '%s' is not 'host slots=N'" % (path, number, line))
    if not hosts:
        sys.exit("%s lists no host" % path)
    return hosts


def exports(cwd):
    out = {}
    for name, value in os.environ.items():
        if name.startswith(EXPORT_PREFIXES):
            out[name] = value
    out["PYTHONPATH"] = cwd + (":" + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
    for directory in (os.path.expanduser("~"), "."):
        path = os.path.join(directory, ENV_FILE)
        if os.path.isfile(path):
            with open(path) as f:
                for line in f:
                    if line.strip():
                        key, value = line.split("=", 1)
                        out[key.strip()] = value.strip()
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--hostfile", default="/job/hostfile")
    p.add_argument("--master_addr", default="")
    p.add_argument("--master_port", type=int, default=29500)
    p.add_argument("user_script")
    p.add_argument("user_args", nargs=argparse.REMAINDER)
    args = p.parse_args()
    hosts = read_hostfile(args.hostfile)
    first = next(iter(hosts))
    if not args.master_addr:
        out = subprocess.check_output("ssh %s hostname -I" % first, shell=True, text=True)
        args.master_addr = out.split()[0]
    world_info = {host: list(range(slots)) for host, slots in hosts.items()}
    encoded = base64.urlsafe_b64encode(json.dumps(world_info).encode()).decode()
    cwd = os.path.abspath(".")
    command = "".join("export %s=%s; " % (k, shlex.quote(v)) for k, v in exports(cwd).items())
    command += "cd %s; %s -u -m deepspeed_launch --world_info=%s --node_rank=%%n --master_addr=%s --master_port=%d " % (
        cwd, sys.executable, encoded, args.master_addr, args.master_port)
    command += " ".join([args.user_script] + [a if a.startswith("-") else shlex.quote(a) for a in args.user_args])
    argv = ["pdsh", "-S", "-f", str(FAN_OUT), "-w", ",".join(hosts), command]
    print("deepspeed_runner: master_addr=%s; %s" % (args.master_addr, " ".join(argv[:6])), flush=True)
    env = dict(os.environ, PDSH_RCMD_TYPE="ssh")
    sys.exit(subprocess.run(argv, env=env).returncode)


if __name__ == "__main__":
    main()
