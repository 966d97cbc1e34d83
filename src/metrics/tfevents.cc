#include "metrics/tfevents.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "base/checksum.h"

namespace gpuhost::metrics {
namespace {

constexpr std::size_t k_header_bytes = 12;  // u64 length + u32 masked CRC of it
constexpr std::size_t k_footer_bytes = 4;   // u32 masked CRC of the data
constexpr std::size_t k_max_other_plugin_tags = 4096;

std::uint64_t load_le(std::string_view bytes, std::size_t at, std::size_t width) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < width; ++i)
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  return v;
}

void append_le(std::string& out, std::uint64_t v, std::size_t width) {
  for (std::size_t i = 0; i < width; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// Protocol buffers wire format (protobuf.dev/programming-guides/encoding): a key varint
// (field << 3 | wire type), then a varint (0), 8 bytes (1), a length-prefixed run (2) or 4 bytes (5).
class ProtoReader {
 public:
  explicit ProtoReader(std::string_view data) : m_data(data) {}

  // The next field's number and wire type; false at the end or on malformed input (see ok()).
  bool next(std::uint64_t& field, int& wire) {
    if (m_pos >= m_data.size() || !m_ok) return false;
    std::uint64_t key = varint();
    field = key >> 3;
    wire = static_cast<int>(key & 7);
    return m_ok;
  }
  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (m_pos >= m_data.size()) break;
      auto b = static_cast<unsigned char>(m_data[m_pos++]);
      v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
    m_ok = false;
    return 0;
  }
  std::uint64_t fixed(std::size_t width) {
    if (m_data.size() - m_pos < width) {
      m_ok = false;
      return 0;
    }
    std::uint64_t v = load_le(m_data, m_pos, width);
    m_pos += width;
    return v;
  }
  std::string_view bytes() {
    std::uint64_t n = varint();
    if (!m_ok || n > m_data.size() - m_pos) {
      m_ok = false;
      return {};
    }
    std::string_view v = m_data.substr(m_pos, static_cast<std::size_t>(n));
    m_pos += static_cast<std::size_t>(n);
    return v;
  }
  void skip(int wire) {
    switch (wire) {
      case 0: (void)varint(); break;
      case 1: (void)fixed(8); break;
      case 2: (void)bytes(); break;
      case 5: (void)fixed(4); break;
      default: m_ok = false;  // groups (3, 4) are not used by these messages
    }
  }
  [[nodiscard]] bool ok() const { return m_ok; }
  [[nodiscard]] bool at_end() const { return m_pos >= m_data.size(); }

 private:
  std::string_view m_data;
  std::size_t m_pos = 0;
  bool m_ok = true;
};

float as_float(std::uint64_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits));
}
double as_double(std::uint64_t bits) {
  return std::bit_cast<double>(bits);
}

// Field numbers: tensorflow/tensorboard tensorboard/compat/proto/event.proto, summary.proto,
// tensor.proto, tensor_shape.proto, types.proto.
constexpr std::uint64_t k_dt_float = 1, k_dt_double = 2;

