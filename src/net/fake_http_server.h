#pragma once
// Test-only: an HTTP/1.1 server on 127.0.0.1 that answers each request with what a handler
// returns, so the client and the notice watchers are tested against real sockets on both OSes.
// Linked into net_test and supervise_test, never into gpuhost.

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "net/http_client.h"
#include "platform/socket.h"

namespace gpuhost::net::test_support {

struct ReceivedRequest {
  std::string method;
  std::string target;  // path and query as sent
  HttpHeaders headers;
  std::string body;

  [[nodiscard]] std::optional<std::string> header(std::string_view name) const;  // case-insensitive
};

// What the server sends back for one request.
struct CannedResponse {
  enum class Framing { content_length, chunked, until_close };

  int status = 200;
  HttpHeaders headers;
  std::string body;
  Framing framing = Framing::content_length;  // chunked: 3-byte chunks, one with an extension
  std::optional<std::string> raw;             // sent verbatim instead of the above, then closed
  bool hang = false;  // sends nothing; holds the connection until the client or the server closes
};

// Called on a connection thread for each request; must be thread-safe.
using RequestHandler = std::function<CannedResponse(const ReceivedRequest&)>;

// Serves each connection on its own thread (one request per connection, as the client asks).
// The destructor stops accepting, releases hanging connections and joins every thread.
class FakeHttpServer {
 public:
  explicit FakeHttpServer(RequestHandler handler);
  FakeHttpServer(const FakeHttpServer&) = delete;
  FakeHttpServer& operator=(const FakeHttpServer&) = delete;
  ~FakeHttpServer();

  // 0 when the listening socket could not be set up.
  [[nodiscard]] std::uint16_t port() const { return m_port; }
  [[nodiscard]] std::string url() const;  // "http://127.0.0.1:<port>"
  // Every request received so far, in order of arrival. Thread-safe.
  [[nodiscard]] std::vector<ReceivedRequest> requests() const;
  void set_handler(RequestHandler handler);

 private:
  void accept_loop(platform::TcpListener listener);
  void serve(platform::TcpStream stream);

  std::uint16_t m_port = 0;
  std::atomic<bool> m_stopping{false};
  std::thread m_acceptor;

  mutable std::mutex m_mutex;
  // Guarded by m_mutex:
  RequestHandler m_handler;
  std::vector<ReceivedRequest> m_requests;
  std::vector<std::thread> m_connections;
};

}  // namespace gpuhost::net::test_support
