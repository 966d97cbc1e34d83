#include "base/yaml.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/strings.h"

namespace gpuhost::yaml {

using json::Value;

namespace {

// One line with content: its indentation and its text with the comment and trailing blanks cut.
struct Line {
  std::size_t number = 0;  // 1-based
  std::size_t indent = 0;
  std::string text;
};

std::unexpected<Error> fail(std::size_t line, std::size_t column, const std::string& what) {
  return make_error(ErrorCode::parse_error,
                    "line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + what);
}

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

// Where a comment starts: a '#' at the start or after a blank, outside quotes.
std::size_t comment_start(std::string_view s) {
  char quote = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quote) {
      if (quote == '"' && c == '\\')
        ++i;
      else if (c == quote)
        quote = 0;
    } else if (c == '"' || c == '\'') {
      if (i == 0 || is_blank(s[i - 1]) || s[i - 1] == '[' || s[i - 1] == '{' || s[i - 1] == ',' ||
          s[i - 1] == '-' || s[i - 1] == ':')
        quote = c;
    } else if (c == '#' && (i == 0 || is_blank(s[i - 1]))) {
      return i;
    }
  }
  return s.size();
}

Result<std::vector<Line>> split_lines(std::string_view text) {
  std::vector<Line> lines;
  bool seen_content = false, seen_marker = false;
  std::size_t number = 0;
  while (!text.empty() || number == 0) {
    const std::size_t end = text.find('\n');
    std::string_view raw = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++number;
    if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
    if (number == 1 && raw.starts_with("\xEF\xBB\xBF")) raw.remove_prefix(3);  // a UTF-8 byte order mark
    std::size_t indent = 0;
    while (indent < raw.size() && raw[indent] == ' ') ++indent;
    std::string_view rest = raw.substr(indent);
    rest = rest.substr(0, comment_start(rest));
    while (!rest.empty() && is_blank(rest.back())) rest.remove_suffix(1);
    if (rest.empty()) {
      if (text.empty()) break;
      continue;
    }
    if (rest.front() == '\t')
      return fail(number, indent + 1, "a tab in indentation (YAML indents with spaces)");
    if (indent == 0 && (rest == "---" || rest.starts_with("--- "))) {
      if (seen_content || seen_marker) return fail(number, 1, "a second document: one document per file");
      seen_marker = true;
      if (rest.size() > 3) return fail(number, 5, "content after '---': put it on the next line");
      continue;
    }
    if (indent == 0 && rest == "...")
      return fail(number, 1, "a document end marker ('...') is not supported");
    if (indent == 0 && rest.front() == '%') return fail(number, 1, "YAML directives are not supported");
    seen_content = true;
    lines.push_back({number, indent, std::string(rest)});
    if (text.empty()) break;
  }
  return lines;
}

// The core schema's resolution of a plain scalar.
Value resolve_plain(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return Value();
  if (s == "true" || s == "True" || s == "TRUE") return Value(true);
  if (s == "false" || s == "False" || s == "FALSE") return Value(false);
  std::size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i < s.size() && s.size() - i <= 18) {
    bool digits = true;
    for (std::size_t j = i; j < s.size(); ++j) digits = digits && s[j] >= '0' && s[j] <= '9';
    if (digits) return Value(static_cast<long long>(std::stoll(s)));
  }
  return Value(s);
}

// Reads inline content of one line: scalars, quoted strings, flow collections. `column0` is the
// 1-based column of text[0], for messages.
class InlineReader {
 public:
  InlineReader(std::string_view text, std::size_t line, std::size_t column0)
      : m_text(text), m_line(line), m_column0(column0) {}

  // The whole text as one value.
  Result<Value> whole() {
    skip_blanks();
    auto v = GPUHOST_TRY(value(false));
    skip_blanks();
    if (m_pos != m_text.size())
      return error("unexpected '" + std::string(1, m_text[m_pos]) + "' after the value");
    return v;
  }

