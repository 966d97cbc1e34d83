// https_client.h over WinHTTP in synchronous mode.

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <windows.h>
#include <winhttp.h>

#include "base/strings.h"
#include "platform/https_client.h"
#include "platform/https_internal.h"
#include "platform/win32_util.h"

namespace gpuhost::platform {
namespace {

using https_detail::describe;
using Clock = std::chrono::steady_clock;

class InternetHandle {
 public:
  InternetHandle() = default;
  explicit InternetHandle(HINTERNET h) : m_handle(h) {}
  InternetHandle(const InternetHandle&) = delete;
  InternetHandle& operator=(const InternetHandle&) = delete;
  ~InternetHandle() {
    if (m_handle) WinHttpCloseHandle(m_handle);
  }
  [[nodiscard]] HINTERNET get() const { return m_handle; }
  HINTERNET release() { return std::exchange(m_handle, nullptr); }

 private:
  HINTERNET m_handle = nullptr;
};

// WinHTTP's messages live in winhttp.dll, not in the system table win32_error reads, so the
// codes a transfer meets are named here (winhttp.h; learn.microsoft.com "Error Messages
// (Winhttp.h)").
Error winhttp_error(std::string_view what, DWORD code) {
  std::string context(what);
  switch (code) {
    case ERROR_WINHTTP_TIMEOUT: return Error{ErrorCode::timeout, context + ": timed out (no data moved)"};
    case ERROR_WINHTTP_NAME_NOT_RESOLVED:
      return Error{ErrorCode::unavailable, context + ": the host name did not resolve"};
    case ERROR_WINHTTP_CANNOT_CONNECT: return Error{ErrorCode::unavailable, context + ": could not connect"};
    case ERROR_WINHTTP_CONNECTION_ERROR:
      return Error{ErrorCode::io_error, context + ": the connection was reset or closed"};
    // Also what a connection closed before any answer gives: transient, like curl's GOT_NOTHING.
    case ERROR_WINHTTP_INVALID_SERVER_RESPONSE:
      return Error{ErrorCode::io_error, context + ": the connection closed without a valid HTTP answer"};
    case ERROR_WINHTTP_SECURE_FAILURE:
      return Error{ErrorCode::permission_denied,
                   context + ": TLS failed (the server's certificate is not trusted?)"};
    case ERROR_WINHTTP_OPERATION_CANCELLED: return Error{ErrorCode::timeout, context + ": cancelled"};
    // Wine's WinHTTP passes socket errors through (winerror.h WSAE* values).
    case 10060: return Error{ErrorCode::timeout, context + ": timed out (no data moved)"};
    case 10061: return Error{ErrorCode::unavailable, context + ": connection refused"};
    case 10053:
    case 10054: return Error{ErrorCode::io_error, context + ": the connection was reset"};
    default:
      if (code >= WINHTTP_ERROR_BASE && code <= WINHTTP_ERROR_LAST)
        return Error{ErrorCode::io_error, context + ": WinHTTP error " + std::to_string(code)};
      return win32_error(context, code);
  }
}

HINTERNET session() {
  // One session for the process: WinHTTP pools connections per session, so consecutive requests
  // to an endpoint reuse them. AUTOMATIC_PROXY (Windows 8.1+) follows the system's proxy
  // settings; older systems and Wine fall back to DEFAULT_PROXY (netsh winhttp).
  static HINTERNET handle = [] {
    HINTERNET h = WinHttpOpen(L"gpuhost", WINHTTP_ACCESS_TYPE_AUTOMATIC_PROXY, WINHTTP_NO_PROXY_NAME,
                              WINHTTP_NO_PROXY_BYPASS, 0);
    if (!h)
      h = WinHttpOpen(L"gpuhost", WINHTTP_ACCESS_TYPE_DEFAULT_PROXY, WINHTTP_NO_PROXY_NAME,
                      WINHTTP_NO_PROXY_BYPASS, 0);
    return h;
  }();
  return handle;
}

// Ends a blocked synchronous call when the request is cancelled, its deadline passes or no
// chunk has moved for the stall timeout, by closing the request handle from another thread ("an
// application can terminate an in-progress synchronous request by closing the request handle":
// WinHttpCloseHandle docs). WinHttpSetTimeouts bounds each wait on Windows too, but Wine does
// not apply the receive timeout while waiting for the answer, so the stall is also timed here.
class Watchdog {
 public:
  Watchdog(HINTERNET request, const std::atomic<bool>* cancel, std::optional<Clock::time_point> deadline,
           std::chrono::milliseconds stall)
      : m_request(request) {
    progress();
    m_thread = std::thread([this, cancel, deadline, stall] {
      std::unique_lock lock(m_mutex);
      while (!m_done) {
        if (cancel && cancel->load()) {
          fire("cancelled");
          return;
        }
        if (deadline && Clock::now() >= *deadline) {
          fire("timed out (the limit for the whole exchange passed)");
          return;
        }
        if (Clock::now() - Clock::time_point(Clock::duration(m_last_progress.load())) > stall) {
          fire("timed out (no data moved for the stall timeout)");
          return;
        }
        m_wake.wait_for(lock, std::chrono::milliseconds(100));
      }
    });
  }

