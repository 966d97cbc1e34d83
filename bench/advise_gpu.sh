#!/usr/bin/env bash
# The advisor on a real GPU host: what the tests cannot show without one. Prepared for a Linux
# host with an NVIDIA GPU, its driver, and a Python with a CUDA build of PyTorch (PYTHON=...).
# It changes nothing on the host: MIG is only queried (nvidia-smi mig -lgip / -lgi, read-only).
#
# 1. An input-starved trainer (tests/integration/trainers/input_trainer.py --device cuda
#    --workers 0) and a compute-bound one (--compute), each under `gpuhost run`, each watched by
#    `gpuhost advise --json`: the first must be input_bound, the second have no finding.
# 2. A fp32 and a bf16 matmul loop: on Hopper and later the fp32 one must get no_mixed_precision
#    (GPM tensor activity ~0) and the bf16 one must not.
# 3. Read-only queries: NVML utilisation vs GPM in `gpuhost doctor --json`; MIG profiles, by
#    nvidia-smi and by `gpuhost mig list` / `export`.
# 4. `run --gpu-memory-fraction 0.25` on a CUDA torch: an allocation past the cap must fail.
#
# Usage: bench/advise_gpu.sh [BUILD_DIR]   (default build/linux); prints the findings and a line
# per check: "ok" or "UNEXPECTED".
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/linux}/gpuhost
python=${PYTHON:-python3}
work=$(mktemp -d)
export GPUHOST_HOME=$work/home
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

nvidia-smi -L
"$python" -c 'import torch; assert torch.cuda.is_available(), "a CUDA build of torch is needed"; print(torch.__version__, torch.cuda.get_device_name(0))'

cat >"$work/matmul.py" <<'PY'
import sys, torch
dtype = torch.bfloat16 if sys.argv[1] == "bf16" else torch.float32
torch.backends.cuda.matmul.allow_tf32 = False
a = torch.randn(8192, 8192, device="cuda", dtype=dtype)
step = 0
while True:
    for _ in range(10):
        a = torch.tanh(a @ a)
    torch.cuda.synchronize()
    step += 1
    print("step %d" % step, flush=True)
PY

watch() {  # NAME COMMAND...: run it under gpuhost run, advise for 20 s, print the finding ids
  local name=$1
  shift
  "$bin" run --name "$name" --checkpoints "$work/$name" --cloud none --quiet -- "$@" >/dev/null 2>&1 &
  local run_pid=$!
  sleep 20
  "$bin" advise "$name" --seconds 20 --json >"$work/$name.json"
  kill -INT $run_pid
  wait $run_pid || true
  "$python" -c 'import json,sys; print(" ".join(f["id"] + ":" + f["strength"] for f in json.load(open(sys.argv[1]))["findings"]) or "none")' "$work/$name.json"
}

expect() {  # WHAT GOT WANTED
  if [[ "$2" == *"$3"* ]]; then echo "ok: $1 ($2)"; else echo "UNEXPECTED: $1: got '$2', wanted '$3'"; fi
}

expect "input-starved" "$(watch starved "$python" tests/integration/trainers/input_trainer.py --device cuda --workers 0)" "input_bound:verdict"
expect "compute-bound" "$(watch compute "$python" tests/integration/trainers/input_trainer.py --device cuda --compute)" "none"
fp32=$(watch fp32 "$python" "$work/matmul.py" fp32)
bf16=$(watch bf16 "$python" "$work/matmul.py" bf16)
echo "fp32: $fp32 (no_mixed_precision expected on Hopper and later, where GPM reads tensor activity)"
expect "bf16 uses the tensor cores" "$bf16" "none"

"$bin" doctor --json --no-python | "$python" -c '
import json, sys
for g in json.load(sys.stdin)["facts"]["gpu"]["devices"]:
    print(g.get("name"), "utilization", g.get("utilization"), "gpm", g.get("gpm"))'
nvidia-smi mig -lgip || echo "MIG: not supported or not enabled on this GPU"
nvidia-smi mig -lgi || true
# gpuhost's own MIG reading, read-only: the mode, the profiles it resolves through NVML (to compare
# with nvidia-smi mig -lgip above: names, IDs, memory) and the layout as a mig-parted file.
"$bin" mig list || true
"$bin" mig export || true
# A memory cap on a real CUDA torch: the hook's line on stderr, and the allocator's limit.
"$bin" run --name memcap --checkpoints "$work/memcap" --cloud none --gpu-memory-fraction 0.25 -- "$python" -c '
import torch
torch.ones(1, device="cuda")
free, total = torch.cuda.mem_get_info()
try:
    torch.empty(int(total * 0.5), dtype=torch.uint8, device="cuda")
    print("UNEXPECTED: half the GPU was allocated under a 0.25 cap")
except torch.cuda.OutOfMemoryError:
    print("ok: an allocation past the 0.25 cap raised OutOfMemoryError")' 2>&1 | grep -E "gpuhost: torch|ok:|UNEXPECTED" || true