// The one value of a scalar TensorProto of dtype float or double; nullopt for anything else
// (other dtypes, several elements, a non-scalar shape). Sets `malformed` on bad wire data.
std::optional<double> tensor_scalar(std::string_view tensor, bool& malformed) {
  ProtoReader r(tensor);
  std::uint64_t dtype = 0, field = 0;
  int wire = 0;
  std::size_t count = 0;
  double value = 0;
  std::uint64_t elements = 1;
  std::string_view content;
  auto take = [&](double v) {
    ++count;
    value = v;
  };
  while (r.next(field, wire)) {
    if (field == 1 && wire == 0) {
      dtype = r.varint();
    } else if (field == 2 && wire == 2) {  // TensorShapeProto{repeated Dim dim = 2}; Dim{int64 size = 1}
      ProtoReader shape(r.bytes());
      std::uint64_t f = 0;
      int w = 0;
      while (shape.next(f, w)) {
        if (f != 2 || w != 2) {
          shape.skip(w);
          continue;
        }
        ProtoReader dim(shape.bytes());
        std::uint64_t df = 0;
        int dw = 0;
        while (dim.next(df, dw)) {
          if (df == 1 && dw == 0)
            elements *= dim.varint();
          else
            dim.skip(dw);
        }
        if (!dim.ok()) malformed = true;
      }
      if (!shape.ok()) malformed = true;
    } else if (field == 4 && wire == 2) {
      content = r.bytes();
    } else if (field == 5 && wire == 2) {  // float_val, packed
      ProtoReader packed(r.bytes());
      while (packed.ok() && !packed.at_end()) take(as_float(packed.fixed(4)));
      if (!packed.ok()) malformed = true;
    } else if (field == 5 && wire == 5) {
      take(as_float(r.fixed(4)));
    } else if (field == 6 && wire == 2) {  // double_val, packed
      ProtoReader packed(r.bytes());
      while (packed.ok() && !packed.at_end()) take(as_double(packed.fixed(8)));
      if (!packed.ok()) malformed = true;
    } else if (field == 6 && wire == 1) {
      take(as_double(r.fixed(8)));
    } else {
      r.skip(wire);
    }
  }
  if (!r.ok()) malformed = true;
  if (malformed || elements != 1) return std::nullopt;
  if (dtype == k_dt_float) {
    if (content.size() == 4) take(as_float(load_le(content, 0, 4)));
  } else if (dtype == k_dt_double) {
    if (content.size() == 8) take(as_double(load_le(content, 0, 8)));
  } else {
    return std::nullopt;
  }
  if (count != 1) return std::nullopt;
  return value;
}

// Summary.Value.metadata (SummaryMetadata{PluginData plugin_data = 1}; PluginData{string
// plugin_name = 1}).
std::string_view plugin_name(std::string_view metadata) {
  ProtoReader r(metadata);
  std::uint64_t field = 0;
  int wire = 0;
  while (r.next(field, wire)) {
    if (field != 1 || wire != 2) {
      r.skip(wire);
      continue;
    }
    ProtoReader plugin(r.bytes());
    while (plugin.next(field, wire)) {
      if (field == 1 && wire == 2) return plugin.bytes();
      plugin.skip(wire);
    }
  }
  return {};
}

}  // namespace

std::uint32_t masked_crc32c(std::string_view data) {
  const std::uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string frame_tf_record(std::string_view data) {
  std::string out;
  out.reserve(k_header_bytes + data.size() + k_footer_bytes);
  append_le(out, data.size(), 8);
  append_le(out, masked_crc32c(out), 4);
  out.append(data);
  append_le(out, masked_crc32c(data), 4);
  return out;
}

EventFileReader::EventFileReader(std::uint64_t start_offset, std::size_t max_record_bytes)
    : m_max_record_bytes(max_record_bytes), m_consumed(start_offset) {}

bool EventFileReader::header_ok(std::string_view header) {
  if (static_cast<std::uint32_t>(load_le(header, 8, 4)) == masked_crc32c(header.substr(0, 8))) return true;
  m_error = Error{ErrorCode::parse_error,
                  "reading TensorBoard records: the length checksum of the record at byte offset " +
                      std::to_string(m_consumed) +
                      " does not match, so the record boundaries are lost and the rest of the file is "
                      "ignored (not an event file, or damaged on disk)"};
  return false;
}

void EventFileReader::take_framed(std::string_view record, std::vector<Point>& out) {
  const std::size_t length = record.size() - k_header_bytes - k_footer_bytes;
  const std::string_view data = record.substr(k_header_bytes, length);
  if (static_cast<std::uint32_t>(load_le(record, k_header_bytes + length, 4)) != masked_crc32c(data)) {
    ++m_stats.corrupt_records;
  } else {
    ++m_stats.records;
    take_record(data, out);
  }
  m_consumed += record.size();
}

void EventFileReader::feed(std::string_view bytes, std::vector<Point>& out) {
  while (!m_error) {
    if (m_skip_left > 0) {
      if (bytes.empty()) return;
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(m_skip_left, bytes.size()));
      bytes.remove_prefix(n);
      m_skip_left -= n;
      if (m_skip_left == 0) m_consumed += m_skip_total;
      continue;
    }
    // Most records arrive whole: read them in place instead of copying them.
    if (m_buffer.empty() && bytes.size() >= k_header_bytes) {
      if (!header_ok(bytes)) return;
      const std::uint64_t length = load_le(bytes, 0, 8);
      if (length <= m_max_record_bytes && bytes.size() >= k_header_bytes + k_footer_bytes &&
          bytes.size() - k_header_bytes - k_footer_bytes >= length) {
        const std::size_t total = k_header_bytes + static_cast<std::size_t>(length) + k_footer_bytes;
        take_framed(bytes.substr(0, total), out);
        bytes.remove_prefix(total);
        continue;
      }
    }
    if (bytes.empty()) return;
    if (m_buffer.size() < k_header_bytes) {
      const std::size_t n = std::min(k_header_bytes - m_buffer.size(), bytes.size());
      m_buffer.append(bytes.substr(0, n));
      bytes.remove_prefix(n);
      if (m_buffer.size() < k_header_bytes || !header_ok(m_buffer)) return;
    }
    const std::uint64_t length = load_le(m_buffer, 0, 8);
    if (length > m_max_record_bytes) {  // the buffer holds just the header here
      ++m_stats.oversized_records;
      m_skip_total = k_header_bytes + length + k_footer_bytes;
      m_skip_left = length + k_footer_bytes;
      m_buffer.clear();
      continue;
    }
    const std::size_t total = k_header_bytes + static_cast<std::size_t>(length) + k_footer_bytes;
    const std::size_t n = std::min(total - m_buffer.size(), bytes.size());
    m_buffer.append(bytes.substr(0, n));
    bytes.remove_prefix(n);
    if (m_buffer.size() < total) return;
    take_framed(m_buffer, out);
    m_buffer.clear();
  }
}

