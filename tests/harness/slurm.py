#!/usr/bin/python3
"""A real multi-node Slurm cluster on one machine: its nodes are network namespaces.

For tests and developers of edtd's Slurm backend. edtd runs on the "login
node", this machine's own (root) network namespace, and uses Slurm's
commands there with only SLURM_CONF set; the cluster's daemons each run in
a network namespace of their own, joined to the login node by a bridge, so
that a node's eth0 is a real L2 peer of the host (a macvlan on it reaches
the host, and the host reaches it, with no routing).

Layout (everything named edtsh*; needs root, iproute2, util-linux and
Debian's slurm-wlm and munge):

    root namespace (login node)   bridge edtsh0 198.18.190.1/24, munged
      |- veth edtshv-ctl  ==  netns edtsh-ctl: eth0 198.18.190.2/24,
      |                          hostname edtsh-ctl, slurmctld
      |- veth edtshv-n1   ==  netns edtsh-n1:  eth0 198.18.190.11/24,
      |                          hostname edtsh-n1, slurmd (a node of slurm.conf)
      '- ... node i at 198.18.190.(10+i), up to 100 nodes

Address plan of 198.18.190.0/24 (a benchmarking block, RFC 2544, reserved
for this harness on this machine; nothing else is ever addressed):
    .1          the login node (the bridge; edtd's side)
    .2          the controller (slurmctld)
    .11-.110    node i at .10+i
    .128/25     free for containers the tests create (macvlans on a node's
                eth0): SlurmHarness.address_range_for_containers
No namespace has a default route, so no packet of the cluster leaves the
block. (As with any macvlan, a container's macvlan on a node's eth0 reaches
every address but that node's own 198.18.190.(10+i).)

Two ways to declare the nodes (`nodes_style`):
  - "static" (the default; as most sites run Slurm): each node is a
    NodeName line of slurm.conf (its NodeAddr, CPUs, RealMemory, Gres), in
    partition `edt` by name, and its slurmd is started as a service starts
    it: `slurmd -N <node>` daemonizes, writes its pid to
    run/<node>.slurm.pid (SlurmdPidFile) and logs to its log file only;
  - "dynamic": each node is a dynamic node (slurmd -D -Z --conf "...
    Feature=edt") in the foreground, joining partition `edt` through
    NodeSet=edtns Feature=edt.
Either way a node has --cpus CPUs, --memory-mb RealMemory and --gpus GPUs
as the GRES gpu:NVIDIA-P4:<n>; the GPUs are fake character devices (mknod c
240 N: no driver's) under STATE/nodes/<node>/dev named in gres.conf, so
Slurm sets CUDA_VISIBLE_DEVICES and SLURM_JOB_GPUS as for real ones.
CPUs and memory are scheduled (CR_Core_Memory; a job without --mem gets
256 MB per CPU).

Three configurations (`config`):
  - "site" (the default; as sites run Slurm): Slurm's own cgroups
    (proctrack/cgroup, task/cgroup; cgroup.conf: ConstrainCores,
    ConstrainRAMSpace, ConstrainDevices, CgroupPlugin=autodetect, which
    finds this machine's layout, v1 or v2). Each slurmd makes its cgroups as
    slurm_<node> in each hierarchy; `down` removes them. Under
    ConstrainDevices a job with GPUs can open only its own device files,
    and its CUDA_VISIBLE_DEVICES is 0..n-1; SLURM_JOB_GPUS is their places
    in gres.conf (nvidia0, nvidia1, ...: the same). The fake devices' major and minor numbers (GPU_MAJOR) tell them
    apart, as the devices cgroup needs;
  - "site-tmpfs": "site" and job_container/tmpfs (each job a /tmp and
    /dev/shm of its own, under /var/tmp/edtsh-jobs-<state dir>/jobs: Slurm
    refuses a BasePath under /tmp; the nodes' spool there too, since a job
    does not see the /tmp it is in). Not the default: on this machine a
    node's slurmstepd fails, in about half the clusters brought up (all
    jobs of one node or two), to bind the job's new mount namespace
    (`_create_ns: ns base mount failed: Invalid argument`: mount(2)'s EINVAL)
    when several nodes share one kernel (docs/slurm.md);
  - "plain": none of these (proctrack/linuxproc, task/none).
A node's slurmd runs in a mount namespace of `ip netns exec`, whose sysfs
hides /sys/fs/cgroup: the cgroup file systems are mounted there again.
Directories passed as `hidden` (each must exist) are covered there by an
empty tmpfs: the login node's own disk, which no node of a site sees
(edtd's data dir, in tests/slurm/slurm_backend_test.py).

A node whose slurmd dies is DOWN 10-20 s later and its
jobs end NODE_FAIL (JobRequeue=0: not requeued); it is back as soon as its
slurmd registers again (ReturnToService=2). A finished job stays in squeue
for MinJobAge=30 s; log/jobcomp.log keeps every job's final state.

All files live in one state directory (default /tmp/edt-slurm): slurm.conf,
cgroup.conf, gres.conf, munge/ (the key, 0700, as /etc/munge), munge-run/
(the socket, open to every user, as /run/munge), ctld/ (StateSaveLocation),
spool/<node>/, log/ (slurmctld.log, slurmd-<node>.log, <daemon>.out: its
stdout and stderr, jobcomp.log), run/ (the daemons' pids: as the harness
started them, or as a daemonized slurmd wrote its own), nodes/<node>/dev/. /run/edtsh.state names the state
directory of the cluster that is up. An `up` that fails copies log/ to
STATE.logs (its error names the file to read) before it is torn down.

`down` leaves a bridge named edtsh0 that carries addresses not its own
alone.

Command line (as root):
    tests/harness/slurm.py up [--nodes 3] [--gpus 2] [--cpus 2] [--memory-mb 4096] [--dynamic]
                              [--config site|site-tmpfs|plain] [--state-dir DIR]
    tests/harness/slurm.py status [--state-dir DIR]
    tests/harness/slurm.py down [--state-dir DIR]   # idempotent; also cleans up after a killed `up`

As a library:
    with SlurmHarness(nodes=3) as h:            # or nodes_style="dynamic"
        h.run(["sbatch", "--wrap", "hostname"])
        h.kill_slurmd("edtsh-n2"); h.wait_nodes_state("DOWN", ["edtsh-n2"], 30)
"""
import argparse
import glob
import ipaddress
import json
import os
import re
import shutil
import shlex
import signal
import subprocess
import sys
import time

