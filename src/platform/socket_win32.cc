#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>

#include <algorithm>
#include <mutex>

#include "platform/socket.h"
#include "platform/win32_util.h"

namespace gpuhost::platform {
namespace {

SOCKET sock(std::intptr_t h) { return static_cast<SOCKET>(h); }

// Winsock needs WSAStartup once per process before any call; it is never undone (the process
// exit cleans up).
void ensure_winsock() {
  static std::once_flag once;
  std::call_once(once, [] {
    WSADATA data;
    WSAStartup(MAKEWORD(2, 2), &data);
  });
}

Error socket_error(const std::string& context, int code) {
  Error e = win32_error(context, static_cast<DWORD>(code));
  if (code == WSAECONNREFUSED || code == WSAETIMEDOUT || code == WSAEHOSTUNREACH || code == WSAENETUNREACH)
    e.code = ErrorCode::unavailable;
  return e;
}

std::unexpected<Error> send_timed_out() {
  return make_error(ErrorCode::timeout,
                    "sending: timed out: the peer took no data within the send timeout (it stopped reading)");
}

int connect_with_timeout(SOCKET s, const sockaddr* address, int length, std::chrono::milliseconds timeout) {
  u_long non_blocking = 1;
  ioctlsocket(s, FIONBIO, &non_blocking);
  if (::connect(s, address, length) != 0) {
    int error = WSAGetLastError();
    if (error != WSAEWOULDBLOCK) return error;
    fd_set write_set, error_set;
    FD_ZERO(&write_set);
    FD_ZERO(&error_set);
    FD_SET(s, &write_set);
    FD_SET(s, &error_set);
    timeval tv{static_cast<long>(timeout.count() / 1000), static_cast<long>((timeout.count() % 1000) * 1000)};
    int rc = ::select(0, nullptr, &write_set, &error_set, &tv);
    if (rc == 0) return WSAETIMEDOUT;
    if (rc < 0) return WSAGetLastError();
    int so_error = 0;
    int size = sizeof so_error;
    getsockopt(s, SOL_SOCKET, SO_ERROR, reinterpret_cast<char*>(&so_error), &size);
    if (so_error != 0) return so_error;
    if (FD_ISSET(s, &error_set)) return WSAECONNREFUSED;
  }
  non_blocking = 0;
  ioctlsocket(s, FIONBIO, &non_blocking);
  return 0;
}

}  // namespace

Result<TcpStream> TcpStream::connect(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout) {
  ensure_winsock();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::string where = host + ":" + std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    return make_error(ErrorCode::not_found, "resolving " + host + ": " + win32_error("", static_cast<DWORD>(rc)).message);
  int last_error = WSAECONNREFUSED;
  for (addrinfo* a = found; a; a = a->ai_next) {
    SOCKET s = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (s == INVALID_SOCKET) {
      last_error = WSAGetLastError();
      continue;
    }
    last_error = connect_with_timeout(s, a->ai_addr, static_cast<int>(a->ai_addrlen), timeout);
    if (last_error == 0) {
      freeaddrinfo(found);
      return TcpStream(static_cast<std::intptr_t>(s));
    }
    closesocket(s);
  }
  freeaddrinfo(found);
  return std::unexpected(socket_error("connecting to " + where, last_error));
}

TcpStream::TcpStream(TcpStream&& other) noexcept : m_handle(other.m_handle) { other.m_handle = -1; }

TcpStream& TcpStream::operator=(TcpStream&& other) noexcept {
  if (this != &other) {
    if (m_handle != -1) closesocket(sock(m_handle));
    m_handle = other.m_handle;
    other.m_handle = -1;
  }
  return *this;
}

TcpStream::~TcpStream() {
  if (m_handle != -1) closesocket(sock(m_handle));
}

Result<std::size_t> TcpStream::send_some(const void* data, std::size_t bytes) {
  int chunk = bytes > (1u << 30) ? (1 << 30) : static_cast<int>(bytes);
  int n = ::send(sock(m_handle), static_cast<const char*>(data), chunk, 0);
  if (n == SOCKET_ERROR) {
    const int error = WSAGetLastError();
    // An expired SO_SNDTIMEO fails the send with WSAETIMEDOUT (learn.microsoft.com, "SOL_SOCKET
    // socket options"); a dropped connection says WSAECONNRESET / WSAECONNABORTED instead.
    if (error == WSAETIMEDOUT) return send_timed_out();
    return std::unexpected(socket_error("sending", error));
  }
  return static_cast<std::size_t>(n);
}

Result<std::size_t> TcpStream::receive_some(void* data, std::size_t bytes) {
  int chunk = bytes > (1u << 30) ? (1 << 30) : static_cast<int>(bytes);
  int n = ::recv(sock(m_handle), static_cast<char*>(data), chunk, 0);
  if (n == SOCKET_ERROR) return std::unexpected(socket_error("receiving", WSAGetLastError()));
  return static_cast<std::size_t>(n);
}

Result<bool> TcpStream::wait_readable(std::chrono::milliseconds timeout) {
  fd_set read_set;
  FD_ZERO(&read_set);
  FD_SET(sock(m_handle), &read_set);
  timeval tv{static_cast<long>(timeout.count() / 1000), static_cast<long>((timeout.count() % 1000) * 1000)};
  int rc = ::select(0, &read_set, nullptr, nullptr, &tv);
  if (rc < 0) return std::unexpected(socket_error("waiting for data", WSAGetLastError()));
  return rc > 0;
}

void TcpStream::set_no_delay() {
  BOOL one = TRUE;
  setsockopt(sock(m_handle), IPPROTO_TCP, TCP_NODELAY, reinterpret_cast<const char*>(&one), sizeof one);
}

void TcpStream::shutdown_send() { ::shutdown(sock(m_handle), SD_SEND); }

Result<void> TcpStream::set_send_timeout(std::chrono::milliseconds timeout) {
  // SO_SNDTIMEO takes a DWORD of milliseconds here, not POSIX's timeval; 0 waits for ever.
  const auto ms = std::clamp<std::chrono::milliseconds::rep>(timeout.count(), 0, 0x7fffffff);
  const DWORD value = static_cast<DWORD>(ms);
  if (setsockopt(sock(m_handle), SOL_SOCKET, SO_SNDTIMEO, reinterpret_cast<const char*>(&value),
                 sizeof value) != 0)
    return std::unexpected(socket_error("setting the socket's send timeout", WSAGetLastError()));
  return {};
}

void TcpStream::interrupt() {
  ::shutdown(sock(m_handle), SD_BOTH);
  // A graceful shutdown waits for a pending send rather than failing it; cancelling the socket's
  // I/O, whichever thread issued it, ends a blocking send or recv there (WSA_OPERATION_ABORTED).
  CancelIoEx(reinterpret_cast<HANDLE>(sock(m_handle)), nullptr);
}

Result<TcpListener> TcpListener::listen(const std::string& host, std::uint16_t port) {
  ensure_winsock();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  std::string where = host + ":" + std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    return make_error(ErrorCode::not_found, "resolving " + host + ": " + win32_error("", static_cast<DWORD>(rc)).message);
  SOCKET s = ::socket(found->ai_family, found->ai_socktype, found->ai_protocol);
  if (s == INVALID_SOCKET) {
    freeaddrinfo(found);
    return std::unexpected(socket_error("creating a socket", WSAGetLastError()));
  }
  // SO_EXCLUSIVEADDRUSE: on Windows SO_REUSEADDR would let another process steal the port.
  BOOL one = TRUE;
  setsockopt(s, SOL_SOCKET, SO_EXCLUSIVEADDRUSE, reinterpret_cast<const char*>(&one), sizeof one);
  if (::bind(s, found->ai_addr, static_cast<int>(found->ai_addrlen)) != 0 || ::listen(s, 64) != 0) {
    int error = WSAGetLastError();
    freeaddrinfo(found);
    closesocket(s);
    return std::unexpected(socket_error("listening on " + where, error));
  }
  freeaddrinfo(found);
  TcpListener listener;
  listener.m_handle = static_cast<std::intptr_t>(s);
  sockaddr_storage bound{};
  int size = sizeof bound;
  getsockname(s, reinterpret_cast<sockaddr*>(&bound), &size);
  listener.m_port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                                : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return listener;
}

TcpListener::TcpListener(TcpListener&& other) noexcept : m_handle(other.m_handle), m_port(other.m_port) {
  other.m_handle = -1;
}

TcpListener& TcpListener::operator=(TcpListener&& other) noexcept {
  if (this != &other) {
    if (m_handle != -1) closesocket(sock(m_handle));
    m_handle = other.m_handle;
    m_port = other.m_port;
    other.m_handle = -1;
  }
  return *this;
}

TcpListener::~TcpListener() {
  if (m_handle != -1) closesocket(sock(m_handle));
}

Result<std::optional<TcpStream>> TcpListener::accept(std::chrono::milliseconds timeout) {
  fd_set read_set;
  FD_ZERO(&read_set);
  FD_SET(sock(m_handle), &read_set);
  timeval tv{static_cast<long>(timeout.count() / 1000), static_cast<long>((timeout.count() % 1000) * 1000)};
  int rc = ::select(0, &read_set, nullptr, nullptr, &tv);
  if (rc == 0) return std::optional<TcpStream>();
  if (rc < 0) return std::unexpected(socket_error("waiting for a connection", WSAGetLastError()));
  SOCKET s = ::accept(sock(m_handle), nullptr, nullptr);
  if (s == INVALID_SOCKET) return std::optional<TcpStream>();
  return std::optional<TcpStream>(TcpStream(static_cast<std::intptr_t>(s)));
}

}  // namespace gpuhost::platform
