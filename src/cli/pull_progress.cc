#include "cli/pull_progress.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "cli/commands.h"
#include "edt_api/contract.h"

namespace edt::cli {
namespace {

using nlohmann::json;
namespace progress = api::fields::ImagePullProgress;

uint64_t mib(const json& pull, std::string_view field) { return (pull[key(field)].get<uint64_t>() + (1 << 20) - 1) >> 20; }

// The pull this command started, among those under way.
const json* find_pull(const json& list, const std::string& name, const std::string& reference) {
  for (const auto& p : list[key(api::fields::ImagePullList::pulls)]) {
    const std::string said = p[key(progress::reference)];
    if (name.empty() ? said.size() >= reference.size() && said.ends_with(reference) : p[key(progress::name)] == name)
      return &p;
  }
  return nullptr;
}

// Prints what changed: in place on a terminal, else a line per step (and
// one every 10 s within a long one).
class ProgressLine {
 public:
  ProgressLine() : terminal_(::isatty(STDERR_FILENO) == 1) {}
  void show(const json& pull) {
    const std::string text = "pulling " + pull[key(progress::name)].get<std::string>() + ": " + describe_pull(pull);
    if (terminal_) {
      fprintf(stderr, "\r%s\033[K", text.c_str());
    } else {
      const std::string step = pull[key(progress::phase)].dump() + pull[key(progress::layers_fetched)].dump() +
                               "/" + pull[key(progress::layers_unpacked)].dump();
      const auto now = std::chrono::steady_clock::now();
      if (step == last_step_ && now - last_line_ < std::chrono::seconds(10)) return;
      last_step_ = step;
      last_line_ = now;
      fprintf(stderr, "%s\n", text.c_str());
    }
    fflush(stderr);
    shown_ = true;
  }
  ~ProgressLine() {
    if (terminal_ && shown_) fprintf(stderr, "\r\033[K");
  }

 private:
  bool terminal_, shown_ = false;
  std::string last_step_;
  std::chrono::steady_clock::time_point last_line_;
};

}  // namespace

std::string describe_pull(const json& pull) {
  const std::string phase = pull[key(progress::phase)];
  const uint64_t layers = pull[key(progress::layers)];
  if (layers == 0) return phase;
  return phase + ": layers " + std::to_string(pull[key(progress::layers_fetched)].get<uint64_t>()) + "/" +
         std::to_string(layers) + " fetched, " + std::to_string(pull[key(progress::layers_unpacked)].get<uint64_t>()) +
         " unpacked; " + std::to_string(mib(pull, progress::bytes_fetched)) + "/" +
         std::to_string(mib(pull, progress::bytes)) + " MiB";
}

std::optional<ApiFailure> with_pull_progress(const std::string& name, const std::string& reference,
                                             const std::function<std::optional<ApiFailure>()>& call) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::optional<ApiFailure> result;
  std::thread worker([&] {
    auto answer = call();
    std::lock_guard<std::mutex> hold(mu);
    result = std::move(answer);
    done = true;
    cv.notify_all();
  });
  {
    Client client(load_endpoint());
    ProgressLine line;
    std::unique_lock<std::mutex> hold(mu);
    while (!cv.wait_for(hold, std::chrono::seconds(1), [&] { return done; })) {
      hold.unlock();
      json list;
      if (!client.call("GET", "/images/pulls", nullptr, &list))
        if (const json* mine = find_pull(list, name, reference)) line.show(*mine);
      hold.lock();
    }
  }
  worker.join();
  return result;
}

}  // namespace edt::cli
