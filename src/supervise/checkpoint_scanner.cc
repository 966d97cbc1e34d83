#include "supervise/checkpoint_scanner.h"

#include <algorithm>
#include <string_view>
#include <system_error>

#include "base/strings.h"
#include "platform/files.h"
#include "supervise/checkpoint_internal.h"

namespace gpuhost::supervise {
namespace {

namespace fs = std::filesystem;

// '*' any run, '?' one character; everything else literal (no classes: names are plain).
bool glob_match(std::string_view pattern, std::string_view name) {
  std::size_t p = 0, n = 0, star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool is_temp_name(std::string_view name) {
  if (name.empty() || name[0] == '.' || name[0] == '~') return true;
  if (name.ends_with(".tmp") || name.ends_with(".partial")) return true;
  // HF Trainer 4.36+ writes into tmp-checkpoint-N/ and renames it (huggingface/transformers#28364).
  return name.rfind("tmp-checkpoint-", 0) == 0;
}

struct Observed {
  std::uint64_t size = 0;
  std::chrono::system_clock::time_point modified;
  std::size_t files = 0;
};

// Size and newest mtime, by stat calls only; nullopt when the path has gone.
std::optional<Observed> observe(const fs::path& path) {
  auto files = detail::list_checkpoint_files(path);
  if (!files) return std::nullopt;
  Observed o;
  o.files = files->size();
  for (const auto& f : *files) {
    o.size += f.size;
    o.modified = std::max(o.modified, f.modified);
  }
  if (files->empty()) {
    if (auto time = platform::modified_time(path)) o.modified = *time;
  }
  return o;
}

fs::path key_of(const fs::path& path) {
  return path.lexically_normal();
}

bool older_first(const CheckpointVerdict& a, const CheckpointVerdict& b) {
  return a.modified != b.modified ? a.modified < b.modified : a.path < b.path;
}

}  // namespace

CheckpointScanner::CheckpointScanner(ScannerOptions options) : m_options(std::move(options)) {}

bool CheckpointScanner::is_candidate(const fs::path& path, bool is_directory) const {
  const std::string name = detail::utf8_name(path.filename());
  if (is_temp_name(name)) return false;
  for (const std::string& pattern : m_options.ignore)
    if (glob_match(pattern, name)) return false;
  if (m_options.marker) {
    if (!is_directory && name.ends_with(*m_options.marker)) return false;  // a file's marker
    return true;  // the trainer says when each is complete
  }
  // Without a marker, entries of no known checkpoint layout count only when their name carries
  // a step or is a bare number (Orbax/Flax step folders), so that logs (runs/, *.log), configs
  // and final exports in the same folder are not taken for checkpoints (and later retired).
  if (name == "training_args.bin") return false;  // HF Trainer's pickled arguments, not a checkpoint
  const CheckpointFormat format = detect_checkpoint_format(path);
  if (format != CheckpointFormat::generic_file && format != CheckpointFormat::generic_dir) return true;
  if (step_from_name(name)) return true;
  return is_directory && !name.empty() &&
         std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool CheckpointScanner::marker_present(const fs::path& path, bool is_directory) const {
  if (!m_options.marker) return true;
  std::error_code ec;
  if (is_directory)
    return fs::exists(path / fs::path(std::u8string(m_options.marker->begin(), m_options.marker->end())), ec);
  fs::path sibling = path;
  sibling += fs::path(std::u8string(m_options.marker->begin(), m_options.marker->end()));
  return fs::exists(sibling, ec);
}

Result<std::vector<CheckpointScanner::Candidate>> CheckpointScanner::list_candidates(const fs::file_status& status) const {
  std::vector<Candidate> candidates;
  std::error_code ec;
  if (fs::is_directory(status)) {
    for (fs::directory_iterator it(m_options.location, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code entry_ec;
      // A link is another name for a checkpoint (Lightning's last.ckpt with save_last="link"):
      // its target is a candidate of its own, or outside what the trainer writes here.
      if (it->is_symlink(entry_ec)) continue;
      const bool directory = it->is_directory(entry_ec);
      if (!directory && !it->is_regular_file(entry_ec)) continue;
      // Once a candidate, always one (until it disappears): no format detection per scan.
      if (m_seen.contains(key_of(it->path())) || is_candidate(it->path(), directory))
        candidates.push_back(Candidate{it->path(), directory});
    }
    if (ec)
      return make_error(ErrorCode::io_error,
                        "listing " + detail::utf8_name(m_options.location) + ": " + ec.message());
  } else if (fs::is_regular_file(status)) {
    candidates.push_back(Candidate{m_options.location, false});
  }

  return candidates;
}

void CheckpointScanner::ignore_present() {
  std::error_code ec;
  const fs::file_status status = fs::status(m_options.location, ec);
  if (ec || !fs::exists(status)) return;
  auto candidates = list_candidates(status);
  if (!candidates) return;
  for (const Candidate& candidate : *candidates) {
    const std::optional<Observed> observed = observe(candidate.path);
    if (!observed) continue;
    Observation o;
    o.size = observed->size;
    o.modified = observed->modified;
    o.reported = true;  // no content hash: any rewrite, byte-identical or not, is reported
    m_seen[key_of(candidate.path)] = std::move(o);
  }
}

Result<ScanResult> CheckpointScanner::scan(std::chrono::steady_clock::time_point now) {
  ScanResult result;
  std::error_code ec;
  const fs::file_status status = fs::status(m_options.location, ec);
  if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
    return make_error(ErrorCode::io_error,
                      "looking at " + detail::utf8_name(m_options.location) + ": " + ec.message());
  if (ec || !fs::exists(status)) {
    m_seen.clear();
    return result;
  }

  std::vector<Candidate> candidates = GPUHOST_TRY(list_candidates(status));
  std::map<fs::path, Observation> kept;
  for (const Candidate& candidate : candidates) {
    const fs::path key = key_of(candidate.path);
    const std::optional<Observed> observed = observe(candidate.path);
    if (!observed) continue;  // gone since listed
    Observation o;
    const auto seen = m_seen.find(key);
    const bool first_sight = seen == m_seen.end();
    if (!first_sight) o = std::move(seen->second);
    if (first_sight || o.size != observed->size || o.modified != observed->modified) {
      o.size = observed->size;
      o.modified = observed->modified;
      o.stable_since = now;
      o.reported = false;
    }
    // A folder with no files yet has nothing to judge: the trainer has only created it.
    const bool started = !candidate.is_directory || observed->files > 0;
    if (!o.reported && started && now - o.stable_since >= m_options.settle &&
        marker_present(candidate.path, candidate.is_directory)) {
      auto verdict = validate_checkpoint(candidate.path, ValidationDepth::full);
      if (!verdict && verdict.error().code == ErrorCode::not_found) continue;
      if (!verdict) {
        CheckpointVerdict failed;
        failed.path = candidate.path;
        failed.format = detect_checkpoint_format(candidate.path);
        failed.size_bytes = o.size;
        failed.modified = o.modified;
        failed.problem = verdict.error().message;
        result.rejected.push_back(std::move(failed));
        o.reported = true;
      } else if (verdict->size_bytes != o.size || verdict->modified != o.modified) {
        // Written to while being read: start settling again from what is there now.
        o.size = verdict->size_bytes;
        o.modified = verdict->modified;
        o.stable_since = now;
      } else {
        o.reported = true;
        if (!verdict->valid) {
          result.rejected.push_back(std::move(*verdict));
        } else if (verdict->content_hash != o.content_hash) {
          // Touched but byte-identical (same hash as last reported) is not a new checkpoint.
          o.content_hash = verdict->content_hash;
          result.ready.push_back(std::move(*verdict));
        }
      }
    }
    kept[key] = std::move(o);
  }
  // What is no longer there is forgotten: a later file of the same name is new.
  m_seen = std::move(kept);

  std::sort(result.ready.begin(), result.ready.end(), older_first);
  std::sort(result.rejected.begin(), result.rejected.end(), older_first);
  return result;
}

void CheckpointScanner::forget(const fs::path& path) {
  m_seen.erase(key_of(path));
  // Retention passes canonical paths; the scanner keys on location/name.
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(path, ec);
  if (ec) return;
  std::erase_if(m_seen, [&](const auto& entry) {
    std::error_code entry_ec;
    return fs::weakly_canonical(entry.first, entry_ec) == canonical && !entry_ec;
  });
}

void CheckpointScanner::mark_seen(const fs::path& path, const CheckpointVerdict& verdict) {
  Observation o;
  o.size = verdict.size_bytes;
  o.modified = verdict.modified;
  o.reported = true;
  o.content_hash = verdict.content_hash;
  m_seen[key_of(path)] = std::move(o);
}

}  // namespace gpuhost::supervise
