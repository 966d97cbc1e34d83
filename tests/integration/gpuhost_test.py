"""Shared support for the integration tests: run the built gpuhost (natively, or the Windows build
through Wine) and read its JSON output. Standard library only."""
import functools
import json
import os
import random
import shutil
import socket
import subprocess
import unittest

BIN = os.environ["GPUHOST_BIN"]
WINE = os.environ.get("GPUHOST_WINE", "")          # scripts/wine-run.sh for the Windows build
FAKE_NVML = os.environ.get("GPUHOST_FAKE_NVML", "")  # the fake NVML library built by the tests
SCENARIOS = os.environ.get("GPUHOST_SCENARIOS", "")
IS_WINDOWS_BUILD = bool(WINE)

# scripts/install-deps.sh installs every tool the tests use, and scripts/test.sh runs as root, so
# under CI=true (test.sh sets it unless told otherwise) a missing one fails the test that needs it,
# naming it, rather than skipping it. Skips by design (a Linux-only test in the Windows build)
# stay skips: they use unittest.skipIf, not needs().
STRICT = os.environ.get("CI", "").lower() in ("1", "true", "yes")
INSTALL_HINT = "scripts/install-deps.sh installs it"


def free_port_pair():
    """A free port whose next port is free too (a torchrun master port and gpuhost's default peer
    port; two slurmd nodes), below Linux's ephemeral range (32768-60999): a port from bind(0) is
    one the kernel may also give an outgoing connection (a TCPStore client, a gloo pair), which
    then holds port + 1."""
    for _ in range(200):
        port = random.randrange(20000, 32000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue
    raise RuntimeError("no free pair of ports in 20000-32000")


def missing(what):
    """Inside a test: the dependency `what` is missing. A skip, or under CI=true a failure."""
    message = "missing: %s (%s)" % (what, INSTALL_HINT)
    if STRICT:
        raise AssertionError(message + "; CI=true makes a missing dependency an error")
    raise unittest.SkipTest(message)


def needs(ok, what):
    """Decorator for a test class or method that needs `what` (ok: whether it is here): without it
    the test is skipped, or under CI=true fails naming it."""
    def wrap(target):
        if ok:
            return target
        if isinstance(target, type):
            if not STRICT:  # each of its tests is reported skipped, with the reason
                return unittest.skip("missing: %s (%s)" % (what, INSTALL_HINT))(target)

            def set_up_class(cls):
                missing(what)
            target.setUpClass = classmethod(set_up_class)
            return target

        @functools.wraps(target)
        def failing(*args, **kwargs):
            missing(what)
        return failing
    return wrap


def have(*tools):
    """Every tool is on PATH (or in /usr/sbin, where Debian puts daemons)."""
    return all(shutil.which(t) or os.path.exists("/usr/sbin/" + t) for t in tools)


SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's python3-torch is installed for this one only


@functools.cache
def torch_available():
    return os.path.exists(SYSTEM_PYTHON) and subprocess.run(
        [SYSTEM_PYTHON, "-c", "import torch"], capture_output=True).returncode == 0


def is_root():
    return hasattr(os, "geteuid") and os.geteuid() == 0


def host_path(path):
    """A path the program under test understands (Wine maps / to Z:)."""
    if IS_WINDOWS_BUILD and path.startswith("/"):
        return "Z:" + path.replace("/", "\\")
    return path


def run(args, env=None, timeout=180, input_text=None):
    """Runs gpuhost with `args`; returns CompletedProcess (text)."""
    full_env = dict(os.environ)
    full_env["NO_COLOR"] = "1"
    if env:
        full_env.update(env)
    cmd = ([WINE] if IS_WINDOWS_BUILD else []) + [BIN] + list(args)
    return subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=timeout, input=input_text)


def processes_with(*texts, excluding=None):
    """Live Linux pids (not zombies) whose command line holds every one of `texts` (and not
    `excluding`). Under Wine a Windows process shows its Windows command line."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
            with open("/proc/%s/stat" % entry) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state in ("Z", "X") or not all(t in cmdline for t in texts):
            continue
        if excluding and excluding in cmdline:
            continue
        found.append(int(entry))
    return found


def scenario_env(name):
    return {"GPUHOST_NVML_LIBRARY": host_path(FAKE_NVML),
            "GPUHOST_FAKE_NVML_SCENARIO": host_path(os.path.join(SCENARIOS, name + ".json"))}


def findings(report):
    return {f["id"]: f for f in report["findings"]}


class GpuhostTestCase(unittest.TestCase):
    def doctor_json(self, args, env=None, expect_exit=None, timeout=180):
        proc = run(["doctor", "--json"] + list(args), env=env, timeout=timeout)
        if expect_exit is not None:
            self.assertEqual(proc.returncode, expect_exit, proc.stderr + proc.stdout[-2000:])
        try:
            report = json.loads(proc.stdout)
        except json.JSONDecodeError:
            self.fail("doctor --json printed no JSON. stderr:\n" + proc.stderr + "\nstdout:\n" + proc.stdout[:2000])
        return proc, report


FAKE_NVML_MINIMAL = os.environ.get("GPUHOST_FAKE_NVML_MINIMAL", "")
FAKE_PYTHON = os.environ.get("GPUHOST_FAKE_PYTHON_BIN", "")
TMP = os.environ.get("GPUHOST_TEST_TMP", "/tmp/gpuhost-integration")


def tmp_dir(name):
    path = os.path.join(TMP, name)
    os.makedirs(path, exist_ok=True)
    return path


def read_metric_history(folder):
    """{name: [(time, step or None, value), ...]} from a job's metrics/ folder, read as
    doc/metrics-history.md says (CRC-checked 32-byte records; series lines first)."""
    import math
    import struct
    import zlib
    names = {}
    with open(os.path.join(folder, "points.bin"), "rb") as f:
        data = f.read()
    with open(os.path.join(folder, "series.jsonl"), encoding="utf-8") as f:
        for line in f:
            if line.endswith("\n"):
                entry = json.loads(line)
                names[entry["id"]] = (entry["name"], entry["source"])  # a later line: a takeover
    series = {}
    for at in range(0, len(data) - len(data) % 32, 32):
        record = data[at:at + 32]
        sid, crc, time_s, step, value = struct.unpack("<IIddd", record)
        if crc != zlib.crc32(record[0:4] + record[8:32]) or sid not in names:
            raise AssertionError("%s: bad record at offset %d" % (folder, at))
        series.setdefault(names[sid][0], []).append((time_s, None if math.isnan(step) else int(step), value))
    return series, {name: source for name, source in names.values()}
