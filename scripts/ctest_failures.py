#!/usr/bin/python3
"""Prints the end of each failed test's output from ctest's last run, so that
the end of a long `make test` log says why, not only which, tests failed
(ctest's --output-on-failure prints it where the test ended, often thousands
of lines earlier).

  scripts/ctest_failures.py BUILD_DIR [--lines N]
"""
import argparse
import os
import re
import sys

BLOCK = re.compile(r"^\d+/\d+ Test: (?P<name>\S+)\n.*?^Output:\n-+\n(?P<output>.*?)<end of output>\n"
                   r"Test time =\s*(?P<seconds>\S+) sec\n-+\n(?P<result>[^\n]*)", re.M | re.S)


def failed_outputs(log_text):
    """(name, seconds, result line, output) of each test whose result is not a pass. A test that
    passes by its PASS_REGULAR_EXPRESSION or WILL_FAIL (the layering probes) says "Test Pass Reason"."""
    for m in BLOCK.finditer(log_text):
        if not m.group("result").startswith("Test Pass"):
            yield m.group("name"), m.group("seconds"), m.group("result").strip(), m.group("output")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("build_dir")
    p.add_argument("--lines", type=int, default=40, help="the last N lines of each failed test's output")
    args = p.parse_args()
    path = os.path.join(args.build_dir, "Testing", "Temporary", "LastTest.log")
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError as e:
        print(f"ctest_failures: cannot read ctest's log {path}: {e.strerror}", file=sys.stderr)
        return 1
    for name, seconds, result, output in failed_outputs(text):
        lines = output.rstrip("\n").splitlines()[-args.lines:]
        print(f"===== {name}: {result} after {seconds} s; the last {len(lines)} lines of its output =====")
        for line in lines:
            print(line if len(line) <= 400 else line[:400] + " [...]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