  // Called after each chunk sent or received.
  void progress() { m_last_progress = Clock::now().time_since_epoch().count(); }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog() { stop(); }

  // Joins the thread; afterwards the request handle belongs to the caller again unless fired.
  void stop() {
    if (!m_thread.joinable()) return;
    {
      std::lock_guard lock(m_mutex);
      m_done = true;
    }
    m_wake.notify_all();
    m_thread.join();
  }
  // Why the watchdog closed the request handle; nullptr when it did not. REQUIRES: stop() ran.
  [[nodiscard]] const char* fired() const { return m_fired; }

 private:
  void fire(const char* why) {
    m_fired = why;
    WinHttpCloseHandle(m_request);
  }

  HINTERNET m_request;
  std::atomic<Clock::rep> m_last_progress{0};
  std::thread m_thread;
  std::mutex m_mutex;
  std::condition_variable m_wake;
  // Guarded by m_mutex:
  bool m_done = false;
  const char* m_fired = nullptr;
};

WebHeaders parse_raw_headers(std::string_view raw) {
  WebHeaders headers;
  bool first = true;
  for (const std::string& line : split_lines(raw)) {
    if (first) {  // the status line
      first = false;
      continue;
    }
    std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    headers.emplace_back(std::string(trim(std::string_view(line).substr(0, colon))),
                         std::string(trim(std::string_view(line).substr(colon + 1))));
  }
  return headers;
}

Result<UniqueHandle> open_file(const std::filesystem::path& path, DWORD access, DWORD disposition,
                               std::string_view what) {
  HANDLE h = CreateFileW(path.c_str(), access, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                         nullptr, disposition, FILE_ATTRIBUTE_NORMAL, nullptr);
  if (h == INVALID_HANDLE_VALUE)
    return std::unexpected(win32_error(std::string(what) + " " + path.string(), GetLastError()));
  return UniqueHandle(h);
}

Result<void> positioned_io(HANDLE file, void* buffer, DWORD bytes, std::uint64_t offset, bool write,
                           DWORD* done) {
  OVERLAPPED at = {};
  at.Offset = static_cast<DWORD>(offset & 0xFFFFFFFFu);
  at.OffsetHigh = static_cast<DWORD>(offset >> 32);
  BOOL ok = write ? WriteFile(file, buffer, bytes, done, &at) : ReadFile(file, buffer, bytes, done, &at);
  if (!ok)
    return std::unexpected(win32_error(write ? "writing the download" : "reading the body", GetLastError()));
  return {};
}

class Exchange {
 public:
  explicit Exchange(const HttpsRequest& request) : m_request(request) {}

  Result<HttpsResponse> run(const WebUrl& url) {
    HINTERNET s = session();
    if (!s) return std::unexpected(winhttp_error(describe(m_request) + ": starting WinHTTP", GetLastError()));
    std::wstring host = to_wide(url.host);
    InternetHandle connection(WinHttpConnect(s, host.c_str(), url.port, 0));
    if (!connection.get()) return std::unexpected(winhttp_error(describe(m_request), GetLastError()));

    std::wstring method = to_wide(m_request.method);
    std::wstring target = to_wide(url.target);
    // ESCAPE_DISABLE(_QUERY): the target is sent byte for byte, as the signature covers it.
    DWORD flags = WINHTTP_FLAG_ESCAPE_DISABLE | WINHTTP_FLAG_ESCAPE_DISABLE_QUERY |
                  (url.scheme == "https" ? WINHTTP_FLAG_SECURE : 0);
    HINTERNET request = WinHttpOpenRequest(connection.get(), method.c_str(), target.c_str(), nullptr,
                                           WINHTTP_NO_REFERER, WINHTTP_DEFAULT_ACCEPT_TYPES, flags);
    if (!request) return std::unexpected(winhttp_error(describe(m_request), GetLastError()));

    std::optional<Clock::time_point> deadline;
    if (m_request.timeout.count() > 0) deadline = Clock::now() + m_request.timeout;
    Watchdog watchdog(request, m_request.cancel, deadline, m_request.stall_timeout);
    m_watchdog = &watchdog;
    auto result = exchange(request);
    watchdog.stop();
    if (watchdog.fired()) {
      std::string why = watchdog.fired();
      return make_error(ErrorCode::timeout, describe(m_request) + ": " + why);
    }
    WinHttpCloseHandle(request);
    return result;
  }

