"""An unmodified Horovod script's imports and environment."""

import os


def test_import_horovod_torch_is_edt(hvd):
    import horovod
    import horovod.torch as horovod_hvd
    from horovod.common.exceptions import HorovodInternalError
    import edt.torch
    assert horovod.__version__.endswith("+edt")
    assert horovod_hvd.allreduce is edt.torch.allreduce
    assert HorovodInternalError is edt.torch.HorovodInternalError
    assert horovod_hvd.rank() == edt.torch.rank()


def test_horovod_environment_matches(hvd):
    assert int(os.environ["HOROVOD_RANK"]) == hvd.rank()
    assert int(os.environ["HOROVOD_SIZE"]) == hvd.size()
    assert int(os.environ["HOROVOD_LOCAL_RANK"]) == hvd.local_rank()
    assert os.environ["HOROVOD_HOSTNAME"]


def test_fallback_finder_defers_to_a_real_horovod(tmp_path, monkeypatch):
    """The finder appended by edt-horovod-fallback.pth comes after sys.path:
    a real horovod on sys.path wins."""
    import importlib
    import sys
    from edt import _horovod_fallback
    real = tmp_path / "horovod"
    real.mkdir()
    (real / "__init__.py").write_text("REAL = True\n")
    saved = {k: v for k, v in sys.modules.items() if k == "horovod" or k.startswith("horovod.")}
    for k in saved:
        del sys.modules[k]
    monkeypatch.setattr(sys, "path", [str(tmp_path)] + [p for p in sys.path if "horovod_compat" not in p])
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    _horovod_fallback.install()
    try:
        assert importlib.import_module("horovod").REAL
        del sys.modules["horovod"]
        monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(tmp_path)])
        assert importlib.import_module("horovod").__version__.endswith("+edt")
    finally:
        for k in [k for k in sys.modules if k == "horovod" or k.startswith("horovod.")]:
            del sys.modules[k]
        sys.modules.update(saved)


def _python_with(pythonpath, code):
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EDT_", "HOROVOD_"))}
    env["PYTHONPATH"] = pythonpath
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def test_horovod_is_found_where_only_the_edt_package_is_on_the_path(tmp_path):
    """As edtd sets up its containers: PYTHONPATH names the edt package's
    directory only, yet an unmodified `import horovod.torch` works, and a
    real Horovod on the path still wins."""
    import edt
    import site
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(edt.__file__)))
    compat = package_dir
    if not site.ENABLE_USER_SITE:
        # A virtual environment that does not see the system's packages
        # (the PyTorch 2 one) reads no usercustomize: there the compatibility
        # directory goes on PYTHONPATH too (docs/python.md, "Not covered").
        compat += os.pathsep + os.path.join(package_dir, "horovod_compat")
    found = _python_with(compat, "import horovod.torch, horovod; print(horovod.__version__)")
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip().endswith("+edt"), found.stdout
    real = tmp_path / "horovod"
    real.mkdir()
    (real / "__init__.py").write_text("__version__ = 'real'\n")
    wins = _python_with(package_dir + os.pathsep + str(tmp_path), "import horovod; print(horovod.__version__)")
    assert wins.returncode == 0 and wins.stdout.strip() == "real", (wins.stdout, wins.stderr)
