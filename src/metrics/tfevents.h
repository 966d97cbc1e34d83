#pragma once
// Scalars from TensorBoard event files (`events.out.tfevents.*`), read incrementally while the
// trainer appends to them. Format facts: shared/research/05 §2.1 (tensorflow/tensorboard
// tensorboard/summary/writer/record_writer.py, tensorboard/compat/proto/event.proto,
// summary.proto, tensor.proto).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "base/error.h"
#include "metrics/point.h"

namespace gpuhost::metrics {

// TFRecord's checksum: CRC-32C rotated right by 15 bits plus 0xa282ead8
// (tensorflow/tensorboard tensorboard/summary/writer/record_writer.py, `masked_crc32c`).
[[nodiscard]] std::uint32_t masked_crc32c(std::string_view data);

// One TFRecord: `u64 length` (little-endian), `u32 masked_crc32c(length bytes)`, `data`,
// `u32 masked_crc32c(data)`. For tests and tools that write event files.
[[nodiscard]] std::string frame_tf_record(std::string_view data);

struct EventFileStats {
  std::uint64_t records = 0;            // framed records read whole (any event kind)
  std::uint64_t points = 0;             // scalars taken
  std::uint64_t corrupt_records = 0;    // data checksum mismatch: record skipped
  std::uint64_t malformed_records = 0;  // checksum fine but the protobuf does not decode
  std::uint64_t oversized_records = 0;  // longer than the buffer cap (a graph): skipped unread
};

// Reads one event file as bytes arrive: feed() what was appended, in order, in chunks of any
// size; the scalars of every complete record come out, a partial last record waits for more.
// Takes `simple_value` scalars and one-element DT_FLOAT / DT_DOUBLE tensors (PyTorch's
// `new_style` and TF2 scalars), skipping tags whose metadata names a plugin other than
// "scalars" (histograms, PR curves, hparams, text). Event.step gives Point::step and
// Event.wall_time Point::wall_time.
//
// A data checksum mismatch skips that record and counts it. A length checksum mismatch means the
// record boundaries are lost: the reader stops for good (failed(), error() with the byte offset)
// and ignores what is fed afterwards. Move-only state; not thread-safe.
class EventFileReader {
 public:
  // Records whose data is longer than this are skipped without being held in memory.
  static constexpr std::size_t k_default_max_record_bytes = 16u << 20;

  // `start_offset`: where in the file the first fed byte lies (a record boundary), so that a
  // reader resumed from a saved offset reports true offsets.
  explicit EventFileReader(std::uint64_t start_offset = 0,
                           std::size_t max_record_bytes = k_default_max_record_bytes);

  // Appends the scalars of the records `bytes` completes to `out`.
  void feed(std::string_view bytes, std::vector<Point>& out);

  // File offset just past the last complete record: where a reader resumed later starts.
  [[nodiscard]] std::uint64_t consumed_offset() const { return m_consumed; }
  [[nodiscard]] bool failed() const { return m_error.has_value(); }
  [[nodiscard]] const std::optional<Error>& error() const { return m_error; }
  [[nodiscard]] const EventFileStats& stats() const { return m_stats; }

 private:
  bool header_ok(std::string_view header);
  void take_framed(std::string_view record, std::vector<Point>& out);
  void take_record(std::string_view data, std::vector<Point>& out);

  std::size_t m_max_record_bytes;
  std::uint64_t m_consumed;        // file offset of the record being assembled
  std::string m_buffer;            // bytes of the record being assembled
  std::uint64_t m_skip_left = 0;   // bytes still to skip of an oversized record
  std::uint64_t m_skip_total = 0;  // that record's whole size
  std::optional<Error> m_error;
  EventFileStats m_stats;
  std::unordered_set<std::string> m_other_plugin_tags;  // tags not to read as scalars
};

}  // namespace gpuhost::metrics
