"""hvd.elastic at a fixed size: the sampler's exactly-once split, commit and
restore of TorchState/ObjectState, and run()'s sync and rollback."""

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
