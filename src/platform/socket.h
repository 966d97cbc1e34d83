#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"

namespace gpuhost::platform {

// Whether `address` names this machine's loopback ("127.x.y.z", "localhost", "::1", "[::1]"):
// what `serve` and the peer channel of a multi-node job may use without a token.
[[nodiscard]] bool is_loopback_address(std::string_view address);

// A connected TCP stream (IPv4 or IPv6). Move-only; closes on destruction. One thread may send
// while another receives; two threads must not send (or receive) at once.
class TcpStream {
 public:
  // Resolves `host` and connects to the first address that answers within `timeout`.
  // Errors: unavailable for refused / unreachable / timed out, with the system's message, and
  // not_found when the name does not resolve.
  [[nodiscard]] static Result<TcpStream> connect(const std::string& host, std::uint16_t port,
                                                 std::chrono::milliseconds timeout);

  TcpStream(TcpStream&& other) noexcept;
  TcpStream& operator=(TcpStream&& other) noexcept;
  TcpStream(const TcpStream&) = delete;
  TcpStream& operator=(const TcpStream&) = delete;
  ~TcpStream();

  // Sends some of `data`; returns how many bytes went (at least 1 on success).
  [[nodiscard]] Result<std::size_t> send_some(const void* data, std::size_t bytes);
  // Sends all of `data`.
  [[nodiscard]] Result<void> send_all(const void* data, std::size_t bytes);
  // Receives up to `bytes`; 0 means the peer closed its side.
  [[nodiscard]] Result<std::size_t> receive_some(void* data, std::size_t bytes);
  // Receives exactly `bytes`; io_error when the peer closes first.
  [[nodiscard]] Result<void> receive_all(void* data, std::size_t bytes);
  // Waits until data (or end of stream) can be read; false on timeout.
  [[nodiscard]] Result<bool> wait_readable(std::chrono::milliseconds timeout);
  // Disables Nagle's algorithm (for latency probes).
  void set_no_delay();
  // Closes the sending direction; the peer reads end of stream.
  void shutdown_send();
  // Makes a send fail with ErrorCode::timeout once it has waited `timeout` without the peer
  // taking any bytes (the peer stopped reading and the buffers are full), instead of waiting
  // for ever; zero waits for ever again. Bytes sent before the timeout stay sent, so close the
  // stream after one. Errors: the system's, when the option cannot be set.
  [[nodiscard]] Result<void> set_send_timeout(std::chrono::milliseconds timeout);
  // Shuts down both directions and cancels the I/O pending on the stream, so that a send or
  // receive blocked in another thread returns (an error, or end of stream). On Windows a send
  // that thread is only just starting may miss the cancellation and block: call this again until
  // the thread has let go of the stream. Unlike the other members it may be called from any
  // thread while another uses the stream (the stream must outlive both): it is how a server
  // stops a thread stuck on a client.
  void interrupt();

 private:
  friend class TcpListener;
  explicit TcpStream(std::intptr_t handle) : m_handle(handle) {}
  std::intptr_t m_handle = -1;
};

// A listening TCP socket. Move-only; closes on destruction.
class TcpListener {
 public:
  // Binds `host` ("0.0.0.0", "127.0.0.1", "::") on `port` (0 picks a free port), with SO_REUSEADDR
  // on POSIX. Errors name the address and the system's reason (address in use, permission).
  [[nodiscard]] static Result<TcpListener> listen(const std::string& host, std::uint16_t port);

  TcpListener(TcpListener&& other) noexcept;
  TcpListener& operator=(TcpListener&& other) noexcept;
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;
  ~TcpListener();

  [[nodiscard]] std::uint16_t port() const { return m_port; }
  // Waits up to `timeout` for a connection: nullopt on timeout (or an interrupted wait), so a
  // caller can poll a stop flag.
  [[nodiscard]] Result<std::optional<TcpStream>> accept(std::chrono::milliseconds timeout);

 private:
  TcpListener() = default;
  std::intptr_t m_handle = -1;
  std::uint16_t m_port = 0;
};

}  // namespace gpuhost::platform
