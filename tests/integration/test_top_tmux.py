"""`gpuhost top` in a real terminal: a detached tmux server (its own socket, a fixed-size window)
runs the live view against the fake NVML (eight A100s, with processes on GPU 0 and 1 generated
here: the job's trainer with its GPU memory, and a graphics process without, as Windows WDDM
reports them) and a job supervised by the real `gpuhost run` of tests/integration/trainers/
stdlib_trainer.py. What the pane shows is read with capture-pane; keys are sent with send-keys.

The training scalars come through the job's JSON-lines channel (metrics/channel.jsonl in the job
directory, the default GPUHOST_METRICS_FILE): the test appends the loss and a throughput there
as a trainer would, and the supervisor's tailer puts them in the job's metric history, which top
reads. "Restored" is checked from tmux's own view of the pane after top exits (alternate screen
off, cursor visible), from `stty -g` before and after in the same shell, and from the pane
showing the shell's screen again. Linux only (tmux); standard library only."""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import unittest

from gpuhost_test import BIN, FAKE_NVML, IS_WINDOWS_BUILD, SCENARIOS, TMP, needs

HERE = os.path.dirname(os.path.abspath(__file__))
STDLIB_TRAINER = os.path.join(HERE, "trainers", "stdlib_trainer.py")
TMUX = shutil.which("tmux")
COLUMNS, ROWS = 160, 48
JOB = "top-tmux"
LOSS = 0.4242  # written to the channel; distinctive on screen


def wait_until(what, probe, timeout=60, interval=0.2):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError("timed out waiting for %s (last: %r)" % (what, last))


