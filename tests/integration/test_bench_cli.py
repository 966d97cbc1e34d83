"""`gpuhost bench` end to end: disk and network cross-checked against fio and iperf3 on this
machine (same filesystem, same parameters, same test run), GPU verdicts against the fake CUDA
runtime/cuBLAS paired with fake NVML scenarios, and the fault paths (full or read-only target,
unreachable peer, no CUDA, Ctrl-C). Under Wine (Windows build) the disk and memory parts run;
fio, iperf3, the fake CUDA libraries (Linux .so) and signals are Linux-only here."""
import json
import os
import statistics
import signal
import subprocess
import time
import unittest

from gpuhost_test import BIN, FAKE_NVML, IS_WINDOWS_BUILD, SCENARIOS, have, host_path, missing, needs, run, tmp_dir

FAKE_CUDART = os.environ.get("GPUHOST_FAKE_CUDART", "")
FAKE_CUBLAS = os.environ.get("GPUHOST_FAKE_CUBLAS", "")
CUDA_SCENARIOS = os.environ.get("GPUHOST_FAKE_CUDA_SCENARIOS", "")
TOLERANCE = 0.15
# Batches of five rounds each cross-check may take before a metric off by more than TOLERANCE
# in every one of them counts as gpuhost's bias.
BATCHES = 3
# Sequential read re-reads a 256 MiB file that the hypervisor caches: on this VM fio alone ranged
# from 1.1 to 2.4 GB/s between runs, so that ratio is printed, not asserted (see the issue note).
ASSERTED_DISK = ("disk.seq_write_mbps", "disk.randread_iops", "disk.randwrite_iops")


def bench_json(args, env=None, timeout=180):
    proc = run(["bench"] + list(args) + ["--json"], env=env, timeout=timeout)
    try:
        return proc, json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError("bench --json printed no JSON (exit %d). stderr:\n%s\nstdout:\n%s"
                             % (proc.returncode, proc.stderr, proc.stdout[:2000]))


def measurement(report, mid, subject=None):
    for m in report["measurements"]:
        if m["id"] == mid and (subject is None or m["subject"].startswith(subject)):
            return m
    raise AssertionError("no measurement %s in %s" % (mid, [m["id"] for m in report["measurements"]]))


def fio(directory, name, rw, bs, jobs, seconds, size_mib, region_mib=None):
    """One fio run with gpuhost's parameters: psync engine, one request in flight per thread."""
    args = ["fio", "--name=" + name, "--filename=" + os.path.join(directory, "fio-crosscheck.tmp"),
            "--rw=" + rw, "--bs=" + bs, "--direct=1", "--ioengine=psync", "--thread",
            "--numjobs=%d" % jobs, "--group_reporting=1", "--output-format=json",
            "--filesize=%dM" % size_mib, "--randrepeat=0", "--norandommap"]
    if region_mib:
        args += ["--size=%dM" % region_mib, "--offset_increment=%dM" % region_mib]
    if seconds:
        args += ["--time_based", "--runtime=%gs" % seconds]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120, check=True).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]
    return job["write" if "write" in rw else "read"]


# The fio / iperf3 cross-checks run as their own CTest entry, bench_crosscheck (label crosscheck),
# which scripts/test.sh runs alone: they compare two measurements of shared, noisy hardware, so
# each metric gets up to BATCHES batches of rounds (see the tests). GPUHOST_CROSSCHECK=1 turns them on.
CROSSCHECK = os.environ.get("GPUHOST_CROSSCHECK") == "1"


