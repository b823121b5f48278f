// The wire format of the TCP store, shared by its server and client.
//
// Every message is a frame: a little-endian u32 length, then that many bytes.
// A request frame is an Op byte followed by fields; a response frame is a
// StatusCode byte, a present byte and one string (the value, or the error
// message when the code is not OK). Strings are a u32 length and the bytes;
// integers are little-endian i64. Waiting ops carry their timeout in
// milliseconds; the server answers kTimeout itself when it passes, so a client
// needs no clock of its own beyond a safety margin.
//
// decode_request() and decode_reply() read whole frame bodies from the other
// side, which may be anything (a stray client, a port scanner, a fuzzer):
// they never read past the body and refuse, with a kInvalidArgument Status,
// what a peer of this edt would not send. Pure functions; any thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "edt/status.h"

namespace edt::rendezvous {

enum class Op : uint8_t {
  kSet = 1,
  kGet,
  kTryGet,
  kAdd,
  kCompareSet,
  kWait,
  kErase,
};

// Refuse frames larger than this: a stray client (or a port scanner) must not
// make the server allocate gigabytes.
inline constexpr uint32_t kMaxFrameBytes = 64u << 20;

// When a waiting op that arrived at `now` with `timeout_ms` times out: at
// once for a negative timeout, at most a year later (a peer may send any
// i64, and now plus that would overflow the clock).
inline std::chrono::steady_clock::time_point wait_deadline(std::chrono::steady_clock::time_point now,
                                                           int64_t timeout_ms) {
  constexpr int64_t kMaxWaitMs = int64_t{365} * 24 * 3600 * 1000;
  return now + std::chrono::milliseconds(std::clamp<int64_t>(timeout_ms, 0, kMaxWaitMs));
}

class FrameWriter {
 public:
  FrameWriter() { buf_.resize(4); }
  FrameWriter& u8(uint8_t v) {
    buf_.push_back(static_cast<char>(v));
    return *this;
  }
  FrameWriter& i64(int64_t v) {
    char b[8];
    std::memcpy(b, &v, 8);
    buf_.append(b, 8);
    return *this;
  }
  FrameWriter& str(std::string_view s) {
    uint32_t n = static_cast<uint32_t>(s.size());
    char b[4];
    std::memcpy(b, &n, 4);
    buf_.append(b, 4);
    buf_.append(s);
    return *this;
  }
  // The finished frame, length prefix filled in.
  std::string take() {
    uint32_t n = static_cast<uint32_t>(buf_.size() - 4);
    std::memcpy(buf_.data(), &n, 4);
    return std::move(buf_);
  }

 private:
  std::string buf_;
};

// Reads the fields of one frame body; every read fails cleanly on a short frame.
class FrameReader {
 public:
  explicit FrameReader(std::string_view body) : rest_(body) {}
  bool u8(uint8_t* v) {
    if (rest_.empty()) return false;
    *v = static_cast<uint8_t>(rest_[0]);
    rest_.remove_prefix(1);
    return true;
  }
  bool i64(int64_t* v) {
    if (rest_.size() < 8) return false;
    std::memcpy(v, rest_.data(), 8);
    rest_.remove_prefix(8);
    return true;
  }
  bool str(std::string* s) {
    uint32_t n;
    if (rest_.size() < 4) return false;
    std::memcpy(&n, rest_.data(), 4);
    rest_.remove_prefix(4);
    if (rest_.size() < n) return false;
    s->assign(rest_.substr(0, n));
    rest_.remove_prefix(n);
    return true;
  }
  bool done() const { return rest_.empty(); }

 private:
  std::string_view rest_;
};

// A request as the server reads it.
struct Request {
  Op op = Op::kSet;
  // The key of every op but kWait, which names one or more.
  std::vector<std::string> keys;
  std::string value;    // kSet: the value; kCompareSet: the expected value
  std::string desired;  // kCompareSet: the new value
  int64_t number = 0;   // kAdd: the delta; kGet, kWait: the timeout in ms
};

// The request in a frame body (without its length prefix).
Result<Request> decode_request(std::string_view body);

// A response as the client reads it: code kOk and the value (present says
// whether the key existed, for kTryGet), or the error code and its message.
struct Reply {
  StatusCode code = StatusCode::kOk;
  bool present = false;
  std::string value;
};

// The response in a frame body (without its length prefix).
Result<Reply> decode_reply(std::string_view body);

}  // namespace edt::rendezvous
