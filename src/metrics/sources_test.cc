#include "metrics/sources.h"

#include <bit>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metrics/tfevents.h"

namespace gpuhost::metrics {
namespace {

namespace fs = std::filesystem;

// A scratch folder removed on destruction.
class ScratchDir {
 public:
  ScratchDir() {
    static std::mt19937_64 random{std::random_device{}()};
    m_path = fs::temp_directory_path() / ("gpuhost-sources-test-" + std::to_string(random()));
    fs::create_directories(m_path);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(m_path, ec);
  }
  [[nodiscard]] const fs::path& path() const { return m_path; }

 private:
  fs::path m_path;
};

void write_text(const fs::path& path, const std::string& text, std::ios::openmode mode = std::ios::trunc) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | mode);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
}
void append_text(const fs::path& path, const std::string& text) {
  write_text(path, text, std::ios::app);
}

// An Event{wall_time, step, summary{value{tag, simple_value}}} record (field numbers from
// tensorflow/tensorboard tensorboard/compat/proto/event.proto and summary.proto).
std::string scalar_record(const std::string& tag, float value, std::int64_t step) {
  auto varint = [](std::uint64_t v) {
    std::string out;
    do {
      unsigned char b = v & 0x7F;
      v >>= 7;
      out.push_back(static_cast<char>(v ? b | 0x80 : b));
    } while (v);
    return out;
  };
  auto le = [](std::uint64_t v, int width) {
    std::string out;
    for (int i = 0; i < width; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
    return out;
  };
  std::string val = "\x0a" + varint(tag.size()) + tag + "\x15" + le(std::bit_cast<std::uint32_t>(value), 4);
  std::string summary = "\x0a" + varint(val.size()) + val;
  std::string event = "\x09" + le(std::bit_cast<std::uint64_t>(1700000000.0), 8) + "\x10" +
                      varint(static_cast<std::uint64_t>(step)) + "\x2a" + varint(summary.size()) + summary;
  return frame_tf_record(event);
}

// "source:name@step=value" for each point, in order.
std::vector<std::string> describe(const std::vector<SourcedPoint>& points) {
  std::vector<std::string> out;
  for (const auto& sp : points) {
    std::ostringstream s;
    s << sp.source << ":" << sp.point.name << "@" << (sp.point.step ? std::to_string(*sp.point.step) : "-")
      << "=" << sp.point.value;
    out.push_back(s.str());
  }
  return out;
}

SourceTailerOptions options_for(const fs::path& root) {
  SourceTailerOptions options;
  options.roots = {root};
  options.rescan_every_polls = 1;
  return options;
}

void set_mtime(const fs::path& path, int seconds_from_now) {
  fs::last_write_time(path, fs::file_time_type::clock::now() + std::chrono::seconds(seconds_from_now));
}

TEST(SourceTailer, FindsEachKindOfFileAndSkipsVenvsHiddenAndDeepFolders) {
  ScratchDir dir;
  const fs::path& root = dir.path();
  write_text(root / "lightning_logs/version_0/metrics.csv", "epoch,step,train_loss\n0,9,0.5\n");
  write_text(root / "runs/detect/train/results.csv", "epoch,train/box_loss\n1,1.25\n");
  write_text(root / "runs/Jan01_host/events.out.tfevents.1700000000.host.1.0",
             scalar_record("loss", 2.0f, 3));
  write_text(root / "out/checkpoint-10/trainer_state.json",
             R"({"log_history": [{"loss": 0.75, "epoch": 0.5, "step": 10}]})");
  // Not searched: hidden folders, virtual environments by name or by pyvenv.cfg, too deep.
  write_text(root / ".git/metrics.csv", "step,x\n1,1\n");
  write_text(root / "venv/lib/results.csv", "epoch,x\n1,1\n");
  write_text(root / "node_modules/metrics.csv", "step,x\n1,1\n");
  write_text(root / "myenv/pyvenv.cfg", "home = /usr/bin\n");
  write_text(root / "myenv/lib/metrics.csv", "step,x\n1,1\n");
  write_text(root / "a/b/c/d/e/metrics.csv", "step,x\n1,1\n");
  write_text(root / "a/b/c/d/metrics.csv", "step,deep\n1,4\n");  // 4 levels down: found

  SourceTailer tailer(options_for(root));
  auto got = describe(tailer.poll());
  std::multiset<std::string> set(got.begin(), got.end());
  EXPECT_EQ(set, (std::multiset<std::string>{"metrics.csv:epoch@9=0", "metrics.csv:train_loss@9=0.5",
                                             "results.csv:train/box_loss@1=1.25", "tfevents:loss@3=2",
                                             "trainer_state:loss@10=0.75", "trainer_state:epoch@10=0.5",
                                             "metrics.csv:deep@1=4"}));
  EXPECT_TRUE(tailer.poll().empty());  // nothing new: nothing again
  EXPECT_TRUE(tailer.take_warnings().empty());
}

TEST(SourceTailer, ReadsOnlyWhatWasAppendedAndWaitsForAPartialLine) {
  ScratchDir dir;
  const fs::path csv = dir.path() / "metrics.csv";
  write_text(csv, "step,loss\r\n1,0.9\r\n");  // Python's csv module ends rows with \r\n
  SourceTailer tailer(options_for(dir.path()));
  EXPECT_EQ(describe(tailer.poll()), (std::vector<std::string>{"metrics.csv:loss@1=0.9"}));
  append_text(csv, "2,0.8\r\n3,0.");
  EXPECT_EQ(describe(tailer.poll()), (std::vector<std::string>{"metrics.csv:loss@2=0.8"}));
  append_text(csv, "7\r\n");
  EXPECT_EQ(describe(tailer.poll()), (std::vector<std::string>{"metrics.csv:loss@3=0.7"}));
  EXPECT_TRUE(tailer.poll().empty());
}

TEST(SourceTailer, ALightningRewriteWithNewColumnsDeliversOnlyTheNewRows) {
  ScratchDir dir;
  const fs::path csv = dir.path() / "lightning_logs/version_0/metrics.csv";
  write_text(csv, "epoch,step,train_loss\n0,9,0.5\n0,19,0.4\n");
  SourceTailer tailer(options_for(dir.path()));
  EXPECT_EQ(tailer.poll().size(), 4u);
  // The older CSVLogger rewrites the whole file; a new key adds a column to every row.
  write_text(csv, "epoch,step,train_loss,val_loss\n0,9,0.5,\n0,19,0.4,\n0,19,,0.45\n");
  EXPECT_EQ(describe(tailer.poll()),
            (std::vector<std::string>{"metrics.csv:epoch@19=0", "metrics.csv:val_loss@19=0.45"}));
  // Rewritten the same with one row more.
  write_text(csv, "epoch,step,train_loss,val_loss\n0,9,0.5,\n0,19,0.4,\n0,19,,0.45\n1,29,0.3,\n");
  EXPECT_EQ(describe(tailer.poll()),
            (std::vector<std::string>{"metrics.csv:epoch@29=1", "metrics.csv:train_loss@29=0.3"}));
  EXPECT_TRUE(tailer.poll().empty());
}

TEST(SourceTailer, AnUltralyticsFreshStartIsReadFromItsFirstRow) {
  ScratchDir dir;
  const fs::path csv = dir.path() / "runs/detect/train/results.csv";
  write_text(csv, "epoch,time,train/box_loss\n1,10.5,1.5\n2,20.5,1.4\n3,30.5,1.3\n");
  SourceTailer tailer(options_for(dir.path()));
  EXPECT_EQ(tailer.poll().size(), 6u);
  fs::remove(csv);  // deleted at the start of a run that does not resume
  EXPECT_TRUE(tailer.poll().empty());
  write_text(csv, "epoch,time,train/box_loss\n1,11.0,1.6\n");
  EXPECT_EQ(describe(tailer.poll()),
            (std::vector<std::string>{"results.csv:time@1=11", "results.csv:train/box_loss@1=1.6"}));
  // Grown past where the old file ended before the next look: still a new file, every row new.
  write_text(csv, "epoch,time,train/box_loss\n1,11.0,1.6\n2,21.0,1.5\n3,31.0,1.4\n4,41.0,1.3\n");
  EXPECT_EQ(tailer.poll().size(), 6u);
}

TEST(SourceTailer, ReadsEventFilesAsTheyGrowRecordByRecord) {
  ScratchDir dir;
  const fs::path events = dir.path() / "runs/x/events.out.tfevents.1700000000.host.42.0";
  const std::string first = scalar_record("train/loss", 1.0f, 1);
  const std::string second = scalar_record("train/loss", 0.5f, 2);
  write_text(events, first + second.substr(0, 10));
  SourceTailer tailer(options_for(dir.path()));
  EXPECT_EQ(describe(tailer.poll()), (std::vector<std::string>{"tfevents:train/loss@1=1"}));
  EXPECT_TRUE(tailer.poll().empty());
  append_text(events, second.substr(10));
  EXPECT_EQ(describe(tailer.poll()), (std::vector<std::string>{"tfevents:train/loss@2=0.5"}));
}

TEST(SourceTailer, ADamagedEventFileIsReportedOnceAndTheOthersGoOn) {
  ScratchDir dir;
  std::string broken = scalar_record("loss", 1.0f, 1);
  std::string lost = scalar_record("loss", 2.0f, 2);
  lost[3] ^= 0x10;  // the length: framing lost
  write_text(dir.path() / "a/events.out.tfevents.1.host.1.0", broken + lost);
  write_text(dir.path() / "b/events.out.tfevents.2.host.2.0", scalar_record("acc", 0.5f, 7));
  SourceTailer tailer(options_for(dir.path()));
  auto got = describe(tailer.poll());
  EXPECT_EQ(got.size(), 2u);
  auto warnings = tailer.take_warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("events.out.tfevents.1.host.1.0"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("byte offset " + std::to_string(broken.size())), std::string::npos)
      << warnings[0];
  append_text(dir.path() / "a/events.out.tfevents.1.host.1.0", scalar_record("loss", 3.0f, 3));
  append_text(dir.path() / "b/events.out.tfevents.2.host.2.0", scalar_record("acc", 0.6f, 8));
  EXPECT_EQ(describe(tailer.poll()), (std::vector<std::string>{"tfevents:acc@8=0.6"}));
  EXPECT_TRUE(tailer.take_warnings().empty());
}

TEST(SourceTailer, ReadsTheNewestTrainerStateAndOnlyEntriesNotDeliveredYet) {
  ScratchDir dir;
  const fs::path out = dir.path() / "output";
  auto entry = [](int step, double loss) {
    return R"({"loss": )" + std::to_string(loss) + R"(, "step": )" + std::to_string(step) + "}";
  };
  auto state = [](const std::vector<std::string>& entries) {
    std::string history;
    for (const auto& e : entries) history += (history.empty() ? "" : ", ") + e;
    return R"({"global_step": 0, "log_history": [)" + history + "]}";
  };
  write_text(out / "checkpoint-10/trainer_state.json", state({entry(10, 1.0)}));
  set_mtime(out / "checkpoint-10/trainer_state.json", -30);
  SourceTailer tailer(options_for(dir.path()));
  EXPECT_EQ(describe(tailer.poll()), (std::vector<std::string>{"trainer_state:loss@10=1"}));
  write_text(out / "checkpoint-20/trainer_state.json", state({entry(10, 1.0), entry(20, 0.5)}));
  set_mtime(out / "checkpoint-20/trainer_state.json", -20);
  EXPECT_EQ(describe(tailer.poll()), (std::vector<std::string>{"trainer_state:loss@20=0.5"}));
  write_text(out / "checkpoint-30/trainer_state.json",
             state({entry(10, 1.0), entry(20, 0.5), entry(30, 0.25)}));
  set_mtime(out / "checkpoint-30/trainer_state.json", -10);
  EXPECT_EQ(describe(tailer.poll()), (std::vector<std::string>{"trainer_state:loss@30=0.25"}));
  // Resumed from checkpoint-20: the history there continues with a re-run of step 30, then 40.
  write_text(out / "checkpoint-40/trainer_state.json",
             state({entry(10, 1.0), entry(20, 0.5), entry(30, 0.3), entry(40, 0.2)}));
  set_mtime(out / "checkpoint-40/trainer_state.json", -5);
  EXPECT_EQ(describe(tailer.poll()), (std::vector<std::string>{"trainer_state:loss@40=0.2"}));
  // A history that no longer begins with what was delivered: only the steps past the highest.
  write_text(out / "checkpoint-50/trainer_state.json",
             state({entry(10, 1.0), entry(25, 0.6), entry(50, 0.1)}));
  set_mtime(out / "checkpoint-50/trainer_state.json", -1);
  EXPECT_EQ(describe(tailer.poll()), (std::vector<std::string>{"trainer_state:loss@50=0.1"}));
  // A half-written newer file gives nothing until it is whole.
  const std::string whole = state({entry(10, 1.0), entry(25, 0.6), entry(50, 0.1), entry(60, 0.05)});
  write_text(out / "trainer_state.json", whole.substr(0, whole.size() / 2));
  EXPECT_TRUE(tailer.poll().empty());
  write_text(out / "trainer_state.json", whole);
  EXPECT_EQ(describe(tailer.poll()), (std::vector<std::string>{"trainer_state:loss@60=0.05"}));
}

TEST(SourceTailer, FollowsTheJsonLinesChannelSkippingBadLines) {
  ScratchDir dir;
  SourceTailerOptions options;
  options.jsonl_path = dir.path() / "metrics.jsonl";  // not there yet
  options.max_line_bytes = 1000;
  SourceTailer tailer(options);
  EXPECT_TRUE(tailer.poll().empty());
  write_text(options.jsonl_path,
             "{\"step\": 1, \"loss\": 0.5}\nnot json\n[1]\n{\"step\": 2, \"loss\": 0.4}\n{\"st");
  EXPECT_EQ(describe(tailer.poll()), (std::vector<std::string>{"jsonl:loss@1=0.5", "jsonl:loss@2=0.4"}));
  EXPECT_EQ(tailer.stats().malformed_lines, 2u);
  append_text(options.jsonl_path, "ep\": 3, \"loss\": 0.3}\n{\"x\": \"" + std::string(5000, 'a') +
                                      "\"}\n{\"step\": 4, \"loss\": 0.2}\n");
  EXPECT_EQ(describe(tailer.poll()), (std::vector<std::string>{"jsonl:loss@3=0.3", "jsonl:loss@4=0.2"}));
  EXPECT_EQ(tailer.stats().overlong_lines, 1u);
  // Truncated and written anew (the trainer restarted with mode "w"): every line is new.
  write_text(options.jsonl_path, "{\"step\": 1, \"loss\": 0.9}\n");
  EXPECT_EQ(describe(tailer.poll()), (std::vector<std::string>{"jsonl:loss@1=0.9"}));
}

TEST(SourceTailer, ASavedStateLetsARestartedTailerContinueWithoutRepeats) {
  ScratchDir dir;
  const fs::path root = dir.path() / "work";
  const fs::path saved = dir.path() / "state/sources.json";
  const fs::path csv = root / "lightning_logs/version_0/metrics.csv";
  const fs::path events = root / "runs/x/events.out.tfevents.1.host.1.0";
  const fs::path jsonl = root / "metrics.jsonl";
  const fs::path state = root / "out/checkpoint-10/trainer_state.json";
  write_text(csv, "step,loss\n1,0.9\n");
  write_text(events, scalar_record("loss", 1.0f, 1) + scalar_record("loss", 0.5f, 2).substr(0, 7));
  write_text(jsonl, "{\"step\": 1, \"acc\": 0.1}\n");
  write_text(state, R"({"log_history": [{"loss": 1.0, "step": 10}]})");
  SourceTailerOptions options = options_for(root);
  options.jsonl_path = jsonl;
  {
    SourceTailer first(options);
    EXPECT_EQ(first.poll().size(), 4u);
    auto saved_ok = first.save_state(saved);
    ASSERT_TRUE(saved_ok) << saved_ok.error().message;
  }  // SIGKILL here: only the saved state survives
  append_text(csv, "2,0.8\n");
  append_text(events, scalar_record("loss", 0.5f, 2).substr(7));
  append_text(jsonl, "{\"step\": 2, \"acc\": 0.2}\n");
  fs::create_directories(root / "out/checkpoint-20");
  write_text(root / "out/checkpoint-20/trainer_state.json",
             R"({"log_history": [{"loss": 1.0, "step": 10}, {"loss": 0.7, "step": 20}]})");
  set_mtime(root / "out/checkpoint-20/trainer_state.json", 5);

  SourceTailer second(options);
  ASSERT_TRUE(second.load_state(saved));
  auto got = describe(second.poll());
  std::multiset<std::string> set(got.begin(), got.end());
  EXPECT_EQ(set, (std::multiset<std::string>{"metrics.csv:loss@2=0.8", "tfevents:loss@2=0.5",
                                             "jsonl:acc@2=0.2", "trainer_state:loss@20=0.7"}));
  EXPECT_TRUE(second.poll().empty());
}

TEST(SourceTailer, LoadStateTakesAMissingFileAsAFreshStartAndRejectsGarbage) {
  ScratchDir dir;
  SourceTailer tailer(options_for(dir.path()));
  EXPECT_TRUE(tailer.load_state(dir.path() / "absent.json"));
  write_text(dir.path() / "bad.json", "{\"version\": 99}");
  auto bad = tailer.load_state(dir.path() / "bad.json");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::parse_error);
  EXPECT_NE(bad.error().message.find("bad.json"), std::string::npos) << bad.error().message;
  write_text(dir.path() / "torn.json", "{\"version\": 1, \"fi");
  EXPECT_FALSE(tailer.load_state(dir.path() / "torn.json"));
}

TEST(SourceTailer, ASearchPastTheEntryCapIsReportedOnce) {
  ScratchDir dir;
  for (int i = 0; i < 50; ++i) write_text(dir.path() / ("d" + std::to_string(i)) / "note.txt", "x");
  SourceTailerOptions options = options_for(dir.path());
  options.max_entries_per_scan = 20;
  SourceTailer tailer(options);
  (void)tailer.poll();
  (void)tailer.poll();
  auto warnings = tailer.take_warnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("more than 20 entries"), std::string::npos) << warnings[0];
}

}  // namespace
}  // namespace gpuhost::metrics
