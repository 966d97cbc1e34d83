"""`gpuhost run` of the Windows build (gpuhost.exe under Wine) with tests/integration/trainers/
native_trainer.exe: a kill drill with resume, a preemption drill with each way of asking for the
save, and the supervisor killed (SIGKILL of its Wine process, or `taskkill /F`) taking the
trainer and the trainer's own child along.

Windows cannot tell from outside whether a process handles CTRL_BREAK, and a process without a
handler dies of it, so gpuhost sends it only when the job declares a handler (--save-signal
CTRL_BREAK); otherwise the request file (--save-request file/both) or the trainer's next periodic
checkpoint is the save (test_undeclared_signal_is_not_sent_and_the_periodic_checkpoint_is_the_save).

What Wine 8 does with the save request (checked by test_declared_ctrl_break_save_request):
gpuhost's console save request on Windows is CTRL_BREAK_EVENT to the trainer's process group
(platform/child_process_win32.cc). Under Wine, GenerateConsoleCtrlEvent always fails, and
wineserver implements only CTRL_C_EVENT (server/console.c propagate_console_signal: "FIXME: should
support the other events"), so gpuhost falls back to sending CTRL_C_EVENT to the child's group
through the console's IOCTL_CONDRV_CTRL_EVENT. That event reaches the trainer's console handler
as CTRL_C; native_trainer takes both console events as a save request (on real Windows CTRL_C
cannot target a process group, so nothing else sends it one), so the test checks the whole path:
console event -> save -> commit before the deadline -> exit 75 -> resume. A trainer that takes
CTRL_C as "stop" (Python's default KeyboardInterrupt) would stop without saving under Wine; the
test would catch that. `--save-request file` and `both` are tested too. On real
Windows CTRL_BREAK arrives as CTRL_BREAK; that is not verified here.

Killing the supervisor: Wine runs each Windows process as a Linux process whose command line is
the Windows one, so the trainer and its grandchild are found in /proc by the unique pid-file paths
on their command lines (Windows pids from GetCurrentProcessId are not Linux pids, and Wine 8's
tasklist prints nothing). gpuhost puts the trainer in a job object with KILL_ON_JOB_CLOSE, and
Wine ends the job's processes when the supervisor's process dies.

Standard library only; runs only for the Windows build (GPUHOST_WINE set)."""
import json
import os
import shutil
import signal
import subprocess
import time
import unittest

from gpuhost_test import BIN, IS_WINDOWS_BUILD, SCENARIOS, TMP, WINE, host_path, needs, processes_with, scenario_env
from test_run_cli import parse_time, read_journal

NATIVE_TRAINER = os.environ.get("GPUHOST_NATIVE_TRAINER", "")
FAST = ["--cloud", "none", "--settle", "0.2", "--backoff", "0.1", "--max-backoff", "0.2", "--quiet"]
SIZE = 256

_references = {}


def wine(args, timeout=120, env=None):
    full_env = dict(os.environ, NO_COLOR="1")
    full_env.update(env or {})
    return subprocess.run([WINE] + list(args), capture_output=True, text=True, timeout=timeout, env=full_env)


def reference_state(steps):
    """Final weights of an uninterrupted native_trainer.exe run of `steps` steps."""
    if steps not in _references:
        directory = os.path.join(TMP, "run-windows", "reference-%d" % steps)
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        final = os.path.join(directory, "final.state")
        proc = wine([NATIVE_TRAINER, "--steps", str(steps), "--every", "0", "--size", str(SIZE),
                     "--out", host_path(os.path.join(directory, "ck")), "--final-state", host_path(final)])
        if proc.returncode != 0:
            raise AssertionError("reference run failed: " + proc.stderr)
        with open(final, "rb") as f:
            _references[steps] = f.read()
    return _references[steps]


def linux_processes_with(*texts):
    """Linux pids of the trainer's processes: gpuhost.exe's own command line holds the trainer's."""
    return processes_with(*texts, excluding="gpuhost.exe")


