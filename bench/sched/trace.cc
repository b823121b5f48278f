#include "trace.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace edt::bench::sched {

namespace {

// splitmix64: a small generator whose output is fixed by its definition.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return (next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {                                        // Box-Muller
    double u = 1.0 - uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * M_PI * v);
  }
  double exponential(double mean) { return -mean * std::log(1.0 - uniform()); }

 private:
  uint64_t state_;
};

// GPUs asked, by share of jobs: Philly's single-GPU majority, a tail to 64.
int job_gpus(Random& random, int cluster_gpus) {
  static const std::pair<double, int> kShares[] = {{0.62, 1}, {0.10, 2}, {0.12, 4}, {0.10, 8},
                                                   {0.03, 16}, {0.02, 32}, {0.01, 64}};
  double u = random.uniform(), sum = 0;
  int gpus = 64;
  for (auto [share, size] : kShares) {
    sum += share;
    if (u < sum) {
      gpus = size;
      break;
    }
  }
  return std::max(1, std::min(gpus, cluster_gpus / 8));  // no job asks more than an eighth
}

// Helios's day: GPU jobs submitted per hour (0:00-1:00 first), the four
// clusters' hourly averages over six months added up (trace.h says where
// from). Only the shape matters: the rate is scaled to the trace's mean.
constexpr double kHeliosHourlySubmissions[24] = {329, 305, 243, 214, 203, 198, 197, 179, 197, 286, 404, 443,
                                                 431, 440, 484, 517, 545, 484, 393, 433, 471, 443, 412, 395};

// Maps time at a constant rate (where a Poisson process of the mean rate
// puts an arrival) to the time of day at which the diurnal rate has
// brought as many arrivals: the inverse of the rate's integral, hour by
// hour. Over a whole day both clocks advance 24 hours.
double diurnal_time(double poisson_s) {
  double mean = 0;
  for (double jobs : kHeliosHourlySubmissions) mean += jobs / 24;
  double days = std::floor(poisson_s / 86400.0);
  double left = poisson_s - days * 86400.0;
  for (int hour = 0; hour < 24; ++hour) {
    double rate = kHeliosHourlySubmissions[hour] / mean;  // this hour's rate over the mean
    if (left < 3600.0 * rate || hour == 23) return days * 86400.0 + hour * 3600.0 + left / rate;
    left -= 3600.0 * rate;
  }
  return poisson_s;  // not reached
}

}  // namespace

std::vector<Job> generate(const TraceOptions& options) {
  Random random(options.seed);
  std::vector<Job> jobs(options.jobs);
  double gpu_seconds = 0;
  for (int i = 0; i < options.jobs; ++i) {
    Job& job = jobs[i];
    job.id = i;
    job.gpus = job_gpus(random, options.cluster_gpus);
    job.gpus_per_container = std::min(job.gpus, 8);
    // Log-normal, median 30 min, sigma 1.7: mean ~2.5 h; 60 s to 5 days.
    job.duration_s = std::clamp(1800.0 * std::exp(1.7 * random.normal()), 60.0, 5 * 86400.0);
    job.elastic = random.uniform() < options.elastic_fraction;
    job.team = static_cast<int>(random.next() % std::max(1, options.teams));
    gpu_seconds += job.gpus * job.duration_s;
  }
  // Poisson arrivals at the mean rate that offers `load` of the GPUs,
  // then, for a diurnal trace, moved to the hours that Helios's day gives.
  double mean_gap = gpu_seconds / (options.load * options.cluster_gpus) / options.jobs;
  double t = 0;
  for (Job& job : jobs) {
    job.arrival_s = options.arrivals == Arrivals::kDiurnal ? diurnal_time(t) : t;
    t += random.exponential(mean_gap);
  }
  return jobs;
}

Status write_trace(const std::string& path, const std::vector<Job>& jobs) {
  std::ofstream out(path);
  out << "id,arrival_s,gpus,gpus_per_container,duration_s,elastic,team\n";
  out.precision(10);
  for (const Job& j : jobs)
    out << j.id << ',' << j.arrival_s << ',' << j.gpus << ',' << j.gpus_per_container << ',' << j.duration_s << ','
        << (j.elastic ? 1 : 0) << ',' << j.team << '\n';
  out.close();
  if (!out) return io_error("write " + path, errno);
  return Status::ok();
}

Result<std::vector<Job>> read_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return io_error("open trace " + path, errno);
  std::string line;
  std::getline(in, line);  // the header
  std::vector<Job> jobs;
  for (int n = 2; std::getline(in, line); ++n) {
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream fields(line);
    Job j;
    int elastic = 0;
    if (!(fields >> j.id >> j.arrival_s >> j.gpus >> j.gpus_per_container >> j.duration_s >> elastic >> j.team) ||
        j.gpus < 1 || j.gpus_per_container < 1 || j.gpus % j.gpus_per_container != 0)
      return invalid_argument(path + ":" + std::to_string(n) +
                              ": not a job (id,arrival_s,gpus,gpus_per_container,duration_s,elastic,team; gpus a "
                              "multiple of gpus_per_container)");
    j.elastic = elastic != 0;
    jobs.push_back(j);
  }
  return jobs;
}

}  // namespace edt::bench::sched
