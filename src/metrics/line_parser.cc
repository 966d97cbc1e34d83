#include "metrics/line_parser.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

namespace gpuhost::metrics {
namespace {

constexpr std::size_t k_max_key_bytes = 100;
constexpr std::size_t k_max_bar_names = 256;

bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_space(char c) {
  return c == ' ' || c == '\t';
}
bool is_key_char(char c) {
  return is_alpha(c) || is_digit(c) || c == '_' || c == '.' || c == '/' || c == '@' || c == '-';
}
// What may precede an unquoted key: the key must not be the tail of a word, path or URL.
bool is_key_boundary(std::string_view line, std::size_t pos_before) {
  if (pos_before == std::string_view::npos) return true;
  const char c = line[pos_before];
  return is_space(c) || c == ',' || c == ';' || c == '|' || c == '[' || c == '{' || c == '(';
}
// What ends a value token.
bool is_value_end(char c) {
  return is_space(c) || c == ',' || c == ';' || c == ']' || c == '}' || c == ')' || c == '|' || c == '\'' ||
         c == '"';
}

bool iequals_ascii(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

bool is_step_key(std::string_view key) {
  return iequals_ascii(key, "step") || iequals_ascii(key, "global_step") || iequals_ascii(key, "iter") ||
         iequals_ascii(key, "iteration");
}

// Numbers that identify rather than measure. `v_num` is Lightning's logger version in its bar.
bool is_ignored_key(std::string_view key) {
  static constexpr std::array<std::string_view, 8> k_ignored = {
      "v_num", "pid", "port", "rank", "local_rank", "world_size", "seed", "version"};
  for (auto ignored : k_ignored)
    if (iequals_ascii(key, ignored)) return true;
  return false;
}

bool is_key_token(std::string_view word) {
  if (word.empty() || word.size() > k_max_key_bytes || !is_alpha(word[0])) return false;
  return std::all_of(word.begin(), word.end(), is_key_char);
}

enum class Unit { none, seconds, milliseconds, percent };

struct Value {
  double value = 0;
  Unit unit = Unit::none;
};

// A number with an optional unit, filling the whole token.
bool parse_number_with_unit(std::string_view token, double& value, Unit& unit) {
  unit = Unit::none;
  if (parse_number_token(token, value)) return true;
  auto ends_with = [&](std::string_view suffix) {
    return token.size() > suffix.size() && token.substr(token.size() - suffix.size()) == suffix;
  };
  std::string_view number;
  if (ends_with("ms")) {
    number = token.substr(0, token.size() - 2), unit = Unit::milliseconds;
  } else if (ends_with("%")) {
    number = token.substr(0, token.size() - 1), unit = Unit::percent;
  } else if (ends_with("s")) {
    number = token.substr(0, token.size() - 1), unit = Unit::seconds;
  } else {
    return false;
  }
  // "nans" or "infs" are words, not numbers with a unit.
  if (number.empty() || !is_digit(number.back())) return false;
  return parse_number_token(number, value);
}

// The value starting at `pos`: a number token with an optional unit, or a number wrapped as
// torch and numpy print scalars: tensor(0.5), tensor(0.5, device='cuda:0'), np.float64(0.5).
std::optional<Value> parse_value(std::string_view line, std::size_t pos) {
  while (pos < line.size() && is_space(line[pos])) ++pos;
  if (pos >= line.size()) return std::nullopt;
  static constexpr std::array<std::string_view, 6> k_wrappers = {"tensor(",     "np.float64(", "np.float32(",
                                                                 "np.float16(", "np.int64(",   "np.int32("};
  for (auto wrapper : k_wrappers) {
    if (line.substr(pos, wrapper.size()) != wrapper) continue;
    std::size_t start = pos + wrapper.size();
    std::size_t end = start;
    while (end < line.size() && line[end] != ',' && line[end] != ')') ++end;
    if (end >= line.size()) return std::nullopt;
    Value v;
    if (!parse_number_token(line.substr(start, end - start), v.value)) return std::nullopt;
    return v;
  }
  std::size_t end = pos;
  while (end < line.size() && !is_value_end(line[end])) ++end;
  // 25,000: a thousands separator, not the end of the value (HF's "Num examples = 25,000").
  if (end + 3 < line.size() && line[end] == ',' && is_digit(line[end + 1]) && is_digit(line[end + 2]) &&
      is_digit(line[end + 3]))
    return std::nullopt;
  Value v;
  if (!parse_number_with_unit(line.substr(pos, end - pos), v.value, v.unit)) return std::nullopt;
  return v;
}

struct Candidate {
  std::size_t pos = 0;
  std::string name;
  double value = 0;
};

class LineScan {
 public:
  explicit LineScan(std::string_view line) : m_line(line) {}

  ParsedLine run() {
    scan_assignments();
    scan_space_pairs();
    scan_rates();
    ParsedLine out;
    out.progress_bar = m_rate_seen || m_line.find("%|") != std::string_view::npos;
    // `word number` pairs are prose as often as metrics ("Downloading 100%", "CUDA 12.1, cuDNN
    // 8902"): they count only in a line of two pairs or more that names a step, epoch or loss.
    if (m_pairs + m_space_pairs.size() >= 2 && m_training_key)
      for (auto& c : m_space_pairs) m_candidates.push_back(std::move(c));
    std::stable_sort(m_candidates.begin(), m_candidates.end(),
                     [](const Candidate& a, const Candidate& b) { return a.pos < b.pos; });
    std::optional<std::int64_t> step;
    for (auto& c : m_candidates) {
      if (!step && is_step_key(c.name) && std::isfinite(c.value) && c.value >= 0 && c.value < 9.0e18 &&
          c.value == std::floor(c.value)) {
        step = static_cast<std::int64_t>(c.value);
        continue;
      }
      if (is_step_key(c.name)) continue;
      bool seen =
          std::any_of(out.points.begin(), out.points.end(), [&](const Point& p) { return p.name == c.name; });
      if (seen) continue;
      if (out.points.size() >= k_max_points_per_line) break;
      out.points.push_back(Point{std::move(c.name), c.value, std::nullopt, 0});
    }
    for (auto& p : out.points) p.step = step;
    return out;
  }

 private:
  bool add(std::size_t pos, std::string_view key, const Value& v, std::vector<Candidate>& into) {
    if (is_ignored_key(key) || m_candidates.size() + m_space_pairs.size() >= 2 * k_max_points_per_line)
      return false;
    if (is_step_key(key) || iequals_ascii(key, "epoch") || key.find("loss") != std::string_view::npos)
      m_training_key = true;
    Candidate c{pos, std::string(key), v.value};
    switch (v.unit) {
      case Unit::none: break;
      case Unit::seconds: c.name += "_seconds"; break;
      case Unit::milliseconds:
        c.name += "_seconds";
        c.value /= 1000.0;
        break;
      case Unit::percent: c.name += "_percent"; break;
    }
    into.push_back(std::move(c));
    return true;
  }

  // The key ending just before `end`: quoted ('loss', "loss") or a bare key token after a
  // boundary. Returns the key's first byte in `start`.
  std::optional<std::string_view> key_before(std::size_t end, std::size_t& start) const {
    if (end == 0) return std::nullopt;
    const char last = m_line[end - 1];
    if (last == '\'' || last == '"') {
      std::size_t open = end - 1;
      while (open > 0 && is_key_char(m_line[open - 1])) --open;
      if (open == 0 || m_line[open - 1] != last) return std::nullopt;
      std::string_view key = m_line.substr(open, end - 1 - open);
      if (!is_key_token(key)) return std::nullopt;
      start = open - 1;
      return key;
    }
    std::size_t s = end;
    while (s > 0 && is_key_char(m_line[s - 1])) --s;
    std::string_view key = m_line.substr(s, end - s);
    if (!is_key_token(key) || !is_key_boundary(m_line, s == 0 ? std::string_view::npos : s - 1))
      return std::nullopt;
    start = s;
    return key;
  }

  // Whether the value starting after `pos` is followed by a word that does not start another
  // `key: value` / `key=value` pair.
  bool followed_by_word(std::size_t pos) const {
    const std::size_t n = m_line.size();
    while (pos < n && is_space(m_line[pos])) ++pos;
    while (pos < n && !is_value_end(m_line[pos])) ++pos;
    while (pos < n && is_space(m_line[pos])) ++pos;
    if (pos >= n || !std::isalpha(static_cast<unsigned char>(m_line[pos]))) return false;
    while (pos < n && is_key_char(m_line[pos])) ++pos;
    while (pos < n && is_space(m_line[pos])) ++pos;
    return pos >= n || (m_line[pos] != ':' && m_line[pos] != '=');
  }

  // `key=value`, `key = value`, `key: value`, `'key': value`.
  void scan_assignments() {
    const std::size_t n = m_line.size();
    for (std::size_t i = 0; i < n; ++i) {
      const char c = m_line[i];
      if (c == '=') {
        if (i + 1 < n && m_line[i + 1] == '=') {  // `==`: a comparison or a pip pin
          ++i;
          continue;
        }
        if (i > 0 && std::strchr("=!<>", m_line[i - 1]) != nullptr) continue;
      } else if (c == ':') {
        // cuda:0, 12:30:45, http:// are not metrics; a quoted key needs no space ({"loss":0.5}).
        const bool quoted_key = i > 0 && (m_line[i - 1] == '"' || m_line[i - 1] == '\'');
        if (i + 1 >= n || (!is_space(m_line[i + 1]) && !quoted_key)) continue;
      } else {
        continue;
      }
      std::size_t key_end = i;
      while (key_end > 0 && is_space(m_line[key_end - 1])) --key_end;
      std::size_t key_start = 0;
      auto key = key_before(key_end, key_start);
      if (!key) continue;
      // `key = value` with spaces: only as the line's first token (HF's `  eval_loss = 0.69`), so
      // prose such as "Num examples = 25" is not read as `examples`.
      if (key_end != i) {
        std::size_t first = 0;
        while (first < n && is_space(m_line[first])) ++first;
        if (first != key_start) continue;
      }
      auto value = parse_value(m_line, i + 1);
      if (!value) continue;
      // "done: 3000 steps, accuracy 0.999": a number followed by a plain word is prose, not a
      // metric named `done` (the word would be its unit). Another pair may follow ("loss: 0.5 lr: 1e-4").
      if (c == ':' && followed_by_word(i + 1)) continue;
      if (add(key_start, *key, *value, m_candidates)) ++m_pairs;
    }
  }

  // nanoGPT's `iter 100: loss 2.3456, time 123.45ms`: `key value` filling a field.
  void scan_space_pairs() {
    const std::size_t n = m_line.size();
    std::size_t field_start = 0;
    for (std::size_t i = 0; i <= n; ++i) {
      bool end_of_field = i == n || m_line[i] == ',' || m_line[i] == ';' || m_line[i] == '|' ||
                          (m_line[i] == ':' && i + 1 < n && is_space(m_line[i + 1]));
      if (!end_of_field) continue;
      space_pair(field_start, i);
      field_start = i + 1;
    }
  }

  void space_pair(std::size_t begin, std::size_t end) {
    std::string_view field = m_line.substr(begin, end - begin);
    if (std::any_of(field.begin(), field.end(), [](char c) { return c == '=' || c == '\'' || c == '"'; }))
      return;
    if (alternating_pairs(begin, field)) return;
    // Up to three trailing words: [w1] [w2] value.
    std::array<std::string_view, 3> words;
    std::array<std::size_t, 3> starts{};
    std::size_t count = 0;
    std::size_t e = field.size();
    while (e > 0 && is_space(field[e - 1])) --e;
    bool more = false;
    while (e > 0) {
      std::size_t s = e;
      while (s > 0 && !is_space(field[s - 1])) --s;
      if (count == 3) {
        more = true;
        break;
      }
      words[count] = field.substr(s, e - s);
      starts[count] = begin + s;
      ++count;
      e = s;
      while (e > 0 && is_space(field[e - 1])) --e;
    }
    if (count < 2) return;
    Value v;
    if (!parse_number_with_unit(words[0], v.value, v.unit)) return;
    if (!is_key_token(words[1])) return;
    // Two key words alone in their field name one metric ("train loss"); with more before them
    // (a log prefix), only the word next to the value is the key.
    if (count == 3 && !more && is_key_token(words[2])) {
      std::string key = std::string(words[2]) + "_" + std::string(words[1]);
      if (key.size() <= k_max_key_bytes) add(starts[2], key, v, m_space_pairs);
      return;
    }
    add(starts[1], words[1], v, m_space_pairs);
  }

  // A field made only of `key value` pairs, as hand-written loops print them:
  // `step 100 loss 2.3456 lr 0.0003`. Adds them all and returns true; false (adding nothing)
  // when the field is anything else.
  bool alternating_pairs(std::size_t begin, std::string_view field) {
    std::array<std::string_view, 2 * 8> words;
    std::array<std::size_t, 2 * 8> starts{};
    std::size_t count = 0;
    std::size_t i = 0;
    while (i < field.size()) {
      while (i < field.size() && is_space(field[i])) ++i;
      if (i == field.size()) break;
      std::size_t s = i;
      while (i < field.size() && !is_space(field[i])) ++i;
      if (count == words.size()) return false;
      words[count] = field.substr(s, i - s);
      starts[count] = begin + s;
      ++count;
    }
    if (count < 4 || count % 2 != 0) return false;
    std::array<Value, 8> values;
    for (std::size_t k = 0; k < count; k += 2) {
      if (!is_key_token(words[k]) || !parse_number_with_unit(words[k + 1], values[k / 2].value, values[k / 2].unit))
        return false;
    }
    for (std::size_t k = 0; k < count; k += 2) add(starts[k], words[k], values[k / 2], m_space_pairs);
    return true;
  }

  // tqdm's rate: `15.0it/s` or `2.10s/it`.
  void scan_rates() {
    for (std::string_view suffix : {std::string_view("it/s"), std::string_view("s/it")}) {
      std::size_t at = 0;
      while ((at = m_line.find(suffix, at)) != std::string_view::npos) {
        std::size_t end = at + suffix.size();
        std::size_t start = at;
        while (start > 0 && (is_digit(m_line[start - 1]) || m_line[start - 1] == '.')) --start;
        bool bounded = (start == 0 || is_space(m_line[start - 1]) || m_line[start - 1] == ',' ||
                        m_line[start - 1] == '[') &&
                       (end == m_line.size() || is_value_end(m_line[end]));
        double rate = 0;
        if (bounded && start < at && parse_number_token(m_line.substr(start, at - start), rate)) {
          m_rate_seen = true;
          if (suffix == "s/it") rate = rate > 0 ? 1.0 / rate : std::numeric_limits<double>::quiet_NaN();
          if (std::isfinite(rate)) m_candidates.push_back(Candidate{start, "iterations_per_second", rate});
        }
        at = end;
      }
    }
  }

  std::string_view m_line;
  std::vector<Candidate> m_candidates;
  std::vector<Candidate> m_space_pairs;
  std::size_t m_pairs = 0;
  bool m_rate_seen = false;
  bool m_training_key = false;  // a step, epoch or *loss* key somewhere in the line
};

// Every value has a digit but nan and inf: most log lines have none of them and are done with in
// this one pass.
bool may_hold_a_value(std::string_view line) {
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i] | 0x20;  // ASCII lower case for letters
    if (is_digit(line[i])) return true;
    if ((c == 'n' || c == 'i') && i + 2 < line.size()) {
      const char c1 = line[i + 1] | 0x20, c2 = line[i + 2] | 0x20;
      if ((c == 'n' && c1 == 'a' && c2 == 'n') || (c == 'i' && c1 == 'n' && c2 == 'f')) return true;
    }
  }
  return false;
}

bool same_value(double a, double b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

}  // namespace

bool parse_number_token(std::string_view token, double& value) {
  if (token.empty()) return false;
  std::size_t i = 0;
  bool negative = false;
  if (token[0] == '+' || token[0] == '-') {
    negative = token[0] == '-';
    i = 1;
  }
  std::string_view body = token.substr(i);
  if (iequals_ascii(body, "nan")) {
    value = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (iequals_ascii(body, "inf") || iequals_ascii(body, "infinity")) {
    value = negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    return true;
  }
  bool digit = false;
  for (char c : body) {
    if (is_digit(c)) {
      digit = true;
    } else if (c != '.' && c != 'e' && c != 'E' && c != '+' && c != '-') {
      return false;
    }
  }
  if (!digit || body.empty() || !(is_digit(body[0]) || body[0] == '.')) return false;
  double parsed = 0;
  auto [ptr, ec] = std::from_chars(body.data(), body.data() + body.size(), parsed);
  if (ec != std::errc() || ptr != body.data() + body.size()) return false;
  value = negative ? -parsed : parsed;
  return true;
}

std::string strip_ansi(std::string_view text) {
  if (std::none_of(text.begin(), text.end(),
                   [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7F; }))
    return std::string(text);
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == 0x1B) {
      if (i + 1 >= text.size()) break;
      const char kind = text[i + 1];
      if (kind == '[') {  // CSI: parameters and intermediates, then one final byte 0x40-0x7E
        i += 2;
        while (i < text.size() && !(text[i] >= 0x40 && text[i] <= 0x7E)) ++i;
      } else if (kind == ']') {  // OSC: up to BEL or ST (ESC \)
        i += 2;
        while (i < text.size() && text[i] != '\a' &&
               !(text[i] == 0x1B && i + 1 < text.size() && text[i + 1] == '\\'))
          ++i;
        if (i < text.size() && text[i] == 0x1B) ++i;
      } else {  // ESC, intermediates 0x20-0x2F, one final byte: `ESC ( B`, `ESC 7`
        ++i;
        while (i + 1 < text.size() && text[i] >= 0x20 && text[i] <= 0x2F) ++i;
      }
      continue;
    }
    out.push_back((c < 0x20 && c != '\t') || c == 0x7F ? ' ' : static_cast<char>(c));
  }
  return out;
}

