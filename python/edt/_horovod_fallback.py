"""Makes `import horovod` find edt's compatibility package, but only when
no real Horovod is importable.

Installed by edt-horovod-fallback.pth (make install). The finder is appended
to the END of sys.meta_path, so Python's normal search of sys.path runs
first and a real Horovod install always wins. EDT_HOROVOD_COMPAT=0 turns
the fallback off.
"""

import importlib.machinery
import os
import sys

COMPAT_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "horovod_compat")


class HorovodFallbackFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname != "horovod":
            return None  # submodules are found through the package's __path__
        return importlib.machinery.PathFinder.find_spec(fullname, [COMPAT_DIR])


def install():
    if os.environ.get("EDT_HOROVOD_COMPAT", "1") != "0" and HorovodFallbackFinder not in sys.meta_path:
        sys.meta_path.append(HorovodFallbackFinder)


if __name__ == "__main__":
    print(COMPAT_DIR)  # python3 -m edt._horovod_fallback: the directory to put on PYTHONPATH
