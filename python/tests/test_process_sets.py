"""Process sets (hvd.add_process_set and process_set= on every collective)
and sparse gradients, on every rank of a job of 2 or 4 ranks (more work).

The sets: `halves` (the lower and the upper half of the ranks: {0,1} and
{2,3} at 4 ranks, {0} and {1} at 2) and `evens` ({0,2} at 4; at 2 ranks
it would be the lower half again, so there is none), which overlaps both
halves. Inputs are functions of the global rank, so
every rank computes the expected results itself."""

import pytest
import torch


def halves(size):
    return [list(range(size // 2)), list(range(size // 2, size))]


def evens(size):
    return list(range(0, size, 2))


@pytest.fixture
def fresh(hvd):
    """A runtime without process sets (they end at shutdown), so ids start
    at 1 as after hvd.init()."""
    hvd.shutdown()
    hvd.init()
    return hvd


@pytest.fixture
def sets(hvd):
    """The two halves and the evens, added (in this order) and removed."""
    low, high = (hvd.add_process_set(h) for h in halves(hvd.size()))
    even = hvd.add_process_set(evens(hvd.size())) if hvd.size() > 2 else None
    yield low, high, even
    for ps in (even, high, low):
        if ps is not None:
            assert hvd.remove_process_set(ps) is True


def mine(hvd, low, high):
    return low if low.included() else high


def test_sets_have_horovods_ids_ranks_and_sizes(fresh, sets):
    hvd = fresh
    low, high, even = sets
    assert [low.process_set_id, high.process_set_id] == [1, 2]
    assert hvd.global_process_set.process_set_id == 0
    assert hvd.global_process_set.ranks == list(range(hvd.size()))
    half = mine(hvd, low, high)
    assert half.size() == hvd.size() // 2
    assert half.rank() == half.ranks.index(hvd.rank())
    assert str(low) == "ProcessSet(process_set_id=1, ranks=%s, mpi_comm=None)" % low.ranks
    if even is None:
        return
    assert even.process_set_id == 3
    assert even.included() == (hvd.rank() % 2 == 0)
    if not even.included():
        with pytest.raises(ValueError, match="not part of provided process set"):
            even.rank()


def test_collectives_run_over_the_members_only(hvd, sets):
    low, high, even = sets
    half = mine(hvd, low, high)
    r = hvd.rank()
    x = torch.tensor([float(r + 1)] * 3)
    assert hvd.allreduce(x, op=hvd.Sum, process_set=half).tolist() == [float(sum(q + 1 for q in half.ranks))] * 3
    gathered = hvd.allgather(torch.tensor([[r, r]]), process_set=half)
    assert gathered.tolist() == [[q, q] for q in half.ranks]
    root = half.ranks[-1]  # roots are global ranks
    assert hvd.broadcast(torch.tensor([r]), root, process_set=half).tolist() == [root]
    grouped = hvd.grouped_allreduce([x, 2 * x], op=hvd.Sum, process_set=half)
    assert grouped[1].tolist() == [2.0 * sum(q + 1 for q in half.ranks)] * 3
    n = half.size()
    sent = torch.arange(n, dtype=torch.int64) + 100 * r  # row d goes to the set's rank d
    received = hvd.alltoall(sent, process_set=half)
    assert received.tolist() == [100 * q + half.rank() for q in half.ranks]
    scattered = hvd.reducescatter(torch.ones(2 * n, dtype=torch.float64), op=hvd.Sum, process_set=half)
    assert scattered.tolist() == [float(n)] * 2
    if even is not None and even.included():
        assert hvd.allreduce(x, op=hvd.Sum, process_set=even).tolist() == [float(sum(q + 1 for q in even.ranks))] * 3
    hvd.barrier(process_set=half)
    assert hvd.allreduce(x, op=hvd.Sum).tolist() == [float(sum(range(1, hvd.size() + 1)))] * 3


def test_a_set_does_not_wait_for_the_others(hvd, sets):
    # The upper half waits in a global barrier until the lower half arrives:
    # the lower half's set allreduces must complete without the upper half.
    low, high, _ = sets
    if low.included():
        for i in range(5):
            t = hvd.allreduce(torch.ones(4), op=hvd.Sum, name="alone.%d" % i, process_set=low)
            assert t.tolist() == [float(low.size())] * 4
    hvd.barrier()


def test_a_non_member_call_raises(hvd, sets):
    low, high, even = sets
    other = high if low.included() else low
    with pytest.raises(ValueError, match="Allreduce: Rank %d is not a member of the provided process set"
                       % hvd.rank()):
        hvd.allreduce(torch.ones(1), process_set=other)
    with pytest.raises(ValueError, match="not a member"):
        hvd.broadcast_object(1, root_rank=other.ranks[0], process_set=other)
    with pytest.raises(ValueError, match="root rank"):
        hvd.broadcast(torch.ones(1), other.ranks[0], process_set=mine(hvd, low, high))


def test_duplicates_and_the_global_set_are_refused(hvd, sets):
    low, _, _ = sets
    with pytest.raises(ValueError, match="duplicate process set"):
        hvd.add_process_set(list(low.ranks))
    with pytest.raises(ValueError, match="duplicate process set"):
        hvd.add_process_set(range(hvd.size()))
    with pytest.raises(ValueError, match="not ranks of this job"):
        hvd.add_process_set([0, hvd.size()])
    assert hvd.remove_process_set(hvd.global_process_set) is False
    with pytest.raises(ValueError, match="list of ranks"):
        hvd.ProcessSet(object())


def test_different_calls_on_different_ranks_raise_everywhere(fresh):
    hvd = fresh
    with pytest.raises(ValueError, match="every process must add and remove the same process sets"):
        hvd.add_process_set([0] if hvd.rank() == 0 else [hvd.size() - 1])
    # Nothing was registered: the next set gets id 1 on every rank.
    ps = hvd.add_process_set([0])
    assert ps.process_set_id == 1
    assert hvd.remove_process_set(ps) is True


def test_removed_ids_are_reused_and_removed_sets_refuse_work(fresh):
    hvd = fresh
    a = hvd.add_process_set([0])
    b = hvd.add_process_set([hvd.size() - 1])
    assert (a.process_set_id, b.process_set_id) == (1, 2)
    assert hvd.remove_process_set(a) is True
    assert a.process_set_id is None and a.size() is None
    assert hvd.remove_process_set(a) is False
    with pytest.raises(ValueError, match="not been registered"):
        hvd.allreduce(torch.ones(1), process_set=a)
    c = hvd.add_process_set(hvd.ProcessSet([0]))  # the same ranks again, in a fresh communicator
    assert c.process_set_id == 1  # the first id freed is the first reused, as in Horovod
    d = hvd.add_process_set([0, hvd.size() - 1]) if hvd.size() > 2 else None
    assert d is None or d.process_set_id == 3
    if c.included():
        assert hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=c).item() == 1.0
    for ps in (b, c, d):
        if ps is not None:
            hvd.remove_process_set(ps)


def test_init_forms_the_sets_it_is_given(hvd):
    low, high = (hvd.ProcessSet(h) for h in halves(hvd.size()))
    hvd.shutdown()
    hvd.init(process_sets=[low, high])
    assert (low.process_set_id, high.process_set_id) == (1, 2)
    half = mine(hvd, low, high)
    assert hvd.allgather(torch.tensor([hvd.rank()]), process_set=half).tolist() == half.ranks
    hvd.shutdown()
    with pytest.raises(ValueError, match="entry number 1 is a duplicate"):
        hvd.init(process_sets=[hvd.ProcessSet([0]), hvd.ProcessSet([0])])
    assert not hvd.is_initialized()  # refused before init
    hvd.init(process_sets="dynamic")
    assert hvd.add_process_set([0]).process_set_id == 1
    hvd.shutdown()
    hvd.init()


def test_sets_end_at_shutdown(hvd):
    ps = hvd.add_process_set([0])
    assert ps.process_set_id is not None
    hvd.shutdown()
    hvd.init()
    assert ps.process_set_id is None
    with pytest.raises(ValueError, match="not been registered"):
        hvd.allreduce(torch.ones(1), process_set=ps)
    again = hvd.add_process_set([0])
    assert again.process_set_id == 1
    hvd.remove_process_set(again)


def test_objects_parameters_and_optimizer_over_a_set(hvd, sets):
    low, high, even = sets
    half = mine(hvd, low, high)
    assert hvd.allgather_object({"rank": hvd.rank()}, process_set=half) == [{"rank": q} for q in half.ranks]
    assert hvd.broadcast_object("from %d" % half.ranks[0], root_rank=half.ranks[0], process_set=half) == \
        "from %d" % half.ranks[0]
    torch.manual_seed(hvd.rank())
    model = torch.nn.Linear(3, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=half.ranks[0], process_set=half)
    start = hvd.allgather(model.weight.detach(), process_set=half)
    assert all(torch.equal(start[0], w) for w in start)
    even = even or low  # at 2 ranks: the lower half, {0}
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), process_set=even)
    # Input v in both rows: the weight's gradient is 2v in every column.
    value = lambda r: float((r + 1) ** 2)  # noqa: E731
    model(torch.full((2, 3), value(hvd.rank()))).sum().backward()
    opt.step()
    # The evens step with their averaged gradient, the others alone.
    ranks = even.ranks if even.included() else [hvd.rank()]
    grad = sum(2 * value(q) for q in ranks) / len(ranks)
    assert torch.allclose(model.weight.detach(), start[0] - 0.1 * grad)


