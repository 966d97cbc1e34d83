// The only file that includes nlohmann/json: it parses; the Value type above is ours so that the
// heavy header is compiled once.
#include "base/json.h"

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

namespace gpuhost::json {

std::int64_t Value::as_int() const {
  if (auto* d = std::get_if<double>(&m_data)) return static_cast<std::int64_t>(*d);
  return std::get<std::int64_t>(m_data);
}

double Value::as_number() const {
  if (auto* i = std::get_if<std::int64_t>(&m_data)) return static_cast<double>(*i);
  return std::get<double>(m_data);
}

Value& Value::operator[](std::string_view key) {
  if (is_null()) m_data = Object{};
  auto& object = std::get<Object>(m_data);
  for (auto& [k, v] : object)
    if (k == key) return v;
  object.emplace_back(std::string(key), Value());
  return object.back().second;
}

const Value* Value::find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const auto& [k, v] : std::get<Object>(m_data))
    if (k == key) return &v;
  return nullptr;
}

void Value::push_back(Value v) {
  if (is_null()) m_data = Array{};
  std::get<Array>(m_data).push_back(std::move(v));
}

std::size_t Value::size() const {
  if (is_array()) return items().size();
  if (is_object()) return members().size();
  return 0;
}

std::string Value::get_string(std::string_view key, std::string_view fallback) const {
  const Value* v = find(key);
  return v && v->is_string() ? v->as_string() : std::string(fallback);
}

double Value::get_number(std::string_view key, double fallback) const {
  const Value* v = find(key);
  return v && v->is_number() ? v->as_number() : fallback;
}

std::int64_t Value::get_int(std::string_view key, std::int64_t fallback) const {
  const Value* v = find(key);
  return v && v->is_number() ? v->as_int() : fallback;
}

bool Value::get_bool(std::string_view key, bool fallback) const {
  const Value* v = find(key);
  return v && v->is_bool() ? v->as_bool() : fallback;
}

const char* type_name(Value::Type type) {
  switch (type) {
    case Value::Type::null: return "null";
    case Value::Type::boolean: return "boolean";
    case Value::Type::integer: return "integer";
    case Value::Type::number: return "number";
    case Value::Type::string: return "string";
    case Value::Type::array: return "array";
    case Value::Type::object: return "object";
  }
  return "unknown";
}

namespace {

Value from_nlohmann(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value();
    case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<std::int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      auto u = j.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<std::int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Value::Array a;
      a.reserve(j.size());
      for (const auto& e : j) a.push_back(from_nlohmann(e));
      return Value(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value::Object o;
      o.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) o.emplace_back(it.key(), from_nlohmann(it.value()));
      return Value(std::move(o));
    }
    default: return Value();
  }
}

// The length of the valid UTF-8 sequence that starts at s[i] (RFC 3629 section 4's table: no
// overlong forms, no surrogates, nothing past U+10FFFF), or 0 when the bytes there are not one.
std::size_t utf8_sequence(std::string_view s, std::size_t i) {
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xBF;  // the range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // overlong
    if (lead == 0xED) high = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;   // overlong
    if (lead == 0xF4) high = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (i + length > s.size() || byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (std::size_t k = 2; k < length; ++k)
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  return length;
}

void append_string(std::string& out, std::string_view s) {
  out += '"';
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const std::size_t length = utf8_sequence(s, i);
      if (length == 0) {
        out += "\xEF\xBF\xBD";  // U+FFFD for a byte that is not UTF-8
      } else {
        out.append(s, i, length);
        i += length - 1;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void append_value(std::string& out, const Value& v, int indent, int depth) {
  auto newline = [&](int d) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<std::size_t>(indent * d), ' ');
  };
  switch (v.type()) {
    case Value::Type::null: out += "null"; break;
    case Value::Type::boolean: out += v.as_bool() ? "true" : "false"; break;
    case Value::Type::integer: out += std::to_string(v.as_int()); break;
    case Value::Type::number: {
      double d = v.as_number();
      if (!std::isfinite(d)) {  // JSON has no NaN/Inf
        out += "null";
        break;
      }
      char buf[32];
      auto res = std::to_chars(buf, buf + sizeof buf, d);
      out.append(buf, res.ptr);
      break;
    }
    case Value::Type::string: append_string(out, v.as_string()); break;
    case Value::Type::array: {
      if (v.items().empty()) {
        out += "[]";
        break;
      }
      out += '[';
      bool first = true;
      for (const auto& e : v.items()) {
        if (!first) out += ',';
        first = false;
        newline(depth + 1);
        append_value(out, e, indent, depth + 1);
      }
      newline(depth);
      out += ']';
      break;
    }
    case Value::Type::object: {
      if (v.members().empty()) {
        out += "{}";
        break;
      }
      out += '{';
      bool first = true;
      for (const auto& [k, e] : v.members()) {
        if (!first) out += ',';
        first = false;
        newline(depth + 1);
        append_string(out, k);
        out += indent < 0 ? ":" : ": ";
        append_value(out, e, indent, depth + 1);
      }
      newline(depth);
      out += '}';
      break;
    }
  }
}

}  // namespace

Result<Value> parse(std::string_view text) {
  try {
    return from_nlohmann(nlohmann::ordered_json::parse(text.begin(), text.end()));
  } catch (const nlohmann::ordered_json::exception& e) {
    // Not only parse_error: a number beyond double's range (1e400) throws out_of_range.406.
    // e.what() reads "[json.exception.parse_error.101] parse error at line 1, column 5: ..."
    std::string what = e.what();
    auto pos = what.find("] ");
    return make_error(ErrorCode::parse_error, pos == std::string::npos ? what : what.substr(pos + 2));
  }
}

bool valid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t length = utf8_sequence(text, i);
    if (length == 0) return false;
    i += length;
  }
  return true;
}

std::string dump(const Value& value, int indent) {
  std::string out;
  append_value(out, value, indent, 0);
  return out;
}

}  // namespace gpuhost::json
