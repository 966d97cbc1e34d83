"""`gpuhost service` under Wine's Service Control Manager: a service is registered (read back from
the registry), starting it runs `serve` or a supervised job, stopping it during training commits
the trainer's save before the service ends (SCM stop -> preemption path), and each start, stop
request and exit is written to the Event Log.

Wine's Event Log keeps nothing (advapi32 ReportEventW is a stub that traces its strings on the
`eventlog` debug channel), so the entries are read from that trace: the tests run in a Wine
prefix of their own whose services get WINEDEBUG=+eventlog from the registry's session
environment, and whose services.exe writes to a log file this test reads. On Windows the same
calls write to the Application log.

Runs in the Windows build's suite (GPUHOST_WINE). Standard library only."""
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

from gpuhost_test import BIN, IS_WINDOWS_BUILD, TMP, WINE, free_port_pair, needs

NATIVE_TRAINER = os.environ.get("GPUHOST_NATIVE_TRAINER", "")
SERVICES_KEY = r"HKLM\SYSTEM\CurrentControlSet\Services"
EVENT_SOURCE_KEY = r"HKLM\SYSTEM\CurrentControlSet\Services\EventLog\Application\gpuhost"
SESSION_ENVIRONMENT = r"HKLM\System\CurrentControlSet\Control\Session Manager\Environment"


def windows_path(path):
    return "Z:" + path.replace("/", "\\")


def read_journal(path):
    with open(path, "rb") as f:
        return [json.loads(line.split(b" ", 2)[2]) for line in f.read().split(b"\n")[:-1]]


