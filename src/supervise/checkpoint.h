#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace gpuhost::supervise {

// The checkpoint layouts gpuhost recognises (research/02 §3.5, §4).
enum class CheckpointFormat {
  torch_zip,        // torch.save zip archive: .pt .pth .ckpt .bin, YOLO last.pt, Lightning .ckpt
  safetensors,      // .safetensors
  hf_trainer_dir,   // HF Trainer checkpoint-N/ (trainer_state.json global_step == N)
  accelerate_dir,   // accelerate save_state / kohya *-state/ (model + optimizer + random_states)
  dcp_dir,          // PyTorch Distributed Checkpoint: .metadata + __R_N.distcp
  generic_file,     // anything else: stable size/mtime (+ marker when configured)
  generic_dir,
};

[[nodiscard]] const char* checkpoint_format_name(CheckpointFormat format);  // "torch_zip", ...

// Whether to read every byte. `structure` reads headers and directories only (milliseconds for
// any size: used to pick resume candidates); `full` also verifies each zip entry's CRC-32 (when
// the writer stored one) and computes the content hash (what a commit records).
enum class ValidationDepth { structure, full };

struct CheckpointFile {
  std::string relative_path;  // "/"-separated, relative to the checkpoint path ("" for a file)
  std::uint64_t size = 0;
};

struct CheckpointVerdict {
  std::filesystem::path path;
  CheckpointFormat format = CheckpointFormat::generic_file;
  bool valid = false;
  std::string problem;  // when !valid: what is wrong, e.g. "zip end-of-central-directory missing (truncated?)"
  std::uint64_t size_bytes = 0;  // file size, or sum over the directory
  std::chrono::system_clock::time_point modified;  // newest mtime inside
  std::optional<std::int64_t> step;  // from trainer_state.json, or the name ("checkpoint-500", "step_00300.pt")
  std::vector<CheckpointFile> files;  // every file it consists of, sorted
  // "xxh3-128:..." over the files in `files` order (name, size and bytes of each); set by `full`.
  std::string content_hash;
  // What the check learnt beyond valid/invalid, for people: "DCP version 1.0.0 from .metadata:
  // 2 tensors in 3 chunks, ...", or a warning that does not make the checkpoint invalid.
  std::vector<std::string> notes;
};

// Which format `path` is, by name and layout (no content read beyond a directory listing).
[[nodiscard]] CheckpointFormat detect_checkpoint_format(const std::filesystem::path& path);

// Validates `path`. A checkpoint that is present but broken is a successful Result with
// valid == false and the problem; errors are for paths that cannot be read at all (not_found,
// permission_denied, io_error). Never modifies anything. Thread-safe.
[[nodiscard]] Result<CheckpointVerdict> validate_checkpoint(const std::filesystem::path& path,
                                                            ValidationDepth depth);

// The training step a name encodes: "checkpoint-500" → 500, "epoch=3-step=1200.ckpt" → 1200,
// "model_step00300.pt" → 300, "last.pt" → nullopt.
[[nodiscard]] std::optional<std::int64_t> step_from_name(std::string_view name);

}  // namespace gpuhost::supervise
