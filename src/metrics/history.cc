#include "metrics/history.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <system_error>
#include <unordered_map>

#include "base/checksum.h"
#include "base/json.h"
#include "platform/files.h"

namespace gpuhost::metrics {
namespace {

static_assert(std::endian::native == std::endian::little,
              "points.bin is little-endian (doc/metrics-history.md): add byte swaps for this CPU");

constexpr char k_series_file[] = "series.jsonl";
constexpr char k_points_file[] = "points.bin";
constexpr std::size_t k_record_bytes = 32;
constexpr std::size_t k_flush_bytes = 64 * 1024;
constexpr auto k_flush_interval = std::chrono::seconds(1);
constexpr std::size_t k_read_block = 2048 * k_record_bytes;
// series.jsonl holds one short line per series (max_series of them); anything far larger is not ours.
constexpr std::uint64_t k_max_series_file_bytes = 16u << 20;
constexpr double k_no_step = std::numeric_limits<double>::quiet_NaN();

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::uint32_t record_crc(const char* record) {
  return crc32_update(crc32_update(0, record, 4), record + 8, 24);
}

void append_record(std::string& out, std::uint32_t id, double time, double step, double value) {
  char record[k_record_bytes];
  std::memcpy(record, &id, 4);
  std::memcpy(record + 8, &time, 8);
  std::memcpy(record + 16, &step, 8);
  std::memcpy(record + 24, &value, 8);
  std::uint32_t crc = record_crc(record);
  std::memcpy(record + 4, &crc, 4);
  out.append(record, k_record_bytes);
}

// Names go into series.jsonl as JSON strings, which a reader parses strictly: invalid UTF-8
// would make the line unreadable and orphan every point of the series.
bool is_valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t extra = c < 0x80             ? 0
                        : (c & 0xE0) == 0xC0 ? 1
                        : (c & 0xF0) == 0xE0 ? 2
                        : (c & 0xF8) == 0xF0 ? 3
                                             : 4;
    if (extra == 4 || s.size() - i <= extra) return false;
    std::uint32_t code = extra == 0 ? c : c & (0x3Fu >> extra);
    for (std::size_t k = 1; k <= extra; ++k) {
      auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      code = (code << 6) | (d & 0x3Fu);
    }
    constexpr std::uint32_t k_shortest[] = {0, 0x80, 0x800, 0x10000};  // overlong forms are invalid
    if (code < k_shortest[extra] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

// One series' columns in chunks of k_chunk_points: growth never copies the whole series, and
// only the last chunk has spare capacity (doubling one vector per column could leave half of a
// large series' memory unused).
class Columns {
 public:
  static constexpr std::size_t k_chunk_points = 512;

  void push(double time, double step, double value) {
    if (m_size % k_chunk_points == 0) {
      // A series past its first chunk is likely to fill the next: allocate it at once. The first
      // grows by doubling, so a series of a few points stays small.
      Chunk& c = m_chunks.emplace_back();
      if (m_chunks.size() > 1) {
        c.time.reserve(k_chunk_points);
        c.step.reserve(k_chunk_points);
        c.value.reserve(k_chunk_points);
      }
    }
    Chunk& c = m_chunks.back();
    c.time.push_back(time);
    c.step.push_back(step);
    c.value.push_back(value);
    ++m_size;
  }
  [[nodiscard]] std::size_t size() const { return m_size; }
  [[nodiscard]] double time_at(std::size_t i) const {
    return m_chunks[i / k_chunk_points].time[i % k_chunk_points];
  }
  // Points [first, size()).
  void copy_from(std::size_t first, SeriesData& out) const {
    const std::size_t n = m_size - std::min(first, m_size);
    out.time.reserve(n);
    out.step.reserve(n);
    out.value.reserve(n);
    for (std::size_t c = first / k_chunk_points; c < m_chunks.size(); ++c) {
      const Chunk& chunk = m_chunks[c];
      const std::size_t from = c == first / k_chunk_points ? first % k_chunk_points : 0;
      out.time.insert(out.time.end(), chunk.time.begin() + static_cast<std::ptrdiff_t>(from),
                      chunk.time.end());
      out.step.insert(out.step.end(), chunk.step.begin() + static_cast<std::ptrdiff_t>(from),
                      chunk.step.end());
      out.value.insert(out.value.end(), chunk.value.begin() + static_cast<std::ptrdiff_t>(from),
                       chunk.value.end());
    }
  }

 private:
  struct Chunk {
    std::vector<double> time, step, value;
  };
  std::vector<Chunk> m_chunks;
  std::size_t m_size = 0;
};

struct Series {
  SeriesInfo info;
  Columns columns;
  bool time_sorted = true;  // times non-decreasing so far: read_since can binary-search
  bool stepped = false;     // some point carries a step
};

// What could be read of a file from `offset` on, right now.
struct FileRead {
  bool exists = false;
  bool shrank = false;  // smaller than `offset`: replaced since we read it
  std::uint64_t size = 0;
};

}  // namespace

struct MetricHistory::State {
  // Fixed after open().
  std::filesystem::path dir;
  bool writable = false;
  HistoryOptions options;

