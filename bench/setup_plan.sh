#!/usr/bin/env bash
# Benchmark: what planning adds to doctor. `gpuhost setup` (the dry run: the same collect step as
# doctor, then the plan and the script) against `gpuhost doctor` alone, in the same run on the same
# host (median of several runs, hyperfine). Target (issue: gpuhost setup): setup adds < 50 ms.
# The anchor the issue names, `uv pip install --torch-backend=auto --dry-run`, needs a reachable
# wheel index, which this machine has not; so doctor is the anchor.
#
# Both probe the same interpreter: PATH is /usr/bin:/bin, so they read Debian's /usr/bin/python3.
#
# Usage: bench/setup_plan.sh [RUNS]     (default 10; builds build/linux first)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
cmake --preset linux >/dev/null
cmake --build --preset linux --target gpuhost >/dev/null
bin=$PWD/build/linux/gpuhost
out=build/bench
mkdir -p "$out"
env_dir=$(mktemp -d)/venv   # never created: a dry run changes nothing

export PATH=/usr/bin:/bin
hyperfine --ignore-failure --runs "$runs" --warmup 2 --style basic --export-json "$out/setup_plan.json" \
  --command-name "doctor" "$bin doctor --json" \
  --command-name "setup" "$bin setup --json --env $env_dir" \
  --command-name "setup --script sh" "$bin setup --script sh --env $env_dir" >/dev/null

/usr/bin/python3 - "$out/setup_plan.json" <<'PY'
import json, sys
results = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
base = results["doctor"]["median"]
print("median wall time over %d runs (hyperfine)" % len(results["doctor"]["times"]))
print("  %-18s %8.1f ms" % ("doctor", base * 1000))
for name in ("setup", "setup --script sh"):
    m = results[name]["median"]
    added = (m - base) * 1000
    print("  %-18s %8.1f ms   ratio %.3f of doctor, adds %+.1f ms (target < 50 ms: %s)"
          % (name, m * 1000, m / base, added, "meets" if added < 50 else "misses"))
PY
