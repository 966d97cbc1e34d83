"""gpuhost doctor end to end, on Linux and (with GPUHOST_WINE) the Windows build under Wine:
fake-NVML scenarios through the real loader, saved reports judged again, bad input, the CLI."""
import json
import os
import socket
import time
import unittest

from gpuhost_test import (FAKE_NVML_MINIMAL, FAKE_PYTHON, IS_WINDOWS_BUILD, GpuhostTestCase, findings,
                          host_path, run, scenario_env, tmp_dir)


class Scenarios(GpuhostTestCase):
    def test_healthy_a100s_exit_zero(self):
        proc, report = self.doctor_json(["--no-python", "--only", "gpu"], env=scenario_env("a100_sxm4_80gb_x8"), expect_exit=0)
        f = findings(report)
        self.assertEqual(f["gpu.driver"]["title"], "NVIDIA driver 535.104.05")
        self.assertEqual(report["summary"]["fail"], 0)
        self.assertEqual(len([x for x in report["findings"] if x["id"] == "gpu.identity"]), 8)
        self.assertEqual(len(report["facts"]["gpu"]["devices"]), 8)

    def test_each_broken_scenario_fails_with_its_finding(self):
        expected = {
            "no_driver": "gpu.driver.not_loaded",
            "driver_mismatch": "gpu.driver.version_mismatch",
            "h100_pending_row_remap": "gpu.row_remap.pending",
            "pcie_x8_gen3": "gpu.pcie.downtrained",
            "vgpu_unlicensed": "gpu.vgpu.unlicensed",
            "gpu_lost": "gpu.lost",
            "thermal_slowdown": "gpu.clocks.thermal",
        }
        for scenario, finding_id in expected.items():
            with self.subTest(scenario=scenario):
                proc, report = self.doctor_json(["--no-python", "--only", "gpu"], env=scenario_env(scenario), expect_exit=1)
                f = findings(report)
                self.assertIn(finding_id, f, [x["id"] for x in report["findings"]])
                self.assertEqual(f[finding_id]["severity"], "fail")
                self.assertTrue(f[finding_id]["fix"], finding_id + " has no fix")

    def test_mig_pending_is_a_warning_not_a_failure(self):
        proc, report = self.doctor_json(["--no-python", "--only", "gpu"], env=scenario_env("mig_pending_reset"), expect_exit=0)
        self.assertEqual(findings(report)["gpu.mig.pending"]["severity"], "warn")

    def test_minimal_library_lists_missing_functions_without_crashing(self):
        env = scenario_env("a100_sxm4_80gb_x8")
        env["GPUHOST_NVML_LIBRARY"] = host_path(FAKE_NVML_MINIMAL)
        proc, report = self.doctor_json(["--no-python", "--only", "gpu"], env=env)
        self.assertIn(proc.returncode, (0, 1))
        missing = findings(report)["gpu.nvml.missing_functions"]
        self.assertIn("nvmlDeviceGetMemoryInfo", missing["evidence"][0])

    def test_malformed_scenario_is_a_clear_init_failure(self):
        proc, report = self.doctor_json(["--no-python", "--only", "gpu"], env=scenario_env("malformed"), expect_exit=1)
        self.assertEqual(findings(report)["gpu.driver.init_failed"]["severity"], "fail")


