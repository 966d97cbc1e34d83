#include "bench/disk.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "bench/disk_tiers.h"
#include "bench/verdict.h"
#include "platform/direct_file.h"
#include "platform/files.h"
#include "platform/interrupt.h"
#include "platform/process.h"

namespace gpuhost::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t k_block = 4096;
constexpr std::size_t k_large_block = 1u << 20;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string mib(std::uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// The test file: removed when this goes out of scope, whatever happened.
class TestFile {
 public:
  explicit TestFile(std::filesystem::path path) : m_path(std::move(path)) {}
  TestFile(const TestFile&) = delete;
  TestFile& operator=(const TestFile&) = delete;
  ~TestFile() {
    std::error_code ec;
    std::filesystem::remove(m_path, ec);
  }
  [[nodiscard]] const std::filesystem::path& path() const { return m_path; }

 private:
  std::filesystem::path m_path;
};

// xorshift64*: cheap, per-thread, good enough for spreading offsets.
struct Random {
  std::uint64_t state;
  std::uint64_t next() {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 2685821657736338717ull;
  }
};

struct PhaseResult {
  std::uint64_t operations = 0;
  std::uint64_t bytes = 0;
  double seconds = 0;
  std::vector<double> latencies_us;  // only when asked
  std::optional<Error> error;
};

enum class Access { sequential_read, sequential_write, random_read, random_write };

// Runs `threads` workers until `seconds` pass (or, for a sequential write, until each has written
// its region once), a worker error, or Ctrl-C.
PhaseResult run_phase(const platform::DirectFile& file, std::uint64_t file_bytes, Access access, int threads,
                      double seconds, bool record_latency, ProgressSink& progress, const std::string& step) {
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> operations{0}, bytes{0};
  std::vector<std::vector<double>> latencies(static_cast<std::size_t>(threads));
  std::vector<std::optional<Error>> errors(static_cast<std::size_t>(threads));
  bool sequential = access == Access::sequential_read || access == Access::sequential_write;
  bool write = access == Access::sequential_write || access == Access::random_write;
  std::size_t block = sequential ? k_large_block : k_block;
  std::uint64_t region = file_bytes / static_cast<std::uint64_t>(threads) / block * block;
  std::atomic<int> finished{0};
  auto start = Clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      platform::AlignedBuffer buffer(block);
      std::memset(buffer.data(), 0x5a + t, buffer.size());
      Random random{0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(t + 1)};
      std::uint64_t blocks = file_bytes / block;
      std::uint64_t base = region * static_cast<std::uint64_t>(t);
      std::uint64_t position = 0;
      auto& my_latency = latencies[static_cast<std::size_t>(t)];
      while (!stop.load(std::memory_order_relaxed)) {
        std::uint64_t offset;
        if (sequential) {
          if (position >= region) {
            if (access == Access::sequential_write) break;
            position = 0;
          }
          offset = base + position;
          position += block;
        } else {
          offset = (random.next() % blocks) * block;
        }
        auto begin = record_latency ? Clock::now() : Clock::time_point{};
        auto done = write ? file.write_at(buffer.data(), block, offset) : file.read_at(buffer.data(), block, offset);
        if (!done) {
          errors[static_cast<std::size_t>(t)] = done.error();
          stop = true;
          break;
        }
        if (record_latency) my_latency.push_back(std::chrono::duration<double, std::micro>(Clock::now() - begin).count());
        operations.fetch_add(1, std::memory_order_relaxed);
        bytes.fetch_add(block, std::memory_order_relaxed);
      }
      finished.fetch_add(1);
    });
  }
  while (finished.load() < threads) {
    double elapsed = seconds_since(start);
    if (access == Access::sequential_write)
      progress.report(step, static_cast<double>(bytes.load()) / static_cast<double>(region * static_cast<std::uint64_t>(threads)));
    else
      progress.report(step, std::min(1.0, elapsed / seconds));
    if ((access != Access::sequential_write && elapsed >= seconds) || platform::interrupt_requested()) stop = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(access == Access::sequential_write ? 20 : 5));
  }
  for (auto& w : workers) w.join();
  PhaseResult result;
  result.seconds = seconds_since(start);
  result.operations = operations.load();
  result.bytes = bytes.load();
  for (auto& e : errors)
    if (e && !result.error) result.error = e;
  for (auto& l : latencies) result.latencies_us.insert(result.latencies_us.end(), l.begin(), l.end());
  return result;
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  auto index = static_cast<std::size_t>(std::ceil(p * static_cast<double>(values.size()))) - 1;
  return values[std::min(index, values.size() - 1)];
}

}  // namespace

