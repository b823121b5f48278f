#include "rendezvous/tcp_store_protocol.h"

namespace edt::rendezvous {
namespace {

Status malformed_request(uint8_t op_byte) {
  return invalid_argument("malformed TCP store request (op " + std::to_string(op_byte) +
                          "); is the client an edt of the same version?");
}

// The fields after the op byte; false if they are not what `op` carries.
bool read_fields(FrameReader& r, Request* q) {
  std::string key;
  switch (q->op) {
    case Op::kSet:
      if (!r.str(&key) || !r.str(&q->value)) return false;
      break;
    case Op::kTryGet:
    case Op::kErase:
      if (!r.str(&key)) return false;
      break;
    case Op::kAdd:
      if (!r.str(&key) || !r.i64(&q->number)) return false;
      break;
    case Op::kCompareSet:
      if (!r.str(&key) || !r.str(&q->value) || !r.str(&q->desired)) return false;
      break;
    case Op::kGet:
    case Op::kWait:
      if (!r.i64(&q->number)) return false;
      while (!r.done()) {
        if (!r.str(&key)) return false;
        q->keys.push_back(std::move(key));
      }
      return !q->keys.empty() && (q->op == Op::kWait || q->keys.size() == 1);
    default:
      return false;
  }
  q->keys.push_back(std::move(key));
  return r.done();
}

}  // namespace

Result<Request> decode_request(std::string_view body) {
  FrameReader r(body);
  uint8_t op_byte = 0;
  if (!r.u8(&op_byte)) return malformed_request(op_byte);
  Request q;
  q.op = static_cast<Op>(op_byte);
  if (!read_fields(r, &q)) return malformed_request(op_byte);
  return q;
}

Result<Reply> decode_reply(std::string_view body) {
  FrameReader r(body);
  uint8_t code = 0, present = 0;
  Reply reply;
  if (!r.u8(&code) || !r.u8(&present) || !r.str(&reply.value) || !r.done() ||
      code > static_cast<uint8_t>(StatusCode::kInternal) || present > 1)
    return invalid_argument("malformed TCP store reply");
  reply.code = static_cast<StatusCode>(code);
  reply.present = present == 1;
  return reply;
}

}  // namespace edt::rendezvous
