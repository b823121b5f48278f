#include "control/console/websocket.h"

#include <gtest/gtest.h>

namespace edt::control::websocket {
namespace {

// A frame as a browser sends it: masked.
std::string client_frame(uint8_t first_byte, std::string_view payload) {
  const char mask[4] = {0x12, 0x34, 0x56, 0x78};
  std::string frame;
  frame.push_back(static_cast<char>(first_byte));
  if (payload.size() < 126) {
    frame.push_back(static_cast<char>(0x80 | payload.size()));
  } else {
    frame.push_back(static_cast<char>(0x80 | 126));
    frame.push_back(static_cast<char>(payload.size() >> 8));
    frame.push_back(static_cast<char>(payload.size() & 0xff));
  }
  frame.append(mask, 4);
  for (size_t i = 0; i < payload.size(); ++i) frame.push_back(static_cast<char>(payload[i] ^ mask[i % 4]));
  return frame;
}

TEST(WebSocket, AcceptKeyIsTheRfcExample) {
  EXPECT_EQ(accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

TEST(WebSocket, EncodesEachLengthForm) {
  EXPECT_EQ(encode_frame(Opcode::kBinary, "hi"), std::string("\x82\x02hi", 4));
  std::string medium(300, 'x');
  std::string frame = encode_frame(Opcode::kText, medium);
  ASSERT_EQ(frame.size(), 4 + medium.size());
  EXPECT_EQ(static_cast<uint8_t>(frame[1]), 126);
  EXPECT_EQ((static_cast<uint8_t>(frame[2]) << 8) | static_cast<uint8_t>(frame[3]), 300);
  std::string large(70000, 'y');
  frame = encode_frame(Opcode::kBinary, large);
  ASSERT_EQ(frame.size(), 10 + large.size());
  EXPECT_EQ(static_cast<uint8_t>(frame[1]), 127);
  EXPECT_EQ(close_payload(1000, "bye"), std::string("\x03\xe8" "bye", 5));
}

TEST(WebSocket, ReadsMessagesSplitAnywhere) {
  Reader reader(1 << 20);
  std::string bytes = client_frame(0x82, "ls -l\r") + client_frame(0x81, std::string(200, 'r'));
  std::vector<Message> got;
  for (char c : bytes) {  // one byte at a time, as a slow network would
    reader.feed(std::string_view(&c, 1));
    auto next = reader.next();
    ASSERT_TRUE(next.is_ok()) << next.status().message();
    if (*next) got.push_back(**next);
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].opcode, Opcode::kBinary);
  EXPECT_EQ(got[0].payload, "ls -l\r");
  EXPECT_EQ(got[1].opcode, Opcode::kText);
  EXPECT_EQ(got[1].payload, std::string(200, 'r'));
}

TEST(WebSocket, JoinsFragmentsAroundAPing) {
  Reader reader(1 << 20);
  reader.feed(client_frame(0x02, "he") + client_frame(0x89, "p") + client_frame(0x80, "llo"));
  auto ping = reader.next();
  ASSERT_TRUE(ping.is_ok() && *ping);
  EXPECT_EQ((*ping)->opcode, Opcode::kPing);
  auto message = reader.next();
  ASSERT_TRUE(message.is_ok() && *message);
  EXPECT_EQ((*message)->payload, "hello");
  EXPECT_EQ((*message)->opcode, Opcode::kBinary);
}

TEST(WebSocket, RefusesWhatAServerMust) {
  {
    Reader reader(1 << 20);
    reader.feed(std::string("\x82\x02hi", 4));  // not masked
    EXPECT_FALSE(reader.next().is_ok());
  }
  {
    Reader reader(16);
    reader.feed(client_frame(0x82, std::string(17, 'x')));
    auto r = reader.next();
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find("over 16 bytes"), std::string::npos);
  }
  {
    Reader reader(1 << 20);
    reader.feed(client_frame(0x80, "x"));  // a continuation of nothing
    EXPECT_FALSE(reader.next().is_ok());
  }
}

// Found by fuzz/websocket: a reserved control opcode (13) came out as a
// message. Reserved opcodes and RSV bits fail the connection (RFC 6455 5.2).
TEST(WebSocket, RefusesReservedOpcodesAndBits) {
  for (uint8_t first_byte : {0x83, 0x87, 0x8b, 0x8d, 0x8f, 0xc2, 0xa1, 0x91}) {
    Reader reader(1 << 20);
    reader.feed(client_frame(first_byte, "x"));
    auto r = reader.next();
    ASSERT_FALSE(r.is_ok()) << int(first_byte);
    EXPECT_NE(r.status().message().find("reserved"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace edt::control::websocket
