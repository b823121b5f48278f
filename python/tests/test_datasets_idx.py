"""edt.datasets.idx: MNIST's IDX files read back as written, plain or
gzip-compressed, and every malformed file refused with the reason. No
collective: each rank checks its own files."""

import gzip

import numpy as np
import pytest

from edt.datasets import idx


def written(tmp_path, array):
    path = str(tmp_path / "data-idx3-ubyte")
    idx.write(path, array)
    return path


def test_round_trip_gives_a_writable_array(tmp_path):
    array = (np.arange(5 * 3 * 4) % 256).astype(np.uint8).reshape(5, 3, 4)
    back = idx.read(written(tmp_path, array))
    assert back.shape == (5, 3, 4) and back.dtype == np.uint8
    assert (back == array).all()
    assert back.flags.writeable  # torch.from_numpy takes it without a copy or a warning
    back[0, 0, 0] = 7
    assert idx.read(str(tmp_path / "data-idx3-ubyte"))[0, 0, 0] == 0  # the write stays out of the file


def test_an_empty_array_reads_back(tmp_path):
    back = idx.read(written(tmp_path, np.zeros((0, 28, 28), dtype=np.uint8)))
    assert back.shape == (0, 28, 28)


def test_gzip_file_is_found_by_the_plain_name(tmp_path):
    array = np.arange(10, dtype=np.uint8)
    plain = written(tmp_path, array)
    with open(plain, "rb") as f, gzip.open(plain + ".gz", "wb") as g:
        g.write(f.read())
    (tmp_path / "data-idx3-ubyte").unlink()
    assert (idx.read(plain) == array).all()


@pytest.mark.parametrize("damage, message", [
    (lambda raw: raw[:-1], "holds 23 bytes"),
    (lambda raw: raw + b"x", "holds more bytes"),
    (lambda raw: b"\x01" + raw[1:], "bad magic number"),
    (lambda raw: raw[:2] + b"\x09" + raw[3:], "element type 0x09"),
    (lambda raw: raw[:6], "header ends inside its 3 dimensions"),
    (lambda raw: b"", "bad magic number"),
])
def test_a_malformed_file_is_refused_with_its_reason(tmp_path, damage, message):
    path = written(tmp_path, np.zeros((2, 3, 4), dtype=np.uint8))
    with open(path, "rb") as f:
        raw = f.read()
    with open(path, "wb") as f:
        f.write(damage(raw))
    with pytest.raises(ValueError, match=message) as e:
        idx.read(path)
    assert path in str(e.value)
