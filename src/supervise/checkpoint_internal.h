#pragma once

// Pieces shared by checkpoint.cc, checkpoint_files.cc, checkpoint_zip.cc,
// checkpoint_safetensors.cc and checkpoint_scanner.cc. Not part of the supervise API.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "platform/direct_file.h"

namespace gpuhost::supervise::detail {

// A file opened read-only for positioned reads (platform::DirectFile in buffered mode: each read
// is one pread / ReadFile, so header probes cost what they read). Move-only; not thread-safe.
class InputFile {
 public:
  // not_found / permission_denied / io_error as the OS said.
  [[nodiscard]] static Result<InputFile> open(const std::filesystem::path& path);

  // The size when opened.
  [[nodiscard]] std::uint64_t size() const { return m_size; }
  // Reads exactly `bytes` at `offset`. A short read (the file shrank) is an io_error.
  [[nodiscard]] Result<void> read_at(std::uint64_t offset, void* data, std::size_t bytes);
  // Reads up to `bytes` from where the previous read ended; 0 at the end of the file.
  [[nodiscard]] Result<std::size_t> read_next(void* data, std::size_t bytes);

 private:
  InputFile() = default;
  std::filesystem::path m_path;
  // Read-only, shared for delete on Windows: a trainer replacing the file is never blocked.
  std::optional<platform::DirectFile> m_file;
  std::uint64_t m_size = 0;
  std::uint64_t m_next = 0;  // where read_next continues
};

// A byte range of a file whose CRC-32 the writer recorded (a stored zip entry).
struct CrcRange {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::uint32_t crc = 0;
  std::string name;  // the zip entry name, for the problem text
};

// The result of checking one file's structure: `problem` empty when it is sound. `crc_ranges`
// (sorted, non-overlapping) are what a full read verifies.
struct FileCheck {
  std::string problem;
  std::vector<CrcRange> crc_ranges;
};

// A check that found the file broken, saying how.
inline FileCheck problem(std::string text) {
  return FileCheck{std::move(text), {}};
}

// torch.save zip (research/02 §4.1): EOCD (ZIP64 too), central directory, local headers,
// <top>/data.pkl and <top>/version or <top>/.data/version.
[[nodiscard]] Result<FileCheck> check_torch_zip(InputFile& file);
// safetensors (research/02 §4.2): header length, JSON header, tensor offsets covering the buffer.
[[nodiscard]] Result<FileCheck> check_safetensors(InputFile& file);

// What a file begins with, from its first bytes.
enum class Leading { empty, zip, pickle, other };
[[nodiscard]] Result<Leading> leading_kind(InputFile& file);

// One file of a checkpoint.
struct ListedFile {
  std::filesystem::path path;
  std::string relative_path;  // "/"-separated UTF-8, "" when the checkpoint is this file
  std::uint64_t size = 0;
  std::chrono::system_clock::time_point modified;
};

// `path` itself when it is a file, else every regular file below it (symbolic links to files
// followed), sorted by relative path. Errors: not_found for `path`, permission_denied / io_error.
[[nodiscard]] Result<std::vector<ListedFile>> list_checkpoint_files(const std::filesystem::path& path);

[[nodiscard]] std::string utf8_name(const std::filesystem::path& path);

// A "/"-separated relative path that stays inside its folder: not absolute, no drive or
// backslash, no "..", "." or empty parts (paths read from a manifest or DCP metadata).
[[nodiscard]] bool safe_relative_path(std::string_view path);

// A DCP folder against its metadata (checkpoint_dcp.cc): "" when complete, else the problem.
// `every_item` checks the bytes of every tensor item (else the last one in each data file);
// facts worth showing (layout, counts, stray data files) are appended to `notes`.
[[nodiscard]] Result<std::string> check_dcp_layout(const std::vector<ListedFile>& files, bool every_item,
                                                   std::vector<std::string>& notes);

}  // namespace gpuhost::supervise::detail
