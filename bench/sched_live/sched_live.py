#!/usr/bin/python3
"""The scheduler's timings on a real edtd with real elastic jobs
(tests/sched/live_scenario.py: 8 simulated GPUs, 3 teams guaranteed 4/2/2,
an elastic edt.torch job on team tb's cluster eb):

  - idle GPU -> taken by a waiting elastic cluster (goal <= 1 s): from the
    first GET /gpus sample (every 20 ms) that shows the GPUs idle to the
    first that shows them held again;
  - guaranteed request -> GPUs granted, drain included (goal <= 2 s): from
    `edt cluster create a1` to a1's containers holding their GPUs, eb's
    borrowed containers drained at their job's next commit meanwhile;
  - the most GPUs any team held over its limit in a GET /teams sample every
    100 ms (goal 0), committed steps lost and survivors restarted (goal 0).

    sudo python3 bench/sched_live/sched_live.py --build build [--runs N]

Prints the figures; asserts nothing (tests/sched/sched_live_test.py checks
the guarantees). Results: bench/sched_live/RESULTS.md.
"""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for path in ("scripts", "tests", "tests/sched"):
    sys.path.insert(0, os.path.join(ROOT, path))
import live_scenario  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--runs", type=int, default=1)
    args = p.parse_args()
    for run in range(1, args.runs + 1):
        result = live_scenario.run(args.build)
        for name, value in result.figures.items():
            print("run %d: %-60s %s" % (run, name, "%.3f" % value if isinstance(value, float) else value))
        for problem in result.problems[:10]:
            print("run %d: problem: %s" % (run, problem))
    return 0


if __name__ == "__main__":
    sys.exit(main())
