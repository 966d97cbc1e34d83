#include "net/http_client.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "base/strings.h"
#include "platform/socket.h"

namespace gpuhost::net {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::size_t k_max_header_bytes = 64 * 1024;  // status line and all header lines
constexpr std::size_t k_max_line_bytes = 8 * 1024;     // one chunk-size or trailer line
constexpr milliseconds k_cancel_slice{100};

bool has_forbidden_byte(std::string_view s) {
  return s.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos;
}

bool is_token_char(char c) {
  // RFC 9110 §5.6.2 tchar.
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

std::string authority(const Url& url) {
  std::string host = url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
  return url.port == 80 ? host : host + ":" + std::to_string(url.port);
}

// Reads from the connection into a buffer, never past the request's deadline.
class ResponseReader {
 public:
  ResponseReader(platform::TcpStream& stream, Clock::time_point deadline, const std::atomic<bool>* cancel)
      : m_stream(stream), m_deadline(deadline), m_cancel(cancel) {}

  std::string& buffer() { return m_buffer; }

  // Appends what arrives next; false at end of stream.
  Result<bool> fill() {
    for (;;) {
      if (m_cancel && m_cancel->load())
        return make_error(ErrorCode::timeout, "waiting for the response: cancelled");
      auto left = std::chrono::ceil<milliseconds>(m_deadline - Clock::now());
      if (left <= milliseconds(0))
        return make_error(ErrorCode::timeout, "waiting for the response: timed out");
      if (m_cancel) left = std::min(left, k_cancel_slice);
      if (!GPUHOST_TRY(m_stream.wait_readable(left))) continue;
      char chunk[16 * 1024];
      std::size_t n = GPUHOST_TRY(m_stream.receive_some(chunk, sizeof chunk));
      if (n == 0) return false;
      m_buffer.append(chunk, n);
      return true;
    }
  }

  // Removes and returns one line (without CR LF or a bare LF) from the front of the buffer.
  Result<std::optional<std::string>> line(std::size_t limit, std::string_view what) {
    for (;;) {
      std::size_t end = m_buffer.find('\n');
      if (end != std::string::npos) {
        std::string result = m_buffer.substr(0, end);
        m_buffer.erase(0, end + 1);
        if (!result.empty() && result.back() == '\r') result.pop_back();
        return std::optional<std::string>(std::move(result));
      }
      if (m_buffer.size() > limit)
        return make_error(ErrorCode::parse_error, std::string(what) + " is too long");
      if (!GPUHOST_TRY(fill())) return std::optional<std::string>();
    }
  }

  // Takes exactly `bytes` from the stream; io_error when it ends first.
  Result<std::string> exactly(std::size_t bytes) {
    while (m_buffer.size() < bytes) {
      if (!GPUHOST_TRY(fill()))
        return make_error(ErrorCode::io_error, "reading the body: the connection closed after " +
                                                   std::to_string(m_buffer.size()) + " of " +
                                                   std::to_string(bytes) + " bytes");
    }
    std::string result = m_buffer.substr(0, bytes);
    m_buffer.erase(0, bytes);
    return result;
  }

 private:
  platform::TcpStream& m_stream;
  Clock::time_point m_deadline;
  const std::atomic<bool>* m_cancel;
  std::string m_buffer;
};

// Status line and headers, up to and including the empty line.
Result<HttpResponse> read_head(ResponseReader& reader) {
  std::size_t budget = k_max_header_bytes;
  auto next_line = [&]() -> Result<std::string> {
    auto line = GPUHOST_TRY(reader.line(budget, "the response header"));
    if (!line)
      return make_error(ErrorCode::parse_error,
                        "reading the response: the connection closed inside the header");
    budget -= std::min(budget, line->size() + 2);
    if (budget == 0)
      return make_error(ErrorCode::parse_error, "reading the response: the header is too long");
    return std::move(*line);
  };

  HttpResponse response;
  std::string status_line = GPUHOST_TRY(next_line());
  // "HTTP/1.1 200 OK": RFC 9112 §4; the reason may be empty.
  auto bad_status = [&] {
    std::string shown = status_line.substr(0, 60);
    std::replace_if(
        shown.begin(), shown.end(), [](char c) { return c < 0x20 || c > 0x7e; }, '?');
    return make_error(ErrorCode::parse_error,
                      "reading the response: not an HTTP status line: \"" + shown + "\"");
  };
  if (!status_line.starts_with("HTTP/1.") || status_line.size() < 12 || status_line[8] != ' ')
    return bad_status();
  std::string_view digits = std::string_view(status_line).substr(9, 3);
  auto code = parse_int(digits);
  if (!code || digits.find_first_not_of("0123456789") != std::string_view::npos || *code < 100 ||
      *code > 999 || (status_line.size() > 12 && status_line[12] != ' '))
    return bad_status();
  response.status = static_cast<int>(*code);
  if (status_line.size() > 13) response.reason = status_line.substr(13);

  for (;;) {
    std::string line = GPUHOST_TRY(next_line());
    if (line.empty()) break;
    if (line.front() == ' ' || line.front() == '\t') {
      // Obsolete line folding (RFC 9112 §5.2): a client may replace it with a space.
      if (response.headers.empty())
        return make_error(ErrorCode::parse_error, "reading the response: a folded line before any header");
      response.headers.back().second += " " + std::string(trim(line));
      continue;
    }
    std::size_t colon = line.find(':');
    std::string_view name = std::string_view(line).substr(0, colon == std::string::npos ? 0 : colon);
    if (name.empty() || !std::all_of(name.begin(), name.end(), is_token_char))
      return make_error(ErrorCode::parse_error, "reading the response: a malformed header line");
    response.headers.emplace_back(std::string(name),
                                  std::string(trim(std::string_view(line).substr(colon + 1))));
  }
  return response;
}

Result<std::string> read_chunked(ResponseReader& reader, std::size_t max_body) {
  std::string body;
  for (;;) {
    auto line = GPUHOST_TRY(reader.line(k_max_line_bytes, "a chunk size line"));
    if (!line) return make_error(ErrorCode::io_error, "reading a chunked body: the connection closed early");
    std::string_view size_text = trim(std::string_view(*line).substr(0, line->find(';')));
    if (size_text.empty() || size_text.size() > 15 ||
        !std::all_of(size_text.begin(), size_text.end(),
                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }))
      return make_error(ErrorCode::parse_error, "reading a chunked body: a bad chunk size line");
    auto size = static_cast<std::size_t>(*parse_int(size_text, 16));
    if (size == 0) break;
    if (size > max_body - body.size())
      return make_error(ErrorCode::parse_error, "reading a chunked body: larger than the limit of " +
                                                    std::to_string(max_body) + " bytes");
    body += GPUHOST_TRY(reader.exactly(size));
    auto end = GPUHOST_TRY(reader.line(k_max_line_bytes, "a chunk end"));
    if (!end || !end->empty())
      return make_error(ErrorCode::parse_error, "reading a chunked body: a chunk without its CRLF");
  }
  // Trailer fields until the empty line; a server that closes instead has still sent the whole body.
  std::size_t budget = k_max_header_bytes;
  for (;;) {
    auto trailer = GPUHOST_TRY(reader.line(budget, "the trailer"));
    if (!trailer || trailer->empty()) break;
    budget -= std::min(budget, trailer->size() + 2);
    if (budget == 0)
      return make_error(ErrorCode::parse_error, "reading a chunked body: the trailer is too long");
  }
  return body;
}

Result<std::string> read_body(ResponseReader& reader, const HttpRequest& request,
                              const HttpResponse& response) {
  // RFC 9112 §6.3: responses to HEAD, 1xx, 204 and 304 have no body.
  if (iequals(request.method, "HEAD") || response.status < 200 || response.status == 204 ||
      response.status == 304)
    return std::string();
  std::size_t max_body = request.max_body_bytes;
  auto too_large = [&] {
    return make_error(ErrorCode::parse_error,
                      "reading the body: larger than the limit of " + std::to_string(max_body) + " bytes");
  };
  if (auto coding = response.header("Transfer-Encoding")) {
    std::string codings = to_lower(*coding);
    if (!codings.ends_with("chunked"))
      return make_error(ErrorCode::parse_error,
                        "reading the body: unsupported Transfer-Encoding \"" + *coding + "\"");
    return read_chunked(reader, max_body);
  }
  if (auto length_text = response.header("Content-Length")) {
    for (const auto& [name, value] : response.headers)
      if (iequals(name, "Content-Length") && value != *length_text)
        return make_error(ErrorCode::parse_error, "reading the body: conflicting Content-Length headers");
    auto length = parse_int(*length_text);
    if (!length || *length < 0 || length_text->find_first_not_of("0123456789") != std::string::npos)
      return make_error(ErrorCode::parse_error,
                        "reading the body: a bad Content-Length \"" + *length_text + "\"");
    if (static_cast<unsigned long long>(*length) > max_body) return too_large();
    return reader.exactly(static_cast<std::size_t>(*length));
  }
  // Neither: the body runs to the end of the connection.
  do {
    if (reader.buffer().size() > max_body) return too_large();
  } while (GPUHOST_TRY(reader.fill()));
  return std::move(reader.buffer());
}

}  // namespace

