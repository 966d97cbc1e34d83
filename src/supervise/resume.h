#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace gpuhost::supervise {

// How the trainer is told where to resume from (besides GPUHOST_RESUME_FROM, always set).
enum class ResumePreset {
  none,         // only {resume} placeholders and the environment variable
  hf,           // HF Trainer scripts: --resume_from_checkpoint PATH
  lightning,    // LightningCLI: --ckpt_path PATH
  ultralytics,  // yolo train resume model=PATH
  kohya,        // sd-scripts: --resume PATH
  torchrun,     // torchrun ... script.py --resume PATH (the flag goes after the script)
};

[[nodiscard]] const char* resume_preset_name(ResumePreset preset);
[[nodiscard]] std::optional<ResumePreset> parse_resume_preset(std::string_view name);

// The command line to launch, given the user's command and the checkpoint to resume from.
// With a checkpoint: every "{resume}" inside an argument is replaced by its path, then the
// preset's flag is added unless the user's command already has that flag. Without one:
// an argument that is exactly "{resume}" is dropped together with a preceding "--flag" that
// expects it ("--resume {resume}"); "--flag={resume}" is dropped; "{resume}" elsewhere inside an
// argument is an invalid_argument error (nothing sensible to put there). Pure.
[[nodiscard]] Result<std::vector<std::string>> resume_command(const std::vector<std::string>& command,
                                                              ResumePreset preset,
                                                              const std::optional<std::string>& checkpoint);

}  // namespace gpuhost::supervise
