#include "metrics/sources.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <system_error>
#include <utility>

#include "base/checksum.h"
#include "base/json.h"
#include "metrics/structured.h"
#include "metrics/tfevents.h"
#include "platform/files.h"

namespace gpuhost::metrics {
namespace {

constexpr std::string_view k_tfevents = "tfevents";
constexpr std::string_view k_trainer_state = "trainer_state";
constexpr std::string_view k_metrics_csv = "metrics.csv";
constexpr std::string_view k_results_csv = "results.csv";
constexpr std::string_view k_jsonl = "jsonl";
constexpr std::size_t k_tail_check_bytes = 64;
constexpr std::size_t k_max_pending_warnings = 100;
constexpr int k_state_version = 1;

enum class Kind { tfevents, metrics_csv, results_csv, jsonl };

std::string_view source_name(Kind kind) {
  switch (kind) {
    case Kind::tfevents: return k_tfevents;
    case Kind::metrics_csv: return k_metrics_csv;
    case Kind::results_csv: return k_results_csv;
    case Kind::jsonl: return k_jsonl;
  }
  return k_jsonl;
}

std::optional<Kind> kind_named(std::string_view name) {
  for (Kind k : {Kind::tfevents, Kind::metrics_csv, Kind::results_csv, Kind::jsonl})
    if (source_name(k) == name) return k;
  return std::nullopt;
}

// Paths travel as UTF-8 in the state file whatever the OS's narrow encoding is.
std::string utf8_of(const std::filesystem::path& path) {
  const std::u8string s = path.lexically_normal().u8string();
  return std::string(s.begin(), s.end());
}
std::filesystem::path path_of_utf8(std::string_view s) {
  return std::filesystem::path(std::u8string(s.begin(), s.end()));
}

std::optional<std::uint64_t> size_of(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return std::nullopt;
  return size;
}

// Up to `max_bytes` of `path` from `offset` (fewer at the end of the file).
Result<std::string> read_range(const std::filesystem::path& path, std::uint64_t offset,
                               std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::io_error, "reading " + utf8_of(path) + ": cannot open it");
  in.seekg(static_cast<std::streamoff>(offset));
  std::string out(max_bytes, '\0');
  in.read(out.data(), static_cast<std::streamsize>(max_bytes));
  if (in.bad()) return make_error(ErrorCode::io_error, "reading " + utf8_of(path) + ": read failed");
  out.resize(static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  return out;
}

std::uint32_t crc_of(std::string_view bytes) {
  return crc32c(bytes);
}

// A CSV row's identity for matching rows across a rewrite: its non-empty cells by column name,
// in name order (a rewrite may add columns, which leaves the old cells as they were).
std::uint32_t row_fingerprint(const std::vector<std::string>& header,
                              const std::vector<std::string>& fields) {
  std::vector<std::pair<std::string_view, std::string_view>> cells;
  for (std::size_t i = 0; i < fields.size() && i < header.size(); ++i)
    if (!fields[i].empty()) cells.emplace_back(header[i], fields[i]);
  std::sort(cells.begin(), cells.end());
  std::uint32_t crc = 0;
  for (const auto& [name, text] : cells) {
    crc = crc32c_update(crc, name.data(), name.size());
    crc = crc32c_update(crc, "\x1f", 1);
    crc = crc32c_update(crc, text.data(), text.size());
    crc = crc32c_update(crc, "\x1e", 1);
  }
  return crc;
}

// Where a line file (CSV or JSON lines) stands.
struct LineProgress {
  std::uint64_t offset = 0;        // end of the last consumed line
  std::uint64_t header_bytes = 0;  // CSV: the header line with its terminator; 0 until read
  std::uint32_t header_crc = 0;
  std::uint64_t rows = 0;  // data lines delivered (blank lines not counted)
  std::uint32_t row_fingerprint = 0;
  std::uint32_t tail_crc = 0;  // of the (up to) k_tail_check_bytes bytes before offset
};

struct FollowedFile {
  std::filesystem::path path;
  Kind kind = Kind::jsonl;
  // Event files.
  std::unique_ptr<EventFileReader> reader;
  std::uint64_t fed = 0;  // file offset of the next byte to feed the reader
  bool failed = false;    // framing lost: not read again
  // Line files.
  LineProgress line;
  std::optional<CsvColumns> columns;
  bool discarding = false;  // inside an over-long line
  // Warnings given, so each is given once.
  bool warned_unreadable = false;
  bool warned_too_large = false;
};

struct TrainerStateProgress {
  std::uint64_t entries = 0;              // log_history entries delivered
  std::optional<std::int64_t> last_step;  // the step of the last of them
  std::optional<std::int64_t> max_step;   // the highest step delivered
  // The file version last read (or found unreadable), so an unchanged file is not parsed again.
  std::string signature;
};

bool is_skipped_directory(const std::string& name) {
  return name.empty() || name[0] == '.' || name == "node_modules" || name == "__pycache__" ||
         name == "site-packages" || name == "venv";
}

json::Value u64_json(std::uint64_t v) {
  return json::Value(static_cast<std::int64_t>(v));
}

}  // namespace

struct SourceTailer::State {
  SourceTailerOptions options;
  std::map<std::string, FollowedFile> files;       // by normalised UTF-8 path
  std::set<std::filesystem::path> trainer_states;  // candidates found by the search
  TrainerStateProgress trainer_state;
  std::vector<std::string> warnings;
  std::set<std::string> warned;  // warnings given once
  SourceTailerStats stats;

