#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace gpuhost::telemetry {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// A request line and its header fields (RFC 9112 §3, §5). Bodies are not read: the server only
// answers GET and HEAD.
struct RequestHead {
  std::string method;   // "GET"
  std::string target;   // "/metrics?x=1"
  std::string version;  // "HTTP/1.1"
  HeaderList headers;

  // Case-insensitive; the first match.
  [[nodiscard]] std::optional<std::string> header(std::string_view name) const;
  // The target without its query string.
  [[nodiscard]] std::string path() const;
};

// Parses the head up to (not including) the empty line that ends it; lines end in CRLF or LF.
// parse_error for a malformed request line, an HTTP version other than 1.0/1.1, a header line
// without a colon or with a bad field name, obsolete line folding, a NUL/CR inside a line.
[[nodiscard]] Result<RequestHead> parse_request_head(std::string_view head);

// Who may talk to the server. Built once by the caller from its bind address, port and token.
struct AccessPolicy {
  // Host header names accepted (lowercase, IPv6 without brackets); empty = any Host (only for a
  // wildcard bind that requires a token, where the token is the protection).
  std::vector<std::string> allowed_hosts;
  std::uint16_t port = 0;  // a Host header's port, when given, must equal this
  std::string token;       // required as "Authorization: Bearer <token>" when not empty
};

// The names a browser on this machine may use to reach a server bound to `bind_address`:
// 127.0.0.1, localhost, ::1, the bind address itself unless it is a wildcard, and `extra` names.
[[nodiscard]] std::vector<std::string> allowed_host_names(std::string_view bind_address,
                                                          const std::vector<std::string>& extra);

enum class AccessVerdict {
  allowed,
  bad_request,   // 400: HTTP/1.1 without Host, or a Host that does not parse
  foreign_host,  // 403: a Host header naming someone else (DNS rebinding)
  unauthorized,  // 401: token missing or wrong
};
// Pure. The token comparison takes the same time wherever the first difference is.
[[nodiscard]] AccessVerdict check_access(const RequestHead& request, const AccessPolicy& policy);

struct Response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  HeaderList headers;  // extra fields, e.g. Allow
};

[[nodiscard]] const char* status_reason(int status);  // "OK", "Not Found", ...
// The whole response as sent, with Content-Length and "Connection: close"; HEAD drops the body.
[[nodiscard]] std::string serialize_response(const Response& response, bool head_only);

struct HttpServerOptions {
  std::string bind_address = "127.0.0.1";
  std::uint16_t port = 0;                  // 0 picks a free port
  AccessPolicy access;                     // port is filled in from the bound socket
  std::size_t max_connections = 32;        // beyond this a connection gets 503 at once
  std::size_t max_head_bytes = 16 * 1024;  // request line + headers; more gets 431
  // The whole head must arrive within this (slowloris); later the connection is closed.
  std::chrono::milliseconds head_timeout{std::chrono::seconds(10)};
};

// Called on a connection's thread for each request that passed check_access; may run on several
// threads at once, so it must be thread-safe.
using RequestHandler = std::function<Response(const RequestHead&)>;

// A small HTTP/1.1 server: one request per connection (answers carry "Connection: close"), a
// thread per connection up to max_connections. Owns its threads; stop() or the destructor joins
// them (within ~100 ms plus the longest handler call).
class HttpServer {
 public:
  // Binds and starts accepting. Errors: the listener's (address in use, permission denied).
  [[nodiscard]] static Result<std::unique_ptr<HttpServer>> start(HttpServerOptions options,
                                                                 RequestHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  [[nodiscard]] std::uint16_t port() const;
  void stop();

 private:
  struct State;
  explicit HttpServer(std::unique_ptr<State> state);
  std::unique_ptr<State> m_state;
};

// One exchange after the head has arrived: `raw_head` is the request up to (not including) the
// empty line. Parses it, checks access, routes to `handler`, and returns the bytes to send (400
// for a bad head, 403/401 when refused, 500 when the handler throws). Used by the server's
// threads and by tests.
[[nodiscard]] std::string answer_request(std::string_view raw_head, const AccessPolicy& policy,
                                         const RequestHandler& handler);

}  // namespace gpuhost::telemetry
