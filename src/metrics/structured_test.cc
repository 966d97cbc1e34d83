#include "metrics/structured.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "metrics/test_points.h"

namespace gpuhost::metrics {
namespace {

using testing::values_of;

// Shaped like a transformers Trainer checkpoint's trainer_state.json (research/05 §2.1), with the
// NaN Python's json module writes for a diverged loss.
constexpr std::string_view k_trainer_state = R"({
  "best_metric": null,
  "best_model_checkpoint": null,
  "epoch": 0.32,
  "eval_steps": 500,
  "global_step": 20,
  "is_local_process_zero": true,
  "log_history": [
    {
      "epoch": 0.16,
      "grad_norm": 3.52,
      "learning_rate": 4.8e-05,
      "loss": 0.6931,
      "step": 10
    },
    {
      "epoch": 0.32,
      "eval_accuracy": 0.5,
      "eval_loss": NaN,
      "eval_runtime": 1.23,
      "eval_samples_per_second": 100.5,
      "step": 20
    },
    {
      "epoch": 0.32,
      "step": 20,
      "total_flos": 1.2e+15,
      "train_loss": Infinity,
      "train_runtime": "slow"
    }
  ],
  "logging_steps": 10,
  "max_steps": 20,
  "trial_name": "NaN in a string stays a string"
})";

TEST(TrainerState, ReadsEveryNumericKeyOfEachLogHistoryEntryWithItsStep) {
  auto entries = parse_trainer_state(k_trainer_state);
  ASSERT_TRUE(entries) << entries.error().message;
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[0].step, 10);
  EXPECT_EQ(values_of((*entries)[0].points),
            (std::map<std::string, double>{
                {"epoch", 0.16}, {"grad_norm", 3.52}, {"learning_rate", 4.8e-05}, {"loss", 0.6931}}));
  for (const auto& p : (*entries)[0].points) EXPECT_EQ(p.step, 10);
  auto eval = values_of((*entries)[1].points);
  EXPECT_TRUE(std::isnan(eval.at("eval_loss")));
  EXPECT_EQ(eval.size(), 5u);
  auto last = values_of((*entries)[2].points);
  EXPECT_EQ(last.at("train_loss"), INFINITY);
  EXPECT_FALSE(last.contains("train_runtime"));
}

TEST(TrainerState, AHalfWrittenFileIsAParseErrorNotAnEmptyHistory) {
  auto half = parse_trainer_state(k_trainer_state.substr(0, k_trainer_state.size() / 2));
  ASSERT_FALSE(half);
  EXPECT_EQ(half.error().code, ErrorCode::parse_error);
  EXPECT_NE(half.error().message.find("trainer_state.json"), std::string::npos);
  auto other = parse_trainer_state(R"({"global_step": 3})");
  ASSERT_FALSE(other);
  EXPECT_NE(other.error().message.find("log_history"), std::string::npos);
}

TEST(CsvColumns, ReadsLightningSparseRowsWithTheStepColumn) {
  // Lightning CSVLogger: header = union of keys, train and val on separate rows.
  CsvColumns columns(split_csv_record("epoch,step,train_loss_step,val_loss,val_acc,train_loss_epoch"));
  auto train = columns.row_points("0,49,0.6931,,,");
  ASSERT_EQ(train.size(), 2u);
  EXPECT_EQ(values_of(train), (std::map<std::string, double>{{"epoch", 0}, {"train_loss_step", 0.6931}}));
  EXPECT_EQ(train[0].step, 49);
  auto val = columns.row_points("0,99,,0.55,0.81,");
  EXPECT_EQ(values_of(val),
            (std::map<std::string, double>{{"epoch", 0}, {"val_acc", 0.81}, {"val_loss", 0.55}}));
  EXPECT_TRUE(std::isnan(values_of(columns.row_points("1,149,nan,,,"))["train_loss_step"]));
  EXPECT_EQ(columns.row_points("1,149,0.5,,,,,9,9").size(), 2u);  // cells past the header ignored
}