  void warn_once(const std::string& key, std::string message) {
    if (!warned.insert(key).second) return;
    if (warnings.size() < k_max_pending_warnings) warnings.push_back(std::move(message));
  }

  FollowedFile* follow(const std::filesystem::path& path, Kind kind) {
    std::string key = utf8_of(path);
    auto it = files.find(key);
    if (it != files.end()) return &it->second;
    if (files.size() >= options.max_files) {
      warn_once("max_files", "following metric files: more than " + std::to_string(options.max_files) +
                                 " found; " + key + " and later ones are not read");
      return nullptr;
    }
    FollowedFile file;
    file.path = path;
    file.kind = kind;
    if (kind == Kind::tfevents) file.reader = std::make_unique<EventFileReader>();
    return &files.emplace(std::move(key), std::move(file)).first->second;
  }

  void search() {
    std::uint64_t entries = 0;
    bool truncated = false;
    // Depth-first with an explicit stack: (folder, depth).
    std::vector<std::pair<std::filesystem::path, int>> stack;
    for (auto it = options.roots.rbegin(); it != options.roots.rend(); ++it) stack.emplace_back(*it, 0);
    std::set<std::string> seen_dirs;
    while (!stack.empty() && !truncated) {
      auto [dir, depth] = std::move(stack.back());
      stack.pop_back();
      if (!seen_dirs.insert(utf8_of(dir)).second) continue;  // a checkpoint dir inside the workdir
      auto listing = platform::list_directory(dir);
      if (!listing) continue;  // gone, or not ours to read: not a metrics problem
      // A Python virtual environment under any name.
      if (depth > 0 && std::any_of(listing->begin(), listing->end(),
                                   [](const platform::DirectoryEntry& e) { return e.name == "pyvenv.cfg"; }))
        continue;
      std::vector<std::filesystem::path> subdirs;
      for (const auto& entry : *listing) {
        if (++entries > options.max_entries_per_scan) {
          truncated = true;
          break;
        }
        if (entry.is_directory) {
          if (!entry.is_symlink && depth < options.max_depth && !is_skipped_directory(entry.name))
            subdirs.push_back(dir / entry.name);
          continue;
        }
        const std::filesystem::path path = dir / entry.name;
        if (entry.name.starts_with("events.out.tfevents."))
          follow(path, Kind::tfevents);
        else if (entry.name == "metrics.csv")
          follow(path, Kind::metrics_csv);
        else if (entry.name == "results.csv")
          follow(path, Kind::results_csv);
        else if (entry.name == "trainer_state.json")
          trainer_states.insert(path);
      }
      for (auto it = subdirs.rbegin(); it != subdirs.rend(); ++it)
        stack.emplace_back(std::move(*it), depth + 1);
    }
    stats.entries_last_scan = std::min<std::uint64_t>(entries, options.max_entries_per_scan);
    if (truncated)
      warn_once("truncated", "searching for metric files: more than " +
                                 std::to_string(options.max_entries_per_scan) +
                                 " entries under the job's folders; files past them are not found (point "
                                 "GPUHOST_METRICS_FILE or the checkpoint directory at a smaller folder)");
  }

