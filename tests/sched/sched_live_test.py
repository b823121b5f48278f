#!/usr/bin/python3
"""The scheduler's guarantees on a real edtd with real elastic jobs
(live_scenario.py: 8 simulated GPUs, 3 teams guaranteed 4/2/2):

  - no team holds more than its limit in any sample (GET /teams every 100 ms);
  - a queued cluster shows its position (edt cluster create, edt cluster get);
  - a guaranteed request gets its GPUs by draining only borrowed containers;
  - a waiting elastic cluster takes GPUs that go idle;
  - 0 committed steps lost, 0 survivors restarted (the workers' own logs).

    tests/sched/sched_live_test.py --build DIR

Prints the timings (bench/sched_live reports them; none is asserted).
Exits 1 naming each guarantee that did not hold. Runs edtd (bubblewrap: root).
"""

import argparse
import sys

import live_scenario


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build")
    args = p.parse_args()
    result = live_scenario.run(args.build)
    for name, value in result.figures.items():
        print("sched_live_test: %s: %s" % (name, "%.2f" % value if isinstance(value, float) else value))
    for problem in result.problems[:20]:
        print("sched_live_test: FAILED: " + problem, file=sys.stderr)
    return 1 if result.problems else 0


if __name__ == "__main__":
    sys.exit(main())
