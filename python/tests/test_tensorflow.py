"""horovod.tensorflow on edt (edt.tensorflow): the collectives as TensorFlow
ops, eagerly and inside tf.function, and a DistributedGradientTape training
step. Runs on every rank (python_tensorflow_np2, edt's venv); skipped where
TensorFlow is not installed (python_np2 runs on Debian's python3)."""

import gc
import os
import weakref

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def hvd():
    import horovod.tensorflow as hvd
    hvd.init()
    yield hvd


OPS = ["Sum", "Average", "Min", "Max", "Product"]


def test_workers_of_one_host_share_its_cores(hvd):
    """init() gives each worker its share of the host's cores as TensorFlow's
    intra-op threads (TensorFlow's default is a thread per core in every
    worker); TF_NUM_INTRAOP_THREADS, when set, is left to TensorFlow."""
    share = max(1, len(os.sched_getaffinity(0)) // hvd.local_size())
    want = 0 if hvd.local_size() < 2 or "TF_NUM_INTRAOP_THREADS" in os.environ else share
    assert tf.config.threading.get_intra_op_parallelism_threads() == want


def _expected(op, values):
    return {"Sum": np.sum, "Average": np.mean, "Min": np.min, "Max": np.max, "Product": np.prod}[op](values, axis=0)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", [tf.float32, tf.float64, tf.int32, tf.int64])
def test_allreduce_eager(hvd, op, dtype):
    rows = [np.array([r + 1, 2 * (r + 1), -r], np.float64) for r in range(hvd.size())]
    got = hvd.allreduce(tf.constant(rows[hvd.rank()], dtype), op=getattr(hvd, op)).numpy()
    want = _expected(op, np.stack(rows))
    if dtype.is_integer and op == "Average":
        want = np.trunc(want)
    np.testing.assert_allclose(got, want.astype(dtype.as_numpy_dtype))
    assert got.dtype == dtype.as_numpy_dtype


@pytest.mark.parametrize("op", OPS)
def test_allreduce_in_tf_function(hvd, op):
    @tf.function
    def reduce(t):
        return hvd.allreduce(t, op=getattr(hvd, op))

    rows = [np.full((2, 3), r + 2, np.float32) for r in range(hvd.size())]
    for _ in range(3):  # the same graph again: the same names, step after step
        np.testing.assert_allclose(reduce(tf.constant(rows[hvd.rank()])).numpy(), _expected(op, np.stack(rows)))


def test_allreduce_scaling_and_carried_types(hvd):
    x = tf.constant([1.0, 2.0])
    got = hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5).numpy()
    np.testing.assert_allclose(got, [hvd.size(), 2.0 * hvd.size()])
    small = hvd.allreduce(tf.constant([1, -2], tf.int8), op=hvd.Sum)
    assert small.dtype == tf.int8 and small.numpy().tolist() == [hvd.size(), -2 * hvd.size()]
    flags = hvd.allreduce(tf.constant([hvd.rank() == 0, True]), op=hvd.Min)
    assert flags.dtype == tf.bool and flags.numpy().tolist() == [hvd.size() == 1, True]


def test_allgather_eager_and_in_tf_function(hvd):
    mine = tf.fill([hvd.rank() + 1, 2], hvd.rank())
    want = np.concatenate([np.full((r + 1, 2), r) for r in range(hvd.size())])
    np.testing.assert_array_equal(hvd.allgather(mine).numpy(), want)
    gather = tf.function(lambda t: hvd.allgather(t))
    for _ in range(2):
        np.testing.assert_array_equal(gather(mine).numpy(), want)


@pytest.mark.parametrize("root", [0, 1])
def test_broadcast_eager_and_in_tf_function(hvd, root):
    root = root % hvd.size()
    mine = tf.constant([hvd.rank() * 10.0, 1.0])
    np.testing.assert_allclose(hvd.broadcast(mine, root).numpy(), [root * 10.0, 1.0])
    bcast = tf.function(lambda t: hvd.broadcast(t, root))
    np.testing.assert_allclose(bcast(mine).numpy(), [root * 10.0, 1.0])


