from edt.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt  # noqa: F401