@unittest.skipUnless(CROSSCHECK, "run by the bench_crosscheck test (GPUHOST_CROSSCHECK=1)")
@unittest.skipIf(IS_WINDOWS_BUILD, "fio runs on Linux only here")
@needs(have("fio"), "fio")
class DiskMatchesFio(unittest.TestCase):
    def test_iops_and_throughput_within_15_percent_of_fio(self):
        directory = tmp_dir("bench-fio")
        # 1 GiB: the sequential write is size-based in both tools, and at ~2 GB/s a smaller file is
        # written in a tenth of a second, too short to measure steadily.
        size, seconds, threads, seq_threads = 1024, 1.5, 16, 4
        region = size // seq_threads
        # A shared VM disk swings by 10-25% between runs for both tools. The tools therefore run
        # back to back in each of five rounds, and the check is on the median of the per-round
        # ratios: a drift hits both sides of a round, and one noisy round cannot decide it.
        # A metric passes once a batch of five rounds puts it within tolerance; one that misses in
        # all BATCHES batches is a bias of gpuhost's measurement, not the VM's noise (which moves
        # from metric to metric between batches: seen here, randwrite 1.24, then seq_write 1.21).
        passed = {}
        for batch in range(BATCHES):
            per_round = {}
            for attempt in range(5):
                _, report = bench_json(["disk", "--path", directory, "--disk-size-mib", str(size),
                                        "--disk-seconds", str(seconds), "--disk-threads", str(threads)])
                ours = {m["id"]: m["value"] for m in report["measurements"]}
                theirs = {
                    "disk.seq_write_mbps": fio(directory, "w", "write", "1M", seq_threads, 0, size, region)["bw_bytes"] / 1e6,
                    "disk.seq_read_mbps": fio(directory, "r", "read", "1M", seq_threads, seconds, size, region)["bw_bytes"] / 1e6,
                    "disk.randread_iops": fio(directory, "rr", "randread", "4k", threads, seconds, size)["iops"],
                    "disk.randwrite_iops": fio(directory, "rw", "randwrite", "4k", threads, seconds, size)["iops"],
                }
                os.remove(os.path.join(directory, "fio-crosscheck.tmp"))
                for k in theirs:
                    per_round.setdefault(k, []).append(ours[k] / theirs[k])
                print("batch %d round %d gpuhost vs fio:" % (batch + 1, attempt + 1),
                      {k: "%.0f vs %.0f (%.2f)" % (ours[k], theirs[k], ours[k] / theirs[k]) for k in theirs})
            medians = {k: statistics.median(v) for k, v in per_round.items()}
            print("batch %d median gpuhost/fio:" % (batch + 1), {k: round(v, 2) for k, v in medians.items()})
            for key in ASSERTED_DISK:
                if abs(medians[key] - 1) <= TOLERANCE:
                    passed[key] = medians[key]
            if all(key in passed for key in ASSERTED_DISK):
                break
        for key in ASSERTED_DISK:
            self.assertIn(key, passed, "%s: median gpuhost/fio = %.2f, off by more than %d%% in %d batches"
                          % (key, medians[key], TOLERANCE * 100, BATCHES))
        self.assertEqual([f for f in os.listdir(directory) if f.startswith("gpuhost-bench-")], [])


