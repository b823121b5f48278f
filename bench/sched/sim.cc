#include "sim.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <string>

#include "sched/policy.h"

namespace edt::bench::sched {

const char* policy_name(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kFifo: return "fifo";
    case PolicyKind::kStatic: return "static";
    case PolicyKind::kEdt: return "edt";
  }
  return "unknown";
}

namespace {

namespace policy = edt::sched;

enum class EventType { kFinish, kDrained, kArrival };  // at one time: frees first

struct Event {
  double time;
  EventType type;
  int job;
  int payload;  // kFinish: the job's version; kDrained: containers
  bool operator>(const Event& o) const { return std::tie(time, type, job) > std::tie(o.time, o.type, o.job); }
};

// An elastic job runs on half to four times its asked containers (at most
// 64 GPUs); a non-elastic one on exactly those.
int min_containers(const Job& job) { return job.elastic ? std::max(1, job.containers() / 2) : job.containers(); }
int max_containers(const Job& job) {
  if (!job.elastic) return job.containers();
  return std::max(min_containers(job), std::min(4 * job.containers(), 64 / job.gpus_per_container));
}

// Its speed on `gpus` GPUs, relative to its asked size (sim.h's model).
double speed(const Job& job, int gpus, double scaling) {
  return std::pow(static_cast<double>(gpus) / job.gpus, std::log2(scaling));
}

struct JobState {
  int containers = 0;  // working
  int draining = 0;
  double work_left = 0;  // seconds of work at the asked size
  double rate = 0;
  double last_update = 0;
  double paused_until = 0;
  double start = -1, finish = -1;
  double service = 0;        // GPU-seconds held until `service_since`
  double service_since = 0;
  int version = 0;
};

class Sim {
 public:
  Sim(const std::vector<Job>& trace, const SimOptions& options)
      : trace_(trace), options_(options), jobs_(trace.size()), free_(options.gpus) {
    for (size_t j = 0; j < trace.size(); ++j) {
      jobs_[j].work_left = trace[j].duration_s;
      events_.push({trace[j].arrival_s, EventType::kArrival, static_cast<int>(j), 0});
    }
  }

  Result<SimResult> run();

 private:
  int min_of(int j) const { return min_containers(trace_[j]); }
  int max_of(int j) const { return max_containers(trace_[j]); }
  int gpus(int j, int containers) const { return containers * trace_[j].gpus_per_container; }
  // GPU-seconds the job has held (its attained service), draining ones not.
  double service_of(int j) const {
    const JobState& s = jobs_[j];
    return s.service + gpus(j, s.containers) * (now_ - s.service_since);
  }

  void handle(const Event& e);
  void account(double until);
  void settle(int j);
  void plan_finish(int j);
  void start(int j, int containers);
  void resize(int j, int containers);
  void schedule_fifo();
  void schedule_static();
  Status schedule_edt();
  policy::Snapshot snapshot() const;
  Status apply(const policy::Decisions& decisions);
  SimResult result() const;

