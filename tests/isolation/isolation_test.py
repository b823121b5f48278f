#!/usr/bin/env python3
"""A tenant's attacks from inside a real cluster, each of which must fail,
and the host checked unchanged afterwards (docs/security.md, "Containers").

An edtd on its own data dir makes two users' clusters. From inside alice's
launcher (over its sshd, as every way in lands the same) and from a job
(edtd's other way in, `POST /clusters/{name}/jobs`), the attack script
below tries:
  - system calls a container has no use for: mount, mknod of a block or
    character device, kernel modules, kexec, bpf, the keyring, a new user
    namespace, setns, open_by_handle_at, reboot, swapon, clock setting,
    perf_event_open, userfaultfd: each must fail with EPERM;
  - capabilities: the effective and bounding sets hold only the kept ones,
    no_new_privs is set and a seccomp filter is on;
  - reading the host's secrets: /etc/shadow (the container's own has no
    password), sshd's host keys, gshadow, and edtd's data dir (admin token,
    keys, the store), the host's /var;
  - writing outside its own directories: /usr, /etc, /etc/mpi (edtd's
    files), /run/edt (its sshd config), the tool tree, and the host's root
    cgroups (leaving its own cgroups' bounds);
  - seeing or tracing a process outside: edtd's pid, and bob's processes;
  - links planted where edtd writes (/root/.ssh/*, /etc/mpi/*.tmp) toward
    a host file, then the container restarted (its sshd killed) and the
    cluster scaled, which makes edtd write those files again;
  - a fork bomb, which must end at the container's pids bound (and all
    containers' parent cgroup, edt-<key>, has half the host's tasks as
    its bound; edtd refuses a --container-pids-max over that); open files
    bounded to 1024 per process, which container root cannot raise; 1 GiB
    of memory in a container bounded to 512 MiB, which the kernel must
    kill there (while 256 MiB fits), and a busy loop in a container
    bounded to 0.5 CPU, which must get well under one CPU.
Afterwards: the host's canary file, edtd's admin token and the host's
shadow are unchanged, and bob's cluster still Running.
Also: env values sshd_config would misread are refused (422) before
anything is made.

Without --user-namespaces edtd runs with --user-namespaces off and
--network loopback (ctest container_isolation). With it, edtd runs with its
defaults, user namespaces and a bridge (one of this test's own; ctest
container_isolation_userns): the same attacks run, and: each cluster's root
is its owner's subordinate range on the host (/proc/self/uid_map and
gid_map; alice's and bob's differ); a process in alice's container runs as
that host uid; a file written in alice's volume belongs on the host to her
range (root's and uid 1000's); an id outside the range cannot be given; an
admin's host_path under a 0700 directory is bound, its root-owned file
readable as nobody's and not writable; the data dir is 0711 and the store
0600.

  isolation_test.py --edtd build/src/control/edtd [--user-namespaces]
"""
import argparse
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from harness import users
from harness.edtd import ScratchEdtd
from harness.users import TIMEOUT


ADDRESSES = "127.89.0.0/24"  # this test's own block (grep --address-range for the others)
BRIDGE, BRIDGE_ADDRESSES = "edtisotest0", "198.18.89.0/24"  # with --user-namespaces
RANGE = 65536  # ids in each user's subordinate range
PIDS_MAX = 256  # each container's bound on tasks (--container-pids-max)
OPEN_FILES = 1024  # each container process's RLIMIT_NOFILE, soft and hard (cgroups.h)
MEMORY = "512Mi"  # alice's containers' memory bound
CPUS = "0.5"  # and their CPU bound
DISK = 64 << 20  # each container's writable dirs together (--container-disk), bytes
DISK_FILES = DISK // (16 << 10)  # and files (one per 16 KiB)
VOLUME = 32 << 20  # each managed volume's bound (--volume-size), bytes

# Writes 1 MiB blocks into the file argv[1] until 4 times the disk bound or
# an error, fsyncs; prints the bytes written and the error's name ("ok").
FILL = r'''
import errno, os, sys
written, why = 0, "ok"
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
try:
    while written < 4 * DISK:
        written += os.write(fd, b"x" * (1 << 20))
    os.fsync(fd)
except OSError as e:
    why = errno.errorcode.get(e.errno, str(e.errno))
os.close(fd)
print(written, why)
'''.replace("DISK", str(DISK))