  // A mapping key at the start: the key, with the position just past its ':'; nullopt when the
  // text is not a "key: ..." entry.
  Result<std::optional<std::string>> key() {
    skip_blanks();
    if (m_pos >= m_text.size()) return std::optional<std::string>();
    const char c = m_text[m_pos];
    if (c == '[' || c == '{') return std::optional<std::string>();
    std::string k;
    if (c == '"' || c == '\'') {
      const std::size_t start = m_pos;
      k = GPUHOST_TRY(quoted());
      skip_blanks();
      if (m_pos >= m_text.size() || m_text[m_pos] != ':') {
        m_pos = start;
        return std::optional<std::string>();
      }
    } else {
      const std::size_t colon = find_indicator(m_pos);
      if (colon == std::string_view::npos) return std::optional<std::string>();
      k = std::string(m_text.substr(m_pos, colon - m_pos));
      while (!k.empty() && is_blank(k.back())) k.pop_back();
      if (k.starts_with("? ")) return error("complex mapping keys ('? ') are not supported");
      m_pos = colon;
    }
    ++m_pos;  // the ':'
    return std::optional<std::string>(std::move(k));
  }

  [[nodiscard]] std::string_view rest() const { return m_text.substr(m_pos); }
  [[nodiscard]] std::size_t column() const { return m_column0 + m_pos; }

 private:
  std::unexpected<Error> error(const std::string& what) const {
    return fail(m_line, m_column0 + m_pos, what);
  }

  void skip_blanks() {
    while (m_pos < m_text.size() && is_blank(m_text[m_pos])) ++m_pos;
  }

  // A ':' followed by a blank or the end, from `from` on (a plain key's end); npos when none.
  [[nodiscard]] std::size_t find_indicator(std::size_t from) const {
    for (std::size_t i = from; i < m_text.size(); ++i)
      if (m_text[i] == ':' && (i + 1 == m_text.size() || is_blank(m_text[i + 1]))) return i;
    return std::string_view::npos;
  }

  Result<Value> value(bool in_flow) {
    skip_blanks();
    if (m_pos >= m_text.size()) return Value();
    switch (m_text[m_pos]) {
      case '[': return sequence();
      case '{': return mapping();
      case '"':
      case '\'': return Value(GPUHOST_TRY(quoted()));
      case '&':
      case '*': return error("anchors and aliases (& and *) are not supported: write the value out");
      case '!': return error("tags ('!') are not supported");
      case '|':
      case '>': return error("block scalars (| and >) are not supported");
      case '@':
      case '`': return error("'" + std::string(1, m_text[m_pos]) + "' cannot start a plain value: quote it");
      default: break;
    }
    const std::size_t start = m_pos;
    while (m_pos < m_text.size()) {
      const char c = m_text[m_pos];
      if (in_flow && (c == ',' || c == ']' || c == '}')) break;
      if (c == ':' && (m_pos + 1 == m_text.size() || is_blank(m_text[m_pos + 1]) ||
                       (in_flow && (m_text[m_pos + 1] == ',' || m_text[m_pos + 1] == '}'))))
        break;
      ++m_pos;
    }
    std::string s(m_text.substr(start, m_pos - start));
    while (!s.empty() && is_blank(s.back())) s.pop_back();
    if (!in_flow && m_pos < m_text.size())
      return error("a mapping cannot start on the line of another key: put it on the next line, indented");
    return resolve_plain(s);
  }