std::optional<std::string> HttpResponse::header(std::string_view name) const {
  for (const auto& [key, value] : headers)
    if (iequals(key, name)) return value;
  return std::nullopt;
}

Result<Url> parse_url(std::string_view url) {
  auto invalid = [&](std::string_view why) {
    return make_error(ErrorCode::invalid_argument,
                      "parsing the URL \"" + std::string(url) + "\": " + std::string(why));
  };
  std::size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return invalid("expected http://host[:port]/path");
  std::string scheme = to_lower(url.substr(0, scheme_end));
  if (scheme == "https")
    return make_error(ErrorCode::unsupported,
                      "parsing the URL \"" + std::string(url) +
                          "\": https is not supported (hint: cloud metadata services are plain "
                          "http on link-local addresses; use http://)");
  if (scheme != "http") return invalid("only http:// is supported");
  std::string_view rest = url.substr(scheme_end + 3);
  if (has_forbidden_byte(rest) || rest.find_first_of(" \t") != std::string_view::npos)
    return invalid("spaces or control characters");
  std::string_view host_port = rest.substr(0, rest.find_first_of("/?#"));
  std::string_view target = rest.substr(host_port.size());
  target = target.substr(0, target.find('#'));
  if (host_port.find('@') != std::string_view::npos) return invalid("user information is not supported");

  Url result;
  std::string_view port_text;
  if (host_port.starts_with('[')) {
    std::size_t close = host_port.find(']');
    if (close == std::string_view::npos) return invalid("unclosed [ in the host");
    result.host = std::string(host_port.substr(1, close - 1));
    std::string_view after = host_port.substr(close + 1);
    if (!after.empty() && !after.starts_with(':')) return invalid("junk after the IPv6 address");
    if (!after.empty()) port_text = after.substr(1);
    if (result.host.empty()) return invalid("an empty host");
  } else {
    std::size_t colon = host_port.find(':');
    result.host = std::string(host_port.substr(0, colon));
    if (colon != std::string_view::npos) port_text = host_port.substr(colon + 1);
  }
  if (result.host.empty()) return invalid("an empty host");
  if (port_text.data() != nullptr) {
    auto port = parse_int(port_text);
    if (!port || *port < 1 || *port > 65535 ||
        port_text.find_first_not_of("0123456789") != std::string_view::npos)
      return invalid("a bad port");
    result.port = static_cast<std::uint16_t>(*port);
  }
  if (target.empty())
    result.target = "/";
  else if (target.front() == '?')
    result.target = "/" + std::string(target);
  else
    result.target = std::string(target);
  return result;
}

