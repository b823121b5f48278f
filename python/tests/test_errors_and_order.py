"""Submission in different orders on different ranks, and requests the
ranks disagree about: an error on every rank naming both sides, no hang."""

import random

import pytest
import torch


def test_ranks_submit_in_different_orders(hvd):
    names = ["order.%d" % i for i in range(40)]
    order = list(range(len(names)))
    random.Random(hvd.rank()).shuffle(order)  # a different order on every rank
    tensors = {i: torch.full((i + 1,), float(hvd.rank() + i)) for i in order}
    handles = {i: hvd.allreduce_async_(tensors[i], name=names[i], op=hvd.Sum) for i in order}
    for i in order:
        hvd.synchronize(handles[i])
        want = sum(r + i for r in range(hvd.size()))
        assert tensors[i].tolist() == [float(want)] * (i + 1)


def test_mismatched_shapes_raise_on_every_rank(hvd):
    shape = (2, 3) if hvd.rank() == 0 else (3,)
    with pytest.raises(hvd.HorovodInternalError) as info:
        hvd.allreduce(torch.zeros(shape), name="mismatch.shape")
    message = str(info.value)
    assert ("Mismatched allreduce tensor shapes: One rank sent a tensor of shape [2, 3], but another rank sent "
            "a tensor of shape [3].") in message
    assert "mismatch.shape" in message and "rank 0 and rank 1" in message
    # The job goes on.
    assert hvd.allreduce(torch.ones(1), name="after.mismatch", op=hvd.Sum).item() == hvd.size()


def test_mismatched_dtypes_and_ops(hvd):
    dtype = torch.float32 if hvd.rank() == 0 else torch.float64
    with pytest.raises(hvd.HorovodInternalError, match="Mismatched data types: One rank had type float32, but "
                                                       "another rank had type float64."):
        hvd.allreduce(torch.zeros(3, dtype=dtype), name="mismatch.dtype")
    op = hvd.Sum if hvd.rank() == 0 else hvd.Max
    with pytest.raises(hvd.HorovodInternalError, match="Mismatched reduction operations"):
        hvd.allreduce(torch.zeros(3), name="mismatch.op", op=op)
    with pytest.raises(hvd.HorovodInternalError, match="Mismatched broadcast root ranks"):
        hvd.broadcast(torch.zeros(3), root_rank=min(hvd.rank(), 1), name="mismatch.root")
    with pytest.raises(hvd.HorovodInternalError, match="Mismatched operations: One rank did an allreduce, but "
                                                       "another rank did an allgather."):
        if hvd.rank() == 0:
            hvd.allreduce(torch.zeros(3), name="mismatch.kind")
        else:
            hvd.allgather(torch.zeros(3), name="mismatch.kind")
    with pytest.raises(hvd.HorovodInternalError, match="dimension 1 equal to"):
        hvd.allgather(torch.zeros(2, 2 + hvd.rank()), name="mismatch.allgather")


def test_bad_arguments_fail_before_communicating(hvd):
    with pytest.raises(ValueError, match="root rank 99 is out of range"):
        hvd.broadcast(torch.zeros(1), root_rank=99, name="bad.root")
    with pytest.raises(ValueError, match="splits"):
        hvd.alltoall(torch.zeros(4), splits=[1] * (hvd.size() + 1), name="bad.splits")
    with pytest.raises(ValueError, match="dtype"):
        hvd.allreduce(torch.zeros(2, dtype=torch.complex64), name="bad.dtype")
    # Rank 0's "dup" stays in flight until the others submit it after the barrier.
    if hvd.rank() == 0:
        h = hvd.allreduce_async(torch.zeros(1), name="dup")
        with pytest.raises(ValueError, match="same name as another tensor"):
            hvd.allreduce_async(torch.zeros(1), name="dup")
        hvd.barrier()
    else:
        hvd.barrier()
        h = hvd.allreduce_async(torch.zeros(1), name="dup")
    hvd.synchronize(h)


def test_fusion_of_many_small_tensors(hvd):
    from edt import _runtime
    before = _runtime.get().fused_batches
    xs = [torch.full((16,), float(hvd.rank())) for _ in range(64)]
    handles = [hvd.allreduce_async_(x, name="fuse.%d" % i, op=hvd.Sum) for i, x in enumerate(xs)]
    for h in handles:
        hvd.synchronize(h)
    want = float(sum(range(hvd.size())))
    assert all(x.tolist() == [want] * 16 for x in xs)
    assert _runtime.get().fused_batches > before


def test_a_rank_that_leaves_early_ends_the_collectives_of_every_rank(hvd):
    """As in Horovod: a rank that skips a collective (after an exception, say)
    and shuts down does not hang the ranks that wait for it, even when a
    process set they share must stop first: the others' collective fails
    naming the rank, so do their later requests, and every rank's next
    init() forms a new job in which unnamed collectives match again."""
    size, leaver = hvd.size(), 1
    if size > 2:
        hvd.add_process_set([0, leaver])  # its engine stops before the job's, on both ranks
    hvd.barrier()
    if hvd.rank() == leaver:
        hvd.shutdown()
    else:
        with pytest.raises(hvd.HorovodInternalError, match="rank %d has shut down" % leaver):
            hvd.barrier()  # the leaver never makes it
        with pytest.raises(hvd.HorovodInternalError, match="rank %d has shut down.*call init" % leaver):
            hvd.allreduce(torch.ones(1), name="after the leaver left")
    hvd.init()
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist() == [size, size]
    hvd.barrier()
