#!/usr/bin/env python3
"""Containers on edtd's bridge (`--network bridge:NAME`): each in a network
namespace of its own, reaching its own cluster and nothing else
(docs/security.md, "The network").

An edtd with its own bridge and address block makes two users' clusters of
two containers each, then checks:
  - the containers are Running, each sees only lo and eth0 (/proc/net/dev),
    with its address, a route to its peers through eth0, an MTU of 65520
    and a MAC made from its address;
  - ssh between the containers of a cluster works by name (the cluster's
    /etc/hosts), and its bytes go through eth0 (its counters grow by what
    was sent); mpirun across them, a job and `edt exec` run inside; from the
    host, `edt ssh` reaches a worker and Jupyter (in the launcher's own
    namespace, on its fixed port) serves its page through edtd's proxy;
  - from alice's launcher: bob's sshd, edtd's API port and a listener the
    test opens on the host's 0.0.0.0 (at the gateway) are unreachable, while
    alice's worker's sshd is reachable; it learns its worker's MAC by ARP,
    never bob's; binding bob's or alice's worker's
    address fails (the container does not have them); from bob's launcher,
    alice's sshd is unreachable;
  - ARP stays in its cluster's ports: each launcher, having tried the other
    cluster's launcher (its neighbour entry waits), then ARPs for its own
    worker (a broadcast request, flooded to every port of the bridge); the
    other launcher learns no MAC from it;
  - out of the host (edtd's default --outbound nat), against an "outside"
    network the test makes (a namespace behind a veth pair at 198.18.215.0/30):
    alice's launcher reaches a server there, which sees the host's address
    (masqueraded), but not the host's own end of that link; the outside
    cannot open a connection to a container;
  - edtd's log warns, at start, of another table's forward chain whose
    policy is drop (the test makes one that accepts everything first);
  - a second edtd asked for an overlapping block is refused, naming the
    bridge's address, and one asked for the same bridge and block, naming
    the first edtd;
  - edtd restarted on the same bridge and block, now with --outbound none,
    comes back (its own bridge's address is no overlap): a worker added then
    is reached, and the outside server no longer is;
  - a container gone (scaled 2 -> 3 -> 2) leaves no host-side veth; the clusters
    deleted, neither the bridge, any veth of the block nor edtd's nft tables
    are left.
Prints create-to-Running of alice's 2-container cluster.

Needs root; run under flock /tmp/edt-integration.lock.
  bridge_test.py --edtd build/src/control/edtd --edt build/src/cli/edt
"""
import argparse
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from harness import users
from harness.edtd import ScratchEdtd
from harness.users import TIMEOUT


BRIDGE = "edtnettest0"
BLOCK = "198.18.213.0/24"  # this test's own block; its gateway is .1
GATEWAY = "198.18.213.1"
BLOCKED_WAIT = 2.0  # a connect that gets no answer: how long one is given
# The "outside": a namespace behind a veth pair, in this test's own block.
OUTSIDE_NS = "edtnettestout"
OUTSIDE_LINK = "edtnetout0"
OUTSIDE_HOST, OUTSIDE_ADDRESS = "198.18.215.1", "198.18.215.2"
OUTSIDE_PORT = 7999
# Serves each connection its peer's address, in the outside namespace.
OUTSIDE_SERVER = r'''
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", %d))
s.listen()
print("ready", flush=True)
while True:
    c, peer = s.accept()
    c.sendall(peer[0].encode())
    c.close()
''' % OUTSIDE_PORT

