#include "telemetry/http_server.h"

#include <algorithm>
#include <exception>
#include <list>
#include <mutex>
#include <thread>

#include "base/strings.h"
#include "platform/socket.h"

namespace gpuhost::telemetry {
namespace {

bool is_token_char(char c) {
  // RFC 9110 §5.6.2 tchar.
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_wildcard(std::string_view address) {
  return address == "0.0.0.0" || address == "::" || address.empty();
}

// "host", "host:port", "[v6]", "[v6]:port" -> (lowercase host without brackets, port or nullopt).
std::optional<std::pair<std::string, std::optional<std::uint16_t>>> split_host(std::string_view value) {
  value = trim(value);
  std::string_view host;
  std::string_view port;
  if (value.starts_with('[')) {
    auto close = value.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = value.substr(1, close - 1);
    auto rest = value.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return std::nullopt;
      port = rest.substr(1);
    }
  } else {
    auto colon = value.find(':');
    host = value.substr(0, colon);
    if (colon != std::string_view::npos) port = value.substr(colon + 1);
  }
  if (host.empty()) return std::nullopt;
  std::optional<std::uint16_t> port_number;
  if (!port.empty()) {
    auto n = parse_int(port);
    if (!n || *n < 0 || *n > 65535) return std::nullopt;
    port_number = static_cast<std::uint16_t>(*n);
  }
  return std::pair{to_lower(host), port_number};
}

bool same_secret(std::string_view a, std::string_view b) {
  // Length is not secret (it shows in any case); the contents are compared without early exit.
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i)
    diff = static_cast<unsigned char>(diff | (a[i] ^ (i < b.size() ? b[i] : 0)));
  return diff == 0;
}

// Ends our side and reads what the client still sends (a request or body we did not read) for a
// moment, so that closing does not reset the connection before the client has read our answer.
void close_gracefully(platform::TcpStream& stream) {
  stream.shutdown_send();
  for (int i = 0; i < 10; ++i) {
    auto readable = stream.wait_readable(std::chrono::milliseconds(100));
    if (!readable || !*readable) break;
    char sink[4096];
    auto got = stream.receive_some(sink, sizeof sink);
    if (!got || *got == 0) break;
  }
}

Response plain(int status, std::string body) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Everything but RFC 3986 unreserved characters as %XX: safe in a cookie value and a URL.
std::string percent_encode(std::string_view text) {
  static constexpr char k_hex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '.' ||
        c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += k_hex[c >> 4];
      out += k_hex[c & 15];
    }
  }
  return out;
}

