"""`gpuhost serve`: Prometheus /metrics backed by the fake NVML, read by a Linux client with
urllib, linted by Debian's `promtool check metrics`, and its access rules (Host header, bearer
token, loopback default). The same file runs against the Windows build under Wine (gpuhost.exe
serving to this Linux client). Standard library only, plus /usr/bin/promtool (Debian
`prometheus`, scripts/install-deps.sh)."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

from gpuhost_test import BIN, IS_WINDOWS_BUILD, WINE, have, host_path, needs, run, scenario_env, tmp_dir

# Every metric dcgm-exporter's Grafana dashboard 12239 queries: NVIDIA/dcgm-exporter
# grafana/dcgm-exporter-dashboard.json @1f7abdb ("gnetId": 12239), panel and template "expr"s.
DASHBOARD_12239_METRICS = [
    "DCGM_FI_DEV_GPU_TEMP",             # GPU Temperature, GPU Avg. Temp, $instance/$gpu variables
    "DCGM_FI_DEV_POWER_USAGE",          # GPU Power Usage, GPU Power Total
    "DCGM_FI_DEV_SM_CLOCK",             # GPU SM Clocks
    "DCGM_FI_DEV_GPU_UTIL",             # GPU Utilization
    "DCGM_FI_DEV_FB_USED",              # GPU Framebuffer Mem Used
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",  # Tensor Core Utilization (DCP; NVML GPM on Hopper+ only)
]
# DCGM profiling (DCP) fields come from NVML GPM on Hopper+ only; on this A100 host gpuhost lists
# them in gpuhost_metric_unavailable.
DCP_ONLY = {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"}

# promlint rules that dcgm-exporter's own names and labels break, and gpuhost keeps for dashboard
# compatibility, only in DCGM_* families (research/05 §1.6; rules in prometheus/client_golang
# prometheus/testutil/promlint): counters without "_total" (DCGM_FI_DEV_ECC_SBE_VOL_TOTAL ends in
# upper-case _TOTAL), the camelCase label modelName, and a type name inside the metric name
# (DCGM_FI_DEV_PCIE_REPLAY_COUNTER). Debian's promtool 2.42 has no switch to skip lint rules.
LINT_COUNTER_TOTAL = 'counter metrics should have "_total" suffix'
LINT_CAMEL_CASE_LABEL = "label names should be written in 'snake_case' not 'camelCase'"
LINT_TYPE_IN_NAME = "metric name should not include type '%s'"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')


def parse_samples(text):
    """[(name, {label: value}, value)] of a text-format body (label values without escapes)."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample line: " + line
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        out.append((m.group(1), labels, m.group(4)))
    return out


def families(text, prefix):
    """The lines of the families whose names start with `prefix` (HELP, TYPE and samples)."""
    return "".join(line + "\n" for line in text.splitlines()
                   if re.match(r"^(# (HELP|TYPE) )?" + re.escape(prefix), line))


def family_types(text):
    """{family name: type} from the TYPE lines."""
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE))


def expected_dcgm_lint(text):
    """The promlint findings dcgm-exporter's naming gives for the DCGM_* families in `text`, as
    {(family, message)}, derived from the families themselves (the rules as promlint states them)."""
    expected = set()
    samples = parse_samples(text)
    for name, kind in family_types(text).items():
        if not name.startswith("DCGM_"):
            continue
        if kind == "counter" and not name.endswith("_total"):
            expected.add((name, LINT_COUNTER_TOTAL))
        lower = name.lower()
        if kind != "untyped" and ("_%s_" % kind in lower or lower.endswith("_" + kind)):
            expected.add((name, LINT_TYPE_IN_NAME % kind))
        if any(n == name and any(re.search(r"[a-z][A-Z]", label) for label in labels) for n, labels, _ in samples):
            expected.add((name, LINT_CAMEL_CASE_LABEL))
    return expected


def promtool_findings(output):
    """{(metric, message)} of `promtool check metrics` lint output ("NAME message" per line)."""
    findings = set()
    for line in output.splitlines():
        if line.strip():
            name, _, message = line.strip().partition(" ")
            findings.add((name, message))
    return findings


