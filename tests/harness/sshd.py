"""An OpenSSH sshd for edtrun's tests: the "remote hosts" 127.0.0.2 and 127.0.0.3.

Contract: Sshd(directory) writes a throwaway host key, a client key, its
authorized_keys and sshd_config into `directory` (which the caller made and
removes), starts /usr/sbin/sshd listening on every address of `hosts` at one
free port, and returns once each accepts connections (RuntimeError after 10
s). args() is what edtrun needs to reach it (-p, -i, no known_hosts);
stop() ends it. Needs root (sshd and logins as root).

make_keys(directory) and write_config(...) are its two steps on their own,
for a harness that starts its sshds itself (bench/net/testbed.py, one per
network namespace).
"""
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import textwrap
import time

from .ports import free_port

HOSTS = ("127.0.0.2", "127.0.0.3")


def wait_for_listener(address, port, limit=10.0):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            socket.create_connection((address, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nothing listens on %s:%d" % (address, port))


def make_keys(directory):
    """(client key, host key, authorized_keys) made in `directory`: throwaway
    ed25519 keys, the client's public key the one authorized."""
    client_key = os.path.join(directory, "client_key")
    host_key = os.path.join(directory, "host_key")
    for path in (client_key, host_key):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path], check=True)
    authorized = os.path.join(directory, "authorized_keys")
    shutil.copy(client_key + ".pub", authorized)
    os.chmod(authorized, 0o600)
    return client_key, host_key, authorized


def write_config(path, listen, host_key, authorized, pid_file, extra=""):
    """An sshd_config at `path`: listening on each ADDRESS:PORT of `listen`,
    root by key only, no PAM; `extra` lines appended. Also makes sshd's
    privilege separation directory, which a system without a running sshd
    may lack."""
    with open(path, "w") as f:
        for address in listen:
            f.write(f"ListenAddress {address}\n")
        f.write(textwrap.dedent(f"""\
            HostKey {host_key}
            AuthorizedKeysFile {authorized}
            PidFile {pid_file}
            PermitRootLogin prohibit-password
            PubkeyAuthentication yes
            PasswordAuthentication no
            KbdInteractiveAuthentication no
            UsePAM no
            StrictModes no
            """) + extra)
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)


class Sshd:
    """sshd -D on `hosts` (HOSTS by default), keys in `directory`."""

    def __init__(self, directory, hosts=HOSTS):
        self.directory = directory
        self.hosts = hosts
        self.port = free_port(*hosts)
        self.key, host_key, authorized = make_keys(directory)
        config = os.path.join(directory, "sshd_config")
        write_config(config, ["%s:%d" % (host, self.port) for host in hosts], host_key, authorized,
                     os.path.join(directory, "sshd.pid"))
        self.log = open(os.path.join(directory, "sshd.log"), "w")
        self.process = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", config],
                                        stdout=self.log, stderr=subprocess.STDOUT)
        for host in hosts:
            wait_for_listener(host, self.port)

    def args(self):
        return ["-p", str(self.port), "-i", self.key, "--ssh-option", "UserKnownHostsFile=/dev/null"]

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)
        self.log.close()


@contextlib.contextmanager
def running(prefix="edt-sshd-", hosts=HOSTS):
    """An Sshd in a fresh temporary directory, stopped and removed on exit
    (the body of a pytest fixture: `with sshd.running() as server: yield server`)."""
    directory = tempfile.mkdtemp(prefix=prefix)
    server = Sshd(directory, hosts)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)
