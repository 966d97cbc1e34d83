#include "telemetry/dashboard.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <memory>

#include "base/json.h"
#include "base/strings.h"
#include "base/time_format.h"
#include "metrics/downsample.h"
#include "telemetry/dashboard_assets.h"

namespace gpuhost::telemetry {
namespace {

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();
constexpr double k_minus_infinity = -std::numeric_limits<double>::infinity();

// Scripts and styles come only from this server as files (no inline code, no eval); the page
// talks only to this server. uPlot sets styles through the CSSOM, which style-src does not limit.
constexpr std::string_view k_page_policy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

constexpr std::size_t k_default_width = 1000;

void append_number(std::string& out, double value) {
  if (!std::isfinite(value)) {
    out += "null";  // JSON has no NaN/Infinity; the page draws a gap
    return;
  }
  char buffer[32];
  // Shortest text that reads back as the same double: the page sees exactly what was stored.
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  out.append(buffer, ec == std::errc() ? end : buffer);
}

void append_string(std::string& out, std::string_view text) {
  out += json::dump(json::Value(text));
}

// `[f(0), f(1), ...]` for `count` numbers.
template <typename Get>
void append_numbers(std::string& out, std::size_t count, Get get) {
  out += '[';
  for (std::size_t i = 0; i < count; ++i) {
    if (i) out += ',';
    append_number(out, get(i));
  }
  out += ']';
}

Response json_response(std::string body) {
  Response r;
  r.content_type = "application/json; charset=utf-8";
  r.body = std::move(body);
  return r;
}

Response json_error(int status, std::string_view message) {
  std::string body = "{\"error\":";
  append_string(body, message);
  body += "}\n";
  Response r = json_response(std::move(body));
  r.status = status;
  return r;
}

std::optional<double> number_param(const RequestHead& request, std::string_view name, std::string& error) {
  auto text = request.query(name);
  if (!text || text->empty()) return std::nullopt;
  auto value = parse_double(*text);
  if (!value || !std::isfinite(*value)) {
    error = std::string(name) + " must be a number";
    return std::nullopt;
  }
  return value;
}

// The events that the page marks on the time axis: checkpoint commits, notices, and restarts of
// the trainer (every child start after the first).
std::vector<const char*> marker_kinds(const job::JobState& state) {
  std::vector<const char*> kinds;
  kinds.reserve(state.events.size());
  bool started = false;
  for (const auto& event : state.events) {
    const char* kind = nullptr;
    if (event.type == "checkpoint_committed") {
      kind = "checkpoint";
    } else if (event.type == "notice") {
      kind = "notice";
    } else if (event.type == "child_started") {
      if (started) kind = "restart";
      started = true;
    }
    kinds.push_back(kind);
  }
  return kinds;
}

// `checkpoint_count`: the number of committed checkpoints as "checkpoints"; the job's detail
// leaves it out, its "checkpoints" being the list (one key, one meaning).
void append_job_summary(std::string& out, const std::string& name, const JobJournalView& view,
                        bool checkpoint_count = true) {
  const auto& s = view.state;
  out += "\"name\":";
  append_string(out, name);
  out += ",\"phase\":";
  append_string(out, job::job_phase_name(s.phase));
  out += ",\"last_step\":";
  if (s.last_step)
    out += std::to_string(*s.last_step);
  else
    out += "null";
  if (checkpoint_count) {
    std::size_t committed = 0;
    for (const auto& c : s.checkpoints)
      if (c.status == job::CheckpointStatus::committed) ++committed;
    out += ",\"checkpoints\":" + std::to_string(committed);
  }
  out += ",\"child_starts\":" + std::to_string(s.child_starts);
  out += ",\"restarts\":" + std::to_string(s.restarts);
  out += ",\"preemptions\":" + std::to_string(s.preemptions);
  out += ",\"supervisor_runs\":" + std::to_string(s.supervisor_runs);
  out += ",\"last_exit\":";
  if (s.last_exit)
    append_string(out, *s.last_exit);
  else
    out += "null";
  // A multi-node job (doc/run-multinode.md): where this node runs, the newest step on every
  // node, and (on node 0) each node's newest commit and whether it is late.
  out += ",\"topology\":";
  append_string(out, s.topology);
  out += ",\"global_step\":";
  out += s.global_step ? std::to_string(*s.global_step) : "null";
  out += ",\"peer_lost\":";
  append_string(out, s.peer_lost);
  out += ",\"nodes\":[";
  for (std::size_t i = 0; i < s.nodes.size(); ++i) {
    const auto& node = s.nodes[i];
    if (i) out += ',';
    out += "{\"node\":" + std::to_string(node.node) +
           ",\"self\":" + (s.self_node == node.node ? "true" : "false") +
           ",\"step\":" + (node.step ? std::to_string(*node.step) : "null") + ",\"state\":";
    append_string(out, node.state);
    out += std::string(",\"late\":") + (s.node_late(node) ? "true" : "false") + "}";
  }
  out += ']';
  out += ",\"journal\":{\"records\":" + std::to_string(view.records) +
         ",\"corrupt_records\":" + std::to_string(view.corrupt_records) + ",\"error\":";
  append_string(out, view.read_error);
  out += '}';
}

// Events from index `first` on, with their marker kinds.
void append_events(std::string& out, const JobJournalView& view, std::size_t first) {
  const auto kinds = marker_kinds(view.state);
  out += '[';
  for (std::size_t i = first; i < view.state.events.size(); ++i) {
    const auto& e = view.state.events[i];
    if (i > first) out += ',';
    out += "{\"index\":" + std::to_string(i) + ",\"time\":";
    append_number(out, view.event_times[i]);
    out += ",\"type\":";
    append_string(out, e.type);
    out += ",\"summary\":";
    append_string(out, e.summary);
    out += ",\"marker\":";
    if (kinds[i])
      append_string(out, kinds[i]);
    else
      out += "null";
    out += '}';
  }
  out += ']';
}

const char* checkpoint_status_name(job::CheckpointStatus status) {
  switch (status) {
    case job::CheckpointStatus::committed: return "committed";
    case job::CheckpointStatus::bad: return "bad";
    case job::CheckpointStatus::retired: return "retired";
  }
  return "unknown";
}

std::string gpu_json(const GpuHistory& h) {
  std::string out = "{\"available\":";
  out += h.available ? "true" : "false";
  out += ",\"error\":";
  append_string(out, h.error);
  out += ",\"gpus\":[";
  for (std::size_t i = 0; i < h.gpus.size(); ++i) {
    const auto& g = h.gpus[i];
    if (i) out += ',';
    out += "{\"index\":" + std::to_string(g.index) + ",\"name\":";
    append_string(out, g.name);
    out += ",\"uuid\":";
    append_string(out, g.uuid);
    out += ",\"memory_total_bytes\":";
    append_number(out, g.memory_total_bytes);
    out += ",\"power_limit_w\":";
    append_number(out, g.power_limit_w);
    out += '}';
  }
  out += "],\"time\":";
  append_numbers(out, h.frames.size(), [&](std::size_t k) { return h.frames[k].time; });
  std::size_t gpu_count = h.gpus.size();
  for (const auto& f : h.frames) gpu_count = std::max(gpu_count, f.gpus.size());
  // One array per GPU and value, each as long as "time".
  auto column = [&](const char* name, double GpuReading::*member) {
    out += ",\"";
    out += name;
    out += "\":[";
    for (std::size_t g = 0; g < gpu_count; ++g) {
      if (g) out += ',';
      append_numbers(out, h.frames.size(), [&](std::size_t k) {
        const auto& gpus = h.frames[k].gpus;
        return g < gpus.size() ? gpus[g].*member : k_nan;
      });
    }
    out += ']';
  };
  column("utilization_percent", &GpuReading::utilization_percent);
  column("memory_used_bytes", &GpuReading::memory_used_bytes);
  column("temperature_c", &GpuReading::temperature_c);
  column("power_w", &GpuReading::power_w);
  out += '}';
  return out;
}

std::string content_type_of(std::string_view name) {
  if (name.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (name.ends_with(".css")) return "text/css; charset=utf-8";
  if (name.ends_with(".html")) return "text/html; charset=utf-8";
  return "application/octet-stream";
}

Response asset(std::string_view name) {
  const EmbeddedFile* file = assets::find_embedded(name);
  if (!file) return json_error(404, "no such asset");
  Response r;
  r.content_type = content_type_of(name);
  r.body = std::string(file->bytes);
  if (name.ends_with(".html")) {
    r.headers.emplace_back("Content-Security-Policy", std::string(k_page_policy));
    r.headers.emplace_back("X-Frame-Options", "DENY");
    r.headers.emplace_back("Referrer-Policy", "no-referrer");
  }
  return r;
}

// Where a stream is: what it has sent so far. Sent as each message's id, so that a browser
// reconnecting with Last-Event-ID continues where it was.
struct StreamCursor {
  std::size_t events = 0;            // job events sent (an index into JobState::events)
  double points = k_minus_infinity;  // newest point time sent, over all series
  double gpu = k_minus_infinity;     // newest GPU sample time sent

  [[nodiscard]] std::string id() const {
    std::string out = std::to_string(events) + ",";
    append_number(out, points);
    out += ',';
    append_number(out, gpu);
    return out;
  }
  // "E,P,G" as id() writes it ("null" for no time yet).
  [[nodiscard]] static std::optional<StreamCursor> parse(std::string_view text) {
    const auto parts = split(text, ',');
    if (parts.size() != 3) return std::nullopt;
    StreamCursor c;
    auto events = parse_int(parts[0]);
    if (!events || *events < 0) return std::nullopt;
    c.events = static_cast<std::size_t>(*events);
    auto time = [](const std::string& s) -> std::optional<double> {
      if (s == "null") return k_minus_infinity;
      return parse_double(s);
    };
    auto points = time(parts[1]);
    auto gpu = time(parts[2]);
    if (!points || !gpu) return std::nullopt;
    c.points = *points;
    c.gpu = *gpu;
    return c;
  }
};

}  // namespace

// ---- pure parts ---------------------------------------------------------------------------

std::vector<double> debiased_ema(std::span<const double> values, double weight) {
  std::vector<double> out(values.begin(), values.end());
  if (values.empty()) return out;
  weight = std::clamp(std::isfinite(weight) ? weight : 0.0, 0.0, 1.0);
  // A constant series stays as it is (tensorboard#786: smoothing it only adds rounding noise).
  if (std::all_of(values.begin(), values.end(), [&](double v) { return v == values[0]; })) return out;
  double last = 0;
  double weight_power = 1;  // weight^n
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) continue;
    last = last * weight + (1 - weight) * values[i];
    weight_power *= weight;
    out[i] = weight == 1 ? last : last / (1 - weight_power);
  }
  return out;
}

