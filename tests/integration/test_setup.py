"""gpuhost setup as users run it: the dry run on this host, --apply against stand-in executables
at the process boundary (apt-get, dpkg, curl, apt-mark, nvidia-smi) in a temporary state root,
restarts and failures in the middle, and a real end-to-end run that makes a real venv whose torch
comes from Debian's python3-torch and verifies it for real. Under Wine: the PowerShell plan from
Windows facts."""
import glob
import json
import os
import shutil
import subprocess
import unittest
import zipfile

from gpuhost_test import (IS_WINDOWS_BUILD, SYSTEM_PYTHON, have, host_path, needs, run, scenario_env, tmp_dir,
                          torch_available)

FAKE_POWERSHELL = os.environ.get("GPUHOST_FAKE_POWERSHELL_BIN", "")

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "..", "src", "setup", "testdata")
PS_DIR = os.path.join(HERE, "..", "powershell")
PS_MODULES = os.path.join(PS_DIR, "node_modules")


def ps_parser():
    """tests/powershell/ps_parse.c built against npm's tree-sitter core and tree-sitter-powershell
    (scripts/install-deps.sh runs npm ci there); rebuilt when its source is newer."""
    out = os.path.join(tmp_dir("ps-parse"), "ps_parse")
    source = os.path.join(PS_DIR, "ps_parse.c")
    if os.path.exists(out) and os.path.getmtime(out) >= os.path.getmtime(source):
        return out
    core = os.path.join(PS_MODULES, "tree-sitter", "vendor", "tree-sitter", "lib")
    grammar = os.path.join(PS_MODULES, "tree-sitter-powershell", "src")
    subprocess.run(["cc", "-O1", "-o", out, "-I" + os.path.join(core, "include"), "-I" + os.path.join(core, "src"),
                    "-I" + grammar, source, os.path.join(core, "src", "lib.c"), os.path.join(grammar, "parser.c"),
                    os.path.join(grammar, "scanner.c")], check=True, capture_output=True)
    return out

# Stand-ins record every call in $SETUP_LOG. apt-get "installs" into $FAKE_DPKG_DB; dpkg -s
# answers from it, else from the real package database (python3-venv, python3-torch are real).
STAND_INS = {
    "apt-get": r"""#!/bin/sh
echo "apt-get $*" >> "$SETUP_LOG"
[ "$1" = install ] || exit 0
shift
for p in "$@"; do
  case "$p" in -*) continue ;; esac
  if [ -n "${FAKE_APT_FAIL:-}" ] && [ "$p" = "$FAKE_APT_FAIL" ]; then
    echo "E: Unable to locate package $p" >&2
    exit 100
  fi
  echo "$p" >> "$FAKE_DPKG_DB"
done
""",
    "dpkg": r"""#!/bin/sh
echo "dpkg $*" >> "$SETUP_LOG"
if [ "$1" = -i ]; then echo cuda-keyring >> "$FAKE_DPKG_DB"; exit 0; fi
if [ "$1" = -s ]; then
  shift
  for p in "$@"; do
    grep -qx "$p" "$FAKE_DPKG_DB" 2>/dev/null || /usr/bin/dpkg -s "$p" >/dev/null 2>&1 || exit 1
  done
  exit 0
fi
exec /usr/bin/dpkg "$@"
""",
    "curl": r"""#!/bin/sh
echo "curl $*" >> "$SETUP_LOG"
while [ $# -gt 0 ]; do
  if [ "$1" = -o ]; then : > "$2"; fi
  shift
done
""",
    "apt-mark": "#!/bin/sh\necho \"apt-mark $*\" >> \"$SETUP_LOG\"\n",
    "nvidia-smi": "#!/bin/sh\necho \"nvidia-smi $*\" >> \"$SETUP_LOG\"\necho 'GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-fake)'\n",
}


