// Whether a host of the host list is this machine, so that its workers are
// forked directly instead of reached over ssh.
//
// Local: "localhost", 127.0.0.1, ::1, this machine's host name (full or up
// to the first dot) and the addresses of its network interfaces. Every other
// name, including the other addresses of 127.0.0.0/8, is another host:
// that is how tests and the platform's local backend model several hosts on
// one machine, each with its own sshd. Names are compared as written and
// addresses by value (so "0:0:0:0:0:0:0:1" is ::1); nothing is looked up in
// DNS, whose answers may differ between the machines of a cluster.
//
// address_toward() asks the kernel for this machine's address on the route
// to a host: what a process there uses to reach edtrun.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "edt/status.h"

namespace edt::launcher {

class LocalIdentity {
 public:
  // Reads the host name and interface addresses of this machine.
  static LocalIdentity of_this_machine();

  LocalIdentity(const std::string& hostname, const std::vector<std::string>& addresses);

  bool is_local(const std::string& host) const;

 private:
  std::set<std::string> names_;
  std::set<std::string> addresses_;  // normalised by inet_pton/inet_ntop
};

// This machine's address on the route to `host` ("10.0.0.5"); resolving
// `host` may use DNS. An error names the host and what to check.
Result<std::string> address_toward(const std::string& host);

}  // namespace edt::launcher
