#include "knowledge/torch_advice.h"

#include "base/strings.h"

namespace gpuhost::knowledge {
namespace {

std::string build_name(const TorchRelease& release, const TorchBuild* build) {
  return "torch " + release.pin_version().str() + " " +
         (build ? build->tag() + " (" + torch_channel_name(build->channel) + ")" : std::string("cpu"));
}

// Lower is better: 0 no caveats, 1 arch inferred or PTX JIT, 2 minor-version compat, 3 both.
int tier(const TorchBuildCheck& check) {
  bool mvc = check.driver && check.driver->kind == DriverVerdictKind::supported_via_minor_version_compat;
  bool soft_arch = !check.arch || check.arch->match != ArchMatch::sass;
  return (mvc ? 2 : 0) + (soft_arch ? 1 : 0);
}

}  // namespace

TorchBuildCheck check_torch_build(const Knowledge& knowledge, const TorchRelease& release,
                                  const TorchBuild& build, const TorchHost& host,
                                  const TorchAdviceOptions& options) {
  TorchBuildCheck check;
  const std::string name = build_name(release, &build);
  if (!build.available_on(host.os))
    check.problems.push_back(name + " has no " + os_name(host.os) + " wheels");
  if (host.python && !release.supports_python(*host.python))
    check.problems.push_back(name + " supports Python " + release.python_min.str() + " to " +
                             release.python_max.str() + ", not " + major_minor(*host.python).str());

  bool mvc = false;
  if (!host.driver) {
    check.problems.push_back("no NVIDIA driver is installed");
  } else {
    check.driver = knowledge.cuda_drivers.verdict(
        DriverQuery{build.cuda, *host.driver, host.os, host.driver_cuda_version});
    switch (check.driver->kind) {
      case DriverVerdictKind::supported: break;
      case DriverVerdictKind::supported_via_minor_version_compat:
        mvc = true;
        if (options.driver_policy == DriverPolicy::require_full_support)
          check.problems.push_back(check.driver->explanation);
        else
          check.caveats.push_back(check.driver->explanation);
        break;
      case DriverVerdictKind::unsupported:
      case DriverVerdictKind::unknown: check.problems.push_back(check.driver->explanation); break;
    }
  }

  if (!host.compute_capability) {
    check.caveats.push_back(
        "the GPU's compute capability is unknown, so the wheel's architectures were not checked");
  } else if (const auto& list = build.arch_list(host.os); !list.empty()) {
    check.arch = fit_arch_list(list, *host.compute_capability);
    if (check.arch->match == ArchMatch::none)
      check.problems.push_back(name + ": " + check.arch->explanation);
    else if (check.arch->match == ArchMatch::ptx_jit && mvc)
      check.problems.push_back(
          name + ": " + check.arch->explanation +
          ", and under minor-version compatibility that JIT may fail (cudaErrorUnsupportedPtxVersion)");
    else if (check.arch->match == ArchMatch::ptx_jit)
      check.caveats.push_back(name + ": " + check.arch->explanation);
  } else {
    check.cuda_cc = knowledge.arch_support.cuda_supports(build.cuda, *host.compute_capability);
    if (check.cuda_cc->status == CudaCcStatus::supported)
      check.caveats.push_back(name + ": its arch list is not recorded; " + check.cuda_cc->explanation +
                              ", but check torch.cuda.get_arch_list() after installing");
    else if (check.cuda_cc->status == CudaCcStatus::unknown)
      check.caveats.push_back(name + ": " + check.cuda_cc->explanation +
                              "; check torch.cuda.get_arch_list() after installing");
    else
      check.problems.push_back(name + ": " + check.cuda_cc->explanation);
  }
  check.usable = check.problems.empty();
  return check;
}

std::optional<TorchRecommendation> recommend_torch(const Knowledge& knowledge, const TorchHost& host,
                                                   const TorchAdviceOptions& options) {
  const PytorchTable& table = knowledge.pytorch;
  auto considered = [&](const TorchRelease& release) {
    if (options.release_line)
      return release.version == major_minor(*options.release_line) &&
             (!host.python || release.supports_python(*host.python));
    if (!options.include_unconfirmed && release.provenance.confidence == Confidence::unconfirmed)
      return false;
    return !host.python || release.supports_python(*host.python);
  };

  bool gpu_host = host.driver.has_value();
  std::optional<std::string> first_problem;  // of the newest candidate, to say why no CUDA wheel fits
  if (gpu_host) {
    for (const auto& release : table.releases) {  // newest first
      if (!considered(release)) continue;
      const TorchBuild* best = nullptr;
      std::optional<TorchBuildCheck> best_check;
      for (const auto& build : release.builds) {  // newest CUDA first
        TorchBuildCheck check = check_torch_build(knowledge, release, build, host, options);
        if (!check.usable) {
          if (!first_problem) first_problem = check.problems.front();
          continue;
        }
        if (!best || tier(check) < tier(*best_check)) {
          best = &build;
          best_check = std::move(check);
        }
      }
      if (!best) continue;
      TorchRecommendation out;
      out.release = &release;
      out.build = best;
      out.index_url = table.index_url(best->tag());
      out.install_command = table.install_command(release, best);
      out.explanation = build_name(release, best) + " is the newest PyTorch wheel that runs on this host";
      if (best_check->driver) out.explanation += ": " + best_check->driver->explanation;
      if (best_check->arch) out.explanation += " " + best_check->arch->explanation + ".";
      if (release.provenance.confidence != Confidence::confirmed)
        out.explanation += " (release row is " + std::string(confidence_name(release.provenance.confidence)) +
                           ": " + release.provenance.note + ")";
      out.check = std::move(best_check);
      return out;
    }
  }

  for (const auto& release : table.releases) {
    if (!considered(release)) continue;
    TorchRecommendation out;
    out.release = &release;
    out.cpu_fallback = gpu_host;
    out.index_url = table.index_url("cpu");
    out.install_command = table.install_command(release, nullptr);
    out.explanation = build_name(release, nullptr) + ": " +
                      (gpu_host ? "no known CUDA wheel runs on this host (" +
                                      first_problem.value_or("no release fits") + ")"
                                : std::string("no NVIDIA driver is installed"));
    return out;
  }
  return std::nullopt;
}

}  // namespace gpuhost::knowledge