# Makes empty files in the directory argv[1] until 3 times the disk's file
# bound or an error; prints how many and the error's name, then removes them.
FILES = r'''
import errno, os, shutil, sys
os.mkdir(sys.argv[1])
made, why = 0, "ok"
try:
    while made < 3 * DISK_FILES:
        os.close(os.open(os.path.join(sys.argv[1], str(made)), os.O_WRONLY | os.O_CREAT, 0o600))
        made += 1
except OSError as e:
    why = errno.errorcode.get(e.errno, str(e.errno))
shutil.rmtree(sys.argv[1])
print(made, why)
'''.replace("DISK_FILES", str(DISK_FILES))

# Spins for 1.5 s; prints its CPU time over the wall time it took.
BUSY = r'''
import time
start = time.monotonic()
while time.monotonic() - start < 1.5:
    pass
print("%.3f" % (time.process_time() / (time.monotonic() - start)))
'''

# Forks parked children until the kernel refuses; prints how many and why.
FORK_BOMB = r'''
import errno, os, signal
children = []
why = "no refusal"
for _ in range(4 * PIDS_MAX):
    try:
        pid = os.fork()
    except OSError as e:
        why = errno.errorcode.get(e.errno, str(e.errno))
        break
    if pid == 0:
        signal.pause()
        os._exit(0)
    children.append(pid)
for pid in children:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
print(len(children), why)
'''.replace("PIDS_MAX", str(PIDS_MAX))

# Run inside a container with python3; prints one JSON object.
ATTACKS = r'''
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
out = {"syscalls": {}, "reads": {}, "writes": {}, "status": {}, "proc": {}}

def syscall(name, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    out["syscalls"][name] = "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")

os.makedirs("/tmp/mnt", exist_ok=True)
syscall("mount", 165, b"tmpfs", b"/tmp/mnt", b"tmpfs", 0, 0)
syscall("umount2", 166, b"/proc", 2)
syscall("mknod_block", 133, b"/tmp/disk", 0o060600, (8 << 8) | 0)
syscall("mknod_char", 133, b"/tmp/mem", 0o020600, (1 << 8) | 1)
syscall("init_module", 175, 0, 0, b"")
syscall("finit_module", 313, 0, b"", 0)
syscall("kexec_load", 246, 0, 0, 0, 0)
syscall("bpf", 321, 0, 0, 0)
syscall("keyctl", 250, 1, 0)
syscall("add_key", 248, b"user", b"x", b"y", 1, -3)
syscall("unshare_user", 272, 0x10000000)
syscall("unshare_mount", 272, 0x00020000)
fd = os.open("/proc/self/ns/mnt", os.O_RDONLY)
syscall("setns", 308, fd, 0)
syscall("open_by_handle_at", 304, -100, 0, 0)
syscall("reboot", 169, 0, 0, 0, 0)
syscall("swapon", 167, b"/tmp/none", 0)
syscall("clock_settime", 227, -1, 0)
syscall("perf_event_open", 298, 0, 0, -1, -1, 0)
syscall("userfaultfd", 323, 0)
syscall("ptrace_attach_edtd", 101, 16, int(sys.argv[1]), 0, 0)

def read(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
        return {"bytes": len(data), "sha": __import__("hashlib").sha256(data).hexdigest()[:16],
                "root_line": next((l.decode(errors="replace") for l in data.splitlines() if l.startswith(b"root:")), "")}
    except OSError as e:
        return errno.errorcode.get(e.errno, "?")

for path in sys.argv[3:]:
    out["reads"][path] = read(path)
# The cgroup.procs files: "0" there would move this process out of its
# container's cgroups (its pids, memory and CPU bounds) into the host's root.
for path in ["/usr/edt-x", "/etc/edt-x", "/etc/mpi/edt-x", "/run/edt/edt-x", "/run/host/etc/edt-x", sys.argv[2] + "-x",
             "/sys/fs/cgroup/pids/cgroup.procs", "/sys/fs/cgroup/memory/cgroup.procs", "/sys/fs/cgroup/cpu/cgroup.procs",
             "/sys/fs/cgroup/cgroup.procs"]:
    try:
        with open(path, "w") as f:
            f.write("0")
        out["writes"][path] = "ok"
    except OSError as e:
        out["writes"][path] = errno.errorcode.get(e.errno, "?")
for line in open("/proc/self/status"):
    key, _, value = line.partition(":")
    if key in ("CapEff", "CapBnd", "CapPrm", "NoNewPrivs", "Seccomp"):
        out["status"][key] = value.strip()
out["proc"]["edtd_visible"] = os.path.exists("/proc/%s" % sys.argv[1])
out["proc"]["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
print(json.dumps(out))
'''