@unittest.skipUnless(IS_WINDOWS_BUILD, "Windows services: the Windows build's suite")
class WindowsService(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="service-", dir=TMP if os.path.isdir(TMP) else None)
        cls.prefix = os.path.join(cls.dir, "wineprefix")
        cls.services_log = os.path.join(cls.dir, "services.log")
        cls.env = dict(os.environ, WINEPREFIX=cls.prefix, GPUHOST_WINEPREFIX=cls.prefix, WINEDEBUG="-all",
                       NO_COLOR="1")
        subprocess.run(["wineboot", "--init"], env=cls.env, capture_output=True, timeout=300)
        subprocess.run(["wineserver", "--wait"], env=cls.env, capture_output=True, timeout=120)
        cls.wine(["reg", "add", SESSION_ENVIRONMENT, "/v", "WINEDEBUG", "/d", "-all,+eventlog", "/f"])
        # Restart the prefix so services.exe writes to our log and passes the setting to services.
        subprocess.run(["wineserver", "-k"], env=cls.env, timeout=60)
        subprocess.run(["wineserver", "--wait"], env=cls.env, timeout=60)
        with open(cls.services_log, "wb") as log:
            subprocess.run(["wineboot"], env=cls.env, stdout=log, stderr=log, timeout=300)

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["wineserver", "-k"], env=cls.env, timeout=60)
        subprocess.run(["wineserver", "--wait"], env=cls.env, timeout=60)
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def wine(cls, args, timeout=180):
        return subprocess.run([WINE] + list(args), capture_output=True, text=True, timeout=timeout, env=cls.env)

    def gpuhost(self, *args, timeout=180):
        return self.wine([BIN] + list(args), timeout=timeout)

    def events(self):
        with open(self.services_log, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        return [line.split("ReportEventW ", 1)[1] for line in text.splitlines() if "ReportEventW" in line]

    def wait_for_event(self, needle, timeout=30):
        until = time.monotonic() + timeout
        while time.monotonic() < until:
            if any(needle in e for e in self.events()):
                return
            time.sleep(0.2)
        self.fail("no Event Log entry containing %r; entries: %s" % (needle, self.events()))

    def registry(self, key):
        proc = self.wine(["reg", "query", key])
        return proc.stdout if proc.returncode == 0 else None

    def status(self, name):
        proc = self.gpuhost("service", "status", name, "--json")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return json.loads(proc.stdout)

    def install(self, *args):
        proc = self.gpuhost("service", "install", "--json", *args)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        installed = json.loads(proc.stdout)
        self.addCleanup(self.remove, installed["name"])
        return installed

    def remove(self, name):
        """Cleanup: stop and uninstall `name` if a test left it installed."""
        status = self.gpuhost("service", "status", name, "--json")
        if status.returncode != 0:
            return
        if json.loads(status.stdout)["state"] != "stopped":
            self.gpuhost("service", "stop", name, "--timeout", "60s")
        self.gpuhost("service", "uninstall", name)

    def test_serve_as_a_service_registered_started_serving_stopped_and_removed(self):
        port = free_port_pair()
        installed = self.install("serve", "--name", "gpuhost-serve-test", "--", "--port", str(port))
        self.assertEqual(installed["state"], "stopped")
        self.assertTrue(installed["never_started"])
        key = self.registry(SERVICES_KEY + "\\gpuhost-serve-test")
        self.assertIsNotNone(key)
        self.assertRegex(key, r"ImagePath\s+REG_(EXPAND_)?SZ\s+.*gpuhost\.exe.* service run gpuhost-serve-test -- serve --port %d" % port)
        self.assertRegex(key, r"Start\s+REG_DWORD\s+0x2\b")      # SERVICE_AUTO_START
        self.assertRegex(key, r"Type\s+REG_DWORD\s+0x10\b")      # SERVICE_WIN32_OWN_PROCESS
        self.assertRegex(key, r"ObjectName\s+REG_SZ\s+LocalSystem")
        source = self.registry(EVENT_SOURCE_KEY)
        self.assertIsNotNone(source, "the Event Log source was not registered")
        self.assertRegex(source, r"EventMessageFile\s+REG_EXPAND_SZ\s+.*gpuhost\.exe")
        self.assertRegex(source, r"TypesSupported\s+REG_DWORD\s+0x7\b")

        started = self.gpuhost("service", "start", "gpuhost-serve-test", "--json")
        self.assertEqual(started.returncode, 0, started.stderr)
        body = None
        until = time.monotonic() + 60
        while time.monotonic() < until and body is None:
            try:
                body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read().decode()
            except OSError:
                time.sleep(0.3)
        self.assertIsNotNone(body, "the service never served /metrics")
        self.assertIn("gpuhost_nvml_up", body)
        self.assertEqual(self.status("gpuhost-serve-test")["state"], "running")
        self.wait_for_event("service gpuhost-serve-test started: gpuhost serve --port %d" % port)

        stopped = self.gpuhost("service", "stop", "gpuhost-serve-test", "--timeout", "60s", "--json")
        self.assertEqual(stopped.returncode, 0, stopped.stdout + stopped.stderr)
        self.assertEqual(json.loads(stopped.stdout)["state"], "stopped")
        self.assertEqual(json.loads(stopped.stdout)["exit_code"], 0)
        with socket.socket() as s:
            self.assertNotEqual(s.connect_ex(("127.0.0.1", port)), 0, "still listening after the stop")
        self.wait_for_event("service gpuhost-serve-test: a stop requested by the Service Control Manager")
        self.wait_for_event("service gpuhost-serve-test stopped: gpuhost exited with 0")

        removed = self.gpuhost("service", "uninstall", "gpuhost-serve-test")
        self.assertEqual(removed.returncode, 0, removed.stderr)
        self.assertIsNone(self.registry(SERVICES_KEY + "\\gpuhost-serve-test"))
        self.assertIsNone(self.registry(EVENT_SOURCE_KEY), "the Event Log source outlived the last service")

    @needs(NATIVE_TRAINER, "GPUHOST_NATIVE_TRAINER (CTest sets it to the built tests/native_trainer)")
    def test_stopping_a_job_service_commits_the_save_before_the_service_ends(self):
        work = os.path.join(self.dir, "job")
        os.makedirs(work)
        ck, jobs = os.path.join(work, "ck"), os.path.join(work, "jobs")
        # No periodic checkpoints (--every 0): the only ones are the saves the stops ask for. The
        # request file is the save request: a service has no console for CTRL_BREAK.
        command = [windows_path(NATIVE_TRAINER), "--steps", "1000000", "--every", "0", "--step-time-ms", "20",
                   "--size", "256", "--out", windows_path(ck), "--resume-log",
                   windows_path(os.path.join(work, "resume.log")), "--resume", "{resume}"]
        with open(os.path.join(work, "llama.toml"), "w") as f:
            f.write("[job]\nname = \"svc-llama\"\ncommand = %s\ncheckpoints = '%s'\nsettle = \"0.2s\"\n"
                    "[save]\nrequest = \"file\"\n[preemption]\ncloud = \"none\"\n"
                    % (json.dumps(command), windows_path(ck)))
        self.install("job", windows_path(os.path.join(work, "llama.toml")), "--manual", "--", "--jobs-dir",
                     windows_path(jobs))
        key = self.registry(SERVICES_KEY + "\\gpuhost-run-llama")
        self.assertRegex(key, r"Start\s+REG_DWORD\s+0x3\b")  # SERVICE_DEMAND_START (--manual)
        self.assertRegex(key, r"PreshutdownTimeout\s+REG_DWORD\s+0x493e0\b")  # 300000 ms: the save's time at shutdown
        journal = os.path.join(jobs, "svc-llama", "journal.jsonl")

        def run_then_stop(round_number):
            """Starts the service, lets it train, stops it; returns the journal."""
            started = self.gpuhost("service", "start", "gpuhost-run-llama")
            self.assertEqual(started.returncode, 0, started.stderr)
            until = time.monotonic() + 60
            while time.monotonic() < until:
                records = read_journal(journal) if os.path.exists(journal) else []
                if sum(1 for r in records if r["type"] == "child_started") >= round_number:
                    break
                time.sleep(0.3)
            else:
                procs = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True).stdout
                self.fail("round %d: no trainer started in 60 s; service: %s\nprocesses:\n%s\njournal: %s" % (
                    round_number, self.status("gpuhost-run-llama"),
                    "\n".join(l for l in procs.splitlines() if ".exe" in l),
                    [r["type"] for r in read_journal(journal)] if os.path.exists(journal) else None))
            time.sleep(1.5)  # some steps of training
            stopped = self.gpuhost("service", "stop", "gpuhost-run-llama", "--timeout", "120s", "--json")
            self.assertEqual(stopped.returncode, 0, stopped.stdout + stopped.stderr)
            state = json.loads(stopped.stdout)
            self.assertEqual((state["state"], state["exit_code"]), ("stopped", 0))  # exit 75 is a clean stop
            return read_journal(journal)

        records = run_then_stop(1)
        types = [r["type"] for r in records]
        notice = next(r for r in records if r["type"] == "notice")
        self.assertEqual((notice["source"], notice["detail"]), ("signal", "service stop"))
        self.assertIn("save_requested", types)
        saved = next(i for i, r in enumerate(records) if r["type"] == "save_completed")
        committed = [r for r in records[:saved] if r["type"] == "checkpoint_committed"]
        self.assertTrue(committed, types)
        self.assertTrue(os.path.exists(committed[-1]["path"].replace("Z:", "").replace("\\", "/")))
        stop = records[-1]
        self.assertEqual((stop["type"], stop["outcome"]), ("supervisor_stopped", "preempted"))
        self.assertLess(saved, len(records) - 1)
        self.wait_for_event("service gpuhost-run-llama started: gpuhost run --job-file")
        self.wait_for_event("service gpuhost-run-llama: a stop requested by the Service Control Manager")
        self.wait_for_event("service gpuhost-run-llama stopped: gpuhost exited with 75")

        # Not checked here: starting the service again. Under Wine the second service process is
        # sometimes ended while it launches the trainer (its journal stops at child_starting and
        # the SCM reports it never started), not understood yet; resuming from the save is what
        # test_run_windows checks for gpuhost run itself.

    def test_refusals_name_the_fix(self):
        self.install("serve", "--name", "gpuhost-serve-twice", "--manual", "--", "--port", "0")
        again = self.gpuhost("service", "install", "serve", "--name", "gpuhost-serve-twice")
        self.assertEqual(again.returncode, 2, again.stderr)
        missing = self.gpuhost("service", "start", "gpuhost-no-such-service")
        self.assertEqual(missing.returncode, 2, missing.stderr)
        self.assertIn("gpuhost-no-such-service", missing.stderr)
        prompt = self.gpuhost("service", "run", "gpuhost-serve-twice", "--", "serve")
        self.assertEqual(prompt.returncode, 2, prompt.stderr)
        self.assertIn("gpuhost service start gpuhost-serve-twice", prompt.stderr)
        bad_job = self.gpuhost("service", "install", "job", windows_path(os.path.join(self.dir, "none.toml")))
        self.assertEqual(bad_job.returncode, 2, bad_job.stderr)
        self.assertIn("not found", bad_job.stderr)


if __name__ == "__main__":
    unittest.main()
