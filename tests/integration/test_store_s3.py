"""The object-store client (src/store/) against a real S3 implementation: a local moto_server with
signature checking on (INITIAL_NO_AUTH_ACTION_COUNT, so every request after the setup is verified
by botocore's S3SigV4Auth), cross-checked with the aws CLI. moto verifies the signature over the
query string after decoding it (werkzeug turns %2F back into '/'), so even the aws CLI's signed
"prefix=a%2Fb" fails there: listings use a store URL without a prefix and prefixes without '/'. store_tool (store_tool.cc) drives the
client; the Windows build runs it under Wine, where WinHTTP talks plain http to 127.0.0.1."""
import hashlib
import json
import os
import random
import subprocess
import time
import unittest

from gpuhost_test import IS_WINDOWS_BUILD, WINE, have, host_path, needs, tmp_dir
from moto_s3 import MotoS3

TOOL = os.environ.get("GPUHOST_STORE_TOOL", "")
BUCKET = "gpuhost-it"
MIB = 1 << 20


def random_bytes(size, seed):
    return random.Random(seed).randbytes(size)


@needs(have("moto_server", "aws"), "moto_server and the aws CLI (Debian's python3-moto and awscli)")
class StoreAgainstMoto(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tmp_dir("store-s3")
        cls.moto = MotoS3(cls.dir, BUCKET, signed=True)
        cls.endpoint = cls.moto.endpoint
        cls.base_env = cls.moto.env
        cls.secret = cls.moto.secret
        cls.url = cls.moto.store_url("it/")
        cls.root_url = cls.moto.store_url()

    @classmethod
    def tearDownClass(cls):
        cls.moto.stop()

    @classmethod
    def aws(cls, *args, binary=False, check=True, env=None):
        return cls.moto.aws(*args, binary=binary, check=check, env=env)

    def tool(self, *args, expect_ok=True, env=None, url=None):
        cmd = ([WINE] if IS_WINDOWS_BUILD else []) + [TOOL, url or self.url] + list(args)
        proc = subprocess.run(cmd, env=env or self.base_env, capture_output=True, text=True, timeout=600)
        if expect_ok:
            self.assertEqual(proc.returncode, 0, "store_tool " + " ".join(args) + ":\n" + proc.stderr)
        return proc

    def write(self, name, data):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def read_back(self, key):
        """The object as the aws CLI downloads it."""
        return self.aws("s3", "cp", f"s3://{BUCKET}/it/{key}", "-", binary=True)

    @staticmethod
    def fields(output, name):
        return [line.split("=", 1)[1].split()[0] for line in output.splitlines() if line.startswith(name + "=")]

    def test_single_put_is_read_back_by_the_aws_cli(self):
        data = random_bytes(3 * MIB + 17, 1)
        path = self.write("single.bin", data)
        proc = self.tool("put", "single.bin", host_path(path))
        self.assertEqual(self.read_back("single.bin"), data)
        head = json.loads(self.aws("s3api", "head-object", "--bucket", BUCKET, "--key", "it/single.bin"))
        self.assertEqual(head["ContentLength"], len(data))
        self.assertEqual(head["ETag"].strip('"'), self.fields(proc.stdout, "etag")[0])
        self.assertEqual(head["ETag"].strip('"'), hashlib.md5(data).hexdigest())

    def test_multipart_upload_with_parallel_parts_is_read_back_by_the_aws_cli(self):
        data = random_bytes(4 * 5 * MIB + 12345, 2)
        path = self.write("multi.bin", data)
        proc = self.tool("upload", "ckpt/step-100/model.bin", host_path(path), str(5 * MIB), "4")
        self.assertEqual(self.fields(proc.stdout, "parts"), ["5"])
        hashes = {int(line.split()[0][5:]): line.split("sha256=")[1]
                  for line in proc.stdout.splitlines() if line.startswith("part=")}
        self.assertEqual(len(hashes), 5)
        self.assertEqual(hashes[2], hashlib.sha256(data[5 * MIB:10 * MIB]).hexdigest())
        self.assertEqual(self.read_back("ckpt/step-100/model.bin"), data)
        head = json.loads(self.aws("s3api", "head-object", "--bucket", BUCKET, "--key", "it/ckpt/step-100/model.bin"))
        self.assertTrue(head["ETag"].strip('"').endswith("-5"), head["ETag"])
        self.assertNotIn("it/ckpt/step-100/model.bin", self.aws("s3api", "list-multipart-uploads", "--bucket", BUCKET))

    def test_an_interrupted_upload_resumes_with_its_finished_parts(self):
        data = random_bytes(4 * 5 * MIB + 1, 3)
        path = self.write("resume.bin", data)
        first = self.tool("upload", "resume.bin", host_path(path), str(5 * MIB), "1", "2", expect_ok=False)
        self.assertNotEqual(first.returncode, 0)
        self.assertIn("can be resumed", first.stderr)
        upload_id = self.fields(first.stdout, "upload_id")[0]
        pending = json.loads(self.aws("s3api", "list-multipart-uploads", "--bucket", BUCKET))
        self.assertIn(upload_id, [u["UploadId"] for u in pending["Uploads"]])
        self.assertIn("upload=it/resume.bin id=" + upload_id, self.tool("uploads", "it", url=self.root_url).stdout)

        second = self.tool("resume", "resume.bin", host_path(path), str(5 * MIB), "2", upload_id)
        self.assertEqual(self.fields(second.stdout, "parts_reused"), ["2"])
        self.assertEqual(sorted(int(p) for p in self.fields(second.stdout, "part")), [3, 4, 5])
        self.assertEqual(self.read_back("resume.bin"), data)

    def test_an_object_the_aws_cli_uploaded_is_downloaded_by_ranged_gets(self):
        data = random_bytes(9 * MIB + 333, 4)
        path = self.write("from-cli.bin", data)
        self.aws("s3", "cp", path, f"s3://{BUCKET}/it/from-cli.bin")
        out = os.path.join(self.dir, "downloaded.bin")
        proc = self.tool("download", "from-cli.bin", host_path(out), str(MIB), "4")
        self.assertEqual(self.fields(proc.stdout, "size"), [str(len(data))])
        with open(out, "rb") as f:
            self.assertEqual(f.read(), data)
        ranged = os.path.join(self.dir, "range.bin")
        self.tool("get", "from-cli.bin", host_path(ranged), str(5 * MIB + 7), "1000")
        with open(ranged, "rb") as f:
            self.assertEqual(f.read(), data[5 * MIB + 7:5 * MIB + 1007])

    def test_list_head_and_delete(self):
        for i in range(5):
            self.aws("s3", "cp", "-", f"s3://{BUCKET}/listing/obj-{i}")  # empty objects
        self.aws("s3", "cp", self.write("one.bin", b"x" * 10), f"s3://{BUCKET}/listing/ten")
        listed = self.tool("list", "listing", url=self.root_url).stdout
        self.assertEqual(self.fields(listed, "object"), [f"listing/obj-{i}" for i in range(5)] + ["listing/ten"])
        self.assertIn("object=listing/ten size=10", listed)
        self.assertEqual(self.fields(self.tool("head", "listing/ten", url=self.root_url).stdout, "size"), ["10"])
        self.tool("delete", "listing/ten", url=self.root_url)
        missing = self.tool("head", "listing/ten", expect_ok=False, url=self.root_url)
        self.assertNotEqual(missing.returncode, 0)
        self.assertIn("NoSuchKey", missing.stderr)
        self.assertNotIn("listing/ten", self.tool("list", "listing", url=self.root_url).stdout)

    def test_stale_uploads_are_aborted(self):
        upload = json.loads(self.aws("s3api", "create-multipart-upload", "--bucket", BUCKET, "--key", "stale-x"))
        time.sleep(1.1)
        proc = self.tool("abort-stale", "stale", "1", url=self.root_url)
        self.assertEqual(self.fields(proc.stdout, "aborted"), ["1"])
        pending = self.aws("s3api", "list-multipart-uploads", "--bucket", BUCKET)
        self.assertNotIn(upload["UploadId"], pending)

    def test_a_wrong_secret_gets_a_clear_error_without_the_secret(self):
        wrong = "WrongSecretKeyThatMustNotLeak0123456789"
        env = dict(self.base_env, AWS_SECRET_ACCESS_KEY=wrong)
        head = self.tool("head", "anything", expect_ok=False, env=env)
        self.assertNotEqual(head.returncode, 0)
        self.assertIn("HEAD s3://gpuhost-it/it/anything: HTTP 4", head.stderr)
        put = self.tool("put", "x", host_path(self.write("x.bin", b"x")), expect_ok=False, env=env)
        self.assertIn("PUT s3://gpuhost-it/it/x: SignatureDoesNotMatch", put.stderr)
        self.assertIn("check the secret access key", put.stderr)
        # A session token is a secret too (moto rejects this one as InvalidToken).
        token_env = dict(env, AWS_SESSION_TOKEN="SessionTokenThatMustNotLeak")
        token = self.tool("put", "x", host_path(self.write("x.bin", b"x")), expect_ok=False, env=token_env)
        self.assertNotEqual(token.returncode, 0)
        for proc in (head, put, token):
            self.assertNotIn(wrong, proc.stdout + proc.stderr)
            self.assertNotIn("SessionTokenThatMustNotLeak", proc.stdout + proc.stderr)

    def test_a_missing_bucket_is_named_in_the_error(self):
        proc = self.tool("list", "x", expect_ok=False,
                         url=f"s3://no-such-bucket-gpuhost/?endpoint={self.endpoint}&region=us-east-1")
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("NoSuchBucket", proc.stderr)
        self.assertIn("check the bucket name", proc.stderr)


if __name__ == "__main__":
    unittest.main()
