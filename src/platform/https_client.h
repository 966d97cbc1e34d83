#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace gpuhost::platform {

// The object-storage transport: one blocking HTTP/1.1 exchange per call over http:// or
// https://, through the OS's HTTP stack — libcurl (OpenSSL build, the system CA store) on Linux,
// WinHTTP (SChannel, the Windows certificate store) on Windows. It sends exactly the bytes it is
// given: requests are signed by the caller (store/sigv4.h), so this layer never rewrites the
// target, never follows redirects and sends no cookies. net/http_client.h stays the plain-http
// client for metadata services; this one is for large bodies and TLS.

using WebHeaders = std::vector<std::pair<std::string, std::string>>;

// Case-insensitive lookup; the first match.
[[nodiscard]] std::optional<std::string> find_header(const WebHeaders& headers, std::string_view name);

// Where a request body comes from: nothing, caller-owned bytes in memory, or `length` bytes of
// a file starting at `offset` (read while sending, so a 5 GiB part never sits in memory).
struct RequestBody {
  enum class Source { none, memory, file };
  Source source = Source::none;
  std::string_view memory;  // Source::memory; must outlive the call
  std::filesystem::path file;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;

  [[nodiscard]] static RequestBody from_memory(std::string_view data);
  [[nodiscard]] static RequestBody from_file(std::filesystem::path file, std::uint64_t offset,
                                             std::uint64_t length);
  [[nodiscard]] std::uint64_t size() const;
};

struct HttpsRequest {
  std::string method = "GET";
  // scheme://host[:port]/target. The target is sent as given (already percent-encoded), since
  // the signature covers it byte for byte.
  std::string url;
  // Sent as given. The transport adds Host and, for PUT/POST or any body, Content-Length.
  WebHeaders headers;
  RequestBody body;

  // When set, the body of a 2xx answer is written into this file (created when absent) starting
  // at response_file_offset, so parallel ranged GETs can fill one file; other answers' bodies
  // always go to memory. With response_file_truncate the file is cut to the offset first.
  std::filesystem::path response_file;
  std::uint64_t response_file_offset = 0;
  bool response_file_truncate = false;
  // Bodies larger than this (in memory or written to the file) fail the call (parse_error).
  std::uint64_t max_response_bytes = 16u << 20;

  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  // The exchange fails (timeout) when no byte moves in either direction for this long: a stalled
  // upload or a server that stops sending. libcurl counts it in whole seconds (rounded up).
  std::chrono::milliseconds stall_timeout{std::chrono::seconds(30)};
  // Limit for the whole exchange; zero means only the stall timeout bounds it.
  std::chrono::milliseconds timeout{0};
  // When set, the exchange ends soon after *cancel becomes true (error `timeout`, message
  // "cancelled"). Must outlive the call. Under Wine a wait already blocked inside WinHTTP ends
  // only at the stall timeout (Wine's WinHttpCloseHandle does not interrupt it; Windows' does).
  const std::atomic<bool>* cancel = nullptr;
};

struct HttpsResponse {
  int status = 0;
  WebHeaders headers;            // of the final answer (an interim 100 Continue is dropped)
  std::string body;              // in memory: every non-2xx body, and 2xx bodies without response_file
  std::uint64_t body_bytes = 0;  // bytes of body received, wherever they went

  [[nodiscard]] std::optional<std::string> header(std::string_view name) const {
    return find_header(headers, name);
  }
};

// One exchange. Any status code is a successful Result; errors are transport failures:
// invalid_argument (bad URL, header with CR/LF/NUL, unreadable body range), unavailable (name not
// resolved, connection refused), timeout (connect, stall, whole-exchange limit, or cancelled),
// io_error (connection reset, or a body that ended before its Content-Length: a truncated answer
// is never returned as a success), parse_error (malformed answer, body over the limit), and
// errors opening or writing response_file. Thread-safe; connections are reused between calls.
[[nodiscard]] Result<HttpsResponse> https_request(const HttpsRequest& request);

// A URL split for the transports and the signer. Only http and https; no user info, no fragment.
struct WebUrl {
  std::string scheme;  // "http" or "https", lower case
  std::string host;    // without brackets for IPv6 literals
  std::uint16_t port = 0;
  std::string target = "/";  // path and query, as sent
  [[nodiscard]] bool default_port() const { return port == (scheme == "https" ? 443 : 80); }
  // The Host header value: host, with ":port" unless it is the scheme's default.
  [[nodiscard]] std::string authority() const;
};

[[nodiscard]] Result<WebUrl> parse_web_url(std::string_view url);

}  // namespace gpuhost::platform
