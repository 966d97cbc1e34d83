#include "knowledge/compute_capability.h"

#include <vector>

#include "base/strings.h"

namespace gpuhost::knowledge {

std::optional<ComputeCapability> ComputeCapability::parse(std::string_view text) {
  text = trim(text);
  auto dot = text.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  auto major = parse_int(text.substr(0, dot));
  auto minor = parse_int(text.substr(dot + 1));
  if (!major || !minor || *major < 0 || *major > 99 || *minor < 0 || *minor > 9) return std::nullopt;
  return ComputeCapability{static_cast<int>(*major), static_cast<int>(*minor)};
}

std::string ComputeCapability::str() const {
  return std::to_string(major) + "." + std::to_string(minor);
}

std::optional<ArchTarget> ArchTarget::parse(std::string_view text) {
  std::string_view rest = trim(text);
  ArchTarget target;
  target.text = std::string(rest);
  if (rest.starts_with("sm_")) {
    target.kind = Kind::sass;
    rest.remove_prefix(3);
  } else if (rest.starts_with("compute_")) {
    target.kind = Kind::ptx;
    rest.remove_prefix(8);
  } else {
    return std::nullopt;
  }
  if (!rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) {
    target.suffix = rest.back();
    rest.remove_suffix(1);
  }
  // The last digit is the minor version: "75" = 7.5, "120" = 12.0, "103" = 10.3.
  if (rest.size() < 2 || rest.size() > 3) return std::nullopt;
  auto number = parse_int(rest);
  if (!number) return std::nullopt;
  target.cc = ComputeCapability{static_cast<int>(*number / 10), static_cast<int>(*number % 10)};
  return target;
}

bool ArchTarget::runs_on(ComputeCapability device) const {
  if (suffix == 'a') return device == cc;
  if (kind == Kind::sass || suffix == 'f') return device.major == cc.major && device.minor >= cc.minor;
  return device >= cc;
}

const char* arch_match_name(ArchMatch match) {
  switch (match) {
    case ArchMatch::sass: return "sass";
    case ArchMatch::ptx_jit: return "ptx_jit";
    case ArchMatch::none: return "none";
  }
  return "unknown";
}

ArchListFit fit_arch_list(std::span<const std::string> arch_list, ComputeCapability device) {
  std::optional<ArchTarget> best_sass;
  std::optional<ArchTarget> best_ptx;
  std::vector<std::string> listed;
  for (const auto& text : arch_list) {
    auto target = ArchTarget::parse(text);
    if (!target) continue;
    listed.push_back(target->text);
    if (!target->runs_on(device)) continue;
    auto& best = target->kind == ArchTarget::Kind::sass ? best_sass : best_ptx;
    if (!best || best->cc < target->cc) best = *target;
  }
  ArchListFit fit;
  std::string device_text = "compute capability " + device.str();
  if (best_sass) {
    fit.match = ArchMatch::sass;
    fit.target = best_sass;
    fit.explanation = best_sass->text + " machine code runs on " + device_text;
  } else if (best_ptx) {
    fit.match = ArchMatch::ptx_jit;
    fit.target = best_ptx;
    fit.explanation = "no machine code for " + device_text + "; " + best_ptx->text +
                      " PTX will be JIT-compiled by the driver at first use";
  } else {
    fit.match = ArchMatch::none;
    fit.explanation = "nothing in [" + join(listed, ", ") + "] runs on " + device_text +
                      " (\"no kernel image is available for execution on the device\")";
  }
  return fit;
}

}  // namespace gpuhost::knowledge