  std::optional<std::string> read_or_warn(FollowedFile& file, std::uint64_t offset, std::size_t max_bytes) {
    auto bytes = read_range(file.path, offset, max_bytes);
    if (bytes) return std::move(*bytes);
    if (!file.warned_unreadable) {
      file.warned_unreadable = true;
      if (warnings.size() < k_max_pending_warnings) warnings.push_back(bytes.error().message);
    }
    return std::nullopt;
  }

  void poll_events(FollowedFile& file, std::vector<SourcedPoint>& out) {
    if (file.failed) return;
    const auto size = size_of(file.path);
    if (!size) return;
    if (*size < file.reader->consumed_offset()) {  // cut short or replaced: read the new one
      file.reader = std::make_unique<EventFileReader>();
      file.fed = 0;
    }
    if (*size <= file.fed) return;
    const auto want = static_cast<std::size_t>(
        std::min<std::uint64_t>(*size - file.fed, options.max_bytes_per_file_per_poll));
    auto bytes = read_or_warn(file, file.fed, want);
    if (!bytes) return;
    std::vector<Point> points;
    const std::uint64_t corrupt_before = file.reader->stats().corrupt_records;
    file.reader->feed(*bytes, points);
    file.fed += bytes->size();
    stats.corrupt_records += file.reader->stats().corrupt_records - corrupt_before;
    for (auto& p : points) out.push_back(SourcedPoint{std::move(p), k_tfevents});
    if (file.reader->failed()) {
      file.failed = true;
      if (warnings.size() < k_max_pending_warnings)
        warnings.push_back(with_context(*file.reader->error(), "following " + utf8_of(file.path)).message);
    }
  }

  std::uint32_t tail_crc_at(FollowedFile& file, std::uint64_t offset, bool& ok) {
    const std::uint64_t n = std::min<std::uint64_t>(offset, k_tail_check_bytes);
    auto bytes = read_or_warn(file, offset - n, static_cast<std::size_t>(n));
    ok = bytes && bytes->size() == n;
    return ok ? crc_of(*bytes) : 0;
  }

  // Hands the complete lines of `chunk` (file bytes from file.line.offset) to `take` and moves
  // the offset past them; a partial last line waits, an over-long one is skipped and counted.
  template <typename Take>
  void consume_lines(FollowedFile& file, std::string_view chunk, Take&& take) {
    std::size_t pos = 0;
    while (pos < chunk.size()) {
      const std::size_t nl = chunk.find('\n', pos);
      if (nl == std::string_view::npos) {
        if (chunk.size() - pos >= options.max_line_bytes && !file.discarding) {
          ++stats.overlong_lines;
          file.discarding = true;
        }
        if (file.discarding) pos = chunk.size();
        break;
      }
      if (file.discarding) {
        file.discarding = false;
      } else if (nl - pos > options.max_line_bytes) {
        ++stats.overlong_lines;
      } else {
        std::string_view line = chunk.substr(pos, nl - pos);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.find_first_not_of(" \t") != std::string_view::npos) take(line);
      }
      pos = nl + 1;
    }
    file.line.offset += pos;
  }

  void poll_jsonl(FollowedFile& file, std::vector<SourcedPoint>& out) {
    const auto size = size_of(file.path);
    if (!size) return;
    bool ok = true;
    if (*size < file.line.offset ||
        (file.line.offset > 0 && tail_crc_at(file, file.line.offset, ok) != file.line.tail_crc)) {
      if (!ok && *size >= file.line.offset) return;  // could not check: try again next poll
      ++stats.files_rewritten;  // truncated or replaced: a new file, every line of it new
      file.line = LineProgress{};
      file.discarding = false;
    }
    if (*size <= file.line.offset) return;
    const auto want = static_cast<std::size_t>(
        std::min<std::uint64_t>(*size - file.line.offset, options.max_bytes_per_file_per_poll));
    auto bytes = read_or_warn(file, file.line.offset, want);
    if (!bytes) return;
    consume_lines(file, *bytes, [&](std::string_view line) {
      auto points = parse_metrics_json_line(line);
      if (!points) {
        ++stats.malformed_lines;
        return;
      }
      ++file.line.rows;
      for (auto& p : *points) out.push_back(SourcedPoint{std::move(p), k_jsonl});
    });
    file.line.tail_crc = tail_crc_at(file, file.line.offset, ok);
  }