LineSplitter::LineSplitter(std::size_t max_line_bytes) : m_max_line_bytes(max_line_bytes) {}

void LineSplitter::complete(std::vector<std::string>& lines) {
  if (m_discarding) {
    m_discarding = false;
  } else if (!m_partial.empty()) {
    std::string line = strip_ansi(m_partial);
    if (line.find_first_not_of(" \t") != std::string::npos) {
      lines.push_back(std::move(line));
      ++m_lines;
    }
  }
  m_partial.clear();
}

void LineSplitter::feed(std::string_view chunk, std::vector<std::string>& lines) {
  if (chunk.empty()) return;
  std::size_t i = 0;
  if (m_after_cr && chunk[0] == '\n') i = 1;  // the `\n` of a `\r\n` split across chunks
  m_after_cr = false;
  while (i < chunk.size()) {
    // A plain loop: find_first_of calls memchr on its set once per byte of the chunk.
    std::size_t end = i;
    while (end < chunk.size() && chunk[end] != '\n' && chunk[end] != '\r') ++end;
    if (end == chunk.size()) end = std::string_view::npos;
    const std::size_t piece = (end == std::string_view::npos ? chunk.size() : end) - i;
    if (!m_discarding) {
      if (m_partial.size() + piece > m_max_line_bytes) {
        m_discarding = true;
        ++m_overlong;
        m_partial.clear();
        m_partial.shrink_to_fit();
      } else {
        m_partial.append(chunk.substr(i, piece));
      }
    }
    if (end == std::string_view::npos) break;
    complete(lines);
    std::size_t next = end + 1;
    if (chunk[end] == '\r') {
      if (next < chunk.size()) {
        if (chunk[next] == '\n') ++next;
      } else {
        m_after_cr = true;
      }
    }
    i = next;
  }
}