  Result<std::string> quoted() {
    const char q = m_text[m_pos++];
    std::string out;
    while (m_pos < m_text.size()) {
      const char c = m_text[m_pos++];
      if (c == q) {
        if (q == '\'' && m_pos < m_text.size() && m_text[m_pos] == '\'') {
          out += '\'';
          ++m_pos;
          continue;
        }
        return out;
      }
      if (q == '"' && c == '\\') {
        if (m_pos >= m_text.size()) break;
        const char e = m_text[m_pos++];
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case 'r': out += '\r'; break;
          case '0': out += '\0'; break;
          case ' ': out += ' '; break;
          case 'x':
          case 'u':
          case 'U': {
            const std::size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            if (m_pos + n > m_text.size()) return error("a short \\" + std::string(1, e) + " escape");
            std::uint32_t cp = 0;
            for (std::size_t i = 0; i < n; ++i) {
              const char h = m_text[m_pos + i];
              const int d = h >= '0' && h <= '9'   ? h - '0'
                            : h >= 'a' && h <= 'f' ? h - 'a' + 10
                            : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                   : -1;
              if (d < 0) return error("a bad hex digit in a \\" + std::string(1, e) + " escape");
              cp = cp * 16 + static_cast<std::uint32_t>(d);
            }
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return error("an escape outside Unicode");
            m_pos += n;
            append_utf8(out, cp);
            break;
          }
          default: return error("an unknown escape '\\" + std::string(1, e) + "'");
        }
        continue;
      }
      out += c;
    }
    return error(std::string("a quoted string that does not end on its line (") + q + " missing)");
  }

  Result<Value> sequence() {
    ++m_pos;  // '['
    Value out = Value::array();
    skip_blanks();
    if (m_pos < m_text.size() && m_text[m_pos] == ']') {
      ++m_pos;
      return out;
    }
    while (true) {
      out.push_back(GPUHOST_TRY(value(true)));
      skip_blanks();
      if (m_pos >= m_text.size()) return error("a flow sequence that does not end on its line (']' missing)");
      if (m_text[m_pos] == ']') {
        ++m_pos;
        return out;
      }
      if (m_text[m_pos] != ',') return error("',' or ']' expected in a flow sequence");
      ++m_pos;
    }
  }

  Result<Value> mapping() {
    ++m_pos;  // '{'
    Value out = Value::object();
    skip_blanks();
    if (m_pos < m_text.size() && m_text[m_pos] == '}') {
      ++m_pos;
      return out;
    }
    while (true) {
      skip_blanks();
      const std::size_t at = m_pos;
      Value k = GPUHOST_TRY(value(true));
      if (!k.is_string() && !k.is_number() && !k.is_bool())
        return fail(m_line, m_column0 + at, "a mapping key expected");
      const std::string key = k.is_string() ? k.as_string() : json::dump(k);
      skip_blanks();
      if (m_pos >= m_text.size() || m_text[m_pos] != ':')
        return error("':' expected after a key in a flow mapping");
      ++m_pos;
      if (out.find(key)) return fail(m_line, m_column0 + at, "duplicate key '" + key + "'");
      out[key] = GPUHOST_TRY(value(true));
      skip_blanks();
      if (m_pos >= m_text.size()) return error("a flow mapping that does not end on its line ('}' missing)");
      if (m_text[m_pos] == '}') {
        ++m_pos;
        return out;
      }
      if (m_text[m_pos] != ',') return error("',' or '}' expected in a flow mapping");
      ++m_pos;
    }
  }

  std::string_view m_text;
  std::size_t m_pos = 0;
  std::size_t m_line;
  std::size_t m_column0;
};

bool starts_sequence_item(const std::string& text) {
  return text == "-" || text.starts_with("- ");
}

class BlockReader {
 public:
  explicit BlockReader(std::vector<Line> lines) : m_lines(std::move(lines)) {}

  Result<Value> document() {
    if (m_lines.empty()) return Value();
    auto v = GPUHOST_TRY(block(m_lines[0].indent));
    if (m_i < m_lines.size())
      return fail(m_lines[m_i].number, m_lines[m_i].indent + 1, "unexpected indentation");
    return v;
  }

 private:
  Result<Value> block(std::size_t indent) {
    Line& line = m_lines[m_i];
    if (starts_sequence_item(line.text)) return sequence(indent);
    InlineReader probe(line.text, line.number, line.indent + 1);
    auto key = GPUHOST_TRY(probe.key());
    if (!key) {
      // A lone scalar or flow value as the whole block.
      InlineReader r(line.text, line.number, line.indent + 1);
      ++m_i;
      return r.whole();
    }
    return mapping(indent);
  }

  Result<Value> mapping(std::size_t indent) {
    Value out = Value::object();
    while (m_i < m_lines.size() && m_lines[m_i].indent == indent) {
      Line& line = m_lines[m_i];
      if (starts_sequence_item(line.text))
        return fail(line.number, line.indent + 1, "a sequence item where a key was expected");
      InlineReader r(line.text, line.number, line.indent + 1);
      auto key = GPUHOST_TRY(r.key());
      if (!key) return fail(line.number, line.indent + 1, "'key: value' expected");
      if (out.find(*key)) return fail(line.number, line.indent + 1, "duplicate key '" + *key + "'");
      InlineReader value(r.rest(), line.number, r.column());
      ++m_i;
      bool empty = true;
      for (char c : value.rest()) empty = empty && is_blank(c);
      if (!empty) {
        out[*key] = GPUHOST_TRY(value.whole());
        continue;
      }
      if (m_i < m_lines.size() && m_lines[m_i].indent > indent) {
        out[*key] = GPUHOST_TRY(block(m_lines[m_i].indent));
      } else if (m_i < m_lines.size() && m_lines[m_i].indent == indent &&
                 starts_sequence_item(m_lines[m_i].text)) {
        out[*key] = GPUHOST_TRY(sequence(indent));  // "key:\n- item" at the key's own indent
      } else {
        out[*key] = Value();
      }
    }
    if (m_i < m_lines.size() && m_lines[m_i].indent > indent)
      return fail(m_lines[m_i].number, m_lines[m_i].indent + 1, "unexpected indentation");
    return out;
  }