TEST(CsvColumns, ReadsUltralyticsResultsWithEpochAsStepIncludingPaddedOldHeaders) {
  CsvColumns current(split_csv_record(
      "epoch,time,train/box_loss,train/cls_loss,train/dfl_loss,metrics/precision(B),metrics/recall(B),"
      "metrics/mAP50(B),metrics/mAP50-95(B),val/box_loss,val/cls_loss,val/dfl_loss,lr/pg0,lr/pg1,lr/pg2"));
  auto row = current.row_points(
      "1,12.345,1.2345,2.3456,1.1111,0.5,0.4,0.45,0.3,1.3,2.4,1.2,0.00333,0.00333,0.00333");
  ASSERT_EQ(row.size(), 14u);
  EXPECT_EQ(row[0].name, "time");
  EXPECT_EQ(row[0].step, 1);
  EXPECT_DOUBLE_EQ(values_of(row)["metrics/mAP50-95(B)"], 0.3);

  CsvColumns old(split_csv_record(
      "                  epoch,      train/box_loss,      train/cls_loss,      train/dfl_loss,   "
      "metrics/precision(B),      metrics/recall(B)"));
  auto padded = old.row_points(
      "                      0,              1.2345,               2.3456,        "
      "      1.1111,                 0.5,                0.4");
  ASSERT_EQ(padded.size(), 5u);
  EXPECT_EQ(padded[0].name, "train/box_loss");
  EXPECT_EQ(padded[0].step, 0);
  EXPECT_DOUBLE_EQ(padded[4].value, 0.4);
}

TEST(CsvColumns, SplitsQuotedFieldsAndIgnoresText) {
  EXPECT_EQ(split_csv_record(R"(a,"b,c","d ""e""", f )"),
            (std::vector<std::string>{"a", "b,c", "d \"e\"", "f"}));
  EXPECT_EQ(split_csv_record("x,y\r"), (std::vector<std::string>{"x", "y"}));
  CsvColumns columns(split_csv_record("step,name,loss"));
  auto points = columns.row_points("5,resnet,1e-3");
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].name, "loss");
  EXPECT_EQ(points[0].step, 5);
  // A row without a usable step still gives its values.
  auto no_step = columns.row_points(",x,0.5");
  ASSERT_EQ(no_step.size(), 1u);
  EXPECT_FALSE(no_step[0].step.has_value());
}

TEST(MetricsJsonLine, ReadsNumbersStepTimeAndFlattensObjects) {
  auto points = parse_metrics_json_line(
      R"({"step": 12, "time": 1700000000.5, "loss": 0.25, "train": {"acc": 0.9, "deep": {"x": 1}}, )"
      R"("name": "run", "ok": true, "list": [1, 2], "none": null, "lr": 1e-4})");
  ASSERT_TRUE(points) << points.error().message;
  EXPECT_EQ(values_of(*points), (std::map<std::string, double>{
                                    {"loss", 0.25}, {"train/acc", 0.9}, {"train/deep/x", 1}, {"lr", 1e-4}}));
  for (const auto& p : *points) {
    EXPECT_EQ(p.step, 12);
    EXPECT_DOUBLE_EQ(p.wall_time, 1700000000.5);
  }
  auto nan = parse_metrics_json_line(R"({"loss": NaN, "grad": -Infinity, "wall_time": 1700000000123})");
  ASSERT_TRUE(nan);
  EXPECT_TRUE(std::isnan(values_of(*nan)["loss"]));
  EXPECT_EQ(values_of(*nan)["grad"], -INFINITY);
  EXPECT_DOUBLE_EQ((*nan)[0].wall_time, 1700000000.123);  // milliseconds
  // A "time" that is a duration, not a clock reading, is a metric like any other.
  auto duration = parse_metrics_json_line(R"({"step": 3, "time": 0.25})");
  ASSERT_TRUE(duration);
  ASSERT_EQ(duration->size(), 1u);
  EXPECT_EQ((*duration)[0].name, "time");
  EXPECT_EQ((*duration)[0].wall_time, 0);
}

TEST(MetricsJsonLine, RejectsWhatIsNotAnObject) {
  for (const char* bad :
       {"", "{\"loss\": 0.5", "[1, 2]", "42", "loss=0.5", "{'loss': 0.5}", "{\"a\": NaNx}"}) {
    auto r = parse_metrics_json_line(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::parse_error) << bad;
  }
  std::string many = "{";
  for (int i = 0; i < 1000; ++i)
    many += (i ? "," : "") + ("\"k" + std::to_string(i) + "\":" + std::to_string(i));
  many += "}";
  EXPECT_EQ(parse_metrics_json_line(many)->size(), k_max_points_per_json_line);
}

}  // namespace
}  // namespace gpuhost::metrics
