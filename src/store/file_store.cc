#include "store/file_store.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>
#include <system_error>

#include "base/strings.h"
#include "base/time_format.h"
#include "platform/crypto.h"
#include "platform/files.h"

namespace gpuhost::store {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view k_uploads_dir = ".gpuhost-uploads";
constexpr std::size_t k_chunk = 1u << 20;

Error fs_error(const std::string& what, const std::error_code& ec) {
  ErrorCode code = ec == std::errc::no_such_file_or_directory ? ErrorCode::not_found
                   : ec == std::errc::permission_denied       ? ErrorCode::permission_denied
                                                              : ErrorCode::io_error;
  return Error{code, what + ": " + ec.message()};
}

std::string random_hex(std::size_t bytes) {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < bytes; ++i) {
    auto b = static_cast<unsigned>(generator() & 0xFF);
    out += k_hex[b >> 4];
    out += k_hex[b & 15];
  }
  return out;
}

bool is_temp_name(const std::string& name) {
  return name.starts_with(".") && name.find(".tmp-") != std::string::npos;
}

Result<std::string> etag_of(const fs::path& path, const std::string& what) {
  std::error_code ec;
  std::uint64_t size = fs::file_size(path, ec);
  if (ec) return std::unexpected(fs_error(what, ec));
  auto mtime = fs::last_write_time(path, ec);
  if (ec) return std::unexpected(fs_error(what, ec));
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%llx-%llx", static_cast<unsigned long long>(size),
                static_cast<unsigned long long>(mtime.time_since_epoch().count()));
  return std::string(buffer);
}

// Streams `sources` into a temp file next to `target`, syncs it, renames it over `target` and
// syncs the directory. Returns the SHA-256 of what was written. The temp file is removed on
// failure.
Result<std::string> write_durably(const fs::path& target, std::span<const Payload> sources) {
  std::string what = "writing " + target.string();
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  if (ec) return std::unexpected(fs_error(what + ": creating its directory", ec));
  fs::path temp = target.parent_path() / ("." + target.filename().string() + ".tmp-" + random_hex(8));
  struct Cleanup {
    fs::path path;
    bool armed = true;
    ~Cleanup() {
      std::error_code ignored;
      if (armed) fs::remove(path, ignored);
    }
  } cleanup{temp};

  platform::Sha256 hash;
  {
    auto out = platform::AppendFile::open(temp);
    if (!out) return std::unexpected(with_context(out.error(), what));
    std::string buffer;
    for (const Payload& source : sources) {
      if (source.source == Payload::Source::memory) {
        hash.update(source.memory);
        if (auto done = out->append(source.memory); !done) return std::unexpected(done.error());
        continue;
      }
      if (source.source == Payload::Source::none) continue;
      std::ifstream in(source.file, std::ios::binary);
      if (!in) return make_error(ErrorCode::not_found, what + ": cannot open " + source.file.string());
      in.seekg(static_cast<std::streamoff>(source.offset));
      std::uint64_t left = source.length;
      buffer.resize(k_chunk);
      while (left > 0) {
        auto n = static_cast<std::streamsize>(std::min<std::uint64_t>(left, k_chunk));
        in.read(buffer.data(), n);
        if (in.gcount() != n)
          return make_error(ErrorCode::io_error, what + ": " + source.file.string() + " ended before byte " +
                                                     std::to_string(source.offset + source.length));
        std::string_view chunk(buffer.data(), static_cast<std::size_t>(n));
        hash.update(chunk);
        if (auto done = out->append(chunk); !done) return std::unexpected(done.error());
        left -= static_cast<std::uint64_t>(n);
      }
    }
    if (auto done = out->sync(); !done) return std::unexpected(done.error());
  }
  fs::rename(temp, target, ec);
  if (ec) return std::unexpected(fs_error(what + ": renaming the temp file into place", ec));
  cleanup.armed = false;
  if (auto done = platform::sync_directory(target.parent_path()); !done) return std::unexpected(done.error());
  return platform::to_hex(hash.finish());
}

Result<void> check_if_match(const fs::path& path, const ReadOptions& options, const std::string& what) {
  if (options.if_match.empty()) return {};
  std::string etag = GPUHOST_TRY(etag_of(path, what));
  if (etag != options.if_match)
    return make_error(ErrorCode::invalid_argument,
                      what + ": the object changed (ETag " + etag + ", expected " + options.if_match + ")");
  return {};
}

