"""The warm start's protocol: the messages between a client (edt-warm-run,
src/launcher/warm_client.cc) and its relay, the checked request, and Cold,
the answer to every request that is not served exactly.

Protocol (SOCK_SEQPACKET, one JSON object a message):
  client -> relay  {"argv": [...], "env": ["K=V", ...]} + SCM_RIGHTS [0, 1, 2]
                   (+ "host", "cwd", "marker" for another container)
  relay -> client  {"started": pid | null} | {"cold": "reason"}
                   (pid: the worker's in the client's PID namespace)
  client -> relay  {"signal": N}                     (any number of times)
  relay -> client  {"exit": code} | {"killed": N}    (once, at the end)

A request larger than MAX_MESSAGE (or whose descriptors were cut) is Cold,
and so is one that does not carry exactly three descriptors or whose
fields are not as above.
"""

import array
import json
import os
import re
import socket

MAX_MESSAGE = 256 * 1024
HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


class Cold(Exception):
    """The request is served by a fresh process instead; the message says why."""


def send(conn, message):
    conn.sendmsg([json.dumps(message).encode()])


def receive(conn, max_fds=0):
    data, ancdata, flags, _ = conn.recvmsg(MAX_MESSAGE, socket.CMSG_SPACE(max_fds * 4) if max_fds else 0)
    fds = array.array("i")
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
        for fd in fds:
            os.close(fd)
        raise Cold("the request is larger than %d bytes" % MAX_MESSAGE)
    if not data:
        return None, list(fds)
    return json.loads(data), list(fds)


class Request:
    """The checked request: argv (list of str), env (dict), and for a worker
    in another container of the client's cluster its host, working
    directory and the line it prints before the command runs."""

    def __init__(self, message, fds):
        if len(fds) != 3:
            raise Cold("the request must carry exactly 3 descriptors (stdin, stdout, stderr), not %d" % len(fds))
        if not isinstance(message, dict):
            raise Cold("the request is not a JSON object")
        argv, env = message.get("argv"), message.get("env")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) and "\0" not in a for a in argv):
            raise Cold("'argv' must be a non-empty list of strings")
        if not isinstance(env, list) or not all(isinstance(e, str) and "=" in e and "\0" not in e for e in env):
            raise Cold("'env' must be a list of NAME=VALUE strings")
        self.argv, self.env, self.fds = argv, dict(e.split("=", 1) for e in env), fds
        self.host, self.cwd, self.marker = message.get("host"), message.get("cwd"), message.get("marker", "")
        if self.host is not None and not (isinstance(self.host, str) and HOST_NAME.fullmatch(self.host)):
            raise Cold("'host' must be a container's name")
        if self.host is not None and not (isinstance(self.cwd, str) and self.cwd.startswith("/") and "\0" not in self.cwd):
            raise Cold("'cwd' must be an absolute path")
        if not isinstance(self.marker, str) or "\n" in self.marker:
            raise Cold("'marker' must be one line")
