#include "control/backends/local/sandbox_policy.h"

#include <linux/capability.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>

namespace edt::control {

namespace {

struct Capability {
  const char* name;
  int number;
};

// What sshd's privilege separation and a root session need in their own
// namespaces; everything else is dropped.
constexpr Capability kKept[] = {
    {"CAP_CHOWN", CAP_CHOWN},   {"CAP_DAC_OVERRIDE", CAP_DAC_OVERRIDE}, {"CAP_FOWNER", CAP_FOWNER},
    {"CAP_FSETID", CAP_FSETID}, {"CAP_KILL", CAP_KILL},                 {"CAP_SETGID", CAP_SETGID},
    {"CAP_SETUID", CAP_SETUID}, {"CAP_SYS_CHROOT", CAP_SYS_CHROOT},     {"CAP_AUDIT_WRITE", CAP_AUDIT_WRITE},
};

// Refused outright (EPERM), with why a container has no use for them.
constexpr const char* kRefused[] = {
    // Mounts: a container's file system is made by edtd, not by its tenant.
    "mount", "umount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
    "open_tree", "mount_setattr",
    // The kernel itself: modules, kexec, reboot, swap, accounting, the log.
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon",
    "swapoff", "acct", "syslog", "uselib",
    // Kernel attack surface that training does not use.
    "bpf", "userfaultfd", "perf_event_open", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "lookup_dcookie", "quotactl", "iopl", "ioperm",
    // Keyrings are per user on the host, not per container.
    "add_key", "request_key", "keyctl",
    // Files by handle walk past the mount's root (the "shocker" escape).
    "open_by_handle_at", "name_to_handle_at",
    // Clocks are the host's.
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    // Another process's namespaces.
    "setns",
};

// Namespace flags of clone and unshare: a new user namespace hands every
// capability back inside it, and the others need CAP_SYS_ADMIN anyway.
constexpr uint64_t kNamespaceFlags[] = {CLONE_NEWNS,  CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
                                        CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET, 0x00000080 /* CLONE_NEWTIME */};

using Filter = std::unique_ptr<void, void (*)(scmp_filter_ctx)>;

Status add_rules(scmp_filter_ctx ctx) {
  auto failed = [](const std::string& what, int rc) {
    return internal_error("seccomp: cannot add the rule for " + what + ": " + std::strerror(-rc));
  };
  for (const char* name : kRefused) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not a system call on this architecture
    if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0); rc != 0) return failed(name, rc);
  }
  // Device nodes (character and block); FIFOs and sockets stay possible.
  for (const auto type : {S_IFCHR, S_IFBLK}) {
    int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(mknod), 1,
                              SCMP_A1(SCMP_CMP_MASKED_EQ, S_IFMT, static_cast<scmp_datum_t>(type)));
    if (rc == 0)
      rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(mknodat), 1,
                            SCMP_A2(SCMP_CMP_MASKED_EQ, S_IFMT, static_cast<scmp_datum_t>(type)));
    if (rc != 0) return failed("mknod", rc);
  }
  for (uint64_t flag : kNamespaceFlags) {
    int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
    if (rc == 0)
      rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
    if (rc != 0) return failed("clone and unshare", rc);
  }
  // clone3 passes its flags in memory, out of the filter's sight.
  if (int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0); rc != 0) return failed("clone3", rc);
  return Status::ok();
}

Result<Filter> make_filter() {
  Filter ctx(seccomp_init(SCMP_ACT_ALLOW), seccomp_release);
  if (!ctx) return internal_error("seccomp: cannot make a filter");
  EDT_RETURN_IF_ERROR(add_rules(ctx.get()));
  return ctx;
}

bool kept(int cap) {
  for (const auto& k : kKept)
    if (k.number == cap) return true;
  return false;
}

Status drop_capabilities() {
  std::ifstream last_file("/proc/sys/kernel/cap_last_cap");
  int last = CAP_LAST_CAP;
  last_file >> last;
  for (int cap = 0; cap <= last; ++cap)
    if (!kept(cap) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0)
      return io_error("drop capability " + std::to_string(cap) + " from the bounding set", errno);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  for (const auto& k : kKept) {
    data[k.number / 32].effective |= 1u << (k.number % 32);
    data[k.number / 32].permitted |= 1u << (k.number % 32);
  }
  if (syscall(SYS_capset, &header, data) != 0) return io_error("set the kept capabilities", errno);
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) return io_error("clear ambient capabilities", errno);
  return Status::ok();
}

}  // namespace

const std::vector<std::string>& kept_capabilities() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const auto& k : kKept) names.push_back(k.name);
    return names;
  }();
  return kNames;
}

Result<std::string> seccomp_program() {
  EDT_ASSIGN_OR_RETURN(Filter ctx, make_filter());
  const int fd = memfd_create("edt-seccomp", MFD_CLOEXEC);
  if (fd < 0) return io_error("memfd_create", errno);
  std::string program;
  if (int rc = seccomp_export_bpf(ctx.get(), fd); rc != 0) {
    ::close(fd);
    return internal_error(std::string("seccomp: cannot export the filter: ") + std::strerror(-rc));
  }
  const off_t size = lseek(fd, 0, SEEK_END);
  program.resize(size > 0 ? static_cast<size_t>(size) : 0);
  const ssize_t n = pread(fd, program.data(), program.size(), 0);
  ::close(fd);
  if (n != static_cast<ssize_t>(program.size()) || program.empty())
    return internal_error("seccomp: the exported filter could not be read back");
  return program;
}

Status confine_self() {
  EDT_ASSIGN_OR_RETURN(Filter ctx, make_filter());
  EDT_RETURN_IF_ERROR(drop_capabilities());
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return io_error("set no_new_privs", errno);
  if (int rc = seccomp_load(ctx.get()); rc != 0)
    return internal_error(std::string("seccomp: cannot load the filter: ") + std::strerror(-rc));
  return Status::ok();
}

}  // namespace edt::control
