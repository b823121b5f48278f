"""horovod.tensorflow.keras on Keras 3 (TensorFlow 2.16 and later, whose
tf.keras is Keras 3): the DistributedOptimizer and Horovod's callbacks
train every rank alike. Run under edtrun -np 2 with a Python whose
TensorFlow has Keras 3 (EDT_KERAS3_PYTHON, python/tests/CMakeLists.txt).
Not named test_*.py: the suites that run this directory (python_np2, on
Pythons without Keras 3) do not collect it."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import horovod.tensorflow as hvd_tf
import horovod.tensorflow.keras as hvd


@pytest.fixture(scope="module", autouse=True)
def keras3():
    assert keras.__version__.startswith("3."), "this suite is for Keras 3; %s has %s" % (tf.__file__,
                                                                                           keras.__version__)
    hvd.init()


def weights(model):
    return np.concatenate([v.numpy().ravel() for v in model.weights])


def test_the_optimizer_and_callbacks_train_every_rank_alike():
    rng = np.random.default_rng(hvd.rank())  # each rank its own data and its own first weights
    x = rng.normal(size=(256, 8)).astype("float32")
    y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
    keras.utils.set_random_seed(1 + hvd.rank())
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    lr = 0.01 * hvd.size()
    model.compile(loss=keras.losses.BinaryCrossentropy(from_logits=True),
                  optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(lr)))
    callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0), hvd.callbacks.MetricAverageCallback(),
                 hvd.callbacks.LearningRateWarmupCallback(initial_lr=lr, warmup_epochs=1, verbose=0)]
    start = weights(model)
    history = model.fit(x, y, batch_size=32, epochs=2, callbacks=callbacks, verbose=0)
    mine = weights(model)
    every = hvd.allgather_object(mine)
    assert all(np.array_equal(w, every[0]) for w in every), "the ranks' weights differ"
    assert not np.allclose(mine, start), "nothing was trained"
    assert float(model.optimizer.learning_rate.numpy()) == pytest.approx(lr)  # the warmup's end
    losses = hvd.allgather_object(history.history["loss"])
    assert all(l == losses[0] for l in losses), "the averaged loss differs between ranks"


def test_a_distributed_gradient_tape_over_a_keras_model_trains_every_rank_alike():
    rng = np.random.default_rng(10 + hvd.rank())
    x = tf.constant(rng.normal(size=(64, 4)).astype("float32"))
    keras.utils.set_random_seed(7)  # the same first weights: the tape alone keeps them alike
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    optimizer = keras.optimizers.SGD(0.1)
    for _ in range(3):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x)))
        tape = hvd_tf.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    every = hvd.allgather_object(weights(model))
    assert all(np.array_equal(w, every[0]) for w in every), "the ranks' weights differ"
