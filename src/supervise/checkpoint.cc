// Checkpoint format detection, the directory layouts (research/02 §3.5, §4.5), step numbers and
// the single full-read pass. The byte-level checks live in checkpoint_zip.cc and
// checkpoint_safetensors.cc, file access in checkpoint_files.cc.
#include "supervise/checkpoint.h"

#include <algorithm>
#include <array>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string_view>
#include <system_error>
#include <thread>

#include "base/checksum.h"
#include "base/json.h"
#include "base/strings.h"
#include "platform/files.h"
#include "supervise/checkpoint_internal.h"
#include "supervise/dcp_metadata.h"

namespace gpuhost::supervise {
namespace fs = std::filesystem;
using detail::CrcRange;
using detail::FileCheck;
using detail::InputFile;
using detail::Leading;
using detail::ListedFile;

// ---- names ----------------------------------------------------------------------------------

namespace {

// 1 MiB: few enough system calls for network filesystems, small enough to stay in a core's L2
// cache between the kernel's copy and the CRC and hash passes over it (4 MiB measured ~5% slower).
constexpr std::size_t k_read_buffer = 1u << 20;

std::string lower_extension(std::string_view name) {
  const auto dot = name.rfind('.');
  return dot == std::string_view::npos ? std::string() : to_lower(name.substr(dot));
}

std::string_view last_component(std::string_view relative) {
  const auto slash = relative.rfind('/');
  return slash == std::string_view::npos ? relative : relative.substr(slash + 1);
}

std::string_view first_component(std::string_view relative) {
  return relative.substr(0, relative.find('/'));
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// The decimal number at `pos` (at most 18 digits, so it fits), or nullopt.
std::optional<std::int64_t> number_at(std::string_view s, std::size_t pos) {
  std::size_t end = pos;
  while (end < s.size() && is_digit(s[end])) ++end;
  if (end == pos || end - pos > 18) return std::nullopt;
  std::int64_t value = 0;
  for (std::size_t i = pos; i < end; ++i) value = value * 10 + (s[i] - '0');
  return value;
}

// "checkpoint-500" exactly (HF Trainer's PREFIX_CHECKPOINT_DIR and its `^checkpoint\-(\d+)$`).
std::optional<std::int64_t> hf_checkpoint_number(std::string_view name) {
  constexpr std::string_view prefix = "checkpoint-";
  if (!starts_with(name, prefix)) return std::nullopt;
  std::string_view rest = name.substr(prefix.size());
  if (rest.empty() || !std::all_of(rest.begin(), rest.end(), is_digit)) return std::nullopt;
  return number_at(rest, 0);
}

// Shards as HF names them: "model-00001-of-00003.safetensors", "pytorch_model-00001-of-00002.bin".
bool is_weight_shard(std::string_view name, std::string_view stem, std::string_view extension) {
  if (!starts_with(name, stem) || !name.ends_with(extension)) return false;
  std::string_view middle = name.substr(stem.size(), name.size() - stem.size() - extension.size());
  const auto of = middle.find("-of-");
  if (middle.empty() || middle[0] != '-' || of == std::string_view::npos) return false;
  std::string_view first = middle.substr(1, of - 1);
  std::string_view second = middle.substr(of + 4);
  auto digits = [](std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_digit); };
  return digits(first) && digits(second);
}

// accelerate's names (accelerate/src/accelerate/utils/constants.py): MODEL_NAME "pytorch_model",
// SAFE_MODEL_NAME "model", "_<i>" for the i-th prepared model after the first.
bool is_accelerate_model_file(std::string_view name) {
  for (std::string_view stem : {"model", "pytorch_model"}) {
    for (std::string_view extension : {".safetensors", ".bin"}) {
      if (!starts_with(name, stem) || !name.ends_with(extension)) continue;
      std::string_view middle = name.substr(stem.size(), name.size() - stem.size() - extension.size());
      if (middle.empty()) return true;
      if (middle[0] == '_' && middle.size() > 1 && std::all_of(middle.begin() + 1, middle.end(), is_digit))
        return true;
    }
  }
  return false;
}

bool is_distcp(std::string_view name) {
  return name.ends_with(".distcp");
}

// ---- per-file checks --------------------------------------------------------------------------

enum class MemberKind { none, safetensors, torch, pickle };

MemberKind member_kind(std::string_view relative) {
  const std::string_view name = last_component(relative);
  const std::string extension = lower_extension(name);
  if (extension == ".safetensors") return MemberKind::safetensors;
  if (extension == ".pt" || extension == ".pth" || extension == ".bin" || extension == ".ckpt")
    return MemberKind::torch;
  // DCP pickles its Metadata into ".metadata" (torch/distributed/checkpoint/filesystem.py).
  if (extension == ".pkl" || name == ".metadata") return MemberKind::pickle;
  return MemberKind::none;
}

// A pickle is complete when its last byte is STOP ('.', Python Lib/pickletools.py): every
// pickle ends with it, and a truncated one almost never does.
Result<std::string> check_pickle_end(InputFile& file) {
  char last = 0;
  if (auto read = file.read_at(file.size() - 1, &last, 1); !read) return std::unexpected(read.error());
  if (last != '.') return std::string("pickle does not end with the STOP opcode (truncated?)");
  return std::string();
}

// Checks one file of a checkpoint by its kind; CRC ranges go to `ranges`.
Result<std::string> check_member(const ListedFile& listed, MemberKind kind, std::vector<CrcRange>& ranges) {
  if (kind == MemberKind::none) return std::string();
  InputFile file = GPUHOST_TRY(InputFile::open(listed.path));
  if (kind == MemberKind::safetensors) {
    FileCheck check = GPUHOST_TRY(detail::check_safetensors(file));
    return check.problem;
  }
  const Leading leading = GPUHOST_TRY(detail::leading_kind(file));
  switch (leading) {
    case Leading::empty: return std::string("empty file (still being written?)");
    case Leading::zip: {
      // accelerate writes random_states_<rank>.pkl with torch.save (accelerate/checkpointing.py
      // save_accelerator_state), so a .pkl may be a torch zip too.
      FileCheck check = GPUHOST_TRY(detail::check_torch_zip(file));
      ranges = std::move(check.crc_ranges);
      return check.problem;
    }
    case Leading::pickle:
      // A torch file in the legacy (pre-1.6, non-zip) format is pickles followed by raw storage
      // bytes, with no index or trailer to check: accepted as it stands.
      if (kind == MemberKind::torch) return std::string();
      return check_pickle_end(file);
    case Leading::other: break;
  }
  return std::string(kind == MemberKind::torch ? "neither a torch.save zip archive nor a pickle"
                                               : "not a pickle");
}

struct Validation {
  fs::path root;
  std::vector<ListedFile> files;
  std::map<std::string, std::vector<CrcRange>> crc_ranges;  // by relative path
  std::optional<std::int64_t> step;
  ValidationDepth depth = ValidationDepth::structure;
  std::vector<std::string> notes;

