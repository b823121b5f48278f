"""Every collective of edt.torch against a reference computed here from
each rank's inputs, which are a function of the rank."""

import pytest
import torch

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.uint8,
          torch.int8, torch.int16]


def rank_tensor(rank, shape, dtype, offset=0):
    """Rank r's input: small integers so every dtype holds the exact result."""
    n = torch.Size(shape).numel()
    return ((torch.arange(n) % 5) + rank + offset).reshape(shape).to(dtype)


def reference(hvd, shape, dtype, op):
    """The reduction in float64, or for integers in int64 wrapped to `dtype`
    as the runtime's integer arithmetic wraps."""
    if not dtype.is_floating_point and op != hvd.Average:
        wide = reference_in(hvd, shape, torch.int64, op)
        return wide.to(dtype).double()
    return reference_in(hvd, shape, torch.float64, op)


def reference_in(hvd, shape, dtype, op):
    inputs = [rank_tensor(r, shape, dtype) for r in range(hvd.size())]
    stacked = torch.stack(inputs)
    if op == hvd.Sum:
        return stacked.sum(0)
    if op == hvd.Average:
        return stacked.sum(0) / hvd.size()
    if op == hvd.Min:
        return stacked.min(0).values
    if op == hvd.Max:
        return stacked.max(0).values
    return stacked.prod(0)


def test_rank_and_size(hvd):
    import os
    assert hvd.is_initialized()
    assert hvd.size() == int(os.environ["EDT_SIZE"])
    assert hvd.rank() == int(os.environ["EDT_RANK"])
    assert hvd.local_rank() == int(os.environ["EDT_LOCAL_RANK"])
    assert hvd.local_size() == int(os.environ["EDT_LOCAL_SIZE"])
    assert hvd.cross_rank() == int(os.environ.get("EDT_CROSS_RANK", 0))
    assert hvd.cross_size() == int(os.environ.get("EDT_CROSS_SIZE", 1))


# Average of integers truncates: test_allreduce_integer_average covers it.
@pytest.mark.parametrize("dtype,op", [(d, o) for d in DTYPES for o in ["Sum", "Average", "Min", "Max", "Product"]
                                      if d.is_floating_point or o != "Average"])
