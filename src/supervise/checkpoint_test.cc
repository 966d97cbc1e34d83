#include "supervise/checkpoint.h"

#include <gtest/gtest.h>

#include "supervise/checkpoint_fixtures.h"

namespace gpuhost::supervise {
namespace {

namespace fs = std::filesystem;
using namespace fixtures;

class Checkpoint : public ::testing::Test {
 protected:
  ScratchDir m_scratch{"checkpoint-test"};
  fs::path dir() const { return m_scratch.path(); }

  CheckpointVerdict validate(const fs::path& path, ValidationDepth depth) {
    auto verdict = validate_checkpoint(path, depth);
    EXPECT_TRUE(verdict) << verdict.error().message;
    return verdict.value_or(CheckpointVerdict{});
  }
  // Valid at both depths.
  void expect_valid(const fs::path& path) {
    for (auto depth : {ValidationDepth::structure, ValidationDepth::full}) {
      CheckpointVerdict v = validate(path, depth);
      EXPECT_TRUE(v.valid) << path << ": " << v.problem;
    }
  }
  // Invalid with a problem mentioning `words`.
  void expect_invalid(const fs::path& path, ValidationDepth depth, const std::string& words) {
    CheckpointVerdict v = validate(path, depth);
    EXPECT_FALSE(v.valid) << path;
    EXPECT_NE(v.problem.find(words), std::string::npos) << "problem: " << v.problem;
  }

  // Writes `bytes` to `path`, then cuts it shorter one byte at a time (truncating in place is
  // far cheaper than rewriting) and expects every shorter file to be invalid.
  void expect_every_truncation_invalid(const fs::path& path, const std::string& bytes) {
    write_bytes(path, bytes);
    ASSERT_TRUE(validate(path, ValidationDepth::structure).valid);
    for (std::size_t length = bytes.size(); length-- > 0;) {
      fs::resize_file(path, length);
      auto v = validate_checkpoint(path, ValidationDepth::structure);
      ASSERT_TRUE(v) << v.error().message;
      ASSERT_FALSE(v->valid) << "truncated to " << length << " of " << bytes.size() << " bytes";
    }
  }

