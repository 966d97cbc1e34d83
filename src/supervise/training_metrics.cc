#include "supervise/training_metrics.h"

#include <atomic>
#include <cctype>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

#include "metrics/history.h"
#include "metrics/line_parser.h"
#include "metrics/sources.h"

namespace gpuhost::supervise {

struct TrainingMetricsRecorder::State {
  TrainingMetricsOptions options;
  std::unique_ptr<metrics::MetricHistory> history;  // null: metrics disabled
  // One parser per stream, each fed by that stream's reader thread only.
  std::mutex out_mutex;
  metrics::OutputStreamParser out_parser;
  std::mutex err_mutex;
  metrics::OutputStreamParser err_parser;
  std::atomic<std::int64_t> newest_step{-1};
  std::atomic<std::int64_t> attempt_step{-1};  // the newest since child_started()
  std::atomic<double> attempt_mfu{-1};         // percent; < 0: none since child_started()
  // Tokens per second, negative when per device; 0: none since child_started().
  std::atomic<double> attempt_tokens{0};

  void note_step(std::int64_t step) {
    if (step > newest_step.load(std::memory_order_relaxed))
      newest_step.store(step, std::memory_order_relaxed);
    if (step > attempt_step.load(std::memory_order_relaxed))
      attempt_step.store(step, std::memory_order_relaxed);
  }

  void note_rates(std::string_view name, double value) {
    if (auto mfu = mfu_percent_of(name, value)) attempt_mfu.store(*mfu, std::memory_order_relaxed);
    if (auto rate = token_rate_of(name, value))
      attempt_tokens.store(rate->per_device ? -rate->tokens_per_second : rate->tokens_per_second,
                           std::memory_order_relaxed);
  }

  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;  // guarded by mutex
  std::thread tailer_thread;

  void record(std::vector<metrics::Point>& points, std::string_view source) {
    for (auto& point : points) {
      if (point.step) note_step(*point.step);
      note_rates(point.name, point.value);
      history->append(point, source);
    }
    points.clear();
  }

  void message(std::string_view text) const {
    if (options.on_message) options.on_message(text);
  }

