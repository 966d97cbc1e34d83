"""gpuhost doctor on this real Linux host: no GPU, Debian's python3-torch (a CPU-only 1.13 build)
installed by scripts/install-deps.sh, and real interpreters that hang or crash."""
import ctypes
import os
import stat
import time
import unittest

from gpuhost_test import GpuhostTestCase, findings, tmp_dir


def real_nvml_present():
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
        return True
    except OSError:
        return False


def script(name, body):
    path = os.path.join(tmp_dir("scripts"), name)
    with open(path, "w") as fh:
        fh.write("#!/bin/sh\n" + body + "\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


class ThisHost(GpuhostTestCase):
    @unittest.skipIf(real_nvml_present(), "this host has an NVIDIA driver; the no-driver case cannot be observed here")
    def test_no_driver_and_cpu_only_debian_torch(self):
        os.environ.pop("GPUHOST_NVML_LIBRARY", None)
        proc, report = self.doctor_json(["--python", "/usr/bin/python3"], expect_exit=1)
        f = findings(report)
        driver = f["gpu.driver.missing"]
        self.assertEqual(driver["severity"], "fail")
        self.assertIn("NVML_ERROR_LIBRARY_NOT_FOUND", driver["evidence"][0])
        self.assertIn("install", driver["fix"])
        cpu = [x for x in report["findings"] if x["id"] == "frameworks.torch.cpu_only" and x["subject"] == "/usr/bin/python3"]
        self.assertEqual(len(cpu), 1, [x["id"] for x in report["findings"]])
        self.assertIn("PyTorch 1.13", cpu[0]["title"])
        self.assertIn("CPU-only", cpu[0]["title"])
        self.assertIn("--index-url https://download.pytorch.org/whl/cu", cpu[0]["fix"])
        probe = [p for p in report["facts"]["pythons"] if p["interpreter"] == "/usr/bin/python3"][0]
        self.assertEqual(probe["torch"]["cuda_build"], "")
        self.assertTrue(probe["torch"]["version"].startswith("1.13"))

    def test_torch_is_imported_only_when_asked_or_useful(self):
        proc, quick = self.doctor_json(["--python", "/usr/bin/python3", "--only", "frameworks"])
        proc, full = self.doctor_json(["--python", "/usr/bin/python3", "--only", "frameworks", "--full-probe"])
        pick = lambda r: [p for p in r["facts"]["pythons"] if p["interpreter"] == "/usr/bin/python3"][0]["torch"]
        self.assertFalse(pick(quick)["imported"])
        self.assertTrue(pick(full)["imported"])
        # Read from torch/version.py or from the imported module, the build facts agree.
        self.assertEqual(pick(quick)["version"], pick(full)["version"])
        self.assertEqual(pick(quick)["cuda_build"], pick(full)["cuda_build"])
        self.assertTrue(full["facts"]["python_full_probe"])

    def test_hanging_python_and_its_children_are_stopped(self):
        hang = script("hang-python", "sleep 600 & sleep 600")
        start = time.monotonic()
        proc, report = self.doctor_json(["--python", hang, "--python-timeout", "2", "--only", "frameworks"])
        self.assertLess(time.monotonic() - start, 60)
        self.assertEqual(findings(report)["frameworks.python.timeout"]["severity"], "warn")

    def test_python_killed_by_a_signal(self):
        crash = script("crash-python", "kill -SEGV $$")
        proc, report = self.doctor_json(["--python", crash, "--only", "frameworks"])
        self.assertIn("killed by signal 11", findings(report)["frameworks.python.probe_failed"]["evidence"][0])

    def test_a_venv_directory_is_accepted(self):
        venv = tmp_dir("fake-venv")
        os.makedirs(os.path.join(venv, "bin"), exist_ok=True)
        target = os.path.join(venv, "bin", "python3")
        if not os.path.exists(target):
            os.symlink("/usr/bin/python3", target)
        proc, report = self.doctor_json(["--python", venv, "--only", "frameworks"])
        interpreters = [p["interpreter"] for p in report["facts"]["pythons"]]
        self.assertIn(target, interpreters)

    def test_without_python_probe_it_is_fast_and_says_so(self):
        proc, report = self.doctor_json(["--no-python"])
        self.assertEqual(findings(report)["frameworks.skipped"]["severity"], "info")
        self.assertTrue(report["facts"]["python_skipped"])


if __name__ == "__main__":
    unittest.main()
