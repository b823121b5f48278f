"""Free TCP ports for the servers the demo and the tests start.

A port the kernel hands out for bind(("...", 0)) comes from its ephemeral
range, and once the probe closes it, any connect() on the machine (or an
ephemeral listener of the very server it is meant for) may take it before
the server binds it. So the port comes from below that range, where the
kernel never picks one by itself; only another caller choosing the same
random port in the same moment could take it, one chance in about 10,000.
"""

import random
import socket

LOWEST = 20000


def ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(n) for n in f.read().split())
            return low, high
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port(host="127.0.0.1"):
    """A port nothing listens on at `host`, outside the ephemeral range."""
    low, high = ephemeral_range()
    candidates = list(range(LOWEST, low)) + list(range(high + 1, 65536))
    for port in random.sample(candidates, min(200, len(candidates))):
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port on {host} outside the ephemeral range {low}-{high}")
