#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace gpuhost::net {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// A parsed "http://host[:port]/path?query" URL. Only plain http: the cloud metadata services
// this client talks to are link-local http endpoints (research/02 §1.1).
struct Url {
  std::string host;  // without brackets for IPv6 literals
  std::uint16_t port = 80;
  std::string target = "/";  // path and query, as sent in the request line
};

// Errors: invalid_argument for anything but http://host[:port][/target] (https is
// `unsupported` with a hint).
[[nodiscard]] Result<Url> parse_url(std::string_view url);

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  HttpHeaders headers;
  std::string body;  // sent with Content-Length when non-empty or when method is PUT/POST
  // The whole exchange (connect, send, headers and body) must finish within this. A hanging
  // GET (GCP's wait_for_change) is a request with a long timeout.
  std::chrono::milliseconds timeout{std::chrono::seconds(2)};
  // Bodies larger than this are an error (a misbehaving endpoint cannot fill our memory).
  std::size_t max_body_bytes = 1u << 20;
  // Connecting must succeed within this (and within `timeout`); zero means only `timeout` limits
  // it. A hanging GET sets it short so that an unreachable host fails fast.
  std::chrono::milliseconds connect_timeout{0};
  // When set, the exchange gives up soon after *cancel becomes true (error `timeout`, message
  // "cancelled"): waits for data are cut into slices of at most 100 ms. Connecting is not
  // interruptible (bounded by connect_timeout). Must outlive the call.
  const std::atomic<bool>* cancel = nullptr;
};

struct HttpResponse {
  int status = 0;
  std::string reason;
  HttpHeaders headers;  // names as received
  std::string body;     // de-chunked

  // Case-insensitive header lookup; the first match.
  [[nodiscard]] std::optional<std::string> header(std::string_view name) const;
};

// One HTTP/1.1 exchange on a fresh connection ("Connection: close"). Any status code is a
// successful Result; errors are transport failures: unavailable (refused, unreachable, name not
// resolved), timeout (also when cancelled), io_error (connection reset or closed before the
// announced body ended), parse_error (not HTTP, bad chunking, headers or body over the limit).
// invalid_argument for a bad URL or a header name/value with CR, LF or NUL. Name resolution is
// the system's and is not bounded by the timeouts (the metadata hosts are IP literals). Sending
// is not either: requests are small enough for the socket buffer. Thread-safe.
[[nodiscard]] Result<HttpResponse> http_request(const HttpRequest& request);

}  // namespace gpuhost::net
