"""DistributedOptimizer: Horovod's wrapper that averages gradients across
ranks while backward() runs.

Each parameter's gradient accumulator gets a hook; when a gradient is ready
(after `backward_passes_per_step` backward passes) it is submitted for an
asynchronous allreduce under the parameter's name, so communication overlaps
the rest of the backward pass and the engine fuses small gradients. step()
waits for them (synchronize()) and then runs the wrapped optimizer.

Sparse gradients (nn.Embedding(sparse=True)) are reduced as Horovod reduces
them: their indices and values allgathered (sparse_allreduce_async), or with
sparse_as_dense=True as a dense allreduce turned back into a sparse
gradient. With `process_set` the gradients are reduced over that set only;
on a process outside it the optimizer steps on its own gradients.
"""

import contextlib
import warnings

import torch

from edt.common.process_sets import global_process_set
from edt.torch import mpi_ops
from edt.torch.compression import Compression


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor, groups, sparse_as_dense, process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self._sparse_as_dense = sparse_as_dense
        self.process_set = process_set if process_set is not None else global_process_set
        if named_parameters is not None:
            named_parameters = list(named_parameters)
        else:
            # Numbered across every parameter group, so that several
            # groups do not give two parameters one name.
            params = [v for group in self.param_groups for v in group["params"]]
            named_parameters = [("allreduce.noname.%s" % i, v) for i, v in enumerate(params)]
        if any(not isinstance(p, tuple) for p in named_parameters):
            raise ValueError("named_parameters should be a sequence of tuples (name, parameter), usually "
                             "produced by model.named_parameters().")
        names = [k for k, _ in named_parameters]
        dups = sorted({k for k in names if names.count(k) > 1})
        if dups:
            raise ValueError("Parameter names in named_parameters must be unique. Found duplicates: %s"
                             % ", ".join(dups))
        all_params = {id(v) for group in self.param_groups for v in group["params"]}
        named_ids = {id(v) for _, v in named_parameters}
        if all_params - named_ids:
            raise ValueError("named_parameters was specified, but one or more model parameters were not named. "
                             "Python object ids: %s" % ", ".join(str(i) for i in sorted(all_params - named_ids)))
        if op == mpi_ops.Adasum:
            raise NotImplementedError("edt does not implement Adasum; use op=hvd.Average or hvd.Sum")
        if gradient_predivide_factor != 1.0 and op != mpi_ops.Average:
            raise ValueError("gradient_predivide_factor not supported with op != Average")
        self._request_names = {v: "allreduce." + k for k, v in named_parameters}
        self._parameter_names = {v: k for k, v in named_parameters}  # Horovod's name for the same map
        self.backward_passes_per_step = backward_passes_per_step
        self._op = op
        if op == mpi_ops.Average:
            self._scales = (1.0 / gradient_predivide_factor, gradient_predivide_factor)
        else:
            self._scales = (1.0, 1.0)
        self._allreduce_delay = {}
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True
        # In elastic mode the size is known only per generation, and may grow.
        if self.process_set.included() and (mpi_ops._runtime.elastic_mode() or mpi_ops.size() > 1):
            self._register_hooks()

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def _register_hooks(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    self._requires_update.add(p)
                    self._allreduce_delay[p] = self.backward_passes_per_step
                    # The accumulator node of p: its hook runs once p.grad holds the new gradient.
                    grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(grad_acc)

    def _allreduce_grad_async(self, p):
        # Runs inside backward() for every gradient: kept short.
        if p.grad is None:
            # This rank's forward did not use p; another rank's may have.
            p.grad = p.data.new(p.size()).zero_()
        grad = p.grad
        if grad.is_sparse:
            if not self._sparse_as_dense:
                handle = mpi_ops.sparse_allreduce_async(grad, self._request_names[p], self._op, self.process_set)
                return handle, None
            grad = grad.to_dense()
        compressed, ctx = self._compression.compress(grad)
        handle = mpi_ops.allreduce_async_(compressed, name=self._request_names[p], op=self._op,
                                          prescale_factor=self._scales[0], postscale_factor=self._scales[1],
                                          process_set=self.process_set)
        return handle, (compressed, ctx)

    def _apply_reduced(self, p, handle, ctx):
        """Waits for p's reduction and makes it p.grad."""
        if callable(handle):  # a sparse allreduce: it returns the result
            p.grad.zero_().add_(handle())
            return
        compressed, cctx = ctx
        restored = self._compression.decompress(mpi_ops.synchronize(handle), cctx)
        if p.grad.is_sparse:  # sparse_as_dense: back to a sparse gradient
            p.grad.zero_().add_(restored.to_sparse())
        elif restored.data_ptr() != p.grad.data_ptr():
            p.grad.copy_(restored)

    def _make_hook(self, p):
        def hook(*ignore):
            if p in self._handles and self._handles[p][0] is not None:
                if self._allreduce_delay[p] <= 0:
                    raise AssertionError(
                        "Gradients were computed more than backward_passes_per_step times before call to "
                        "step(). Increase backward_passes_per_step to accumulate gradients locally.")
            assert not p.grad.requires_grad
            assert self._allreduce_delay[p] > 0
            handle, ctx = None, None
            self._allreduce_delay[p] -= 1
            if self._allreduce_delay[p] == 0:
                handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def synchronize(self):
        """Waits for every gradient's allreduce (starting those whose hook
        has not fired, such as unused parameters') and writes the averaged
        gradients into p.grad."""
        if not self.process_set.included() or (mpi_ops.size() == 1 and not self._requires_update):
            self._synchronized = True
            return
        missing = self._requires_update - set(self._handles)
        for p in missing:
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in list(self._handles.items()):
            if handle is None:
                self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in self._handles.items():
            self._allreduce_delay[p] = self.backward_passes_per_step
            self._apply_reduced(p, handle, ctx)
        self._handles.clear()
        self._synchronized = True

    def _forget_pending(self):
        """Drops the requests of a step cut short (elastic.run calls this
        when a generation ends): the next step starts afresh."""
        self._handles.clear()
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        self._synchronized = False

    @contextlib.contextmanager
    def skip_synchronize(self):
        """For a step() after an explicit synchronize() (gradient clipping)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() context after "
                              "optimizer.synchronize(). This can cause training slowdown. You may want to "
                              "consider using optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, set_to_none=False):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but before "
                                 "optimizer.step() or optimizer.synchronize(). This is prohibited as it can "
                                 "cause a race condition.")
        # Gradients stay allocated (zeroed): the hooks reduce p.grad in place.
        return super(self.__class__, self).zero_grad(set_to_none=False)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=mpi_ops.Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False, process_set=None):
    """Wraps `optimizer` so that step() applies the gradients averaged (or
    reduced with `op`) over every rank (of `process_set`). Arguments as
    Horovod's."""
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step, op,
               gradient_predivide_factor, groups, sparse_as_dense, process_set)
