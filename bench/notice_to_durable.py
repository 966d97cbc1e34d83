#!/usr/bin/env python3
# Benchmark: from a preemption notice appearing to a ~1 GiB checkpoint being durable in object
# storage, with `gpuhost run --remote`. The target is Azure's and GCP's notice time, 30 s
# (AWS spot gives 120 s), on loopback.
#
# Per round, all fresh: an S3 endpoint (moto_server and/or bench/s3_endpoint.cc, one bucket), the
# fake AWS metadata service (tests/fake_metadata/server.py --cloud aws) and
#   gpuhost run --cloud aws --metadata-endpoint URL --remote s3://... -- python3 torch_trainer.py
#       --state-mb 1024 --every 0
# (Debian's python3-torch; a 1 GiB buffer in the model, no periodic checkpoints). Once the trainer
# prints its first step, the notice is posted ({"in_seconds": 120}: AWS spot's two minutes).
# gpuhost sees it at its next poll (--poll-interval, default 5 s as AWS recommends), sends SIGUSR1,
# the trainer saves at the end of its step (torch.save in place), gpuhost waits for the file to
# settle (--settle, default 2 s), validates and hashes it, journals the commit and mirrors it:
# SHA-256 of each 64 MiB part, a parallel multipart upload (4 in flight), the manifest last, then
# journals mirror_durable (doc/remote-store.md) and mirror_deadline {"durable": true}.
#
# Times: the notice's POST (this script's clock), the journal's notice, checkpoint_committed and
# mirror_durable records (milliseconds), and the trainer's "save requested" / "saved" lines as
# gpuhost echoes them. Phases: detect (POST -> notice record: the poll), save (notice -> "saved":
# the end of the step and torch.save), commit (saved -> committed: settle, validation, hashing,
# journal fsync), upload (committed -> mirror_durable). Medians over --rounds.
#
# Usage: bench/notice_to_durable.py [--build build/linux] [--bench-build build/s3bench-linux]
#        [--endpoint moto|lean|both] [--rounds 3] [--state-mb 1024] [--poll-interval 5]
#        [--settle 2] [--lean-dir /dev/shm]
#        (gpuhost from --build; s3_endpoint from --bench-build: cmake --build DIR --target s3_endpoint)
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from run_journal import DEBIAN_PYTHON, REPO, TORCH_TRAINER, first, fresh_dir, host_conditions, read_journal, when
from store_throughput import BUCKET, start_lean, start_moto

METADATA_SERVER = os.path.join(REPO, "tests", "fake_metadata", "server.py")
TARGET_S = 30.0  # Azure Scheduled Events and GCP preemption: 30 s (research/02 §1.2, §1.4)
NOTICE_DEADLINE_S = 120  # AWS spot instance-action: two minutes


def read_lines(stream, stamps):
    for raw in stream:
        line = raw.decode(errors="replace").strip()
        now = time.time()
        if line.startswith("step ") and "first_step" not in stamps:
            stamps["first_step"] = now
        elif line.startswith("save requested") and "requested" not in stamps:
            stamps["requested"] = now
        elif line.startswith("saved ") and "saved" not in stamps:
            stamps["saved"] = now


def post_notice(port, in_seconds):
    request = urllib.request.Request("http://127.0.0.1:%d/_control/notice" % port,
                                     data=json.dumps({"in_seconds": in_seconds}).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()


def aws_env():
    env = dict(os.environ, AWS_ACCESS_KEY_ID="AKIAIOSFODNN7EXAMPLE", AWS_SECRET_ACCESS_KEY="bench",
               AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE=os.devnull,
               AWS_SHARED_CREDENTIALS_FILE=os.devnull, NO_COLOR="1")
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "GPUHOST_ENCRYPTION_KEY",
                "GPUHOST_ENCRYPTION_KEY_FILE", "GPUHOST_MIRROR_PART_MIB"):
        env.pop(var, None)
    return env