 private:
  Result<HttpsResponse> exchange(HINTERNET request) {
    DWORD features = WINHTTP_DISABLE_REDIRECTS | WINHTTP_DISABLE_COOKIES;
    WinHttpSetOption(request, WINHTTP_OPTION_DISABLE_FEATURE, &features, sizeof features);
    int connect_ms =
        static_cast<int>(std::clamp<std::int64_t>(m_request.connect_timeout.count(), 1, INT32_MAX));
    int stall_ms = static_cast<int>(std::clamp<std::int64_t>(m_request.stall_timeout.count(), 1, INT32_MAX));
    WinHttpSetTimeouts(request, connect_ms, connect_ms, stall_ms, stall_ms);
    DWORD response_ms = static_cast<DWORD>(stall_ms);
    WinHttpSetOption(request, WINHTTP_OPTION_RECEIVE_RESPONSE_TIMEOUT, &response_ms, sizeof response_ms);

    const RequestBody& body = m_request.body;
    bool has_body =
        body.source != RequestBody::Source::none || m_request.method == "PUT" || m_request.method == "POST";
    std::wstring headers;
    for (const auto& [name, value] : m_request.headers) headers += to_wide(name + ": " + value + "\r\n");
    if (has_body && !find_header(m_request.headers, "Content-Length"))
      headers += to_wide("Content-Length: " + std::to_string(body.size()) + "\r\n");
    if (!headers.empty() && !WinHttpAddRequestHeaders(request, headers.c_str(), static_cast<DWORD>(-1L),
                                                      WINHTTP_ADDREQ_FLAG_ADD | WINHTTP_ADDREQ_FLAG_REPLACE))
      return std::unexpected(winhttp_error(describe(m_request) + ": adding headers", GetLastError()));

    // Past 4 GiB the total does not fit the DWORD; WINHTTP_IGNORE_REQUEST_TOTAL_LENGTH (0) lets
    // our Content-Length header stand.
    DWORD total =
        body.size() <= 0xFFFFFFFFu ? static_cast<DWORD>(body.size()) : WINHTTP_IGNORE_REQUEST_TOTAL_LENGTH;
    if (!WinHttpSendRequest(request, WINHTTP_NO_ADDITIONAL_HEADERS, 0, WINHTTP_NO_REQUEST_DATA, 0, total, 0))
      return std::unexpected(winhttp_error(describe(m_request), GetLastError()));
    if (auto done = send_body(request); !done) return std::unexpected(done.error());
    if (!WinHttpReceiveResponse(request, nullptr))
      return std::unexpected(winhttp_error(describe(m_request), GetLastError()));
    m_watchdog->progress();

    HttpsResponse response;
    DWORD status = 0;
    DWORD size = sizeof status;
    if (!WinHttpQueryHeaders(request, WINHTTP_QUERY_STATUS_CODE | WINHTTP_QUERY_FLAG_NUMBER,
                             WINHTTP_HEADER_NAME_BY_INDEX, &status, &size, WINHTTP_NO_HEADER_INDEX))
      return std::unexpected(winhttp_error(describe(m_request) + ": reading the status", GetLastError()));
    response.status = static_cast<int>(status);
    DWORD raw_bytes = 0;
    WinHttpQueryHeaders(request, WINHTTP_QUERY_RAW_HEADERS_CRLF, WINHTTP_HEADER_NAME_BY_INDEX,
                        WINHTTP_NO_OUTPUT_BUFFER, &raw_bytes, WINHTTP_NO_HEADER_INDEX);
    if (raw_bytes > 0) {
      std::wstring raw(raw_bytes / sizeof(wchar_t), L'\0');
      if (WinHttpQueryHeaders(request, WINHTTP_QUERY_RAW_HEADERS_CRLF, WINHTTP_HEADER_NAME_BY_INDEX,
                              raw.data(), &raw_bytes, WINHTTP_NO_HEADER_INDEX)) {
        raw.resize(raw_bytes / sizeof(wchar_t));
        response.headers = parse_raw_headers(to_utf8(raw));
      }
    }
    if (m_request.method != "HEAD")
      if (auto done = receive_body(request, response); !done) return std::unexpected(done.error());
    if (auto done = https_detail::check_complete(m_request, response); !done)
      return std::unexpected(done.error());
    return response;
  }