@unittest.skipIf(IS_WINDOWS_BUILD, "tmux drives the Linux build; test_top_windows.py covers gpuhost.exe")
@needs(TMUX, "tmux")
class TopInTmux(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = os.path.join(TMP, "top-tmux")
        shutil.rmtree(cls.dir, ignore_errors=True)
        os.makedirs(cls.dir)
        cls.jobs = os.path.join(cls.dir, "jobs")
        cls.job_dir = os.path.join(cls.jobs, JOB)
        pid_file = os.path.join(cls.dir, "trainer.pid")
        cls.supervisor_log = open(os.path.join(cls.dir, "gpuhost-run.log"), "w")
        cls.supervisor = subprocess.Popen(
            [BIN, "run", "--name", JOB, "--jobs-dir", cls.jobs, "--checkpoints", os.path.join(cls.dir, "ck"),
             "--cloud", "none", "--settle", "0.2", "--quiet", "--",
             sys.executable, STDLIB_TRAINER, "--steps", "100000000", "--step-time", "0.05", "--every", "20",
             "--size", "256", "--out", os.path.join(cls.dir, "ck"), "--pid-file", pid_file],
            stdout=cls.supervisor_log, stderr=subprocess.STDOUT, env=dict(os.environ, NO_COLOR="1"))
        try:
            cls.trainer_pid = int(wait_until("the trainer's pid file", lambda: cls.read_text(pid_file).strip()))
            with open("/proc/%d/comm" % cls.trainer_pid) as f:
                cls.trainer_name = f.read().strip()
            cls.scenario = cls.write_scenario()
            cls.write_channel({"step": 1, "loss": LOSS, "tokens_per_second": 31337})
            wait_until("the job running with a committed checkpoint in top --json", cls.job_ready, timeout=90)
        except BaseException:
            cls.stop_job()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.stop_job()

    @classmethod
    def stop_job(cls):
        if cls.supervisor.poll() is None:
            cls.supervisor.send_signal(signal.SIGTERM)
            try:
                cls.supervisor.wait(timeout=60)
            except subprocess.TimeoutExpired:
                cls.supervisor.kill()
                cls.supervisor.wait()
        cls.supervisor_log.close()

    @staticmethod
    def read_text(path):
        try:
            with open(path) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    @classmethod
    def write_scenario(cls):
        with open(os.path.join(SCENARIOS, "a100_sxm4_80gb_x8.json")) as f:
            scenario = json.load(f)
        scenario["devices"][0]["processes"] = [{"pid": cls.trainer_pid, "type": "compute",
                                                "used_memory": 12 * 2**30}]
        scenario["devices"][1]["processes"] = [{"pid": cls.trainer_pid, "type": "graphics"}]  # memory n/a
        path = os.path.join(cls.dir, "a100_x8_with_processes.json")
        with open(path, "w") as f:
            json.dump(scenario, f)
        return path

    @classmethod
    def write_channel(cls, record):
        directory = os.path.join(cls.job_dir, "metrics")
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "channel.jsonl"), "a") as f:
            f.write(json.dumps(record) + "\n")

    @classmethod
    def env(cls, **extra):
        env = dict(os.environ, GPUHOST_NVML_LIBRARY=FAKE_NVML, GPUHOST_FAKE_NVML_SCENARIO=cls.scenario)
        env.pop("NO_COLOR", None)
        env.update(extra)
        return env

    @classmethod
    def top_json(cls):
        proc = subprocess.run([BIN, "top", "--json", "--jobs-dir", cls.jobs], env=cls.env(), capture_output=True,
                              text=True, timeout=60)
        if proc.returncode != 0:
            raise AssertionError("gpuhost top --json exited %d: %s" % (proc.returncode, proc.stderr))
        return json.loads(proc.stdout)

    @classmethod
    def job_ready(cls):
        if cls.supervisor.poll() is not None:
            raise AssertionError("gpuhost run exited (%d); see %s" % (cls.supervisor.returncode, cls.supervisor_log.name))
        job = cls.top_json()["job"]
        return job if job and job["phase"] == "running" and job["checkpoint"] else None

    # ---- tmux ----

    def setUp(self):
        self.socket = "gpuhost-top-%d-%s" % (os.getpid(), self._testMethodName)
        self.addCleanup(self.kill_server, self.socket)

    @staticmethod
    def kill_server(socket_name):
        subprocess.run([TMUX, "-L", socket_name, "kill-server"], capture_output=True, timeout=30)

    def tmux(self, *args):
        return subprocess.run([TMUX, "-L", self.socket] + list(args), capture_output=True, text=True, timeout=30,
                              check=True).stdout

    def start_pane(self, top_args, env=None, name="t"):
        """A shell in a COLUMNS x ROWS pane that records `stty -g`, runs gpuhost top, records its exit
        status and `stty -g` again, then waits. Returns the paths of those records."""
        work = os.path.join(self.dir, self._testMethodName)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        paths = {k: os.path.join(work, k) for k in ("before", "after", "rc", "pid")}
        env = env or self.env()
        exports = "".join("export %s=%s\n" % (k, shlex.quote(v)) for k, v in env.items()
                          if k in ("GPUHOST_NVML_LIBRARY", "GPUHOST_FAKE_NVML_SCENARIO", "NO_COLOR", "PATH"))
        if "NO_COLOR" not in env:
            exports += "unset NO_COLOR\n"  # the tmux server may have inherited one
        script = os.path.join(work, "pane.sh")
        with open(script, "w") as f:
            f.write(exports)
            f.write("stty -g > %s\n" % paths["before"])
            # exec in a child shell so the pid file names gpuhost itself, in the foreground.
            f.write("sh -c 'echo $$ > %s; exec \"$0\" \"$@\"' %s top %s\n"
                    % (paths["pid"], shlex.quote(BIN), " ".join(shlex.quote(a) for a in top_args)))
            f.write("echo $? > %s\n" % paths["rc"])
            f.write("stty -g > %s\n" % paths["after"])
            f.write("echo shell-is-back\n")
            f.write("exec sleep 600\n")
        self.tmux("-f", "/dev/null", "new-session", "-d", "-s", name, "-x", str(COLUMNS), "-y", str(ROWS),
                  "sh " + shlex.quote(script))
        self.tmux("set-option", "-t", name, "status", "off")  # the whole window is the pane
        return paths

    def capture(self, escapes=False):
        return self.tmux("capture-pane", "-p", "-t", "t", *(["-e"] if escapes else []))

    def pane_flag(self, name):
        return self.tmux("display-message", "-p", "-t", "t", "#{%s}" % name).strip()

    def wait_for_screen(self, *needles, timeout=60):
        return wait_until("%r on the screen" % (needles,),
                          lambda: (lambda s: s if all(n in s for n in needles) else None)(self.capture()),
                          timeout=timeout)

    def wait_for_exit(self, paths, timeout=30):
        return int(wait_until("gpuhost top to exit", lambda: self.read_text(paths["rc"]).strip(), timeout=timeout))

    def assert_restored(self, paths):
        # The pane script prints this after its second `stty -g`.
        screen = wait_until("the shell's screen", lambda: (lambda s: s if "shell-is-back" in s else None)(
            self.capture()))
        self.assertEqual(self.read_text(paths["after"]), self.read_text(paths["before"]), "stty settings changed")
        self.assertEqual(self.pane_flag("alternate_on"), "0", "still on the alternate screen")
        self.assertEqual(self.pane_flag("cursor_flag"), "1", "cursor still hidden")
        self.assertNotIn("GPU 0", screen)  # top's frame went with the alternate screen
        pid = int(self.read_text(paths["pid"]))
        self.assertFalse(os.path.exists("/proc/%d" % pid) and "gpuhost" in self.read_text("/proc/%d/comm" % pid),
                         "gpuhost top still running")

    # ---- tests ----

    def test_live_view_shows_gpus_processes_and_job_then_q_quits_and_restores(self):
        paths = self.start_pane(["--jobs-dir", self.jobs, "--interval", "500ms"])
        screen = self.wait_for_screen("GPU 0", "GPU 7", "job   " + JOB)
        self.assertEqual(self.pane_flag("alternate_on"), "1")
        self.assertEqual(self.pane_flag("cursor_flag"), "0")
        self.assertIn("NVIDIA A100-SXM4-80GB", screen)
        self.assertIn("80.0 GiB", screen)
        self.assertRegex(screen, r"checkpoint ck-\d+")
        # The loss and rate the test wrote to the job's channel, through gpuhost run's tailer.
        screen = self.wait_for_screen("loss %g" % LOSS, "throughput 31337 tokens_per_second")
        step = re.search(r"job   %s  running  step (\d+)" % JOB, screen)
        self.assertIsNotNone(step, screen)
        self.assertGreaterEqual(int(step.group(1)), 1)
        # The trainer on GPU 0 with its memory, and on GPU 1 without (WDDM-style n/a).
        self.assertRegex(screen, r"pid +%d  %s +12\.0 GiB  compute" % (self.trainer_pid, re.escape(self.trainer_name)))
        self.assertRegex(screen, r"pid +%d  %s +n/a  graphics" % (self.trainer_pid, re.escape(self.trainer_name)))
        for line in screen.splitlines():
            self.assertLessEqual(len(line), COLUMNS)

        # New points appear on the next refresh.
        self.write_channel({"step": 2, "loss": 0.3131})
        self.wait_for_screen("loss 0.3131")

        self.tmux("send-keys", "-t", "t", "q")
        self.assertEqual(self.wait_for_exit(paths), 0)
        self.assert_restored(paths)

    def test_ctrl_c_quits_and_restores(self):
        paths = self.start_pane(["--jobs-dir", self.jobs])
        self.wait_for_screen("GPU 7")
        self.tmux("send-keys", "-t", "t", "C-c")
        self.assertEqual(self.wait_for_exit(paths), 0)
        self.assert_restored(paths)

    def test_sigterm_restores_the_terminal(self):
        paths = self.start_pane(["--jobs-dir", self.jobs])
        self.wait_for_screen("GPU 7")
        os.kill(int(self.read_text(paths["pid"])), signal.SIGTERM)
        self.assertEqual(self.wait_for_exit(paths), 0)
        self.assert_restored(paths)

    def test_resize_redraws_to_the_new_width(self):
        paths = self.start_pane(["--jobs-dir", self.jobs])
        self.wait_for_screen("GPU 7")
        self.tmux("resize-window", "-t", "t", "-x", "90", "-y", "20")
        # 20 rows cannot hold eight GPUs: the last line says how many are hidden.
        screen = self.wait_for_screen("more lines: make the window taller")
        self.assertEqual(self.pane_flag("pane_width"), "90")
        self.assertIn("GPU 0", screen)
        lines = screen.rstrip("\n").splitlines()
        for line in lines:
            self.assertLessEqual(len(line.rstrip()), 90, line)
        self.assertLessEqual(len(lines), 20)
        self.assertIn("more lines: make the window taller", lines[-1])
        self.tmux("send-keys", "-t", "t", "q")
        self.assertEqual(self.wait_for_exit(paths), 0)
        self.assert_restored(paths)

    def test_colour_is_used_unless_no_color_is_set(self):
        paths = self.start_pane(["--jobs-dir", self.jobs], env=self.env())
        self.wait_for_screen("GPU 7")
        self.assertRegex(self.capture(escapes=True), r"\x1b\[[0-9;]*3[1-6]m")  # a foreground colour
        self.tmux("send-keys", "-t", "t", "q")
        self.wait_for_exit(paths)

        self.socket += "-no-color"  # a fresh server: NO_COLOR reaches the pane's environment
        self.addCleanup(self.kill_server, self.socket)
        paths = self.start_pane(["--jobs-dir", self.jobs], env=self.env(NO_COLOR="1"))
        self.wait_for_screen("GPU 7")
        self.assertNotRegex(self.capture(escapes=True), r"\x1b\[[0-9;]*m")
        self.tmux("send-keys", "-t", "t", "q")
        self.assertEqual(self.wait_for_exit(paths), 0)

    # ---- without a terminal ----

    def top(self, *args, env=None):
        return subprocess.run([BIN, "top"] + list(args), env=env or self.env(NO_COLOR="1"), capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)

    def test_once_prints_one_frame(self):
        proc = self.top("--once", "--jobs-dir", self.jobs)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("GPU 7  NVIDIA A100-SXM4-80GB", proc.stdout)
        self.assertRegex(proc.stdout, r"job   %s  running  step \d+" % JOB)
        self.assertNotIn("\x1b", proc.stdout)

    def test_json_snapshot(self):
        doc = self.top_json()
        self.assertTrue(doc["nvml"]["available"])
        self.assertEqual([g["index"] for g in doc["gpus"]], list(range(8)))
        self.assertEqual(doc["gpus"][0]["processes"],
                         [{"pid": self.trainer_pid, "name": self.trainer_name, "type": "compute",
                           "used_memory_bytes": 12 * 2**30}])
        self.assertIsNone(doc["gpus"][1]["processes"][0]["used_memory_bytes"])
        job = doc["job"]
        self.assertEqual(job["name"], JOB)
        self.assertEqual(job["phase"], "running")
        self.assertIn(job["loss"]["value"], (LOSS, 0.3131))
        self.assertTrue(job["checkpoint"]["id"].startswith("ck-"))
        self.assertGreaterEqual(job["checkpoint"]["age_seconds"], 0)

    def test_without_nvml_says_why_and_still_shows_the_job(self):
        env = self.env(NO_COLOR="1", GPUHOST_FAKE_NVML_SCENARIO=os.path.join(SCENARIOS, "no_driver.json"))
        proc = self.top("--once", "--jobs-dir", self.jobs, env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("GPUs  unavailable: NVML_ERROR_DRIVER_NOT_LOADED", proc.stdout)
        self.assertIn("job   " + JOB, proc.stdout)

    def test_unknown_job_names_the_closest(self):
        proc = self.top("--once", "--jobs-dir", self.jobs, "--job", "top-tmxu")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("did you mean '%s'" % JOB, proc.stderr)

    def test_live_view_without_a_terminal_exits_3(self):
        proc = self.top("--jobs-dir", self.jobs)
        self.assertEqual(proc.returncode, 3, proc.stderr)
        self.assertIn("--once", proc.stderr)


if __name__ == "__main__":
    unittest.main()
