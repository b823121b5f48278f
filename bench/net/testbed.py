#!/usr/bin/python3
"""A multi-host testbed on one machine: H hosts as network namespaces.

Each host is a network namespace with its own UTS namespace (its hostname
is its address, so that whatever a library resolves it to needs no DNS),
loopback and one interface, eth0, whose veth peer sits on a bridge the
testbed owns. Addresses come from a private block the testbed owns end to end
(default 10.231.0.0/24: host i is .11+i); the bridge has no address, so no
packet can leave the testbed. With --rate each host's link is shaped in both
directions with tc tbf: its uploads on eth0 inside the namespace, its
downloads on the veth end on the bridge. (--delay adds netem delay where the
kernel has netem; this one does not.) Every host runs OpenSSH's sshd with a
throwaway host key and client key, so edtrun's hostfile mode and mpirun's
rsh agent reach the hosts as they reach real ones.

Teardown is guaranteed: leaving the `with` block (normally, on an exception,
on Ctrl-C or SIGTERM) kills every process inside the namespaces, deletes
them, the bridge and the keys. A testbed whose owner was SIGKILLed is
removed by the next `up` (or by `testbed.py down --stale`).

    bench/net/testbed.py run --hosts 2 --rate 1gbit -- sh -c 'ip addr; ping -c1 10.231.0.12'
    bench/net/testbed.py down --stale

`run` executes the command on host 0 with TESTBED_ADDRESSES (comma-separated
host addresses), TESTBED_SSH_KEY and TESTBED_SSH_OPTIONS in its environment.

As a library: `with Testbed(hosts=2, rate="1gbit") as bed: bed.popen(1, [...])`.
Needs root (network namespaces, tc), iproute2, util-linux (nsenter, unshare)
and openssh-server.
"""
import argparse
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# tests/harness, for a program here as for the tests that import this file.
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))
from harness import network, sshd  # noqa: E402
from harness.processes import kill_until_gone  # noqa: E402

STATE = "/run/edt-testbed"  # one folder per live testbed: its tag, owner pid and names
UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}


def parse_rate(text):
    """'1gbit', '10Gbit', '500mbit' -> bits per second."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([kmgt]?bit)\s*", text.lower())
    if not m:
        raise ValueError(f"rate '{text}' is not a rate like 1gbit, 10gbit or 500mbit")
    return float(m.group(1)) * UNITS[m.group(2)]


def sh(cmd, check=True):
    """Runs an admin command; an error names the command and its output."""
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"testbed: `{' '.join(cmd)}` failed ({proc.returncode}): {proc.stdout.strip()}")
    return proc.stdout


def can_make_namespaces():
    """None if this machine can build a testbed, else the reason it cannot."""
    if os.geteuid() != 0:
        return "network namespaces and tc need root (run as root, or in CI)"
    for tool in ("ip", "tc", "nsenter", "unshare", "ssh", "ssh-keygen"):
        if not shutil.which(tool):
            return f"'{tool}' is not installed (scripts/install-deps.sh installs it)"
    if not os.path.exists("/usr/sbin/sshd"):
        return "/usr/sbin/sshd is not installed (openssh-server; scripts/install-deps.sh)"
    probe = f"edtprobe{os.getpid()}"
    proc = subprocess.run(["ip", "netns", "add", probe], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        return "this machine cannot make network namespaces: " + proc.stdout.strip()
    sh(["ip", "netns", "del", probe], check=False)
    return None


def netns_inode(name):
    try:
        return os.stat(f"/run/netns/{name}").st_ino
    except OSError:
        return None


def kill_inside(namespaces):
    """SIGKILLs every process whose network namespace is one of these; waits until none is left."""
    inodes = {i for i in (netns_inode(n) for n in namespaces) if i}
    if inodes:
        kill_until_gone(lambda: pids_inside(inodes), f"the testbed's namespaces {namespaces}")


def pids_inside(inodes):
    """The processes (this one aside) whose network namespace's inode is one of `inodes`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}/ns/net").st_ino in inodes and int(pid) != os.getpid():
                found.append(int(pid))
        except OSError:
            continue  # gone meanwhile
    return found


class Host:
    def __init__(self, index, address, netns, veth):
        self.index = index
        self.name = f"h{index}"
        self.address = address
        self.netns = netns
        self.veth = veth  # the end on the bridge
        self.holder = None  # sshd, started in the host's UTS namespace: nsenter's target