  Result<Value> sequence(std::size_t indent) {
    Value out = Value::array();
    while (m_i < m_lines.size() && m_lines[m_i].indent == indent && starts_sequence_item(m_lines[m_i].text)) {
      Line& line = m_lines[m_i];
      std::size_t skip = 1;
      while (skip < line.text.size() && line.text[skip] == ' ') ++skip;
      if (skip >= line.text.size()) {
        ++m_i;
        if (m_i < m_lines.size() && m_lines[m_i].indent > indent)
          out.push_back(GPUHOST_TRY(block(m_lines[m_i].indent)));
        else
          out.push_back(Value());
        continue;
      }
      // "- key: value" or "- - x": the rest is a block at the column where it starts; the line
      // is rewritten to be that block's first line.
      const std::string rest = line.text.substr(skip);
      InlineReader probe(rest, line.number, line.indent + skip + 1);
      const bool nested = starts_sequence_item(rest) || GPUHOST_TRY(probe.key()).has_value();
      if (nested) {
        line.indent += skip;
        line.text = rest;
        out.push_back(GPUHOST_TRY(block(line.indent)));
        continue;
      }
      InlineReader r(rest, line.number, line.indent + skip + 1);
      ++m_i;
      out.push_back(GPUHOST_TRY(r.whole()));
    }
    if (m_i < m_lines.size() && m_lines[m_i].indent > indent)
      return fail(m_lines[m_i].number, m_lines[m_i].indent + 1, "unexpected indentation");
    return out;
  }

  std::vector<Line> m_lines;
  std::size_t m_i = 0;
};

bool plain_safe(const std::string& s) {
  if (s.empty()) return false;
  if (!resolve_plain(s).is_string()) return false;
  if (s[0] >= '0' && s[0] <= '9') return false;  // "1g.10gb" reads clearer quoted
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == '/' || c == '+' || c == '-';
    if (!ok) return false;
  }
  return s[0] != '-' && s[0] != '.';
}

std::string scalar(const Value& v) {
  switch (v.type()) {
    case Value::Type::null: return "null";
    case Value::Type::boolean: return v.as_bool() ? "true" : "false";
    case Value::Type::integer:
    case Value::Type::number: return json::dump(v);
    case Value::Type::string: return plain_safe(v.as_string()) ? v.as_string() : json::dump(v);
    default: return {};
  }
}

bool is_scalar(const Value& v) {
  return !v.is_array() && !v.is_object();
}

void write_block(std::string& out, const Value& v, std::size_t indent);

// The value after "key:" or "- ": inline for scalars, flow lists and empty collections, else on
// the next lines one level deeper.
void write_after_indicator(std::string& out, const Value& v, std::size_t indent) {
  if (is_scalar(v)) {
    out += " " + scalar(v) + "\n";
  } else if (v.is_object() && v.members().empty()) {
    out += " {}\n";
  } else if (v.is_array() && std::all_of(v.items().begin(), v.items().end(), is_scalar)) {
    out += " [";
    for (std::size_t i = 0; i < v.items().size(); ++i) out += (i ? ", " : "") + scalar(v.items()[i]);
    out += "]\n";
  } else {
    out += "\n";
    write_block(out, v, indent + 2);
  }
}

void write_block(std::string& out, const Value& v, std::size_t indent) {
  const std::string pad(indent, ' ');
  if (v.is_object()) {
    for (const auto& [k, child] : v.members()) {
      out += pad + scalar(Value(k)) + ":";
      write_after_indicator(out, child, indent);
    }
  } else if (v.is_array()) {
    for (const auto& item : v.items()) {
      if (item.is_object() && !item.members().empty()) {
        std::string nested;
        write_block(nested, item, indent + 2);
        out += pad + "- " + nested.substr(indent + 2);
      } else {
        out += pad + "-";
        write_after_indicator(out, item, indent);
      }
    }
  } else {
    out += pad + scalar(v) + "\n";
  }
}

}  // namespace

Result<Value> parse(std::string_view text) {
  auto lines = GPUHOST_TRY(split_lines(text));
  return BlockReader(std::move(lines)).document();
}

std::string dump(const Value& value) {
  std::string out;
  write_block(out, value, 0);
  return out;
}

}  // namespace gpuhost::yaml
