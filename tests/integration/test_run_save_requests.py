"""`gpuhost run` with trainers nobody changed for it, as users run them (Debian's python3-torch,
real signals, real torchrun): a trainer with no signal handler at all, whose only saves are its
own periodic ones; one whose next save cannot land before the deadline; a DDP trainer under
`torchrun --nproc_per_node=2`, whose agent handles SIGTERM but not the save signal; and Ctrl-C
pressed twice.

What must hold: the save signal never kills anything (no "killed by SIGUSR1", the torchrun agent
is left alone); the save is a checkpoint whose bytes were written after the notice; a missed
save is reported with the steps it loses; exit codes are 75 (preempted) and 130 (stopped); a
rerun resumes bit-identical to an uninterrupted run. Notices come from SIGTERM to gpuhost (30 s
deadline), sent once the trainer is seen training, so a slow machine does not change the case.
Skipped without Debian's python3-torch (install-deps.sh installs it)."""
import os
import signal
import socket
import subprocess
import unittest

from gpuhost_test import IS_WINDOWS_BUILD, SYSTEM_PYTHON, needs, read_metric_history, torch_available
from test_run_cli import TORCH_TRAINER, Job, RunTestCase, parse_time

HERE = os.path.dirname(os.path.abspath(__file__))
DDP_TRAINER = os.path.join(HERE, "trainers", "ddp_trainer.py")
REFERENCE_TIMEOUT = 180


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TorchJob(Job):
    """test_run_cli's Job (its own GPUHOST_HOME and checkpoint folder) with PyTorch trainers nobody
    changed for gpuhost, and torchrun."""

    def __init__(self, test, label):
        super().__init__(test, "save-" + label)

    def torch(self, steps, every, step_time, handlers="none"):
        return [SYSTEM_PYTHON, TORCH_TRAINER, "--steps", str(steps), "--every", str(every), "--step-time",
                str(step_time), "--out", self.ck, "--final-state", self.final, "--handlers", handlers,
                "--resume", "{resume}"]

    def torchrun(self, steps, every, step_time, handlers="gpuhost"):
        # Debian's torch 1.13 on Python 3.11: the default --redirects/--tee fail to parse (IntFlag).
        return ["/usr/bin/torchrun", "--nproc_per_node=2", "-r", "9:1", "-t", "9:1", "--master_addr", "127.0.0.1",
                "--master_port", str(free_port()), DDP_TRAINER, "--steps", str(steps), "--every", str(every),
                "--step-time", str(step_time), "--out", self.ck, "--final-state", self.final, "--handlers", handlers,
                "--resume", "{resume}"]

    def stderr(self):
        return self.stderr_of(self.runs)

    # Polled before gpuhost has made them: empty until then.
    def records(self, kind):
        return super().records(kind) if os.path.exists(self.journal_path) else []

    def stdout_log(self):
        return super().stdout_log() if os.path.exists(os.path.join(self.job_dir, "logs", "stdout.log")) else ""

    def wait_until(self, predicate, what, proc, timeout=180):
        self.wait_for(lambda records: predicate(), what, proc, timeout)


_references = {}


def reference(kind, steps):
    """Final weights of an uninterrupted run of the same trainer (computed once per shape).

    Plain torchrun, no gpuhost: a run that has not ended in REFERENCE_TIMEOUT (7 s alone on the
    2-core CI host) is killed with its workers and run again on a new port, at most three times.
    Once, with the Slurm tests running beside it, one hung past 600 s; its output was lost, so each
    attempt's output is kept in reference-*.log and quoted when all of them fail."""
    key = (kind, steps)
    if key not in _references:
        job = TorchJob(None, "reference-%s-%d" % (kind, steps))  # for its folders only
        failures = []
        for attempt in range(1, 4):
            command = job.torch(steps, 0, 0) if kind == "torch" else job.torchrun(steps, 0, 0)
            command = [c for c in command if c not in ("--resume", "{resume}")]
            log_path = os.path.join(job.dir, "reference-%d.log" % attempt)
            with open(log_path, "wb") as log:
                proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=job.dir,
                                        start_new_session=True)
                try:
                    proc.wait(timeout=REFERENCE_TIMEOUT)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            if proc.returncode == 0:
                break
            with open(log_path, errors="replace") as log:
                failures.append("attempt %d (exit %s):\n%s" % (attempt, proc.returncode, log.read()[-3000:]))
        else:
            raise RuntimeError("the reference run did not finish:\n" + "\n".join(failures))
        with open(job.final, "rb") as f:
            _references[key] = f.read()
    return _references[key]