  [[nodiscard]] const ListedFile* find(std::string_view relative) const {
    for (const ListedFile& f : files)
      if (f.relative_path == relative) return &f;
    return nullptr;
  }
  [[nodiscard]] bool has_top_level_dir(std::string_view prefix) const {
    return std::any_of(files.begin(), files.end(), [&](const ListedFile& f) {
      return f.relative_path.find('/') != std::string::npos &&
             starts_with(first_component(f.relative_path), prefix);
    });
  }
};

std::string prefixed(std::string_view relative, std::string_view problem) {
  return relative.empty() ? std::string(problem) : std::string(relative) + ": " + std::string(problem);
}

// Every file whose kind has a check must pass it.
Result<std::string> check_members(Validation& v) {
  for (const ListedFile& f : v.files) {
    std::vector<CrcRange> ranges;
    std::string problem = GPUHOST_TRY(check_member(f, member_kind(f.relative_path), ranges));
    if (!problem.empty()) return prefixed(f.relative_path, problem);
    if (!ranges.empty()) v.crc_ranges[f.relative_path] = std::move(ranges);
  }
  return std::string();
}

Result<json::Value> read_json_member(const ListedFile& f) {
  std::string text = GPUHOST_TRY(platform::read_file(f.path));
  auto parsed = json::parse(text);
  if (!parsed) return make_error(ErrorCode::parse_error, parsed.error().message);
  return std::move(*parsed);
}

// Shards listed by an HF index ("weight_map": {tensor: file}) must all be present.
Result<std::string> check_weight_index(const Validation& v, const ListedFile& index) {
  auto parsed = read_json_member(index);
  if (!parsed) {
    if (parsed.error().code != ErrorCode::parse_error) return std::unexpected(parsed.error());
    return index.relative_path + " is not valid JSON (truncated?)";
  }
  const json::Value* map = parsed->find("weight_map");
  if (map == nullptr || !map->is_object()) return index.relative_path + " has no weight_map";
  std::set<std::string> shards;
  for (const auto& [tensor, file] : map->members())
    if (file.is_string()) shards.insert(file.as_string());
  for (const std::string& shard : shards)
    if (v.find(shard) == nullptr) return index.relative_path + " lists " + shard + ", which is missing";
  return std::string();
}

// HF Trainer checkpoint-N/ (research/02 §3.5): trainer_state.json agrees with the name, weights
// present (whole, sharded with their index, or PEFT adapter), optimizer state present.
Result<std::string> check_hf_trainer_dir(Validation& v) {
  const std::string name = detail::utf8_name(v.root.filename());
  const ListedFile* state = v.find("trainer_state.json");
  if (state == nullptr)
    return std::string("no trainer_state.json (the Trainer writes it last: save unfinished?)");
  auto parsed = read_json_member(*state);
  if (!parsed) {
    if (parsed.error().code != ErrorCode::parse_error) return std::unexpected(parsed.error());
    return std::string("trainer_state.json is not valid JSON (truncated?)");
  }
  const json::Value* global_step = parsed->find("global_step");
  if (global_step == nullptr || !global_step->is_integer())
    return std::string("trainer_state.json has no integer global_step");
  if (auto n = hf_checkpoint_number(name); n && *n != global_step->as_int())
    return "trainer_state.json says global_step " + std::to_string(global_step->as_int()) +
           " but the folder is " + name;
  v.step = global_step->as_int();

  bool weights = false;
  for (std::string_view whole :
       {"model.safetensors", "pytorch_model.bin", "adapter_model.safetensors", "adapter_model.bin"})
    weights = weights || v.find(whole) != nullptr;
  struct Sharding {
    std::string_view stem, extension, index;
  };
  for (const Sharding& s : {Sharding{"model", ".safetensors", "model.safetensors.index.json"},
                            Sharding{"pytorch_model", ".bin", "pytorch_model.bin.index.json"}}) {
    const ListedFile* index = v.find(s.index);
    const bool has_shard = std::any_of(v.files.begin(), v.files.end(), [&](const ListedFile& f) {
      return is_weight_shard(f.relative_path, s.stem, s.extension);
    });
    if (has_shard && index == nullptr) return "sharded weights without " + std::string(s.index);
    if (index != nullptr) {
      std::string problem = GPUHOST_TRY(check_weight_index(v, *index));
      if (!problem.empty()) return problem;
      weights = true;
    }
  }
  // DeepSpeed keeps model states in global_step<N>/, FSDP sharded state in pytorch_model_fsdp_<i>/.
  weights = weights || v.has_top_level_dir("global_step") || v.has_top_level_dir("pytorch_model_fsdp");
  if (!weights)
    return std::string("no model weights (model.safetensors, pytorch_model.bin, shards or adapter_model)");

  const bool optimizer = v.find("optimizer.pt") != nullptr || v.find("optimizer.bin") != nullptr ||
                         v.has_top_level_dir("global_step") || v.has_top_level_dir("optimizer");
  if (!optimizer)
    return std::string(
        "no optimizer state (optimizer.pt): saved with save_only_model? training cannot resume from it");
  return check_members(v);
}

// accelerate save_state / kohya *-state (research/02 §3.5): model weights present, every known
// file sound.
Result<std::string> check_accelerate_dir(Validation& v) {
  const bool model =
      std::any_of(v.files.begin(), v.files.end(),
                  [](const ListedFile& f) { return is_accelerate_model_file(f.relative_path); }) ||
      v.has_top_level_dir("pytorch_model");
  if (!model) return std::string("no model weights (model.safetensors or pytorch_model.bin)");
  return check_members(v);
}

// DCP (research/02 §4.3, research/06 §2.5): `.metadata` is renamed into place last, so it is
// the commit marker; what it lists must all be there (checkpoint_dcp.cc).
Result<std::string> check_dcp_dir(Validation& v) {
  const ListedFile* metadata = v.find(".metadata");
  if (const ListedFile* tmp = v.find(".metadata.tmp");
      metadata != nullptr && tmp != nullptr && tmp->modified >= metadata->modified)
    return std::string("a .metadata.tmp newer than .metadata exists (a save is in progress)");
  const bool data = std::any_of(v.files.begin(), v.files.end(), [](const ListedFile& f) {
    return f.relative_path.find('/') == std::string::npos && is_distcp(f.relative_path);
  });
  if (!data && metadata != nullptr) return std::string("no __<rank>_<n>.distcp data files");
  std::string problem =
      GPUHOST_TRY(detail::check_dcp_layout(v.files, v.depth == ValidationDepth::full, v.notes));
  if (!problem.empty()) return problem;
  return check_members(v);
}

// One torch.save file. Legacy (pre-1.6) pickles have no structure to check without unpickling,
// so they are treated like any other file: complete once settled. That is not a problem with the
// file, so it is reported by format (generic_file), not as invalid.
Result<std::string> check_torch_file(Validation& v, CheckpointFormat& format) {
  InputFile file = GPUHOST_TRY(InputFile::open(v.files.front().path));
  const Leading leading = GPUHOST_TRY(detail::leading_kind(file));
  switch (leading) {
    case Leading::empty: return std::string("empty file (still being written?)");
    case Leading::zip: {
      FileCheck check = GPUHOST_TRY(detail::check_torch_zip(file));
      if (!check.crc_ranges.empty()) v.crc_ranges[""] = std::move(check.crc_ranges);
      return check.problem;
    }
    case Leading::pickle: format = CheckpointFormat::generic_file; return std::string();
    case Leading::other: break;
  }
  // ".bin" is too common a name to insist on torch; ".pt"/".pth"/".ckpt" are torch's own.
  if (lower_extension(detail::utf8_name(v.root.filename())) == ".bin") {
    format = CheckpointFormat::generic_file;
    return std::string();
  }
  return std::string("not a zip archive (torch.save has written zip archives since PyTorch 1.6)");
}

void update_u64(ContentHasher& hasher, std::uint64_t value) {
  std::array<unsigned char, 8> bytes{};
  for (std::size_t i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(value >> (8 * i));
  hasher.update(bytes.data(), bytes.size());
}

std::string hex32(std::uint32_t value) {
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) out.push_back(k_hex[(value >> shift) & 0xFu]);
  return out;
}

// The full pass: every byte once, feeding the content hash and the CRC-32 of each range.
// Reads one file ahead of its consumer on a second thread, so the page-cache copy (system time)
// overlaps with hashing and CRC (user time): about half the wall time of one thread doing both
// (bench/validate_vs_torch_load.sh). Chunks come back in order through a small ring.
class ReadAhead {
 public:
  explicit ReadAhead(InputFile& file) : m_file(file) {
    for (auto& slot : m_slots) slot.data.resize(k_read_buffer);
    m_thread = std::thread([this] { produce(); });
  }
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;
  ~ReadAhead() {
    {
      std::lock_guard lock(m_mutex);
      m_cancelled = true;
    }
    m_changed.notify_all();
    m_thread.join();
  }