def test_allreduce(hvd, dtype, op):
    op = getattr(hvd, op)
    x = rank_tensor(hvd.rank(), (3, 7), dtype)
    out = hvd.allreduce(x, name="ar.%s.%s" % (dtype, op), op=op)
    assert out.dtype == dtype and out.shape == x.shape
    torch.testing.assert_close(out.double(), reference(hvd, (3, 7), dtype, op), rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(x, rank_tensor(hvd.rank(), (3, 7), dtype))  # out of place


def test_allreduce_integer_average(hvd):
    x = torch.full((4,), 10 * (hvd.rank() + 1), dtype=torch.int64)
    out = hvd.allreduce(x, name="ar.int.avg")
    assert out.tolist() == [10 * sum(range(1, hvd.size() + 1)) // hvd.size()] * 4


def test_allreduce_in_place_contiguous_cpu_keeps_storage(hvd):
    x = rank_tensor(hvd.rank(), (1000,), torch.float32)
    ptr = x.data_ptr()
    out = hvd.allreduce_(x, name="ar.inplace", op=hvd.Sum)
    assert out is x and x.data_ptr() == ptr
    torch.testing.assert_close(x.double(), reference(hvd, (1000,), torch.float32, hvd.Sum))


def test_allreduce_non_contiguous(hvd):
    base = rank_tensor(hvd.rank(), (6, 4), torch.float32)
    view = base.t()  # non-contiguous
    hvd.allreduce_(view, name="ar.noncontig", op=hvd.Sum)
    torch.testing.assert_close(base.double(), reference(hvd, (6, 4), torch.float32, hvd.Sum))


def test_allreduce_async_and_poll(hvd):
    xs = [rank_tensor(hvd.rank(), (5,), torch.float32, i) for i in range(10)]
    handles = [hvd.allreduce_async(x, name="async.%d" % i, op=hvd.Sum) for i, x in enumerate(xs)]
    outs = [hvd.synchronize(h) for h in handles]
    for i, out in enumerate(outs):
        want = sum(rank_tensor(r, (5,), torch.float64, i) for r in range(hvd.size()))
        torch.testing.assert_close(out.double(), want)
    h = hvd.allreduce_async_(torch.ones(3), name="async.poll")
    while not hvd.poll(h):
        pass
    assert hvd.synchronize(h).tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError):
        hvd.synchronize(h)


def test_allreduce_scale_factors_and_average_flag(hvd):
    x = torch.ones(4)
    out = hvd.allreduce(x, name="ar.scale", op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5)
    assert out.tolist() == [float(hvd.size())] * 4
    out = hvd.allreduce(x * (hvd.rank() + 1), average=False, name="ar.average_false")
    assert out.tolist() == [float(sum(range(1, hvd.size() + 1)))] * 4
    with pytest.raises(ValueError):
        hvd.allreduce(x, average=True, op=hvd.Sum)
    with pytest.raises(NotImplementedError):
        hvd.allreduce(x, op=hvd.Adasum)


def test_allreduce_autograd(hvd):
    x = torch.ones(3, requires_grad=True)
    y = hvd.allreduce(x * (hvd.rank() + 1), name="ar.grad", op=hvd.Sum)
    y.sum().backward()
    # As Horovod defines it: the gradient of an allreduce is the allreduce
    # (Sum) of the incoming gradients, here ones on every rank.
    assert x.grad.tolist() == [float(hvd.size() * (hvd.rank() + 1))] * 3


def test_compression_fp16(hvd):
    x = rank_tensor(hvd.rank(), (8,), torch.float32)
    out = hvd.allreduce(x, name="ar.fp16", compression=hvd.Compression.fp16, op=hvd.Sum)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.double(), reference(hvd, (8,), torch.float32, hvd.Sum))


def test_grouped_allreduce(hvd):
    xs = [rank_tensor(hvd.rank(), (i + 1, 3), torch.float32) for i in range(5)]
    outs = hvd.grouped_allreduce(xs, name="grouped", op=hvd.Sum)
    for i, out in enumerate(outs):
        torch.testing.assert_close(out.double(), reference(hvd, (i + 1, 3), torch.float32, hvd.Sum))
    ys = [x.clone() for x in xs]
    hvd.grouped_allreduce_(ys, name="grouped_", op=hvd.Max)
    for i, y in enumerate(ys):
        torch.testing.assert_close(y.double(), reference(hvd, (i + 1, 3), torch.float32, hvd.Max))
    h = hvd.grouped_allreduce_async(xs, name="grouped.async", op=hvd.Min)
    for i, out in enumerate(hvd.synchronize(h)):
        torch.testing.assert_close(out.double(), reference(hvd, (i + 1, 3), torch.float32, hvd.Min))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint8, torch.bool, torch.float16])
def test_allgather_with_different_first_dimensions(hvd, dtype):
    rows = hvd.rank() + 1
    x = rank_tensor(hvd.rank(), (rows, 2, 3), dtype)
    out = hvd.allgather(x, name="ag.%s" % dtype)
    want = torch.cat([rank_tensor(r, (r + 1, 2, 3), dtype) for r in range(hvd.size())])
    assert out.dtype == dtype
    torch.testing.assert_close(out, want)


def test_allgather_empty_and_async(hvd):
    x = torch.zeros((0 if hvd.rank() == 0 else 2, 3))
    out = hvd.synchronize(hvd.allgather_async(x, name="ag.empty"))
    assert out.shape == (2 * (hvd.size() - 1), 3)


@pytest.mark.parametrize("root", [0, -1])
def test_broadcast(hvd, root):
    root = root % hvd.size()
    x = rank_tensor(hvd.rank(), (4, 5), torch.float64)
    out = hvd.broadcast(x, root_rank=root, name="bc.%d" % root)
    torch.testing.assert_close(out, rank_tensor(root, (4, 5), torch.float64))
    torch.testing.assert_close(x, rank_tensor(hvd.rank(), (4, 5), torch.float64))
    hvd.broadcast_(x, root, name="bc_.%d" % root)
    torch.testing.assert_close(x, rank_tensor(root, (4, 5), torch.float64))
    y = rank_tensor(hvd.rank(), (3,), torch.int16)
    hvd.synchronize(hvd.broadcast_async_(y, root, name="bc.async.%d" % root))
    assert y.tolist() == rank_tensor(root, (3,), torch.int16).tolist()