  // Serialises file access: flush() for the writer, open/refresh() for a reader. Taken before
  // `mutex`, never after it, and held across I/O so `mutex` is not.
  std::mutex io_mutex;
  std::optional<platform::AppendFile> series_file;  // guarded by io_mutex (writer)
  std::optional<platform::AppendFile> points_file;  // guarded by io_mutex (writer)
  std::uint64_t series_offset = 0;              // guarded by io_mutex: bytes of series.jsonl accounted for
  std::uint64_t points_offset = 0;              // guarded by io_mutex: bytes of points.bin accounted for
  std::optional<std::uint64_t> suspect_offset;  // guarded by io_mutex (reader, see load_points)
  bool broken = false;  // guarded by io_mutex: a failed write could not be cut off again

  mutable std::mutex mutex;
  std::vector<Series> series;                               // guarded by mutex
  std::map<std::string, std::size_t, std::less<>> by_name;  // guarded by mutex: index into series
  std::unordered_map<std::uint32_t, std::size_t> by_id;     // guarded by mutex
  std::uint32_t next_id = 0;                                // guarded by mutex
  std::string pending_series;                        // guarded by mutex: series.jsonl lines not written yet
  std::string pending_points;                        // guarded by mutex: points.bin records not written yet
  std::uint64_t pending_count = 0;                   // guarded by mutex: records in pending_points
  std::chrono::steady_clock::time_point last_flush;  // guarded by mutex
  HistoryStats stats;                                // guarded by mutex
  std::atomic<std::uint64_t> version{0};

  // REQUIRES: mutex held.
  Series& add_series(std::uint32_t id, std::string name, std::string source) {
    Series s;
    s.info.id = id;
    s.info.name = std::move(name);
    s.info.source = std::move(source);
    by_name.emplace(s.info.name, series.size());
    by_id.emplace(id, series.size());
    next_id = std::max<std::uint32_t>(next_id, id + 1);
    series.push_back(std::move(s));
    return series.back();
  }

  // REQUIRES: mutex held.
  void store(Series& s, double time, double step, double value) {
    if (s.columns.size() > 0 && time < s.info.last_time) s.time_sorted = false;
    s.columns.push(time, step, value);
    if (!std::isnan(step)) s.stepped = true;
    ++s.info.points;
    s.info.last_value = value;
    s.info.last_time = time;
    // 2^63 as a double: beyond it the cast to int64 is undefined (a foreign or damaged file).
    s.info.last_step = std::abs(step) < 9.2233720368547758e18 ? std::optional(static_cast<std::int64_t>(step))
                                                              : std::nullopt;
    ++stats.points;
    version.fetch_add(1, std::memory_order_relaxed);
  }