// The query's "name=value" pairs, undecoded.
std::vector<std::pair<std::string_view, std::string_view>> query_pairs(std::string_view target) {
  std::vector<std::pair<std::string_view, std::string_view>> pairs;
  auto question = target.find('?');
  if (question == std::string_view::npos) return pairs;
  std::string_view query = target.substr(question + 1);
  while (!query.empty()) {
    auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    auto eq = pair.find('=');
    if (!pair.empty())
      pairs.emplace_back(pair.substr(0, eq),
                         eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return pairs;
}

// `target` without its `token` parameters, for the redirect that takes the token out of the URL.
std::string without_token(std::string_view target) {
  std::string out(target.substr(0, target.find('?')));
  char separator = '?';
  for (const auto& [name, value] : query_pairs(target)) {
    if (percent_decode(name) == "token") continue;
    out += separator;
    out += name;
    if (!value.empty()) {
      out += '=';
      out += value;
    }
    separator = '&';
  }
  return out;
}

std::optional<std::string> cookie(const RequestHead& request, std::string_view name) {
  // Cookie: a=b; c=d (RFC 6265 §5.4); a browser may send several Cookie lines over HTTP/2 only.
  auto header = request.header("Cookie");
  if (!header) return std::nullopt;
  for (const auto& part : split(*header, ';')) {
    std::string_view item = trim(part);
    auto eq = item.find('=');
    if (eq != std::string_view::npos && item.substr(0, eq) == name) return std::string(item.substr(eq + 1));
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> RequestHead::header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (iequals(n, name)) return v;
  return std::nullopt;
}

std::string RequestHead::path() const {
  return target.substr(0, target.find('?'));
}

std::optional<std::string> RequestHead::query(std::string_view name) const {
  for (const auto& [n, v] : query_pairs(target))
    if (percent_decode(n) == name) return percent_decode(v).value_or("");
  return std::nullopt;
}

std::optional<std::string> percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      int hi = hex_value(text[i + 1]);
      int lo = hex_value(text[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string token_cookie_name(std::uint16_t port) {
  return "gpuhost_token_" + std::to_string(port);
}

Result<RequestHead> parse_request_head(std::string_view head) {
  std::vector<std::string_view> lines;
  while (!head.empty()) {
    auto lf = head.find('\n');
    auto line = head.substr(0, lf);
    if (line.ends_with('\r')) line.remove_suffix(1);
    lines.push_back(line);
    if (lf == std::string_view::npos) break;
    head.remove_prefix(lf + 1);
  }
  if (lines.empty()) return make_error(ErrorCode::parse_error, "empty request");
  for (auto line : lines)
    if (line.find('\0') != std::string_view::npos || line.find('\r') != std::string_view::npos)
      return make_error(ErrorCode::parse_error, "control character in the request head");

  // request-line = method SP request-target SP HTTP-version (RFC 9112 §3)
  RequestHead request;
  const auto parts = split(lines[0], ' ');
  if (parts.size() != 3 || parts[0].empty() || parts[1].empty())
    return make_error(ErrorCode::parse_error, "malformed request line");
  if (!std::all_of(parts[0].begin(), parts[0].end(), is_token_char))
    return make_error(ErrorCode::parse_error, "malformed method");
  if (parts[2] != "HTTP/1.1" && parts[2] != "HTTP/1.0")
    return make_error(ErrorCode::parse_error, "unsupported HTTP version");
  if (parts[1][0] != '/' && parts[1] != "*")
    return make_error(ErrorCode::parse_error, "request target must be a path");
  request.method = parts[0];
  request.target = parts[1];
  request.version = parts[2];

  for (std::size_t i = 1; i < lines.size(); ++i) {
    auto line = lines[i];
    if (line.empty()) break;
    if (line[0] == ' ' || line[0] == '\t')
      return make_error(ErrorCode::parse_error, "obsolete header line folding");
    auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0)
      return make_error(ErrorCode::parse_error, "header line without a name");
    auto name = line.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), is_token_char))
      return make_error(ErrorCode::parse_error, "malformed header name");
    request.headers.emplace_back(std::string(name), std::string(trim(line.substr(colon + 1))));
  }
  return request;
}

std::vector<std::string> allowed_host_names(std::string_view bind_address,
                                            const std::vector<std::string>& extra) {
  std::vector<std::string> names = {"127.0.0.1", "localhost", "::1"};
  std::string bind = to_lower(bind_address);
  if (bind.starts_with('[') && bind.ends_with(']')) bind = bind.substr(1, bind.size() - 2);
  if (!is_wildcard(bind)) names.push_back(bind);
  for (const auto& e : extra) names.push_back(to_lower(e));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

AccessVerdict check_access(const RequestHead& request, const AccessPolicy& policy) {
  auto host = request.header("Host");
  if (!host) {
    if (request.version == "HTTP/1.1") return AccessVerdict::bad_request;  // RFC 9112 §3.2
  } else {
    auto parsed = split_host(*host);
    if (!parsed) return AccessVerdict::bad_request;
    if (!policy.allowed_hosts.empty()) {
      if (std::find(policy.allowed_hosts.begin(), policy.allowed_hosts.end(), parsed->first) ==
          policy.allowed_hosts.end())
        return AccessVerdict::foreign_host;
      if (parsed->second && *parsed->second != policy.port) return AccessVerdict::foreign_host;
    }
  }
  if (policy.token.empty()) return AccessVerdict::allowed;
  constexpr std::string_view scheme = "bearer ";
  if (auto auth = request.header("Authorization");
      auth && auth->size() >= scheme.size() &&
      iequals(std::string_view(*auth).substr(0, scheme.size()), scheme) &&
      same_secret(trim(std::string_view(*auth).substr(scheme.size())), policy.token))
    return AccessVerdict::allowed;
  if (auto value = cookie(request, token_cookie_name(policy.port))) {
    auto decoded = percent_decode(*value);
    if (decoded && same_secret(*decoded, policy.token)) return AccessVerdict::allowed;
  }
  if (auto value = request.query("token"); value && same_secret(*value, policy.token))
    return AccessVerdict::allowed_by_query_token;
  return AccessVerdict::unauthorized;
}

const char* status_reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 303: return "See Other";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

std::string serialize_response(const Response& response, bool head_only) {
  std::string out =
      "HTTP/1.1 " + std::to_string(response.status) + " " + status_reason(response.status) + "\r\n";
  out += "Content-Type: " + response.content_type + "\r\n";
  if (!response.stream) out += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  out += "Connection: close\r\n";
  out += "X-Content-Type-Options: nosniff\r\n";
  out += "Cache-Control: no-store\r\n";
  for (const auto& [name, value] : response.headers) out += name + ": " + value + "\r\n";
  out += "\r\n";
  if (!head_only && !response.stream) out += response.body;
  return out;
}

Answer answer_for(std::string_view raw_head, const AccessPolicy& policy, const RequestHandler& handler) {
  auto request = parse_request_head(raw_head);
  if (!request) return {plain(400, "bad request: " + request.error().message + "\n"), false};
  const bool head_only = request->method == "HEAD";
  switch (check_access(*request, policy)) {
    case AccessVerdict::allowed: break;
    case AccessVerdict::allowed_by_query_token:
      if (request->method == "GET" || head_only) {
        // The token leaves the address bar (and what the browser keeps of it) for a cookie that
        // scripts cannot read and other sites cannot send.
        Response r = plain(303, "see other\n");
        r.headers.emplace_back("Location", without_token(request->target));
        r.headers.emplace_back("Set-Cookie", token_cookie_name(policy.port) + "=" +
                                                 percent_encode(policy.token) +
                                                 "; Path=/; HttpOnly; SameSite=Strict");
        r.headers.emplace_back("Referrer-Policy", "no-referrer");
        return {std::move(r), head_only};
      }
      break;
    case AccessVerdict::bad_request:
      return {plain(400, "bad request: missing or malformed Host header\n"), head_only};
    case AccessVerdict::foreign_host:
      // Never echo the Host: it is attacker-chosen text.
      return {plain(403,
                    "forbidden: this server answers only to the names it is bound to (DNS rebinding "
                    "protection)\n"),
              head_only};
    case AccessVerdict::unauthorized: {
      Response r = plain(401,
                         "unauthorized: send Authorization: Bearer <token>, or open the page once as "
                         "/?token=<token>\n");
      r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"gpuhost\"");
      return {std::move(r), head_only};
    }
  }
  try {
    return {handler(*request), head_only};
  } catch (const std::exception& e) {
    return {plain(500, std::string("internal error: ") + e.what() + "\n"), head_only};
  }
}

std::string answer_request(std::string_view raw_head, const AccessPolicy& policy,
                           const RequestHandler& handler) {
  const Answer a = answer_for(raw_head, policy, handler);
  return serialize_response(a.response, a.head_only);
}

// ---- the server ---------------------------------------------------------------------------

namespace {

class StreamWriter final : public ResponseWriter {
 public:
  StreamWriter(platform::TcpStream& stream, const std::atomic<bool>& stopping)
      : m_stream(stream), m_stopping(stopping) {}

  bool write(std::string_view bytes) override {
    if (m_gone || m_stopping.load()) return false;
    if (!m_stream.send_all(bytes.data(), bytes.size())) m_gone = true;
    return !m_gone;
  }

  bool wait(std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (m_gone || m_stopping.load()) return false;
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return true;
      // In slices, so that stop() is noticed as promptly as by the accept loop.
      auto slice = std::min<std::chrono::milliseconds>(
          std::chrono::milliseconds(100),
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now));
      auto readable = m_stream.wait_readable(slice);
      if (!readable) {
        m_gone = true;
      } else if (*readable) {
        // A client of a stream sends nothing more: data is discarded, end of stream means gone.
        char sink[512];
        auto got = m_stream.receive_some(sink, sizeof sink);
        if (!got || *got == 0) m_gone = true;
      }
    }
  }

 private:
  platform::TcpStream& m_stream;
  const std::atomic<bool>& m_stopping;
  bool m_gone = false;
};

}  // namespace

