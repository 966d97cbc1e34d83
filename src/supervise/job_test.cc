#include "supervise/job.h"

#include <fstream>

#include <gtest/gtest.h>

#include "base/json.h"
#include "platform/environment.h"
#include "platform/process.h"
#include "platform/scoped_env.h"
#include "platform/system_info.h"

namespace gpuhost::supervise {
namespace {

using namespace std::chrono_literals;

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    m_dir = std::filesystem::temp_directory_path() /
            ("gpuhost-job-test-" + std::to_string(platform::current_process_id()) + "-" +
             std::to_string(counter++));
    std::filesystem::remove_all(m_dir);
    std::filesystem::create_directories(m_dir);
  }
  void TearDown() override { std::filesystem::remove_all(m_dir); }

  std::filesystem::path write(const std::string& name, const std::string& text) {
    std::filesystem::path path = m_dir / name;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  std::filesystem::path m_dir;
};

using platform::ScopedEnv;

JobSpec sample_spec() {
  JobSpec spec;
  spec.name = "llama-lora";
  spec.command = {"python3", "train.py", "--resume", "{resume}"};
  spec.checkpoint_location = "/data/out/checkpoints";
  return spec;
}

TEST(Duration, ParsesUnitsAndPlainSeconds) {
  EXPECT_EQ(parse_duration("500ms").value_or(-1ms), 500ms);
  EXPECT_EQ(parse_duration("10s").value_or(-1ms), 10s);
  EXPECT_EQ(parse_duration("2.5s").value_or(-1ms), 2500ms);
  EXPECT_EQ(parse_duration("5m").value_or(-1ms), 5min);
  EXPECT_EQ(parse_duration("5min").value_or(-1ms), 5min);
  EXPECT_EQ(parse_duration("2h").value_or(-1ms), 2h);
  EXPECT_EQ(parse_duration("1m30s").value_or(-1ms), 90s);
  EXPECT_EQ(parse_duration("30").value_or(-1ms), 30s);
  EXPECT_EQ(parse_duration("0.25").value_or(-1ms), 250ms);
  EXPECT_EQ(parse_duration(" 0 ").value_or(-1ms), 0ms);
}

TEST(Duration, RejectsJunkAndNegatives) {
  for (const char* text : {"", "s", "-5s", "-3", "10x", "10 s", "1.2.3s", "5M", "ms10", "1e400"}) {
    auto parsed = parse_duration(text);
    EXPECT_FALSE(parsed) << text;
    if (!parsed) {
      EXPECT_EQ(parsed.error().code, ErrorCode::invalid_argument);
    }
  }
}

TEST(JobName, AcceptsPortableNamesOnly) {
  for (const char* good : {"llama-lora", "run_2.v3", "A", "console", "com10"})
    EXPECT_TRUE(job::is_valid_job_name(good)) << good;
  EXPECT_TRUE(job::is_valid_job_name(std::string(64, 'x')));
  for (const char* bad : {"", ".", "..", "with space", "a/b", "a\\b", "CON", "nul.txt", "Com1", "lpt9"})
    EXPECT_FALSE(job::is_valid_job_name(bad)) << bad;
  EXPECT_FALSE(job::is_valid_job_name(std::string(65, 'x')));
}

TEST(JobName, DefaultComesFromTheCheckpointFolderOrTheScript) {
  JobSpec spec = sample_spec();
  spec.checkpoint_location = "/data/llama-lora/checkpoints";
  EXPECT_EQ(default_job_name(spec), "llama-lora");
  spec.checkpoint_location = "runs/detect/train3/weights/last.pt";
  EXPECT_EQ(default_job_name(spec), "train3");
  spec.checkpoint_location = "sdxl lora (v2)/";
  EXPECT_EQ(default_job_name(spec), "sdxl-lora--v2");
  spec.checkpoint_location = "out/checkpoints";
  EXPECT_EQ(default_job_name(spec), "train");
  spec.command = {"torchrun", "--nproc_per_node=8", "finetune_llama.py", "--lr", "1e-4"};
  EXPECT_EQ(default_job_name(spec), "finetune_llama");
  spec.command = {"python3", "-m", "trainers.sft"};
  EXPECT_EQ(default_job_name(spec), "sft");
  spec.command = {"/usr/local/bin/yolo", "train", "data=coco8.yaml"};
  EXPECT_EQ(default_job_name(spec), "yolo");
  spec.command = {"..."};
  EXPECT_EQ(default_job_name(spec), "job");
}

TEST(JobSpecJson, RoundTripsEveryField) {
  JobSpec spec = sample_spec();
  spec.working_directory = "/work/llama";
  spec.environment = {{"HF_HOME", "/data/hf"}, {"A", "1"}};
  spec.preset = ResumePreset::lightning;
  spec.settle = 3500ms;
  spec.marker = "COMPLETED";
  spec.ignore = {"*.tmp", "tmp-*"};
  spec.keep = 3;
  spec.save_request = JobSpec::SaveRequest::both;
  spec.save_signal = platform::ChildSignal::user2;
  spec.stop_signal = platform::ChildSignal::interrupt;
  spec.stop_grace = 20s;
  spec.safety_margin = 7s;
  spec.restart.max_restarts = 4;
  spec.restart.initial_backoff = 500ms;
  spec.restart.max_backoff = 1min;
  spec.restart.backoff_factor = 1.5;
  spec.restart.crash_loop_failures = 5;
  spec.restart.crash_loop_window = 90s;
  spec.cloud = "gcp";
  spec.metadata_endpoint = "http://127.0.0.1:8080";
  spec.poll_interval = 2s;
  spec.remote = "s3://bucket/runs/?endpoint=http://127.0.0.1:9000&region=us-east-1&style=path";
  spec.encrypt = "sm4";
  spec.encryption_key_file = "/etc/gpuhost/key.hex";

  auto back = job_spec_from_json(job_spec_to_json(spec));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->name, spec.name);
  EXPECT_EQ(back->command, spec.command);
  EXPECT_EQ(back->working_directory, spec.working_directory);
  EXPECT_EQ(back->environment, spec.environment);
  EXPECT_EQ(back->checkpoint_location, spec.checkpoint_location);
  EXPECT_EQ(back->preset, spec.preset);
  EXPECT_EQ(back->settle, spec.settle);
  EXPECT_EQ(back->marker, spec.marker);
  EXPECT_EQ(back->ignore, spec.ignore);
  EXPECT_EQ(back->keep, spec.keep);
  EXPECT_EQ(back->save_request, spec.save_request);
  EXPECT_EQ(back->save_signal, spec.save_signal);
  EXPECT_EQ(back->stop_signal, spec.stop_signal);
  EXPECT_EQ(back->stop_grace, spec.stop_grace);
  EXPECT_EQ(back->safety_margin, spec.safety_margin);
  EXPECT_EQ(back->restart.max_restarts, spec.restart.max_restarts);
  EXPECT_EQ(back->restart.initial_backoff, spec.restart.initial_backoff);
  EXPECT_EQ(back->restart.max_backoff, spec.restart.max_backoff);
  EXPECT_EQ(back->restart.backoff_factor, spec.restart.backoff_factor);
  EXPECT_EQ(back->restart.crash_loop_failures, spec.restart.crash_loop_failures);
  EXPECT_EQ(back->restart.crash_loop_window, spec.restart.crash_loop_window);
  EXPECT_EQ(back->cloud, spec.cloud);
  EXPECT_EQ(back->metadata_endpoint, spec.metadata_endpoint);
  EXPECT_EQ(back->poll_interval, spec.poll_interval);
  EXPECT_EQ(back->remote, spec.remote);
  EXPECT_EQ(back->encrypt, spec.encrypt);
  EXPECT_EQ(back->encryption_key_file, spec.encryption_key_file);
}

