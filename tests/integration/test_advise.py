"""`gpuhost advise JOB` on jobs that really are what the advisor must tell apart, trainers nobody
changed, run under `gpuhost run`: a PyTorch trainer whose Dataset decodes every sample with
num_workers=0 (its main thread loads every batch), the same with num_workers=2 (the loading is
in pt_data_worker processes), and one whose main thread computes on a pre-decoded batch. Their
threads, /proc and PSI readings are real; the GPU side is a fake NVML scenario (this host has no
GPU): a GPU busy 12 % of the time for the input-bound runs, 98 % for the compute-bound one.

What must hold: num_workers=0 with a waiting GPU is an input-bound verdict whose fix names
num_workers (Lightning's suggestion for this host) and pin_memory; with workers the advisor sees
them as such and the main-thread verdict goes; the compute-bound job with a busy GPU gets no
finding; without NVML the host side is still judged and the GPUs are said to be unseen; a job
that does not run, and bad flags, are refused before anything is watched."""
import json
import os
import signal
import subprocess
import time
import unittest
import urllib.request

from gpuhost_test import BIN, IS_WINDOWS_BUILD, host_path, needs, scenario_env, torch_available
from gpuhost_test import run as gpuhost
from test_run_cli import HERE, Job, RunTestCase

INPUT_TRAINER = os.path.join(HERE, "trainers", "input_trainer.py")
TORCH_PYTHON = "/usr/bin/python3"  # Debian's python3-torch


