"""`gpuhost top --once` and `--json` of the Windows build (gpuhost.exe under Wine) with the fake
nvml.dll: a Windows VM's Tesla T4 under WDDM, where NVML gives a process's GPU memory as
NVML_VALUE_NOT_AVAILABLE, so top must say "n/a"; NVML missing altogether; and a job that
gpuhost.exe run supervised (tests/integration/trainers/native_trainer.exe), shown with its phase
and newest checkpoint. The live view runs in a tmux pane, where Wine gives
gpuhost.exe a console on the pane's tty: keys arrive through ReadConsoleInputW, and q must quit
and leave the tty as it was. (Wine's tty console draws imperfectly, so what the frame looks like
is checked on Linux by test_top_tmux.py.) Standard library only; runs only for the Windows build
(GPUHOST_WINE set)."""
import json
import os
import shlex
import shutil
import subprocess
import time
import unittest

from gpuhost_test import BIN, FAKE_NVML, IS_WINDOWS_BUILD, SCENARIOS, TMP, WINE, have, host_path, needs

NATIVE_TRAINER = os.environ.get("GPUHOST_NATIVE_TRAINER", "")
JOB = "top-wine"


def wine(args, env=None, timeout=180):
    full_env = dict(os.environ, NO_COLOR="1")
    full_env.update(env or {})
    return subprocess.run([WINE] + list(args), capture_output=True, text=True, timeout=timeout, env=full_env)


