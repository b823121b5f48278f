"""Runs one of Horovod's own test files (v0.28.1's test/parallel/
test_torch.py, test_tensorflow.py, test_tensorflow_keras.py,
test_tensorflow2_keras.py, pinned unmodified in tests/third_party/horovod;
--test names it) as Horovod runs it, `horovodrun -np N pytest FILE`, here
with edtrun and the horovod compatibility package, and compares the outcome
with the list of what edt does not cover (--not-covered: not_covered.txt
for test_torch.py, not_covered_<file>.txt for the others; the same lists as
docs/python.md's "Not covered"). The TensorFlow files run under the Python
of edt's venv: the runner starts pytest with its own interpreter.

A test's outcome is the worst over the ranks (failed > skipped > passed).
The run fails when a test fails that is not listed, or when a listed test
passes (the list must shrink with the features). Tests in racy.txt assert
on wall-clock time across ranks, which the OS's scheduling decides: their
outcome is printed with the reason and does not decide the run. It prints
the counts and every failure or skip with its reason.

A test that hangs fails the run with stacks rather than at ctest's limit
without a word: pytest-timeout's thread method dumps the rank's stacks and
ends it (a Python-level alarm would wait for the rank to leave native code),
and past --deadline the whole suite's ranks print their Python stacks
(stack_dump.py) and native ones (gdb) before the run is killed.

    run_test_torch.py --edtrun build/src/launcher/edtrun --np 2
"""
import argparse
import collections
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
PINNED = os.path.join(HERE, "..", "third_party", "horovod", "test", "parallel")
RANK_ORDER = {"passed": 0, "skipped": 1, "failed": 2}


def read_not_covered(path):
    """{test name: reason} from lines 'test_name: reason' (# comments)."""
    listed = {}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                name, _, reason = line.partition(":")
                listed[name.strip()] = reason.strip()
    return listed


def outcomes_of(xml_path):
    """{test name: (outcome, message)} of one rank's junit file."""
    out = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome, message = "failed", (child.get("message") or "").splitlines()[0:1]
                message = message[0] if message else ""
                break
            if child.tag == "skipped":
                outcome, message = "skipped", child.get("message") or ""
        out[case.get("name")] = (outcome, message[:160])
    return out


def print_slowest(xml_path, count=10):
    """The `count` tests that took longest on one rank, for keeping CI time
    in check."""
    cases = [(float(c.get("time") or 0), c.get("name")) for c in ET.parse(xml_path).getroot().iter("testcase")]
    total = sum(t for t, _ in cases)
    print("slowest of %d tests (%.0f s in all, on %s):" % (len(cases), total, os.path.basename(xml_path)))
    for seconds, name in sorted(cases, reverse=True)[:count]:
        print("  %6.1f s  %s" % (seconds, name))


