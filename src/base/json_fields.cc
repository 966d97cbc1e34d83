#include "base/json_fields.h"

namespace gpuhost::json {

FieldReader::FieldReader(const Value& value, std::string where) : m_value(value), m_where(std::move(where)) {
  if (!value.is_object())
    fail(Error{ErrorCode::parse_error, m_where + ": expected an object, found " + type_name(value.type())});
}

const Value* FieldReader::member(std::string_view key, Value::Type want, const char* want_name) {
  const Value* v = m_value.find(key);
  if (!v || v->is_null()) return nullptr;
  bool match = v->type() == want || (want == Value::Type::number && v->is_number()) ||
               (want == Value::Type::integer && v->is_number());
  if (!match) {
    fail(Error{ErrorCode::parse_error,
               path(key) + ": expected " + want_name + ", found " + type_name(v->type())});
    return nullptr;
  }
  return v;
}

void FieldReader::read(std::string_view key, std::string& out) {
  if (auto* v = member(key, Value::Type::string, "a string")) out = v->as_string();
}
void FieldReader::read(std::string_view key, bool& out) {
  if (auto* v = member(key, Value::Type::boolean, "true or false")) out = v->as_bool();
}
void FieldReader::read(std::string_view key, int& out) {
  if (auto* v = member(key, Value::Type::integer, "a number")) out = static_cast<int>(v->as_int());
}
void FieldReader::read(std::string_view key, long& out) {
  if (auto* v = member(key, Value::Type::integer, "a number")) out = static_cast<long>(v->as_int());
}
void FieldReader::read(std::string_view key, std::uint64_t& out) {
  if (auto* v = member(key, Value::Type::integer, "a number")) out = static_cast<std::uint64_t>(v->as_int());
}
void FieldReader::read(std::string_view key, std::uint32_t& out) {
  if (auto* v = member(key, Value::Type::integer, "a number")) out = static_cast<std::uint32_t>(v->as_int());
}
void FieldReader::read(std::string_view key, std::uint16_t& out) {
  if (auto* v = member(key, Value::Type::integer, "a number")) out = static_cast<std::uint16_t>(v->as_int());
}
void FieldReader::read(std::string_view key, std::optional<std::uint64_t>& out) {
  if (auto* v = member(key, Value::Type::integer, "a number")) out = static_cast<std::uint64_t>(v->as_int());
}
void FieldReader::read(std::string_view key, std::optional<std::uint32_t>& out) {
  if (auto* v = member(key, Value::Type::integer, "a number")) out = static_cast<std::uint32_t>(v->as_int());
}
void FieldReader::read(std::string_view key, std::vector<std::string>& out) {
  const Value* v = member(key, Value::Type::array, "an array");
  if (!v) return;
  out.clear();
  for (std::size_t i = 0; i < v->items().size(); ++i) {
    const auto& e = v->items()[i];
    if (!e.is_string()) {
      fail(Error{ErrorCode::parse_error, path(key) + "[" + std::to_string(i) + "]: expected a string"});
      return;
    }
    out.push_back(e.as_string());
  }
}

const Value* FieldReader::object(std::string_view key) {
  return member(key, Value::Type::object, "an object");
}
const Value* FieldReader::array(std::string_view key) {
  return member(key, Value::Type::array, "an array");
}

}  // namespace gpuhost::json
