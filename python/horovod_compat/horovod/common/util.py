"""horovod.common.util's helpers that scripts and Horovod's tests import."""


def is_version_greater_equal_than(ver, target):
    """Whether version string `ver` is at least `target`."""
    from packaging import version
    if any(not isinstance(s, str) for s in (ver, target)):
        raise ValueError("is_version_greater_equal_than takes two version strings; got %r and %r" % (ver, target))
    return version.parse(ver) >= version.parse(target)
