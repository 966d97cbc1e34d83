"""gpuhost mig and run --gpu mig:<profile> against the fake NVML's MIG state machine
(tests/fake_nvml/README.md): mig-parted v1 files applied, asserted and exported (the export read
back by an independent YAML reader and by gpuhost itself), the pending mode of a passthrough VM and
its reboot, processes that block a change, layouts that fit in no creation order, and three jobs
started side by side on three different slices, a fourth refused with the reason. The Windows build
runs the refusals and the read-only listing."""

import json
import os
import shutil
import subprocess
import time
import unittest

from gpuhost_test import (BIN, IS_WINDOWS_BUILD, SCENARIOS, SYSTEM_PYTHON, TMP, WINE, host_path, needs, run,
                          scenario_env)

try:
    import yaml  # Debian's python3-yaml: an independent reader of what export writes
except ImportError:  # pragma: no cover - install-deps.sh installs it
    yaml = None

CONFIG = """version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false

  all-balanced:
    # A100 80GB (0x20B210DE) and H100 80GB (0x233010DE): 2 x 1g.10gb + 2g.20gb + 3g.40gb
    - device-filter: ["0x20B210DE", "0x233010DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 2
        "2g.20gb": 1
        "3g.40gb": 1

  three-jobs:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 3

  h100-mixed:
    - device-filter: "0x233010DE"
      devices: [0]
      mig-enabled: true
      mig-devices:
        "3g.40gb": 1
        "2g.20gb": 1
        "1g.20gb": 1
    - devices: [1]
      mig-enabled: false

  no-fit:
    - devices: all
      mig-enabled: true
      mig-devices:
        "3g.40gb": 2
        "1g.10gb": 1

  too-many:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 8

  wrong-size:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.5gb": 7
"""


class MigHost:
    """One fake host: a scenario, its own MIG state file (the driver's state, shared by every
    gpuhost process of the test), a boot id, a config file and a GPUHOST_HOME."""

    def __init__(self, test, label, scenario):
        self.dir = os.path.join(TMP, "mig-cli", label)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.state = os.path.join(self.dir, "mig-state.json")
        self.config = os.path.join(self.dir, "config.yaml")
        with open(self.config, "w") as f:
            f.write(CONFIG)
        self.env = dict(scenario_env(scenario))
        self.env["GPUHOST_FAKE_NVML_MIG_STATE"] = host_path(self.state)
        self.env["GPUHOST_FAKE_NVML_BOOT"] = "boot-1"
        self.env["GPUHOST_HOME"] = host_path(os.path.join(self.dir, "home"))
        # Where gpuhost's NVML readers meet mig apply (gpu/nvml_hold.h): this host's own.
        self.env["GPUHOST_RUN_DIR"] = host_path(os.path.join(self.dir, "run"))
        self.test = test

    def mig(self, *args, expect=None, input_text=None):
        proc = run(["mig"] + list(args), env=self.env, input_text=input_text)
        if expect is not None:
            self.test.assertEqual(proc.returncode, expect, "gpuhost mig %s:\n%s%s" % (" ".join(args), proc.stdout,
                                                                                     proc.stderr))
        return proc

    def apply(self, name, *extra, expect=0):
        return self.mig("apply", "-f", host_path(self.config), "-c", name, *extra, expect=expect)

    def assert_config(self, name, expect):
        return self.mig("assert", "-f", host_path(self.config), "-c", name, expect=expect)

    def listing(self):
        return json.loads(self.mig("list", "--json", expect=0).stdout)

    def driver_state(self):
        with open(self.state) as f:
            return json.load(f)

    def write_driver_state(self, state):
        with open(self.state, "w") as f:
            json.dump(state, f)

    def reboot(self):
        self.env["GPUHOST_FAKE_NVML_BOOT"] = "boot-%d" % (int(self.env["GPUHOST_FAKE_NVML_BOOT"].split("-")[1]) + 1)


