#include "metrics/line_parser.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metrics/test_points.h"

namespace gpuhost::metrics {
namespace {

using testing::values_of;

std::map<std::string, double> values_of(std::string_view line) {
  return values_of(parse_line(line).points);
}

std::vector<std::string> split_all(std::initializer_list<std::string_view> chunks,
                                   std::size_t max_line = LineSplitter::k_default_max_line_bytes) {
  LineSplitter splitter(max_line);
  std::vector<std::string> lines;
  for (auto chunk : chunks) splitter.feed(chunk, lines);
  splitter.finish(lines);
  return lines;
}

TEST(LineSplitter, EndsLinesAtNewlineCarriageReturnAndBoth) {
  EXPECT_EQ(split_all({"a\nb\r\nc\rd"}), (std::vector<std::string>{"a", "b", "c", "d"}));
}

TEST(LineSplitter, ACrLfSplitAcrossChunksIsOneTerminator) {
  EXPECT_EQ(split_all({"loss=1\r", "\nloss=2\r", "", "\n"}), (std::vector<std::string>{"loss=1", "loss=2"}));
  EXPECT_EQ(split_all({"lo", "ss=", "1", "\n"}), (std::vector<std::string>{"loss=1"}));
}

TEST(LineSplitter, TqdmRedrawsAreSeparateLines) {
  auto lines =
      split_all({"\r  0%|          | 0/10 [00:00<?, ?it/s]\r 10%|#         | 1/10 [00:01<00:09,  1.00it/s]"});
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], " 10%|#         | 1/10 [00:01<00:09,  1.00it/s]");
}

TEST(LineSplitter, RemovesAnsiEscapesAndSkipsBlankLines) {
  auto lines = split_all({"\x1b[32mloss\x1b[0m=0.5\n\n   \n\x1b]0;title\x07step=3\n\x1b[2K\r"});
  EXPECT_EQ(lines, (std::vector<std::string>{"loss=0.5", "step=3"}));
  EXPECT_EQ(strip_ansi("a\x1b[1;31mb\x1b[0mc\x1b]8;;http://x\x1b\\d\x1b(Be"), "abcde");
  EXPECT_EQ(strip_ansi(std::string("a\0b\tc", 5)), "a b\tc");
}

TEST(LineSplitter, DropsAndCountsAnOverlongLineWithoutHoldingIt) {
  LineSplitter splitter(100);
  std::vector<std::string> lines;
  splitter.feed("loss=1\n", lines);
  const std::string garbage(1000, '\x01');
  for (int i = 0; i < 10000; ++i) splitter.feed(garbage, lines);  // 10 MB without a terminator
  splitter.feed("still the long line\nloss=2\n", lines);
  EXPECT_EQ(lines, (std::vector<std::string>{"loss=1", "loss=2"}));
  EXPECT_EQ(splitter.overlong_lines_dropped(), 1u);
  EXPECT_EQ(splitter.lines(), 2u);
}

TEST(LineParser, ReadsHuggingFaceDictLines) {
  auto parsed = parse_line("{'loss': 0.5123, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.1}");
  EXPECT_EQ(values_of(parsed.points),
            (std::map<std::string, double>{
                {"loss", 0.5123}, {"grad_norm", 1.2}, {"learning_rate", 5e-05}, {"epoch", 0.1}}));
  EXPECT_FALSE(parsed.points[0].step.has_value());
  EXPECT_EQ(parsed.points[0].name, "loss");  // in line order
  EXPECT_EQ(parsed.points[3].name, "epoch");
  EXPECT_EQ(values_of("{'eval_loss': 0.69, 'eval_runtime': 1.5, 'eval_samples_per_second': 100.0, "
                      "'eval_steps_per_second': 12.5, 'epoch': 1.0}")
                .size(),
            5u);
  // A string value is not a number; numpy scalars in numpy 2 reprs are.
  EXPECT_EQ(values_of("{'train_runtime': '0:01:02', 'train_loss': np.float64(0.25), 'epoch': 3.0}"),
            (std::map<std::string, double>{{"train_loss", 0.25}, {"epoch", 3.0}}));
}

