#include "metrics/tfevents.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace gpuhost::metrics {
namespace {

// A protobuf encoder just big enough for Event / Summary / TensorProto (field numbers from
// tensorflow/tensorboard tensorboard/compat/proto/*.proto).
std::string varint(std::uint64_t v) {
  std::string out;
  do {
    unsigned char b = v & 0x7F;
    v >>= 7;
    out.push_back(static_cast<char>(v ? b | 0x80 : b));
  } while (v);
  return out;
}
std::string key(int field, int wire) {
  return varint(static_cast<std::uint64_t>(field) << 3 | static_cast<unsigned>(wire));
}
std::string fixed(std::uint64_t v, int width) {
  std::string out;
  for (int i = 0; i < width; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  return out;
}
std::string f32(float v) {
  return fixed(std::bit_cast<std::uint32_t>(v), 4);
}
std::string f64(double v) {
  return fixed(std::bit_cast<std::uint64_t>(v), 8);
}
std::string bytes_field(int field, const std::string& payload) {
  return key(field, 2) + varint(payload.size()) + payload;
}

std::string event(double wall_time, std::int64_t step, const std::vector<std::string>& values) {
  std::string summary;
  for (const auto& v : values) summary += bytes_field(1, v);
  return key(1, 1) + f64(wall_time) + key(2, 0) + varint(static_cast<std::uint64_t>(step)) +
         bytes_field(5, summary);
}
std::string simple_value(const std::string& tag, float v) {
  return bytes_field(1, tag) + key(2, 5) + f32(v);
}
std::string plugin_metadata(const std::string& plugin) {
  return bytes_field(9, bytes_field(1, bytes_field(1, plugin)));
}
// PyTorch's add_scalar(new_style=True): TensorProto(float_val=[v], dtype=DT_FLOAT) (packed).
std::string tensor_float(const std::string& tag, float v,
                         const std::string& metadata = plugin_metadata("scalars")) {
  std::string tensor = key(1, 0) + varint(1) + bytes_field(5, f32(v));
  return bytes_field(1, tag) + metadata + bytes_field(8, tensor);
}
// double_precision=True: TensorProto(double_val=[v], dtype=DT_DOUBLE).
std::string tensor_double(const std::string& tag, double v) {
  std::string tensor = key(1, 0) + varint(2) + bytes_field(6, f64(v));
  return bytes_field(1, tag) + bytes_field(8, tensor);
}
std::string file_version_event(double wall_time) {
  return key(1, 1) + f64(wall_time) + bytes_field(3, "brain.Event:2");
}

std::vector<Point> read_all(const std::string& file, std::size_t chunk, EventFileReader* keep = nullptr) {
  EventFileReader local;
  EventFileReader& reader = keep ? *keep : local;
  std::vector<Point> out;
  for (std::size_t pos = 0; pos < file.size(); pos += chunk)
    reader.feed(std::string_view(file).substr(pos, chunk), out);
  return out;
}

TEST(TfEvents, MaskedCrcMatchesIndependentlyComputedValues) {
  // Expected values computed once with Python's crcmod (Debian python3-crcmod, "crc-32c"
  // predefined) and the mask from record_writer.py:
  //   c = crc32c(b); ((c >> 15 | c << 17) + 0xa282ead8) & 0xffffffff
  EXPECT_EQ(masked_crc32c("123456789"), 0xc78ab0e5u);
  EXPECT_EQ(masked_crc32c(""), 0xa282ead8u);
  // The whole framed first record of an event file, file_version "brain.Event:2" at wall time
  // 1700000000.5, built with Python's struct.pack('<Q'/'<I'/'<d') and the same crcmod function.
  const std::string want_hex =
      "1800000000000000a37f4b220900002040fc54d9411a0d627261696e2e4576656e743a322b353110";
  std::string got_hex;
  for (unsigned char c : frame_tf_record(file_version_event(1700000000.5))) {
    static constexpr char k_hex[] = "0123456789abcdef";
    got_hex += k_hex[c >> 4];
    got_hex += k_hex[c & 15];
  }
  EXPECT_EQ(got_hex, want_hex);
}

TEST(TfEvents, ReadsAFileWrittenByPyTorchsSummaryWriter) {
  // A real event file, 524 bytes, written once by Debian's python3-torch 1.13
  // torch.utils.tensorboard.SummaryWriter on top of tensorboard's Python sources
  // (tensorflow/tensorboard at 70b76c922, protos compiled with Debian's protoc 3.21; its
  // record_writer computes the masked CRC-32C in pure Python):
  //   w.add_scalar("train/loss", 0.5, 1)
  //   w.add_scalar("train/loss", 0.25, 2, new_style=True)
  //   w.add_scalar("lr", 1e-4, 2, new_style=True, double_precision=True)
  //   w.add_scalar("nan", float("nan"), 3)
  //   w.add_pr_curve("pr", np.array([0, 1, 1, 0]), np.array([0.1, 0.9, 0.8, 0.3]), 3, num_thresholds=3)
  //   w.add_text("note", "hello", 3)
  // tensorboard's own event_pb2 reads it back as: file_version; train/loss simple_value 0.5 at
  // step 1; train/loss DT_FLOAT tensor [0.25] and lr DT_DOUBLE tensor [0.0001] at step 2 (plugin
  // "scalars"); nan simple_value NaN at step 3; pr an 18-value pr_curves tensor; note a DT_STRING
  // text tensor. The first scalar's wall_time is 1796091457.7842913 (that machine's clock).
  const std::string hex =
      "4800000000000000fe92489d09032b72908bc3da411a0d627261696e2e4576656e743a32522e0a2c74656e736f72626f"
      "6172642e73756d6d6172792e7772697465722e6576656e745f66696c655f7772697465728764d14b2000000000000000"
      "29eda95009d43172908bc3da4110012a130a110a0a747261696e2f6c6f7373150000003f73ee91ce3200000000000000"
      "241956ec09b83272908bc3da4110022a250a230a0a747261696e2f6c6f7373420808012a040000803e4a0b0a090a0773"
      "63616c617273ff6682012e00000000000000c5cb57fa09363372908bc3da4110022a210a1f0a026c72420c080232082d"
      "431cebe2361a3f4a0b0a090a077363616c61727369bd1b1419000000000000008bf10828097d3372908bc3da4110032a"
      "0c0a0a0a036e616e150000c07f503ba6d17e00000000000000d8c65c7509853b72908bc3da4110032a710a6f0a027072"
      "42560801120812020806120208032a480000004000000040000000000000004000000000000000000000000000000040"
      "000000400000000000000000000000400000003f0000803f000000000000803f0000803f000000004a110a0f0a097072"
      "5f63757276657312021003a4faf0db3d000000000000006049f1ec09533c72908bc3da4110032a300a2e0a116e6f7465"
      "2f746578745f73756d6d617279420f0807120412020801420568656c6c6f4a080a060a04746578747e2d2295";
  std::string file;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    file.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  ASSERT_EQ(file.size(), 524u);
  for (std::size_t chunk : {std::size_t{1}, std::size_t{64}, file.size()}) {
    EventFileReader reader;
    auto points = read_all(file, chunk, &reader);
    ASSERT_EQ(points.size(), 4u) << chunk;
    EXPECT_EQ(points[0].name, "train/loss");
    EXPECT_EQ(points[0].value, 0.5);
    EXPECT_EQ(points[0].step, 1);
    EXPECT_DOUBLE_EQ(points[0].wall_time, 1796091457.7842913);
    EXPECT_EQ(points[1].name, "train/loss");
    EXPECT_EQ(points[1].value, 0.25);
    EXPECT_EQ(points[1].step, 2);
    EXPECT_EQ(points[2].name, "lr");
    EXPECT_DOUBLE_EQ(points[2].value, 1e-4);  // DT_DOUBLE: exact, not a float's 1e-4
    EXPECT_EQ(points[3].name, "nan");
    EXPECT_TRUE(std::isnan(points[3].value));
    EXPECT_EQ(points[3].step, 3);
    EXPECT_EQ(reader.stats().records, 7u);
    EXPECT_EQ(reader.stats().corrupt_records + reader.stats().malformed_records, 0u);
    EXPECT_EQ(reader.consumed_offset(), file.size());
  }
}

TEST(TfEvents, ReadsSimpleValueAndTensorScalarsWithStepAndTime) {
  std::string file = frame_tf_record(file_version_event(1700000000.0));
  file += frame_tf_record(
      event(1700000001.25, 10, {simple_value("train/loss", 0.5f), simple_value("lr", 1e-4f)}));
  file += frame_tf_record(event(1700000002.5, 20, {tensor_float("train/loss", 0.25f)}));
  file += frame_tf_record(event(1700000003.0, 30, {tensor_double("val/acc", 0.875)}));
  for (std::size_t chunk : {std::size_t{1}, std::size_t{7}, std::size_t{13}, file.size()}) {
    EventFileReader reader;
    auto points = read_all(file, chunk, &reader);
    ASSERT_EQ(points.size(), 4u) << "chunk " << chunk;
    EXPECT_EQ(points[0].name, "train/loss");
    EXPECT_FLOAT_EQ(static_cast<float>(points[0].value), 0.5f);
    EXPECT_EQ(points[0].step, 10);
    EXPECT_DOUBLE_EQ(points[0].wall_time, 1700000001.25);
    EXPECT_EQ(points[1].name, "lr");
    EXPECT_FLOAT_EQ(static_cast<float>(points[1].value), 1e-4f);
    EXPECT_EQ(points[2].step, 20);
    EXPECT_DOUBLE_EQ(points[2].value, 0.25);
    EXPECT_EQ(points[3].name, "val/acc");
    EXPECT_DOUBLE_EQ(points[3].value, 0.875);
    EXPECT_EQ(reader.consumed_offset(), file.size());
    EXPECT_EQ(reader.stats().records, 4u);
    EXPECT_FALSE(reader.failed());
  }
}

TEST(TfEvents, ReadsUnpackedAndTensorContentScalarsAndKeepsNan) {
  std::string unpacked = key(1, 0) + varint(1) + key(5, 5) + f32(2.5f);
  std::string content = key(1, 0) + varint(2) + bytes_field(4, f64(-3.5)) + bytes_field(2, "");  // shape {}
  std::string nan = key(1, 0) + varint(1) + bytes_field(5, f32(std::nanf("")));
  std::string file = frame_tf_record(
      event(1.0, 1,
            {bytes_field(1, "a") + bytes_field(8, unpacked), bytes_field(1, "b") + bytes_field(8, content),
             bytes_field(1, "c") + bytes_field(8, nan)}));
  auto points = read_all(file, file.size());
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[0].value, 2.5);
  EXPECT_EQ(points[1].value, -3.5);
  EXPECT_TRUE(std::isnan(points[2].value));
}

TEST(TfEvents, SkipsOtherPluginsEvenWhenLaterValuesLackMetadata) {
  // Only a tag's first value carries metadata; a one-element DT_FLOAT tensor of another plugin
  // (a PR curve, hparams) stays out on every later event too.
  std::string file =
      frame_tf_record(event(1, 1, {tensor_float("pr/curve", 1.0f, plugin_metadata("pr_curves"))}));
  file += frame_tf_record(event(2, 2, {tensor_float("pr/curve", 2.0f, "")}));
  // Not scalars either: a tensor of two values, a string tensor, a [2]-shaped tensor.
  std::string two = key(1, 0) + varint(1) + bytes_field(5, f32(1) + f32(2));
  std::string text = key(1, 0) + varint(7) + bytes_field(8, "hello");
  std::string shaped =
      key(1, 0) + varint(1) + bytes_field(2, bytes_field(2, key(1, 0) + varint(2))) + bytes_field(5, f32(1));
  file += frame_tf_record(
      event(3, 3,
            {bytes_field(1, "two") + bytes_field(8, two), bytes_field(1, "text") + bytes_field(8, text),
             bytes_field(1, "shaped") + bytes_field(8, shaped), simple_value("loss", 1.5f)}));
  auto points = read_all(file, 5);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].name, "loss");
}

