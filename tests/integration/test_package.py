"""The Debian package and the systemd units, as a user installs and runs them: cpack builds the
.deb from this build tree; its layout and control data are read back with dpkg-deb; the units
pass `systemd-analyze verify` (and a broken one does not); the units' own ExecStart lines run here,
with systemd's stop (SIGTERM to gpuhost alone) taking the run unit's preemption path; then the
package is installed with dpkg -i, runs, and is purged leaving none of its files. systemd is not
PID 1 in this test environment, so the units are not started by systemctl: their commands are."""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

from gpuhost_test import BIN, TMP, needs

BUILD = os.path.dirname(os.path.abspath(BIN))
HERE = os.path.dirname(os.path.abspath(__file__))
TRAINER = os.path.join(HERE, "trainers", "stdlib_trainer.py")

FILES = [
    "./etc/default/gpuhost-serve",
    "./etc/gpuhost/jobs/README",
    "./usr/bin/gpuhost",
    "./usr/lib/systemd/system/gpuhost-run@.service",
    "./usr/lib/systemd/system/gpuhost-serve.service",
    "./usr/lib/sysusers.d/gpuhost.conf",
    "./usr/share/doc/gpuhost/README.md",
    "./usr/share/doc/gpuhost/doc/job-file.md",
    "./usr/share/doc/gpuhost/doc/metrics.md",
    "./usr/share/gpuhost/deploy/prometheus.yml",
    "./usr/share/gpuhost/deploy/grafana-gpuhost-training.json",
]


def have(program):
    return shutil.which(program) is not None


