#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/history.h"
#include "telemetry/gpu_sampler.h"
#include "telemetry/http_server.h"
#include "telemetry/job_catalog.h"

namespace gpuhost::telemetry {

// The dashboard of `gpuhost serve` and `gpuhost run --dashboard`: one page (web/src/, with
// uPlot, compiled into the binary; no CDN), its JSON API and a Server-Sent Events stream.
// Reference: doc/dashboard.md.
//
//   GET /                                  the page (strict Content-Security-Policy)
//   GET /assets/NAME                       its script, style sheet and uPlot
//   GET /api/jobs                          every job: phase, counters, series
//   GET /api/job/NAME                      state, checkpoints, events (epoch times, marker kinds)
//   GET /api/job/NAME/series               the job's training scalars
//   GET /api/job/NAME/series/METRIC?width=PX&x=time|step&from=&to=&method=lttb|min_max&smooth=W
//                                          points, downsampled on the server for PX pixels
//   GET /api/gpus?since=T                  recent per-GPU samples (sampling runs while asked)
//   GET /api/stream?job=NAME&since=T&events=N&gpu_since=T   live updates (text/event-stream)
struct DashboardOptions {
  std::chrono::milliseconds stream_poll{500};         // how often a stream looks for news
  std::chrono::milliseconds stream_heartbeat{15000};  // a comment line when nothing else was sent
  std::size_t max_width = 20000;                      // a larger ?width= is clamped
  // A stream sends at most this many new points of one series in one event; beyond it, it tells
  // the page to fetch the series again (downsampled) instead.
  std::size_t max_stream_points = 20000;
};

// Thread-safe: handle() runs on the server's connection threads.
class Dashboard {
 public:
  // `jobs` and `gpus` must outlive the dashboard.
  Dashboard(JobCatalog& jobs, GpuSampler& gpus, DashboardOptions options = {});

  // Answers the paths above (405 for methods other than GET and HEAD, 404 for an unknown job or
  // series, 400 for a bad parameter); nullopt for every other path, which the caller routes.
  [[nodiscard]] std::optional<Response> handle(const RequestHead& request);

 private:
  Response jobs_list();
  Response job_detail(const std::string& name);
  Response series_list(const std::string& name);
  Response series_points(const std::string& name, const std::string& metric, const RequestHead& request);
  Response gpus(const RequestHead& request);
  Response stream(const RequestHead& request);

  JobCatalog& m_jobs;
  GpuSampler& m_gpus;
  const DashboardOptions m_options;
};

// ---- pure parts, exposed for tests ----------------------------------------------------------

// TensorBoard's smoothing (research/05 §2.2; tensorflow/tensorboard
// webapp/widgets/line_chart_v2/data_transformer.ts classicSmoothing): a debiased exponential
// moving average, last = last*w + (1-w)*y, out = last / (1 - w^n) over the n finite values so
// far. Non-finite values pass through unchanged; a constant series is returned as is.
[[nodiscard]] std::vector<double> debiased_ema(std::span<const double> values, double weight);

enum class DownsampleMethod { full, lttb, min_max };
[[nodiscard]] const char* downsample_method_name(DownsampleMethod method);  // "full", "lttb", "min_max"

// The points to draw `width` pixels wide: every index when there are at most 2*width, else
// LTTB to `width` points or min-max to 2*width. `x` must be non-decreasing.
struct PointSelection {
  std::vector<std::size_t> indices;
  DownsampleMethod method = DownsampleMethod::full;
};
[[nodiscard]] PointSelection select_points(std::span<const double> x, std::span<const double> y,
                                           std::size_t width, DownsampleMethod wanted);

// The order a step axis draws a series in: indices sorted by step, and of a step written more
// than once (a trainer resumed from an older checkpoint repeats steps) only the last write,
// which superseded the others. Points without a step are left out.
[[nodiscard]] std::vector<std::size_t> step_order(std::span<const double> step);

// A Server-Sent Events message (html.spec.whatwg.org, "Server-sent events", §9.2.6): optional
// "event:" and "id:" lines, one "data:" line per line of `data`, and the empty line that ends it.
[[nodiscard]] std::string sse_message(std::string_view event, std::string_view id, std::string_view data);

// Series names in the order the page charts them: "loss" first, then other names containing
// "loss", then the rest, each group alphabetically.
[[nodiscard]] std::vector<std::string> chart_order(std::vector<std::string> names);

}  // namespace gpuhost::telemetry
