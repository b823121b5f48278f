"""ElasticSampler, as in Horovod's torch/elastic/sampler.py: it wraps edt's
C++ ElasticSampler (include/edt/elastic.h): every sample of an epoch is
trained exactly once across the job, and its state records the progress of
the whole job. Its place (rank, size) is the current generation's
(edt._runtime.placement()); TorchState re-places it at each generation.
"""

import torch

from edt import _runtime


class ElasticSampler(torch.utils.data.Sampler):
    """Horovod's ElasticSampler: this worker's share of the samples of the
    epoch not yet processed by the job. Call record_batch() after every
    step (on every worker), set_epoch() at each new epoch."""

    def __init__(self, dataset, shuffle=True, seed=0):
        from edt import _edt
        self.dataset = dataset
        self._sampler = _edt.ElasticSampler(len(dataset), seed, shuffle)
        self.reset()

    def set_epoch(self, epoch):
        self._sampler.set_epoch(epoch)
        self.reset()

    @property
    def epoch(self):
        return self._sampler.epoch

    def reset(self, rank=None, size=None):
        if rank is None:
            rank, size = _runtime.placement()
        self._sampler.reset(rank, size)

    def record_batch(self, batch_idx, batch_size):
        """Every worker finished its batch of `batch_size` samples."""
        self._sampler.record_batch(batch_size)

    def get_indices(self, batch_idx, batch_size):
        shard = self._sampler.shard()
        return shard[batch_idx * batch_size:(batch_idx + 1) * batch_size]

    def steps_left(self, batch_size):
        return self._sampler.steps_left(batch_size)

    @property
    def processed_count(self):
        return self._sampler.processed_count

    def state_dict(self):
        return {"sampler": self._sampler.serialize()}

    def load_state_dict(self, state):
        # Re-partitions with the sampler's current rank and size.
        self._sampler.deserialize(state["sampler"])

    def __iter__(self):
        return iter(self._sampler.shard())

    def __len__(self):
        return len(self._sampler.shard())
