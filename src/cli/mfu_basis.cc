#include "cli/mfu_basis.h"

#include <cstdio>

#include "knowledge/knowledge.h"
#include "plan/flops.h"
#include "plan/model.h"
#include "platform/files.h"

namespace gpuhost::cli {

namespace {

Result<plan::ModelSpec> find_model(const std::string& name) {
  if (name.ends_with(".json")) {
    auto text = platform::read_file(name);
    if (!text) return make_error(ErrorCode::parse_error, "--model " + name + ": " + text.error().message);
    return plan::model_from_hf_config(*text, name);
  }
  auto catalog = plan::builtin_model_catalog();
  if (!catalog) return std::unexpected(catalog.error());
  auto found = catalog->find(name);
  if (!found) return make_error(ErrorCode::invalid_argument, "--model: " + found.error().message);
  return **found;
}

std::optional<double> dense_peak_tflops(const knowledge::GpuSpec& spec, const std::string& dtype) {
  if (dtype == "bf16") return spec.bf16_dense_tflops;
  if (dtype == "fp16") return spec.fp16_dense_tflops;
  if (dtype == "tf32") return spec.tf32_dense_tflops;
  return spec.fp32_tflops;
}

}  // namespace

Result<supervise::MfuBasis> mfu_basis_for(const MfuRequest& request,
                                          const std::vector<std::string>& gpu_names) {
  if (request.dtype != "bf16" && request.dtype != "fp16" && request.dtype != "tf32" &&
      request.dtype != "fp32")
    return make_error(ErrorCode::invalid_argument,
                      "--dtype expects bf16, fp16, tf32 or fp32, got '" + request.dtype + "'");
  if (request.seq < 1)
    return make_error(
        ErrorCode::invalid_argument,
        "--model needs --seq T, the tokens per sequence the trainer trains on (the attention term "
        "12·L·H·Q·T depends on it)");
  auto model = find_model(request.model);
  if (!model) return std::unexpected(model.error());
  auto flops = plan::training_flops_per_token(*model, request.seq);
  if (!flops)
    return make_error(ErrorCode::invalid_argument, "--model " + request.model + ": " + flops.error().message);
  if (gpu_names.empty())
    return make_error(
        ErrorCode::invalid_argument,
        "--model: no GPU is seen (NVML cannot be read), so there is no peak to compute MFU against");
  auto knowledge = knowledge::load_knowledge();
  if (!knowledge) return std::unexpected(knowledge.error());
  supervise::MfuBasis basis;
  basis.flops_per_token = flops->per_token;
  basis.tokens_per_step = request.tokens_per_step;
  basis.devices = static_cast<int>(gpu_names.size());
  double peak_tflops = 0;
  std::string gpu_label;
  for (const auto& name : gpu_names) {
    auto match = knowledge->gpus.match(name);
    std::optional<double> peak =
        match && match->model->spec ? dense_peak_tflops(*match->model->spec, request.dtype) : std::nullopt;
    if (!peak)
      return make_error(
          ErrorCode::invalid_argument,
          "--model: data/gpus.json has no dense " + request.dtype + " peak for " + name +
              ", so MFU cannot be computed on it (another --dtype, or have the trainer print its mfu)");
    peak_tflops += *peak;
    gpu_label = match->model->name;
  }
  basis.peak_flops = peak_tflops * 1e12;
  char text[320];
  std::snprintf(
      text, sizeof text,
      "6N + 12·L·H·Q·T = %.4g GFLOPs per token for %s at T=%d (N=%.4g matmul parameters); peak %d x %s "
      "dense %s %.4g TFLOPS",
      flops->per_token / 1e9, model->key.c_str(), request.seq, flops->matmul_params, basis.devices,
      gpu_label.c_str(), request.dtype.c_str(), peak_tflops / basis.devices);
  basis.assumption = text;
  return basis;
}

}  // namespace gpuhost::cli