if __package__:
    from . import network
    from .processes import kill_until_gone
else:  # run as a program: tests/harness/slurm.py up
    import network
    from processes import kill_until_gone

PREFIX = "edtsh"
BRIDGE = PREFIX + "0"
VETH_PREFIX = PREFIX + "v-"       # the host ends of the veth pairs
NETNS_PREFIX = PREFIX + "-"       # edtsh-ctl, edtsh-n1 ...
CONTROLLER = PREFIX + "-ctl"      # its netns and its hostname
NETWORK = ipaddress.ip_network("198.18.190.0/24")
LOGIN_ADDRESS = "198.18.190.1"
CONTROLLER_ADDRESS = "198.18.190.2"
CONTAINER_RANGE = "198.18.190.128/25"
INTERFACE = "eth0"
GPU_TYPE = "NVIDIA-P4"
FEATURE = "edt"
PARTITION = "edt"
MAX_NODES = 100
DEFAULT_STATE_DIR = "/tmp/edt-slurm"
POINTER = "/run/edtsh.state"   # the state dir of the harness that is up
MARKER = "harness.json"           # in the state dir: what `up` built
DAEMONS = ("munged", "slurmctld", "slurmscriptd", "slurmd", "slurmstepd")
# States a node must not be in to count as being in the state asked for.
NODES_STYLES = ("static", "dynamic")
CONFIGS = ("site", "site-tmpfs", "plain")
# The fake GPUs' character devices: a major number of the kernel's
# "local/experimental use" range, that no driver here owns (opening one
# fails with ENXIO; with EPERM where the job's devices cgroup denies it),
# and a minor number of their own, so that ConstrainDevices tells them apart.
GPU_MAJOR = 240
UNHEALTHY = {"NOT_RESPONDING", "DRAIN", "FAIL", "INVALID_REG", "POWERED_DOWN", "REBOOT_REQUESTED"}


class HarnessError(RuntimeError):
    pass


def sh(argv, check=True, **kwargs):
    """Runs an admin command; an error names it and its output."""
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)
    if check and proc.returncode != 0:
        raise HarnessError(f"`{' '.join(argv)}` failed ({proc.returncode}): {proc.stdout.strip()}")
    return proc.stdout


def node_name(index):
    return f"{PREFIX}-n{index}"


def resolve_state_dir(state_dir=None):
    """The given state dir, else the one of the harness that is up, else the default."""
    if state_dir:
        return os.path.abspath(state_dir)
    try:
        with open(POINTER) as f:
            return f.read().strip() or DEFAULT_STATE_DIR
    except OSError:
        return DEFAULT_STATE_DIR


# --- what exists ----------------------------------------------------------

def our_namespaces():
    try:
        return sorted(n for n in os.listdir("/run/netns") if n.startswith(NETNS_PREFIX))
    except OSError:
        return []


def our_links():
    """The host-side links of a harness: the bridge (when it is ours) and veth ends."""
    names = re.findall(r"^\d+: ([^:@\s]+)", sh(["ip", "-o", "link", "show"]), re.M)
    links = [n for n in names if n.startswith(VETH_PREFIX)]
    if BRIDGE in names and bridge_is_ours():
        links.append(BRIDGE)
    return links


def bridge_exists():
    return f": {BRIDGE}:" in sh(["ip", "-o", "link", "show"])


def bridge_is_ours():
    """edtsh0 with no IPv4 address, or only the login address."""
    out = sh(["ip", "-o", "-4", "addr", "show", "dev", BRIDGE], check=False)
    addresses = re.findall(r"inet (\S+)", out)
    return all(a.split("/")[0] == LOGIN_ADDRESS for a in addresses)


def netns_inode(name):
    try:
        return os.stat(f"/run/netns/{name}").st_ino
    except OSError:
        return None


