"""A synthetic, learnable MNIST-like data set in MNIST's IDX files.

Each of the 10 classes is a fixed glyph of a few strokes (drawn from a seed);
each image draws its class's glyph with jittered stroke ends, a random shift
and thickness, and noise, as handwriting varies around a shape. A small CNN
separates the classes well above 95% within a few epochs, as on MNIST.

    python3 -m edt.datasets.mnist_synthetic --out DIR [--train 10000] [--test 2000] [--seed 0]
"""

import argparse
import os
import sys

import numpy as np

from edt.datasets import idx

SIZE = 28
CLASSES = 10


def _glyphs(rng):
    """Per class, 3 to 4 strokes as (x0, y0, x1, y1) in the 20x20 centre."""
    return [rng.uniform(6, 22, size=(rng.integers(3, 5), 4)) for _ in range(CLASSES)]


def _render(strokes, rng):
    image = np.zeros((SIZE + 4, SIZE + 4), dtype=np.float32)
    t = np.linspace(0.0, 1.0, 24, dtype=np.float32)[:, None]
    shift = rng.integers(-2, 3, size=2)
    for x0, y0, x1, y1 in strokes + rng.normal(0, 1.2, size=strokes.shape):
        points = np.hstack([x0 + (x1 - x0) * t, y0 + (y1 - y0) * t]) + shift + 2
        points = np.clip(np.rint(points).astype(np.int64), 1, SIZE + 2)
        np.add.at(image, (points[:, 1], points[:, 0]), 1.0)
    # Thicken: a 3x3 box filter, then a random stroke weight.
    thick = sum(image[1 + dy:SIZE + 3 + dy, 1 + dx:SIZE + 3 + dx] for dy in (-1, 0, 1) for dx in (-1, 0, 1))
    thick = np.minimum(thick[1:SIZE + 1, 1:SIZE + 1] * rng.uniform(0.5, 1.2), 1.0)
    thick += rng.normal(0, 0.08, size=thick.shape)
    return (np.clip(thick, 0, 1) * 255).astype(np.uint8)


def generate(count, glyphs, rng):
    labels = rng.integers(0, CLASSES, size=count).astype(np.uint8)
    images = np.stack([_render(glyphs[label], rng) for label in labels])
    return images, labels


def write_dataset(out, train=10000, test=2000, seed=0):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(seed)
    glyphs = _glyphs(rng)
    for images_name, labels_name, count in ((idx.TRAIN_IMAGES, idx.TRAIN_LABELS, train),
                                            (idx.TEST_IMAGES, idx.TEST_LABELS, test)):
        images, labels = generate(count, glyphs, rng)
        idx.write(os.path.join(out, images_name), images)
        idx.write(os.path.join(out, labels_name), labels)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m edt.datasets.mnist_synthetic", description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="directory for the four IDX files")
    p.add_argument("--train", type=int, default=10000, help="training images (default 10000)")
    p.add_argument("--test", type=int, default=2000, help="test images (default 2000)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.train <= 0 or args.test <= 0:
        p.error("--train and --test must be positive")
    write_dataset(args.out, args.train, args.test, args.seed)
    print("wrote %d training and %d test images to %s" % (args.train, args.test, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
