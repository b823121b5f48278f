"""The mounts a test's edtd leaves under its directory.

edtd keeps each container's writable dirs and each volume on a loop-mounted
disk of its own (docs/security.md, "Disk space and files"), mounted on the
host so that it outlives an edtd restart. A test that removes its
directory without deleting everything first (it failed, or it keeps its
volumes) would leave those mounts and their loop devices behind:
unmount_under() detaches every mount below a directory, deepest first.
"""

import ctypes
import os

MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


def mounts_under(path):
    """The mount points below `path` (not `path` itself), deepest first."""
    top = os.path.realpath(path).rstrip("/") + "/"
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            # Field 5 is the mount point, with spaces and the like as \\ooo.
            point = line.split()[4].encode().decode("unicode_escape")
            if point.startswith(top):
                points.append(point)
    return sorted(points, key=len, reverse=True)


def unmount_under(path):
    """Detaches every mount below `path`; returns how many there were."""
    points = mounts_under(path)
    for point in points:
        _libc.umount2(point.encode(), MNT_DETACH)
    return len(points)
