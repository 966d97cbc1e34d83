#pragma once

// PyTorch Distributed Checkpoint (DCP) metadata, read without torch (research/06 §2.1, §2.5).
// A DCP save is a folder of `__<rank>_<n>.distcp` data files and one `.metadata` (or, saved
// without collectives, one `__<rank>.metadata` per rank): `pickle.dump` of a
// torch.distributed.checkpoint.metadata.Metadata whose `storage_data` maps every saved item
// (a tensor chunk or a byte blob) to the file, offset and length that hold it.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace gpuhost::supervise::dcp {

struct Chunk {
  std::vector<std::int64_t> offsets;
  std::vector<std::int64_t> sizes;
};

struct Tensor {
  std::string fqn;    // "model.layers.0.attn.wq.weight"
  std::string dtype;  // "bfloat16", from TensorProperties ("" if not recorded)
  std::vector<std::int64_t> size;
  std::vector<Chunk> chunks;
};

// Where one item's bytes are.
struct StoredItem {
  std::string fqn;
  bool tensor = false;                           // a tensor chunk (else a byte item)
  std::optional<std::vector<std::int64_t>> chunk_offsets;  // tensor chunks: MetadataIndex.offset
  std::string relative_path;                     // "__0_0.distcp"
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  bool transformed = false;  // transform_descriptors (compression...): bytes not a plain torch.save
};

struct Metadata {
  std::string version;  // "1.0.0"; "" before DCP recorded one
  std::vector<Tensor> tensors;
  std::vector<std::string> byte_items;  // fqns of BytesStorageMetadata entries
  std::vector<StoredItem> stored;
};

// Whether a pickle global may appear in DCP metadata: torch.distributed.checkpoint.* (and the
// 1.13-era torch.distributed._shard.*), torch.Size, torch's dtypes, layouts and memory formats,
// and the builtins Python itself writes for them. Everything else (os.system, ...) is refused.
[[nodiscard]] bool allowed_global(std::string_view qualified_name);

// Parses a `.metadata` file's bytes. parse_error for a malformed or truncated pickle or a tree
// that is not DCP's Metadata; invalid_argument when it refers to a global outside the allow-list.
[[nodiscard]] Result<Metadata> parse_metadata(std::string_view pickle_bytes);

// The rank that wrote "__3_0.distcp" (3), or nullopt for other names.
[[nodiscard]] std::optional<std::int64_t> rank_of_data_file(std::string_view name);
// The rank of a no-collective "__3.metadata" (3), or nullopt.
[[nodiscard]] std::optional<std::int64_t> rank_of_metadata_file(std::string_view name);

// Whether every tensor is covered by its chunks (element counts add up to the tensor's) and
// every chunk and byte item has stored data: "" when complete, else what is missing. A rank
// whose part never made it into the metadata shows here even when every file referenced exists.
[[nodiscard]] std::string coverage_problem(const Metadata& metadata);

// Merges per-rank metadata (the no-collective layout) into one: tensors by fqn (sizes must
// agree), chunks, byte items and stored items appended.
[[nodiscard]] Result<Metadata> merge(std::vector<Metadata> per_rank);

}  // namespace gpuhost::supervise::dcp
