"""`gpuhost run` end to end on Linux: real trainers (tests/integration/trainers), real signals, the
fake cloud metadata service (tests/fake_metadata/server.py), and the faults the supervisor exists
for: a trainer killed mid-run, preemption notices from every cloud and from SIGTERM, a trainer that
ignores the save request, truncated and corrupted checkpoints, crash loops, a full disk, the
supervisor itself killed with SIGKILL, and a second supervisor on the same job.

The trainers are deterministic, so "resumed correctly" is checked the strict way: the final
weights of an interrupted-and-resumed run must equal, byte for byte, those of an uninterrupted
run. The only time comparisons are the ones the feature promises: a checkpoint saved for a notice
is committed before the notice's deadline (deadlines here are >= 15 s away, so a loaded machine
does not flake). Standard library only; the PyTorch tests run Debian's python3-torch under
/usr/bin/python3 and are skipped where it is missing."""
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unittest
import zlib

from gpuhost_test import (BIN, IS_WINDOWS_BUILD, SCENARIOS, SYSTEM_PYTHON, TMP, missing, needs, read_metric_history,
                          scenario_env, torch_available)
from fake_metadata_server import MetadataServer

HERE = os.path.dirname(os.path.abspath(__file__))
STDLIB_TRAINER = os.path.join(HERE, "trainers", "stdlib_trainer.py")
TORCH_TRAINER = os.path.join(HERE, "trainers", "torch_trainer.py")
NATIVE_TRAINER = os.environ.get("GPUHOST_NATIVE_TRAINER", "")
PYTHON = sys.executable

# Short timings: checkpoints settle in 0.2 s, restarts wait 0.1 s, metadata is polled every 0.2 s.
FAST = ["--settle", "0.2", "--backoff", "0.1", "--max-backoff", "0.2", "--poll-interval", "0.2", "--quiet"]
SIZE = 256  # stdlib trainer weights


