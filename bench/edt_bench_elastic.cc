// edt-bench-elastic: a training-shaped elastic worker, run under edtrun in
// elastic mode. Each step every worker takes its batch from an
// ElasticSampler, marks its samples in a per-sample counter vector (the
// "gradient", optionally padded with --grad-size bytes of float32), sums it
// with an allreduce, and adds it to its model; it commits every K steps. The
// model is the count of how often each sample was trained, so at the end of
// every epoch the worker checks that each sample counts exactly once.
//
// It prints one JSON line per event on stdout:
//   {"event":"start","worker":..,"host":..,"pid":..,"t":..}     once per process
//   {"event":"reset","gen":..,"rank":..,"size":..,"commit":..,"t":..}
//   {"event":"step","gen":..,"rank":..,"size":..,"step":..,"epoch":..,"ms":..,"t":..}
//   {"event":"epoch","epoch":..,"exactly_once":true|false,"rank":..,"size":..,"host":..}
//   {"event":"end","status":"..","resets":..}
// t is wall-clock seconds (CLOCK_REALTIME), comparable across processes.
//
// Failure injection for tests: --fail-at-step S on the worker whose host is
// --fail-host H (or every worker) ends the process at step S: --fail-mode
// exit (code 3, like an exception caught at top level), abort (SIGABRT),
// or hang (stops answering, like a silent host).
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/units.h"
#include "edt/elastic.h"

