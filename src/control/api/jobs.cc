// Handlers: jobs, commands run in a cluster's container, and their logs.
#include <charconv>
#include <fstream>
#include <thread>

#include "control/api/handlers.h"
#include "control/model/filters.h"

namespace edt::control::handlers {

using nlohmann::json;

namespace {

// The id in the path, or the refusal a job that does not exist gets.
Result<int64_t> id_in_path(const Request& req) {
  const std::string text = req.matches[1];
  int64_t id = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || ptr != text.data() + text.size())
    return missing("id", "job " + text + " does not exist", "use the id that POST .../jobs returned");
  return id;
}

}  // namespace

Answer start_job(ApiContext& ctx, const Request& req, const User& user) {
  auto body = json_body(req);
  if (!body.is_ok()) return body.status();
  const std::string name = req.matches[1];
  auto cluster = ctx.service->cluster(user, name);
  if (!cluster.is_ok()) return cluster.status();
  JobRequest request;
  EDT_RETURN_IF_ERROR(parse_job_request(*body, &request));
  auto job = ctx.service->start_job(user, name, request);
  if (!job.is_ok()) return job.status();
  return json_reply(201, {{"id", job->id},
                          {"cluster", job->cluster},
                          {"container", job->container},
                          {"state", to_string(job->state)}});
}

Answer list_jobs(ApiContext& ctx, const Request& req, const User& user) {
  auto jobs = ctx.service->jobs(user, req.matches[1]);
  if (!jobs.is_ok()) return jobs.status();
  JobFilter filter;
  EDT_RETURN_IF_ERROR(parse_job_filter(req.params, &filter));
  return filtered_list("jobs", *jobs, filter, job_to_json);
}

// An ended job goes with its log; a running one is refused (409).
Answer delete_job(ApiContext& ctx, const Request& req, const User& user) {
  auto id = id_in_path(req);
  if (!id.is_ok()) return id.status();
  auto removed = ctx.service->delete_job(user, *id);
  if (!removed.is_ok()) return removed.status();
  return json_reply(200, {{"deleted", std::to_string(removed->id)}});
}

Answer get_job(ApiContext& ctx, const Request& req, const User& user) {
  auto id = id_in_path(req);
  if (!id.is_ok()) return id.status();
  auto job = ctx.service->job(user, *id);
  if (!job.is_ok()) return job.status();
  return json_reply(200, job_to_json(*job));
}

Answer job_log(ApiContext& ctx, const Request& req, const User& user) {
  auto id = id_in_path(req);
  if (!id.is_ok()) return id.status();
  auto log = ctx.service->job_log(user, *id);
  if (!log.is_ok()) return log.status();
  const bool follow = req.get_param_value("follow") != "false";
  Reply reply;
  // Streams the log as it grows, until the job has ended and all of it is sent.
  reply.content_type = "text/plain";
  reply.stream = [path = log->path, running = log->running, follow](StreamWriter& out) {
    std::ifstream in(path, std::ios::binary);
    char buffer[65536];
    for (;;) {
      const bool ended = !follow || !running();
      if (!in.is_open()) in.open(path, std::ios::binary);
      in.clear();
      in.read(buffer, sizeof(buffer));
      const std::streamsize n = in.gcount();
      if (n > 0) {
        if (!out.write(std::string_view(buffer, static_cast<size_t>(n)))) return;
        continue;
      }
      if (ended || !out.open()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  };
  return reply;
}

}  // namespace edt::control::handlers