def test_collectives_in_tf_function_are_not_ordered_by_program_order(hvd):
    """Only barrier and join are stateful ops, as in Horovod. Inside
    tf.function the others get no automatic control dependencies: each
    allreduce of a backward pass runs as soon as its gradient is ready, and
    the engine fuses those pending together, instead of running them one at
    a time in the order they were written."""
    from tensorflow.python.framework import op_def_registry
    names = ["EdtAllreduce", "EdtAllgather", "EdtBroadcast", "EdtAlltoall", "EdtReducescatter", "EdtBarrier",
             "EdtJoin"]
    assert {n for n in names if op_def_registry.get(n).is_stateful} == {"EdtBarrier", "EdtJoin"}

    @tf.function
    def step(xs):
        return [hvd.allreduce(x, op=hvd.Sum) for x in xs] + [hvd.allgather(xs[0]), hvd.broadcast(xs[1], 0)]

    xs = [tf.fill([3], float(i + hvd.rank())) for i in range(4)]
    ops = [op for op in step.get_concrete_function(xs).graph.get_operations() if op.type.startswith("Edt")]
    assert len(ops) == 6
    assert {op.name: [c.name for c in op.control_inputs] for op in ops} == {op.name: [] for op in ops}
    n = hvd.size()
    for _ in range(2):
        got = step(xs)
        for i in range(4):
            np.testing.assert_allclose(got[i].numpy(), [i * n + n * (n - 1) / 2] * 3)
        np.testing.assert_allclose(got[4].numpy(), np.concatenate([[float(r)] * 3 for r in range(n)]))
        np.testing.assert_allclose(got[5].numpy(), [1.0] * 3)


def test_broadcast_variables_and_objects(hvd):
    v = tf.Variable([float(hvd.rank()), 5.0])
    hvd.broadcast_variables([v], root_rank=0)
    np.testing.assert_allclose(v.numpy(), [0.0, 5.0])
    assert hvd.broadcast_object({"rank": hvd.rank()}, root_rank=0) == {"rank": 0}
    assert hvd.allgather_object("r%d" % hvd.rank()) == ["r%d" % r for r in range(hvd.size())]


def test_gradient_through_allreduce(hvd):
    x = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(hvd.allreduce(x * (hvd.rank() + 1.0), op=hvd.Sum))
    # d/dx of sum over ranks of x*(r+1), its gradient summed over ranks again
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), [hvd.size() * (hvd.rank() + 1.0)] * 2)


def test_mismatched_shapes_fail_on_every_rank(hvd):
    with pytest.raises(tf.errors.OpError, match="shape"):
        hvd.allreduce(tf.zeros([hvd.rank() + 1]), name="mismatched.shapes").numpy()


def test_unsupported_type_is_refused(hvd):
    with pytest.raises(tf.errors.InvalidArgumentError, match="complex64"):
        hvd.allreduce(tf.constant([1j], tf.complex64), op=hvd.Sum)


def _model(seed):
    tf.keras.utils.set_random_seed(seed)
    return tf.keras.Sequential([tf.keras.layers.Dense(4, activation="relu", input_shape=(3,)),
                                tf.keras.layers.Dense(1)])


def test_distributed_gradient_tape_training(hvd):
    """Different initial weights and data on each rank; after the first
    step's broadcast and averaged gradients, every rank holds the same
    parameters (Horovod's tensorflow2_mnist.py's training step, small)."""
    model = _model(seed=hvd.rank())
    opt = tf.keras.optimizers.SGD(0.1)
    rng = np.random.default_rng(hvd.rank())
    x = tf.constant(rng.normal(size=(8, 3)), tf.float32)
    y = tf.constant(rng.normal(size=(8, 1)), tf.float32)

    @tf.function
    def step(first):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x, training=True) - y) ** 2)
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        if first:
            hvd.broadcast_variables(model.variables, root_rank=0)
            # A method in Keras 2, a property in Keras 3 (TensorFlow 2.16 and later).
            hvd.broadcast_variables(opt.variables() if callable(opt.variables) else opt.variables, root_rank=0)
        return loss

    before = [v.numpy() for v in model.trainable_variables]
    for i in range(4):
        step(i == 0)
    for v, b in zip(model.trainable_variables, before):
        everyone = hvd.allgather(v[tf.newaxis]).numpy()
        for other in everyone[1:]:
            np.testing.assert_array_equal(other, everyone[0])
        if hvd.rank() == 0:
            assert not np.array_equal(v.numpy(), b)


def test_distributed_gradient_tape_averages(hvd):
    """The tape's gradients are the mean of every rank's local ones."""
    model = _model(seed=0)
    x = tf.constant(np.random.default_rng(hvd.rank()).normal(size=(4, 3)), tf.float32)
    with tf.GradientTape(persistent=True) as tape:
        loss = tf.reduce_sum(model(x))
    local = tape.gradient(loss, model.trainable_variables)
    averaged = hvd.DistributedGradientTape(tape).gradient(loss, model.trainable_variables)
    for mine, got in zip(local, averaged):
        everyone = hvd.allgather(mine[tf.newaxis]).numpy()
        np.testing.assert_allclose(got.numpy(), everyone.mean(axis=0), rtol=1e-6)


