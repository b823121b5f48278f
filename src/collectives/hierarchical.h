// The pipelined hierarchical allreduce: ranks on several hosts, shared
// memory inside each.
//
// Terms. A host's ranks are its *local group* (local rank 0 is its
// *leader*); the leaders of all hosts form the *leader group*. The buffer is
// cut into *pieces* of kPieceBytes. Each piece goes through three stages:
//   1. reduce inside the host over shared memory (every local rank ends with
//      the host's sum of the piece),
//   2. allreduce among the leaders over TCP (a ring: each host sends
//      2(H-1)/H of the piece, the least any algorithm can),
//   3. broadcast from the leader to the rest of its host.
// Done one after the other for the whole buffer, stages 1 and 3 add their
// time to the network's; here they overlap it. The leader runs stage 2 on a
// thread of its own (the *cross-host pipe*), piece by piece as stage 1
// finishes them, while its own thread runs stage 1 for the next pieces and
// then stage 3 for each piece the pipe has finished. So once the first piece
// is reduced, the link stays busy until the last piece is across, and only
// the first piece's stage 1 and the last one's stage 3 add to the time. The
// other local ranks run stage 1 for every piece, then receive every piece.
//
// The pipe's thread only uses TCP channels and the leader's own thread only
// the shared memory, so each rank's doorbell still has one waiter. A failure
// on either thread breaks the transport, which stops the other at once; the
// error returned is the first.
#pragma once

#include <cstddef>

#include "collectives/algorithms.h"
#include "collectives/shm_allreduce.h"

namespace edt::collectives {

// Piece size; buffers below two pieces gain nothing from the pipeline.
inline constexpr size_t kPieceBytes = 4 << 20;

struct Hierarchy {
  ShmAllreduce* shm;  // this host's ranks; null when it has only this one
  Group local;        // this host's ranks; position 0 is the leader
  Group leaders;      // one rank per host (used on the leader only)
};

// recv = op over every rank of send (send == recv for in place). `op` is a
// combining op (the caller finishes kAverage).
Status pipelined_hierarchical_allreduce(const Hierarchy& h, const void* send, void* recv, size_t count,
                                        DataType type, ReduceOp op);

}  // namespace edt::collectives