std::uint64_t disk_space_needed(std::uint64_t file_bytes) {
  // 10% or at least 256 MiB left over, so the test never fills the filesystem.
  return file_bytes + std::max<std::uint64_t>(file_bytes / 10, 256ull << 20);
}

Result<void> check_disk_target(const DiskOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_directory(options.directory, ec))
    return make_error(ErrorCode::invalid_argument, "disk test directory " + options.directory.string() + ": not a directory");
  if (auto ro = platform::filesystem_is_read_only(options.directory); ro && *ro)
    return make_error(ErrorCode::permission_denied,
                      "disk test directory " + options.directory.string() + ": the filesystem is mounted read-only");
  auto space = GPUHOST_TRY(platform::disk_space(options.directory));
  std::uint64_t needed = disk_space_needed(options.file_bytes);
  if (space.available_bytes < needed)
    return make_error(ErrorCode::invalid_argument,
                      "disk test directory " + options.directory.string() + ": needs " + mib(needed) + " free (a " +
                          mib(options.file_bytes) + " test file plus margin), only " + mib(space.available_bytes) +
                          " available; free space or pass a smaller --disk-size-mib");
  return {};
}

void judge_random_read_iops(Measurement& m, const DiskOptions& options) {
  const DiskTier* tier = options.tier_key.empty() ? nullptr : find_disk_tier(options.tier_key);
  std::optional<double> tier_iops = options.provisioned_iops;
  std::string tier_basis;
  if (tier && !tier_iops) tier_iops = tier->iops(options.size_gib);
  if (tier) tier_basis = tier->name + ": " + tier->source;
  if (options.provisioned_iops) tier_basis = "provisioned IOPS given with --disk-iops";
  if (tier_iops) {
    // The disk's own tier is the sharper expectation; the seed rule is reported as a note.
    judge_at_least(m, *tier_iops * k_tier_iops_fraction,
                   ">= " + std::to_string(static_cast<long long>(*tier_iops * k_tier_iops_fraction)) +
                       " IOPS (90% of the tier's " + std::to_string(static_cast<long long>(*tier_iops)) + ")",
                   tier_basis + "; band: 90% of the tier's IOPS (gpuhost's acceptance band)");
    if (m.value < k_seed_random_iops)
      m.notes.push_back("below the 10K IOPS a training data disk should have (gpuhost's rule for training data disks); " +
                        std::string(tier && !tier->note.empty() ? tier->note : "choose a faster tier"));
  } else {
    judge_at_least(m, k_seed_random_iops, ">= 10000 IOPS",
                   "gpuhost's rule for a training data disk: at least 10K random read IOPS");
    if (tier && tier->iops_per_gib > 0 && !options.size_gib)
      m.notes.push_back("tier " + tier->key + " depends on the disk size: pass --disk-gib");
  }
}

