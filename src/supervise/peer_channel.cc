#include "supervise/peer_channel.h"

#include <atomic>
#include <cstdio>
#include <thread>

#include "platform/socket.h"

namespace gpuhost::supervise {

namespace {

using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How long one wait for bytes lasts: the threads see a stop, a due heartbeat and a silent peer
// this often.
constexpr milliseconds k_poll{200};
// A send that waits this long for a peer to take bytes fails, and the peer counts as gone: the
// supervisor's loop never waits longer than this on a dead link.
constexpr milliseconds k_send_timeout{2000};
constexpr milliseconds k_connect_timeout{2000};

std::string seconds_text(milliseconds d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", std::chrono::duration<double>(d).count());
  return text;
}

json::Value steps_array(const std::vector<std::int64_t>& steps) {
  json::Value array = json::Value::array();
  for (std::int64_t step : steps) array.push_back(step);
  return array;
}

std::vector<std::int64_t> steps_of(const json::Value& body, const std::string& key) {
  std::vector<std::int64_t> steps;
  const json::Value* list = body.find(key);
  if (!list || !list->is_array()) return steps;
  for (const auto& item : list->items())
    if (item.is_integer()) steps.push_back(item.as_int());
  return steps;
}

std::optional<std::int64_t> step_of(const json::Value& body) {
  const json::Value* step = body.find("step");
  if (!step || !step->is_integer()) return std::nullopt;
  return step->as_int();
}

}  // namespace

json::Value notice_to_peer_fields(const PreemptionNotice& notice, int origin) {
  json::Value fields = json::Value::object();
  fields["origin"] = origin;
  fields["source"] = notice_source_name(notice.source);
  fields["kind"] = notice.kind == NoticeKind::advisory ? "advisory" : "preemption";
  fields["deadline_ms"] = static_cast<std::int64_t>(
      std::chrono::duration_cast<milliseconds>(notice.deadline.time_since_epoch()).count());
  fields["detail"] = notice.detail;
  const auto noticed = notice.noticed.value_or(std::chrono::system_clock::now());
  fields["noticed_ms"] = static_cast<std::int64_t>(
      std::chrono::duration_cast<milliseconds>(noticed.time_since_epoch()).count());
  return fields;
}

std::optional<PreemptionNotice> notice_from_peer_message(const json::Value& body) {
  const json::Value* deadline = body.find("deadline_ms");
  const json::Value* origin = body.find("origin");
  if (!deadline || !deadline->is_integer() || !origin || !origin->is_integer()) return std::nullopt;
  const std::string kind = body.get_string("kind");
  if (kind != "preemption" && kind != "advisory") return std::nullopt;
  PreemptionNotice notice;
  notice.source = NoticeSource::peer;
  notice.kind = kind == "advisory" ? NoticeKind::advisory : NoticeKind::preemption;
  notice.deadline = std::chrono::system_clock::time_point(milliseconds(deadline->as_int()));
  if (const json::Value* noticed = body.find("noticed_ms"); noticed && noticed->is_integer())
    notice.noticed = std::chrono::system_clock::time_point(milliseconds(noticed->as_int()));
  std::string detail = body.get_string("detail");
  notice.detail = "node " + std::to_string(origin->as_int()) + ": " + body.get_string("source", "?") +
                  (detail.empty() ? std::string() : " " + detail);
  return notice;
}

struct PeerChannel::Connection {
  explicit Connection(platform::TcpStream s) : stream(std::move(s)) {}
  platform::TcpStream stream;
  std::mutex send_mutex;  // one sender at a time; guards `closed` too
  bool closed = false;
  // Owned by the connection's thread:
  int node = -1;  // the follower's rank once its hello was accepted (leader side)
  bool said_bye = false;
  std::string bye_outcome;
  bool refused = false;
  PeerLineReader reader;
  SteadyClock::time_point last_heard = SteadyClock::now();
  std::atomic<std::int64_t> last_sent_ms{0};  // steady ms of the last send, for heartbeats

