// horovodrun's flags beyond the ones edtrun has always had: Horovod's
// tunables, its YAML --config-file, -v/--version and -cb/--check-build.
//
// Every flag of horovodrun (horovod/runner/launch.py) is accepted:
// - where edt's engine has the knob, it reaches the workers as the variable
//   Horovod sets and edt's engine reads: --fusion-threshold-mb
//   (HOROVOD_FUSION_THRESHOLD, in bytes), --cycle-time-ms
//   (HOROVOD_CYCLE_TIME), --cache-capacity (HOROVOD_CACHE_CAPACITY),
//   --stall-check-warning-time-seconds (HOROVOD_STALL_CHECK_TIME_SECONDS;
//   --no-stall-check sets it to 0, which turns the warning off);
// - where nothing in edt corresponds (--gloo, --mpi, --network-interfaces,
//   --hierarchical-allreduce, --autotune, --timeline-filename ...), it is
//   accepted and one line on stderr says it is ignored and why.
// A flag on the command line wins over the --config-file's value, as in
// horovodrun. -prefix-timestamp and --log-level stay edtrun's own flags;
// the config file's logging.level fills --log-level when it is not given.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>

#include "edt/status.h"
#include "launcher/worker_env.h"

namespace edt::launcher {

struct HorovodFlags {
  std::map<std::string, std::string> given;  // flag -> value ("" for a switch), command line and config file
  std::string config_file;
  bool version = false;
  bool check_build = false;
};

void add_horovod_flags(CLI::App& app, HorovodFlags& flags);

// Reads --config-file (Horovod's YAML: sections params, autotune, timeline,
// stall_check, library_options, logging, and controller) into `flags`
// where the command line did not give the flag; `log_level` likewise.
// kInvalidArgument naming the file and line for what cannot be read.
Status read_config_file(HorovodFlags& flags, std::string& log_level);

// The workers' variables of the mapped flags (added to `exports` unless -x
// set them), and a note on stderr for each ignored flag.
Status apply_horovod_flags(const HorovodFlags& flags, Environment& exports);

// What -cb prints: Horovod's table, with what edt provides.
std::string check_build_text(bool verbose);

// The version line of -v: the compatibility package's Horovod version for
// horovodrun, edt's own for edtrun.
std::string version_text(bool horovod);

}  // namespace edt::launcher
