// DCP `.metadata` as the tree torch/distributed/checkpoint/metadata.py and filesystem.py pickle:
//   Metadata{state_dict_metadata: {fqn: TensorStorageMetadata | BytesStorageMetadata},
//            planner_data, storage_data: {MetadataIndex: _StorageInfo}, storage_meta, version}
//   TensorStorageMetadata{properties: TensorProperties, size: torch.Size, chunks: [ChunkStorageMetadata]}
//   ChunkStorageMetadata{offsets: torch.Size, sizes: torch.Size}
//   MetadataIndex{fqn, offset: torch.Size | None, index: int | None}   (frozen dataclass)
//   _StorageInfo{relative_path, offset, length[, transform_descriptors]}
// Dataclasses pickle as NEWOBJ(cls, ()) + BUILD(__dict__); torch.Size as REDUCE(torch.Size,
// (tuple,)); TensorProperties.__getstate__ gives (dtype, layout, requires_grad, memory format
// enum, pin_memory). The fixtures in tests/fixtures/dcp are pickled under these same names.
#include "supervise/dcp_metadata.h"

#include <algorithm>
#include <map>
#include <set>

#include "supervise/pickle_reader.h"

namespace gpuhost::supervise::dcp {
namespace {

using pickle::Kind;
using pickle::Value;

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}
bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool all_digits(std::string_view s) {
  return !s.empty() && s.size() <= 9 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}
std::int64_t to_int(std::string_view digits) {
  std::int64_t n = 0;
  for (char c : digits) n = n * 10 + (c - '0');
  return n;
}

std::unexpected<Error> not_dcp(std::string what) {
  return make_error(ErrorCode::parse_error, "not DCP metadata: " + what);
}

// An object whose class is `<allowed module>.<name>`.
bool is_class(const Value* v, std::string_view name) {
  if (v == nullptr || v->kind != Kind::object) return false;
  const std::string_view cls = v->class_name();
  return cls.size() > name.size() && ends_with(cls, name) && cls[cls.size() - name.size() - 1] == '.';
}

// A dataclass's field: BUILD gave it a dict (or (None, slots-dict) for slotted classes).
const Value* field(const Value* object, std::string_view name) {
  if (object == nullptr || object->state == nullptr) return nullptr;
  const Value* state = object->state;
  if (state->kind == Kind::tuple && state->items.size() == 2 && state->items[1]->kind == Kind::dict)
    if (const Value* slot = state->items[1]->get(name)) return slot;
  if (state->kind != Kind::dict) return nullptr;
  return state->get(name);
}

Result<std::vector<std::int64_t>> int_list(const Value* v, std::string_view what) {
  if (v != nullptr && is_class(v, "Size") && v->args != nullptr && v->args->items.size() == 1) v = v->args->items[0];
  if (v == nullptr || (v->kind != Kind::tuple && v->kind != Kind::list))
    return not_dcp(std::string(what) + " is not a torch.Size");
  std::vector<std::int64_t> out;
  out.reserve(v->items.size());
  for (const Value* item : v->items) {
    if (item->kind != Kind::integer || item->integer < 0)
      return not_dcp(std::string(what) + " holds something other than a non-negative integer");
    out.push_back(item->integer);
  }
  return out;
}

Result<std::string> text_field(const Value* object, std::string_view name, std::string_view what) {
  const Value* v = field(object, name);
  if (v == nullptr || v->kind != Kind::text) return not_dcp(std::string(what) + " has no " + std::string(name));
  return v->text;
}

Result<std::uint64_t> count_field(const Value* object, std::string_view name, std::string_view what) {
  const Value* v = field(object, name);
  if (v == nullptr || v->kind != Kind::integer || v->integer < 0)
    return not_dcp(std::string(what) + " has no non-negative integer " + std::string(name));
  return static_cast<std::uint64_t>(v->integer);
}

std::string dtype_of(const Value* properties) {
  if (properties == nullptr || properties->state == nullptr) return {};
  const Value* state = properties->state;
  const Value* dtype = nullptr;
  if (state->kind == Kind::tuple && !state->items.empty()) dtype = state->items[0];  // __getstate__
  if (state->kind == Kind::dict) dtype = state->get("dtype");                       // older: __dict__
  if (dtype == nullptr || dtype->kind != Kind::global_ref || !starts_with(dtype->text, "torch.")) return {};
  return dtype->text.substr(6);
}

Result<Tensor> read_tensor(std::string fqn, const Value* v) {
  Tensor t;
  t.fqn = std::move(fqn);
  const std::string what = "tensor " + t.fqn;
  t.dtype = dtype_of(field(v, "properties"));
  t.size = GPUHOST_TRY(int_list(field(v, "size"), what + " size"));
  const Value* chunks = field(v, "chunks");
  if (chunks == nullptr || chunks->kind != Kind::list) return not_dcp(what + " has no chunk list");
  for (const Value* c : chunks->items) {
    if (!is_class(c, "ChunkStorageMetadata")) return not_dcp(what + " has a chunk that is not ChunkStorageMetadata");
    Chunk chunk;
    chunk.offsets = GPUHOST_TRY(int_list(field(c, "offsets"), what + " chunk offsets"));
    chunk.sizes = GPUHOST_TRY(int_list(field(c, "sizes"), what + " chunk sizes"));
    if (chunk.offsets.size() != t.size.size() || chunk.sizes.size() != t.size.size())
      return not_dcp(what + " has a chunk of another rank than the tensor");
    t.chunks.push_back(std::move(chunk));
  }
  return t;
}

Result<StoredItem> read_stored(const Value* index, const Value* info) {
  if (!is_class(index, "MetadataIndex")) return not_dcp("a storage_data key is not a MetadataIndex");
  if (!is_class(info, "_StorageInfo")) return not_dcp("a storage_data value is not a _StorageInfo");
  StoredItem item;
  item.fqn = GPUHOST_TRY(text_field(index, "fqn", "a MetadataIndex"));
  if (const Value* offset = field(index, "offset"); offset != nullptr && offset->kind != Kind::none)
    item.chunk_offsets = GPUHOST_TRY(int_list(offset, "the MetadataIndex of " + item.fqn));
  const std::string what = "the storage of " + item.fqn;
  item.relative_path = GPUHOST_TRY(text_field(info, "relative_path", what));
  item.offset = GPUHOST_TRY(count_field(info, "offset", what));
  item.length = GPUHOST_TRY(count_field(info, "length", what));
  if (const Value* t = field(info, "transform_descriptors");
      t != nullptr && (t->kind == Kind::list || t->kind == Kind::tuple) && !t->items.empty())
    item.transformed = true;
  return item;
}

// Elements in a shape, or nullopt past 2^62 (no real tensor is that large).
std::optional<std::uint64_t> volume(const std::vector<std::int64_t>& shape) {
  std::uint64_t n = 1;
  for (std::int64_t d : shape) {
    const auto u = static_cast<std::uint64_t>(d);
    if (u != 0 && n > (std::uint64_t{1} << 62) / u) return std::nullopt;
    n *= u;
  }
  return n;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

}  // namespace

bool allowed_global(std::string_view name) {
  if (starts_with(name, "torch.distributed.checkpoint.") || starts_with(name, "torch.distributed._shard."))
    return true;
  // The torch names a TensorProperties holds: every torch.dtype, torch.layout and
  // torch.memory_format (docs.pytorch.org/docs/stable/tensor_attributes.html).
  static const std::set<std::string_view> k_torch = {
      "Size", "float32", "float", "float64", "double", "float16", "half", "bfloat16", "complex32",
      "chalf", "complex64", "cfloat", "complex128", "cdouble", "uint8", "uint16", "uint32", "uint64",
      "int8", "int16", "short", "int32", "int", "int64", "long", "bool", "quint8", "qint8", "qint32",
      "quint4x2", "quint2x4", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
      "float8_e8m0fnu", "float4_e2m1fn_x2", "bits1x8", "bits2x4", "bits4x2", "bits8", "bits16",
      "strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc", "jagged",
      "_mkldnn", "contiguous_format", "channels_last", "channels_last_3d", "preserve_format"};
  if (starts_with(name, "torch.")) return k_torch.contains(name.substr(6));
  // builtins.getattr: how Python 3.11+ pickles an Enum member (the memory format encoding).
  return name == "builtins.getattr" || name == "builtins.set" || name == "builtins.frozenset" ||
         name == "collections.OrderedDict";
}

Result<Metadata> parse_metadata(std::string_view pickle_bytes) {
  pickle::Document doc = GPUHOST_TRY(pickle::read(pickle_bytes, allowed_global));
  const Value* root = &doc.root();
  if (!is_class(root, "Metadata")) return not_dcp("the pickle holds no torch.distributed.checkpoint Metadata");

  Metadata out;
  if (const Value* version = field(root, "version"); version != nullptr && version->kind == Kind::text)
    out.version = version->text;

  const Value* entries = field(root, "state_dict_metadata");
  if (entries == nullptr || entries->kind != Kind::dict) return not_dcp("Metadata has no state_dict_metadata");
  for (const auto& [key, value] : entries->entries) {
    if (key->kind != Kind::text) return not_dcp("a state_dict_metadata key is not a string");
    if (is_class(value, "TensorStorageMetadata"))
      out.tensors.push_back(GPUHOST_TRY(read_tensor(key->text, value)));
    else if (is_class(value, "BytesStorageMetadata"))
      out.byte_items.push_back(key->text);
    else
      return not_dcp(key->text + " is neither TensorStorageMetadata nor BytesStorageMetadata");
  }

  const Value* storage = field(root, "storage_data");
  if (storage == nullptr || storage->kind != Kind::dict) return not_dcp("Metadata has no storage_data (not saved by FileSystemWriter?)");
  std::set<std::string_view> tensor_names;
  for (const Tensor& t : out.tensors) tensor_names.insert(t.fqn);
  for (const auto& [index, info] : storage->entries) {
    StoredItem item = GPUHOST_TRY(read_stored(index, info));
    item.tensor = tensor_names.contains(item.fqn);
    out.stored.push_back(std::move(item));
  }
  return out;
}

std::optional<std::int64_t> rank_of_data_file(std::string_view name) {
  // "__{rank}_{n}.distcp" (filesystem.py _generate_uuid-free naming: prefix "__{i}_" per plan).
  if (!starts_with(name, "__") || !ends_with(name, ".distcp")) return std::nullopt;
  std::string_view middle = name.substr(2, name.size() - 2 - 7);
  const auto underscore = middle.find('_');
  if (underscore == std::string_view::npos) return std::nullopt;
  if (!all_digits(middle.substr(0, underscore)) || !all_digits(middle.substr(underscore + 1))) return std::nullopt;
  return to_int(middle.substr(0, underscore));
}

std::optional<std::int64_t> rank_of_metadata_file(std::string_view name) {
  if (!starts_with(name, "__") || !ends_with(name, ".metadata")) return std::nullopt;
  std::string_view middle = name.substr(2, name.size() - 2 - 9);
  if (!all_digits(middle)) return std::nullopt;
  return to_int(middle);
}

std::string coverage_problem(const Metadata& m) {
  std::map<std::string_view, std::set<std::vector<std::int64_t>>> stored_chunks;
  std::set<std::string_view> stored_bytes;
  for (const StoredItem& s : m.stored) {
    if (s.tensor && s.chunk_offsets) stored_chunks[s.fqn].insert(*s.chunk_offsets);
    if (!s.tensor) stored_bytes.insert(s.fqn);
  }
  for (const Tensor& t : m.tensors) {
    const auto total = volume(t.size);
    std::uint64_t covered = 0;
    for (const Chunk& c : t.chunks) {
      for (std::size_t d = 0; d < t.size.size(); ++d)
        if (c.offsets[d] > t.size[d] || c.sizes[d] > t.size[d] - c.offsets[d])
          return t.fqn + ": a chunk at " + shape_text(c.offsets) + " reaches past the tensor's size " + shape_text(t.size);
      const auto n = volume(c.sizes);
      if (!n || !total) return t.fqn + ": a shape too large to be real " + shape_text(t.size);
      covered += *n;
      auto it = stored_chunks.find(t.fqn);
      if (it == stored_chunks.end() || !it->second.contains(c.offsets))
        return t.fqn + ": the chunk at " + shape_text(c.offsets) + " has no stored data";
    }
    if (total && covered < *total)
      return t.fqn + ": chunks hold " + std::to_string(covered) + " of " + std::to_string(*total) +
             " elements (a rank's part is missing)";
    if (total && covered > *total)
      return t.fqn + ": chunks hold " + std::to_string(covered) + " elements, more than the tensor's " +
             std::to_string(*total) + " (overlapping chunks)";
  }
  for (const std::string& fqn : m.byte_items)
    if (!stored_bytes.contains(fqn)) return fqn + ": has no stored data";
  return {};
}

Result<Metadata> merge(std::vector<Metadata> per_rank) {
  Metadata out;
  std::map<std::string, std::size_t> by_name;
  for (Metadata& m : per_rank) {
    if (out.version.empty()) out.version = m.version;
    for (Tensor& t : m.tensors) {
      auto [it, inserted] = by_name.emplace(t.fqn, out.tensors.size());
      if (inserted) {
        out.tensors.push_back(std::move(t));
        continue;
      }
      Tensor& known = out.tensors[it->second];
      if (known.size != t.size)
        return make_error(ErrorCode::parse_error, t.fqn + " has size " + shape_text(known.size) + " in one rank's metadata and " +
                                                      shape_text(t.size) + " in another's");
      for (Chunk& c : t.chunks) known.chunks.push_back(std::move(c));
    }
    for (std::string& b : m.byte_items)
      if (std::find(out.byte_items.begin(), out.byte_items.end(), b) == out.byte_items.end())
        out.byte_items.push_back(std::move(b));
    for (StoredItem& s : m.stored) out.stored.push_back(std::move(s));
  }
  return out;
}

}  // namespace gpuhost::supervise::dcp
