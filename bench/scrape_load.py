#!/usr/bin/env python3
# Benchmark: what one Prometheus scrape of `gpuhost serve` costs, next to Debian's
# prometheus-node-exporter on the same machine (research/05 §1.5: an exporter should publish and
# keep small its own scrape cost). gpuhost serves eight H100s from the fake NVML
# (tests/fake_nvml/scenarios/eight_h100.json), so its figures are a lower bound of a real host,
# where each NVML call asks the driver.
#
# For each exporter, started alone on 127.0.0.1:
#   1. a sequential probe: PROBE scrapes one after another, a new connection each (Prometheus
#      opens one per scrape when the target closes it, as gpuhost does): p50/p99 latency, and CPU
#      seconds per scrape from /proc/PID/stat (utime + stime) before and after / scrapes;
#   2. a concurrent load: wrk with CONNECTIONS connections for SECONDS: requests per second,
#      wrk's p50/p99 latency, CPU seconds per scrape the same way, errors;
#   then RSS (VmRSS) and peak RSS (VmHWM) from /proc/PID/status.
# Prints a table with the ratio gpuhost / node-exporter. No pass/fail: figures for the report.
#
# Usage: bench/scrape_load.py [BUILD_DIR] [--seconds 20] [--connections 4] [--probe 300]
#   BUILD_DIR (default build/linux) holds gpuhost and fake_nvml/libnvidia-ml.so.1.
# Needs /usr/bin/wrk and /usr/bin/prometheus-node-exporter (scripts/install-deps.sh).
import argparse
import http.client
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

from run_journal import REPO, fresh_dir, host_conditions

TICKS = os.sysconf("SC_CLK_TCK")


def parse_args():
    p = argparse.ArgumentParser(description="Scrape cost of gpuhost serve next to prometheus-node-exporter.")
    p.add_argument("build", nargs="?", default=os.path.join(REPO, "build", "linux"))
    p.add_argument("--seconds", type=int, default=20, help="wrk duration (default 20)")
    p.add_argument("--connections", type=int, default=4, help="wrk connections (default 4)")
    p.add_argument("--threads", type=int, default=2, help="wrk threads (default 2)")
    p.add_argument("--probe", type=int, default=300, help="sequential scrapes (default 300)")
    p.add_argument("--node-exporter", default=shutil.which("prometheus-node-exporter") or
                   "/usr/bin/prometheus-node-exporter")
    return p.parse_args()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime: fields 14 and 15 of stat


def memory(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = int(line.split()[1]) * 1024
    return out


def scrape(port):
    """One GET /metrics on a new connection; returns (seconds, body bytes)."""
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError("GET /metrics: HTTP %d" % response.status)
    finally:
        conn.close()
    return time.perf_counter() - started, len(body)


def wait_ready(proc, port, what):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit("%s exited (%d) before serving" % (what, proc.returncode))
        try:
            scrape(port)
            return
        except OSError:
            time.sleep(0.1)
    sys.exit("%s did not answer on port %d within 30 s" % (what, port))


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


WRK_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}


def wrk_seconds(text):
    m = re.match(r"([\d.]+)(us|ms|s|m)$", text)
    return float(m.group(1)) * WRK_UNITS[m.group(2)]


def run_wrk(port, args):
    out = subprocess.run(["wrk", "-t%d" % args.threads, "-c%d" % args.connections, "-d%ds" % args.seconds,
                          "--latency", "http://127.0.0.1:%d/metrics" % port],
                         capture_output=True, text=True, timeout=args.seconds + 60).stdout
    result = {"requests": int(re.search(r"(\d+) requests in", out).group(1)),
              "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
              "p50": wrk_seconds(re.search(r"^\s+50%\s+(\S+)", out, re.MULTILINE).group(1)),
              "p99": wrk_seconds(re.search(r"^\s+99%\s+(\S+)", out, re.MULTILINE).group(1)),
              "errors": 0}
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if errors:
        result["errors"] += sum(int(g) for g in errors.groups())
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if non2xx:
        result["errors"] += int(non2xx.group(1))
    return result


