"""Horovod's elastic API for TensorFlow 2: run, TensorFlowKerasState,
TensorFlowState, ObjectState (`hvd.elastic` of `import horovod.tensorflow
as hvd`).

run() is edt.common.elastic's, which edt.torch.elastic runs too (its notes
say how a generation, a commit, a reset and a joiner work), given
TensorFlow's collectives here. A collective that failed while it ran (a
peer died) raises TensorFlow's UnknownError naming the edt op; run() sees it
as Horovod's does, as HorovodInternalError, and rolls back to the last
commit. The ops of a tf.function traced in an earlier generation reach the
new generation's engine: each generation hands its engine to them before
the training function runs.

A commit copies the variables' values into NumPy arrays in memory (Horovod
copies them into tensors); a worker that joins receives the committed copy
pickled. As in Horovod, the model must be built and the optimizer's
variables made (one step, or optimizer.build) before the state is made:
every worker, a joiner too, has the same variables in the same order.
"""

import functools
import hashlib
import re

import numpy as np
import tensorflow as tf

from edt.common import elastic as _common
from edt.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from edt.tensorflow import allgather_object, broadcast, broadcast_object, broadcast_variables, mpi_ops
from edt.tensorflow.util import optimizer_variables

# An edt op's failure, as ops.cc's to_status() words it: "edt NAME: MESSAGE [CODE]".
_EDT_FAILURE = re.compile(r"\bedt .*\[(\w+)\]", re.S)


def _broadcast_flag(value):
    flag = broadcast(tf.constant([value], tf.int32), 0, name="elastic.check_host_updates")
    return int(flag.numpy()[0])


def _guard(func):
    """func, with a failed edt collective raised as Horovod's exception:
    HostsUpdatedInterrupt when the membership changed under it, else
    HorovodInternalError (Horovod's tensorflow.elastic.run does the same
    with the UnknownError of its ops)."""

    @functools.wraps(func)
    def guarded(state, *args, **kwargs):
        try:
            return func(state, *args, **kwargs)
        except tf.errors.UnknownError as e:
            failure = _EDT_FAILURE.search(e.message or "")
            if failure is None:
                raise
            if failure.group(1) == "HostsUpdated":
                raise HostsUpdatedInterrupt() from e
            raise HorovodInternalError(e.message) from e
    return guarded


_TENSORFLOW = _common.Framework(name="tensorflow", broadcast_flag=_broadcast_flag, allgather_object=allgather_object,
                                forget_pending=lambda: None, guard=_guard, enter_generation=mpi_ops._adopt)


def run(func):
    """Decorator: runs func(state, ...) until it returns. On
    HorovodInternalError (a failed collective) rolls back to the last
    commit and re-forms the job, on HostsUpdatedInterrupt re-forms it
    keeping the state (edt.common.elastic)."""
    return _common.run_fn(func, _TENSORFLOW)


class ObjectState(_common.ObjectState):
    """State made of picklable attributes: ObjectState(epoch=0, batch=0)."""

    def __init__(self, bcast_object=broadcast_object, get_rank=None, **kwargs):
        super().__init__(bcast_object, get_rank, **kwargs)


class _VariablesState(ObjectState):
    """An ObjectState that also keeps named lists of tf.Variables
    (_groups(): {"model": [...], "optimizer": [...]}), committed as NumPy
    copies of their values."""

    def __init__(self, **kwargs):
        self._saved_values = {}
        self._save_variables()
        super().__init__(**kwargs)

    def _groups(self):
        raise NotImplementedError

    def _save_variables(self):
        self._saved_values = {name: [np.array(v.numpy(), copy=True) for v in variables]
                              for name, variables in self._groups().items()}

    def _load_variables(self, values):
        for name, variables in self._groups().items():
            saved = values.get(name, [])
            if len(saved) != len(variables):
                raise ValueError("the elastic state's %s has %d variables here and %d in the committed copy: every "
                                 "worker must build the same model and optimizer (run one step, or "
                                 "optimizer.build(), before making the state)" % (name, len(variables), len(saved)))
            for variable, value in zip(variables, saved):
                variable.assign(value)

    def save(self):
        self._save_variables()
        super().save()

    def sync(self):
        for variables in self._groups().values():
            if variables:
                broadcast_variables(variables, root_rank=0)
        self._save_variables()
        super().sync()

    def _state_dict(self):
        return {"variables": {name: [v.numpy() for v in variables] for name, variables in self._groups().items()},
                "objects": super()._state_dict()}

    def _committed_state(self):
        return {"variables": self._saved_values, "objects": super()._committed_state()}

    def _load_state(self, state):
        # restore() and a joiner's received copy: assign() copies each value
        # into its variable, so the committed arrays stay as they are.
        self._load_variables(state["variables"])
        self._saved_values = state["variables"]
        super()._load_state(state["objects"])

    def _replica_digest(self):
        return [(v.name, hashlib.blake2b(np.ascontiguousarray(v.numpy()).view("u1"), digest_size=8).hexdigest())
                for v in self._trainable()]

    def _trainable(self):
        return []


class TensorFlowKerasState(_VariablesState):
    """The state of a tf.keras model and its optimizer (the model's if
    None), and any other attributes (epoch=..., batch=...). `backend` is
    TensorFlow 1's session holder, unused in TensorFlow 2."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        if not model.built:
            raise ValueError("Model must be built first. Run `model.build(input_shape)`.")
        self.model = model
        self.optimizer = optimizer or model.optimizer
        self.backend = backend
        super().__init__(**kwargs)

    def _groups(self):
        return {"model": list(self.model.variables), "optimizer": optimizer_variables(self.optimizer)}

    def _trainable(self):
        return self.model.trainable_variables

    def _settings(self):
        settings = super()._settings()
        # The learning rate: what a reset callback scales with hvd.size();
        # the optimizer's variables (its slots, its step) are committed.
        rate = getattr(self.optimizer, "learning_rate", None)
        if isinstance(rate, tf.Variable):
            settings["learning_rate"] = rate.numpy()
        return settings

    def _load_settings(self, settings):
        super()._load_settings(settings)
        if "learning_rate" in settings:
            self.optimizer.learning_rate.assign(settings["learning_rate"])


class TensorFlowState(_VariablesState):
    """The state of a list of tf.Variables, and any other attributes.
    `session` is TensorFlow 1's, unused in TensorFlow 2."""

    def __init__(self, variables=None, session=None, **kwargs):
        if not variables:
            raise ValueError("TensorFlowState needs the variables to track: TensorFlow 2 has no global variables "
                             "to default to (pass model.variables + optimizer.variables())")
        self.variables = list(variables)
        self.session = session
        super().__init__(**kwargs)

    def _groups(self):
        return {"variables": self.variables}

    def _trainable(self):
        return [v for v in self.variables if v.trainable]


__all__ = ["run", "ObjectState", "TensorFlowKerasState", "TensorFlowState"]
