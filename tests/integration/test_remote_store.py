"""`gpuhost run --remote` and `gpuhost ckpt` against a real S3 implementation: a moto_server started
per test class on a free port, read back and written with the aws CLI (doc/remote-store.md).

Host A and host B are two job directories (two GPUHOST_HOME / --jobs-dir, two checkpoint folders)
sharing only the remote: B starts with nothing local and must resume from what A uploaded, ending
bit-identical to an uninterrupted run. The native trainer (tests/integration/trainers/
native_trainer.cc) runs on Linux and, for the Windows build, as an .exe under Wine next to
gpuhost.exe; the PyTorch trainer runs under Debian's python3-torch on Linux. Tamper tests change
the stored objects or manifest with the aws CLI and expect gpuhost to refuse with a clear message.
No timing assertions."""
import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import unittest
import urllib.request

from gpuhost_test import BIN, IS_WINDOWS_BUILD, SYSTEM_PYTHON, TMP, WINE, have, host_path, missing, needs, torch_available
from fake_metadata_server import MetadataServer
from moto_s3 import MotoS3, free_port, wait_for_port

HERE = os.path.dirname(os.path.abspath(__file__))
FAULT_PROXY = os.path.join(HERE, "..", "fault_proxy", "fault_proxy.py")
NATIVE_TRAINER = os.environ.get("GPUHOST_NATIVE_TRAINER", "")
TORCH_TRAINER = os.path.join(HERE, "trainers", "torch_trainer.py")
BUCKET = "gpuhost-remote"
FAST = ["--cloud", "none", "--settle", "0.2", "--backoff", "0.1", "--max-backoff", "0.2", "--quiet"]
SIZE = 4096
KEY_HEX = "5f0c3a9e1b7d2468ace013579bdf2468ace013579bdf02468ace13579bdf0246"
OTHER_KEY_HEX = "a" * 63 + "b"


def read_journal(path):
    records = []
    with open(path, "rb") as f:
        for line in f.read().split(b"\n")[:-1]:
            records.append(json.loads(line.split(b" ", 2)[2]))
    return records