def one_round(args, gpuhost, lean_binary, name, index):
    work = fresh_dir("notice_to_durable/%s-%d" % (name, index))
    env = aws_env()
    env["GPUHOST_HOME"] = os.path.join(work, "home")
    lean_data = None
    if name == "moto":
        server, endpoint, server_log = start_moto(work)
    else:
        lean_data = tempfile.mkdtemp(prefix="gpuhost-s3-endpoint-", dir=args.lean_dir)
        server, endpoint, server_log = start_lean(lean_binary, lean_data, "md5", work)
    metadata = subprocess.Popen([sys.executable, METADATA_SERVER, "--cloud", "aws"], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
    try:
        metadata_port = json.loads(metadata.stdout.readline())["port"]
        subprocess.run(["aws", "--endpoint-url", endpoint, "s3api", "create-bucket", "--bucket", BUCKET], env=env,
                       check=True, capture_output=True)
        ckpt = os.path.join(work, "ckpt")
        job = "durable"
        command = [gpuhost, "run", "--name", job, "--checkpoints", ckpt, "--cloud", "aws", "--metadata-endpoint",
                   "http://127.0.0.1:%d" % metadata_port, "--poll-interval", str(args.poll_interval),
                   "--settle", str(args.settle), "--remote",
                   "s3://%s/bench?endpoint=%s&region=us-east-1" % (BUCKET, endpoint), "--",
                   DEBIAN_PYTHON, TORCH_TRAINER, "--state-mb", str(args.state_mb), "--every", "0",
                   "--steps", "100000000", "--step-time", "0.05", "--out", ckpt]
        stamps = {}
        with open(os.path.join(work, "gpuhost.log"), "wb") as log:
            proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=log)
            reader = threading.Thread(target=read_lines, args=(proc.stdout, stamps))
            reader.start()
            deadline = time.monotonic() + 180
            while "first_step" not in stamps and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            if "first_step" not in stamps:
                proc.kill()
                proc.wait()
                reader.join()
                sys.exit("the trainer never printed a step; see %s/gpuhost.log" % work)
            time.sleep(1.0)
            posted = time.time()
            post_notice(metadata_port, NOTICE_DEADLINE_S)
            code = proc.wait()
            reader.join()
    finally:
        metadata.kill()
        metadata.wait()
        metadata.stdout.close()
        server.terminate()
        server.wait(timeout=60)
        server_log.close()
        if lean_data:
            shutil.rmtree(lean_data, ignore_errors=True)
    if code != 75 or "saved" not in stamps:
        sys.exit("gpuhost run exited %d (expected 75 after saving); see %s/gpuhost.log" % (code, work))

    records = read_journal(os.path.join(work, "home", "jobs", job, "journal.jsonl"))
    notice = first(records, "notice")
    committed = first(records, "checkpoint_committed", after=notice)
    durable = next((r for r in records if r["type"] == "mirror_durable" and r["id"] == "ck-%d" % committed["seq"]),
                   None)
    verdict = first(records, "mirror_deadline", after=notice)
    if not durable or not verdict or not verdict["durable"]:
        sys.exit("the checkpoint did not become durable remotely before the deadline; see %s" % work)
    parts = [r for r in records if r["type"] == "mirror_part_uploaded"]
    row = {
        "detect": when(notice) - posted,
        "save": stamps["saved"] - when(notice),
        "commit": when(committed) - stamps["saved"],
        "upload": when(durable) - when(committed),
        "total": when(durable) - posted,
        "upload_ms": durable["upload_ms"] / 1000.0,
        "bytes": committed["size_bytes"],
        "parts": len(parts),
    }
    print("  %s round %d: total %6.2f s = detect %5.2f + save %5.2f + commit %5.2f + upload %5.2f "
          "(mirror's own upload_ms %.2f s, %d parts, %.2f GiB)"
          % (name, index, row["total"], row["detect"], row["save"], row["commit"], row["upload"], row["upload_ms"],
             row["parts"], row["bytes"] / 2**30), flush=True)
    return row


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(REPO, "build", "linux"), help="where gpuhost is")
    parser.add_argument("--bench-build", default=os.path.join(REPO, "build", "s3bench-linux"),
                        help="where bench/s3_endpoint is")
    parser.add_argument("--endpoint", choices=["moto", "lean", "both"], default="both")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--state-mb", type=float, default=1024.0, help="the trainer's buffer in MiB (1024: 1 GiB)")
    parser.add_argument("--poll-interval", type=float, default=5.0, help="gpuhost's metadata poll (its default: 5)")
    parser.add_argument("--settle", type=float, default=2.0, help="gpuhost's settle time (its default: 2)")
    parser.add_argument("--lean-dir", default="/dev/shm")
    args = parser.parse_args()
    gpuhost = os.path.join(os.path.abspath(args.build), "gpuhost")
    lean_binary = os.path.join(os.path.abspath(args.bench_build), "bench", "s3_endpoint")
    endpoints = ["moto", "lean"] if args.endpoint == "both" else [args.endpoint]
    if not os.access(gpuhost, os.X_OK):
        sys.exit("no gpuhost in %s" % args.build)
    if "lean" in endpoints and not os.access(lean_binary, os.X_OK):
        sys.exit("%s is missing: cmake --build %s --target s3_endpoint" % (lean_binary, args.bench_build))
    for program in (["moto_server"] if "moto" in endpoints else []) + ["aws"]:
        if not shutil.which(program):
            sys.exit("%s is needed (pip install 'moto[server]' awscli)" % program)

    print(host_conditions())
    print("checkpoint: torch.save of a %g MiB buffer; poll %g s; settle %g s; notice deadline %d s" %
          (args.state_mb, args.poll_interval, args.settle, NOTICE_DEADLINE_S), flush=True)
    rows = {name: [] for name in endpoints}
    for index in range(1, args.rounds + 1):
        for name in endpoints:  # alternating, so both see the same drift in the host's load
            rows[name].append(one_round(args, gpuhost, lean_binary, name, index))
    print(host_conditions())
    labels = {"moto": "moto_server", "lean": "s3_endpoint"}
    for name in endpoints:
        median = {k: statistics.median(r[k] for r in rows[name]) for k in rows[name][0]}
        verdict = "within" if median["total"] <= TARGET_S else "OVER"
        print("%s, median of %d: notice -> durable remotely %.2f s (%s the %g s target)"
              % (labels[name], args.rounds, median["total"], verdict, TARGET_S))
        print("    detect  %6.2f s  notice posted -> journalled (poll interval %g s)"
              % (median["detect"], args.poll_interval))
        print("    save    %6.2f s  notice -> trainer's torch.save done" % median["save"])
        print("    commit  %6.2f s  saved -> committed (settle %g s, validate, hash, journal)"
              % (median["commit"], args.settle))
        print("    upload  %6.2f s  committed -> mirror_durable (part hashes, multipart upload, manifest)"
              % median["upload"])
        print("    without the poll: %.2f s" % (median["total"] - median["detect"]))


if __name__ == "__main__":
    main()
