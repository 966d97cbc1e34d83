#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/version.h"
#include "knowledge/common.h"

namespace gpuhost::knowledge {

enum class TorchChannel {
  stable,        // "Stable CUDA" in PyTorch's release matrix
  experimental,  // "Experimental CUDA": published on the same index, less tested
  extra,         // offered in a release announcement but outside the matrix (2.13 cu129)
};

[[nodiscard]] const char* torch_channel_name(TorchChannel channel);

// One CUDA wheel build of a PyTorch release (data/pytorch.json).
struct TorchBuild {
  Version cuda;  // "12.1": the CUDA runtime bundled in the wheel (torch.version.cuda)
  TorchChannel channel = TorchChannel::stable;
  std::optional<Version> cudnn;  // "8.9.2.26"
  // torch.cuda.get_arch_list() of the build where PyTorch published it; empty when unknown.
  std::vector<std::string> archs;
  std::vector<std::string> archs_linux;  // the Linux list where it differs (PTX on Linux only)
  std::string archs_source;
  std::vector<Os> platforms;  // empty: Linux and Windows
  std::string note;

  [[nodiscard]] std::string tag() const;  // "cu121"
  // The arch list on `os`; empty when not published.
  [[nodiscard]] const std::vector<std::string>& arch_list(Os os) const;
  [[nodiscard]] bool available_on(Os os) const;
};

// The torchvision and torchaudio releases built against one torch release: installed with it, in
// the same pip command and from the same index.
struct TorchCompanions {
  Version torchvision;  // "0.23.0"
  Version torchaudio;   // "2.8.0"
  Provenance provenance;
};

struct TorchRelease {
  Version version;                         // "2.1": a release line
  std::optional<Version> patch_version;    // a patch known to exist ("2.1.2"), when a source gives one
  Version python_min;                      // "3.8"
  Version python_max;                      // "3.11"
  std::vector<TorchBuild> builds;          // newest CUDA first
  std::optional<Version> pypi_linux_cuda;  // the CUDA of the plain PyPI wheel on Linux, when known
  std::optional<TorchCompanions> companions;  // when a source pins them for pin_version()
  Provenance provenance;                   // confidence marks rows the research calls future-dated

  // The exact version to pin: patch_version, else X.Y.0.
  [[nodiscard]] Version pin_version() const;
  // Whether Python `python` (any patch) is in the supported range.
  [[nodiscard]] bool supports_python(const Version& python) const;
  // The build with this CUDA major.minor; nullptr when none.
  [[nodiscard]] const TorchBuild* find_build(const Version& cuda) const;
};

// A pip command form, used for releases from `min_torch` on. The template has {version},
// {index_url} and optionally {tag}.
struct TorchInstallForm {
  Version min_torch;
  std::string template_text;
  Provenance provenance;
};

// data/pytorch.json, loaded and validated; releases newest first. Immutable after loading;
// safe to share between threads.
struct PytorchTable {
  std::string index_url_template;  // "https://download.pytorch.org/whl/{tag}"
  Provenance index_url_provenance;
  std::vector<TorchInstallForm> install_forms;  // newest min_torch first
  std::vector<TorchRelease> releases;
  std::vector<Fact> facts;

  // The release line of `torch` ("2.1.0+cu121" and "2.1" both give 2.1); nullptr when unknown.
  [[nodiscard]] const TorchRelease* find_release(const Version& torch) const;
  // "https://download.pytorch.org/whl/cu121" for tag "cu121"; tag "cpu" gives the CPU index.
  [[nodiscard]] std::string index_url(std::string_view tag) const;
  // The pip command installing `release` built with `build`, or the CPU build when `build` is
  // nullptr: "pip install torch==2.1.2 --index-url https://download.pytorch.org/whl/cu121".
  // Empty when no install form covers the release.
  [[nodiscard]] std::string install_command(const TorchRelease& release, const TorchBuild* build) const;
};

// "cu121" -> 12.1, "cu118" -> 11.8, "cu130" -> 13.0; nullopt for anything else.
[[nodiscard]] std::optional<Version> cuda_from_tag(std::string_view tag);
// 12.1 -> "cu121".
[[nodiscard]] std::string cuda_tag(const Version& cuda);

// torch.__version__, taken apart: "2.1.0+cu121", "2.2.2+cpu", "2.0.1", "2.3.0+rocm5.7".
struct TorchVersion {
  Version version;              // 2.1.0
  std::string local;            // "cu121", "cpu", "rocm5.7"; empty for a plain PyPI version
  std::optional<Version> cuda;  // from a cuXYZ local part
};

[[nodiscard]] std::optional<TorchVersion> parse_torch_version(std::string_view text);

// What an installed torch is, from its version string alone (no Python run needed).
struct InstalledTorch {
  TorchVersion version;
  const TorchRelease* release = nullptr;  // nullptr: a release line the table does not know
  bool cpu_only = false;                  // "+cpu", or a plain version on Windows (PyPI is CPU-only there)
  bool rocm = false;
  const TorchBuild* build = nullptr;  // the CUDA build, when the version or platform identifies it
  std::string explanation;
};

// Identifies `torch_version` as installed on `os`: "+cuXYZ" names the build; a plain version is
// the PyPI wheel, CPU-only on Windows and, on Linux, the release's PyPI CUDA build when known.
[[nodiscard]] InstalledTorch identify_torch(const PytorchTable& table, std::string_view torch_version, Os os);

}  // namespace gpuhost::knowledge
