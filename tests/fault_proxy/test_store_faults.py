"""The object-store client (src/store/) through fault_proxy.py in front of a moto_server that checks
SigV4 signatures: 5xx and SlowDown, connection resets mid-part, stalls, truncated and short bodies,
an object overwritten mid-download, uploads that keep failing. What must hold: transient faults are
retried and the transfer ends with the exact bytes; a fault that does not go away is a clear
failure, never a success (no object appears, no downloaded file appears). A CompleteMultipartUpload
that answers late is waited for; one whose answer is lost counts only when the object is exactly
what the parts make. store_tool (tests/integration/store_tool.cc) drives the client with a short
stall timeout and fast backoff; the Windows build runs it under Wine (WinHTTP). The aws CLI sets up
and checks the bucket directly against moto, never through the proxy.
"""
import hashlib
import json
import os
import random
import subprocess
import sys
import unittest
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from gpuhost_test import IS_WINDOWS_BUILD, WINE, have, host_path, needs, tmp_dir  # noqa: E402
from moto_s3 import MotoS3, free_port, wait_for_port  # noqa: E402

TOOL = os.environ.get("GPUHOST_STORE_TOOL", "")
PROXY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fault_proxy.py")
BUCKET = "gpuhost-faults"
MIB = 1 << 20
FAST = ["--stall-timeout-ms", "2000", "--base-delay-ms", "50", "--attempts", "4"]