@unittest.skipUnless(IS_WINDOWS_BUILD, "Windows build (gpuhost.exe under Wine)")
@needs(NATIVE_TRAINER, "GPUHOST_NATIVE_TRAINER (CTest sets it to the built tests/native_trainer)")
class WindowsTop(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = os.path.join(TMP, "top-windows")
        shutil.rmtree(cls.dir, ignore_errors=True)
        os.makedirs(cls.dir)
        cls.jobs = os.path.join(cls.dir, "jobs")
        ck = os.path.join(cls.dir, "ck")
        # Six steps, a checkpoint every third: the job finishes with two commits.
        proc = wine([BIN, "run", "--name", JOB, "--jobs-dir", host_path(cls.jobs), "--checkpoints", host_path(ck),
                     "--cloud", "none", "--settle", "0.2", "--quiet", "--",
                     host_path(NATIVE_TRAINER), "--steps", "6", "--every", "3", "--size", "64",
                     "--out", host_path(ck)])
        if proc.returncode != 0:
            raise AssertionError("gpuhost.exe run failed (%d): %s" % (proc.returncode, proc.stderr[-3000:]))

        with open(os.path.join(SCENARIOS, "t4_windows_wddm.json")) as f:
            scenario = json.load(f)
        # WDDM: NVML lists the process but not its memory (no used_memory in the fake's scenario).
        scenario["devices"][0]["processes"] = [{"pid": 4321, "type": "graphics"},
                                               {"pid": 4322, "type": "compute", "used_memory": 3 * 2**30}]
        cls.scenario = os.path.join(cls.dir, "t4_wddm_with_processes.json")
        with open(cls.scenario, "w") as f:
            json.dump(scenario, f)

    def env(self, scenario=None):
        return {"GPUHOST_NVML_LIBRARY": host_path(FAKE_NVML),
                "GPUHOST_FAKE_NVML_SCENARIO": host_path(scenario or self.scenario)}

    def top(self, *args, scenario=None):
        return wine([BIN, "top", "--jobs-dir", host_path(self.jobs)] + list(args), env=self.env(scenario))

    def test_once_shows_the_gpu_its_processes_and_the_job(self):
        proc = self.top("--once")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        out = proc.stdout.replace("\r\n", "\n")
        self.assertIn("GPU 0  Tesla T4", out)
        self.assertRegex(out, r"pid +4321  \? +n/a  graphics")
        self.assertRegex(out, r"pid +4322  \? +3\.0 GiB  compute")
        # The trainer prints bare "step N" lines, which are no training scalars: the step shown is the
        # journal's, which may have none (its checkpoint names carry no step gpuhost reads).
        self.assertRegex(out, r"job   %s  finished  step (\d+|-)" % JOB)
        self.assertRegex(out, r"checkpoint ck-\d+")
        self.assertNotIn("\x1b", out)

    def test_json_has_null_memory_under_wddm(self):
        proc = self.top("--json")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        doc = json.loads(proc.stdout)
        self.assertTrue(doc["nvml"]["available"])
        gpu = doc["gpus"][0]
        self.assertEqual(gpu["name"], "Tesla T4")
        by_pid = {p["pid"]: p for p in gpu["processes"]}
        self.assertIsNone(by_pid[4321]["used_memory_bytes"])
        self.assertEqual(by_pid[4322]["used_memory_bytes"], 3 * 2**30)
        job = doc["job"]
        self.assertEqual((job["name"], job["phase"]), (JOB, "finished"))
        self.assertIsNotNone(job["checkpoint"])

    def test_without_nvml_says_why_and_still_shows_the_job(self):
        proc = self.top("--once", scenario=os.path.join(SCENARIOS, "no_driver.json"))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("GPUs  unavailable: NVML_ERROR_DRIVER_NOT_LOADED", proc.stdout)
        self.assertIn("job   " + JOB, proc.stdout)

    @needs(have("tmux"), "tmux")
    def test_live_view_in_a_wine_console_quits_on_q_and_restores_the_tty(self):
        work = os.path.join(self.dir, "live")
        os.makedirs(work, exist_ok=True)
        files = {k: os.path.join(work, k) for k in ("before", "after", "rc")}
        env = "".join("export %s=%s\n" % (k, shlex.quote(v)) for k, v in self.env().items())
        if os.environ.get("GPUHOST_WINEPREFIX"):
            env += "export GPUHOST_WINEPREFIX=%s\n" % shlex.quote(os.environ["GPUHOST_WINEPREFIX"])
        script = os.path.join(work, "pane.sh")
        with open(script, "w") as f:
            f.write(env + "unset NO_COLOR\n")
            f.write("stty -g > %s\n" % files["before"])
            f.write("%s %s top --jobs-dir %s\n" % (shlex.quote(WINE), shlex.quote(BIN),
                                                   shlex.quote(host_path(self.jobs))))
            f.write("echo $? > %s\nstty -g > %s\necho shell-is-back\nexec sleep 600\n" % (files["rc"], files["after"]))
        tmux = [shutil.which("tmux"), "-L", "gpuhost-top-wine-%d" % os.getpid()]
        self.addCleanup(subprocess.run, tmux + ["kill-server"], capture_output=True)
        subprocess.run(tmux + ["-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", "120", "-y", "40",
                               "sh " + shlex.quote(script)], check=True)

        def screen():
            return subprocess.run(tmux + ["capture-pane", "-p", "-t", "t"], capture_output=True, text=True).stdout

        def wait_for(what, done, timeout=90):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if done():
                    return
                time.sleep(0.3)
            self.fail("timed out waiting for %s; the pane shows:\n%s" % (what, screen()))

        wait_for("the live view", lambda: "GPU 0" in screen() and "Tesla T4" in screen())
        subprocess.run(tmux + ["send-keys", "-t", "t", "q"], check=True)
        wait_for("gpuhost.exe to exit and the shell to print", lambda: "shell-is-back" in screen())
        with open(files["rc"]) as f:
            self.assertEqual(f.read().strip(), "0")
        with open(files["before"]) as f, open(files["after"]) as g:
            self.assertEqual(f.read(), g.read(), "tty settings changed")
        flags = subprocess.run(tmux + ["display-message", "-p", "-t", "t", "#{alternate_on} #{cursor_flag}"],
                               capture_output=True, text=True).stdout.split()
        self.assertEqual(flags, ["0", "1"], "alternate screen still on, or cursor hidden")

    def test_live_view_without_a_console_exits_3(self):
        proc = wine([BIN, "top", "--jobs-dir", host_path(self.jobs)], env=self.env())
        self.assertEqual(proc.returncode, 3, proc.stderr)


if __name__ == "__main__":
    unittest.main()
