#!/usr/bin/env python3
# Benchmark: from a preemption notice to a committed checkpoint with `gpuhost run`, for a ~1 GB
# torch.save checkpoint, and how much of that time is gpuhost's own (the anchor is torch.save
# itself: the trainer cannot be faster than its own save).
#
# The trainer is tests/integration/trainers/torch_trainer.py under Debian's python3-torch with a
# --state-mb buffer (default 1000 MB) and no periodic checkpoints. `--drill preempt@T/120`
# delivers a notice with a 120 s deadline (AWS spot's two minutes); gpuhost sends SIGUSR1, the
# trainer saves at the end of its step (torch.save in place), gpuhost waits for the file to
# settle (--settle), CRC-checks and hashes every byte, journals the commit (fsync) and stops the
# trainer. Times: the journal's notice, checkpoint_committed and save_completed records; the
# trainer's "save requested" / "saved" lines, time-stamped as gpuhost echoes them. The
# validation alone is timed again afterwards with `gpuhost verify` (page cache warm).
#
# Usage: bench/notice_to_commit.py [BUILD_DIR] [STATE_MB] [SETTLE_SECONDS,...]
#        (default build/linux, 1000 and 2, gpuhost's default settle; "2,0.5" runs twice)
import os
import subprocess
import sys
import threading
import time

from run_journal import (DEBIAN_PYTHON, TORCH_TRAINER, first, fresh_dir, gpuhost_bin, host_conditions, read_journal,
                         when)

NOTICE_AT = 20  # seconds after the trainer starts: torch import and the buffer's allocation first


def read_lines(stream, stamps):
    for raw in stream:
        line = raw.decode(errors="replace").strip()
        now = time.time()
        if line.startswith("save requested") and "requested" not in stamps:
            stamps["requested"] = now
        elif line.startswith("saved ") and "saved" not in stamps:
            stamps["saved"] = now
            stamps["path"] = line.split(" ")[1]


def one_run(binary, state_mb, settle):
    work = fresh_dir("notice_to_commit")
    env = dict(os.environ, GPUHOST_HOME=os.path.join(work, "home"), NO_COLOR="1")
    ckpt = os.path.join(work, "ckpt")
    command = [binary, "run", "--name", "notice", "--checkpoints", ckpt, "--cloud", "none", "--settle", str(settle),
               "--drill", "preempt@%d/120" % NOTICE_AT, "--",
               DEBIAN_PYTHON, TORCH_TRAINER, "--state-mb", str(state_mb), "--every", "0", "--steps", "100000000",
               "--step-time", "0.05", "--out", ckpt]
    stamps = {}
    with open(os.path.join(work, "gpuhost.log"), "wb") as log:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=log)
        reader = threading.Thread(target=read_lines, args=(proc.stdout, stamps))
        reader.start()
        code = proc.wait()
        reader.join()
    if code != 75 or "saved" not in stamps:
        sys.exit("gpuhost run exited %d (expected 75 after saving); see %s/gpuhost.log" % (code, work))

    records = read_journal(os.path.join(work, "home", "jobs", "notice", "journal.jsonl"))
    notice = first(records, "notice")
    committed = first(records, "checkpoint_committed", after=notice)
    completed = first(records, "save_completed", after=notice)
    t0 = when(notice)
    verify_start = time.monotonic()
    subprocess.run([binary, "verify", committed["path"]], check=True, stdout=subprocess.DEVNULL)
    verify_s = time.monotonic() - verify_start
    save_s = stamps["saved"] - stamps["requested"]
    share_s = when(committed) - stamps["saved"]
    print("settle %g s, checkpoint %s, %.2f GB" % (settle, os.path.basename(committed["path"]),
                                                  committed["size_bytes"] / 1e9))
    print("  notice -> committed        %7.2f s  (save_completed.duration_ms %d; deadline 120 s)"
          % (when(committed) - t0, completed["duration_ms"]))
    print("    notice -> save begins    %7.2f s  (the trainer ends its step)" % (stamps["requested"] - t0))
    print("    torch.save               %7.2f s  (anchor)" % save_s)
    print("    saved -> committed       %7.2f s  gpuhost: settle %g s + scan interval slack + validate/hash + journal;"
          " ratio %.2f of torch.save" % (share_s, settle, share_s / save_s))
    print("    of which validation      %7.2f s  (gpuhost verify on the same file afterwards, cache warm)" % verify_s)
    print("    gpuhost without settle   %7.2f s  ratio %.2f of torch.save" % (share_s - settle, (share_s - settle) / save_s))


def main():
    binary = gpuhost_bin(sys.argv)
    state_mb = float(sys.argv[2]) if len(sys.argv) > 2 else 1000.0
    settles = [float(s) for s in (sys.argv[3] if len(sys.argv) > 3 else "2").split(",")]
    print(host_conditions())
    for settle in settles:
        one_run(binary, state_mb, settle)


if __name__ == "__main__":
    main()
