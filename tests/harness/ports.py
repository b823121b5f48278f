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


def free_port(*hosts):
    """A port nothing listens on at any of `hosts` (127.0.0.1 if none), outside the ephemeral range."""
    hosts = hosts or ("127.0.0.1",)
    low, high = ephemeral_range()
    candidates = list(range(LOWEST, low)) + list(range(high + 1, 65536))
    for port in random.sample(candidates, min(200, len(candidates))):
        if all(_bindable(host, port) for host in hosts):
            return port
    raise RuntimeError(f"no port free on {', '.join(hosts)} outside the ephemeral range {low}-{high}")


def _bindable(host, port):
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True