TEST(JobSpecJson, RecordsTheRemoteWithoutSecrets) {
  JobSpec spec = sample_spec();
  spec.remote =
      "s3://AKIDEXAMPLE:hunter2@bucket/p?endpoint=https://user:pw@minio:9000&region=r1"
      "&X-Amz-Signature=deadbeef&token=s3cr3t#frag";
  spec.encrypt = "aes-256-gcm";
  auto parsed = json::parse(job_spec_to_json(spec));
  ASSERT_TRUE(parsed);
  const json::Value& remote = *parsed->find("remote");
  EXPECT_EQ(remote.get_string("url"),
            "s3://bucket/p?endpoint=REDACTED&region=r1&X-Amz-Signature=REDACTED&token=REDACTED");
  EXPECT_EQ(remote.get_string("encrypt"), "aes-256-gcm");
  EXPECT_TRUE(remote.find("key_file")->is_null());
  for (std::string_view secret : {"AKIDEXAMPLE", "hunter2", "user:pw", "deadbeef", "s3cr3t"})
    EXPECT_EQ(job_spec_to_json(spec).find(secret), std::string::npos) << secret;
}

TEST(RedactStoreUrl, LeavesUrlsWithoutSecretsAlone) {
  for (std::string_view url :
       {"s3://bucket", "s3://bucket/prefix/?endpoint=http://127.0.0.1:5000&region=us-east-1",
        "s3://b/p?provider=oss&region=cn-hangzhou&style=virtual", "file:///mnt/ckpt", "file:///C:/share/ckpt",
        "file://server/share/x", "file:///tmp/odd?name", ""})
    EXPECT_EQ(redact_store_url(url), url);
  EXPECT_EQ(redact_store_url("file://me:pw@server/share"), "file://server/share");
  EXPECT_EQ(redact_store_url("s3://b?endpoint=http%3A%2F%2Fu%3Ap%40host"), "s3://b?endpoint=REDACTED");
}

