#pragma once

#include <compare>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace gpuhost::knowledge {

// A CUDA compute capability, "8.6" = {8, 6}. Ordered by major, then minor.
struct ComputeCapability {
  int major = 0;
  int minor = 0;

  // Parses "8.6" / "12.0"; nullopt on anything else.
  [[nodiscard]] static std::optional<ComputeCapability> parse(std::string_view text);
  [[nodiscard]] std::string str() const;  // "8.6"

  friend auto operator<=>(const ComputeCapability&, const ComputeCapability&) = default;
};

// One entry of a compiled arch list (torch.cuda.get_arch_list(), nvcc -gencode): "sm_80" is
// machine code (SASS) for 8.0, "compute_90" is PTX for 9.0. Suffix 'a' (sm_90a) marks
// arch-specific code that runs only on that exact compute capability; 'f' (sm_100f) marks
// family-specific code that runs on the same major with an equal or higher minor.
struct ArchTarget {
  enum class Kind { sass, ptx };
  Kind kind = Kind::sass;
  ComputeCapability cc;
  char suffix = 0;   // 0, 'a' or 'f'
  std::string text;  // as given

  // Parses "sm_86", "sm_90a", "compute_120"; nullopt on anything else.
  [[nodiscard]] static std::optional<ArchTarget> parse(std::string_view text);

  // Whether this target can execute on `device`: SASS needs the same major and a minor no higher
  // than the device's; PTX is JIT-compiled for any device at or above its version.
  [[nodiscard]] bool runs_on(ComputeCapability device) const;
};

// How a compiled arch list fits a device.
enum class ArchMatch {
  sass,     // machine code for the device's major, minor <= device minor
  ptx_jit,  // only PTX: the driver JIT-compiles it at first load (slow start; needs a driver
            // at least as new as the toolkit that emitted the PTX)
  none,     // nothing can run: "no kernel image is available for execution on the device"
};

[[nodiscard]] const char* arch_match_name(ArchMatch match);

struct ArchListFit {
  ArchMatch match = ArchMatch::none;
  std::optional<ArchTarget> target;  // the entry that would run: the closest SASS, else the newest PTX
  std::string explanation;           // one sentence for a report
};

// Decides whether code built for `arch_list` runs on a device of compute capability `device`.
// Entries that do not parse are ignored. Pure.
[[nodiscard]] ArchListFit fit_arch_list(std::span<const std::string> arch_list, ComputeCapability device);

}  // namespace gpuhost::knowledge