  // The next chunk (empty at the end of the file), valid until the following call.
  Result<std::span<const unsigned char>> next() {
    std::unique_lock lock(m_mutex);
    if (m_consumed > 0) {
      ++m_head;  // the previous chunk's slot is free again
      m_changed.notify_all();
    }
    m_changed.wait(lock, [&] { return m_head < m_tail || m_done; });
    if (m_head == m_tail) {
      if (m_error) return std::unexpected(*m_error);
      return std::span<const unsigned char>();
    }
    ++m_consumed;
    const Slot& slot = m_slots[m_head % m_slots.size()];
    return std::span<const unsigned char>(slot.data.data(), slot.size);
  }

 private:
  struct Slot {
    std::vector<unsigned char> data;
    std::size_t size = 0;
  };

  void produce() {
    for (;;) {
      Slot* slot = nullptr;
      {
        std::unique_lock lock(m_mutex);
        m_changed.wait(lock, [&] { return m_tail - m_head < m_slots.size() || m_cancelled; });
        if (m_cancelled) return;
        slot = &m_slots[m_tail % m_slots.size()];
      }
      // The slot at m_tail is ours alone until m_tail moves past it.
      auto got = m_file.read_next(slot->data.data(), slot->data.size());
      std::lock_guard lock(m_mutex);
      if (!got || *got == 0) {
        if (!got) m_error = got.error();
        m_done = true;
        m_changed.notify_all();
        return;
      }
      slot->size = *got;
      ++m_tail;
      m_changed.notify_all();
    }
  }