// The byte range to read, clamped to the file's end as S3 does; invalid_argument past the end.
Result<ByteRange> effective_range(const fs::path& path, const ReadOptions& options, const std::string& what) {
  std::error_code ec;
  std::uint64_t size = fs::file_size(path, ec);
  if (ec) return std::unexpected(fs_error(what, ec));
  if (!options.range) return ByteRange{0, size};
  if (options.range->length == 0)
    return make_error(ErrorCode::invalid_argument, what + ": an empty byte range");
  if (options.range->offset >= size)
    return make_error(ErrorCode::invalid_argument, what + ": range starts at " +
                                                       std::to_string(options.range->offset) +
                                                       ", past the end (" + std::to_string(size) + " bytes)");
  return ByteRange{options.range->offset, std::min(options.range->length, size - options.range->offset)};
}

std::string part_name(int number) {
  char name[32];
  std::snprintf(name, sizeof name, "part-%05d", number);
  return name;
}

}  // namespace

FileStore::FileStore(std::filesystem::path root) : m_root(std::move(root)) {}

std::string FileStore::describe() const {
  return "file://" + m_root.generic_string();
}

Result<fs::path> FileStore::path_of(std::string_view key) const {
  auto bad = [&](std::string_view why) {
    return make_error(ErrorCode::invalid_argument,
                      "object key \"" + std::string(key) + "\": " + std::string(why));
  };
  if (key.empty() || key.front() == '/') return bad("must be non-empty and not start with '/'");
  if (key.find_first_of(std::string_view("\\:\0", 3)) != std::string_view::npos)
    return bad("'\\', ':' and NUL are not allowed in keys of a file:// store");
  for (const std::string& segment : split(key, '/')) {
    if (segment.empty() || segment == "." || segment == "..")
      return bad("empty, \".\" and \"..\" segments are not allowed");
    if (is_temp_name(segment)) return bad("names like \".x.tmp-...\" are reserved for temp files");
  }
  if (key.starts_with(k_uploads_dir))
    return bad(std::string(k_uploads_dir) + " is reserved for multipart uploads");
  return m_root / fs::path(std::string(key));
}

Result<std::string> FileStore::put(std::string_view key, const Payload& payload) {
  fs::path path = GPUHOST_TRY(path_of(key));
  GPUHOST_TRY(write_durably(path, std::span(&payload, 1)));
  return etag_of(path, "writing " + path.string());
}

Result<std::string> FileStore::get(std::string_view key, const ReadOptions& options,
                                   std::uint64_t max_bytes) {
  fs::path path = GPUHOST_TRY(path_of(key));
  std::string what = "reading " + path.string();
  if (auto done = check_if_match(path, options, what); !done) return std::unexpected(done.error());
  ByteRange range = GPUHOST_TRY(effective_range(path, options, what));
  if (range.length > max_bytes)
    return make_error(ErrorCode::parse_error, what + ": " + std::to_string(range.length) +
                                                  " bytes is more than the " + std::to_string(max_bytes) +
                                                  "-byte limit");
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::not_found, what + ": cannot open it");
  in.seekg(static_cast<std::streamoff>(range.offset));
  std::string data(static_cast<std::size_t>(range.length), '\0');
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  if (static_cast<std::uint64_t>(in.gcount()) != range.length)
    return make_error(ErrorCode::io_error, what + ": the file shrank while it was read");
  return data;
}

Result<std::uint64_t> FileStore::get_to_file(std::string_view key, const fs::path& file,
                                             std::uint64_t file_offset, const ReadOptions& options) {
  fs::path path = GPUHOST_TRY(path_of(key));
  std::string what = "copying " + path.string() + " to " + file.string();
  if (auto done = check_if_match(path, options, what); !done) return std::unexpected(done.error());
  ByteRange range = GPUHOST_TRY(effective_range(path, options, what));
  {
    auto target = platform::AppendFile::open(file);  // creates it when absent
    if (!target) return std::unexpected(with_context(target.error(), what));
    if (!options.range) {  // a whole-object copy ends the file where the object ends
      if (auto done = target->truncate(file_offset); !done)
        return std::unexpected(with_context(done.error(), what));
    }
  }
  std::ifstream in(path, std::ios::binary);
  std::fstream out(file, std::ios::binary | std::ios::in | std::ios::out);
  if (!in || !out) return make_error(ErrorCode::io_error, what + ": cannot open both files");
  in.seekg(static_cast<std::streamoff>(range.offset));
  out.seekp(static_cast<std::streamoff>(file_offset));
  std::string buffer(k_chunk, '\0');
  std::uint64_t left = range.length;
  while (left > 0) {
    auto n = static_cast<std::streamsize>(std::min<std::uint64_t>(left, k_chunk));
    in.read(buffer.data(), n);
    if (in.gcount() != n)
      return make_error(ErrorCode::io_error, what + ": the source shrank while it was read");
    out.write(buffer.data(), n);
    left -= static_cast<std::uint64_t>(n);
  }
  out.flush();
  if (!out) return make_error(ErrorCode::io_error, what + ": writing failed");
  return range.length;
}

