// A DCP folder checked against its own metadata (research/06 §2.2, §2.5): the coordinator
// renames `.metadata` into place only after every rank's writes returned, so its presence says
// the save finished; what it lists says whether what finished is all here. Each stored item's
// file must exist inside the folder and be long enough; a tensor item is a torch.save zip (or a
// safetensors blob), so its slice must end with a zip end-of-central-directory record.
#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "platform/files.h"
#include "supervise/checkpoint_internal.h"
#include "supervise/dcp_metadata.h"

namespace gpuhost::supervise::detail {
namespace {

// Large enough for any real `.metadata` (a million-item save is tens of MB).
constexpr std::uint64_t k_max_metadata = 1u << 30;

std::string rank_words(std::string_view file) {
  if (auto rank = dcp::rank_of_data_file(file)) return " (written by rank " + std::to_string(*rank) + ")";
  return {};
}

Result<std::string> read_metadata(const ListedFile& f, dcp::Metadata& out) {
  if (f.size > k_max_metadata) return f.relative_path + " is larger than 1 GiB: not DCP metadata";
  std::string bytes = GPUHOST_TRY(platform::read_file(f.path, static_cast<std::size_t>(k_max_metadata)));
  auto parsed = dcp::parse_metadata(bytes);
  if (!parsed) {
    if (parsed.error().code == ErrorCode::invalid_argument)
      return f.relative_path + ": " + parsed.error().message +
             " (DCP metadata holds only torch.distributed.checkpoint classes; gpuhost does not read further: a pickle can run code)";
    if (parsed.error().code == ErrorCode::parse_error) return f.relative_path + ": " + parsed.error().message;
    return std::unexpected(parsed.error());
  }
  out = std::move(*parsed);
  return std::string();
}

// Whether the slice [offset, offset+length) of `file` looks like a whole torch.save zip or
// safetensors blob.
Result<bool> slice_is_whole(InputFile& file, std::uint64_t offset, std::uint64_t length) {
  constexpr std::size_t k_eocd = 22;  // zip end-of-central-directory record without a comment
  if (length >= k_eocd) {
    std::array<char, 4> signature{};
    GPUHOST_TRY_VOID(file.read_at(offset + length - k_eocd, signature.data(), signature.size()));
    if (std::string_view(signature.data(), 4) == std::string_view("PK\x05\x06", 4)) return true;
  }
  if (length >= 9) {  // safetensors: u64 little-endian header length, then the JSON header
    std::array<unsigned char, 9> head{};
    GPUHOST_TRY_VOID(file.read_at(offset, head.data(), head.size()));
    std::uint64_t header = 0;
    for (std::size_t i = 8; i-- > 0;) header = header << 8 | head[i];
    if (head[8] == '{' && header <= length - 8) return true;
  }
  return false;
}

}  // namespace

Result<std::string> check_dcp_layout(const std::vector<ListedFile>& files, bool every_item,
                                     std::vector<std::string>& notes) {
  std::map<std::string, const ListedFile*, std::less<>> by_path;
  const ListedFile* collective = nullptr;
  std::map<std::int64_t, const ListedFile*> per_rank;
  bool unfinished = false;
  for (const ListedFile& f : files) {
    by_path.emplace(f.relative_path, &f);
    if (f.relative_path == ".metadata") collective = &f;
    if (auto rank = dcp::rank_of_metadata_file(f.relative_path)) per_rank.emplace(*rank, &f);
    if (f.relative_path.ends_with(".metadata.tmp")) unfinished = true;
  }

  dcp::Metadata metadata;
  std::string layout;
  if (collective != nullptr) {
    std::string problem = GPUHOST_TRY(read_metadata(*collective, metadata));
    if (!problem.empty()) return problem;
    layout = ".metadata";
  } else if (!per_rank.empty()) {
    // use_collectives=False: one __<rank>.metadata per rank, ranks 0..N-1.
    std::vector<dcp::Metadata> parts;
    std::int64_t expected = 0;
    for (const auto& [rank, f] : per_rank) {
      if (rank != expected)
        return "__" + std::to_string(expected) + ".metadata is missing (rank " + std::to_string(expected) +
               " has not finished its save)";
      ++expected;
      dcp::Metadata part;
      std::string problem = GPUHOST_TRY(read_metadata(*f, part));
      if (!problem.empty()) return problem;
      parts.push_back(std::move(part));
    }
    auto merged = dcp::merge(std::move(parts));
    if (!merged) return merged.error().message;
    metadata = std::move(*merged);
    layout = std::to_string(per_rank.size()) + " per-rank __<rank>.metadata files";
  } else {
    return std::string(unfinished ? "only .metadata.tmp: the coordinator has not finished the save"
                                  : "no .metadata (the distributed checkpoint save has not finished)");
  }

  // Every stored item: inside the folder, its file present and long enough.
  struct Extent {
    const ListedFile* file = nullptr;
    std::uint64_t end = 0;
    std::size_t items = 0;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> tensor_slices;  // (offset, length)
  };
  std::map<std::string, Extent, std::less<>> extents;
  std::map<std::string, std::size_t, std::less<>> missing;
  for (const dcp::StoredItem& item : metadata.stored) {
    if (!safe_relative_path(item.relative_path))
      return "the metadata points " + item.fqn + " at \"" + item.relative_path + "\", outside the checkpoint folder";
    auto found = by_path.find(item.relative_path);
    if (found == by_path.end()) {
      ++missing[item.relative_path];
      continue;
    }
    if (item.length > UINT64_MAX - item.offset) return "the metadata gives " + item.fqn + " an impossible length";
    Extent& e = extents[item.relative_path];
    e.file = found->second;
    e.end = std::max(e.end, item.offset + item.length);
    ++e.items;
    if (item.tensor && !item.transformed) e.tensor_slices.emplace_back(item.offset, item.length);
  }
  if (!missing.empty()) {
    const auto& [path, items] = *missing.begin();
    std::string text = path + " is missing" + rank_words(path) + "; the metadata stores " + std::to_string(items) +
                       (items == 1 ? " item" : " items") + " in it";
    if (missing.size() > 1) text += " (" + std::to_string(missing.size() - 1) + " more data files missing)";
    return text;
  }
  for (const auto& [path, e] : extents) {
    if (e.file->size < e.end)
      return path + rank_words(path) + " is " + std::to_string(e.file->size) + " bytes but the metadata stores data up to byte " +
             std::to_string(e.end) + " (truncated?)";
  }

  std::string coverage = dcp::coverage_problem(metadata);
  if (!coverage.empty()) return coverage;

  // The bytes of each tensor item: every one at full depth, the one ending last in each file
  // otherwise (a torn write shows at the end).
  for (auto& [path, e] : extents) {
    if (e.tensor_slices.empty()) continue;
    std::sort(e.tensor_slices.begin(), e.tensor_slices.end(),
              [](const auto& a, const auto& b) { return a.first + a.second < b.first + b.second; });
    InputFile file = GPUHOST_TRY(InputFile::open(e.file->path));
    const std::size_t first = every_item ? 0 : e.tensor_slices.size() - 1;
    for (std::size_t i = first; i < e.tensor_slices.size(); ++i) {
      const auto [offset, length] = e.tensor_slices[i];
      if (!GPUHOST_TRY(slice_is_whole(file, offset, length)))
        return path + rank_words(path) + ": the tensor item at byte " + std::to_string(offset) + " (" + std::to_string(length) +
               " bytes) is not a whole torch.save blob (overwritten or torn)";
    }
  }

  // .distcp files the metadata does not mention: left from an earlier save into the same folder
  // with more ranks or threads. The checkpoint loads without them, so it stays valid; said.
  std::vector<std::string> extra;
  std::set<std::int64_t> ranks;
  for (const ListedFile& f : files) {
    if (!f.relative_path.ends_with(".distcp")) continue;
    if (!extents.contains(f.relative_path))
      extra.push_back(f.relative_path);
    else if (auto rank = dcp::rank_of_data_file(f.relative_path))
      ranks.insert(*rank);
  }
  std::size_t chunks = 0;
  for (const dcp::Tensor& t : metadata.tensors) chunks += t.chunks.size();
  notes.push_back("DCP " + (metadata.version.empty() ? std::string("(no version)") : "version " + metadata.version) +
                  " from " + layout + ": " + std::to_string(metadata.tensors.size()) + " tensors in " +
                  std::to_string(chunks) + " chunks, " + std::to_string(metadata.byte_items.size()) +
                  " byte items; " + std::to_string(extents.size()) + " data files from " + std::to_string(ranks.size()) +
                  (ranks.size() == 1 ? " rank" : " ranks"));
  if (!extra.empty())
    notes.push_back(std::to_string(extra.size()) + " data file" + (extra.size() == 1 ? "" : "s") + " not in the metadata (" +
                    extra.front() + (extra.size() > 1 ? ", ..." : "") +
                    "): left from an earlier save into this folder; save each step into a new folder");
  return std::string();
}

}  // namespace gpuhost::supervise::detail
