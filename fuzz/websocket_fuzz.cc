// WebSocket frames from a browser (control/console/websocket.h): the bytes
// of one connection, fed to a Reader in pieces as they might arrive.
#include <cstdint>

#include "control/console/websocket.h"
#include "fuzz_check.h"

namespace {

using edt::control::websocket::Message;
using edt::control::websocket::Opcode;

constexpr size_t kMaxMessage = 4096;

bool known(Opcode opcode) {
  switch (opcode) {
    case Opcode::kText:
    case Opcode::kBinary:
    case Opcode::kClose:
    case Opcode::kPing:
    case Opcode::kPong: return true;
    case Opcode::kContinuation: return false;
  }
  return false;
}

// Takes every message the reader has; false once it refused the stream.
bool drain(edt::control::websocket::Reader& reader) {
  for (;;) {
    auto next = reader.next();
    if (!next.is_ok()) {
      FUZZ_CHECK(!next.status().message().empty(), "a refusal that says nothing");
      return false;
    }
    if (!next->has_value()) return true;
    const Message& m = **next;
    FUZZ_CHECK(known(m.opcode), "a message with opcode " + std::to_string(static_cast<int>(m.opcode)));
    FUZZ_CHECK(m.payload.size() <= kMaxMessage, "a message over the limit");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte sets how the rest is cut into reads (1 to 256 bytes).
  const size_t piece = size_t{data[0]} + 1;
  const std::string_view stream = edt::fuzz::text_of(data + 1, size - 1);
  edt::control::websocket::Reader reader(kMaxMessage);
  for (size_t at = 0; at < stream.size(); at += piece) {
    reader.feed(stream.substr(at, piece));
    if (!drain(reader)) return 0;
  }
  // The encoder's frames, masked as a client sends them, read back.
  const std::string payload(stream.substr(0, 200));
  std::string frame = edt::control::websocket::encode_frame(Opcode::kBinary, payload);
  const size_t header = frame.size() - payload.size();
  frame[1] = static_cast<char>(frame[1] | 0x80);
  frame.insert(header, std::string(4, '\0'));  // a zero mask leaves the payload as it is
  edt::control::websocket::Reader echo(kMaxMessage);
  echo.feed(frame);
  auto back = echo.next();
  FUZZ_CHECK(back.is_ok() && back->has_value() && (*back)->payload == payload, "an encoded frame does not read back");
  return 0;
}