def processes():
    """(pid, comm, cmdline, net namespace inode, parent pid) of every process but this one."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            net = os.stat(f"/proc/{pid}/ns/net").st_ino
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        yield int(pid), comm, cmdline, net, ppid


def harness_pids(state_dir, namespaces):
    """Every process inside the namespaces and what descends from them (a
    job's processes in namespaces of their own: edtd's containers), as a
    machine's shutdown ends them, and every Slurm or munge daemon started
    with the state dir."""
    inodes = {i for i in map(netns_inode, namespaces) if i}
    return with_descendants(lambda comm, cmdline, net: net in inodes or (comm in DAEMONS and state_dir + "/" in cmdline))


def with_descendants(chosen):
    """The pids of the processes for which chosen(comm, cmdline, net namespace
    inode) holds, and of everything that descends from them."""
    listed = list(processes())
    found = {pid for pid, comm, cmdline, net, _ in listed if chosen(comm, cmdline, net)}
    grew = True
    while grew:
        more = {pid for pid, _, _, _, ppid in listed if ppid in found} - found
        found |= more
        grew = bool(more)
    return sorted(found)


def kill_all(state_dir, namespaces, timeout=10):
    """SIGKILLs the harness's processes until none is left."""
    kill_until_gone(lambda: harness_pids(state_dir, namespaces), "the harness", timeout, HarnessError, pause=0.05)


def teardown(state_dir, log=print):
    """Removes whatever exists of a harness (idempotent): its processes,
    namespaces, links and state directory."""
    namespaces = our_namespaces()
    kill_all(state_dir, namespaces)
    for ns in namespaces:
        sh(["ip", "netns", "del", ns], check=False)
    for link in our_links():
        sh(["ip", "link", "del", link], check=False)
    if bridge_exists():
        log(f"harness: left bridge {BRIDGE} alone: it carries addresses that are not the harness's")
    remove_slurm_cgroups()
    remove_state_dir(state_dir, log)
    if resolve_state_dir() == state_dir and os.path.exists(POINTER):
        os.unlink(POINTER)


def slurm_cgroups():
    """The cgroups the nodes' slurmds made (slurm_<node> in each hierarchy)."""
    return glob.glob(f"/sys/fs/cgroup/*/slurm_{NETNS_PREFIX}*") + glob.glob(f"/sys/fs/cgroup/slurm_{NETNS_PREFIX}*")


def remove_slurm_cgroups():
    """rmdir, deepest first, what the slurmds left of their cgroups (empty
    once their processes are gone)."""
    for top in slurm_cgroups():
        for at, _dirs, _files in sorted(os.walk(top), key=lambda w: -w[0].count("/")):
            try:
                os.rmdir(at)
            except OSError:
                pass


def remove_state_dir(state_dir, log=print):
    if not os.path.isdir(state_dir):
        return
    if not os.path.exists(os.path.join(state_dir, MARKER)) and os.listdir(state_dir):
        log(f"harness: left {state_dir} alone: it is not a harness's state dir (no {MARKER})")
        return
    shutil.rmtree(state_dir)
    shutil.rmtree(job_tmp_dir(state_dir), ignore_errors=True)


def check_block_free():
    """NETWORK must be unused on this machine before `up` takes it."""
    line = network.in_use(NETWORK)
    if line:
        raise HarnessError(f"{NETWORK} is already in use on this machine ({line})")


# --- configuration --------------------------------------------------------

SITE_PLUGINS = """\
# Slurm's own cgroups, as sites run it: processes tracked by cgroup, each job
# bound to its cores, memory and GPUs (cgroup.conf).
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
"""

TMPFS_PLUGINS = SITE_PLUGINS + """\
# Each job a /tmp and /dev/shm of its own (job_container.conf); PrologFlags=Contain
# makes the job's namespace before any step.
JobContainerType=job_container/tmpfs
PrologFlags=Contain
"""

PLAIN_PLUGINS = """\
# No cgroups of Slurm's own.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
"""


def slurm_conf(state_dir, nodes, config="site", root_jobs=True):
    """slurm.conf; `nodes` is node_lines()'s or DYNAMIC_NODES; root_jobs=False refuses root's jobs
    (DisableRootJobs=YES, as shared clusters set it)."""
    s = state_dir
    return f"""\
# Written by tests/harness/slurm.py: a cluster whose nodes are network namespaces.
ClusterName={PREFIX}
SlurmctldHost={CONTROLLER}({CONTROLLER_ADDRESS})
SlurmctldPort=6817
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={s}/munge-run/munge.socket
StateSaveLocation={s}/ctld
SlurmdSpoolDir={spool_dir(s, config)}/%n
SlurmctldPidFile={s}/run/slurmctld.slurm.pid
SlurmdPidFile={s}/run/%n.slurm.pid
SlurmctldLogFile={s}/log/slurmctld.log
SlurmdLogFile={s}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
{PLUGINS[config]}JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={s}/log/jobcomp.log
MpiDefault=none
# CPUs and memory are scheduled resources: --cpus-per-task and --mem count.
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=256
GresTypes=gpu
# A node is what its --conf says, not what this machine has.
SlurmdParameters=config_overrides
# Fast failure detection: a dead slurmd's node is DOWN in 10-20 s, its jobs end NODE_FAIL
# (not requeued); a node that registers again is back (ReturnToService=2).
ReturnToService=2
SlurmdTimeout=10
MessageTimeout=5
KillWait=2
JobRequeue=0
InactiveLimit=0
SchedulerParameters=batch_sched_delay=0,sched_min_interval=100000,bf_interval=1
MinJobAge=30
""" + ("" if root_jobs else "DisableRootJobs=YES\n") + nodes


