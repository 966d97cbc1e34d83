#pragma once
// Small helpers to read typed fields out of a Value with a precise error on the first
// wrong type. Missing fields leave the destination untouched (older reports lack newer fields).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json.h"

namespace gpuhost::json {

class FieldReader {
 public:
  // `where` names this object in error messages ("facts.gpu.devices[2]"). The value must outlive
  // the reader. REQUIRES: nothing; a non-object makes every read fail with a parse error.
  FieldReader(const Value& value, std::string where);

  void read(std::string_view key, std::string& out);
  void read(std::string_view key, bool& out);
  void read(std::string_view key, int& out);
  void read(std::string_view key, long& out);
  void read(std::string_view key, std::uint64_t& out);
  void read(std::string_view key, std::uint32_t& out);
  void read(std::string_view key, std::uint16_t& out);
  void read(std::string_view key, std::optional<std::uint64_t>& out);
  void read(std::string_view key, std::optional<std::uint32_t>& out);
  void read(std::string_view key, std::vector<std::string>& out);

  // The member if present and of the right type; records an error if present with another type.
  [[nodiscard]] const Value* object(std::string_view key);
  [[nodiscard]] const Value* array(std::string_view key);
  [[nodiscard]] std::string path(std::string_view key) const { return m_where + "." + std::string(key); }

  // First error seen, if any (also fed by children through fail()).
  [[nodiscard]] bool ok() const { return !m_error; }
  [[nodiscard]] const Error& error() const { return *m_error; }
  void fail(Error e) {
    if (!m_error) m_error = std::move(e);
  }

 private:
  const Value* member(std::string_view key, Value::Type want, const char* want_name);
  const Value& m_value;
  std::string m_where;
  std::optional<Error> m_error;
};

}  // namespace gpuhost::json
