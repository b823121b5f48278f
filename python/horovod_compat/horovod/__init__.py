"""Horovod's package names on edt: `import horovod.torch as hvd` runs on
edt.torch. Selected only where no real Horovod is importable (see
docs/python.md)."""

__version__ = "0.28.1+edt"
