#include "knowledge/knowledge.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "base/json.h"
#include "knowledge/embedded_data.h"
#include "knowledge/test_support.h"

namespace gpuhost::knowledge {
namespace {

using testing::embedded;
using testing::v;

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class KnowledgeOverride : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    m_dir = fs::temp_directory_path() / (std::string("gpuhost_knowledge_") + info->name());
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(m_dir, ec);
  }

  // The embedded file, parsed, for a test to modify.
  static json::Value embedded_json(std::string_view name) {
    const EmbeddedFile* file = data::find_embedded(name);
    EXPECT_NE(file, nullptr) << name;
    return *json::parse(file->bytes);
  }

  fs::path write_text(std::string_view name, std::string_view text) {
    fs::path path = m_dir / std::string(name);
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  fs::path write_json(std::string_view name, const json::Value& value) {
    return write_text(name, json::dump(value, 2));
  }

  // Loads with m_dir as the override and returns the error message (empty when it loaded).
  std::string load_error() {
    auto loaded = load_knowledge({{m_dir}});
    return loaded ? std::string() : loaded.error().message;
  }

  fs::path m_dir;
};

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(KnowledgeLoader, EmbeddedDataLoads) {
  auto loaded = load_knowledge();
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_FALSE(loaded->cuda_drivers.releases.empty());
  EXPECT_FALSE(loaded->gpus.models.empty());
  EXPECT_FALSE(loaded->arch_support.architectures.empty());
  EXPECT_FALSE(loaded->pytorch.releases.empty());
  EXPECT_FALSE(loaded->tensorflow.releases.empty());
  EXPECT_FALSE(loaded->cudnn.releases.empty());
}

TEST(KnowledgeLoader, EveryFileIsEmbeddedAndCitable) {
  const auto& knowledge = embedded();
  ASSERT_EQ(knowledge.files.size(), knowledge_file_names().size());
  for (std::string_view name : knowledge_file_names()) {
    EXPECT_NE(data::find_embedded(name), nullptr) << name;
    const FileMetadata* meta = knowledge.file(name);
    ASSERT_NE(meta, nullptr) << name;
    EXPECT_EQ(meta->origin, FileOrigin::embedded);
    EXPECT_TRUE(meta->path.empty());
    EXPECT_GT(meta->rows, 0u) << name;
    EXPECT_FALSE(meta->sources.empty()) << name;
    EXPECT_EQ(meta->as_of, "2026-11") << name;
  }
}

TEST_F(KnowledgeOverride, DirectoryOverrideReplacesARow) {
  json::Value doc = embedded_json("cuda_drivers.json");
  for (auto& row : doc["toolkits"].items())
    if (row.get_string("cuda") == "12.4.0") row["min_driver_linux_x86_64"] = "549.1";
  write_json("cuda_drivers.json", doc);

  auto loaded = load_knowledge({{m_dir}});
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->cuda_drivers.min_driver(v("12.4"), Os::linux), v("549.1"));
  const FileMetadata* meta = loaded->file("cuda_drivers.json");
  EXPECT_EQ(meta->origin, FileOrigin::override_file);
  EXPECT_TRUE(contains(meta->path, "cuda_drivers.json"));
  EXPECT_EQ(loaded->file("gpus.json")->origin, FileOrigin::embedded);
}

TEST_F(KnowledgeOverride, SingleFileOverrideAddsARelease) {
  json::Value doc = embedded_json("tensorflow.json");
  json::Value row = doc["releases"].items().front();
  row["version"] = "2.22.0";
  doc["releases"].items().insert(doc["releases"].items().begin(), row);
  fs::path path = write_json("tensorflow.json", doc);

  auto loaded = load_knowledge({{path}});
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->tensorflow.releases.front().version, v("2.22.0"));
}

TEST_F(KnowledgeOverride, CorruptRowNamesFileRowAndField) {
  json::Value doc = embedded_json("gpus.json");
  doc["gpus"].items()[7]["compute_capability"] = "eight";
  write_json("gpus.json", doc);
  std::string error = load_error();
  EXPECT_TRUE(contains(error, (m_dir / "gpus.json").generic_string())) << error;
  EXPECT_TRUE(contains(error, "gpus[7]")) << error;
  EXPECT_TRUE(contains(error, "(key a100-sxm4-40gb)")) << error;
  EXPECT_TRUE(contains(error, "field \"compute_capability\"")) << error;
  EXPECT_TRUE(contains(error, "\"eight\"")) << error;
}

TEST_F(KnowledgeOverride, BadSpecFieldNamesRowAndField) {
  json::Value doc = embedded_json("gpus.json");
  doc["gpus"].items()[7]["spec"]["pcie_width"] = 3;
  write_json("gpus.json", doc);
  std::string error = load_error();
  EXPECT_TRUE(contains(error, "(key a100-sxm4-40gb): spec")) << error;
  EXPECT_TRUE(contains(error, "field \"pcie_width\"")) << error;
}

TEST_F(KnowledgeOverride, InvalidJsonNamesFile) {
  write_text("pytorch.json", "{\"schema_version\": 1,");
  std::string error = load_error();
  EXPECT_TRUE(contains(error, "pytorch.json: invalid JSON")) << error;
}