Result<void> run_disk(const DiskOptions& options, BenchReport& report, ProgressSink& progress) {
  if (auto step_ = check_disk_target(options); !step_) return std::unexpected(step_.error());
  std::uint64_t file_bytes = options.file_bytes / k_large_block * k_large_block;
  if (file_bytes < k_large_block * static_cast<std::uint64_t>(options.sequential_threads))
    return make_error(ErrorCode::invalid_argument, "disk test file too small");
  TestFile test_file(options.directory / ("gpuhost-bench-" + std::to_string(platform::current_process_id()) + ".tmp"));
  auto file = GPUHOST_TRY(platform::DirectFile::open(test_file.path(), {platform::IoMode::direct, true}));
  if (auto reserved = file.reserve(file_bytes); !reserved) return std::unexpected(reserved.error());
  std::vector<std::string> cache_note;
  if (file.mode() == platform::IoMode::buffered)
    cache_note.push_back("this filesystem refused direct I/O; buffered I/O was used, so the number includes page-cache effects");

  auto add = [&](std::string id, std::string title, double value, std::string unit) -> Measurement& {
    Measurement m;
    m.id = std::move(id);
    m.title = std::move(title);
    m.value = value;
    m.unit = std::move(unit);
    m.notes = cache_note;
    report.measurements.push_back(std::move(m));
    return report.measurements.back();
  };
  auto check = [&](const PhaseResult& r) -> Result<bool> {
    if (r.error) return std::unexpected(*r.error);
    if (platform::interrupt_requested()) {
      report.interrupted = true;
      return false;
    }
    return true;
  };
  std::string seq_threads = std::to_string(options.sequential_threads);
  std::string rnd_threads = std::to_string(options.random_threads);

  auto write = run_phase(file, file_bytes, Access::sequential_write, options.sequential_threads, 0, false, progress,
                         "sequential write (fills the " + mib(file_bytes) + " test file)");
  if (auto flushed = file.sync(); !flushed && !write.error) write.error = flushed.error();
  if (!GPUHOST_TRY(check(write))) return {};
  add("disk.seq_write_mbps", "sequential write, 1 MiB blocks, " + seq_threads + " threads",
      static_cast<double>(write.bytes) / write.seconds / 1e6, "MB/s");

  auto read = run_phase(file, file_bytes, Access::sequential_read, options.sequential_threads, options.seconds_per_phase,
                        false, progress, "sequential read");
  if (!GPUHOST_TRY(check(read))) return {};
  add("disk.seq_read_mbps", "sequential read, 1 MiB blocks, " + seq_threads + " threads",
      static_cast<double>(read.bytes) / read.seconds / 1e6, "MB/s");

  auto rread = run_phase(file, file_bytes, Access::random_read, options.random_threads, options.seconds_per_phase, false,
                         progress, "4 KiB random read");
  if (!GPUHOST_TRY(check(rread))) return {};
  judge_random_read_iops(add("disk.randread_iops", "4 KiB random read, queue depth " + rnd_threads + " (threads)",
                             static_cast<double>(rread.operations) / rread.seconds, "IOPS"),
                         options);

  auto rwrite = run_phase(file, file_bytes, Access::random_write, options.random_threads, options.seconds_per_phase,
                          false, progress, "4 KiB random write");
  if (!GPUHOST_TRY(check(rwrite))) return {};
  add("disk.randwrite_iops", "4 KiB random write, queue depth " + rnd_threads + " (threads)",
      static_cast<double>(rwrite.operations) / rwrite.seconds, "IOPS");

  auto latency = run_phase(file, file_bytes, Access::random_read, 1, options.seconds_per_phase / 2, true, progress,
                           "4 KiB read latency, queue depth 1");
  if (!GPUHOST_TRY(check(latency))) return {};
  double mean = 0;
  for (double l : latency.latencies_us) mean += l;
  if (!latency.latencies_us.empty()) mean /= static_cast<double>(latency.latencies_us.size());
  add("disk.read_latency_us", "4 KiB random read latency, queue depth 1, mean", mean, "us");
  add("disk.read_latency_p99_us", "4 KiB random read latency, queue depth 1, 99th percentile",
      percentile(latency.latencies_us, 0.99), "us");
  return {};
}

}  // namespace gpuhost::bench
