#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "platform/posix_util.h"
#include "platform/socket.h"

namespace gpuhost::platform {
namespace {

Error socket_error(const std::string& context, int error_number) {
  Error e = posix_error(context, error_number);
  if (error_number == ECONNREFUSED || error_number == ETIMEDOUT || error_number == EHOSTUNREACH ||
      error_number == ENETUNREACH)
    e.code = ErrorCode::unavailable;
  return e;
}

// Connects `fd` with a deadline: non-blocking connect, poll, then back to blocking.
int connect_with_timeout(int fd, const sockaddr* address, socklen_t length, std::chrono::milliseconds timeout) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int rc = ::connect(fd, address, length);
  if (rc != 0 && errno != EINPROGRESS) return errno;
  if (rc != 0) {
    pollfd p{fd, POLLOUT, 0};
    rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (rc == 0) return ETIMEDOUT;
    if (rc < 0) return errno;
    int error = 0;
    socklen_t size = sizeof error;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
    if (error != 0) return error;
  }
  ::fcntl(fd, F_SETFL, flags);
  return 0;
}

std::unexpected<Error> send_timed_out() {
  return make_error(ErrorCode::timeout,
                    "sending: timed out: the peer took no data within the send timeout (it stopped reading)");
}

}  // namespace

Result<TcpStream> TcpStream::connect(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::string where = host + ":" + std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) return make_error(ErrorCode::not_found, "resolving " + host + ": " + ::gai_strerror(rc));
  int last_error = ECONNREFUSED;
  for (addrinfo* a = found; a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = errno;
      continue;
    }
    last_error = connect_with_timeout(fd, a->ai_addr, a->ai_addrlen, timeout);
    if (last_error == 0) {
      ::freeaddrinfo(found);
      return TcpStream(fd);
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return std::unexpected(socket_error("connecting to " + where, last_error));
}

TcpStream::TcpStream(TcpStream&& other) noexcept : m_handle(other.m_handle) { other.m_handle = -1; }

TcpStream& TcpStream::operator=(TcpStream&& other) noexcept {
  if (this != &other) {
    if (m_handle >= 0) ::close(static_cast<int>(m_handle));
    m_handle = other.m_handle;
    other.m_handle = -1;
  }
  return *this;
}

TcpStream::~TcpStream() {
  if (m_handle >= 0) ::close(static_cast<int>(m_handle));
}

Result<std::size_t> TcpStream::send_some(const void* data, std::size_t bytes) {
  for (;;) {
    ssize_t n = ::send(static_cast<int>(m_handle), data, bytes, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    // socket(7), SO_SNDTIMEO: "if no data has been transferred and the timeout has been reached,
    // then -1 is returned with errno set to EAGAIN or EWOULDBLOCK".
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return send_timed_out();
    if (n < 0) return std::unexpected(socket_error("sending", errno));
    return static_cast<std::size_t>(n);
  }
}

Result<std::size_t> TcpStream::receive_some(void* data, std::size_t bytes) {
  for (;;) {
    ssize_t n = ::recv(static_cast<int>(m_handle), data, bytes, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::unexpected(socket_error("receiving", errno));
    return static_cast<std::size_t>(n);
  }
}

Result<bool> TcpStream::wait_readable(std::chrono::milliseconds timeout) {
  pollfd p{static_cast<int>(m_handle), POLLIN, 0};
  int rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (rc < 0 && errno == EINTR) return false;
  if (rc < 0) return std::unexpected(socket_error("waiting for data", errno));
  return rc > 0;
}

void TcpStream::set_no_delay() {
  int one = 1;
  ::setsockopt(static_cast<int>(m_handle), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void TcpStream::shutdown_send() { ::shutdown(static_cast<int>(m_handle), SHUT_WR); }

Result<void> TcpStream::set_send_timeout(std::chrono::milliseconds timeout) {
  const auto ms = std::max<std::chrono::milliseconds::rep>(timeout.count(), 0);
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  if (::setsockopt(static_cast<int>(m_handle), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0)
    return std::unexpected(posix_error("setting the socket's send timeout", errno));
  return {};
}

// shutdown() wakes a send or recv blocked on the socket in another thread (EPIPE, end of stream);
// close() would not, and would let the number be reused under that thread.
void TcpStream::interrupt() { ::shutdown(static_cast<int>(m_handle), SHUT_RDWR); }

Result<TcpListener> TcpListener::listen(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  std::string where = host + ":" + std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) return make_error(ErrorCode::not_found, "resolving " + host + ": " + ::gai_strerror(rc));
  int fd = ::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol);
  if (fd < 0) {
    ::freeaddrinfo(found);
    return std::unexpected(posix_error("creating a socket", errno));
  }
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
    int error = errno;
    ::freeaddrinfo(found);
    ::close(fd);
    return std::unexpected(posix_error("listening on " + where, error));
  }
  ::freeaddrinfo(found);
  TcpListener listener;
  listener.m_handle = fd;
  sockaddr_storage bound{};
  socklen_t size = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &size);
  listener.m_port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                                : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return listener;
}

TcpListener::TcpListener(TcpListener&& other) noexcept : m_handle(other.m_handle), m_port(other.m_port) {
  other.m_handle = -1;
}

TcpListener& TcpListener::operator=(TcpListener&& other) noexcept {
  if (this != &other) {
    if (m_handle >= 0) ::close(static_cast<int>(m_handle));
    m_handle = other.m_handle;
    m_port = other.m_port;
    other.m_handle = -1;
  }
  return *this;
}

TcpListener::~TcpListener() {
  if (m_handle >= 0) ::close(static_cast<int>(m_handle));
}

Result<std::optional<TcpStream>> TcpListener::accept(std::chrono::milliseconds timeout) {
  pollfd p{static_cast<int>(m_handle), POLLIN, 0};
  int rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (rc == 0 || (rc < 0 && errno == EINTR)) return std::optional<TcpStream>();
  if (rc < 0) return std::unexpected(posix_error("waiting for a connection", errno));
  int fd = ::accept4(static_cast<int>(m_handle), nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) {
    if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) return std::optional<TcpStream>();
    return std::unexpected(posix_error("accepting a connection", errno));
  }
  return std::optional<TcpStream>(TcpStream(fd));
}

}  // namespace gpuhost::platform
