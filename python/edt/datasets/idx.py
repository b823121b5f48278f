"""MNIST's IDX file format (http://yann.lecun.com/exdb/mnist/): a big-endian
header (magic: two zero bytes, the type code 0x08 for unsigned bytes, the
number of dimensions; then each dimension as a 32-bit integer) and the raw
bytes. Files may be gzip-compressed (name ending in .gz)."""

import gzip
import os
import struct

import numpy as np

TRAIN_IMAGES = "train-images-idx3-ubyte"
TRAIN_LABELS = "train-labels-idx1-ubyte"
TEST_IMAGES = "t10k-images-idx3-ubyte"
TEST_LABELS = "t10k-labels-idx1-ubyte"
FILES = (TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS)


def write(path, array):
    array = np.ascontiguousarray(array, dtype=np.uint8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack(">BBBB", 0, 0, 0x08, array.ndim))
        f.write(struct.pack(">%dI" % array.ndim, *array.shape))
        f.write(array.tobytes())
    os.replace(tmp, path)  # readers never see half a file


def read(path):
    """The array in the IDX file `path` (or `path`.gz), writable, read
    straight into its own buffer (no copy of the file's bytes)."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        head = f.read(4)
        if len(head) < 4 or head[0] != 0 or head[1] != 0:
            raise ValueError("%s: not an IDX file (bad magic number)" % path)
        if head[2] != 0x08:
            raise ValueError("%s: IDX element type 0x%02x is not unsigned byte (0x08)" % (path, head[2]))
        dims = f.read(4 * head[3])
        if len(dims) != 4 * head[3]:
            raise ValueError("%s: the header ends inside its %d dimensions" % (path, head[3]))
        shape = struct.unpack(">%dI" % head[3], dims)
        body = bytearray(int(np.prod(shape)))
        got = _read_into(f, body)
        extra = len(f.read(1))
    if got != len(body) or extra:
        raise ValueError("%s: header says shape %s (%d bytes) but the file holds %s bytes"
                         % (path, list(shape), len(body), "more" if extra else got))
    return np.frombuffer(body, dtype=np.uint8).reshape(shape)


def _read_into(f, buffer):
    """Fills `buffer` from `f` as far as the file goes; the bytes read."""
    view, got = memoryview(buffer), 0
    while got < len(buffer):
        n = f.readinto(view[got:])
        if not n:
            break
        got += n
    return got


def present(directory):
    return all(os.path.exists(os.path.join(directory, f)) or os.path.exists(os.path.join(directory, f + ".gz"))
               for f in FILES)
