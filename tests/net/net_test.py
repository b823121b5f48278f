"""Every edt collective across hosts, on the namespace testbed.

bench/net/testbed.py builds 2 hosts (network namespaces with their own
hostname and sshd, links shaped to 10 Gbit/s both ways); edtrun, on host 0,
starts 2 ranks per host (host 1's over ssh) of net-collectives-check, which
runs each collective and checks every element. Once with the automatic
transport (shared memory inside a host, TCP across: the hierarchical
algorithms) and once with every rank over TCP. Afterwards nothing of the
testbed is left: no namespace, no bridge, no process.

Skips, saying why, only where network namespaces cannot be made (not root);
CI runs as root, so it runs there.
"""
import os
import subprocess

import pytest

import testbed  # bench/net/testbed.py, on the PYTHONPATH the test registration sets

EDTRUN = os.environ.get("EDTRUN", "edtrun")
CHECK = os.environ.get("NET_CHECK", "net-collectives-check")
SUBNET = "10.231.1.0/24"  # the test's own block (the benchmarks use 10.231.0.0/24)

WHY_NOT = testbed.can_make_namespaces()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"cannot build the testbed: {WHY_NOT}")


@pytest.fixture(scope="module")
def bed():
    with testbed.Testbed(hosts=2, rate="10gbit", subnet=SUBNET) as b:
        yield b
    leftover = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(h.netns in leftover for h in b.hosts), leftover
    assert subprocess.run(["ip", "link", "show", b.bridge], capture_output=True).returncode != 0


def run_check(bed, transport):
    hosts = ",".join(f"{a}:2" for a in bed.addresses())
    env = dict(os.environ, EDT_TRANSPORT=transport, EDT_TIMEOUT="60s")
    result = bed.run(0, [EDTRUN, "-np", "4", "-H", hosts] + bed.edtrun_ssh_args() + [CHECK],
                     env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, f"edtrun exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    return [line for line in result.stdout.splitlines() if ": ok " in line]


@pytest.mark.parametrize("transport,name", [("auto", "shm+tcp"), ("tcp", "tcp")])
def test_every_collective_across_two_hosts(bed, transport, name):
    lines = run_check(bed, transport)
    assert len(lines) == 4, lines
    for rank in range(4):
        host = bed.addresses()[rank // 2]
        mine = [line for line in lines if f"rank {rank}/4 " in line]
        assert len(mine) == 1 and f"host {host} transport {name}: ok" in mine[0], lines


def test_hosts_are_apart(bed):
    # Each host has its own hostname and reaches the other only over its link.
    names = [bed.run(i, ["hostname"], capture_output=True, text=True).stdout.strip() for i in range(2)]
    assert names == bed.addresses()
    routes = bed.run(0, ["ip", "-4", "route"], capture_output=True, text=True).stdout
    assert "default" not in routes and SUBNET in routes, routes