Result<ObjectInfo> FileStore::head(std::string_view key) {
  fs::path path = GPUHOST_TRY(path_of(key));
  std::string what = "looking at " + path.string();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return make_error(ErrorCode::not_found, what + ": no such object");
  ObjectInfo info;
  info.key = std::string(key);
  info.size = fs::file_size(path, ec);
  if (ec) return std::unexpected(fs_error(what, ec));
  info.etag = GPUHOST_TRY(etag_of(path, what));
  auto mtime = fs::last_write_time(path, ec);
  if (!ec)
    info.last_modified = format_rfc3339_utc(std::chrono::time_point_cast<std::chrono::system_clock::duration>(
        std::chrono::file_clock::to_sys(mtime)));
  return info;
}

Result<ListPage> FileStore::list(std::string_view prefix, const std::optional<std::string>& after,
                                 int max_keys) {
  std::string what = "listing " + m_root.string();
  std::vector<ObjectInfo> all;
  std::error_code ec;
  if (!fs::is_directory(m_root, ec)) return ListPage{};
  fs::recursive_directory_iterator it(m_root, ec), end;
  if (ec) return std::unexpected(fs_error(what, ec));
  for (; it != end; it.increment(ec)) {
    if (ec) return std::unexpected(fs_error(what, ec));
    const fs::path& path = it->path();
    std::string name = path.filename().string();
    if (it.depth() == 0 && name == k_uploads_dir) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(ec) || is_temp_name(name)) continue;
    std::string key = path.lexically_relative(m_root).generic_string();
    if (!std::string_view(key).starts_with(prefix) || (after && key <= *after)) continue;
    ObjectInfo info;
    info.key = key;
    info.size = it->file_size(ec);
    info.etag = etag_of(path, what).value_or("");
    all.push_back(std::move(info));
  }
  std::sort(all.begin(), all.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
  ListPage page;
  std::size_t take = std::min<std::size_t>(all.size(), static_cast<std::size_t>(std::max(1, max_keys)));
  page.objects.assign(std::make_move_iterator(all.begin()),
                      std::make_move_iterator(all.begin() + static_cast<std::ptrdiff_t>(take)));
  if (take < all.size()) page.next = page.objects.back().key;
  return page;
}

