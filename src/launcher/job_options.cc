#include "launcher/job_options.h"

namespace edt::launcher {

SupervisorOptions supervisor_options(const JobOptions& job, OutputSink* output) {
  SupervisorOptions options;
  options.command = job.command;
  options.cwd = job.cwd;
  options.ssh = job.ssh;
  options.launcher_env = job.launcher_env;
  options.grace_period = job.grace_period;
  options.output = output;
  return options;
}

}  // namespace edt::launcher