def random_sparse(rows, seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(rows, 4, generator=g)
    t[t < 0.7] = 0
    return t.to_sparse()


@pytest.mark.parametrize("op", ["Average", "Sum"])
def test_sparse_allreduce_is_the_dense_allreduce(hvd, op):
    op = getattr(hvd, op)
    tensors = [random_sparse(rows, 10 * hvd.rank() + i) for i, rows in enumerate([5, 17, 1])]
    dense = [hvd.allreduce(t.to_dense(), op=op) for t in tensors]
    handles = [hvd.sparse_allreduce_async(t, name="sparse.%d" % i, op=op) for i, t in enumerate(tensors)]
    for expected, handle in zip(dense, handles):
        result = handle()
        assert result.is_sparse
        assert torch.allclose(result.to_dense(), expected, atol=1e-6)


@pytest.mark.parametrize("sparse_as_dense", [False, True])
def test_sparse_adam_over_a_sparse_embedding(hvd, sparse_as_dense):
    torch.manual_seed(0)
    embedding = torch.nn.Embedding(10, 3, sparse=True)
    opt = hvd.DistributedOptimizer(torch.optim.SparseAdam(list(embedding.parameters()), lr=0.1),
                                   named_parameters=embedding.named_parameters(), sparse_as_dense=sparse_as_dense)
    words = torch.tensor([[hvd.rank() % 10, 9]])  # rank r looks up word r and word 9
    opt.zero_grad()
    embedding(words).sum().backward()
    opt.synchronize()
    grad = embedding.weight.grad
    assert grad.is_sparse
    expected = torch.zeros(10, 3)
    for r in range(hvd.size()):
        expected[r % 10] += 1.0 / hvd.size()
    expected[9] += 1.0
    assert torch.allclose(grad.to_dense(), expected)
    with opt.skip_synchronize():
        opt.step()
    weights = hvd.allgather(embedding.weight.detach().unsqueeze(0))
    assert all(torch.equal(weights[0], w) for w in weights)