SYSCALLS = ["mount", "umount2", "mknod_block", "mknod_char", "init_module", "finit_module", "kexec_load", "bpf",
            "keyctl", "add_key", "unshare_user", "unshare_mount", "setns", "open_by_handle_at", "reboot", "swapon",
            "clock_settime", "perf_event_open", "userfaultfd"]
# CAP_CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID, SYS_CHROOT, AUDIT_WRITE
KEPT_CAPS = (1 << 0) | (1 << 1) | (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 18) | (1 << 29)


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest(), oct(os.stat(path).st_mode)


class Isolation(users.Tenants):
    def __init__(self, edtd, user_namespaces=False):
        super().__init__(edtd)
        self.user_namespaces = user_namespaces
        self.canary_dir = tempfile.mkdtemp(prefix="edt-isolation-canary-")
        self.canary = os.path.join(self.canary_dir, "canary")
        with open(self.canary, "w") as f:
            f.write("the host's file\n")
        os.chmod(self.canary, 0o600)

    def secrets(self):
        data = os.path.join(self.edtd.dir, "data")
        return ["/etc/shadow", "/run/host/etc/shadow", "/etc/gshadow", "/run/host/etc/gshadow",
                "/run/host/etc/ssh/ssh_host_ed25519_key", "/etc/ssh/ssh_host_ed25519_key",
                os.path.join(data, "admin.token"), os.path.join(data, "edtd.db"),
                os.path.join(data, "clusters", "bob-c", "ssh", "id_ed25519"), "/var/lib/dpkg/status"]

    def judge(self, where, result):
        for name in SYSCALLS:
            got = result["syscalls"].get(name)
            self.check(got == "EPERM", f"{where}: {name} gave {got}, not EPERM")
        self.check(result["syscalls"].get("ptrace_attach_edtd") != "ok", f"{where}: PTRACE_ATTACH to edtd succeeded")
        status = result["status"]
        for key in ("CapEff", "CapPrm", "CapBnd"):
            value = int(status.get(key, "0"), 16)
            # The sandbox's init keeps a full bounding set (bwrap cannot drop
            # it), but it cannot be regained: securebits and no_new_privs.
            if key == "CapBnd" and where == "ssh":
                continue
            self.check(value & ~KEPT_CAPS == 0, f"{where}: {key} {status.get(key)} holds more than the kept set")
        self.check(status.get("NoNewPrivs") == "1", f"{where}: no_new_privs is {status.get('NoNewPrivs')}")
        self.check(status.get("Seccomp") == "2", f"{where}: seccomp mode is {status.get('Seccomp')}")
        for path, got in result["reads"].items():
            if path == "/etc/shadow":
                ok = isinstance(got, dict) and got["root_line"].startswith("root:*:")
            else:
                ok = got in ("ENOENT", "EACCES") or (isinstance(got, dict) and got["bytes"] == 0)
            self.check(ok, f"{where}: reading {path} gave {got}")
        for path, got in result["writes"].items():
            self.check(got in ("EROFS", "EACCES", "ENOENT", "EPERM"), f"{where}: writing {path} gave {got}")
        self.check(not result["proc"]["edtd_visible"], f"{where}: edtd's pid is visible in /proc")
        self.check(max(result["proc"]["pids"]) < 1000, f"{where}: sees pids {result['proc']['pids'][-5:]}")

    def attack_args(self):
        """The script's arguments: edtd's pid, a path next to its admin
        token (written to), then the paths read."""
        return " ".join([str(self.edtd.proc.pid), os.path.join(self.edtd.dir, "data", "admin.token"), *self.secrets()])

    def attack_over_ssh(self, address):
        result = self.ssh("alice-c", address, "python3 - " + self.attack_args(), stdin=ATTACKS)
        if result.returncode != 0:
            raise RuntimeError(f"the attack script failed over ssh: {result.stderr[-2000:]}")
        self.judge("ssh", json.loads(result.stdout))

    def attack_as_job(self, token):
        script = ATTACKS.replace("'", "'\"'\"'")
        status, job = self.api("POST", "/clusters/alice-c/jobs",
                               {"command": f"python3 -c '{script}' {self.attack_args()}"}, token)
        if status != 201:
            raise RuntimeError(f"POST job: {status} {job}")
        deadline = time.time() + TIMEOUT
        while (state := self.api("GET", f"/jobs/{job['id']}", token=token)[1]).get("state") == "Running":
            if time.time() > deadline:
                raise RuntimeError(f"the job did not end within {TIMEOUT} s")
            time.sleep(0.1)
        self.check(state.get("exit_code") == 0, f"the attack job ended with {state}")
        _, _, log = self.edtd.send("GET", f"/api/v1/jobs/{job['id']}/log?follow=false", None, token)
        lines = [line for line in log.splitlines() if line.startswith("{")]
        if not lines:
            raise RuntimeError(f"the job printed no result: {log[-2000:]}")
        self.judge("job", json.loads(lines[-1]))

    def plant_links_and_restart(self, token, address):
        """Links toward the host's canary where edtd writes, then the
        container restarted (sshd, pid 2 under bubblewrap's init, killed:
        the sandbox ends), so that edtd writes its files again."""
        targets = " ".join(f"/root/.ssh/{f}" for f in ("authorized_keys", "config", "id_ed25519", "id_ed25519.pub"))
        command = (f"for f in {targets}; do rm -f $f; ln -s {self.canary} $f; done; "
                   f"ln -s {self.canary} /etc/mpi/hosts.tmp; ln -s {self.canary} /etc/mpi/hostfile.tmp; "
                   f"ln {self.canary} /root/hard; ln -s {self.canary} /var/log/edt; echo planted; kill -9 2")
        result = self.ssh("alice-c", address, command)
        self.check("planted" in result.stdout, f"planting links failed outright: {result.stderr}")
        self.check(result.stderr.count("Read-only file system") == 2, f"/etc/mpi took a link: {result.stderr}")
        deadline = time.time() + TIMEOUT
        while time.time() < deadline:
            _, events = self.api("GET", "/clusters/alice-c/events", token=token)
            if any(e.get("type") == "Restarted" for e in events.get("events", [])):
                break
            time.sleep(0.1)
        else:
            self.failures.append("the launcher was not restarted after its sshd was killed")
        self.wait_running("alice-c", token, 2)

    def bounded(self, address):
        """A fork bomb ends at the container's pids bound, and a process
        over its memory bound is killed inside the container, one that spins
        gets no more than its CPU bound; the container goes on."""
        bomb = self.ssh("alice-c", address, "python3 -", stdin=FORK_BOMB)
        made, why = (bomb.stdout.split() + ["?", "?"])[:2]
        self.check(why == "EAGAIN" and made.isdigit() and 0 < int(made) < PIDS_MAX,
                   f"a fork bomb made {made} processes ({why}), not fewer than {PIDS_MAX}: {bomb.stderr[-500:]}")
        self.bounded_in_all(address)
        hog = self.ssh("alice-c", address, "python3 -c 'b = b\"x\" * (1 << 30); print(len(b))'; echo status $?")
        self.check(hog.stdout.split() == ["status", "137"],  # 128 + SIGKILL, from the kernel's OOM killer
                   f"1 GiB in a container bounded to {MEMORY}: exit {hog.returncode}, {hog.stdout!r} {hog.stderr[-300:]!r}")
        fits = self.ssh("alice-c", address, "python3 -c 'b = b\"x\" * (256 << 20); print(len(b))'")
        self.check(fits.stdout.strip() == str(256 << 20), f"256 MiB under the {MEMORY} bound: {fits.stdout!r} {fits.stderr[-300:]!r}")
        busy = self.ssh("alice-c", address, "python3 -", stdin=BUSY)
        share = float(busy.stdout) if busy.stdout.strip().replace(".", "", 1).isdigit() else None
        # The bound is 0.5; 0.75 leaves room for the interpreter's start.
        self.check(share is not None and share < 0.75,
                   f"a busy loop in a container bounded to {CPUS} CPU used {share} of one: {busy.stderr[-300:]!r}")

    def bounded_in_all(self, address):
        """Host-wide bounds: all containers together under their parent's
        pids bound, half the host's tasks, and a bound on open files that
        container root cannot raise; a pids bound over the parent's is refused."""
        tasks = min(int(open("/proc/sys/kernel/pid_max").read()), int(open("/proc/sys/kernel/threads-max").read()))
        parents = [d for d in cgroups_of(os.path.join(self.edtd.dir, "data")) if os.path.exists(d + "/pids.max")]
        bounds = [open(d + "/pids.max").read().strip() for d in parents]
        self.check(bounds and set(bounds) == {str(tasks // 2)},
                   f"edtd's parent cgroups {parents} have pids.max {bounds}, not half the host's {tasks} tasks")
        files = self.ssh("alice-c", address, "ulimit -Sn; ulimit -Hn; ulimit -n 4096 2>/dev/null && echo raised || "
                                             "echo refused")
        self.check(files.stdout.split() == [str(OPEN_FILES), str(OPEN_FILES), "refused"],
                   f"a container's open files (soft, hard, raising them): {files.stdout!r} {files.stderr[-300:]!r}")
        with tempfile.TemporaryDirectory(prefix="edt-pids-") as d:
            r = subprocess.run([self.edtd.proc.args[0], "--data-dir", d + "/data", "--listen", "127.0.0.1:1",
                                "--network", "loopback", "--container-pids-max", str(tasks // 2 + 1)],
                               capture_output=True, text=True, timeout=TIMEOUT)
            self.check(r.returncode != 0 and "what all containers together may have" in r.stderr and
                       not os.path.exists(d + "/data"), f"--container-pids-max {tasks // 2 + 1}: {r.returncode} {r.stderr}")

    def disk_bounded(self, address):
        """Writes past the container's disk bound, in /tmp and in /root,
        fail with ENOSPC, and the host's file system gives no more than the
        bound to it; files past its file bound fail too; and the container
        sees no other container's disk."""
        data = os.path.join(self.edtd.dir, "data")
        for where in ("/tmp/fill", "/root/fill"):
            self.fill_past(address, where, DISK, "disk")
            self.ssh("alice-c", address, "rm -f " + where)
        got = self.ssh("alice-c", address, "python3 - /tmp/many", stdin=FILES)
        made, why = (got.stdout.split() + ["?", "?"])[:2]
        self.check(why == "ENOSPC" and made.isdigit() and int(made) <= DISK_FILES,
                   f"making {3 * DISK_FILES} files under a {DISK_FILES}-file bound: {made} made, then {why} "
                   f"{got.stderr[-300:]!r}")
        disks = {}  # the container's name -> its disk's device, as the host mounted them
        with open("/proc/self/mountinfo") as f:
            for fields in (line.split() for line in f):
                parent, leaf = os.path.split(fields[4])
                if leaf == "disk" and os.path.dirname(parent) == os.path.join(os.path.realpath(data), "containers"):
                    disks[os.path.basename(parent)] = fields[fields.index("-") + 2]
        seen = self.ssh("alice-c", address, "cat /proc/self/mountinfo").stdout.splitlines()
        devices = {line.split(" - ")[1].split()[1] for line in seen if " - " in line}
        launcher = next((name for name in disks if name.startswith("alice-c-launcher")), None)
        self.check(launcher is not None and len(disks) >= 4, f"the hosts' container disks: {disks}")
        self.check(devices & set(disks.values()) == {disks.get(launcher)},
                   f"alice's launcher sees the disks {devices & set(disks.values())} of {disks}")

    def fill_past(self, address, where, bound, what):
        """Writes up to 4 times DISK into `where` in alice's container at
        `address`: ENOSPC must stop it within `bound`, its `what`'s, and the
        host's file system give it no more than that."""
        data = os.path.join(self.edtd.dir, "data")
        before = host_usage(data)
        got = self.ssh("alice-c", address, "python3 - " + where, stdin=FILL)
        used = host_usage(data) - before  # the file is still there
        written, why = (got.stdout.split() + ["?", "?"])[:2]
        self.check(why == "ENOSPC" and written.isdigit() and int(written) <= bound,
                   f"writing {4 * DISK} bytes to {where} under a {bound}-byte {what} bound: {written} written, "
                   f"then {why} {got.stderr[-300:]!r}")
        # 16 MiB of slack: the disk's own metadata, and edtd's logs meanwhile.
        self.check(used < bound + (16 << 20), f"the host's file system lost {used} bytes to {where}, over {bound}")

    def volume_bounded(self, launcher):
        """A write past alice's volume's bound (--volume-size) fails with
        ENOSPC, the host's file system gives no more than the bound to it,
        and an upload into the full volume is refused with 413, naming it."""
        self.fill_past(launcher, "/data/fill", VOLUME, "volume")
        status, _, text = self.edtd.send("PUT", "/api/v1/volumes/alice-v/files?path=full.bin", None, self.alice,
                                         raw=b"x" * (1 << 20))
        self.check(status == 413 and "volume 'alice-v' has no room" in text and "32 MiB" in text,
                   f"an upload into the full volume: {status} {text[:300]}")
        self.ssh("alice-c", launcher, "rm -f /data/fill")

    def volume_deleted(self, token):
        """Once alice's cluster is gone her volume may be deleted, and its
        disk goes with it: no mount, no loop device, no file."""
        self.api("DELETE", "/clusters/alice-c", token=token)
        deadline = time.time() + TIMEOUT
        status, body = self.api("DELETE", "/volumes/alice-v", token=token)
        while status == 409 and time.time() < deadline:  # the cluster is still being deleted
            time.sleep(0.05)
            status, body = self.api("DELETE", "/volumes/alice-v", token=token)
        self.check(status == 200, f"DELETE /volumes/alice-v: {status} {body}")
        data = os.path.realpath(os.path.join(self.edtd.dir, "data"))
        mounts = [m for m in disks_of(data) if m == os.path.join(data, "volumes", "alice-v")]
        loops = [b for b in glob.glob("/sys/block/loop*/loop/backing_file") if read_quietly(b).strip() == os.path.join(data, "volume-disks", "alice-v.disk")]
        files = os.listdir(os.path.join(data, "volume-disks"))
        self.check(not mounts and not loops and not files,
                   f"alice-v's disk left after it was deleted: mounts {mounts}, loop devices {loops}, files {files}")

    def id_map(self, cluster, address):
        """The first host id of the container's uid and gid maps (both must
        be one range of 65536 ids from 0)."""
        result = self.ssh(cluster, address, "cat /proc/self/uid_map /proc/self/gid_map")
        rows = [line.split() for line in result.stdout.splitlines()]
        firsts = {int(row[1]) for row in rows if len(row) == 3 and row[0] == "0" and row[2] == str(RANGE)}
        self.check(len(rows) == 2 and len(firsts) == 1, f"{cluster}: uid and gid maps {rows} {result.stderr[-300:]}")
        first = firsts.pop() if len(firsts) == 1 else 0
        self.check(first >= 1 << 28 and first % RANGE == 0, f"{cluster}: its ids start at host id {first}")
        return first

    def owned_by_range(self, launcher, bob_launcher):
        """Container root is an unprivileged host uid of its owner's range,
        on its processes and on the files it writes in a volume."""
        first, bobs = self.id_map("alice-c", launcher), self.id_map("bob-c", bob_launcher)
        self.check(first != bobs, f"alice's and bob's clusters share host ids from {first}")
        marker = "1234.%d" % os.getpid()
        self.ssh("alice-c", launcher, f"nohup sleep {marker} >/dev/null 2>&1 &")
        found, deadline = {}, time.time() + 10
        while not found and time.time() < deadline:
            found = processes_by_cmdline(["sleep", marker])
            time.sleep(0.05)
        for pid in found:
            os.kill(pid, 9)  # else it would keep the container up when its sshd is killed below
        self.check(found and all(ids == [str(first)] * 8 for ids in found.values()),
                   f"alice's sleep runs on the host as {found}, not {first}")
        wrote = self.ssh("alice-c", launcher, "touch /data/by-root /data/by-user && chown 1000:1000 /data/by-user && "
                                              f"echo wrote; chown {RANGE} /data/by-root; echo status $?")
        self.check(wrote.stdout.split() == ["wrote", "status", "1"] and "Invalid argument" in wrote.stderr,
                   f"writing in alice's volume, then chown outside her range: {wrote.stdout!r} {wrote.stderr[-300:]!r}")
        # A file uploaded through the API belongs to the volume's owner too:
        # alice's root may change it.
        status, _, text = self.edtd.send("PUT", "/api/v1/volumes/alice-v/files?path=up/loaded.txt", None,
                                         self.alice, raw=b"uploaded\n")
        appended = self.ssh("alice-c", launcher, "echo more >> /data/up/loaded.txt && cat /data/up/loaded.txt")
        self.check(status == 200 and appended.stdout == "uploaded\nmore\n",
                   f"an upload into alice's volume, then written in her container: {status} {text[:200]} "
                   f"{appended.stdout!r} {appended.stderr[-300:]!r}")
        volume = os.path.join(self.edtd.dir, "data", "volumes", "alice-v")
        for name, uid in (("by-root", first), ("by-user", first + 1000), ("up", first), ("up/loaded.txt", first)):
            try:
                st = os.stat(os.path.join(volume, name))
                owner = (st.st_uid, st.st_gid)
            except OSError as e:
                owner = e.strerror
            self.check(owner == (uid, uid), f"alice's {name} belongs on the host to {owner}, not {uid}")
        self.warm_worker(launcher, first)
        data = os.path.join(self.edtd.dir, "data")
        for path, mode in ((data, 0o711), (os.path.join(data, "edtd.db"), 0o600)):
            got = os.stat(path).st_mode & 0o7777
            self.check(got == mode, f"{path} has mode {oct(got)}, not {oct(mode)}")

    def host_path_behind_a_private_directory(self):
        """An admin's host_path volume under a directory only the host's root
        may pass (0700) is still bound (edtd stages it as root, since
        bubblewrap runs as the container's unprivileged root); its files
        keep their owners: root's are readable as nobody's, not writable."""
        private = tempfile.mkdtemp(prefix="edt-isolation-private-")
        shared = os.path.join(private, "shared")
        os.makedirs(shared)
        with open(os.path.join(shared, "hello"), "w") as f:
            f.write("hello\n")
        try:
            status, body = self.api("POST", "/volumes", {"name": "private-v", "host_path": shared})
            self.check(status == 201, f"POST /volumes private-v: {status} {body}")
            status, body = self.api("POST", "/clusters", {"name": "admin-c", "framework": "horovod", "containers": 2,
                                                          "mounts": [{"volume": "private-v", "path": "/shared"}]})
            self.check(status == 201, f"create admin-c: {status} {body}")
            address = self.wait_running("admin-c", None, 2)["status"]["containers"][0]["address"]
            got = self.ssh("admin-c", address, "cat /shared/hello; stat -c %U /shared/hello; touch /shared/x; echo $?")
            self.check(got.stdout.split() == ["hello", "nobody", "1"] and not os.path.exists(os.path.join(shared, "x")),
                       f"a host_path under a 0700 directory: {got.stdout!r} {got.stderr[-300:]!r}")
            self.api("DELETE", "/clusters/admin-c")
        finally:
            shutil.rmtree(private, ignore_errors=True)

    def warm_worker(self, launcher, first):
        """A worker forked by edtd's warm interpreter (torch already
        imported) joins the container's user namespace as its root, under
        the same filter and capabilities as a login."""
        script = ("import os, sys\nst = dict(l.split(':', 1) for l in open('/proc/self/status'))\n"
                  "print('torch' in sys.modules, os.getuid(), open('/proc/self/uid_map').read().split(),\n"
                  "      st['Seccomp'].strip(), st['NoNewPrivs'].strip(), st['CapEff'].strip())\n")
        got = self.ssh("alice-c", launcher, "cat > /tmp/warm.py; i=0; while [ ! -S /run/edt-warm/python.sock ] && "
                                            "[ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; edt-warm-run python3 /tmp/warm.py",
                       stdin=script)
        fields = got.stdout.split(None, 2)
        self.check(fields[:2] == ["True", "0"] and fields[2:] and fields[2].startswith(f"['0', '{first}', '65536'] 2 1 "),
                   f"a warm-started worker in alice's container: {got.stdout!r} {got.stderr[-500:]!r}")
        caps = int(fields[2].split()[-1], 16) if len(fields) == 3 else -1
        self.check(0 <= caps and caps & ~KEPT_CAPS == 0, f"a warm-started worker's CapEff: {got.stdout!r}")

    def run(self):
        host_before = {p: digest(p) for p in (self.canary, "/etc/shadow", os.path.join(self.edtd.dir, "data", "admin.token"))}
        alice, bob = self.make_user("alice"), self.make_user("bob")
        self.alice = alice
        status, body = self.api("POST", "/clusters", {"name": "alice-c", "framework": "horovod", "containers": 2,
                                                      "env": {"X": "a\nPermitRootLogin yes"}}, alice)
        self.check(status == 422 and body["error"]["field"] == "env.X", f"an env value with a newline: {status} {body}")
        for user, token in (("alice", alice), ("bob", bob)):
            spec = {"name": f"{user}-c", "framework": "horovod", "containers": 2}
            if user == "alice":
                spec["memory"] = MEMORY
                spec["cpus"] = CPUS
                status, body = self.api("POST", "/volumes", {"name": "alice-v"}, token)
                self.check(status == 201, f"POST /volumes alice-v: {status} {body}")
                spec["mounts"] = [{"volume": "alice-v", "path": "/data"}]
            status, body = self.api("POST", "/clusters", spec, token)
            if status != 201:
                raise RuntimeError(f"create {user}-c: {status} {body}")
        cluster = self.wait_running("alice-c", alice, 2)
        bobs = self.wait_running("bob-c", bob, 2)
        launcher = cluster["status"]["containers"][0]["address"]
        if self.user_namespaces:
            self.owned_by_range(launcher, bobs["status"]["containers"][0]["address"])
            self.host_path_behind_a_private_directory()
        self.attack_over_ssh(launcher)
        self.attack_as_job(alice)
        self.bounded(launcher)
        self.disk_bounded(launcher)
        self.volume_bounded(launcher)
        self.plant_links_and_restart(alice, launcher)
        for size in (3, 2):
            status, body = self.api("PATCH", "/clusters/alice-c", {"containers": size}, alice)
            self.check(status == 200, f"scale to {size}: {status} {body}")
            self.wait_running("alice-c", alice, size)
        for path, before in host_before.items():
            self.check(digest(path) == before, f"the host's {path} changed")
        _, c = self.api("GET", "/clusters/bob-c", token=bob)
        self.check(c["status"]["phase"] == "Running", f"bob's cluster is {c['status']['phase']}")
        alive = self.ssh("alice-c", launcher, "echo alive")
        self.check(alive.stdout.strip() == "alive", f"the restarted launcher does not answer: {alive.stderr}")
        self.volume_deleted(alice)


def processes_by_cmdline(argv):
    """{pid: its real, effective, saved and file-system uids, then gids, on
    the host} of the processes that run `argv`."""
    out = {}
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read() != b"".join(a.encode() + b"\0" for a in argv):
                    continue
            with open(f"/proc/{pid}/status") as f:
                out[int(pid)] = sum((line.split()[1:] for line in f if line.startswith(("Uid:", "Gid:"))), [])
        except OSError:
            continue
    return out


def cgroups_of(data_dir):
    """The cgroup directories edtd of `data_dir` made (edt-<key>, as cgroups.cc names them)."""
    key = 14695981039346656037
    for byte in os.path.realpath(data_dir).encode():
        key = ((key ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    name = "edt-%012x" % (key & 0xFFFFFFFFFFFF)
    return glob.glob("/sys/fs/cgroup/*/" + name) + glob.glob("/sys/fs/cgroup/" + name)


def host_usage(path):
    """Bytes of the host's file system under `path`, not counting the file
    systems mounted below it (a container's or a volume's disk counts by its
    backing file): what this test's edtd takes, whatever else writes."""
    out = subprocess.run(["du", "-sx", "--block-size=1", path], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def read_quietly(path):
    """The text of `path`, or "" (a loop device may go while it is read)."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def disks_of(data_dir):
    """What is mounted under `data_dir`, and the loop devices backed by its files."""
    data_dir = os.path.realpath(data_dir)
    with open("/proc/self/mountinfo") as f:
        mounts = [line.split()[4] for line in f if line.split()[4].startswith(data_dir + "/")]
    loops = []
    for backing in glob.glob("/sys/block/loop*/loop/backing_file"):
        try:
            with open(backing) as f:
                if f.read().startswith(data_dir + "/"):
                    loops.append(backing.split("/")[3])
        except OSError:
            continue
    return mounts + loops


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edtd", required=True)
    parser.add_argument("--user-namespaces", action="store_true", help="run edtd with --user-namespaces on")
    args = parser.parse_args()
    extra = ["--container-pids-max", str(PIDS_MAX), "--container-disk", str(DISK), "--volume-size", str(VOLUME)]
    if args.user_namespaces:
        extra += ["--user-namespaces", "on", "--network", "bridge:" + BRIDGE]
    else:
        extra += ["--user-namespaces", "off", "--network", "loopback"]
    edtd = ScratchEdtd(args.edtd, BRIDGE_ADDRESSES if args.user_namespaces else ADDRESSES, extra)
    test = Isolation(edtd, args.user_namespaces)
    data_dir = os.path.join(edtd.dir, "data")
    try:
        test.run()
        test.check(cgroups_of(data_dir), "no cgroup of alice's and bob's containers was found")
    finally:
        edtd.stop()
        os.unlink(test.canary)
        os.rmdir(test.canary_dir)
    test.check(not cgroups_of(data_dir), f"cgroups left after every cluster was deleted: {cgroups_of(data_dir)}")
    test.check(not disks_of(data_dir), f"disks left after every cluster was deleted: {disks_of(data_dir)}")
    return test.report("isolation")


if __name__ == "__main__":
    sys.exit(main())