  // A complete HF Trainer checkpoint-500/.
  fs::path make_hf_checkpoint(const std::string& name = "checkpoint-500", int global_step = 500) {
    fs::path p = dir() / name;
    write_bytes(p / "trainer_state.json",
                "{\"global_step\": " + std::to_string(global_step) + ", \"epoch\": 1.0}");
    write_bytes(p / "config.json", "{}");
    write_bytes(p / "model.safetensors", make_small_safetensors());
    write_bytes(p / "optimizer.pt", make_torch_zip("optimizer"));
    write_bytes(p / "scheduler.pt", make_torch_zip("scheduler"));
    write_bytes(p / "rng_state.pth", make_torch_zip("rng_state"));
    write_bytes(p / "training_args.bin", make_torch_zip("training_args"));
    return p;
  }
};

// ---- torch.save zip --------------------------------------------------------------------------

TEST_F(Checkpoint, AcceptsTorchZipAtBothDepths) {
  fs::path p = dir() / "last.pt";
  std::string bytes = make_torch_zip("last");
  write_bytes(p, bytes);
  CheckpointVerdict v = validate(p, ValidationDepth::full);
  EXPECT_TRUE(v.valid) << v.problem;
  EXPECT_EQ(v.format, CheckpointFormat::torch_zip);
  EXPECT_EQ(v.size_bytes, bytes.size());
  ASSERT_EQ(v.files.size(), 1u);
  EXPECT_EQ(v.files[0].relative_path, "");
  EXPECT_EQ(v.content_hash.rfind("xxh3-128:", 0), 0u);
  EXPECT_EQ(v.content_hash.size(), 9u + 32u);
  EXPECT_FALSE(v.step);
  CheckpointVerdict structure = validate(p, ValidationDepth::structure);
  EXPECT_TRUE(structure.valid) << structure.problem;
  EXPECT_TRUE(structure.content_hash.empty());
}

TEST_F(Checkpoint, RejectsTorchZipTruncatedAnywhere) {
  expect_every_truncation_invalid(dir() / "model.pt", make_torch_zip());
}

TEST_F(Checkpoint, CorruptDataFailsTheFullCheckOnly) {
  std::string bytes = make_torch_zip("archive", {}, 4000);
  const auto at = bytes.find(pattern_bytes(4000).substr(0, 64));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 1000] ^= 0x01;
  fs::path p = dir() / "epoch=3-step=1200.ckpt";
  write_bytes(p, bytes);
  EXPECT_TRUE(validate(p, ValidationDepth::structure).valid);
  expect_invalid(p, ValidationDepth::full, "archive/data/0 fails its CRC-32 check");
}

TEST_F(Checkpoint, SkipsTheCrcCheckWhenTheWriterStoredNone) {
  std::string bytes = make_torch_zip("archive", {.store_crc = false}, 4000);
  bytes[bytes.find(pattern_bytes(4000).substr(0, 64)) + 10] ^= 0x01;
  fs::path p = dir() / "model.pt";
  write_bytes(p, bytes);
  expect_valid(p);
}

TEST_F(Checkpoint, AcceptsZip64Archives) {
  fs::path p = dir() / "big.pt";
  std::string bytes = make_torch_zip("big", {.zip64 = true}, 3000);
  write_bytes(p, bytes);
  expect_valid(p);
  bytes[bytes.find(pattern_bytes(3000).substr(0, 64)) + 100] ^= 0x01;
  write_bytes(p, bytes);
  expect_invalid(p, ValidationDepth::full, "CRC-32");
}

TEST_F(Checkpoint, RejectsZip64ArchivesTruncatedAnywhere) {
  expect_every_truncation_invalid(dir() / "big.pt", make_torch_zip("big", {.zip64 = true}));
}

TEST_F(Checkpoint, AcceptsLocalHeadersWithoutDataDescriptors) {
  fs::path p = dir() / "model.pth";
  write_bytes(p, make_torch_zip("model", {.data_descriptor = false}));
  expect_valid(p);
}

TEST_F(Checkpoint, AcceptsTheNewerDataVersionRecord) {
  fs::path p = dir() / "model.pt";
  write_bytes(p, make_zip({{"model/data.pkl", pickle_bytes()}, {"model/.data/version", "6\n"}}));
  expect_valid(p);
}

TEST_F(Checkpoint, RejectsZipArchivesThatAreNotTorchSaves) {
  fs::path p = dir() / "model.pt";
  write_bytes(p, make_zip({{"readme.txt", "hello"}, {"archive/version", "3\n"}}));
  expect_invalid(p, ValidationDepth::structure, "data.pkl");
  write_bytes(p, make_zip({{"archive/data.pkl", pickle_bytes()}}));
  expect_invalid(p, ValidationDepth::structure, "version");
}

TEST_F(Checkpoint, RejectsALocalHeaderThatDoesNotMatchTheDirectory) {
  std::string bytes = make_torch_zip();
  const auto second = bytes.find("PK\x03\x04", 4);
  ASSERT_NE(second, std::string::npos);
  bytes[second + 2] = 'X';
  fs::path p = dir() / "model.pt";
  write_bytes(p, bytes);
  expect_invalid(p, ValidationDepth::structure, "local header");
}

TEST_F(Checkpoint, TreatsLegacyTorchPicklesAsGenericFiles) {
  fs::path p = dir() / "old.pt";
  write_bytes(p, pickle_bytes() + pattern_bytes(100));
  CheckpointVerdict v = validate(p, ValidationDepth::full);
  EXPECT_TRUE(v.valid) << v.problem;
  EXPECT_EQ(v.format, CheckpointFormat::generic_file);
  EXPECT_FALSE(v.content_hash.empty());
}

TEST_F(Checkpoint, RejectsEmptyAndForeignTorchFiles) {
  write_bytes(dir() / "empty.pt", "");
  expect_invalid(dir() / "empty.pt", ValidationDepth::structure, "empty");
  write_bytes(dir() / "text.pt", "not a checkpoint");
  expect_invalid(dir() / "text.pt", ValidationDepth::structure, "not a zip");
  // ".bin" is a generic extension: foreign content is just a file.
  write_bytes(dir() / "weights.bin", "raw bytes");
  CheckpointVerdict v = validate(dir() / "weights.bin", ValidationDepth::structure);
  EXPECT_TRUE(v.valid);
  EXPECT_EQ(v.format, CheckpointFormat::generic_file);
}

// ---- safetensors -----------------------------------------------------------------------------

TEST_F(Checkpoint, AcceptsSafetensors) {
  fs::path p = dir() / "model.safetensors";
  write_bytes(p, make_small_safetensors());
  expect_valid(p);
  EXPECT_EQ(validate(p, ValidationDepth::structure).format, CheckpointFormat::safetensors);
  write_bytes(p, make_safetensors({}));
  expect_valid(p);
}

TEST_F(Checkpoint, RejectsSafetensorsTruncatedAnywhere) {
  expect_every_truncation_invalid(dir() / "model.safetensors", make_small_safetensors());
}

TEST_F(Checkpoint, RejectsMalformedSafetensors) {
  fs::path p = dir() / "model.safetensors";
  write_bytes(p, make_small_safetensors() + "x");
  expect_invalid(p, ValidationDepth::structure, "after the last tensor");

  std::string huge;
  put64(huge, 200'000'000);
  write_bytes(p, huge + std::string(64, ' '));
  expect_invalid(p, ValidationDepth::structure, "100 MB");

  auto with_header = [](const std::string& header, std::size_t data) {
    std::string out;
    put64(out, header.size());
    return out + header + std::string(data, 'd');
  };
  write_bytes(p, with_header("[1, 2]", 0));
  expect_invalid(p, ValidationDepth::structure, "not a JSON object");
  write_bytes(p, with_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [2]", 0));
  expect_invalid(p, ValidationDepth::structure, "not JSON");
  write_bytes(p, with_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                 "b": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]}})",
                             24));
  expect_invalid(p, ValidationDepth::structure, "does not start where the previous one ends");
  write_bytes(p, with_header(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8));
  expect_invalid(p, ValidationDepth::structure, "dtype and shape");
  write_bytes(p, with_header(R"({"a": {"dtype": "F32", "shape": [2]}})", 8));
  expect_invalid(p, ValidationDepth::structure, "data_offsets");
}

