"""A local moto_server as the S3 endpoint of the object-store tests, and the aws CLI bound to it.
Standard library only, importable without the gpuhost test environment (benchmarks use it too).

signed=True turns moto's signature checking on: INITIAL_NO_AUTH_ACTION_COUNT lets the setup
(create-user, create-access-key, put-user-policy, create-bucket) through unsigned; every request
after it is verified by botocore's S3SigV4Auth with the new user's key. moto verifies the signature
over the query string after decoding it (werkzeug turns %2F back into '/'), so signed listings need
prefixes without '/'; tests that list nested prefixes use signed=False."""
import json
import os
import socket
import subprocess
import time

# Variables that would make the aws CLI (or gpuhost) use another identity, region or key than the
# ones the tests set.
_FOREIGN_ENV = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "GPUHOST_ENCRYPTION_KEY",
                "GPUHOST_ENCRYPTION_KEY_FILE", "GPUHOST_MIRROR_PART_MIB")
_SETUP_ACTIONS = 4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, process, log_name, timeout=60):
    """Returns once something listens on 127.0.0.1:port; raises when `process` exits first."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("server on port %d did not start; see %s" % (port, log_name))
            time.sleep(0.2)


class MotoS3:
    """moto_server on a free port with one bucket; `env` holds the aws CLI's (and gpuhost's)
    credentials for it."""

    def __init__(self, directory, bucket, signed=False):
        self.port = free_port()
        self.endpoint = "http://127.0.0.1:%d" % self.port
        self.bucket = bucket
        server_env = dict(os.environ)
        if signed:
            server_env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(_SETUP_ACTIONS)
        self.log = open(os.path.join(directory, "moto.log"), "w")
        self.proc = subprocess.Popen(["moto_server", "-p", str(self.port)], env=server_env, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        try:
            wait_for_port(self.port, self.proc, self.log.name)
        except RuntimeError:
            self.stop()
            raise
        self.env = dict(os.environ, AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
                        AWS_ACCESS_KEY_ID="AKIAIOSFODNN7EXAMPLE", AWS_SECRET_ACCESS_KEY="moto",
                        AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull, NO_COLOR="1")
        for var in _FOREIGN_ENV:
            self.env.pop(var, None)
        self.secret = self.env["AWS_SECRET_ACCESS_KEY"]
        if signed:
            self.aws("iam", "create-user", "--user-name", "gpuhost")
            key = json.loads(self.aws("iam", "create-access-key", "--user-name", "gpuhost"))["AccessKey"]
            self.aws("iam", "put-user-policy", "--user-name", "gpuhost", "--policy-name", "all",
                     "--policy-document", json.dumps({"Version": "2012-10-17", "Statement": [
                         {"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
            self.env["AWS_ACCESS_KEY_ID"] = key["AccessKeyId"]
            self.env["AWS_SECRET_ACCESS_KEY"] = key["SecretAccessKey"]
            self.secret = key["SecretAccessKey"]
        self.aws("s3api", "create-bucket", "--bucket", bucket)

    def store_url(self, prefix="", endpoint=None):
        """A gpuhost store URL for the bucket (through `endpoint`, e.g. a proxy, when given)."""
        return "s3://%s/%s?endpoint=%s&region=us-east-1" % (self.bucket, prefix, endpoint or self.endpoint)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def aws(self, *args, binary=False, check=True, data=None, env=None, timeout=300):
        """Runs `aws --endpoint-url <moto> args...`; stdout as text (bytes when binary)."""
        proc = subprocess.run(["aws", "--endpoint-url", self.endpoint] + list(args), env=env or self.env,
                              input=data if data is not None else b"", capture_output=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError("aws " + " ".join(args) + " failed: " + proc.stderr.decode(errors="replace"))
        return proc.stdout if binary else proc.stdout.decode()

    def get(self, key):
        return self.aws("s3", "cp", "s3://%s/%s" % (self.bucket, key), "-", binary=True)

    def put(self, key, data):
        self.aws("s3", "cp", "-", "s3://%s/%s" % (self.bucket, key), data=data)

    def keys(self, prefix):
        out = self.aws("s3api", "list-objects-v2", "--bucket", self.bucket, "--prefix", prefix)
        return sorted(o["Key"] for o in json.loads(out or "{}").get("Contents", []))
