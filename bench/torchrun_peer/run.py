"""torch.distributed.run with a run-time fix for Debian's PyTorch 1.13 on
Python 3.11: Std.from_str("0") returns None there, because iterating an
IntFlag no longer yields its zero member; Std(int) does the right thing."""
import sys

from torch.distributed.elastic.multiprocessing import api


def _from_str(cls, vm):
    if ":" in vm:
        return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
    return cls(int(vm))


api.Std.from_str = classmethod(_from_str)

from torch.distributed import run  # noqa: E402  (after the fix)

if __name__ == "__main__":
    sys.exit(run.main())
