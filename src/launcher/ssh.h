// Starting a worker on another host through the OpenSSH client.
//
// edtrun runs `ssh ... host '<wrapper>'`, where the wrapper is a POSIX sh
// script that
//   1. changes to edtrun's working directory and checks that the command
//      exists (exit 127 with a message if not),
//   2. prints kStartedMarker on stdout, which tells edtrun the host answered,
//   3. starts the worker in a session of its own (setsid) with the job's
//      environment, stdin from /dev/null,
//   4. watches its own stdin, the ssh channel: when edtrun closes it, or
//      edtrun or the connection dies, it reads end-of-file and stops the
//      worker's whole session (SIGTERM, then SIGKILL after the grace period),
//   5. exits with the worker's status (128 + signal when killed),
// so no worker outlives edtrun or its connection. The remote login shell
// only runs `exec /bin/sh -c '<wrapper>'`; the wrapper avoids bash-isms
// (dash's `kill` takes no `--`).
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "common/shell.h"
#include "launcher/worker_env.h"

namespace edt::launcher {

inline constexpr std::string_view kStartedMarker = "edtrun: worker started";

struct SshOptions {
  int port = 0;                        // -p; 0: ssh's default
  std::string identity_file;           // -i; empty: ssh's default
  std::vector<std::string> options;    // extra -o NAME=VALUE
  std::chrono::seconds connect_timeout{30};
};

// `text` as one word for a POSIX shell: 'it'\''s' (common/shell.h).
using edt::shell_quote;

// The wrapper (see above) for running `command` in `cwd` with `env`. With
// `warm`, the worker is started through edt-warm-run when the host has it
// (launcher/warm_client.h), else as it is.
std::string remote_worker_script(const std::string& cwd, const Environment& env, const std::vector<std::string>& command,
                                 std::chrono::seconds grace, bool warm = false);

// Whether the ssh configuration (`options`, then ~/.ssh/config and
// /etc/ssh/ssh_config as ssh reads them for `host`, with environment `env`)
// sets StrictHostKeyChecking to anything but ssh's default, "ask" (which
// BatchMode turns into a refusal of every unknown host). Asks `ssh -G`; an
// ssh that cannot tell counts as no.
bool host_key_checking_configured(const std::string& host, const SshOptions& options,
                                  const std::vector<std::string>& env);

// The option ssh_command() adds unless the host keys are configured.
inline constexpr std::string_view kNoHostKeyChecking = "StrictHostKeyChecking=no";

// `argv`, a ssh_command() made without knowing the configuration, as it
// would have been made knowing it: without its StrictHostKeyChecking=no
// where `ssh -G` (with the rest of `argv`) says the configuration sets it.
// For edt-warm-run, which asks only when it falls back to ssh.
std::vector<std::string> settle_host_key_checking(std::vector<std::string> argv, const std::vector<std::string>& env);

// The full ssh command line that runs `script` on `host`. Unless
// `host_keys_configured`, it adds StrictHostKeyChecking=no (after the user's
// options, so that theirs win).
std::vector<std::string> ssh_command(const std::string& host, const SshOptions& options, const std::string& script,
                                     bool host_keys_configured = false);

}  // namespace edt::launcher