def test_keras_fit_with_distributed_optimizer_and_callbacks(hvd):
    """horovod.tensorflow.keras as tensorflow2_keras_mnist.py uses it:
    after fit, every rank holds the same weights, and the epoch's metrics
    are averaged over the ranks."""
    import horovod.tensorflow.keras as khvd
    model = _model(seed=10 + khvd.rank())
    opt = khvd.DistributedOptimizer(tf.keras.optimizers.SGD(0.05 * khvd.size()))
    model.compile(loss="mse", optimizer=opt)
    rng = np.random.default_rng(khvd.rank())
    data = tf.data.Dataset.from_tensor_slices((rng.normal(size=(32, 3)).astype(np.float32),
                                               rng.normal(size=(32, 1)).astype(np.float32))).repeat().batch(8)
    callbacks = [khvd.callbacks.BroadcastGlobalVariablesCallback(0), khvd.callbacks.MetricAverageCallback(),
                 khvd.callbacks.LearningRateWarmupCallback(initial_lr=0.05 * khvd.size(), warmup_epochs=2)]
    history = model.fit(data, steps_per_epoch=4, epochs=3, callbacks=callbacks, verbose=0)
    for v in model.trainable_variables:
        everyone = khvd.allgather(v[tf.newaxis]).numpy()
        for other in everyone[1:]:
            np.testing.assert_array_equal(other, everyone[0])
    losses = khvd.allgather(tf.constant([history.history["loss"]], tf.float64)).numpy()
    np.testing.assert_allclose(losses, np.repeat(losses[:1], khvd.size(), axis=0))
    np.testing.assert_allclose(float(model.optimizer.learning_rate.numpy()), 0.05 * khvd.size(), rtol=1e-6)


@pytest.mark.parametrize("in_function", [False, True])
@pytest.mark.parametrize("average", [False, True])
def test_distributed_gradient_tape_backward_passes_per_step(hvd, in_function, average):
    """backward_passes_per_step=3: gradient() returns this rank's sum of the
    passes so far, on every 3rd pass the sum averaged over the ranks (over 3
    as well with average_aggregated_gradients), and tape.apply_gradients
    applies on that pass only, eagerly and inside tf.function."""
    passes = 3
    w = tf.Variable([0.0, 0.0])
    opt = tf.keras.optimizers.SGD(1.0)

    def step(p):
        x = tf.stack([float(hvd.rank() + 1), tf.cast(p, tf.float32) + 1.0])
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(w * x)
        tape = hvd.DistributedGradientTape(tape, backward_passes_per_step=passes,
                                           average_aggregated_gradients=average)
        grads = tape.gradient(loss, [w])
        tape.apply_gradients(opt, zip(grads, [w]))
        return grads[0]

    step = tf.function(step) if in_function else step
    applied = np.zeros(2)
    for p in range(2 * passes):
        got = step(tf.constant(p)).numpy()
        first = p - p % passes
        local = np.array([(p % passes + 1) * (hvd.rank() + 1), sum(q + 1 for q in range(first, p + 1))])
        if p % passes == passes - 1:
            want = np.array([passes * (hvd.size() + 1) / 2, local[1]]) / (passes if average else 1)
            applied -= want
        else:
            want = local
        np.testing.assert_allclose(got, want, rtol=1e-6)
        np.testing.assert_allclose(w.numpy(), applied, rtol=1e-6)
        assert int(opt.iterations.numpy()) == p + 1


def test_gradient_aggregation_frees_the_variables(hvd):
    """The sums of backward_passes_per_step live as long as the variables
    they are for: a model dropped after training with aggregation is
    freed, and a new one gets sums of its own."""
    def train_once():
        w = tf.Variable([1.0, 2.0])
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(w * w)
        tape = hvd.DistributedGradientTape(tape, backward_passes_per_step=2)
        np.testing.assert_allclose(tape.gradient(loss, [w])[0].numpy(), [2.0, 4.0])
        return weakref.ref(w)

    first = train_once()
    gc.collect()
    assert first() is None, "the variable is still referenced after its tape and model are gone"
    train_once()  # fresh sums: the first pass's gradient alone, not added to the first model's
