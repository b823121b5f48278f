// Store: the small key-value service that ranks use to find each other.
//
// Keys are strings, values are byte strings. The operations are those of
// PyTorch c10d's store: set, get (waits for the key), add (an atomic
// counter), compare-and-set, wait for several keys, and erase. A PrefixStore
// scopes every key under "prefix/" so that each membership generation (and
// each subsystem) has its own namespace in one store.
//
// Implementations: MemoryStore (in this process; for tests that run ranks as
// threads) and the TCP store of src/rendezvous (hosted by edtrun's driver,
// reached through EDT_COORDINATOR=host:port).
//
// Thread safety: every method may be called from any thread concurrently.
// Timeouts: a call that waits returns a kTimeout Status naming the keys it
// waited for when the deadline passes; it never blocks forever.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "edt/status.h"

namespace edt {

class Store {
 public:
  using Duration = std::chrono::milliseconds;
  static constexpr Duration kDefaultTimeout{30000};

  virtual ~Store() = default;

  virtual Status set(const std::string& key, const std::string& value) = 0;

  // The value of `key`, waiting up to `timeout` for another party to set it.
  virtual Result<std::string> get(const std::string& key, Duration timeout = kDefaultTimeout) = 0;

  // The value of `key` if it is set now, std::nullopt if not; never waits.
  virtual Result<std::optional<std::string>> try_get(const std::string& key) = 0;

  // Adds `delta` to the integer stored at `key` (absent counts as 0) and
  // returns the new value. Atomic across all clients.
  virtual Result<int64_t> add(const std::string& key, int64_t delta) = 0;

  // If the value of `key` equals `expected` (an absent key equals ""),
  // replaces it with `desired`. Returns the value now stored either way.
  virtual Result<std::string> compare_set(const std::string& key, const std::string& expected,
                                          const std::string& desired) = 0;

  // Waits until every key in `keys` is set.
  virtual Status wait(const std::vector<std::string>& keys, Duration timeout = kDefaultTimeout) = 0;

  // Removes `key`; true if it was there.
  virtual Result<bool> erase(const std::string& key) = 0;
};

// Scopes every key of an underlying store under "prefix/".
class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base)
      : prefix_(std::move(prefix) + "/"), base_(std::move(base)) {}

  Status set(const std::string& key, const std::string& value) override { return base_->set(k(key), value); }
  Result<std::string> get(const std::string& key, Duration timeout = kDefaultTimeout) override {
    return base_->get(k(key), timeout);
  }
  Result<std::optional<std::string>> try_get(const std::string& key) override { return base_->try_get(k(key)); }
  Result<int64_t> add(const std::string& key, int64_t delta) override { return base_->add(k(key), delta); }
  Result<std::string> compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) override {
    return base_->compare_set(k(key), expected, desired);
  }
  Status wait(const std::vector<std::string>& keys, Duration timeout = kDefaultTimeout) override;
  Result<bool> erase(const std::string& key) override { return base_->erase(k(key)); }

  const std::shared_ptr<Store>& base() const { return base_; }

 private:
  std::string k(const std::string& key) const { return prefix_ + key; }
  std::string prefix_;
  std::shared_ptr<Store> base_;
};

// A store inside this process. The TCP store server keeps its data in one.
class MemoryStore final : public Store {
 public:
  Status set(const std::string& key, const std::string& value) override;
  Result<std::string> get(const std::string& key, Duration timeout = kDefaultTimeout) override;
  Result<std::optional<std::string>> try_get(const std::string& key) override;
  Result<int64_t> add(const std::string& key, int64_t delta) override;
  Result<std::string> compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) override;
  Status wait(const std::vector<std::string>& keys, Duration timeout = kDefaultTimeout) override;
  Result<bool> erase(const std::string& key) override;

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::string> data_;  // guarded by mu_
};

// "Timeout: waited 30000 ms for keys a, b" — the error every waiting store returns.
Status wait_timeout_error(const std::vector<std::string>& keys, Store::Duration timeout);

}  // namespace edt
