#!/usr/bin/env python3
# Benchmark: upload and download throughput of a checkpoint-sized file through gpuhost's transfer
# code (src/store/transfer.h: parallel multipart upload, parallel ranged download, driven by
# bench/store_transfer.cc) against `aws s3 cp` to the same local moto_server in the same run.
# The target is a ratio of at least 1.5x. Both read the same file (page cache warm after
# it is written) and write their downloads to the same folder; each download is checked against
# the source's SHA-256. Objects are deleted as soon as they were read back, because moto keeps
# them in its own process (memory and spooled temporary files): with --size-mib 2048 the peak is
# about two copies of the file plus the multipart parts.
#
# Loopback to moto measures the clients' overhead against one Python server, not a network:
# moto (single process, werkzeug) is likely the ceiling for both, so the ratio is the number to
# read, not the MB/s.
#
# Usage: bench/store_throughput.py [--build DIR] [--size-mib 2048] [--part-mib 64] [--concurrency 4]
#        [--dir /var/tmp] [--rounds 1] [--aws-same-settings]
#        (the 1 GiB variant: --size-mib 1024; its upload time is also the transfer part of
#        "notice to durable remotely")
import argparse
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

MIB = 1 << 20
BUCKET = "gpuhost-bench"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(16 * MIB):
            h.update(chunk)
    return h.hexdigest()


def timed(cmd, env):
    start = time.monotonic()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), proc.stderr))
    return elapsed, proc.stdout


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build/linux")
    parser.add_argument("--size-mib", type=int, default=2048)
    parser.add_argument("--part-mib", type=int, default=64, help="gpuhost's part and range size (its default: 64)")
    parser.add_argument("--concurrency", type=int, default=4, help="gpuhost's parts in flight (its default: 4)")
    parser.add_argument("--dir", default="/var/tmp")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--aws-same-settings", action="store_true",
                        help="give aws s3 cp gpuhost's part size and concurrency instead of its defaults")
    args = parser.parse_args()
    tool = os.path.join(args.build, "bench", "store_transfer")
    if not os.path.exists(tool):
        sys.exit(f"{tool} is missing: cmake --build {args.build} --target store_transfer")
    for program in ("moto_server", "aws"):
        if not shutil.which(program):
            sys.exit(f"{program} is needed (pip install 'moto[server]' awscli)")

    work = tempfile.mkdtemp(prefix="gpuhost-store-bench-", dir=args.dir)
    source = os.path.join(work, "checkpoint.bin")
    size = args.size_mib * MIB
    with open(source, "wb") as f:
        block = os.urandom(64 * MIB)  # incompressible; one block repeated keeps generation fast
        for i in range(0, size, len(block)):
            f.write(block[:min(len(block), size - i)])
    want = sha256_of(source)

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    env = dict(os.environ, AWS_ACCESS_KEY_ID="AKIAIOSFODNN7EXAMPLE", AWS_SECRET_ACCESS_KEY="bench",
               AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE=os.devnull,
               AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION"):
        env.pop(var, None)
    aws_settings = "its defaults (8 MiB parts, 10 in flight)"
    if args.aws_same_settings:
        # docs.aws.amazon.com/cli/latest/topic/s3-config.html: multipart_chunksize, max_concurrent_requests
        config = os.path.join(work, "aws-config")
        with open(config, "w") as f:
            f.write(f"[default]\ns3 =\n  multipart_chunksize = {args.part_mib}MB\n"
                    f"  multipart_threshold = {args.part_mib}MB\n  max_concurrent_requests = {args.concurrency}\n")
        env["AWS_CONFIG_FILE"] = config
        aws_settings = f"{args.part_mib} MiB parts, {args.concurrency} in flight"
    log = open(os.path.join(work, "moto.log"), "w")
    moto = subprocess.Popen(["moto_server", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    sys.exit("moto_server did not start")
                time.sleep(0.2)
        aws = ["aws", "--endpoint-url", endpoint]
        timed(aws + ["s3api", "create-bucket", "--bucket", BUCKET], env)
        url = f"s3://{BUCKET}/?endpoint={endpoint}&region=us-east-1"
        part = str(args.part_mib * MIB)
        conc = str(args.concurrency)

        results = {"gpuhost": {"up": [], "down": []}, "aws": {"up": [], "down": []}}
        for _ in range(args.rounds):
            out = os.path.join(work, "download.bin")
            for who in ("gpuhost", "aws"):
                key = f"{who}.bin"
                if who == "gpuhost":
                    up, stdout = timed([tool, url, "upload", key, source, part, conc], env)
                    up = float(stdout.split("seconds=")[1])
                    down, stdout = timed([tool, url, "download", key, out, part, conc], env)
                    down = float(stdout.split("seconds=")[1])
                else:
                    up, _ = timed(aws + ["s3", "cp", "--only-show-errors", source, f"s3://{BUCKET}/{key}"], env)
                    down, _ = timed(aws + ["s3", "cp", "--only-show-errors", f"s3://{BUCKET}/{key}", out], env)
                if sha256_of(out) != want:
                    sys.exit(f"{who}'s download differs from the source")
                os.remove(out)
                timed(aws + ["s3", "rm", "--only-show-errors", f"s3://{BUCKET}/{key}"], env)
                results[who]["up"].append(up)
                results[who]["down"].append(down)
    finally:
        moto.terminate()
        moto.wait(timeout=30)
        log.close()
        shutil.rmtree(work, ignore_errors=True)

    print(f"file: {args.size_mib} MiB; gpuhost: {args.part_mib} MiB parts/ranges, {args.concurrency} in flight; "
          f"aws s3 cp: {aws_settings}; moto_server on loopback; best of {args.rounds}")
    rate = {}
    for who in ("gpuhost", "aws"):
        for way in ("up", "down"):
            best = min(results[who][way])
            rate[who, way] = size / MIB / best
            print(f"{who:8} {'upload' if way == 'up' else 'download':8} {best:8.2f} s {rate[who, way]:8.1f} MiB/s")
    for way in ("up", "down"):
        print(f"ratio gpuhost/aws {'upload' if way == 'up' else 'download':8} {rate['gpuhost', way] / rate['aws', way]:.2f}x")


if __name__ == "__main__":
    main()
