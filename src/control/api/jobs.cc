// Handlers: jobs, commands run in a cluster's container, and their logs.
#include <charconv>
#include <fstream>
#include <thread>

#include "control/api/handlers.h"
#include "control/model/filters.h"

namespace edt::control::handlers {

using nlohmann::json;

namespace {

// The job named in the path, refreshed, if `user` may see it.
Outcome<Job> job_in_path(ApiContext& ctx, const Request& req, const User& user) {
  const std::string text = req.matches[1];
  int64_t id = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || ptr != text.data() + text.size())
    return missing("id", "job " + text + " does not exist", "use the id that POST .../jobs returned");
  auto job = ctx.service->job(user, id);
  if (!job.ok()) return job;
  return ctx.jobs->refresh(*job);
}

}  // namespace

Answer start_job(ApiContext& ctx, const Request& req, const User& user) {
  auto body = json_body(req);
  if (!body.ok()) return body.error();
  const std::string name = req.matches[1];
  auto cluster = ctx.service->cluster(user, name);
  if (!cluster.ok()) return cluster.error();
  JobRequest request;
  if (auto r = parse_job_request(*body, &request)) return *r;
  auto records = ctx.service->containers(user, name);
  if (!records.ok()) return records.error();
  const std::string container = request.container.value_or(container_name(name, 0));
  auto job = ctx.jobs->start(*cluster, *records, container, request.command, user.name);
  if (!job.ok()) return job.error();
  return json_reply(201, {{"id", job->id},
                          {"cluster", job->cluster},
                          {"container", job->container},
                          {"state", to_string(job->state)}});
}

Answer list_jobs(ApiContext& ctx, const Request& req, const User& user) {
  auto cluster = ctx.service->cluster(user, req.matches[1]);
  if (!cluster.ok()) return cluster.error();
  JobFilter filter;
  if (auto refused = parse_job_filter(req.params, &filter)) return *refused;
  json items = json::array();
  for (const auto& job : ctx.jobs->jobs_of(cluster->spec.name))
    if (filter.matches(job)) items.push_back(job_to_json(job));
  return json_reply(200, {{"jobs", items}});
}

// An ended job goes with its log; a running one is refused (409).
Answer delete_job(ApiContext& ctx, const Request& req, const User& user) {
  auto job = job_in_path(ctx, req, user);
  if (!job.ok()) return job.error();
  auto removed = ctx.jobs->remove(*job);
  if (!removed.ok()) return removed.error();
  return json_reply(200, {{"deleted", std::to_string(removed->id)}});
}

Answer get_job(ApiContext& ctx, const Request& req, const User& user) {
  auto job = job_in_path(ctx, req, user);
  if (!job.ok()) return job.error();
  return json_reply(200, job_to_json(*job));
}

Answer job_log(ApiContext& ctx, const Request& req, const User& user) {
  auto job = job_in_path(ctx, req, user);
  if (!job.ok()) return job.error();
  const bool follow = req.get_param_value("follow") != "false";
  const std::string path = ctx.jobs->log_path(job->id);
  const int64_t id = job->id;
  JobRunner* jobs = ctx.jobs;
  Reply reply;
  // Streams the log as it grows, until the job has ended and all of it is sent.
  reply.content_type = "text/plain";
  reply.stream = [path, id, follow, jobs](StreamWriter& out) {
    std::ifstream in(path, std::ios::binary);
    char buffer[65536];
    for (;;) {
      const auto now = follow ? jobs->current(id) : std::nullopt;
      const bool ended = !follow || !now || now->state != JobState::kRunning;
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
