#!/usr/bin/env python3
# Benchmark: what `gpuhost advise` costs while it watches a busy job. Target (issue: the
# advisor): its sampling adds at most 0.5 % of one core, next to what the supervisor itself
# costs on the 60 s overhead benchmark (run_overhead.py), in the same run.
#
# The job is run_overhead.py's: tests/integration/trainers/stdlib_trainer.py with 200k weights
# under `gpuhost run`, one core busy, a checkpoint every 5-10 s, ended by a preempt drill. While
# it runs, `gpuhost advise overhead --seconds SECONDS` watches it: NVML every 500 ms through the
# fake NVML (tests/fake_nvml/scenarios/a100_busy_training.json: this host has no GPU; a real
# driver's NVML costs more per call) and the trainer's /proc at both ends. Figures: advise's own
# CPU time and peak RSS from wait4's rusage; the supervisor's from its supervisor_stopped record.
#
# Usage: bench/advise_overhead.py [BUILD_DIR] [SECONDS]   (default build/linux and 60)
import os
import subprocess
import sys
import time

from run_journal import STDLIB_TRAINER, first, fresh_dir, gpuhost_bin, host_conditions, read_journal, when

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    binary = gpuhost_bin(sys.argv)
    build = os.path.dirname(binary)
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
    work = fresh_dir("advise_overhead")
    env = dict(os.environ, GPUHOST_HOME=os.path.join(work, "home"), NO_COLOR="1")
    run = [binary, "run", "--name", "overhead", "--checkpoints", os.path.join(work, "ckpt"), "--cloud", "none",
           "--keep", "3", "--settle", "0.5", "--drill", "preempt@%g/60" % (seconds + 10), "--",
           sys.executable, STDLIB_TRAINER, "--steps", "100000000", "--size", "200000", "--every", "250",
           "--out", os.path.join(work, "ckpt")]
    print(host_conditions())
    with open(os.path.join(work, "gpuhost.log"), "wb") as log:
        supervisor = subprocess.Popen(run, env=env, stdout=subprocess.DEVNULL, stderr=log)
        time.sleep(5)  # the trainer runs
        advise_env = dict(env, GPUHOST_NVML_LIBRARY=os.path.join(build, "fake_nvml", "libnvidia-ml.so.1"),
                          GPUHOST_FAKE_NVML_SCENARIO=os.path.join(HERE, "..", "tests", "fake_nvml", "scenarios",
                                                                  "a100_busy_training.json"))
        print("gpuhost advise overhead --seconds %g ..." % seconds, flush=True)
        advise = subprocess.Popen([binary, "advise", "overhead", "--seconds", "%d" % seconds, "--json"], env=advise_env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        started = time.monotonic()
        _, status, usage = os.wait4(advise.pid, 0)
        watched = time.monotonic() - started
        advise.returncode = os.waitstatus_to_exitcode(status)
        if advise.returncode != 0:
            sys.exit("gpuhost advise exited %d: %s" % (advise.returncode, advise.stderr.read().decode()))
        code = supervisor.wait()
    if code != 75:
        sys.exit("gpuhost run exited %d (expected 75, preempted by the drill); see %s/gpuhost.log" % (code, work))
    records = read_journal(os.path.join(work, "home", "jobs", "overhead", "journal.jsonl"))
    begin, end = first(records, "supervisor_started"), first(records, "supervisor_stopped")
    wall = when(end) - when(begin)
    supervisor_share = end["supervisor_cpu_ms"] / 1000 / wall
    advise_cpu = usage.ru_utime + usage.ru_stime
    advise_share = advise_cpu / watched
    print("advise watched %.1f s: CPU %.3f s = %.3f %% of one core (target <= 0.5 %%: %s), peak RSS %.1f MB"
          % (watched, advise_cpu, 100 * advise_share, "meets" if advise_share <= 0.005 else "misses",
             usage.ru_maxrss / 1024))
    print("supervisor over %.1f s: %.3f %% of one core; advise / supervisor CPU share ratio %.2f"
          % (wall, 100 * supervisor_share, advise_share / supervisor_share if supervisor_share else float("nan")))


if __name__ == "__main__":
    main()
