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
  // The first query parameter `name` of the target, percent-decoded ('+' is a space); nullopt
  // when absent. "?a&b=" gives "" for both.
  [[nodiscard]] std::optional<std::string> query(std::string_view name) const;
};

// Decodes %XX escapes and '+' (application/x-www-form-urlencoded); nullopt for a malformed escape.
[[nodiscard]] std::optional<std::string> percent_decode(std::string_view text);

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
  // Required when not empty. Programs send "Authorization: Bearer <token>". A browser cannot set
  // that header on a page load or an EventSource, so it may bring the token once in the query
  // (`/?token=T`, as Jupyter does); the server answers with a redirect to the same URL without it
  // that stores the token in an HttpOnly, SameSite=Strict cookie (token_cookie_name(port)), which
  // the browser then sends with every request.
  std::string token;
};

// "gpuhost_token_<port>": cookies are not kept apart by port, so two servers on one host each
// need their own name.
[[nodiscard]] std::string token_cookie_name(std::uint16_t port);

// The names a browser on this machine may use to reach a server bound to `bind_address`:
// 127.0.0.1, localhost, ::1, the bind address itself unless it is a wildcard, and `extra` names.
[[nodiscard]] std::vector<std::string> allowed_host_names(std::string_view bind_address,
                                                          const std::vector<std::string>& extra);

enum class AccessVerdict {
  allowed,
  allowed_by_query_token,  // allowed; the token came as ?token=: answer with the cookie redirect
  bad_request,             // 400: HTTP/1.1 without Host, or a Host that does not parse
  foreign_host,            // 403: a Host header naming someone else (DNS rebinding)
  unauthorized,            // 401: token missing or wrong
};
// Pure. The token comparison takes the same time wherever the first difference is.
[[nodiscard]] AccessVerdict check_access(const RequestHead& request, const AccessPolicy& policy);

// The sending side of a streamed response body (Server-Sent Events). The server gives one to
// Response::stream on the connection's thread; tests give a fake. Not thread-safe.
class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  // Sends `bytes` now. False once the client has gone or the server is stopping: end the body.
  virtual bool write(std::string_view bytes) = 0;
  // Waits up to `timeout`. False as soon as the client has gone or the server is stopping.
  virtual bool wait(std::chrono::milliseconds timeout) = 0;
};
using StreamBody = std::function<void(ResponseWriter&)>;

struct Response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  HeaderList headers;  // extra fields, e.g. Allow
  // When set, `body` is ignored: after the head (without Content-Length) the server calls this on
  // the connection's thread, and the body ends when it returns. At most
  // HttpServerOptions::max_streams run at once; beyond that the client gets 503.
  StreamBody stream;
};

[[nodiscard]] const char* status_reason(int status);  // "OK", "Not Found", ...
// The whole response as sent, with Content-Length and "Connection: close"; HEAD drops the body.
// A streamed response gives its head only.
[[nodiscard]] std::string serialize_response(const Response& response, bool head_only);

struct HttpServerOptions {
  std::string bind_address = "127.0.0.1";
  std::uint16_t port = 0;            // 0 picks a free port
  AccessPolicy access;               // port is filled in from the bound socket
  std::size_t max_connections = 32;  // beyond this a connection gets 503 at once
  // Streamed responses (dashboards' live updates) at once, counted within max_connections;
  // beyond this a stream gets 503, so open dashboards never take the slots scrapes need.
  std::size_t max_streams = 8;
  std::size_t max_head_bytes = 16 * 1024;  // request line + headers; more gets 431
  // The whole head must arrive within this (slowloris); later the connection is closed.
  std::chrono::milliseconds head_timeout{std::chrono::seconds(10)};
  // A client that takes no bytes of an answer or a stream for this long (a dashboard tab that
  // stopped reading) is dropped, so it holds no thread for longer.
  std::chrono::milliseconds send_timeout{std::chrono::seconds(10)};
};

// Called on a connection's thread for each request that passed check_access; may run on several
// threads at once, so it must be thread-safe.
using RequestHandler = std::function<Response(const RequestHead&)>;

// A small HTTP/1.1 server: one request per connection (answers carry "Connection: close"), a
// thread per connection up to max_connections. Owns its threads; stop() or the destructor shuts
// their connections down and joins them (within ~100 ms plus the longest handler call: a send
// blocked on a client that stopped reading fails at once, a streamed body sees write()/wait()
// fail).
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
// empty line. Parses it, checks access, routes to `handler`, and returns the response (400 for a
// bad head, 403/401 when refused, 303 to move a query token into a cookie, 500 when the handler
// throws). Used by the server's threads and by tests.
struct Answer {
  Response response;
  bool head_only = false;  // a HEAD request: send no body
};
[[nodiscard]] Answer answer_for(std::string_view raw_head, const AccessPolicy& policy,
                                const RequestHandler& handler);
// answer_for() serialised: the bytes to send (for a streamed response, its head).
[[nodiscard]] std::string answer_request(std::string_view raw_head, const AccessPolicy& policy,
                                         const RequestHandler& handler);

}  // namespace gpuhost::telemetry