// ---- HF Trainer ------------------------------------------------------------------------------

TEST_F(Checkpoint, AcceptsHfTrainerCheckpoint) {
  fs::path p = make_hf_checkpoint();
  CheckpointVerdict v = validate(p, ValidationDepth::full);
  EXPECT_TRUE(v.valid) << v.problem;
  EXPECT_EQ(v.format, CheckpointFormat::hf_trainer_dir);
  EXPECT_EQ(v.step, 500);
  ASSERT_EQ(v.files.size(), 7u);
  EXPECT_EQ(v.files[0].relative_path, "config.json");
  EXPECT_EQ(v.files[6].relative_path, "training_args.bin");
  std::uint64_t total = 0;
  for (const auto& f : v.files) total += f.size;
  EXPECT_EQ(v.size_bytes, total);
  EXPECT_FALSE(v.content_hash.empty());
}

TEST_F(Checkpoint, RejectsHfCheckpointWhoseGlobalStepDisagreesWithItsName) {
  fs::path p = make_hf_checkpoint("checkpoint-500", 400);
  expect_invalid(p, ValidationDepth::structure, "global_step 400");
}

TEST_F(Checkpoint, RejectsHfCheckpointWithoutOptimizerOrState) {
  fs::path p = make_hf_checkpoint();
  fs::remove(p / "optimizer.pt");
  expect_invalid(p, ValidationDepth::structure, "no optimizer state");
  fs::path q = make_hf_checkpoint("checkpoint-600", 600);
  fs::remove(q / "trainer_state.json");
  expect_invalid(q, ValidationDepth::structure, "no trainer_state.json");
  fs::path r = make_hf_checkpoint("checkpoint-700", 700);
  fs::remove(r / "model.safetensors");
  expect_invalid(r, ValidationDepth::structure, "no model weights");
}