const char* downsample_method_name(DownsampleMethod method) {
  switch (method) {
    case DownsampleMethod::full: return "full";
    case DownsampleMethod::lttb: return "lttb";
    case DownsampleMethod::min_max: return "min_max";
  }
  return "unknown";
}

PointSelection select_points(std::span<const double> x, std::span<const double> y, std::size_t width,
                             DownsampleMethod wanted) {
  const std::size_t n = std::min(x.size(), y.size());
  width = std::max<std::size_t>(width, 2);
  PointSelection s;
  if (wanted == DownsampleMethod::full || n <= 2 * width) {
    s.indices.resize(n);
    for (std::size_t i = 0; i < n; ++i) s.indices[i] = i;
    return s;
  }
  s.method = wanted;
  s.indices = wanted == DownsampleMethod::lttb ? metrics::lttb(x.first(n), y.first(n), width)
                                               : metrics::min_max(x.first(n), y.first(n), 2 * width);
  return s;
}

std::vector<std::size_t> step_order(std::span<const double> step) {
  // From the end: a point stays when every later point has a larger step. What a later point
  // undercuts was redone after a resume from an older checkpoint (or logged again), and the
  // survivors come out in increasing step order.
  std::vector<std::size_t> kept;
  double limit = std::numeric_limits<double>::infinity();
  for (std::size_t i = step.size(); i-- > 0;) {
    if (!std::isfinite(step[i])) continue;
    if (step[i] < limit) {
      kept.push_back(i);
      limit = step[i];
    }
  }
  std::reverse(kept.begin(), kept.end());
  return kept;
}