void LineSplitter::finish(std::vector<std::string>& lines) {
  complete(lines);
  m_after_cr = false;
}

ParsedLine parse_line(std::string_view line) {
  if (!may_hold_a_value(line)) return {};
  return LineScan(line).run();
}

OutputStreamParser::OutputStreamParser(std::size_t max_line_bytes) : m_splitter(max_line_bytes) {}

void OutputStreamParser::feed(std::string_view chunk, std::vector<Point>& out) {
  m_splitter.feed(chunk, m_lines);
  parse_lines(out);
}

void OutputStreamParser::finish(std::vector<Point>& out) {
  m_splitter.finish(m_lines);
  parse_lines(out);
}

void OutputStreamParser::parse_lines(std::vector<Point>& out) {
  for (const std::string& line : m_lines) {
    ParsedLine parsed = parse_line(line);
    if (!parsed.progress_bar) {
      for (auto& p : parsed.points) out.push_back(std::move(p));
      continue;
    }
    if (m_last_bar.size() > k_max_bar_names) m_last_bar.clear();
    for (auto& p : parsed.points) {
      auto [it, inserted] = m_last_bar.try_emplace(p.name, p.value);
      if (!inserted) {
        if (same_value(it->second, p.value)) continue;
        it->second = p.value;
      }
      out.push_back(std::move(p));
    }
  }
  m_lines.clear();
}

}  // namespace gpuhost::metrics