DYNAMIC_NODES = f"""\
# Dynamic nodes (slurmd -Z): room for them, and no message tree.
MaxNodeCount={MAX_NODES}
TreeWidth=65533
NodeSet=edtns Feature={FEATURE}
PartitionName={PARTITION} Nodes=edtns Default=YES MaxTime=INFINITE State=UP
"""


def node_lines(names, addresses, cpus, memory_mb, gpus):
    """Static nodes: a NodeName line each, and the partition that names them."""
    out = "# Static nodes, as a site declares them.\n"
    for name, address in zip(names, addresses):
        out += f"NodeName={name} NodeAddr={address} {node_conf(cpus, memory_mb, gpus)}\n"
    return out + f"PartitionName={PARTITION} Nodes={','.join(names)} Default=YES MaxTime=INFINITE State=UP\n"


PLUGINS = {"site": SITE_PLUGINS, "site-tmpfs": TMPFS_PLUGINS, "plain": PLAIN_PLUGINS}


def cgroup_conf(config):
    if config == "plain":
        return "# Written by tests/harness/slurm.py: Slurm manages no cgroups here.\nCgroupPlugin=cgroup/v1\n"
    # The machine's own layout (v1, hybrid or v2: Slurm looks at /sys/fs/cgroup).
    return ("# Written by tests/harness/slurm.py: jobs bound to their cores, memory and GPUs.\n"
            "CgroupPlugin=autodetect\nConstrainCores=yes\nConstrainRAMSpace=yes\nConstrainDevices=yes\n")


def job_tmp_dir(state_dir):
    """What job_container/tmpfs needs outside /tmp, where state dirs usually are
    and which a job does not see: its BasePath (jobs/: each job's /tmp and
    /dev/shm below it; Slurm refuses one under /tmp) and the nodes' spool/
    (slurmstepd runs the batch script from there, in the job's namespace)."""
    return "/var/tmp/" + PREFIX + "-jobs" + os.path.abspath(state_dir).replace("/", "-")


def job_container_conf(state_dir):
    return f"# Written by tests/harness/slurm.py.\nAutoBasePath=true\nBasePath={job_tmp_dir(state_dir)}/jobs\n"


def spool_dir(state_dir, config):
    return os.path.join(job_tmp_dir(state_dir) if config == "site-tmpfs" else state_dir, "spool")


def cgroup_mounts():
    """Shell commands that mount this machine's cgroup file systems again in
    a node's mount namespace, where `ip netns exec` put a sysfs of the
    node's network namespace over /sys (and so hid /sys/fs/cgroup)."""
    with open("/proc/self/mounts") as f:
        mounts = [line.split() for line in f]
    out = []
    for _dev, target, fstype, options, *_ in mounts:
        if target == "/sys/fs/cgroup" and fstype == "tmpfs":
            out.append("mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup")
        elif target.startswith("/sys/fs/cgroup") and fstype in ("cgroup", "cgroup2"):
            out.append(f"mkdir -p {target} && mount -t {fstype} -o {options} {fstype} {target}")
    return " && ".join(out)


def gres_conf(state_dir, names, gpus):
    out = f"# Written by tests/harness/slurm.py: fake GPUs (mknod c {GPU_MAJOR} N).\nAutoDetect=off\n"
    if gpus < 1:
        return out
    files = "0" if gpus == 1 else f"[0-{gpus - 1}]"
    for name in names:
        out += f"NodeName={name} Name=gpu Type={GPU_TYPE} File={state_dir}/nodes/{name}/dev/nvidia{files}\n"
    return out


def node_conf(cpus, memory_mb, gpus):
    """A node's resources and its partition's feature (slurmd -Z --conf, or its NodeName line)."""
    conf = f"CPUs={cpus} Boards=1 SocketsPerBoard=1 CoresPerSocket={cpus} ThreadsPerCore=1 RealMemory={memory_mb}"
    if gpus > 0:
        conf += f" Gres=gpu:{GPU_TYPE}:{gpus}"
    return conf + f" Feature={FEATURE}"


def parse_nodes(text):
    """`scontrol show nodes -o` -> {name: set of its state's parts (IDLE, DYNAMIC_NORM, ...)}."""
    states = {}
    for line in text.splitlines():
        name = re.search(r"NodeName=(\S+)", line)
        state = re.search(r"\bState=(\S+)", line)
        if name and state:
            states[name.group(1)] = set(state.group(1).upper().split("+"))
    return states


def in_state(parts, want):
    """A node's state parts match `want` (e.g. "IDLE", "DOWN", "DOWN+NOT_RESPONDING");
    a node asked to be IDLE, MIXED or ALLOCATED must also be responding and not drained."""
    wanted = set(want.upper().split("+"))
    if wanted & {"DOWN", "DRAIN", "FAIL", "NOT_RESPONDING"}:
        return wanted <= parts
    return wanted <= parts and not (parts & UNHEALTHY)


def _raise_exit(signum, _frame):
    raise SystemExit(128 + signum)