class SavedReports(GpuhostTestCase):
    def test_from_judges_a_saved_report_the_same_way(self):
        d = tmp_dir("saved-report")
        path = os.path.join(d, "report.json")
        proc, original = self.doctor_json(["--no-python", "--save", host_path(path)], env=scenario_env("h100_pending_row_remap"),
                                          expect_exit=1)
        self.assertTrue(os.path.exists(path))
        # Judged again with no fake NVML at all: the facts come from the file.
        proc, again = self.doctor_json(["--from", host_path(path)], expect_exit=1)
        self.assertEqual([(f["id"], f["severity"]) for f in original["findings"]],
                         [(f["id"], f["severity"]) for f in again["findings"]])
        self.assertEqual(again["judged_from"], host_path(path))

    def test_windows_report_judged_on_any_host_keeps_windows_fixes(self):
        d = tmp_dir("windows-report")
        path = os.path.join(d, "report.json")
        proc, report = self.doctor_json(["--no-python", "--save", host_path(path)], env=scenario_env("t4_windows_wddm"))
        with open(path) as fh:
            doc = json.load(fh)
        doc["facts"]["system"]["os"]["family"] = "windows"
        with open(path, "w") as fh:
            json.dump(doc, fh)
        proc, again = self.doctor_json(["--from", host_path(path)])
        f = findings(again)
        self.assertIn("gpu.driver_model.wddm", f)
        self.assertIn("-dm 2", f["gpu.driver_model.wddm"]["fix"])

    def test_from_rejects_files_that_are_not_reports(self):
        d = tmp_dir("not-reports")
        cases = {"garbage.json": ("this is not json", "not JSON"),
                 "other.json": ('{"hello": 1}', "not a gpuhost doctor report"),
                 "wrongtype.json": ('{"schema": "gpuhost.doctor/1", "facts": {"gpu": {"devices": "many"}}}', "facts.gpu")}
        for name, (content, message) in cases.items():
            with self.subTest(file=name):
                path = os.path.join(d, name)
                with open(path, "w") as fh:
                    fh.write(content)
                proc = run(["doctor", "--from", host_path(path)])
                self.assertEqual(proc.returncode, 3, proc.stderr)
                self.assertIn(message, proc.stderr)
                self.assertIn("gpuhost: error:", proc.stderr)
        proc = run(["doctor", "--from", host_path(os.path.join(d, "missing.json"))])
        self.assertEqual(proc.returncode, 3)


class PythonProbes(GpuhostTestCase):
    def probe(self, mode, extra=()):
        env = scenario_env("a100_sxm4_80gb_x8")
        env["GPUHOST_FAKE_PYTHON"] = mode
        if not IS_WINDOWS_BUILD:  # (Wine's PATH holds no Python; Linux's does and must be hidden)
            env["PATH"] = tmp_dir("empty-path")
        start = time.monotonic()
        proc, report = self.doctor_json(["--python", host_path(FAKE_PYTHON), "--only", "frameworks,preflight"] + list(extra), env=env)
        return proc, report, time.monotonic() - start

    def test_a_hanging_interpreter_is_stopped_at_the_timeout(self):
        proc, report, elapsed = self.probe("hang", ["--python-timeout", "3"])
        f = findings(report)
        self.assertEqual(f["frameworks.python.timeout"]["severity"], "warn")
        self.assertIn("did not answer within 3 s", f["frameworks.python.timeout"]["evidence"][0])
        self.assertLess(elapsed, 60)

    def test_a_crashing_interpreter_is_a_finding(self):
        proc, report, _ = self.probe("crash")
        f = findings(report)
        self.assertEqual(f["frameworks.python.probe_failed"]["severity"], "warn")
        self.assertIn("printed no probe result", f["frameworks.python.probe_failed"]["evidence"][0])

    def test_garbage_output_is_a_finding(self):
        proc, report, _ = self.probe("garbage")
        self.assertIn("exit code 1", findings(report)["frameworks.python.probe_failed"]["evidence"][0])

    def test_cpu_only_torch_on_a_gpu_host_fails_with_the_cuda_install_command(self):
        reply = os.path.join(tmp_dir("probe-replies"), "cpu_torch.txt")
        platform = "win32" if IS_WINDOWS_BUILD else "linux"
        with open(reply, "w") as fh:
            fh.write("GPUHOST_PROBE " + json.dumps({
                "executable": "C:\\Python311\\python.exe" if IS_WINDOWS_BUILD else "/opt/venv/bin/python3",
                "version": "3.11.9", "platform": platform,
                "torch": {"installed": True, "version": "2.2.2" if IS_WINDOWS_BUILD else "2.2.2+cpu", "cuda_build": "",
                          "cuda_available": False, "arch_list": []},
                "tensorflow": {"installed": False}, "tensorflow_gpu_version": ""}) + "\n")
        proc, report, _ = self.probe("reply=" + host_path(reply))
        self.assertEqual(proc.returncode, 1, proc.stderr)
        cpu = findings(report)["frameworks.torch.cpu_only"]
        self.assertEqual(cpu["severity"], "fail")
        # Driver 535.104.05 on an A100: a CUDA 12.x wheel through PyTorch's download index.
        self.assertRegex(cpu["fix"], r"-m pip install torch==[0-9.]+ --index-url https://download\.pytorch\.org/whl/cu12[0-9]")