@unittest.skipIf(IS_WINDOWS_BUILD, "Linux signals; test_run_windows.py covers the Windows rule")
@needs(torch_available(), "Debian's python3-torch for /usr/bin/python3")
class UnchangedTrainers(RunTestCase):
    def assert_never_killed_by_the_save_signal(self, job):
        for exited in job.records("child_exited"):
            self.assertNotIn("SIGUSR1", exited["description"], job.summary())

    def assert_save_written_after_notice(self, job):
        records = job.journal()
        notice = next(r for r in records if r["type"] == "notice")
        saves = [r for r in records if r["type"] == "save_completed"]
        self.assertEqual(len(saves), 1, job.summary())
        commit = next(r for r in records if r["type"] == "checkpoint_committed" and "ck-%d" % r["seq"] == saves[0]["id"])
        # Judged by when the bytes were written (the mtime gpuhost journals), not when they were
        # committed: a checkpoint written before the notice and committed after it is no save.
        self.assertGreaterEqual(parse_time(commit["modified"]), parse_time(notice["time"]), job.summary())
        self.assertLess(parse_time(commit["time"]), parse_time(notice["deadline"]))
        for earlier in records:
            if earlier["type"] == "checkpoint_committed" and earlier["seq"] > notice["seq"] and earlier["seq"] < commit["seq"]:
                self.assertLess(parse_time(earlier["modified"]), parse_time(notice["time"]), "an earlier save was missed")
        return commit

    def test_no_handler_the_next_periodic_checkpoint_is_the_save(self):
        job = TorchJob(self, "no-handler-periodic")
        steps = 400
        proc = job.start([], job.torch(steps, every=25, step_time=0.06))
        job.wait_until(lambda: len(job.records("checkpoint_committed")) >= 2, "two periodic checkpoints", proc)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        self.assertEqual(proc.returncode, 75, job.stderr() + job.summary())
        requested = job.records("save_requested")
        self.assertEqual(len(requested), 1, job.summary())
        self.assertEqual(requested[0]["signalled"], 0, "a trainer with no handler was sent the save signal")
        self.assertEqual(requested[0]["waiting"], "periodic")
        self.assertIn("expected_in_ms", requested[0], "the cadence of two checkpoints gives an expectation")
        self.assertIn("waiting for the next periodic checkpoint", job.stderr())
        saved = self.assert_save_written_after_notice(job)
        self.assert_never_killed_by_the_save_signal(job)
        self.assertIn("after saving ck-%d" % saved["seq"], job.stderr())
        self.assertIn("run the same command again", job.stderr())
        # The rerun resumes from that checkpoint and ends where an uninterrupted run ends.
        rerun = job.run([], job.torch(steps, every=0, step_time=0), timeout=300)
        self.assert_exit(rerun, 0)
        started = job.records("child_started")[-1]
        self.assertEqual(started["resume_from"], "ck-%d" % saved["seq"])
        self.assertEqual(open(job.final, "rb").read(), reference("torch", steps))

    def test_hf_printed_losses_give_way_to_trainer_state_steps(self):
        # The HF Trainer prints {'loss': ...} with no step and logs the same loss by step in each
        # checkpoint's trainer_state.json: the step axis must get the latter, not "0 points".
        job = TorchJob(self, "hf-metrics")
        # 15 s: longer than the metric files' rescan (every 10 s), so some trainer_state.json is read.
        trainer = job.torch(60, every=20, step_time=0.25) + ["--layout", "hf", "--print-style", "hf"]
        proc = job.run([], trainer, timeout=300)
        self.assert_exit(proc, 0)
        self.assertIn("{'loss': ", job.stdout_log())
        series, sources = read_metric_history(os.path.join(job.job_dir, "metrics"))
        self.assertEqual(sources["loss"], "trainer_state", sources)
        stepped = {step for _, step, _ in series["loss"] if step is not None}
        self.assertGreaterEqual(len(stepped), 20, "at least one checkpoint's log_history, by step")
        self.assertTrue(stepped <= set(range(1, 61)), stepped)

    def test_no_handler_and_no_save_in_time_stops_at_the_deadline_and_names_the_lost_steps(self):
        job = TorchJob(self, "no-handler-late")
        # Its first checkpoint would come at step 100000: none lands before the deadline (the 20 s
        # margin leaves 10 s of the 30 s).
        proc = job.start(["--safety-margin", "20"], job.torch(100000, every=100000, step_time=0.02))
        job.wait_until(lambda: "step 40 " in job.stdout_log(), "training", proc)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        self.assertEqual(proc.returncode, 75, job.stderr() + job.summary())
        timed_out = job.records("save_timed_out")
        self.assertEqual(len(timed_out), 1, job.summary())
        self.assertIsNone(timed_out[0]["checkpoint_step"])
        self.assertGreaterEqual(timed_out[0]["last_step"], 40)
        self.assertEqual(timed_out[0]["lost_steps"], timed_out[0]["last_step"])
        self.assertIn("steps 1-%d are lost (no checkpoint to resume from)" % timed_out[0]["last_step"], job.stderr())
        self.assertIn("before any checkpoint: steps 1-", job.stderr())
        self.assertEqual(job.records("save_completed"), [])
        self.assert_never_killed_by_the_save_signal(job)
        self.assertEqual(job.records("child_exited")[-1]["cause"], "preempted")

    def test_handler_saves_at_once(self):
        job = TorchJob(self, "handler")
        steps = 300
        proc = job.start([], job.torch(steps, every=0, step_time=0.03, handlers="gpuhost"))
        job.wait_until(lambda: "step 30 " in job.stdout_log(), "training", proc)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        self.assertEqual(proc.returncode, 75, job.stderr() + job.summary())
        self.assertEqual(job.records("save_requested")[0]["signalled"], 1)
        self.assertIn("save requested at step", job.stdout_log())
        saved = self.assert_save_written_after_notice(job)
        rerun = job.run([], job.torch(steps, every=0, step_time=0, handlers="gpuhost"), timeout=300)
        self.assert_exit(rerun, 0)
        self.assertEqual(job.records("child_started")[-1]["resume_from"], "ck-%d" % saved["seq"])
        self.assertEqual(open(job.final, "rb").read(), reference("torch", steps))

    def test_torchrun_workers_save_at_the_notice_and_the_agent_is_spared(self):
        job = TorchJob(self, "torchrun")
        steps = 1500
        proc = job.start([], job.torchrun(steps, every=0, step_time=0.01))
        job.wait_until(lambda: "step 100 " in job.stdout_log(), "DDP training", proc, timeout=240)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=180)
        self.assertEqual(proc.returncode, 75, job.stderr() + job.summary())
        requested = job.records("save_requested")[0]
        self.assertEqual(requested["launcher"], "torchrun")
        self.assertEqual(requested["signalled"], 2, "both workers catch SIGUSR1")
        self.assertTrue(any(s.startswith("torchrun (pid ") for s in requested["spared"]), requested)
        self.assertIn("save requested at step", job.stdout_log())
        saved = self.assert_save_written_after_notice(job)
        self.assert_never_killed_by_the_save_signal(job)
        rerun = job.run([], job.torchrun(steps, every=0, step_time=0), timeout=300)
        self.assert_exit(rerun, 0)
        self.assertEqual(job.records("child_started")[-1]["resume_from"], "ck-%d" % saved["seq"])
        self.assertEqual(open(job.final, "rb").read(), reference("torchrun", steps))

    def test_second_ctrl_c_kills_at_once(self):
        job = TorchJob(self, "ctrl-c-twice")
        proc = job.start([], job.torch(100000, every=100000, step_time=0.02))
        job.wait_until(lambda: "step 20 " in job.stdout_log(), "training", proc)
        proc.send_signal(signal.SIGINT)
        job.wait_until(lambda: job.records("save_requested"), "the save request", proc)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        self.assertEqual(proc.returncode, 130, job.stderr() + job.summary())
        notices = job.records("notice")
        self.assertEqual([n["kind"] for n in notices], ["stop", "stop"], job.summary())
        self.assertIn("second interrupt: killing the trainer now", job.stderr())
        self.assertEqual(job.records("save_timed_out"), [], "the second Ctrl-C waited for the save timeout")
        self.assertEqual(job.records("child_exited")[-1]["description"], "killed by SIGKILL")
        self.assertIn("stop requested (", job.stderr())
        self.assertNotIn("notice from signal: preemption", job.stderr())


if __name__ == "__main__":
    unittest.main()
