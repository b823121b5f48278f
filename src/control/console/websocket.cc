#include "control/console/websocket.h"

#include <openssl/evp.h>
#include <openssl/sha.h>

namespace edt::control::websocket {
namespace {

// RFC 6455 5.2: the opcodes other than these are reserved, and the three
// RSV bits are for extensions, none of which the server negotiates.
bool is_defined(Opcode opcode) {
  switch (opcode) {
    case Opcode::kContinuation:
    case Opcode::kText:
    case Opcode::kBinary:
    case Opcode::kClose:
    case Opcode::kPing:
    case Opcode::kPong: return true;
  }
  return false;
}
constexpr uint8_t kReservedBits = 0x70;

}  // namespace

std::string accept_key(std::string_view client_key) {
  static constexpr std::string_view kGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
  std::string text = std::string(client_key) + std::string(kGuid);
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  unsigned char encoded[4 * ((SHA_DIGEST_LENGTH + 2) / 3) + 1];
  int n = EVP_EncodeBlock(encoded, digest, SHA_DIGEST_LENGTH);
  return std::string(reinterpret_cast<char*>(encoded), static_cast<size_t>(n));
}

std::string encode_frame(Opcode opcode, std::string_view payload) {
  std::string frame;
  frame.push_back(static_cast<char>(0x80 | static_cast<uint8_t>(opcode)));
  const uint64_t n = payload.size();
  if (n < 126) {
    frame.push_back(static_cast<char>(n));
  } else if (n <= 0xffff) {
    frame.push_back(static_cast<char>(126));
    frame.push_back(static_cast<char>(n >> 8));
    frame.push_back(static_cast<char>(n & 0xff));
  } else {
    frame.push_back(static_cast<char>(127));
    for (int shift = 56; shift >= 0; shift -= 8) frame.push_back(static_cast<char>((n >> shift) & 0xff));
  }
  frame.append(payload);
  return frame;
}

std::string close_payload(uint16_t code, std::string_view reason) {
  std::string payload;
  payload.push_back(static_cast<char>(code >> 8));
  payload.push_back(static_cast<char>(code & 0xff));
  payload.append(reason.substr(0, 123));  // a control frame carries at most 125 bytes
  return payload;
}

Result<std::optional<Message>> Reader::next() {
  for (;;) {
    const auto* b = reinterpret_cast<const uint8_t*>(buffer_.data());
    if (buffer_.size() < 2) return std::optional<Message>();
    const bool fin = b[0] & 0x80;
    const auto opcode = static_cast<Opcode>(b[0] & 0x0f);
    const bool masked = b[1] & 0x80;
    uint64_t length = b[1] & 0x7f;
    size_t header = 2;
    if (length == 126) {
      if (buffer_.size() < 4) return std::optional<Message>();
      length = (uint64_t{b[2]} << 8) | b[3];
      header = 4;
    } else if (length == 127) {
      if (buffer_.size() < 10) return std::optional<Message>();
      length = 0;
      for (int i = 0; i < 8; ++i) length = (length << 8) | b[2 + i];
      header = 10;
    }
    if (!masked) return invalid_argument("websocket: a client frame is not masked (RFC 6455 5.1)");
    if (!is_defined(opcode) || (b[0] & kReservedBits))
      return invalid_argument("websocket: a frame with reserved opcode " + std::to_string(b[0] & 0x0f) +
                              " or reserved bits set (RFC 6455 5.2)");
    const bool control = static_cast<uint8_t>(opcode) >= 8;
    if (control && (length > 125 || !fin)) return invalid_argument("websocket: a control frame is fragmented or over 125 bytes");
    const size_t joined = partial_ ? partial_->payload.size() : 0;
    if (length > max_message_bytes_ || joined + length > max_message_bytes_)
      return invalid_argument("websocket: a message is over " + std::to_string(max_message_bytes_) + " bytes");
    if (buffer_.size() < header + 4 + length) return std::optional<Message>();

    std::string payload = buffer_.substr(header + 4, length);
    const char* mask = buffer_.data() + header;
    for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(payload[i] ^ mask[i % 4]);
    buffer_.erase(0, header + 4 + length);

    if (control) return std::optional<Message>(Message{opcode, std::move(payload)});
    if (opcode == Opcode::kContinuation) {
      if (!partial_) return invalid_argument("websocket: a continuation frame with no message to continue");
      partial_->payload += payload;
    } else {
      if (partial_) return invalid_argument("websocket: a new message began before the last one ended");
      partial_ = Message{opcode, std::move(payload)};
    }
    if (fin) {
      Message done = std::move(*partial_);
      partial_.reset();
      return std::optional<Message>(std::move(done));
    }
  }
}

}  // namespace edt::control::websocket
