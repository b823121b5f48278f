"""hvd.elastic of horovod.tensorflow and horovod.tensorflow.keras on edt
(edt.tensorflow.elastic) outside elastic mode, on every rank of a fixed job
(python_tensorflow_elastic_np2): the states' commit, restore and sync, the
Keras callbacks, and run()'s handling of a failed edt op. Elastic mode
itself (grow, a killed worker) is horovod_tf2_mnist_elastic's."""

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def hvd():
    import horovod.tensorflow.keras as hvd
    hvd.init()
    yield hvd


def _model_and_optimizer(seed):
    tf.keras.utils.set_random_seed(seed)
    model = tf.keras.Sequential([tf.keras.layers.Dense(4, activation="relu"), tf.keras.layers.Dense(2)])
    model.build((None, 3))
    opt = tf.optimizers.Adam(0.01)
    opt.build(model.trainable_variables)
    return model, opt


def _weights(model):
    return [w.copy() for w in model.get_weights()]


def test_commit_and_restore(hvd):
    model, opt = _model_and_optimizer(hvd.rank())
    state = hvd.elastic.KerasState(model, opt, batch=3)
    committed = _weights(model)
    model.set_weights([w + 1 for w in committed])
    state.batch = 7
    state.restore()
    for got, want in zip(model.get_weights(), committed):
        np.testing.assert_array_equal(got, want)
    assert state.batch == 3


def test_sync_makes_every_rank_rank_0s(hvd):
    model, opt = _model_and_optimizer(100 + hvd.rank())
    state = hvd.elastic.TensorFlowKerasState(model, opt, epoch=hvd.rank())
    state.sync()
    everyone = hvd.allgather_object((_weights(model), state.epoch))
    for weights, epoch in everyone:
        assert epoch == 0
        for got, want in zip(weights, everyone[0][0]):
            np.testing.assert_array_equal(got, want)


def test_tensorflow_state_of_variables(hvd):
    import horovod.tensorflow as tfhvd
    v = tf.Variable([1.0, 2.0])
    state = tfhvd.elastic.TensorFlowState([v], step=0)
    v.assign([5.0, 6.0])
    state.restore()
    np.testing.assert_array_equal(v.numpy(), [1.0, 2.0])
    with pytest.raises(ValueError, match="needs the variables"):
        tfhvd.elastic.TensorFlowState()


def test_run_syncs_then_runs(hvd):
    model, opt = _model_and_optimizer(200 + hvd.rank())
    state = hvd.elastic.KerasState(model, opt, batch=0)

    @hvd.elastic.run
    def train(state, factor):
        return [w * factor for w in _weights(state.model)]

    scaled = train(state, 2)
    first = hvd.allgather_object(scaled)[0]
    for got, want in zip(scaled, first):
        np.testing.assert_array_equal(got, want)


def test_a_failed_edt_op_is_horovods_internal_error(hvd):
    """An edt op's UnknownError is HorovodInternalError to run(): outside
    elastic mode the job cannot re-form, and run() says so after rolling
    back; another UnknownError is the user's and passes as it is."""
    from horovod.common.exceptions import HorovodInternalError
    model, opt = _model_and_optimizer(1)
    state = hvd.elastic.KerasState(model, opt, batch=0)

    @hvd.elastic.run
    def fails(state, message):
        state.batch = 5
        raise tf.errors.UnknownError(None, None, message)

    with pytest.raises(HorovodInternalError, match="cannot re-form"):
        fails(state, "edt EdtAllreduce_x: rank 1 died [PeerFailed]")
    assert state.batch == 0  # rolled back to the commit
    with pytest.raises(tf.errors.UnknownError, match="not edt's"):
        fails(state, "not edt's")


def test_keras_callbacks_keep_epoch_and_batch(hvd):
    model, opt = _model_and_optimizer(300)
    model.compile(loss="mse", optimizer=hvd.DistributedOptimizer(opt))
    model.fit(np.zeros((4, 3), np.float32), np.zeros((4, 2), np.float32), epochs=1, verbose=0)  # the slots
    state = hvd.elastic.KerasState(model, batch=0, epoch=0)
    commits = []
    state.commit = lambda: commits.append(state.batch)
    data = tf.data.Dataset.from_tensor_slices((np.ones((12, 3), np.float32), np.ones((12, 2), np.float32)))
    callbacks = [hvd.elastic.UpdateBatchStateCallback(state), hvd.elastic.UpdateEpochStateCallback(state),
                 hvd.elastic.CommitStateCallback(state, batches_per_commit=2)]
    model.fit(data.repeat().batch(2), steps_per_epoch=4, epochs=2, callbacks=callbacks, verbose=0)
    assert (state.epoch, state.batch) == (2, 0)
    assert commits == [1, 3, 0, 1, 3, 0]  # every 2 batches, and at each epoch's end