Result<void> FileStore::remove(std::string_view key) {
  fs::path path = GPUHOST_TRY(path_of(key));
  std::error_code ec;
  fs::remove(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    return std::unexpected(fs_error("removing " + path.string(), ec));
  // Empty directories left behind are removed up to the root, as keys have no directories.
  for (fs::path dir = path.parent_path(); dir != m_root && dir.has_relative_path(); dir = dir.parent_path())
    if (!fs::remove(dir, ec)) break;  // not empty, or gone: stop
  return {};
}

Result<fs::path> FileStore::upload_dir(std::string_view key, std::string_view upload_id) const {
  GPUHOST_TRY(path_of(key));
  bool hex = !upload_id.empty() && upload_id.find_first_not_of("0123456789abcdef") == std::string_view::npos;
  fs::path dir = m_root / std::string(k_uploads_dir) / std::string(hex ? upload_id : "-");
  auto stored_key = platform::read_file(dir / "key", 4096);
  if (!hex || !stored_key || *stored_key != key)
    return make_error(ErrorCode::not_found, "multipart upload " + std::string(upload_id) + " of \"" +
                                                std::string(key) + "\" in " + describe() +
                                                ": no such upload (NoSuchUpload)");
  return dir;
}

Result<std::string> FileStore::create_multipart(std::string_view key) {
  GPUHOST_TRY(path_of(key));
  std::string id = random_hex(16);
  fs::path dir = m_root / std::string(k_uploads_dir) / id;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return std::unexpected(fs_error("creating " + dir.string(), ec));
  if (auto written = platform::write_file_atomic(dir / "initiated",
                                                 format_rfc3339_utc(std::chrono::system_clock::now()));
      !written)
    return std::unexpected(written.error());
  // The key last: an upload directory without it is not listed, so a crash here leaves no upload.
  if (auto written = platform::write_file_atomic(dir / "key", key); !written)
    return std::unexpected(written.error());
  return id;
}

Result<PartInfo> FileStore::upload_part(std::string_view key, std::string_view upload_id, int number,
                                        const Payload& payload) {
  fs::path dir = GPUHOST_TRY(upload_dir(key, upload_id));
  if (number < 1 || number > 10000)
    return make_error(ErrorCode::invalid_argument,
                      "uploading part " + std::to_string(number) + ": part numbers run from 1 to 10,000");
  fs::path path = dir / part_name(number);
  PartInfo part;
  part.number = number;
  part.size = payload.size();
  part.sha256 = GPUHOST_TRY(write_durably(path, std::span(&payload, 1)));
  part.etag = GPUHOST_TRY(etag_of(path, "writing " + path.string()));
  return part;
}

Result<std::vector<PartInfo>> FileStore::list_parts(std::string_view key, std::string_view upload_id) {
  fs::path dir = GPUHOST_TRY(upload_dir(key, upload_id));
  auto entries = GPUHOST_TRY(platform::list_directory(dir));
  std::vector<PartInfo> parts;
  for (const auto& entry : entries) {
    if (!entry.name.starts_with("part-") || entry.is_directory) continue;
    auto number = parse_int(entry.name.substr(5));
    if (!number) continue;
    PartInfo part;
    part.number = static_cast<int>(*number);
    part.size = entry.size;
    part.etag = GPUHOST_TRY(etag_of(dir / entry.name, "listing " + dir.string()));
    parts.push_back(std::move(part));
  }
  std::sort(parts.begin(), parts.end(),
            [](const PartInfo& a, const PartInfo& b) { return a.number < b.number; });
  return parts;
}

Result<std::string> FileStore::complete_multipart(std::string_view key, std::string_view upload_id,
                                                  std::span<const PartInfo> parts) {
  fs::path dir = GPUHOST_TRY(upload_dir(key, upload_id));
  fs::path target = GPUHOST_TRY(path_of(key));
  std::string what = "completing the multipart upload of " + target.string();
  if (parts.empty()) return make_error(ErrorCode::invalid_argument, what + ": no parts");
  std::vector<Payload> sources;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0 && parts[i].number <= parts[i - 1].number)
      return make_error(ErrorCode::invalid_argument, what + ": parts must be in ascending order of number");
    fs::path part = dir / part_name(parts[i].number);
    auto etag = etag_of(part, what);
    if (!etag || *etag != parts[i].etag)
      return make_error(ErrorCode::invalid_argument, what + ": part " + std::to_string(parts[i].number) +
                                                         " is missing or has another ETag (InvalidPart)");
    std::error_code ec;
    sources.push_back(Payload::from_file(part, 0, fs::file_size(part, ec)));
  }
  GPUHOST_TRY(write_durably(target, sources));
  std::error_code ec;
  fs::remove_all(dir, ec);
  return etag_of(target, what);
}

Result<void> FileStore::abort_multipart(std::string_view key, std::string_view upload_id) {
  auto dir = upload_dir(key, upload_id);
  if (!dir) return dir.error().code == ErrorCode::not_found ? Result<void>() : std::unexpected(dir.error());
  std::error_code ec;
  fs::remove_all(*dir, ec);
  if (ec) return std::unexpected(fs_error("removing " + dir->string(), ec));
  return {};
}

Result<std::vector<UploadInfo>> FileStore::list_multipart_uploads(std::string_view prefix) {
  std::vector<UploadInfo> uploads;
  fs::path root = m_root / std::string(k_uploads_dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return uploads;
  auto entries = GPUHOST_TRY(platform::list_directory(root));
  for (const auto& entry : entries) {
    if (!entry.is_directory) continue;
    auto key = platform::read_file(root / entry.name / "key", 4096);
    if (!key || !std::string_view(*key).starts_with(prefix)) continue;
    auto initiated = platform::read_file(root / entry.name / "initiated", 256);
    uploads.push_back(UploadInfo{*key, entry.name, initiated.value_or("")});
  }
  return uploads;
}

}  // namespace gpuhost::store