class CommandLine(GpuhostTestCase):
    def test_typo_in_command_suggests_the_right_one(self):
        proc = run(["docter"])
        self.assertEqual(proc.returncode, 2)
        self.assertIn("did you mean 'doctor'?", proc.stderr)

    def test_unknown_flag_is_a_usage_error(self):
        proc = run(["doctor", "--jsno"])
        self.assertEqual(proc.returncode, 2)
        self.assertIn("did you mean '--json'?", proc.stderr)

    def test_a_python_path_that_names_no_file_is_a_usage_error(self):
        proc = run(["doctor", "--python", host_path(os.path.join(tmp_dir("no-python"), "nonexistent"))])
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        self.assertIn("no such file", proc.stderr)
        self.assertEqual(proc.stdout, "")

    def test_the_operating_system_row_names_the_system_not_the_host(self):
        proc = run(["doctor", "--json", "--only", "host", "--no-python"])
        [row] = [f for f in json.loads(proc.stdout)["findings"] if f["id"] == "host.os"]
        self.assertNotEqual(row["subject"], socket.gethostname())
        self.assertTrue(row["subject"])
        self.assertIn("host name " + socket.gethostname(), row["evidence"])

    def test_help_has_examples_and_exit_codes(self):
        proc = run(["doctor", "--help"])
        self.assertEqual(proc.returncode, 0)
        self.assertIn("Examples:", proc.stdout)
        self.assertIn("Exit codes:", proc.stdout)
        listing = run(["help"])
        self.assertIn("doctor", listing.stdout)

    def test_help_json_lists_every_command_and_gives_one_commands_text(self):
        listing = run(["help", "--json"])
        self.assertEqual(listing.returncode, 0, listing.stderr)
        names = [c["name"] for c in json.loads(listing.stdout)["commands"]]
        self.assertIn("doctor", names)
        self.assertIn("run", names)
        one = json.loads(run(["help", "doctor", "--json"]).stdout)
        self.assertEqual(one["name"], "doctor")
        self.assertEqual(one["help"], run(["doctor", "--help"]).stdout)

    def test_colour_only_when_asked_or_on_a_terminal(self):
        env = scenario_env("a100_sxm4_80gb_x8")
        plain = run(["doctor", "--no-python", "--only", "gpu"], env=env)
        self.assertNotIn("\x1b[", plain.stdout)
        forced = run(["doctor", "--no-python", "--only", "gpu", "--color=always"], env=env)
        self.assertIn("\x1b[", forced.stdout)

    def test_corrupt_knowledge_override_names_the_file(self):
        d = tmp_dir("bad-knowledge")
        with open(os.path.join(d, "gpus.json"), "w") as fh:
            fh.write("{ not json")
        proc = run(["doctor", "--no-python", "--knowledge", host_path(d)])
        self.assertEqual(proc.returncode, 3, proc.stderr)
        self.assertIn("gpus.json", proc.stderr)

    def test_version_json(self):
        proc = run(["version", "--json"])
        self.assertEqual(proc.returncode, 0)
        self.assertEqual(json.loads(proc.stdout)["os"], "windows" if IS_WINDOWS_BUILD else "linux")


if __name__ == "__main__":
    unittest.main()