namespace {

using edt::Status;
using edt::elastic::ElasticSampler;
using edt::elastic::State;

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void emit(const std::string& json) {
  std::string line = json + "\n";
  (void)!write(1, line.data(), line.size());
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

struct Model final : edt::elastic::StateObject {
  std::vector<int32_t> counts;
  int64_t steps = 0;
  uint64_t epoch = 0;

  std::string serialize() const override {
    std::string out(sizeof steps + sizeof epoch + counts.size() * sizeof(int32_t), '\0');
    std::memcpy(out.data(), &steps, sizeof steps);
    std::memcpy(out.data() + sizeof steps, &epoch, sizeof epoch);
    std::memcpy(out.data() + sizeof steps + sizeof epoch, counts.data(), counts.size() * sizeof(int32_t));
    return out;
  }
  Status deserialize(std::string_view bytes) override {
    if (bytes.size() != sizeof steps + sizeof epoch + counts.size() * sizeof(int32_t))
      return edt::invalid_argument("model state of " + std::to_string(bytes.size()) + " bytes; --samples differs?");
    std::memcpy(&steps, bytes.data(), sizeof steps);
    std::memcpy(&epoch, bytes.data() + sizeof steps, sizeof epoch);
    std::memcpy(counts.data(), bytes.data() + sizeof steps + sizeof epoch, counts.size() * sizeof(int32_t));
    return Status::ok();
  }
};

// --state-size: a large state that stands for a model's parameters and
// optimizer state (fp32 parameters and Adam's two moments: 12 bytes per
// parameter). Its bytes are a fixed pattern that never changes, so the
// bench holds only the committed buffer (commit() copies nothing, the
// slices go out from committed_views()). A worker that receives it checks a
// sample of the bytes and makes the pattern again when it must send it.
struct Bulk final : edt::elastic::StateObject {
  static constexpr size_t kBlock = 1 << 20;
  size_t size = 0;
  mutable std::string bytes;  // empty until this worker holds the state

  static char at(size_t i) { return static_cast<char>((i % kBlock) * 31 + (i % kBlock) / 4096); }
  void fill() const {
    if (bytes.size() == size) return;
    std::string block(std::min(kBlock, size), '\0');
    for (size_t i = 0; i < block.size(); ++i) block[i] = at(i);
    bytes.clear();
    bytes.reserve(size);
    while (bytes.size() < size) bytes.append(block, 0, std::min(block.size(), size - bytes.size()));
  }
  bool commit() override { return true; }
  std::vector<std::string_view> committed_views() const override {
    fill();
    return {bytes};
  }
  std::string committed_bytes() const override {
    fill();
    return bytes;
  }
  std::string serialize() const override { return committed_bytes(); }
  Status deserialize(std::string_view in) override {
    if (in.size() != size)
      return edt::invalid_argument("bulk state of " + std::to_string(in.size()) + " bytes; --state-size differs?");
    for (size_t i = 0; i < in.size(); i += 4093)
      if (in[i] != at(i)) return edt::invalid_argument("bulk state: byte " + std::to_string(i) + " differs");
    if (!in.empty() && in.back() != at(in.size() - 1)) return edt::invalid_argument("bulk state: last byte differs");
    return Status::ok();
  }
};

void emit_transfer(const State& state, const std::string& worker) {
  const edt::elastic::TransferStats& t = state.last_transfer();
  std::string from;
  for (int64_t n : t.bytes_from_rank) from += (from.empty() ? "" : ",") + std::to_string(n);
  emit("{\"event\":\"transfer\",\"worker\":" + quoted(worker) + ",\"gen\":" + std::to_string(state.generation()) +
       ",\"rank\":" + std::to_string(state.rank()) + ",\"size\":" + std::to_string(state.size()) + ",\"commit\":" +
       std::to_string(t.commit_id) + ",\"bytes\":" + std::to_string(t.bytes) + ",\"bytes_from_rank\":[" + from +
       "],\"bytes_sent\":" + std::to_string(t.bytes_sent) + ",\"seconds\":" + std::to_string(t.seconds) +
       ",\"t\":" + std::to_string(now_s()) + "}");
}

int run_worker(int argc, char** argv) {
  CLI::App app{"edt-bench-elastic: a training-shaped elastic worker (run it under edtrun --min-np/--max-np)"};
  uint64_t samples = 20000, batch = 16, epochs = 1, seed = 1;
  int commit_every = 1;
  int64_t fail_at_step = -1;
  double step_ms = 0;
  std::string grad_size = "0", state_size = "0", fail_host, fail_mode = "exit";
  app.add_option("--samples", samples, "Samples per epoch")->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  app.add_option("--batch", batch, "Samples per worker per step")->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  app.add_option("--epochs", epochs, "Epochs to train");
  app.add_option("--seed", seed, "Seed of the sample permutation");
  app.add_option("--grad-size", grad_size, "Extra float32 gradient allreduced every step, e.g. 4M");
  app.add_option("--state-size", state_size, "Extra state that moves to joining workers, e.g. 1G (12 bytes a parameter)");
  app.add_option("--commit-every", commit_every, "Commit every K steps")->check(CLI::PositiveNumber);
  app.add_option("--step-ms", step_ms, "Compute time per step to simulate, in ms");
  app.add_option("--fail-at-step", fail_at_step, "Fail at this step (see --fail-host, --fail-mode)");
  app.add_option("--fail-host", fail_host, "Only the worker on this host fails (default: every worker)");
  app.add_option("--fail-mode", fail_mode, "exit, abort or hang")->check(CLI::IsMember({"exit", "abort", "hang"}));
  CLI11_PARSE(app, argc, argv);
  auto grad_bytes = edt::parse_size(grad_size);
  if (!grad_bytes.is_ok()) {
    edt::log::error("--grad-size {}: {}", grad_size, grad_bytes.status().message());
    return 2;
  }

  auto bulk_bytes = edt::parse_size(state_size);
  if (!bulk_bytes.is_ok()) {
    edt::log::error("--state-size {}: {}", state_size, bulk_bytes.status().message());
    return 2;
  }

  auto created = State::from_env();
  if (!created.is_ok()) {
    edt::log::error("{}", created.status().to_string());
    return 2;
  }
  State& state = *created.value();
  const char* host_env = std::getenv("EDT_HOSTNAME");
  const std::string host = host_env ? host_env : "";
  const std::string worker = std::getenv("EDT_WORKER_ID");
  emit("{\"event\":\"start\",\"worker\":" + quoted(worker) + ",\"host\":" + quoted(host) +
       ",\"pid\":" + std::to_string(getpid()) + ",\"t\":" + std::to_string(now_s()) + "}");

  Model model;
  model.counts.assign(samples, 0);
  ElasticSampler sampler({.num_samples = samples, .seed = seed});
  state.add("model", &model);
  state.add("sampler", &sampler);
  Bulk bulk;
  bulk.size = bulk_bytes.value();
  if (bulk.size > 0) {
    // The workers started together (the first generation) hold it; a
    // joiner receives it.
    auto placed = state.placement();
    if (placed.is_ok() && placed->generation == 1) bulk.fill();
    state.add("bulk", &bulk);
  }
  state.on_reset([&] {
    if (bulk.size > 0) emit_transfer(state, worker);
    emit("{\"event\":\"reset\",\"gen\":" + std::to_string(state.generation()) + ",\"rank\":" +
         std::to_string(state.rank()) + ",\"size\":" + std::to_string(state.size()) + ",\"worker\":" +
         quoted(worker) + ",\"commit\":" + std::to_string(state.commit_id()) + ",\"step\":" +
         std::to_string(model.steps) + ",\"t\":" + std::to_string(now_s()) + "}");
  });
  std::vector<float> extra(grad_bytes.value() / sizeof(float), 1.0f);
  const bool fails_here = fail_at_step >= 0 && (fail_host.empty() || fail_host == host);

  Status status = edt::elastic::run(state, [&](State& s) -> Status {
    while (model.epoch < epochs) {
      while (!sampler.epoch_done()) {
        if (fails_here && model.steps == fail_at_step) {
          edt::log::info("injected failure ({}) at step {} on {}", fail_mode, model.steps, host);
          if (fail_mode == "abort") std::abort();
          if (fail_mode == "hang") {
            raise(SIGSTOP);
          }
          std::exit(3);
        }
        const auto begin = std::chrono::steady_clock::now();
        std::vector<int32_t> grad(samples);
        for (uint64_t i : sampler.batch(batch)) ++grad[i];
        if (step_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(step_ms));
        EDT_RETURN_IF_ERROR(
            s.comm().allreduce(grad.data(), grad.data(), samples, edt::DataType::kInt32, edt::ReduceOp::kSum));
        if (!extra.empty())
          EDT_RETURN_IF_ERROR(s.comm().allreduce(extra.data(), extra.data(), extra.size(), edt::DataType::kFloat32,
                                                 edt::ReduceOp::kAverage));
        for (uint64_t i = 0; i < samples; ++i) model.counts[i] += grad[i];
        sampler.record_batch(batch);
        ++model.steps;
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
        emit("{\"event\":\"step\",\"gen\":" + std::to_string(s.generation()) + ",\"rank\":" +
             std::to_string(s.rank()) + ",\"size\":" + std::to_string(s.size()) + ",\"worker\":" + quoted(worker) +
             ",\"step\":" + std::to_string(model.steps) + ",\"epoch\":" + std::to_string(model.epoch) +
             ",\"ms\":" + std::to_string(ms) + ",\"t\":" + std::to_string(now_s()) + "}");
        if (model.steps % commit_every == 0) EDT_RETURN_IF_ERROR(s.commit());
      }
      bool once = true;
      for (int32_t c : model.counts) once = once && c == 1;
      emit("{\"event\":\"epoch\",\"epoch\":" + std::to_string(model.epoch) + ",\"exactly_once\":" +
           (once ? "true" : "false") + ",\"rank\":" + std::to_string(s.rank()) + ",\"size\":" +
           std::to_string(s.size()) + ",\"host\":" + quoted(host) + ",\"worker\":" + quoted(worker) + "}");
      model.counts.assign(samples, 0);
      ++model.epoch;
      sampler.set_epoch(model.epoch);
      sampler.reset(s.rank(), s.size());
      EDT_RETURN_IF_ERROR(s.commit());
    }
    return Status::ok();
  });
  emit("{\"event\":\"end\",\"status\":" + quoted(status.to_string()) + ",\"worker\":" + quoted(worker) +
       ",\"resets\":" + std::to_string(state.resets()) + "}");
  if (status.is_ok() || edt::elastic::left_the_job(status)) return 0;
  edt::log::error("{}", status.to_string());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  edt::log::init("edt-bench-elastic");
  return run_worker(argc, argv);
}
