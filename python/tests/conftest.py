"""Every test module runs on every rank of a job started by edtrun (see
CMakeLists.txt): tests call collectives, so all ranks run the same tests in
the same order. `hvd` is edt.torch, initialised once per process."""

import pytest


@pytest.fixture(scope="session")
def hvd():
    import edt.torch as hvd
    hvd.init()
    yield hvd
    hvd.shutdown()
