#include "control/reconcile/reconcile_loop.h"

#include "common/log.h"

namespace edt::control {

ReconcileLoop::ReconcileLoop(Reconcilable* domain, ReconcileLoopOptions options)
    : domain_(domain), queue_({options.base_backoff, options.max_backoff, options.resync, [this] { resync(); }}) {}

ReconcileLoop::~ReconcileLoop() { stop(); }

void ReconcileLoop::start() {
  for (const auto& key : domain_->keys()) enqueue(key);
  worker_ = std::thread([this] { run(); });
}

void ReconcileLoop::stop() {
  queue_.shut_down();
  if (worker_.joinable()) worker_.join();
}

void ReconcileLoop::enqueue(const std::string& key) { queue_.add(key); }

ReconcileStats ReconcileLoop::stats() {
  std::lock_guard lock(mu_);
  return stats_;
}

void ReconcileLoop::resync() {
  for (const auto& key : domain_->keys()) queue_.add(key);
  domain_->after_resync();
}

void ReconcileLoop::run() {
  while (auto key = queue_.next()) {
    const auto started = std::chrono::steady_clock::now();
    Result<ReconcileResult> result = domain_->reconcile(*key);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    domain_->after_pass(*key, result.status());
    settle(*key, result, seconds);
  }
}

void ReconcileLoop::settle(const std::string& key, const Result<ReconcileResult>& result, double seconds) {
  {
    std::lock_guard lock(mu_);
    stats_.passes++;
    stats_.seconds += seconds;
    if (!result.is_ok()) stats_.errors++;
  }
  if (!result.is_ok()) {
    auto delay = queue_.add_rate_limited(key);
    log::warn("reconcile {}: {} (retry in {} ms)", key, result.status().to_string(), delay.count());
    return;
  }
  queue_.forget(key);
  if (result.value().requeue_after) queue_.add_after(key, *result.value().requeue_after);
}

}  // namespace edt::control
