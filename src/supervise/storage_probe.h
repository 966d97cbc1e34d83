#pragma once

#include <filesystem>
#include <string>

#include "base/error.h"

namespace gpuhost::supervise {

// Whether the nodes of a multi-node job keep their checkpoints in one folder they all see (NFS,
// Lustre, a shared PVC) or each in a folder of its own (local NVMe): every follower writes a
// probe file with a fresh nonce into its checkpoint location before it joins, and node 0 looks
// for it in its own. The file's name starts with a dot, so the checkpoint scanner passes it by.

// The folder a probe goes into: the checkpoint location when it is a folder (or has no file
// extension and does not exist yet), else the folder of a single-file checkpoint.
[[nodiscard]] std::filesystem::path storage_probe_dir(const std::filesystem::path& checkpoint_location);
[[nodiscard]] std::filesystem::path storage_probe_path(const std::filesystem::path& dir, int node);

// Writes node `node`'s probe (creating the folder) and returns its nonce. Errors: the folder
// cannot be written (the follower then joins without a probe and counts as sharing, as before).
[[nodiscard]] Result<std::string> write_storage_probe(const std::filesystem::path& dir, int node);
// Node 0: the probe of `node` with `nonce` is in `dir`.
[[nodiscard]] bool sees_storage_probe(const std::filesystem::path& dir, int node, const std::string& nonce);
// Removes this node's probe (at the agreement, when node 0 has looked).
void remove_storage_probe(const std::filesystem::path& dir, int node);

}  // namespace gpuhost::supervise