  // Sends one line; false when the peer is gone (the connection is closed then).
  bool send(const std::string& line) {
    std::lock_guard lock(send_mutex);
    if (closed) return false;
    if (!stream.send_all(line.data(), line.size())) {
      closed = true;
      stream.interrupt();
      return false;
    }
    last_sent_ms = std::chrono::duration_cast<milliseconds>(SteadyClock::now().time_since_epoch()).count();
    return true;
  }
  void close() {
    std::lock_guard lock(send_mutex);
    closed = true;
    stream.interrupt();
  }
};

struct PeerChannel::Impl {
  explicit Impl(int nnodes) : ledger(nnodes) {}
  std::optional<platform::TcpListener> listener;
  std::atomic<bool> stopping{false};
  std::mutex mutex;  // guards everything below
  std::condition_variable changed;
  std::vector<PeerEvent> events;
  std::vector<std::shared_ptr<Connection>> connections;  // leader: followers; follower: the leader
  std::vector<std::string> pending;  // follower: sent once the leader has welcomed us
  bool welcomed = false;
  bool ended = false;  // send_bye was called
  PeerLedger ledger;
  std::vector<std::thread> threads;
};

namespace {

// Reads `connection` until it ends, handing each message to `handle` (false: end it), sending a
// heartbeat when one is due and giving the peer up after `timing.timeout` of silence. Returns
// why it ended ("" when the handler or a stop ended it).
template <typename Connection, typename Handler>
std::string pump_connection(Connection& connection, const PeerTiming& timing, const std::atomic<bool>& stopping,
                            Handler&& handle) {
  char buffer[16 * 1024];
  for (;;) {
    if (stopping) return "";
    auto readable = connection.stream.wait_readable(k_poll);
    const auto now = SteadyClock::now();
    if (!readable) return "receiving failed: " + readable.error().message;
    if (*readable) {
      auto received = connection.stream.receive_some(buffer, sizeof buffer);
      if (!received) return stopping ? "" : "receiving failed: " + received.error().message;
      if (*received == 0) return "it closed the connection without saying goodbye";
      connection.last_heard = now;
      connection.reader.feed(std::string_view(buffer, *received));
      for (;;) {
        auto message = connection.reader.next();
        if (!message) return "protocol error: " + message.error().message;
        if (!*message) break;
        if (!handle(**message)) return "";
      }
    } else if (now - connection.last_heard > timing.timeout) {
      return "no heartbeat for " + seconds_text(std::chrono::duration_cast<milliseconds>(now - connection.last_heard));
    }
    const std::int64_t now_ms = std::chrono::duration_cast<milliseconds>(now.time_since_epoch()).count();
    if (now_ms - connection.last_sent_ms >= timing.heartbeat.count() && !connection.send(encode_peer_message("hb")))
      return stopping ? "" : "sending a heartbeat failed";
  }
}

}  // namespace

PeerChannel::PeerChannel(PeerChannelOptions options) : m_options(std::move(options)) {}

Result<std::unique_ptr<PeerChannel>> PeerChannel::start(PeerChannelOptions options) {
  if (options.nnodes < 2 || options.node < 0 || options.node >= options.nnodes)
    return make_error(ErrorCode::invalid_argument, "peer channel: node " + std::to_string(options.node) + " of " +
                                                       std::to_string(options.nnodes) + " is not a node of a multi-node job");
  std::unique_ptr<PeerChannel> channel(new PeerChannel(std::move(options)));
  channel->m_impl = std::make_unique<Impl>(channel->m_options.nnodes);
  Impl& impl = *channel->m_impl;
  if (channel->leader()) {
    auto listener = platform::TcpListener::listen(channel->m_options.bind_host, channel->m_options.port);
    if (!listener)
      return make_error(listener.error().code,
                        "the peer channel cannot listen on " + channel->m_options.bind_host + ":" +
                            std::to_string(channel->m_options.port) + ": " + listener.error().message +
                            " (another job's gpuhost or its trainer may use the port: pass --peer-port on every node)");
    channel->m_port = listener->port();
    impl.listener = std::move(*listener);
    NodeReport own;
    own.steps = channel->m_options.steps;
    own.remote_steps = channel->m_options.remote_steps;
    own.job_remote_steps = channel->m_options.job_remote_steps;
    impl.ledger.hello(0, std::move(own));
    impl.threads.emplace_back([raw = channel.get()] { raw->accept_loop(); });
  } else {
    channel->m_port = channel->m_options.port;
    impl.threads.emplace_back([raw = channel.get()] { raw->follower_loop(); });
  }
  return channel;
}

PeerChannel::~PeerChannel() {
  if (!m_impl) return;
  m_impl->stopping = true;
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(m_impl->mutex);
    for (auto& connection : m_impl->connections) connection->close();
  }
  // A thread may add a connection (and its thread) until the accept loop has seen the stop.
  for (;;) {
    {
      std::lock_guard lock(m_impl->mutex);
      if (m_impl->threads.empty()) break;
      threads.swap(m_impl->threads);
    }
    for (auto& thread : threads) thread.join();
    threads.clear();
    std::lock_guard lock(m_impl->mutex);
    for (auto& connection : m_impl->connections) connection->close();
  }
}