struct HttpServer::State {
  // Fixed after start().
  HttpServerOptions options;
  RequestHandler handler;
  platform::TcpListener listener;
  std::atomic<bool> stopping{false};
  std::thread accept_thread;

  struct Connection {
    std::thread thread;
    std::atomic<bool> done{false};
    platform::TcpStream* stream = nullptr;  // guarded by mutex; set while the thread uses it
  };
  std::mutex mutex;
  // Guarded by mutex; only the accept thread adds or reaps, until stop() takes them over.
  std::list<Connection> connections;
  std::atomic<std::size_t> streams{0};  // streamed responses running now

  explicit State(platform::TcpListener l) : listener(std::move(l)) {}

  void reap_finished() {
    std::lock_guard lock(mutex);
    for (auto it = connections.begin(); it != connections.end();) {
      if (it->done.load()) {
        it->thread.join();
        it = connections.erase(it);
      } else {
        ++it;
      }
    }
  }

  void serve_connection(platform::TcpStream& stream) {
    std::string buffer;
    const auto deadline = std::chrono::steady_clock::now() + options.head_timeout;
    std::optional<std::size_t> head_end;
    std::size_t scanned = 0;
    while (!stopping.load()) {
      auto at = buffer.find("\r\n\r\n", scanned > 3 ? scanned - 3 : 0);
      if (at != std::string::npos) {
        head_end = at;
        break;
      }
      auto lf = buffer.find("\n\n", scanned > 1 ? scanned - 1 : 0);
      if (lf != std::string::npos) {
        head_end = lf;
        break;
      }
      scanned = buffer.size();
      if (buffer.size() > options.max_head_bytes) {
        auto reply = serialize_response(plain(431, "request head too large\n"), false);
        if (stream.send_all(reply.data(), reply.size())) close_gracefully(stream);
        return;
      }
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return;  // slowloris: drop without an answer
      auto slice = std::min<std::chrono::milliseconds>(
          std::chrono::milliseconds(100),
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now));
      auto readable = stream.wait_readable(slice);
      if (!readable) return;
      if (!*readable) continue;
      char chunk[4096];
      auto got = stream.receive_some(chunk, sizeof chunk);
      if (!got || *got == 0) return;
      buffer.append(chunk, *got);
    }
    if (!head_end) return;
    Answer answer = answer_for(std::string_view(buffer).substr(0, *head_end), options.access, handler);
    if (answer.response.stream && !answer.head_only) {
      if (streams.fetch_add(1) >= options.max_streams) {
        streams.fetch_sub(1);
        answer.response = plain(503, "too many live streams; try again later\n");
        answer.response.headers.emplace_back("Retry-After", "5");
      } else {
        send_stream(stream, answer.response);
        streams.fetch_sub(1);
        return;
      }
    }
    const std::string reply = serialize_response(answer.response, answer.head_only);
    if (!stream.send_all(reply.data(), reply.size())) return;
    close_gracefully(stream);
  }

  void send_stream(platform::TcpStream& stream, const Response& response) {
    const std::string head = serialize_response(response, false);
    if (!stream.send_all(head.data(), head.size())) return;
    StreamWriter writer(stream, stopping);
    try {
      response.stream(writer);
    } catch (const std::exception&) {
      // The head is out: all that is left to say is to end the body, which closing does.
    }
    stream.shutdown_send();
  }

  void accept_loop() {
    while (!stopping.load()) {
      reap_finished();
      auto accepted = listener.accept(std::chrono::milliseconds(100));
      if (!accepted) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // EMFILE and the like: back off
        continue;
      }
      if (!*accepted) continue;
      platform::TcpStream stream = std::move(**accepted);
      // Best effort: a socket refusing the option is still served, and stop() still interrupts it.
      (void)stream.set_send_timeout(options.send_timeout);
      std::lock_guard lock(mutex);
      if (connections.size() >= options.max_connections) {
        // Answered on the accept thread: under overload, accepting slows down (backpressure).
        auto reply = serialize_response(plain(503, "too many connections\n"), false);
        if (stream.send_all(reply.data(), reply.size())) close_gracefully(stream);
        continue;
      }
      auto& connection = connections.emplace_back();
      connection.thread = std::thread([this, &connection, s = std::move(stream)]() mutable {
        {
          std::lock_guard published(mutex);
          connection.stream = &s;
        }
        serve_connection(s);
        {
          std::lock_guard published(mutex);
          connection.stream = nullptr;
        }
        connection.done.store(true);
      });
    }
  }
};

