#include <filesystem>
#include <iostream>
#include <ostream>

#include "base/json.h"
#include "base/strings.h"
#include "bench/disk.h"
#include "bench/disk_tiers.h"
#include "bench/gpu_bench.h"
#include "bench/memory.h"
#include "bench/network.h"
#include "bench/result.h"
#include "bench/verdict.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/progress.h"
#include "cli/wording.h"
#include "knowledge/knowledge.h"
#include "platform/files.h"
#include "platform/interrupt.h"

namespace gpuhost::cli {

const char k_bench_help[] = R"(Usage: gpuhost bench [disk|memory|network|gpu|all] [FLAGS]
       gpuhost bench network --serve [--port P]
       gpuhost bench network --peer HOST[:PORT]

Measures this host and compares each number with what the hardware should deliver (spec sheet,
cloud disk tier, gpuhost's acceptance bands, listed in doc/bench-json.md): measured value, expected
value and its source, ratio, pass / warn / fail. `all` (the default) runs disk, memory and gpu,
and network when --peer is given.
  disk     in --path (default: the working directory), direct I/O (O_DIRECT /
           FILE_FLAG_NO_BUFFERING), a test file removed afterwards (also on Ctrl-C):
           sequential 1 MiB write and read, 4 KiB random read and write at queue depth N
           (N threads with synchronous requests, like fio --ioengine=psync --numjobs=N),
           4 KiB read latency at queue depth 1. Verdict: >= 10K random read IOPS for a
           training data disk, or 90% of the disk tier's IOPS when --disk-tier is given.
  memory   host memory copy and triad bandwidth over all cores (STREAM-like)
  network  TCP throughput to and from a peer running `gpuhost bench network --serve`,
           parallel streams, and round-trip latency. Verdict: >= 1 Gbit/s, or 80% of
           --nominal-gbits
  gpu      CUDA runtime + cuBLAS (loaded at run time): pinned and pageable host<->device
           copies, device-to-device copy, cublasGemmEx FP32/TF32/FP16/BF16 TFLOPS per GPU
           and the spread between GPUs; PCIe link and clock-slowdown reasons read through
           NVML during the load explain a failure

Flags:
  --quick                  short run (under a minute): small file, short phases
  --full                   long run: 4 GiB file, 15 s phases, larger GEMMs
  --path DIR               directory for the disk test file (default: .)
  --disk-size-mib N        test file size (default 1024; quick 256; full 4096)
  --disk-seconds S         seconds per disk phase (default 4; quick 1.5; full 15)
  --disk-threads N         queue depth of the random phases (default 32; quick 16; full 64)
  --disk-tier KEY          the disk's cloud tier, e.g. aws-gp3, azure-premium-p30,
                           alibaba-essd-pl1 (list: --disk-tier list)
  --disk-gib N             the disk's size, for size-dependent tiers (gp2, ESSD PL1)
  --disk-iops N            the disk's provisioned IOPS (overrides the tier's baseline)
  --serve                  network: serve peers until Ctrl-C
  --bind ADDR              network --serve: address to listen on (default 0.0.0.0)
  --port P                 network --serve: port (default 5299; 0 picks one and prints it)
  --peer HOST[:PORT]       network: the host running --serve
  --streams N              network: parallel TCP streams (default 4)
  --net-seconds S          network: seconds per direction (default 5; quick 2)
  --nominal-gbits G        network: the instance's advertised bandwidth
  --json                   print the result as JSON (schema: doc/bench-json.md)
  --save FILE              also write the JSON result to FILE (for `gpuhost plan`)
  --no-color, --color=auto|always|never
  -h, --help

Environment:
  GPUHOST_CUDART_LIBRARY, GPUHOST_CUBLAS_LIBRARY   load these files instead of searching
  GPUHOST_NVML_LIBRARY                             load NVML from this path

Exit codes:
  0    every measurement passed (warnings allowed)
  1    at least one measurement failed its band
  2    bad command line
  3    could not run: read-only or full filesystem, unreachable peer, I/O error; `bench gpu`
       on a host without a usable GPU (`bench all` then says why and measures the rest)
  130  interrupted (Ctrl-C): the measurements finished so far are printed

Examples:
  gpuhost bench --quick
  gpuhost bench disk --path /data --disk-tier aws-gp3 --disk-iops 16000
  gpuhost bench gpu --save bench.json
  gpuhost bench network --serve                 # on host A
  gpuhost bench network --peer hostA            # on host B
)";