  // Reads `path` from `offset` to its current end in blocks of at most `block` bytes (whole
  // multiples of `unit`; a partial unit at the end is left), handing each to `consume`, which
  // returns false to stop. REQUIRES: io_mutex held.
  template <typename Consume>
  Result<FileRead> read_tail(const std::filesystem::path& path, std::uint64_t offset, std::size_t unit,
                             Consume&& consume) {
    FileRead result;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return result;
    std::ifstream in(path, std::ios::binary);
    if (!in)
      return make_error(ErrorCode::io_error, "reading " + path.string() + ": the file cannot be opened");
    result.exists = true;
    in.seekg(0, std::ios::end);
    auto end = static_cast<std::streamoff>(in.tellg());
    if (end < 0)
      return make_error(ErrorCode::io_error, "reading " + path.string() + ": cannot find its size");
    result.size = static_cast<std::uint64_t>(end);
    if (result.size < offset) {
      result.shrank = true;
      return result;
    }
    in.seekg(static_cast<std::streamoff>(offset));
    std::uint64_t left = (result.size - offset) / unit * unit;
    std::string buffer;
    while (left > 0) {
      std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, k_read_block / unit * unit));
      buffer.resize(n);
      if (!in.read(buffer.data(), static_cast<std::streamsize>(n)))
        return make_error(ErrorCode::io_error,
                          "reading " + path.string() + ": read failed at byte " + std::to_string(offset));
      left -= n;
      if (!consume(std::string_view(buffer), left == 0)) break;
      offset += n;
    }
    return result;
  }

  // Loads the complete lines of series.jsonl after series_offset. REQUIRES: io_mutex held.
  Result<FileRead> load_series() {
    std::string text;
    auto read = read_tail(dir / k_series_file, series_offset, 1, [&](std::string_view block, bool) {
      text.append(block);
      return text.size() <= k_max_series_file_bytes;
    });
    if (!read) return read;
    if (text.size() > k_max_series_file_bytes)
      return make_error(ErrorCode::parse_error,
                        "reading " + (dir / k_series_file).string() +
                            ": more than 16 MiB of series lines; not a gpuhost history");
    std::size_t end = text.rfind('\n');
    if (end == std::string::npos) return read;  // no complete line yet
    std::lock_guard lock(mutex);
    std::string_view rest(text.data(), end + 1);
    while (!rest.empty()) {
      std::size_t eol = rest.find('\n');
      ingest_series_line(rest.substr(0, eol));
      rest.remove_prefix(eol + 1);
    }
    series_offset += end + 1;
    return read;
  }

