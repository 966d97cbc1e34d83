#!/usr/bin/env bash
# Builds gpuhost (Linux release) and runs its main job with the built-in defaults: a supervised
# training run. examples/train_tiny.py (PyTorch from Debian's python3-torch, synthetic data) runs
# under `gpuhost run`; a drill kills its whole process tree 8 s in, as a crash or a lost machine
# would, and gpuhost restarts it from the newest checkpoint that validates. Then `gpuhost status`
# shows the job's journal. Exit status is gpuhost run's (doc/exit-codes.md): 0 when the trainer
# finished. Everything lives in build/demo (removed first); arguments go to gpuhost run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset linux >/dev/null
cmake --build --preset linux --target gpuhost >/dev/null

demo=build/demo
rm -rf "$demo"
mkdir -p "$demo"
export GPUHOST_HOME="$PWD/$demo/home"
# Debian's PyTorch is installed for /usr/bin/python3 (another python3 may come first on PATH).
status=0
build/linux/gpuhost run --name demo --checkpoints "$demo/checkpoints" --drill kill@8 --backoff 1 "$@" \
  -- /usr/bin/python3 examples/train_tiny.py --checkpoint-dir "$demo/checkpoints" --resume {resume} || status=$?
echo
build/linux/gpuhost status demo
exit "$status"