@needs(have("moto_server", "aws"), "moto_server and the aws CLI (Debian's python3-moto and awscli)")
class StoreThroughFaultProxy(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tmp_dir("store-faults")
        cls.moto = MotoS3(cls.dir, BUCKET, signed=True)
        cls.moto_endpoint = cls.moto.endpoint
        cls.base_env = cls.moto.env
        # The proxy listens on the port the signed URLs name; moto verifies each signature against
        # the Host header the proxy passes through unchanged.
        cls.proxy_port = free_port()
        cls.proxy_log = open(os.path.join(cls.dir, "proxy.log"), "w")
        cls.proxy = subprocess.Popen([sys.executable, PROXY, "--upstream", f"127.0.0.1:{cls.moto.port}",
                                      "--listen", str(cls.proxy_port)], stdout=cls.proxy_log,
                                     stderr=subprocess.STDOUT)
        try:
            wait_for_port(cls.proxy_port, cls.proxy, cls.proxy_log.name)
        except RuntimeError:
            cls.moto.stop()
            raise
        cls.url = cls.moto.store_url(endpoint=f"http://127.0.0.1:{cls.proxy_port}")

    @classmethod
    def tearDownClass(cls):
        cls.proxy.terminate()
        cls.proxy.wait(timeout=30)
        cls.proxy_log.close()
        cls.moto.stop()

    def setUp(self):
        self.control("DELETE", "rules")

    @classmethod
    def aws(cls, *args, check=True):
        return cls.moto.aws(*args, check=check)

    def control(self, method, what, body=None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://127.0.0.1:{self.proxy_port}/__fault__/{what}", data=data,
                                         method=method)
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())

    def faults(self, *rules):
        self.control("POST", "rules", list(rules))

    def requests(self, method, target_part):
        """The requests the proxy saw (since setUp) with this method whose target contains target_part."""
        return [r for r in self.control("GET", "log") if r["method"] == method and target_part in r["target"]]

    def tool(self, *args, expect_ok=True, flags=()):
        """store_tool with the FAST flags, then `flags` (which override them), then the command."""
        cmd = ([WINE] if IS_WINDOWS_BUILD else []) + [TOOL] + FAST + list(flags) + [self.url] + list(args)
        proc = subprocess.run(cmd, env=self.base_env, capture_output=True, text=True, timeout=600)
        if expect_ok:
            self.assertEqual(proc.returncode, 0, "store_tool %s failed: %s" % (args, proc.stderr))
        else:
            self.assertNotEqual(proc.returncode, 0, "store_tool %s succeeded: %s" % (args, proc.stdout))
        return proc

    @staticmethod
    def fields(output, name):
        """The values of the "name=value" lines (the first word after '=')."""
        return [line.split("=", 1)[1].split()[0] for line in output.splitlines() if line.startswith(name + "=")]

    @staticmethod
    def part_etags(output):
        """{part number: ETag} from the tool's "part=N size=S etag=E sha256=H" lines."""
        parts = {}
        for line in output.splitlines():
            if line.startswith("part="):
                words = dict(word.split("=", 1) for word in line.split())
                parts[words["part"]] = words["etag"]
        return parts

    def write(self, name, size, seed):
        path = os.path.join(self.dir, name)
        data = random.Random(seed).randbytes(size)
        with open(path, "wb") as f:
            f.write(data)
        return path, data

    def stored(self, key):
        """The object's bytes as the aws CLI reads them straight from moto, or None when absent."""
        out = os.path.join(self.dir, "readback.bin")
        if os.path.exists(out):
            os.remove(out)
        proc = subprocess.run(["aws", "--endpoint-url", self.moto_endpoint, "s3", "cp", f"s3://{BUCKET}/{key}", out],
                              env=self.base_env, capture_output=True, timeout=300)
        if proc.returncode != 0:
            return None
        with open(out, "rb") as f:
            return f.read()

    def upload(self, key, data_path, expect_ok=True):
        return self.tool("upload", key, host_path(data_path), str(5 * MIB), "3", expect_ok=expect_ok)

    def put_directly(self, key, data):
        path = os.path.join(self.dir, "direct.bin")
        with open(path, "wb") as f:
            f.write(data)
        self.aws("s3", "cp", path, f"s3://{BUCKET}/{key}")

    def download(self, key, name, expect_ok=True, flags=()):
        out = os.path.join(self.dir, name)
        for leftover in (out, out + ".partial"):
            if os.path.exists(leftover):
                os.remove(leftover)
        proc = self.tool("download", key, host_path(out), str(2 * MIB), "3", expect_ok=expect_ok, flags=flags)
        return out, proc

    def assert_same_bytes(self, got, want):
        self.assertIsNotNone(got)
        self.assertEqual(len(got), len(want))
        self.assertEqual(hashlib.sha256(got).hexdigest(), hashlib.sha256(want).hexdigest())

    # Pass-through: a proxy on another port than moto keeps every signature valid.

    def test_signed_requests_pass_through_the_proxy_unchanged(self):
        path, data = self.write("plain.bin", 12 * MIB + 3, 1)
        self.upload("plain.bin", path)
        self.assert_same_bytes(self.stored("plain.bin"), data)
        out, _ = self.download("plain.bin", "plain.out")
        with open(out, "rb") as f:
            self.assert_same_bytes(f.read(), data)
        self.assertEqual(len(self.requests("PUT", "partNumber=")), 3)

    # Transient faults are retried and the transfer ends with the exact bytes.

    def test_500_and_slowdown_on_parts_are_retried(self):
        path, data = self.write("retry.bin", 12 * MIB, 2)
        self.faults({"method": "PUT", "target": "partNumber=2&", "action": "error", "status": 500, "times": 2},
                    {"method": "PUT", "target": "partNumber=3&", "action": "error", "status": 503})
        self.upload("retry.bin", path)
        self.assertEqual(len(self.requests("PUT", "partNumber=2&")), 3)
        self.assertEqual(len(self.requests("PUT", "partNumber=3&")), 2)
        self.assert_same_bytes(self.stored("retry.bin"), data)

    def test_slowdown_on_create_and_complete_is_retried(self):
        path, data = self.write("complete.bin", 11 * MIB, 3)
        self.faults({"method": "POST", "target": r"\?uploads", "action": "error", "status": 503},
                    {"method": "POST", "target": "uploadId=", "action": "error", "status": 503})
        self.upload("complete.bin", path)
        self.assertEqual(len(self.requests("POST", "uploadId=")), 2)
        self.assert_same_bytes(self.stored("complete.bin"), data)

    def test_a_connection_reset_mid_part_is_retried(self):
        path, data = self.write("reset.bin", 12 * MIB, 4)
        self.faults({"method": "PUT", "target": "partNumber=2&", "action": "reset_request", "bytes": MIB})
        self.upload("reset.bin", path)
        self.assertEqual(len(self.requests("PUT", "partNumber=2&")), 2)
        self.assert_same_bytes(self.stored("reset.bin"), data)

    def test_a_connection_reset_mid_download_is_retried(self):
        data = random.Random(5).randbytes(7 * MIB + 11)
        self.put_directly("reset-get.bin", data)
        self.faults({"method": "GET", "target": "reset-get.bin", "action": "reset_response", "bytes": 300000,
                     "nth": 2})
        out, _ = self.download("reset-get.bin", "reset-get.out")
        with open(out, "rb") as f:
            self.assert_same_bytes(f.read(), data)
        self.assertEqual(len(self.requests("GET", "reset-get.bin")), 5)  # 4 ranges, one twice

    # The stalls last 20 s, far past the 2 s stall timeout: libcurl judges "no byte moved" by its
    # current speed, an average over the last few seconds (lib/progress.c), so on Linux a stall is
    # noticed some seconds after the timeout (about 7 s in all here).
    def test_a_stalled_download_hits_the_stall_timeout_and_is_retried(self):
        data = random.Random(6).randbytes(5 * MIB)
        self.put_directly("stall-get.bin", data)
        self.faults({"method": "GET", "target": "stall-get.bin", "action": "stall", "bytes": 65536, "seconds": 20})
        out, _ = self.download("stall-get.bin", "stall-get.out")
        with open(out, "rb") as f:
            self.assert_same_bytes(f.read(), data)
        self.assertEqual(len(self.requests("GET", "stall-get.bin")), 4)  # 3 ranges, one twice

    def test_a_server_that_stops_reading_a_part_is_retried(self):
        path, data = self.write("stall-put.bin", 11 * MIB, 7)
        self.faults({"method": "PUT", "target": "partNumber=1&", "action": "stall", "seconds": 20})
        self.upload("stall-put.bin", path)
        self.assertEqual(len(self.requests("PUT", "partNumber=1&")), 2)
        self.assert_same_bytes(self.stored("stall-put.bin"), data)

    def test_a_truncated_range_is_fetched_again(self):
        data = random.Random(8).randbytes(5 * MIB)
        self.put_directly("trunc-once.bin", data)
        self.faults({"method": "GET", "target": "trunc-once.bin", "action": "truncate", "bytes": 1000})
        out, _ = self.download("trunc-once.bin", "trunc-once.out")
        with open(out, "rb") as f:
            self.assert_same_bytes(f.read(), data)

    # Faults that do not go away fail clearly and leave nothing that looks complete.

    def test_bodies_that_always_end_early_fail_the_download(self):
        data = random.Random(9).randbytes(5 * MIB)
        self.put_directly("trunc.bin", data)
        self.faults({"method": "GET", "target": "trunc.bin", "action": "truncate", "bytes": 1000, "times": 0})
        out, proc = self.download("trunc.bin", "trunc.out", expect_ok=False)
        self.assertIn("trunc.bin", proc.stderr)
        self.assertFalse(os.path.exists(out))
        self.assertFalse(os.path.exists(out + ".partial"))
        get = self.tool("get", "trunc.bin", host_path(out), expect_ok=False)
        self.assertIn("trunc.bin", get.stderr)

    def test_a_body_shorter_than_its_range_fails_the_download(self):
        data = random.Random(10).randbytes(5 * MIB)
        self.put_directly("short.bin", data)
        # The lying server: Content-Length rewritten to match the shortened body.
        self.faults({"method": "GET", "target": "short.bin", "action": "short", "bytes": 4096, "times": 0})
        out, proc = self.download("short.bin", "short.out", expect_ok=False)
        self.assertIn("short.bin", proc.stderr)
        self.assertFalse(os.path.exists(out))
        self.assertFalse(os.path.exists(out + ".partial"))

    def test_an_object_overwritten_mid_download_fails_instead_of_mixing_versions(self):
        old = random.Random(11).randbytes(6 * MIB)
        new = random.Random(12).randbytes(6 * MIB)
        self.put_directly("changed.bin", old)
        replacement = os.path.join(self.dir, "replacement.bin")
        with open(replacement, "wb") as f:
            f.write(new)
        # Before the second range is forwarded, the aws CLI replaces the object straight on moto.
        self.faults({"method": "GET", "target": "changed.bin", "action": "hook", "nth": 2,
                     "command": ["aws", "--endpoint-url", self.moto_endpoint, "s3", "cp", replacement,
                                 f"s3://{BUCKET}/changed.bin"],
                     "env": {k: v for k, v in self.base_env.items() if k.startswith("AWS_")}})
        # A stall timeout longer than the aws CLI takes (it can take more than the 2 s, and libcurl's
        # late notice of them, on a loaded host): otherwise the client gives up on the held range
        # and its retry reaches moto before the object is replaced.
        out, proc = self.download("changed.bin", "changed.out", expect_ok=False,
                                  flags=["--stall-timeout-ms", "120000"])
        hooks = [r["hook"] for r in self.requests("GET", "changed.bin") if "hook" in r]
        self.assertEqual(hooks, [0])
        self.assertIn("changed.bin", proc.stderr)
        self.assertIn("412", proc.stderr)
        self.assertFalse(os.path.exists(out))
        self.assertFalse(os.path.exists(out + ".partial"))
        self.assert_same_bytes(self.stored("changed.bin"), new)

    def test_a_part_that_keeps_failing_fails_the_upload_and_stores_nothing(self):
        path, _ = self.write("fails.bin", 12 * MIB, 13)
        self.faults({"method": "PUT", "target": "partNumber=2&", "action": "error", "status": 503, "times": 0})
        proc = self.upload("fails.bin", path, expect_ok=False)
        self.assertIn("gave up after 4 attempts", proc.stderr)
        self.assertIn("fails.bin", proc.stderr)
        self.assertEqual(self.fields(proc.stdout, "etag"), [])
        self.assertEqual(len(self.requests("PUT", "partNumber=2&")), 4)
        self.assertIsNone(self.stored("fails.bin"))
        self.assertEqual(len(self.requests("POST", "uploadId=")), 0)  # never completed
        uploads = self.tool("uploads", "fails.bin").stdout
        self.assertIn("upload=fails.bin", uploads)  # left in place, resumable

    # A journal ("manifest") whose parts the server does not have: resuming never trusts it blindly.

    def test_resuming_with_a_manifest_that_names_missing_or_different_parts_sends_them_again(self):
        path, data = self.write("manifest.bin", 15 * MIB, 16)  # 3 parts
        self.faults({"method": "PUT", "target": "partNumber=3&", "action": "error", "status": 503, "times": 0})
        first = self.upload("manifest.bin", path, expect_ok=False)
        upload_id = first.stdout.split("upload_id=")[1].split()[0]
        stored = self.part_etags(first.stdout)
        self.assertEqual(sorted(stored), ["1", "2"])
        self.control("DELETE", "rules")
        # The manifest: part 1 as stored, part 2 with an ETag the server does not have, part 3
        # (never stored) with an invented one.
        manifest = f"1:{stored['1']},2:0123456789abcdef0123456789abcdef,3:fedcba9876543210fedcba9876543210"
        second = self.tool("resume", "manifest.bin", host_path(path), str(5 * MIB), "3", upload_id, manifest)
        self.assertIn("parts_reused=1", second.stdout)
        self.assertEqual(len(self.requests("PUT", "partNumber=1&")), 0)
        self.assertEqual(len(self.requests("PUT", "partNumber=2&")), 1)
        self.assertEqual(len(self.requests("PUT", "partNumber=3&")), 1)
        self.assert_same_bytes(self.stored("manifest.bin"), data)

    def test_resuming_an_upload_the_server_no_longer_has_fails_clearly(self):
        path, _ = self.write("gone.bin", 11 * MIB, 17)
        self.faults({"method": "PUT", "target": "partNumber=2&", "action": "error", "status": 500, "times": 0})
        first = self.upload("gone.bin", path, expect_ok=False)
        upload_id = first.stdout.split("upload_id=")[1].split()[0]
        self.aws("s3api", "abort-multipart-upload", "--bucket", BUCKET, "--key", "gone.bin", "--upload-id", upload_id)
        self.control("DELETE", "rules")
        second = self.tool("resume", "gone.bin", host_path(path), str(5 * MIB), "3", upload_id, "", expect_ok=False)
        self.assertIn(upload_id, second.stderr)
        self.assertEqual(self.fields(second.stdout, "etag"), [])
        self.assertIsNone(self.stored("gone.bin"))

    def test_a_complete_that_keeps_failing_fails_the_upload_and_stores_nothing(self):
        path, _ = self.write("nocomplete.bin", 11 * MIB, 14)
        self.faults({"method": "POST", "target": "uploadId=", "action": "error", "status": 500, "times": 0})
        proc = self.upload("nocomplete.bin", path, expect_ok=False)
        self.assertIn("nocomplete.bin", proc.stderr)
        self.assertEqual(self.fields(proc.stdout, "etag"), [])
        self.assertIsNone(self.stored("nocomplete.bin"))

    def test_a_reset_on_every_try_of_a_single_put_fails_and_stores_nothing(self):
        path, _ = self.write("resets.bin", 2 * MIB, 15)
        self.faults({"method": "PUT", "target": "resets.bin", "action": "reset_request", "bytes": 100000,
                     "times": 0})
        proc = self.tool("put", "resets.bin", host_path(path), expect_ok=False)
        self.assertIn("resets.bin", proc.stderr)
        self.assertIn("gave up after 4 attempts", proc.stderr)
        self.assertIsNone(self.stored("resets.bin"))


    # CompleteMultipartUpload: a late answer is waited for; a lost one is settled by HEAD, and only
    # the exact object the parts make counts as completed.

    @staticmethod
    def multipart_etag(data, part_size):
        """S3's ETag of `data` uploaded in parts of part_size: md5 of the parts' binary md5s, "-N"."""
        digests = [hashlib.md5(data[i:i + part_size]).digest() for i in range(0, len(data), part_size)]
        return "%s-%d" % (hashlib.md5(b"".join(digests)).hexdigest(), len(digests))

    def head_etag(self, key):
        return json.loads(self.aws("s3api", "head-object", "--bucket", BUCKET, "--key", key))["ETag"].strip('"')

    def test_a_complete_answered_after_the_stall_timeout_succeeds_on_its_first_attempt(self):
        path, data = self.write("slow-complete.bin", 11 * MIB, 18)
        # Silent for 12 s, far past the 2 s stall timeout (and libcurl's late notice of it), as moto
        # is while it assembles a large object; shorter than the complete timeout (10 minutes).
        self.faults({"method": "POST", "target": "uploadId=", "action": "hold_response", "seconds": 12})
        proc = self.upload("slow-complete.bin", path)
        self.assertEqual(len(self.requests("POST", "uploadId=")), 1)  # never timed out, never retried
        self.assertEqual(self.fields(proc.stdout, "etag"), [self.head_etag("slow-complete.bin")])
        self.assert_same_bytes(self.stored("slow-complete.bin"), data)

    def test_a_complete_whose_answer_is_lost_is_confirmed_by_the_exact_etag(self):
        path, data = self.write("lost-complete.bin", 11 * MIB, 19)
        # moto completes the upload and the answer is lost; the retry finds the upload gone
        # (NoSuchUpload, answered by the proxy: moto 5 answers a repeated Complete with success).
        self.faults({"method": "POST", "target": "uploadId=", "action": "drop_response"},
                    {"method": "POST", "target": "uploadId=", "action": "error", "status": 404, "nth": 2,
                     "times": 0})
        proc = self.upload("lost-complete.bin", path)
        self.assertEqual(len(self.requests("POST", "uploadId=")), 2)
        self.assertEqual(len(self.requests("HEAD", "lost-complete.bin")), 1)
        expected = self.multipart_etag(data, 5 * MIB)
        self.assertEqual(self.fields(proc.stdout, "etag"), [expected])
        self.assertEqual(self.head_etag("lost-complete.bin"), expected)
        self.assert_same_bytes(self.stored("lost-complete.bin"), data)

    def test_a_complete_whose_every_answer_is_lost_is_confirmed_by_the_exact_etag(self):
        path, data = self.write("lost-all.bin", 11 * MIB, 22)
        # Every try reaches moto (the first completes, the others repeat it) and no answer returns.
        self.faults({"method": "POST", "target": "uploadId=", "action": "drop_response", "times": 0})
        proc = self.upload("lost-all.bin", path)
        self.assertEqual(len(self.requests("POST", "uploadId=")), 4)  # --attempts 4
        self.assertEqual(len(self.requests("HEAD", "lost-all.bin")), 1)
        expected = self.multipart_etag(data, 5 * MIB)
        self.assertEqual(self.fields(proc.stdout, "etag"), [expected])
        self.assert_same_bytes(self.stored("lost-all.bin"), data)

    def test_a_lost_complete_is_refused_when_another_object_replaced_ours(self):
        path, _ = self.write("replaced.bin", 11 * MIB, 20)
        other = random.Random(21).randbytes(11 * MIB)
        replacement = os.path.join(self.dir, "replacement-complete.bin")
        with open(replacement, "wb") as f:
            f.write(other)
        # The aws CLI uploads the other object in 5 MiB parts too: same size, same part count
        # ("...-3"), so only the exact ETag tells it from ours.
        config = os.path.join(self.dir, "aws-5mib-parts.ini")
        with open(config, "w") as f:
            f.write("[default]\ns3 =\n    multipart_threshold = 5MB\n    multipart_chunksize = 5MB\n")
        env = {k: v for k, v in self.base_env.items() if k.startswith("AWS_")}
        env["AWS_CONFIG_FILE"] = config
        # moto completes ours and the answer is lost; before the retry reaches moto, the aws CLI
        # puts the other object under the same key straight to moto.
        self.faults({"method": "POST", "target": "uploadId=", "action": "drop_response"},
                    {"method": "POST", "target": "uploadId=", "action": "hook", "nth": 2,
                     "command": ["aws", "--endpoint-url", self.moto_endpoint, "s3", "cp", replacement,
                                 f"s3://{BUCKET}/replaced.bin"],
                     "env": env})
        proc = self.upload("replaced.bin", path, expect_ok=False)
        self.assertEqual([r.get("hook") for r in self.requests("POST", "uploadId=") if "hook" in r], [0])
        replaced_etag = self.head_etag("replaced.bin")
        self.assertEqual(replaced_etag, self.multipart_etag(other, 5 * MIB))
        self.assertIn("replaced.bin", proc.stderr)
        self.assertIn("not the one these parts make", proc.stderr)
        self.assertIn(replaced_etag, proc.stderr)
        self.assertEqual(self.fields(proc.stdout, "etag"), [])
        self.assert_same_bytes(self.stored("replaced.bin"), other)


if __name__ == "__main__":
    unittest.main()
