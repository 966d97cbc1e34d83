"""A deterministic stand-in trainer for gpuhost's integration and chaos tests. Standard library only.

The "model" is --size float64 weights. Step s (1-based) sets w[i] = w[i]*0.999 + sin(s*i)*1e-3 in
a fixed order, so a run resumed from an exact checkpoint ends with bit-identical weights.
Checkpoints are zip files shaped like torch.save's (ZIP_STORED): archive/data.pkl (pickle of
{"step", "count", "sha256"}), archive/version ("3"), archive/byteorder, archive/data/0 (the
weights as little-endian float64). On resume the checkpoint is verified (zip CRCs, entries, the
sha256 of the weights) and a line "OK <path> <step>" or "INVALID <path> <reason>" is appended to
--resume-log; an invalid one exits 3.

Save requests (SIGUSR1, SIGBREAK on Windows, or the file GPUHOST_SAVE_REQUEST / --save-request)
save at the end of the current step. SIGTERM ends the run after the current step with exit 143
(saving first with --save-on-term). Prints "step N" after each step.
"""
import argparse
import array
import hashlib
import io
import math
import os
import pickle
import signal
import sys
import time
import zipfile

EXIT_INVALID_CHECKPOINT = 3
EXIT_TERMINATED = 143

save_requested = False
stop_requested = False


def on_save_signal(signum, frame):
    global save_requested
    save_requested = True


def on_stop_signal(signum, frame):
    global stop_requested
    stop_requested = True


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--step-time", type=float, default=0.0, help="seconds to sleep per step")
    p.add_argument("--every", type=int, default=10, help="checkpoint every N steps (0: never)")
    p.add_argument("--out", default="checkpoints")
    p.add_argument("--size", type=int, default=4096, help="number of float64 weights")
    p.add_argument("--name-pattern", default="ckpt-{step:06d}.pt", help='e.g. "last.pt" to rewrite one file')
    p.add_argument("--write-mode", choices=["atomic", "inplace", "slow"], default="atomic")
    p.add_argument("--slow-chunk", type=int, default=2048, help="slow mode: bytes per write")
    p.add_argument("--slow-delay", type=float, default=0.005, help="slow mode: seconds between writes")
    p.add_argument("--resume", default=None, help="checkpoint to resume from (default GPUHOST_RESUME_FROM)")
    p.add_argument("--resume-log", default=None)
    p.add_argument("--save-request", default=None, help="request file (default GPUHOST_SAVE_REQUEST)")
    p.add_argument("--save-on-term", action="store_true")
    p.add_argument("--ignore-save-requests", action="store_true")
    p.add_argument("--ignore-term", action="store_true", help="ignore SIGTERM (tests the SIGKILL escalation)")
    p.add_argument("--final-state", default=None, help="write the final weights as hex here")
    p.add_argument("--pid-file", default=None)
    p.add_argument("--overlap-lock", default=None,
                   help="hold an exclusive lock on this file while running; when another trainer holds it "
                        "(two attempts of one job at once), append a line to FILE.overlaps")
    p.add_argument("--fail-at-step", type=int, default=None, help="exit 1 after this step")
    p.add_argument("--fail-once-marker", default=None, help="fail only while this file does not exist")
    p.add_argument("--print-metrics", action="store_true",
                   help='also print "train: step=N loss=X lr=Y" after each step (loss = 1/(1+step/10))')
    p.add_argument("--jsonl-metrics", action="store_true",
                   help='append {"step": N, "accuracy": A} to GPUHOST_METRICS_FILE after each step')
    return p.parse_args(argv)


def weights_bytes(weights):
    data = array.array("d", weights)
    if sys.byteorder != "little":
        data.byteswap()
    return data.tobytes()


def weights_from_bytes(raw):
    data = array.array("d")
    data.frombytes(raw)
    if sys.byteorder != "little":
        data.byteswap()
    return list(data)


def checkpoint_bytes(step, weights):
    raw = weights_bytes(weights)
    meta = {"step": step, "count": len(weights), "sha256": hashlib.sha256(raw).hexdigest()}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pickle.dumps(meta, protocol=2))
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/data/0", raw)
        z.writestr("archive/version", "3\n")
    return buffer.getvalue()


def write_checkpoint(args, step, weights):
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, args.name_pattern.format(step=step))
    content = checkpoint_bytes(step, weights)
    if args.write_mode == "atomic":
        temp = os.path.join(args.out, ".%s.%d.tmp" % (os.path.basename(path), os.getpid()))
        with open(temp, "wb") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    else:
        with open(path, "wb") as f:
            if args.write_mode == "inplace":
                f.write(content)
            else:
                for start in range(0, len(content), args.slow_chunk):
                    f.write(content[start:start + args.slow_chunk])
                    f.flush()
                    time.sleep(args.slow_delay)
    print("saved %s at step %d" % (path, step), flush=True)


