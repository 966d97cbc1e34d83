#include "supervise/checkpoint_scanner.h"

#include <gtest/gtest.h>

#include "supervise/checkpoint_fixtures.h"

namespace gpuhost::supervise {
namespace {

namespace fs = std::filesystem;
using namespace fixtures;
using std::chrono::milliseconds;
using std::chrono::seconds;

class Scanner : public ::testing::Test {
 protected:
  ScratchDir m_scratch{"scanner-test"};
  const std::chrono::steady_clock::time_point t0 =
      std::chrono::steady_clock::time_point{} + std::chrono::hours(1);

  fs::path dir() const { return m_scratch.path(); }

  ScannerOptions options(std::optional<std::string> marker = std::nullopt) const {
    ScannerOptions o;
    o.location = dir();
    o.settle = seconds(2);
    o.marker = std::move(marker);
    return o;
  }

  static ScanResult scan(CheckpointScanner& scanner, std::chrono::steady_clock::time_point now) {
    auto result = scanner.scan(now);
    EXPECT_TRUE(result) << result.error().message;
    return result.value_or(ScanResult{});
  }

  static std::vector<std::string> names(const std::vector<CheckpointVerdict>& verdicts) {
    std::vector<std::string> out;
    for (const auto& v : verdicts) out.push_back(detail_name(v.path));
    return out;
  }
  static std::string detail_name(const fs::path& p) {
    auto text = p.filename().u8string();
    return std::string(text.begin(), text.end());
  }

  fs::path write_hf_checkpoint(const std::string& name, int step) {
    fs::path p = dir() / name;
    write_bytes(p / "trainer_state.json", "{\"global_step\": " + std::to_string(step) + "}");
    write_bytes(p / "model.safetensors", make_small_safetensors());
    write_bytes(p / "optimizer.pt", make_torch_zip("optimizer"));
    return p;
  }

