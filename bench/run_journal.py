"""Shared by the `gpuhost run` benchmarks (run_overhead.py, notice_to_commit.py,
restart_latency.py): locating the built gpuhost and the test trainers, a fresh work folder, and
reading a job's journal (doc/journal.md). Standard library only."""
import datetime
import json
import os
import shutil
import sys
import zlib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAINERS = os.path.join(REPO, "tests", "integration", "trainers")
STDLIB_TRAINER = os.path.join(TRAINERS, "stdlib_trainer.py")
TORCH_TRAINER = os.path.join(TRAINERS, "torch_trainer.py")
# Debian's interpreter, where python3-torch lives (not a pyenv or venv python3 first on PATH).
DEBIAN_PYTHON = "/usr/bin/python3"


def gpuhost_bin(argv):
    """The gpuhost in the build folder named by argv[1] (default build/linux); exits 2 without one."""
    build = argv[1] if len(argv) > 1 else os.path.join(REPO, "build", "linux")
    binary = os.path.join(os.path.abspath(build), "gpuhost")
    if not os.access(binary, os.X_OK):
        sys.exit("no gpuhost in %s: build it first (cmake --build --preset linux --target gpuhost)" % build)
    return binary


def fresh_dir(name):
    """build/bench/NAME, emptied."""
    path = os.path.join(REPO, "build", "bench", name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def read_journal(path):
    """The records of a journal.jsonl whose length, CRC-32 and JSON check out, in order."""
    records = []
    with open(path, "rb") as f:
        for line in f:
            parts = line.rstrip(b"\n").split(b" ", 2)
            if len(parts) != 3 or not parts[0].isdigit():
                continue
            if int(parts[0]) != len(parts[2]) or ("%08x" % zlib.crc32(parts[2])).encode() != parts[1]:
                continue
            records.append(json.loads(parts[2]))
    return records


def when(record):
    """A record's time as seconds since the epoch."""
    return datetime.datetime.fromisoformat(record["time"].replace("Z", "+00:00")).timestamp()


def first(records, kind, after=None):
    """The first record of type `kind` (after record `after`, if given), or None."""
    start = 0 if after is None else records.index(after) + 1
    return next((r for r in records[start:] if r["type"] == kind), None)


def host_conditions():
    """A line describing the machine the figures were taken on."""
    cores = os.cpu_count()
    try:
        load = "%.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        load = "?"
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    return "host: %d cores (%s), load average %s" % (cores, model or "unknown CPU", load)