  Result<void> send_body(HINTERNET request) {
    const RequestBody& body = m_request.body;
    if (body.size() == 0) return {};
    UniqueHandle file;
    if (body.source == RequestBody::Source::file)
      file = GPUHOST_TRY(
          open_file(body.file, GENERIC_READ, OPEN_EXISTING, describe(m_request) + ": opening the body"));
    std::string buffer;
    std::uint64_t sent = 0;
    while (sent < body.size()) {
      // Small chunks: the watchdog sees progress at least every 64 KiB.
      DWORD chunk = static_cast<DWORD>(std::min<std::uint64_t>(body.size() - sent, 64u << 10));
      const char* data;
      if (body.source == RequestBody::Source::memory) {
        data = body.memory.data() + sent;
      } else {
        buffer.resize(chunk);
        DWORD got = 0;
        if (auto done = positioned_io(file.get(), buffer.data(), chunk, body.offset + sent, false, &got);
            !done)
          return std::unexpected(done.error());
        if (got == 0)
          return make_error(ErrorCode::io_error, "reading the body from " + body.file.string() +
                                                     ": the file shrank while it was sent");
        chunk = got;
        data = buffer.data();
      }
      DWORD written = 0;
      if (!WinHttpWriteData(request, data, chunk, &written))
        return std::unexpected(winhttp_error(describe(m_request) + ": sending the body", GetLastError()));
      sent += written;
      m_watchdog->progress();
    }
    return {};
  }

  Result<void> receive_body(HINTERNET request, HttpsResponse& response) {
    bool to_file = !m_request.response_file.empty() && response.status >= 200 && response.status < 300;
    UniqueHandle file;
    if (to_file) {
      file = GPUHOST_TRY(
          open_file(m_request.response_file, GENERIC_WRITE, OPEN_ALWAYS, "opening the download target"));
      if (m_request.response_file_truncate) {
        LARGE_INTEGER end;
        end.QuadPart = static_cast<LONGLONG>(m_request.response_file_offset);
        if (!SetFilePointerEx(file.get(), end, nullptr, FILE_BEGIN) || !SetEndOfFile(file.get()))
          return std::unexpected(
              win32_error("truncating " + m_request.response_file.string(), GetLastError()));
      }
    }
    std::string buffer(256 * 1024, '\0');
    for (;;) {
      DWORD got = 0;
      if (!WinHttpReadData(request, buffer.data(), static_cast<DWORD>(buffer.size()), &got))
        return std::unexpected(winhttp_error(describe(m_request) + ": reading the answer", GetLastError()));
      m_watchdog->progress();
      if (got == 0) return {};
      if (response.body_bytes + got > m_request.max_response_bytes)
        return make_error(ErrorCode::parse_error,
                          describe(m_request) + ": the answer's body is larger than the " +
                              std::to_string(m_request.max_response_bytes) + "-byte limit");
      if (to_file) {
        DWORD written = 0;
        if (auto done = positioned_io(file.get(), buffer.data(), got,
                                      m_request.response_file_offset + response.body_bytes, true, &written);
            !done)
          return std::unexpected(done.error());
      } else {
        response.body.append(buffer.data(), got);
      }
      response.body_bytes += got;
    }
  }

  const HttpsRequest& m_request;
  Watchdog* m_watchdog = nullptr;  // set for the duration of run()
};

}  // namespace

Result<HttpsResponse> https_request(const HttpsRequest& request) {
  WebUrl url = GPUHOST_TRY(https_detail::validate(request));
  return Exchange(request).run(url);
}

}  // namespace gpuhost::platform
