#include "plan/instances.h"

#include <gtest/gtest.h>

#include "knowledge/knowledge.h"

namespace gpuhost::plan {
namespace {

const knowledge::GpuTable& gpus() {
  static const knowledge::Knowledge k = *knowledge::load_knowledge();
  return k.gpus;
}

TEST(InstanceCatalog, BuiltInCatalogLoadsAndUsesKnownGpuKeys) {
  auto catalog = builtin_instance_catalog();
  ASSERT_TRUE(catalog) << catalog.error().message;
  EXPECT_GE(catalog->instances.size(), 20u);
  for (const auto& in : catalog->instances) {
    EXPECT_NE(gpus().find_by_key(in.gpu), nullptr) << in.instance_type << " uses unknown GPU " << in.gpu;
    for (auto price : {in.on_demand, in.spot, in.reserved})
      if (price) {
        EXPECT_GT(*price, 0) << in.instance_type;
      }
  }
}

TEST(InstanceCatalog, WindowsPriceAddsTheAwsLicencePerVcpu) {
  auto catalog = *builtin_instance_catalog();
  for (const auto& in : catalog.instances) {
    if (in.instance_type != "g4dn.xlarge") continue;
    // 0.526 + 4 vCPU x 0.046 = 0.71 (research 03 section 2.2: "0.526 -> ~0.710").
    EXPECT_NEAR(*catalog.windows_price(in), 0.710, 1e-9);
  }
  for (const auto& in : catalog.instances) {
    if (in.instance_type != "g5.xlarge") continue;
    EXPECT_NEAR(*catalog.windows_price(in), *in.on_demand + 4 * 0.046, 1e-9);
    Instance unknown = in;
    unknown.vcpus.reset();
    std::string why;
    EXPECT_FALSE(catalog.windows_price(unknown, &why));  // vCPUs not recorded: no invented number
    EXPECT_NE(why.find("vCPU count unknown"), std::string::npos);
  }
}

TEST(InstanceCatalog, RejectsAZeroPriceAndNamesTheRow) {
  auto r = parse_instance_catalog(R"({"schema_version": 1, "instances": [
    {"cloud": "x", "region": "r", "instance_type": "t", "gpu": "t4", "gpu_count": 1, "gpu_memory_gb": 16,
     "on_demand_usd_per_hour": 0, "source": "s", "as_of": "2025-01"}]})",
                                  "mine.json");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("mine.json: instances[0] (x t)"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("write null"), std::string::npos);
}

TEST(InstanceCatalog, RejectsAMisspeltField) {
  auto r = parse_instance_catalog(R"({"schema_version": 1, "instances": [
    {"cloud": "x", "region": "r", "instance_type": "t", "gpu": "t4", "gpu_count": 1, "gpu_memory_gb": 16,
     "on_demand_usd_per_huor": 1.0, "source": "s", "as_of": "2025-01"}]})",
                                  "mine.json");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("did you mean"), std::string::npos) << r.error().message;
}

// Header order of catalogs/v7/aws/vms.csv (research 03 section 1.3), GpuInfo a Python dict literal.
constexpr const char* k_aws_csv =
    "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone\n"
    "g4dn.xlarge,T4,1,4,16,\"{'Gpus': [{'Name': 'T4', 'Manufacturer': 'NVIDIA', 'Count': 1, 'MemoryInfo': {'SizeInMiB': 16384}}], "
    "'TotalGpuMemoryInMiB': 16384}\",0.526,0.2010,us-east-1,us-east-1a\n"
    "g4dn.xlarge,T4,1,4,16,\"{'Gpus': [{'Name': 'T4', 'MemoryInfo': {'SizeInMiB': 16384}}]}\",0.526,0.1845,us-east-1,us-east-1b\n"
    "p3.2xlarge,V100,1,8,61,\"{'Gpus': [{'Name': 'V100', 'MemoryInfo': {'SizeInMiB': 16384}}]}\",3.06,,us-east-1,us-east-1a\n"
    "m5.large,,,2,8,,0.096,0.03,us-east-1,us-east-1a\n";

TEST(SkyPilotCsv, ParsesByHeaderNameAndKeepsTheCheapestZone) {
  auto r = parse_skypilot_csv(k_aws_csv, "vms.csv", "aws", gpus());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->instances.size(), 2u);
  EXPECT_EQ(r->instances[0].gpu, "t4");
  EXPECT_DOUBLE_EQ(*r->instances[0].spot, 0.1845);
  EXPECT_EQ(*r->instances[0].vcpus, 4);
  EXPECT_FALSE(r->instances[1].spot);  // empty SpotPrice is missing, not zero
  EXPECT_EQ(r->warnings.size(), 1u);   // the CPU-only row
}

TEST(SkyPilotCsv, ReordersColumnsByName) {
  // GCP/Azure put Price and Region elsewhere; only names matter.
  auto r = parse_skypilot_csv(
      "Region,Price,SpotPrice,InstanceType,AcceleratorCount,AcceleratorName\neastus,3.673,0.444433,Standard_NC24ads_A100_v4,1,A100-80GB\n",
      "azure.csv", "azure", gpus());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->instances.size(), 1u);
  EXPECT_DOUBLE_EQ(*r->instances[0].on_demand, 3.673);
  EXPECT_EQ(r->instances[0].gpu_memory_gb, 80);
}

TEST(SkyPilotCsv, ErrorsCarryLineAndColumn) {
  auto r = parse_skypilot_csv("InstanceType,AcceleratorName,AcceleratorCount,Price,Region\ng4dn.xlarge,T4,1,abc,us-east-1\n", "v.csv",
                              "aws", gpus());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::parse_error);
  EXPECT_NE(r.error().message.find("v.csv:2:18: Price \"abc\""), std::string::npos) << r.error().message;

  r = parse_skypilot_csv("InstanceType,AcceleratorName,AcceleratorCount,Price,Region\ng4dn.xlarge,\"T4,1,0.5,x\n", "v.csv", "aws", gpus());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("v.csv:2:13: unterminated quoted cell"), std::string::npos) << r.error().message;

  r = parse_skypilot_csv("InstanceType,AcceleratorName,Price,Region\n", "v.csv", "aws", gpus());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("missing column \"AcceleratorCount\""), std::string::npos);

  r = parse_skypilot_csv("InstanceType,AcceleratorName,AcceleratorCount,Price,Region\ng4dn.xlarge,T4,1\n", "v.csv", "aws", gpus());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("v.csv:2:1: 3 cells, the header has 5"), std::string::npos) << r.error().message;
}

TEST(SkyPilotCsv, CorrectsTheH200MemoryQuirk) {
  // catalogs/v7/common/metadata.csv lists H200 as 80 GB (research 03 quirk Q1); gpus.json says 141.
  auto r = parse_skypilot_csv(
      "InstanceType,AcceleratorName,AcceleratorCount,GpuInfo,Price,Region\n"
      "p5en.48xlarge,H200,8,\"{'Gpus': [{'Name': 'H200', 'MemoryInfo': {'SizeInMiB': 81920}}]}\",84.8,us-east-1\n",
      "v.csv", "aws", gpus());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->instances[0].gpu_memory_gb, 141);
  ASSERT_EQ(r->instances[0].warnings.size(), 1u);
}

}  // namespace
}  // namespace gpuhost::plan
