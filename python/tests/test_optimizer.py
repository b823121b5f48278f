"""DistributedOptimizer against single-process training on the global
batch, and restoring identical state on every rank."""

import copy

import pytest
import torch


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


def global_batch(step, per_rank, size):
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(per_rank * size, 10, generator=g), torch.randint(0, 3, (per_rank * size,), generator=g)


@pytest.mark.parametrize("optimizer_name", ["SGD", "Adam"])
def test_matches_single_process_training_on_the_global_batch(hvd, optimizer_name):
    per_rank, steps = 4, 5
    make_opt = {"SGD": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
                "Adam": lambda p: torch.optim.Adam(p, lr=0.01)}[optimizer_name]
    model = make_model(seed=1)
    reference = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(make_opt(model.parameters()), named_parameters=model.named_parameters())
    ref_opt = make_opt(reference.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    for step in range(steps):
        x, y = global_batch(step, per_rank, hvd.size())
        mine = slice(hvd.rank() * per_rank, (hvd.rank() + 1) * per_rank)
        opt.zero_grad()
        loss_fn(model(x[mine]), y[mine]).backward()
        opt.step()
        ref_opt.zero_grad()
        loss_fn(reference(x), y).backward()  # mean over the global batch = average of per-rank means
        ref_opt.step()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=name)


def test_backward_passes_per_step_and_sum(hvd):
    model = make_model(seed=2)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.0),
                                   named_parameters=model.named_parameters(), backward_passes_per_step=2,
                                   op=hvd.Sum)
    opt.zero_grad()
    for _ in range(2):
        model(torch.ones(1, 10) * (hvd.rank() + 1)).sum().backward()
    opt.step()
    reference = make_model(seed=2)
    for r in range(hvd.size()):
        for _ in range(2):
            reference(torch.ones(1, 10) * (r + 1)).sum().backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-5)


def test_named_parameters_must_be_unique_and_complete(hvd):
    model = make_model(seed=3)
    params = list(model.named_parameters())
    with pytest.raises(ValueError, match="unique"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=[("same", p) for _, p in params])
    with pytest.raises(ValueError, match="not named"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=params[:1])


def test_broadcast_parameters_and_optimizer_state(hvd):
    model = make_model(seed=10 + hvd.rank())  # different on every rank
    opt = torch.optim.Adam(model.parameters(), lr=0.001 * (hvd.rank() + 1))
    model(torch.randn(2, 10)).sum().backward()
    opt.step()  # rank-specific moments
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = hvd.allgather(flat.unsqueeze(0), name="check.params")
    for r in range(hvd.size()):
        torch.testing.assert_close(gathered[r], gathered[0], rtol=0, atol=0)
    state = opt.state_dict()
    assert state["param_groups"][0]["lr"] == pytest.approx(0.001)
    moments = torch.cat([s["exp_avg"].flatten() for s in state["state"].values()])
    gathered = hvd.allgather(moments.unsqueeze(0), name="check.moments")
    for r in range(hvd.size()):
        torch.testing.assert_close(gathered[r], gathered[0], rtol=0, atol=0)
    # named_parameters() works too
    other = make_model(seed=20 + hvd.rank())
    hvd.broadcast_parameters(list(other.named_parameters()), root_rank=hvd.size() - 1)
    ref = make_model(seed=20 + hvd.size() - 1)
    for p, q in zip(other.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q)