void PeerChannel::push(PeerEvent event) {
  {
    std::lock_guard lock(m_impl->mutex);
    m_impl->events.push_back(std::move(event));
  }
  m_impl->changed.notify_all();
}

std::vector<PeerEvent> PeerChannel::take_events() {
  std::lock_guard lock(m_impl->mutex);
  std::vector<PeerEvent> events;
  events.swap(m_impl->events);
  return events;
}

bool PeerChannel::wait_for_event(std::chrono::milliseconds timeout) {
  std::unique_lock lock(m_impl->mutex);
  return m_impl->changed.wait_for(lock, timeout, [&] { return !m_impl->events.empty(); });
}

void PeerChannel::broadcast(const std::string& line, int except) {
  std::vector<std::shared_ptr<Connection>> targets;
  {
    std::lock_guard lock(m_impl->mutex);
    for (const auto& connection : m_impl->connections)
      if (!leader() || (connection->node >= 0 && connection->node != except)) targets.push_back(connection);
  }
  for (const auto& connection : targets) (void)connection->send(line);
}

void PeerChannel::send_notice(const PreemptionNotice& notice) {
  const std::string line = encode_peer_message("notice", notice_to_peer_fields(notice, m_options.node));
  if (!leader()) {
    std::lock_guard lock(m_impl->mutex);
    if (!m_impl->welcomed) {
      m_impl->pending.push_back(line);
      return;
    }
  }
  broadcast(line);
}

void PeerChannel::node_committed(int node, std::int64_t step) {
  std::optional<std::int64_t> global;
  {
    std::lock_guard lock(m_impl->mutex);
    global = m_impl->ledger.committed(node, step);
  }
  if (!global) return;
  json::Value fields = json::Value::object();
  fields["step"] = *global;
  broadcast(encode_peer_message("global", std::move(fields)));
  PeerEvent event;
  event.kind = PeerEvent::Kind::global;
  event.step = global;
  push(std::move(event));
}

void PeerChannel::send_committed(std::int64_t step) {
  if (leader()) {
    node_committed(0, step);
    return;
  }
  json::Value fields = json::Value::object();
  fields["node"] = m_options.node;
  fields["step"] = step;
  const std::string line = encode_peer_message("committed", std::move(fields));
  {
    std::lock_guard lock(m_impl->mutex);
    if (!m_impl->welcomed) {
      m_impl->pending.push_back(line);
      return;
    }
  }
  broadcast(line);
}

void PeerChannel::send_bye(const std::string& outcome) {
  json::Value fields = json::Value::object();
  fields["node"] = m_options.node;
  fields["outcome"] = outcome;
  broadcast(encode_peer_message("bye", std::move(fields)));
  std::lock_guard lock(m_impl->mutex);
  m_impl->ended = true;
  for (auto& connection : m_impl->connections) {
    std::lock_guard send_lock(connection->send_mutex);
    connection->closed = true;
    connection->stream.shutdown_send();
  }
}

void PeerChannel::accept_loop() {
  while (!m_impl->stopping) {
    auto accepted = m_impl->listener->accept(k_poll);
    if (!accepted || !*accepted) continue;
    auto connection = std::make_shared<Connection>(std::move(**accepted));
    (void)connection->stream.set_send_timeout(k_send_timeout);
    connection->stream.set_no_delay();
    std::lock_guard lock(m_impl->mutex);
    if (m_impl->stopping || m_impl->ended) continue;
    m_impl->connections.push_back(connection);
    m_impl->threads.emplace_back([this, connection] { serve_follower(connection); });
  }
}

void PeerChannel::serve_follower(std::shared_ptr<Connection> connection) {
  const std::string why = pump_connection(*connection, m_options.timing, m_impl->stopping,
                                          [&](const PeerMessage& message) { return leader_handle(*connection, message); });
  follower_lost(*connection, why);
  connection->close();
  std::lock_guard lock(m_impl->mutex);
  std::erase(m_impl->connections, connection);
}