class Server:
    """gpuhost serve --port 0 --json in the background; the first stdout line says the port."""

    def __init__(self, args, env=None):
        full_env = dict(os.environ)
        full_env["NO_COLOR"] = "1"
        full_env.update(env or {})
        cmd = ([WINE] if IS_WINDOWS_BUILD else []) + [BIN, "serve", "--port", "0", "--json"] + list(args)
        self.proc = subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=60)
            raise AssertionError("gpuhost serve printed nothing; stderr:\n" + self.proc.stderr.read())
        self.start = json.loads(line)
        self.port = self.start["port"]

    def get(self, path, headers=None, timeout=60):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, dict(resp.headers), resp.read().decode("utf-8")
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read().decode("utf-8")

    def stop(self):
        if self.proc.poll() is None:
            if IS_WINDOWS_BUILD:
                self.proc.kill()   # Wine does not turn SIGTERM into a console event
            else:
                self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return self.proc.returncode


class ServeA100(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server([], env=scenario_env("a100_sxm4_80gb_x8"))
        cls.status, cls.headers, cls.body = cls.server.get("/metrics")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_start_line_names_url_and_loopback_bind(self):
        self.assertEqual(self.server.start["bind"], "127.0.0.1")
        self.assertEqual(self.server.start["url"], "http://127.0.0.1:%d/metrics" % self.server.port)
        self.assertGreater(self.server.port, 0)

    def test_metrics_are_text_format_0_0_4(self):
        self.assertEqual(self.status, 200)
        self.assertEqual(self.headers["Content-Type"], "text/plain; version=0.0.4; charset=utf-8")
        self.assertTrue(self.body.endswith("\n"))

    def test_every_gpu_has_dcgm_series_with_dcgm_labels(self):
        samples = parse_samples(self.body)
        temps = [labels for name, labels, _ in samples if name == "DCGM_FI_DEV_GPU_TEMP"]
        self.assertEqual(sorted(int(l["gpu"]) for l in temps), list(range(8)))
        for labels in temps:
            for key in ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"):
                self.assertIn(key, labels)
            self.assertEqual(labels["modelName"], "NVIDIA A100-SXM4-80GB")
            self.assertEqual(labels["DCGM_FI_DRIVER_VERSION"], "535.104.05")
            self.assertTrue(labels["UUID"].startswith("GPU-"))
        power = [float(v) for name, _, v in samples if name == "DCGM_FI_DEV_POWER_USAGE"]
        self.assertEqual(len(power), 8)
        self.assertTrue(all(10 < p < 1000 for p in power), power)  # watts, not milliwatts
        self.assertIn(("gpuhost_nvml_up", {}, "1"), samples)

    def test_every_metric_of_grafana_dashboard_12239_is_present_or_explained(self):
        samples = parse_samples(self.body)
        names = {name for name, _, _ in samples}
        unavailable = {labels["metric"] for name, labels, _ in samples if name == "gpuhost_metric_unavailable"}
        for metric in DASHBOARD_12239_METRICS:
            if metric in DCP_ONLY:
                self.assertIn(metric, unavailable, metric + " neither emitted nor listed as unavailable")
            else:
                self.assertIn(metric, names)

    def test_every_family_is_dcgm_exporters_or_gpuhosts(self):
        others = [n for n in family_types(self.body) if not n.startswith(("DCGM_", "gpuhost_"))]
        self.assertEqual(others, [])

    def test_promtool_passes_the_gpuhost_families(self):
        own = families(self.body, "gpuhost_")
        self.assertIn("gpuhost_nvml_up", own)
        proc = subprocess.run([PROMTOOL, "check", "metrics"], input=own, capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, "promtool on the gpuhost_* families:\n" + proc.stdout + proc.stderr)

    def test_promtool_lint_findings_are_exactly_dcgm_exporters_names(self):
        proc = subprocess.run([PROMTOOL, "check", "metrics"], input=self.body, capture_output=True, text=True,
                              timeout=60)
        # Exit 3 is lint findings; 1 would be a text-format parse error.
        self.assertEqual(proc.returncode, 3, "promtool:\n" + proc.stdout + proc.stderr)
        found = promtool_findings(proc.stdout + proc.stderr)
        expected = expected_dcgm_lint(self.body)
        self.assertTrue(expected)  # the A100 scenario has DCGM counters and modelName labels
        listing = "\n".join("  %s %s" % f for f in sorted(found))
        self.assertEqual(found - expected, set(), "findings beyond dcgm-exporter's own names:\n" + listing)
        self.assertEqual(expected - found, set(), "expected findings promtool did not report; it reported:\n" + listing)

    def test_self_metrics_are_present(self):
        names = {name for name, _, _ in parse_samples(self.body)}
        for metric in ("gpuhost_scrape_duration_seconds", "gpuhost_process_cpu_seconds_total",
                       "gpuhost_process_peak_resident_memory_bytes"):
            self.assertIn(metric, names)

    def test_landing_page_links_metrics(self):
        status, headers, body = self.server.get("/")
        self.assertEqual(status, 200)
        self.assertIn('href="metrics"', body)
        self.assertEqual(self.server.get("/nope")[0], 404)

    def test_foreign_host_header_is_refused(self):
        status, _, body = self.server.get("/metrics", headers={"Host": "attacker.example:%d" % self.server.port})
        self.assertEqual(status, 403)
        self.assertNotIn("attacker.example", body)
        self.assertNotIn("DCGM_", body)


class ServeMig(unittest.TestCase):
    """A GPU in MIG mode (mig-parted's all-balanced layout on an A100 80GB): one row per MIG
    device with dcgm-exporter's GPU_I_PROFILE / GPU_I_ID labels, the slices' UUIDs, and no
    utilisation, which NVML does not give in MIG mode."""

    def test_mig_devices_get_instance_labels_and_utilisation_is_listed_unavailable(self):
        server = Server([], env=scenario_env("a100_80gb_mig_all_balanced"))
        self.addCleanup(server.stop)
        status, _, body = server.get("/metrics")
        self.assertEqual(status, 200)
        samples = parse_samples(body)
        info = [labels for name, labels, _ in samples if name == "gpuhost_gpu_mig_device_info"]
        self.assertEqual(sorted((l["GPU_I_PROFILE"], l["GPU_I_ID"]) for l in info),
                         [("1g.10gb", "10"), ("1g.10gb", "9"), ("2g.20gb", "3"), ("3g.40gb", "2")])
        self.assertIn("MIG-6e2fa3b1-5c0d-5b7e-9f41-0a8d2e61c3a7", {l["mig_uuid"] for l in info})
        self.assertEqual({l["gpu"] for l in info}, {"0"})
        used = {labels.get("GPU_I_PROFILE", "") + "/" + labels.get("GPU_I_ID", ""): float(value)
                for name, labels, value in samples if name == "DCGM_FI_DEV_FB_USED"}
        self.assertEqual(used["3g.40gb/2"], 31000)
        self.assertEqual(len(used), 5)  # the GPU's own row and one per MIG device
        self.assertNotIn("DCGM_FI_DEV_GPU_UTIL", {name for name, _, _ in samples})
        unavailable = {labels["metric"]: labels["reason"] for name, labels, _ in samples
                       if name == "gpuhost_metric_unavailable"}
        self.assertIn("MIG", unavailable["DCGM_FI_DEV_GPU_UTIL"])
        own = families(body, "gpuhost_")
        proc = subprocess.run([PROMTOOL, "check", "metrics"], input=own, capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, "promtool on the gpuhost_* families:\n" + proc.stdout + proc.stderr)

    def test_hopper_gpu_instances_get_their_own_profiling_rows(self):
        """An H100 in MIG mode: each GPU instance's GPM (sampled on its parent GPU) as dcgm-exporter's
        profiling fields with GPU_I_PROFILE / GPU_I_ID, once per GPU instance even where two compute
        instances share one."""
        server = Server([], env=scenario_env("h100_mig_instances_busy"))
        self.addCleanup(server.stop)
        deadline = time.monotonic() + 60  # GPM needs two collections
        while True:
            status, _, body = server.get("/metrics")
            self.assertEqual(status, 200)
            samples = parse_samples(body)
            tensor = {labels.get("GPU_I_PROFILE", "") + "/" + labels.get("GPU_I_ID", ""): float(value)
                      for name, labels, value in samples if name == "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"}
            if tensor or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        self.assertEqual(tensor, {"/": 0.3, "3g.40gb/1": 0.555, "1c.2g.20gb/5": 0.12, "1g.10gb/9": 0.0}, body)
        used = [labels for name, labels, _ in samples if name == "DCGM_FI_DEV_FB_USED" and labels.get("GPU_I_ID") == "5"]
        self.assertEqual(len(used), 1)
        tx = [labels for name, labels, _ in samples if name == "DCGM_FI_PROF_PCIE_TX_BYTES"]
        self.assertEqual([l.get("GPU_I_ID") for l in tx], [None])  # no PCIe GPM per instance in this scenario


class ServeAccess(unittest.TestCase):
    def test_bind_takes_host_and_port_as_node_exporter_does(self):
        server = Server(["--bind", "127.0.0.1:0"], env=scenario_env("a100_sxm4_80gb_x8"))
        try:
            self.assertEqual(server.start["bind"], "127.0.0.1")
            self.assertGreater(server.port, 0)
            self.assertEqual(server.get("/metrics")[0], 200)
        finally:
            server.stop()
        proc = run(["serve", "--bind", "127.0.0.1:9000", "--port", "9001"], env=scenario_env("a100_sxm4_80gb_x8"),
                   timeout=60)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("give the port once", proc.stderr)

    def test_a_busy_port_says_how_to_pick_another(self):
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", 0))
            holder.listen(1)
            port = holder.getsockname()[1]
            proc = run(["serve", "--port", str(port)], env=scenario_env("a100_sxm4_80gb_x8"), timeout=60)
        self.assertEqual(proc.returncode, 3, proc.stderr)
        self.assertIn("--port 0", proc.stderr)

    def test_non_loopback_bind_without_token_exits_2(self):
        proc = run(["serve", "--bind", "0.0.0.0", "--port", "0"], env=scenario_env("a100_sxm4_80gb_x8"), timeout=60)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("without authentication", proc.stderr)
        self.assertIn("--token-file", proc.stderr)

    def test_token_is_required_and_never_echoed(self):
        token_file = os.path.join(tmp_dir("serve"), "token")
        with open(token_file, "w") as f:
            f.write("tok-123456789\n")
        server = Server(["--token-file", host_path(token_file)], env=scenario_env("a100_sxm4_80gb_x8"))
        try:
            status, headers, body = server.get("/metrics")
            self.assertEqual(status, 401)
            self.assertIn("Bearer", headers.get("WWW-Authenticate", ""))
            status, _, body = server.get("/metrics", headers={"Authorization": "Bearer wrong"})
            self.assertEqual(status, 401)
            status, _, body = server.get("/metrics", headers={"Authorization": "Bearer tok-123456789"})
            self.assertEqual(status, 200)
            self.assertIn("DCGM_FI_DEV_GPU_UTIL", body)
            self.assertNotIn("tok-123456789", body)
        finally:
            server.stop()
        self.assertNotIn("tok-123456789", json.dumps(server.start))

    def test_nvml_without_driver_gives_up_zero_not_a_failed_scrape(self):
        server = Server([], env=scenario_env("no_driver"))
        try:
            status, _, body = server.get("/metrics")
        finally:
            server.stop()
        self.assertEqual(status, 200)
        up = [(labels, v) for name, labels, v in parse_samples(body) if name == "gpuhost_nvml_up"]
        self.assertEqual(len(up), 1)
        self.assertEqual(up[0][1], "0")
        self.assertIn("error", up[0][0])
        self.assertNotIn("DCGM_FI_DEV_GPU_TEMP{", body)

    @unittest.skipIf(IS_WINDOWS_BUILD, "Wine does not turn SIGTERM into a console event")
    def test_sigterm_stops_cleanly(self):
        server = Server([], env=scenario_env("a100_sxm4_80gb_x8"))
        self.assertEqual(server.get("/metrics")[0], 200)
        self.assertEqual(server.stop(), 0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs(have("prometheus"), "Debian's prometheus")
class RealPrometheusScrapes(unittest.TestCase):
    """A real Prometheus server (Debian's) scrapes gpuhost serve (fake NVML, eight A100s) with the
    job from deploy/prometheus.yml pointed at the test's port; its HTTP API must then report the
    target up and return a DCGM_FI_DEV_GPU_UTIL series per GPU with dcgm-exporter's labels."""

    def setUp(self):
        self.server = Server([], env=scenario_env("a100_sxm4_80gb_x8"))
        self.addCleanup(self.server.stop)
        directory = tmp_dir("serve-prometheus")
        shutil.rmtree(os.path.join(directory, "data"), ignore_errors=True)
        deploy = os.path.join(os.path.dirname(__file__), "..", "..", "deploy", "prometheus.yml")
        with open(deploy) as f:
            config = f.read()
        self.assertIn('"127.0.0.1:9808"', config)
        config = config.replace("scrape_interval: 15s", "scrape_interval: 1s")
        config = config.replace('"127.0.0.1:9808"', '"127.0.0.1:%d"' % self.server.port)
        config_path = os.path.join(directory, "prometheus.yml")
        with open(config_path, "w") as f:
            f.write(config)
        self.api_port = free_port()
        self.log = open(os.path.join(directory, "prometheus.log"), "w")
        self.addCleanup(self.log.close)
        self.prometheus = subprocess.Popen(
            ["prometheus", "--config.file=" + config_path, "--storage.tsdb.path=" + os.path.join(directory, "data"),
             "--web.listen-address=127.0.0.1:%d" % self.api_port], stdout=self.log, stderr=subprocess.STDOUT)
        self.addCleanup(self.stop_prometheus)

    def stop_prometheus(self):
        self.prometheus.terminate()
        try:
            self.prometheus.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.prometheus.kill()
            self.prometheus.wait()

    def api(self, path):
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.api_port, path), timeout=10) as resp:
            return json.loads(resp.read().decode("utf-8"))

    def wait_for(self, what, fetch, deadline_s=90):
        deadline = time.monotonic() + deadline_s
        last = None
        while time.monotonic() < deadline:
            if self.prometheus.poll() is not None:
                self.fail("prometheus exited (%d); see its log in %s" % (self.prometheus.returncode, self.log.name))
            try:
                last = fetch()
                if last:
                    return last
            except (urllib.error.URLError, ConnectionError, json.JSONDecodeError) as e:
                last = e
            time.sleep(0.5)
        self.fail("%s: not seen within %d s (last: %r)" % (what, deadline_s, last))

    def test_target_up_and_gpu_util_queryable(self):
        def target_up():
            targets = self.api("/api/v1/targets")["data"]["activeTargets"]
            ours = [t for t in targets if t["labels"].get("job") == "gpuhost"]
            return ours if ours and ours[0]["health"] == "up" else None
        target = self.wait_for("gpuhost target up", target_up)[0]
        self.assertEqual(target["lastError"], "")

        def util_series():
            result = self.api("/api/v1/query?query=DCGM_FI_DEV_GPU_UTIL")["data"]["result"]
            return result if len(result) == 8 else None
        series = self.wait_for("eight DCGM_FI_DEV_GPU_UTIL series", util_series)
        self.assertEqual(sorted(int(s["metric"]["gpu"]) for s in series), list(range(8)))
        for s in series:
            self.assertIn("A100", s["metric"]["modelName"])
            self.assertTrue(s["metric"]["UUID"].startswith("GPU-"))
            self.assertGreaterEqual(float(s["value"][1]), 0.0)
        up = self.api("/api/v1/query?query=up%7Bjob%3D%22gpuhost%22%7D")["data"]["result"]
        self.assertEqual([u["value"][1] for u in up], ["1"])