  void run_tailer();
};

void TrainingMetricsRecorder::State::run_tailer() {
  metrics::SourceTailerOptions tailer_options;
  tailer_options.roots = options.roots;
  tailer_options.jsonl_path = options.channel;
  metrics::SourceTailer tailer(std::move(tailer_options));
  const std::filesystem::path state_file = options.metrics_dir / "sources.json";
  if (auto loaded = tailer.load_state(state_file); !loaded)
    message("training metrics: reading the trainer's metric files afresh: " + loaded.error().message);
  bool warned_save = false;
  for (;;) {
    bool last_round = false;  // asked to stop: one more poll collects what the trainer wrote last
    {
      std::lock_guard lock(mutex);
      last_round = stopping;
    }
    std::vector<metrics::SourcedPoint> found = tailer.poll();
    for (const std::string& warning : tailer.take_warnings()) message("training metrics: " + warning);
    for (auto& item : found) {
      if (item.point.step) note_step(*item.point.step);
      note_rates(item.point.name, item.point.value);
      history->append(item.point, item.source);
    }
    // Points first, then the consumption state: a kill between the two repeats points at worst,
    // never loses them.
    history->flush();
    if (!found.empty()) {
      if (auto saved = tailer.save_state(state_file); !saved && !warned_save) {
        message("training metrics: cannot save the file tailer's state: " + saved.error().message);
        warned_save = true;
      }
    }
    if (last_round) break;
    std::unique_lock lock(mutex);
    wake.wait_for(lock, options.poll_interval, [this] { return stopping; });
  }
}

TrainingMetricsRecorder::TrainingMetricsRecorder(TrainingMetricsOptions options)
    : m_state(std::make_unique<State>()) {
  m_state->options = std::move(options);
  auto history = metrics::MetricHistory::open(m_state->options.metrics_dir, true);
  if (!history) {
    m_state->message("training metrics disabled: " + history.error().message);
    return;
  }
  m_state->history = std::move(*history);
  for (const auto& info : m_state->history->series())
    if (info.last_step && *info.last_step > m_state->newest_step.load())
      m_state->newest_step.store(*info.last_step);
  m_state->tailer_thread = std::thread([state = m_state.get()] { state->run_tailer(); });
}

TrainingMetricsRecorder::~TrainingMetricsRecorder() {
  if (!m_state->history) return;
  {
    std::lock_guard lock(m_state->mutex);
    m_state->stopping = true;
  }
  m_state->wake.notify_all();
  if (m_state->tailer_thread.joinable()) m_state->tailer_thread.join();
  std::vector<metrics::Point> points;
  {
    std::lock_guard lock(m_state->out_mutex);
    m_state->out_parser.finish(points);
  }
  {
    std::lock_guard lock(m_state->err_mutex);
    m_state->err_parser.finish(points);
  }
  m_state->record(points, "output");
  m_state->history->flush();
}

void TrainingMetricsRecorder::on_output(platform::OutputStream stream, std::string_view chunk) {
  if (!m_state->history) return;
  const bool out = stream == platform::OutputStream::out;
  std::vector<metrics::Point> points;
  {
    std::lock_guard lock(out ? m_state->out_mutex : m_state->err_mutex);
    (out ? m_state->out_parser : m_state->err_parser).feed(chunk, points);
  }
  m_state->record(points, "output");
}

void TrainingMetricsRecorder::child_started() {
  if (!m_state->history) return;
  // The previous child's unterminated last line is parsed now rather than glued to the new
  // child's first one.
  std::vector<metrics::Point> points;
  {
    std::lock_guard lock(m_state->out_mutex);
    m_state->out_parser.finish(points);
    m_state->out_parser = metrics::OutputStreamParser();
  }
  {
    std::lock_guard lock(m_state->err_mutex);
    m_state->err_parser.finish(points);
    m_state->err_parser = metrics::OutputStreamParser();
  }
  m_state->record(points, "output");
  m_state->attempt_step.store(-1, std::memory_order_relaxed);
  m_state->attempt_mfu.store(-1, std::memory_order_relaxed);
  m_state->attempt_tokens.store(0, std::memory_order_relaxed);
}

std::optional<std::int64_t> TrainingMetricsRecorder::newest_step() const {
  const std::int64_t step = m_state->newest_step.load(std::memory_order_relaxed);
  if (step < 0) return std::nullopt;
  return step;
}

std::optional<std::int64_t> TrainingMetricsRecorder::attempt_step() const {
  const std::int64_t step = m_state->attempt_step.load(std::memory_order_relaxed);
  if (step < 0) return std::nullopt;
  return step;
}

std::optional<double> TrainingMetricsRecorder::attempt_mfu_percent() const {
  const double mfu = m_state->attempt_mfu.load(std::memory_order_relaxed);
  if (mfu < 0) return std::nullopt;
  return mfu;
}

std::optional<TokenRate> TrainingMetricsRecorder::attempt_token_rate() const {
  const double tokens = m_state->attempt_tokens.load(std::memory_order_relaxed);
  if (tokens == 0) return std::nullopt;
  return TokenRate{std::abs(tokens), tokens < 0};
}

std::optional<TokenRate> token_rate_of(std::string_view name, double value) {
  if (!std::isfinite(value) || value <= 0) return std::nullopt;
  std::string key(name);
  for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  TokenRate rate{value, key.find("device/") != std::string::npos};
  if (key == "tokens/s" || key == "tok/s" || key.ends_with("_tokens/s") || key.ends_with("_tok/s"))
    return rate;
  const auto last = key.find_last_of("/.");
  const std::string leaf = last == std::string::npos ? key : key.substr(last + 1);
  for (std::string_view known :
       {"tokens_per_second", "tokens_per_sec", "tok_per_sec", "tokens_per_s", "tok_per_s"})
    if (leaf == known || (leaf.ends_with(known) && leaf[leaf.size() - known.size() - 1] == '_')) return rate;
  return std::nullopt;
}

std::optional<double> mfu_percent_of(std::string_view name, double value) {
  if (!std::isfinite(value) || value < 0) return std::nullopt;
  std::string key(name);
  for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const auto last = key.find_last_of("/.");
  const std::string leaf = last == std::string::npos ? key : key.substr(last + 1);
  if (leaf == "mfu_percent" || leaf.ends_with("_mfu_percent"))
    return value <= 100 ? std::optional<double>(value) : std::nullopt;
  if (leaf == "mfu" || leaf.ends_with("_mfu")) {
    if (value <= 1.5) return value * 100;
    return value <= 100 ? std::optional<double>(value) : std::nullopt;
  }
  return std::nullopt;
}

}  // namespace gpuhost::supervise