def stand_in_root(name):
    root = tmp_dir(name)
    shutil.rmtree(root)
    os.makedirs(os.path.join(root, "bin"))
    for tool, text in STAND_INS.items():
        path = os.path.join(root, "bin", tool)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)
    env = {
        "PATH": os.path.join(root, "bin") + ":/usr/sbin:/usr/bin:/sbin:/bin",
        "GPUHOST_HOME": os.path.join(root, "home"),
        "SETUP_LOG": os.path.join(root, "calls.log"),
        "FAKE_DPKG_DB": os.path.join(root, "dpkg.db"),
        "GPUHOST_BOOT_ID": "boot-1",
    }
    return root, env


def calls(env):
    try:
        with open(env["SETUP_LOG"]) as f:
            return [line.rstrip("\n") for line in f]
    except FileNotFoundError:
        return []


class CommandLine(unittest.TestCase):
    def test_bad_flags_exit_2_before_anything_is_created(self):
        home = os.path.join(tmp_dir("setup-flags"), "home")
        shutil.rmtree(home, ignore_errors=True)
        for args, says in ((["--framework", "tensorflow-gpu==2.12.0"], "--framework tensorflow"),
                           (["--framework", "jax"], "expected torch"),
                           (["--script", "bash"], "sh or powershell"),
                           (["--yes"], "--yes goes with --apply"),
                           (["--env", "/tmp/x", "--conda", "y"], "not both"),
                           (["--python", "2.7"], "3.11"),
                           (["--driver-flavour", "nouveau"], "open or proprietary"),
                           (["--apply", "--from", "report.json"], "only on this host")):
            proc = run(["setup"] + args, env={"GPUHOST_HOME": home})
            self.assertEqual(proc.returncode, 2, args)
            self.assertIn(says, proc.stderr, args)
        self.assertFalse(os.path.exists(home))

    def test_help_has_examples_and_exit_codes(self):
        proc = run(["setup", "--help"])
        self.assertEqual(proc.returncode, 0)
        for text in ("Examples:", "--apply", "--for-image", "Exit codes:", "6  a step needs a restart"):
            self.assertIn(text, proc.stdout)