DASHBOARD = os.path.join(os.path.dirname(__file__), "..", "..", "deploy", "grafana-gpuhost-training.json")
STDLIB_TRAINER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trainers", "stdlib_trainer.py")
# Grafana's variables, replaced by values that keep each query valid PromQL.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__range": "1h", "$job": ".*", "$instance": ".*", "$metric": ".*"}


def dashboard_panels(dashboard):
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def dashboard_queries(dashboard):
    return [t["expr"] for p in dashboard_panels(dashboard) for t in p.get("targets", [])]


@unittest.skipIf(IS_WINDOWS_BUILD, "checks a deploy file and a Linux job; once is enough")
class GrafanaTrainingDashboard(unittest.TestCase):
    """deploy/grafana-gpuhost-training.json: Grafana dashboard JSON whose every query is valid
    PromQL (promtool parses it as a recording rule) and names only gpuhost_* metrics that
    `gpuhost serve` does emit for a job supervised by the real `gpuhost run`."""

    @classmethod
    def setUpClass(cls):
        with open(DASHBOARD) as f:
            cls.dashboard = json.load(f)

    def test_is_a_dashboard_on_a_prometheus_datasource_variable(self):
        d = self.dashboard
        self.assertGreaterEqual(d["schemaVersion"], 36)
        variables = {v["name"]: v for v in d["templating"]["list"]}
        self.assertEqual((variables["DS_PROMETHEUS"]["type"], variables["DS_PROMETHEUS"]["query"]),
                         ("datasource", "prometheus"))
        self.assertIn("job_name", variables["job"]["definition"])
        panels = list(dashboard_panels(d))
        self.assertEqual(len({p["id"] for p in panels}), len(panels), "panel ids must be unique")
        for p in panels:
            self.assertLessEqual(p["gridPos"]["x"] + p["gridPos"]["w"], 24, p["title"])
            if p["type"] == "row":
                continue
            self.assertEqual(p["datasource"]["uid"], "${DS_PROMETHEUS}", p["title"])
            for t in p["targets"]:
                self.assertEqual(t["datasource"]["uid"], "${DS_PROMETHEUS}", p["title"])

    def test_every_query_is_valid_promql(self):
        rules = "groups:\n- name: dashboard\n  rules:\n"
        for i, expr in enumerate(dashboard_queries(self.dashboard)):
            for name, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(name, value)
            rules += "  - record: dashboard:query%d\n    expr: %s\n" % (i, json.dumps(expr))
        path = os.path.join(tmp_dir("serve-dashboard"), "queries.yml")
        with open(path, "w") as f:
            f.write(rules)
        proc = subprocess.run([PROMTOOL, "check", "rules", path], capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)

    def test_queries_name_metrics_serve_emits_for_a_real_job(self):
        used = set()
        for expr in dashboard_queries(self.dashboard):
            used.update(re.findall(r"\bgpuhost_[a-z0-9_]+", expr))
        self.assertTrue({"gpuhost_train_metric", "gpuhost_job_checkpoint_age_seconds"} <= used)

        directory = tmp_dir("serve-dashboard")
        jobs = os.path.join(directory, "jobs")
        shutil.rmtree(jobs, ignore_errors=True)
        ck = os.path.join(directory, "ck")
        shutil.rmtree(ck, ignore_errors=True)
        log = open(os.path.join(directory, "run.log"), "w")
        self.addCleanup(log.close)
        job = subprocess.Popen(
            [BIN, "run", "--name", "dash", "--jobs-dir", jobs, "--checkpoints", ck, "--cloud", "none",
             "--settle", "0.2", "--quiet", "--", sys.executable, STDLIB_TRAINER, "--steps", "100000000",
             "--step-time", "0.05", "--every", "20", "--size", "64", "--out", ck],
            stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, NO_COLOR="1"))

        def stop_job():
            if job.poll() is None:
                job.send_signal(signal.SIGTERM)
                try:
                    job.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    job.kill()
                    job.wait()
        self.addCleanup(stop_job)
        # The trainer's scalars through the job's JSON-lines channel (the default GPUHOST_METRICS_FILE).
        channel = os.path.join(jobs, "dash", "metrics", "channel.jsonl")
        os.makedirs(os.path.dirname(channel), exist_ok=True)
        with open(channel, "a") as f:
            f.write(json.dumps({"step": 3, "loss": 0.5, "grad_norm": 1.5}) + "\n")

        server = Server(["--jobs-dir", jobs], env=scenario_env("a100_sxm4_80gb_x8"))
        self.addCleanup(server.stop)
        deadline = time.monotonic() + 90
        missing = used
        while time.monotonic() < deadline and missing:
            self.assertIsNone(job.poll(), "gpuhost run exited; see " + log.name)
            status, _, body = server.get("/metrics")
            self.assertEqual(status, 200)
            missing = used - {name for name, _, _ in parse_samples(body)}
            time.sleep(0.5)
        self.assertEqual(missing, set(), "the dashboard queries metrics gpuhost serve does not emit")


if __name__ == "__main__":
    unittest.main()