HttpServer::HttpServer(std::unique_ptr<State> state) : m_state(std::move(state)) {}

Result<std::unique_ptr<HttpServer>> HttpServer::start(HttpServerOptions options, RequestHandler handler) {
  auto listener = platform::TcpListener::listen(options.bind_address, options.port);
  if (!listener) return std::unexpected(listener.error());
  auto state = std::make_unique<State>(std::move(*listener));
  options.access.port = state->listener.port();
  state->options = std::move(options);
  state->handler = std::move(handler);
  state->accept_thread = std::thread([s = state.get()] { s->accept_loop(); });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(state)));
}

HttpServer::~HttpServer() {
  stop();
}

std::uint16_t HttpServer::port() const {
  return m_state->listener.port();
}

void HttpServer::stop() {
  if (!m_state || m_state->stopping.exchange(true)) return;
  if (m_state->accept_thread.joinable()) m_state->accept_thread.join();
  std::list<State::Connection> connections;
  {
    std::lock_guard lock(m_state->mutex);
    connections.splice(connections.end(), m_state->connections);
  }
  // A thread sending to a client that stopped reading would otherwise wait out its send timeout.
  // Interrupted until it withdraws its stream, as one interrupt() can miss a send just starting
  // (Windows); a thread that has not published its stream yet sees `stopping` first.
  for (;;) {
    bool interrupted = false;
    {
      std::lock_guard lock(m_state->mutex);
      for (auto& c : connections) {
        if (!c.stream) continue;
        c.stream->interrupt();
        interrupted = true;
      }
    }
    if (!interrupted) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // Joined without the mutex: a finishing thread takes it to withdraw its stream.
  for (auto& c : connections) c.thread.join();
}

}  // namespace gpuhost::telemetry
