// torch.save archives are zip files written by miniz (pytorch caffe2/serialize/inline_container.cc):
// entries stored uncompressed, local headers with zero CRC/sizes and a data descriptor (flag bit
// 3), the real CRC and sizes in the central directory, ZIP64 records past 4 GiB or 65535 entries.
// Record layouts: PKWARE APPNOTE.TXT 6.3.x, sections 4.3.7 (local header), 4.3.12 (central
// directory header), 4.3.14 (ZIP64 end of central directory record), 4.3.15 (its locator),
// 4.3.16 (end of central directory record), 4.5.3 (ZIP64 extended information extra field).
#include <algorithm>
#include <array>
#include <cstring>

#include "supervise/checkpoint_internal.h"

namespace gpuhost::supervise::detail {
namespace {

constexpr std::uint32_t k_local_header_signature = 0x04034b50;
constexpr std::uint32_t k_central_header_signature = 0x02014b50;
constexpr std::uint32_t k_eocd_signature = 0x06054b50;
constexpr std::uint32_t k_zip64_eocd_signature = 0x06064b50;
constexpr std::uint32_t k_zip64_locator_signature = 0x07064b50;
constexpr std::size_t k_eocd_size = 22;
constexpr std::size_t k_zip64_locator_size = 20;
constexpr std::size_t k_zip64_eocd_size = 56;
constexpr std::size_t k_central_header_size = 46;
constexpr std::size_t k_local_header_size = 30;
constexpr std::size_t k_max_comment = 0xFFFF;
// A central directory this large would mean millions of entries: not a checkpoint.
constexpr std::uint64_t k_max_central_directory = 256u << 20;

std::uint16_t le16(const unsigned char* p) {
  return static_cast<std::uint16_t>(p[0] | p[1] << 8);
}
std::uint32_t le32(const unsigned char* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}
std::uint64_t le64(const unsigned char* p) {
  return static_cast<std::uint64_t>(le32(p)) | static_cast<std::uint64_t>(le32(p + 4)) << 32;
}

struct Entry {
  std::string name;
  std::uint16_t flags = 0;
  std::uint16_t method = 0;
  std::uint32_t crc = 0;
  std::uint64_t compressed = 0;
  std::uint64_t uncompressed = 0;
  std::uint64_t local_offset = 0;
};

struct Directory {
  std::uint64_t entries = 0;
  std::uint64_t size = 0;
  std::uint64_t offset = 0;
  std::uint64_t end_limit = 0;  // where the central directory must end (the next record)
};

// Finds the end-of-central-directory record: the last "PK\5\6" whose comment ends exactly at the
// end of the file. Fills `dir` or returns a problem.
Result<std::string> read_directory_location(InputFile& file, Directory& dir) {
  const std::uint64_t size = file.size();
  if (size < k_eocd_size) return std::string("too small for a zip archive (truncated?)");
  const std::size_t tail_size =
      static_cast<std::size_t>(std::min<std::uint64_t>(size, k_eocd_size + k_max_comment));
  std::vector<unsigned char> tail(tail_size);
  const std::uint64_t tail_offset = size - tail_size;
  if (auto read = file.read_at(tail_offset, tail.data(), tail.size()); !read)
    return std::unexpected(read.error());

  std::size_t eocd = tail_size;  // not found
  for (std::size_t pos = tail_size - k_eocd_size + 1; pos-- > 0;) {
    if (le32(&tail[pos]) == k_eocd_signature && pos + k_eocd_size + le16(&tail[pos + 20]) == tail_size) {
      eocd = pos;
      break;
    }
  }
  if (eocd == tail_size) return std::string("zip end-of-central-directory record missing (truncated?)");
  const unsigned char* e = &tail[eocd];
  const std::uint64_t eocd_offset = tail_offset + eocd;
  if (le16(e + 4) != 0 || le16(e + 6) != 0) return std::string("multi-disk zip archives are not checkpoints");
  dir.entries = le16(e + 10);
  dir.size = le32(e + 12);
  dir.offset = le32(e + 16);
  dir.end_limit = eocd_offset;
  const bool saturated = dir.entries == 0xFFFF || dir.size == 0xFFFFFFFF || dir.offset == 0xFFFFFFFF;

  // A ZIP64 locator sits right before the EOCD; when present its record is authoritative.
  if (eocd_offset >= k_zip64_locator_size) {
    std::array<unsigned char, k_zip64_locator_size> locator{};
    if (auto read = file.read_at(eocd_offset - k_zip64_locator_size, locator.data(), locator.size()); !read)
      return std::unexpected(read.error());
    if (le32(locator.data()) == k_zip64_locator_signature) {
      const std::uint64_t record_offset = le64(&locator[8]);
      const std::uint64_t locator_offset = eocd_offset - k_zip64_locator_size;
      if (record_offset > locator_offset || locator_offset - record_offset < k_zip64_eocd_size)
        return std::string("zip64 end-of-central-directory record outside the file");
      std::array<unsigned char, k_zip64_eocd_size> record{};
      if (auto read = file.read_at(record_offset, record.data(), record.size()); !read)
        return std::unexpected(read.error());
      if (le32(record.data()) != k_zip64_eocd_signature)
        return std::string("zip64 end-of-central-directory record signature wrong (corrupt)");
      dir.entries = le64(&record[32]);
      dir.size = le64(&record[40]);
      dir.offset = le64(&record[48]);
      dir.end_limit = record_offset;
      return std::string();
    }
  }
  if (saturated) return std::string("zip64 end-of-central-directory locator missing (corrupt)");
  return std::string();
}

// Reads the ZIP64 extended information extra field (header 0x0001) for the saturated fields.
bool apply_zip64_extra(const unsigned char* extra, std::size_t length, Entry& entry) {
  std::size_t pos = 0;
  while (pos + 4 <= length) {
    const std::uint16_t id = le16(extra + pos);
    const std::uint16_t size = le16(extra + pos + 2);
    if (pos + 4 + size > length) return false;
    if (id == 0x0001) {
      const unsigned char* p = extra + pos + 4;
      std::size_t left = size;
      auto take = [&](std::uint64_t& field) {
        if (field != 0xFFFFFFFF) return true;
        if (left < 8) return false;
        field = le64(p);
        p += 8;
        left -= 8;
        return true;
      };
      // Order fixed by APPNOTE 4.5.3: uncompressed size, compressed size, local header offset.
      return take(entry.uncompressed) && take(entry.compressed) && take(entry.local_offset);
    }
    pos += 4u + size;
  }
  return entry.uncompressed != 0xFFFFFFFF && entry.compressed != 0xFFFFFFFF &&
         entry.local_offset != 0xFFFFFFFF;
}

}  // namespace

Result<FileCheck> check_torch_zip(InputFile& file) {
  Directory dir;
  std::string location_problem = GPUHOST_TRY(read_directory_location(file, dir));
  if (!location_problem.empty()) return problem(std::move(location_problem));
  if (dir.offset > dir.end_limit || dir.end_limit - dir.offset < dir.size)
    return problem("zip central directory outside the file (truncated?)");
  if (dir.size > k_max_central_directory) return problem("zip central directory implausibly large");
  if (dir.entries > dir.size / k_central_header_size)
    return problem("zip entry count does not fit the central directory (corrupt)");

  std::vector<unsigned char> cd(static_cast<std::size_t>(dir.size));
  if (auto read = file.read_at(dir.offset, cd.data(), cd.size()); !read) return std::unexpected(read.error());
  std::vector<Entry> entries;
  entries.reserve(static_cast<std::size_t>(dir.entries));
  std::size_t pos = 0;
  for (std::uint64_t i = 0; i < dir.entries; ++i) {
    if (cd.size() - pos < k_central_header_size || le32(&cd[pos]) != k_central_header_signature)
      return problem("zip central directory entry " + std::to_string(i) + " is malformed (corrupt)");
    const unsigned char* h = &cd[pos];
    const std::size_t name_length = le16(h + 28);
    const std::size_t extra_length = le16(h + 30);
    const std::size_t comment_length = le16(h + 32);
    if (cd.size() - pos - k_central_header_size < name_length + extra_length + comment_length)
      return problem("zip central directory entry " + std::to_string(i) +
                     " runs past the directory (corrupt)");
    Entry entry;
    entry.flags = le16(h + 8);
    entry.method = le16(h + 10);
    entry.crc = le32(h + 16);
    entry.compressed = le32(h + 20);
    entry.uncompressed = le32(h + 24);
    entry.local_offset = le32(h + 42);
    entry.name.assign(reinterpret_cast<const char*>(h + k_central_header_size), name_length);
    if (!apply_zip64_extra(h + k_central_header_size + name_length, extra_length, entry))
      return problem("zip entry " + entry.name + " lacks its zip64 sizes (corrupt)");
    if (entry.method == 0 && entry.compressed != entry.uncompressed)
      return problem("zip entry " + entry.name + " is stored but its two sizes differ (corrupt)");
    entries.push_back(std::move(entry));
    pos += k_central_header_size + name_length + extra_length + comment_length;
  }

  // Every local header must be where the directory says, and every entry's data must lie
  // between its header and the next entry (or the central directory).
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.local_offset < b.local_offset; });
  FileCheck check;
  std::vector<unsigned char> local;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Entry& entry = entries[i];
    const std::uint64_t limit = i + 1 < entries.size() ? entries[i + 1].local_offset : dir.offset;
    const std::size_t probe = k_local_header_size + entry.name.size();
    if (entry.local_offset > limit || limit - entry.local_offset < probe)
      return problem("zip entry " + entry.name + " has its local header outside the file (corrupt)");
    local.resize(probe);
    if (auto read = file.read_at(entry.local_offset, local.data(), local.size()); !read)
      return std::unexpected(read.error());
    if (le32(local.data()) != k_local_header_signature ||
        std::memcmp(&local[k_local_header_size], entry.name.data(), entry.name.size()) != 0)
      return problem("zip entry " + entry.name + " local header does not match the directory (corrupt)");
    const std::uint64_t data_begin =
        entry.local_offset + k_local_header_size + le16(&local[26]) + le16(&local[28]);
    if (data_begin > limit || limit - data_begin < entry.compressed)
      return problem("zip entry " + entry.name + " data runs past the next record (truncated or corrupt)");
    if (entry.method == 0 && entry.crc != 0)
      check.crc_ranges.push_back(CrcRange{data_begin, data_begin + entry.compressed, entry.crc, entry.name});
  }

  // torch.save puts every record under one top-level folder (the file's stem, or "archive");
  // the version record is "version" before file format 6 and ".data/version" after
  // (PyTorchStreamWriter::writeEndOfFile).
  std::string top;
  for (const Entry& entry : entries) {
    const auto slash = entry.name.find('/');
    if (slash != std::string::npos && slash > 0 &&
        entry.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      top = entry.name.substr(0, slash);
      break;
    }
  }
  if (top.empty()) return problem("zip archive has no <archive>/data.pkl (not a torch.save file)");
  const bool has_version = std::any_of(entries.begin(), entries.end(), [&](const Entry& e) {
    return e.name == top + "/version" || e.name == top + "/.data/version";
  });
  if (!has_version) return problem("zip archive has no " + top + "/version record (not a torch.save file)");
  return check;
}

}  // namespace gpuhost::supervise::detail