TEST(JobSpecJson, MissingFieldsKeepDefaultsAndWrongTypesFail) {
  auto minimal = job_spec_from_json(R"({"name":"x","command":["a"],"checkpoint_location":"/ck"})");
  ASSERT_TRUE(minimal) << minimal.error().message;
  EXPECT_EQ(minimal->restart.max_restarts, RestartPolicy{}.max_restarts);
  EXPECT_EQ(minimal->save_signal, platform::default_save_signal());

  auto wrong = job_spec_from_json(R"({"name":"x","restart":{"max_restarts":"many"}})");
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().message.find("restart.max_restarts"), std::string::npos) << wrong.error().message;
  EXPECT_FALSE(job_spec_from_json(R"({"command":"python3 train.py"})"));
  EXPECT_FALSE(job_spec_from_json(R"({"version":99})"));
  EXPECT_FALSE(job_spec_from_json("[]"));
  EXPECT_FALSE(job_spec_from_json("{"));
}

TEST(JobSpec, ValidationNamesTheProblem) {
  EXPECT_TRUE(validate_job_spec(sample_spec()));
  JobSpec spec = sample_spec();
  spec.command.clear();
  EXPECT_FALSE(validate_job_spec(spec));
  spec = sample_spec();
  spec.name = "a/b";
  EXPECT_FALSE(validate_job_spec(spec));
  spec = sample_spec();
  spec.checkpoint_location.clear();
  EXPECT_FALSE(validate_job_spec(spec));
  spec = sample_spec();
  spec.restart.backoff_factor = 0.5;
  EXPECT_FALSE(validate_job_spec(spec));
  spec = sample_spec();
  spec.cloud = "azrue";
  auto result = validate_job_spec(spec);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(result.error().message.find("did you mean \"azure\""), std::string::npos)
      << result.error().message;
  spec = sample_spec();
  spec.metadata_endpoint = "169.254.169.254";
  EXPECT_FALSE(validate_job_spec(spec));
}

