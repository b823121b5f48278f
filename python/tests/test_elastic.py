"""hvd.elastic at a fixed size: the sampler's exactly-once split, commit and
restore of TorchState/ObjectState, and run()'s sync and rollback."""

import numpy
import pytest
import torch


def test_sampler_gives_every_sample_to_exactly_one_rank(hvd):
    sampler = hvd.elastic.ElasticSampler(range(103), shuffle=True, seed=7)
    sampler.set_epoch(3)
    mine = list(iter(sampler))
    everyone = hvd.allgather_object(mine)
    flat = sorted(i for shard in everyone for i in shard)
    assert flat == list(range(103))
    assert max(map(len, everyone)) - min(map(len, everyone)) <= 1


def test_sampler_state_carries_the_progress_of_the_job(hvd):
    sampler = hvd.elastic.ElasticSampler(range(40), shuffle=False)
    shard = list(iter(sampler))
    for b in range(2):
        assert sampler.get_indices(b, 5) == shard[b * 5:(b + 1) * 5]
        sampler.record_batch(b, 5)
    assert sampler.processed_count == 10 * hvd.size()
    state = sampler.state_dict()
    fresh = hvd.elastic.ElasticSampler(range(40), shuffle=False)
    fresh.load_state_dict(state)
    rest = hvd.allgather_object(list(iter(fresh)))
    done = hvd.allgather_object(shard[:10])
    assert sorted(i for s in rest + done for i in s) == list(range(40))


def test_torch_state_commit_and_restore(hvd):
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    state = hvd.elastic.TorchState(model=model, optimizer=opt, epoch=1, batch=0)
    committed = [p.detach().clone() for p in model.parameters()]
    state.commit()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    state.epoch, state.batch = 5, 9
    state.restore()
    assert (state.epoch, state.batch) == (1, 0)
    for p, q in zip(model.parameters(), committed):
        torch.testing.assert_close(p, q)


def test_torch_state_lends_its_commit_in_pieces_and_loads_from_a_buffer(hvd):
    # committed_views(): committed_bytes() in pieces, the tensors' lent
    # where they lie; a state loaded from a buffer (a received state is a
    # memoryview) copies out of it and keeps no view of it.
    def made():
        model = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.BatchNorm1d(4))
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        return model, opt, hvd.elastic.TorchState(model=model, optimizer=opt, epoch=0, extra=torch.zeros(3))

    model, opt, state = made()
    model(torch.randn(6, 5)).sum().backward()
    opt.step()
    state.epoch, state.extra = 4, torch.arange(3.0)
    state.commit()
    views = state.committed_views()
    data = bytearray(b"".join(bytes(memoryview(v)) for v in views))
    assert bytes(data) == state.committed_bytes()
    lent = {numpy.asarray(v).ctypes.data for v in views}
    assert state._saved_tensors["model"]["0.weight"].data_ptr() in lent

    fresh_model, fresh_opt, fresh = made()
    fresh.deserialize(memoryview(data))
    data[:] = bytes(len(data))  # what arrived is gone: the state is its own
    for p, q in zip(fresh_model.state_dict().values(), model.state_dict().values()):
        torch.testing.assert_close(p, q)
    assert fresh.epoch == 4
    torch.testing.assert_close(fresh.extra, torch.arange(3.0))
    for p, q in zip(fresh_opt.state.values(), opt.state.values()):
        torch.testing.assert_close(p["exp_avg"], q["exp_avg"])


def test_run_syncs_from_rank_0_and_rolls_back_on_failure(hvd):
    torch.manual_seed(hvd.rank())  # different weights on every rank
    model = torch.nn.Linear(4, 1)
    state = hvd.elastic.TorchState(model=model, step=hvd.rank() * 10)

    @hvd.elastic.run
    def train(state):
        return state.step, hvd.allgather(model.weight.detach().clone())

    step, weights = train(state)
    assert step == 0  # rank 0's value
    for r in range(hvd.size()):
        torch.testing.assert_close(weights[r], weights[0])

    calls = []

    @hvd.elastic.run
    def failing(state):
        calls.append(state.step)
        state.step += 1
        raise hvd.HorovodInternalError("a peer failed")

    with pytest.raises(hvd.HorovodInternalError, match="elastic mode"):
        failing(state)
    assert calls == [0] and state.step == 0  # rolled back to the commit
