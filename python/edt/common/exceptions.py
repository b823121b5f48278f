"""The exceptions of Horovod's API, under the same names."""


class HorovodInternalError(RuntimeError):
    """A collective failed: a peer died, the job was aborted, or the ranks
    disagreed about a request. Elastic training rolls back to the last
    commit when it sees one."""


class HostsUpdatedInterrupt(RuntimeError):
    """Membership changed; elastic training re-forms the job at the next
    commit. `skip_sync` is True when the state needs no broadcast."""

    def __init__(self, skip_sync=False):
        super().__init__("hosts updated")
        self.skip_sync = skip_sync
