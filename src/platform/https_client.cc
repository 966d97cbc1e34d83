#include "platform/https_client.h"

#include <system_error>

#include "base/strings.h"
#include "platform/https_internal.h"

namespace gpuhost::platform {

std::optional<std::string> find_header(const WebHeaders& headers, std::string_view name) {
  for (const auto& [key, value] : headers)
    if (iequals(key, name)) return value;
  return std::nullopt;
}

RequestBody RequestBody::from_memory(std::string_view data) {
  RequestBody body;
  body.source = Source::memory;
  body.memory = data;
  return body;
}

RequestBody RequestBody::from_file(std::filesystem::path file, std::uint64_t offset, std::uint64_t length) {
  RequestBody body;
  body.source = Source::file;
  body.file = std::move(file);
  body.offset = offset;
  body.length = length;
  return body;
}

std::uint64_t RequestBody::size() const {
  switch (source) {
    case Source::none: return 0;
    case Source::memory: return memory.size();
    case Source::file: return length;
  }
  return 0;
}

std::string WebUrl::authority() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return default_port() ? h : h + ":" + std::to_string(port);
}

Result<WebUrl> parse_web_url(std::string_view url) {
  auto bad = [&](std::string_view why) {
    return make_error(ErrorCode::invalid_argument,
                      "parsing URL \"" + std::string(url) + "\": " + std::string(why));
  };
  WebUrl out;
  std::size_t colon = url.find("://");
  if (colon == std::string_view::npos) return bad("expected http://host/... or https://host/...");
  out.scheme = to_lower(url.substr(0, colon));
  if (out.scheme != "http" && out.scheme != "https") return bad("only http and https are supported");
  std::string_view rest = url.substr(colon + 3);
  if (rest.find_first_of(std::string_view("#\r\n\0 ", 5)) != std::string_view::npos)
    return bad("a fragment, a space or a control character is not allowed");
  std::size_t slash = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    out.target = std::string(rest.substr(slash));
    if (out.target.front() == '?') out.target.insert(0, "/");
  }
  if (authority.find('@') != std::string_view::npos) return bad("user information in URLs is not supported");
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("unterminated IPv6 literal");
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad("junk after the IPv6 literal");
      port_text = after.substr(1);
    }
  } else {
    std::size_t port_colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, port_colon));
    if (port_colon != std::string_view::npos) port_text = authority.substr(port_colon + 1);
  }
  if (out.host.empty()) return bad("no host");
  if (port_text.empty()) {
    out.port = out.scheme == "https" ? 443 : 80;
  } else {
    auto port = parse_int(port_text);
    if (!port || *port < 1 || *port > 65535) return bad("bad port");
    out.port = static_cast<std::uint16_t>(*port);
  }
  return out;
}

namespace https_detail {

Result<WebUrl> validate(const HttpsRequest& request) {
  WebUrl url = GPUHOST_TRY(parse_web_url(request.url));
  auto forbidden = [](std::string_view s) {
    return s.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos;
  };
  if (request.method.empty() || forbidden(request.method) || request.method.find(' ') != std::string::npos)
    return make_error(ErrorCode::invalid_argument,
                      "sending an HTTP request: bad method \"" + request.method + "\"");
  for (const auto& [name, value] : request.headers)
    if (name.empty() || forbidden(name) || name.find(':') != std::string::npos || forbidden(value))
      return make_error(ErrorCode::invalid_argument,
                        describe(request) + ": header \"" + name + "\" has a character HTTP does not allow");
  if (request.body.source == RequestBody::Source::file) {
    std::error_code ec;
    std::uint64_t size = std::filesystem::file_size(request.body.file, ec);
    if (ec)
      return make_error(
          ec == std::errc::no_such_file_or_directory ? ErrorCode::not_found : ErrorCode::io_error,
          describe(request) + ": reading the body from " + request.body.file.string() + ": " + ec.message());
    if (request.body.offset > size || request.body.length > size - request.body.offset)
      return make_error(ErrorCode::invalid_argument,
                        describe(request) + ": the body range " + std::to_string(request.body.offset) + "+" +
                            std::to_string(request.body.length) + " is past the end of " +
                            request.body.file.string() + " (" + std::to_string(size) + " bytes)");
  }
  return url;
}

Result<void> check_complete(const HttpsRequest& request, const HttpsResponse& response) {
  // RFC 9110 §6.4.1: HEAD answers, 1xx, 204 and 304 carry no body whatever Content-Length says.
  if (iequals(request.method, "HEAD") || response.status < 200 || response.status == 204 ||
      response.status == 304)
    return {};
  auto length_text = response.header("Content-Length");
  if (!length_text) return {};
  auto length = parse_int(trim(*length_text));
  if (!length || *length < 0) return {};
  if (response.body_bytes != static_cast<std::uint64_t>(*length))
    return make_error(ErrorCode::io_error, describe(request) + ": the answer's body ended after " +
                                               std::to_string(response.body_bytes) + " of " +
                                               std::to_string(*length) + " bytes (connection closed early)");
  return {};
}

std::string describe(const HttpsRequest& request) {
  return request.method + " " + request.url;
}

}  // namespace https_detail
}  // namespace gpuhost::platform