TEST_F(KnowledgeOverride, MisspeltFieldIsRejectedWithASuggestion) {
  json::Value doc = embedded_json("cuda_drivers.json");
  auto& row = doc["toolkits"].items()[2];
  json::Value windows = row["min_driver_windows"];
  row["min_drvier_windows"] = windows;
  auto& members = row.members();
  members.erase(std::find_if(members.begin(), members.end(),
                             [](const auto& m) { return m.first == "min_driver_windows"; }));
  write_json("cuda_drivers.json", doc);
  std::string error = load_error();
  EXPECT_TRUE(contains(error, "toolkits[2] (cuda 13.2.0): unknown field \"min_drvier_windows\"")) << error;
  EXPECT_TRUE(contains(error, "did you mean \"min_driver_windows\"")) << error;
}

TEST_F(KnowledgeOverride, MissingSourceIsRejected) {
  json::Value doc = embedded_json("cudnn.json");
  auto& members = doc["releases"].items()[0].members();
  members.erase(
      std::find_if(members.begin(), members.end(), [](const auto& m) { return m.first == "source"; }));
  write_json("cudnn.json", doc);
  std::string error = load_error();
  EXPECT_TRUE(contains(error, "releases[0]")) << error;
  EXPECT_TRUE(contains(error, "field \"source\": missing")) << error;
}

TEST_F(KnowledgeOverride, BadAsOfIsRejected) {
  json::Value doc = embedded_json("cuda_arch_support.json");
  doc["architectures"].items()[1]["as_of"] = "Nov 2026";
  write_json("cuda_arch_support.json", doc);
  std::string error = load_error();
  EXPECT_TRUE(contains(error, "architectures[1] (Blackwell): field \"as_of\"")) << error;
}

TEST_F(KnowledgeOverride, DuplicateRowIsRejected) {
  json::Value doc = embedded_json("pytorch.json");
  doc["releases"].push_back(doc["releases"].items()[3]);
  write_json("pytorch.json", doc);
  std::string error = load_error();
  EXPECT_TRUE(contains(error, "duplicate row \"2.11\"")) << error;
}

TEST_F(KnowledgeOverride, NonVersionIsRejected) {
  json::Value doc = embedded_json("cuda_drivers.json");
  doc["minor_version_compatibility"].items()[1]["min_driver_linux_x86_64"] = "525.x";
  write_json("cuda_drivers.json", doc);
  std::string error = load_error();
  EXPECT_TRUE(
      contains(error, "minor_version_compatibility[1] (cuda_major 12): field \"min_driver_linux_x86_64\""))
      << error;
}

TEST_F(KnowledgeOverride, WrongTypeIsRejected) {
  json::Value doc = embedded_json("tensorflow.json");
  doc["releases"].items()[0]["windows_native_gpu"] = "no";
  write_json("tensorflow.json", doc);
  std::string error = load_error();
  EXPECT_TRUE(contains(
      error, "releases[0] (tensorflow 2.21.0): field \"windows_native_gpu\": expected true or false"))
      << error;
}

TEST_F(KnowledgeOverride, MissingRequiredFactIsRejected) {
  json::Value doc = embedded_json("tensorflow.json");
  auto& facts = doc["facts"].items();
  facts.erase(std::find_if(facts.begin(), facts.end(),
                           [](const auto& f) { return f.get_string("id") == "wsl_driver_floor"; }));
  write_json("tensorflow.json", doc);
  EXPECT_TRUE(contains(load_error(), "required fact \"wsl_driver_floor\""));
}

TEST_F(KnowledgeOverride, WrongSchemaVersionIsRejected) {
  json::Value doc = embedded_json("gpus.json");
  doc["schema_version"] = 2;
  write_json("gpus.json", doc);
  EXPECT_TRUE(contains(load_error(), "field \"schema_version\": this gpuhost reads schema 1, found 2"));
}

TEST_F(KnowledgeOverride, ArchitectureNamesMustAgreeAcrossFiles) {
  json::Value doc = embedded_json("gpus.json");
  doc["gpus"].items()[0]["architecture"] = "Turing";
  write_json("gpus.json", doc);
  std::string error = load_error();
  EXPECT_TRUE(contains(error, "gpus[0] (key v100-sxm2-16gb): field \"architecture\"")) << error;
}

TEST_F(KnowledgeOverride, UnknownFileNameIsRejected) {
  write_text("cuda_driver.json", "{}");
  std::string error = load_error();
  EXPECT_TRUE(contains(error, "is not a knowledge file")) << error;
  EXPECT_TRUE(contains(error, "did you mean \"cuda_drivers.json\"")) << error;
}

TEST_F(KnowledgeOverride, OtherFilesInTheDirectoryAreIgnored) {
  write_text("README.txt", "notes");
  EXPECT_EQ(load_error(), "");
}

TEST_F(KnowledgeOverride, MissingPathIsNotFound) {
  auto loaded = load_knowledge({{m_dir / "absent"}});
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.error().code, ErrorCode::not_found);
  EXPECT_TRUE(contains(loaded.error().message, "absent"));
}

TEST_F(KnowledgeOverride, LaterOverridesWin) {
  json::Value doc = embedded_json("cuda_drivers.json");
  doc["toolkits"].items()[0]["min_driver_linux_x86_64"] = "600.1";
  fs::path first = write_json("cuda_drivers.json", doc);
  fs::path second_dir = m_dir / "second";
  fs::create_directories(second_dir);
  doc["toolkits"].items()[0]["min_driver_linux_x86_64"] = "600.2";
  std::ofstream(second_dir / "cuda_drivers.json", std::ios::binary) << json::dump(doc, 2);

  auto loaded = load_knowledge({{first, second_dir}});
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->cuda_drivers.releases.front().min_driver_linux, v("600.2"));
}

}  // namespace
}  // namespace gpuhost::knowledge