# Run inside a container: prints one JSON object.
PROBE = r'''
import errno, fcntl, json, socket, struct, subprocess, sys
spec = json.loads(sys.argv[1])

def counters():
    for line in open("/proc/net/dev").readlines()[2:]:
        name, _, rest = line.partition(":")
        if name.strip() == "eth0":
            fields = rest.split()
            return int(fields[0]), int(fields[8])
    return 0, 0

# SIOCGIFMTU: /sys is the host's, so its class/net is too.
out = {"interfaces": sorted(l.partition(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]),
       "mtu": struct.unpack("16si", fcntl.ioctl(socket.socket(), 0x8921, struct.pack("16si", b"eth0", 0)))[1],
       # SIOCGIFHWADDR: the sockaddr's data starts with the MAC.
       "mac": ":".join("%02x" % b for b in fcntl.ioctl(socket.socket(), 0x8927, struct.pack("16s16x", b"eth0"))[18:24]),
       "connect": {}, "bind": {}}
for host, port in spec["connect"]:
    s = socket.socket()
    s.settimeout(spec["timeout"])
    try:
        s.connect((host, port))
        out["connect"]["%s:%d" % (host, port)] = "ok"
    except socket.timeout:
        out["connect"]["%s:%d" % (host, port)] = "timeout"
    except OSError as e:
        out["connect"]["%s:%d" % (host, port)] = errno.errorcode.get(e.errno, str(e))
    s.close()
for address in spec["bind"]:
    s = socket.socket()
    try:
        s.bind((address, 0))
        out["bind"][address] = "ok"
    except OSError as e:
        out["bind"][address] = errno.errorcode.get(e.errno, str(e))
    s.close()
# The neighbours this container learned a MAC of (flags 0x2: complete).
out["arp"] = sorted(l.split()[0] for l in open("/proc/net/arp").readlines()[1:] if l.split()[2] == "0x2")
if spec.get("fetch"):
    try:
        s = socket.create_connection(tuple(spec["fetch"]), timeout=spec["timeout"])
        out["fetch"] = s.recv(100).decode()
        s.close()
    except OSError as e:
        out["fetch"] = "error: %s" % e
if spec.get("peer"):
    out["route"] = subprocess.run(["ip", "route", "get", spec["peer_address"]], capture_output=True, text=True).stdout
    before = counters()
    r = subprocess.run(["ssh", spec["peer"], "wc -c; hostname; echo $SSH_CONNECTION"], input=b"\0" * spec["bytes"],
                       capture_output=True)
    after = counters()
    out["ssh"] = {"code": r.returncode, "stdout": r.stdout.decode(), "stderr": r.stderr.decode()[-500:],
                  "tx": after[1] - before[1]}
print(json.dumps(out))
'''


class Outside:
    """A network beyond the host: a namespace whose eth0 pairs with a link
    on the host, a route back to the containers' block through the host,
    and a server in it. Removed on exit."""

    def __enter__(self):
        self.down()
        for command in (f"ip netns add {OUTSIDE_NS}",
                        f"ip link add {OUTSIDE_LINK} type veth peer name eth0 netns {OUTSIDE_NS}",
                        f"ip addr add {OUTSIDE_HOST}/30 dev {OUTSIDE_LINK}", f"ip link set {OUTSIDE_LINK} up",
                        f"ip -n {OUTSIDE_NS} addr add {OUTSIDE_ADDRESS}/30 dev eth0",
                        f"ip -n {OUTSIDE_NS} link set eth0 up", f"ip -n {OUTSIDE_NS} link set lo up",
                        f"ip -n {OUTSIDE_NS} route add {BLOCK} via {OUTSIDE_HOST}"):
            subprocess.run(command.split(), check=True)
        self.server = subprocess.Popen(["ip", "netns", "exec", OUTSIDE_NS, sys.executable, "-c", OUTSIDE_SERVER],
                                       stdout=subprocess.PIPE, text=True)
        if self.server.stdout.readline().strip() != "ready":
            raise RuntimeError("the outside server did not start")
        return self

    def connect_from_outside(self, address, port):
        """Whether a connection from the outside to address:port opens."""
        code = ("import socket; s = socket.socket(); s.settimeout(%r); s.connect((%r, %d))" %
                (BLOCKED_WAIT, address, port))
        return subprocess.run(["ip", "netns", "exec", OUTSIDE_NS, sys.executable, "-c", code],
                              capture_output=True).returncode == 0

    def __exit__(self, *exc):
        self.server.kill()
        self.server.wait()
        self.down()

    @staticmethod
    def down():
        subprocess.run(["ip", "link", "del", OUTSIDE_LINK], capture_output=True)
        subprocess.run(["ip", "netns", "del", OUTSIDE_NS], capture_output=True)