@unittest.skipIf(IS_WINDOWS_BUILD, "the Windows build is checked in WindowsPlan")
class LinuxPlan(unittest.TestCase):
    @needs(have("shellcheck"), "shellcheck")
    def test_every_sh_script_passes_sh_n_and_shellcheck(self):
        scripts = sorted(glob.glob(os.path.join(GOLDEN, "*.sh")))
        self.assertGreaterEqual(len(scripts), 4)
        proc = run(["setup", "--script", "sh", "--env", os.path.join(tmp_dir("setup-script"), "venv")])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        here = os.path.join(tmp_dir("setup-script"), "this-host.sh")
        with open(here, "w") as f:
            f.write(proc.stdout)
        for path in scripts + [here]:
            for cmd in (["sh", "-n", path], ["shellcheck", "-s", "sh", path]):
                check = subprocess.run(cmd, capture_output=True, text=True)
                self.assertEqual(check.returncode, 0, "%s: %s%s" % (" ".join(cmd), check.stdout, check.stderr))

    def test_script_for_the_wrong_shell_is_refused(self):
        proc = run(["setup", "--script", "powershell"])
        self.assertEqual(proc.returncode, 2)
        self.assertIn("its script is sh", proc.stderr)

    def test_dry_run_changes_nothing_and_names_every_step(self):
        root, env = stand_in_root("setup-dry")
        venv = os.path.join(root, "venv")
        proc = run(["setup", "--json", "--env", venv], env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        plan = json.loads(proc.stdout)
        self.assertEqual(plan["shell"], "sh")
        ids = [s["id"] for s in plan["steps"]]
        self.assertIn("python.env", ids)
        self.assertIn("torch.install", ids)
        self.assertEqual(ids[-1], "verify.frameworks")
        torch = next(s for s in plan["steps"] if s["id"] == "torch.install")
        self.assertIn("/whl/cpu", torch["actions"][0])  # no NVIDIA GPU here: the CPU build, said so
        self.assertIn("#!/bin/sh", plan["script"])
        self.assertFalse(os.path.exists(venv))
        self.assertEqual(calls(env), [])
        self.assertFalse(os.path.exists(env["GPUHOST_HOME"]))

    def test_a_stale_driver_module_is_a_restart_not_a_reinstall_or_a_cpu_build(self):
        # The fake NVML's upgraded-but-not-restarted driver (NVML_ERROR_LIB_RM_VERSION_MISMATCH).
        proc = run(["setup", "--json", "--env", "/tmp/none"], env=scenario_env("driver_mismatch"))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        plan = json.loads(proc.stdout)
        ids = [s["id"] for s in plan["steps"]]
        self.assertEqual(ids[0], "driver.restart")
        self.assertTrue(plan["steps"][0]["reboot"])
        self.assertNotIn("driver.install", ids)
        torch = next(s for s in plan["steps"] if s["id"] == "torch.install")
        self.assertNotIn("/whl/cpu", torch["actions"][0])


@unittest.skipIf(IS_WINDOWS_BUILD, "apply with POSIX stand-ins is Linux-only")
class ApplyWithStandIns(unittest.TestCase):
    def apply(self, env, *extra):
        return run(["setup", "--for-image", "--offline", "--apply", "--yes", "--json", "--env",
                    os.path.join(os.path.dirname(env["SETUP_LOG"]), "venv")] + list(extra), env=env, timeout=300)

    def test_right_order_restart_resume_then_nothing_to_do(self):
        root, env = stand_in_root("setup-apply")
        first = self.apply(env)
        self.assertEqual(first.returncode, 6, first.stderr + first.stdout[-2000:])
        result = json.loads(first.stdout)["apply"]
        self.assertEqual(result["outcome"], "reboot_needed")
        self.assertIn("driver.install needs a restart", result["message"])
        kernel = os.uname().release
        self.assertEqual(calls(env), [
            "dpkg -s linux-headers-%s dkms" % kernel,
            "apt-get update",
            "apt-get install -y linux-headers-%s dkms" % kernel,
            "dpkg -s linux-headers-%s dkms" % kernel,
            "dpkg -s cuda-keyring",
            "curl -fsSL -o /tmp/cuda-keyring.deb "
            "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb",
            "dpkg -i /tmp/cuda-keyring.deb",
            "apt-get update",
            "dpkg -s cuda-keyring",
            "dpkg -s nvidia-open",
            "apt-get install -y nvidia-open",
            "apt-mark hold linux-image-%s linux-headers-%s" % (kernel, kernel),
            "dpkg -s nvidia-open",
        ])

        # The same boot: nothing runs, it says to restart.
        before = len(calls(env))
        again = self.apply(env)
        self.assertEqual(again.returncode, 6)
        self.assertIn("has not restarted", json.loads(again.stdout)["apply"]["message"])
        self.assertEqual(len(calls(env)), before)

        # After the restart it continues: a real venv, torch from Debian's package, the lock.
        env["GPUHOST_BOOT_ID"] = "boot-2"
        done = self.apply(env)
        self.assertEqual(done.returncode, 0, done.stderr + done.stdout[-3000:])
        result = json.loads(done.stdout)["apply"]
        self.assertEqual(result["outcome"], "done")
        status = {s["id"]: s["status"] for s in result["steps"]}
        self.assertEqual(status["driver.install"], "done before")
        self.assertEqual(status["python.env"], "ran")
        self.assertTrue(os.path.exists(os.path.join(root, "venv", "bin", "python")))
        self.assertTrue(os.path.exists(os.path.join(env["GPUHOST_HOME"], "setup", "lock.json")))
        self.assertFalse(os.path.exists(os.path.join(env["GPUHOST_HOME"], "setup", "state.json")))
        self.assertNotIn("apt-get install -y nvidia-open", calls(env)[before:])

        # Idempotent: a second run does nothing but probe.
        before = calls(env)
        twice = self.apply(env)
        self.assertEqual(twice.returncode, 0, twice.stderr)
        statuses = {s["status"] for s in json.loads(twice.stdout)["apply"]["steps"]}
        self.assertTrue(statuses <= {"done before", "satisfied"}, statuses)
        new = calls(env)[len(before):]
        self.assertTrue(all(c.startswith("dpkg -s") for c in new), new)

    def test_a_failing_step_stops_with_its_reason_and_the_rerun_resumes(self):
        root, env = stand_in_root("setup-fail")
        env["FAKE_APT_FAIL"] = "nvidia-open"
        failed = self.apply(env)
        self.assertEqual(failed.returncode, 1, failed.stdout[-2000:])
        result = json.loads(failed.stdout)["apply"]
        self.assertEqual(result["outcome"], "failed")
        self.assertIn("driver.install", result["message"])
        self.assertIn("exited with 100", result["message"])
        log = os.path.join(env["GPUHOST_HOME"], "setup", "logs", "driver.install.log")
        self.assertIn(log, result["message"])
        with open(log) as f:
            self.assertIn("Unable to locate package nvidia-open", f.read())
        self.assertFalse(os.path.exists(os.path.join(root, "venv")))  # nothing after the failure ran

        del env["FAKE_APT_FAIL"]
        before = len(calls(env))
        resumed = self.apply(env)
        self.assertEqual(resumed.returncode, 6, resumed.stdout[-2000:])
        status = {s["id"]: s["status"] for s in json.loads(resumed.stdout)["apply"]["steps"]}
        self.assertEqual(status["driver.prerequisites"], "done before")
        self.assertEqual(status["driver.install"], "ran")
        self.assertEqual([c for c in calls(env)[before:] if c.startswith("apt-get install")], ["apt-get install -y nvidia-open"])


@unittest.skipIf(IS_WINDOWS_BUILD, "Debian's python3-venv and python3-torch")
@needs(torch_available(), "python3-torch")
class RealEndToEnd(unittest.TestCase):
    def test_real_venv_with_debian_torch_verified_on_this_cpu_host(self):
        root = tmp_dir("setup-e2e")
        shutil.rmtree(root)
        venv = os.path.join(root, "venv")
        env = {"GPUHOST_HOME": os.path.join(root, "home"), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        proc = run(["setup", "--framework", "torch", "--env", venv, "--offline", "--apply", "--yes"], env=env, timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stdout[-3000:] + proc.stderr)
        # Said, not silent: no wheel index, the system's torch through --system-site-packages.
        self.assertIn("--offline: torch is not installed from a wheel index", proc.stdout)
        self.assertIn("Debian's python3-torch", proc.stdout)
        with open(os.path.join(venv, "pyvenv.cfg")) as f:
            self.assertIn("include-system-site-packages = true", f.read())
        with open(os.path.join(env["GPUHOST_HOME"], "setup", "lock.json")) as f:
            lock = json.load(f)
        verified = lock["verification"]
        self.assertTrue(verified["ok"], verified)
        self.assertEqual(verified["torch"]["device"], "cpu")
        self.assertFalse(verified["torch"]["cuda_available"])
        self.assertTrue(verified["torch"]["matmul_finite"])
        real = subprocess.run([SYSTEM_PYTHON, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
        self.assertEqual(verified["torch"]["version"], real.stdout.strip())

        check = run(["setup", "--check"], env=env)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        self.assertIn("no drift", check.stdout)
        shutil.rmtree(venv)
        drifted = run(["setup", "--check", "--json"], env=env)
        self.assertEqual(drifted.returncode, 1, drifted.stdout)
        self.assertGreaterEqual(json.loads(drifted.stdout)["drift"], 1)

    def test_real_pip_installs_the_pinned_build_from_a_mirror_and_verification_catches_a_broken_torch(self):
        # No wheel index is reachable here, so a PEP 503 index on 127.0.0.1 stands in for a
        # mirror of download.pytorch.org/whl (--torch-index). Its "torch" wheel is a stub that
        # imports but cannot compute: the real pip installs it, the probe accepts the pinned
        # version, and the real verification refuses it.
        root = tmp_dir("setup-mirror")
        shutil.rmtree(root)
        venv = os.path.join(root, "venv")
        env = {"GPUHOST_HOME": os.path.join(root, "home"), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        plan = json.loads(run(["setup", "--json", "--env", venv], env=env).stdout)
        step = next(s for s in plan["steps"] if s["id"] == "torch.install")
        version = plan["expected"]["torch"]["version"]
        self.assertIn("/whl/cpu", step["actions"][0])
        wheel_dir = os.path.join(root, "index", "whl", "cpu", "torch")
        os.makedirs(wheel_dir)
        name = "torch-%s+cpu-py3-none-any.whl" % version
        info = "torch-%s+cpu.dist-info" % version
        with zipfile.ZipFile(os.path.join(wheel_dir, name), "w") as z:
            z.writestr("torch/__init__.py", "__version__ = '%s+cpu'\n\nclass version:\n    cuda = None\n" % version)
            z.writestr(info + "/METADATA", "Metadata-Version: 2.1\nName: torch\nVersion: %s+cpu\n" % version)
            z.writestr(info + "/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
            z.writestr(info + "/RECORD", "")
        with open(os.path.join(wheel_dir, "index.html"), "w") as f:
            f.write('<html><body><a href="%s">%s</a></body></html>\n' % (name, name))
        server = subprocess.Popen([SYSTEM_PYTHON, "-m", "http.server", "--bind", "127.0.0.1", "0",
                                   "--directory", os.path.join(root, "index")], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)
        try:
            port = int(server.stdout.readline().split("port ")[1].split(" ")[0])
            proc = run(["setup", "--env", venv, "--torch-index", "http://127.0.0.1:%d/whl" % port, "--apply", "--yes", "--json"],
                       env=env, timeout=600)
        finally:
            server.terminate()
            server.wait(timeout=30)
        self.assertEqual(proc.returncode, 1, proc.stdout[-3000:] + proc.stderr)
        result = json.loads(proc.stdout)["apply"]
        status = {s["id"]: s["status"] for s in result["steps"]}
        self.assertEqual(status["torch.install"], "ran")  # and its probe then accepted torch==version, CPU
        self.assertEqual(status["verify.frameworks"], "failed")
        self.assertIn("torch: AttributeError", " ".join(result["verification"]["problems"]))
        site = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages", info))
        self.assertEqual(len(site), 1, "pip did not install the pinned wheel into the venv")

    def test_a_cpu_build_on_a_gpu_host_fails_verification(self):
        root, env = stand_in_root("setup-e2e-gpu")  # nvidia-smi stand-in for the fake NVML's GPU
        env.update(scenario_env("a100_sxm4_80gb_x8"))
        proc = run(["setup", "--env", os.path.join(root, "venv"), "--offline", "--apply", "--yes", "--json"], env=env, timeout=600)
        self.assertEqual(proc.returncode, 1, proc.stdout[-3000:])
        result = json.loads(proc.stdout)["apply"]
        self.assertIn("verify.frameworks", result["message"])
        self.assertIn("CPU-only build on a host with an NVIDIA GPU", " ".join(result["verification"]["problems"]))
        self.assertIn("nvidia-smi -L", calls(env))


@needs(os.path.isdir(os.path.join(PS_MODULES, "tree-sitter-powershell")), "tests/powershell/node_modules (npm ci)")
class PowerShellGrammar(unittest.TestCase):
    """The PowerShell scripts against tree-sitter-powershell: a grammar, not PowerShell's own
    parser (none exists for Debian), so it catches broken blocks, strings, here-strings and
    statements but not every rule PowerShell enforces."""

    def test_the_checker_rejects_broken_scripts(self):
        broken = os.path.join(tmp_dir("ps-parse"), "broken.ps1")
        for text in ("if ($x) {\n  Write-Output 'a'\n", "$s = @'\nno end\n", "function f( { }\n"):
            with open(broken, "w") as f:
                f.write(text)
            proc = subprocess.run([ps_parser(), broken], capture_output=True, text=True)
            self.assertEqual(proc.returncode, 1, text)

    def test_every_powershell_golden_parses(self):
        scripts = sorted(glob.glob(os.path.join(GOLDEN, "*.ps1")))
        self.assertGreaterEqual(len(scripts), 2)
        proc = subprocess.run([ps_parser()] + scripts, capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)

    @unittest.skipIf(not IS_WINDOWS_BUILD, "the Windows build writes this host's PowerShell")
    def test_this_windows_hosts_script_parses(self):
        proc = run(["setup", "--script", "powershell", "--env", "C:\\venvs\\train"])
        self.assertIn(proc.returncode, (0, 7), proc.stderr)
        path = os.path.join(tmp_dir("ps-parse"), "this-host.ps1")
        with open(path, "w") as f:
            f.write(proc.stdout)
        check = subprocess.run([ps_parser(), path], capture_output=True, text=True)
        self.assertEqual(check.returncode, 0, check.stderr)


@unittest.skipIf(not IS_WINDOWS_BUILD, "the Windows build under Wine")
class WindowsPlan(unittest.TestCase):
    def test_powershell_plan_from_windows_facts(self):
        proc = run(["setup", "--json", "--env", "C:\\venvs\\train"])
        self.assertIn(proc.returncode, (0, 7), proc.stderr)
        plan = json.loads(proc.stdout)
        self.assertEqual(plan["shell"], "powershell")
        self.assertEqual(plan["os"], "windows")
        ids = [s["id"] for s in plan["steps"]]
        self.assertIn("windows.vc_runtime", ids)
        self.assertIn("python.env", ids)
        self.assertIn("[CmdletBinding(SupportsShouldProcess)]", plan["script"])
        env = next(s for s in plan["steps"] if s["id"] == "python.env")
        self.assertIn("C:\\venvs\\train", env["actions"][0])

    def test_apply_runs_each_step_through_powershell_in_order_and_resumes_after_a_failure(self):
        # The engine's Windows side at the process boundary: each probe and action goes to
        # GPUHOST_POWERSHELL -File <state>\\steps\\<id>[.probe].ps1 (a stand-in: Wine has no PowerShell).
        root = tmp_dir("setup-windows-apply")
        shutil.rmtree(root)
        os.makedirs(root)
        log, done = os.path.join(root, "calls.log"), os.path.join(root, "done.txt")
        env = {"GPUHOST_POWERSHELL": host_path(FAKE_POWERSHELL), "GPUHOST_HOME": host_path(os.path.join(root, "home")),
               "GPUHOST_BOOT_ID": "boot-1", "GPUHOST_FAKE_PS_LOG": host_path(log), "GPUHOST_FAKE_PS_DONE": host_path(done),
               "GPUHOST_FAKE_PS_FAIL": "torch.install"}
        args = ["setup", "--apply", "--yes", "--json", "--env", "C:\\venvs\\train"]
        failed = run(args, env=env, timeout=300)
        self.assertEqual(failed.returncode, 1, failed.stderr + failed.stdout[-2000:])
        out = json.loads(failed.stdout)
        ids = [s["id"] for s in out["steps"]]
        before = ids[:ids.index("torch.install")]
        self.assertIn("python.env", before)
        expected = []
        for step in before:
            expected += ["probe " + step, "run " + step, "probe " + step]
        expected += ["probe torch.install", "run torch.install"]
        with open(log) as f:
            self.assertEqual(f.read().split("\n")[:-1], expected)
        self.assertIn("torch.install", out["apply"]["message"])
        with open(os.path.join(root, "home", "setup", "logs", "torch.install.log")) as f:
            self.assertIn("failed as asked", f.read())
        for step in before:  # the step files are the rendered programs
            self.assertTrue(os.path.exists(os.path.join(root, "home", "setup", "steps", step + ".ps1")), step)

        del env["GPUHOST_FAKE_PS_FAIL"]
        open(log, "w").close()
        resumed = run(args, env=env, timeout=300)
        self.assertEqual(resumed.returncode, 0, resumed.stderr + resumed.stdout[-2000:])
        status = {s["id"]: s["status"] for s in json.loads(resumed.stdout)["apply"]["steps"]}
        self.assertEqual({status[s] for s in before}, {"done before"})
        self.assertEqual(status["torch.install"], "ran")
        with open(log) as f:
            calls = f.read().split("\n")[:-1]
        self.assertEqual([c for c in calls if c.startswith("run ")], ["run torch.install", "run verify.frameworks"])
        self.assertTrue(os.path.exists(os.path.join(root, "home", "setup", "lock.json")))

    def test_sh_is_refused_for_a_windows_plan(self):
        proc = run(["setup", "--script", "sh"])
        self.assertEqual(proc.returncode, 2)
        self.assertIn("its script is powershell", proc.stderr)


if __name__ == "__main__":
    unittest.main()