void PeerChannel::follower_lost(Connection& connection, const std::string& why) {
  if (connection.node < 0 || m_impl->stopping) return;
  {
    std::lock_guard lock(m_impl->mutex);
    if (m_impl->ended) return;
  }
  PeerEvent event;
  event.kind = PeerEvent::Kind::lost;
  event.node = connection.node;
  event.outcome = connection.bye_outcome;
  event.detail = connection.said_bye ? "it ended (" + connection.bye_outcome + ")" : why;
  json::Value fields = json::Value::object();
  fields["node"] = event.node;
  fields["reason"] = event.detail;
  fields["outcome"] = event.outcome;
  broadcast(encode_peer_message("lost", std::move(fields)), connection.node);
  push(std::move(event));
}

bool PeerChannel::leader_handle(Connection& connection, const PeerMessage& message) {
  const json::Value& body = message.body;
  if (connection.node < 0) {
    auto refuse = [&](const std::string& reason) {
      json::Value fields = json::Value::object();
      fields["reason"] = reason;
      (void)connection.send(encode_peer_message("refused", std::move(fields)));
      return false;
    };
    if (message.type != "hello") return refuse("the first message must be hello");
    if (!m_options.token.empty() && !peer_token_matches(m_options.token, body.get_string("token")))
      return refuse("wrong or missing peer token (GPUHOST_PEER_TOKEN or --peer-token-file must be the same on every node)");
    const std::int64_t node = body.get_int("node", -1);
    const std::int64_t nnodes = body.get_int("nnodes", -1);
    if (nnodes != m_options.nnodes)
      return refuse("that node runs a job of " + std::to_string(nnodes) + " nodes, the leader one of " +
                    std::to_string(m_options.nnodes));
    if (node < 1 || node >= m_options.nnodes)
      return refuse("node rank " + std::to_string(node) + " is not a follower of a " + std::to_string(m_options.nnodes) +
                    "-node job");
    const std::string job = body.get_string("job");
    if (!m_options.job_key.empty() && !job.empty() && job != m_options.job_key)
      return refuse("that node belongs to job " + job + ", the leader to " + m_options.job_key);
    NodeReport report;
    report.steps = steps_of(body, "steps");
    report.remote_steps = steps_of(body, "remote_steps");
    // A follower without a probe (an older gpuhost, or one that could not write it) is taken at
    // its word that it scanned the same folder, as before probes existed.
    const std::string probe = body.get_string("probe");
    if (!probe.empty() && m_options.sees_probe) report.shares_storage = m_options.sees_probe(static_cast<int>(node), probe);
    std::optional<PeerLedger::Agreement> agreement;
    std::optional<PeerLedger::Agreement> earlier;
    {
      std::lock_guard lock(m_impl->mutex);
      for (const auto& other : m_impl->connections)
        if (other.get() != &connection && other->node == node)
          return refuse("node " + std::to_string(node) + " is already connected: two nodes given the same node rank?");
      connection.node = static_cast<int>(node);
      earlier = m_impl->ledger.agreed();
      agreement = m_impl->ledger.hello(connection.node, std::move(report));
    }
    (void)connection.send(encode_peer_message("welcome"));
    PeerEvent joined;
    joined.kind = PeerEvent::Kind::joined;
    joined.node = connection.node;
    push(std::move(joined));
    auto resume_line = [](const PeerLedger::Agreement& a) {
      json::Value fields = json::Value::object();
      fields["step"] = a.step ? json::Value(*a.step) : json::Value();
      fields["storage"] = storage_layout_name(a.storage);
      return encode_peer_message("resume", std::move(fields));
    };
    if (agreement) {
      broadcast(resume_line(*agreement));
      PeerEvent agreed;
      agreed.kind = PeerEvent::Kind::agreed;
      agreed.step = agreement->step;
      agreed.storage = agreement->storage;
      push(std::move(agreed));
    } else if (earlier) {
      (void)connection.send(resume_line(*earlier));
    }
    return true;
  }
  if (message.type == "notice") {
    auto notice = notice_from_peer_message(body);
    if (!notice) return true;
    broadcast(encode_peer_message("notice", body), connection.node);
    PeerEvent event;
    event.kind = PeerEvent::Kind::notice;
    event.node = connection.node;
    event.notice = std::move(*notice);
    push(std::move(event));
  } else if (message.type == "committed") {
    auto step = step_of(body);
    if (step) {
      PeerEvent event;
      event.kind = PeerEvent::Kind::committed;
      event.node = connection.node;
      event.step = step;
      push(std::move(event));
      node_committed(connection.node, *step);
    }
  } else if (message.type == "bye") {
    connection.said_bye = true;
    connection.bye_outcome = body.get_string("outcome");
    return false;
  }
  return true;  // hb, and types of a newer version: ignored
}

