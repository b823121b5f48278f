#include "control/model/job.h"

namespace edt::control {

nlohmann::json job_to_json(const Job& job) {
  return {{"id", job.id},
          {"cluster", job.cluster},
          {"container", job.container},
          {"owner", job.owner},
          {"command", job.command},
          {"state", to_string(job.state)},
          {"exit_code", job.exit_code},
          {"message", job.message},
          {"created_at", job.created_at},
          {"finished_at", job.finished_at}};
}

}  // namespace edt::control
