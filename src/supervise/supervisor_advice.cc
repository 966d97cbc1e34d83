// The advisor inside `gpuhost run` (supervise/job_advisor.h): started with the job, pointed at
// each attempt's trainer, and its judgements journalled as `advice` records with the trainer's
// step time over the window and, once known, the last run's for comparison (doc/advise.md).
#include <cmath>

#include "platform/environment.h"
#include "supervise/supervisor_loop.h"

namespace gpuhost::supervise::detail {

namespace {

// What makes two judgements the same for the journal: the findings, not their numbers.
std::string advice_key(const std::vector<advise::Finding>& findings) {
  std::string key;
  for (const auto& f : findings)
    key +=
        f.id + "/" + advise::strength_name(f.strength) + "/" + (f.gpu ? std::to_string(*f.gpu) : "-") + ";";
  return key;
}

// A step time this much away from the last one journalled is journalled again.
constexpr double k_step_time_change = 0.2;

}  // namespace

// MFU from run --model when the trainer prints none: FLOPs per token x tokens per second over
// the dense peak. Tokens per second: the trainer's own figure, else --tokens-per-step over the
// step time. nullopt when neither is known.
std::optional<std::pair<double, std::string>> Supervisor::computed_mfu(
    std::optional<double> step_seconds) const {
  if (!m_options.mfu || m_options.mfu->peak_flops <= 0) return std::nullopt;
  const MfuBasis& basis = *m_options.mfu;
  char text[96];
  double tokens_per_second = 0;
  std::string from;
  if (auto rate = m_metrics ? m_metrics->attempt_token_rate() : std::nullopt) {
    tokens_per_second = rate->per_device ? rate->tokens_per_second * basis.devices : rate->tokens_per_second;
    std::snprintf(text, sizeof text, "%.4g tokens/s%s as the trainer prints it", rate->tokens_per_second,
                  rate->per_device ? " per GPU" : "");
    from = text;
  } else if (basis.tokens_per_step && step_seconds && *step_seconds > 0) {
    tokens_per_second = *basis.tokens_per_step / *step_seconds;
    std::snprintf(text, sizeof text, "%.4g tokens/s (%.6g tokens per step / %.3g s per step)",
                  tokens_per_second, *basis.tokens_per_step, *step_seconds);
    from = text;
  } else {
    return std::nullopt;
  }
  return std::pair{basis.flops_per_token * tokens_per_second / basis.peak_flops * 100,
                   basis.assumption + "; " + from};
}

void Supervisor::start_advisor() {
  if (m_options.advise_window <= std::chrono::milliseconds::zero()) return;
  AdvisorOptions options;
  options.window = m_options.advise_window;
  options.sample_interval =
      std::min<std::chrono::milliseconds>(std::chrono::seconds(1), m_options.advise_window / 4);
  if (m_options.topology.nproc_per_node && *m_options.topology.nproc_per_node > 0)
    options.local_processes = static_cast<unsigned>(*m_options.topology.nproc_per_node);
  // The GPUs the trainer sees: --gpu / --env first, else what it inherits from us.
  auto visible = spec_environment_value(m_spec, "CUDA_VISIBLE_DEVICES");
  if (!visible) visible = platform::get_env("CUDA_VISIBLE_DEVICES");
  if (visible) options.visible_devices = advise::split_visible_devices(*visible);
  m_advisor = std::make_unique<JobAdvisor>(std::move(options));
}

void Supervisor::advisor_attempt_started(long group) {
  if (!m_advisor) return;
  m_advisor->watch(group);
  m_advice_mark = AdviceMark{SteadyClock::now(), m_metrics ? m_metrics->attempt_step() : std::nullopt};
}

void Supervisor::advisor_attempt_ended() {
  if (m_advisor) m_advisor->stop();
}

void Supervisor::record_advice() {
  if (!m_advisor) return;
  auto report = m_advisor->take();
  if (!report) return;
  const auto now = SteadyClock::now();
  const std::optional<std::int64_t> step = m_metrics ? m_metrics->attempt_step() : std::nullopt;
  std::optional<double> step_seconds;
  std::int64_t steps = 0;
  if (m_advice_mark && m_advice_mark->step && step && *step > *m_advice_mark->step) {
    steps = *step - *m_advice_mark->step;
    step_seconds =
        std::chrono::duration<double>(now - m_advice_mark->at).count() / static_cast<double>(steps);
  }
  m_advice_mark = AdviceMark{now, step};

  const std::string key = advice_key(report->findings);
  const bool step_time_news =
      step_seconds && (!m_last_advice_step_seconds ||
                       std::abs(*step_seconds / *m_last_advice_step_seconds - 1) >= k_step_time_change);
  if (m_last_advice_key == key && !step_time_news) return;
  m_last_advice_key = key;
  if (step_seconds) m_last_advice_step_seconds = step_seconds;

  json::Value fields = json::Value::object();
  json::Value findings = json::Value::array();
  for (const auto& f : report->findings) findings.push_back(advise::to_json(f));
  fields["findings"] = std::move(findings);
  fields["window_s"] = std::round(report->watched.seconds * 10) / 10;
  fields["gpus_seen"] = static_cast<std::int64_t>(report->watched.observation.gpus.size());
  if (report->watched.observation.gpus.empty()) fields["gpu_unseen"] = report->watched.gpu_unseen;
  if (!report->watched.observation.host) fields["host_unseen"] = report->watched.observation.host_unseen;
  if (step_seconds) {
    fields["step_seconds"] = *step_seconds;
    fields["steps"] = steps;
  }
  if (state().last_run_step_seconds) fields["last_run_step_seconds"] = *state().last_run_step_seconds;
  // MFU as the trainer itself reports it: model FLOPs per token and the GPU's dense peak are its
  // own assumptions (nanoGPT: 6N + 12·L·H·Q·T against an A100's 312 TFLOPS bf16).
  if (const auto mfu = m_metrics ? m_metrics->attempt_mfu_percent() : std::nullopt) {
    fields["mfu_percent"] = std::round(*mfu * 100) / 100;
    fields["mfu_basis"] = "the trainer's own figure";
  } else if (auto computed = computed_mfu(step_seconds)) {
    fields["mfu_percent"] = std::round(computed->first * 100) / 100;
    fields["mfu_basis"] = computed->second;
  }
  record("advice", std::move(fields));
}

}  // namespace gpuhost::supervise::detail