TEST(LineParser, ReadsHuggingFaceLogMetricsLines) {
  EXPECT_EQ(values_of("  eval_loss               =     0.6931"),
            (std::map<std::string, double>{{"eval_loss", 0.6931}}));
  // The start-up banner is prose with numbers, not metrics.
  EXPECT_TRUE(values_of("  Num examples = 25,000").empty());
  EXPECT_TRUE(values_of("  Total optimization steps = 9,375").empty());
  EXPECT_TRUE(values_of("  Instantaneous batch size per device = 8").empty());
}

TEST(LineParser, ReadsNanoGptLinesWithStepAndUnits) {
  auto parsed = parse_line("iter 100: loss 2.3456, time 123.45ms, mfu 12.34%");
  ASSERT_EQ(parsed.points.size(), 3u);
  for (const auto& p : parsed.points) EXPECT_EQ(p.step, 100);
  auto v = values_of(parsed.points);
  EXPECT_DOUBLE_EQ(v["loss"], 2.3456);
  EXPECT_DOUBLE_EQ(v["time_seconds"], 0.12345);
  EXPECT_DOUBLE_EQ(v["mfu_percent"], 12.34);
  auto eval = parse_line("step 500: train loss 2.1234, val loss 2.2345");
  EXPECT_EQ(values_of(eval.points),
            (std::map<std::string, double>{{"train_loss", 2.1234}, {"val_loss", 2.2345}}));
  EXPECT_EQ(eval.points[0].step, 500);
  EXPECT_DOUBLE_EQ(values_of("iter 0: loss 10.9, time 2500.00ms, mfu -100.00%")["mfu_percent"], -100.0);
}

TEST(LineParser, ReadsLightningProgressBarPostfix) {
  auto parsed = parse_line(
      "Epoch 1:  45%|\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x8c  | 450/1000 [00:30<00:36, 15.0it/s, "
      "loss=0.123, v_num=0]");
  EXPECT_TRUE(parsed.progress_bar);
  EXPECT_EQ(values_of(parsed.points),
            (std::map<std::string, double>{{"Epoch", 1}, {"iterations_per_second", 15.0}, {"loss", 0.123}}));
  auto slow = parse_line(" 45%|####5     | 450/1000 [15:45<19:15,  2.10s/it, train_loss_step=0.5]");
  EXPECT_TRUE(slow.progress_bar);
  EXPECT_NEAR(values_of(slow.points)["iterations_per_second"], 1 / 2.10, 1e-12);
  EXPECT_TRUE(parse_line("  0%|          | 0/1000 [00:00<?, ?it/s]").points.empty());
}

TEST(LineParser, ReadsDetectron2AndMmcvStyleLines) {
  // detectron2's CommonMetricPrinter and mmcv's TextLoggerHook print `key: value` runs.
  auto d2 = parse_line(
      "[05/01 12:30:45 d2.utils.events]:  eta: 0:10:00  iter: 19  total_loss: 1.234  "
      "loss_cls: 0.5  time: 0.3456  data_time: 0.0123  lr: 0.001  max_mem: 2345M");
  EXPECT_EQ(
      values_of(d2.points),
      (std::map<std::string, double>{
          {"total_loss", 1.234}, {"loss_cls", 0.5}, {"time", 0.3456}, {"data_time", 0.0123}, {"lr", 0.001}}));
  EXPECT_EQ(d2.points.at(0).step, 19);
  auto mm = parse_line(
      "2024-05-01 12:30:45,123 - mmdet - INFO - Epoch [1][50/500]\tlr: 1.000e-02, eta: 0:10:00, "
      "time: 0.500, data_time: 0.010, memory: 2000, loss_cls: 0.8, loss: 1.23");
  EXPECT_EQ(values_of(mm.points), (std::map<std::string, double>{{"lr", 0.01},
                                                                 {"time", 0.5},
                                                                 {"data_time", 0.01},
                                                                 {"memory", 2000},
                                                                 {"loss_cls", 0.8},
                                                                 {"loss", 1.23}}));
}