class WinJob:
    def __init__(self, test, label):
        self.test = test
        self.name = label
        self.dir = os.path.join(TMP, "run-windows", label)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.jobs = os.path.join(self.dir, "jobs")
        self.ck = os.path.join(self.dir, "ck")
        self.resume_log = os.path.join(self.dir, "resume.log")
        self.final = os.path.join(self.dir, "final.state")
        self.pid_file = os.path.join(self.dir, "trainer.pid")
        self.grandchild_pid_file = os.path.join(self.dir, "grandchild.pid")
        self.job_dir = os.path.join(self.jobs, label)
        self.runs = 0

    def trainer(self, steps, every=5, step_time_ms=50, extra=()):
        return [host_path(NATIVE_TRAINER), "--steps", str(steps), "--every", str(every), "--step-time-ms",
                str(step_time_ms), "--size", str(SIZE), "--out", host_path(self.ck), "--resume-log",
                host_path(self.resume_log), "--final-state", host_path(self.final), "--pid-file",
                host_path(self.pid_file)] + list(extra) + ["--resume", "{resume}"]

    def argv(self, flags, trainer):
        return [BIN, "run", "--name", self.name, "--jobs-dir", host_path(self.jobs), "--checkpoints",
                host_path(self.ck)] + FAST + list(flags) + ["--"] + list(trainer)

    def run(self, flags, trainer, timeout=180):
        self.runs += 1
        return wine(self.argv(flags, trainer), timeout=timeout)

    def start(self, flags, trainer):
        self.runs += 1
        err = open(os.path.join(self.dir, "gpuhost-%d.err" % self.runs), "w")
        proc = subprocess.Popen([WINE] + self.argv(flags, trainer), stdout=subprocess.DEVNULL, stderr=err,
                                env=dict(os.environ, NO_COLOR="1"))
        err.close()
        self.test.addCleanup(self._reap, proc)
        return proc

    def _reap(self, proc):
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in linux_processes_with(host_path(self.dir)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def journal(self):
        return read_journal(os.path.join(self.job_dir, "journal.jsonl"))

    def records(self, kind):
        return [r for r in self.journal() if r["type"] == kind]

    def summary(self):
        path = os.path.join(self.job_dir, "journal.jsonl")
        if not os.path.exists(path):
            return "(no journal)"
        return "\n  " + "\n  ".join(json.dumps(r)[:300] for r in self.journal())

    def wait_for_commits(self, proc, count, timeout=90):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            path = os.path.join(self.job_dir, "journal.jsonl")
            if os.path.exists(path) and sum(r["type"] == "checkpoint_committed" for r in self.journal()) >= count:
                return
            if proc.poll() is not None:
                self.test.fail("gpuhost.exe exited (%d) early:%s" % (proc.returncode, self.summary()))
            time.sleep(0.1)
        self.test.fail("no %d commits in time:%s" % (count, self.summary()))

    def resume_lines(self):
        if not os.path.exists(self.resume_log):
            return []
        with open(self.resume_log) as f:
            return [line.split() for line in f.read().splitlines()]

    def stdout_log(self):
        with open(os.path.join(self.job_dir, "logs", "stdout.log"), errors="replace") as f:
            return f.read()

    def final_state(self):
        with open(self.final, "rb") as f:
            return f.read()


@unittest.skipUnless(IS_WINDOWS_BUILD, "Windows build (gpuhost.exe under Wine)")
@needs(NATIVE_TRAINER, "GPUHOST_NATIVE_TRAINER (CTest sets it to the built tests/native_trainer)")
class WindowsRun(unittest.TestCase):
    def assert_exit(self, proc, code, job=None):
        self.assertEqual(proc.returncode, code, "stderr:\n%s%s" % ((proc.stderr or "")[-4000:],
                                                                     job.summary() if job else ""))

    def assert_resumed_from_newest(self, job, start_index):
        records = job.journal()
        started = records[start_index]
        self.assertEqual(started["type"], "child_started")
        bad = {r["id"] for r in records[:start_index] if r["type"] == "checkpoint_bad"}
        committed = [r for r in records[:start_index]
                     if r["type"] == "checkpoint_committed" and "ck-%d" % r["seq"] not in bad]
        self.assertTrue(committed, "nothing committed before the restart:" + job.summary())
        newest = committed[-1]
        self.assertEqual(newest["format"], "safetensors")
        self.assertEqual(started["resume_from"], "ck-%d" % newest["seq"], job.summary())
        self.assertEqual(started["resume_path"], newest["path"])
        step = int(newest["path"].rsplit("-", 1)[1].split(".")[0])
        self.assertIn(["OK", newest["path"], str(step)], job.resume_lines())
        return newest

    def assert_rerun_resumes(self, job, steps, saved=None):
        before = len(job.journal())
        proc = job.run([], job.trainer(steps, every=0, step_time_ms=0))
        self.assert_exit(proc, 0, job)
        records = job.journal()
        first = next(i for i in range(before, len(records)) if records[i]["type"] == "child_started")
        newest = self.assert_resumed_from_newest(job, first)
        if saved is not None:
            # The stop request (a console event too) may make the trainer save once more before it
            # is stopped: the rerun takes the newest, which is the saved one or a later one.
            self.assertGreaterEqual(newest["seq"], saved["seq"], "the rerun resumed from before the saved checkpoint")
        self.assertEqual(job.final_state(), reference_state(steps))
        return records[before]

    def preempt(self, job, save_request, every=0, extra=()):
        flags = ["--drill", "preempt@1.5/20"] + (["--save-request", save_request] if save_request else []) + list(extra)
        proc = job.run(flags, job.trainer(400, every=every))
        self.assert_exit(proc, 75, job)
        records = job.journal()
        notice = [r for r in records if r["type"] == "notice"]
        self.assertEqual([n["source"] for n in notice], ["drill"])
        requested = [r for r in records if r["type"] == "save_requested"]
        self.assertEqual(len(requested), 1, job.summary())
        self.assertEqual(records[-1]["outcome"], "preempted")
        self.assertEqual([r["cause"] for r in records if r["type"] == "child_exited"], ["preempted"])
        return records, parse_time(notice[0]["deadline"]), requested[0]

    def assert_saved_before(self, job, records, deadline):
        saves = [r for r in records if r["type"] == "save_completed"]
        self.assertEqual(len(saves), 1, job.summary())
        commit = next(r for r in records if r["type"] == "checkpoint_committed" and "ck-%d" % r["seq"] == saves[0]["id"])
        self.assertLess(parse_time(commit["time"]), deadline)
        self.assertIn("save requested at step", job.stdout_log())
        return commit

    def test_kill_drill_resumes_bit_identical(self):
        job = WinJob(self, "kill-drill")
        steps = 80
        proc = job.run(["--drill", "kill@1.5"], job.trainer(steps))
        self.assert_exit(proc, 0, job)
        records = job.journal()
        self.assertEqual([r["cause"] for r in records if r["type"] == "child_exited"], ["drill_kill", "success"],
                         job.summary())
        starts = [i for i, r in enumerate(records) if r["type"] == "child_started"]
        self.assertEqual(len(starts), 2)
        self.assert_resumed_from_newest(job, starts[1])
        self.assertEqual(len(job.resume_lines()), 1)
        self.assertEqual(job.final_state(), reference_state(steps))

    def test_preempt_with_save_request_file(self):
        job = WinJob(self, "preempt-file")
        records, deadline, requested = self.preempt(job, "file")
        self.assertEqual(requested["method"], "file")
        saved = self.assert_saved_before(job, records, deadline)
        self.assertFalse(os.path.exists(os.path.join(job.job_dir, "save-request")), "the request file was left")
        self.assert_rerun_resumes(job, 400, saved)

    def test_save_request_both_saves_under_wine(self):
        job = WinJob(self, "preempt-both")
        records, deadline, requested = self.preempt(job, "both")
        self.assertEqual((requested["method"], requested["signal"]), ("both", "CTRL_BREAK"))
        self.assertTrue(requested["undeclared"], "an undeclared CTRL_BREAK was sent")
        self.assertEqual(requested["signalled"], 0)
        saved = self.assert_saved_before(job, records, deadline)
        self.assert_rerun_resumes(job, 400, saved)

    def test_undeclared_signal_is_not_sent_and_the_periodic_checkpoint_is_the_save(self):
        job = WinJob(self, "preempt-undeclared")
        records, deadline, requested = self.preempt(job, None, every=20)
        self.assertEqual((requested["method"], requested["signal"], requested["signalled"]), ("signal", "CTRL_BREAK", 0))
        self.assertEqual(requested["waiting"], "periodic")
        saves = [r for r in records if r["type"] == "save_completed"]
        self.assertEqual(len(saves), 1, job.summary())
        notice = next(r for r in records if r["type"] == "notice")
        commit = next(r for r in records if r["type"] == "checkpoint_committed" and "ck-%d" % r["seq"] == saves[0]["id"])
        # The save is one of the trainer's own (every 20 steps), not one a console event asked
        # for: nothing was sent until the stop (CTRL_BREAK, which this trainer also takes as a
        # save request before it stops).
        self.assertEqual(commit["step"] % 20, 0, commit)
        log = job.stdout_log()
        self.assertNotIn("save requested at step", log.split("saved ")[0] if "saved " in log else log)
        before_save = log[:log.index("at step %d" % commit["step"])]
        self.assertNotIn("save requested at step", before_save, "the trainer got a console event before its save")
        self.assertGreaterEqual(parse_time(commit["modified"]), parse_time(notice["time"]))
        self.assertLess(parse_time(commit["time"]), deadline)
        self.assert_rerun_resumes(job, 400)

    def test_declared_ctrl_break_save_request(self):
        job = WinJob(self, "preempt-ctrl-break")
        records, deadline, requested = self.preempt(job, None, extra=["--save-signal", "CTRL_BREAK"])
        self.assertEqual((requested["method"], requested["signal"]), ("signal", "CTRL_BREAK"))
        self.assertGreater(requested["signalled"], 0)
        # The console event reached the trainer (as CTRL_BREAK on Windows, as CTRL_C under Wine 8:
        # see the module docstring) and it saved before the deadline.
        self.assertIn("save requested at step", job.stdout_log(), job.summary())
        self.assert_saved_before(job, records, deadline)
        self.assert_rerun_resumes(job, 400)

    def kill_supervisor(self, label, how):
        job = WinJob(self, label)
        steps = 400
        proc = job.start([], job.trainer(steps, extra=["--spawn-grandchild", host_path(job.grandchild_pid_file)]))
        job.wait_for_commits(proc, 2)
        find_trainer = lambda: linux_processes_with(host_path(job.pid_file))  # noqa: E731
        find_grandchild = lambda: linux_processes_with("--sleep-forever", host_path(job.grandchild_pid_file))  # noqa: E731
        trainer = find_trainer()
        grandchild = find_grandchild()
        self.assertEqual(len(trainer), 1, "the trainer's Wine process was not found")
        self.assertEqual(len(grandchild), 1, "the grandchild's Wine process was not found")
        how(job, proc)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 20
        while (find_trainer() or find_grandchild()) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(find_trainer(), [], "the trainer outlived its supervisor")
        self.assertEqual(find_grandchild(), [], "the trainer's child outlived the supervisor")
        self.assertNotEqual(job.journal()[-1]["type"], "supervisor_stopped")
        started = self.assert_rerun_resumes(job, steps)
        self.assertEqual(started["type"], "supervisor_started")
        self.assertTrue(started["after_crash"], started)

    def test_sigkill_of_supervisor_wine_process_kills_trainer_tree(self):
        # wine-run.sh execs wine, so the Popen pid is the Linux process running gpuhost.exe.
        self.kill_supervisor("sigkill", lambda job, proc: os.kill(proc.pid, signal.SIGKILL))

    def test_taskkill_of_supervisor_kills_trainer_tree(self):
        def taskkill(job, proc):
            pid = job.records("supervisor_started")[-1]["pid"]
            done = wine(["taskkill", "/F", "/PID", str(pid)], timeout=60)
            self.assertEqual(done.returncode, 0, done.stderr + done.stdout)
        self.kill_supervisor("taskkill", taskkill)


@unittest.skipUnless(IS_WINDOWS_BUILD, "the Windows build under Wine")
class WindowsGpuAssignment(unittest.TestCase):
    """--gpu on Windows: nvml.dll (the fake) names the GPUs, the trainer (Wine's cmd.exe) sees
    their UUIDs in CUDA_VISIBLE_DEVICES; a MIG slice is refused, since MIG is Linux-only."""

    def test_the_trainer_gets_the_gpus_uuid_and_mig_is_refused(self):
        job = WinJob(self, "gpu-assign")
        env = scenario_env("a100_sxm4_80gb_x8")
        proc = wine(job.argv(["--gpu", "1"], ["cmd", "/c", "echo", "visible=%CUDA_VISIBLE_DEVICES%"]), env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(os.path.join(SCENARIOS, "a100_sxm4_80gb_x8.json")) as f:
            uuid = json.load(f)["devices"][1]["uuid"]
        self.assertIn("visible=" + uuid, job.stdout_log())
        self.assertIn("this job uses GPU 1 (NVIDIA A100-SXM4-80GB)", proc.stderr)
        refused = WinJob(self, "gpu-mig")
        proc = wine(refused.argv(["--gpu", "MIG-4f2c"], ["cmd", "/c", "echo"]), env=env)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("MIG is supported on Linux only", proc.stderr)
        self.assertIn("Hyper-V GPU partitioning", proc.stderr)
        self.assertFalse(os.path.exists(refused.job_dir))


@unittest.skipUnless(IS_WINDOWS_BUILD, "Windows build (gpuhost.exe under Wine)")
@needs(NATIVE_TRAINER, "GPUHOST_NATIVE_TRAINER (CTest sets it to the built tests/native_trainer)")
class WindowsAdvice(unittest.TestCase):
    """The advisor inside gpuhost.exe run: nvml.dll (the fake) gives the GPU side, the trainer's
    process tree its threads' CPU time (GetThreadTimes) and reads (GetProcessIoCounters): a
    trainer whose main thread computes every step's input while the GPU waits is input-bound; one
    that sleeps is not, and the GPU's wait stays a hint."""

    def advice_of(self, label, extra, steps=100):
        job = WinJob(self, label)
        env = scenario_env("a100_waiting_for_input")
        proc = wine(job.argv(["--advise", "1"], job.trainer(steps, every=0, step_time_ms=50, extra=extra)), env=env,
                    timeout=180)
        self.assertEqual(proc.returncode, 0, proc.stderr + job.summary())
        advice = job.records("advice")
        self.assertTrue(advice, "no advice record in a 5 s run with --advise 1:" + job.summary())
        return job, advice

    def test_a_main_thread_that_computes_while_the_gpu_waits_is_input_bound(self):
        # Windows keeps no per-thread ready time, so busy is the CPU the thread got: ten windows,
        # of which one at least gets a core while other tests load the host.
        job, advice = self.advice_of("advice-spin", ["--spin"], steps=200)
        self.assertEqual(advice[0]["gpus_seen"], 1, advice[0])
        self.assertNotIn("host_unseen", advice[0])
        verdicts = [r for r in advice if [(f["id"], f["strength"]) for f in r["findings"]] == [("input_bound", "verdict")]]
        self.assertTrue(verdicts, advice)
        finding = verdicts[0]["findings"][0]
        self.assertIn("num_workers=0", finding["limit"])
        self.assertTrue(any("the main thread (native_trainer" in e for e in finding["evidence"]), finding)
        status = wine([BIN, "status", job.name, "--jobs-dir", host_path(job.jobs), "--json", "--events", "0"])
        self.assertEqual(status.returncode, 0, status.stderr)
        self.assertEqual(json.loads(status.stdout)["advice"]["unseen"], "")

    def test_a_sleeping_trainer_leaves_the_gpu_wait_a_hint(self):
        _, advice = self.advice_of("advice-sleep", [])
        self.assertEqual([(f["id"], f["strength"], f["gpu"]) for f in advice[0]["findings"]], [("gpu_waiting", "hint", 0)])
        self.assertIn("neither the loader nor storage is saturated", advice[0]["findings"][0]["limit"])


if __name__ == "__main__":
    unittest.main()