def parse_time(text):
    """A journal time (RFC 3339 UTC with milliseconds) as epoch seconds."""
    return datetime.datetime.strptime(text.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


def gpuhost_cmd(args):
    return ([WINE] if IS_WINDOWS_BUILD else []) + [BIN] + list(args)


class Moto(MotoS3):
    """moto_server without signature checking (it cannot check signed listings of prefixes that
    contain '/', which the mirror uses) and the store URL of its bucket."""

    def __init__(self, directory):
        super().__init__(directory, BUCKET)
        self.url = self.store_url()

    def manifests(self, job):
        return [k for k in self.keys(job + "/") if k.endswith("/manifest.json")]


class Host:
    """One machine's view of a job: its own jobs directory and checkpoint folder."""

    def __init__(self, test, moto, label, job, key_hex=None):
        self.test = test
        self.moto = moto
        self.job = job
        self.dir = os.path.join(TMP, "remote-store", label)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.jobs = os.path.join(self.dir, "jobs")
        self.ck = os.path.join(self.dir, "ck")
        self.resume_log = os.path.join(self.dir, "resume.log")
        self.final = os.path.join(self.dir, "final.state")
        self.journal_path = os.path.join(self.jobs, job, "journal.jsonl")
        self.spec_path = os.path.join(self.jobs, job, "job.json")
        self.url = moto.url
        self.env = dict(moto.env)
        if key_hex:
            self.key_file = os.path.join(self.dir, "key.hex")
            with open(self.key_file, "w") as f:
                f.write(key_hex + "\n")

    def native(self, steps, every, size=SIZE):
        return [host_path(NATIVE_TRAINER), "--steps", str(steps), "--every", str(every), "--step-time-ms", "30",
                "--size", str(size), "--out", host_path(self.ck), "--resume-log", host_path(self.resume_log),
                "--final-state", host_path(self.final), "--resume", "{resume}"]

    def torch(self, steps, every, state_mb=0):
        return [SYSTEM_PYTHON, TORCH_TRAINER, "--steps", str(steps), "--every", str(every), "--step-time", "0.02",
                "--state-mb", str(state_mb), "--out", self.ck, "--resume-log", self.resume_log,
                "--final-state", self.final, "--resume", "{resume}"]

    def argv(self, flags, trainer):
        fast = FAST[2:] if "--cloud" in flags else FAST  # a test that watches a cloud names it
        if IS_WINDOWS_BUILD and "--save-signal" not in flags:
            # native_trainer handles CTRL_BREAK; Windows cannot see that, so the job says so
            # (doc/run-signals.md).
            fast = fast + ["--save-signal", "CTRL_BREAK"]
        return gpuhost_cmd(["run", "--name", self.job, "--jobs-dir", host_path(self.jobs), "--checkpoints",
                            host_path(self.ck), "--remote", self.url] + fast + list(flags) + ["--"] + trainer)

    def run(self, flags, trainer, timeout=300, env=None):
        return subprocess.run(self.argv(flags, trainer), env=dict(self.env, **(env or {})), capture_output=True,
                              text=True, timeout=timeout)

    def start(self, flags, trainer, env=None):
        self.stderr_path = os.path.join(self.dir, "gpuhost-stderr.txt")
        with open(self.stderr_path, "w") as err:
            proc = subprocess.Popen(self.argv(flags, trainer), env=dict(self.env, **(env or {})),
                                    stdout=subprocess.DEVNULL, stderr=err)
        self.test.addCleanup(lambda: proc.poll() is None and (proc.kill(), proc.wait()))
        return proc

    def stderr(self):
        with open(self.stderr_path, errors="replace") as f:
            return f.read()

    def wait_for_type(self, kind, proc, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(self.journal_path) and self.records(kind):
                return self.records(kind)
            if proc.poll() is not None:
                raise AssertionError("gpuhost exited %d before %s: %s%s" % (proc.returncode, kind, self.stderr(),
                                                                         self.summary()))
            time.sleep(0.05)
        raise AssertionError("no %s record within %d s: %s" % (kind, timeout, self.summary()))

    def spec(self):
        with open(self.spec_path) as f:
            return json.load(f)

    def ckpt(self, *args, env=None):
        argv = gpuhost_cmd(["ckpt"] + list(args) + ["--remote", self.moto.url, "--job", self.job])
        return subprocess.run(argv, env=dict(self.env, **(env or {})), capture_output=True, text=True, timeout=300)

    def journal(self):
        return read_journal(self.journal_path)

    def records(self, kind):
        return [r for r in self.journal() if r["type"] == kind]

    def summary(self):
        if not os.path.exists(self.journal_path):
            return "(no journal)"
        return "\n  " + "\n  ".join(json.dumps(r)[:300] for r in self.journal())

    def final_state(self):
        with open(self.final, "rb") as f:
            return f.read()

    def resume_lines(self):
        if not os.path.exists(self.resume_log):
            return []
        with open(self.resume_log) as f:
            return [line.split() for line in f.read().splitlines()]


_references = {}


def reference(kind, steps, runner):
    if (kind, steps) not in _references:
        directory = os.path.join(TMP, "remote-store", "reference-%s-%d" % (kind, steps))
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        final = os.path.join(directory, "final.state")
        proc = runner(directory, final)
        if proc.returncode != 0:
            raise AssertionError("reference run failed: " + proc.stderr)
        with open(final, "rb") as f:
            _references[(kind, steps)] = f.read()
    return _references[(kind, steps)]


def native_reference(steps, size=SIZE):
    return reference("native-%d" % size, steps, lambda d, final: subprocess.run(
        ([WINE] if IS_WINDOWS_BUILD else []) +
        [NATIVE_TRAINER, "--steps", str(steps), "--every", "0", "--size", str(size), "--out",
         host_path(os.path.join(d, "ck")), "--final-state", host_path(final)], capture_output=True, text=True,
        timeout=300))


def torch_reference(steps, state_mb):
    return reference("torch-%g" % state_mb, steps, lambda d, final: subprocess.run(
        [SYSTEM_PYTHON, TORCH_TRAINER, "--steps", str(steps), "--every", "0", "--state-mb", str(state_mb),
         "--out", os.path.join(d, "ck"), "--final-state", final], capture_output=True, text=True, timeout=300))


@needs(have("moto_server", "aws"), "moto_server and the aws CLI (Debian's python3-moto and awscli)")
class RemoteStoreCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.makedirs(os.path.join(TMP, "remote-store"), exist_ok=True)
        cls.moto = Moto(os.path.join(TMP, "remote-store"))

    @classmethod
    def tearDownClass(cls):
        cls.moto.stop()

    def assert_exit(self, proc, code, host=None):
        self.assertEqual(proc.returncode, code, "exit %d, expected %d\nstderr: %s\njournal: %s" % (
            proc.returncode, code, proc.stderr[-3000:], host.summary() if host else ""))

    def preempt_then_resume_elsewhere(self, job, trainer_a, trainer_b, steps, flags=(), env=None, at="2"):
        """Host A is preempted by a drill after its save; host B (empty) resumes from the remote."""
        a = Host(self, self.moto, job + "-a", job)
        b = Host(self, self.moto, job + "-b", job)
        flags = list(flags)
        key_flags = lambda h: ["--encryption-key-file", host_path(h.key_file)] if "--encrypt" in flags else []
        for h in (a, b):
            if "--encrypt" in flags:
                h.key_file = os.path.join(h.dir, "key.hex")
                with open(h.key_file, "w") as f:
                    f.write(KEY_HEX + "\n")
        proc = a.run(flags + key_flags(a) + ["--drill", "preempt@%s/60" % at], trainer_a(a), env=env)
        self.assert_exit(proc, 75, a)
        deadline = a.records("mirror_deadline")
        self.assertEqual(len(deadline), 1, a.summary())
        self.assertTrue(deadline[0]["durable"], a.summary())
        durable = a.records("mirror_durable")
        self.assertTrue(durable, a.summary())
        # Durable only after the manifest: the journal says so after every part and upload.
        newest = durable[-1]
        self.assertIn(newest["manifest"], self.moto.manifests(job))
        self.assertFalse(os.path.exists(b.ck))

        proc = b.run(flags + key_flags(b), trainer_b(b), env=env)
        self.assert_exit(proc, 0, b)
        restored = b.records("checkpoint_restored")
        self.assertEqual(len(restored), 1, b.summary())
        self.assertEqual(restored[0]["remote_id"], newest["remote_id"])
        self.assertEqual(restored[0]["encrypted"], "--encrypt" in flags)
        lines = b.resume_lines()
        self.assertEqual(lines[0][0], "OK", lines)
        # Resumed from the restored file, the one A saved for the notice.
        name = os.path.basename(restored[0]["path"].replace("\\", "/"))
        self.assertEqual(os.path.basename(lines[0][1].replace("\\", "/")), name)
        saved = [r for r in a.records("checkpoint_committed") if "ck-%d" % r["seq"] == newest["id"]]
        self.assertEqual(os.path.basename(saved[0]["path"].replace("\\", "/")), name)
        return a, b


@needs(NATIVE_TRAINER, "GPUHOST_NATIVE_TRAINER (CTest sets it to the built tests/native_trainer)")
class NativeTrainerAcrossHosts(RemoteStoreCase):
    """Runs on Linux and, for the Windows build, with gpuhost.exe and native_trainer.exe under Wine."""

    def test_uploads_read_back_by_aws_cli_byte_identical_and_remote_retention_follows_local(self):
        h = Host(self, self.moto, "readback", "readback")
        proc = h.run(["--keep", "2"], h.native(40, 10))
        self.assert_exit(proc, 0, h)
        durable = h.records("mirror_durable")
        self.assertGreaterEqual(len(durable), 2, h.summary())
        live = sorted(os.listdir(h.ck))
        self.assertEqual(len(live), 2, live)
        manifests = self.moto.manifests("readback")
        self.assertEqual(len(manifests), 2, manifests)
        for key in manifests:
            manifest = json.loads(self.moto.get(key))
            self.assertEqual(manifest["format_version"], 1)
            self.assertIn(manifest["name"], live)
            for f in manifest["files"]:
                data = self.moto.get("readback/%s/files/%s" % (manifest["remote_id"], f["path"]))
                with open(os.path.join(h.ck, manifest["name"]), "rb") as local:
                    self.assertEqual(data, local.read())
                self.assertEqual(hashlib.sha256(data).hexdigest(), f["sha256"])
                self.assertEqual(len(data), f["stored_size"])
        self.assertEqual(len(h.records("mirror_removed")), len(durable) - 2, h.summary())

    def test_preempted_host_a_resumes_on_empty_host_b_bit_identical(self):
        steps = 150
        a, b = self.preempt_then_resume_elsewhere("native-plain", lambda h: h.native(steps, 0),
                                                  lambda h: h.native(steps, 0), steps)
        self.assertEqual(b.final_state(), native_reference(steps))

    def test_encrypted_preempt_and_resume_bit_identical_and_objects_are_ciphertext(self):
        steps = 150
        a, b = self.preempt_then_resume_elsewhere("native-enc", lambda h: h.native(steps, 0),
                                                  lambda h: h.native(steps, 0), steps, ["--encrypt", "aes-256-gcm"])
        self.assertEqual(b.final_state(), native_reference(steps))
        manifest = json.loads(self.moto.get(a.records("mirror_durable")[-1]["manifest"]))
        self.assertEqual(manifest["encryption"]["suite"], "aes-256-gcm")
        self.assertTrue(manifest["mac"].startswith("hmac-sha256:"))
        stored = self.moto.get("native-enc/%s/files/%s" % (manifest["remote_id"], manifest["files"][0]["path"]))
        restored = b.records("checkpoint_restored")[0]["path"]
        with open(os.path.join(b.ck, os.path.basename(restored.replace("\\", "/"))), "rb") as f:
            plain = f.read()
        self.assertNotIn(plain[-64:], stored)

    def test_sm4_preempt_and_resume_bit_identical_objects_are_ciphertext_and_job_json_has_no_key(self):
        steps = 150
        a, b = self.preempt_then_resume_elsewhere("native-sm4", lambda h: h.native(steps, 0),
                                                  lambda h: h.native(steps, 0), steps, ["--encrypt", "sm4"])
        self.assertEqual(b.final_state(), native_reference(steps))
        manifest = json.loads(self.moto.get(a.records("mirror_durable")[-1]["manifest"]))
        # `sm4` is the SM4 suite every build reads (doc/encryption.md): OpenSSL 3.0 on Linux and
        # libgcrypt on Windows.
        self.assertEqual(manifest["encryption"]["suite"], "sm4-ctr-hmac-sm3")
        self.assertTrue(manifest["mac"].startswith("hmac-sm3:"), manifest["mac"])
        stored = self.moto.get("native-sm4/%s/files/%s" % (manifest["remote_id"], manifest["files"][0]["path"]))
        restored = b.records("checkpoint_restored")[0]
        self.assertTrue(restored["encrypted"])
        with open(os.path.join(b.ck, os.path.basename(restored["path"].replace("\\", "/"))), "rb") as f:
            plain = f.read()
        self.assertNotIn(plain[-64:], stored)
        self.assertNotIn(plain[:64], stored)
        # job.json says where the checkpoints went and how, never with what key.
        for h in (a, b):
            spec = h.spec()
            self.assertEqual(spec["remote"]["url"], self.moto.url)
            self.assertEqual(spec["remote"]["encrypt"], "sm4")
            with open(h.spec_path) as f:
                self.assertNotIn(KEY_HEX, f.read())

    @unittest.skipIf(IS_WINDOWS_BUILD, "libgcrypt, the Windows build's SM4, has SM4-GCM")
    def test_a_suite_this_build_cannot_run_is_refused_before_training(self):
        # Debian 12's OpenSSL 3.0 has no SM4-GCM. (gpuhost.exe without libgcrypt-20.dll, refused
        # the same way: test_sm4_cross_os.)
        h = Host(self, self.moto, "sm4-gcm-refused", "sm4-gcm-refused", key_hex=KEY_HEX)
        proc = h.run(["--encrypt", "sm4-gcm", "--encryption-key-file", host_path(h.key_file)], h.native(20, 10))
        self.assert_exit(proc, 2, h)
        self.assertIn("unsupported on this build", proc.stderr)
        self.assertIn("SM4-GCM", proc.stderr)
        self.assertFalse(os.path.exists(h.journal_path), h.summary())  # refused before the job began
        self.assertFalse(os.path.exists(h.ck))  # the trainer never ran
        self.assertEqual(self.moto.keys("sm4-gcm-refused/"), [])

    def test_a_url_with_a_secret_is_refused_before_anything_exists_and_never_echoed(self):
        h = Host(self, self.moto, "secret-url", "secret-url")
        # A presigned-style parameter gpuhost does not accept: a usage error before the job
        # exists, and the value is not repeated in the message.
        h.url = self.moto.url + "&X-Amz-Security-Token=TOPSECRETTOKEN"
        proc = h.run([], h.native(20, 10))
        self.assert_exit(proc, 2, h)
        self.assertNotIn("TOPSECRETTOKEN", proc.stderr + proc.stdout)
        self.assertIn("X-Amz-Security-Token", proc.stderr)
        self.assertFalse(os.path.exists(h.spec_path), "a job was created")

    def test_job_json_records_the_remote(self):
        h = Host(self, self.moto, "json-url", "json-url")
        self.assert_exit(h.run([], h.native(20, 10)), 0, h)
        spec = h.spec()
        self.assertEqual(spec["remote"]["url"], self.moto.url)
        self.assertEqual(spec["remote"]["encrypt"], "")

    def test_checkpoint_uploaded_with_aws_cli_and_handwritten_manifest_restores(self):
        src = Host(self, self.moto, "handmade-src", "handmade")
        subprocess.run(([WINE] if IS_WINDOWS_BUILD else []) +
                       [NATIVE_TRAINER, "--steps", "20", "--every", "20", "--size", str(SIZE), "--out",
                        host_path(src.ck)], check=True, capture_output=True, timeout=300)
        name = sorted(os.listdir(src.ck))[0]
        with open(os.path.join(src.ck, name), "rb") as f:
            data = f.read()
        verdict = json.loads(subprocess.run(gpuhost_cmd(["verify", "--json", host_path(os.path.join(src.ck, name))]),
                                            capture_output=True, text=True, env=src.env).stdout)[0]
        part_size = 5 << 20
        parts = [hashlib.sha256(data[i:i + part_size]).hexdigest() for i in range(0, max(len(data), 1), part_size)]
        remote_id = "by-hand"
        self.moto.put("handmade/%s/files/%s" % (remote_id, name), data)
        manifest = {"format_version": 1, "job": "handmade", "remote_id": remote_id, "checkpoint_id": "", "name": name,
                    "directory": False, "format": verdict["format"], "step": 20, "size_bytes": len(data),
                    "content_hash": verdict["content_hash"], "created_at": "2026-01-01T00:00:00.000Z",
                    "encryption": {"suite": "", "key_id": "", "chunk_bytes": 0},
                    "files": [{"path": name, "size": len(data), "stored_size": len(data),
                               "sha256": hashlib.sha256(data).hexdigest(), "part_size": part_size,
                               "part_sha256": parts}], "mac": ""}
        self.moto.put("handmade/%s/manifest.json" % remote_id, json.dumps(manifest).encode())
        h = Host(self, self.moto, "handmade-b", "handmade")
        proc = h.run([], h.native(40, 0))
        self.assert_exit(proc, 0, h)
        self.assertEqual(h.resume_lines()[0][0], "OK")
        self.assertEqual(int(h.resume_lines()[0][2]), 20)
        self.assertEqual(h.final_state(), native_reference(40))

    def fault_proxy(self, *rules):
        """tests/fault_proxy/fault_proxy.py in front of moto with `rules`; returns (store URL through
        it, a function that removes every rule)."""
        port = free_port()
        os.makedirs(TMP, exist_ok=True)
        log = open(os.path.join(TMP, "fault-proxy-%d.log" % port), "w")
        self.addCleanup(log.close)
        argv = [sys.executable, FAULT_PROXY, "--upstream", "127.0.0.1:%d" % self.moto.port, "--listen", str(port)]
        for rule in rules:
            argv += ["--rule", json.dumps(rule)]
        proxy = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(lambda: (proxy.kill(), proxy.wait()))
        wait_for_port(port, proxy, log.name)

        def clear():
            request = urllib.request.Request("http://127.0.0.1:%d/__fault__/rules" % port, method="DELETE")
            with urllib.request.urlopen(request, timeout=30) as answer:
                answer.read()
        return self.moto.store_url(endpoint="http://127.0.0.1:%d" % port), clear

    @unittest.skipIf(IS_WINDOWS_BUILD, "SIGKILL of the supervisor: Linux")
    def test_supervisor_killed_mid_upload_resumes_the_same_multipart_upload(self):
        h = Host(self, self.moto, "killed-upload", "killed-upload")
        size = 5_000_000  # 40 MB of weights: eight 5 MiB parts
        subprocess.run([NATIVE_TRAINER, "--steps", "10", "--every", "10", "--size", str(size), "--out", h.ck],
                       check=True, capture_output=True, timeout=300)
        trainer = [NATIVE_TRAINER, "--steps", "100000", "--every", "0", "--step-time-ms", "100", "--size", str(size),
                   "--out", h.ck, "--resume", "{resume}"]
        # Parts 3 and later get their answers only after 600 s (moto has stored them by then), so
        # the kill below lands mid-upload whatever the machine's speed.
        url, clear_faults = self.fault_proxy({"method": "PUT", "target": r"partNumber=([3-9]|\d\d)&",
                                              "action": "hold_response", "seconds": 600, "times": 0})
        argv = gpuhost_cmd(["run", "--name", h.job, "--jobs-dir", h.jobs, "--checkpoints", h.ck, "--remote",
                            url] + FAST + ["--"] + trainer)
        env = dict(h.env, GPUHOST_MIRROR_PART_MIB="5")
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(lambda p=proc: p.poll() is None and (p.kill(), p.wait()))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if os.path.exists(h.journal_path) and any(r["type"] == "mirror_part_uploaded" for r in h.journal()):
                break
            time.sleep(0.02)
        proc.kill()
        proc.wait()
        clear_faults()
        first = h.journal()
        self.assertEqual([r for r in first if r["type"] == "mirror_durable"], [], h.summary())
        started = [r for r in first if r["type"] == "mirror_upload_started"]
        self.assertEqual(len(started), 1, h.summary())
        upload_id = started[0]["upload_id"]

        proc = subprocess.run(argv[:-len(trainer)] + [NATIVE_TRAINER, "--steps", "10", "--every", "0", "--size",
                                                      str(size), "--out", h.ck, "--resume", "{resume}"],
                              env=env, capture_output=True, text=True, timeout=300)
        self.assert_exit(proc, 0, h)
        second = h.journal()[len(first):]
        durable = [r for r in second if r["type"] == "mirror_durable"]
        self.assertEqual(len(durable), 1, h.summary())
        # The next supervisor continues the journalled multipart upload: its first upload is that
        # one, and no part the killed supervisor finished is sent again.
        resumed = [r for r in second if r["type"] == "mirror_upload_started"]
        self.assertEqual(resumed[0]["upload_id"], upload_id, h.summary())
        done_before = {r["number"] for r in first if r["type"] == "mirror_part_uploaded"}
        sent_again = {r["number"] for r in second if r["type"] == "mirror_part_uploaded"
                      and r["upload_id"] == upload_id} & done_before
        self.assertEqual(sent_again, set(), h.summary())
        if not [r for r in second if r["type"] == "mirror_failed"]:
            # It was completed: no new one was started for the object, nothing was aborted.
            self.assertEqual({r["upload_id"] for r in resumed} - {upload_id}, set())
            self.assertEqual([r for r in second if r["type"] == "mirror_upload_aborted"], [])
        # Else moto failed the resumed upload (HTTP 500 on every retry of a part, seen once in
        # CI after a kill mid-part) and a retry may start a new one: what counts then is that
        # the checkpoint still became durable, byte-identical (below).
        manifest = json.loads(self.moto.get(durable[0]["manifest"]))
        data = self.moto.get("killed-upload/%s/files/%s" % (manifest["remote_id"], manifest["files"][0]["path"]))
        with open(os.path.join(h.ck, manifest["name"]), "rb") as f:
            self.assertEqual(data, f.read())

    def test_ckpt_push_pull_list_and_prune(self):
        h = Host(self, self.moto, "manual", "manual", key_hex=KEY_HEX)
        subprocess.run(([WINE] if IS_WINDOWS_BUILD else []) +
                       [NATIVE_TRAINER, "--steps", "20", "--every", "10", "--size", str(SIZE), "--out",
                        host_path(h.ck)], check=True, capture_output=True, timeout=300)
        names = sorted(os.listdir(h.ck))
        for name in names:
            proc = h.ckpt("push", host_path(os.path.join(h.ck, name)), "--encrypt", "aes-256-gcm",
                          "--encryption-key-file", host_path(h.key_file), "--json")
            self.assert_exit(proc, 0)
        listed = json.loads(h.ckpt("list", "--json", "--encryption-key-file", host_path(h.key_file)).stdout)
        self.assertEqual([e["name"] for e in listed], list(reversed(names)))
        out = os.path.join(h.dir, "pulled")
        proc = h.ckpt("pull", listed[0]["remote_id"], "--to", host_path(out), "--encryption-key-file",
                      host_path(h.key_file))
        self.assert_exit(proc, 0)
        with open(os.path.join(out, names[-1]), "rb") as got, open(os.path.join(h.ck, names[-1]), "rb") as want:
            self.assertEqual(got.read(), want.read())
        proc = h.ckpt("list")
        self.assertIn("encrypted", proc.stdout + proc.stderr)  # no key: listed as needing one
        # --dry-run says what would go and leaves it there.
        proc = h.ckpt("prune", "--keep", "1", "--dry-run", "--json", "--encryption-key-file", host_path(h.key_file))
        self.assert_exit(proc, 0)
        self.assertEqual(json.loads(proc.stdout), [e["remote_id"] for e in listed[1:]])
        self.assertEqual(len(self.moto.manifests("manual")), len(names))
        proc = h.ckpt("prune", "--keep", "1", "--encryption-key-file", host_path(h.key_file))
        self.assert_exit(proc, 0)
        self.assertEqual(len(self.moto.manifests("manual")), 1)


@needs(NATIVE_TRAINER, "GPUHOST_NATIVE_TRAINER (CTest sets it to the built tests/native_trainer)")
class Tampering(RemoteStoreCase):
    """Each change to what is stored is refused by `gpuhost ckpt verify` (exit 1) with a message
    that says what is wrong; restoring the original bytes makes it verify again."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        host = Host(None, cls.moto, "tamper", "tamper", key_hex=KEY_HEX)
        cls.host = host
        subprocess.run(([WINE] if IS_WINDOWS_BUILD else []) +
                       [NATIVE_TRAINER, "--steps", "10", "--every", "10", "--size", "1100000", "--out",
                        host_path(host.ck)], check=True, capture_output=True, timeout=300)
        name = os.listdir(host.ck)[0]
        proc = host.ckpt("push", host_path(os.path.join(host.ck, name)), "--encrypt", "aes-256-gcm",
                         "--encryption-key-file", host_path(host.key_file), "--json")
        if proc.returncode != 0:
            raise AssertionError("push failed: " + proc.stderr)
        cls.manifest_key = cls.moto.manifests("tamper")[0]
        cls.manifest = cls.moto.get(cls.manifest_key)
        m = json.loads(cls.manifest)
        cls.object_key = "tamper/%s/files/%s" % (m["remote_id"], m["files"][0]["path"])
        cls.stored = cls.moto.get(cls.object_key)

    def setUp(self):
        self.moto.put(self.object_key, self.stored)
        self.moto.put(self.manifest_key, self.manifest)

    def verify(self, key_file=None):
        return self.host.ckpt("verify", "--encryption-key-file", host_path(key_file or self.host.key_file))

    def assert_refused(self, *words, key_file=None):
        proc = self.verify(key_file)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        for word in words:
            self.assertIn(word, proc.stderr)

    def test_untouched_checkpoint_verifies(self):
        proc = self.verify()
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("intact", proc.stdout)

    def test_flipped_bit_refused(self):
        data = bytearray(self.stored)
        data[len(data) // 2] ^= 0x04
        self.moto.put(self.object_key, bytes(data))
        self.assert_refused("does not match", "changed after upload")

    def test_truncated_chunk_refused(self):
        self.moto.put(self.object_key, self.stored[:-100])
        self.assert_refused("the manifest says", "truncated")

    def test_swapped_chunks_refused(self):
        chunk = 4 << 20
        header = 96
        data = self.stored
        frame = 8 + chunk + 16
        self.assertGreaterEqual(len(data), header + 2 * frame, "the fixture object has fewer than two full chunks")
        swapped = data[:header] + data[header + frame:header + 2 * frame] + data[header:header + frame] + \
            data[header + 2 * frame:]
        self.moto.put(self.object_key, swapped)
        self.assert_refused("does not match", "changed after upload")

    def test_wrong_key_refused(self):
        other = os.path.join(self.host.dir, "other.hex")
        with open(other, "w") as f:
            f.write(OTHER_KEY_HEX + "\n")
        self.assert_refused("encrypted with key", "not with this key", key_file=other)

    def test_edited_manifest_refused(self):
        m = json.loads(self.manifest)
        m["step"] = (m["step"] or 0) + 1000
        self.moto.put(self.manifest_key, json.dumps(m).encode())
        self.assert_refused("manifest authentication failed")

    def test_fresh_host_does_not_restore_a_tampered_checkpoint(self):
        data = bytearray(self.stored)
        data[100] ^= 0x01
        self.moto.put(self.object_key, bytes(data))
        b = Host(self, self.moto, "tamper-b", "tamper", key_hex=KEY_HEX)
        proc = b.run(["--encryption-key-file", host_path(b.key_file)], b.native(5, 0))
        self.assert_exit(proc, 0, b)
        self.assertEqual(b.records("checkpoint_restored"), [])
        failures = [r["error"] for r in b.records("mirror_failed")]
        self.assertTrue(any("changed after upload" in e for e in failures), b.summary())
        self.assertEqual(b.resume_lines(), [])  # started fresh
        leftovers = [n for n in os.listdir(b.ck) if n.startswith(".gpuhost-restore")] if os.path.isdir(b.ck) else []
        self.assertEqual(leftovers, [])


@unittest.skipIf(IS_WINDOWS_BUILD, "PyTorch runs on the Linux host")
class PyTorchAcrossHosts(RemoteStoreCase):
    STEPS = 500  # at 0.02 s a step and more, still training when the drill comes after torch's import

    @classmethod
    def setUpClass(cls):
        if not torch_available():
            missing("Debian's python3-torch for /usr/bin/python3")
        super().setUpClass()

    def run_torch(self, job, flags):
        # 12 MB of model state and 5 MiB parts: every checkpoint goes up as a parallel multipart upload.
        a, b = self.preempt_then_resume_elsewhere(
            job, lambda h: h.torch(self.STEPS, 0, state_mb=12), lambda h: h.torch(self.STEPS, 0, state_mb=12),
            self.STEPS, flags, env={"GPUHOST_MIRROR_PART_MIB": "5"}, at="8")
        self.assertGreaterEqual(len(a.records("mirror_part_uploaded")), 3, a.summary())
        self.assertEqual(b.final_state(), torch_reference(self.STEPS, 12))

    def test_torch_preempted_on_a_resumes_on_b_bit_identical(self):
        self.run_torch("torch-plain", [])

    def test_torch_encrypted_preempted_on_a_resumes_on_b_bit_identical(self):
        self.run_torch("torch-enc", ["--encrypt", "aes-256-gcm"])


@unittest.skipIf(IS_WINDOWS_BUILD, "Linux build (the fake metadata service and signals as in test_run_cli)")
@needs(NATIVE_TRAINER, "GPUHOST_NATIVE_TRAINER (CTest sets it to the built tests/native_trainer)")
class AzureAcknowledgement(RemoteStoreCase):
    """With a mirror, Azure's StartRequests (which lets the platform evict at once) is sent only
    once the saved checkpoint's manifest is stored, or when the notice's deadline has come."""

    def preempt(self, host, lead_s, env=None, flags=()):
        server = MetadataServer(self, "azure")
        # At the acknowledgement the fake lists the job's keys in moto (an unsigned GET moto allows).
        server.control("probe", {"url": "%s/%s?list-type=2&prefix=%s/" % (self.moto.endpoint, BUCKET, host.job)})
        # 12 MB of weights in 5 MiB parts: the upload is a multipart one that takes a while.
        proc = host.start(["--cloud", "azure", "--metadata-endpoint", server.url, "--poll-interval", "0.2"] + list(flags),
                          host.native(100000, 0, size=1_500_000), env=dict(env or {}, GPUHOST_MIRROR_PART_MIB="5"))
        host.wait_for_type("child_started", proc)
        server.control("notice", {"in_seconds": lead_s})
        proc.wait(timeout=lead_s + 120)
        self.assertEqual(proc.returncode, 75, host.stderr() + host.summary())
        acks = server.acknowledgements()
        self.assertEqual(len(acks), 1, server.control("log"))
        journal = host.journal()
        first = lambda kind: next(r for r in journal if r["type"] == kind)
        notice = first("notice")
        self.assertEqual((notice["source"], notice["kind"]), ("azure", "preemption"))
        self.assertEqual(json.loads(acks[0]["body"]), {"StartRequests": [{"EventId": notice["event_id"]}]})
        acknowledged = first("notice_acknowledged")
        deadline = first("mirror_deadline")
        self.assertLess(deadline["seq"], acknowledged["seq"], host.summary())
        saved = first("save_completed")
        self.assertEqual(deadline["id"], saved["id"])
        return acks[0], journal, notice, saved, deadline

    def test_acknowledged_only_after_the_manifest_is_stored(self):
        h = Host(self, self.moto, "azure-ack", "azure-ack")
        ack, journal, notice, saved, deadline = self.preempt(h, 60)
        self.assertTrue(deadline["durable"], h.summary())
        durable = [r for r in journal if r["type"] == "mirror_durable" and r["id"] == saved["id"]]
        self.assertEqual(len(durable), 1, h.summary())
        self.assertLess(durable[0]["seq"], deadline["seq"])
        # The acknowledgement arrived after the durable record was written (same clock; the
        # journal's time is cut to milliseconds)...
        self.assertGreaterEqual(ack["time"], parse_time(durable[0]["time"]), (ack, durable[0]))
        # ...and the manifest was in the store at that moment, as the fake's listing then shows
        # and the aws CLI confirms now.
        self.assertEqual(ack["probe"]["status"], 200, ack["probe"])
        self.assertIn("<Key>%s</Key>" % durable[0]["manifest"], ack["probe"]["body"])
        self.assertIn(durable[0]["manifest"], self.moto.manifests(h.job))
        manifest = json.loads(self.moto.get(durable[0]["manifest"]))
        self.assertEqual(manifest["checkpoint_id"], saved["id"])
        self.assertGreaterEqual(len(h.records("mirror_part_uploaded")), 2, h.summary())

    def test_unreachable_remote_acknowledged_at_the_deadline_not_durable(self):
        h = Host(self, self.moto, "azure-unreachable", "azure-unreachable")
        h.url = "s3://%s/?endpoint=http://127.0.0.1:%d&region=us-east-1" % (BUCKET, free_port())  # nothing listens
        # --remote-optional: without it the run is refused before training (RemoteDurability).
        ack, journal, notice, saved, deadline = self.preempt(h, 20, flags=["--remote-optional"])
        self.assertFalse(deadline["durable"], h.summary())
        self.assertEqual(h.records("mirror_durable"), [], h.summary())
        self.assertTrue(h.records("mirror_failed"), h.summary())
        # The supervisor held the acknowledgement until one second before the deadline it read
        # from the notice (NotBefore), the most the upload could be given.
        self.assertGreaterEqual(ack["time"], parse_time(notice["deadline"]) - 1.0, (ack["time"], notice))
        self.assertEqual(ack["probe"]["status"], 200, ack["probe"])
        self.assertNotIn("manifest.json", ack["probe"]["body"])


@needs(NATIVE_TRAINER, "GPUHOST_NATIVE_TRAINER (CTest sets it to the built tests/native_trainer)")
class RemoteDurability(RemoteStoreCase):
    """What a run says about a remote that cannot hold its checkpoints: known before training
    (nothing created, exit 3, or exit 2 for a bad URL or key file), and with --remote-optional a
    finished run whose checkpoints never got there ends with exit 5 and names them, never 0."""

    def assert_nothing_created(self, host):
        self.assertFalse(os.path.exists(os.path.join(host.jobs, host.job)), "a job directory was made")
        self.assertFalse(os.path.exists(host.ck), "the trainer ran")

    def test_unreachable_remote_is_refused_before_training(self):
        h = Host(self, self.moto, "unreachable", "unreachable")
        h.url = "s3://%s/x?endpoint=http://127.0.0.1:%d&region=us-east-1" % (BUCKET, free_port())  # nothing listens
        proc = h.run([], h.native(20, 5))
        self.assert_exit(proc, 3, h)
        self.assertIn("the remote cannot be used", proc.stderr)
        self.assertIn("--remote-optional", proc.stderr)
        self.assert_nothing_created(h)

    def test_missing_bucket_is_refused_before_training(self):
        h = Host(self, self.moto, "no-bucket", "no-bucket")
        h.url = self.moto.url.replace("s3://%s/" % BUCKET, "s3://no-such-bucket-here/")
        self.assertNotEqual(h.url, self.moto.url)
        proc = h.run([], h.native(20, 5))
        self.assert_exit(proc, 3, h)
        self.assertIn("no-such-bucket-here", proc.stderr)
        self.assert_nothing_created(h)

    def test_remote_answering_403_is_refused_before_training(self):
        # A moto that checks signatures and IAM policies, and a user that may list the bucket but
        # not write to it: the listing passes, the probe write gets 403 AccessDenied.
        signed = MotoS3(os.path.join(TMP, "remote-store"), BUCKET + "-signed", signed=True)
        self.addCleanup(signed.stop)
        signed.url = signed.store_url()  # no '/' in the probe's prefix: moto can check its signature
        signed.aws("iam", "create-user", "--user-name", "reader")
        key = json.loads(signed.aws("iam", "create-access-key", "--user-name", "reader"))["AccessKey"]
        signed.aws("iam", "put-user-policy", "--user-name", "reader", "--policy-name", "read",
                   "--policy-document", json.dumps({"Version": "2012-10-17", "Statement": [
                       {"Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetObject"], "Resource": "*"}]}))
        h = Host(self, signed, "forbidden", "forbidden")
        h.env["AWS_ACCESS_KEY_ID"] = key["AccessKeyId"]
        h.env["AWS_SECRET_ACCESS_KEY"] = key["SecretAccessKey"]
        proc = h.run([], h.native(20, 5))
        self.assert_exit(proc, 3, h)
        self.assertIn("the remote cannot be used", proc.stderr)
        self.assertIn("writing a probe object", proc.stderr)
        self.assertRegex(proc.stderr, r"403|AccessDenied|denied")
        self.assertNotIn(key["SecretAccessKey"], proc.stderr)
        self.assert_nothing_created(h)
        # The aws CLI sees the same: this key may list the bucket and is refused a write.
        reader_env = dict(signed.env, AWS_ACCESS_KEY_ID=key["AccessKeyId"], AWS_SECRET_ACCESS_KEY=key["SecretAccessKey"])
        signed.aws("s3api", "list-objects-v2", "--bucket", signed.bucket, env=reader_env)
        put = subprocess.run(["aws", "--endpoint-url", signed.endpoint, "s3api", "put-object", "--bucket",
                              signed.bucket, "--key", "probe"], env=reader_env, capture_output=True, text=True)
        self.assertNotEqual(put.returncode, 0)
        self.assertIn("AccessDenied", put.stderr)

    def test_bad_url_and_missing_key_file_are_usage_errors_before_anything_exists(self):
        h = Host(self, self.moto, "bad-url", "bad-url")
        h.url = "s4://bucket/x"
        proc = h.run([], h.native(20, 5))
        self.assert_exit(proc, 2, h)
        self.assertIn("--remote", proc.stderr)
        self.assert_nothing_created(h)
        h = Host(self, self.moto, "no-key", "no-key")
        proc = h.run(["--encrypt", "aes-256-gcm", "--encryption-key-file", host_path(os.path.join(h.dir, "missing.hex"))],
                     h.native(20, 5))
        self.assert_exit(proc, 2, h)
        self.assertIn("encryption key", proc.stderr)
        self.assert_nothing_created(h)

    def test_optional_remote_that_never_answers_ends_with_exit_5_naming_the_checkpoints(self):
        h = Host(self, self.moto, "optional", "optional")
        h.url = "s3://%s/x?endpoint=http://127.0.0.1:%d&region=us-east-1" % (BUCKET, free_port())
        proc = h.run(["--remote-optional", "--final-upload-timeout", "3"], h.native(40, 20))
        self.assert_exit(proc, 5, h)
        self.assertIn("WARNING: the remote cannot be used now", proc.stderr)
        committed = ["ck-%d" % r["seq"] for r in h.records("checkpoint_committed")]
        self.assertTrue(committed, h.summary())
        [incomplete] = h.records("mirror_incomplete")
        self.assertEqual(incomplete["ids"][-1], committed[-1], h.summary())
        last = proc.stderr.strip().splitlines()[-1]
        self.assertIn("NOT durable", last)
        self.assertIn(committed[-1], last)
        self.assertIn("exit 5", last)
        # One short console line per failed upload; the journal keeps the whole error.
        for line in proc.stderr.splitlines():
            if "upload of " in line and " failed: " in line:
                self.assertLess(len(line), 400, line)
        self.assertEqual(h.spec()["name"], "optional")


@unittest.skipIf(IS_WINDOWS_BUILD, "mounting a tmpfs: Linux")
@needs(NATIVE_TRAINER, "GPUHOST_NATIVE_TRAINER (CTest sets it to the built tests/native_trainer)")
class RestoreOntoFullDisk(RemoteStoreCase):
    """Host B's checkpoint folder (a 2 MiB tmpfs) holds an older checkpoint of the job; the newer
    ones host A uploaded do not fit beside it. B says so with the numbers, leaves nothing behind,
    keeps its checkpoint byte for byte and trains on from it."""

    SIZE = 150_000  # doubles: 1.2 MB a checkpoint, one fits in 2 MiB and two do not

    def setUp(self):
        self.b = Host(self, self.moto, "full-b", "full-disk")
        os.makedirs(self.b.ck)
        if os.geteuid() != 0:
            missing("root, to mount a tmpfs")
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", self.b.ck],
                                 capture_output=True, text=True)
        if mounted.returncode != 0:
            missing("a 2 MiB tmpfs mount: " + mounted.stderr.strip())
        self.addCleanup(subprocess.run, ["umount", "-l", self.b.ck], capture_output=True)

    def test_newer_remote_checkpoint_that_does_not_fit_is_refused_and_the_local_one_resumed(self):
        a, b = Host(self, self.moto, "full-a", "full-disk"), self.b
        # B trained to step 20 earlier; A then went on to step 60, uploading steps 30 and 60. The
        # native trainer's names carry no step, so "newer" is by time (doc/remote-store.md).
        subprocess.run([NATIVE_TRAINER, "--steps", "20", "--every", "20", "--size", str(self.SIZE), "--out", b.ck],
                       check=True, capture_output=True, timeout=300)
        [local] = os.listdir(b.ck)
        with open(os.path.join(b.ck, local), "rb") as f:
            before = f.read()
        self.assert_exit(a.run([], a.native(60, 30, size=self.SIZE)), 0, a)
        self.assertEqual(len(self.moto.manifests("full-disk")), 2)

        proc = b.run([], b.native(60, 0, size=self.SIZE))
        self.assert_exit(proc, 0, b)
        self.assertEqual(b.records("checkpoint_restored"), [], b.summary())
        failures = [r["error"] for r in b.records("mirror_failed")]
        self.assertEqual(len(failures), 2, b.summary())  # step 60, then step 30: neither fits
        for error in failures:
            found = re.search(r"not enough free space on .*: it needs (\d+) bytes, (\d+) are free", error)
            self.assertTrue(found, error)
            needed, free = int(found.group(1)), int(found.group(2))
            self.assertGreaterEqual(needed, self.SIZE * 8)
            self.assertLess(free, needed)
        # Nothing partial: only the local checkpoint is there, unchanged; training went on from it.
        self.assertEqual(os.listdir(b.ck), [local])
        with open(os.path.join(b.ck, local), "rb") as f:
            self.assertEqual(f.read(), before)
        self.assertEqual(b.resume_lines(), [["OK", os.path.join(b.ck, local), "20"]])
        self.assertEqual(b.final_state(), native_reference(60, self.SIZE))


if __name__ == "__main__":
    unittest.main()
