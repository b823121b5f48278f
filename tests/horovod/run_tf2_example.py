"""Runs one of Horovod's TensorFlow 2 examples, pinned unmodified in
tests/third_party/horovod/examples, on every rank of an edtrun job, with
MNIST supplied offline:

    edtrun -np 2 python3 tests/horovod/run_tf2_example.py [--max-steps N] EXAMPLE.py [ARGS...]

Keras's mnist.load_data() checks the SHA-256 of the real mnist.npz and
downloads it again on a mismatch, and no Debian or PyPI package installs
the real file, so the one change a user without network access would make
is made here instead of in the example: load_data returns edt's synthetic
MNIST (edt.datasets.mnist_synthetic, the same on every rank) in MNIST's
shapes and types. Everything else is the example's own code, run as its
__main__.

--max-steps N caps what the example's `dataset.take(steps)` takes, for a
test: tensorflow2_mnist.py's 10000 // size() steps take about 0.6 s each
on two shared cores, 50 minutes at -np 2.
"""

import os
import runpy
import sys
import tempfile

import tensorflow as tf

from edt.datasets import idx, mnist_synthetic

TRAIN = 2000  # the examples repeat and shuffle the data set: a few thousand images serve any step count
TEST = 500


def synthetic_load_data(path="mnist.npz"):
    """keras.datasets.mnist.load_data's result, ((x_train, y_train),
    (x_test, y_test)), uint8, from edt's synthetic MNIST."""
    with tempfile.TemporaryDirectory() as out:
        mnist_synthetic.write_dataset(out, TRAIN, TEST, seed=0)
        return tuple((idx.read(os.path.join(out, images)), idx.read(os.path.join(out, labels)))
                     for images, labels in ((idx.TRAIN_IMAGES, idx.TRAIN_LABELS),
                                            (idx.TEST_IMAGES, idx.TEST_LABELS)))


def cap_steps(max_steps):
    take = tf.data.Dataset.take

    def capped(self, count, name=None):
        return take(self, min(int(count), max_steps), name=name)
    tf.data.Dataset.take = capped


def main():
    args = sys.argv[1:]
    if args[:1] == ["--max-steps"] and len(args) > 1:
        cap_steps(int(args[1]))
        args = args[2:]
    if not args:
        sys.exit("usage: run_tf2_example.py [--max-steps N] EXAMPLE.py [ARGS...]")
    tf.keras.datasets.mnist.load_data = synthetic_load_data
    sys.argv = args
    runpy.run_path(args[0], run_name="__main__")


if __name__ == "__main__":
    main()