  // REQUIRES: mutex held.
  void ingest_series_line(std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) return;
    auto value = json::parse(line);
    const json::Value* id = value ? value->find("id") : nullptr;
    const json::Value* name = value ? value->find("name") : nullptr;
    const json::Value* source = value ? value->find("source") : nullptr;
    if (!id || !id->is_integer() || id->as_int() < 0 ||
        id->as_int() > std::numeric_limits<std::uint32_t>::max() || !name || !name->is_string() ||
        name->as_string().empty() || !source || !source->is_string()) {
      ++stats.corrupt_records_skipped;
      return;
    }
    auto sid = static_cast<std::uint32_t>(id->as_int());
    auto same_id = by_id.find(sid);
    auto same_name = by_name.find(name->as_string());
    if (same_id != by_id.end() || same_name != by_name.end()) {
      // The same id and name again: a line written again after a failed write was cut off, or a
      // handover to a source with steps (see append). Anything else is damage.
      bool same_series = same_id != by_id.end() && same_name != by_name.end() &&
                         same_id->second == same_name->second;
      if (same_series)
        series[same_id->second].info.source = source->as_string();
      else
        ++stats.corrupt_records_skipped;
      return;
    }
    add_series(sid, name->as_string(), source->as_string());
  }

  // Loads the complete records of points.bin after points_offset. A reader (`defer_suspect`)
  // keeps a bad last record for one more refresh: the writer may be in the middle of writing it
  // on a system that shows a file's new size before its bytes. REQUIRES: io_mutex held.
  Result<FileRead> load_points(bool defer_suspect) {
    bool series_reread = false;
    auto read =
        read_tail(dir / k_points_file, points_offset, k_record_bytes, [&](std::string_view block, bool last) {
          std::unique_lock lock(mutex);
          Series* cached = nullptr;
          std::uint32_t cached_id = 0;
          for (std::size_t at = 0; at < block.size(); at += k_record_bytes) {
            const char* record = block.data() + at;
            std::uint32_t id, crc;
            std::memcpy(&id, record, 4);
            std::memcpy(&crc, record + 4, 4);
            if (crc != record_crc(record)) {
              if (defer_suspect && last && at + k_record_bytes == block.size() &&
                  suspect_offset != points_offset) {
                suspect_offset = points_offset;
                return false;
              }
              ++stats.corrupt_records_skipped;
              points_offset += k_record_bytes;
              continue;
            }
            if (!cached || cached_id != id) {
              auto it = by_id.find(id);
              if (it == by_id.end() && !series_reread) {
                // Its line was written before the record; we read series.jsonl before points.bin.
                series_reread = true;
                lock.unlock();
                (void)load_series();
                lock.lock();
                it = by_id.find(id);
              }
              if (it == by_id.end()) {
                next_id = std::max<std::uint32_t>(
                    next_id, id == std::numeric_limits<std::uint32_t>::max() ? id : id + 1);
                ++stats.corrupt_records_skipped;
                points_offset += k_record_bytes;
                continue;
              }
              cached = &series[it->second];
              cached_id = id;
            }
            double time, step, value;
            std::memcpy(&time, record + 8, 8);
            std::memcpy(&step, record + 16, 8);
            std::memcpy(&value, record + 24, 8);
            store(*cached, time, step, value);
            points_offset += k_record_bytes;
          }
          return true;
        });
    if (read && read->exists && !read->shrank) {
      std::lock_guard lock(mutex);
      stats.torn_tail_bytes = (read->size - points_offset) % k_record_bytes;
    }
    return read;
  }

  // Forgets everything a reader loaded (the files were replaced). REQUIRES: io_mutex held.
  void reset_reader() {
    std::lock_guard lock(mutex);
    series.clear();
    by_name.clear();
    by_id.clear();
    next_id = 0;
    stats.points = 0;
    series_offset = points_offset = 0;
    suspect_offset.reset();
    version.fetch_add(1, std::memory_order_relaxed);
  }

  // Appends `data` to `file`. After a failed write, keeps the longest prefix that reached the
  // file and ends on a whole unit (`whole(prefix_bytes)` says how much of it is whole), cuts
  // the rest off and returns the bytes kept; a cut that fails marks the history broken.
  // REQUIRES: io_mutex held.
  template <typename Whole>
  std::size_t append_whole(platform::AppendFile& file, std::uint64_t& offset, std::string_view data,
                           Whole&& whole) {
    if (file.append(data)) {
      offset += data.size();
      return data.size();
    }
    auto size = file.size();
    std::size_t kept = 0;
    if (size && *size >= offset && *size - offset <= data.size())
      kept = whole(static_cast<std::size_t>(*size - offset));
    if (!size || *size != offset + kept) {
      if (!file.truncate(offset + kept)) broken = true;
    }
    offset += kept;
    return kept;
  }
};

MetricHistory::MetricHistory(std::unique_ptr<State> state) : m_state(std::move(state)) {}

MetricHistory::~MetricHistory() {
  if (m_state) flush();
}

