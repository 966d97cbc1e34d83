// https_client.h over libcurl's easy interface (Debian libcurl4-openssl-dev).

#include <algorithm>
#include <cstring>
#include <mutex>

#include <curl/curl.h>
#include <fcntl.h>
#include <unistd.h>

#include "base/strings.h"
#include "platform/https_client.h"
#include "platform/https_internal.h"
#include "platform/posix_util.h"

namespace gpuhost::platform {
namespace {

using https_detail::describe;

void init_curl_once() {
  // curl_global_init is not thread-safe before libcurl 7.84 and must run before any other call.
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// One easy handle per thread, kept between calls: libcurl keeps its connection cache (and TLS
// sessions) in the handle, so consecutive requests to the same endpoint skip the handshakes.
class ThreadHandle {
 public:
  ThreadHandle() : m_curl(curl_easy_init()) {}
  ThreadHandle(const ThreadHandle&) = delete;
  ThreadHandle& operator=(const ThreadHandle&) = delete;
  ~ThreadHandle() {
    if (m_curl) curl_easy_cleanup(m_curl);
  }
  [[nodiscard]] CURL* get() const { return m_curl; }

 private:
  CURL* m_curl;
};

struct HeaderList {
  curl_slist* list = nullptr;
  HeaderList() = default;
  HeaderList(const HeaderList&) = delete;
  HeaderList& operator=(const HeaderList&) = delete;
  ~HeaderList() { curl_slist_free_all(list); }
  void add(const std::string& line) { list = curl_slist_append(list, line.c_str()); }
};

// What the callbacks share with the call.
struct Exchange {
  const HttpsRequest* request = nullptr;
  CURL* curl = nullptr;
  HttpsResponse response;

  // Upload side.
  UniqueFd body_fd;
  std::uint64_t sent = 0;

  // Download side.
  UniqueFd response_fd;
  bool response_to_file = false;  // decided on the first body byte (or at the end, for no bytes)
  bool sink_decided = false;
  bool over_limit = false;
  std::optional<Error> callback_error;  // a file error inside a callback
};

Result<void> open_response_file(Exchange& x) {
  const HttpsRequest& r = *x.request;
  int fd = ::open(r.response_file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0)
    return std::unexpected(posix_error("opening " + r.response_file.string() + " for the download", errno));
  x.response_fd.reset(fd);
  if (r.response_file_truncate && ::ftruncate(fd, static_cast<off_t>(r.response_file_offset)) != 0)
    return std::unexpected(posix_error("truncating " + r.response_file.string(), errno));
  return {};
}

void decide_sink(Exchange& x) {
  if (x.sink_decided) return;
  x.sink_decided = true;
  long status = 0;
  curl_easy_getinfo(x.curl, CURLINFO_RESPONSE_CODE, &status);
  x.response_to_file = !x.request->response_file.empty() && status >= 200 && status < 300;
  if (x.response_to_file) {
    auto opened = open_response_file(x);
    if (!opened) x.callback_error = opened.error();
  }
}

std::size_t on_body(char* data, std::size_t, std::size_t bytes, void* user) {
  auto& x = *static_cast<Exchange*>(user);
  decide_sink(x);
  if (x.callback_error) return 0;
  if (x.response.body_bytes + bytes > x.request->max_response_bytes) {
    x.over_limit = true;
    return 0;
  }
  if (x.response_to_file) {
    std::uint64_t at = x.request->response_file_offset + x.response.body_bytes;
    std::size_t done = 0;
    while (done < bytes) {
      ssize_t n = ::pwrite(x.response_fd.get(), data + done, bytes - done, static_cast<off_t>(at + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        x.callback_error = posix_error("writing the download to " + x.request->response_file.string(), errno);
        return 0;
      }
      done += static_cast<std::size_t>(n);
    }
  } else {
    x.response.body.append(data, bytes);
  }
  x.response.body_bytes += bytes;
  return bytes;
}

std::size_t on_header(char* data, std::size_t, std::size_t bytes, void* user) {
  auto& x = *static_cast<Exchange*>(user);
  std::string_view line(data, bytes);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.starts_with("HTTP/")) {
    x.response.headers.clear();  // a new answer (after 100 Continue): keep only the final one
    return bytes;
  }
  std::size_t colon = line.find(':');
  if (colon != std::string_view::npos)
    x.response.headers.emplace_back(std::string(trim(line.substr(0, colon))),
                                    std::string(trim(line.substr(colon + 1))));
  return bytes;
}

std::size_t on_read(char* buffer, std::size_t size, std::size_t count, void* user) {
  auto& x = *static_cast<Exchange*>(user);
  const RequestBody& body = x.request->body;
  std::uint64_t left = body.size() - x.sent;
  std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, size * count));
  if (n == 0) return 0;
  if (body.source == RequestBody::Source::memory) {
    std::memcpy(buffer, body.memory.data() + x.sent, n);
  } else {
    ssize_t got;
    do {
      got = ::pread(x.body_fd.get(), buffer, n, static_cast<off_t>(body.offset + x.sent));
    } while (got < 0 && errno == EINTR);
    if (got <= 0) {
      x.callback_error = got < 0 ? posix_error("reading the body from " + body.file.string(), errno)
                                 : Error{ErrorCode::io_error, "reading the body from " + body.file.string() +
                                                                  ": the file shrank while it was sent"};
      return CURL_READFUNC_ABORT;
    }
    n = static_cast<std::size_t>(got);
  }
  x.sent += n;
  return n;
}

// libcurl rewinds the body when it resends on a fresh connection (a reused one had died).
int on_seek(void* user, curl_off_t offset, int origin) {
  auto& x = *static_cast<Exchange*>(user);
  if (origin != SEEK_SET || offset < 0 || static_cast<std::uint64_t>(offset) > x.request->body.size())
    return CURL_SEEKFUNC_CANTSEEK;
  x.sent = static_cast<std::uint64_t>(offset);
  return CURL_SEEKFUNC_OK;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto& x = *static_cast<Exchange*>(user);
  return x.request->cancel && x.request->cancel->load() ? 1 : 0;
}

Error curl_failure(const Exchange& x, CURLcode code, const char* detail) {
  std::string what = describe(*x.request);
  std::string why = detail[0] ? detail : curl_easy_strerror(code);
  switch (code) {
    case CURLE_ABORTED_BY_CALLBACK: return Error{ErrorCode::timeout, what + ": cancelled"};
    case CURLE_OPERATION_TIMEDOUT: return Error{ErrorCode::timeout, what + ": timed out (" + why + ")"};
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT: return Error{ErrorCode::unavailable, what + ": " + why};
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
      return Error{ErrorCode::permission_denied,
                   what + ": the server's TLS certificate is not trusted (" + why + ")"};
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_BAD_CONTENT_ENCODING:
    case CURLE_UNSUPPORTED_PROTOCOL: return Error{ErrorCode::parse_error, what + ": " + why};
    default: return Error{ErrorCode::io_error, what + ": " + why};
  }
}

long whole_seconds(std::chrono::milliseconds ms) {
  return std::max<long>(1, static_cast<long>((ms.count() + 999) / 1000));
}

}  // namespace