  void poll_csv(FollowedFile& file, std::vector<SourcedPoint>& out) {
    const auto size = size_of(file.path);
    if (!size) return;  // deleted (Ultralytics' fresh start): its successor is read when it comes
    const std::string_view source = source_name(file.kind);
    bool unchanged = file.line.header_bytes > 0 && *size >= file.line.offset;
    if (unchanged) {
      auto header = read_or_warn(file, 0, static_cast<std::size_t>(file.line.header_bytes));
      if (!header) return;
      bool ok = true;
      unchanged = header->size() == file.line.header_bytes && crc_of(*header) == file.line.header_crc &&
                  tail_crc_at(file, file.line.offset, ok) == file.line.tail_crc && ok;
      if (unchanged && !file.columns) {
        std::string_view text = *header;
        while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
        file.columns.emplace(split_csv_record(text));
      }
    }
    if (!unchanged) {
      reread_csv(file, *size, out);
      return;
    }
    if (*size == file.line.offset) return;
    const auto want = static_cast<std::size_t>(
        std::min<std::uint64_t>(*size - file.line.offset, options.max_bytes_per_file_per_poll));
    auto bytes = read_or_warn(file, file.line.offset, want);
    if (!bytes) return;
    consume_lines(file, *bytes, [&](std::string_view line) {
      const std::vector<std::string> fields = split_csv_record(line);
      file.line.row_fingerprint = row_fingerprint(file.columns->header(), fields);
      ++file.line.rows;
      for (auto& p : file.columns->row_points(line)) out.push_back(SourcedPoint{std::move(p), source});
    });
    bool ok = true;
    file.line.tail_crc = tail_crc_at(file, file.line.offset, ok);
  }

  // The whole file again: after a rewrite (same rows first, maybe new columns) or a new file.
  void reread_csv(FollowedFile& file, std::uint64_t size, std::vector<SourcedPoint>& out) {
    if (size > options.max_whole_file_bytes) {
      if (!file.warned_too_large) {
        file.warned_too_large = true;
        if (warnings.size() < k_max_pending_warnings)
          warnings.push_back("reading " + utf8_of(file.path) + ": " + std::to_string(size) +
                             " bytes, more than the " + std::to_string(options.max_whole_file_bytes) +
                             " read whole after a rewrite; its new rows are not read");
      }
      return;
    }
    auto text = read_or_warn(file, 0, static_cast<std::size_t>(size));
    if (!text) return;
    const std::size_t header_end = text->find('\n');
    if (header_end == std::string::npos) return;  // header not written yet
    std::string_view header_line = std::string_view(*text).substr(0, header_end);
    if (!header_line.empty() && header_line.back() == '\r') header_line.remove_suffix(1);
    CsvColumns columns(split_csv_record(header_line));

    struct Row {
      std::string_view line;
      std::uint32_t fingerprint;
    };
    std::vector<Row> rows;
    const std::uint64_t old_offset = file.line.offset;
    FollowedFile scratch;  // consume_lines bookkeeping for the whole text
    scratch.line.offset = header_end + 1;
    consume_lines(scratch, std::string_view(*text).substr(header_end + 1), [&](std::string_view line) {
      rows.push_back(Row{line, row_fingerprint(columns.header(), split_csv_record(line))});
    });

    std::size_t start = 0;
    const LineProgress& before = file.line;
    if (before.rows > 0 && rows.size() >= before.rows &&
        rows[before.rows - 1].fingerprint == before.row_fingerprint)
      start = static_cast<std::size_t>(before.rows);
    if (before.header_bytes > 0 || old_offset > 0) ++stats.files_rewritten;
    for (std::size_t i = start; i < rows.size(); ++i)
      for (auto& p : columns.row_points(rows[i].line))
        out.push_back(SourcedPoint{std::move(p), source_name(file.kind)});

    file.line.offset = scratch.line.offset;
    file.line.header_bytes = header_end + 1;
    file.line.header_crc = crc_of(std::string_view(*text).substr(0, header_end + 1));
    file.line.rows = rows.size();
    file.line.row_fingerprint = rows.empty() ? 0 : rows.back().fingerprint;
    const std::uint64_t n = std::min<std::uint64_t>(file.line.offset, k_tail_check_bytes);
    file.line.tail_crc = crc_of(std::string_view(*text).substr(static_cast<std::size_t>(file.line.offset - n),
                                                               static_cast<std::size_t>(n)));
    file.columns.emplace(std::move(columns));
    file.discarding = scratch.discarding;
  }

