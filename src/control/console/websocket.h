// The server side of RFC 6455 WebSocket framing, as much as the console's
// terminal needs: the handshake's accept key, a reader that takes bytes as
// they arrive and yields whole messages, and frame encoding.
//
// Terms: a frame is one header plus payload on the wire; a message is one
// or more frames (a first frame, then continuations, the last with FIN).
// Clients must mask their frames; servers must not.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "edt/status.h"

namespace edt::control::websocket {

enum class Opcode : uint8_t { kContinuation = 0, kText = 1, kBinary = 2, kClose = 8, kPing = 9, kPong = 10 };

struct Message {
  Opcode opcode = Opcode::kBinary;
  std::string payload;
};

// The Sec-WebSocket-Accept value for a client's Sec-WebSocket-Key.
std::string accept_key(std::string_view client_key);

// One encoded frame with FIN set and no mask.
std::string encode_frame(Opcode opcode, std::string_view payload);

// A close frame's payload: the status code, then the reason.
std::string close_payload(uint16_t code, std::string_view reason);

class Reader {
 public:
  explicit Reader(size_t max_message_bytes) : max_message_bytes_(max_message_bytes) {}

  void feed(std::string_view bytes) { buffer_.append(bytes); }

  // The next whole message, nullopt if more bytes are needed, or an error
  // for a frame a server must refuse (unmasked, oversized, bad sequence).
  // Control frames (close, ping, pong) come out between a fragmented
  // message's frames, as the protocol lets them.
  Result<std::optional<Message>> next();

 private:
  size_t max_message_bytes_;
  std::string buffer_;
  std::optional<Message> partial_;  // a fragmented message being joined
};

}  // namespace edt::control::websocket