TEST(TfEvents, APartialLastRecordWaitsForTheRestOfIt) {
  std::string first = frame_tf_record(event(1, 1, {simple_value("loss", 1.0f)}));
  std::string second = frame_tf_record(event(2, 2, {simple_value("loss", 2.0f)}));
  EventFileReader reader;
  std::vector<Point> out;
  reader.feed(first + second.substr(0, 20), out);
  EXPECT_EQ(out.size(), 1u);
  EXPECT_EQ(reader.consumed_offset(), first.size());
  reader.feed(second.substr(20), out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].step, 2);
  EXPECT_EQ(reader.consumed_offset(), first.size() + second.size());
}

TEST(TfEvents, ADamagedRecordIsSkippedAndCounted) {
  std::string bad = frame_tf_record(event(1, 1, {simple_value("loss", 1.0f)}));
  bad[bad.size() - 6] ^= 0x01;  // a bit of the data: its CRC no longer matches
  std::string good = frame_tf_record(event(2, 2, {simple_value("loss", 2.0f)}));
  EventFileReader reader;
  auto points = read_all(bad + good, 3, &reader);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].step, 2);
  EXPECT_EQ(reader.stats().corrupt_records, 1u);
  EXPECT_FALSE(reader.failed());
  // A record whose checksum is right but whose protobuf is not.
  std::vector<Point> out;
  EventFileReader malformed;
  malformed.feed(frame_tf_record(key(5, 2) + varint(100) + "short"), out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(malformed.stats().malformed_records, 1u);
}