TEST(LineParser, StepKeysSetTheStepInsteadOfBeingPoints) {
  auto parsed = parse_line("global_step=1200 loss=0.25 lr=3e-4");
  ASSERT_EQ(parsed.points.size(), 2u);
  EXPECT_EQ(parsed.points[0].step, 1200);
  EXPECT_EQ(parsed.points[1].step, 1200);
  EXPECT_EQ(parse_line("{\"step\": 7, \"loss\": 1.5}").points.at(0).step, 7);
  EXPECT_EQ(parse_line("{\"step\":7,\"loss\":1.5}").points.at(0).step, 7);
  // A fractional "step" is no step; it is not a point either.
  auto fractional = parse_line("step=1.5 loss=2");
  ASSERT_EQ(fractional.points.size(), 1u);
  EXPECT_FALSE(fractional.points[0].step.has_value());
}

TEST(LineParser, KeepsNanAndInfinity) {
  auto v = values_of("loss=nan grad_norm: inf min=-inf big=1e300 neg=-2.5E-3 {'x': NaN}");
  ASSERT_EQ(v.size(), 6u);
  EXPECT_TRUE(std::isnan(v["loss"]));
  EXPECT_EQ(v["grad_norm"], INFINITY);
  EXPECT_EQ(v["min"], -INFINITY);
  EXPECT_EQ(v["big"], 1e300);
  EXPECT_EQ(v["neg"], -2.5e-3);
  EXPECT_TRUE(std::isnan(v["x"]));
  EXPECT_DOUBLE_EQ(values_of("loss: tensor(0.4321, device='cuda:0', grad_fn=<NllLossBackward0>)")["loss"],
                   0.4321);
}

TEST(LineParser, ReadsWhitespaceSeparatedPairsOfHandWrittenLoops) {
  auto parsed = parse_line("step 12 loss 0.454054 lr 3e-4");
  EXPECT_EQ(values_of(parsed.points), (std::map<std::string, double>{{"loss", 0.454054}, {"lr", 3e-4}}));
  for (const auto& p : parsed.points) EXPECT_EQ(p.step, 12);
  EXPECT_DOUBLE_EQ(values_of("epoch 3 loss 0.5")["loss"], 0.5);
  // Pairs without a step, epoch or loss key are prose, and a word out of place breaks the pattern.
  EXPECT_TRUE(parse_line("batch 32 workers 8").points.empty());
  EXPECT_TRUE(parse_line("step 12 loss 0.45 done").points.empty());
  EXPECT_TRUE(parse_line("Saved 3 files in 2 dirs").points.empty());
}

TEST(LineParser, IgnoresTimestampsUrlsPathsVersionsAndHex) {
  for (const char* line : {
           "2024-05-01 12:30:45 starting",
           "Time: 12:30:45",
           "Serving at http://localhost:8080/?lr=0.1&step=5",
           "Using device cuda:0",
           "saved to /data/runs/lr=0.1/checkpoint-500/model.safetensors",
           "checkpoints/epoch=3-step=1200.ckpt",
           "torch==2.1.0 numpy>=1.24",
           "torch: 2.1.0, cuda: 12.1.1",
           "version=1.2.3",
           "address=0x7ffd5e8c",
           "hash: deadbeef12",
           "Downloading 100%",
           "CUDA 12.1, cuDNN 8902",
           "Saving 3 checkpoints",
           "key=",
           "_private=3",
           "1st=3",
           "pid=1234 port=29500 rank=0 local_rank=0 world_size=8 seed=42",
           "a == 3, b != 4, c <= 5",
           "done: 3000 steps, accuracy 0.999",
           "Finished: 12 epochs in 3 hours",
       })
    EXPECT_TRUE(parse_line(line).points.empty()) << line;
}

TEST(LineParser, AValueFollowedByAnotherPairIsStillAMetric) {
  EXPECT_EQ(values_of("loss: 0.5 lr: 0.001"), (std::map<std::string, double>{{"loss", 0.5}, {"lr", 0.001}}));
  EXPECT_EQ(values_of("train loss: 0.25"), (std::map<std::string, double>{{"loss", 0.25}}));
}

