#pragma once

#include <filesystem>

#include "base/error.h"
#include "supervise/checkpoint.h"
#include "supervise/checkpoint_ledger.h"

namespace gpuhost::supervise {

// Whether a committed checkpoint gets a copy in the job's snapshots/ (see SnapshotPolicy):
// single files only, and under `automatic` only names without a step number, the ones trainers
// rewrite in place (last.pt, last.ckpt, model.safetensors).
[[nodiscard]] bool wants_snapshot(SnapshotPolicy policy, const CheckpointVerdict& verdict);

// Copies the checkpoint into `directory` as "<first 16 hex of its hash>-<name>" durably (temp
// file, fsync, rename, directory fsync) and checks the copy hashes to the same content. Returns
// the copy's path; an existing identical copy is reused. On failure (disk full) nothing is left
// behind and the error names the reason.
[[nodiscard]] Result<std::filesystem::path> take_snapshot(const CheckpointVerdict& verdict,
                                                          const std::filesystem::path& directory);

}  // namespace gpuhost::supervise
