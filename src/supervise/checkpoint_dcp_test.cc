// DCP folders checked against their metadata, on torch-free fixtures pickled under DCP's own
// class names (tests/fixtures/dcp/make_dcp_fixtures.py): complete saves in both layouts, a
// missing rank, truncated and torn shards, a missing or unfinished .metadata, stray files, and
// metadata that points outside the folder or would run code.
#include <gtest/gtest.h>

#include "supervise/checkpoint.h"
#include "supervise/checkpoint_fixtures.h"
#include "supervise/dcp_fixtures.h"

namespace gpuhost::supervise {
namespace {

namespace fs = std::filesystem;
using namespace fixtures;

class DcpCheckpoint : public ::testing::Test {
 protected:
  ScratchDir m_scratch{"dcp-test"};
  fs::path folder(const std::string& set, const std::string& name = "step-300") {
    fs::path p = m_scratch.path() / name;
    dcp_fixtures::lay_out(set, p);
    return p;
  }
  CheckpointVerdict validate(const fs::path& path, ValidationDepth depth) {
    auto verdict = validate_checkpoint(path, depth);
    EXPECT_TRUE(verdict) << verdict.error().message;
    return verdict.value_or(CheckpointVerdict{});
  }
  void expect_invalid(const fs::path& path, ValidationDepth depth, const std::string& words) {
    CheckpointVerdict v = validate(path, depth);
    EXPECT_FALSE(v.valid) << path;
    EXPECT_NE(v.problem.find(words), std::string::npos) << "problem: " << v.problem;
  }
  static bool has_note(const CheckpointVerdict& v, const std::string& words) {
    for (const std::string& note : v.notes)
      if (note.find(words) != std::string::npos) return true;
    return false;
  }
};

TEST_F(DcpCheckpoint, CompleteTwoRankSaveIsValidAtBothDepths) {
  fs::path p = folder("two_ranks");
  EXPECT_EQ(detect_checkpoint_format(p), CheckpointFormat::dcp_dir);
  for (auto depth : {ValidationDepth::structure, ValidationDepth::full}) {
    CheckpointVerdict v = validate(p, depth);
    EXPECT_TRUE(v.valid) << v.problem;
    EXPECT_EQ(v.format, CheckpointFormat::dcp_dir);
    EXPECT_EQ(v.step, 300);
    EXPECT_EQ(v.files.size(), 3u);
    EXPECT_TRUE(has_note(v, "version 1.0.0 from .metadata: 2 tensors in 3 chunks, 1 byte items; 2 data files from 2 ranks"))
        << (v.notes.empty() ? "" : v.notes.front());
  }
}

TEST_F(DcpCheckpoint, MissingMetadataMeansTheSaveHasNotFinished) {
  fs::path p = folder("two_ranks");
  fs::remove(p / ".metadata");
  EXPECT_EQ(detect_checkpoint_format(p), CheckpointFormat::dcp_dir);
  expect_invalid(p, ValidationDepth::structure, "no .metadata (the distributed checkpoint save has not finished)");
  write_bytes(p / ".metadata.tmp", std::string(dcp_fixtures::bytes("two_ranks.metadata")));
  expect_invalid(p, ValidationDepth::structure, "only .metadata.tmp");
}

TEST_F(DcpCheckpoint, AMetadataTmpNewerThanMetadataIsASaveInProgress) {
  fs::path p = folder("two_ranks");
  const auto metadata_time = fs::last_write_time(p / ".metadata");
  write_bytes(p / ".metadata.tmp", std::string(dcp_fixtures::bytes("two_ranks.metadata")));
  fs::last_write_time(p / ".metadata.tmp", metadata_time + std::chrono::seconds(5));
  expect_invalid(p, ValidationDepth::structure, ".metadata.tmp newer");
  fs::last_write_time(p / ".metadata.tmp", metadata_time - std::chrono::seconds(5));
  EXPECT_TRUE(validate(p, ValidationDepth::structure).valid);
}

TEST_F(DcpCheckpoint, AMissingRankFileIsNamedWithItsRank) {
  fs::path p = folder("two_ranks");
  fs::remove(p / "__1_0.distcp");
  expect_invalid(p, ValidationDepth::structure,
                 "__1_0.distcp is missing (written by rank 1); the metadata stores 2 items in it");
}

TEST_F(DcpCheckpoint, EveryTruncationOfAShardIsInvalid) {
  fs::path p = folder("two_ranks");
  const std::string shard(dcp_fixtures::bytes("two_ranks__1_0.distcp"));
  for (std::size_t length = shard.size(); length-- > 0;) {
    fs::resize_file(p / "__1_0.distcp", length);
    CheckpointVerdict v = validate(p, ValidationDepth::structure);
    ASSERT_FALSE(v.valid) << "length " << length;
    EXPECT_NE(v.problem.find("(truncated?)"), std::string::npos) << v.problem;
  }
}

TEST_F(DcpCheckpoint, ATornItemInsideAShardFailsTheFullCheck) {
  fs::path p = folder("two_ranks");
  // __1_0.distcp holds model.weight's second chunk, then model.bias: break the first item's end
  // record, which only the full check reads.
  std::string shard(dcp_fixtures::bytes("two_ranks__1_0.distcp"));
  const auto first_end = shard.find(std::string("PK\x05\x06", 4));
  ASSERT_NE(first_end, std::string::npos);
  ASSERT_NE(shard.find(std::string("PK\x05\x06", 4), first_end + 1), std::string::npos);
  shard[first_end + 2] = 'X';
  write_bytes(p / "__1_0.distcp", shard);
  EXPECT_TRUE(validate(p, ValidationDepth::structure).valid);
  expect_invalid(p, ValidationDepth::full, "__1_0.distcp (written by rank 1): the tensor item at byte 0");
}

TEST_F(DcpCheckpoint, EveryTruncationOfTheMetadataIsInvalid) {
  fs::path p = folder("two_ranks");
  const std::string metadata(dcp_fixtures::bytes("two_ranks.metadata"));
  for (std::size_t length = metadata.size(); length-- > 0;) {
    fs::resize_file(p / ".metadata", length);
    CheckpointVerdict v = validate(p, ValidationDepth::structure);
    ASSERT_FALSE(v.valid) << "length " << length;
    EXPECT_NE(v.problem.find(".metadata"), std::string::npos) << v.problem;
  }
}

TEST_F(DcpCheckpoint, StrayDataFilesFromAnEarlierSaveAreNotedNotFatal) {
  fs::path p = folder("two_ranks");
  write_bytes(p / "__2_0.distcp", pattern_bytes(300));
  CheckpointVerdict v = validate(p, ValidationDepth::full);
  EXPECT_TRUE(v.valid) << v.problem;
  EXPECT_TRUE(has_note(v, "1 data file not in the metadata (__2_0.distcp): left from an earlier save"));
}

TEST_F(DcpCheckpoint, PerRankMetadataLayout) {
  fs::path p = folder("per_rank");
  CheckpointVerdict v = validate(p, ValidationDepth::full);
  EXPECT_TRUE(v.valid) << v.problem;
  EXPECT_TRUE(has_note(v, "from 2 per-rank __<rank>.metadata files: 1 tensors in 2 chunks"));

  fs::remove(p / "__1.metadata");  // rank 1 did not finish: its chunk is missing from the union
  expect_invalid(p, ValidationDepth::structure, "layer.weight: chunks hold 6 of 12 elements (a rank's part is missing)");
  fs::remove(p / "__0.metadata");
  write_bytes(p / "__1.metadata", std::string(dcp_fixtures::bytes("per_rank__1.metadata")));
  expect_invalid(p, ValidationDepth::structure, "__0.metadata is missing (rank 0 has not finished its save)");
}

TEST_F(DcpCheckpoint, AChunkWithoutStoredDataIsInvalid) {
  expect_invalid(folder("gap"), ValidationDepth::structure, "model.weight: the chunk at [2, 0] has no stored data");
}

TEST_F(DcpCheckpoint, MetadataPointingOutsideTheFolderIsInvalid) {
  fs::path p = m_scratch.path() / "step-10";
  write_bytes(p / ".metadata", std::string(dcp_fixtures::bytes("escape.metadata")));
  write_bytes(p / "__0_0.distcp", pattern_bytes(100));
  expect_invalid(p, ValidationDepth::structure, "outside the checkpoint folder");
}

TEST_F(DcpCheckpoint, MetadataThatWouldRunCodeIsRefusedUnread) {
  fs::path p = m_scratch.path() / "step-10";
  write_bytes(p / ".metadata", std::string(dcp_fixtures::bytes("hostile.metadata")));
  write_bytes(p / "__0_0.distcp", pattern_bytes(100));
  expect_invalid(p, ValidationDepth::structure, "refers to posix.system, which is not on the allow-list");
  expect_invalid(p, ValidationDepth::structure, "a pickle can run code");
}

TEST_F(DcpCheckpoint, AnEmptyPickleIsNotDcpMetadata) {
  fs::path p = m_scratch.path() / "dcp";
  write_bytes(p / ".metadata", pickle_bytes());
  write_bytes(p / "__0_0.distcp", pattern_bytes(100));
  expect_invalid(p, ValidationDepth::structure, "not DCP metadata");
}

}  // namespace
}  // namespace gpuhost::supervise
