#!/usr/bin/env python3
"""Counts test cases, not CTest entries, from CTest's LastTest.log (every entry's full output).

Usage: scripts/count-tests.py LASTTEST_LOG
Prints "passed=N failed=N skipped=N entries=N" on the first line, then one line per skipped case
("skipped: ENTRY: CASE: REASON"). Each entry's output is read by what ran it:
  - GoogleTest: "[  PASSED  ] N tests.", "[  FAILED  ] N tests", "[  SKIPPED ] N tests"
  - Python unittest -v: "Ran N tests", then "OK (skipped=K)" or "FAILED (failures=F, errors=E, ...)"
  - node:test (TAP): "# pass N", "# fail N", "# skipped N", "# cancelled N", "# todo N"
An entry run again by `ctest --repeat` counts by its last run. An entry none of these describes
counts as one case. An entry CTest failed whose own summary shows no failure (a crash after the
summary, a timeout, a missing summary) adds one failure, so the count never reports less trouble
than CTest does.
"""
import re
import sys

ENTRY = re.compile(r"^\d+/\d+ Test: (.+)$", re.M)


def entries(log):
    """(name, command, output, ctest_passed) for each entry in the log."""
    starts = [m for m in ENTRY.finditer(log)]
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(log)
        block = log[m.end():end]
        command = re.search(r"^Command: (.*)$", block, re.M)
        out_start = block.find("Output:\n")
        out_end = block.find("<end of output>")
        output = block[out_start:out_end] if out_start >= 0 and out_end >= 0 else block
        yield m.group(1).strip(), command.group(1) if command else "", output, "Test Passed." in block


def count_gtest(output):
    ran = re.findall(r"^\[==========\] (\d+) tests? from \d+ test suites? ran", output, re.M)
    if not ran:
        return None
    total = int(ran[-1])
    failed = sum(int(n) for n in re.findall(r"^\[  FAILED  \] (\d+) tests?, listed below", output, re.M))
    skipped = sum(int(n) for n in re.findall(r"^\[  SKIPPED \] (\d+) tests?", output, re.M))
    skips = [(name, "") for name in re.findall(r"^\[  SKIPPED \] (\S+\.\S+)", output, re.M)]
    if skipped and not skips:  # --gtest_brief=1 prints the count only
        skips = [("%d GoogleTest case%s" % (skipped, "" if skipped == 1 else "s"),
                  "each says why when the binary runs without --gtest_brief")]
    return total - failed - skipped, failed, skipped, skips


def count_unittest(output):
    ran = re.findall(r"^Ran (\d+) tests? in ", output, re.M)
    if not ran:
        return None
    total = int(ran[-1])
    verdict = re.findall(r"^(OK|FAILED)(?: \((.*)\))?$", output, re.M)
    fields = {}
    if verdict:
        for part in (verdict[-1][1] or "").split(","):
            if "=" in part:
                key, value = part.strip().split("=", 1)
                fields[key] = int(value)
    failed = fields.get("failures", 0) + fields.get("errors", 0) + fields.get("unexpected successes", 0)
    if verdict and verdict[-1][0] == "FAILED" and failed == 0:
        failed = 1
    skipped = fields.get("skipped", 0)
    # A setUpClass (or module fixture) that fails or skips is one error or skip that "Ran" does not
    # count: "setUpClass (module.Class) ... ERROR".
    fixtures = re.findall(r"^(?:setUpClass|tearDownClass|setUpModule|tearDownModule) \([\w.]+\) \.\.\. "
                          r"(ERROR|skipped)", output, re.M)
    in_ran = (failed - fixtures.count("ERROR")) + (skipped - fixtures.count("skipped"))
    skips = re.findall(r"^(\S+) \(([\w.]+)\) \.\.\. skipped '(.*)'$", output, re.M)
    # Python 3.11 writes "name (module.Class.name)", older ones "name (module.Class)".
    skips = [(ident if ident.endswith("." + name) else ident + "." + name, reason) for name, ident, reason in skips]
    return max(total - in_ran, 0), failed, skipped, skips


def count_tap(output):
    passed = re.findall(r"^# pass (\d+)$", output, re.M)
    if not passed:
        return None

    def last(key):
        found = re.findall(r"^# %s (\d+)$" % key, output, re.M)
        return int(found[-1]) if found else 0
    skips = re.findall(r"^ok \d+ - (.*?) # SKIP ?(.*)$", output, re.M)
    return int(passed[-1]), last("fail") + last("cancelled") + last("todo"), last("skipped"), skips


def main(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        log = f.read()
    totals = [0, 0, 0]
    skipped_cases = []
    # An entry run more than once (ctest --repeat until-pass) counts by its last run.
    last = {}
    for entry in entries(log):
        last[entry[0]] = entry
    n = len(last)
    for name, command, output, ctest_passed in last.values():
        if "unittest" in command:
            counted = count_unittest(output)
        elif "node" in command and ".js" in command:
            counted = count_tap(output)
        else:
            counted = count_gtest(output)
        if counted is None:
            counted = (1, 0, 0, []) if ctest_passed else (0, 1, 0, [])
        passed, failed, skipped, skips = counted
        if not ctest_passed and failed == 0:
            failed = 1
            passed = max(passed - 1, 0)
        totals[0] += passed
        totals[1] += failed
        totals[2] += skipped
        skipped_cases += [(name, case, reason) for case, reason in skips]
    print("passed=%d failed=%d skipped=%d entries=%d" % (totals[0], totals[1], totals[2], n))
    for name, case, reason in skipped_cases:
        print("skipped: %s: %s: %s" % (name, case, reason))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