TEST_F(TempDir, JobsRootFollowsTheEnvironment) {
  ScopedEnv home("GPUHOST_HOME", (m_dir / "gh").string());
  EXPECT_EQ(job::jobs_root(), m_dir / "gh" / "jobs");
  ScopedEnv no_home("GPUHOST_HOME", std::nullopt);
  if (platform::current_os() == platform::OsFamily::windows) {
    ScopedEnv local("LOCALAPPDATA", "C:\\Users\\u\\AppData\\Local");
    EXPECT_EQ(job::jobs_root(), std::filesystem::path("C:\\Users\\u\\AppData\\Local") / "gpuhost" / "jobs");
  } else {
    ScopedEnv xdg("XDG_STATE_HOME", "/var/state");
    EXPECT_EQ(job::jobs_root(), std::filesystem::path("/var/state/gpuhost/jobs"));
    ScopedEnv relative_xdg("XDG_STATE_HOME", "relative/state");
    ScopedEnv user_home("HOME", "/home/u");
    EXPECT_EQ(job::jobs_root(), std::filesystem::path("/home/u/.local/state/gpuhost/jobs"));
  }
}

TEST_F(TempDir, ListsJobFoldersSortedAndSkipsOthers) {
  EXPECT_EQ(job::list_jobs(m_dir / "missing").value_or(std::vector<std::string>{"?"}),
            std::vector<std::string>{});
  write("zeta/journal.jsonl", "");
  write("alpha/job.json", "{}");
  write("stray/notes.txt", "");
  write("file-not-dir", "");
  auto jobs = job::list_jobs(m_dir);
  ASSERT_TRUE(jobs) << jobs.error().message;
  EXPECT_EQ(*jobs, (std::vector<std::string>{"alpha", "zeta"}));
  EXPECT_EQ(job::job_paths(m_dir, "alpha").journal(), m_dir / "alpha" / "journal.jsonl");
}

constexpr const char* k_example = R"(# gpuhost.toml
[job]
name = "llama-lora"
command = ["python3", "train.py", "--resume", "{resume}"]
checkpoints = "out/checkpoints"
preset = "hf"
keep = 3

[save]
request = "both"
signal = "SIGUSR2"
stop_signal = "SIGINT"
stop_grace = "15s"
safety_margin = 5

[restart]
max_restarts = 4
backoff = "500ms"
max_backoff = "5m"
backoff_factor = 3.0
crash_loop_failures = 2
crash_loop_window = "2m"

[preemption]
cloud = "aws"
metadata_endpoint = "http://127.0.0.1:8080"
poll_interval = 2.5

[env]
HF_HOME = "/data/hf"
OMP_NUM_THREADS = 8
)";

TEST_F(TempDir, LoadsTheDocumentedExample) {
  auto path = write("project/gpuhost.toml", k_example);
  JobSpec spec;
  auto loaded = load_job_file(path, spec);
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(spec.name, "llama-lora");
  EXPECT_EQ(spec.command, (std::vector<std::string>{"python3", "train.py", "--resume", "{resume}"}));
  EXPECT_EQ(spec.checkpoint_location, (m_dir / "project" / "out" / "checkpoints").lexically_normal());
  EXPECT_EQ(spec.preset, ResumePreset::hf);
  EXPECT_EQ(spec.keep, 3);
  EXPECT_EQ(spec.save_request, JobSpec::SaveRequest::both);
  EXPECT_EQ(spec.save_signal, platform::ChildSignal::user2);
  EXPECT_EQ(spec.stop_signal, platform::ChildSignal::interrupt);
  EXPECT_EQ(spec.stop_grace, 15s);
  EXPECT_EQ(spec.safety_margin, 5s);
  EXPECT_EQ(spec.restart.max_restarts, 4);
  EXPECT_EQ(spec.restart.initial_backoff, 500ms);
  EXPECT_EQ(spec.restart.max_backoff, 5min);
  EXPECT_EQ(spec.restart.backoff_factor, 3.0);
  EXPECT_EQ(spec.restart.crash_loop_failures, 2);
  EXPECT_EQ(spec.restart.crash_loop_window, 2min);
  EXPECT_EQ(spec.cloud, "aws");
  EXPECT_EQ(spec.metadata_endpoint, "http://127.0.0.1:8080");
  EXPECT_EQ(spec.poll_interval, 2500ms);
  EXPECT_EQ(spec.environment, (std::vector<std::pair<std::string, std::string>>{{"HF_HOME", "/data/hf"},
                                                                                {"OMP_NUM_THREADS", "8"}}));
  EXPECT_TRUE(validate_job_spec(spec));
}

