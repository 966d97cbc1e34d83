#!/usr/bin/env bash
# Benchmark: how long gpuhost takes to decide that a torch.save checkpoint is complete, against
# loading it with torch.load (what a resuming trainer does, and the only check PyTorch offers),
# on the same ~1 GiB file in the same run (median of several runs, measured by hyperfine, page
# cache warm after the warm-up runs).
#
#   gpuhost verify --structure-only FILE   zip directory and headers only (picks resume candidates)
#   gpuhost verify FILE                    every byte: CRC-32 of each entry and the content hash
#   python3 -c "import torch; torch.load(FILE)"
#
# Also measured, to read the ratios against: `python3 -c "import torch"` (the interpreter and
# torch import that torch.load pays before reading anything) and `cat FILE` (reading every byte,
# the floor for a full check). The file is one float32 tensor of 256 Mi elements written by
# Debian's python3-torch; it is kept in build/bench/ between runs.
#
# Usage: bench/validate_vs_torch_load.sh [BUILD_DIR] [RUNS]   (default build/linux and 10;
#        BUILD_DIR must hold a built gpuhost)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/linux}
runs=${2:-10}
bin=$(cd "$build" && pwd)/gpuhost
if [[ ! -x $bin ]]; then
  echo "no gpuhost in $build: build it first (cmake --build --preset linux --target gpuhost)" >&2
  exit 2
fi
out=build/bench
mkdir -p "$out"
file=$PWD/$out/validate_vs_torch_load.pt

# Debian's interpreter, where python3-torch lives (not a pyenv or venv python3 first on PATH).
export PATH=/usr/bin:/bin
if [[ ! -f $file ]]; then
  echo "writing $file (torch.save of 256 Mi float32, ~1 GiB)..." >&2
  python3 -c "import torch, sys; torch.save({'w': torch.randn(256 * 1024 * 1024)}, sys.argv[1])" "$file.partial"
  mv "$file.partial" "$file"
fi

# No shell between hyperfine and the commands (-N): the structure check takes well under the
# few milliseconds hyperfine can subtract for a shell's start.
hyperfine -N --runs "$runs" --warmup 2 --style basic --export-json "$out/validate_vs_torch_load.json" \
  --command-name "torch.load" "python3 -c 'import sys, torch; torch.load(sys.argv[1])' '$file'" \
  --command-name "import torch" "python3 -c 'import torch'" \
  --command-name "cat" "cat '$file'" \
  --command-name "verify --structure-only" "'$bin' verify --structure-only '$file'" \
  --command-name "verify" "'$bin' verify '$file'" >/dev/null

python3 - "$out/validate_vs_torch_load.json" "$file" <<'PY'
import json, os, sys
results = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
size = os.path.getsize(sys.argv[2])
load = results["torch.load"]["median"]
load_only = load - results["import torch"]["median"]
print("median wall time over %d runs (hyperfine), file %.2f GiB" % (len(results["torch.load"]["times"]), size / 2**30))
for name in ("torch.load", "import torch", "cat", "verify --structure-only", "verify"):
    m = results[name]["median"]
    rate = "" if name in ("import torch", "verify --structure-only") else "   %6.2f GB/s" % (size / m / 1e9)
    print("  %-24s %9.2f ms%s" % (name, m * 1000, rate))
for name in ("verify --structure-only", "verify"):
    m = results[name]["median"]
    print("  %-24s ratio %.5f of torch.load, %.5f of torch.load without the import" % (name, m / load, m / load_only))
PY