  void poll_trainer_state(std::vector<SourcedPoint>& out) {
    // The newest candidate by modification time; candidates that vanished are forgotten.
    std::optional<std::filesystem::path> newest;
    std::filesystem::file_time_type newest_time{};
    for (auto it = trainer_states.begin(); it != trainer_states.end();) {
      std::error_code ec;
      const auto t = std::filesystem::last_write_time(*it, ec);
      if (ec) {
        it = trainer_states.erase(it);
        continue;
      }
      if (!newest || t > newest_time) {
        newest = *it;
        newest_time = t;
      }
      ++it;
    }
    if (!newest) return;
    const auto size = size_of(*newest);
    if (!size) return;
    const std::string signature = utf8_of(*newest) + "|" +
                                  std::to_string(newest_time.time_since_epoch().count()) + "|" +
                                  std::to_string(*size);
    if (signature == trainer_state.signature) return;
    if (*size > options.max_whole_file_bytes) {
      warn_once("trainer_state_size:" + utf8_of(*newest),
                "reading " + utf8_of(*newest) + ": " + std::to_string(*size) + " bytes, more than the " +
                    std::to_string(options.max_whole_file_bytes) + " read whole; not read");
      trainer_state.signature = signature;
      return;
    }
    auto text = read_range(*newest, 0, static_cast<std::size_t>(*size));
    if (!text) return;
    auto entries = parse_trainer_state(*text);
    // Caught half-written, or not a trainer's: try again when it changes.
    trainer_state.signature = signature;
    if (!entries) return;

    TrainerStateProgress& p = trainer_state;
    const bool continues =
        entries->size() >= p.entries &&
        (p.entries == 0 || (*entries)[static_cast<std::size_t>(p.entries - 1)].step == p.last_step);
    for (std::size_t i = continues ? static_cast<std::size_t>(p.entries) : 0; i < entries->size(); ++i) {
      LogHistoryEntry& entry = (*entries)[i];
      if (!continues && (!entry.step || (p.max_step && *entry.step <= *p.max_step))) continue;
      for (auto& point : entry.points) out.push_back(SourcedPoint{std::move(point), k_trainer_state});
      if (entry.step && (!p.max_step || *entry.step > *p.max_step)) p.max_step = entry.step;
    }
    p.entries = entries->size();
    p.last_step = entries->empty() ? std::nullopt : entries->back().step;
  }

  json::Value to_json() const {
    json::Value root = json::Value::object();
    root["version"] = k_state_version;
    json::Value list = json::Value::array();
    for (const auto& [key, file] : files) {
      json::Value f = json::Value::object();
      f["path"] = key;
      f["kind"] = std::string(source_name(file.kind));
      if (file.kind == Kind::tfevents) {
        f["offset"] = u64_json(file.reader->consumed_offset());
        f["failed"] = file.failed;
      } else {
        f["offset"] = u64_json(file.line.offset);
        f["header_bytes"] = u64_json(file.line.header_bytes);
        f["header_crc"] = u64_json(file.line.header_crc);
        f["rows"] = u64_json(file.line.rows);
        f["row_fingerprint"] = u64_json(file.line.row_fingerprint);
        f["tail_crc"] = u64_json(file.line.tail_crc);
      }
      list.push_back(std::move(f));
    }
    root["files"] = std::move(list);
    json::Value ts = json::Value::object();
    ts["entries"] = u64_json(trainer_state.entries);
    ts["last_step"] = trainer_state.last_step ? json::Value(*trainer_state.last_step) : json::Value();
    ts["max_step"] = trainer_state.max_step ? json::Value(*trainer_state.max_step) : json::Value();
    root["trainer_state"] = std::move(ts);
    return root;
  }

