#!/usr/bin/env bash
# Prices the full built-in instance catalog for 1,000 job variants (models x methods x batch x
# work) through the real `gpuhost plan --json` ranking, and reports the time per plan. The
# process start is part of each plan, so this is an upper bound on the ranking itself.
# Usage: bench/plan_catalog.sh [path/to/gpuhost]   (target: well under 100 ms per plan)
set -euo pipefail
BIN=${1:-build/linux/gpuhost}
models=(llama-3-8b llama-3.1-70b qwen2.5-7b qwen2.5-14b qwen2.5-32b qwen2.5-72b mistral-7b gemma-2-9b whisper-small gemma-2-2b)
methods=(full lora qlora inference "lora --sharding zero3")
batches=(1 2 4 8 16)
hours=(10 100 1000 5000)
n=0
start=$(date +%s.%N)
for m in "${models[@]}"; do for me in "${methods[@]}"; do for b in "${batches[@]}"; do for h in "${hours[@]}"; do
  # shellcheck disable=SC2086
  "$BIN" plan "$m" --method $me --batch "$b" --gpu-hours "$h" --reference-gpu A100 --json > /dev/null
  n=$((n + 1))
done; done; done; done
end=$(date +%s.%N)
echo "plans: $n  catalog rows: $(grep -c '"instance_type"' "$(dirname "$0")/../data/instances.json")"
awk -v s="$start" -v e="$end" -v n="$n" 'BEGIN { printf "total %.2f s, %.2f ms per plan (process start included)\n", e - s, (e - s) * 1000 / n }'