def run_suite(edtrun, np, timeout, deadline, results_dir, test="test_torch.py"):
    """Runs the suite; past `deadline` seconds it prints every rank's stacks
    (Python's through stack_dump.py, native ones through gdb when installed)
    and the output so far, and kills the run."""
    command = [edtrun, "-np", str(np), "/bin/sh", "-c",
               "exec %s -m pytest -q -p no:cacheprovider -p stack_dump --timeout %d --timeout-method thread "
               "--junitxml=%s/rank$HOROVOD_RANK.xml %s" % (sys.executable, timeout, results_dir, test)]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", EDT_STACK_DIR=results_dir,
               PYTHONPATH=os.pathsep.join([HERE] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    suite = subprocess.Popen(command, cwd=PINNED, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, start_new_session=True)
    try:
        output, _ = suite.communicate(timeout=deadline)
        return suite.returncode, output
    except subprocess.TimeoutExpired:
        print("the suite ran past %d s; the ranks' stacks follow" % deadline)
        dump_stacks(suite.pid, results_dir)
        os.killpg(suite.pid, signal.SIGKILL)
        output, _ = suite.communicate()
        print(output[-12000:])
        return None, output


def dump_stacks(launcher_pid, results_dir):
    ranks = [p for p in psutil.Process(launcher_pid).children(recursive=True) if "pytest" in " ".join(p.cmdline())]
    for rank in ranks:
        rank.send_signal(signal.SIGUSR2)
    time.sleep(2)
    for name in sorted(os.listdir(results_dir)):
        if name.startswith("stacks-"):
            with open(os.path.join(results_dir, name)) as f:
                print("==== %s\n%s" % (name, f.read()[-8000:]))
    if shutil.which("gdb"):
        for rank in ranks:
            native = subprocess.run(["gdb", "-batch", "-p", str(rank.pid), "-ex", "thread apply all bt 15"],
                                    capture_output=True, text=True, timeout=60)
            threads = native.stdout[native.stdout.find("\nThread "):]
            print("==== native stacks of %d\n%s" % (rank.pid, threads[-8000:]))


def merge(per_rank):
    merged = {}
    for outcomes in per_rank:
        for name, (outcome, message) in outcomes.items():
            if name not in merged or RANK_ORDER[outcome] > RANK_ORDER[merged[name][0]]:
                merged[name] = (outcome, message)
    return merged


def report(merged, listed, racy, np, test="test_torch.py"):
    missing = sorted(n for n in set(listed) | set(racy) if n not in merged)
    for name in sorted(set(racy) & set(merged)):
        outcome, message = merged.pop(name)
        print("  racy    %s: %s (%s) -- %s" % (name, outcome, message or "no message", racy[name]))
    counts = collections.Counter(outcome for outcome, _ in merged.values())
    print("Horovod v0.28.1 %s at -np %d: %d passed, %d failed, %d skipped (%d tests)"
          % (test, np, counts["passed"], counts["failed"], counts["skipped"], len(merged)))
    unexpected = sorted(n for n, (o, _) in merged.items() if o == "failed" and n not in listed)
    stale = sorted(n for n, (o, _) in merged.items() if o == "passed" and n in listed)
    for name, (outcome, message) in sorted(merged.items()):
        if outcome != "passed":
            print("  %-7s %s: %s" % (outcome, name, listed.get(name) or message))
    for name in unexpected:
        print("UNEXPECTED FAILURE (not in the not-covered list): %s: %s" % (name, merged[name][1]))
    for name in stale:
        print("PASSES BUT LISTED AS NOT COVERED (remove it from the list): %s" % name)
    for name in missing:
        print("LISTED BUT NOT IN THE SUITE: %s" % name)
    return not unexpected and not stale and not missing


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--edtrun", required=True)
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--test", default="test_torch.py", help="the file of test/parallel to run")
    p.add_argument("--timeout", type=int, default=120, help="seconds per test (pytest-timeout)")
    p.add_argument("--deadline", type=int, default=420,
                   help="seconds for the whole suite, after which the ranks' stacks are printed")
    p.add_argument("--not-covered", help="default: not_covered.txt, or not_covered_<file>.txt beside it")
    p.add_argument("--racy", help="default: racy.txt for test_torch.py, else none")
    args = p.parse_args()
    torch = args.test == "test_torch.py"
    args.not_covered = args.not_covered or os.path.join(
        HERE, "not_covered.txt" if torch else "not_covered_%s.txt" % os.path.splitext(args.test)[0])
    args.racy = args.racy or (os.path.join(HERE, "racy.txt") if torch else None)
    args.edtrun = os.path.abspath(args.edtrun)
    listed = read_not_covered(args.not_covered)
    racy = read_not_covered(args.racy) if args.racy else {}
    with tempfile.TemporaryDirectory(prefix="edt-horovod-tests-") as results:
        returncode, output = run_suite(args.edtrun, args.np, args.timeout, args.deadline, results, args.test)
        if returncode is None:
            return 1
        files = [os.path.join(results, f) for f in sorted(os.listdir(results)) if f.endswith(".xml")]
        if len(files) != args.np:
            sys.stdout.write(output[-12000:])
            print("expected a result file from each of %d ranks, found %d" % (args.np, len(files)))
            return 1
        ok = report(merge(outcomes_of(f) for f in files), listed, racy, args.np, args.test)
        print_slowest(files[0])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
