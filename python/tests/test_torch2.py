"""What PyTorch 2 users combine with Horovod's API: torch.compile'd models
under DistributedOptimizer, autocast to bfloat16 on CPU (torch.amp), and
bfloat16 tensors in the collectives, each giving every rank the same
result. python_torch2 runs it on PyTorch 2; on Debian's torch 1.13 (no
torch.compile) the module is skipped, saying so."""

import copy

import pytest
import torch

if int(torch.__version__.split(".")[0]) < 2:
    pytest.skip("PyTorch 2's features: python_torch2 runs them, on PyTorch 2", allow_module_level=True)

from test_optimizer import global_batch, make_model  # python/tests, on sys.path as pytest's rootdir

PER_RANK, STEPS = 4, 3


def assert_same_on_every_rank(hvd, tensor, what):
    gathered = hvd.allgather(tensor.detach().unsqueeze(0), name="same." + what)
    for rank in range(hvd.size()):
        assert torch.equal(gathered[rank], gathered[0]), "%s differs between rank 0 and rank %d" % (what, rank)


def train(hvd, forward, opt, ref_forward, ref_opt):
    """STEPS steps of `forward`'s model on this rank's share of each global
    batch, and of `ref_forward`'s on the whole of it, in one process."""
    loss_fn = torch.nn.CrossEntropyLoss()
    for step in range(STEPS):
        x, y = global_batch(step, PER_RANK, hvd.size())
        mine = slice(hvd.rank() * PER_RANK, (hvd.rank() + 1) * PER_RANK)
        opt.zero_grad()
        loss_fn(forward(x[mine]).float(), y[mine]).backward()
        opt.step()
        ref_opt.zero_grad()
        loss_fn(ref_forward(x).float(), y).backward()  # mean over the global batch = average of per-rank means
        ref_opt.step()


def test_compiled_model_trains_as_one_process_on_the_global_batch(hvd):
    model = make_model(seed=3)
    reference = copy.deepcopy(model)
    # fullgraph: a graph break, which would run the model uncompiled, fails.
    # aot_eager: Dynamo's graphs and AOTAutograd's joint forward and backward,
    # all that stands between the model and the gradient hooks; Inductor's
    # kernels (the default backend) would add a minute of C++ compilation.
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    # What a user has after `model = torch.compile(model)`: its names carry
    # the _orig_mod. prefix, the same on every rank.
    opt = hvd.DistributedOptimizer(torch.optim.SGD(compiled.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=compiled.named_parameters())
    hvd.broadcast_parameters(compiled.state_dict(), root_rank=0)
    train(hvd, compiled, opt, reference, torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9))
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=name)
        assert_same_on_every_rank(hvd, p, "compiled." + name)


def test_cpu_autocast_to_bfloat16_trains_the_same_model_on_every_rank(hvd):
    model = make_model(seed=4)
    reference = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())

    def autocast(module):
        def forward(x):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = module(x)
            assert out.dtype == torch.bfloat16
            return out
        return forward

    train(hvd, autocast(model), opt, autocast(reference), torch.optim.SGD(reference.parameters(), lr=0.1))
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert p.dtype == torch.float32 and p.grad.dtype == torch.float32
        # bfloat16 keeps 8 bits: per-rank sums round otherwise than global ones.
        torch.testing.assert_close(p, q, rtol=2e-2, atol=2e-2, msg=name)
        assert_same_on_every_rank(hvd, p, "autocast." + name)


def test_bfloat16_collectives(hvd):
    rank, size = hvd.rank(), hvd.size()
    base = torch.arange(8, dtype=torch.bfloat16)  # small integers and halves: exact in bfloat16
    mine = base + rank
    total = hvd.allreduce(mine, op=hvd.Sum, name="bf16.sum")
    assert total.dtype == torch.bfloat16
    assert torch.equal(total, base * size + size * (size - 1) // 2)
    assert torch.equal(hvd.allreduce(mine, op=hvd.Average, name="bf16.avg"), base + (size - 1) / 2)
    gathered = hvd.allgather(mine.view(1, -1), name="bf16.gather")
    assert gathered.dtype == torch.bfloat16
    assert torch.equal(gathered, torch.stack([base + r for r in range(size)]))
    assert torch.equal(hvd.broadcast(mine, root_rank=size - 1, name="bf16.bcast"), base + size - 1)
    in_place = mine.clone()
    hvd.allreduce_(in_place, op=hvd.Sum, name="bf16.sum_")
    assert torch.equal(in_place, total)
    # Values that round: every rank still gets the same bits.
    noisy = torch.randn(1000, generator=torch.Generator().manual_seed(rank)).to(torch.bfloat16)
    assert_same_on_every_rank(hvd, hvd.allreduce(noisy, op=hvd.Average, name="bf16.noisy"), "bf16.noisy")


def test_bfloat16_model_under_distributed_optimizer(hvd):
    model = make_model(seed=5).to(torch.bfloat16)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    x, y = global_batch(0, PER_RANK, hvd.size())
    mine = slice(hvd.rank() * PER_RANK, (hvd.rank() + 1) * PER_RANK)
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x[mine].to(torch.bfloat16)).float(), y[mine]).backward()
    opt.step()
    for name, p in model.named_parameters():
        assert p.dtype == torch.bfloat16 and p.grad.dtype == torch.bfloat16
        assert_same_on_every_rank(hvd, p, "bf16_model." + name)
