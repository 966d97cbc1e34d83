#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "base/error.h"

namespace gpuhost::json {

// A JSON document as a value type. Objects keep insertion order, so reports read in the order
// they were built. Integers are kept exact (int64) apart from other numbers (double).
// Not thread-safe for concurrent mutation; copies are deep.
class Value {
 public:
  enum class Type { null, boolean, integer, number, string, array, object };
  using Array = std::vector<Value>;
  using Member = std::pair<std::string, Value>;
  using Object = std::vector<Member>;

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : m_data(b) {}
  Value(int i) : m_data(static_cast<std::int64_t>(i)) {}
  Value(unsigned i) : m_data(static_cast<std::int64_t>(i)) {}
  Value(long i) : m_data(static_cast<std::int64_t>(i)) {}
  Value(long long i) : m_data(static_cast<std::int64_t>(i)) {}
  Value(unsigned long i) : m_data(static_cast<std::int64_t>(i)) {}
  Value(unsigned long long i) : m_data(static_cast<std::int64_t>(i)) {}
  Value(double d) : m_data(d) {}
  Value(const char* s) : m_data(std::string(s)) {}
  Value(std::string_view s) : m_data(std::string(s)) {}
  Value(std::string s) : m_data(std::move(s)) {}
  Value(Array a) : m_data(std::move(a)) {}
  Value(Object o) : m_data(std::move(o)) {}

  [[nodiscard]] static Value array() { return Value(Array{}); }
  [[nodiscard]] static Value object() { return Value(Object{}); }

  [[nodiscard]] Type type() const { return static_cast<Type>(m_data.index()); }
  [[nodiscard]] bool is_null() const { return type() == Type::null; }
  [[nodiscard]] bool is_bool() const { return type() == Type::boolean; }
  [[nodiscard]] bool is_number() const { return type() == Type::integer || type() == Type::number; }
  [[nodiscard]] bool is_integer() const { return type() == Type::integer; }
  [[nodiscard]] bool is_string() const { return type() == Type::string; }
  [[nodiscard]] bool is_array() const { return type() == Type::array; }
  [[nodiscard]] bool is_object() const { return type() == Type::object; }

  // Accessors. REQUIRES: the matching is_*() is true (as_number also accepts integers).
  [[nodiscard]] bool as_bool() const { return std::get<bool>(m_data); }
  [[nodiscard]] std::int64_t as_int() const;
  [[nodiscard]] double as_number() const;
  [[nodiscard]] const std::string& as_string() const { return std::get<std::string>(m_data); }
  [[nodiscard]] const Array& items() const { return std::get<Array>(m_data); }
  [[nodiscard]] Array& items() { return std::get<Array>(m_data); }
  [[nodiscard]] const Object& members() const { return std::get<Object>(m_data); }
  [[nodiscard]] Object& members() { return std::get<Object>(m_data); }

  // Object access. operator[] turns a null into an object and inserts missing keys (as null).
  Value& operator[](std::string_view key);
  // Returns the member or nullptr when absent or when this is not an object.
  [[nodiscard]] const Value* find(std::string_view key) const;
  [[nodiscard]] bool contains(std::string_view key) const { return find(key) != nullptr; }

  // Array append. Turns a null into an array.
  void push_back(Value v);
  [[nodiscard]] std::size_t size() const;

  // Lenient typed reads for optional fields: the fallback when absent or of another type.
  [[nodiscard]] std::string get_string(std::string_view key, std::string_view fallback = {}) const;
  [[nodiscard]] double get_number(std::string_view key, double fallback = 0) const;
  [[nodiscard]] std::int64_t get_int(std::string_view key, std::int64_t fallback = 0) const;
  [[nodiscard]] bool get_bool(std::string_view key, bool fallback = false) const;

  friend bool operator==(const Value& a, const Value& b) { return a.m_data == b.m_data; }

 private:
  std::variant<std::nullptr_t, bool, std::int64_t, double, std::string, Array, Object> m_data;
};

// Parses RFC 8259 JSON. Errors carry the byte offset and what was expected.
[[nodiscard]] Result<Value> parse(std::string_view text);

// Serialises. indent < 0: compact one line; otherwise pretty with that many spaces per level.
// Strings are written as UTF-8; each byte that does not belong to a valid UTF-8 sequence (RFC
// 3629: no overlong forms, surrogates or code points past U+10FFFF) becomes U+FFFD, so what
// dump() writes always parses. Callers that must keep such bytes check valid_utf8() first.
[[nodiscard]] std::string dump(const Value& value, int indent = -1);

// Whether `text` is valid UTF-8 (RFC 3629), as dump() judges it.
[[nodiscard]] bool valid_utf8(std::string_view text);

// Name of a type for error messages ("object", "string", ...).
[[nodiscard]] const char* type_name(Value::Type type);

}  // namespace gpuhost::json