TEST(TfEvents, ALengthChecksumMismatchStopsTheFileWithItsOffset) {
  std::string first = frame_tf_record(event(1, 1, {simple_value("loss", 1.0f)}));
  std::string second = frame_tf_record(event(2, 2, {simple_value("loss", 2.0f)}));
  second[0] ^= 0x40;  // the length itself: the framing is lost from here
  std::string third = frame_tf_record(event(3, 3, {simple_value("loss", 3.0f)}));
  EventFileReader reader;
  auto points = read_all(first + second + third, 4, &reader);
  EXPECT_EQ(points.size(), 1u);
  ASSERT_TRUE(reader.failed());
  EXPECT_NE(reader.error()->message.find("byte offset " + std::to_string(first.size())), std::string::npos)
      << reader.error()->message;
  std::vector<Point> after;
  reader.feed(third, after);
  EXPECT_TRUE(after.empty());
  // A file that is not an event file at all.
  EventFileReader text;
  text.feed("epoch,loss\n1,0.5\n2,0.4\n", after);
  EXPECT_TRUE(text.failed());
  EXPECT_TRUE(after.empty());
}

TEST(TfEvents, AnOversizedRecordIsSkippedWithoutBeingHeld) {
  std::string big = frame_tf_record(bytes_field(4, std::string(5000, 'g')));  // a graph_def
  std::string small = frame_tf_record(event(1, 7, {simple_value("loss", 1.0f)}));
  for (std::size_t chunk : {std::size_t{3}, std::size_t{100}, big.size() + small.size()}) {
    EventFileReader reader(0, 1024);
    auto points = read_all(big + small, chunk, &reader);
    ASSERT_EQ(points.size(), 1u) << chunk;
    EXPECT_EQ(points[0].step, 7);
    EXPECT_EQ(reader.stats().oversized_records, 1u);
    EXPECT_EQ(reader.consumed_offset(), big.size() + small.size());
  }
}

TEST(TfEvents, AReaderResumedAtAnOffsetReportsTrueOffsets) {
  std::string first = frame_tf_record(event(1, 1, {simple_value("loss", 1.0f)}));
  std::string second = frame_tf_record(event(2, 2, {simple_value("loss", 2.0f)}));
  second[0] ^= 0x40;
  EventFileReader reader(first.size());
  std::vector<Point> out;
  reader.feed(second, out);
  ASSERT_TRUE(reader.failed());
  EXPECT_NE(reader.error()->message.find("byte offset " + std::to_string(first.size())), std::string::npos);
}

}  // namespace
}  // namespace gpuhost::metrics
