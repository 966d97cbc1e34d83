#include "bench/network.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/strings.h"
#include "bench/verdict.h"
#include "platform/interrupt.h"
#include "platform/socket.h"

namespace gpuhost::bench {
namespace {

using Clock = std::chrono::steady_clock;
// Bytes per send/recv call. Larger than iperf3's default TCP length (esnet/iperf man page: "-l ...
// default 128 KB for TCP") because on fast links the per-call cost otherwise caps the figure (on
// loopback here 1 MiB calls measured ~1.5x more than 128 KiB); compare with `iperf3 -l 1M`.
constexpr std::size_t k_chunk = 1024 * 1024;
constexpr char k_magic[4] = {'G', 'H', 'B', '1'};
constexpr std::chrono::milliseconds k_connect_timeout{5000};

// Header: "GHB1", mode ('u' client sends, 'd' server sends, 'p' ping echo), 3 bytes zero,
// duration in milliseconds (u32 little endian), 4 bytes zero.
struct Header {
  char mode = 'u';
  std::uint32_t duration_ms = 0;
};

std::array<unsigned char, 16> encode(const Header& h) {
  std::array<unsigned char, 16> bytes{};
  std::memcpy(bytes.data(), k_magic, 4);
  bytes[4] = static_cast<unsigned char>(h.mode);
  for (int i = 0; i < 4; ++i) bytes[static_cast<std::size_t>(8 + i)] = static_cast<unsigned char>(h.duration_ms >> (8 * i));
  return bytes;
}

void put_u64(unsigned char* out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}
std::uint64_t get_u64(const unsigned char* in) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | in[i];
  return v;
}

// Sends until `duration` passes or the peer goes; returns bytes sent.
std::uint64_t send_for(platform::TcpStream& stream, std::chrono::duration<double> duration) {
  std::vector<char> buffer(k_chunk, 'g');
  std::uint64_t sent = 0;
  auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(duration);
  while (Clock::now() < end && !platform::interrupt_requested()) {
    auto n = stream.send_some(buffer.data(), buffer.size());
    if (!n) break;
    sent += *n;
  }
  return sent;
}

// Receives until the peer closes; returns bytes received.
std::uint64_t drain(platform::TcpStream& stream) {
  std::vector<char> buffer(k_chunk);
  std::uint64_t received = 0;
  for (;;) {
    auto n = stream.receive_some(buffer.data(), buffer.size());
    if (!n || *n == 0) break;
    received += *n;
  }
  return received;
}

void serve_connection(platform::TcpStream stream) {
  std::array<unsigned char, 16> raw{};
  if (!stream.receive_all(raw.data(), raw.size()) || std::memcmp(raw.data(), k_magic, 4) != 0) return;
  std::uint32_t duration_ms = 0;
  for (int i = 3; i >= 0; --i) duration_ms = (duration_ms << 8) | raw[static_cast<std::size_t>(8 + i)];
  switch (raw[4]) {
    case 'u': {
      std::uint64_t received = drain(stream);
      unsigned char reply[8];
      put_u64(reply, received);
      (void)stream.send_all(reply, sizeof reply);
      break;
    }
    case 'd':
      send_for(stream, std::chrono::milliseconds(duration_ms));
      stream.shutdown_send();
      drain(stream);
      break;
    case 'p': {
      stream.set_no_delay();
      unsigned char probe[8];
      while (stream.receive_all(probe, sizeof probe) && stream.send_all(probe, sizeof probe)) {
      }
      break;
    }
    default:
      break;
  }
}

std::string gbits_text(double v) { return format_fixed(v, 2) + " Gbit/s"; }

}  // namespace

Result<void> serve_network(const NetworkServeOptions& options, const std::function<void(std::uint16_t)>& on_listening) {
  auto listener = GPUHOST_TRY(platform::TcpListener::listen(options.bind, options.port));
  on_listening(listener.port());
  std::vector<std::thread> connections;
  while (!platform::interrupt_requested()) {
    auto accepted = GPUHOST_TRY(listener.accept(std::chrono::milliseconds(200)));
    if (accepted) connections.emplace_back(serve_connection, std::move(*accepted));
  }
  // Connections end when their client is done or gone; Ctrl-C also ends send loops.
  for (auto& c : connections) c.join();
  return {};
}

Result<std::pair<std::string, std::uint16_t>> parse_peer(const std::string& text) {
  std::string host = text;
  std::string port_text;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string::npos) return make_error(ErrorCode::invalid_argument, "peer '" + text + "': missing ']'");
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') return make_error(ErrorCode::invalid_argument, "peer '" + text + "': expected ':' after ']'");
      port_text = text.substr(close + 2);
    }
  } else if (std::count(text.begin(), text.end(), ':') == 1) {
    auto colon = text.find(':');
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  if (host.empty()) return make_error(ErrorCode::invalid_argument, "peer '" + text + "': no host");
  std::uint16_t port = k_default_bench_port;
  if (!port_text.empty()) {
    auto n = parse_int(port_text);
    if (!n || *n < 1 || *n > 65535)
      return make_error(ErrorCode::invalid_argument, "peer '" + text + "': port must be 1 to 65535");
    port = static_cast<std::uint16_t>(*n);
  }
  return std::pair{host, port};
}