std::string sse_message(std::string_view event, std::string_view id, std::string_view data) {
  std::string out;
  if (!event.empty()) out += "event: " + std::string(event) + "\n";
  if (!id.empty()) out += "id: " + std::string(id) + "\n";
  for (const auto& line : split(data, '\n')) out += "data: " + line + "\n";
  out += '\n';
  return out;
}

std::vector<std::string> chart_order(std::vector<std::string> names) {
  auto rank = [](const std::string& name) {
    if (name == "loss") return 0;
    return contains_icase(name, "loss") ? 1 : 2;
  };
  std::sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    return a < b;
  });
  return names;
}

// ---- the dashboard ------------------------------------------------------------------------

Dashboard::Dashboard(JobCatalog& jobs, GpuSampler& gpus, DashboardOptions options)
    : m_jobs(jobs), m_gpus(gpus), m_options(options) {}

std::optional<Response> Dashboard::handle(const RequestHead& request) {
  const std::string path = request.path();
  const bool page = path == "/" || path == "/index.html";
  if (!page && !path.starts_with("/assets/") && !path.starts_with("/api/")) return std::nullopt;
  if (request.method != "GET" && request.method != "HEAD") {
    Response r = json_error(405, "method not allowed");
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  if (page) return asset("index.html");
  if (path.starts_with("/assets/")) {
    std::string_view name = std::string_view(path).substr(8);
    if (name == "index.html") return json_error(404, "no such asset");
    return asset(name);
  }
  if (path == "/api/jobs") return jobs_list();
  if (path == "/api/gpus") return gpus(request);
  if (path == "/api/stream") return stream(request);

  constexpr std::string_view job_prefix = "/api/job/";
  if (!path.starts_with(job_prefix)) return json_error(404, "no such API; see doc/dashboard.md");
  std::string_view rest = std::string_view(path).substr(job_prefix.size());
  const auto slash = rest.find('/');
  const auto name = percent_decode(rest.substr(0, slash));
  if (!name || name->empty()) return json_error(400, "malformed job name");
  if (slash == std::string_view::npos) return job_detail(*name);
  rest = rest.substr(slash);
  if (rest == "/series") return series_list(*name);
  constexpr std::string_view series_prefix = "/series/";
  if (rest.starts_with(series_prefix)) {
    // A metric name may hold '/' ("train/box_loss"), sent as %2F or as is: all the rest is the name.
    const auto metric = percent_decode(rest.substr(series_prefix.size()));
    if (!metric || metric->empty()) return json_error(400, "malformed metric name");
    return series_points(*name, *metric, request);
  }
  return json_error(404, "no such API; see doc/dashboard.md");
}

Response Dashboard::jobs_list() {
  m_jobs.refresh();
  std::string out = "{\"jobs\":[";
  bool first = true;
  for (const auto& job : m_jobs.jobs()) {
    if (!first) out += ',';
    first = false;
    out += '{';
    append_job_summary(out, job.name, *job.journal);
    if (job.history) {
      std::uint64_t points = 0;
      std::size_t series = 0;
      double last_time = k_nan;
      for (const auto& info : job.history->series()) {
        ++series;
        points += info.points;
        if (!(last_time >= info.last_time)) last_time = info.last_time;
      }
      out += ",\"series\":" + std::to_string(series) + ",\"points\":" + std::to_string(points) +
             ",\"last_time\":";
      append_number(out, last_time);
    } else {
      // No metrics yet, or a job that has ended whose history nobody asked for (not loaded).
      out += ",\"series\":null,\"points\":null,\"last_time\":null";
    }
    out += '}';
  }
  out += "]}\n";
  return json_response(std::move(out));
}

Response Dashboard::job_detail(const std::string& name) {
  m_jobs.refresh();
  auto job = m_jobs.job(name);
  if (!job) return json_error(404, "no job named " + name);
  const JobJournalView& view = *job->journal;
  std::string out = "{";
  append_job_summary(out, job->name, view, false);
  out += ",\"checkpoints\":[";
  for (std::size_t i = 0; i < view.state.checkpoints.size(); ++i) {
    const auto& c = view.state.checkpoints[i];
    if (i) out += ',';
    out += "{\"id\":";
    append_string(out, c.id);
    out += ",\"time\":";
    append_number(out, view.checkpoint_times[i]);
    out += ",\"step\":";
    if (c.step)
      out += std::to_string(*c.step);
    else
      out += "null";
    out += ",\"size_bytes\":" + std::to_string(c.size_bytes) + ",\"format\":";
    append_string(out, c.format);
    out += ",\"status\":";
    append_string(out, checkpoint_status_name(c.status));
    out += c.pinned ? ",\"pinned\":true}" : ",\"pinned\":false}";
  }
  out += "],\"events\":";
  append_events(out, view, 0);
  out += "}\n";
  return json_response(std::move(out));
}

Response Dashboard::series_list(const std::string& name) {
  m_jobs.refresh();
  auto job = m_jobs.job(name, HistoryNeed::load);
  if (!job) return json_error(404, "no job named " + name);
  std::vector<metrics::SeriesInfo> infos;
  if (job->history) infos = job->history->series();
  std::vector<std::string> names;
  for (const auto& info : infos) names.push_back(info.name);
  std::string out = "{\"series\":[";
  bool first = true;
  for (const auto& ordered : chart_order(std::move(names))) {
    const auto& info =
        *std::find_if(infos.begin(), infos.end(), [&](const auto& i) { return i.name == ordered; });
    if (!first) out += ',';
    first = false;
    out += "{\"name\":";
    append_string(out, info.name);
    out += ",\"source\":";
    append_string(out, info.source);
    out += ",\"points\":" + std::to_string(info.points) + ",\"last_value\":";
    append_number(out, info.last_value);
    out += ",\"last_time\":";
    append_number(out, info.last_time);
    out += ",\"last_step\":";
    if (info.last_step)
      out += std::to_string(*info.last_step);
    else
      out += "null";
    out += '}';
  }
  out += "]}\n";
  return json_response(std::move(out));
}

Response Dashboard::series_points(const std::string& name, const std::string& metric,
                                  const RequestHead& request) {
  std::string error;
  std::size_t width = k_default_width;
  if (auto w = number_param(request, "width", error)) {
    if (*w < 1) return json_error(400, "width must be at least 1");
    width = std::min(static_cast<std::size_t>(*w), m_options.max_width);
  }
  const auto from = number_param(request, "from", error);
  const auto to = number_param(request, "to", error);
  const auto smooth = number_param(request, "smooth", error);
  if (!error.empty()) return json_error(400, error);
  if (smooth && (*smooth < 0 || *smooth > 1)) return json_error(400, "smooth must be between 0 and 1");
  const std::string axis = request.query("x").value_or("time");
  if (axis != "time" && axis != "step") return json_error(400, "x must be time or step");
  const std::string method_name = request.query("method").value_or("lttb");
  DownsampleMethod method = DownsampleMethod::lttb;
  if (method_name == "min_max" || method_name == "minmax")
    method = DownsampleMethod::min_max;
  else if (method_name != "lttb")
    return json_error(400, "method must be lttb or min_max");

  m_jobs.refresh();
  auto job = m_jobs.job(name, HistoryNeed::load);
  if (!job) return json_error(404, "no job named " + name);
  std::optional<metrics::SeriesData> data;
  if (job->history) data = job->history->read(metric);
  if (!data) return json_error(404, "job " + name + " has no series named " + metric);
  const std::size_t n = std::min({data->time.size(), data->step.size(), data->value.size()});

  // The points in x order: append order for time (sorted if a source wrote out of order), the
  // surviving points of each step for step. The common case, time already in order, is a
  // contiguous range of the stored columns and is not copied again.
  const bool by_step = axis == "step";
  const std::vector<double>& xs = by_step ? data->step : data->time;
  std::size_t first = 0, last = n;  // when contiguous: the range [first, last)
  std::vector<std::size_t> order;   // else: the points in x order
  const auto stored_end = data->time.begin() + static_cast<std::ptrdiff_t>(n);
  const bool contiguous = !by_step && std::is_sorted(data->time.begin(), stored_end);
  if (contiguous) {
    if (from)
      first = static_cast<std::size_t>(std::lower_bound(data->time.begin(), stored_end, *from) -
                                       data->time.begin());
    if (to)
      last = static_cast<std::size_t>(std::upper_bound(data->time.begin(), stored_end, *to) -
                                      data->time.begin());
    last = std::max(first, last);
  } else {
    if (by_step) {
      order = step_order(std::span(data->step).first(n));
    } else {
      order.resize(n);
      for (std::size_t i = 0; i < n; ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(),
                       [&](std::size_t a, std::size_t b) { return xs[a] < xs[b]; });
    }
    if (from || to)
      std::erase_if(order, [&](std::size_t i) { return (from && xs[i] < *from) || (to && xs[i] > *to); });
  }
  const std::size_t count = contiguous ? last - first : order.size();
  auto stored = [&](std::size_t k) { return contiguous ? first + k : order[k]; };
  std::vector<double> x_copy, y_copy;
  std::span<const double> x, y;
  if (contiguous) {
    x = std::span(data->time).subspan(first, count);
    y = std::span(data->value).subspan(first, count);
  } else {
    x_copy.resize(count);
    y_copy.resize(count);
    for (std::size_t k = 0; k < count; ++k) {
      x_copy[k] = xs[order[k]];
      y_copy[k] = data->value[order[k]];
    }
    x = x_copy;
    y = y_copy;
  }
  const PointSelection selection = select_points(x, y, width, method);
  std::vector<double> smoothed;
  if (smooth) smoothed = debiased_ema(y, *smooth);

  const auto& chosen = selection.indices;
  std::string out = "{\"name\":";
  append_string(out, metric);
  out += ",\"x\":\"" + axis + "\",\"method\":\"" + downsample_method_name(selection.method) + "\"";
  out += ",\"points\":" + std::to_string(n) + ",\"total\":" + std::to_string(count) +
         ",\"returned\":" + std::to_string(chosen.size()) + ",\"last_time\":";
  append_number(
      out,
      n ? *std::max_element(data->time.begin(), data->time.begin() + static_cast<std::ptrdiff_t>(n)) : k_nan);
  std::size_t non_finite = 0;
  for (double v : y)
    if (!std::isfinite(v)) ++non_finite;
  out += ",\"non_finite\":" + std::to_string(non_finite);
  out += ",\"time\":";
  append_numbers(out, chosen.size(), [&](std::size_t k) { return data->time[stored(chosen[k])]; });
  out += ",\"step\":";
  append_numbers(out, chosen.size(), [&](std::size_t k) { return data->step[stored(chosen[k])]; });
  out += ",\"value\":";
  append_numbers(out, chosen.size(), [&](std::size_t k) { return y[chosen[k]]; });
  if (smooth) {
    out += ",\"smoothing\":";
    append_number(out, *smooth);
    out += ",\"smoothed\":";
    append_numbers(out, chosen.size(), [&](std::size_t k) { return smoothed[chosen[k]]; });
  }
  out += "}\n";
  return json_response(std::move(out));
}

Response Dashboard::gpus(const RequestHead& request) {
  std::string error;
  const auto since = number_param(request, "since", error);
  if (!error.empty()) return json_error(400, error);
  m_gpus.keep_alive();
  GpuHistory history = m_gpus.since(since.value_or(k_minus_infinity));
  if (!since && history.frames.empty()) {
    // The first look: answer with a sample now rather than an empty chart.
    m_gpus.sample_now();
    history = m_gpus.since(k_minus_infinity);
  }
  return json_response(gpu_json(history) + "\n");
}

Response Dashboard::stream(const RequestHead& request) {
  std::string error;
  const auto since = number_param(request, "since", error);
  const auto events = number_param(request, "events", error);
  const auto gpu_since = number_param(request, "gpu_since", error);
  if (!error.empty()) return json_error(400, error);
  const std::optional<std::string> job_name = request.query("job");

  StreamCursor cursor;
  if (job_name) {
    m_jobs.refresh();
    const auto watched = m_jobs.job(*job_name, HistoryNeed::load);
    if (!watched) return json_error(404, "no job named " + *job_name);
    // Without a position, the stream starts from what is there now.
    cursor.events = watched->journal->state.events.size();
    if (watched->history)
      for (const auto& info : watched->history->series())
        cursor.points = std::max(cursor.points, info.last_time);
  }
  cursor.gpu = unix_seconds();
  if (since) cursor.points = *since;
  if (events && *events >= 0) cursor.events = static_cast<std::size_t>(*events);
  if (gpu_since) cursor.gpu = *gpu_since;
  if (auto last = request.header("Last-Event-ID"))
    if (auto resumed = StreamCursor::parse(*last)) cursor = *resumed;

  Response r;
  r.content_type = "text/event-stream";
  r.stream = [this, job_name, cursor](ResponseWriter& out) mutable {
    // Reconnect after 3 s (the browser's default is its own choice).
    if (!out.write("retry: 3000\n\n")) return;
    std::shared_ptr<const JobJournalView> journal_sent;
    std::optional<std::uint64_t> version_sent;
    std::map<std::string, double, std::less<>> series_cursor;  // newest time sent per series
    auto last_write = std::chrono::steady_clock::now();
    for (;;) {
      m_gpus.keep_alive();
      std::string batch;
      GpuHistory gpu = m_gpus.since(cursor.gpu);
      if (!gpu.frames.empty()) {
        cursor.gpu = gpu.frames.back().time;
        batch += sse_message("gpu", cursor.id(), gpu_json(gpu));
      }
      if (job_name) {
        m_jobs.refresh();
        if (auto job = m_jobs.job(*job_name, HistoryNeed::load)) {
          if (job->journal != journal_sent) {
            journal_sent = job->journal;
            const std::size_t first = std::min(cursor.events, job->journal->state.events.size());
            cursor.events = job->journal->state.events.size();
            std::string data = "{";
            append_job_summary(data, job->name, *job->journal);
            data += ",\"events\":";
            append_events(data, *job->journal, first);
            data += '}';
            batch += sse_message("job", cursor.id(), data);
          }
          if (job->history && job->history->version() != version_sent) {
            version_sent = job->history->version();
            std::string points;
            std::vector<std::string> reload;
            const double start = cursor.points;
            for (const auto& info : job->history->series()) {
              auto it = series_cursor.find(info.name);
              const double after = it == series_cursor.end() ? start : it->second;
              if (!(info.last_time > after)) continue;
              auto data = job->history->read_since(info.name, after);
              if (!data || data->time.empty()) continue;
              const double newest = *std::max_element(data->time.begin(), data->time.end());
              series_cursor[info.name] = newest;
              cursor.points = std::max(cursor.points, newest);
              if (data->time.size() > m_options.max_stream_points) {
                reload.push_back(info.name);
                continue;
              }
              points += points.empty() ? "" : ",";
              append_string(points, info.name);
              points += ":{\"time\":";
              append_numbers(points, data->time.size(), [&](std::size_t k) { return data->time[k]; });
              points += ",\"step\":";
              append_numbers(points, data->step.size(), [&](std::size_t k) { return data->step[k]; });
              points += ",\"value\":";
              append_numbers(points, data->value.size(), [&](std::size_t k) { return data->value[k]; });
              points += '}';
            }
            if (!points.empty() || !reload.empty()) {
              std::string data = "{\"series\":{" + points + "},\"reload\":[";
              for (std::size_t i = 0; i < reload.size(); ++i) {
                if (i) data += ',';
                append_string(data, reload[i]);
              }
              data += "]}";
              batch += sse_message("points", cursor.id(), data);
            }
          }
        }
      }
      const auto now = std::chrono::steady_clock::now();
      if (!batch.empty()) {
        if (!out.write(batch)) return;
        last_write = now;
      } else if (now - last_write >= m_options.stream_heartbeat) {
        // Keeps proxies and the browser from deciding the connection is dead.
        if (!out.write(": keep-alive\n\n")) return;
        last_write = now;
      }
      if (!out.wait(m_options.stream_poll)) return;
    }
  };
  return r;
}

}  // namespace gpuhost::telemetry
