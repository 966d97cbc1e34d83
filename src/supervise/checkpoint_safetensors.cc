// safetensors layout (huggingface/safetensors README.md, "Format"; limits and checks in
// safetensors/src/tensor.rs): 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the
// byte buffer the offsets index, which the tensors must cover exactly.
#include <algorithm>
#include <array>
#include <optional>
#include <string_view>

#include "base/json.h"
#include "supervise/checkpoint_internal.h"

namespace gpuhost::supervise::detail {
namespace {

// MAX_HEADER_SIZE in safetensors/src/tensor.rs.
constexpr std::uint64_t k_max_header = 100'000'000;

// Bytes per element of the dtypes in safetensors/src/tensor.rs (Dtype). Sub-byte and future
// dtypes are not listed: their byte counts are not checked.
std::optional<std::uint64_t> dtype_size(std::string_view dtype) {
  static constexpr std::pair<std::string_view, std::uint64_t> k_sizes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
      {"F32", 4},  {"F64", 8}, {"I64", 8}, {"U64", 8},     {"C64", 8},
  };
  for (const auto& [name, size] : k_sizes)
    if (name == dtype) return size;
  return std::nullopt;
}

struct Span {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  const std::string* name = nullptr;
};

}  // namespace

Result<FileCheck> check_safetensors(InputFile& file) {
  const std::uint64_t size = file.size();
  if (size < 8) return problem("safetensors file shorter than its 8-byte header length (truncated?)");
  std::array<unsigned char, 8> prefix{};
  if (auto read = file.read_at(0, prefix.data(), prefix.size()); !read) return std::unexpected(read.error());
  std::uint64_t header_length = 0;
  for (std::size_t i = 8; i-- > 0;) header_length = header_length << 8 | prefix[i];
  if (header_length > k_max_header)
    return problem("safetensors header length " + std::to_string(header_length) +
                   " exceeds 100 MB (corrupt)");
  if (header_length > size - 8)
    return problem("safetensors header runs past the end of the file (truncated?)");

  std::string header(static_cast<std::size_t>(header_length), '\0');
  if (auto read = file.read_at(8, header.data(), header.size()); !read) return std::unexpected(read.error());
  auto parsed = json::parse(header);
  if (!parsed) return problem("safetensors header is not JSON: " + parsed.error().message);
  if (!parsed->is_object()) return problem("safetensors header is not a JSON object");

  std::vector<Span> spans;
  for (const auto& [name, tensor] : parsed->members()) {
    if (name == "__metadata__") {
      if (!tensor.is_object()) return problem("safetensors __metadata__ is not an object");
      continue;
    }
    const json::Value* dtype = tensor.find("dtype");
    const json::Value* shape = tensor.find("shape");
    const json::Value* offsets = tensor.find("data_offsets");
    if (dtype == nullptr || !dtype->is_string() || shape == nullptr || !shape->is_array() ||
        offsets == nullptr || !offsets->is_array() || offsets->size() != 2 ||
        !offsets->items()[0].is_integer() || !offsets->items()[1].is_integer())
      return problem("safetensors tensor " + name + " lacks dtype, shape or data_offsets");
    const std::int64_t begin = offsets->items()[0].as_int();
    const std::int64_t end = offsets->items()[1].as_int();
    if (begin < 0 || end < begin) return problem("safetensors tensor " + name + " has inverted data_offsets");
    std::uint64_t elements = 1;
    for (const json::Value& dim : shape->items()) {
      if (!dim.is_integer() || dim.as_int() < 0)
        return problem("safetensors tensor " + name + " has a bad shape");
      const auto d = static_cast<std::uint64_t>(dim.as_int());
      if (d != 0 && elements > UINT64_MAX / d)
        return problem("safetensors tensor " + name + " shape overflows");
      elements *= d;
    }
    if (auto bytes = dtype_size(dtype->as_string())) {
      if (elements > UINT64_MAX / *bytes || elements * *bytes != static_cast<std::uint64_t>(end - begin))
        return problem("safetensors tensor " + name + " byte range does not match its dtype and shape");
    }
    spans.push_back(Span{static_cast<std::uint64_t>(begin), static_cast<std::uint64_t>(end), &name});
  }

  // The tensors must tile the buffer from 0 without gaps or overlaps (tensor.rs validate()).
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t covered = 0;
  for (const Span& span : spans) {
    if (span.begin != covered)
      return problem("safetensors tensor " + *span.name +
                     " does not start where the previous one ends (corrupt)");
    covered = span.end;
  }
  const std::uint64_t expected = 8 + header_length + covered;
  if (expected > size)
    return problem("safetensors data ends at byte " + std::to_string(expected) + " but the file has " +
                   std::to_string(size) + " (truncated?)");
  if (expected < size)
    return problem("safetensors file has " + std::to_string(size - expected) +
                   " bytes after the last tensor (corrupt)");
  return FileCheck{};
}

}  // namespace gpuhost::supervise::detail