void judge_network_throughput(Measurement& m, std::optional<double> nominal_gbits) {
  if (nominal_gbits) {
    double threshold = *nominal_gbits * k_nominal_network_fraction;
    judge_at_least(m, threshold, ">= " + gbits_text(threshold) + " (80% of the nominal " + gbits_text(*nominal_gbits) + ")",
                   "instance's nominal bandwidth (--nominal-gbits); the 80% band is gpuhost's choice, no source gives one");
    if (m.value < k_seed_network_gbits) m.notes.push_back("below the 1 Gbit/s a training host needs to its data source");
  } else {
    judge_at_least(m, k_seed_network_gbits, ">= 1 Gbit/s", "gpuhost's rule: at least 1 Gbit/s to the data source");
  }
}

Result<void> run_network(const NetworkOptions& options, BenchReport& report, ProgressSink& progress) {
  std::string where = options.host + ":" + std::to_string(options.port);
  // Reachability first, with the clearest possible error.
  {
    auto probe = platform::TcpStream::connect(options.host, options.port, k_connect_timeout);
    if (!probe)
      return make_error(ErrorCode::unavailable, "network peer " + where + " unreachable: " + probe.error().message +
                                                    " (is 'gpuhost bench network --serve' running there, and the port open?)");
  }
  auto duration = std::chrono::duration<double>(options.seconds);
  auto throughput = [&](char mode) -> Result<double> {
    std::vector<platform::TcpStream> streams;
    for (int i = 0; i < options.streams; ++i) {
      auto s = GPUHOST_TRY(platform::TcpStream::connect(options.host, options.port, k_connect_timeout));
      auto header = encode({mode, static_cast<std::uint32_t>(options.seconds * 1000)});
      if (auto step_ = s.send_all(header.data(), header.size()); !step_) return std::unexpected(step_.error());
      streams.push_back(std::move(s));
    }
    std::vector<std::uint64_t> bytes(streams.size(), 0);
    std::vector<Clock::time_point> finished_at(streams.size());
    std::atomic<int> done{0};
    std::vector<std::thread> workers;
    auto start = Clock::now();
    for (std::size_t i = 0; i < streams.size(); ++i) {
      workers.emplace_back([&, i] {
        auto& s = streams[i];
        if (mode == 'u') {
          send_for(s, duration);
          // Like iperf3's receiver figure: data over the sending interval, not the reply wait.
          finished_at[i] = Clock::now();
          s.shutdown_send();
          unsigned char reply[8];
          if (s.receive_all(reply, sizeof reply)) bytes[i] = get_u64(reply);
        } else {
          bytes[i] = drain(s);
          finished_at[i] = Clock::now();
        }
        done.fetch_add(1);
      });
    }
    std::string step = mode == 'u' ? "TCP upload to " + where : "TCP download from " + where;
    while (done.load() < static_cast<int>(workers.size())) {
      progress.report(step + ", " + std::to_string(options.streams) + " streams",
                      std::min(1.0, std::chrono::duration<double>(Clock::now() - start) / duration));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (auto& w : workers) w.join();
    double seconds = std::chrono::duration<double>(*std::max_element(finished_at.begin(), finished_at.end()) - start).count();
    std::uint64_t total = 0;
    for (auto b : bytes) total += b;
    return static_cast<double>(total) * 8 / seconds / 1e9;
  };

  for (char mode : {'u', 'd'}) {
    double gbits = GPUHOST_TRY(throughput(mode));
    if (platform::interrupt_requested()) {
      report.interrupted = true;
      return {};
    }
    Measurement m;
    m.id = mode == 'u' ? "network.upload_gbits" : "network.download_gbits";
    m.subject = "peer " + where;
    m.title = std::string(mode == 'u' ? "TCP to peer" : "TCP from peer") + ", " + std::to_string(options.streams) +
              " parallel streams";
    m.value = gbits;
    m.unit = "Gbit/s";
    judge_network_throughput(m, options.nominal_gbits);
    report.measurements.push_back(std::move(m));
  }

  auto ping = GPUHOST_TRY(platform::TcpStream::connect(options.host, options.port, k_connect_timeout));
  auto header = encode({'p', 0});
  if (auto step_ = ping.send_all(header.data(), header.size()); !step_) return std::unexpected(step_.error());
  ping.set_no_delay();
  std::vector<double> rtts;
  unsigned char probe[8] = {};
  for (int i = 0; i < options.pings && !platform::interrupt_requested(); ++i) {
    auto start = Clock::now();
    if (auto step_ = ping.send_all(probe, sizeof probe); !step_) return std::unexpected(step_.error());
    if (auto step_ = ping.receive_all(probe, sizeof probe); !step_) return std::unexpected(step_.error());
    rtts.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    if (i % 16 == 0) progress.report("TCP round trip to " + where, static_cast<double>(i) / options.pings);
  }
  if (!rtts.empty()) {
    std::sort(rtts.begin(), rtts.end());
    Measurement m;
    m.id = "network.rtt_us";
    m.subject = "peer " + where;
    m.title = "TCP round trip, 8 bytes, median of " + std::to_string(rtts.size());
    m.value = rtts[rtts.size() / 2];
    m.unit = "us";
    report.measurements.push_back(std::move(m));
  }
  if (platform::interrupt_requested()) report.interrupted = true;
  return {};
}

}  // namespace gpuhost::bench