TEST_F(TempDir, FileLeavesUnsetFieldsAndMergesEnvironment) {
  auto path = write("gpuhost.toml", "[job]\nkeep = 2\n[env]\nA = \"file\"\n");
  JobSpec spec = sample_spec();
  spec.environment = {{"A", "flag"}, {"B", "flag"}};
  ASSERT_TRUE(load_job_file(path, spec));
  EXPECT_EQ(spec.keep, 2);
  EXPECT_EQ(spec.name, "llama-lora");
  EXPECT_EQ(spec.command, sample_spec().command);
  EXPECT_EQ(spec.environment,
            (std::vector<std::pair<std::string, std::string>>{{"A", "file"}, {"B", "flag"}}));
}

TEST_F(TempDir, UnknownKeySuggestsTheClosestWithItsPosition) {
  auto path = write("gpuhost.toml", "[save]\nsignal = \"SIGUSR1\"\nstop_grac = \"10s\"\n");
  JobSpec spec = sample_spec();
  auto loaded = load_job_file(path, spec);
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.error().code, ErrorCode::invalid_argument);
  const std::string& message = loaded.error().message;
  EXPECT_NE(message.find("gpuhost.toml:3:1:"), std::string::npos) << message;
  EXPECT_NE(message.find("did you mean \"stop_grace\""), std::string::npos) << message;

  auto table = load_job_file(write("t2.toml", "[restrat]\nmax_restarts = 1\n"), spec);
  ASSERT_FALSE(table);
  EXPECT_NE(table.error().message.find("did you mean [restart]"), std::string::npos) << table.error().message;
  EXPECT_FALSE(load_job_file(write("t3.toml", "name = \"x\"\n"), spec));
}

TEST_F(TempDir, SyntaxErrorsCarryLineAndColumn) {
  auto path = write("gpuhost.toml", "[job]\nname = \"x\"\ncommand = [\"python3\",\n");
  JobSpec spec;
  auto loaded = load_job_file(path, spec);
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.error().code, ErrorCode::parse_error);
  EXPECT_NE(loaded.error().message.find("gpuhost.toml:"), std::string::npos) << loaded.error().message;
}

TEST_F(TempDir, BadValuesAreRejectedAndLeaveTheSpecAlone) {
  const std::vector<std::string> bad = {
      "[job]\ncommand = \"python3 train.py\"\n",  // a string, not an array
      "[job]\nkeep = -1\n",
      "[job]\npreset = \"hugginface\"\n",
      "[job]\nname = \"a b\"\n",
      "[save]\nrequest = \"sometimes\"\n",
      "[save]\nsignal = \"SIGFOO\"\n",
      "[save]\nstop_grace = \"ten seconds\"\n",
      "[save]\nstop_grace = -3\n",
      "[restart]\nbackoff_factor = 0.5\n",
      "[restart]\nbackoff = \"10m\"\nmax_backoff = \"1m\"\n",
      "[preemption]\npoll_interval = 0\n",
      "[env]\nLIST = [1, 2]\n",
  };
  for (const std::string& text : bad) {
    JobSpec spec = sample_spec();
    spec.name = "unchanged";
    spec.keep = 9;
    auto loaded = load_job_file(write("bad.toml", text), spec);
    EXPECT_FALSE(loaded) << text;
    if (!loaded) {
      EXPECT_NE(loaded.error().message.find("bad.toml:"), std::string::npos) << loaded.error().message;
    }
    EXPECT_EQ(spec.name, "unchanged") << text;
    EXPECT_EQ(spec.keep, 9) << text;
  }
  JobSpec spec;
  auto preset = load_job_file(write("p.toml", "[job]\npreset = \"hugginface\"\n"), spec);
  ASSERT_FALSE(preset);
  EXPECT_NE(preset.error().message.find("one of none, hf"), std::string::npos) << preset.error().message;
}

TEST_F(TempDir, MissingFileIsNotFound) {
  JobSpec spec;
  auto loaded = load_job_file(m_dir / "absent.toml", spec);
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.error().code, ErrorCode::not_found);
}

}  // namespace
}  // namespace gpuhost::supervise
