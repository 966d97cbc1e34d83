// The parts of socket.h that are the same on every OS: loops over send_some / receive_some.
#include "platform/socket.h"

namespace gpuhost::platform {

bool is_loopback_address(std::string_view address) {
  return address == "localhost" || address == "::1" || address == "[::1]" || address.starts_with("127.");
}

Result<void> TcpStream::send_all(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    std::size_t n = GPUHOST_TRY(send_some(p, bytes));
    p += n;
    bytes -= n;
  }
  return {};
}

Result<void> TcpStream::receive_all(void* data, std::size_t bytes) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    std::size_t n = GPUHOST_TRY(receive_some(p, bytes));
    if (n == 0) return make_error(ErrorCode::io_error, "receiving: the peer closed the connection");
    p += n;
    bytes -= n;
  }
  return {};
}

}  // namespace gpuhost::platform
