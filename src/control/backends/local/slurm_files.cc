#include "control/backends/local/slurm_files.h"

#include <filesystem>
#include <fstream>

#include "common/io.h"
#include "control/backends/local/container_fs.h"

namespace edt::control {

namespace fs = std::filesystem;

Status write_container_slurm_files(const SandboxSpec& spec, const std::string& dir) {
  return io::write_file(dir + "/conf/gres.conf", spec.slurm->gres_conf, 0644);
}

Status write_cluster_slurm_files(const SandboxSpec& spec, const std::string& cluster) {
  EDT_RETURN_IF_ERROR(make_dirs(cluster + "/slurm", 0755));
  EDT_RETURN_IF_ERROR(io::replace_file(cluster + "/slurm/slurm.conf", spec.slurm->slurm_conf, 0644));
  EDT_RETURN_IF_ERROR(io::replace_file(cluster + "/slurm/slurm-daemons.conf", spec.slurm->daemons_conf, 0644));
  EDT_RETURN_IF_ERROR(io::replace_file(cluster + "/slurm/cgroup.conf", spec.slurm->cgroup_conf, 0644));
  // Where each container's own gres.conf is bound.
  EDT_RETURN_IF_ERROR(io::replace_file(cluster + "/slurm/gres.conf", "", 0644));
  // slurmctld's state (StateSaveLocation), the cluster's: a launcher that
  // restarts finds its jobs again.
  if (spec.slurm->controller) EDT_RETURN_IF_ERROR(make_dirs(cluster + "/slurmctld", 0700));
  // The cluster's munge key: made once, readable by the containers' root
  // only, and bound into this cluster's containers alone.
  EDT_RETURN_IF_ERROR(make_dirs(cluster + "/munge", 0700));
  const std::string key = cluster + "/munge/munge.key";
  if (std::error_code ec; fs::exists(key, ec)) return Status::ok();
  std::string bytes(1024, '\0');
  std::ifstream random("/dev/urandom", std::ios::binary);
  if (!random.read(bytes.data(), static_cast<std::streamsize>(bytes.size())))
    return internal_error("read /dev/urandom for the munge key of cluster " + spec.cluster);
  return io::replace_file(key, bytes, 0400);
}

std::vector<std::string> slurm_binds(const SandboxSpec& spec, const std::string& dir, const std::string& cluster) {
  std::vector<std::string> a = {"--ro-bind", cluster + "/slurm", "/etc/slurm", "--ro-bind", dir + "/conf/gres.conf",
                                "/etc/slurm/gres.conf", "--ro-bind", cluster + "/munge", "/etc/munge", "--bind",
                                dir + "/munge-run", "/run/munge"};
  if (spec.slurm->controller) a.insert(a.end(), {"--bind", cluster + "/slurmctld", "/var/spool/slurmctld"});
  return a;
}

std::vector<std::string> slurm_init_command(const SandboxSpec& spec) {
  // munged, slurmctld (the launcher) and slurmd daemonize; sshd then
  // starts as in any container. A daemon that fails to start ends the
  // container, and its error is in the container's log.
  return {"/bin/sh", "-c",
          "set -e; conf=$1; controller=$2; name=$3; address=$4; shift 4\n"
          "mkdir -p -m 0700 /var/lib/munge /var/log/munge\n"
          "mkdir -p /var/log/slurm /var/spool/slurmd /var/spool/slurmctld\n"
          "munged --force\n"
          "daemons=/etc/slurm/slurm-daemons.conf\n"
          "if [ \"$controller\" = 1 ]; then slurmctld -f $daemons; fi\n"
          "slurmd -f $daemons -Z ${conf:+--conf \"$conf\"}\n"
          // The node registered from 127.0.0.1 in loopback mode (see
          // control/model/slurm.h); it is reached at its own address.
          "i=0; until scontrol update NodeName=$name NodeAddr=$address 2>/dev/null; do\n"
          "  i=$((i+1)); [ $i -lt 600 ] || { echo \"edt: slurmd of $name did not register with slurmctld "
          "within 60 s; see /var/log/slurm in it and in the launcher\" >&2; exit 1; }\n"
          "  sleep 0.1\n"
          "done\n"
          // In the launcher: a container that leaves the hostfile
          // (edtd takes it out before it stops it: scale-down, or a
          // restart) leaves Slurm too: its node goes DOWN (its batch
          // jobs are requeued, its steps end) and is deleted. A new
          // container is in the hostfile once Running, after its node
          // registered; so only a node seen in it is removed.
          "if [ \"$controller\" = 1 ]; then (set +e; seen=''; gone=''\n"
          "  while :; do\n"
          "    now=\" $(cut -d' ' -f1 /etc/mpi/hostfile | tr '\\n' ' ')\"\n"
          "    for n in $seen; do case \"$now\" in *\" $n \"*) ;; *) gone=\"$gone $n\";; esac; done\n"
          "    left=''\n"
          "    for n in $gone; do\n"
          "      case \"$now\" in *\" $n \"*) continue;; esac\n"
          "      scontrol show node $n >/dev/null 2>&1 || continue\n"
          "      scontrol update NodeName=$n State=DOWN Reason='edt: its container left the cluster'\n"
          "      scontrol delete NodeName=$n && echo \"$(date -Is) node $n left\" || left=\"$left $n\"\n"
          "    done\n"
          "    gone=$left; seen=$now\n"
          "    sleep 0.5\n"
          "  done) </dev/null >>/var/log/slurm/edt-nodes.log 2>&1 &\n"
          "fi\n"
          "exec \"$@\"",
          "edt-slurm", spec.slurm->node_conf, spec.slurm->controller ? "1" : "0", spec.name, spec.address};
}

}  // namespace edt::control
