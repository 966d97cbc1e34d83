#!/usr/bin/env bash
# Benchmark: wall time of `gpuhost doctor` against PyTorch's own environment report,
# `python3 -m torch.utils.collect_env`, in the same run on the same host (median of several runs,
# measured by hyperfine). Targets (issue: gpuhost doctor): with the Python probe at most 1/3 of
# collect_env's time; without it (--no-python) at most 1/20.
#
# Both look at the same interpreter: PATH is /usr/bin:/bin for every command, so doctor probes
# Debian's /usr/bin/python3 (with python3-torch) and collect_env runs in it.
#
# Usage: bench/doctor_vs_collect_env.sh [RUNS]     (default 10; builds build/linux first)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
cmake --preset linux >/dev/null
cmake --build --preset linux --target gpuhost >/dev/null
bin=$PWD/build/linux/gpuhost
out=build/bench
mkdir -p "$out"

export PATH=/usr/bin:/bin
# doctor exits 1 on a host with failed checks (no GPU here): that is its answer, not an error.
hyperfine --ignore-failure --runs "$runs" --warmup 2 --style basic --export-json "$out/doctor_vs_collect_env.json" \
  --command-name "collect_env" "/usr/bin/python3 -m torch.utils.collect_env" \
  --command-name "doctor" "$bin doctor --python /usr/bin/python3" \
  --command-name "doctor --full-probe" "$bin doctor --full-probe --python /usr/bin/python3" \
  --command-name "doctor --no-python" "$bin doctor --no-python" >/dev/null

/usr/bin/python3 - "$out/doctor_vs_collect_env.json" <<'PY'
import json, sys
results = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
base = results["collect_env"]["median"]
print("median wall time over %d runs (hyperfine)" % len(results["collect_env"]["times"]))
print("  %-22s %8.1f ms" % ("collect_env", base * 1000))
for name, target in (("doctor", 1 / 3), ("doctor --full-probe", 1 / 3), ("doctor --no-python", 1 / 20)):
    m = results[name]["median"]
    ratio = m / base
    verdict = "meets" if ratio <= target else "misses"
    print("  %-22s %8.1f ms   ratio %.3f of collect_env (target <= %.3f: %s)" % (name, m * 1000, ratio, target, verdict))
PY