Result<HttpResponse> http_request(const HttpRequest& request) {
  const auto start = Clock::now();
  const auto deadline = start + request.timeout;
  Url url = GPUHOST_TRY(parse_url(request.url));
  std::string what = request.method + " " + request.url;
  if (request.method.empty() || !std::all_of(request.method.begin(), request.method.end(), is_token_char))
    return make_error(ErrorCode::invalid_argument, what + ": a bad method");

  std::string head = request.method + " " + url.target + " HTTP/1.1\r\n";
  bool has_host = false, has_length = false;
  for (const auto& [name, value] : request.headers) {
    if (name.empty() || !std::all_of(name.begin(), name.end(), is_token_char) || has_forbidden_byte(value))
      return make_error(ErrorCode::invalid_argument, what + ": a bad header \"" + name + "\"");
    if (iequals(name, "Connection") || iequals(name, "Transfer-Encoding")) continue;  // ours decide
    has_host = has_host || iequals(name, "Host");
    has_length = has_length || iequals(name, "Content-Length");
    head += name + ": " + value + "\r\n";
  }
  if (!has_host) head += "Host: " + authority(url) + "\r\n";
  head += "Connection: close\r\n";
  bool send_length =
      !request.body.empty() || iequals(request.method, "PUT") || iequals(request.method, "POST");
  if (send_length && !has_length) head += "Content-Length: " + std::to_string(request.body.size()) + "\r\n";
  head += "\r\n";

  if (request.cancel && request.cancel->load()) return make_error(ErrorCode::timeout, what + ": cancelled");
  auto connect_timeout = request.timeout;
  if (request.connect_timeout > milliseconds(0))
    connect_timeout = std::min(connect_timeout, request.connect_timeout);
  auto connected = platform::TcpStream::connect(url.host, url.port, connect_timeout);
  if (!connected) {
    Error error = with_context(std::move(connected).error(), what);
    // A name that does not resolve means the service is not there, like a refused connection.
    if (error.code == ErrorCode::not_found) error.code = ErrorCode::unavailable;
    if (Clock::now() - start >= connect_timeout) error.code = ErrorCode::timeout;
    return std::unexpected(std::move(error));
  }
  platform::TcpStream& stream = *connected;
  auto sent = stream.send_all(head.data(), head.size());
  if (sent && !request.body.empty()) sent = stream.send_all(request.body.data(), request.body.size());
  if (!sent) return std::unexpected(with_context(std::move(sent).error(), what));

  ResponseReader reader(stream, deadline, request.cancel);
  auto exchange = [&]() -> Result<HttpResponse> {
    for (;;) {
      HttpResponse response = GPUHOST_TRY(read_head(reader));
      // Interim responses (100 Continue, 102, 103) precede the real one; 101 would switch protocols.
      if (response.status >= 100 && response.status < 200 && response.status != 101) continue;
      response.body = GPUHOST_TRY(read_body(reader, request, response));
      return response;
    }
  };
  auto response = exchange();
  if (!response) return std::unexpected(with_context(std::move(response).error(), what));
  return response;
}

}  // namespace gpuhost::net
