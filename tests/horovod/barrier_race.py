"""The clocks of Horovod's test_global_barrier_op: each rank starts its clock
when the allreduce before the barrier returns, rank 0 sleeps 1 s, then all
call hvd.barrier(); prints each rank's start (monotonic) and the time its
barrier took. A rank whose start is later than rank 0's by more than the
barrier's release latency sees less than the sleep.

    PYTHONPATH=build/python:build/python/horovod_compat \
        build/src/launcher/edtrun -np 2 /usr/bin/python3 tests/horovod/barrier_race.py
"""
import time, torch
from datetime import datetime
import horovod.torch as hvd
hvd.init()
for rep in range(4):
    i = 0
    while hvd.allreduce_(torch.IntTensor([int(hvd.is_initialized())]), None, 'is_init{}_{}'.format(rep, i), hvd.Sum) != hvd.size():
        i += 1
    t0 = datetime.now(); m0 = time.monotonic()
    if hvd.rank() == 0:
        time.sleep(1)
    hvd.barrier()
    dt = (datetime.now() - t0).total_seconds()
    print(f"rank {hvd.rank()} rep {rep} start {m0:.6f} barrier_time {dt:.6f}", flush=True)
