// The Channel between two local ranks over a shared-memory Segment: a pair of
// single-producer single-consumer rings (segment.h), each side ringing the
// other's doorbell when it writes data or frees room.
//
// Failure: check_peer() reports kPeerFailed when the Segment is marked broken
// by another rank, or when the peer's process has exited or is a zombie (a
// zombie has exited: it will never write again); poison() marks the Segment
// broken, which every local rank sees.
#pragma once

#include <memory>
#include <string>

#include "common/process.h"
#include "transport/shm/segment.h"
#include "transport/transport.h"

namespace edt::transport::shm {

// The Channel from local rank `me` to `other` (sends go into ring(me, other),
// receives come from ring(other, me)). `peer` names the other side in errors;
// `peer_process` identifies its process for liveness checks; `my_rank` is
// this rank's global rank (what mark_broken records).
std::unique_ptr<Channel> make_channel(std::shared_ptr<Segment> segment, int me, int other, std::string peer,
                                      proc::ProcessId peer_process, int my_rank);

}  // namespace edt::transport::shm