def load_checkpoint(path):
    """(step, weights) from `path`; raises ValueError naming what is wrong."""
    try:
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
            if bad is not None:
                raise ValueError("CRC mismatch in " + bad)
            names = set(z.namelist())
            for needed in ("archive/data.pkl", "archive/version", "archive/data/0"):
                if needed not in names:
                    raise ValueError("missing entry " + needed)
            meta = pickle.loads(z.read("archive/data.pkl"))
            raw = z.read("archive/data/0")
    except (OSError, zipfile.BadZipFile, pickle.UnpicklingError, EOFError) as e:
        raise ValueError("%s: %s" % (type(e).__name__, e)) from e
    if hashlib.sha256(raw).hexdigest() != meta.get("sha256"):
        raise ValueError("weights sha256 does not match data.pkl")
    weights = weights_from_bytes(raw)
    if len(weights) != meta.get("count"):
        raise ValueError("weight count does not match data.pkl")
    return int(meta["step"]), weights


def append_line(path, line):
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def request_file_present(path):
    if path and os.path.exists(path):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        return True
    return False


def install_handlers(args):
    save_signal = getattr(signal, "SIGUSR1", None) or getattr(signal, "SIGBREAK", None)
    if save_signal is not None:
        signal.signal(save_signal, signal.SIG_IGN if args.ignore_save_requests else on_save_signal)
    signal.signal(signal.SIGTERM, signal.SIG_IGN if args.ignore_term else on_stop_signal)


def hold_overlap_lock(path):
    """An exclusive flock on `path` for the life of the process (the kernel drops it when the
    process dies, SIGKILL included). Failing to get it means another trainer of the same job runs
    right now: recorded, not fatal, so the harness sees every overlap."""
    if not path:
        return None
    import fcntl
    f = open(path, "a+")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        append_line(path + ".overlaps", "pid %d started while another trainer of this job held the lock" % os.getpid())
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)  # go on once the other is gone
    return f


def main(argv):
    global save_requested
    args = parse_args(argv)
    install_handlers(args)
    overlap_lock = hold_overlap_lock(args.overlap_lock)  # noqa: F841 (held until the process ends)
    if args.pid_file:
        with open(args.pid_file, "w") as f:
            f.write("%d\n" % os.getpid())
    request_file = None if args.ignore_save_requests else (args.save_request or os.environ.get("GPUHOST_SAVE_REQUEST"))
    resume = args.resume or os.environ.get("GPUHOST_RESUME_FROM") or None

    step = 0
    weights = [i / args.size for i in range(args.size)]
    if resume:
        try:
            step, weights = load_checkpoint(resume)
        except ValueError as e:
            append_line(args.resume_log, "INVALID %s %s" % (resume, e))
            print("invalid checkpoint %s: %s" % (resume, e), file=sys.stderr, flush=True)
            return EXIT_INVALID_CHECKPOINT
        if len(weights) != args.size:
            append_line(args.resume_log, "INVALID %s size %d != --size %d" % (resume, len(weights), args.size))
            return EXIT_INVALID_CHECKPOINT
        append_line(args.resume_log, "OK %s %d" % (resume, step))
        print("resumed from %s at step %d" % (resume, step), flush=True)

    while step < args.steps:
        step += 1
        for i in range(args.size):
            weights[i] = weights[i] * 0.999 + math.sin(step * i) * 1e-3
        if args.step_time > 0:
            time.sleep(args.step_time)
        print("step %d" % step, flush=True)
        if args.print_metrics:
            print("train: step=%d loss=%.6f lr=%.2e" % (step, 1.0 / (1.0 + step / 10.0), 1e-3), flush=True)
        if args.jsonl_metrics and os.environ.get("GPUHOST_METRICS_FILE"):
            append_line(os.environ["GPUHOST_METRICS_FILE"], '{"step": %d, "accuracy": %.4f}' % (step, step / (step + 1.0)))
        requested = save_requested or request_file_present(request_file)
        save_requested = False
        if requested:
            print("save requested at step %d" % step, flush=True)
        if requested or (args.every > 0 and step % args.every == 0):
            write_checkpoint(args, step, weights)
        if args.fail_at_step == step and not (args.fail_once_marker and os.path.exists(args.fail_once_marker)):
            if args.fail_once_marker:
                append_line(args.fail_once_marker, "failed at step %d" % step)
            print("failing at step %d" % step, file=sys.stderr, flush=True)
            return 1
        if stop_requested:
            if args.save_on_term and not requested and not (args.every > 0 and step % args.every == 0):
                write_checkpoint(args, step, weights)
            print("terminated at step %d" % step, flush=True)
            return EXIT_TERMINATED

    if args.final_state:
        with open(args.final_state, "w") as f:
            f.write(weights_bytes(weights).hex() + "\n")
    print("done at step %d" % step, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
