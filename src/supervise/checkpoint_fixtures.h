#pragma once
// Test-only: writes real checkpoint files byte by byte (torch.save-like zip archives, safetensors,
// pickles) and a scratch directory, for checkpoint_test.cc and checkpoint_scanner_test.cc.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/checksum.h"
#include "platform/process.h"

namespace gpuhost::supervise::fixtures {

// A scratch directory removed on destruction.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& purpose) {
    static int counter = 0;
    m_path = std::filesystem::temp_directory_path() /
             ("gpuhost-" + purpose + "-" + std::to_string(platform::current_process_id()) + "-" +
              std::to_string(counter++));
    std::filesystem::remove_all(m_path);
    std::filesystem::create_directories(m_path);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(m_path, ec);
  }
  [[nodiscard]] const std::filesystem::path& path() const { return m_path; }

 private:
  std::filesystem::path m_path;
};

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline void put16(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 2; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
inline void put32(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
inline void put64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// Deterministic filler bytes that never contain "PK".
inline std::string pattern_bytes(std::size_t n, unsigned seed = 1) {
  std::string out(n, '\0');
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& c : out) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>('a' + (x >> 16) % 26);
  }
  return out;
}

// A minimal pickle (protocol 2, an empty dict): PROTO 2, EMPTY_DICT, BINPUT 0, STOP.
inline std::string pickle_bytes() {
  return std::string("\x80\x02}q\x00.", 6);
}

struct ZipEntry {
  std::string name;
  std::string data;
};

struct ZipOptions {
  bool zip64 = false;           // ZIP64 extra fields, EOCD64 record and locator
  bool store_crc = true;        // false: CRC field 0 in the central directory (newer torch option)
  bool data_descriptor = true;  // as torch's miniz writer does: zero CRC/sizes in local headers
};

// A zip archive laid out like torch.save's: stored entries, data aligned to 64 bytes with an
// "FB" padding extra field, central directory and EOCD at the end.
inline std::string make_zip(const std::vector<ZipEntry>& entries, ZipOptions options = {}) {
  std::string out;
  std::string central;
  for (const ZipEntry& e : entries) {
    const std::uint64_t local_offset = out.size();
    const std::uint32_t crc = crc32(e.data);
    const std::uint16_t flags = options.data_descriptor ? 0x0808 : 0x0800;
    std::size_t header_end = local_offset + 30 + e.name.size() + 4;
    std::size_t padding = (64 - header_end % 64) % 64;
    put32(out, 0x04034b50);
    put16(out, options.zip64 ? 45 : 20);
    put16(out, flags);
    put16(out, 0);  // stored
    put16(out, 0);
    put16(out, 0);
    put32(out, options.data_descriptor ? 0 : crc);
    put32(out, options.data_descriptor ? 0 : e.data.size());
    put32(out, options.data_descriptor ? 0 : e.data.size());
    put16(out, e.name.size());
    put16(out, 4 + padding);
    out += e.name;
    put16(out, 0x4246);  // "FB"
    put16(out, padding);
    out.append(padding, 'Z');
    out += e.data;
    if (options.data_descriptor) {
      put32(out, 0x08074b50);
      put32(out, crc);
      put32(out, e.data.size());
      put32(out, e.data.size());
    }

    put32(central, 0x02014b50);
    put16(central, options.zip64 ? 45 : 20);
    put16(central, options.zip64 ? 45 : 20);
    put16(central, flags);
    put16(central, 0);
    put16(central, 0);
    put16(central, 0);
    put32(central, options.store_crc ? crc : 0);
    put32(central, options.zip64 ? 0xFFFFFFFFu : e.data.size());
    put32(central, options.zip64 ? 0xFFFFFFFFu : e.data.size());
    put16(central, e.name.size());
    put16(central, options.zip64 ? 28 : 0);
    put16(central, 0);
    put16(central, 0);
    put16(central, 0);
    put32(central, 0);
    put32(central, options.zip64 ? 0xFFFFFFFFu : local_offset);
    central += e.name;
    if (options.zip64) {
      put16(central, 0x0001);
      put16(central, 24);
      put64(central, e.data.size());
      put64(central, e.data.size());
      put64(central, local_offset);
    }
  }
  const std::uint64_t cd_offset = out.size();
  out += central;
  if (options.zip64) {
    const std::uint64_t record_offset = out.size();
    put32(out, 0x06064b50);
    put64(out, 44);
    put16(out, 45);
    put16(out, 45);
    put32(out, 0);
    put32(out, 0);
    put64(out, entries.size());
    put64(out, entries.size());
    put64(out, central.size());
    put64(out, cd_offset);
    put32(out, 0x07064b50);
    put32(out, 0);
    put64(out, record_offset);
    put32(out, 1);
  }
  put32(out, 0x06054b50);
  put16(out, 0);
  put16(out, 0);
  put16(out, options.zip64 ? 0xFFFF : entries.size());
  put16(out, options.zip64 ? 0xFFFF : entries.size());
  put32(out, options.zip64 ? 0xFFFFFFFFu : central.size());
  put32(out, options.zip64 ? 0xFFFFFFFFu : cd_offset);
  put16(out, 0);
  return out;
}

// What torch.save writes for a small state dict, under top-level folder `top`.
inline std::string make_torch_zip(const std::string& top = "archive", ZipOptions options = {},
                                  std::size_t tensor_bytes = 400) {
  return make_zip({{top + "/data.pkl", pickle_bytes()},
                   {top + "/byteorder", "little"},
                   {top + "/data/0", pattern_bytes(tensor_bytes)},
                   {top + "/data/1", pattern_bytes(12, 2)},
                   {top + "/version", "3\n"}},
                  options);
}

struct Tensor {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::size_t bytes = 0;
};

// A safetensors file; the header is padded with spaces to a multiple of 8 as the writer does.
inline std::string make_safetensors(const std::vector<Tensor>& tensors) {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  std::uint64_t offset = 0;
  for (const Tensor& t : tensors) {
    header += ",\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) header += (i ? "," : "") + std::to_string(t.shape[i]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t.bytes) + "]}";
    offset += t.bytes;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out;
  put64(out, header.size());
  out += header;
  unsigned seed = 3;
  for (const Tensor& t : tensors) out += pattern_bytes(t.bytes, seed++);
  return out;
}

inline std::string make_small_safetensors() {
  return make_safetensors({{"layer.weight", "F32", {4, 8}, 128}, {"layer.bias", "BF16", {8}, 16}});
}

}  // namespace gpuhost::supervise::fixtures