@unittest.skipIf(IS_WINDOWS_BUILD, "MIG is Linux only; MigOnWindows runs the Windows build")
class MigApply(unittest.TestCase):

    def test_all_balanced_is_applied_asserted_and_exported(self):
        host = MigHost(self, "all-balanced", "a100_80gb_mig_state")
        proc = host.assert_config("all-balanced", expect=1)
        self.assertIn("selected configuration not currently applied", proc.stdout)
        self.assertIn("MIG is off, the config wants it on", proc.stdout)
        # A dry run changes nothing.
        proc = host.apply("all-balanced", "--dry-run")
        self.assertIn("would turn MIG on", proc.stdout)
        self.assertFalse(os.path.exists(host.state), "a dry run touched the driver")
        proc = host.apply("all-balanced")
        self.assertIn("GPU 0 (NVIDIA A100-SXM4-80GB): MIG turned on", proc.stdout)
        self.assertIn("now holds 2 x 1g.10gb + 1 x 2g.20gb + 1 x 3g.40gb", proc.stdout)
        proc = host.assert_config("all-balanced", expect=0)
        self.assertIn("config all-balanced is applied", proc.stdout)
        # The driver holds four GPU instances with one compute instance each, at placements that
        # do not overlap: the first creation order (1g, 1g, 2g, 3g from the top) does not fit on
        # an A100, so another order was found.
        instances = host.driver_state()["gpus"][0]["instances"]
        self.assertEqual(sorted(i["name"] for i in instances), ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"])
        self.assertTrue(all(len(i["computes"]) == 1 for i in instances))
        # CUDA sees them as MIG devices with their own UUIDs: the GPU snapshot lists them.
        snapshot = json.loads(run(["doctor", "--json"], env=host.env).stdout)
        devices = snapshot["facts"]["gpu"]["devices"][0]["mig_devices"]
        self.assertEqual(sorted(d["profile"] for d in devices), ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"])
        self.assertEqual(len({d["uuid"] for d in devices}), 4)
        self.assertTrue(all(d["uuid"].startswith("MIG-") for d in devices))
        # Applying again changes nothing.
        proc = host.apply("all-balanced")
        self.assertIn("already holds 2 x 1g.10gb + 1 x 2g.20gb + 1 x 3g.40gb", proc.stdout)
        self.assertEqual(host.driver_state()["gpus"][0]["instances"], instances)
        # export: mig-parted's format, read back equal by PyYAML and accepted by assert.
        exported = host.mig("export", expect=0).stdout
        needs(yaml is not None, "python3-yaml")
        self.assertEqual(yaml.safe_load(exported), {
            "version": "v1",
            "mig-configs": {"current": [{"device-filter": "0x20B210DE", "devices": [0], "mig-enabled": True,
                                         "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}]}})
        path = os.path.join(host.dir, "exported.yaml")
        host.mig("export", "-c", "snapshot", "-o", host_path(path), expect=0)
        proc = host.mig("assert", "-f", host_path(path), "-c", "snapshot", expect=0)
        self.assertIn("config snapshot is applied", proc.stdout)
        # The file can also come on standard input.
        proc = host.mig("assert", "-f", "-", "-c", "current", input_text=exported, expect=0)
        # all-disabled takes the instances down and MIG off.
        proc = host.apply("all-disabled")
        self.assertIn("MIG turned off", proc.stdout)
        self.assertEqual(host.driver_state()["gpus"][0]["instances"], [])
        host.assert_config("all-disabled", expect=0)

    def test_h100_mixed_config_per_device_with_filters(self):
        host = MigHost(self, "h100-mixed", "h100_x2_mig_state")
        proc = host.apply("h100-mixed", "--json")
        result = json.loads(proc.stdout)
        self.assertEqual(result["exit_code"], 0)
        self.assertEqual(sorted(result["gpus"][0]["gpu"]["layout"]), ["1g.20gb", "2g.20gb", "3g.40gb"])
        host.assert_config("h100-mixed", expect=0)
        listing = host.listing()
        self.assertEqual([g["mig_enabled"] for g in listing], [True, False])
        self.assertEqual({p["name"]: p["multiprocessors"] for p in listing[0]["profiles"]}["3g.40gb"], 48)
        needs(yaml is not None, "python3-yaml")
        self.assertEqual(yaml.safe_load(host.mig("export", expect=0).stdout)["mig-configs"]["current"], [
            {"device-filter": "0x233010DE", "devices": [0], "mig-enabled": True,
             "mig-devices": {"1g.20gb": 1, "2g.20gb": 1, "3g.40gb": 1}},
            {"device-filter": "0x233010DE", "devices": [1], "mig-enabled": False}])
        # all-balanced selects both H100s by their PCI ID.
        host.apply("all-balanced")
        host.assert_config("all-balanced", expect=0)
        self.assertEqual(yaml.safe_load(host.mig("export", expect=0).stdout)["mig-configs"]["current"], [
            {"device-filter": "0x233010DE", "devices": [0, 1], "mig-enabled": True,
             "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}])
        proc = host.assert_config("h100-mixed", expect=1)
        self.assertIn("GPU 1 (NVIDIA H100 80GB HBM3): MIG is on, the config wants it off", proc.stdout)

    def test_a_passthrough_vm_keeps_the_mode_pending_until_it_reboots(self):
        host = MigHost(self, "passthrough", "a100_80gb_mig_passthrough")
        proc = host.apply("all-balanced", expect=6)
        self.assertIn("MIG on is pending: this platform cannot reset the GPU", proc.stdout)
        self.assertIn("reboot, then run the same command again", proc.stderr)
        proc = host.assert_config("all-balanced", expect=1)
        self.assertIn("(pending until a reboot)", proc.stdout)
        self.assertEqual(host.driver_state()["gpus"][0]["current"], 0)
        host.reboot()
        proc = host.apply("all-balanced")
        self.assertNotIn("turned on", proc.stdout)  # already on after the reboot
        self.assertIn("now holds 2 x 1g.10gb + 1 x 2g.20gb + 1 x 3g.40gb", proc.stdout)
        # Instances do not survive a reboot (MIG user guide); the mode does.
        host.reboot()
        proc = host.assert_config("all-balanced", expect=1)
        self.assertIn("holds no instances", proc.stdout)

    def test_a_process_on_a_slice_blocks_the_change_and_nothing_is_touched(self):
        host = MigHost(self, "blocked", "a100_80gb_mig_state")
        host.apply("all-balanced")
        state = host.driver_state()
        three_g = next(i for i in state["gpus"][0]["instances"] if i["name"] == "3g.40gb")
        three_g["processes"] = [{"pid": 4242, "used_memory": 1 << 30}]
        host.write_driver_state(state)
        before = host.driver_state()
        proc = host.apply("three-jobs", expect=7)
        self.assertIn("processes run on it (PIDs 4242)", proc.stderr)
        self.assertEqual(host.driver_state(), before)
        proc = host.apply("all-disabled", expect=7)
        self.assertIn("PIDs 4242", proc.stderr)
        self.assertEqual(host.driver_state(), before)
        host.assert_config("all-balanced", expect=0)

    def test_gpuhost_serve_closes_nvml_for_the_reset_and_a_foreign_holder_blocks_it(self):
        # The fake driver refuses a reset while another process has NVML open (as a real one does
        # while a process holds /dev/nvidia*). gpuhost serve has it open since its first scrape,
        # and closes it while mig apply changes the mode; nvidia-smi, DCGM or nvitop would not.
        from test_serve_cli import Server
        host = MigHost(self, "serve-steps-aside", "a100_80gb_mig_state")
        server = Server([], env=host.env)
        self.addCleanup(server.stop)
        status, _, body = server.get("/metrics")
        self.assertEqual(status, 200)
        self.assertIn("gpuhost_nvml_up 1", body)
        proc = host.apply("all-balanced")
        self.assertIn("MIG turned on", proc.stdout)
        # serve opens NVML again at the next scrape and sees the new slices.
        status, _, body = server.get("/metrics")
        self.assertIn("gpuhost_nvml_up 1", body)
        self.assertIn('GPU_I_PROFILE="3g.40gb"', body)
        # A foreign monitor holding NVML open: the reset fails, MIG off stays pending, exit 7.
        stop = os.path.join(host.dir, "monitor.stop")
        ready = os.path.join(host.dir, "monitor.ready")
        monitor = subprocess.Popen([SYSTEM_PYTHON, "-c",
                                    "import ctypes, os, sys, time\n"
                                    "nvml = ctypes.CDLL(os.environ['GPUHOST_NVML_LIBRARY'])\n"
                                    "assert nvml.nvmlInit_v2() == 0\n"
                                    "open(sys.argv[2], 'w').close()\n"
                                    "deadline = time.time() + 120\n"
                                    "while not os.path.exists(sys.argv[1]) and time.time() < deadline:\n"
                                    "    time.sleep(0.1)\n"
                                    "nvml.nvmlShutdown()\n", stop, ready], env=dict(os.environ, **host.env))
        self.addCleanup(monitor.wait, 60)
        self.addCleanup(lambda: open(stop, "w").close())
        deadline = time.time() + 60
        while not os.path.exists(ready) and time.time() < deadline:
            time.sleep(0.05)
        proc = host.apply("all-disabled", expect=7)
        self.assertIn("the GPU could not be reset, something holds it", proc.stderr)
        self.assertNotIn("gpuhost readers that did not close NVML", proc.stderr)
        open(stop, "w").close()
        monitor.wait(timeout=60)
        host.apply("all-disabled")
        host.assert_config("all-disabled", expect=0)

    def test_top_reads_no_nvml_while_a_mode_change_holds_the_hold(self):
        # The hold as mig apply takes it (gpu/nvml_hold.h): an exclusive lock on the run dir's
        # nvml-hold.lock, who holds it in nvml-hold.who.
        import fcntl
        host = MigHost(self, "top-steps-aside", "a100_80gb_mig_state")
        run_dir = os.path.join(host.dir, "run")
        os.makedirs(run_dir)
        with open(os.path.join(run_dir, "nvml-hold.who"), "w") as f:
            f.write("gpuhost mig apply, pid 4711\n")
        with open(os.path.join(run_dir, "nvml-hold.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            frame = json.loads(run(["top", "--once", "--json"], env=host.env).stdout)
            self.assertFalse(frame["nvml"]["available"])
            self.assertIn("NVML is closed while gpuhost mig apply, pid 4711 changes a GPU's MIG mode",
                          frame["nvml"]["error"]["message"])
            fcntl.flock(lock, fcntl.LOCK_UN)
        frame = json.loads(run(["top", "--once", "--json"], env=host.env).stdout)
        self.assertTrue(frame["nvml"]["available"], frame["nvml"])

    def test_what_cannot_be_applied_is_refused_with_the_reason(self):
        host = MigHost(self, "refused", "a100_80gb_mig_state")
        host.apply("all-balanced")
        before = host.driver_state()
        proc = host.apply("too-many", expect=2)
        self.assertIn("8 x 1g.10gb asked, the GPU holds at most 7", proc.stderr)
        proc = host.apply("wrong-size", expect=2)
        self.assertIn("has no MIG profile 1g.5gb; it has 1g.10gb, 2g.20gb, 3g.40gb", proc.stderr)
        self.assertEqual(host.driver_state(), before)
        # Two 3g.40gb take all eight memory slices: no order leaves room for the 1g.10gb. The
        # previous layout is made again.
        proc = host.apply("no-fit", expect=2)
        self.assertIn("the layout fits in no creation order (no free placement for", proc.stderr)
        self.assertIn("its previous instances were made again (with new MIG UUIDs)", proc.stderr)
        host.assert_config("all-balanced", expect=0)
        # Files mig-parted would refuse, refused before anything is read from the GPUs.
        bad = {
            "version: v2\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n":
                "version: must be v1",
            "version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n      mig-devices: {}\n":
                "'mig-devices' is not allowed with mig-enabled: false",
            "version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n":
                "'mig-devices' is required with mig-enabled: true",
            "version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enable: true\n":
                "unknown key 'mig-enable'",
            "version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n      mig-devices:\n"
            "        \"1g.10gb\": &n 2\n": "anchors and aliases",
            "version: v1\nmig-configs:\n  a:\n    - device-filter: 20B210DE\n      devices: all\n"
            "      mig-enabled: false\n": "is not a PCI ID",
        }
        for text, reason in bad.items():
            proc = host.mig("apply", "-f", "-", "-c", "a", input_text=text, expect=2)
            self.assertIn(reason, proc.stderr)
        proc = host.apply("no-such-config", expect=2)
        self.assertIn("has no config 'no-such-config'; it has all-disabled, all-balanced, three-jobs", proc.stderr)
        host.mig("apply", "-f", host_path(host.config), expect=2)
        host.mig("frobnicate", expect=2)
        proc = run(["mig", "list"], env={"GPUHOST_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"})
        self.assertEqual(proc.returncode, 3, proc.stderr)
        self.assertIn("NVML cannot be used", proc.stderr)


class SideBySide:
    """Jobs started side by side with gpuhost run, each trainer waiting for its stop file."""

    def stop(self, proc, stop_file):
        if proc.poll() is None:
            open(stop_file, "w").close()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for stream in (proc.stdout, proc.stderr):
            stream.close()

    def wait_for(self, path, proc):
        deadline = time.time() + 60
        while time.time() < deadline:
            if os.path.exists(path) and os.path.getsize(path) > 0:
                with open(path) as f:
                    return f.read()
            if proc.poll() is not None:
                self.fail("gpuhost run ended (%d) before its trainer started:\n%s" % (proc.returncode, proc.stderr.read()))
            time.sleep(0.1)
        self.fail("the trainer did not start within 60 s")


@unittest.skipIf(IS_WINDOWS_BUILD, "MIG is Linux only; MigOnWindows runs the Windows build")
class MigSlicesForJobs(SideBySide, unittest.TestCase):
    """Three models on one A100, the recipe our users read about: three gpuhost run, each with
    --gpu mig:1g.10gb, started side by side, each trainer sees its own slice; a fourth is refused
    with the holders named, and starts once one ends."""

    TRAINER = ("import os, sys, time\n"
               "open(sys.argv[1], 'w').write(os.environ.get('CUDA_VISIBLE_DEVICES', ''))\n"
               "deadline = time.time() + 120\n"
               "while not os.path.exists(sys.argv[2]) and time.time() < deadline:\n"
               "    time.sleep(0.1)\n")

    def start(self, host, name):
        seen = os.path.join(host.dir, name + ".visible")
        stop = os.path.join(host.dir, name + ".stop")
        env = dict(os.environ, NO_COLOR="1", **host.env)
        proc = subprocess.Popen([BIN, "run", "--name", name, "--checkpoints", os.path.join(host.dir, name + "-ck"),
                                 "--cloud", "none", "--quiet", "--gpu", "mig:1g.10gb", "--",
                                 SYSTEM_PYTHON, "-c", self.TRAINER, seen, stop],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(self.stop, proc, stop)
        return proc, seen, stop

    def test_three_jobs_get_three_slices_and_a_fourth_is_refused_until_one_ends(self):
        host = MigHost(self, "three-jobs", "a100_80gb_mig_state")
        host.apply("three-jobs")
        slices = {d["uuid"] for d in json.loads(run(["doctor", "--json"], env=host.env).stdout)
                  ["facts"]["gpu"]["devices"][0]["mig_devices"]}
        self.assertEqual(len(slices), 3)
        jobs = [self.start(host, "model-%d" % i) for i in range(3)]
        visible = [self.wait_for(seen, proc) for proc, seen, _ in jobs]
        self.assertEqual(set(visible), slices, "each trainer must see its own slice")
        for i, (proc, _, _) in enumerate(jobs):
            with open(os.path.join(host.dir, "home", "jobs", "model-%d" % i, "job.json")) as f:
                self.assertEqual(json.load(f)["environment"]["CUDA_VISIBLE_DEVICES"], visible[i])
        # A fourth: every slice is held; refused before its job exists, naming the holders.
        env = dict(host.env, NO_COLOR="1")
        proc = run(["run", "--name", "model-3", "--checkpoints", os.path.join(host.dir, "model-3-ck"), "--cloud", "none",
                    "--gpu", "mig:1g.10gb", "--", SYSTEM_PYTHON, "-c", "pass"], env=env)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("every free slice is taken by another gpuhost run", proc.stderr)
        for i in range(3):
            self.assertIn("by job model-%d, pid" % i, proc.stderr)
        self.assertFalse(os.path.exists(os.path.join(host.dir, "home", "jobs", "model-3")))
        # Asking for a held slice by its UUID is refused the same way.
        proc = run(["run", "--name", "model-3", "--checkpoints", os.path.join(host.dir, "model-3-ck"), "--cloud", "none",
                    "--gpu", visible[1], "--", SYSTEM_PYTHON, "-c", "pass"], env=env)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("by job model-1", proc.stderr)
        # The first job ends: its slice goes to the fourth.
        first, _, first_stop = jobs[0]
        open(first_stop, "w").close()
        self.assertEqual(first.wait(timeout=60), 0)
        proc4, seen4, _ = self.start(host, "model-3")
        self.assertEqual(self.wait_for(seen4, proc4), visible[0])

    def test_a_slice_with_a_process_is_not_given_and_unknown_profiles_are_named(self):
        host = MigHost(self, "busy-slice", "a100_80gb_mig_state")
        host.apply("all-balanced")
        state = host.driver_state()
        ones = [i for i in state["gpus"][0]["instances"] if i["name"] == "1g.10gb"]
        ones[0]["processes"] = [{"pid": 4242, "used_memory": 1 << 30}]
        host.write_driver_state(state)
        env = dict(host.env, NO_COLOR="1")
        proc, seen, _ = self.start(host, "only-free")
        got = self.wait_for(seen, proc)
        busy_uuid = next(d["uuid"] for d in json.loads(run(["doctor", "--json"], env=host.env).stdout)
                         ["facts"]["gpu"]["devices"][0]["mig_devices"] if d["compute_pids"] == [4242])
        self.assertNotEqual(got, busy_uuid)
        proc = run(["run", "--checkpoints", os.path.join(host.dir, "x"), "--cloud", "none", "--gpu", "mig:4g.40gb",
                    "--", SYSTEM_PYTHON, "-c", "pass"], env=env)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("no slice of that profile; this host has", proc.stderr)


FAKE_MPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_mps")


@unittest.skipIf(IS_WINDOWS_BUILD, "MPS is Linux only; MigOnWindows runs the Windows refusal")
class MpsSharing(SideBySide, unittest.TestCase):
    """--gpu-share mps: jobs side by side on one whole GPU through one MPS control daemon, with
    nvidia-cuda-mps-control's stand-in (tests/integration/fake_mps: its command line, stdin
    commands and environment) where no driver exists. gpuhost starts a private daemon for the
    first job, the second joins it, the daemon goes when the last job ends, even when a job before
    it was killed; a daemon the host already runs is used and left alone."""

    TRAINER = ("import json, os, sys, time\n"
               "names = [n for n in os.environ if n.startswith('CUDA_')]\n"
               "open(sys.argv[1], 'w').write(json.dumps({n: os.environ[n] for n in names}))\n"
               "deadline = time.time() + 120\n"
               "while not os.path.exists(sys.argv[2]) and time.time() < deadline:\n"
               "    time.sleep(0.1)\n")

    def host(self, label):
        host = MigHost(self, label, "a100_80gb_mig_state")
        host.env["PATH"] = FAKE_MPS + os.pathsep + os.environ["PATH"]
        return host

    def start(self, host, name, share="mps", extra=()):
        seen = os.path.join(host.dir, name + ".visible")
        stop = os.path.join(host.dir, name + ".stop")
        env = dict(os.environ, NO_COLOR="1", **host.env)
        proc = subprocess.Popen([BIN, "run", "--name", name, "--checkpoints", os.path.join(host.dir, name + "-ck"),
                                 "--cloud", "none", "--quiet", "--gpu", "0", "--gpu-share", share] + list(extra) +
                                ["--", SYSTEM_PYTHON, "-c", self.TRAINER, seen, stop],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(self.stop, proc, stop)
        return proc, seen, stop

    def finish(self, job):
        proc, _, stop = job
        open(stop, "w").close()
        self.assertEqual(proc.wait(timeout=60), 0)
        return proc.stderr.read()

    def daemon_log(self, log_dir):
        path = os.path.join(log_dir, "control.log")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [line.split(" ", 4)[-1].strip() for line in f]

    def quit_daemon(self, pipe_dir):
        subprocess.run([os.path.join(FAKE_MPS, "nvidia-cuda-mps-control")], input="quit\n", text=True,
                       env=dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=pipe_dir), capture_output=True, timeout=30)

    def test_two_jobs_share_one_daemon_that_stops_after_the_last(self):
        host = self.host("mps-two-jobs")
        mps_dir = os.path.join(host.dir, "home", "jobs", ".mps")
        self.addCleanup(self.quit_daemon, os.path.join(mps_dir, "pipe"))
        first = self.start(host, "small-a", "mps:threads=50,mem=20G")
        a = json.loads(self.wait_for(first[1], first[0]))
        second = self.start(host, "small-b")
        b = json.loads(self.wait_for(second[1], second[0]))
        pipe = os.path.join(mps_dir, "pipe")
        self.assertEqual(a["CUDA_MPS_PIPE_DIRECTORY"], pipe)
        self.assertEqual(b["CUDA_MPS_PIPE_DIRECTORY"], pipe)
        self.assertEqual(a["CUDA_MPS_LOG_DIRECTORY"], os.path.join(mps_dir, "log"))
        self.assertEqual(a["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], "50")
        self.assertEqual(a["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], "0=20G")
        self.assertNotIn("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", b)
        self.assertTrue(a["CUDA_VISIBLE_DEVICES"].startswith("GPU-"), a)
        with open(os.path.join(host.dir, "home", "jobs", "small-a", "job.json")) as f:
            self.assertEqual(json.load(f)["environment"]["CUDA_MPS_PIPE_DIRECTORY"], pipe)
        # One daemon for both.
        self.assertEqual(self.daemon_log(os.path.join(mps_dir, "log")).count("Startup"), 1)
        # The first ends: the second still uses the daemon.
        said = self.finish(first)
        self.assertIn("the jobs on this GPU share one MPS server and one fault domain", said)
        self.assertIn("MPS: started a control daemon", said)
        self.assertNotIn("Exit", self.daemon_log(os.path.join(mps_dir, "log")))
        said = self.finish(second)
        self.assertIn("MPS: joined the control daemon", said)
        self.assertIn("no other gpuhost run uses the control daemon: stopped it", said)
        self.assertEqual(self.daemon_log(os.path.join(mps_dir, "log"))[-1], "Exit")

    def test_a_killed_run_does_not_keep_the_daemon_alive_for_ever(self):
        host = self.host("mps-killed")
        mps_dir = os.path.join(host.dir, "home", "jobs", ".mps")
        self.addCleanup(self.quit_daemon, os.path.join(mps_dir, "pipe"))
        first = self.start(host, "killed")
        self.wait_for(first[1], first[0])
        first[0].kill()  # SIGKILL: no leave(), its registration stays behind
        first[0].wait(timeout=30)
        open(first[2], "w").close()  # its orphaned trainer ends too
        second = self.start(host, "after")
        self.wait_for(second[1], second[0])
        said = self.finish(second)
        self.assertIn("MPS: joined the control daemon", said)
        self.assertIn("stopped it", said)
        self.assertEqual(self.daemon_log(os.path.join(mps_dir, "log")).count("Exit"), 1)
        self.assertEqual(os.listdir(os.path.join(mps_dir, "users")), [])

    def test_a_daemon_already_running_is_used_and_left_running(self):
        host = self.host("mps-system")
        pipe = os.path.join(host.dir, "system-pipe")
        log = os.path.join(host.dir, "system-log")
        control = os.path.join(FAKE_MPS, "nvidia-cuda-mps-control")
        subprocess.run([control, "-d"], check=True, timeout=30,
                       env=dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=pipe, CUDA_MPS_LOG_DIRECTORY=log))
        self.addCleanup(self.quit_daemon, pipe)
        job = self.start(host, "on-system", "mps", ["--env", "CUDA_MPS_PIPE_DIRECTORY=" + pipe])
        seen = json.loads(self.wait_for(job[1], job[0]))
        self.assertEqual(seen["CUDA_MPS_PIPE_DIRECTORY"], pipe)
        said = self.finish(job)
        self.assertIn("MPS: using the control daemon at " + pipe, said)
        self.assertNotIn("stopped it", said)
        self.assertNotIn("Exit", self.daemon_log(log))
        self.assertFalse(os.path.exists(os.path.join(host.dir, "home", "jobs", ".mps")))

    def test_what_cannot_share_is_refused_before_the_job_exists(self):
        host = self.host("mps-refused")
        env = dict(host.env, NO_COLOR="1")

        def refused(args, code, text, path=None):
            proc = run(["run", "--name", "refused", "--checkpoints", os.path.join(host.dir, "ck"), "--cloud", "none"] +
                       args + ["--", SYSTEM_PYTHON, "-c", "pass"], env=dict(env, PATH=path or env["PATH"]))
            self.assertEqual(proc.returncode, code, proc.stderr)
            self.assertIn(text, proc.stderr)
            self.assertFalse(os.path.exists(os.path.join(host.dir, "home", "jobs", "refused")))

        for share, text in (("mps:threads=0", "threads= is a percentage of the GPU's SMs, 1 to 100"),
                            ("mps:mem=20", "mem= is a size in G or M per device"),
                            ("mps:color=red", "unknown setting 'color'"),
                            ("space", "unknown mode")):
            refused(["--gpu-share", share], 2, text)
        host.apply("three-jobs")
        refused(["--gpu", "mig:1g.10gb", "--gpu-share", "mps"], 2, "--gpu-share mps with a MIG slice")
        host.apply("all-disabled")
        refused(["--gpu-share", "mps"], 3, "--gpu-share mps needs nvidia-cuda-mps-control on PATH",
                path="/usr/bin:/bin")
        refused(["--gpu-share", "mps", "--env", "CUDA_MPS_PIPE_DIRECTORY=" + os.path.join(host.dir, "nobody")], 3,
                "no MPS control daemon answers on CUDA_MPS_PIPE_DIRECTORY=")
        # time slicing needs nothing, and says what it does not isolate.
        proc = run(["run", "--name", "timesliced", "--checkpoints", os.path.join(host.dir, "ts"), "--cloud", "none",
                    "--gpu-share", "time", "--", SYSTEM_PYTHON, "-c", "pass"], env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("no memory or fault isolation", proc.stderr)


@unittest.skipUnless(IS_WINDOWS_BUILD, "the Windows build's refusals")
class MigOnWindows(unittest.TestCase):
    """gpuhost.exe under Wine with the fake nvml.dll: MIG is Linux only (NVIDIA); what can be
    read is listed, what would turn MIG on is refused with the Windows alternatives."""

    def test_enabling_is_refused_and_the_state_is_listed(self):
        host = MigHost(self, "windows", "a100_80gb_mig_state")
        proc = host.apply("all-balanced", expect=2)
        self.assertIn("MIG is supported on Linux only", proc.stderr)
        self.assertIn("Set-VMHostPartitionableGpu", proc.stderr)
        listing = host.listing()
        self.assertEqual(listing[0]["mig_enabled"], False)
        host.assert_config("all-disabled", expect=0)
        proc = run(["run", "--checkpoints", "C:\\ck", "--cloud", "none", "--gpu", "mig:1g.10gb", "--", "cmd", "/c", "exit"],
                   env=host.env)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("Linux only", proc.stderr)
        proc = run(["run", "--checkpoints", "C:\\ck", "--cloud", "none", "--gpu-share", "mps", "--", "cmd", "/c", "exit"],
                   env=host.env)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("MPS runs on Linux only", proc.stderr)
        self.assertIn("Set-VMHostPartitionableGpu", proc.stderr)


if __name__ == "__main__":
    unittest.main()