  InputFile& m_file;
  std::array<Slot, 4> m_slots;
  std::mutex m_mutex;
  std::condition_variable m_changed;
  // Guarded by m_mutex: chunks [m_head, m_tail) are filled and not yet released.
  std::size_t m_head = 0;
  std::size_t m_tail = 0;
  std::size_t m_consumed = 0;
  bool m_done = false;
  bool m_cancelled = false;
  std::optional<Error> m_error;
  std::thread m_thread;  // last: started after everything above exists
};

Result<std::string> read_everything(const Validation& v, std::string& content_hash) {
  ContentHasher hasher;
  for (const ListedFile& f : v.files) {
    update_u64(hasher, f.relative_path.size());
    hasher.update(f.relative_path.data(), f.relative_path.size());
    update_u64(hasher, f.size);

    static const std::vector<CrcRange> k_none;
    auto found = v.crc_ranges.find(f.relative_path);
    const std::vector<CrcRange>& ranges = found == v.crc_ranges.end() ? k_none : found->second;
    std::size_t next = 0;
    std::uint32_t crc = 0;

    InputFile file = GPUHOST_TRY(InputFile::open(f.path));
    if (file.size() != f.size) return prefixed(f.relative_path, "file changed while being read");
    ReadAhead chunks(file);
    std::uint64_t pos = 0;
    for (;;) {
      const std::span<const unsigned char> chunk = GPUHOST_TRY(chunks.next());
      if (chunk.empty()) break;
      const std::size_t got = chunk.size();
      hasher.update(chunk.data(), got);
      const std::uint64_t chunk_end = pos + got;
      while (next < ranges.size() && ranges[next].begin < chunk_end) {
        const CrcRange& r = ranges[next];
        const std::uint64_t from = std::max(r.begin, pos);
        const std::uint64_t to = std::min(r.end, chunk_end);
        if (to > from)
          crc = crc32_update(crc, chunk.data() + (from - pos), static_cast<std::size_t>(to - from));
        if (r.end > chunk_end) break;
        if (crc != r.crc)
          return prefixed(f.relative_path, "zip entry " + r.name + " fails its CRC-32 check (stored " +
                                               hex32(r.crc) + ", computed " + hex32(crc) + "): corrupt data");
        crc = 0;
        ++next;
      }
      pos = chunk_end;
    }
    if (pos != f.size || next != ranges.size())
      return prefixed(f.relative_path, "file changed while being read");
  }
  content_hash = hasher.digest();
  return std::string();
}

bool directory_contains(const fs::path& dir, std::string_view name) {
  std::error_code ec;
  return fs::exists(dir / fs::path(std::u8string(name.begin(), name.end())), ec);
}

}  // namespace

// ---- API --------------------------------------------------------------------------------------

const char* checkpoint_format_name(CheckpointFormat format) {
  switch (format) {
    case CheckpointFormat::torch_zip: return "torch_zip";
    case CheckpointFormat::safetensors: return "safetensors";
    case CheckpointFormat::hf_trainer_dir: return "hf_trainer_dir";
    case CheckpointFormat::accelerate_dir: return "accelerate_dir";
    case CheckpointFormat::dcp_dir: return "dcp_dir";
    case CheckpointFormat::generic_file: return "generic_file";
    case CheckpointFormat::generic_dir: return "generic_dir";
  }
  return "generic_file";
}

CheckpointFormat detect_checkpoint_format(const fs::path& path) {
  const std::string name = detail::utf8_name(path.filename());
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    const std::string extension = lower_extension(name);
    if (extension == ".safetensors") return CheckpointFormat::safetensors;
    if (extension == ".pt" || extension == ".pth" || extension == ".ckpt" || extension == ".bin")
      return CheckpointFormat::torch_zip;
    return CheckpointFormat::generic_file;
  }
  if (hf_checkpoint_number(name) || directory_contains(path, "trainer_state.json"))
    return CheckpointFormat::hf_trainer_dir;
  bool distcp = false;
  bool accelerate = name.ends_with("-state");  // kohya sd-scripts library/train_util.py
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string child = detail::utf8_name(it->path().filename());
    if (child == ".metadata" || child == ".metadata.tmp" || is_distcp(child) || dcp::rank_of_metadata_file(child))
      distcp = true;
    if ((starts_with(child, "random_states_") && child.ends_with(".pkl")) ||
        (starts_with(child, "optimizer") && child.ends_with(".bin")))
      accelerate = true;
  }
  if (distcp) return CheckpointFormat::dcp_dir;
  if (accelerate) return CheckpointFormat::accelerate_dir;
  return CheckpointFormat::generic_dir;
}