Result<std::unique_ptr<MetricHistory>> MetricHistory::open(const std::filesystem::path& dir, bool writable,
                                                           HistoryOptions options) {
  auto state = std::make_unique<State>();
  state->dir = dir;
  state->writable = writable;
  state->options = options;
  state->last_flush = std::chrono::steady_clock::now();
  // A reader creates nothing: it may lack write access, and refresh() finds files created later.
  if (writable) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
      return make_error(ErrorCode::io_error,
                        "creating the metrics folder " + dir.string() + ": " + ec.message());
  }
  std::lock_guard io(state->io_mutex);
  auto series = state->load_series();
  if (!series) return std::unexpected(with_context(series.error(), "loading the metric history"));
  auto points = state->load_points(/*defer_suspect=*/!writable);
  if (!points) return std::unexpected(with_context(points.error(), "loading the metric history"));
  if (!writable) return std::unique_ptr<MetricHistory>(new MetricHistory(std::move(state)));

  // Cut what a crashed writer left half written, so new records start on a boundary.
  auto open_cut = [](const std::filesystem::path& path, std::uint64_t keep,
                     std::uint64_t& torn) -> Result<platform::AppendFile> {
    auto file = platform::AppendFile::open(path);
    if (!file) return std::unexpected(with_context(file.error(), "opening the metric history"));
    auto size = file->size();
    if (!size) return std::unexpected(with_context(size.error(), "opening the metric history"));
    if (*size > keep) {
      torn += *size - keep;
      if (auto cut = file->truncate(keep); !cut)
        return std::unexpected(
            with_context(cut.error(), "cutting off a partial record of the metric history"));
    }
    return file;
  };
  std::uint64_t torn = 0;
  auto series_file = open_cut(dir / k_series_file, state->series_offset, torn);
  if (!series_file) return std::unexpected(series_file.error());
  auto points_file = open_cut(dir / k_points_file, state->points_offset, torn);
  if (!points_file) return std::unexpected(points_file.error());
  state->series_file = std::move(*series_file);
  state->points_file = std::move(*points_file);
  state->stats.torn_tail_bytes = torn;
  return std::unique_ptr<MetricHistory>(new MetricHistory(std::move(state)));
}

bool MetricHistory::append(const Point& point, std::string_view source) {
  State& s = *m_state;
  if (!s.writable) return false;
  bool flush_now = false;
  {
    std::lock_guard lock(s.mutex);
    Series* series = nullptr;
    if (auto it = s.by_name.find(point.name); it != s.by_name.end()) {
      series = &s.series[it->second];
      if (series->info.source != source) {
        // A source with steps takes over a name whose owner never gave one: Hugging Face prints
        // `{'loss': 0.5, ...}` with no step before trainer_state.json logs the same loss by
        // step, and a step axis needs the latter. The stepless points stay on the time axis.
        if (series->stepped || !point.step || !is_valid_utf8(source)) {
          ++s.stats.dropped_other_source;
          return false;
        }
        series->info.source = std::string(source);
        json::Value line = json::Value::object();
        line["id"] = series->info.id;
        line["name"] = point.name;
        line["source"] = source;
        s.pending_series += json::dump(line) + "\n";
        ++s.stats.source_handovers;
      }
    } else {
      if (s.series.size() >= s.options.max_series || point.name.empty() ||
          point.name.size() > s.options.max_name_bytes || !is_valid_utf8(point.name) ||
          !is_valid_utf8(source) || s.next_id == std::numeric_limits<std::uint32_t>::max()) {
        ++s.stats.dropped_over_cardinality;
        return false;
      }
      series = &s.add_series(s.next_id, point.name, std::string(source));
      json::Value line = json::Value::object();
      line["id"] = series->info.id;
      line["name"] = point.name;
      line["source"] = source;
      s.pending_series += json::dump(line) + "\n";
    }
    double time = std::isfinite(point.wall_time) && point.wall_time > 0 ? point.wall_time : now_seconds();
    double step = point.step ? static_cast<double>(*point.step) : k_no_step;
    s.store(*series, time, step, point.value);
    append_record(s.pending_points, series->info.id, time, step, point.value);
    ++s.pending_count;
    flush_now = s.pending_points.size() >= k_flush_bytes ||
                std::chrono::steady_clock::now() - s.last_flush >= k_flush_interval;
  }
  if (flush_now) flush();
  return true;
}

