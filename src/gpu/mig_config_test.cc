#include "gpu/mig_config.h"

#include <gtest/gtest.h>

#include "base/yaml.h"

namespace gpuhost::gpu {
namespace {

TEST(MigProfileName, ReadsMigPartedNamesAndRefusesOthers) {
  auto p = parse_mig_profile_name("3g.40gb");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->gpu_slices, 3u);
  EXPECT_EQ(p->memory_gb, 40u);
  EXPECT_EQ(p->compute_slices, 0u);
  auto c = parse_mig_profile_name("1c.3g.40gb");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->compute_slices, 1u);
  EXPECT_EQ(c->gpu_instance(), "3g.40gb");
  EXPECT_EQ(parse_mig_profile_name("1g.10gb+me")->attributes, "+me");
  for (const char* bad :
       {"", "3g", "3g.40", "g.40gb", "0g.10gb", "3g.40gb+x", "4c.3g.40gb", "3g.40GB", "1g.10gb "})
    EXPECT_FALSE(parse_mig_profile_name(bad)) << bad;
}

TEST(MigConfig, SelectsGpusByIndexAndPciId) {
  auto file = parse_mig_config(R"(version: v1
mig-configs:
  c:
    - device-filter: ["0x20B210DE", "0x233010DE:0x16C110DE"]
      devices: [0, 2]
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
)");
  ASSERT_TRUE(file) << file.error().message;
  const MigConfigEntry& e = file->find("c")->entries[0];
  EXPECT_TRUE(e.selects(0, 0x20B210DE, 0));
  EXPECT_FALSE(e.selects(1, 0x20B210DE, 0));
  EXPECT_TRUE(e.selects(2, 0x233010DE, 0x16C110DE));
  EXPECT_FALSE(e.selects(2, 0x233010DE, 0x17C110DE));
  EXPECT_FALSE(e.selects(0, 0x20B010DE, 0));
  EXPECT_EQ(e.mig_devices, (std::vector<std::pair<std::string, unsigned>>{{"1g.10gb", 7}}));
}

TEST(MigConfig, RefusesWhatMigPartedRefusesNamingThePath) {
  const auto error = [](const char* text) {
    auto f = parse_mig_config(text);
    return f ? std::string("accepted") : f.error().message;
  };
  EXPECT_EQ(error("version: v1\nmig-configs: {}\n"), "mig-configs: at least one named config is required");
  EXPECT_EQ(error("version: v1\nmig-configs:\n  a: []\n"),
            "mig-configs.a: a non-empty list of entries expected");
  EXPECT_EQ(error("version: v1\nmig-configs:\n  a:\n    - mig-enabled: false\n"),
            "mig-configs.a[0]: 'devices' is required (all, or a list of GPU indices)");
  EXPECT_EQ(error("version: v1\nmig-configs:\n  a:\n    - devices: some\n      mig-enabled: false\n"),
            "mig-configs.a[0].devices: 'some': all, or a list of GPU indices");
  EXPECT_EQ(
      error(
          "version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n      mig-devices:\n"
          "        \"1g.10gb\": -1\n"),
      "mig-configs.a[0].mig-devices.1g.10gb: the count is an integer from 0");
  EXPECT_EQ(
      error(
          "version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n      mig-devices:\n"
          "        big: 1\n"),
      "mig-configs.a[0].mig-devices.big: 'big' is not a MIG profile name (such as 1g.10gb, 3g.40gb, "
      "1g.10gb+me, 1c.3g.40gb)");
  EXPECT_EQ(error("version: v1\nextra: 1\nmig-configs: {}\n"),
            "extra: unknown key (a mig-parted file has version and mig-configs)");
}

// What export writes reads back as the same config, through the YAML text.
TEST(MigConfig, ExportReadsBackAsTheSameConfig) {
  MigConfig config{"current", {}};
  MigConfigEntry a;
  a.device_filter = {{0x233010DE, std::nullopt}};
  a.devices = std::vector<unsigned>{0, 1};
  a.mig_enabled = true;
  a.mig_devices = {{"1g.10gb", 2}, {"3g.40gb", 1}};
  MigConfigEntry b;
  b.devices = std::nullopt;
  b.mig_enabled = false;
  config.entries = {a, b};
  const std::string text = yaml::dump(mig_config_to_value(config));
  auto back = parse_mig_config(text);
  ASSERT_TRUE(back) << back.error().message << "\n" << text;
  const MigConfig* c = back->find("current");
  ASSERT_TRUE(c);
  ASSERT_EQ(c->entries.size(), 2u);
  EXPECT_EQ(c->entries[0].devices, a.devices);
  EXPECT_EQ(c->entries[0].device_filter.size(), 1u);
  EXPECT_EQ(c->entries[0].device_filter[0].device_id, 0x233010DEu);
  EXPECT_EQ(c->entries[0].mig_devices, a.mig_devices);
  EXPECT_FALSE(c->entries[1].devices);
  EXPECT_FALSE(c->entries[1].mig_enabled);
}

}  // namespace
}  // namespace gpuhost::gpu