Result<CheckpointVerdict> validate_checkpoint(const fs::path& path, ValidationDepth depth) {
  Validation v;
  v.root = path;
  v.depth = depth;
  v.files = GPUHOST_TRY(detail::list_checkpoint_files(path));

  CheckpointVerdict verdict;
  verdict.path = path;
  verdict.format = detect_checkpoint_format(path);
  for (const ListedFile& f : v.files) {
    verdict.files.push_back(CheckpointFile{f.relative_path, f.size});
    verdict.size_bytes += f.size;
    verdict.modified = std::max(verdict.modified, f.modified);
  }
  if (v.files.empty()) {
    if (auto time = platform::modified_time(path)) verdict.modified = *time;
  }
  v.step = step_from_name(detail::utf8_name(path.filename()));

  std::string problem;
  switch (verdict.format) {
    case CheckpointFormat::torch_zip: problem = GPUHOST_TRY(check_torch_file(v, verdict.format)); break;
    case CheckpointFormat::safetensors: {
      InputFile file = GPUHOST_TRY(InputFile::open(v.files.front().path));
      problem = GPUHOST_TRY(detail::check_safetensors(file)).problem;
      break;
    }
    case CheckpointFormat::hf_trainer_dir: problem = GPUHOST_TRY(check_hf_trainer_dir(v)); break;
    case CheckpointFormat::accelerate_dir: problem = GPUHOST_TRY(check_accelerate_dir(v)); break;
    case CheckpointFormat::dcp_dir: problem = GPUHOST_TRY(check_dcp_dir(v)); break;
    case CheckpointFormat::generic_file:
    case CheckpointFormat::generic_dir: break;  // complete once settled: the scanner's call
  }
  if (problem.empty() && depth == ValidationDepth::full)
    problem = GPUHOST_TRY(read_everything(v, verdict.content_hash));
  verdict.step = v.step;
  verdict.notes = std::move(v.notes);
  verdict.valid = problem.empty();
  verdict.problem = std::move(problem);
  return verdict;
}

