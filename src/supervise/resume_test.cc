#include "supervise/resume.h"

#include <gtest/gtest.h>

namespace gpuhost::supervise {
namespace {

using Argv = std::vector<std::string>;
const std::optional<std::string> k_checkpoint = std::string("/ck/checkpoint-300");
const std::optional<std::string> k_none;

Argv resumed(const Argv& command, ResumePreset preset) {
  auto argv = resume_command(command, preset, k_checkpoint);
  EXPECT_TRUE(argv) << argv.error().message;
  return argv.value_or(Argv{});
}

Argv fresh(const Argv& command, ResumePreset preset = ResumePreset::none) {
  auto argv = resume_command(command, preset, k_none);
  EXPECT_TRUE(argv) << argv.error().message;
  return argv.value_or(Argv{});
}

TEST(ResumePreset, NamesRoundTrip) {
  for (auto preset : {ResumePreset::none, ResumePreset::hf, ResumePreset::lightning,
                      ResumePreset::ultralytics, ResumePreset::kohya, ResumePreset::torchrun})
    EXPECT_EQ(parse_resume_preset(resume_preset_name(preset)), preset);
  EXPECT_EQ(parse_resume_preset("HF"), ResumePreset::hf);
  EXPECT_FALSE(parse_resume_preset("huggingface-ish"));
}

TEST(ResumeCommand, ReplacesEveryPlaceholderWithThePath) {
  EXPECT_EQ(
      resumed({"python3", "train.py", "--resume", "{resume}", "--tag=from:{resume}"}, ResumePreset::none),
      (Argv{"python3", "train.py", "--resume", "/ck/checkpoint-300", "--tag=from:/ck/checkpoint-300"}));
}

TEST(ResumeCommand, HfAppendsResumeFromCheckpoint) {
  EXPECT_EQ(resumed({"python3", "run_clm.py", "--output_dir", "out"}, ResumePreset::hf),
            (Argv{"python3", "run_clm.py", "--output_dir", "out", "--resume_from_checkpoint",
                  "/ck/checkpoint-300"}));
}

TEST(ResumeCommand, ExistingFlagGetsTheNewValueInBothForms) {
  EXPECT_EQ(resumed({"python3", "run.py", "--resume_from_checkpoint", "old", "--bf16"}, ResumePreset::hf),
            (Argv{"python3", "run.py", "--resume_from_checkpoint", "/ck/checkpoint-300", "--bf16"}));
  EXPECT_EQ(resumed({"python3", "run.py", "--resume_from_checkpoint=old", "--bf16"}, ResumePreset::hf),
            (Argv{"python3", "run.py", "--resume_from_checkpoint=/ck/checkpoint-300", "--bf16"}));
  // A placeholder already in the flag's place is not doubled.
  EXPECT_EQ(resumed({"python3", "run.py", "--ckpt_path", "{resume}"}, ResumePreset::lightning),
            (Argv{"python3", "run.py", "--ckpt_path", "/ck/checkpoint-300"}));
  // The flag with no value before another flag gets the value inserted.
  EXPECT_EQ(resumed({"python3", "run.py", "--ckpt_path", "--fast"}, ResumePreset::lightning),
            (Argv{"python3", "run.py", "--ckpt_path", "/ck/checkpoint-300", "--fast"}));
}

TEST(ResumeCommand, LightningAndKohyaUseTheirFlags) {
  EXPECT_EQ(resumed({"python3", "main.py", "fit"}, ResumePreset::lightning),
            (Argv{"python3", "main.py", "fit", "--ckpt_path", "/ck/checkpoint-300"}));
  EXPECT_EQ(
      resumed({"accelerate", "launch", "train_network.py", "--save_state"}, ResumePreset::kohya),
      (Argv{"accelerate", "launch", "train_network.py", "--save_state", "--resume", "/ck/checkpoint-300"}));
}

TEST(ResumeCommand, TorchrunPutsTheFlagAfterTheScriptArguments) {
  EXPECT_EQ(
      resumed({"torchrun", "--nproc_per_node=8", "train.py", "--lr", "3e-4"}, ResumePreset::torchrun),
      (Argv{"torchrun", "--nproc_per_node=8", "train.py", "--lr", "3e-4", "--resume", "/ck/checkpoint-300"}));
}

TEST(ResumeCommand, UltralyticsUsesTheYoloKeyValueForm) {
  EXPECT_EQ(resumed({"yolo", "train", "data=coco8.yaml", "model=yolo11n.pt", "epochs=100"},
                    ResumePreset::ultralytics),
            (Argv{"yolo", "train", "data=coco8.yaml", "model=/ck/checkpoint-300", "epochs=100", "resume"}));
  EXPECT_EQ(resumed({"yolo", "train", "resume=False"}, ResumePreset::ultralytics),
            (Argv{"yolo", "train", "resume", "model=/ck/checkpoint-300"}));
}

TEST(ResumeCommand, PresetNoneAddsNothing) {
  EXPECT_EQ(resumed({"python3", "train.py"}, ResumePreset::none), (Argv{"python3", "train.py"}));
}

TEST(ResumeCommand, FreshStartDropsThePlaceholderAndItsFlag) {
  EXPECT_EQ(fresh({"python3", "train.py", "--resume", "{resume}", "--epochs", "3"}),
            (Argv{"python3", "train.py", "--epochs", "3"}));
  EXPECT_EQ(fresh({"python3", "train.py", "--resume={resume}", "--epochs=3"}),
            (Argv{"python3", "train.py", "--epochs=3"}));
  // A positional placeholder goes alone; the argument before it is not a flag.
  EXPECT_EQ(fresh({"python3", "train.py", "{resume}"}), (Argv{"python3", "train.py"}));
  // The preset's flag is not added without a checkpoint, and a user's own flag stays.
  EXPECT_EQ(fresh({"python3", "run.py", "--resume_from_checkpoint", "keep/me"}, ResumePreset::hf),
            (Argv{"python3", "run.py", "--resume_from_checkpoint", "keep/me"}));
  EXPECT_EQ(fresh({"yolo", "train", "model=yolo11n.pt"}, ResumePreset::ultralytics),
            (Argv{"yolo", "train", "model=yolo11n.pt"}));
}

TEST(ResumeCommand, FreshStartRejectsAPlaceholderInsideAnArgument) {
  auto argv = resume_command({"python3", "train.py", "--init", "ckpt:{resume}"}, ResumePreset::none, k_none);
  ASSERT_FALSE(argv);
  EXPECT_EQ(argv.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(argv.error().message.find("ckpt:{resume}"), std::string::npos) << argv.error().message;
  EXPECT_FALSE(resume_command({"yolo", "train", "model={resume}"}, ResumePreset::ultralytics, k_none));
}

TEST(ResumeCommand, EmptyCommandIsAnError) {
  EXPECT_FALSE(resume_command({}, ResumePreset::hf, k_checkpoint));
}

}  // namespace
}  // namespace gpuhost::supervise