namespace {

struct BenchOptions {
  CommonOptions common;
  std::vector<std::string> parts;
  std::string mode = "default";
  std::string save;
  bench::DiskOptions disk;
  bench::MemoryOptions memory;
  bench::GpuOptions gpu;
  bench::NetworkOptions network;
  bool serve = false;
  bench::NetworkServeOptions serve_options;
  bool list_tiers = false;
};

constexpr FlagSpec k_bench_flags[] = {
    {"--json", false},        {"--color", true},         {"--no-color", false},    {"--help", false, "-h"},
    {"--quick", false},       {"--full", false},         {"--path", true},         {"--disk-size-mib", true},
    {"--disk-seconds", true}, {"--disk-threads", true},  {"--disk-tier", true},    {"--disk-gib", true},
    {"--disk-iops", true},    {"--serve", false},        {"--bind", true},         {"--port", true},
    {"--peer", true},         {"--streams", true},       {"--net-seconds", true},  {"--nominal-gbits", true},
    {"--save", true},
};

Result<double> positive_number(const ParsedArgs& parsed, std::string_view flag, double low, double high) {
  auto text = *parsed.value(flag);
  auto n = parse_double(text);
  if (!n || *n < low || *n > high)
    return make_error(ErrorCode::invalid_argument, std::string(flag) + " must be a number from " + bench::format_fixed(low, 0) +
                                                       " to " + bench::format_fixed(high, 0) + ", not '" + text + "'");
  return *n;
}

Result<BenchOptions> parse_bench_options(std::span<const std::string> args) {
  ParsedArgs parsed = GPUHOST_TRY(parse_args(args, k_bench_flags));
  BenchOptions o;
  o.common = GPUHOST_TRY(common_options(parsed));
  const std::vector<std::string> parts = {"disk", "memory", "network", "gpu", "all"};
  std::string part = "all";
  if (parsed.positionals.size() > 1)
    return make_error(ErrorCode::invalid_argument, "bench takes one part at most, got '" + parsed.positionals[1] + "'");
  if (!parsed.positionals.empty()) {
    part = parsed.positionals.front();
    if (std::find(parts.begin(), parts.end(), part) == parts.end()) {
      std::string message = "unknown part '" + part + "'";
      if (auto close = closest_match(part, parts)) message += " (did you mean '" + *close + "'?)";
      return make_error(ErrorCode::invalid_argument, message + "; parts: disk, memory, network, gpu, all");
    }
  }
  if (parsed.has("--quick") && parsed.has("--full"))
    return make_error(ErrorCode::invalid_argument, "--quick and --full cannot be combined");
  auto& d = o.disk;
  d.directory = parsed.value("--path").value_or(".");
  if (parsed.has("--quick")) {
    o.mode = "quick";
    d.file_bytes = 256ull << 20;
    d.seconds_per_phase = 1.5;
    d.random_threads = 16;
    o.memory.array_bytes = 64u << 20;
    o.memory.repeats = 3;
    o.network.seconds = 2;
    o.network.pings = 50;
    o.gpu.copy_bytes = 64u << 20;
    o.gpu.copy_repeats = 5;
    o.gpu.gemm_size = 4096;
    o.gpu.gemm_repeats = 5;
  } else if (parsed.has("--full")) {
    o.mode = "full";
    d.file_bytes = 4096ull << 20;
    d.seconds_per_phase = 15;
    d.random_threads = 64;
    o.memory.array_bytes = 512u << 20;
    o.network.seconds = 10;
    o.network.streams = 8;
    o.network.pings = 1000;
    o.gpu.copy_repeats = 20;
    o.gpu.gemm_size = 16384;
    o.gpu.gemm_repeats = 10;
  }
  if (parsed.has("--disk-size-mib"))
    d.file_bytes = static_cast<std::uint64_t>(GPUHOST_TRY(positive_number(parsed, "--disk-size-mib", 16, 1e9))) << 20;
  if (parsed.has("--disk-seconds")) d.seconds_per_phase = GPUHOST_TRY(positive_number(parsed, "--disk-seconds", 0.1, 3600));
  if (parsed.has("--disk-threads"))
    d.random_threads = static_cast<int>(GPUHOST_TRY(positive_number(parsed, "--disk-threads", 1, 1024)));
  if (auto tier = parsed.value("--disk-tier")) {
    if (*tier == "list") {
      o.list_tiers = true;
    } else if (!bench::find_disk_tier(*tier)) {
      std::vector<std::string> keys;
      for (const auto& t : bench::disk_tiers()) keys.push_back(t.key);
      std::string message = "unknown disk tier '" + *tier + "'";
      if (auto close = closest_match(*tier, keys)) message += " (did you mean '" + *close + "'?)";
      return make_error(ErrorCode::invalid_argument, message + "; see --disk-tier list");
    }
    d.tier_key = *tier;
  }
  if (parsed.has("--disk-gib")) d.size_gib = GPUHOST_TRY(positive_number(parsed, "--disk-gib", 1, 1e7));
  if (parsed.has("--disk-iops")) d.provisioned_iops = GPUHOST_TRY(positive_number(parsed, "--disk-iops", 1, 1e8));
  o.serve = parsed.has("--serve");
  o.serve_options.bind = parsed.value("--bind").value_or("0.0.0.0");
  if (parsed.has("--port")) {
    double port = GPUHOST_TRY(positive_number(parsed, "--port", 0, 65535));
    o.serve_options.port = static_cast<std::uint16_t>(port);
  }
  if (auto peer = parsed.value("--peer")) {
    auto [host, port] = GPUHOST_TRY(bench::parse_peer(*peer));
    o.network.host = host;
    o.network.port = port;
  }
  if (parsed.has("--streams")) o.network.streams = static_cast<int>(GPUHOST_TRY(positive_number(parsed, "--streams", 1, 128)));
  if (parsed.has("--net-seconds")) o.network.seconds = GPUHOST_TRY(positive_number(parsed, "--net-seconds", 0.2, 3600));
  if (parsed.has("--nominal-gbits")) o.network.nominal_gbits = GPUHOST_TRY(positive_number(parsed, "--nominal-gbits", 0.001, 1e5));
  o.save = parsed.value("--save").value_or("");
  if ((o.serve || !o.network.host.empty()) && part != "network" && part != "all")
    return make_error(ErrorCode::invalid_argument, "--serve and --peer belong to 'bench network'");
  if (o.serve && !o.network.host.empty())
    return make_error(ErrorCode::invalid_argument, "--serve and --peer cannot be combined: serve on one host, --peer on the other");
  if (part == "network" && !o.serve && o.network.host.empty())
    return make_error(ErrorCode::invalid_argument, "bench network needs --peer HOST (a host running 'gpuhost bench network --serve') or --serve");
  if (part == "all") {
    o.parts = {"disk", "memory", "gpu"};
    if (!o.network.host.empty()) o.parts.insert(o.parts.begin() + 2, "network");
  } else {
    o.parts = {part};
  }
  return o;
}

// Draws "[#####.....] 50%" progress for each measurement on the shared ProgressLine.
class ProgressBar final : public bench::ProgressSink {
 public:
  explicit ProgressBar(ProgressLine& line) : m_line(line) {}
  void report(const std::string& step, double fraction) override {
    if (fraction < 0) {
      m_line.set_step(step);
      return;
    }
    int filled = static_cast<int>(std::min(1.0, fraction) * 20);
    m_line.set_step(step + " [" + std::string(static_cast<std::size_t>(filled), '#') +
                    std::string(static_cast<std::size_t>(20 - filled), '.') + "] " +
                    std::to_string(static_cast<int>(std::min(1.0, fraction) * 100)) + "%");
  }

