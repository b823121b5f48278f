"""horovod.runner on edt: the launcher is edtrun (docs/launcher.md); only
the helpers that training and test code import from here exist."""
