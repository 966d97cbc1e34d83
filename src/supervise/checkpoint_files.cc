// Reading checkpoint files: positioned reads, the leading bytes, and listing a checkpoint's files
// with sizes and mtimes (the scanner's stat-only observations use the same listing).
#include <algorithm>
#include <array>
#include <cerrno>
#include <system_error>

#include "platform/files.h"
#include "supervise/checkpoint_internal.h"

namespace gpuhost::supervise {
namespace fs = std::filesystem;

namespace detail {
namespace {

Error filesystem_error(const std::string& what, std::error_code ec) {
  ErrorCode code = ErrorCode::io_error;
  if (ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory)
    code = ErrorCode::not_found;
  if (ec == std::errc::permission_denied || ec == std::errc::operation_not_permitted)
    code = ErrorCode::permission_denied;
  return Error{code, what + ": " + ec.message()};
}

}  // namespace

bool safe_relative_path(std::string_view path) {
  if (path.empty() || path.front() == '/' || path.find('\\') != std::string_view::npos ||
      path.find(':') != std::string_view::npos)
    return false;
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t end = std::min(path.find('/', start), path.size());
    const std::string_view part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

std::string utf8_name(const fs::path& path) {
  std::u8string text = path.generic_u8string();
  return std::string(text.begin(), text.end());
}


Result<InputFile> InputFile::open(const fs::path& path) {
  InputFile file;
  file.m_path = path;
  platform::DirectFileOptions options;
  options.preferred = platform::IoMode::buffered;
  options.read_only = true;
  auto opened = platform::DirectFile::open(path, options);
  if (!opened) return std::unexpected(opened.error());
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return std::unexpected(filesystem_error("reading the size of " + utf8_name(path), ec));
  file.m_file.emplace(std::move(*opened));
  file.m_size = size;
  return file;
}

Result<void> InputFile::read_at(std::uint64_t offset, void* data, std::size_t bytes) {
  if (bytes == 0) return {};
  if (offset + bytes > m_size || !m_file->read_at(data, bytes, offset))
    return make_error(ErrorCode::io_error, "reading " + utf8_name(m_path) + ": the file ended before byte " +
                                               std::to_string(offset + bytes) +
                                               " (it shrank while being read?)");
  return {};
}

Result<std::size_t> InputFile::read_next(void* data, std::size_t bytes) {
  const auto left = m_size - std::min(m_next, m_size);
  const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left, bytes));
  if (n == 0) return std::size_t{0};
  if (auto read = m_file->read_at(data, n, m_next); !read)
    return make_error(ErrorCode::io_error, "reading " + utf8_name(m_path) + ": " + read.error().message);
  m_next += n;
  return n;
}

Result<Leading> leading_kind(InputFile& file) {
  if (file.size() == 0) return Leading::empty;
  std::array<unsigned char, 4> head{};
  const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(file.size(), head.size()));
  if (auto read = file.read_at(0, head.data(), n); !read) return std::unexpected(read.error());
  if (n == 4 && head[0] == 'P' && head[1] == 'K' && head[2] == 3 && head[3] == 4) return Leading::zip;
  // Pickle protocol 2+ opens with PROTO (0x80) and the protocol number (Python Lib/pickletools.py).
  if (n >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5) return Leading::pickle;
  return Leading::other;
}

Result<std::vector<ListedFile>> list_checkpoint_files(const fs::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    if (!ec) ec = std::make_error_code(std::errc::no_such_file_or_directory);
    return std::unexpected(filesystem_error("reading checkpoint " + utf8_name(path), ec));
  }
  std::vector<ListedFile> files;
  if (fs::is_regular_file(status)) {
    ListedFile file;
    file.path = path;
    file.size = fs::file_size(path, ec);
    if (ec) return std::unexpected(filesystem_error("reading checkpoint " + utf8_name(path), ec));
    file.modified = GPUHOST_TRY(platform::modified_time(path));
    files.push_back(std::move(file));
    return files;
  }
  if (!fs::is_directory(status))
    return make_error(ErrorCode::invalid_argument,
                      "reading checkpoint " + utf8_name(path) + ": not a file or directory");
  fs::recursive_directory_iterator it(path, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code entry_ec;
    if (!it->is_regular_file(entry_ec)) continue;  // directories, broken links, devices
    ListedFile file;
    file.path = it->path();
    file.relative_path = utf8_name(it->path().lexically_relative(path));
    file.size = fs::file_size(file.path, entry_ec);
    if (entry_ec == std::errc::no_such_file_or_directory) continue;  // deleted since listed
    if (entry_ec) return std::unexpected(filesystem_error("reading " + utf8_name(file.path), entry_ec));
    auto modified = platform::modified_time(file.path);
    if (!modified && modified.error().code == ErrorCode::not_found) continue;
    if (!modified) return std::unexpected(modified.error());
    file.modified = *modified;
    files.push_back(std::move(file));
  }
  if (ec) return std::unexpected(filesystem_error("listing " + utf8_name(path), ec));
  std::sort(files.begin(), files.end(),
            [](const ListedFile& a, const ListedFile& b) { return a.relative_path < b.relative_path; });
  return files;
}

}  // namespace detail

}  // namespace gpuhost::supervise