class SlurmHarness:
    """The cluster; a context manager that builds it and always tears it down."""

    def __init__(self, state_dir=DEFAULT_STATE_DIR, nodes=3, gpus=2, cpus=2, memory_mb=4096, log=print,
                 up_timeout=60, nodes_style="static", config="site", hidden=(), root_jobs=True):
        if not 1 <= nodes <= MAX_NODES:
            raise ValueError(f"nodes must be 1..{MAX_NODES}")
        if nodes_style not in NODES_STYLES:
            raise ValueError(f"nodes_style must be one of {', '.join(NODES_STYLES)}, not {nodes_style!r}")
        if config not in CONFIGS:
            raise ValueError(f"config must be one of {', '.join(CONFIGS)}, not {config!r}")
        if cpus < 1 or memory_mb < 1 or gpus < 0:
            raise ValueError("cpus and memory_mb must be positive, gpus not negative")
        self.state_dir = os.path.abspath(state_dir)
        self.nodes, self.gpus, self.cpus, self.memory_mb = nodes, gpus, cpus, memory_mb
        self.nodes_style, self.config = nodes_style, config
        self.root_jobs = root_jobs  # False: DisableRootJobs=YES
        self.log = log
        self.up_timeout = up_timeout  # seconds for the nodes to be IDLE in the `with` statement
        self.node_names = [node_name(i) for i in range(1, nodes + 1)]
        self.conf = os.path.join(self.state_dir, "slurm.conf")
        self.saved_logs = self.state_dir + ".logs"  # the logs of an `up` that failed
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.login_address = LOGIN_ADDRESS
        self.controller_address = CONTROLLER_ADDRESS
        self.interface = INTERFACE
        self.address_range_for_containers = CONTAINER_RANGE
        self.partition = PARTITION
        self.gpu_type = GPU_TYPE
        # Directories of the login node that no node sees, as at a site,
        # where they are on the login node's own disk (edtd's data dir): an
        # empty tmpfs over each in the nodes' mount namespaces. Each must
        # exist when the nodes start.
        hide = [f"mount -t tmpfs -o size=64k,mode=0755 edt-hidden {shlex.quote(p)}" for p in hidden]
        self._node_mounts = " && ".join([cgroup_mounts() or "true"] + hide)
        self._children = {}  # daemon -> Popen, for those this process started
        self._old_handlers = {}

    @classmethod
    def attach(cls, state_dir=None, log=print):
        """The harness that is up (built by another process, e.g. `harness.py up`)."""
        state_dir = resolve_state_dir(state_dir)
        try:
            with open(os.path.join(state_dir, MARKER)) as f:
                spec = json.load(f)
        except OSError:
            raise HarnessError(f"no harness is up in {state_dir}")
        return cls(state_dir, spec["nodes"], spec["gpus"], spec["cpus"], spec["memory_mb"], log,
                   nodes_style=spec.get("nodes_style", "dynamic"), config=spec.get("config", "plain"))

    # --- lifetime -----------------------------------------------------

    def __enter__(self):
        for sig in (signal.SIGTERM, signal.SIGHUP):
            self._old_handlers[sig] = signal.signal(sig, _raise_exit)
        try:
            self.up(self.up_timeout)
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc):
        try:
            self.down()
        finally:
            for sig, handler in self._old_handlers.items():
                signal.signal(sig, handler)
        return False

    def up(self, timeout=60):
        """Builds the cluster; returns once every node is IDLE. On an error
        the logs are copied to STATE.logs, which the error names (the
        caller tears down: the `with` block does)."""
        self._refuse_if_up()
        shutil.rmtree(self.saved_logs, ignore_errors=True)
        started = time.monotonic()
        try:
            self._write_files()
            self._make_network()
            self._start_munged()
            self._start_slurmctld()
            for name in self.node_names:
                self.start_slurmd(name)
            self._wait_idle(timeout)
        except HarnessError as e:
            if not os.path.isdir(self.path("log")):
                raise
            shutil.copytree(self.path("log"), self.saved_logs)
            raise HarnessError(str(e).replace(self.path("log"), self.saved_logs)) from None
        self.up_seconds = time.monotonic() - started
        return self

    def down(self):
        """Tears everything down (idempotent)."""
        teardown(self.state_dir, self.log)
        for child in self._children.values():
            try:
                child.wait(timeout=5)  # reaps it (it was killed)
            except subprocess.TimeoutExpired:
                pass
        self._children.clear()

    def _refuse_if_up(self):
        if os.geteuid() != 0:
            raise HarnessError("needs root (network namespaces)")
        for tool in ("ip", "unshare", "mknod", "/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd"):
            if not shutil.which(tool):
                raise HarnessError(f"{tool} is not installed")
        leftovers = our_namespaces() + ([BRIDGE] if bridge_exists() else [])
        if leftovers or os.path.exists(os.path.join(self.state_dir, MARKER)):
            where = resolve_state_dir()
            raise HarnessError(f"a Slurm harness is already up (state dir {where}; {', '.join(leftovers)}); "
                               f"run `tests/harness/slurm.py down --state-dir {where}` first")
        check_block_free()
        if os.path.exists(self.state_dir) and os.listdir(self.state_dir):
            raise HarnessError(f"{self.state_dir} exists and is not empty; remove it or pick another --state-dir")

    def _write_files(self):
        os.makedirs(self.state_dir, mode=0o755, exist_ok=True)
        self._write(MARKER, json.dumps({"nodes": self.nodes, "gpus": self.gpus, "cpus": self.cpus,
                                        "memory_mb": self.memory_mb, "nodes_style": self.nodes_style,
                                        "config": self.config,
                                        "pid": os.getpid()}) + "\n")
        with open(POINTER, "w") as f:
            f.write(self.state_dir + "\n")
        for sub in ("ctld", "log", "run", "spool"):
            os.makedirs(self.path(sub), exist_ok=True)
        os.makedirs(self.path("munge"), mode=0o700)
        os.makedirs(self.path("munge-run"), mode=0o755)  # any user's Slurm commands reach munged
        os.chmod(self.path("munge-run"), 0o755)
        nodes = DYNAMIC_NODES if self.nodes_style == "dynamic" else node_lines(
            self.node_names, map(self.node_address, self.node_names), self.cpus, self.memory_mb, self.gpus)
        self._write("slurm.conf", slurm_conf(self.state_dir, nodes, self.config, self.root_jobs))
        self._write("cgroup.conf", cgroup_conf(self.config))
        self._write("job_container.conf", job_container_conf(self.state_dir))
        self._write("gres.conf", gres_conf(self.state_dir, self.node_names, self.gpus))
        for name in self.node_names:
            os.makedirs(os.path.join(spool_dir(self.state_dir, self.config), name))
            self._make_devices(name)
        with open(os.open(self.path("munge", "munge.key"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400), "wb") as f:
            f.write(os.urandom(1024))

    def _make_devices(self, name):
        dev = self.path("nodes", name, "dev")
        os.makedirs(dev)
        for i in range(self.gpus):
            minor = (self._index(name) - 1) * self.gpus + i
            sh(["mknod", os.path.join(dev, f"nvidia{i}"), "c", str(GPU_MAJOR), str(minor)])

    def _write(self, name, text):
        with open(self.path(name), "w") as f:
            f.write(text)

    def path(self, *parts):
        return os.path.join(self.state_dir, *parts)

    # --- network --------------------------------------------------------

    def _make_network(self):
        sh(["ip", "link", "add", BRIDGE, "type", "bridge"])
        sh(["ip", "addr", "add", f"{LOGIN_ADDRESS}/{NETWORK.prefixlen}", "dev", BRIDGE])
        sh(["ip", "link", "set", BRIDGE, "up"])
        self._make_namespace(CONTROLLER, CONTROLLER_ADDRESS)
        for name in self.node_names:
            self._make_namespace(name, self.node_address(name))

    def _make_namespace(self, ns, address):
        veth = VETH_PREFIX + ns[len(NETNS_PREFIX):]
        sh(["ip", "netns", "add", ns])
        sh(["ip", "link", "add", veth, "mtu", "1500", "type", "veth", "peer", "name", INTERFACE,
            "mtu", "1500", "netns", ns])
        sh(["ip", "link", "set", veth, "master", BRIDGE, "up"])
        ex = ["ip", "netns", "exec", ns, "ip"]
        sh(ex + ["addr", "add", f"{address}/{NETWORK.prefixlen}", "dev", INTERFACE])
        sh(ex + ["link", "set", INTERFACE, "up"])
        sh(ex + ["link", "set", "lo", "up"])

    def node_address(self, name):
        return str(NETWORK.network_address + 10 + self._index(name))

    def netns(self, name):
        """The network namespace of node `name` (the node's own name)."""
        self._index(name)
        return name

    def node_command(self, name, argv):
        """argv wrapped to run in node `name`'s network namespace."""
        return ["ip", "netns", "exec", self.netns(name)] + list(argv)

    def _index(self, name):
        if name not in self.node_names:
            raise ValueError(f"{name} is not a node of this harness ({', '.join(self.node_names)})")
        return self.node_names.index(name) + 1

    # --- daemons --------------------------------------------------------

    def _spawn(self, daemon, argv):
        """Starts a daemon in the foreground of its own session; its pid in run/<daemon>.pid."""
        with open(self.path("log", f"{daemon}.out"), "ab") as out:
            child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                     env=self.env, start_new_session=True)
        self._children[daemon] = child
        self._write(os.path.join("run", f"{daemon}.pid"), f"{child.pid}\n")
        return child

    def _in_host(self, ns, hostname, argv):
        """argv run in netns `ns` and a UTS namespace of its own whose hostname is `hostname`,
        with the machine's cgroups (cgroup_mounts()), the `hidden` paths covered, and its mounts private, as on a node of
        its own (`ip netns exec` leaves them slaves of the host's: job_container/tmpfs's bind
        of a job's namespace then fails, `ns base mount failed: Invalid argument`)."""
        return ["ip", "netns", "exec", ns, "unshare", "--uts", "--", "sh", "-c",
                self._node_mounts + ' && hostname "$0" && exec "$@"', hostname] + argv

    def _start_munged(self):
        m, run = self.path("munge"), self.path("munge-run")
        self._spawn("munged", ["/usr/sbin/munged", "--foreground", "--force", "--socket", f"{run}/munge.socket",
                               "--key-file", f"{m}/munge.key", "--pid-file", f"{m}/munged.pid",
                               "--log-file", self.path("log", "munged.log"), "--seed-file", f"{m}/munged.seed"])
        self._wait_for("munged", lambda: os.path.exists(f"{run}/munge.socket"), 10, self.path("log", "munged.out"))

    def _start_slurmctld(self):
        self._spawn("slurmctld", self._in_host(CONTROLLER, CONTROLLER, ["/usr/sbin/slurmctld", "-D", "-f", self.conf]))
        ping = lambda: "is UP" in sh(["scontrol", "ping"], check=False, env=self.env)  # noqa: E731
        self._wait_for("slurmctld", ping, 30, self.path("log", "slurmctld.log"))

    def start_slurmd(self, name):
        """Starts node `name`'s slurmd (again); wait_nodes_state("IDLE", [name]) tells when it is back."""
        if self.nodes_style == "dynamic":
            argv = ["/usr/sbin/slurmd", "-D", "-f", self.conf, "-Z", "-N", name,
                    "--conf", node_conf(self.cpus, self.memory_mb, self.gpus)]
            self._spawn(name, self._in_host(self.netns(name), name, argv))
            return
        # As a service starts it: slurmd daemonizes and writes its own pid file.
        stale = self.path("run", f"{name}.slurm.pid")
        if os.path.exists(stale) and self.daemon_pid(name) is None:
            os.unlink(stale)
        with open(self.path("log", f"{name}.out"), "ab") as out:
            subprocess.run(self._in_host(self.netns(name), name, ["/usr/sbin/slurmd", "-f", self.conf, "-N", name]),
                           stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                           check=False, timeout=30)
        deadline = time.monotonic() + 10
        while self.daemon_pid(name) is None:
            if time.monotonic() > deadline:
                raise HarnessError(f"slurmd of {name} wrote no pid file within 10 s; read "
                                   f"{self.path('log', f'slurmd-{name}.log')} and {self.path('log', f'{name}.out')}")
            time.sleep(0.1)

    def kill_slurmd(self, name):
        """SIGKILLs node `name`'s slurmd (its jobs' slurmstepds live on): the node
        goes DOWN 10-20 s later (SlurmdTimeout=10; about 20 s when a job
        started on it lately), and its jobs end NODE_FAIL. (A job allocated
        there whose script had not started yet is a launch failure: Slurm
        requeues it, JobRequeue=0 or not.)"""
        pid = self.daemon_pid(name)
        if pid is None:
            raise HarnessError(f"the slurmd of {name} is not running")
        os.kill(pid, signal.SIGKILL)
        child = self._children.pop(name, None)
        if child is not None:
            child.wait()
        while os.path.exists(f"/proc/{pid}") and self.daemon_pid(name) == pid:
            time.sleep(0.01)

    def crash_node(self, name):
        """Ends node `name` as a crash would: its slurmd and every process in
        its namespace or descending from one (its jobs' containers) are
        SIGKILLed. start_slurmd(name) brings it back. Returns how many died."""
        self.kill_slurmd(name)
        inode = netns_inode(self.netns(name))
        doomed = with_descendants(lambda comm, cmdline, net: net == inode)
        for pid in doomed:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(doomed)

    def daemon_pid(self, daemon):
        """The pid of a running daemon ("munged", "slurmctld" or a node name), or None."""
        child = self._children.get(daemon)
        if child is not None:  # (its cmdline is empty while it execs)
            return child.pid if child.poll() is None else None
        daemonized = self.nodes_style == "static" and daemon in self.node_names
        try:
            with open(self.path("run", f"{daemon}.slurm.pid" if daemonized else f"{daemon}.pid")) as f:
                pid = int(f.read())
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                zombie = f.read().rsplit(")", 1)[1].split()[0] == "Z"
        except (OSError, ValueError):
            return None
        return pid if self.state_dir + "/" in cmdline and not zombie else None

    def _wait_for(self, daemon, ready, timeout, log_file):
        deadline = time.monotonic() + timeout
        while not ready():
            if self.daemon_pid(daemon) is None:
                out = self.path("log", daemon + ".out")
                raise HarnessError(f"{daemon} exited; read {log_file}" + (f" and {out}" if out != log_file else ""))
            if time.monotonic() > deadline:
                raise HarnessError(f"{daemon} was not ready within {timeout} s; read {log_file}")
            time.sleep(0.1)

    def _wait_idle(self, timeout):
        try:
            self.wait_nodes_state("IDLE", self.node_names, timeout, fail_on={"INVALID_REG", "DRAIN"})
        except HarnessError as e:
            dead = [n for n in self.node_names if self.daemon_pid(n) is None]
            logs = [self.path("log", f"slurmd-{n}.log") for n in (dead or self.node_names[:1])]
            raise HarnessError(f"{e}; " + (f"slurmd exited on {', '.join(dead)}; " if dead else "") +
                               f"read {', '.join(logs)} and {self.path('log', 'slurmctld.log')}") from None

    # --- use --------------------------------------------------------------

    def run(self, argv, check=True, timeout=60, **kwargs):
        """Runs a Slurm client command on the login node; its CompletedProcess (text)."""
        proc = subprocess.run(list(argv), env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=timeout, **kwargs)
        if check and proc.returncode != 0:
            raise HarnessError(f"`{' '.join(argv)}` failed ({proc.returncode}): {proc.stdout.strip()} "
                               f"{proc.stderr.strip()}")
        return proc

    def node_states(self):
        """{node: set of its state's parts}, as `scontrol show nodes` says."""
        return parse_nodes(self.run(["scontrol", "show", "nodes", "-o"], check=False).stdout)

    def wait_nodes_state(self, state, names=None, timeout=60, fail_on=()):
        """Waits until every node of `names` (default: all) is in `state`
        ("IDLE", "DOWN", "ALLOCATED", "DOWN+NOT_RESPONDING"...); the seconds
        it took. HarnessError at the timeout, or as soon as a node's state
        has a part in `fail_on` (e.g. {"INVALID_REG"})."""
        names = list(names or self.node_names)
        started = time.monotonic()
        while True:
            states = self.node_states()
            if all(n in states and in_state(states[n], state) for n in names):
                return time.monotonic() - started
            failed = any(states.get(n, set()) & set(fail_on) for n in names)
            if failed or time.monotonic() - started > timeout:
                seen = ", ".join(f"{n}={'+'.join(sorted(states.get(n, {'(not registered)'})))}" for n in names)
                raise HarnessError(f"nodes not {state}" + ("" if failed else f" within {timeout} s") + f": {seen}")
            time.sleep(0.2)

    def summary(self):
        lines = [f"Slurm harness in {self.state_dir}: partition {PARTITION}, controller {CONTROLLER} "
                 f"at {CONTROLLER_ADDRESS}, login node {LOGIN_ADDRESS} on bridge {BRIDGE}"]
        for name in self.node_names:
            lines.append(f"  {name}: {self.node_address(name)} on {INTERFACE} (netns {name}), {self.cpus} CPUs, "
                         f"{self.memory_mb} MB, gpu:{GPU_TYPE}:{self.gpus}")
        lines.append(f"  containers: {CONTAINER_RANGE} (macvlans on a node's {INTERFACE}); logs in "
                     f"{self.path('log')}")
        return "\n".join(lines)


