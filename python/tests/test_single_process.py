"""A script started without edtrun is a job of one rank, as with Horovod."""

import os
import subprocess
import sys
import textwrap


def test_plain_python_is_a_job_of_one(hvd):
    if hvd.rank() != 0:
        return  # one subprocess is enough; it talks to no other rank
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EDT_", "HOROVOD_"))}
    script = textwrap.dedent("""
        import torch
        import edt.torch as hvd
        hvd.init()
        assert (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size()) == (0, 1, 0, 1)
        assert hvd.allreduce(torch.arange(4.0)).tolist() == [0.0, 1.0, 2.0, 3.0]
        assert hvd.allgather(torch.ones(2, 3)).shape == (2, 3)
        model = torch.nn.Linear(3, 1)
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                       named_parameters=model.named_parameters())
        model(torch.ones(1, 3)).sum().backward()
        opt.step()
        hvd.shutdown()
        assert not hvd.is_initialized()
        print("single-process ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "single-process ok" in out.stdout
