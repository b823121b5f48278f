"""Horovod's examples/tensorflow2/tensorflow2_synthetic_benchmark.py (v0.28.1,
pinned in tests/third_party/horovod) as a TensorFlow user writes it with
TensorFlow's own MultiWorkerMirroredStrategy instead of Horovod: the peer
bench/tf_synthetic/run measures edt against. One process per worker, each
told its place by TF_CONFIG (the driver writes one per worker).

What is the example's, line for line:
  - the model: getattr(keras.applications, --model)(weights=None), SGD(0.01);
  - the data: one tf.random.uniform batch of --batch-size 224x224x3 images
    and int64 labels in [0, 999), per worker (the example's batch is per
    worker too), made once and reused every step;
  - the step: a tf.function around GradientTape, per-example
    sparse_categorical_crossentropy, tape.gradient, opt.apply_gradients;
  - the timing: one first step, --num-warmup-batches untimed, then
    --num-iters timeit runs of --num-batches-per-iter steps; images/s per
    worker = batch * batches / time; the same "Total img/sec on N CPU(s)"
    line (rank 0 only), which the driver reads for both peers.
What MultiWorkerMirroredStrategy does instead of Horovod's calls:
  - hvd.init(): TF_CONFIG and the strategy's gRPC collective runtime;
  - DistributedGradientTape: the strategy's own gradient all-reduce inside
    apply_gradients (the optimizer sums gradients over the replicas with
    the strategy's batched, packed collective ops); the loss is divided by
    the number of replicas so that the sum is Horovod's average;
  - broadcast_variables after the first step: variables made under
    strategy.scope() start equal on every worker (the strategy broadcasts
    their initial values from worker 0).
Its settings are TensorFlow's recommended ones for CPU workers:
CommunicationOptions(implementation=RING) (NCCL is for GPUs; on CPU AUTO
resolves to RING as well) and bytes_per_pack=0 (packing left to the
strategy), set by --implementation and --bytes-per-pack.
"""
import argparse
import os
import timeit

import numpy as np

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "-1")  # the example's --no-cuda, before TensorFlow loads
import tensorflow as tf  # noqa: E402
from tensorflow.keras import applications  # noqa: E402

parser = argparse.ArgumentParser(description="TensorFlow Synthetic Benchmark on MultiWorkerMirroredStrategy",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--model", type=str, default="ResNet50", help="model to benchmark")
parser.add_argument("--batch-size", type=int, default=32, help="input batch size (per worker)")
parser.add_argument("--num-warmup-batches", type=int, default=10, help="warm-up batches, not timed")
parser.add_argument("--num-batches-per-iter", type=int, default=10, help="batches per benchmark iteration")
parser.add_argument("--num-iters", type=int, default=10, help="benchmark iterations")
parser.add_argument("--implementation", choices=["RING", "AUTO"], default="RING",
                    help="CommunicationOptions(implementation=...): RING, TensorFlow's choice for CPU")
parser.add_argument("--bytes-per-pack", type=int, default=0, help="CommunicationOptions(bytes_per_pack=...)")
args = parser.parse_args()

options = tf.distribute.experimental.CommunicationOptions(
    bytes_per_pack=args.bytes_per_pack,
    implementation=getattr(tf.distribute.experimental.CommunicationImplementation, args.implementation))
strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
resolver = strategy.cluster_resolver
rank, size = resolver.task_id, strategy.num_replicas_in_sync

with strategy.scope():
    model = getattr(applications, args.model)(weights=None)
    opt = tf.optimizers.SGD(0.01)

data = tf.random.uniform([args.batch_size, 224, 224, 3])
target = tf.random.uniform([args.batch_size, 1], minval=0, maxval=999, dtype=tf.int64)


def replica_step():
    with tf.GradientTape() as tape:
        probs = model(data, training=True)
        loss = tf.losses.sparse_categorical_crossentropy(target, probs) / size
    gradients = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(gradients, model.trainable_variables))


@tf.function
def benchmark_step():
    strategy.run(replica_step)


def log(s):
    if rank == 0:
        print(s, flush=True)


log("Model: %s" % args.model)
log("Batch size: %d" % args.batch_size)
log("Number of CPUs: %d" % size)
log("Communication: %s, bytes_per_pack %d" % (args.implementation, args.bytes_per_pack))

with tf.device("CPU"):
    log("Running warmup...")
    benchmark_step()
    timeit.timeit(benchmark_step, number=args.num_warmup_batches)

    log("Running benchmark...")
    img_secs = []
    for x in range(args.num_iters):
        time = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
        img_sec = args.batch_size * args.num_batches_per_iter / time
        log("Iter #%d: %.1f img/sec per CPU" % (x, img_sec))
        img_secs.append(img_sec)

    img_sec_mean = np.mean(img_secs)
    img_sec_conf = 1.96 * np.std(img_secs)
    log("Img/sec per CPU: %.1f +-%.1f" % (img_sec_mean, img_sec_conf))
    log("Total img/sec on %d CPU(s): %.1f +-%.1f" % (size, size * img_sec_mean, size * img_sec_conf))
