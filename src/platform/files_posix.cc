#include <algorithm>
#include <atomic>
#include <random>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "platform/files.h"
#include "platform/posix_util.h"

namespace gpuhost::platform {
namespace {

Result<void> write_all(int fd, std::string_view data, const std::string& what) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::unexpected(posix_error(what, errno));
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

// A temp file that is removed unless committed (renamed into place).
class TempFile {
 public:
  TempFile() = default;
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    m_fd.reset();
    if (!m_path.empty()) ::unlink(m_path.c_str());
  }

  Result<void> create(const std::filesystem::path& target) {
    static std::atomic<unsigned> counter{0};
    std::random_device random;
    for (int attempt = 0; attempt < 100; ++attempt) {
      std::string name = "." + target.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                         std::to_string(counter++) + "-" + std::to_string(random() % 1000000);
      std::filesystem::path path = target.parent_path() / name;
      // 0666 so the process umask decides, as for any new file.
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd >= 0) {
        m_fd.reset(fd);
        m_path = path.string();
        return {};
      }
      if (errno != EEXIST)
        return std::unexpected(posix_error("creating a temp file next to " + target.string(), errno));
    }
    return make_error(ErrorCode::io_error,
                      "creating a temp file next to " + target.string() + ": too many collisions");
  }

  [[nodiscard]] int fd() const { return m_fd.get(); }
  [[nodiscard]] const std::string& path() const { return m_path; }
  Result<void> close() {
    int fd = m_fd.release();
    if (::close(fd) != 0) return std::unexpected(posix_error("closing " + m_path, errno));
    return {};
  }
  void committed() { m_path.clear(); }

 private:
  UniqueFd m_fd;
  std::string m_path;
};

}  // namespace

Result<std::string> read_file(const std::filesystem::path& path, std::size_t max_bytes) {
  const std::string what = "reading " + path.string();
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::unexpected(posix_error(what, errno));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return std::unexpected(posix_error(what, errno));
  if (S_ISDIR(st.st_mode)) return make_error(ErrorCode::io_error, what + ": is a directory");
  std::string contents;
  // procfs and sysfs report size 0, so the size is only a hint.
  if (S_ISREG(st.st_mode) && st.st_size > 0) {
    if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
      return make_error(ErrorCode::io_error, what + ": larger than " + std::to_string(max_bytes) + " bytes");
    contents.reserve(static_cast<std::size_t>(st.st_size));
  }
  char buffer[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::unexpected(posix_error(what, errno));
    if (n == 0) break;
    if (contents.size() + static_cast<std::size_t>(n) > max_bytes)
      return make_error(ErrorCode::io_error, what + ": larger than " + std::to_string(max_bytes) + " bytes");
    contents.append(buffer, static_cast<std::size_t>(n));
  }
  return contents;
}

Result<void> write_file_atomic(const std::filesystem::path& path, std::string_view contents) {
  const std::filesystem::path target = path.has_parent_path() ? path : std::filesystem::path(".") / path;
  TempFile temp;
  if (auto created = temp.create(target); !created) return created;
  // Keep the permissions of the file we replace (a 0600 secret stays 0600).
  struct stat existing;
  if (::stat(target.c_str(), &existing) == 0) ::fchmod(temp.fd(), existing.st_mode & 07777);
  if (auto written = write_all(temp.fd(), contents, "writing " + temp.path()); !written) return written;
  if (::fsync(temp.fd()) != 0) return std::unexpected(posix_error("flushing " + temp.path(), errno));
  if (auto closed = temp.close(); !closed) return closed;
  if (::rename(temp.path().c_str(), target.c_str()) != 0)
    return std::unexpected(posix_error("renaming " + temp.path() + " to " + target.string(), errno));
  temp.committed();
  // The rename is durable only once the directory entry is.
  std::string dir = target.parent_path().string();
  UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd.valid()) return std::unexpected(posix_error("opening directory " + dir, errno));
  if (::fsync(dir_fd.get()) != 0 && errno != EINVAL)
    return std::unexpected(posix_error("flushing directory " + dir, errno));
  return {};
}