 private:
  ProgressLine& m_line;
};

std::string value_text(double v) {
  if (v >= 1000) return bench::format_fixed(v, 0);
  if (v >= 100) return bench::format_fixed(v, 1);
  return bench::format_fixed(v, 2);
}

void render(std::ostream& out, const bench::BenchReport& report, const TerminalStyle& style) {
  std::string subject = "-";
  for (const auto& m : report.measurements) {
    if (m.subject != subject) {
      subject = m.subject;
      out << "\n" << style.bold(subject.empty() ? "this host" : subject) << "\n";
    }
    std::string status = bench::status_name(m.status);
    std::string badge = m.status == bench::Status::pass   ? style.green("pass")
                        : m.status == bench::Status::warn ? style.yellow("warn")
                        : m.status == bench::Status::fail ? style.red("FAIL")
                                                          : style.dim("info");
    out << "  " << badge << "  " << m.title << ": " << style.bold(value_text(m.value) + " " + m.unit);
    if (!m.expected_text.empty()) out << "  expected " << m.expected_text;
    if (m.ratio) out << "  ratio " << bench::format_fixed(*m.ratio, 2);
    out << "\n";
    if (!m.basis.empty() && m.status != bench::Status::info) out << "        " << style.dim("basis: " + m.basis) << "\n";
    for (const auto& n : m.notes) out << "        " << n << "\n";
  }
  for (const auto& u : report.unavailable) out << "\n" << style.yellow(u.part + " unavailable") << ": " << u.reason << "\n";
  out << "\n"
      << report.count(bench::Status::pass) << " passed, " << counted(static_cast<std::int64_t>(report.count(bench::Status::warn)), "warning") << ", "
      << report.count(bench::Status::fail) << " failed, " << report.count(bench::Status::info) << " informational\n";
  if (report.interrupted) out << style.yellow("interrupted: the results above are those finished before Ctrl-C") << "\n";
}

}  // namespace

