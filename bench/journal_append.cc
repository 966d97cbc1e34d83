// Benchmark: what one journal record costs the supervisor as a job's journal grows (the issue's
// target: flat over 10,000 records). Each append is JobRecorder::record: frame, write, fsync,
// fold the one record (fold_more). The anchor, in the same run and on the same file system: the
// way the supervisor used to keep its state, re-folding the whole journal after every append
// (fold_journal of all records), which grows with the journal.
// Run: build/linux/bench/journal_append [records] [dir]   (default 10000, the system temp dir)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "supervise/job_recorder.h"

using namespace gpuhost;
using Clock = std::chrono::steady_clock;

namespace {

json::Value fields_for(int i) {
  // What a long job journals most: progress, commits with their hashes, retention.
  json::Value f = json::Value::object();
  switch (i % 4) {
    case 0:
    case 1: f["step"] = i; break;
    case 2:
      f["path"] = "/data/run/ck/ckpt-" + std::to_string(i) + ".pt";
      f["snapshot"] = "";
      f["format"] = "torch_zip";
      f["size_bytes"] = 1288490189;
      f["content_hash"] = "xxh3-128:0123456789abcdef0123456789abcdef";
      f["step"] = i;
      f["modified"] = "2026-12-02T00:00:00.000Z";
      break;
    default: f["id"] = "ck-" + std::to_string(i - 1); f["reason"] = "retention (keep 3)"; break;
  }
  return f;
}

const char* type_for(int i) {
  switch (i % 4) {
    case 0:
    case 1: return "progress";
    case 2: return "checkpoint_committed";
    default: return "checkpoint_retired";
  }
}

// Appends `count` records in blocks of `block`; prints the mean microseconds per append of each
// block. `refold`: also fold the whole journal after each append (the old way).
void run(const std::filesystem::path& dir, int count, int block, bool refold) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto journal = job::Journal::open(dir / "journal.jsonl");
  if (!journal) {
    std::fprintf(stderr, "%s\n", journal.error().message.c_str());
    std::exit(1);
  }
  supervise::JobRecorder recorder(std::move(*journal), {});
  std::printf("%-28s", refold ? "re-fold all (old)" : "fold one record (now)");
  double first = 0, last = 0;
  for (int start = 0; start < count; start += block) {
    const auto began = Clock::now();
    for (int i = start; i < start + block && i < count; ++i) {
      recorder.record(type_for(i), fields_for(i));
      if (refold) {
        job::JobState state = job::fold_journal(recorder.contents().records);
        if (state.checkpoints.size() > static_cast<std::size_t>(count)) std::abort();  // keep it
      }
    }
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - began).count() / block;
    if (start == 0) first = us;
    last = us;
    std::printf(" %7.1f", us);
  }
  std::printf("   last/first block: %.2fx\n", last / first);
}

}  // namespace

int main(int argc, char** argv) {
  const int count = argc > 1 ? std::atoi(argv[1]) : 10000;
  const std::filesystem::path base =
      argc > 2 ? std::filesystem::path(argv[2]) : std::filesystem::temp_directory_path() / "gpuhost-journal-bench";
  const int block = count / 10 > 0 ? count / 10 : 1;
  std::printf("journal append, microseconds per record, blocks of %d records (fsync each), in %s\n", block,
              base.string().c_str());
  run(base / "now", count, block, false);
  run(base / "old", count, block, true);
  std::filesystem::remove_all(base);
  return 0;
}