class AdviseTestCase(RunTestCase):
    def start_training(self, label, trainer_args, run_flags=(), env=None):
        job = Job(self, "advise-" + label)
        proc = job.start(list(run_flags), [TORCH_PYTHON, INPUT_TRAINER] + trainer_args, env=env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if os.path.exists(os.path.join(job.job_dir, "logs", "stdout.log")) and "step 20 " in job.stdout_log():
                break
            self.assertIsNone(proc.poll(), "gpuhost run ended before training: " + job.summary())
            time.sleep(0.1)
        else:
            self.fail("the trainer printed no step 20 within 120 s: " + job.summary())
        self.addCleanup(self.stop, proc)
        return job

    def stop(self, proc):
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def advise(self, job, scenario, seconds=3, extra=()):
        env = job.env(scenario_env(scenario) if scenario else {"GPUHOST_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"})
        proc = subprocess.run([BIN, "advise", job.name, "--seconds", str(seconds), "--json"] + list(extra), env=env,
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return json.loads(proc.stdout)


@unittest.skipIf(IS_WINDOWS_BUILD, "PyTorch trainers run on Linux here (Wine has no Python): WindowsAdvice in test_run_windows judges a native trainer")
@needs(torch_available(), "Debian's python3-torch for /usr/bin/python3")
class InputBound(AdviseTestCase):
    def test_main_thread_loading_with_a_waiting_gpu_is_input_bound_with_the_num_workers_fix(self):
        job = self.start_training("workers0", ["--workers", "0"])
        report = self.advise(job, "a100_waiting_for_input")
        host = report["observation"]["host"]
        self.assertEqual(host["loader_workers"], 0, report)
        # Running or waiting for a CPU nearly all the time, however much CPU the other tests leave it.
        self.assertGreaterEqual(host["main_thread_busy"], 0.85, report)
        self.assertGreater(host["main_thread_cores"], 0.1, report)
        self.assertEqual(host["main_thread"], "python3")
        self.assertEqual(report["observation"]["gpus"][0]["busy_percent"], 12)
        self.assertEqual([(f["id"], f["strength"]) for f in report["findings"]], [("input_bound", "verdict")], report)
        finding = report["findings"][0]
        workers = max(1, os.cpu_count() - 1)  # Lightning's suggestion, one process on this host
        self.assertIn("num_workers=%d" % workers, finding["fix"])
        self.assertIn("pin_memory=True", finding["fix"])
        self.assertIn("num_workers=0", finding["limit"])
        self.assertIn("8.3x", finding["expected"])  # 100 / 12
        # The human form says the same.
        text = subprocess.run([BIN, "advise", job.name, "--seconds", "2"], env=job.env(scenario_env("a100_waiting_for_input")),
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("verdict input_bound (GPU 0)", text.stdout)
        self.assertIn("fix:      DataLoader(..., num_workers=%d" % workers, text.stdout)
        self.assertIn("watching " + job.name, text.stderr)

    def test_loader_workers_are_seen_and_the_main_thread_verdict_goes(self):
        job = self.start_training("workers2", ["--workers", "2"])
        report = self.advise(job, "a100_waiting_for_input")
        host = report["observation"]["host"]
        self.assertEqual(host["loader_workers"], 2, report)  # two pt_data_worker processes
        self.assertGreater(host["loader_cores_mean"], 0.05, report)
        for finding in report["findings"]:
            self.assertNotIn("num_workers=0", finding["limit"], report)

    def storage_trainer(self, label, source):
        job = Job(self, "advise-" + label)
        return self.start_training(label, ["--workers", "0", "--source", source, "--evict",
                                           "--data", os.path.join(job.dir, "data")])

    def test_a_memmap_dataset_dropped_from_the_page_cache_is_input_bound_on_its_reads(self):
        # np.memmap with readahead off, the file dropped from the page cache every epoch: each
        # sample's pages are major faults, read from the disk by the main thread.
        job = self.storage_trainer("memmap", "memmap")
        report = self.advise(job, "a100_waiting_for_input")
        host = report["observation"]["host"]
        self.assertGreater(host["major_faults_per_s"], 100, report)
        self.assertEqual([(f["id"], f["strength"]) for f in report["findings"]], [("input_bound", "verdict")], report)
        finding = report["findings"][0]
        self.assertIn("num_workers=0", finding["limit"])
        self.assertTrue(any("major faults/s (memmap pages read from disk)" in e for e in finding["evidence"]), finding)
        self.assertIn("keep the dataset in the page cache", finding["fix"])

    def test_a_file_read_per_sample_after_the_page_cache_is_dropped_is_input_bound_on_its_reads(self):
        job = self.storage_trainer("file-evict", "file")
        report = self.advise(job, "a100_waiting_for_input")
        host = report["observation"]["host"]
        self.assertGreater(host["read_mib_per_s"], 1, report)
        self.assertEqual([(f["id"], f["strength"]) for f in report["findings"]], [("input_bound", "verdict")], report)
        finding = report["findings"][0]
        self.assertTrue(any(e.startswith("the trainer reads its samples from storage: ") for e in finding["evidence"]),
                        finding)

    def test_a_compute_bound_job_with_a_busy_gpu_gets_no_finding(self):
        job = self.start_training("compute", ["--compute"])
        report = self.advise(job, "a100_busy_training")
        self.assertEqual(report["observation"]["gpus"][0]["busy_percent"], 98)
        self.assertGreaterEqual(report["observation"]["host"]["main_thread_busy"], 0.85, report)
        self.assertEqual(report["findings"], [], report)
        text = subprocess.run([BIN, "advise", job.name, "--seconds", "1"], env=job.env(scenario_env("a100_busy_training")),
                              capture_output=True, text=True, timeout=60)
        self.assertIn("no finding", text.stdout)

    def test_a_job_on_a_mig_slice_is_judged_on_its_slice(self):
        """An H100 in MIG mode whose whole-GPU graphics activity is 70 %: a trainer loading on its
        main thread on the idle 1g.10gb slice is input-bound on that slice's own GPM (0 %), with the
        slice's memory; the GPU's own figures would have hidden it."""
        slice_uuid = "MIG-c5e90b17-3d2a-5b84-a6f3-9e1d4c7b2a58"
        env = scenario_env("h100_mig_instances_busy")
        job = self.start_training("mig-slice", ["--workers", "0"], run_flags=["--gpu", slice_uuid], env=env)
        report = self.advise(job, "h100_mig_instances_busy")
        gpus = report["observation"]["gpus"]
        self.assertEqual(len(gpus), 1, report)
        self.assertIn("(MIG 1g.10gb)", gpus[0]["name"])
        self.assertEqual(gpus[0]["busy_percent"], 0, report)
        self.assertEqual([(f["id"], f["strength"]) for f in report["findings"]], [("input_bound", "verdict")], report)

    def test_without_nvml_the_gpus_are_unseen_and_the_host_is_still_read(self):
        job = self.start_training("no-nvml", ["--workers", "0"])
        report = self.advise(job, None, seconds=1)
        self.assertEqual(report["observation"]["gpus"], [])
        self.assertIn("NVML", report["gpu_unseen"])
        self.assertEqual(report["observation"]["host"]["loader_workers"], 0)
        self.assertEqual(report["findings"], [], report)  # no GPU reading: no GPU claim


@unittest.skipIf(IS_WINDOWS_BUILD, "PyTorch trainers run on Linux here (Wine has no Python)")
@needs(torch_available(), "Debian's python3-torch for /usr/bin/python3")
class AdviceInRun(AdviseTestCase):
    """The advisor inside `gpuhost run --advise SECONDS`: the same judgement, journalled as
    `advice` records, shown by status, exported by serve, and the step time compared with the
    job's previous run."""

    def start_run(self, job, scenario, trainer_args):
        return job.start(["--advise", "3"], [TORCH_PYTHON, INPUT_TRAINER] + trainer_args, env=scenario_env(scenario))

    def wait_for_advice(self, job, proc, predicate, what, start=0):
        def found(records):
            advice = [r for r in records if r["type"] == "advice"]
            return any(predicate(r) for r in advice[start:])
        job.wait_for(found, what, proc, timeout=180)
        return [r for r in job.records("advice")[start:] if predicate(r)][0]

    def test_an_input_bound_trainer_gets_an_advice_record_seen_by_status_serve_and_the_next_run(self):
        job = Job(self, "advice-in-run")
        proc = self.start_run(job, "a100_waiting_for_input", ["--workers", "0"])
        advice = self.wait_for_advice(job, proc, lambda r: [f["id"] for f in r["findings"]] == ["input_bound"],
                                      "an input_bound advice record")
        finding = advice["findings"][0]
        self.assertEqual((finding["strength"], finding["gpu"]), ("verdict", 0), advice)
        self.assertIn("num_workers=", finding["fix"])
        self.assertEqual(advice["gpus_seen"], 1, advice)
        timed = self.wait_for_advice(job, proc, lambda r: r.get("step_seconds"), "an advice record with a step time")
        self.assertGreater(timed["steps"], 0, timed)
        self.assertNotIn("last_run_step_seconds", timed)  # the job's first run

        status = job.status()
        self.assertEqual([f["id"] for f in status["advice"]["findings"]], ["input_bound"], status["advice"])
        self.assertGreater(status["advice"]["step_seconds"], 0)
        text = job.gpuhost("status", job.name)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("Advice", text.stdout)
        self.assertIn("verdict input_bound (GPU 0): ", text.stdout)
        self.assertIn("step time ", text.stdout)

        server = subprocess.Popen([BIN, "serve", "--port", "0", "--json", "--jobs-dir", os.path.join(job.home, "jobs")],
                                  env=job.env(scenario_env("a100_waiting_for_input")), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.addCleanup(self.stop_server, server)
        port = json.loads(server.stdout.readline())["port"]
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=60) as resp:
            body = resp.read().decode("utf-8")
        self.assertIn('gpuhost_job_finding{job_name="advice-in-run",finding="input_bound",strength="verdict",gpu="0"} 1',
                      body)
        self.assertIn('gpuhost_job_findings{job_name="advice-in-run"} 1', body)
        self.assertIn('gpuhost_job_step_seconds{job_name="advice-in-run"}', body)

        # The job's next run compares its step time with this one's.
        proc.send_signal(signal.SIGINT)
        self.assertEqual(proc.wait(timeout=60), 130, job.summary())
        last_step_seconds = [r for r in job.records("advice") if r.get("step_seconds")][-1]["step_seconds"]
        start = len(job.records("advice"))
        proc = self.start_run(job, "a100_waiting_for_input", ["--workers", "0"])
        self.addCleanup(self.stop, proc)
        second = self.wait_for_advice(job, proc, lambda r: r.get("step_seconds"),
                                      "an advice record with a step time in the second run", start)
        self.assertEqual(second["last_run_step_seconds"], last_step_seconds, second)
        # Counted from the second run's own steps (a fresh start: below the first run's newest
        # step, whose wait would otherwise count as step time, ~30x too slow).
        self.assertLess(second["step_seconds"], 10 * last_step_seconds, second)
        status = job.status()
        self.assertEqual(status["advice"]["last_run_step_seconds"], last_step_seconds, status["advice"])
        self.assertIn("(last run ", job.gpuhost("status", job.name).stdout)

    def test_the_verdict_goes_when_the_gpu_stops_waiting(self):
        # The fake NVML's timeline: the GPU waits (12 % busy) until 100 s on the fake clock, then
        # computes (98 %); the test moves the clock once the first verdict is journalled.
        job = Job(self, "advice-fixed")
        clock = os.path.join(job.dir, "nvml-clock")
        with open(clock, "w") as f:
            f.write("0")
        env = dict(scenario_env("a100_input_fixed_at_100s"), GPUHOST_FAKE_NVML_CLOCK=clock)
        proc = job.start(["--advise", "2"], [TORCH_PYTHON, INPUT_TRAINER, "--workers", "0"], env=env)
        self.addCleanup(self.stop, proc)
        self.wait_for_advice(job, proc, lambda r: [f["id"] for f in r["findings"]] == ["input_bound"],
                             "an input_bound advice record")
        start = len(job.records("advice"))
        with open(clock, "w") as f:
            f.write("150")
        # The window that straddles the change may still see a waiting GPU; the next one does not.
        self.wait_for_advice(job, proc, lambda r: r["findings"] == [], "advice without findings after the change", start)
        status = job.status()
        self.assertEqual(status["advice"]["findings"], [], status["advice"])
        events = job.gpuhost("status", job.name, "--events", "0").stdout
        self.assertIn("advice: verdict input_bound (GPU 0)", events)
        self.assertIn("advice: no finding", events)

    def test_a_compute_bound_trainer_with_a_busy_gpu_gets_advice_without_findings(self):
        job = Job(self, "advice-compute")
        proc = self.start_run(job, "a100_busy_training", ["--compute"])
        self.addCleanup(self.stop, proc)
        advice = self.wait_for_advice(job, proc, lambda r: r.get("step_seconds"), "an advice record with a step time")
        self.assertEqual([r["findings"] for r in job.records("advice")], [[]] * len(job.records("advice")), job.summary())
        self.assertEqual(advice["gpus_seen"], 1)
        self.assertIn("no finding: nothing seen holds the job back", job.gpuhost("status", job.name).stdout)

    def test_the_trainers_own_mfu_figure_is_journalled_and_shown(self):
        # nanoGPT prints its own MFU estimate (6N + 12·L·H·Q·T FLOPs per token against its GPU's
        # peak): gpuhost reports it as the trainer's figure, in the advice record, status and /metrics.
        job = Job(self, "advice-mfu")
        proc = job.start(["--advise", "2"], [TORCH_PYTHON, INPUT_TRAINER, "--compute", "--mfu", "41.5"],
                         env=scenario_env("a100_busy_training"))
        self.addCleanup(self.stop, proc)
        advice = self.wait_for_advice(job, proc, lambda r: "mfu_percent" in r, "an advice record with the MFU")
        self.assertEqual(advice["mfu_percent"], 41.5, advice)
        self.assertEqual(job.status()["advice"]["mfu_percent"], 41.5)
        self.assertIn("MFU        41.5 % (the trainer's own figure)", job.gpuhost("status", job.name).stdout)
        self.assertIn("; MFU 41.5 %", job.gpuhost("status", job.name, "--events", "0").stdout)

    def test_mfu_is_computed_from_the_models_flops_when_the_trainer_prints_none(self):
        # Llama 3 8B at T=8192: 6N + 12·L·H·Q·T = 57.914 GFLOPs per token (plan/flops_test.cc);
        # 2000 tokens/s from the trainer's own throughput line on one A100 (312 TFLOPS dense
        # bf16, data/gpus.json) is 57.914e9 x 2000 / 312e12 = 37.12 %.
        job = Job(self, "advice-mfu-computed")
        proc = job.start(["--advise", "2", "--model", "llama-3-8b", "--seq", "8192"],
                         [TORCH_PYTHON, INPUT_TRAINER, "--compute", "--tokens-per-sec", "2000"],
                         env=scenario_env("a100_busy_training"))
        self.addCleanup(self.stop, proc)
        advice = self.wait_for_advice(job, proc, lambda r: "mfu_percent" in r, "an advice record with a computed MFU")
        self.assertEqual(advice["mfu_percent"], 37.12, advice)
        self.assertIn("6N + 12·L·H·Q·T = 57.91 GFLOPs per token for llama-3-8b at T=8192", advice["mfu_basis"])
        self.assertIn("peak 1 x NVIDIA A100 SXM4 80GB dense bf16 312 TFLOPS", advice["mfu_basis"])
        self.assertIn("2000 tokens/s as the trainer prints it", advice["mfu_basis"])
        self.assertIn("MFU        37.1 % (6N + 12·L·H·Q·T", job.gpuhost("status", job.name).stdout)

    def test_mfu_from_tokens_per_step_follows_the_measured_step_time(self):
        job = Job(self, "advice-mfu-steps")
        proc = job.start(["--advise", "2", "--model", "llama-3-8b", "--seq", "8192", "--tokens-per-step", "16384",
                          "--dtype", "tf32"],
                         [TORCH_PYTHON, INPUT_TRAINER, "--compute"], env=scenario_env("a100_busy_training"))
        self.addCleanup(self.stop, proc)
        advice = self.wait_for_advice(job, proc, lambda r: "mfu_percent" in r and r.get("step_seconds"),
                                      "an advice record with a step time and a computed MFU")
        # The same record's step time: 16384 tokens per step at 156 TFLOPS dense TF32.
        expected = 57914449920 * 16384 / advice["step_seconds"] / 156e12 * 100
        self.assertAlmostEqual(advice["mfu_percent"], expected, delta=0.01 + expected * 0.001)
        self.assertIn("tokens per step", advice["mfu_basis"])
        self.assertIn("dense tf32 156 TFLOPS", advice["mfu_basis"])

    def test_advise_off_journals_no_advice(self):
        job = Job(self, "advice-off")
        finished = job.run(["--advise", "off"], [TORCH_PYTHON, INPUT_TRAINER, "--steps", "40"],
                           env=scenario_env("a100_waiting_for_input"))
        self.assertEqual(finished.returncode, 0, finished.stderr)
        self.assertEqual(job.records("advice"), [])

    def stop_server(self, server):
        server.terminate()
        server.wait(timeout=60)
        server.stdout.close()
        server.stderr.close()


class Refusals(AdviseTestCase):
    """Linux and the Windows build (gpuhost.exe under Wine)."""

    def test_bad_flags_and_jobs_that_do_not_run_are_refused(self):
        job = Job(self, "advise-refusals")
        jobs_dir = ["--jobs-dir", host_path(os.path.join(job.home, "jobs"))]
        for args, code, text in ((["--seconds", "0"], 2, "--seconds expects 1..600"),
                                 (["--processes", "x"], 2, "--processes expects a count"),
                                 ([], 2, "no job 'advise-refusals'")):
            proc = gpuhost(["advise", job.name] + args + jobs_dir)
            self.assertEqual(proc.returncode, code, proc.stderr)
            self.assertIn(text, proc.stderr)
        self.assertEqual(gpuhost(["advise"] + jobs_dir).returncode, 2)
        for value, text in (("0", "--advise expects at least 1 s, or off, got '0'"),
                            ("soon", "--advise")):
            proc = gpuhost(["run", "--name", "advise-flag", "--advise", value, "--"] + ["true"], env=job.env())
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertIn(text, proc.stderr)
            self.assertFalse(os.path.exists(os.path.join(job.home, "jobs", "advise-flag")), "a refused run made its job")
        for flags, text in (
                (["--model", "llama-3-8bb", "--seq", "2048"], "did you mean"),
                (["--model", "resnet-50", "--seq", "2048"], "a vision or diffusion preset"),
                (["--model", "llama-3-8b"], "--model needs --seq T"),
                (["--model", "llama-3-8b", "--seq", "2048", "--dtype", "fp8"], "--dtype expects bf16, fp16, tf32 or fp32"),
                (["--seq", "2048"], "describe --model NAME: give it too"),
                (["--model", "llama-3-8b", "--seq", "2048", "--tokens-per-step", "0"], "--tokens-per-step expects")):
            proc = gpuhost(["run", "--name", "mfu-flag", "--checkpoints", host_path(os.path.join(job.dir, "ck"))] + flags +
                           ["--", "true"], env=job.env())
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertIn(text, proc.stderr)
            self.assertFalse(os.path.exists(os.path.join(job.home, "jobs", "mfu-flag")), "a refused run made its job")
        if IS_WINDOWS_BUILD:
            return  # the finished job below needs a trainer of the host's Python
        # No GPU seen (no NVML here without the fake): nothing to compute MFU against.
        proc = gpuhost(["run", "--name", "mfu-flag", "--checkpoints", os.path.join(job.dir, "ck"), "--model",
                        "llama-3-8b", "--seq", "2048", "--", "true"], env=job.env())
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("no GPU is seen", proc.stderr)
        finished = job.run([], [TORCH_PYTHON, "-c", "pass"])
        self.assertEqual(finished.returncode, 0, finished.stderr)
        proc = gpuhost(["advise", job.name] + jobs_dir)
        self.assertEqual(proc.returncode, 3, proc.stderr)
        self.assertIn("is not running (finished)", proc.stderr)


if __name__ == "__main__":
    unittest.main()
