"""The server: the warm interpreter that preloads modules once, listens on
the Unix socket and keeps relays (relay.py) forked ahead.

Fork safety: the server stays single-threaded (it checks before each fork)
and reads nothing from a client itself: it keeps four relays forked ahead,
each waiting to accept one client, so a slow or hostile client holds only
its own relay, and a client does not wait for the server to fork.

serve() returns only in a forked worker (what to run); close() stops
listening and removes the socket unless a newer server bound it since.
"""

import gc
import importlib
import os
import select
import signal
import socket
import struct
import sys
import time

from edt._warm.fresh import reseed
from edt._warm.kernel import PR_SET_PDEATHSIG, libc
from edt._warm.peer import peer_pidfd_missing
from edt._warm.relay import relay

MAX_RELAYS = 256  # connections served at once; more are closed (the client starts cold)
SPARES = 4  # relays forked ahead: as many clients at once pay no fork of the server
# Spares taken are forked again only once clients have stopped coming for
# REFILL_AFTER seconds, so that a scale's new workers do not share the CPU
# with those forks, unless fewer than REFILL_BELOW are left.
REFILL_AFTER = 1.0
REFILL_BELOW = 2


class Server:
    def __init__(self, socket_path, preload, containers=None):
        self.containers = containers
        before = set(sys.modules)
        for name in preload:
            __import__(name)
        # What a worker would otherwise load on first use, in every worker:
        # numpy's seeding (10 ms), edt's extension (75 ms).
        reseed()
        if "edt.torch" in sys.modules:
            importlib.import_module("edt._edt")
        self.packages = sorted({m.partition(".")[0] for m in set(sys.modules) - before
                                if getattr(sys.modules[m], "__file__", None) and not m.startswith("__")})
        # What the workers share stays shared: the collector leaves it alone.
        gc.collect()
        gc.freeze()
        exe = os.stat(sys.executable)
        self.interpreter_id = (exe.st_dev, exe.st_ino)
        self.path = socket_path
        if os.path.exists(socket_path):
            os.unlink(socket_path)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(socket_path)
        os.chmod(socket_path, 0o666)  # anyone may ask; the worker gets only what the asker has
        self.inode = os.stat(socket_path).st_ino
        self.listener.listen(128)
        self.pid = os.getpid()
        self.relays, self.spares = set(), set()
        self.stop_fds = []  # stop_on()'s pipe: its read end wakes serve() up
        # Without a pidfd of the client, its pid could name another process
        # by the time the relay reads /proc: every request then starts cold.
        self.no_peer_pidfd = peer_pidfd_missing()
        if self.no_peer_pidfd:
            print("edt._warm: %s (Linux 6.5 or later has it); every request starts cold" % self.no_peer_pidfd,
                  file=sys.stderr, flush=True)

    def stop_on(self, *signals):
        """serve() ends (SystemExit) once one of `signals` comes. Their
        handler only wakes serve() up, through the pipe of
        signal.set_wakeup_fd: an exception raised in a handler is lost where
        it lands in a callback of os.fork() (logging's lock release, as the
        server forks a spare), and the server would serve on."""
        self.stop_fds = list(os.pipe())
        os.set_blocking(self.stop_fds[1], False)
        signal.set_wakeup_fd(self.stop_fds[1])
        for sig in signals:
            signal.signal(sig, lambda *_: None)

    def close(self):
        """Stops listening; removes the socket unless a newer server bound the path since."""
        for pid in self.spares:
            os.kill(pid, signal.SIGKILL)
        self.listener.close()
        try:
            if os.stat(self.path).st_ino == self.inode:
                os.unlink(self.path)
        except FileNotFoundError:
            pass

    def reap(self):
        for pid in list(self.relays):
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                self.relays.discard(pid)
                self.spares.discard(pid)

    def serve(self):
        """Keeps SPARES relays forked ahead, each waiting for a client, until
        SIGTERM; returns (in a forked relay) what to run. A spare that took
        a client says so on a pipe; others are forked in the place of those
        taken once no client came for REFILL_AFTER seconds (at once when
        fewer than REFILL_BELOW are left)."""
        taken_r, taken_w = os.pipe()
        last_taken = 0.0
        while True:
            self.reap()
            quiet = time.monotonic() - last_taken
            wanted = SPARES if quiet >= REFILL_AFTER else REFILL_BELOW
            while len(self.spares) < wanted and len(self.relays) < MAX_RELAYS and \
                    len(os.listdir("/proc/self/task")) == 1:
                pid = os.fork()
                if pid == 0:
                    os.close(taken_r)
                    return self.spare(taken_w)
                self.relays.add(pid)
                self.spares.add(pid)
            # Without a spare (too many relays), clients are turned away: they start cold.
            waiting = [taken_r] + self.stop_fds[:1] + ([] if self.spares else [self.listener])
            refill = len(self.spares) < SPARES and quiet < REFILL_AFTER
            ready = select.select(waiting, [], [], REFILL_AFTER - quiet if refill else 1.0)[0]
            if self.stop_fds and self.stop_fds[0] in ready:
                raise SystemExit(0)
            if taken_r in ready:
                last_taken = time.monotonic()
                data = os.read(taken_r, 4 * SPARES)
                self.spares.difference_update(struct.unpack("%di" % (len(data) // 4), data[:len(data) // 4 * 4]))
            if self.listener in ready:
                self.listener.accept()[0].close()

    def spare(self, taken_w):
        """A relay forked ahead: waits for one client, then serves it. It
        dies with the server until it has one."""
        os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        for fd in self.stop_fds:
            os.close(fd)
        self.stop_fds = []
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != self.pid:
            os._exit(0)
        conn, _ = self.listener.accept()
        libc.prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0)
        os.write(taken_w, struct.pack("i", os.getpid()))
        os.close(taken_w)
        self.listener.close()
        return relay(conn, self)
