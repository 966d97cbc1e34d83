#include "knowledge/row_reader.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "base/strings.h"

namespace gpuhost::knowledge {
namespace {

std::string describe(const json::Value& value) {
  std::string text = json::dump(value);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return std::string(json::type_name(value.type())) + " " + text;
}

bool is_as_of(std::string_view text) {
  // YYYY-MM or YYYY-MM-DD.
  if (text.size() != 7 && text.size() != 10) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    bool dash = i == 4 || i == 7;
    if (dash ? text[i] != '-' : !std::isdigit(static_cast<unsigned char>(text[i]))) return false;
  }
  return true;
}

}  // namespace

std::optional<Version> parse_exact_version(std::string_view text) {
  auto version = Version::parse(text);
  if (!version || version->str() != text) return std::nullopt;
  return version;
}

RowReader::RowReader(const json::Value& object, std::string location)
    : m_object(object), m_location(std::move(location)) {
  if (!object.is_object())
    m_error = Error{ErrorCode::parse_error, m_location + ": expected an object, found " + describe(object)};
}

void RowReader::set_key(std::string key) {
  m_key = std::move(key);
}

std::string RowReader::where() const {
  return m_key.empty() ? m_location : m_location + " (" + m_key + ")";
}

void RowReader::fail(std::string_view field, std::string problem) {
  if (m_error) return;
  m_error = Error{ErrorCode::parse_error, where() + ": field \"" + std::string(field) + "\": " + problem};
}

void RowReader::fail_type(std::string_view field, const char* expected, const json::Value& found) {
  fail(field, std::string("expected ") + expected + ", found " + describe(found));
}

const json::Value* RowReader::member(std::string_view field, bool null_is_absent) {
  if (std::find(m_read.begin(), m_read.end(), field) == m_read.end()) m_read.emplace_back(field);
  if (m_error) return nullptr;
  const json::Value* value = m_object.find(field);
  if (value && null_is_absent && value->is_null()) return nullptr;
  return value;
}

std::string RowReader::string(std::string_view field) {
  const json::Value* value = member(field, false);
  if (m_error) return {};
  if (!value) {
    fail(field, "missing");
    return {};
  }
  if (!value->is_string() || value->as_string().empty()) {
    fail_type(field, "a non-empty string", *value);
    return {};
  }
  return value->as_string();
}

std::optional<std::string> RowReader::optional_string(std::string_view field) {
  const json::Value* value = member(field, true);
  if (!value) return std::nullopt;
  if (!value->is_string()) {
    fail_type(field, "a string", *value);
    return std::nullopt;
  }
  return value->as_string();
}

Version RowReader::version(std::string_view field) {
  std::string text = string(field);
  if (!ok()) return {};
  auto version = parse_exact_version(text);
  if (!version) {
    fail(field, "expected a dotted version like \"12.4\" or \"535.104.05\", found \"" + text + "\"");
    return {};
  }
  return *version;
}

std::optional<Version> RowReader::optional_version(std::string_view field) {
  auto text = optional_string(field);
  if (!text) return std::nullopt;
  auto version = parse_exact_version(*text);
  if (!version) {
    fail(field,
         "expected a dotted version like \"12.4\" or \"535.104.05\" (or null), found \"" + *text + "\"");
    return std::nullopt;
  }
  return version;
}

std::int64_t RowReader::integer(std::string_view field) {
  const json::Value* value = member(field, false);
  if (m_error) return 0;
  if (!value) {
    fail(field, "missing");
    return 0;
  }
  if (!value->is_integer()) {
    fail_type(field, "an integer", *value);
    return 0;
  }
  return value->as_int();
}

std::optional<std::int64_t> RowReader::optional_integer(std::string_view field) {
  const json::Value* value = member(field, true);
  if (!value) return std::nullopt;
  if (!value->is_integer()) {
    fail_type(field, "an integer", *value);
    return std::nullopt;
  }
  return value->as_int();
}

std::optional<double> RowReader::optional_number(std::string_view field) {
  const json::Value* value = member(field, true);
  if (!value) return std::nullopt;
  if (!value->is_number() || value->as_number() < 0) {
    fail_type(field, "a non-negative number", *value);
    return std::nullopt;
  }
  return value->as_number();
}

bool RowReader::boolean(std::string_view field) {
  const json::Value* value = member(field, false);
  if (m_error) return false;
  if (!value) {
    fail(field, "missing");
    return false;
  }
  if (!value->is_bool()) {
    fail_type(field, "true or false", *value);
    return false;
  }
  return value->as_bool();
}

ComputeCapability RowReader::compute_capability(std::string_view field) {
  std::string text = string(field);
  if (!ok()) return {};
  auto cc = ComputeCapability::parse(text);
  if (!cc) {
    fail(field, "expected a compute capability like \"8.6\", found \"" + text + "\"");
    return {};
  }
  return *cc;
}

std::optional<ComputeCapability> RowReader::optional_compute_capability(std::string_view field) {
  auto text = optional_string(field);
  if (!text) return std::nullopt;
  auto cc = ComputeCapability::parse(*text);
  if (!cc) {
    fail(field, "expected a compute capability like \"8.6\" (or null), found \"" + *text + "\"");
    return std::nullopt;
  }
  return cc;
}