TEST(LineParser, SurvivesHostileInput) {
  std::string binary;
  for (int i = 0; i < 4096; ++i) binary.push_back(static_cast<char>(i * 37 % 256));
  (void)parse_line(binary);
  std::string many;
  for (int i = 0; i < 1000; ++i) many += "k" + std::to_string(i) + "=" + std::to_string(i) + " ";
  EXPECT_EQ(parse_line(many).points.size(), k_max_points_per_line);
  EXPECT_TRUE(parse_line("=").points.empty());
  EXPECT_TRUE(parse_line(":").points.empty());
  EXPECT_TRUE(parse_line("': 1").points.empty());
  EXPECT_TRUE(parse_line("tensor(").points.empty());
  EXPECT_TRUE(parse_line("x=tensor(1").points.empty());
  EXPECT_TRUE(parse_line(std::string(500, 'a') + "=1").points.empty());  // key too long
  EXPECT_EQ(values_of("loss=1 loss=2"), (std::map<std::string, double>{{"loss", 1}}));
}

TEST(LineParser, NumberTokensAreWholeNumbersOnly) {
  double v = 0;
  for (const char* good :
       {"0", "-1", "+2", "3.5", ".5", "5.", "1e-5", "1E+05", "nan", "NaN", "-inf", "Infinity"})
    EXPECT_TRUE(parse_number_token(good, v)) << good;
  for (const char* bad :
       {"", "-", ".", "e5", "1.2.3", "0x1f", "12:30", "1e", "1-2", "nan1", "1,000", "inf5", "--1"})
    EXPECT_FALSE(parse_number_token(bad, v)) << bad;
}

TEST(OutputStreamParser, ARedrawWithUnchangedValuesYieldsNothing) {
  OutputStreamParser stream;
  std::vector<Point> out;
  stream.feed("Epoch 0:  10%|#| 10/100 [00:01<00:09, 10.0it/s, loss=0.9, v_num=0]\r", out);
  EXPECT_EQ(values_of(out),
            (std::map<std::string, double>{{"Epoch", 0}, {"iterations_per_second", 10}, {"loss", 0.9}}));
  out.clear();
  stream.feed("Epoch 0:  11%|#| 11/100 [00:01<00:09, 10.0it/s, loss=0.9, v_num=0]\r", out);
  EXPECT_TRUE(out.empty());
  stream.feed("Epoch 0:  12%|#| 12/100 [00:01<00:09, 10.0it/s, loss=0.8, v_num=0]\r", out);
  EXPECT_EQ(values_of(out), (std::map<std::string, double>{{"loss", 0.8}}));
  out.clear();
  // Plain lines are not redraws: the same value printed twice is two observations.
  stream.feed("loss=0.5\nloss=0.5\n", out);
  EXPECT_EQ(out.size(), 2u);
}

TEST(OutputStreamParser, ParsesAWholeHuggingFaceRunOutput) {
  OutputStreamParser stream;
  std::vector<Point> out;
  stream.feed("***** Running training *****\n  Num examples = 1,000\n  Num Epochs = 3\n", out);
  stream.feed("\r  0%|          | 0/375 [00:00<?, ?it/s]\r  1%|1         | 5/375 [00:01<01:14,  4.98it/s]",
              out);
  stream.feed("\r\n{'loss': 0.6931, 'grad_norm': 2.5, 'learning_rate': 4.9e-05, 'epoch': 0.04}\n", out);
  stream.feed("\x1b[A\r  2%|2         | 8/375 [00:01<01:13,  5.01it/s]", out);
  stream.finish(out);
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out[0].name, "iterations_per_second");
  EXPECT_EQ(out[1].name, "loss");
  EXPECT_EQ(out[5].name, "iterations_per_second");
  EXPECT_DOUBLE_EQ(out[5].value, 5.01);
  EXPECT_EQ(stream.lines(), 7u);
}

}  // namespace
}  // namespace gpuhost::metrics
