// The hosts an elastic job stopped using after a failure there.
//
// A host is blacklisted when a worker on it fails (exits non-zero, is
// killed, stops heartbeating, does not start). Without a cooldown range it
// stays out for good. With one (horovodrun's --blacklist-cooldown-range MIN
// MAX) it comes back after min(MIN * 2^(failures - 1), MAX): the failure
// count survives its return, so a host that keeps failing stays out longer.
//
// Time comes from the clock given at construction (steady_clock::now by
// default), so that tests can move it. Logs when a host goes out and when it
// comes back. Not thread safe; the elastic driver's loop owns it.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace edt::launcher {

class Blacklist {
 public:
  using Clock = std::chrono::steady_clock;
  using Now = std::function<Clock::time_point()>;
  using CooldownRange = std::pair<std::chrono::milliseconds, std::chrono::milliseconds>;  // MIN, MAX

  explicit Blacklist(std::optional<CooldownRange> cooldown, Now now = Clock::now);

  // Records a failure on `host` and takes it out. Returns its cooldown, or
  // nullopt when it is out for good.
  std::optional<std::chrono::milliseconds> add(const std::string& host);

  // Whether `host` is out now. A host whose cooldown has passed is back
  // from here on (and this says so in the log once).
  bool contains(const std::string& host);

  // Whether `host` is out and will never come back (no cooldown range).
  bool out_for_good(const std::string& host) const;

 private:
  struct Entry {
    int failures = 0;
    bool active = false;
    std::optional<Clock::time_point> until;  // when active: nullopt means for good
  };

  std::optional<CooldownRange> cooldown_;
  Now now_;
  std::map<std::string, Entry> entries_;
};

}  // namespace edt::launcher