def parse_time(text):
    """A journal time (RFC 3339 UTC with milliseconds) as an aware datetime."""
    return datetime.datetime.strptime(text.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z")


def read_journal(path):
    """The records of a journal, each framing checked (doc/journal.md): length, CRC-32, JSON."""
    records = []
    with open(path, "rb") as f:
        for number, line in enumerate(f.read().split(b"\n")[:-1], 1):
            length, crc, body = line.split(b" ", 2)
            if int(length) != len(body) or int(crc, 16) != zlib.crc32(body):
                raise AssertionError("journal line %d: bad framing: %r" % (number, line[:200]))
            records.append(json.loads(body))
    return records


def step_of(path):
    """The step in a trainer's checkpoint name: ckpt-000025.pt, checkpoint-20 (gpuhost itself reads
    no step from "ckpt-N" names: only "step"/"iter" words and HF's checkpoint-N count)."""
    return int(re.findall(r"\d+", os.path.basename(path))[-1])


def alive(pid):
    """Whether `pid` runs (a zombie nobody reaped yet counts as dead)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


_references = {}


def reference_state(steps, size=SIZE):
    """Final weights of an uninterrupted stdlib-trainer run of `steps` steps (computed once)."""
    key = ("stdlib", steps, size)
    if key not in _references:
        directory = os.path.join(TMP, "run-cli", "reference-stdlib-%d-%d" % (steps, size))
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        final = os.path.join(directory, "final.state")
        subprocess.run([PYTHON, STDLIB_TRAINER, "--steps", str(steps), "--every", "0", "--size", str(size),
                        "--out", os.path.join(directory, "ck"), "--final-state", final],
                       check=True, capture_output=True, timeout=120)
        with open(final, "rb") as f:
            _references[key] = f.read()
    return _references[key]


def torch_reference_state(steps):
    key = ("torch", steps)
    if key not in _references:
        directory = os.path.join(TMP, "run-cli", "reference-torch-%d" % steps)
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        final = os.path.join(directory, "final.state")
        subprocess.run([SYSTEM_PYTHON, TORCH_TRAINER, "--steps", str(steps), "--every", "0",
                        "--out", os.path.join(directory, "ck"), "--final-state", final],
                       check=True, capture_output=True, timeout=180)
        with open(final, "rb") as f:
            _references[key] = f.read()
    return _references[key]


class Job:
    """One supervised job in a fresh directory: its own GPUHOST_HOME, checkpoint directory,
    trainer resume log, final-state file and pid file."""

    def __init__(self, test, label):
        self.test = test
        self.name = label
        self.dir = os.path.join(TMP, "run-cli", label)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.home = os.path.join(self.dir, "home")
        self.ck = os.path.join(self.dir, "ck")
        self.resume_log = os.path.join(self.dir, "resume.log")
        self.final = os.path.join(self.dir, "final.state")
        self.pid_file = os.path.join(self.dir, "trainer.pid")
        self.job_dir = os.path.join(self.home, "jobs", label)
        self.journal_path = os.path.join(self.job_dir, "journal.jsonl")
        self.runs = 0

    # ---- commands ----

    def stdlib(self, steps, every=5, step_time=0.05, extra=()):
        return [PYTHON, STDLIB_TRAINER, "--steps", str(steps), "--every", str(every), "--step-time", str(step_time),
                "--size", str(SIZE), "--out", self.ck, "--resume-log", self.resume_log, "--final-state", self.final,
                "--pid-file", self.pid_file] + list(extra) + ["--resume", "{resume}"]

    def env(self, extra=None):
        env = dict(os.environ)
        env["NO_COLOR"] = "1"
        env["GPUHOST_HOME"] = self.home
        env.pop("GPUHOST_SAVE_REQUEST", None)
        if extra:
            env.update(extra)
        return env

    def argv(self, flags, trainer, cloud=True):
        args = [BIN, "run", "--name", self.name, "--checkpoints", self.ck] + FAST + list(flags)
        if cloud and "--cloud" not in flags:
            args += ["--cloud", "none"]
        return args + ["--"] + list(trainer)

    def run(self, flags, trainer, timeout=120, env=None):
        self.runs += 1
        return subprocess.run(self.argv(flags, trainer), env=self.env(env), capture_output=True, text=True,
                              timeout=timeout)

    def start(self, flags, trainer, env=None):
        """Starts gpuhost run in the background; its output goes to files in the job's directory."""
        self.runs += 1
        out = open(os.path.join(self.dir, "gpuhost-%d.out" % self.runs), "w")
        err = open(os.path.join(self.dir, "gpuhost-%d.err" % self.runs), "w")
        proc = subprocess.Popen(self.argv(flags, trainer), env=self.env(env), stdout=out, stderr=err, text=True)
        out.close()
        err.close()
        self.test.addCleanup(self._reap, proc)
        return proc

    def _reap(self, proc):
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    def stderr_of(self, run_number):
        with open(os.path.join(self.dir, "gpuhost-%d.err" % run_number)) as f:
            return f.read()

    def gpuhost(self, *args, timeout=60):
        return subprocess.run([BIN] + list(args), env=self.env(), capture_output=True, text=True, timeout=timeout)

    # ---- what happened ----

    def journal(self):
        return read_journal(self.journal_path)

    def records(self, kind):
        return [r for r in self.journal() if r["type"] == kind]

    def wait_for(self, predicate, what, proc=None, timeout=60):
        """Polls the journal until predicate(records) holds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            records = self.journal() if os.path.exists(self.journal_path) else []
            if predicate(records):
                return records
            if proc is not None and proc.poll() is not None:
                self.test.fail("gpuhost exited (%d) before %s; journal: %s" % (proc.returncode, what, self.summary()))
            time.sleep(0.05)
        self.test.fail("timed out waiting for %s; journal: %s" % (what, self.summary()))

    def wait_for_type(self, kind, proc=None, count=1, timeout=60):
        return self.wait_for(lambda rs: sum(r["type"] == kind for r in rs) >= count, kind, proc, timeout)

    def summary(self):
        if not os.path.exists(self.journal_path):
            return "(no journal)"
        return "\n  " + "\n  ".join(json.dumps(r)[:300] for r in self.journal())

    def status(self):
        proc = self.gpuhost("status", self.name, "--json", "--events", "0")
        self.test.assertEqual(proc.returncode, 0, proc.stderr)
        return json.loads(proc.stdout)

    def resume_lines(self):
        if not os.path.exists(self.resume_log):
            return []
        with open(self.resume_log) as f:
            return [line.split() for line in f.read().splitlines()]

    def final_state(self):
        with open(self.final, "rb") as f:
            return f.read()

    def stdout_log(self):
        with open(os.path.join(self.job_dir, "logs", "stdout.log"), errors="replace") as f:
            return f.read()

    def trainer_pid(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with open(self.pid_file) as f:
                    text = f.read().strip()
                if text:
                    return int(text)
            except FileNotFoundError:
                pass
            time.sleep(0.05)
        self.test.fail("the trainer wrote no pid file")


def committed_before(records, index):
    """The checkpoint_committed records before records[index] that are still resumable there."""
    bad = set()
    committed = []
    for r in records[:index]:
        if r["type"] == "checkpoint_committed":
            committed.append(r)
        elif r["type"] == "checkpoint_bad":
            bad.add(r["id"])
    return [r for r in committed if "ck-%d" % r["seq"] not in bad]


def write_checkpoints(directory, steps, every=5):
    """Checkpoints from a trainer run without gpuhost (ckpt-000005.pt ... up to `steps`)."""
    subprocess.run([PYTHON, STDLIB_TRAINER, "--steps", str(steps), "--every", str(every), "--size", str(SIZE),
                    "--out", directory], check=True, capture_output=True, timeout=60)


class RunTestCase(unittest.TestCase):
    def assert_exit(self, proc, code):
        out = getattr(proc, "stdout", "") or ""
        err = getattr(proc, "stderr", "") or ""
        self.assertEqual(proc.returncode, code, "stderr:\n%s\nstdout:\n%s" % (err[-4000:], out[-2000:]))

    def assert_resumed_from_newest(self, job, start_index):
        """The child_started at records[start_index] resumed from the newest committed checkpoint
        (not marked bad) before it, and the trainer's resume log confirms that path."""
        records = job.journal()
        started = records[start_index]
        self.assertEqual(started["type"], "child_started")
        candidates = committed_before(records, start_index)
        self.assertTrue(candidates, "nothing was committed before the restart:" + job.summary())
        newest = candidates[-1]
        self.assertEqual(started["resume_from"], "ck-%d" % newest["seq"], job.summary())
        self.assertEqual(started["resume_path"], newest["path"])
        self.assertIn(["OK", newest["path"], str(step_of(newest["path"]))], job.resume_lines())
        return newest

    def assert_saved_before_deadline(self, job, source):
        """One preemption notice from `source`; a checkpoint committed for it before its deadline;
        the trainer stopped; the supervisor stopped 'preempted'. Returns the saved checkpoint."""
        records = job.journal()
        notices = [r for r in records if r["type"] == "notice" and r["kind"] == "preemption"]
        self.assertEqual([n["source"] for n in notices], [source], job.summary())
        deadline = parse_time(notices[0]["deadline"])
        saves = [r for r in records if r["type"] == "save_completed"]
        self.assertEqual(len(saves), 1, job.summary())
        commit = next(r for r in records if r["type"] == "checkpoint_committed" and "ck-%d" % r["seq"] == saves[0]["id"])
        self.assertGreater(commit["seq"], notices[0]["seq"], "the checkpoint predates the notice")
        self.assertLess(parse_time(commit["time"]), deadline, "committed after the notice's deadline")
        self.assertLess(parse_time(saves[0]["time"]), deadline)
        self.assertFalse(any(r["type"] == "save_timed_out" for r in records), job.summary())
        exits = [r for r in records if r["type"] == "child_exited"]
        self.assertEqual(exits[-1]["cause"], "preempted")
        self.assertEqual(records[-1]["type"], "supervisor_stopped")
        self.assertEqual(records[-1]["outcome"], "preempted")
        self.assertIn("save requested at step", job.stdout_log())
        return commit

    def assert_rerun_resumes(self, job, saved, steps, flags=(), step_time=0.0):
        """Runs the same job again without a notice: it must resume from `saved` (the newest
        committed checkpoint) and end bit-identical to an uninterrupted run."""
        before = len(job.journal())
        proc = job.run(list(flags), job.stdlib(steps, every=0, step_time=step_time))
        self.assert_exit(proc, 0)
        records = job.journal()
        first_start = next(i for i in range(before, len(records)) if records[i]["type"] == "child_started")
        newest = self.assert_resumed_from_newest(job, first_start)
        self.assertEqual(newest["seq"], saved["seq"], "the rerun did not resume from the checkpoint saved for the notice")
        self.assertEqual(job.final_state(), reference_state(steps))


@unittest.skipIf(IS_WINDOWS_BUILD, "Linux build: test_run_windows.py covers gpuhost.exe")
class TrainingMetrics(RunTestCase):
    """Training scalars reach the job's metric history with no change to the trainer: from its
    printed lines and from the GPUHOST_METRICS_FILE channel, each exactly once, across a kill."""

    def test_printed_and_channel_metrics_recorded_once_each_across_a_kill(self):
        job = Job(self, "train-metrics")
        steps = 40
        proc = job.run(["--drill", "kill@1.2"], job.stdlib(steps, extra=["--print-metrics", "--jsonl-metrics"]))
        self.assert_exit(proc, 0)
        self.assertEqual([e["cause"] for e in job.records("child_exited")], ["drill_kill", "success"], job.summary())
        series, sources = read_metric_history(os.path.join(job.job_dir, "metrics"))
        self.assertEqual(sources.get("loss"), "output")
        self.assertEqual(sources.get("accuracy"), "jsonl")
        # Every printed "train:" line (both children, the resumed one repeating steps after its
        # checkpoint) is one loss point, in the order printed.
        with open(os.path.join(job.job_dir, "logs", "stdout.log")) as f:
            printed = [(int(m.group(1)), float(m.group(2)))
                       for m in re.finditer(r"train: step=(\d+) loss=([0-9.]+)", f.read())]
        self.assertGreaterEqual(len(printed), steps)
        self.assertEqual([(step, value) for _, step, value in series["loss"]], printed)
        self.assertEqual({value for _, _, value in series["lr"]}, {1e-3})
        # The channel file is read by offset: each line once, none lost to the supervisor restart.
        channel = os.path.join(job.job_dir, "metrics", "channel.jsonl")
        with open(channel) as f:
            lines = [json.loads(line) for line in f]
        self.assertEqual([(step, value) for _, step, value in series["accuracy"]],
                         [(line["step"], line["accuracy"]) for line in lines])
        self.assertEqual(job.status()["last_step"], steps)
        self.assertEqual(job.records("progress")[-1]["step"], steps)


@unittest.skipIf(IS_WINDOWS_BUILD, "Linux build: test_run_windows.py covers gpuhost.exe")
class KillAndPreemptDrills(RunTestCase):
    def test_kill_drill_resumes_from_newest_committed_and_ends_bit_identical(self):
        job = Job(self, "kill-drill")
        steps = 80
        proc = job.run(["--drill", "kill@1.5"], job.stdlib(steps))
        self.assert_exit(proc, 0)
        records = job.journal()
        types = [r["type"] for r in records]
        self.assertIn("drill", types)
        exits = [r for r in records if r["type"] == "child_exited"]
        self.assertEqual([e["cause"] for e in exits], ["drill_kill", "success"], job.summary())
        self.assertTrue(exits[0]["signaled"])
        starts = [i for i, r in enumerate(records) if r["type"] == "child_started"]
        self.assertEqual(len(starts), 2)
        self.assertIsNone(records[starts[0]]["resume_from"])
        newest = self.assert_resumed_from_newest(job, starts[1])
        self.assertLess(step_of(newest["path"]), steps, "the drill killed the trainer after it finished")
        self.assertEqual(len(job.resume_lines()), 1, job.resume_lines())
        self.assertEqual(job.final_state(), reference_state(steps))
        status = job.status()
        self.assertEqual(status["phase"], "finished")
        self.assertEqual(status["child_starts"], 2)
        self.assertEqual(status["restarts"], 1)
        self.assertTrue(all(c["status"] == "committed" for c in status["checkpoints"]))

    def test_preempt_drill_saves_before_deadline_exits_75_and_rerun_resumes(self):
        job = Job(self, "preempt-drill")
        steps = 200
        # --every 0: the only checkpoint is the one saved for the notice.
        proc = job.run(["--drill", "preempt@1/20"], job.stdlib(steps, every=0))
        self.assert_exit(proc, 75)
        records = job.journal()
        requested = [r for r in records if r["type"] == "save_requested"]
        self.assertEqual(requested[0]["method"], "signal")
        self.assertEqual(requested[0]["signal"], "SIGUSR1")
        saved = self.assert_saved_before_deadline(job, "drill")
        self.assertEqual(len(job.records("checkpoint_committed")), 1)
        self.assertLess(step_of(saved["path"]), steps)
        self.assertFalse(os.path.exists(job.final), "the trainer ran to the end instead of stopping")
        status = job.status()
        self.assertEqual(status["phase"], "preempted")
        self.assertEqual(status["preemptions"], 1)
        self.assertEqual(status["resume_from"], "ck-%d" % saved["seq"])
        self.assert_rerun_resumes(job, saved, steps)


@unittest.skipIf(IS_WINDOWS_BUILD, "Linux build")
class CloudNotices(RunTestCase):
    STEPS = 300  # at 0.05 s a step: 15 s, far more than the run lasts before the notice

    def cloud_drill(self, cloud, env=None):
        job = Job(self, "cloud-" + cloud)
        server = MetadataServer(self, cloud, env)
        proc = job.start(["--cloud", cloud, "--metadata-endpoint", server.url], job.stdlib(self.STEPS, every=0),
                         env=env)
        job.wait_for_type("child_started", proc)
        time.sleep(1.0)
        posted = datetime.datetime.now(datetime.timezone.utc)
        server.control("notice", {"in_seconds": 20})
        proc.wait(timeout=60)
        self.assertEqual(proc.returncode, 75, job.stderr_of(1) + job.summary())
        saved = self.assert_saved_before_deadline(job, cloud)
        # The deadline read from the cloud's own format: about 20 s after the notice was posted
        # (GCP gives no time: detection + 30 s). A time zone misread would be hours off.
        notice = job.records("notice")[0]
        lead = (parse_time(notice["deadline"]) - posted).total_seconds()
        self.assertTrue(5 <= lead <= 65, "deadline %s is %.0f s after the notice" % (notice["deadline"], lead))
        self.assertFalse(job.records("watcher_trouble"), job.summary())
        self.assert_rerun_resumes(job, saved, self.STEPS, flags=["--cloud", "none"])
        return job, server

    def test_aws_spot_notice_with_imdsv2_token(self):
        job, server = self.cloud_drill("aws")
        log = server.log()
        puts = [e for e in log if e["method"] == "PUT" and e["path"] == "/latest/api/token"]
        self.assertTrue(puts, "no IMDSv2 token was requested")
        self.assertTrue(any(k.lower() == "x-aws-ec2-metadata-token-ttl-seconds" for k in puts[0]["headers"]))
        gets = [e for e in log if e["method"] == "GET"]
        self.assertTrue(gets)
        for entry in gets:
            headers = {k.lower(): v for k, v in entry["headers"].items()}
            self.assertTrue(headers.get("x-aws-ec2-metadata-token"), "a GET without the token: %s" % entry)
        self.assertTrue(any(e["path"] == "/latest/meta-data/spot/instance-action" for e in gets))

    def test_azure_preempt_event_acknowledged_after_the_save(self):
        job, server = self.cloud_drill("azure")
        records = job.journal()
        notice = job.records("notice")[0]
        self.assertTrue(notice["event_id"])
        acks = [r for r in records if r["type"] == "notice_acknowledged"]
        self.assertEqual(len(acks), 1, job.summary())
        self.assertEqual(acks[0]["event_id"], notice["event_id"])
        save = job.records("save_completed")[0]
        self.assertGreater(acks[0]["seq"], save["seq"], "acknowledged before the checkpoint was durable")
        posts = [e for e in server.log() if e["method"] == "POST" and e["path"].startswith("/metadata/scheduledevents")]
        self.assertEqual(len(posts), 1, posts)
        self.assertEqual(json.loads(posts[0]["body"]), {"StartRequests": [{"EventId": notice["event_id"]}]})
        self.assertEqual({k.lower(): v for k, v in posts[0]["headers"].items()}.get("metadata"), "true")

    def test_gcp_preempted(self):
        self.cloud_drill("gcp")

    def test_alibaba_termination_time(self):
        job, server = self.cloud_drill("alibaba")
        self.assertTrue(any(e["method"] == "PUT" for e in server.log()), "no metadata token was requested")

    def test_tencent_local_time_in_shanghai(self):
        # Tencent answers in the guest's local time: both sides run in UTC+8 here.
        self.cloud_drill("tencent", env={"TZ": "Asia/Shanghai"})

    def test_volcengine_termination_time(self):
        self.cloud_drill("volcengine")

    def test_sigterm_to_supervisor_saves_and_exits_75(self):
        job = Job(self, "sigterm")
        proc = job.start([], job.stdlib(self.STEPS, every=0))
        job.wait_for_type("child_started", proc)
        time.sleep(1.0)
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        self.assertEqual(proc.returncode, 75, job.stderr_of(1) + job.summary())
        saved = self.assert_saved_before_deadline(job, "signal")
        self.assert_rerun_resumes(job, saved, self.STEPS)


@unittest.skipIf(IS_WINDOWS_BUILD, "Linux build")
class FaultyMetadataEndpoint(RunTestCase):
    def run_with_mode(self, mode, cloud="aws"):
        job = Job(self, "faulty-%s-%s" % (cloud, mode))
        server = MetadataServer(self, cloud)
        server.control("mode", {"mode": mode})
        steps = 30
        proc = job.run(["--cloud", cloud, "--metadata-endpoint", server.url], job.stdlib(steps), timeout=90)
        self.assert_exit(proc, 0)
        self.assertFalse(job.records("notice"), job.summary())
        self.assertEqual(job.final_state(), reference_state(steps))
        self.assertTrue(server.log(), "the watcher never asked the endpoint")
        return job

    def test_error500_is_trouble_not_a_notice(self):
        job = self.run_with_mode("error500")
        trouble = job.records("watcher_trouble")
        self.assertTrue(trouble, job.summary())
        self.assertEqual(trouble[0]["source"], "aws")
        self.assertIn("500", trouble[0]["message"])

    def test_garbage_is_trouble_not_a_notice(self):
        job = self.run_with_mode("garbage", cloud="volcengine")
        self.assertTrue(job.records("watcher_trouble"), job.summary())

    def test_hanging_endpoint_does_not_hang_the_run(self):
        self.run_with_mode("hang")


@unittest.skipIf(IS_WINDOWS_BUILD, "Linux build")
class StubbornTrainer(RunTestCase):
    def test_trainer_ignoring_the_save_request_is_killed_and_last_checkpoint_kept(self):
        job = Job(self, "stubborn")
        # Its checkpoints so far (5, 10); from here on it writes none, and ignores SIGUSR1 and SIGTERM.
        write_checkpoints(job.ck, 10)
        steps = 1000
        started = time.monotonic()
        proc = job.run(["--drill", "preempt@2/8", "--safety-margin", "2", "--stop-grace", "1"],
                       job.stdlib(steps, every=0, extra=["--ignore-save-requests", "--ignore-term"]), timeout=90)
        elapsed = time.monotonic() - started
        self.assert_exit(proc, 75)
        records = job.journal()
        self.assertTrue(job.records("save_timed_out"), job.summary())
        self.assertFalse(job.records("save_completed"))
        exit_record = job.records("child_exited")[-1]
        self.assertTrue(exit_record["signaled"], exit_record)
        self.assertEqual(exit_record["signal"], signal.SIGKILL)
        self.assertEqual(exit_record["cause"], "preempted")
        self.assertEqual(records[-1]["outcome"], "preempted")
        print("\n  stubborn trainer: gpuhost returned after %.1f s (notice at 2 s, deadline 10 s)" % elapsed)
        committed = [c for c in job.status()["checkpoints"] if c["status"] == "committed"]
        self.assertTrue(committed, job.summary())
        self.assertEqual([os.path.basename(c["path"]) for c in committed], ["ckpt-000005.pt", "ckpt-000010.pt"])
        newest = committed[-1]
        self.assertEqual(job.resume_lines(), [["OK", newest["path"], "10"]])
        verify = job.gpuhost("verify", "--json", newest["path"])
        self.assert_exit(verify, 0)
        self.assertEqual(json.loads(verify.stdout)[0]["content_hash"], newest["content_hash"])
        self.assertEqual(job.status()["resume_from"], newest["id"])


@unittest.skipIf(IS_WINDOWS_BUILD, "Linux build")
class CorruptCheckpoints(RunTestCase):
    def test_truncated_newest_checkpoint_is_rejected_and_never_resumed(self):
        job = Job(self, "truncated")
        # Checkpoints from a run without gpuhost: 5, 10 valid, 15 cut in half (a crash mid-write).
        write_checkpoints(job.ck, 15)
        torn = os.path.join(job.ck, "ckpt-000015.pt")
        with open(torn, "r+b") as f:
            f.truncate(os.path.getsize(torn) // 2)
        steps = 30
        proc = job.run([], job.stdlib(steps, step_time=0.01))
        self.assert_exit(proc, 0)
        records = job.journal()
        first_start = next(i for i, r in enumerate(records) if r["type"] == "child_started")
        rejected = [r for r in records[:first_start] if r["type"] == "checkpoint_rejected"]
        self.assertEqual([r["path"] for r in rejected], [torn], job.summary())
        self.assertEqual(rejected[0]["format"], "torch_zip")
        newest = self.assert_resumed_from_newest(job, first_start)
        self.assertEqual(newest["path"], os.path.join(job.ck, "ckpt-000010.pt"))
        self.assertEqual([line[0] for line in job.resume_lines()], ["OK"])
        self.assertEqual(job.final_state(), reference_state(steps))

    def test_checkpoint_torn_by_a_killed_slow_writer_is_rejected(self):
        job = Job(self, "torn-write")
        steps = 15
        size = 50000  # 400 KB written in 8 KiB pieces 10 ms apart: about half a second per save
        trainer = [PYTHON, STDLIB_TRAINER, "--steps", str(steps), "--every", "5", "--size", str(size),
                   "--out", job.ck, "--resume-log", job.resume_log, "--final-state", job.final,
                   "--pid-file", job.pid_file, "--write-mode", "slow", "--slow-chunk", "8192",
                   "--slow-delay", "0.01", "--resume", "{resume}"]
        proc = job.start([], trainer)
        target = os.path.join(job.ck, "ckpt-000010.pt")
        pid = job.trainer_pid()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (os.path.exists(target) and 0 < os.path.getsize(target) < 8 * size):
            time.sleep(0.01)
        self.assertTrue(os.path.exists(target), "the trainer never started writing step 10")
        os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=120)
        self.assertEqual(proc.returncode, 0, job.stderr_of(1) + job.summary())
        records = job.journal()
        rejected = [r for r in records if r["type"] == "checkpoint_rejected"]
        self.assertIn(target, [r["path"] for r in rejected], job.summary())
        starts = [i for i, r in enumerate(records) if r["type"] == "child_started"]
        self.assertEqual(len(starts), 2)
        newest = self.assert_resumed_from_newest(job, starts[1])
        self.assertEqual(newest["path"], os.path.join(job.ck, "ckpt-000005.pt"))
        self.assertEqual(job.final_state(), reference_state(steps, size))

    def test_committed_checkpoint_corrupted_on_disk_is_marked_bad_and_older_one_used(self):
        job = Job(self, "corrupt-after-commit")
        steps = 200
        proc = job.run(["--drill", "preempt@1.5/20"], job.stdlib(steps, every=5))
        self.assert_exit(proc, 75)
        # Periodic checkpoints committed after the notice's save do not count as more saves.
        self.assertEqual(len(job.records("save_completed")), 1, job.summary())
        committed = [c for c in job.status()["checkpoints"] if c["status"] == "committed"]
        self.assertGreaterEqual(len(committed), 2, job.summary())
        victim, older = committed[-1], committed[-2]
        # Flip bytes inside the weights, keeping the size and the modification time: only the
        # full re-validation before resume (CRC, content hash) can notice.
        stat = os.stat(victim["path"])
        with open(victim["path"], "r+b") as f:
            f.seek(stat.st_size // 2)
            chunk = f.read(16)
            f.seek(stat.st_size // 2)
            f.write(bytes(b ^ 0xFF for b in chunk))
        os.utime(victim["path"], ns=(stat.st_atime_ns, stat.st_mtime_ns))
        before = len(job.journal())
        proc = job.run([], job.stdlib(steps, every=0, step_time=0))
        self.assert_exit(proc, 0)
        records = job.journal()[before:]
        bad = [r for r in records if r["type"] == "checkpoint_bad"]
        self.assertEqual([r["id"] for r in bad], [victim["id"]], job.summary())
        self.assertIn("re-validation", bad[0]["reason"])
        start = next(r for r in records if r["type"] == "child_started")
        self.assertEqual(start["resume_from"], older["id"])
        self.assertEqual(job.resume_lines(), [["OK", older["path"], str(step_of(older["path"]))]])
        self.assertEqual(job.final_state(), reference_state(steps))
        status = {c["id"]: c for c in job.status()["checkpoints"]}
        self.assertEqual(status[victim["id"]]["status"], "bad")
        self.assertTrue(status[victim["id"]]["bad_reason"])


@unittest.skipIf(IS_WINDOWS_BUILD, "Linux build")
class CrashLoop(RunTestCase):
    def test_crash_loop_marks_a_checkpoint_bad_rolls_back_then_gives_up_when_nothing_changes(self):
        job = Job(self, "crash-loop")
        # Checkpoints at 5 and 10 from before; every life crashes at step 12 and writes none.
        write_checkpoints(job.ck, 10)
        proc = job.run(["--crash-loop", "2", "--crash-window", "60", "--max-restarts", "5"],
                       job.stdlib(30, every=0, step_time=0.01, extra=["--fail-at-step", "12"]))
        self.assert_exit(proc, 4)
        records = job.journal()
        commits = {step_of(r["path"]): "ck-%d" % r["seq"] for r in records if r["type"] == "checkpoint_committed"}
        self.assertEqual(sorted(commits), [5, 10], job.summary())
        # Two quick failures from step 10: it is marked bad and step 5 is tried; the same two
        # failures from step 5 show the checkpoints are not the cause: the run gives up, and step
        # 5 stays good (marking one checkpoint after another bad would destroy the job).
        starts = [r["resume_from"] for r in records if r["type"] == "child_started"]
        self.assertEqual(starts, [commits[10], commits[10], commits[5], commits[5]], job.summary())
        bad = [r for r in records if r["type"] == "checkpoint_bad"]
        self.assertEqual([r["id"] for r in bad], [commits[10]])
        self.assertIn("crash loop", bad[0]["reason"])
        [gave_up] = job.records("gave_up")
        self.assertIn("failed the same way (exit code 1)", gave_up["reason"])
        self.assertIn("from different checkpoints", gave_up["reason"])
        self.assertEqual(records[-1]["type"], "supervisor_stopped")
        self.assertEqual(records[-1]["outcome"], "failed")
        # The last line quotes the trainer's last stderr lines and names the log.
        self.assertIn("the trainer's last stderr lines:", proc.stderr)
        self.assertIn("failing at step 12", proc.stderr.split("the trainer's last stderr lines:")[1])
        self.assertIn(os.path.join(job.job_dir, "logs", "stderr.log"), proc.stderr)
        status = job.status()
        self.assertEqual(status["phase"], "failed")
        self.assertEqual(status["restarts"], 3)
        self.assertEqual([c["status"] for c in status["checkpoints"]], ["committed", "bad"])
        # The attempts are told apart in the logs.
        with open(os.path.join(job.job_dir, "logs", "stderr.log")) as f:
            self.assertEqual(f.read().count("==== gpuhost: attempt "), 4)

    def test_the_same_failure_at_start_with_nothing_to_resume_gives_up_at_once(self):
        job = Job(self, "startup-failure")
        proc = job.run(["--max-restarts", "10"], [PYTHON, "-c", "import sys; sys.stderr.write('no module named x\\n'); sys.exit(2)"])
        self.assert_exit(proc, 4)
        self.assertEqual(len(job.records("child_started")), 3, job.summary())
        [gave_up] = job.records("gave_up")
        self.assertIn("with nothing to resume from", gave_up["reason"])
        self.assertIn("no module named x", proc.stderr)


@unittest.skipIf(IS_WINDOWS_BUILD, "Linux build")
class DiskFull(RunTestCase):
    def setUp(self):
        self.job = Job(self, "disk-full")
        os.makedirs(self.job.ck)
        if os.geteuid() != 0:
            missing("root, to mount a tmpfs")
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", self.job.ck],
                                 capture_output=True, text=True)
        if mounted.returncode != 0:
            missing("a 2 MiB tmpfs mount: " + mounted.stderr.strip())
        self.addCleanup(subprocess.run, ["umount", "-l", self.job.ck], capture_output=True)

    def test_full_disk_keeps_committed_checkpoints_records_disk_low_and_gives_up(self):
        job = self.job
        size = 60000  # 480 KB a checkpoint: the fourth one no longer fits in 2 MiB
        trainer = [PYTHON, STDLIB_TRAINER, "--steps", "100", "--every", "2", "--size", str(size), "--out", job.ck,
                   "--resume-log", job.resume_log, "--resume", "{resume}"]
        proc = job.run(["--max-restarts", "2", "--crash-loop", "0"], trainer, timeout=120)
        self.assert_exit(proc, 4)
        with open(os.path.join(job.job_dir, "logs", "stderr.log"), errors="replace") as f:
            self.assertIn("No space left on device", f.read())
        records = job.journal()
        self.assertTrue(job.records("disk_low"), job.summary())
        self.assertEqual(job.records("disk_low")[0]["path"], job.ck)
        self.assertEqual(len(job.records("gave_up")), 1)
        self.assertEqual(records[-1]["type"], "supervisor_stopped")
        committed = [c for c in job.status()["checkpoints"] if c["status"] == "committed"]
        self.assertTrue(committed, job.summary())
        verify = job.gpuhost("verify", "--json", *[c["path"] for c in committed])
        self.assert_exit(verify, 0)
        for verdict, c in zip(json.loads(verify.stdout), committed):
            self.assertTrue(verdict["valid"], verdict)
            self.assertEqual(verdict["content_hash"], c["content_hash"])
        # Every restart resumed from the newest of them (nothing newer fitted).
        resumed = [r["resume_path"] for r in job.records("child_started")[1:]]
        self.assertEqual(resumed, [committed[-1]["path"]] * len(resumed))


@unittest.skipIf(IS_WINDOWS_BUILD, "Linux build")
class SupervisorKilled(RunTestCase):
    def test_sigkill_of_supervisor_kills_trainer_and_rerun_resumes_after_crash(self):
        job = Job(self, "supervisor-sigkill")
        steps = 200
        proc = job.start([], job.stdlib(steps))
        job.wait_for_type("checkpoint_committed", proc, count=2)
        pid = job.trainer_pid()
        self.assertTrue(alive(pid))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 15
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertFalse(alive(pid), "the trainer outlived its supervisor (no PR_SET_PDEATHSIG?)")
        self.assertNotEqual(job.journal()[-1]["type"], "supervisor_stopped")
        # The journal says running; jobs and status say the supervisor is gone.
        self.assertEqual(job.status()["phase"], "interrupted")
        listed = job.gpuhost("jobs")
        self.assertIn("interrupted", listed.stdout)
        shown = job.gpuhost("status", job.name)
        self.assertIn("run the same gpuhost run command again to resume", shown.stdout)

        before = len(job.journal())
        proc = job.run([], job.stdlib(steps, every=0, step_time=0))
        self.assert_exit(proc, 0)
        records = job.journal()
        started = records[before]
        self.assertEqual(started["type"], "supervisor_started")
        self.assertTrue(started["after_crash"], started)
        first_start = next(i for i in range(before, len(records)) if records[i]["type"] == "child_started")
        newest = self.assert_resumed_from_newest(job, first_start)
        # The newest checkpoint on disk when the supervisor died is the one resumed from: what was
        # written in its last moments is committed by the rerun before the trainer starts.
        on_disk = sorted(n for n in os.listdir(job.ck) if n.endswith(".pt"))
        self.assertEqual(os.path.basename(newest["path"]), on_disk[-1])
        self.assertEqual(job.final_state(), reference_state(steps))
        self.assertEqual(job.status()["supervisor_runs"], 2)

    @needs(NATIVE_TRAINER, "GPUHOST_NATIVE_TRAINER (CTest sets it to the built tests/native_trainer)")
    def test_grandchild_left_by_a_killed_supervisor_is_killed_by_the_next_run(self):
        job = Job(self, "leftover-grandchild")
        grandchild_pid_file = os.path.join(job.dir, "grandchild.pid")
        trainer = [NATIVE_TRAINER, "--steps", "400", "--step-time-ms", "50", "--every", "5", "--out", job.ck,
                   "--pid-file", job.pid_file, "--spawn-grandchild", grandchild_pid_file]
        proc = job.start([], trainer)
        job.wait_for_type("child_started", proc)
        trainer_pid = job.trainer_pid()
        deadline = time.monotonic() + 30
        grandchild = None
        while grandchild is None:
            self.assertLess(time.monotonic(), deadline, "no grandchild pid")
            time.sleep(0.05)
            if os.path.exists(grandchild_pid_file):
                with open(grandchild_pid_file) as f:
                    text = f.read().strip()
                grandchild = int(text) if text else None
        self.addCleanup(lambda: alive(grandchild) and os.kill(grandchild, signal.SIGKILL))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 15
        while alive(trainer_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertFalse(alive(trainer_pid))
        # The grandchild is not the supervisor's child: it lives on until the next run of the job
        # finds it by the run token in its environment.
        self.assertTrue(alive(grandchild))
        proc = job.run([], [NATIVE_TRAINER, "--steps", "5", "--out", job.ck])
        self.assert_exit(proc, 0)
        deadline = time.monotonic() + 15
        while alive(grandchild) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertFalse(alive(grandchild), "the previous run's grandchild survived the next run")
        self.assertEqual([r["count"] for r in job.records("leftovers_killed")], [1], job.summary())


@unittest.skipIf(IS_WINDOWS_BUILD, "Linux build")
class JobLock(RunTestCase):
    def test_second_run_of_a_running_job_exits_3_naming_the_lock(self):
        job = Job(self, "locked")
        proc = job.start([], job.stdlib(400, every=0))
        job.wait_for_type("child_started", proc)
        second = job.run([], job.stdlib(10), timeout=60)
        self.assert_exit(second, 3)
        lock = os.path.join(job.job_dir, "lock")
        self.assertIn(lock, second.stderr)
        self.assertIn("already supervised", second.stderr)
        self.assertIsNone(proc.poll(), "the second run disturbed the first")
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
        self.assertEqual(proc.returncode, 130, job.summary())
        self.assertEqual(job.status()["supervisor_runs"], 1)


@unittest.skipIf(IS_WINDOWS_BUILD, "Linux build")
class PyTorchTrainer(RunTestCase):
    STEPS = 60

    @classmethod
    def setUpClass(cls):
        if not torch_available():
            missing("Debian's python3-torch for /usr/bin/python3")

    def torch_trainer(self, job, layout, extra=()):
        # 0.08 s a step: after the second commit the trainer still has ~3 s of training left, so
        # the kill lands in training on a loaded machine too (at 0.02 s it could finish first).
        return [SYSTEM_PYTHON, TORCH_TRAINER, "--steps", str(self.STEPS), "--every", "10", "--layout", layout,
                "--step-time", "0.08", "--out", job.ck, "--resume-log", job.resume_log, "--final-state", job.final,
                "--pid-file", job.pid_file] + list(extra)

    def kill_and_resume(self, job, trainer, flags=()):
        """Kills the trainer (SIGKILL) once two checkpoints are committed; the supervisor must
        restart it from the newest and the run end bit-identical to an uninterrupted one."""
        proc = job.start(["--preset", "none"] + list(flags), trainer)
        job.wait_for_type("checkpoint_committed", proc, count=2, timeout=120)
        os.kill(job.trainer_pid(), signal.SIGKILL)
        proc.wait(timeout=180)
        self.assertEqual(proc.returncode, 0, job.stderr_of(1) + job.summary())
        records = job.journal()
        starts = [i for i, r in enumerate(records) if r["type"] == "child_started"]
        self.assertEqual(len(starts), 2, job.summary())
        # The restart's token is journalled before it starts (child_starting).
        self.assertEqual([r["type"] for r in records[starts[0] + 1:starts[1]]][-3:],
                         ["child_exited", "restart_scheduled", "child_starting"])
        newest = self.assert_resumed_from_newest(job, starts[1])
        with open(job.final, "rb") as f:
            self.assertEqual(f.read(), torch_reference_state(self.STEPS), "resumed run differs from an uninterrupted one")
        return records, newest

    def test_torch_save_layout_kill_and_resume(self):
        job = Job(self, "torch-pt")
        records, newest = self.kill_and_resume(job, self.torch_trainer(job, "pt", ["--resume", "{resume}"]))
        commits = [r for r in records if r["type"] == "checkpoint_committed"]
        self.assertEqual({c["format"] for c in commits}, {"torch_zip"})
        self.assertEqual([step_of(c["path"]) for c in commits], [10, 20, 30, 40, 50, 60][:len(commits)])

    def test_hf_checkpoint_dirs_kill_and_resume(self):
        job = Job(self, "torch-hf")
        records, newest = self.kill_and_resume(job, self.torch_trainer(job, "hf", ["--resume", "{resume}"]))
        commits = [r for r in records if r["type"] == "checkpoint_committed"]
        self.assertEqual({c["format"] for c in commits}, {"hf_trainer_dir"}, job.summary())
        for c in commits:
            self.assertEqual(os.path.basename(c["path"]), "checkpoint-%d" % c["step"])
        self.assertTrue(os.path.isdir(newest["path"]))

    def test_hf_preset_resume_from_checkpoint_flag(self):
        job = Job(self, "torch-hf-preset")
        self.kill_and_resume(job, self.torch_trainer(job, "hf"), ["--preset", "hf"])


@unittest.skipIf(IS_WINDOWS_BUILD, "Linux build")
class VerifyJobsStatus(RunTestCase):
    def test_verify_json_valid_truncated_missing(self):
        job = Job(self, "verify")
        subprocess.run([PYTHON, STDLIB_TRAINER, "--steps", "5", "--every", "5", "--size", str(SIZE), "--out", job.ck],
                       check=True, capture_output=True, timeout=60)
        valid = os.path.join(job.ck, "ckpt-000005.pt")
        truncated = os.path.join(job.dir, "ckpt-000005-torn.pt")
        with open(valid, "rb") as f:
            data = f.read()
        with open(truncated, "wb") as f:
            f.write(data[:len(data) - 100])
        proc = job.gpuhost("verify", "--json", valid)
        self.assert_exit(proc, 0)
        [doc] = json.loads(proc.stdout)
        self.assertEqual(doc["format"], "torch_zip")
        self.assertTrue(doc["valid"])
        self.assertEqual(doc["problem"], "")
        self.assertEqual(doc["size_bytes"], len(data))
        self.assertTrue(doc["content_hash"].startswith("xxh3-128:"), doc)
        for key in ("path", "step", "files", "seconds"):
            self.assertIn(key, doc)
        proc = job.gpuhost("verify", "--json", valid, truncated)
        self.assert_exit(proc, 1)
        docs = json.loads(proc.stdout)
        self.assertEqual([d["valid"] for d in docs], [True, False])
        self.assertTrue(docs[1]["problem"])
        proc = job.gpuhost("verify", "--json", os.path.join(job.dir, "missing.pt"))
        self.assert_exit(proc, 3)
        self.assertIn("error", json.loads(proc.stdout)[0])

    def test_jobs_and_status_json_fields_and_pin_survives_retention(self):
        job = Job(self, "pin-keep")
        named = ["--name-pattern", "step-{step:06d}.pt"]  # a name gpuhost reads the step from
        proc = job.run([], job.stdlib(20, step_time=0.01, extra=named))
        self.assert_exit(proc, 0)
        status = job.status()
        for key in ("name", "job_dir", "phase", "supervisor_runs", "child_starts", "restarts", "preemptions",
                    "last_step", "last_exit", "resume_from", "checkpoints", "events", "journal_torn_tail_bytes",
                    "journal_corrupt_lines"):
            self.assertIn(key, status)
        self.assertEqual(status["name"], job.name)
        self.assertEqual(os.path.realpath(status["job_dir"]), os.path.realpath(job.job_dir))
        self.assertEqual((status["phase"], status["supervisor_runs"], status["child_starts"]), ("finished", 1, 1))
        self.assertEqual(status["journal_torn_tail_bytes"], 0)
        self.assertEqual(status["journal_corrupt_lines"], [])
        self.assertEqual(status["last_exit"], "exit code 0")
        self.assertEqual(status["last_step"], 20)
        self.assertEqual([c["step"] for c in status["checkpoints"]], [5, 10, 15, 20])
        for c in status["checkpoints"]:
            for key in ("id", "status", "path", "snapshot", "format", "size_bytes", "content_hash", "step",
                        "committed_at", "pinned", "bad_reason"):
                self.assertIn(key, c)
            self.assertEqual((c["status"], c["format"], c["pinned"]), ("committed", "torch_zip", False))
        self.assertEqual(status["resume_from"], status["checkpoints"][-1]["id"])
        self.assertTrue(all({"time", "type", "summary"} <= set(e) for e in status["events"]))

        # Without a name: the only job there is.
        only = job.gpuhost("status", "--json")
        self.assert_exit(only, 0)
        self.assertEqual(json.loads(only.stdout)["name"], job.name)
        self.assertEqual(only.stderr, "")

        listing = job.gpuhost("jobs", "--json")
        self.assert_exit(listing, 0)
        [entry] = json.loads(listing.stdout)
        self.assertEqual((entry["name"], entry["phase"]), (job.name, "finished"))
        self.assertEqual(len(entry["checkpoints"]), 4)

        oldest = status["checkpoints"][0]
        pin = job.gpuhost("status", job.name, "--pin", oldest["id"])
        self.assert_exit(pin, 0)
        self.assert_exit(job.gpuhost("status", job.name, "--pin", "ck-999"), 2)

        proc = job.run(["--keep", "2"], job.stdlib(30, step_time=0.01, extra=named))
        self.assert_exit(proc, 0)
        after = {c["step"]: c for c in job.status()["checkpoints"]}
        self.assertTrue(after[5]["pinned"])
        self.assertEqual({s: c["status"] for s, c in after.items()},
                         {5: "committed", 10: "retired", 15: "retired", 20: "retired", 25: "committed",
                          30: "committed"})
        self.assertEqual(sorted(os.listdir(job.ck)), ["step-000005.pt", "step-000025.pt", "step-000030.pt"])
        self.assertEqual(job.final_state(), reference_state(30))

        # A second job in the same home, run last: status without a name shows it and says so.
        other = job.gpuhost("run", "--name", "pin-keep-other", "--checkpoints", os.path.join(job.dir, "other-ck"),
                            "--cloud", "none", "--", PYTHON, "-c", "pass")
        self.assert_exit(other, 0)
        newest = job.gpuhost("status")
        self.assert_exit(newest, 0)
        self.assertTrue(newest.stdout.startswith("pin-keep-other"), newest.stdout)
        self.assertIn("pin-keep-other, the newest of 2 jobs", newest.stderr)
        self.assertIn("1 supervisor, 1 trainer start, 0 crash restarts, 0 preemptions", newest.stdout)
        empty = subprocess.run([BIN, "status", "--jobs-dir", job.dir], env=job.env(), capture_output=True, text=True)
        self.assert_exit(empty, 2)
        self.assertIn("no jobs in", empty.stderr)


@unittest.skipIf(IS_WINDOWS_BUILD, "Linux build")
class UsageErrors(RunTestCase):
    def gpuhost_run(self, *args):
        return subprocess.run([BIN, "run"] + list(args), capture_output=True, text=True, timeout=30,
                              env=dict(os.environ, NO_COLOR="1", GPUHOST_HOME=os.path.join(TMP, "run-cli", "usage")))

    def test_no_command(self):
        proc = self.gpuhost_run("--checkpoints", "ck")
        self.assert_exit(proc, 2)
        self.assertIn("no training command", proc.stderr)

    def test_no_checkpoints(self):
        proc = self.gpuhost_run("--", PYTHON, "-c", "pass")
        self.assert_exit(proc, 2)
        self.assertIn("--checkpoints is required", proc.stderr)

    def test_bad_drill(self):
        for drill in ("explode@3", "preempt@soon", "kill@3/10", "preempt@2/0"):
            proc = self.gpuhost_run("--checkpoints", "ck", "--drill", drill, "--", PYTHON, "-c", "pass")
            self.assert_exit(proc, 2)
            self.assertIn("bad drill '%s'" % drill, proc.stderr)

    def test_jobs_dir_that_does_not_exist(self):
        missing = os.path.join(TMP, "run-cli", "usage", "no-such-jobs-dir")
        proc = subprocess.run([BIN, "jobs", "--jobs-dir", missing], capture_output=True, text=True, timeout=30,
                              env=dict(os.environ, NO_COLOR="1"))
        self.assert_exit(proc, 3)
        self.assertIn("no such folder", proc.stderr)
        self.assertFalse(os.path.exists(missing))
        # The default place not existing yet is a machine where no job has run: no error.
        fresh = os.path.join(TMP, "run-cli", "usage", "fresh-home")
        proc = subprocess.run([BIN, "jobs"], capture_output=True, text=True, timeout=30,
                              env=dict(os.environ, NO_COLOR="1", GPUHOST_HOME=fresh))
        self.assert_exit(proc, 0)
        self.assertIn("No jobs", proc.stdout)


class GpuAssignment(RunTestCase):
    """--gpu against the fake NVML's eight A100s: the trainer gets their UUIDs in
    CUDA_VISIBLE_DEVICES; what the host does not have, two MIG slices, or indices without NVML are
    refused before the job exists."""

    def test_indices_reach_the_trainer_as_uuids_and_stay_in_the_job(self):
        job = Job(self, "gpu-assign")
        env = scenario_env("a100_sxm4_80gb_x8")
        proc = job.run(["--gpu", "5,2"], [PYTHON, "-c", "import os; print('visible', os.environ['CUDA_VISIBLE_DEVICES'])"],
                       env=env)
        self.assert_exit(proc, 0)
        with open(os.path.join(SCENARIOS, "a100_sxm4_80gb_x8.json")) as f:
            uuids = [d["uuid"] for d in json.load(f)["devices"]]
        expected = "%s,%s" % (uuids[5], uuids[2])
        self.assertIn("visible " + expected, job.stdout_log())
        self.assertIn("this job uses GPU 5 (NVIDIA A100-SXM4-80GB), GPU 2 (NVIDIA A100-SXM4-80GB)", proc.stderr)
        with open(os.path.join(job.job_dir, "job.json")) as f:
            self.assertEqual(json.load(f)["environment"]["CUDA_VISIBLE_DEVICES"], expected)

    def test_what_cannot_be_given_is_refused_before_the_job_exists(self):
        job = Job(self, "gpu-refused")
        cases = (("8", scenario_env("a100_sxm4_80gb_x8"), "--gpu 8: no such GPU; this host has GPU 0-7"),
                 ("GPU-no-such", scenario_env("a100_sxm4_80gb_x8"), "no GPU with that UUID"),
                 ("MIG-a,MIG-b", scenario_env("a100_sxm4_80gb_x8"), "a CUDA process sees one MIG device only"),
                 ("MIG-a", scenario_env("mig_pending_reset"), "no GPU of this host has MIG mode on"),
                 ("0", {"GPUHOST_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"}, "GPU indices need NVML"))
        for spec, env, text in cases:
            proc = job.run(["--gpu", spec], [PYTHON, "-c", "pass"], env=env)
            self.assert_exit(proc, 2)
            self.assertIn(text, proc.stderr)
        proc = job.run(["--gpu", "0", "--env", "CUDA_VISIBLE_DEVICES=1"], [PYTHON, "-c", "pass"],
                       env=scenario_env("a100_sxm4_80gb_x8"))
        self.assert_exit(proc, 2)
        self.assertIn("give one", proc.stderr)
        self.assertFalse(os.path.exists(job.job_dir))


class GpuMemoryFraction(RunTestCase):
    """--gpu-memory-fraction with trainers nobody changed: PyTorch's allocator is capped through the
    sitecustomize hook when torch is imported (a stand-in torch.cuda at that boundary records the
    calls: no GPU here), Debian's real PyTorch still imports and trains (CUDA unavailable: the hook
    says so), a sitecustomize of the user's or the host's still runs, JAX and TensorFlow get their
    environment, and bad values are refused before the job exists."""

    FAKE_TORCH = os.path.join(HERE, "fake_torch")

    def stderr_log(self, job):
        with open(os.path.join(job.job_dir, "logs", "stderr.log"), errors="replace") as f:
            return f.read()

    def test_torch_gets_the_cap_on_its_device_when_cuda_starts(self):
        job = Job(self, "memfrac-fake-torch")
        log = os.path.join(job.dir, "torch.log")
        trainer = ("import os, torch\n"
                   "print('before init:', open(os.environ['FAKE_TORCH_LOG']).read() if os.path.exists(os.environ['FAKE_TORCH_LOG']) else 'nothing')\n"
                   "print('visible at init:', os.environ.get('CUDA_VISIBLE_DEVICES'))\n"
                   "torch.cuda.init()\n")
        env = {"PYTHONPATH": self.FAKE_TORCH, "FAKE_TORCH_LOG": log}
        proc = job.run(["--gpu-memory-fraction", "30%"], [PYTHON, "-c", trainer], env=env)
        self.assert_exit(proc, 0)
        # Nothing at import: no CUDA context before the trainer uses CUDA.
        self.assertIn("before init: nothing", job.stdout_log())
        with open(log) as f:
            self.assertEqual(f.read().splitlines(), ["init", "fraction 0.3 device 0 initialized True"])
        self.assertIn("gpuhost: torch: CUDA memory of this process capped at 0.3 of device 0", self.stderr_log(job))
        self.assertIn("may take 30 % of a GPU's memory", proc.stderr)
        self.assertIn("TensorFlow reads no memory cap from the environment", proc.stderr)
        # Under torchrun each rank caps its own device (LOCAL_RANK), not every visible one.
        os.remove(log)
        proc = job.run(["--gpu-memory-fraction", "0.25", "--env", "LOCAL_RANK=1", "--env", "CUDA_VISIBLE_DEVICES=0,1"],
                       [PYTHON, "-c", trainer], env=env)
        self.assert_exit(proc, 0)
        with open(log) as f:
            self.assertEqual(f.read().splitlines(), ["init", "fraction 0.25 device 1 initialized True"])

    @needs(torch_available(), "Debian's python3-torch for /usr/bin/python3")
    def test_real_torch_still_trains_and_the_users_sitecustomize_still_runs(self):
        job = Job(self, "memfrac-real-torch")
        own = os.path.join(job.dir, "own-site")
        os.makedirs(own)
        marker = os.path.join(job.dir, "own-sitecustomize-ran")
        with open(os.path.join(own, "sitecustomize.py"), "w") as f:
            f.write("open(%r, 'w').write('yes')\n" % marker)
        trainer = ("import os, torch\n"
                   "x = torch.nn.Linear(4, 1)(torch.ones(2, 4)).sum(); x.backward()\n"
                   "print('trained', float(x) == float(x))\n"
                   "print('jax', os.environ['XLA_PYTHON_CLIENT_MEM_FRACTION'], 'tf', os.environ['TF_FORCE_GPU_ALLOW_GROWTH'])\n")
        proc = job.run(["--gpu-memory-fraction", "0.5"], [SYSTEM_PYTHON, "-c", trainer], env={"PYTHONPATH": own})
        self.assert_exit(proc, 0)
        self.assertIn("trained True", job.stdout_log())
        self.assertIn("jax 0.5 tf true", job.stdout_log())
        # Queued for CUDA's first use, which a CPU build never makes: nothing touched CUDA.
        self.assertIn("gpuhost: torch: CUDA memory of this process will be capped at 0.5 when it first uses CUDA",
                      self.stderr_log(job))
        self.assertNotIn("capped at 0.5 of device", self.stderr_log(job))
        self.assertTrue(os.path.exists(marker), "the user's sitecustomize.py did not run")
        with open(os.path.join(job.job_dir, "job.json")) as f:
            environment = json.load(f)["environment"]
        self.assertTrue(environment["PYTHONPATH"].endswith(":" + own), environment)
        self.assertEqual(environment["GPUHOST_TORCH_MEMORY_FRACTION"], "0.5")

    def test_bad_fractions_are_refused_before_the_job_exists(self):
        job = Job(self, "memfrac-bad")
        for value in ("0", "1.5", "-0.2", "abc", "150%", ""):
            proc = job.run(["--gpu-memory-fraction", value], [PYTHON, "-c", "pass"])
            self.assert_exit(proc, 2)
            self.assertIn("--gpu-memory-fraction expects a share of each GPU's memory in (0, 1]", proc.stderr)
        self.assertFalse(os.path.exists(job.job_dir))


if __name__ == "__main__":
    unittest.main()