TEST_F(Checkpoint, RejectsHfCheckpointWithATruncatedOrCorruptMember) {
  fs::path p = make_hf_checkpoint();
  std::string optimizer = read_bytes(p / "optimizer.pt");
  write_bytes(p / "optimizer.pt", optimizer.substr(0, optimizer.size() - 10));
  expect_invalid(p, ValidationDepth::structure, "optimizer.pt: ");

  write_bytes(p / "optimizer.pt", optimizer);
  std::string weights = read_bytes(p / "model.safetensors");
  write_bytes(p / "model.safetensors", weights.substr(0, weights.size() - 1));
  expect_invalid(p, ValidationDepth::structure, "model.safetensors: ");

  write_bytes(p / "model.safetensors", weights);
  optimizer[optimizer.find(pattern_bytes(400).substr(0, 64)) + 5] ^= 0x01;
  write_bytes(p / "optimizer.pt", optimizer);
  EXPECT_TRUE(validate(p, ValidationDepth::structure).valid);
  expect_invalid(p, ValidationDepth::full, "optimizer.pt: zip entry optimizer/data/0 fails its CRC-32 check");
}

TEST_F(Checkpoint, ChecksShardedWeightsAgainstTheirIndex) {
  fs::path p = make_hf_checkpoint();
  fs::remove(p / "model.safetensors");
  write_bytes(p / "model-00001-of-00002.safetensors", make_small_safetensors());
  expect_invalid(p, ValidationDepth::structure, "without model.safetensors.index.json");
  write_bytes(p / "model.safetensors.index.json", R"({"metadata": {"total_size": 288}, "weight_map": {
      "a.weight": "model-00001-of-00002.safetensors", "b.weight": "model-00002-of-00002.safetensors"}})");
  expect_invalid(p, ValidationDepth::structure, "lists model-00002-of-00002.safetensors, which is missing");
  write_bytes(p / "model-00002-of-00002.safetensors", make_small_safetensors());
  expect_valid(p);
}

TEST_F(Checkpoint, AcceptsPeftAdapterAndDeepSpeedLayouts) {
  fs::path p = make_hf_checkpoint();
  fs::remove(p / "model.safetensors");
  write_bytes(p / "adapter_model.safetensors", make_small_safetensors());
  expect_valid(p);

  fs::path q = make_hf_checkpoint("checkpoint-800", 800);
  fs::remove(q / "model.safetensors");
  fs::remove(q / "optimizer.pt");
  write_bytes(q / "latest", "global_step800");
  write_bytes(q / "global_step800" / "mp_rank_00_model_states.pt", make_torch_zip("mp_rank_00_model_states"));
  write_bytes(q / "global_step800" / "zero_pp_rank_0_mp_rank_00_optim_states.pt", make_torch_zip("optim"));
  expect_valid(q);
  write_bytes(q / "global_step800" / "zero_pp_rank_0_mp_rank_00_optim_states.pt", "PK\x03\x04 cut");
  expect_invalid(q, ValidationDepth::structure, "global_step800/zero_pp_rank_0_mp_rank_00_optim_states.pt: ");
}

// ---- accelerate / kohya ----------------------------------------------------------------------