def build_package(out_dir):
    proc = subprocess.run(["cpack", "--config", os.path.join(BUILD, "CPackConfig.cmake"), "-G", "DEB", "-B", out_dir],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    debs = [f for f in os.listdir(out_dir) if f.endswith(".deb")]
    assert len(debs) == 1, debs
    return os.path.join(out_dir, debs[0])


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def exec_start(unit_text):
    """The ExecStart line of a unit, as argv."""
    line = re.search(r"^ExecStart=(.*)$", unit_text, re.M).group(1)
    return shlex.split(line)


@needs(have("cpack") and have("dpkg-deb") and have("systemd-analyze"), "cpack, dpkg-deb and systemd-analyze")
class DebianPackage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="package-", dir=TMP if os.path.isdir(TMP) else None)
        cls.deb = build_package(os.path.join(cls.dir, "out"))
        cls.root = os.path.join(cls.dir, "root")
        subprocess.run(["dpkg-deb", "-x", cls.deb, cls.root], check=True, timeout=120)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def unit(self, name):
        with open(os.path.join(self.root, "usr/lib/systemd/system", name)) as f:
            return f.read()

    def test_layout_control_and_a_stripped_binary(self):
        listing = subprocess.run(["dpkg-deb", "-c", self.deb], capture_output=True, text=True, check=True).stdout
        files = {line.split()[-1] for line in listing.splitlines() if not line.startswith("d")}
        for want in FILES:
            self.assertIn(want, files)
        self.assertFalse([f for f in files if not f.startswith(("./usr/", "./etc/"))], files)
        info = subprocess.run(["dpkg-deb", "-I", self.deb], capture_output=True, text=True, check=True).stdout
        self.assertRegex(info, r"Package: gpuhost\n")
        for dependency in ("libc6", "libcurl4", "libssl3", "libstdc++6"):
            self.assertRegex(info, r"Depends:.*\b%s \(" % re.escape(dependency))
        control = os.path.join(self.dir, "control")
        subprocess.run(["dpkg-deb", "-e", self.deb, control], check=True, timeout=60)
        with open(os.path.join(control, "conffiles")) as f:
            self.assertEqual(f.read().split(), ["/etc/default/gpuhost-serve", "/etc/gpuhost/jobs/README"])
        installed = os.path.join(self.root, "usr/bin/gpuhost")
        sections = subprocess.run(["readelf", "-S", installed], capture_output=True, text=True, check=True).stdout
        self.assertNotIn(".debug_info", sections)
        self.assertIn(".debug_info", subprocess.run(["readelf", "-S", BIN], capture_output=True, text=True).stdout)
        print("\npackage %d bytes; binary %d bytes stripped, %d in the build tree" % (
            os.path.getsize(self.deb), os.path.getsize(installed), os.path.getsize(BIN)), file=sys.stderr)
        # The debug information left in a package of its own, found by the binary's build id.
        ddebs = [f for f in os.listdir(os.path.dirname(self.deb)) if f.endswith(".ddeb")]
        self.assertEqual(len(ddebs), 1, ddebs)
        ddeb = os.path.join(os.path.dirname(self.deb), ddebs[0])
        self.assertTrue(ddebs[0].startswith("gpuhost-dbgsym_"), ddebs)
        notes = subprocess.run(["readelf", "-n", installed], capture_output=True, text=True, check=True).stdout
        build_id = re.search(r"Build ID: ([0-9a-f]+)", notes).group(1)
        debug_root = os.path.join(self.dir, "dbgsym")
        subprocess.run(["dpkg-deb", "-x", ddeb, debug_root], check=True, timeout=120)
        debug_file = os.path.join(debug_root, "usr/lib/debug/.build-id", build_id[:2], build_id[2:] + ".debug")
        self.assertTrue(os.path.exists(debug_file), debug_file)
        debug_sections = subprocess.run(["readelf", "-S", debug_file], capture_output=True, text=True, check=True).stdout
        self.assertIn(".debug_info", debug_sections)
        self.assertIn(".gnu_debuglink", sections)
        print("debug symbols package %d bytes" % os.path.getsize(ddeb), file=sys.stderr)
        proc = subprocess.run([installed, "--version"], capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("gpuhost", proc.stdout)

    def verify(self, unit_name, text, instance=None):
        """systemd-analyze verify on `text` with the binary it names replaced by this build's."""
        folder = tempfile.mkdtemp(dir=self.dir)
        with open(os.path.join(folder, unit_name), "w") as f:
            f.write(text.replace("/usr/bin/gpuhost", BIN))
        target = os.path.join(folder, unit_name.replace("@.", "@%s." % instance) if instance else unit_name)
        return subprocess.run(["systemd-analyze", "verify", target], capture_output=True, text=True, timeout=60)

    def test_units_pass_systemd_analyze_verify_and_a_broken_one_does_not(self):
        serve = self.unit("gpuhost-serve.service")
        run = self.unit("gpuhost-run@.service")
        for name, text, instance in (("gpuhost-serve.service", serve, None), ("gpuhost-run@.service", run, "llama")):
            proc = self.verify(name, text, instance)
            self.assertEqual(proc.returncode, 0, name + ": " + proc.stderr)
            self.assertEqual(proc.stderr.strip(), "", name + " has warnings: " + proc.stderr)
        broken = self.verify("gpuhost-serve.service", serve.replace("ExecStart=", "ExecStrat="))
        self.assertNotEqual(broken.returncode, 0)
        self.assertIn("ExecStrat", broken.stderr)
        for key in ("NoNewPrivileges=yes", "ProtectSystem=strict", "Restart=on-failure", "User=gpuhost"):
            self.assertIn(key, serve)
        for key in ("KillMode=mixed", "KillSignal=SIGTERM", "SuccessExitStatus=75"):
            self.assertIn(key, run)
        self.assertIn("/etc/gpuhost/jobs/%i.toml", run)

    def test_the_serve_units_command_serves_and_stops_on_sigterm(self):
        argv = exec_start(self.unit("gpuhost-serve.service"))
        self.assertEqual(argv[:2], ["/usr/bin/gpuhost", "serve"])
        jobs = os.path.join(self.dir, "serve-jobs")
        # systemd expands $GPUHOST_SERVE_ARGS from /etc/default/gpuhost-serve; here: a free port.
        argv = [BIN] + [a for a in argv[1:] if a != "$GPUHOST_SERVE_ARGS"] + ["--port", "0", "--json"]
        argv[argv.index("--jobs-dir") + 1] = jobs
        env = dict(os.environ, GPUHOST_HOME=os.path.join(self.dir, "serve-home"), GPUHOST_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1")
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            ready = json.loads(proc.stdout.readline())
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % ready["port"], timeout=30) as r:
                self.assertEqual(r.status, 200)
                self.assertIn("gpuhost_nvml_up", r.read().decode())
            proc.send_signal(signal.SIGTERM)  # systemctl stop
            _, err = proc.communicate(timeout=30)
            self.assertEqual(proc.returncode, 0, err)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()

    def test_stopping_the_run_unit_saves_before_it_stops(self):
        argv = exec_start(self.unit("gpuhost-run@.service"))
        self.assertEqual(argv[:3], ["/usr/bin/gpuhost", "run", "--job-file"])
        work = os.path.join(self.dir, "run-unit")
        os.makedirs(work)
        ck = os.path.join(work, "ck")
        job_file = os.path.join(work, "train.toml")
        with open(job_file, "w") as f:
            f.write('[job]\nname = "train"\ncommand = %s\ncheckpoints = "%s"\nsettle = "200ms"\n[preemption]\ncloud = "none"\n' % (
                json.dumps([sys.executable, TRAINER, "--steps", "100000", "--every", "1000", "--step-time", "0.01",
                            "--size", "64", "--out", ck, "--resume", "{resume}"]), ck))
        argv = [BIN] + argv[1:]
        argv[argv.index("/etc/gpuhost/jobs/%i.toml")] = job_file  # systemd's %i: the instance
        env = dict(os.environ, GPUHOST_HOME=os.path.join(work, "home"))
        env.pop("GPUHOST_SAVE_REQUEST", None)
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            journal = os.path.join(work, "home", "jobs", "train", "journal.jsonl")
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and '"child_started"' not in read(journal):
                self.assertIsNone(proc.poll(), proc.stderr.read() if proc.poll() is not None else "")
                time.sleep(0.2)
            time.sleep(1)  # a few steps, none saved yet (--every 1000)
            proc.send_signal(signal.SIGTERM)  # systemctl stop: KillMode=mixed signals gpuhost alone
            _, err = proc.communicate(timeout=90)  # the unit's TimeoutStopSec
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertEqual(proc.returncode, 75, err)  # SuccessExitStatus=75: a clean stop for systemd
        status = subprocess.run([BIN, "status", "train", "--json"], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(status.returncode, 0, status.stderr)
        state = json.loads(status.stdout)
        self.assertTrue(state["checkpoints"], "stopped without a committed checkpoint: " + err)
        self.assertIn('"save_completed"', read(journal), "the stop committed no save: " + err)

    def test_gpuhost_service_on_linux_names_the_units_instead(self):
        for args in (["install", "serve"], ["stop", "gpuhost-serve"], ["run", "x", "--", "serve"]):
            proc = subprocess.run([BIN, "service"] + args, capture_output=True, text=True, timeout=60)
            self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
            self.assertIn("systemctl enable --now gpuhost-serve", proc.stderr)
        self.assertEqual(subprocess.run([BIN, "service", "--help"], capture_output=True, timeout=60).returncode, 0)

    @needs(hasattr(os, "geteuid") and os.geteuid() == 0, "root, to install the package with dpkg")
    def test_installs_runs_and_purges_without_leftovers(self):
        before = subprocess.run(["dpkg-query", "-W", "gpuhost"], capture_output=True, text=True)
        self.assertNotEqual(before.returncode, 0, "gpuhost is already installed on this machine: " + before.stdout)
        installed = subprocess.run(["dpkg", "-i", self.deb], capture_output=True, text=True, timeout=300)
        try:
            self.assertEqual(installed.returncode, 0, installed.stdout + installed.stderr)
            version = subprocess.run(["/usr/bin/gpuhost", "--version"], capture_output=True, text=True, timeout=60)
            self.assertEqual(version.returncode, 0, version.stderr)
            self.assertIn("gpuhost", version.stdout)
            self.assertEqual(subprocess.run(["getent", "passwd", "gpuhost"], capture_output=True).returncode, 0)
            for unit in ("gpuhost-serve.service", "gpuhost-run@x.service"):
                proc = subprocess.run(["systemd-analyze", "verify", "/usr/lib/systemd/system/" + unit],
                                      capture_output=True, text=True, timeout=60)
                self.assertEqual(proc.returncode, 0, unit + ": " + proc.stderr)
        finally:
            purged = subprocess.run(["dpkg", "--purge", "gpuhost"], capture_output=True, text=True, timeout=300)
        self.assertEqual(purged.returncode, 0, purged.stdout + purged.stderr)
        left = [f[1:] for f in FILES if os.path.exists(f[1:])]
        self.assertEqual(left, [])
        for folder in ("/etc/gpuhost", "/usr/share/doc/gpuhost", "/usr/share/gpuhost"):
            self.assertFalse(os.path.exists(folder), folder + " left behind")


if __name__ == "__main__":
    unittest.main()
