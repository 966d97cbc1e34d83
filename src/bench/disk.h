#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "base/error.h"
#include "bench/result.h"

namespace gpuhost::bench {

// The disk test: sequential 1 MiB write (filling the test file) and read, 4 KiB random read and
// write with `threads` threads each keeping one synchronous request in flight (queue depth =
// threads; this is fio's psync engine with numjobs=threads, chosen over libaio/io_uring so the
// same code runs on Windows), then 4 KiB random read latency at queue depth 1.
struct DiskOptions {
  std::filesystem::path directory;  // where the test file goes
  std::uint64_t file_bytes = 1ull << 30;
  double seconds_per_phase = 4;      // sequential read, random read/write, latency
  int random_threads = 32;           // queue depth of the random phases
  int sequential_threads = 4;        // each streams its own 1/N of the file
  std::string tier_key;              // data/disk_tiers.json key, "" when unknown
  std::optional<double> size_gib;    // the disk's size, for size-dependent tiers
  std::optional<double> provisioned_iops;  // overrides the tier's baseline
};

// Space the test needs on the filesystem: the file plus a margin so the test never fills a disk.
[[nodiscard]] std::uint64_t disk_space_needed(std::uint64_t file_bytes);

// Checks the directory before writing anything: exists, writable filesystem, enough space.
// invalid_argument / permission_denied with what is needed.
[[nodiscard]] Result<void> check_disk_target(const DiskOptions& options);

// Runs the test; appends measurements to `report`. The test file is removed on every path out,
// including Ctrl-C (platform::interrupt_requested stops the phase; report.interrupted is set).
[[nodiscard]] Result<void> run_disk(const DiskOptions& options, BenchReport& report, ProgressSink& progress);

// Adds the verdicts of the random-read IOPS measurement (seed rule, tier) — pure, for tests.
void judge_random_read_iops(Measurement& m, const DiskOptions& options);

}  // namespace gpuhost::bench