def measure(name, command, port, args, log_path, env=None):
    # Output to a file: node-exporter logs each failing collector on every scrape, and a pipe
    # nobody reads would fill and stall it.
    with open(log_path, "w") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        wait_ready(proc, port, name)
        for _ in range(10):  # warm-up: NVML opened, caches filled
            scrape(port)
        cpu0 = cpu_seconds(proc.pid)
        latencies = []
        size = 0
        probe_errors = []
        for _ in range(args.probe):
            try:
                seconds, size = scrape(port)
                latencies.append(seconds)
            except (OSError, RuntimeError) as e:  # counted and shown: a failed scrape is a finding
                probe_errors.append("%s: %s" % (type(e).__name__, e))
        cpu1 = cpu_seconds(proc.pid)
        load = run_wrk(port, args)
        cpu2 = cpu_seconds(proc.pid)
        mem = memory(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return {"name": name, "body_bytes": size,
            "probe_p50": statistics.median(latencies), "probe_p99": percentile(latencies, 99),
            "probe_cpu": (cpu1 - cpu0) / args.probe, "probe_errors": len(probe_errors),
            "probe_error_text": sorted(set(probe_errors)),
            "load_rps": load["rps"], "load_p50": load["p50"], "load_p99": load["p99"],
            "load_cpu": (cpu2 - cpu1) / max(load["requests"], 1), "load_requests": load["requests"],
            "load_errors": load["errors"], "rss": mem.get("VmRSS", 0), "hwm": mem.get("VmHWM", 0)}


def main():
    args = parse_args()
    build = os.path.abspath(args.build)
    gpuhost = os.path.join(build, "gpuhost")
    scenario = os.path.join(REPO, "tests", "fake_nvml", "scenarios", "eight_h100.json")
    fake_nvml = os.path.join(build, "fake_nvml", "libnvidia-ml.so.1")
    for path, hint in ((gpuhost, "cmake --build --preset linux --target gpuhost fake_nvml"),
                       (fake_nvml, "cmake --build --preset linux --target fake_nvml"),
                       (scenario, "the fake NVML's eight-GPU scenario"),
                       (args.node_exporter, "scripts/install-deps.sh (Debian prometheus-node-exporter)"),
                       (shutil.which("wrk") or "/usr/bin/wrk", "scripts/install-deps.sh (Debian wrk)")):
        if not os.path.exists(path):
            sys.exit("missing %s: %s" % (path, hint))
    work = fresh_dir("scrape_load")
    os.makedirs(os.path.join(work, "jobs"))

    port = free_port()
    env = dict(os.environ, GPUHOST_NVML_LIBRARY=fake_nvml, GPUHOST_FAKE_NVML_SCENARIO=scenario, NO_COLOR="1")
    command = [gpuhost, "serve", "--port", str(port)]
    # No jobs: the figures are the GPU part (older builds have no --jobs-dir and read no jobs).
    if "--jobs-dir" in subprocess.run([gpuhost, "serve", "--help"], capture_output=True, text=True).stdout:
        command += ["--jobs-dir", os.path.join(work, "jobs")]
    ours = measure("gpuhost", command, port, args, os.path.join(work, "gpuhost.log"), env)
    port = free_port()
    theirs = measure("node-exporter", [args.node_exporter, "--web.listen-address=127.0.0.1:%d" % port],
                     port, args, os.path.join(work, "node-exporter.log"))

    print(host_conditions())
    print("gpuhost: %s, fake NVML scenario %s; wrk %d connections x %d s; probe %d sequential scrapes"
          % (gpuhost, os.path.relpath(scenario, REPO), args.connections, args.seconds, args.probe))
    rows = [
        ("body per scrape", "body_bytes", lambda v: "%.1f KiB" % (v / 1024)),
        ("probe p50 latency", "probe_p50", lambda v: "%.2f ms" % (v * 1e3)),
        ("probe p99 latency", "probe_p99", lambda v: "%.2f ms" % (v * 1e3)),
        ("probe CPU per scrape", "probe_cpu", lambda v: "%.3f ms" % (v * 1e3)),
        ("load requests/s", "load_rps", lambda v: "%.0f" % v),
        ("load p50 latency", "load_p50", lambda v: "%.2f ms" % (v * 1e3)),
        ("load p99 latency", "load_p99", lambda v: "%.2f ms" % (v * 1e3)),
        ("load CPU per scrape", "load_cpu", lambda v: "%.3f ms" % (v * 1e3)),
        ("probe errors", "probe_errors", lambda v: "%d" % v),
        ("load errors", "load_errors", lambda v: "%d" % v),
        ("RSS after load", "rss", lambda v: "%.1f MiB" % (v / 2**20)),
        ("peak RSS", "hwm", lambda v: "%.1f MiB" % (v / 2**20)),
    ]
    print("| %-22s | %14s | %14s | %16s |" % ("", "gpuhost", "node-exporter", "gpuhost / n-e"))
    print("|%s|%s|%s|%s|" % ("-" * 24, "-" * 16, "-" * 16, "-" * 18))
    for label, key, fmt in rows:
        ratio = "%.2f" % (ours[key] / theirs[key]) if theirs[key] else "-"
        print("| %-22s | %14s | %14s | %16s |" % (label, fmt(ours[key]), fmt(theirs[key]), ratio))
    for result in (ours, theirs):
        for text in result["probe_error_text"]:
            print("%s probe error: %s" % (result["name"], text))


if __name__ == "__main__":
    main()
