#include "net/fake_http_server.h"

#include <cstdio>

#include "base/strings.h"

namespace gpuhost::net::test_support {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds k_slice{20};

std::string reason_for(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 500: return "Internal Server Error";
    default: return "Status";
  }
}

std::string render(const CannedResponse& response) {
  if (response.raw) return *response.raw;
  std::string out =
      "HTTP/1.1 " + std::to_string(response.status) + " " + reason_for(response.status) + "\r\n";
  for (const auto& [name, value] : response.headers) out += name + ": " + value + "\r\n";
  switch (response.framing) {
    case CannedResponse::Framing::content_length:
      out += "Content-Length: " + std::to_string(response.body.size()) + "\r\n\r\n" + response.body;
      break;
    case CannedResponse::Framing::chunked: {
      out += "Transfer-Encoding: chunked\r\n\r\n";
      for (std::size_t at = 0; at < response.body.size(); at += 3) {
        std::string piece = response.body.substr(at, 3);
        char size[16];
        std::snprintf(size, sizeof size, "%zx", piece.size());
        out += std::string(size) + (at == 3 ? ";name=value" : "") + "\r\n" + piece + "\r\n";
      }
      out += "0\r\nX-Trailer: yes\r\n\r\n";
      break;
    }
    case CannedResponse::Framing::until_close: out += "\r\n" + response.body; break;
  }
  return out;
}

}  // namespace

std::optional<std::string> ReceivedRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers)
    if (iequals(key, name)) return value;
  return std::nullopt;
}

FakeHttpServer::FakeHttpServer(RequestHandler handler) : m_handler(std::move(handler)) {
  auto listener = platform::TcpListener::listen("127.0.0.1", 0);
  if (!listener) return;
  m_port = listener->port();
  m_acceptor = std::thread([this, l = std::move(*listener)]() mutable { accept_loop(std::move(l)); });
}

FakeHttpServer::~FakeHttpServer() {
  m_stopping = true;
  if (m_acceptor.joinable()) m_acceptor.join();
  std::vector<std::thread> connections;
  {
    std::lock_guard lock(m_mutex);
    connections.swap(m_connections);
  }
  for (auto& t : connections) t.join();
}

std::string FakeHttpServer::url() const {
  return "http://127.0.0.1:" + std::to_string(m_port);
}

std::vector<ReceivedRequest> FakeHttpServer::requests() const {
  std::lock_guard lock(m_mutex);
  return m_requests;
}

void FakeHttpServer::set_handler(RequestHandler handler) {
  std::lock_guard lock(m_mutex);
  m_handler = std::move(handler);
}

void FakeHttpServer::accept_loop(platform::TcpListener listener) {
  while (!m_stopping) {
    auto accepted = listener.accept(k_slice);
    if (!accepted || !*accepted) continue;
    std::lock_guard lock(m_mutex);
    m_connections.emplace_back([this, s = std::move(**accepted)]() mutable { serve(std::move(s)); });
  }
}

void FakeHttpServer::serve(platform::TcpStream stream) {
  std::string data;
  // Reads until `done` says the request is complete; false if the client or the server gave up.
  auto read_until = [&](auto done) {
    while (!done()) {
      if (m_stopping) return false;
      auto ready = stream.wait_readable(k_slice);
      if (!ready) return false;
      if (!*ready) continue;
      char chunk[4096];
      auto n = stream.receive_some(chunk, sizeof chunk);
      if (!n || *n == 0) return false;
      data.append(chunk, *n);
    }
    return true;
  };
  if (!read_until([&] { return data.find("\r\n\r\n") != std::string::npos; })) return;
  std::size_t head_end = data.find("\r\n\r\n");
  auto lines = split(std::string_view(data).substr(0, head_end), '\n');
  ReceivedRequest request;
  auto request_line = split_whitespace(lines.empty() ? "" : lines[0]);
  if (request_line.size() != 3) return;
  request.method = request_line[0];
  request.target = request_line[1];
  for (std::size_t i = 1; i < lines.size(); ++i) {
    std::string_view line = trim(lines[i]);
    std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    request.headers.emplace_back(std::string(line.substr(0, colon)),
                                 std::string(trim(line.substr(colon + 1))));
  }
  std::size_t length =
      static_cast<std::size_t>(parse_int(request.header("Content-Length").value_or("0")).value_or(0));
  if (!read_until([&] { return data.size() >= head_end + 4 + length; })) return;
  request.body = data.substr(head_end + 4, length);

  RequestHandler handler;
  {
    std::lock_guard lock(m_mutex);
    m_requests.push_back(request);
    handler = m_handler;
  }
  CannedResponse response = handler(request);
  if (response.hang) {
    data.clear();
    read_until([] { return false; });  // until the client closes or the server stops
    return;
  }
  std::string bytes = render(response);
  (void)stream.send_all(bytes.data(), bytes.size());
  stream.shutdown_send();
  // Drain until the client closes, so closing here never resets a connection with unread data.
  read_until([] { return false; });
}

}  // namespace gpuhost::net::test_support
