// The TCP store's wire format (rendezvous/tcp_store_protocol.h): a frame
// body as the server reads a request and as a client reads a reply. A
// decoded request is then applied to a MemoryStore, as the server applies it.
#include <cstdint>

#include "edt/store.h"
#include "fuzz_check.h"
#include "rendezvous/tcp_store_protocol.h"

namespace {

using edt::rendezvous::Op;
using edt::rendezvous::Request;

// The store's answer must be a value or a Status with a message, whatever
// the keys and values hold.
void apply(edt::MemoryStore& store, const Request& q) {
  const std::string& key = q.keys.front();
  switch (q.op) {
    case Op::kSet: FUZZ_CHECK(store.set(key, q.value).is_ok(), "set refused"); break;
    case Op::kTryGet: (void)store.try_get(key); break;
    case Op::kAdd: {
      auto sum = store.add(key, q.number);
      FUZZ_CHECK(sum.is_ok() || !sum.status().message().empty(), "add's error says nothing");
      break;
    }
    case Op::kCompareSet: (void)store.compare_set(key, q.value, q.desired); break;
    case Op::kErase: (void)store.erase(key); break;
    case Op::kGet:
    case Op::kWait: {
      const auto now = std::chrono::steady_clock::now();
      FUZZ_CHECK(edt::rendezvous::wait_deadline(now, q.number) >= now, "a deadline before now");
      (void)store.try_get(key);
      break;
    }
  }
}

// What decode_request() read is what a FrameWriter writes for it.
std::string encode(const Request& q) {
  edt::rendezvous::FrameWriter w;
  w.u8(static_cast<uint8_t>(q.op));
  switch (q.op) {
    case Op::kSet: w.str(q.keys[0]).str(q.value); break;
    case Op::kTryGet:
    case Op::kErase: w.str(q.keys[0]); break;
    case Op::kAdd: w.str(q.keys[0]).i64(q.number); break;
    case Op::kCompareSet: w.str(q.keys[0]).str(q.value).str(q.desired); break;
    case Op::kGet:
    case Op::kWait:
      w.i64(q.number);
      for (const auto& key : q.keys) w.str(key);
      break;
  }
  return w.take().substr(4);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body = edt::fuzz::text_of(data, size);
  // A store that lives across inputs, so that adds meet values sets left.
  static edt::MemoryStore store;

  auto request = edt::rendezvous::decode_request(body);
  if (request.is_ok()) {
    FUZZ_CHECK(!request->keys.empty(), "a request without a key");
    FUZZ_CHECK(encode(*request) == body, "a request that does not encode back to its bytes");
    apply(store, *request);
  } else {
    FUZZ_CHECK(request.status().code() == edt::StatusCode::kInvalidArgument, request.status().to_string());
  }

  auto reply = edt::rendezvous::decode_reply(body);
  if (reply.is_ok()) {
    FUZZ_CHECK(edt::status_code_name(reply->code) != std::string("Unknown"), "a reply with an unknown code");
  }
  return 0;
}