class Testbed:
    """H hosts joined by a bridge, each link shaped to `rate` (None: unshaped)."""

    def __init__(self, hosts, rate=None, subnet="10.231.0.0/24", delay=None, mtu=1500, log=print):
        if hosts < 1:
            raise ValueError("a testbed needs at least 1 host")
        self.rate_bps = parse_rate(rate) if rate else None
        self.rate = rate
        self.delay = delay
        self.mtu = mtu
        self.log = log
        self.net = ipaddress.ip_network(subnet)
        if not self.net.is_private or self.net.num_addresses < hosts + 16:
            raise ValueError(f"subnet {subnet} must be a private block with room for {hosts} hosts (from .11)")
        self.tag = f"{os.getpid() % 0x10000:04x}"
        self.bridge = f"edtnb{self.tag}"
        self.dir = None
        self.hosts = [Host(i, str(self.net.network_address + 11 + i), f"edtnet{self.tag}h{i}", f"edtv{self.tag}h{i}")
                      for i in range(hosts)]
        self._old_handlers = {}

    # --- lifetime -------------------------------------------------------

    def __enter__(self):
        for sig in (signal.SIGTERM, signal.SIGHUP):
            self._old_handlers[sig] = signal.signal(sig, _raise_exit)
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc):
        self.down()
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)
        return False

    def up(self):
        why = can_make_namespaces()
        if why:
            raise RuntimeError("testbed: " + why)
        remove_stale(self.log)
        self._check_subnet_free()
        self.dir = tempfile.mkdtemp(prefix=f"edt-testbed-{self.tag}-")
        os.makedirs(os.path.join(STATE, self.tag), exist_ok=True)
        with open(os.path.join(STATE, self.tag, "owner"), "w") as f:
            f.write(f"{os.getpid()}\n{self.bridge}\n" + "\n".join(h.netns for h in self.hosts) + "\n")
        sh(["ip", "link", "add", self.bridge, "type", "bridge"])
        sh(["ip", "link", "set", self.bridge, "mtu", str(self.mtu), "up"])
        for host in self.hosts:
            self._make_host(host)
        self._start_sshd()
        self.log(f"testbed: {len(self.hosts)} host(s) {', '.join(h.address for h in self.hosts)} on {self.bridge}, "
                 f"link {self.rate or 'unshaped'} each way" + (f", delay {self.delay}" if self.delay else ""))

    def down(self):
        """Idempotent: removes whatever of the testbed exists."""
        namespaces = [h.netns for h in self.hosts]
        kill_inside(namespaces)
        for ns in namespaces:
            sh(["ip", "netns", "del", ns], check=False)
        sh(["ip", "link", "del", self.bridge], check=False)
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        shutil.rmtree(os.path.join(STATE, self.tag), ignore_errors=True)

    def _check_subnet_free(self):
        line = network.in_use(self.net)
        if line:
            raise RuntimeError(f"testbed: {self.net} overlaps what is in use on this machine ({line}); "
                               "pick another block with --subnet")

    def _make_host(self, host):
        ns, inner = host.netns, f"edti{self.tag}h{host.index}"
        sh(["ip", "netns", "add", ns])
        sh(["ip", "link", "add", host.veth, "mtu", str(self.mtu), "type", "veth", "peer", "name", inner,
            "mtu", str(self.mtu)])
        sh(["ip", "link", "set", host.veth, "master", self.bridge, "up"])
        sh(["ip", "link", "set", inner, "netns", ns])
        ex = ["ip", "netns", "exec", ns]
        sh(ex + ["ip", "link", "set", inner, "name", "eth0"])
        sh(ex + ["ip", "addr", "add", f"{host.address}/{self.net.prefixlen}", "dev", "eth0"])
        sh(ex + ["ip", "link", "set", "eth0", "up"])
        sh(ex + ["ip", "link", "set", "lo", "up"])
        if self.rate_bps or self.delay:
            self._shape(ex + ["tc"], "eth0")  # the host's uploads
            self._shape(["tc"], host.veth)    # its downloads: the bridge's egress toward it

    def _shape(self, tc, dev):
        """tbf at the rate; its bucket holds 1 ms of the rate (at least 64 KiB, a GSO packet), its queue 5 ms more."""
        if self.delay:
            sh(tc + ["qdisc", "add", "dev", dev, "root", "handle", "1:", "netem", "delay", self.delay])
            parent = ["parent", "1:1", "handle", "10:"]
        else:
            parent = ["root", "handle", "10:"]
        if self.rate_bps:
            burst = max(int(self.rate_bps / 8 / 1000), 64 << 10) + 2 * self.mtu
            limit = burst + int(self.rate_bps / 8 * 0.005)
            sh(tc + ["qdisc", "add", "dev", dev] + parent + ["tbf", "rate", f"{int(self.rate_bps)}bit",
                                                            "burst", str(burst), "limit", str(limit)])

    def _start_sshd(self):
        self.key, host_key, authorized = sshd.make_keys(self.dir)
        for host in self.hosts:
            config = os.path.join(self.dir, f"sshd_config.{host.name}")
            sshd.write_config(config, [f"{host.address}:22"], host_key, authorized,
                              os.path.join(self.dir, f"sshd.{host.name}.pid"),
                              extra="MaxStartups 100\nMaxSessions 100\n")
            log = open(os.path.join(self.dir, f"sshd.{host.name}.log"), "w")
            # sshd holds the host's UTS namespace; command() joins it through its pid.
            host.holder = subprocess.Popen(
                ["ip", "netns", "exec", host.netns, "unshare", "--uts", "--", "sh", "-c",
                 f"hostname {host.address} && exec /usr/sbin/sshd -D -e -f {config}"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            log.close()
        for host in self.hosts:
            self._wait_for_namespaces(host)
        for host in self.hosts:
            self._wait_for_sshd(host)

    def _wait_for_namespaces(self, host):
        """Until the holder has entered the host's network and made its UTS namespace."""
        want_net, our_uts = netns_inode(host.netns), os.stat("/proc/self/ns/uts").st_ino
        deadline = time.monotonic() + 20
        while True:
            try:
                net = os.stat(f"/proc/{host.holder.pid}/ns/net").st_ino
                uts = os.stat(f"/proc/{host.holder.pid}/ns/uts").st_ino
            except OSError:
                net = uts = None
            if net == want_net and uts not in (None, our_uts):
                return
            if host.holder.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"testbed: the holder of {host.name} did not enter its namespaces "
                                   f"(exit {host.holder.poll()}); see {self.dir}/sshd.{host.name}.log")
            time.sleep(0.01)

    def _wait_for_sshd(self, host):
        deadline = time.monotonic() + 20
        while True:
            probe = subprocess.run(self.command(0 if host.index else min(1, len(self.hosts) - 1),
                                                self.ssh_command() + [host.address, "true"]),
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if probe.returncode == 0:
                return
            if host.holder.poll() is not None or time.monotonic() > deadline:
                with open(os.path.join(self.dir, f"sshd.{host.name}.log")) as f:
                    raise RuntimeError(f"testbed: sshd on {host.name} ({host.address}) does not answer: "
                                       f"{probe.stdout.strip()}; its log: {f.read().strip()}")
            time.sleep(0.05)

    # --- use ------------------------------------------------------------

    def addresses(self):
        return [h.address for h in self.hosts]

    def ssh_options(self):
        return ["StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "LogLevel=ERROR", "BatchMode=yes"]

    def ssh_command(self):
        """ssh as mpirun's rsh agent or a script would run it (add the host and the command)."""
        cmd = ["ssh", "-i", self.key]
        for o in self.ssh_options():
            cmd += ["-o", o]
        return cmd

    def edtrun_ssh_args(self):
        args = ["-i", self.key]
        for o in self.ssh_options():
            args += ["--ssh-option", o]
        return args

    def command(self, index, argv):
        """argv wrapped to run on host `index` (its network and UTS namespaces)."""
        host = self.hosts[index]
        # The network by its name, never through a process that might not have entered it yet: a
        # command in this machine's own namespace could send the testbed's traffic out of it.
        return ["nsenter", f"--net=/run/netns/{host.netns}", f"--uts=/proc/{host.holder.pid}/ns/uts", "--"] + list(argv)

    def popen(self, index, argv, **kwargs):
        return subprocess.Popen(self.command(index, argv), **kwargs)

    def run(self, index, argv, **kwargs):
        return subprocess.run(self.command(index, argv), **kwargs)

    def env(self):
        """What `testbed.py run` gives its command."""
        return {"TESTBED_ADDRESSES": ",".join(self.addresses()), "TESTBED_SSH_KEY": self.key,
                "TESTBED_SSH_OPTIONS": " ".join(self.ssh_options())}


def _raise_exit(signum, _frame):
    raise SystemExit(128 + signum)


def remove_stale(log=print):
    """Removes testbeds whose owner process is gone (their owner was SIGKILLed)."""
    if not os.path.isdir(STATE):
        return
    for tag in os.listdir(STATE):
        try:
            with open(os.path.join(STATE, tag, "owner")) as f:
                lines = f.read().split()
        except OSError:
            lines = []
        if len(lines) >= 2 and os.path.exists(f"/proc/{lines[0]}"):
            continue  # alive
        log(f"testbed: removing the stale testbed {tag} (its owner {lines[0] if lines else '?'} is gone)")
        namespaces = lines[2:]
        kill_inside(namespaces)
        for ns in namespaces:
            sh(["ip", "netns", "del", ns], check=False)
        if len(lines) >= 2:
            sh(["ip", "link", "del", lines[1]], check=False)
        shutil.rmtree(os.path.join(STATE, tag), ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    run = sub.add_parser("run", help="build a testbed, run a command on host 0, tear it down")
    run.add_argument("--hosts", type=int, default=2)
    run.add_argument("--rate", help="each host's link, each way: 1gbit, 10gbit (default: unshaped)")
    run.add_argument("--delay", help="netem delay per direction (kernels with netem only), e.g. 1ms")
    run.add_argument("--subnet", default="10.231.0.0/24")
    run.add_argument("command", nargs=argparse.REMAINDER)
    sub.add_parser("down", help="remove testbeds whose owner is gone").add_argument("--stale", action="store_true")
    args = parser.parse_args()
    if args.action == "down":
        remove_stale()
        return 0
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("run: give the command after --")
    try:
        with Testbed(args.hosts, args.rate, args.subnet, args.delay) as bed:
            return bed.run(0, command, env=dict(os.environ, **bed.env())).returncode
    except (RuntimeError, ValueError) as e:
        print(e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