TEST_F(Checkpoint, AcceptsAccelerateStateDirectories) {
  fs::path p = dir() / "lora-step00001000-state";
  write_bytes(p / "model.safetensors", make_small_safetensors());
  write_bytes(p / "optimizer.bin", make_torch_zip("optimizer"));
  write_bytes(p / "scheduler.bin", make_torch_zip("scheduler"));
  write_bytes(p / "random_states_0.pkl", pickle_bytes());
  write_bytes(p / "random_states_1.pkl", make_torch_zip("random_states_1"));
  write_bytes(p / "scaler.pt", make_torch_zip("scaler"));
  CheckpointVerdict v = validate(p, ValidationDepth::full);
  EXPECT_TRUE(v.valid) << v.problem;
  EXPECT_EQ(v.format, CheckpointFormat::accelerate_dir);
  EXPECT_EQ(v.step, 1000);

  write_bytes(p / "random_states_0.pkl", pickle_bytes().substr(0, 5));
  expect_invalid(p, ValidationDepth::structure,
                 "random_states_0.pkl: pickle does not end with the STOP opcode");
  write_bytes(p / "random_states_0.pkl", pickle_bytes());
  fs::remove(p / "model.safetensors");
  expect_invalid(p, ValidationDepth::structure, "no model weights");
}

TEST_F(Checkpoint, DetectsAccelerateDirectoriesByContent) {
  fs::path p = dir() / "checkpoint_3";  // accelerate's automatic naming: a save counter, not a step
  write_bytes(p / "pytorch_model.bin", make_torch_zip("pytorch_model"));
  write_bytes(p / "random_states_0.pkl", pickle_bytes());
  CheckpointVerdict v = validate(p, ValidationDepth::structure);
  EXPECT_TRUE(v.valid) << v.problem;
  EXPECT_EQ(v.format, CheckpointFormat::accelerate_dir);
  EXPECT_FALSE(v.step);
}

// DCP folders: checkpoint_dcp_test.cc.

// ---- generic, hashing, errors ----------------------------------------------------------------

TEST_F(Checkpoint, AcceptsGenericFilesAndDirectories) {
  write_bytes(dir() / "weights.npz", "anything");
  CheckpointVerdict file = validate(dir() / "weights.npz", ValidationDepth::full);
  EXPECT_TRUE(file.valid);
  EXPECT_EQ(file.format, CheckpointFormat::generic_file);
  write_bytes(dir() / "run" / "a.txt", "a");
  write_bytes(dir() / "run" / "sub" / "b.txt", "bb");
  CheckpointVerdict folder = validate(dir() / "run", ValidationDepth::full);
  EXPECT_TRUE(folder.valid);
  EXPECT_EQ(folder.format, CheckpointFormat::generic_dir);
  ASSERT_EQ(folder.files.size(), 2u);
  EXPECT_EQ(folder.files[1].relative_path, "sub/b.txt");
  EXPECT_EQ(folder.size_bytes, 3u);
}

TEST_F(Checkpoint, ContentHashFollowsContentNamesAndSizesButNotLocation) {
  auto hash = [&](const fs::path& p) { return validate(p, ValidationDepth::full).content_hash; };
  write_bytes(dir() / "one" / "a.bin", "0123456789");
  write_bytes(dir() / "one" / "b.bin", "abc");
  write_bytes(dir() / "two" / "a.bin", "0123456789");
  write_bytes(dir() / "two" / "b.bin", "abc");
  const std::string original = hash(dir() / "one");
  EXPECT_EQ(hash(dir() / "two"), original);  // same content elsewhere
  write_bytes(dir() / "two" / "b.bin", "abd");
  EXPECT_NE(hash(dir() / "two"), original);  // one byte
  write_bytes(dir() / "two" / "b.bin", "abc");
  fs::rename(dir() / "two" / "b.bin", dir() / "two" / "c.bin");
  EXPECT_NE(hash(dir() / "two"), original);  // a name
  // The same bytes split differently between files hash differently (sizes are framed).
  write_bytes(dir() / "three" / "a.bin", "0123456789a");
  write_bytes(dir() / "three" / "b.bin", "bc");
  EXPECT_NE(hash(dir() / "three"), original);
}

TEST_F(Checkpoint, ReportsMissingPathsAsErrors) {
  auto v = validate_checkpoint(dir() / "absent.pt", ValidationDepth::structure);
  ASSERT_FALSE(v);
  EXPECT_EQ(v.error().code, ErrorCode::not_found);
}

