"""The communication part of one synthetic-benchmark step, alone: the
all-reduce of a tf.keras.applications model's gradients (tensors of its
trainable variables' shapes), inside a tf.function, as each peer of
bench/tf_synthetic/run does it in a step:

  --peer edt   one hvd.allreduce per gradient, as DistributedGradientTape
               makes them (run under horovodrun with edt's compatibility
               package); the engine fuses them
  --peer mwms  one ReplicaContext.all_reduce(SUM) of the whole list inside
               strategy.run, as the Keras optimizer does under
               MultiWorkerMirroredStrategy, CommunicationOptions(RING)

Prints the median milliseconds per all-reduce of the whole set (rank 0),
with the gradients' count and bytes: with a step's time from the
benchmark, how much of a step the all-reduce takes on each peer.
"""
import argparse
import os
import statistics
import time

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "-1")
import tensorflow as tf  # noqa: E402
from tensorflow.keras import applications  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--peer", choices=["edt", "mwms"], required=True)
parser.add_argument("--model", default="MobileNetV3Small")
parser.add_argument("--warmup", type=int, default=5)
parser.add_argument("--iters", type=int, default=20)
args = parser.parse_args()

# The runtime first: MultiWorkerMirroredStrategy must be made before any tensor is.
if args.peer == "edt":
    import horovod.tensorflow as hvd
    hvd.init()
    rank = hvd.rank()
else:
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.RING)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    rank = strategy.cluster_resolver.task_id

shapes = [v.shape for v in getattr(applications, args.model)(weights=None).trainable_variables]
grads = [tf.ones(s) for s in shapes]


@tf.function
def reduce_all():
    if args.peer == "edt":
        return [hvd.allreduce(g) for g in grads]
    return strategy.run(lambda: tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, grads))


times = []
for i in range(args.warmup + args.iters):
    start = time.perf_counter()
    out = reduce_all()
    _ = [o.numpy() for o in tf.nest.flatten(out)[:1]]  # the results are there: the collective has finished
    if i >= args.warmup:
        times.append((time.perf_counter() - start) * 1e3)
if rank == 0:
    nbytes = sum(s.num_elements() * 4 for s in shapes)
    print("%s: %d gradients, %.1f MB" % (args.model, len(shapes), nbytes / 1e6))
    print("Gradient allreduce ms: %.1f (median of %d; min %.1f, max %.1f)"
          % (statistics.median(times), len(times), min(times), max(times)), flush=True)
