"""Chaos test for `gpuhost run` (Linux): hundreds of random SIGKILLs of the trainer and of the
supervisor itself, many of them while a checkpoint is being written, and then:

  - zero resumes from an invalid checkpoint: every line of the trainer's resume log is "OK";
  - zero committed checkpoints lost: every checkpoint_committed in the journal is still on disk,
    `gpuhost verify` says valid with the committed content hash, and none was marked bad;
  - every checkpoint file left on disk is committed (nothing valid was missed);
  - the journal has no corrupt record and contiguous sequence numbers (torn tails, from a
    supervisor killed mid-append, are counted and must be repaired by the next supervisor);
  - the final weights of each interrupted run are bit-identical to an uninterrupted run's;
  - attempts never overlap: each trainer holds an exclusive lock on a file of its job while it
    runs (--overlap-lock) and records any time it found another trainer holding it;
  - no process of the job is left once its round ends.

The trainer is tests/integration/trainers/stdlib_trainer.py (deterministic, standard library)
with --write-mode slow: each checkpoint is written in small chunks with pauses, in place, so a
kill can land in the middle. The harness watches the checkpoint folder and times many kills to
land while a file is being written. Kills go to the trainer (pid from --pid-file, checked to be
a live trainer of this run) or to the `gpuhost run` process (a new one is then started for the
same job). The trainer is the supervisor's child in odd rounds (it dies with the supervisor,
PR_SET_PDEATHSIG) and a grandchild under a launcher shell, logging to its own file, in even ones
(it lives on, and the next supervisor must kill it by its run token). Each round is one job run
to the end; rounds repeat until the kill quota is met.

The seed is random and printed; rerun one with GPUHOST_CHAOS_SEED=N. GPUHOST_CHAOS_KILLS and
GPUHOST_CHAOS_SUPERVISOR_KILLS change the quota (defaults 200 and 60). No timing assertions:
timing only decides where kills land, and the assertions hold wherever they land.
"""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import unittest
import zlib

from gpuhost_test import BIN, IS_WINDOWS_BUILD, processes_with, tmp_dir

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINER = os.path.join(HERE, "trainers", "stdlib_trainer.py")

KILLS = int(os.environ.get("GPUHOST_CHAOS_KILLS", "200"))
SUPERVISOR_KILLS = int(os.environ.get("GPUHOST_CHAOS_SUPERVISOR_KILLS", "60"))

STEPS = 120
EVERY = 5
SIZE = 1024  # float64 weights: ~8.8 KB checkpoints, written in 1 KiB chunks 5 ms apart (~45 ms)
TRAINER_ARGS = ["--steps", str(STEPS), "--every", str(EVERY), "--size", str(SIZE), "--step-time", "0.002"]
ROUND_TIMEOUT = 180  # seconds for one round to finish once the kills stop

# Kill kinds and their weights: about 40 % of the kills go to the supervisor.
# "trainer_then_supervisor" kills the trainer and then, 0-30 ms later, the supervisor while it
# journals the exit, validates and commits, and restarts (where journal appends are densest).
ACTIONS = [("trainer_mid_write", 30), ("trainer_random", 20), ("supervisor_mid_write", 20),
           ("supervisor_random", 20), ("trainer_then_supervisor", 10)]


def read_journal(path):
    """Parses a journal.jsonl as doc/journal.md frames it: (records, corrupt_line_numbers, torn_tail_bytes)."""
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    last_complete = data.endswith(b"\n")
    if last_complete:
        lines.pop()  # the empty piece after the final newline
    records, corrupt, torn = [], [], 0
    for number, line in enumerate(lines, start=1):
        is_last = number == len(lines)
        record = None
        parts = line.split(b" ", 2)
        if len(parts) == 3 and parts[0].isdigit() and len(parts[1]) == 8:
            length, crc, body = int(parts[0]), parts[1], parts[2]
            if length == len(body) and ("%08x" % zlib.crc32(body)).encode() == crc:
                try:
                    value = json.loads(body)
                    if (isinstance(value, dict) and isinstance(value.get("seq"), int) and value["seq"] >= 1
                            and isinstance(value.get("time"), str) and value.get("type")):
                        record = value
                except ValueError:
                    pass
        if is_last and (not last_complete or record is None):
            torn = len(line) + (1 if last_complete else 0)
        elif record is None:
            corrupt.append(number)
        else:
            records.append(record)
    return records, corrupt, torn


