#include "telemetry/prometheus_text.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace gpuhost::telemetry {
namespace {

TEST(PrometheusText, WritesHelpAndTypeOncePerFamilyAndGroupsItsSamples) {
  MetricSet set;
  set.add("a_total", MetricType::counter, "A.", {{"gpu", "0"}}, 1);
  set.add("b", MetricType::gauge, "B.", {{"gpu", "0"}}, 2);
  set.add("a_total", MetricType::counter, "A.", {{"gpu", "1"}}, 3);
  auto text = to_prometheus_text(set);
  ASSERT_TRUE(text) << text.error().message;
  EXPECT_EQ(*text,
            "# HELP a_total A.\n# TYPE a_total counter\na_total{gpu=\"0\"} 1\na_total{gpu=\"1\"} 3\n"
            "# HELP b B.\n# TYPE b gauge\nb{gpu=\"0\"} 2\n");
}

TEST(PrometheusText, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(escape_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(escape_help("x\\y\nz\"q"), "x\\\\y\\nz\"q");
  MetricSet set;
  set.add("m", MetricType::gauge, "line1\nline2", {{"model", "A \"big\" GPU\n"}}, 1);
  auto text = to_prometheus_text(set);
  ASSERT_TRUE(text);
  EXPECT_NE(text->find("# HELP m line1\\nline2\n"), std::string::npos);
  EXPECT_NE(text->find("m{model=\"A \\\"big\\\" GPU\\n\"} 1\n"), std::string::npos);
}

TEST(PrometheusText, FormatsSpecialAndExactValues) {
  EXPECT_EQ(format_sample_value(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(format_sample_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_sample_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_sample_value(0), "0");
  EXPECT_EQ(format_sample_value(81920), "81920");
  EXPECT_EQ(format_sample_value(0.1), "0.1");
  EXPECT_EQ(format_sample_value(61.5), "61.5");
  EXPECT_EQ(std::stod(format_sample_value(1.0 / 3.0)), 1.0 / 3.0);
}

TEST(PrometheusText, ValidatesNames) {
  EXPECT_TRUE(is_valid_metric_name("DCGM_FI_DEV_GPU_UTIL"));
  EXPECT_TRUE(is_valid_metric_name("job:rate5m"));
  EXPECT_FALSE(is_valid_metric_name("9lives"));
  EXPECT_FALSE(is_valid_metric_name("a-b"));
  EXPECT_FALSE(is_valid_metric_name(""));
  EXPECT_TRUE(is_valid_label_name("modelName"));
  EXPECT_FALSE(is_valid_label_name("__name__"));
  EXPECT_FALSE(is_valid_label_name("a:b"));
}

TEST(PrometheusText, RejectsInvalidNamesDuplicatesAndTypeConflicts) {
  {
    MetricSet set;
    set.add("bad-name", MetricType::gauge, "", {}, 1);
    EXPECT_FALSE(to_prometheus_text(set));
  }
  {
    MetricSet set;
    set.add("m", MetricType::gauge, "", {{"bad-label", "x"}}, 1);
    EXPECT_FALSE(to_prometheus_text(set));
  }
  {
    MetricSet set;
    set.add("m", MetricType::gauge, "", {{"a", "1"}, {"b", "2"}}, 1);
    set.add("m", MetricType::gauge, "", {{"b", "2"}, {"a", "1"}}, 2);
    EXPECT_FALSE(to_prometheus_text(set));
  }
  {
    MetricSet set;
    set.add("m", MetricType::gauge, "", {}, 1);
    set.add("m", MetricType::counter, "", {{"x", "1"}}, 1);
    auto text = to_prometheus_text(set);
    ASSERT_FALSE(text);
    EXPECT_NE(text.error().message.find("conflict"), std::string::npos);
  }
}

TEST(PrometheusText, EmptySetIsEmptyText) {
  auto text = to_prometheus_text(MetricSet{});
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, "");
}

}  // namespace
}  // namespace gpuhost::telemetry