void PeerChannel::follower_loop() {
  while (!m_impl->stopping) {
    auto stream = platform::TcpStream::connect(m_options.leader_host, m_options.port, k_connect_timeout);
    if (!stream) {
      // The leader's gpuhost may not be listening yet: the engine starts the nodes in any order.
      const auto until = SteadyClock::now() + m_options.timing.connect_retry;
      while (!m_impl->stopping && SteadyClock::now() < until) std::this_thread::sleep_for(milliseconds(50));
      continue;
    }
    auto connection = std::make_shared<Connection>(std::move(*stream));
    (void)connection->stream.set_send_timeout(k_send_timeout);
    connection->stream.set_no_delay();
    {
      std::lock_guard lock(m_impl->mutex);
      if (m_impl->stopping || m_impl->ended) return;
      m_impl->connections.push_back(connection);
    }
    json::Value hello = json::Value::object();
    hello["job"] = m_options.job_key;
    hello["node"] = m_options.node;
    hello["nnodes"] = m_options.nnodes;
    hello["token"] = m_options.token;
    hello["steps"] = steps_array(m_options.steps);
    hello["remote_steps"] = steps_array(m_options.remote_steps);
    if (!m_options.probe_nonce.empty()) hello["probe"] = m_options.probe_nonce;
    (void)connection->send(encode_peer_message("hello", std::move(hello)));
    const std::string why = pump_connection(*connection, m_options.timing, m_impl->stopping,
                                            [&](const PeerMessage& message) { return follower_handle(*connection, message); });
    connection->close();
    bool welcomed = false;
    bool ended = false;
    {
      std::lock_guard lock(m_impl->mutex);
      std::erase(m_impl->connections, connection);
      welcomed = m_impl->welcomed;
      ended = m_impl->ended;
    }
    if (connection->refused || m_impl->stopping || ended) return;
    if (!welcomed) continue;  // it went away before accepting us: try again
    PeerEvent event;
    event.kind = PeerEvent::Kind::lost;
    event.node = 0;
    event.outcome = connection->bye_outcome;
    event.detail = connection->said_bye ? "it ended (" + connection->bye_outcome + ")" : why;
    push(std::move(event));
    return;  // the leader is gone: this run of the job is over
  }
}

bool PeerChannel::follower_handle(Connection& connection, const PeerMessage& message) {
  const json::Value& body = message.body;
  PeerEvent event;
  if (message.type == "welcome") {
    std::vector<std::string> pending;
    {
      std::lock_guard lock(m_impl->mutex);
      m_impl->welcomed = true;
      pending.swap(m_impl->pending);
    }
    for (const auto& line : pending) (void)connection.send(line);
    event.kind = PeerEvent::Kind::joined;
    event.node = 0;
  } else if (message.type == "refused") {
    connection.refused = true;
    event.kind = PeerEvent::Kind::refused;
    event.node = 0;
    event.detail = body.get_string("reason", "no reason given");
    push(std::move(event));
    return false;
  } else if (message.type == "resume") {
    event.kind = PeerEvent::Kind::agreed;
    event.step = step_of(body);
    event.storage = body.get_string("storage", "shared") == "node_local" ? StorageLayout::node_local : StorageLayout::shared;
  } else if (message.type == "notice") {
    auto notice = notice_from_peer_message(body);
    if (!notice) return true;
    event.kind = PeerEvent::Kind::notice;
    event.node = static_cast<int>(body.get_int("origin", 0));
    event.notice = std::move(*notice);
  } else if (message.type == "global") {
    event.kind = PeerEvent::Kind::global;
    event.step = step_of(body);
    if (!event.step) return true;
  } else if (message.type == "lost") {
    event.kind = PeerEvent::Kind::lost;
    event.node = static_cast<int>(body.get_int("node", -1));
    event.detail = body.get_string("reason");
    event.outcome = body.get_string("outcome");
  } else if (message.type == "bye") {
    connection.said_bye = true;
    connection.bye_outcome = body.get_string("outcome");
    return false;
  } else {
    return true;  // hb, and types of a newer version
  }
  push(std::move(event));
  return true;
}

}  // namespace gpuhost::supervise
