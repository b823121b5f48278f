"""The addresses a test network may take.

in_use(net): the first line of `ip addr` or `ip route` on this machine whose
address or route overlaps `net` (an ipaddress network), or None when `net`
is free for a test to own end to end.
"""

import ipaddress
import re
import subprocess


def in_use(net):
    listing = []
    for command in (["ip", "-o", "-4", "addr", "show"], ["ip", "-4", "route"]):
        listing += subprocess.run(command, check=True, capture_output=True, text=True).stdout.splitlines()
    for line in listing:
        for cidr in re.findall(r"\b(\d+\.\d+\.\d+\.\d+(?:/\d+)?)\b", line):
            try:
                other = ipaddress.ip_network(cidr, strict=False)
            except ValueError:
                continue
            if other.prefixlen > 0 and other.overlaps(net):
                return line.strip()
    return None