@unittest.skipUnless(CROSSCHECK, "run by the bench_crosscheck test (GPUHOST_CROSSCHECK=1)")
@unittest.skipIf(IS_WINDOWS_BUILD, "iperf3 runs on Linux only here")
@needs(have("iperf3"), "iperf3")
class NetworkMatchesIperf3(unittest.TestCase):
    def iperf3(self, reverse, streams, seconds):
        server = subprocess.Popen(["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", "5298"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.3)
            # -l 1M: the same per-call length gpuhost uses (src/bench/network.cc k_chunk).
            args = ["iperf3", "-c", "127.0.0.1", "-p", "5298", "-P", str(streams), "-t", str(seconds), "-l", "1M", "-J"]
            out = subprocess.run(args + (["-R"] if reverse else []), capture_output=True, text=True, timeout=60, check=True)
            return json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"] / 1e9
        finally:
            server.wait(timeout=10)

    def test_loopback_throughput_within_15_percent_of_iperf3(self):
        # One stream each: Debian 12's iperf3 (3.12) runs all -P streams in one thread (threads per
        # stream came in 3.16, esnet/iperf release notes), so with -P 4 on loopback it measures its
        # own CPU limit, not the path; gpuhost gives each stream a thread.
        server = subprocess.Popen([BIN, "bench", "network", "--serve", "--bind", "127.0.0.1", "--port", "0"],
                                  stdout=subprocess.PIPE, text=True)
        self.addCleanup(server.stdout.close)
        try:
            line = server.stdout.readline()
            port = line.strip().rsplit(":", 1)[1].split()[0]
            # Loopback on this 2-core VM is bimodal for both tools: a round runs at full speed or
            # near half (about 20 against 35-41 Gbit/s, for iperf3 as for gpuhost, seen in runs
            # of each alone), depending on where the scheduler puts sender and receiver. Sharing
            # the machine only ever slows a round down, so each tool's best of five rounds is its
            # speed on this path, and those are compared; the per-round ratios are printed.
            passed = {}
            for batch in range(BATCHES):
                ours_rounds = {"up": [], "down": []}
                theirs_rounds = {"up": [], "down": []}
                for attempt in range(5):
                    _, report = bench_json(["network", "--peer", "127.0.0.1:" + port, "--streams", "1", "--net-seconds", "3"])
                    ours = {"up": measurement(report, "network.upload_gbits")["value"],
                            "down": measurement(report, "network.download_gbits")["value"]}
                    theirs = {"up": self.iperf3(False, 1, 3), "down": self.iperf3(True, 1, 3)}
                    for k in ours:
                        ours_rounds[k].append(ours[k])
                        theirs_rounds[k].append(theirs[k])
                    print("batch %d round %d gpuhost vs iperf3 (Gbit/s):" % (batch + 1, attempt + 1),
                          {k: "%.2f vs %.2f (%.2f)" % (ours[k], theirs[k], ours[k] / theirs[k]) for k in ours})
                best = {k: max(ours_rounds[k]) / max(theirs_rounds[k]) for k in ours_rounds}
                print("batch %d best of 5, gpuhost/iperf3:" % (batch + 1), {k: round(v, 2) for k, v in best.items()},
                      "median per-round ratio:", {k: round(statistics.median(a / b for a, b in zip(ours_rounds[k], theirs_rounds[k])), 2)
                                                  for k in ours_rounds})
                for key, ratio in best.items():
                    if abs(ratio - 1) <= TOLERANCE:
                        passed[key] = ratio
                if len(passed) == len(best):
                    break
            for key, ratio in best.items():
                self.assertIn(key, passed, "%s: best gpuhost/best iperf3 = %.2f, off by more than %d%% in %d batches"
                              % (key, ratio, TOLERANCE * 100, BATCHES))
            self.assertGreater(measurement(report, "network.rtt_us")["value"], 0)
        finally:
            server.send_signal(signal.SIGINT)
            self.assertEqual(server.wait(timeout=20), 130)


@unittest.skipIf(IS_WINDOWS_BUILD, "the fake CUDA libraries are loaded by the Linux build here")
class GpuAgainstFakeCuda(unittest.TestCase):
    def gpu(self, cuda_scenario, nvml_scenario, extra=()):
        env = {"GPUHOST_CUDART_LIBRARY": FAKE_CUDART, "GPUHOST_CUBLAS_LIBRARY": FAKE_CUBLAS,
               "GPUHOST_FAKE_CUDA_SCENARIO": os.path.join(CUDA_SCENARIOS, cuda_scenario + ".json"),
               "GPUHOST_NVML_LIBRARY": FAKE_NVML,
               "GPUHOST_FAKE_NVML_SCENARIO": os.path.join(SCENARIOS, nvml_scenario + ".json")}
        proc, report = bench_json(["gpu", "--quick"] + list(extra), env=env)
        self.assertNotIn("fake_cuda:", proc.stderr, "gpuhost misused the CUDA API")
        return proc, report

    def test_healthy_a100_node_passes_and_saves_per_gpu_tflops(self):
        save = os.path.join(tmp_dir("bench-gpu"), "bench.json")
        proc, report = self.gpu("a100_healthy", "a100_sxm4_80gb_x8", ["--save", save])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(report["summary"]["fail"], 0)
        devices = report["gpu"]["devices"]
        self.assertEqual(len(devices), 8)
        self.assertEqual(devices[0]["name"], "NVIDIA A100-SXM4-80GB")
        self.assertEqual(devices[0]["model_key"], "a100-sxm4-80gb")
        self.assertAlmostEqual(devices[0]["gemm_tflops"]["bf16"], 281, delta=0.5)
        self.assertEqual(measurement(report, "gpu.gemm_bf16_tflops", "GPU 0")["status"], "pass")
        self.assertEqual(measurement(report, "gpu.gemm_spread")["status"], "pass")
        with open(save) as f:
            self.assertEqual(json.load(f)["gpu"], report["gpu"])

    def test_downtrained_link_fails_pinned_copy_and_names_the_link(self):
        proc, report = self.gpu("pcie_downtrained", "pcie_x8_gen3")
        self.assertEqual(proc.returncode, 1)
        d2h = measurement(report, "gpu.d2h_pinned_gbps")
        self.assertEqual(d2h["status"], "fail")
        self.assertTrue(any("Gen3 x8" in n and "Gen4 x16" in n for n in d2h["notes"]), d2h["notes"])
        self.assertEqual(measurement(report, "gpu.gemm_bf16_tflops")["status"], "pass")

    def test_throttled_card_fails_gemm_and_names_the_clock_reasons(self):
        proc, report = self.gpu("throttled", "thermal_slowdown")
        self.assertEqual(proc.returncode, 1)
        bf16 = measurement(report, "gpu.gemm_bf16_tflops")
        self.assertEqual(bf16["status"], "fail")
        self.assertTrue(any("thermal_slowdown" in n for n in bf16["notes"]), bf16["notes"])
        self.assertEqual(measurement(report, "gpu.d2h_pinned_gbps")["status"], "pass")

    def test_no_cuda_runtime_is_unavailable_and_the_rest_runs(self):
        env = {"GPUHOST_CUDART_LIBRARY": "/nonexistent/libcudart.so.12"}
        proc = run(["bench", "all", "--quick", "--json", "--path", tmp_dir("bench-nocuda")], env=env, timeout=120)
        report = json.loads(proc.stdout)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(report["unavailable"][0]["part"], "gpu")
        self.assertIn("CUDA runtime", report["unavailable"][0]["reason"])
        measurement(report, "memory.triad_gbps")
        measurement(report, "disk.randread_iops")

    def test_bench_gpu_on_a_host_without_a_gpu_fails_and_says_there_is_none(self):
        # The runtime answers "insufficient driver" (35) where there is no driver because there
        # is no NVIDIA GPU; NVML cannot be loaded either (no such library), as doctor sees it.
        env = {"GPUHOST_CUDART_LIBRARY": FAKE_CUDART, "GPUHOST_CUBLAS_LIBRARY": FAKE_CUBLAS,
               "GPUHOST_FAKE_CUDA_SCENARIO": os.path.join(CUDA_SCENARIOS, "no_driver.json"),
               "GPUHOST_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"}
        proc = run(["bench", "gpu", "--quick"], env=env)
        self.assertEqual(proc.returncode, 3, proc.stdout + proc.stderr)
        self.assertIn("no NVIDIA GPU or driver on this host", proc.stderr)
        self.assertIn("gpuhost doctor", proc.stderr)
        self.assertNotIn("older than", proc.stderr)
        # bench all still measures what it can and says why the GPU is missing.
        proc, report = bench_json(["all", "--quick", "--path", tmp_dir("bench-nodriver")], env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("no NVIDIA GPU or driver", report["unavailable"][0]["reason"])

    def test_a_runtime_without_a_gpu_says_what_to_check(self):
        # Without a scenario the fake runtime answers cudaErrorNoDevice (100), as the real one does
        # on a host whose driver sees no GPU.
        env = {"GPUHOST_CUDART_LIBRARY": FAKE_CUDART, "GPUHOST_CUBLAS_LIBRARY": FAKE_CUBLAS,
               "GPUHOST_FAKE_CUDA_SCENARIO": ""}
        proc, report = bench_json(["all", "--quick", "--path", tmp_dir("bench-nogpu")], env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        reason = report["unavailable"][0]["reason"]
        self.assertIn("cudaGetDeviceCount failed", reason)
        self.assertIn("(100)", reason)
        self.assertIn("nvidia-smi", reason)
        measurement(report, "memory.triad_gbps")


class Faults(unittest.TestCase):
    def test_a_target_without_enough_space_is_refused_before_writing(self):
        directory = tmp_dir("bench-full")
        proc = run(["bench", "disk", "--path", host_path(directory), "--disk-size-mib", "900000000"])
        self.assertEqual(proc.returncode, 3, proc.stderr)
        self.assertIn("needs", proc.stderr)
        self.assertIn("available", proc.stderr)
        self.assertEqual(os.listdir(directory), [])

    @unittest.skipIf(IS_WINDOWS_BUILD, "no read-only mount reachable from Wine here")
    def test_a_read_only_filesystem_is_refused(self):
        target = tmp_dir("bench-readonly")
        if os.geteuid() != 0:
            missing("root, to mount a tmpfs")
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", target],
                                 capture_output=True, text=True)
        if mounted.returncode != 0:
            missing("a read-only tmpfs mount: " + mounted.stderr.strip())
        self.addCleanup(subprocess.run, ["umount", "-l", target], capture_output=True)
        proc = run(["bench", "disk", "--path", target])
        self.assertEqual(proc.returncode, 3, proc.stderr)
        self.assertIn("read-only", proc.stderr)

    @unittest.skipIf(IS_WINDOWS_BUILD, "Wine's loopback refusals take the timeout path; checked on Linux")
    def test_an_unreachable_peer_is_a_clear_error(self):
        proc = run(["bench", "network", "--peer", "127.0.0.1:1"])
        self.assertEqual(proc.returncode, 3, proc.stderr)
        self.assertIn("unreachable", proc.stderr)
        self.assertIn("--serve", proc.stderr)

    @unittest.skipIf(IS_WINDOWS_BUILD, "POSIX signals end the server; the Windows console handler is not reachable through Wine here")
    def test_serve_with_json_says_its_port_as_json_and_answers_a_client(self):
        server = subprocess.Popen([BIN, "bench", "network", "--serve", "--json", "--bind", "127.0.0.1", "--port", "0"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(server.stderr.close)
        self.addCleanup(server.stdout.close)
        try:
            started = json.loads(server.stdout.readline())
            self.assertEqual(started["listening"], "127.0.0.1")
            self.assertGreater(started["port"], 0)
            proc = run(["bench", "network", "--peer", "127.0.0.1:%d" % started["port"], "--streams", "1",
                        "--net-seconds", "1", "--json"])
            self.assertEqual(proc.returncode, 0, proc.stderr)
        finally:
            server.send_signal(signal.SIGINT)
            self.assertEqual(server.wait(timeout=20), 130)

    def test_unknown_part_suggests_the_closest(self):
        proc = run(["bench", "dsik"])
        self.assertEqual(proc.returncode, 2)
        self.assertIn("did you mean 'disk'", proc.stderr)

    @unittest.skipIf(IS_WINDOWS_BUILD, "POSIX signals; the Windows console handler is not reachable through Wine here")
    def test_ctrl_c_removes_the_test_file_and_prints_partial_results(self):
        directory = tmp_dir("bench-ctrlc")
        env = dict(os.environ, NO_COLOR="1")
        proc = subprocess.Popen([BIN, "bench", "disk", "--path", directory, "--disk-size-mib", "128",
                                 "--disk-seconds", "30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.time() + 20
        while time.time() < deadline and not [f for f in os.listdir(directory) if f.startswith("gpuhost-bench-")]:
            time.sleep(0.05)
        time.sleep(1.0)  # into the sequential read phase
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 130, err)
        self.assertEqual([f for f in os.listdir(directory) if f.startswith("gpuhost-bench-")], [])
        self.assertIn("interrupted", out)
        self.assertIn("sequential write", out)


class Quick(unittest.TestCase):
    def test_quick_disk_and_memory_finish_well_within_a_minute(self):
        # Also the Wine run of the Windows build: direct I/O files and threads under Wine.
        start = time.time()
        proc, report = bench_json(["disk", "--quick", "--path", host_path(tmp_dir("bench-quick"))], timeout=60)
        self.assertIn(proc.returncode, (0, 1), proc.stderr)
        self.assertGreater(measurement(report, "disk.randread_iops")["value"], 0)
        self.assertGreater(measurement(report, "disk.seq_write_mbps")["value"], 0)
        proc, report = bench_json(["memory", "--quick"], timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertGreater(measurement(report, "memory.copy_gbps")["value"], 0)
        self.assertLess(time.time() - start, 60)
        self.assertEqual([f for f in os.listdir(tmp_dir("bench-quick")) if f.startswith("gpuhost-bench-")], [])


if __name__ == "__main__":
    unittest.main()
