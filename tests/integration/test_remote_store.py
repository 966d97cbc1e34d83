"""`gpuhost run --remote` and `gpuhost ckpt` against a real S3 implementation: a moto_server started
per test class on a free port, read back and written with the aws CLI (doc/remote-store.md).

Host A and host B are two job directories (two GPUHOST_HOME / --jobs-dir, two checkpoint folders)
sharing only the remote: B starts with nothing local and must resume from what A uploaded, ending
bit-identical to an uninterrupted run. The native trainer (tests/integration/trainers/
native_trainer.cc) runs on Linux and, for the Windows build, as an .exe under Wine next to
gpuhost.exe; the PyTorch trainer runs under Debian's python3-torch on Linux. Tamper tests change
the stored objects or manifest with the aws CLI and expect gpuhost to refuse with a clear message.
No timing assertions."""
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import unittest

from gpuhost_test import BIN, IS_WINDOWS_BUILD, TMP, WINE, host_path

HERE = os.path.dirname(os.path.abspath(__file__))
NATIVE_TRAINER = os.environ.get("GPUHOST_NATIVE_TRAINER", "")
TORCH_TRAINER = os.path.join(HERE, "trainers", "torch_trainer.py")
SYSTEM_PYTHON = "/usr/bin/python3"
BUCKET = "gpuhost-remote"
FAST = ["--cloud", "none", "--settle", "0.2", "--backoff", "0.1", "--max-backoff", "0.2", "--quiet"]
SIZE = 4096
KEY_HEX = "5f0c3a9e1b7d2468ace013579bdf2468ace013579bdf02468ace13579bdf0246"
OTHER_KEY_HEX = "a" * 63 + "b"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_journal(path):
    records = []
    with open(path, "rb") as f:
        for line in f.read().split(b"\n")[:-1]:
            records.append(json.loads(line.split(b" ", 2)[2]))
    return records


def torch_available():
    return os.path.exists(SYSTEM_PYTHON) and subprocess.run(
        [SYSTEM_PYTHON, "-c", "import torch"], capture_output=True).returncode == 0


def gpuhost_cmd(args):
    return ([WINE] if IS_WINDOWS_BUILD else []) + [BIN] + list(args)


class Moto:
    """A moto_server on a free port and an aws CLI bound to it."""

    def __init__(self, directory):
        self.port = free_port()
        self.endpoint = "http://127.0.0.1:%d" % self.port
        self.log = open(os.path.join(directory, "moto.log"), "w")
        self.proc = subprocess.Popen(["moto_server", "-p", str(self.port)], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("moto_server did not start; see " + self.log.name)
                time.sleep(0.2)
        self.env = dict(os.environ, AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
                        AWS_ACCESS_KEY_ID="AKIAIOSFODNN7EXAMPLE", AWS_SECRET_ACCESS_KEY="moto",
                        AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull, NO_COLOR="1")
        for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "GPUHOST_ENCRYPTION_KEY",
                    "GPUHOST_ENCRYPTION_KEY_FILE", "GPUHOST_MIRROR_PART_MIB"):
            self.env.pop(var, None)
        self.aws("s3api", "create-bucket", "--bucket", BUCKET)
        self.url = "s3://%s/?endpoint=%s&region=us-east-1" % (BUCKET, self.endpoint)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()

    def aws(self, *args, binary=False, check=True, data=None):
        proc = subprocess.run(["aws", "--endpoint-url", self.endpoint] + list(args), env=self.env,
                              input=data if data is not None else b"", capture_output=True, timeout=300)
        if check and proc.returncode != 0:
            raise AssertionError("aws " + " ".join(args) + " failed: " + proc.stderr.decode(errors="replace"))
        return proc.stdout if binary else proc.stdout.decode()

    def get(self, key):
        return self.aws("s3", "cp", "s3://%s/%s" % (BUCKET, key), "-", binary=True)

    def put(self, key, data):
        self.aws("s3", "cp", "-", "s3://%s/%s" % (BUCKET, key), data=data)

    def keys(self, prefix):
        out = self.aws("s3api", "list-objects-v2", "--bucket", BUCKET, "--prefix", prefix)
        return sorted(o["Key"] for o in json.loads(out or "{}").get("Contents", []))

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
        self.env = dict(moto.env)
        if key_hex:
            self.key_file = os.path.join(self.dir, "key.hex")
            with open(self.key_file, "w") as f:
                f.write(key_hex + "\n")

    def native(self, steps, every):
        return [host_path(NATIVE_TRAINER), "--steps", str(steps), "--every", str(every), "--step-time-ms", "30",
                "--size", str(SIZE), "--out", host_path(self.ck), "--resume-log", host_path(self.resume_log),
                "--final-state", host_path(self.final), "--resume", "{resume}"]

    def torch(self, steps, every, state_mb=0):
        return [SYSTEM_PYTHON, TORCH_TRAINER, "--steps", str(steps), "--every", str(every), "--step-time", "0.02",
                "--state-mb", str(state_mb), "--out", self.ck, "--resume-log", self.resume_log,
                "--final-state", self.final, "--resume", "{resume}"]

    def run(self, flags, trainer, timeout=300, env=None):
        argv = gpuhost_cmd(["run", "--name", self.job, "--jobs-dir", host_path(self.jobs), "--checkpoints",
                            host_path(self.ck), "--remote", self.moto.url] + FAST + list(flags) + ["--"] + trainer)
        return subprocess.run(argv, env=dict(self.env, **(env or {})), capture_output=True, text=True, timeout=timeout)

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