def test_alltoall_even_and_uneven(hvd):
    n = hvd.size()
    x = torch.arange(2 * n, dtype=torch.float32) + 100 * hvd.rank()
    out = hvd.alltoall(x, name="a2a.even")
    want = torch.cat([torch.arange(2 * hvd.rank(), 2 * hvd.rank() + 2, dtype=torch.float32) + 100 * r
                      for r in range(n)])
    torch.testing.assert_close(out, want)
    # rank r sends d + 1 rows to rank d
    splits = [d + 1 for d in range(n)]
    rows = torch.cat([torch.full((d + 1, 2), 10.0 * hvd.rank() + d) for d in range(n)])
    out, received = hvd.alltoall(rows, splits=splits, name="a2a.uneven")
    assert received.tolist() == [hvd.rank() + 1] * n
    want = torch.cat([torch.full((hvd.rank() + 1, 2), 10.0 * r + hvd.rank()) for r in range(n)])
    torch.testing.assert_close(out, want)
    with pytest.raises(ValueError):
        hvd.alltoall(torch.zeros(2 * n + 1))


def test_reducescatter(hvd):
    n = hvd.size()
    rows = 2 * n + 1  # does not divide: the first rank takes one more
    x = rank_tensor(hvd.rank(), (rows, 3), torch.float32)
    out = hvd.reducescatter(x, name="rs", op=hvd.Sum)
    full = reference(hvd, (rows, 3), torch.float32, hvd.Sum)
    counts = [rows // n + (1 if r < rows % n else 0) for r in range(n)]
    begin = sum(counts[:hvd.rank()])
    torch.testing.assert_close(out.double(), full[begin:begin + counts[hvd.rank()]])
    avg = hvd.reducescatter(x, name="rs.avg")
    torch.testing.assert_close(avg.double(), full[begin:begin + counts[hvd.rank()]] / n)
    scaled = hvd.reducescatter(x, name="rs.scaled", op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.25)
    torch.testing.assert_close(scaled.double(), full[begin:begin + counts[hvd.rank()]] / 2)
    even = rank_tensor(hvd.rank(), (2 * n, 3), torch.float64)  # equal blocks: no padding
    out = hvd.reducescatter(even, name="rs.even", op=hvd.Sum)
    want = reference(hvd, (2 * n, 3), torch.float64, hvd.Sum)
    torch.testing.assert_close(out, want[2 * hvd.rank():2 * hvd.rank() + 2])


def test_barrier(hvd):
    for _ in range(3):
        hvd.barrier()


def test_broadcast_and_allgather_object(hvd):
    obj = {"rank": hvd.rank(), "tensor": torch.arange(3) * hvd.rank(), "text": "x" * hvd.rank()}
    got = hvd.broadcast_object(obj, root_rank=hvd.size() - 1)
    assert got["rank"] == hvd.size() - 1 and got["text"] == "x" * (hvd.size() - 1)
    assert got["tensor"].tolist() == (torch.arange(3) * (hvd.size() - 1)).tolist()
    everyone = hvd.allgather_object(obj)
    assert [o["rank"] for o in everyone] == list(range(hvd.size()))
    assert [o["text"] for o in everyone] == ["x" * r for r in range(hvd.size())]


def test_join(hvd):
    # Rank r does r + 1 allreduces; the others join early and add zeros.
    for step in range(hvd.rank() + 1):
        out = hvd.allreduce(torch.ones(2), name="join.step.%d" % step, op=hvd.Sum)
        active = sum(1 for r in range(hvd.size()) if r >= step)
        assert out.tolist() == [float(active)] * 2
    assert hvd.join() == hvd.size() - 1