void MetricHistory::flush() {
  State& s = *m_state;
  if (!s.writable) return;
  std::lock_guard io(s.io_mutex);
  std::string lines, records;
  std::uint64_t count = 0;
  {
    std::lock_guard lock(s.mutex);
    lines.swap(s.pending_series);
    records.swap(s.pending_points);
    std::swap(count, s.pending_count);
    s.last_flush = std::chrono::steady_clock::now();
  }
  if (lines.empty() && records.empty()) return;

  std::size_t lines_kept = 0;
  if (!s.broken && !lines.empty())
    lines_kept = s.append_whole(*s.series_file, s.series_offset, lines, [&](std::size_t prefix) {
      std::size_t eol = std::string_view(lines).substr(0, prefix).rfind('\n');
      return eol == std::string_view::npos ? 0 : eol + 1;
    });
  std::uint64_t written = 0;
  // A record must never reach the file before its series' line.
  if (!s.broken && lines_kept == lines.size() && !records.empty())
    written = s.append_whole(*s.points_file, s.points_offset, records, [](std::size_t prefix) {
      return prefix / k_record_bytes * k_record_bytes;
    }) / k_record_bytes;

  std::lock_guard lock(s.mutex);
  s.stats.write_failures += count - written;
  // Lines not written go first next time (retried), unless the files can no longer be trusted.
  if (lines_kept < lines.size() && !s.broken) s.pending_series.insert(0, lines, lines_kept);
}

std::size_t MetricHistory::refresh() {
  State& s = *m_state;
  if (s.writable) return 0;
  std::lock_guard io(s.io_mutex);
  std::uint64_t before = s.version.load();
  auto series = s.load_series();
  if (series && series->shrank) {
    s.reset_reader();
    before = s.version.load();
    series = s.load_series();
  }
  if (!series) return 0;  // unreadable now; the next refresh tries again
  auto points = s.load_points(/*defer_suspect=*/true);
  if (points && points->shrank) {
    s.reset_reader();
    before = s.version.load();
    if (s.load_series()) points = s.load_points(/*defer_suspect=*/true);
  }
  return static_cast<std::size_t>(s.version.load() - before);
}

std::vector<SeriesInfo> MetricHistory::series() const {
  std::lock_guard lock(m_state->mutex);
  std::vector<SeriesInfo> out;
  out.reserve(m_state->series.size());
  for (const auto& s : m_state->series) out.push_back(s.info);
  return out;
}

std::optional<SeriesData> MetricHistory::read(std::string_view name) const {
  return read_since(name, -std::numeric_limits<double>::infinity());
}

std::optional<SeriesData> MetricHistory::read_since(std::string_view name, double after_time) const {
  std::lock_guard lock(m_state->mutex);
  auto it = m_state->by_name.find(name);
  if (it == m_state->by_name.end()) return std::nullopt;
  const Series& s = m_state->series[it->second];
  SeriesData out;
  if (after_time == -std::numeric_limits<double>::infinity()) {
    s.columns.copy_from(0, out);
  } else if (s.time_sorted) {
    std::size_t lo = 0, hi = s.columns.size();
    while (lo < hi) {
      std::size_t mid = lo + (hi - lo) / 2;
      if (s.columns.time_at(mid) > after_time)
        hi = mid;
      else
        lo = mid + 1;
    }
    s.columns.copy_from(lo, out);
  } else {
    SeriesData all;
    s.columns.copy_from(0, all);
    for (std::size_t i = 0; i < all.time.size(); ++i) {
      if (!(all.time[i] > after_time)) continue;
      out.time.push_back(all.time[i]);
      out.step.push_back(all.step[i]);
      out.value.push_back(all.value[i]);
    }
  }
  return out;
}

HistoryStats MetricHistory::stats() const {
  std::lock_guard lock(m_state->mutex);
  return m_state->stats;
}

std::uint64_t MetricHistory::version() const {
  return m_state->version.load();
}

}  // namespace gpuhost::metrics