Result<HttpsResponse> https_request(const HttpsRequest& request) {
  GPUHOST_TRY(https_detail::validate(request));
  init_curl_once();
  thread_local ThreadHandle handle;
  CURL* curl = handle.get();
  if (!curl) return make_error(ErrorCode::internal, describe(request) + ": curl_easy_init failed");
  curl_easy_reset(curl);

  Exchange x;
  x.request = &request;
  x.curl = curl;
  char error_buffer[CURL_ERROR_SIZE] = {};

  const RequestBody& body = request.body;
  if (body.source == RequestBody::Source::file) {
    int fd = ::open(body.file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return std::unexpected(
          posix_error(describe(request) + ": opening the body " + body.file.string(), errno));
    x.body_fd.reset(fd);
  }

  HeaderList headers;
  for (const auto& [name, value] : request.headers) headers.add(name + ": " + value);
  headers.add("Expect:");  // no 100-continue round trip: a rejected upload costs one body, not a stall
  bool has_body =
      body.source != RequestBody::Source::none || request.method == "PUT" || request.method == "POST";

  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers.list);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(request.connect_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, whole_seconds(request.stall_timeout));
  if (request.timeout.count() > 0)
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &x);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &x);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &x);
  if (request.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (has_body) {
    // UPLOAD streams the body through the read callback with a Content-Length (INFILESIZE);
    // CUSTOMREQUEST then names the method (POST too), which UPLOAD alone would make PUT.
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(curl, CURLOPT_READDATA, &x);
    curl_easy_setopt(curl, CURLOPT_SEEKFUNCTION, on_seek);
    curl_easy_setopt(curl, CURLOPT_SEEKDATA, &x);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  } else if (request.method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }

  CURLcode code = curl_easy_perform(curl);
  if (x.callback_error) return std::unexpected(*x.callback_error);
  if (x.over_limit)
    return make_error(ErrorCode::parse_error, describe(request) + ": the answer's body is larger than the " +
                                                  std::to_string(request.max_response_bytes) + "-byte limit");
  if (code != CURLE_OK) return std::unexpected(curl_failure(x, code, error_buffer));

  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  x.response.status = static_cast<int>(status);
  decide_sink(x);  // an empty 2xx body still creates (or truncates) the target file
  if (x.callback_error) return std::unexpected(*x.callback_error);
  if (auto done = https_detail::check_complete(request, x.response); !done)
    return std::unexpected(done.error());
  return std::move(x.response);
}

}  // namespace gpuhost::platform
