#!/usr/bin/env python3
# Benchmark: how long `gpuhost run` takes to restart a trainer that died, from the exit to the
# next start (journal times child_exited -> child_started, --backoff 0), resuming from a ~1 GB
# checkpoint and from a small one. That span holds gpuhost's whole restart path: reaping the
# child, validating what it left (a torn checkpoint is rejected), journaling (fsync), choosing
# the resume point, re-validating it in full (CRC-32 of every entry and the content hash: every
# byte is read again, as gpuhost never trusts a checkpoint it has not just checked) and spawning
# the trainer. For scale it also prints what the trainer itself takes to be back (interpreter,
# torch import and torch.load, child_started -> its "resumed from" line).
#
# The trainer is tests/integration/trainers/torch_trainer.py under Debian's python3-torch
# (--state-mb 1000, then 0), a checkpoint every 20 steps; `--drill kill@T` SIGKILLs its process
# tree once at least one checkpoint is committed (often in the middle of the next save). The
# run is ended (SIGKILL of gpuhost) once the resumed trainer has printed "resumed from".
#
# Usage: bench/restart_latency.py [BUILD_DIR] [KILL_AT_SECONDS]   (default build/linux and 14)
import os
import signal
import subprocess
import sys
import threading
import time

from run_journal import (DEBIAN_PYTHON, TORCH_TRAINER, first, fresh_dir, gpuhost_bin, host_conditions, read_journal,
                         when)


def read_lines(stream, stamps):
    for raw in stream:
        line = raw.decode(errors="replace").strip()
        if line.startswith("resumed from") and "resumed" not in stamps:
            stamps["resumed"] = time.time()


def one_run(binary, state_mb, kill_at):
    work = fresh_dir("restart_latency")
    env = dict(os.environ, GPUHOST_HOME=os.path.join(work, "home"), NO_COLOR="1")
    ckpt = os.path.join(work, "ckpt")
    journal = os.path.join(work, "home", "jobs", "restart", "journal.jsonl")
    command = [binary, "run", "--name", "restart", "--checkpoints", ckpt, "--cloud", "none", "--settle", "0.5",
               "--backoff", "0", "--keep", "2", "--drill", "kill@%g" % kill_at, "--",
               DEBIAN_PYTHON, TORCH_TRAINER, "--state-mb", str(state_mb), "--every", "20", "--steps", "100000000",
               "--step-time", "0.05", "--out", ckpt]
    stamps = {}
    with open(os.path.join(work, "gpuhost.log"), "wb") as log:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=log)
        reader = threading.Thread(target=read_lines, args=(proc.stdout, stamps))
        reader.start()
        deadline = time.monotonic() + kill_at + 120
        while "resumed" not in stamps and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)  # the trainer goes with it (PR_SET_PDEATHSIG)
        proc.wait()
        reader.join()

    records = read_journal(journal)
    exited = first(records, "child_exited")
    started = first(records, "child_started", after=exited) if exited else None
    if not started or "resumed" not in stamps:
        sys.exit("no restart with a resume seen (state %g MB); try a larger KILL_AT; see %s/gpuhost.log"
                 % (state_mb, work))
    resumed = next(r for r in records if r["type"] == "checkpoint_committed" and "ck-%d" % r["seq"] == started["resume_from"])
    between = records[records.index(exited) + 1:records.index(started)]
    rejected = sum(1 for r in between if r["type"] == "checkpoint_rejected")
    scheduled = first(records, "restart_scheduled", after=exited)
    print("state %g MB: resumed from %s (%s, %.3f GB); exit %s; %d torn checkpoint(s) rejected on the way"
          % (state_mb, started["resume_from"], os.path.basename(resumed["path"]), resumed["size_bytes"] / 1e9,
             exited["description"], rejected))
    print("  child_exited -> child_started  %7.3f s   (gpuhost's restart, --backoff 0)"
          % (when(started) - when(exited)))
    print("    exit -> restart_scheduled    %7.3f s   (reap, final scan of what it left, journal)"
          % (when(scheduled) - when(exited)))
    print("    -> child_started             %7.3f s   (re-validation of %s in full, spawn, journal)"
          % (when(started) - when(scheduled), started["resume_from"]))
    print("  child_started -> 'resumed from' %6.3f s   (the trainer: python, import torch, torch.load)"
          % (stamps["resumed"] - when(started)))
    return when(started) - when(exited), stamps["resumed"] - when(started)


def main():
    binary = gpuhost_bin(sys.argv)
    kill_at = float(sys.argv[2]) if len(sys.argv) > 2 else 14.0
    print(host_conditions())
    big = one_run(binary, 1000, kill_at)
    small = one_run(binary, 0, kill_at)
    print("restart with a 1 GB checkpoint: gpuhost %.3f s = %.2f of the trainer's own resume (%.3f s);"
          " small checkpoint: gpuhost %.3f s" % (big[0], big[0] / big[1], big[1], small[0]))


if __name__ == "__main__":
    main()
