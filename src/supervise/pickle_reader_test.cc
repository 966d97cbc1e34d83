#include "supervise/pickle_reader.h"

#include <gtest/gtest.h>

#include "supervise/dcp_fixtures.h"
#include "supervise/dcp_metadata.h"

namespace gpuhost::supervise::pickle {
namespace {

bool allow_all(std::string_view) {
  return true;
}
bool allow_none(std::string_view) {
  return false;
}

Result<Document> read_all(std::string_view bytes) {
  return read(bytes, allow_all);
}

std::string p4(std::string_view body) {
  return std::string("\x80\x04", 2) + std::string(body) + ".";
}

TEST(PickleReader, ReadsScalars) {
  // (-2, 300, 2**40, -129, True, None, 1.5, "hé", b"xy") as protocol 4 writes them.
  const std::string bytes = p4(std::string(
      "(J\xfe\xff\xff\xff"
      "M\x2c\x01"
      "\x8a\x06\x00\x00\x00\x00\x00\x01"
      "\x8a\x02\x7f\xff"
      "\x88N"
      "G\x3f\xf8\x00\x00\x00\x00\x00\x00"
      "\x8c\x03h\xc3\xa9"
      "C\x02xy"
      "t",
      42));
  auto doc = read_all(bytes);
  ASSERT_TRUE(doc) << doc.error().message;
  const Value& t = doc->root();
  ASSERT_EQ(t.kind, Kind::tuple);
  ASSERT_EQ(t.items.size(), 9u);
  EXPECT_EQ(t.items[0]->integer, -2);
  EXPECT_EQ(t.items[1]->integer, 300);
  EXPECT_EQ(t.items[2]->integer, std::int64_t{1} << 40);
  EXPECT_EQ(t.items[3]->integer, -129);
  EXPECT_TRUE(t.items[4]->boolean);
  EXPECT_EQ(t.items[5]->kind, Kind::none);
  EXPECT_DOUBLE_EQ(t.items[6]->floating, 1.5);
  EXPECT_EQ(t.items[7]->text, "h\xc3\xa9");
  EXPECT_EQ(t.items[8]->kind, Kind::bytes);
  EXPECT_EQ(t.items[8]->text, "xy");
}

TEST(PickleReader, DictsListsAndTheMemoShareValues) {
  // d = {"a": [1, 2]}; popped, then (d["a"], d) from the memo.
  const std::string bytes = p4(std::string("}\x94(\x8c\x01" "a]\x94(K\x01K\x02" "eu0" "h\x01h\x00\x86", 21));
  auto doc = read_all(bytes);
  ASSERT_TRUE(doc) << doc.error().message;
  const Value& pair = doc->root();
  ASSERT_EQ(pair.items.size(), 2u);
  const Value* dict = pair.items[1];
  ASSERT_EQ(dict->kind, Kind::dict);
  const Value* list = dict->get("a");
  ASSERT_NE(list, nullptr);
  EXPECT_EQ(list, pair.items[0]);  // the same value, not a copy
  ASSERT_EQ(list->items.size(), 2u);
  EXPECT_EQ(list->items[1]->integer, 2);
}

TEST(PickleReader, CallsAreRecordedNotMade) {
  // collections.OrderedDict() then BUILD with a state dict.
  const std::string bytes = p4("\x8c\x0b" "collections\x8c\x0bOrderedDict\x93)R}\x8c\x01kK\x07sb");
  auto doc = read_all(bytes);
  ASSERT_TRUE(doc) << doc.error().message;
  EXPECT_EQ(doc->root().kind, Kind::object);
  EXPECT_EQ(doc->root().class_name(), "collections.OrderedDict");
  ASSERT_NE(doc->root().state, nullptr);
  EXPECT_EQ(doc->root().state->get("k")->integer, 7);
}

TEST(PickleReader, RefusesGlobalsOutsideTheAllowList) {
  const std::string bytes = p4("\x8c\x05posix\x8c\x06system\x93\x8c\x02id\x85R");
  auto doc = read(bytes, allow_none);
  ASSERT_FALSE(doc);
  EXPECT_EQ(doc.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(doc.error().message.find("posix.system"), std::string::npos) << doc.error().message;
  // The protocol-0 spelling of a global is refused the same way.
  auto text_global = read("cposix\nsystem\n(S'id'\ntR.", allow_none);
  ASSERT_FALSE(text_global);
  EXPECT_EQ(text_global.error().code, ErrorCode::invalid_argument);
}

TEST(PickleReader, MalformedInputIsAParseErrorThatSaysWhere) {
  struct Case {
    std::string bytes, words;
  };
  const Case cases[] = {
      {"", "ends at byte 0 before its STOP"},
      {std::string("\x80\x04K", 3), "ends inside an argument"},
      {std::string("\x80\x06N.", 4), "protocol 6 is newer than 5"},
      {std::string("\x80\x04NN.", 5), "STOP with 2 values"},
      {std::string("\x80\x04s.", 4), "stack underflow"},
      {std::string("\x80\x04h\x05.", 5), "memo entry 5 was never stored"},
      {std::string("\x80\x04Q.", 4), "persistent id"},
      {std::string("\x80\x04K\x01K\x02K\x03" "b.", 10), "BUILD on something that is not an object"},
      {std::string("\x80\x04\xff.", 4), "opcode 0xff at byte 2: unknown opcode"},
  };
  for (const Case& c : cases) {
    auto doc = read_all(c.bytes);
    ASSERT_FALSE(doc) << c.words;
    EXPECT_EQ(doc.error().code, ErrorCode::parse_error);
    EXPECT_NE(doc.error().message.find(c.words), std::string::npos) << doc.error().message;
  }
}

TEST(DcpMetadata, ReadsTheFixtureWrittenUnderDcpsClassNames) {
  auto m = dcp::parse_metadata(dcp_fixtures::bytes("two_ranks.metadata"));
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->version, "1.0.0");
  ASSERT_EQ(m->tensors.size(), 2u);
  EXPECT_EQ(m->tensors[0].fqn, "model.weight");
  EXPECT_EQ(m->tensors[0].dtype, "float32");
  EXPECT_EQ(m->tensors[0].size, (std::vector<std::int64_t>{4, 6}));
  ASSERT_EQ(m->tensors[0].chunks.size(), 2u);
  EXPECT_EQ(m->tensors[0].chunks[1].offsets, (std::vector<std::int64_t>{2, 0}));
  EXPECT_EQ(m->byte_items, (std::vector<std::string>{"optim.state.step"}));
  ASSERT_EQ(m->stored.size(), 4u);
  EXPECT_EQ(m->stored[0].relative_path, "__0_0.distcp");
  EXPECT_TRUE(m->stored[0].tensor);
  EXPECT_FALSE(m->stored[3].tensor);
  EXPECT_EQ(m->stored[3].length, 8u);  // b"step=300"
  EXPECT_EQ(dcp::coverage_problem(*m), "");

  auto per_rank = dcp::parse_metadata(dcp_fixtures::bytes("per_rank__1.metadata"));
  ASSERT_TRUE(per_rank) << per_rank.error().message;
  EXPECT_EQ(per_rank->tensors[0].dtype, "bfloat16");
}

TEST(DcpMetadata, TheAllowListKeepsToDcpAndTorchConstants) {
  EXPECT_TRUE(dcp::allowed_global("torch.distributed.checkpoint.metadata.Metadata"));
  EXPECT_TRUE(dcp::allowed_global("torch.distributed.checkpoint.filesystem._StorageInfo"));
  EXPECT_TRUE(dcp::allowed_global("torch.distributed._shard.sharded_tensor.metadata.TensorProperties"));
  EXPECT_TRUE(dcp::allowed_global("torch.Size"));
  EXPECT_TRUE(dcp::allowed_global("torch.bfloat16"));
  EXPECT_TRUE(dcp::allowed_global("builtins.getattr"));
  EXPECT_FALSE(dcp::allowed_global("torch.load"));
  EXPECT_FALSE(dcp::allowed_global("torch._utils._rebuild_tensor_v2"));
  EXPECT_FALSE(dcp::allowed_global("builtins.eval"));
  EXPECT_FALSE(dcp::allowed_global("os.system"));
  EXPECT_FALSE(dcp::allowed_global("subprocess.Popen"));
}

TEST(DcpMetadata, NamesRanksFromFileNames) {
  EXPECT_EQ(dcp::rank_of_data_file("__12_3.distcp"), 12);
  EXPECT_EQ(dcp::rank_of_data_file("__0_0.distcp"), 0);
  EXPECT_FALSE(dcp::rank_of_data_file("__x_0.distcp"));
  EXPECT_FALSE(dcp::rank_of_data_file("shard.distcp"));
  EXPECT_EQ(dcp::rank_of_metadata_file("__7.metadata"), 7);
  EXPECT_FALSE(dcp::rank_of_metadata_file(".metadata"));
  EXPECT_FALSE(dcp::rank_of_metadata_file("__7.metadata.tmp"));
}

}  // namespace
}  // namespace gpuhost::supervise::pickle