Result<std::vector<DirectoryEntry>> list_directory(const std::filesystem::path& path) {
  const std::string what = "listing " + path.string();
  DirStream dir(::opendir(path.c_str()));
  if (!dir.get()) return std::unexpected(posix_error(what, errno));
  int dir_fd = ::dirfd(dir.get());
  std::vector<DirectoryEntry> entries;
  for (;;) {
    errno = 0;
    struct dirent* ent = ::readdir(dir.get());
    if (!ent) {
      if (errno != 0) return std::unexpected(posix_error(what, errno));
      break;
    }
    std::string_view name(ent->d_name);
    if (name == "." || name == "..") continue;
    DirectoryEntry entry;
    entry.name = std::string(name);
    struct stat st;
    if (::fstatat(dir_fd, ent->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
      entry.is_symlink = S_ISLNK(st.st_mode);
      // A link describes its target, so a link to a directory lists as a directory.
      if (entry.is_symlink && ::fstatat(dir_fd, ent->d_name, &st, 0) != 0) st = {};
      entry.is_directory = S_ISDIR(st.st_mode);
      entry.size = S_ISREG(st.st_mode) ? static_cast<std::uint64_t>(st.st_size) : 0;
    }
    entries.push_back(std::move(entry));
  }
  std::sort(entries.begin(), entries.end(),
            [](const DirectoryEntry& a, const DirectoryEntry& b) { return a.name < b.name; });
  return entries;
}

Result<std::chrono::system_clock::time_point> modified_time(const std::filesystem::path& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::unexpected(posix_error("reading the time of " + path.string(), errno));
  const auto since_epoch = std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec);
  return std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(since_epoch));
}

Result<DiskSpace> disk_space(const std::filesystem::path& path) {
  struct statvfs st;
  if (::statvfs(path.c_str(), &st) != 0)
    return std::unexpected(posix_error("measuring free space on " + path.string(), errno));
  DiskSpace space;
  const std::uint64_t unit = st.f_frsize ? st.f_frsize : st.f_bsize;
  space.capacity_bytes = static_cast<std::uint64_t>(st.f_blocks) * unit;
  space.free_bytes = static_cast<std::uint64_t>(st.f_bfree) * unit;
  space.available_bytes = static_cast<std::uint64_t>(st.f_bavail) * unit;
  return space;
}

Result<std::string> read_symlink(const std::filesystem::path& path) {
  std::string buffer(256, '\0');
  for (;;) {
    ssize_t n = ::readlink(path.c_str(), buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINVAL)
        return make_error(ErrorCode::invalid_argument,
                          "reading link " + path.string() + ": not a symbolic link");
      return std::unexpected(posix_error("reading link " + path.string(), errno));
    }
    if (static_cast<std::size_t>(n) < buffer.size()) {
      buffer.resize(static_cast<std::size_t>(n));
      return buffer;
    }
    buffer.resize(buffer.size() * 2);
  }
}

}  // namespace gpuhost::platform

namespace gpuhost::platform {

struct AppendFile::State {
  UniqueFd fd;
  std::filesystem::path path;
};

AppendFile::AppendFile(std::unique_ptr<State> state) : m_state(std::move(state)) {}
AppendFile::AppendFile(AppendFile&& other) noexcept = default;
AppendFile& AppendFile::operator=(AppendFile&& other) noexcept = default;
AppendFile::~AppendFile() = default;

Result<AppendFile> AppendFile::open(const std::filesystem::path& path) {
  // 0666 so the process umask decides, as for any new file.
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666));
  if (!fd.valid()) return std::unexpected(posix_error("opening " + path.string() + " for appending", errno));
  return AppendFile(std::make_unique<State>(State{std::move(fd), path}));
}

Result<void> AppendFile::append(std::string_view data) {
  return write_all(m_state->fd.get(), data, "appending to " + m_state->path.string());
}

Result<void> AppendFile::sync() {
  if (::fsync(m_state->fd.get()) != 0)
    return std::unexpected(posix_error("flushing " + m_state->path.string(), errno));
  return {};
}

Result<void> AppendFile::truncate(std::uint64_t size) {
  if (::ftruncate(m_state->fd.get(), static_cast<off_t>(size)) != 0)
    return std::unexpected(posix_error("truncating " + m_state->path.string(), errno));
  return sync();
}

Result<std::uint64_t> AppendFile::size() const {
  struct stat st;
  if (::fstat(m_state->fd.get(), &st) != 0)
    return std::unexpected(posix_error("measuring " + m_state->path.string(), errno));
  return static_cast<std::uint64_t>(st.st_size);
}

const std::filesystem::path& AppendFile::path() const {
  return m_state->path;
}

Result<void> sync_directory(const std::filesystem::path& dir) {
  const std::string name = dir.empty() ? std::string(".") : dir.string();
  UniqueFd dir_fd(::open(name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd.valid()) return std::unexpected(posix_error("opening directory " + name, errno));
  // Some file systems cannot sync a directory and say EINVAL; there is nothing more to do there.
  if (::fsync(dir_fd.get()) != 0 && errno != EINVAL)
    return std::unexpected(posix_error("flushing directory " + name, errno));
  return {};
}

}  // namespace gpuhost::platform