def zip_complete(path):
    """True when the file ends with a zip end-of-central-directory record (the trainer writes it last)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            if size < 22:
                return False
            f.seek(size - 22)
            return f.read(4) == b"PK\x05\x06"
    except OSError:
        return False


class Stats:
    def __init__(self):
        # A trainer_then_supervisor action counts once as a trainer kill and once as supervisor_after_trainer.
        self.kills = {name: 0 for name, _ in ACTIONS if name != "trainer_then_supervisor"}
        self.kills["supervisor_after_trainer"] = 0
        self.trainer_torn = 0             # trainer kills that left a checkpoint verify rejects
        self.supervisor_during_write = 0  # supervisor kills while the trainer was writing one
        self.journal_torn_tails = 0       # supervisor kills that left a torn journal record
        self.rounds = 0
        self.child_starts = 0
        self.restarts = 0
        self.resumes = 0
        self.leftovers_killed = 0
        self.after_crash = 0
        self.rejected = 0
        self.commits = 0
        self.overlaps = 0          # a trainer started while another of its job ran (must stay 0)
        self.invalid_resumes = 0   # resumes from an invalid or uncommitted checkpoint (must stay 0)
        self.lost_commits = 0      # committed checkpoints gone, changed or marked bad (must stay 0)
        self.processes_left = 0    # processes of a finished round still alive (must stay 0)

    def total(self):
        return sum(self.kills.values())

    def supervisor(self):
        return self.kills["supervisor_mid_write"] + self.kills["supervisor_random"] + self.kills["supervisor_after_trainer"]


@unittest.skipIf(IS_WINDOWS_BUILD or not sys.platform.startswith("linux"), "Linux only: SIGKILL and /proc")
class RunChaos(unittest.TestCase):
    def setUp(self):
        seed_text = os.environ.get("GPUHOST_CHAOS_SEED")
        self.seed = int(seed_text) if seed_text else random.SystemRandom().randrange(1, 2**31)
        print("\nchaos seed %d (rerun with GPUHOST_CHAOS_SEED=%d)" % (self.seed, self.seed), flush=True)
        self.rng = random.Random(self.seed)
        self.base = tmp_dir("run_chaos")
        shutil.rmtree(self.base, ignore_errors=True)
        os.makedirs(self.base)
        self.stats = Stats()

    # -- the uninterrupted reference ------------------------------------------------------------

    def reference_state(self):
        out = os.path.join(self.base, "reference")
        state = os.path.join(self.base, "reference.state")
        proc = subprocess.run([sys.executable, TRAINER] + TRAINER_ARGS + ["--out", out, "--final-state", state],
                              capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(state, "rb") as f:
            return f.read()

    # -- one round: a fresh job run to the end under kills ---------------------------------------

    def start_supervisor(self, r):
        env = dict(os.environ, GPUHOST_HOME=r["home"], NO_COLOR="1")
        trainer = [sys.executable, TRAINER] + TRAINER_ARGS + [
            "--out", r["ckpt"], "--write-mode", "slow", "--slow-chunk", "1024",
            "--resume-log", r["resume_log"], "--pid-file", r["pid_file"], "--final-state", r["state"],
            "--overlap-lock", r["overlap_lock"]]
        if r["launcher"]:
            # The trainer runs under a launcher shell and writes its output to a file of its own:
            # when the supervisor dies, PR_SET_PDEATHSIG takes only the shell, and the trainer
            # lives on (no broken pipe either). The next supervisor must find and kill it by its
            # run token before it starts another one. (Not `exec`: the trainer must be a grandchild.)
            trainer = ["/bin/sh", "-c", '"$@" >>"%s" 2>&1; status=$?; exit $status' % r["trainer_log"],
                       "sh"] + trainer
        command = [BIN, "run", "--name", r["name"], "--checkpoints", r["ckpt"], "--cloud", "none",
                   "--settle", "0.05", "--backoff", "0.05", "--max-backoff", "0.05", "--max-restarts", "1000000",
                   "--crash-loop", "0", "--quiet", "--"] + trainer
        log = open(r["log"], "ab")
        try:
            return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        finally:
            log.close()

    def trainer_pid(self, r):
        """The pid in the pid file when it is a live trainer of this round, else None."""
        try:
            with open(r["pid_file"]) as f:
                pid = int(f.read().strip() or "0")
        except (OSError, ValueError):
            return None
        if pid <= 0:
            return None
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
            with open("/proc/%d/stat" % pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return None
        if state in ("Z", "X") or TRAINER.encode() not in argv or r["ckpt"].encode() not in argv:
            return None
        return pid

    def wait_new_trainer(self, r, sup, stale, timeout=60):
        """Waits for a trainer that is not in `stale`; None when the supervisor exits first."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            pid = self.trainer_pid(r)
            if pid is not None and pid not in stale:
                return pid
            if sup.poll() is not None:
                return None
            time.sleep(0.002)
        self.fail("no trainer started within %d s (round %d); log:\n%s" % (timeout, r["index"], self.log_tail(r)))

    def writing_now(self, r):
        """A checkpoint being written right now: incomplete and modified in the last 30 ms."""
        try:
            names = os.listdir(r["ckpt"])
        except OSError:
            return None
        now = time.time()
        for name in names:
            path = os.path.join(r["ckpt"], name)
            try:
                modified = os.stat(path).st_mtime
            except OSError:
                continue
            if now - modified < 0.03 and not zip_complete(path):
                return path
        return None

    def wait_for_write(self, r, sup, pid, delay):
        """Waits `delay`, then for a checkpoint write in progress; None if the trainer or supervisor ends first."""
        end_delay = time.monotonic() + delay
        while time.monotonic() < end_delay:
            if sup.poll() is not None:
                return None
            time.sleep(0.002)
        end = time.monotonic() + 30
        while time.monotonic() < end:
            path = self.writing_now(r)
            if path:
                return path
            if sup.poll() is not None or self.trainer_pid(r) != pid:
                return None
            time.sleep(0.001)
        return None

    def sleep_unless_exit(self, sup, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if sup.poll() is not None:
                return False
            time.sleep(0.002)
        return True

    def verify_valid(self, paths):
        """{path: (valid, content_hash)} from one `gpuhost verify --json` call."""
        if not paths:
            return {}
        proc = subprocess.run([BIN, "verify", "--json"] + list(paths), capture_output=True, text=True, timeout=300)
        self.assertIn(proc.returncode, (0, 1, 3), proc.stderr)
        out = {}
        for item in json.loads(proc.stdout):
            out[item["path"]] = (bool(item.get("valid")), item.get("content_hash", ""), item.get("error", ""))
        return out

    def log_tail(self, r, lines=40):
        try:
            with open(r["log"], errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no log)"

    def kill_supervisor(self, r, sup, stale):
        """SIGKILLs the supervisor; its trainer (if any) becomes stale. Returns False if it had already exited."""
        if sup.poll() is not None:
            return False
        orphan = self.trainer_pid(r)
        sup.kill()
        sup.wait()
        if sup.returncode != -signal.SIGKILL:
            return False  # it finished on its own just before
        if orphan is not None:
            stale.add(orphan)
        if not os.path.exists(r["journal"]):
            return True  # killed before it created the job's journal
        _, corrupt, torn = read_journal(r["journal"])
        self.assertEqual(corrupt, [], "corrupt journal lines after a supervisor kill (round %d)" % r["index"])
        if torn:
            self.stats.journal_torn_tails += 1
        return True

    def run_round(self, index, reference):
        root = os.path.join(self.base, "round-%03d" % index)
        os.makedirs(root)
        r = {"index": index, "name": "chaos-%d" % index, "home": os.path.join(root, "home"),
             "ckpt": os.path.join(root, "ckpt"), "resume_log": os.path.join(root, "resume.log"),
             "pid_file": os.path.join(root, "trainer.pid"), "state": os.path.join(root, "final.state"),
             "log": os.path.join(root, "gpuhost.log"), "trainer_log": os.path.join(root, "trainer.log"),
             "overlap_lock": os.path.join(root, "trainer.lock"), "launcher": index % 2 == 0}
        r["journal"] = os.path.join(r["home"], "jobs", r["name"], "journal.jsonl")
        stats = self.stats
        stale = set()
        sup = self.start_supervisor(r)
        names = [name for name, _ in ACTIONS]
        weights = [w for _, w in ACTIONS]
        while stats.total() < KILLS or stats.supervisor() < SUPERVISOR_KILLS:
            if sup.poll() is not None:
                break
            action = self.rng.choices(names, weights)[0]
            if action == "supervisor_random":
                # Anywhere in its life: journal replay, leftover kill, resume validation, spawn, supervision.
                if not self.sleep_unless_exit(sup, self.rng.uniform(0.0, 0.4)):
                    break
                if self.kill_supervisor(r, sup, stale):
                    stats.kills[action] += 1
                    sup = self.start_supervisor(r)
                continue
            pid = self.wait_new_trainer(r, sup, stale)
            if pid is None:
                break
            writing = None
            if action.endswith("mid_write"):
                # The first write after a random delay: sometimes the first after the resume
                # (no progress), sometimes a later one.
                writing = self.wait_for_write(r, sup, pid, self.rng.uniform(0.0, 0.25))
                if writing is None:
                    continue
                time.sleep(self.rng.uniform(0.0, 0.02))
            elif not self.sleep_unless_exit(sup, self.rng.uniform(0.0, 0.4)):
                break
            if action.startswith("supervisor"):
                during_write = writing is not None and not zip_complete(writing)
                if self.kill_supervisor(r, sup, stale):
                    stats.kills[action] += 1
                    stats.supervisor_during_write += during_write
                    sup = self.start_supervisor(r)
                continue
            if self.trainer_pid(r) != pid:
                continue  # it ended (or was replaced) meanwhile: nothing of ours to kill
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            stale.add(pid)
            if action == "trainer_then_supervisor":
                stats.kills["trainer_random"] += 1
                time.sleep(self.rng.uniform(0.0, 0.03))
                if self.kill_supervisor(r, sup, stale):
                    stats.kills["supervisor_after_trainer"] += 1
                    sup = self.start_supervisor(r)
                continue
            stats.kills[action] += 1
            while os.path.exists("/proc/%d" % pid) and self.trainer_pid(r) == pid:
                time.sleep(0.001)
            if writing and not self.verify_valid([writing])[writing][0]:
                stats.trainer_torn += 1
        try:
            sup.wait(timeout=ROUND_TIMEOUT)
        except subprocess.TimeoutExpired:
            sup.kill()
            self.fail("round %d did not finish within %d s after the kills; log:\n%s"
                      % (index, ROUND_TIMEOUT, self.log_tail(r)))
        self.assertEqual(sup.returncode, 0, "round %d: gpuhost run exited %s; log:\n%s"
                         % (index, sup.returncode, self.log_tail(r)))
        self.check_round(r, reference)

    # -- what must hold after every round --------------------------------------------------------

    def processes_of(self, r):
        """Live processes whose command line names this round's checkpoint folder."""
        return processes_with(r["ckpt"])

    def check_round(self, r, reference):
        where = "round %d (%s)" % (r["index"], r["ckpt"])
        # Attempts never overlapped, and nothing of the job outlived its last supervisor.
        overlaps_file = r["overlap_lock"] + ".overlaps"
        overlaps = open(overlaps_file).read().splitlines() if os.path.exists(overlaps_file) else []
        self.stats.overlaps += len(overlaps)
        self.assertEqual(overlaps, [], where + ": two trainers of the job ran at once; log:\n" + self.log_tail(r))
        left = self.processes_of(r)
        self.stats.processes_left += len(left)
        self.assertEqual(left, [], where + ": processes left after the round")
        env = dict(os.environ, GPUHOST_HOME=r["home"], NO_COLOR="1")
        proc = subprocess.run([BIN, "status", r["name"], "--json", "--events", "0"], env=env,
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        status = json.loads(proc.stdout)
        self.assertEqual(status["phase"], "finished", where)
        self.assertEqual(status["journal_corrupt_lines"], [], where)
        self.assertEqual(status["journal_torn_tail_bytes"], 0, where)

        records, corrupt, torn = read_journal(r["journal"])
        self.assertEqual(corrupt, [], where + ": corrupt journal lines")
        self.assertEqual(torn, 0, where + ": torn journal tail after a clean finish")
        self.assertEqual([rec["seq"] for rec in records], list(range(1, len(records) + 1)),
                         where + ": journal sequence numbers are not contiguous")

        # Zero committed checkpoints lost: none went bad, each is on disk with its committed hash.
        bad = [c for c in status["checkpoints"] if c["status"] == "bad"]
        self.assertEqual(bad, [], where + ": committed checkpoints failed re-validation")
        commits = {rec["seq"]: rec for rec in records if rec["type"] == "checkpoint_committed"}
        retired = {rec["id"] for rec in records if rec["type"] == "checkpoint_retired"}
        live = {seq: rec for seq, rec in commits.items() if "ck-%d" % seq not in retired}
        self.assertEqual({c["id"] for c in status["checkpoints"] if c["status"] == "committed"},
                         {"ck-%d" % seq for seq in live}, where + ": status and journal disagree")
        verdicts = self.verify_valid(sorted({rec["path"] for rec in live.values()}))
        self.stats.lost_commits += len(bad) + sum(
            1 for rec in live.values() if not verdicts[rec["path"]][0] or verdicts[rec["path"]][1] != rec["content_hash"])
        for seq, rec in sorted(live.items()):
            valid, content_hash, error = verdicts[rec["path"]]
            self.assertTrue(valid, "%s: committed ck-%d %s no longer valid %s" % (where, seq, rec["path"], error))
            self.assertEqual(content_hash, rec["content_hash"], "%s: committed ck-%d changed" % (where, seq))
        # Nothing valid was missed: every checkpoint file on disk is committed.
        on_disk = {os.path.join(r["ckpt"], n) for n in os.listdir(r["ckpt"]) if not n.startswith(".")}
        self.assertEqual(on_disk, {rec["path"] for rec in live.values()}, where + ": files on disk vs committed")
        self.assertEqual(len(live), STEPS // EVERY, where)

        # Zero resumes from an invalid checkpoint.
        with open(r["resume_log"]) if os.path.exists(r["resume_log"]) else open(os.devnull) as f:
            resumes = [line.rstrip("\n") for line in f if line.strip()]
        invalid = [line for line in resumes if not line.startswith("OK ")]
        committed_paths = {rec["path"] for rec in commits.values()}
        self.stats.invalid_resumes += len(invalid) + sum(
            1 for line in resumes if line.startswith("OK ") and line.split(" ")[1] not in committed_paths)
        self.assertEqual(invalid, [], where + ": the trainer was resumed from an invalid checkpoint")
        for line in resumes:
            self.assertIn(line.split(" ")[1], committed_paths, where + ": resumed from an uncommitted file")

        # Bit-identical to the uninterrupted run.
        with open(r["state"], "rb") as f:
            self.assertEqual(f.read(), reference, where + ": final state differs from the uninterrupted run")

        s = self.stats
        s.rounds += 1
        s.resumes += len(resumes)
        s.child_starts += status["child_starts"]
        s.restarts += status["restarts"]
        s.commits += len(commits)
        for rec in records:
            if rec["type"] == "leftovers_killed":
                s.leftovers_killed += rec["count"]
            elif rec["type"] == "supervisor_started" and rec.get("after_crash"):
                s.after_crash += 1
            elif rec["type"] == "checkpoint_rejected":
                s.rejected += 1

    def test_random_kills_lose_nothing(self):
        started = time.monotonic()
        reference = self.reference_state()
        index = 0
        while self.stats.total() < KILLS or self.stats.supervisor() < SUPERVISOR_KILLS:
            index += 1
            self.run_round(index, reference)
        s = self.stats
        elapsed = time.monotonic() - started
        print("chaos summary (seed %d): %d kills in %d rounds, %.1f s" % (self.seed, s.total(), s.rounds, elapsed))
        for name, count in s.kills.items():
            print("  %-24s %d" % (name, count))
        print("  trainer kills that tore a checkpoint (verify: invalid): %d" % s.trainer_torn)
        print("  supervisor kills while a checkpoint was being written: %d" % s.supervisor_during_write)
        print("  supervisor kills that left a torn journal record: %d" % s.journal_torn_tails)
        print("  trainer starts %d, crash restarts %d, resumes %d (all OK), supervisor restarts after a crash %d"
              % (s.child_starts, s.restarts, s.resumes, s.after_crash))
        print("  orphaned trainer processes killed (cgroup, run token) %d; checkpoints committed %d, rejected %d"
              % (s.leftovers_killed, s.commits, s.rejected))
        print("  overlapping attempts %d; processes left after a round %d; invalid resumes %d; lost commits %d"
              % (s.overlaps, s.processes_left, s.invalid_resumes, s.lost_commits), flush=True)
        self.assertGreaterEqual(s.total(), KILLS)
        self.assertGreaterEqual(s.supervisor(), SUPERVISOR_KILLS)
        # Honesty of the test itself: the kills did land inside checkpoint writes.
        self.assertGreater(s.trainer_torn, 0, "no kill landed mid-write: the harness timing is off")


if __name__ == "__main__":
    unittest.main()
