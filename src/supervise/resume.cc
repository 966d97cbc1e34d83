#include "supervise/resume.h"

#include <array>

#include "base/strings.h"

namespace gpuhost::supervise {
namespace {

constexpr std::string_view k_placeholder = "{resume}";

struct PresetRow {
  ResumePreset preset;
  const char* name;
  const char* flag;  // the "--flag PATH" form; nullptr when the preset has none or another form
};

// Flags from each framework's documented resume entry point (research/02 §3.5):
// HF Trainer examples `--resume_from_checkpoint`, LightningCLI `fit --ckpt_path`,
// kohya sd-scripts `--resume <state_dir>`; torchrun passes script flags through unchanged.
constexpr std::array<PresetRow, 6> k_presets{{
    {ResumePreset::none, "none", nullptr},
    {ResumePreset::hf, "hf", "--resume_from_checkpoint"},
    {ResumePreset::lightning, "lightning", "--ckpt_path"},
    {ResumePreset::ultralytics, "ultralytics", nullptr},
    {ResumePreset::kohya, "kohya", "--resume"},
    {ResumePreset::torchrun, "torchrun", "--resume"},
}};

const PresetRow& row(ResumePreset preset) {
  for (const auto& r : k_presets)
    if (r.preset == preset) return r;
  return k_presets[0];
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Sets "--flag PATH" or "--flag=PATH" where the command already has the flag, else appends it.
void set_flag(std::vector<std::string>& argv, std::string_view flag, const std::string& path) {
  const std::string with_equals = std::string(flag) + "=";
  for (std::size_t i = 1; i < argv.size(); ++i) {
    if (argv[i] == flag) {
      if (i + 1 < argv.size() && !starts_with(argv[i + 1], "-"))
        argv[i + 1] = path;
      else
        argv.insert(argv.begin() + static_cast<std::ptrdiff_t>(i) + 1, path);
      return;
    }
    if (starts_with(argv[i], with_equals)) {
      argv[i] = with_equals + path;
      return;
    }
  }
  argv.emplace_back(flag);
  argv.push_back(path);
}

// yolo's key=value CLI: `yolo train ... resume model=PATH`
// (docs.ultralytics.com/modes/train/#resuming-interrupted-trainings).
void set_ultralytics(std::vector<std::string>& argv, const std::string& path) {
  bool has_resume = false, has_model = false;
  for (std::size_t i = 1; i < argv.size(); ++i) {
    if (argv[i] == "resume" || starts_with(argv[i], "resume=")) {
      argv[i] = "resume";
      has_resume = true;
    } else if (starts_with(argv[i], "model=")) {
      argv[i] = "model=" + path;
      has_model = true;
    }
  }
  if (!has_resume) argv.emplace_back("resume");
  if (!has_model) argv.push_back("model=" + path);
}

// "--flag" or "-f": an option that may take the next argument as its value.
bool is_option_name(std::string_view arg) {
  return arg.size() >= 2 && arg[0] == '-' && arg.find('=') == std::string_view::npos;
}

// "--flag={resume}" exactly.
bool is_option_with_placeholder(std::string_view arg) {
  std::size_t eq = arg.find('=');
  return eq != std::string_view::npos && eq >= 2 && arg[0] == '-' && arg.substr(eq + 1) == k_placeholder &&
         arg.substr(0, eq).find(k_placeholder) == std::string_view::npos;
}

}  // namespace

const char* resume_preset_name(ResumePreset preset) {
  return row(preset).name;
}

std::optional<ResumePreset> parse_resume_preset(std::string_view name) {
  for (const auto& r : k_presets)
    if (iequals(name, r.name)) return r.preset;
  return std::nullopt;
}

Result<std::vector<std::string>> resume_command(const std::vector<std::string>& command, ResumePreset preset,
                                                const std::optional<std::string>& checkpoint) {
  if (command.empty())
    return make_error(ErrorCode::invalid_argument, "building the command line: empty command");
  std::vector<std::string> argv;
  if (checkpoint) {
    argv.reserve(command.size() + 2);
    for (const auto& arg : command) argv.push_back(replace_all(arg, k_placeholder, *checkpoint));
    if (preset == ResumePreset::ultralytics)
      set_ultralytics(argv, *checkpoint);
    else if (const char* flag = row(preset).flag)
      set_flag(argv, flag, *checkpoint);
    return argv;
  }

  for (std::size_t i = 0; i < command.size(); ++i) {
    const std::string& arg = command[i];
    if (arg == k_placeholder) {
      if (i == 0)
        return make_error(ErrorCode::invalid_argument, "building the command line: {resume} is the program");
      if (argv.size() > 1 && is_option_name(argv.back()) && argv.back() == command[i - 1]) argv.pop_back();
      continue;
    }
    if (is_option_with_placeholder(arg)) continue;
    if (arg.find(k_placeholder) != std::string::npos)
      return make_error(ErrorCode::invalid_argument,
                        "building the command line for a fresh start: \"" + arg +
                            "\" needs a checkpoint path for {resume}; write it as its own argument "
                            "(--flag {resume}) or as --flag={resume} so it can be left out");
    argv.push_back(arg);
  }
  return argv;
}

}  // namespace gpuhost::supervise