int run_bench(CommandContext& context) {
  auto options = parse_bench_options(context.args);
  if (!options) return report_error(context.err, options.error().message, "see 'gpuhost bench --help'", k_exit_usage);
  if (options->common.help) {
    context.out << k_bench_help;
    return k_exit_ok;
  }
  if (options->list_tiers) {
    for (const auto& t : bench::disk_tiers()) {
      auto iops = t.iops(std::nullopt);
      context.out << t.key << "  " << t.name << "  "
                  << (iops ? bench::format_fixed(*iops, 0) + " IOPS" : "size-dependent") << (t.note.empty() ? "" : "  (" + t.note + ")")
                  << "\n    source: " << t.source << " (as of " << t.as_of << ")\n";
    }
    return k_exit_ok;
  }
  platform::install_interrupt_handler();
  if (options->serve) {
    auto served = bench::serve_network(options->serve_options, [&](std::uint16_t port) {
      if (options->common.json) {
        // One JSON line as soon as the port is known, so that a script can read it (--port 0).
        json::Value doc = json::Value::object();
        doc["listening"] = options->serve_options.bind;
        doc["port"] = static_cast<std::int64_t>(port);
        context.out << json::dump(doc) << std::endl;
        return;
      }
      context.out << "gpuhost bench network: listening on " << options->serve_options.bind << ":" << port
                  << " (Ctrl-C to stop)" << std::endl;
    });
    if (!served) return report_error(context.err, served.error().message, "pick another --port", k_exit_error);
    return platform::interrupt_requested() ? k_exit_interrupted : k_exit_ok;
  }

  bench::BenchReport report;
  report.parts = options->parts;
  report.mode = options->mode;
  std::optional<Error> fatal;
  {
    ProgressLine line("gpuhost bench");
    ProgressBar progress(line);
    for (const auto& part : options->parts) {
      if (platform::interrupt_requested()) {
        report.interrupted = true;
        break;
      }
      Result<void> done;
      if (part == "disk") {
        done = bench::run_disk(options->disk, report, progress);
      } else if (part == "memory") {
        done = bench::run_memory(options->memory, report, progress);
      } else if (part == "network") {
        done = bench::run_network(options->network, report, progress);
      } else if (part == "gpu") {
        auto knowledge = knowledge::load_knowledge({});
        if (!knowledge) {
          done = std::unexpected(knowledge.error());
        } else {
          done = bench::run_gpu(options->gpu, knowledge->gpus, report, progress);
        }
      }
      if (!done) {
        // One part failing to run does not stop the others; the exit code still says so.
        if (!fatal) fatal = done.error();
        report.unavailable.push_back({part, done.error().message});
      }
    }
    line.stop();
  }

  std::string json_text;
  if (options->common.json || !options->save.empty()) json_text = json::dump(bench::to_json(report), 2) + "\n";
  if (!options->save.empty())
    if (auto saved = platform::write_file_atomic(options->save, json_text); !saved)
      return report_error(context.err, "saving the result: " + saved.error().message, "", k_exit_error);
  if (options->common.json)
    context.out << json_text;
  else
    render(context.out, report, TerminalStyle::for_stdout(options->common.color));
  if (report.interrupted) return k_exit_interrupted;
  if (fatal) return report_error(context.err, fatal->message, "", k_exit_error);
  // A GPU that was asked for by name and cannot be measured is no success ("0 passed").
  if (options->parts == std::vector<std::string>{"gpu"} && !report.unavailable.empty())
    return report_error(context.err, "gpu unavailable: " + report.unavailable.front().reason, "", k_exit_error);
  return report.count(bench::Status::fail) ? k_exit_findings : k_exit_ok;
}

}  // namespace gpuhost::cli
