"""A job is its checkpoint folder: two experiments with the same folder name in different places
(`gpuhost run --checkpoints ck -- python train.py` in two project folders) are two jobs, and
the second never resumes from, marks bad or rewrites the first. A --name that belongs to another
folder is refused before anything is created (exit 2). Checkpoints already in a new job's folder
are announced with the one it resumes from; --fresh ignores them. Real child processes (the
standard-library trainer), Linux build."""
import os
import shutil
import subprocess
import unittest

from gpuhost_test import BIN, IS_WINDOWS_BUILD, TMP
from test_run_cli import PYTHON, SIZE, STDLIB_TRAINER, RunTestCase, read_journal, reference_state, write_checkpoints

FAST = ["--settle", "0.2", "--backoff", "0.1", "--cloud", "none", "--quiet"]


class Workspace:
    """One GPUHOST_HOME shared by several project folders, as on a user's machine."""

    def __init__(self, label):
        self.dir = os.path.join(TMP, "run-identity", label)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.home = os.path.join(self.dir, "home")

    def project(self, name):
        path = os.path.join(self.dir, name)
        os.makedirs(path, exist_ok=True)
        return path

    def run(self, project, flags, steps, every=5, timeout=120):
        """gpuhost run --checkpoints ck (relative, in `project`) -- stdlib trainer."""
        trainer = [PYTHON, STDLIB_TRAINER, "--steps", str(steps), "--every", str(every), "--step-time", "0.01",
                   "--size", str(SIZE), "--out", "ck", "--final-state", "final.state",
                   "--resume-log", "resume.log", "--resume", "{resume}"]
        env = dict(os.environ, NO_COLOR="1", GPUHOST_HOME=self.home)
        return subprocess.run([BIN, "run", "--checkpoints", "ck"] + FAST + list(flags) + ["--"] + trainer, cwd=project,
                              env=env, capture_output=True, text=True, timeout=timeout)

    def journal(self, job):
        return read_journal(os.path.join(self.home, "jobs", job, "journal.jsonl"))

    def jobs(self):
        root = os.path.join(self.home, "jobs")
        return sorted(os.listdir(root)) if os.path.isdir(root) else []


def resume_log(project):
    path = os.path.join(project, "resume.log")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return f.read().splitlines()


@unittest.skipIf(IS_WINDOWS_BUILD, "Linux build; the rule is the same code on Windows")
class JobIdentity(RunTestCase):
    def test_same_folder_name_elsewhere_is_another_job(self):
        ws = Workspace("two-folders")
        first, second = ws.project("exp-a"), ws.project("exp-b")
        self.assert_exit(ws.run(first, [], 30), 0)
        self.assertEqual(ws.jobs(), ["ck"])
        first_journal = ws.journal("ck")
        proc = ws.run(second, [], 40)
        self.assert_exit(proc, 0)
        self.assertIn("this run is job 'ck-2'", proc.stderr)
        self.assertEqual(ws.jobs(), ["ck", "ck-2"])
        self.assertEqual(ws.journal("ck"), first_journal, "the first experiment's job was touched")
        second_journal = ws.journal("ck-2")
        self.assertEqual(second_journal[0]["checkpoint_location"], os.path.join(second, "ck"))
        self.assertIsNone(next(r for r in second_journal if r["type"] == "child_started")["resume_from"])
        self.assertEqual(resume_log(second), [], "the second experiment resumed from something")
        with open(os.path.join(second, "final.state"), "rb") as f:
            self.assertEqual(f.read(), reference_state(40))
        # Each folder keeps finding its own job.
        again = ws.run(first, [], 30)
        self.assert_exit(again, 0)
        self.assertNotIn("this run is job", again.stderr)
        self.assertEqual(ws.jobs(), ["ck", "ck-2"])
        again = ws.run(second, [], 40)
        self.assert_exit(again, 0)
        self.assertEqual(ws.jobs(), ["ck", "ck-2"])

    def test_a_name_that_belongs_to_another_folder_is_refused_before_anything_exists(self):
        ws = Workspace("name-taken")
        first, second = ws.project("exp-a"), ws.project("exp-b")
        self.assert_exit(ws.run(first, ["--name", "llama"], 10), 0)
        before = ws.journal("llama")
        proc = ws.run(second, ["--name", "llama"], 10)
        self.assert_exit(proc, 2)
        self.assertIn("job 'llama' supervises the checkpoints in " + os.path.join(first, "ck"), proc.stderr)
        self.assertIn("another --name", proc.stderr)
        self.assertEqual(ws.journal("llama"), before)
        self.assertEqual(ws.jobs(), ["llama"])
        self.assertFalse(os.path.exists(os.path.join(second, "ck")), "the trainer ran")

    def test_checkpoints_already_there_are_announced_and_fresh_ignores_them(self):
        ws = Workspace("present")
        project = ws.project("exp")
        write_checkpoints(os.path.join(project, "ck"), 20)  # a run without gpuhost: ckpt-5 ... ckpt-20
        proc = ws.run(project, [], 30)
        self.assert_exit(proc, 0)
        found = [r for r in ws.journal("ck") if r["type"] == "checkpoints_found"]
        self.assertEqual(len(found), 1, proc.stderr)
        self.assertEqual(found[0]["count"], 4)
        self.assertEqual(found[0]["step"], 20)
        self.assertIn("were already in", proc.stderr)
        self.assertIn("--fresh", proc.stderr)
        self.assertEqual(resume_log(project)[0].split()[0:1], ["OK"])
        self.assertTrue(resume_log(project)[0].endswith(" 20"), resume_log(project))

        other = Workspace("present-fresh")
        project = other.project("exp")
        write_checkpoints(os.path.join(project, "ck"), 20)
        proc = other.run(project, ["--fresh"], 30)
        self.assert_exit(proc, 0)
        journal = other.journal("ck")
        self.assertEqual([r for r in journal if r["type"] == "checkpoints_found"], [])
        self.assertTrue(journal[0]["fresh"])
        self.assertIsNone(next(r for r in journal if r["type"] == "child_started")["resume_from"])
        self.assertEqual(resume_log(project), [])
        with open(os.path.join(project, "final.state"), "rb") as f:
            self.assertEqual(f.read(), reference_state(30))
        # What the fresh run wrote is committed (ckpt-5 ... ckpt-30 rewritten or new).
        committed = [r for r in journal if r["type"] == "checkpoint_committed"]
        self.assertEqual(sorted(os.path.basename(r["path"]) for r in committed),
                         ["ckpt-%06d.pt" % s for s in range(5, 31, 5)])

        # --fresh on a job that has committed checkpoints: none is resumed from.
        proc = other.run(project, ["--fresh"], 10)
        self.assert_exit(proc, 0)
        journal = other.journal("ck")
        self.assertIsNone([r for r in journal if r["type"] == "child_started"][-1]["resume_from"])
        self.assertTrue(any(r["type"] == "checkpoint_retired" and r["reason"].startswith("--fresh") for r in journal))


if __name__ == "__main__":
    unittest.main()
