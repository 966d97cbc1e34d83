#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "base/error.h"
#include "bench/result.h"

namespace gpuhost::bench {

// The wire protocol between `bench network --peer` and `--serve` is in doc/bench-json.md
// ("network protocol"): one TCP connection per stream, a 16-byte header naming the direction.
inline constexpr std::uint16_t k_default_bench_port = 5299;

struct NetworkServeOptions {
  std::string bind = "0.0.0.0";
  std::uint16_t port = k_default_bench_port;
};

// Serves until Ctrl-C (platform::interrupt_requested). `on_listening` gets the bound port
// (useful with port 0) before the first accept.
[[nodiscard]] Result<void> serve_network(const NetworkServeOptions& options,
                                         const std::function<void(std::uint16_t)>& on_listening);

struct NetworkOptions {
  std::string host;
  std::uint16_t port = k_default_bench_port;
  int streams = 4;
  double seconds = 5;          // per direction
  int pings = 200;             // round trips for the latency measurement
  std::optional<double> nominal_gbits;  // the instance's advertised bandwidth, when known
};

// "host", "host:port", "[v6]:port" -> host and port (default when absent). invalid_argument.
[[nodiscard]] Result<std::pair<std::string, std::uint16_t>> parse_peer(const std::string& text);

// Upload (this host -> peer), download and round-trip latency. unavailable when the peer cannot
// be reached.
[[nodiscard]] Result<void> run_network(const NetworkOptions& options, BenchReport& report, ProgressSink& progress);

// Adds the verdicts of a throughput measurement (seed rule, nominal) — pure, for tests.
void judge_network_throughput(Measurement& m, std::optional<double> nominal_gbits);

}  // namespace gpuhost::bench