TEST_F(Checkpoint, DetectsFormatsByNameAndLayout) {
  EXPECT_EQ(detect_checkpoint_format(dir() / "x.safetensors"), CheckpointFormat::safetensors);
  EXPECT_EQ(detect_checkpoint_format(dir() / "x.PT"), CheckpointFormat::torch_zip);
  EXPECT_EQ(detect_checkpoint_format(dir() / "x.ckpt"), CheckpointFormat::torch_zip);
  EXPECT_EQ(detect_checkpoint_format(dir() / "x.npz"), CheckpointFormat::generic_file);
  fs::create_directories(dir() / "checkpoint-12");
  EXPECT_EQ(detect_checkpoint_format(dir() / "checkpoint-12"), CheckpointFormat::hf_trainer_dir);
  fs::create_directories(dir() / "name-000003-state");
  EXPECT_EQ(detect_checkpoint_format(dir() / "name-000003-state"), CheckpointFormat::accelerate_dir);
  fs::create_directories(dir() / "plain");
  EXPECT_EQ(detect_checkpoint_format(dir() / "plain"), CheckpointFormat::generic_dir);
  EXPECT_STREQ(checkpoint_format_name(CheckpointFormat::hf_trainer_dir), "hf_trainer_dir");
}

TEST(CheckpointStep, ReadsStepNumbersFromNames) {
  EXPECT_EQ(step_from_name("checkpoint-500"), 500);
  EXPECT_EQ(step_from_name("epoch=3-step=1200.ckpt"), 1200);
  EXPECT_EQ(step_from_name("epoch=3-step=1200-v1.ckpt"), 1200);
  EXPECT_EQ(step_from_name("model_step00300.pt"), 300);
  EXPECT_EQ(step_from_name("step_00300.pt"), 300);
  EXPECT_EQ(step_from_name("global_step500"), 500);
  EXPECT_EQ(step_from_name("lora-step00001000-state"), 1000);
  EXPECT_EQ(step_from_name("iter_0001000"), 1000);
  EXPECT_EQ(step_from_name("Step-7.pt"), 7);
  EXPECT_EQ(step_from_name("checkpoint-0"), 0);
  // What plain scripts write.
  EXPECT_EQ(step_from_name("ckpt-000090.pt"), 90);
  EXPECT_EQ(step_from_name("ckpt_100.pt"), 100);
  EXPECT_EQ(step_from_name("model_100.pt"), 100);
  EXPECT_EQ(step_from_name("resnet50-weights-12.bin"), 12);
  EXPECT_EQ(step_from_name("checkpoint-100.pt"), 100);
}

TEST(CheckpointStep, IgnoresNumbersThatAreNotSteps) {
  EXPECT_FALSE(step_from_name("last.pt"));
  EXPECT_FALSE(step_from_name("best.pt"));
  EXPECT_FALSE(step_from_name("epoch10.pt"));
  EXPECT_FALSE(step_from_name("epoch=3.ckpt"));
  EXPECT_FALSE(step_from_name("name-000003-state"));
  EXPECT_FALSE(step_from_name("checkpoint_3"));
  EXPECT_FALSE(step_from_name("checkpoint_3.pt")) << "accelerate counts saves";
  EXPECT_FALSE(step_from_name("epoch_3.pt")) << "an epoch is not a step";
  EXPECT_FALSE(step_from_name("mymodel_5.pt")) << "the word must stand alone";
  EXPECT_FALSE(step_from_name("model_v2.pt"));
  EXPECT_FALSE(step_from_name("ckpt-.pt"));
  EXPECT_FALSE(step_from_name("checkpoint-best"));
  EXPECT_FALSE(step_from_name("warmup_steps100"));
  EXPECT_FALSE(step_from_name("laststep5"));
  EXPECT_FALSE(step_from_name("step_99999999999999999999"));
}

}  // namespace
}  // namespace gpuhost::supervise
