#include "control/model/slurm.h"

namespace edt::control::slurm {

std::string gres_type(const std::string& model) {
  std::string out = model;
  for (char& c : out) {
    const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    if (!word) c = '_';
  }
  return out;
}

std::string render_slurm_conf(const ClusterSpec& spec, const std::string& controller_address, bool daemons) {
  const std::string launcher = container_name(spec.name, 0);
  std::string out;
  out += "# Slurm of cluster " + spec.name + (daemons ? ", for its daemons" : "") +
         ", written by edtd; its nodes are dynamic (slurmd -Z).\n";
  out += "ClusterName=" + spec.name + "\n";
  out += "SlurmctldHost=" + launcher + "(" + controller_address + ")\n";
  out += "SlurmctldPort=" + std::to_string(kControllerPort) + "\n";
  out += "SlurmdPort=" + std::to_string(kNodePort) + "\n";
  // Each daemon binds its own container's address, not every address:
  // NoInAddrAny for slurmd, NoCtldInAddrAny for slurmctld (without it, a
  // second cluster's slurmctld could not listen in loopback mode).
  if (daemons) out += "CommunicationParameters=NoInAddrAny,NoCtldInAddrAny\n";
  out += "SlurmUser=root\nSlurmdUser=root\n";
  out += "AuthType=auth/munge\nCredType=cred/munge\n";
  out += "StateSaveLocation=/var/spool/slurmctld\nSlurmdSpoolDir=/var/spool/slurmd\n";
  // Not in the state directory, which outlives the launcher: a pid there
  // from before a restart would name another process of the new one.
  out += "SlurmctldPidFile=/var/spool/slurmctld.pid\nSlurmdPidFile=/var/spool/slurmd/slurmd.pid\n";
  out += "SlurmctldLogFile=/var/log/slurm/slurmctld.log\nSlurmdLogFile=/var/log/slurm/slurmd.log\n";
  // The container is the boundary: no cgroups of Slurm's own.
  out += "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n";
  out += "MpiDefault=none\n";
  out += "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n";
  out += "GresTypes=gpu\n";
  // A node that was down (its container restarted) is back once it registers.
  out += "ReturnToService=2\n";
  // Dynamic nodes: room for the largest cluster, and no message tree
  // (Slurm's rule for dynamic nodes).
  out += "MaxNodeCount=" + std::to_string(kMaxContainers) + "\nTreeWidth=65533\n";
  out += "PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n";
  return out;
}

std::string render_cgroup_conf() {
  return "# written by edtd: Slurm manages no cgroups here\nCgroupPlugin=cgroup/v1\nCgroupAutomount=no\n";
}

std::string render_gres_conf(const ClusterSpec& spec, const std::vector<int>& gpus) {
  std::string out = "# written by edtd: this container's GPUs\nAutoDetect=off\n";
  if (gpus.empty() || spec.gpu.model.empty()) return out;
  std::string files;
  for (int gpu : gpus) files += (files.empty() ? "" : ",") + std::to_string(gpu);
  if (gpus.size() > 1) files = "[" + files + "]";
  return out + "Name=gpu Type=" + gres_type(spec.gpu.model) + " File=/dev/nvidia" + files + "\n";
}

std::string node_conf(const ClusterSpec& spec, const std::vector<int>& gpus) {
  std::string out;
  if (!gpus.empty() && !spec.gpu.model.empty())
    out += "Gres=gpu:" + gres_type(spec.gpu.model) + ":" + std::to_string(gpus.size());
  if (spec.memory_bytes > 0) {
    if (!out.empty()) out += " ";
    out += "RealMemory=" + std::to_string(spec.memory_bytes >> 20);
  }
  return out;
}

}  // namespace edt::control::slurm
