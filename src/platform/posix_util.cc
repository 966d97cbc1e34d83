#include "platform/posix_util.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

namespace gpuhost::platform {

Error posix_error(std::string_view context, int error_number) {
  ErrorCode code = ErrorCode::io_error;
  if (error_number == ENOENT || error_number == ENOTDIR)
    code = ErrorCode::not_found;
  else if (error_number == EACCES || error_number == EPERM)
    code = ErrorCode::permission_denied;
  char buffer[256];
  // The GNU strerror_r returns the message, which may or may not live in `buffer`.
  const char* text = strerror_r(error_number, buffer, sizeof buffer);
  return Error{code, std::string(context) + ": " + text};
}

void UniqueFd::reset(int fd) {
  if (m_fd >= 0) ::close(m_fd);
  m_fd = fd;
}

std::string read_text_file_or_empty(const char* path) {
  UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return {};
  std::string out;
  char buffer[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
    if (out.size() > (1u << 20)) break;
  }
  return out;
}

}  // namespace gpuhost::platform
