"""MNIST's IDX file format (http://yann.lecun.com/exdb/mnist/): a big-endian
header (magic: two zero bytes, the type code 0x08 for unsigned bytes, the
number of dimensions; then each dimension as a 32-bit integer) and the raw
bytes. Files may be gzip-compressed (name ending in .gz)."""

import gzip
import mmap
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
    """The array in the IDX file `path` (or `path`.gz), writable. A plain
    file is mapped copy-on-write, not read: a worker that joins a running
    job has its data at once, pages come from the page cache as they are
    used, and a write stays private to the process. (As with any mapped
    file, the file must not shrink while the array is in use.)"""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as f:
            shape, start = _header(f, path)
            body = bytearray(int(np.prod(shape)))
            got = _read_into(f, body)
            _check_size(path, shape, got, len(f.read(1)) > 0)
        return np.frombuffer(body, dtype=np.uint8).reshape(shape)
    with open(path, "rb") as f:
        shape, start = _header(f, path)
        count = int(np.prod(shape))
        size = os.fstat(f.fileno()).st_size
        _check_size(path, shape, min(size - start, count), size - start > count)
        if count == 0:
            return np.zeros(shape, dtype=np.uint8)
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    return np.frombuffer(mapped, dtype=np.uint8, count=count, offset=start).reshape(shape)


def _header(f, path):
    """(shape, offset of the body) from an IDX header, or ValueError naming what is wrong."""
    head = f.read(4)
    if len(head) < 4 or head[0] != 0 or head[1] != 0:
        raise ValueError("%s: not an IDX file (bad magic number)" % path)
    if head[2] != 0x08:
        raise ValueError("%s: IDX element type 0x%02x is not unsigned byte (0x08)" % (path, head[2]))
    dims = f.read(4 * head[3])
    if len(dims) != 4 * head[3]:
        raise ValueError("%s: the header ends inside its %d dimensions" % (path, head[3]))
    return struct.unpack(">%dI" % head[3], dims), 4 + len(dims)


def _check_size(path, shape, got, extra):
    count = int(np.prod(shape))
    if got != count or extra:
        raise ValueError("%s: header says shape %s (%d bytes) but the file holds %s bytes"
                         % (path, list(shape), count, "more" if extra else got))


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
