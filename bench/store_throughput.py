#!/usr/bin/env python3
# Benchmark: upload and download throughput of a checkpoint-sized file through gpuhost's transfer
# code (src/store/transfer.h: parallel multipart upload, parallel ranged download, driven by
# bench/store_transfer.cc) against `aws s3 cp` to the same local endpoint in the same run, for
# each endpoint asked for:
#   moto  moto_server (single Python werkzeug process; it re-reads the whole object for every
#         ranged GET and stalls for tens of seconds completing a 2 GiB upload, so it is the
#         ceiling for both clients and the ratio says little about them);
#   lean  bench/s3_endpoint.cc (C++, thread per connection, bodies streamed to files in --lean-dir,
#         tmpfs by default; no signature checks), so the clients are what is measured.
# The target is a ratio of at least 1.5x. Both clients read the same file (page cache warm
# after it is written) and write their downloads to the same folder; each download is checked
# against the source's SHA-256. Objects are deleted as soon as they were read back: with
# --size-mib 2048 the peak is about two copies of the file plus the stored object.
#
# Everything shares the host's cores (clients, server, hashing), so note the load average printed
# with the figures.
#
# Usage: bench/store_throughput.py [--build DIR] [--endpoint moto|lean|both] [--size-mib 2048]
#        [--part-mib 64] [--concurrency 4] [--dir /var/tmp] [--lean-dir /dev/shm]
#        [--lean-etags md5|opaque] [--rounds 1] [--aws-same-settings]
#        (the 1 GiB variant: --size-mib 1024; its upload time is also the transfer part of
#        "notice to durable remotely")
import argparse
import hashlib
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from run_journal import host_conditions

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
    """Runs cmd; returns (wall seconds, stdout, CPU seconds it used: user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), proc.stderr))
    return elapsed, proc.stdout, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def process_cpu(pid):
    """CPU seconds (user + system) a running process has used so far: /proc/PID/stat fields 14-15."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_moto(work):
    """moto_server on a free port; returns (process, endpoint URL, log file)."""
    port = free_port()
    log = open(os.path.join(work, "moto.log"), "w")
    moto = subprocess.Popen(["moto_server", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                moto.kill()
                sys.exit("moto_server did not start")
            time.sleep(0.2)
    return moto, f"http://127.0.0.1:{port}", log


def start_lean(binary, data_dir, etags, work):
    """bench/s3_endpoint on a port the OS picks; returns (process, endpoint URL, log file)."""
    log = open(os.path.join(work, "s3_endpoint.log"), "w")
    proc = subprocess.Popen([binary, data_dir, "--etags", etags], stdout=subprocess.PIPE, stderr=log, text=True)
    line = proc.stdout.readline()
    if not line:
        sys.exit(f"{binary} did not start; see {log.name}")
    return proc, "http://127.0.0.1:%d" % json.loads(line)["port"], log


def measure(endpoint, server_pid, tool, source, want, work, env, args):
    """Per client and direction, one dict per round: transfer and process-wall seconds, the
    client's CPU seconds and the server's CPU seconds meanwhile."""
    aws = ["aws", "--endpoint-url", endpoint]
    timed(aws + ["s3api", "create-bucket", "--bucket", BUCKET], env)
    url = f"s3://{BUCKET}/?endpoint={endpoint}&region=us-east-1"
    part = str(args.part_mib * MIB)
    conc = str(args.concurrency)
    # gpuhost's transfer time excludes opening the store and process start-up; aws' is its whole
    # process, Python interpreter and botocore import included (about 0.5 s here), so the
    # process-wall ratio is printed too. CPU seconds are what a loaded host distorts least.
    results = {"gpuhost": {"up": [], "down": []}, "aws": {"up": [], "down": []}}

    def run(cmd, reports_seconds):
        server_before = process_cpu(server_pid)
        wall, stdout, cpu = timed(cmd, env)
        transfer = float(stdout.split("seconds=")[1]) if reports_seconds else wall
        return {"s": transfer, "wall": wall, "cpu": cpu, "server_cpu": process_cpu(server_pid) - server_before}

    for _ in range(args.rounds):
        out = os.path.join(work, "download.bin")
        for who in ("gpuhost", "aws"):
            key = f"{who}.bin"
            if who == "gpuhost":
                up = run([tool, url, "upload", key, source, part, conc], True)
                down = run([tool, url, "download", key, out, part, conc], True)
            else:
                up = run(aws + ["s3", "cp", "--only-show-errors", source, f"s3://{BUCKET}/{key}"], False)
                down = run(aws + ["s3", "cp", "--only-show-errors", f"s3://{BUCKET}/{key}", out], False)
            if sha256_of(out) != want:
                sys.exit(f"{who}'s download from {endpoint} differs from the source")
            os.remove(out)
            timed(aws + ["s3", "rm", "--only-show-errors", f"s3://{BUCKET}/{key}"], env)
            results[who]["up"].append(up)
            results[who]["down"].append(down)
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build/linux")
    parser.add_argument("--endpoint", choices=["moto", "lean", "both"], default="both")
    parser.add_argument("--size-mib", type=int, default=2048)
    parser.add_argument("--part-mib", type=int, default=64, help="gpuhost's part and range size (its default: 64)")
    parser.add_argument("--concurrency", type=int, default=4, help="gpuhost's parts in flight (its default: 4)")
    parser.add_argument("--dir", default="/var/tmp")
    parser.add_argument("--lean-dir", default="/dev/shm", help="where s3_endpoint keeps objects (tmpfs: no disk)")
    parser.add_argument("--lean-etags", choices=["md5", "opaque"], default="md5",
                        help="s3_endpoint's ETags: S3's MD5s (default) or unique ids that cost no CPU")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--aws-same-settings", action="store_true",
                        help="give aws s3 cp gpuhost's part size and concurrency instead of its defaults")
    args = parser.parse_args()
    endpoints = ["moto", "lean"] if args.endpoint == "both" else [args.endpoint]
    tool = os.path.join(args.build, "bench", "store_transfer")
    lean = os.path.join(args.build, "bench", "s3_endpoint")
    needed = [(tool, "store_transfer")] + ([(lean, "s3_endpoint")] if "lean" in endpoints else [])
    for path, target in needed:
        if not os.path.exists(path):
            sys.exit(f"{path} is missing: cmake --build {args.build} --target {target}")
    for program in (["moto_server"] if "moto" in endpoints else []) + ["aws"]:
        if not shutil.which(program):
            sys.exit(f"{program} is needed (pip install 'moto[server]' awscli)")

    print(host_conditions())
    work = tempfile.mkdtemp(prefix="gpuhost-store-bench-", dir=args.dir)
    lean_data = tempfile.mkdtemp(prefix="gpuhost-s3-endpoint-", dir=args.lean_dir) if "lean" in endpoints else None
    source = os.path.join(work, "checkpoint.bin")
    size = args.size_mib * MIB
    with open(source, "wb") as f:
        block = os.urandom(64 * MIB)  # incompressible; one block repeated keeps generation fast
        for i in range(0, size, len(block)):
            f.write(block[:min(len(block), size - i)])
    want = sha256_of(source)

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

    results = {}
    try:
        for name in endpoints:
            if name == "moto":
                server, endpoint, log = start_moto(work)
            else:
                server, endpoint, log = start_lean(lean, lean_data, args.lean_etags, work)
            try:
                results[name] = measure(endpoint, server.pid, tool, source, want, work, env, args)
            finally:
                server.terminate()
                server.wait(timeout=30)
                log.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if lean_data:
            shutil.rmtree(lean_data, ignore_errors=True)

    print(f"file: {args.size_mib} MiB; gpuhost: {args.part_mib} MiB parts/ranges, {args.concurrency} in flight; "
          f"aws s3 cp: {aws_settings}; loopback; best of {args.rounds}")
    print(host_conditions())
    labels = {"moto": "moto_server", "lean": f"s3_endpoint (--etags {args.lean_etags})"}
    for name in endpoints:
        print(f"endpoint {labels[name]}:")
        best = {}
        for who in ("gpuhost", "aws"):
            for way in ("up", "down"):
                b = best[who, way] = min(results[name][who][way], key=lambda r: r["s"])
                print(f"  {who:8} {'upload' if way == 'up' else 'download':8} {b['s']:7.2f} s "
                      f"{size / MIB / b['s']:7.1f} MiB/s   process wall {b['wall']:6.2f} s, "
                      f"CPU {b['cpu']:6.2f} s (server {b['server_cpu']:6.2f} s)")
        for way in ("up", "down"):
            g, a = best["gpuhost", way], best["aws", way]
            print(f"  ratio gpuhost/aws {'upload' if way == 'up' else 'download':8} {a['s'] / g['s']:.2f}x   "
                  f"(process wall {a['wall'] / g['wall']:.2f}x; aws uses {a['cpu'] / g['cpu']:.2f}x gpuhost's CPU)")


if __name__ == "__main__":
    main()