std::optional<std::int64_t> step_from_name(std::string_view name) {
  // "step" (Lightning "step=1200", kohya "-step00001000-", DeepSpeed "global_step500") or "iter"
  // (Megatron-LM "iter_0001000") not inside a word, then an optional separator and digits; the
  // last such number wins.
  const std::string lower = to_lower(name);
  std::optional<std::int64_t> found;
  std::size_t found_at = 0;
  for (std::string_view keyword : {std::string_view("step"), std::string_view("iter")}) {
    for (std::size_t at = lower.find(keyword); at != std::string::npos; at = lower.find(keyword, at + 1)) {
      if (at > 0 && is_letter(lower[at - 1])) continue;
      std::size_t digits = at + keyword.size();
      if (digits < lower.size() && (lower[digits] == '=' || lower[digits] == '_' || lower[digits] == '-'))
        ++digits;
      auto n = number_at(lower, digits);
      if (n && (!found || at > found_at)) {
        found = n;
        found_at = at;
      }
    }
  }
  if (found) return found;
  if (auto hf = hf_checkpoint_number(name)) return hf;
  // What plain scripts name their saves: "ckpt-000090.pt", "model_100.pt", "weights-7.bin",
  // "checkpoint-100.pt" (a file; HF's checkpoint-N folders are read above). The number must end
  // the name's stem and follow '-' or '_' after one of these words. "checkpoint_3" stays
  // stepless: accelerate's automatic naming counts saves, not steps; so does "epoch10".
  const std::string_view stem = std::string_view(lower).substr(0, lower.find('.'));
  const std::size_t digits = stem.find_last_not_of("0123456789") + 1;
  if (digits == 0 || digits == stem.size() || digits < 2) return std::nullopt;
  const char separator = stem[digits - 1];
  if (separator != '-' && separator != '_') return std::nullopt;
  const std::string_view prefix = stem.substr(0, digits - 1);
  auto ends_with_word = [&](std::string_view word) {
    return prefix.ends_with(word) && (prefix.size() == word.size() || !is_letter(prefix[prefix.size() - word.size() - 1]));
  };
  const bool known = ends_with_word("ckpt") || ends_with_word("model") || ends_with_word("weights") ||
                     (separator == '-' && ends_with_word("checkpoint") && stem.size() < lower.size());
  if (!known) return std::nullopt;
  return number_at(lower, digits);
}

}  // namespace gpuhost::supervise