std::vector<std::string> RowReader::optional_string_list(std::string_view field) {
  const json::Value* value = member(field, true);
  std::vector<std::string> out;
  if (!value) return out;
  if (!value->is_array()) {
    fail_type(field, "an array of strings", *value);
    return out;
  }
  for (std::size_t i = 0; i < value->items().size(); ++i) {
    const auto& item = value->items()[i];
    if (!item.is_string() || item.as_string().empty()) {
      fail(field, "item " + std::to_string(i) + ": expected a non-empty string, found " + describe(item));
      return {};
    }
    out.push_back(item.as_string());
  }
  return out;
}

std::vector<std::string> RowReader::string_list(std::string_view field) {
  const json::Value* value = member(field, false);
  if (m_error) return {};
  if (!value) {
    fail(field, "missing");
    return {};
  }
  auto out = optional_string_list(field);
  if (ok() && out.empty()) fail(field, "expected at least one entry");
  return out;
}

const json::Value::Array* RowReader::array(std::string_view field) {
  const json::Value* value = member(field, false);
  if (m_error) return nullptr;
  if (!value) {
    fail(field, "missing");
    return nullptr;
  }
  if (!value->is_array()) {
    fail_type(field, "an array", *value);
    return nullptr;
  }
  return &value->items();
}

const json::Value* RowReader::object(std::string_view field) {
  const json::Value* value = member(field, false);
  if (m_error) return nullptr;
  if (!value) {
    fail(field, "missing");
    return nullptr;
  }
  if (!value->is_object()) {
    fail_type(field, "an object", *value);
    return nullptr;
  }
  return value;
}

const json::Value* RowReader::optional_object(std::string_view field) {
  const json::Value* value = member(field, true);
  if (m_error || !value) return nullptr;
  if (!value->is_object()) {
    fail_type(field, "an object", *value);
    return nullptr;
  }
  return value;
}

Provenance RowReader::provenance() {
  Provenance p;
  p.source = string("source");
  p.as_of = string("as_of");
  if (ok() && !is_as_of(p.as_of)) fail("as_of", "expected YYYY-MM or YYYY-MM-DD, found \"" + p.as_of + "\"");
  if (auto confidence = optional_string("confidence")) {
    if (auto parsed = parse_confidence(*confidence))
      p.confidence = *parsed;
    else
      fail("confidence",
           "expected one of confirmed, secondary, unofficial, unconfirmed; found \"" + *confidence + "\"");
  }
  p.note = optional_string("note").value_or("");
  return p;
}

Result<void> RowReader::finish() {
  if (m_error) return std::unexpected(*m_error);
  for (const auto& [key, value] : m_object.members()) {
    if (std::find(m_read.begin(), m_read.end(), key) != m_read.end()) continue;
    std::string message = where() + ": unknown field \"" + key + "\"";
    if (auto close = closest_match(key, m_read)) message += " (did you mean \"" + *close + "\"?)";
    return make_error(ErrorCode::parse_error, message);
  }
  return {};
}

void RowReader::adopt(Error error) {
  if (!m_error) m_error = std::move(error);
}

const json::Value::Array* RowReader::optional_array(std::string_view field) {
  const json::Value* value = member(field, true);
  if (!value) return nullptr;
  if (!value->is_array()) {
    fail_type(field, "an array", *value);
    return nullptr;
  }
  return &value->items();
}

void read_header(RowReader& root) {
  std::int64_t schema = root.integer("schema_version");
  if (root.ok() && schema != 1)
    root.fail("schema_version", "this gpuhost reads schema 1, found " + std::to_string(schema));
  (void)root.optional_string("about");
}

std::string row_location(const std::string& location, std::string_view table, std::size_t index) {
  return location + ": " + std::string(table) + "[" + std::to_string(index) + "]";
}

std::vector<Fact> read_facts(RowReader& root, const std::string& location) {
  std::vector<Fact> facts;
  const auto* items = root.optional_array("facts");
  if (!items) return facts;
  std::vector<std::string> ids;
  for (std::size_t i = 0; i < items->size(); ++i) {
    RowReader row((*items)[i], row_location(location, "facts", i));
    Fact fact;
    fact.id = row.string("id");
    row.set_key("id " + fact.id);
    fact.value = row.optional_string("value").value_or("");
    fact.text = row.string("text");
    fact.provenance = row.provenance();
    if (auto done = row.finish(); !done) {
      root.adopt(done.error());
      return {};
    }
    ids.push_back(fact.id);
    facts.push_back(std::move(fact));
  }
  check_duplicates(root, "facts", ids);
  return facts;
}

void check_duplicates(RowReader& root, std::string_view table, const std::vector<std::string>& keys) {
  std::set<std::string> seen;
  for (const auto& key : keys) {
    if (!seen.insert(key).second) {
      root.fail(table, "duplicate row \"" + key + "\"");
      return;
    }
  }
}

}  // namespace gpuhost::knowledge
