"""edt's TensorFlow ops on whatever TensorFlow runs this (docs/images.md,
"edt inside any image"): one build of _edt_tf_ops.so, loaded into each
TensorFlow 2.13 or later. Run under edtrun with 2 or more ranks:

    PYTHONPATH=build/python build/src/launcher/edtrun -np 2 VENV/bin/python3 tests/images/tf_probe.py

An allreduce eagerly, then allgather, broadcast, allreduce, alltoall and
reducescatter inside one tf.function (graph ops, with their shape
functions); each rank checks its results and prints its TensorFlow's version.
"""
import tensorflow as tf
import edt.tensorflow as hvd

hvd.init()
r, n = hvd.rank(), hvd.size()
eager = hvd.allreduce(tf.constant([float(r + 1)] * 4), op=hvd.Sum)


@tf.function
def step(x):
    g = hvd.allgather(tf.reshape(x, [1, 4]))
    b = hvd.broadcast(x, root_rank=1)
    a = hvd.allreduce(x, op=hvd.Average)
    out = hvd.alltoall(tf.range(2 * n, dtype=tf.int64) + 10 * r)
    s = hvd.reducescatter(tf.ones([n, 2]) * (r + 1), op=hvd.Sum)
    return g, b, a, out, s


g, b, a, out, s = step(tf.constant([float(r)] * 4))
assert eager.numpy().tolist() == [n * (n + 1) / 2] * 4, eager
assert g.shape == (n, 4) and g.numpy()[:, 0].tolist() == list(range(n)), g
assert b.numpy().tolist() == [1.0] * 4, b
assert a.numpy().tolist() == [sum(range(n)) / n] * 4, a
assert out.numpy().tolist() == [2 * r + 10 * k + i for k in range(n) for i in range(2)], out
assert s.numpy().tolist() == [[n * (n + 1) / 2] * 2], s
print("rank %d: TensorFlow %s, ok" % (r, tf.__version__))