  Result<void> from_json(const json::Value& root) {
    if (!root.is_object() || root.get_int("version", -1) != k_state_version)
      return make_error(ErrorCode::parse_error,
                        "not a metrics source state of version " + std::to_string(k_state_version));
    const json::Value* list = root.find("files");
    if (list && list->is_array()) {
      for (const json::Value& f : list->items()) {
        auto kind = kind_named(f.get_string("kind"));
        const std::string path = f.get_string("path");
        if (!kind || path.empty())
          return make_error(ErrorCode::parse_error, "a file entry without a known kind and a path");
        FollowedFile* file = follow(path_of_utf8(path), *kind);
        if (!file) continue;
        auto u64 = [&](std::string_view name) {
          return static_cast<std::uint64_t>(std::max<std::int64_t>(f.get_int(name), 0));
        };
        if (*kind == Kind::tfevents) {
          file->reader = std::make_unique<EventFileReader>(u64("offset"));
          file->fed = u64("offset");
          file->failed = f.get_bool("failed");
        } else {
          file->line.offset = u64("offset");
          file->line.header_bytes = u64("header_bytes");
          file->line.header_crc = static_cast<std::uint32_t>(u64("header_crc"));
          file->line.rows = u64("rows");
          file->line.row_fingerprint = static_cast<std::uint32_t>(u64("row_fingerprint"));
          file->line.tail_crc = static_cast<std::uint32_t>(u64("tail_crc"));
        }
      }
    }
    if (const json::Value* ts = root.find("trainer_state"); ts && ts->is_object()) {
      trainer_state.entries = static_cast<std::uint64_t>(std::max<std::int64_t>(ts->get_int("entries"), 0));
      if (const json::Value* s = ts->find("last_step"); s && s->is_integer())
        trainer_state.last_step = s->as_int();
      if (const json::Value* s = ts->find("max_step"); s && s->is_integer())
        trainer_state.max_step = s->as_int();
    }
    return {};
  }
};

SourceTailer::SourceTailer(SourceTailerOptions options) : m_state(std::make_unique<State>()) {
  m_state->options = std::move(options);
  if (m_state->options.rescan_every_polls < 1) m_state->options.rescan_every_polls = 1;
  // Followed first, so that the explicit channel never falls to the max_files cap.
  if (!m_state->options.jsonl_path.empty()) m_state->follow(m_state->options.jsonl_path, Kind::jsonl);
}

SourceTailer::~SourceTailer() = default;

std::vector<SourcedPoint> SourceTailer::poll() {
  State& s = *m_state;
  if (s.stats.polls % static_cast<std::uint64_t>(s.options.rescan_every_polls) == 0) s.search();
  ++s.stats.polls;
  std::vector<SourcedPoint> out;
  for (auto& [key, file] : s.files) {
    switch (file.kind) {
      case Kind::tfevents: s.poll_events(file, out); break;
      case Kind::metrics_csv:
      case Kind::results_csv: s.poll_csv(file, out); break;
      case Kind::jsonl: s.poll_jsonl(file, out); break;
    }
  }
  s.poll_trainer_state(out);
  s.stats.points += out.size();
  s.stats.files_followed = s.files.size();
  return out;
}

std::vector<std::string> SourceTailer::take_warnings() {
  return std::exchange(m_state->warnings, {});
}

SourceTailerStats SourceTailer::stats() const {
  return m_state->stats;
}

Result<void> SourceTailer::save_state(const std::filesystem::path& path) const {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  auto written = platform::write_file_atomic(path, json::dump(m_state->to_json(), 1) + "\n");
  if (!written) return std::unexpected(with_context(written.error(), "saving the metrics source state"));
  return {};
}

Result<void> SourceTailer::load_state(const std::filesystem::path& path) {
  auto text = platform::read_file(path);
  if (!text) {
    if (text.error().code == ErrorCode::not_found) return {};
    return std::unexpected(with_context(text.error(), "loading the metrics source state"));
  }
  auto root = json::parse(*text);
  if (!root)
    return std::unexpected(with_context(root.error(), "loading the metrics source state " + utf8_of(path)));
  auto restored = m_state->from_json(*root);
  if (!restored)
    return std::unexpected(
        with_context(restored.error(), "loading the metrics source state " + utf8_of(path)));
  return {};
}

}  // namespace gpuhost::metrics