# --- command line -----------------------------------------------------------

def cmd_up(args):
    h = SlurmHarness(args.state_dir or DEFAULT_STATE_DIR, args.nodes, args.gpus, args.cpus, args.memory_mb,
                     nodes_style="dynamic" if args.dynamic else "static", config=args.config)
    try:
        h.up(args.timeout)
    except BaseException:
        print("harness: up failed; " + ("kept it up" if args.keep_on_failure else "tearing down"), file=sys.stderr)
        if not args.keep_on_failure:
            h.down()
        raise
    print(h.summary())
    print(f"up in {h.up_seconds:.1f} s; use Slurm from this machine with:")
    print(f"export SLURM_CONF={h.conf}")
    return 0


def cmd_down(args):
    teardown(resolve_state_dir(args.state_dir))
    print("harness: down")
    return 0


def cmd_status(args):
    state_dir = resolve_state_dir(args.state_dir)
    leftovers = our_namespaces()
    try:
        h = SlurmHarness.attach(state_dir)
    except HarnessError as e:
        print(f"harness: {e}" + (f"; leftovers: {', '.join(leftovers)} (run down)" if leftovers else ""))
        return 1
    print(h.summary())
    for daemon in ["munged", "slurmctld"] + h.node_names:
        pid = h.daemon_pid(daemon)
        print(f"  {daemon}: " + (f"pid {pid}" if pid else "NOT RUNNING"))
    print(h.run(["sinfo", "-N", "-o", "%N %T %c %m %G"], check=False).stdout.rstrip())
    print(f"export SLURM_CONF={h.conf}")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up", help="build the cluster and wait until its nodes are idle")
    up.add_argument("--nodes", type=int, default=3)
    up.add_argument("--gpus", type=int, default=2, help=f"GPUs (gpu:{GPU_TYPE}) per node")
    up.add_argument("--cpus", type=int, default=2, help="CPUs per node")
    up.add_argument("--memory-mb", type=int, default=4096, help="RealMemory per node")
    up.add_argument("--dynamic", action="store_true",
                    help="dynamic nodes (slurmd -D -Z) instead of static ones in slurm.conf (slurmd as a daemon)")
    up.add_argument("--config", choices=CONFIGS, default="site",
                    help="site: Slurm's cgroups (task/cgroup, proctrack/cgroup, ConstrainDevices) and "
                         "job_container/tmpfs; plain: none of them")
    up.add_argument("--timeout", type=float, default=60, help="seconds for the nodes to be idle")
    up.add_argument("--keep-on-failure", action="store_true", help="leave a failed cluster up, to look at")
    down = sub.add_parser("down", help="tear the cluster down (also what a killed `up` left)")
    status = sub.add_parser("status", help="its daemons and nodes")
    for p in (up, down, status):
        p.add_argument("--state-dir", help=f"default: the harness that is up, else {DEFAULT_STATE_DIR}")
    args = parser.parse_args(argv)
    try:
        return {"up": cmd_up, "down": cmd_down, "status": cmd_status}[args.action](args)
    except (HarnessError, ValueError) as e:
        print(f"harness: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