void EventFileReader::take_record(std::string_view data, std::vector<Point>& out) {
  // Event{double wall_time = 1; int64 step = 2; ... Summary summary = 5; ...}
  ProtoReader event(data);
  double wall_time = 0;
  std::optional<std::int64_t> step;
  std::string_view summary;
  std::uint64_t field = 0;
  int wire = 0;
  while (event.next(field, wire)) {
    if (field == 1 && wire == 1)
      wall_time = as_double(event.fixed(8));
    else if (field == 2 && wire == 0)
      step = static_cast<std::int64_t>(event.varint());
    else if (field == 5 && wire == 2)
      summary = event.bytes();
    else
      event.skip(wire);
  }
  if (!event.ok()) {
    ++m_stats.malformed_records;
    return;
  }
  // Summary{repeated Value value = 1}; Value{string tag = 1; float simple_value = 2;
  // TensorProto tensor = 8; SummaryMetadata metadata = 9; ...}
  ProtoReader values(summary);
  bool malformed = false;
  while (values.next(field, wire)) {
    if (field != 1 || wire != 2) {
      values.skip(wire);
      continue;
    }
    ProtoReader value(values.bytes());
    std::string_view tag, metadata, tensor;
    std::optional<double> simple;
    while (value.next(field, wire)) {
      if (field == 1 && wire == 2)
        tag = value.bytes();
      else if (field == 2 && wire == 5)
        simple = as_float(value.fixed(4));
      else if (field == 8 && wire == 2)
        tensor = value.bytes();
      else if (field == 9 && wire == 2)
        metadata = value.bytes();
      else
        value.skip(wire);
    }
    if (!value.ok()) {
      malformed = true;
      continue;
    }
    // The writer puts the metadata only on a tag's first value, so a tag of another plugin is
    // remembered for the values that follow without it.
    if (!metadata.empty()) {
      std::string_view plugin = plugin_name(metadata);
      if (!plugin.empty() && plugin != "scalars" && m_other_plugin_tags.size() < k_max_other_plugin_tags)
        m_other_plugin_tags.emplace(tag);
    }
    if (tag.empty() || m_other_plugin_tags.contains(std::string(tag))) continue;
    if (!simple && !tensor.empty()) simple = tensor_scalar(tensor, malformed);
    if (!simple) continue;
    out.push_back(Point{std::string(tag), *simple, step, wall_time});
    ++m_stats.points;
  }
  if (!values.ok() || malformed) ++m_stats.malformed_records;
}

}  // namespace gpuhost::metrics