  const std::vector<Job>& trace_;
  SimOptions options_;
  std::vector<JobState> jobs_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  std::vector<int> queue_;  // arrived, not started, in arrival order
  std::vector<int> running_;
  double now_ = 0;
  int free_ = 0, releasing_ = 0, working_ = 0;
  double queued_time_ = 0, queued_gpu_time_ = 0, gpu_time_ = 0;
  long resizes_ = 0, decisions_ = 0;
};

void Sim::account(double until) {
  double dt = until - now_;
  gpu_time_ += working_ * dt;
  if (!queue_.empty()) {
    queued_time_ += dt;
    queued_gpu_time_ += working_ * dt;
  }
  now_ = until;
}

void Sim::settle(int j) {
  JobState& s = jobs_[j];
  double from = std::max(s.last_update, s.paused_until);
  if (now_ > from) s.work_left = std::max(0.0, s.work_left - (now_ - from) * s.rate);
  s.last_update = now_;
}

void Sim::plan_finish(int j) {
  JobState& s = jobs_[j];
  s.rate = speed(trace_[j], gpus(j, s.containers), options_.scaling);
  double at = std::max(now_, s.paused_until) + s.work_left / s.rate;
  events_.push({at, EventType::kFinish, j, ++s.version});
}

void Sim::start(int j, int containers) {
  JobState& s = jobs_[j];
  s.containers = containers;
  s.start = now_;
  s.last_update = now_;
  s.service_since = now_;
  free_ -= gpus(j, containers);
  working_ += gpus(j, containers);
  queue_.erase(std::find(queue_.begin(), queue_.end(), j));
  running_.push_back(j);
  plan_finish(j);
}

void Sim::resize(int j, int containers) {
  JobState& s = jobs_[j];
  settle(j);
  s.service = service_of(j);
  s.service_since = now_;
  int delta = containers - s.containers;
  working_ += gpus(j, delta);
  if (delta > 0) {
    free_ -= gpus(j, delta);
    s.paused_until = now_ + options_.grow_pause_s;
  } else {
    s.draining -= delta;
    releasing_ += gpus(j, -delta);
    events_.push({now_ + options_.drain_s, EventType::kDrained, j, -delta});
  }
  s.containers = containers;
  ++resizes_;
  plan_finish(j);
}

void Sim::handle(const Event& e) {
  JobState& s = jobs_[e.job];
  switch (e.type) {
    case EventType::kArrival:
      queue_.push_back(e.job);
      break;
    case EventType::kDrained:
      s.draining -= e.payload;
      releasing_ -= gpus(e.job, e.payload);
      free_ += gpus(e.job, e.payload);
      break;
    case EventType::kFinish:
      if (e.payload != s.version || s.finish >= 0) break;
      s.finish = now_;
      free_ += gpus(e.job, s.containers);
      working_ -= gpus(e.job, s.containers);
      s.containers = 0;
      running_.erase(std::find(running_.begin(), running_.end(), e.job));
      break;
  }
}

void Sim::schedule_fifo() {
  while (!queue_.empty() && trace_[queue_.front()].gpus <= free_) start(queue_.front(), trace_[queue_.front()].containers());
}

void Sim::schedule_static() {
  std::vector<int> queued = queue_;
  for (int j : queued) {
    int per = trace_[j].gpus_per_container;
    if (gpus(j, min_of(j)) <= free_) start(j, std::min(max_of(j), free_ / per));
  }
}

policy::Snapshot Sim::snapshot() const {
  policy::Snapshot s;
  for (int t = 0; t < options_.teams; ++t) {
    int guaranteed = static_cast<int>(options_.guaranteed * options_.gpus);
    int share = guaranteed / options_.teams + (t == 0 ? guaranteed % options_.teams : 0);
    s.teams.push_back({"team" + std::to_string(t), {{"gpu", {share, policy::kUnlimited}}}});
  }
  auto add = [&](int j) {
    const Job& job = trace_[j];
    policy::Cluster c;
    c.name = std::to_string(j);
    c.team = "team" + std::to_string(job.team % options_.teams);
    c.arrival = static_cast<int64_t>(job.arrival_s * 1000);
    c.gpu_model = "gpu";
    c.gpus_per_container = job.gpus_per_container;
    c.min_containers = min_of(j);
    c.max_containers = max_of(j);
    c.containers = jobs_[j].containers;
    c.draining = jobs_[j].draining;
    c.service_gpu_s = static_cast<int64_t>(service_of(j));
    s.clusters.push_back(std::move(c));
  };
  for (int j : running_) add(j);
  for (int j : queue_) add(j);
  s.pools["gpu"] = {free_, releasing_};
  s.backfill_window_ms = static_cast<int64_t>(options_.backfill_window_h * 3.6e6);
  s.service_quantum_gpu_s = static_cast<int64_t>(options_.service_quantum_gpu_h * 3600);
  return s;
}

Status Sim::apply(const policy::Decisions& decisions) {
  for (const policy::Decision& d : decisions.decisions) {
    int j = std::stoi(d.cluster);
    switch (d.action) {
      case policy::Action::kAdmit: start(j, d.containers); break;
      case policy::Action::kGrow:
      case policy::Action::kShrink: resize(j, d.containers); break;
      case policy::Action::kWait: break;
    }
  }
  if (free_ < 0 || free_ + releasing_ + working_ != options_.gpus)
    return internal_error("simulator: GPUs do not add up after a step at t=" + std::to_string(now_));
  return Status::ok();
}

Status Sim::schedule_edt() {
  if (queue_.empty() && free_ == 0) return Status::ok();
  policy::Snapshot s = snapshot();
  EDT_ASSIGN_OR_RETURN(policy::Decisions d, policy::decide(s));
  ++decisions_;
  if (options_.check) EDT_RETURN_IF_ERROR(policy::check_decisions(s, d).with_context("t=" + std::to_string(now_)));
  return apply(d);
}

SimResult Sim::result() const {
  SimResult r;
  std::vector<double> jct;
  double queued = 0, by_kind[2] = {0, 0};
  int count[2] = {0, 0};
  for (size_t j = 0; j < trace_.size(); ++j) {
    jct.push_back(jobs_[j].finish - trace_[j].arrival_s);
    queued += jobs_[j].start - trace_[j].arrival_s;
    by_kind[trace_[j].elastic] += jct.back();
    ++count[trace_[j].elastic];
  }
  r.mean_jct_rigid_s = count[0] ? by_kind[0] / count[0] : 0;
  r.mean_jct_elastic_s = count[1] ? by_kind[1] / count[1] : 0;
  std::sort(jct.begin(), jct.end());
  r.jobs = static_cast<int>(jct.size());
  for (double x : jct) r.mean_jct_s += x / jct.size();
  r.p99_jct_s = jct.empty() ? 0 : jct[std::min(jct.size() - 1, static_cast<size_t>(0.99 * jct.size()))];
  r.mean_queue_s = jct.empty() ? 0 : queued / jct.size();
  r.utilization_queued = queued_time_ > 0 ? queued_gpu_time_ / (queued_time_ * options_.gpus) : 1.0;
  r.utilization = now_ > 0 ? gpu_time_ / (now_ * options_.gpus) : 0;
  r.makespan_s = now_;
  r.resizes = resizes_;
  r.decisions = decisions_;
  return r;
}

Result<SimResult> Sim::run() {
  // Steps at one instant: drains of 0 s free GPUs at once, so a policy that
  // drained and regrew the same containers would never let time move on.
  constexpr int kMaxStepsAtOneInstant = 10000;
  int steps_now = 0;
  while (!events_.empty()) {
    steps_now = events_.top().time > now_ ? 0 : steps_now + 1;
    if (steps_now > kMaxStepsAtOneInstant)
      return internal_error("simulator: the policy does not settle at t=" + std::to_string(now_) + " (" +
                            std::to_string(kMaxStepsAtOneInstant) + " steps at one instant)");
    account(events_.top().time);
    while (!events_.empty() && events_.top().time <= now_) {
      Event e = events_.top();
      events_.pop();
      handle(e);
    }
    switch (options_.policy) {
      case PolicyKind::kFifo: schedule_fifo(); break;
      case PolicyKind::kStatic: schedule_static(); break;
      case PolicyKind::kEdt: EDT_RETURN_IF_ERROR(schedule_edt()); break;
    }
  }
  if (!queue_.empty() || !running_.empty())
    return internal_error("simulator: " + std::to_string(queue_.size()) + " jobs never started (a job larger than the cluster?)");
  return result();
}

}  // namespace

double ideal_mean_jct_s(const std::vector<Job>& trace, const SimOptions& options) {
  double sum = 0;
  for (const Job& job : trace)
    sum += job.duration_s / speed(job, max_containers(job) * job.gpus_per_container, options.scaling);
  return trace.empty() ? 0 : sum / trace.size();
}

Result<SimResult> simulate(const std::vector<Job>& trace, const SimOptions& options) {
  for (const Job& job : trace)
    if (job.gpus > options.gpus)
      return invalid_argument("job " + std::to_string(job.id) + " asks " + std::to_string(job.gpus) +
                              " GPUs, more than the cluster's " + std::to_string(options.gpus));
  return Sim(trace, options).run();
}

}  // namespace edt::bench::sched
