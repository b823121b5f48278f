// sched_sim: replays a generated (or given) job trace on clusters of 64 to
// 4,096 GPUs under FIFO, Volcano-style static gang scheduling and edt's
// policy, and prints mean and p99 job completion time, mean queueing delay
// and GPU utilization while work is queued (sim.h has the models).
//
//   sched_sim                                   the table of RESULTS.md
//   sched_sim --arrivals poisson                the same at a constant arrival rate
//   sched_sim --gpus 64 --jobs-per-gpu 5 --check   a short run, invariants checked
//   sched_sim --csv out.csv && plot.py out.csv plot.png
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <map>

#include "sim.h"
#include "trace.h"

namespace s = edt::bench::sched;

namespace {

struct Args {
  std::vector<int> gpus{64, 256, 1024, 4096};
  int jobs_per_gpu = 30;
  s::TraceOptions trace;
  s::SimOptions sim;
  std::string trace_in, trace_out, csv;
};

void print_row(int gpus, const char* policy, const s::SimResult& r, const s::SimResult& fifo,
               const s::SimResult* stat) {
  auto below = [&](double base) { return base > 0 ? 100.0 * (1.0 - r.mean_jct_s / base) : 0.0; };
  std::printf("%6d  %-7s %7d  %9.2f  %9.2f  %9.2f  %9.2f  %9.2f  %8.1f%%  %8.1f%%  %8.0f%%  %8s  %8ld\n", gpus, policy,
              r.jobs, r.mean_jct_s / 3600, r.mean_jct_rigid_s / 3600, r.mean_jct_elastic_s / 3600, r.p99_jct_s / 3600,
              r.mean_queue_s / 3600, 100 * r.utilization_queued, 100 * r.utilization, below(fifo.mean_jct_s),
              stat ? (std::to_string(static_cast<int>(std::lround(below(stat->mean_jct_s)))) + "%").c_str() : "",
              r.resizes);
}

// The bound of sim.h's ideal_mean_jct_s(), against FIFO.
void print_bound(int gpus, double ideal_s, const s::SimResult& fifo) {
  std::printf("%6d  %-7s %7s  %9.2f  %9s  %9s  %9s  %9s  %9s  %9s  %8.0f%%\n", gpus, "bound", "", ideal_s / 3600, "",
              "", "", "", "", "", 100.0 * (1.0 - ideal_s / fifo.mean_jct_s));
}

// One cluster size: the three policies on one trace. Returns 1 on an error.
int run_size(const Args& args, int gpus, std::ofstream& csv) {
  s::TraceOptions trace_options = args.trace;
  trace_options.cluster_gpus = gpus;
  trace_options.jobs = args.jobs_per_gpu * gpus;
  std::vector<s::Job> trace;
  if (!args.trace_in.empty()) {
    auto read = s::read_trace(args.trace_in);
    if (!read.is_ok()) return std::fprintf(stderr, "%s\n", read.status().to_string().c_str()), 1;
    trace = read.value();
  } else {
    trace = s::generate(trace_options);
  }
  if (!args.trace_out.empty() && !s::write_trace(args.trace_out, trace).is_ok())
    return std::fprintf(stderr, "cannot write %s\n", args.trace_out.c_str()), 1;
  std::vector<s::SimResult> results;
  for (s::PolicyKind kind : {s::PolicyKind::kFifo, s::PolicyKind::kStatic, s::PolicyKind::kEdt}) {
    s::SimOptions options = args.sim;
    options.gpus = gpus;
    options.policy = kind;
    auto r = s::simulate(trace, options);
    if (!r.is_ok()) return std::fprintf(stderr, "%s on %d GPUs: %s\n", s::policy_name(kind), gpus,
                                        r.status().to_string().c_str()), 1;
    results.push_back(r.value());
    print_row(gpus, s::policy_name(kind), r.value(), results[0], kind == s::PolicyKind::kEdt ? &results[1] : nullptr);
    if (csv) csv << gpus << ',' << s::policy_name(kind) << ',' << r->mean_jct_s << ',' << r->p99_jct_s << ','
                 << r->mean_queue_s << ',' << r->utilization_queued << ',' << r->utilization << ','
                 << r->mean_jct_rigid_s << ',' << r->mean_jct_elastic_s << '\n';
  }
  double ideal = s::ideal_mean_jct_s(trace, args.sim);
  print_bound(gpus, ideal, results[0]);
  if (csv) csv << gpus << ",bound," << ideal << ",,,,,,\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  CLI::App app{"Replays a job trace under FIFO, static min/max and edt's scheduling policy"};
  app.add_option("--gpus", args.gpus, "cluster sizes to simulate")->delimiter(',');
  app.add_option("--jobs-per-gpu", args.jobs_per_gpu, "trace length: jobs per GPU of the cluster");
  app.add_option("--seed", args.trace.seed, "the trace's seed");
  app.add_option("--load", args.trace.load, "offered GPU-time over the cluster's");
  app.add_option("--elastic", args.trace.elastic_fraction, "share of elastic jobs");
  app.add_option("--arrivals", args.trace.arrivals, "arrival process: diurnal (Helios's day) or poisson")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, s::Arrivals>{{"diurnal", s::Arrivals::kDiurnal}, {"poisson", s::Arrivals::kPoisson}},
          CLI::ignore_case))
      ->option_text("diurnal|poisson");
  app.add_option("--teams", args.sim.teams, "edt: teams of equal guarantees");
  app.add_option("--guaranteed", args.sim.guaranteed, "edt: share of the GPUs guaranteed to the teams in all");
  app.add_option("--backfill-window", args.sim.backfill_window_h,
                 "edt: hours after a blocked request that later ones may still pass it");
  app.add_option("--service-quantum", args.sim.service_quantum_gpu_h,
                 "edt: GPU-hours of service below which a cluster is at service level 0 (0: one level)");
  app.add_option("--scaling", args.sim.scaling, "speed-up per doubling of a job's GPUs");
  app.add_option("--grow-pause", args.sim.grow_pause_s, "seconds a job loses when it grows");
  app.add_option("--drain", args.sim.drain_s, "seconds until a shrunk container's GPUs are free");
  app.add_flag("--check", args.sim.check, "check the policy's invariants at every step");
  app.add_option("--trace", args.trace_in, "replay this CSV trace instead of generating one");
  app.add_option("--write-trace", args.trace_out, "write the trace replayed (of the last size) as CSV");
  app.add_option("--csv", args.csv, "write the figures as CSV (for plot.py)");
  CLI11_PARSE(app, argc, argv);
  args.trace.teams = std::max(1, args.sim.teams);
  std::ofstream csv;
  if (!args.csv.empty()) {
    csv.open(args.csv);
    csv << "gpus,policy,mean_jct_s,p99_jct_s,mean_queue_s,utilization_queued,utilization,mean_jct_rigid_s,"
           "mean_jct_elastic_s\n";
  }
  std::printf("%6s  %-7s %7s  %9s  %9s  %9s  %9s  %9s  %9s  %9s  %9s  %8s  %8s\n", "GPUs", "policy", "jobs", "mean h",
              "non-el. h", "elast. h", "p99 h", "queue h", "util(q)", "util", "vs fifo", "vs stat.", "resizes");
  for (int gpus : args.gpus)
    if (run_size(args, gpus, csv) != 0) return 1;
  return 0;
}
