#!/usr/bin/env python3
# Soak: the chaos test of `gpuhost run` (tests/integration/test_run_chaos.py) with a kill quota
# far above the CI one, then its counts. Anchor: the target the issue sets — at least 1000 kills
# of trainer and supervisor with 0 invalid resumes, 0 overlapping attempts, 0 lost commits and no
# process left after a round. Every round's checks are the test's own assertions, so a violation
# fails the run with the round, seed and log; the summary lines are the test's.
#
# Usage: bench/chaos_soak.py [BUILD_DIR] [KILLS]   (default build/linux and 1000; a third of the
#        kills go to the supervisor). GPUHOST_CHAOS_SEED=N replays one seed.
import os
import subprocess
import sys
import time

from run_journal import REPO, gpuhost_bin


def main(argv):
    binary = gpuhost_bin(argv)
    kills = int(argv[2]) if len(argv) > 2 else 1000
    env = dict(os.environ, GPUHOST_BIN=binary, GPUHOST_CHAOS_KILLS=str(kills),
               GPUHOST_CHAOS_SUPERVISOR_KILLS=str(kills // 3),
               GPUHOST_TEST_TMP=os.path.join(REPO, "build", "bench", "chaos-soak"), PYTHONDONTWRITEBYTECODE="1")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "unittest", "-v", "test_run_chaos"],
                          cwd=os.path.join(REPO, "tests", "integration"), env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    lines = (proc.stdout + proc.stderr).splitlines()
    summary = [line for line in lines if line.startswith("chaos summary") or line.startswith("  ")]
    print("\n".join(summary) if summary else "\n".join(lines[-60:]))
    print("soak: %d kills asked, %.0f s, %s" % (kills, elapsed, "passed" if proc.returncode == 0 else "FAILED"))
    if proc.returncode != 0:
        print("\n".join(lines[-80:]))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv))