  static void shift_mtime(const fs::path& p, std::chrono::seconds by) {
    fs::last_write_time(p, fs::last_write_time(p) + by);
  }
};

// --fresh: what was there before is never reported as it is, but a rewrite is, even with the
// same bytes (the new run wrote it).
TEST_F(Scanner, IgnorePresentReportsOnlyWhatIsWrittenAgain) {
  write_bytes(dir() / "ckpt-000005.pt", make_torch_zip("five"));
  write_bytes(dir() / "ckpt-000010.pt", make_torch_zip("ten"));
  CheckpointScanner scanner(options());
  scanner.ignore_present();
  EXPECT_TRUE(scan(scanner, t0).ready.empty());
  EXPECT_TRUE(scan(scanner, t0 + seconds(10)).ready.empty());
  write_bytes(dir() / "ckpt-000005.pt", make_torch_zip("five"));  // the same bytes, written anew
  shift_mtime(dir() / "ckpt-000005.pt", seconds(5));
  (void)scan(scanner, t0 + seconds(11));
  ScanResult r = scan(scanner, t0 + seconds(14));
  EXPECT_EQ(names(r.ready), std::vector<std::string>{"ckpt-000005.pt"});
  EXPECT_EQ(r.ready[0].step, 5);
  EXPECT_TRUE(scan(scanner, t0 + seconds(20)).ready.empty());
}

TEST_F(Scanner, MissingLocationIsNotAnError) {
  ScannerOptions o = options();
  o.location = dir() / "not-yet";
  CheckpointScanner scanner(o);
  ScanResult r = scan(scanner, t0);
  EXPECT_TRUE(r.ready.empty());
  EXPECT_TRUE(r.rejected.empty());
}

TEST_F(Scanner, ReportsACheckpointOnceAfterItHasSettled) {
  write_hf_checkpoint("checkpoint-100", 100);
  CheckpointScanner scanner(options());
  EXPECT_TRUE(scan(scanner, t0).ready.empty());
  EXPECT_TRUE(scan(scanner, t0 + milliseconds(1999)).ready.empty());
  ScanResult r = scan(scanner, t0 + seconds(2));
  ASSERT_EQ(r.ready.size(), 1u);
  EXPECT_EQ(r.ready[0].format, CheckpointFormat::hf_trainer_dir);
  EXPECT_EQ(r.ready[0].step, 100);
  EXPECT_FALSE(r.ready[0].content_hash.empty());
  EXPECT_TRUE(scan(scanner, t0 + seconds(3)).ready.empty());
  EXPECT_TRUE(scan(scanner, t0 + seconds(60)).ready.empty());
}

TEST_F(Scanner, AChangeRestartsTheSettleTime) {
  fs::path p = write_hf_checkpoint("checkpoint-100", 100);
  CheckpointScanner scanner(options());
  EXPECT_TRUE(scan(scanner, t0).ready.empty());
  write_bytes(p / "scheduler.pt", make_torch_zip("scheduler"));  // still being written
  EXPECT_TRUE(scan(scanner, t0 + milliseconds(1500)).ready.empty());
  EXPECT_TRUE(scan(scanner, t0 + milliseconds(2500)).ready.empty());
  ScanResult r = scan(scanner, t0 + milliseconds(3500));
  ASSERT_EQ(r.ready.size(), 1u);
  ASSERT_EQ(r.ready[0].files.size(), 4u);
}

TEST_F(Scanner, ReportsAFileRewrittenInPlaceAgain) {
  fs::path p = dir() / "last.pt";
  write_bytes(p, make_zip({{"last/data.pkl", pickle_bytes()},
                           {"last/data/0", pattern_bytes(500, 1)},
                           {"last/version", "3\n"}}));
  ScannerOptions o = options();
  o.location = p;  // YOLO's weights/last.pt
  CheckpointScanner scanner(o);
  scan(scanner, t0);
  ScanResult first = scan(scanner, t0 + seconds(2));
  ASSERT_EQ(first.ready.size(), 1u);
  EXPECT_EQ(first.ready[0].path, p);

  // Same size, new tensor values, a later mtime: the next epoch's save.
  write_bytes(p, make_zip({{"last/data.pkl", pickle_bytes()},
                           {"last/data/0", pattern_bytes(500, 2)},
                           {"last/version", "3\n"}}));
  shift_mtime(p, seconds(10));
  EXPECT_TRUE(scan(scanner, t0 + seconds(3)).ready.empty());
  ScanResult second = scan(scanner, t0 + seconds(5));
  ASSERT_EQ(second.ready.size(), 1u);
  EXPECT_NE(second.ready[0].content_hash, first.ready[0].content_hash);
}

TEST_F(Scanner, DoesNotReportATouchedButIdenticalFileAgain) {
  fs::path p = dir() / "last.pt";
  write_bytes(p, make_torch_zip("last"));
  CheckpointScanner scanner(options());
  scan(scanner, t0);
  ASSERT_EQ(scan(scanner, t0 + seconds(2)).ready.size(), 1u);
  shift_mtime(p, seconds(10));
  scan(scanner, t0 + seconds(3));
  EXPECT_TRUE(scan(scanner, t0 + seconds(6)).ready.empty());
}

TEST_F(Scanner, UsesOnlySizeAndMtimeForWhatItHasReported) {
  // Bytes changed behind the scanner's back with size and mtime restored are not noticed: proof
  // that a reported checkpoint is not read again on every scan.
  fs::path p = dir() / "model.pt";
  write_bytes(
      p,
      make_zip({{"m/data.pkl", pickle_bytes()}, {"m/data/0", pattern_bytes(300, 1)}, {"m/version", "3\n"}}));
  CheckpointScanner scanner(options());
  scan(scanner, t0);
  ASSERT_EQ(scan(scanner, t0 + seconds(2)).ready.size(), 1u);
  const auto mtime = fs::last_write_time(p);
  write_bytes(
      p,
      make_zip({{"m/data.pkl", pickle_bytes()}, {"m/data/0", pattern_bytes(300, 2)}, {"m/version", "3\n"}}));
  fs::last_write_time(p, mtime);
  EXPECT_TRUE(scan(scanner, t0 + seconds(10)).ready.empty());
}

TEST_F(Scanner, RejectsASettledBrokenCheckpointOncePerChange) {
  fs::path p = dir() / "epoch=1-step=50.ckpt";
  std::string bytes = make_torch_zip("epoch=1-step=50");
  write_bytes(p, bytes.substr(0, bytes.size() / 2));
  CheckpointScanner scanner(options());
  scan(scanner, t0);
  ScanResult r = scan(scanner, t0 + seconds(2));
  EXPECT_TRUE(r.ready.empty());
  ASSERT_EQ(r.rejected.size(), 1u);
  EXPECT_NE(r.rejected[0].problem.find("end-of-central-directory"), std::string::npos)
      << r.rejected[0].problem;
  EXPECT_TRUE(scan(scanner, t0 + seconds(5)).rejected.empty());

  write_bytes(p, bytes);  // the trainer finished it after all
  scan(scanner, t0 + seconds(6));
  ScanResult fixed = scan(scanner, t0 + seconds(8));
  ASSERT_EQ(fixed.ready.size(), 1u);
  EXPECT_EQ(fixed.ready[0].step, 50);
}

TEST_F(Scanner, IgnoresTempFilesLogsAndConfiguredNames) {
  write_bytes(dir() / "model.pt.tmp", make_torch_zip());
  write_bytes(dir() / "model.pt.partial", make_torch_zip());
  write_bytes(dir() / ".hidden.pt", make_torch_zip());
  write_bytes(dir() / "~lock.pt", make_torch_zip());
  write_hf_checkpoint("tmp-checkpoint-300", 300);
  write_bytes(dir() / "runs" / "events.out.tfevents.1", "log");
  write_bytes(dir() / "train.log", "log");
  write_bytes(dir() / "config.json", "{}");
  write_bytes(dir() / "training_args.bin", make_torch_zip("training_args"));
  write_bytes(dir() / "best.pt", make_torch_zip("best"));
  write_bytes(dir() / "global_step500" / "mp_rank_00_model_states.pt", make_torch_zip("m"));
  write_bytes(dir() / "1200" / "state.msgpack", "orbax-ish");
  write_bytes(dir() / "last.pt", make_torch_zip("last"));
  ScannerOptions o = options();
  o.ignore = {"best*"};
  CheckpointScanner scanner(o);
  scan(scanner, t0);
  ScanResult r = scan(scanner, t0 + seconds(2));
  std::vector<std::string> ready = names(r.ready);
  std::sort(ready.begin(), ready.end());
  EXPECT_EQ(ready, (std::vector<std::string>{"1200", "global_step500", "last.pt"}));
  EXPECT_TRUE(r.rejected.empty());
}

TEST_F(Scanner, WaitsForTheMarker) {
  write_bytes(dir() / "weights.npz", "custom format");
  write_bytes(dir() / "model.pt", make_torch_zip("model"));
  CheckpointScanner scanner(options(".done"));
  scan(scanner, t0);
  EXPECT_TRUE(scan(scanner, t0 + seconds(5)).ready.empty());
  write_bytes(dir() / "model.pt.done", "");
  ScanResult r = scan(scanner, t0 + seconds(6));
  EXPECT_EQ(names(r.ready), std::vector<std::string>{"model.pt"});
  write_bytes(dir() / "weights.npz.done", "");
  r = scan(scanner, t0 + seconds(7));
  EXPECT_EQ(names(r.ready), std::vector<std::string>{"weights.npz"});  // with a marker, any file counts
  EXPECT_TRUE(scan(scanner, t0 + seconds(20)).ready.empty());          // markers are never candidates
}

TEST_F(Scanner, WaitsForAMarkerInsideAFolder) {
  fs::path p = write_hf_checkpoint("checkpoint-100", 100);
  CheckpointScanner scanner(options("COMPLETED"));
  scan(scanner, t0);
  EXPECT_TRUE(scan(scanner, t0 + seconds(5)).ready.empty());
  write_bytes(p / "COMPLETED", "");
  // An empty marker may leave size and newest mtime (coarse clock ticks) as they were, so the
  // folder is reported at the first or the second scan: once.
  std::size_t reported = scan(scanner, t0 + seconds(6)).ready.size();
  reported += scan(scanner, t0 + seconds(8)).ready.size();
  EXPECT_EQ(reported, 1u);
}

TEST_F(Scanner, MarkSeenSkipsWhatIsCommittedAndForgetUndoesIt) {
  fs::path p = write_hf_checkpoint("checkpoint-100", 100);
  auto verdict = validate_checkpoint(p, ValidationDepth::structure);
  ASSERT_TRUE(verdict && verdict->valid);
  CheckpointScanner scanner(options());
  scanner.mark_seen(p, *verdict);
  scan(scanner, t0);
  EXPECT_TRUE(scan(scanner, t0 + seconds(5)).ready.empty());
  scanner.forget(p);
  scan(scanner, t0 + seconds(6));
  EXPECT_EQ(scan(scanner, t0 + seconds(8)).ready.size(), 1u);
}

TEST_F(Scanner, ADeletedAndRecreatedCheckpointIsNewAgain) {
  fs::path p = dir() / "step_10.pt";
  write_bytes(p, make_torch_zip("step_10"));
  CheckpointScanner scanner(options());
  scan(scanner, t0);
  ASSERT_EQ(scan(scanner, t0 + seconds(2)).ready.size(), 1u);
  fs::remove(p);
  scan(scanner, t0 + seconds(3));
  write_bytes(p, make_torch_zip("step_10"));
  scan(scanner, t0 + seconds(4));
  EXPECT_EQ(scan(scanner, t0 + seconds(6)).ready.size(), 1u);
}

TEST_F(Scanner, ReportsOldestFirstAndNoticesChangesDeepInsideFolders) {
  fs::path newer = write_hf_checkpoint("checkpoint-200", 200);
  fs::path older = write_hf_checkpoint("checkpoint-100", 100);
  for (const auto& f : fs::recursive_directory_iterator(older)) shift_mtime(f.path(), seconds(-100));
  CheckpointScanner scanner(options());
  scan(scanner, t0);
  ScanResult r = scan(scanner, t0 + seconds(2));
  EXPECT_EQ(names(r.ready), (std::vector<std::string>{"checkpoint-100", "checkpoint-200"}));

  write_bytes(newer / "model.safetensors", make_safetensors({{"w", "F32", {4}, 16}}));
  scan(scanner, t0 + seconds(3));
  EXPECT_EQ(names(scan(scanner, t0 + seconds(5)).ready), std::vector<std::string>{"checkpoint-200"});
}

TEST_F(Scanner, WaitsForTheFirstFileInANewFolderAndSkipsLinks) {
  fs::create_directories(dir() / "checkpoint-100");
  CheckpointScanner scanner(options());
  scan(scanner, t0);
  ScanResult r = scan(scanner, t0 + seconds(10));
  EXPECT_TRUE(r.ready.empty());
  EXPECT_TRUE(r.rejected.empty());  // not "no trainer_state.json": nothing was written yet

  write_bytes(dir() / "epoch=0-step=10.ckpt", make_torch_zip("epoch=0-step=10"));
  std::error_code ec;
  fs::create_symlink(dir() / "epoch=0-step=10.ckpt", dir() / "last.ckpt", ec);
  if (ec) GTEST_SKIP() << "no symbolic links here: " << ec.message();
  scan(scanner, t0 + seconds(11));
  EXPECT_EQ(names(scan(scanner, t0 + seconds(13)).ready), std::vector<std::string>{"epoch=0-step=10.ckpt"});
}

TEST_F(Scanner, ZeroSettleValidatesOnFirstSight) {
  write_bytes(dir() / "last.pt", make_torch_zip("last"));
  ScannerOptions o = options();
  o.settle = milliseconds(0);
  CheckpointScanner scanner(o);
  EXPECT_EQ(scan(scanner, t0).ready.size(), 1u);
}

}  // namespace
}  // namespace gpuhost::supervise
