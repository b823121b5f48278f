"""hvd.join() against every collective, as Horovod's test_horovod_join_*
tests use it: in each round one rank joins first while the others call the
collective, unnamed (so ranks that skipped it number their unnamed
requests differently). Allreduce runs with the joined rank adding nothing
(named, as Horovod's test names it: unnamed allreduces of ranks that
skipped some are different requests); every other collective fails on the
ranks that called it. No combination may hang. Runs at -np 2, 3 and 4
(CMakeLists.txt)."""

import pytest
import torch


def _allreduce(hvd, t):
    return hvd.allreduce(t, op=hvd.Sum, name="join.allreduce")


def _grouped_allreduce(hvd, t):
    return hvd.grouped_allreduce([t, t + 1], op=hvd.Sum, name="join.grouped")


COLLECTIVES = {
    "allreduce": (_allreduce, True),
    "grouped_allreduce": (_grouped_allreduce, True),
    "barrier": (lambda hvd, t: hvd.barrier(), False),
    "allgather": (lambda hvd, t: hvd.allgather(t), False),
    "broadcast": (lambda hvd, t: hvd.broadcast(t, root_rank=0), False),
    "alltoall": (lambda hvd, t: hvd.alltoall(t), False),
    "reducescatter": (lambda hvd, t: hvd.reducescatter(t, op=hvd.Sum), False),
}


@pytest.mark.parametrize("collective", sorted(COLLECTIVES))
def test_join_with_every_collective(hvd, collective):
    run, runs_with_join = COLLECTIVES[collective]
    rank, size = hvd.rank(), hvd.size()
    if size == 1:
        pytest.skip("join needs several ranks")
    tensor = torch.ones(size * 2, 3)
    for first in range(size):
        if rank != first:
            if runs_with_join:
                result = run(hvd, tensor)
                if collective == "allreduce":
                    # The joined rank adds nothing.
                    assert torch.equal(result, torch.full_like(tensor, size - 1)), result
            else:
                with pytest.raises(RuntimeError, match="joined"):
                    run(hvd, tensor)
        last = hvd.join()
        assert last != first or size == 1
        assert hvd.allgather_object(last) == [last] * size
    hvd.barrier()
