"""Makes `import horovod` find edt's compatibility package where the edt
package is reached through PYTHONPATH (the build tree, a prefix outside
/usr: what edtd puts on the PYTHONPATH of the containers it makes), where
edt-horovod-fallback.pth, read only in site directories, is not.

Python's site module imports `usercustomize` at start-up. The finder it
installs is appended to the END of sys.meta_path, so a real Horovod that
the image carries is always imported first (see edt/_horovod_fallback.py);
EDT_HOROVOD_COMPAT=0 turns it off.
"""

try:
    import edt._horovod_fallback as _fallback
    _fallback.install()
except Exception:  # a broken edt must not break every Python start
    pass
