"""The test harness itself: a missing dependency fails under CI=true (naming it) and skips
otherwise, and scripts/count-tests.py counts test cases the way each runner reports them."""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
COUNT_TESTS = os.path.join(HERE, "..", "..", "scripts", "count-tests.py")

NEEDY_MODULE = textwrap.dedent('''
    import unittest
    from gpuhost_test import missing, needs

    @needs(False, "frobnicator")
    class NeedsATool(unittest.TestCase):
        def test_uses_it(self):
            pass

    class NeedsItInside(unittest.TestCase):
        def test_checks_for_it(self):
            missing("the frobnicator daemon")

        @needs(True, "something here")
        def test_has_what_it_needs(self):
            pass
''')


class MissingDependencies(unittest.TestCase):
    def run_module(self, ci):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "needy_module.py"), "w") as f:
                f.write(NEEDY_MODULE)
            env = dict(os.environ, CI=ci, PYTHONPATH=HERE, GPUHOST_BIN=os.environ.get("GPUHOST_BIN", "gpuhost"))
            return subprocess.run([sys.executable, "-m", "unittest", "-v", "needy_module"], cwd=d, env=env,
                                  capture_output=True, text=True, timeout=60)

    def test_under_ci_a_missing_dependency_fails_naming_it(self):
        proc = self.run_module("true")
        self.assertNotEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("missing: frobnicator", proc.stderr)
        self.assertIn("missing: the frobnicator daemon", proc.stderr)
        self.assertIn("FAILED (failures=1, errors=1)", proc.stderr)

    def test_outside_ci_a_missing_dependency_skips_with_the_reason(self):
        proc = self.run_module("false")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("skipped 'missing: frobnicator", proc.stderr)
        self.assertIn("OK (skipped=2)", proc.stderr)


LAST_TEST_LOG = textwrap.dedent('''\
    Start testing: Dec 03 09:52 UTC
    ----------------------------------------------------------
    1/4 Testing: store_test
    1/4 Test: store_test
    Command: "/b/store_test" "--gtest_brief=1"
    Output:
    ----------------------------------------------------------
    [==========] 12 tests from 3 test suites ran. (10 ms total)
    [  PASSED  ] 10 tests.
    [  SKIPPED ] 1 test, listed below:
    [  SKIPPED ] Sm4.Vector
    [  FAILED  ] 1 test, listed below:
    [  FAILED  ] S3.Signs
    <end of output>
    Test Failed.
    ----------------------------------------------------------
    2/4 Testing: run_cli
    2/4 Test: run_cli
    Command: "/usr/bin/python3" "-m" "unittest" "-v" "test_run_cli"
    Output:
    ----------------------------------------------------------
    test_a (test_run_cli.A.test_a) ... ok
    test_b (test_run_cli.A.test_b) ... skipped 'missing: fio (scripts/install-deps.sh installs it)'
    Ran 5 tests in 3.0s

    OK (skipped=1)
    <end of output>
    Test Passed.
    ----------------------------------------------------------
    3/4 Testing: dashboard_browser
    3/4 Test: dashboard_browser
    Command: "/usr/bin/node" "/src/tests/browser/dashboard.test.js"
    Output:
    ----------------------------------------------------------
    ok 1 - draws # SKIP the Python trainer runs on Linux only
    # pass 4
    # fail 0
    # cancelled 0
    # skipped 1
    # todo 0
    <end of output>
    Test Passed.
    ----------------------------------------------------------
    4/4 Testing: bench_crosscheck
    4/4 Test: bench_crosscheck
    Command: "/usr/bin/python3" "-m" "unittest" "-v" "x"
    Output:
    ----------------------------------------------------------
    Ran 2 tests in 9.0s

    FAILED (failures=1)
    <end of output>
    Test Failed.
    ----------------------------------------------------------
    4/4 Testing: bench_crosscheck
    4/4 Test: bench_crosscheck
    Command: "/usr/bin/python3" "-m" "unittest" "-v" "x"
    Output:
    ----------------------------------------------------------
    Ran 2 tests in 9.0s

    OK
    <end of output>
    Test Passed.
    ----------------------------------------------------------
    5/6 Testing: run_slurm
    5/6 Test: run_slurm
    Command: "/usr/bin/python3" "-m" "unittest" "-v" "test_run_slurm"
    Output:
    ----------------------------------------------------------
    setUpClass (test_run_slurm.Slurm) ... ERROR
    test_x (test_run_slurm.Other.test_x) ... ok

    Ran 1 test in 1.0s

    FAILED (errors=1)
    <end of output>
    Test Failed.
    ----------------------------------------------------------
    5/5 Testing: crashed
    5/5 Test: crashed
    Command: "/b/crashed"
    Output:
    ----------------------------------------------------------
    Segmentation fault
    <end of output>
    Test Failed.
    ----------------------------------------------------------
''')


class CountingTestCases(unittest.TestCase):
    def test_counts_cases_of_each_runner_and_lists_skips(self):
        with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
            f.write(LAST_TEST_LOG)
        self.addCleanup(os.remove, f.name)
        proc = subprocess.run([sys.executable, COUNT_TESTS, f.name], capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        lines = proc.stdout.splitlines()
        # gtest 10 + 1 failed + 1 skipped; unittest 4 + 1 skipped; node 4 + 1 skipped; the
        # crosscheck's second run (2 passed) replaces its first; a class whose setUpClass failed
        # is one failure beside the test that passed; the crash is one failure.
        self.assertEqual(lines[0], "passed=21 failed=3 skipped=3 entries=6")
        self.assertIn("skipped: store_test: Sm4.Vector: ", lines)
        self.assertIn("skipped: run_cli: test_run_cli.A.test_b: missing: fio (scripts/install-deps.sh installs it)",
                      lines)
        self.assertIn("skipped: dashboard_browser: draws: the Python trainer runs on Linux only", lines)


if __name__ == "__main__":
    unittest.main()