def native_reference(steps):
    return reference("native", steps, lambda d, final: subprocess.run(
        ([WINE] if IS_WINDOWS_BUILD else []) +
        [NATIVE_TRAINER, "--steps", str(steps), "--every", "0", "--size", str(SIZE), "--out",
         host_path(os.path.join(d, "ck")), "--final-state", host_path(final)], capture_output=True, text=True,
        timeout=300))


def torch_reference(steps, state_mb):
    return reference("torch-%g" % state_mb, steps, lambda d, final: subprocess.run(
        [SYSTEM_PYTHON, TORCH_TRAINER, "--steps", str(steps), "--every", "0", "--state-mb", str(state_mb),
         "--out", os.path.join(d, "ck"), "--final-state", final], capture_output=True, text=True, timeout=300))


@unittest.skipUnless(shutil.which("moto_server") and shutil.which("aws"), "moto_server and the aws CLI are needed")
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


@unittest.skipUnless(NATIVE_TRAINER, "GPUHOST_NATIVE_TRAINER not set")
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

    @unittest.skipIf(IS_WINDOWS_BUILD, "SIGKILL of the supervisor: Linux")
    def test_supervisor_killed_mid_upload_resumes_the_same_multipart_upload(self):
        h = Host(self, self.moto, "killed-upload", "killed-upload")
        size = 5_000_000  # 40 MB of weights: eight 5 MiB parts
        subprocess.run([NATIVE_TRAINER, "--steps", "10", "--every", "10", "--size", str(size), "--out", h.ck],
                       check=True, capture_output=True, timeout=300)
        trainer = [NATIVE_TRAINER, "--steps", "100000", "--every", "0", "--step-time-ms", "100", "--size", str(size),
                   "--out", h.ck, "--resume", "{resume}"]
        argv = gpuhost_cmd(["run", "--name", h.job, "--jobs-dir", h.jobs, "--checkpoints", h.ck, "--remote",
                            self.moto.url] + FAST + ["--"] + trainer)
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
        first = h.journal()
        if any(r["type"] == "mirror_durable" for r in first):
            self.skipTest("the upload finished before the kill landed")
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
        # The same multipart upload was completed: no new one was started for the object.
        self.assertEqual({r["upload_id"] for r in second if r["type"] == "mirror_upload_started"} - {upload_id}, set())
        self.assertEqual([r for r in second if r["type"] == "mirror_upload_aborted"], [])
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
        proc = h.ckpt("prune", "--keep", "1", "--encryption-key-file", host_path(h.key_file))
        self.assert_exit(proc, 0)
        self.assertEqual(len(self.moto.manifests("manual")), 1)


@unittest.skipUnless(NATIVE_TRAINER, "GPUHOST_NATIVE_TRAINER not set")
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
        if len(data) < header + 2 * frame:
            self.skipTest("the object has fewer than two full chunks")
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
            raise unittest.SkipTest("python3-torch is not installed for /usr/bin/python3")
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


if __name__ == "__main__":
    unittest.main()