class ForwardDropChain:
    """Another table's forward chain whose policy is drop, as Docker's
    FORWARD is: edtd warns of it at start. Its one rule accepts everything,
    so nothing on the host is dropped while it is there."""
    TABLE = "edtnettestfw"

    def __enter__(self):
        self.__exit__()
        rules = f"table ip {self.TABLE} {{\n chain FORWARD {{\n  type filter hook forward priority 10; policy drop;\n  accept\n }}\n}}\n"
        subprocess.run(["nft", "-f", "-"], input=rules, text=True, check=True)
        return self

    def __exit__(self, *exc):
        subprocess.run(["nft", "delete", "table", "ip", self.TABLE], capture_output=True)


def host_links():
    return {link["ifname"]: link for link in json.loads(subprocess.check_output(["ip", "-j", "link"]))}


def nft_tables():
    return subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, check=True).stdout


def veth_of(address):
    return "edtv%08x" % int.from_bytes(socket.inet_aton(address), "big")


class Bridge(users.Tenants):
    def __init__(self, edtd, edt):
        super().__init__(edtd)
        self.edt = edt
        self.figures = []

    def cli(self, token, *args):
        env = dict(os.environ, EDT_API=self.edtd.base, EDT_TOKEN=token)
        return subprocess.run([self.edt, *args], capture_output=True, text=True, timeout=TIMEOUT, env=env)

    def probe(self, cluster, address, spec):
        r = self.ssh(cluster, address, "python3 - " + shlex.quote(json.dumps(spec)), stdin=PROBE)
        if r.returncode != 0:
            raise RuntimeError(f"the probe in {address} failed: {r.stderr[-2000:]}")
        return json.loads(r.stdout)

    def make_clusters(self):
        alice, bob = self.make_user("alice"), self.make_user("bob")
        clusters = {}
        for user, token in (("alice", alice), ("bob", bob)):
            t0 = time.monotonic()
            status, body = self.api("POST", "/clusters", {"name": f"{user}-c", "framework": "horovod",
                                                          "containers": 2}, token)
            if status != 201:
                raise RuntimeError(f"create {user}-c: {status} {body}")
            clusters[user] = self.wait_running(f"{user}-c", token, 2)
            self.figures.append(f"create-to-Running, {user}-c (2 containers, bridge): {time.monotonic() - t0:.2f} s")
        return (alice, clusters["alice"]["status"]["containers"]), (bob, clusters["bob"]["status"]["containers"])

    def inside_alice(self, alice, bob, listener_port):
        (launcher, worker), (bob_launcher, _) = alice, bob
        for c in alice + bob:
            self.check(c["address"].startswith("198.18.213."), f"{c['name']} has address {c['address']}")
            self.check(veth_of(c["address"]) in host_links(), f"{c['name']}: no host end {veth_of(c['address'])}")
        port = self.edtd.ssh_port
        targets = [[worker["address"], port], [bob_launcher["address"], port], [GATEWAY, self.edtd.port],
                   [GATEWAY, listener_port]]
        got = self.probe("alice-c", launcher["address"], {
            "connect": targets, "bind": [bob_launcher["address"], worker["address"]], "timeout": BLOCKED_WAIT,
            "peer": worker["name"], "peer_address": worker["address"], "bytes": 2_000_000})
        self.check(got["interfaces"] == ["eth0", "lo"], f"alice's launcher sees interfaces {got['interfaces']}")
        # Nothing leaves the host over the bridge: frames as large as loopback's.
        self.check(got["mtu"] == 65520, f"alice's launcher's eth0 has MTU {got['mtu']}, not 65520")
        # Its MAC comes from its address, so that a restart there keeps it.
        mac = "02:ed:" + ":".join("%02x" % b for b in socket.inet_aton(launcher["address"]))
        self.check(got["mac"] == mac, f"alice's launcher's eth0 has MAC {got['mac']}, not {mac}")
        connect = got["connect"]
        self.check(connect[f"{worker['address']}:{port}"] == "ok", f"launcher -> own worker's sshd: {connect}")
        for host, p in targets[1:]:
            self.check(connect[f"{host}:{p}"] != "ok", f"alice's launcher reached {host}:{p}: {connect}")
        for address, result in got["bind"].items():
            self.check(result == "EADDRNOTAVAIL", f"alice's launcher binding {address}: {result}")
        # ARP crosses no cluster either: bob's launcher's MAC stays unknown.
        self.check(worker["address"] in got["arp"] and bob_launcher["address"] not in got["arp"],
                   f"alice's launcher learned the MACs of {got['arp']}")
        self.check(f"dev eth0 src {launcher['address']}" in got["route"], f"route to the worker: {got['route']}")
        ssh = got["ssh"]
        lines = ssh["stdout"].split()
        self.check(ssh["code"] == 0 and lines[:3] == ["2000000", worker["name"], launcher["address"]],
                   f"ssh to the worker by name: {ssh}")
        self.check(ssh["tx"] >= 2_000_000, f"2 MB sent to the worker but eth0 sent {ssh['tx']} bytes")

    def outbound(self, alice, outside, open_):
        """With --outbound nat a container reaches the outside as the host
        (the server sees the host's address), never the host itself; with
        none it reaches nothing there. The outside never reaches in."""
        launcher = alice[0]
        got = self.probe("alice-c", launcher["address"], {
            "connect": [[OUTSIDE_HOST, self.edtd.ssh_port]], "bind": [], "timeout": BLOCKED_WAIT,
            "fetch": [OUTSIDE_ADDRESS, OUTSIDE_PORT]})
        if open_:
            self.check(got["fetch"] == OUTSIDE_HOST, f"outbound nat: the outside server saw {got['fetch']!r}, "
                       f"not the host's {OUTSIDE_HOST}")
        else:
            self.check(got["fetch"].startswith("error"), f"outbound none: the outside server answered {got['fetch']!r}")
        self.check(got["connect"][f"{OUTSIDE_HOST}:{self.edtd.ssh_port}"] != "ok",
                   f"alice's launcher reached the host's outside address: {got['connect']}")
        self.check(not outside.connect_from_outside(launcher["address"], self.edtd.ssh_port),
                   "the outside opened a connection to alice's launcher")

    def inside_bob(self, alice, bob):
        got = self.probe("bob-c", bob[0]["address"], {"connect": [[alice[0]["address"], self.edtd.ssh_port],
                                                                  [bob[1]["address"], self.edtd.ssh_port]],
                                                      "bind": [], "timeout": BLOCKED_WAIT})
        self.check(got["connect"][f"{bob[1]['address']}:{self.edtd.ssh_port}"] == "ok", f"bob -> bob: {got}")
        self.check(got["connect"][f"{alice[0]['address']}:{self.edtd.ssh_port}"] != "ok", f"bob -> alice: {got}")

    def netns_of(self, cluster, address):
        """The host's path to the network namespace of the container at
        `address`: that of a process of the host in it (its sshd)."""
        ns = self.ssh(cluster, address, "readlink /proc/self/ns/net").stdout.strip()
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.readlink(f"/proc/{pid}/ns/net") == ns:
                    return f"/proc/{pid}/ns/net"
            except OSError:
                continue
        raise RuntimeError(f"no process of the host in the network namespace {ns!r} of {address}")

    def arp_from(self, cluster, launcher, worker):
        """The launcher's next packet to its worker starts with a broadcast
        ARP request (the host, as the test, drops its entry for the worker:
        the tenant cannot). Returns the MACs the launcher then knows."""
        subprocess.run(["nsenter", "--net=" + self.netns_of(cluster, launcher["address"]), "ip", "neigh", "del",
                        worker["address"], "dev", "eth0"], capture_output=True, timeout=TIMEOUT)
        got = self.probe(cluster, launcher["address"], {"connect": [[worker["address"], self.edtd.ssh_port]],
                                                        "bind": [], "timeout": BLOCKED_WAIT})
        self.check(got["connect"][f"{worker['address']}:{self.edtd.ssh_port}"] == "ok", f"{cluster}: {got}")
        return got["arp"]

    def arp_isolated(self, alice, bob):
        """Each launcher tried the other's (inside_alice, inside_bob): it
        holds a neighbour entry for that address, which any ARP request from
        there would fill. The other cluster's broadcasts must not reach it."""
        self.arp_from("bob-c", bob[0], bob[1])
        alice_knows = self.arp_from("alice-c", alice[0], alice[1])
        bob_knows = self.probe("bob-c", bob[0]["address"], {"connect": [], "bind": [], "timeout": BLOCKED_WAIT})["arp"]
        self.check(alice[1]["address"] in alice_knows and bob[0]["address"] not in alice_knows,
                   f"after bob's launcher ARPed for its worker, alice's launcher knows the MACs of {alice_knows}")
        self.check(bob[1]["address"] in bob_knows and alice[0]["address"] not in bob_knows,
                   f"after alice's launcher ARPed for its worker, bob's launcher knows the MACs of {bob_knows}")

    def jobs(self, token, containers):
        mpi = self.cli(token, "run", "alice-c", "--", "mpirun", "--allow-run-as-root", "--hostfile",
                       "/etc/mpi/hostfile", "-np", "2", "hostname")
        names = {line for line in mpi.stdout.splitlines() if line and not line.startswith("[")}
        self.check(mpi.returncode == 0 and names == {c["name"] for c in containers},
                   f"mpirun across alice-c: {mpi.returncode} {mpi.stdout} {mpi.stderr}")
        job = self.cli(token, "run", "alice-c", "--", "cat", "/proc/net/dev")
        interfaces = sorted(line.partition(":")[0].strip() for line in job.stdout.splitlines() if ":" in line)
        self.check(job.returncode == 0 and interfaces == ["eth0", "lo"],
                   f"a job's interfaces: {job.stdout} {job.stderr}")
        ex = self.cli(token, "exec", containers[1]["name"], "--", "sh", "-c", "ip -o -4 addr show dev eth0")
        self.check(ex.returncode == 0 and f"inet {containers[1]['address']}/24" in ex.stdout,
                   f"edt exec in the worker: {ex.returncode} {ex.stdout} {ex.stderr}")
        # bwrap brings lo up in the new namespace; edtd leaves it to it.
        lo = self.cli(token, "exec", containers[0]["name"], "--", "sh", "-c", "ip -o -4 addr show dev lo; ip -o link show dev lo")
        self.check(lo.returncode == 0 and "inet 127.0.0.1/8" in lo.stdout and "LOOPBACK,UP" in lo.stdout,
                   f"lo in the launcher: {lo.returncode} {lo.stdout} {lo.stderr}")

    def from_host(self, token, containers):
        """edt ssh and Jupyter: the host opens the connections, the replies
        come back through the filter."""
        ssh = self.cli(token, "ssh", "alice-c", containers[1]["name"], "hostname")
        self.check(ssh.returncode == 0 and ssh.stdout.strip() == containers[1]["name"],
                   f"edt ssh to the worker: {ssh.returncode} {ssh.stdout} {ssh.stderr}")
        link = self.cli(token, "jupyter", "alice-c")
        if link.returncode != 0:
            self.failures.append(f"edt jupyter: {link.returncode} {link.stdout} {link.stderr}")
            return
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        with opener.open(link.stdout.strip(), timeout=TIMEOUT) as page:
            body = page.read().decode(errors="replace")
            self.check(page.status == 200 and "jupyter" in body.lower(), f"Jupyter's page: {page.status} {body[:300]}")

    def overlap_refused(self):
        with tempfile.TemporaryDirectory(prefix="edt-bridge-overlap-") as d:
            os.chmod(d, 0o711)  # passable, as edtd's user namespaces want
            r = subprocess.run([self.edtd.proc.args[0], "--data-dir", d + "/data", "--listen", "127.0.0.1:1",
                                "--network", "bridge:edtnettest1", "--address-range", "198.18.213.128/25"],
                               capture_output=True, text=True, timeout=TIMEOUT)
            self.check(r.returncode != 0 and f"{GATEWAY}/24 on {BRIDGE}" in r.stderr and
                       not os.path.exists(d + "/data"), f"an overlapping block: {r.returncode} {r.stderr}")
            # The same bridge and block: no overlap, but the bridge is the first edtd's.
            r = subprocess.run([self.edtd.proc.args[0], "--data-dir", d + "/data", "--listen", "127.0.0.1:1",
                                "--network", f"bridge:{BRIDGE}", "--address-range", BLOCK],
                               capture_output=True, text=True, timeout=TIMEOUT)
            self.check(r.returncode != 0 and "another edtd runs on that bridge (data dir" in r.stderr and
                       not os.path.exists(d + "/data"), f"a second edtd on the bridge: {r.returncode} {r.stderr}")

    def wait_gone(self, interface, what):
        deadline = time.time() + TIMEOUT
        while interface in host_links():
            if time.time() > deadline:
                self.failures.append(f"{what}: {interface} still on the host after {TIMEOUT} s")
                return
            time.sleep(0.05)

    def run(self, listener_port, outside):
        log = self.edtd.read_log()
        self.check(f"ip {ForwardDropChain.TABLE} FORWARD, policy drop" in log and f"iifname {BRIDGE} accept" in log,
                   f"no warning of the forward chain that drops by default: {log}")
        (alice_token, alice), (bob_token, bob) = self.make_clusters()
        self.check(BRIDGE in host_links() and f"edt_{BRIDGE}" in nft_tables(), "no bridge or nft tables")
        # The host itself reaches the listener at the gateway: what the
        # containers cannot is their filter's doing.
        socket.create_connection((GATEWAY, listener_port), timeout=TIMEOUT).close()
        self.inside_alice(alice, bob, listener_port)
        self.inside_bob(alice, bob)
        self.arp_isolated(alice, bob)
        self.jobs(alice_token, alice)
        self.from_host(alice_token, alice)
        self.outbound(alice, outside, True)
        self.overlap_refused()
        self.edtd.restart(["--outbound", "none"], timeout=TIMEOUT)
        self.outbound(alice, outside, False)
        third = None
        for size in (3, 2):
            status, body = self.api("PATCH", "/clusters/alice-c", {"containers": size}, alice_token)
            self.check(status == 200, f"scale alice-c to {size}: {status} {body}")
            now = self.wait_running("alice-c", alice_token, size)["status"]["containers"]
            if size == 3:
                third = now[2]
                got = self.probe("alice-c", alice[0]["address"], {"connect": [[third["address"], self.edtd.ssh_port]],
                                                                  "bind": [], "timeout": BLOCKED_WAIT})
                self.check(set(got["connect"].values()) == {"ok"}, f"launcher -> a worker added after a restart: {got}")
        self.wait_gone(veth_of(third["address"]), "the worker scaled away")
        for name, token in (("alice-c", alice_token), ("bob-c", bob_token)):
            self.api("DELETE", "/clusters/" + name, token=token)
        deadline = time.time() + TIMEOUT
        while self.api("GET", "/clusters")[1].get("clusters"):
            if time.time() > deadline:
                raise RuntimeError("the clusters were not deleted within 60 s")
            time.sleep(0.05)
        for c in alice + bob:
            self.wait_gone(veth_of(c["address"]), c["name"])
        self.wait_gone(BRIDGE, "the bridge, the last cluster deleted")
        self.check(f"edt_{BRIDGE}" not in nft_tables(), f"nft tables left: {nft_tables()}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edtd", required=True)
    parser.add_argument("--edt", required=True)
    args = parser.parse_args()
    if BRIDGE in host_links():
        print(f"a bridge {BRIDGE} is already on this host (left by an earlier run?): remove it with "
              f"`ip link del {BRIDGE}` and `nft delete table bridge edt_{BRIDGE}; nft delete table inet edt_{BRIDGE}; "
              f"nft delete table ip edt_{BRIDGE}`")
        return 1
    listener = socket.socket()
    listener.bind(("0.0.0.0", 0))
    listener.listen()
    with ForwardDropChain():
        edtd = ScratchEdtd(args.edtd, BLOCK, extra=["--network", f"bridge:{BRIDGE}"])
        test = Bridge(edtd, args.edt)
        try:
            with Outside() as outside:
                test.run(listener.getsockname()[1], outside)
        finally:
            edtd.stop()
            listener.close()
    for figure in test.figures:
        print(figure)
    return test.report("network")


if __name__ == "__main__":
    sys.exit(main())
