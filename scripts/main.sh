#!/usr/bin/env bash
# Builds gpuhost (Linux release) and runs its main job on this host with the built-in defaults:
# for now `gpuhost doctor`, which checks every layer a GPU training job needs.
# Exit status is doctor's: 0 nothing failed, 1 a check failed (doc/exit-codes.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset linux >/dev/null
cmake --build --preset linux --target gpuhost >/dev/null
exec build/linux/gpuhost doctor "$@"
