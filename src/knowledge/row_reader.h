#pragma once

// Validated reads of sourced data files (rows with "source" and "as_of"): used by knowledge/ and
// by capabilities that keep sourced tables of their own (plan/ models and instances).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "base/version.h"
#include "knowledge/common.h"
#include "knowledge/compute_capability.h"

namespace gpuhost::knowledge {

// Reads one JSON object field by field and remembers the first problem. After a problem every
// accessor returns a default value, so a parser reads all the fields it wants and then calls
// finish() once. Fields that were never asked for are reported by finish() as unknown, which
// catches misspelt keys in user override files.
// `object` must outlive the reader.
class RowReader {
 public:
  // `location` names the object in messages: "/home/u/cuda_drivers.json: toolkits[3]".
  RowReader(const json::Value& object, std::string location);

  // Adds the row's key to later messages: "toolkits[3] (cuda 12.4.0)".
  void set_key(std::string key);

  [[nodiscard]] std::string string(std::string_view field);  // required, non-empty
  [[nodiscard]] std::optional<std::string> optional_string(std::string_view field);
  [[nodiscard]] Version version(std::string_view field);  // required, the whole text a version
  [[nodiscard]] std::optional<Version> optional_version(std::string_view field);
  [[nodiscard]] std::int64_t integer(std::string_view field);
  [[nodiscard]] std::optional<std::int64_t> optional_integer(std::string_view field);
  [[nodiscard]] std::optional<double> optional_number(std::string_view field);
  [[nodiscard]] bool boolean(std::string_view field);
  [[nodiscard]] ComputeCapability compute_capability(std::string_view field);
  [[nodiscard]] std::optional<ComputeCapability> optional_compute_capability(std::string_view field);
  // A required, non-empty array of non-empty strings.
  [[nodiscard]] std::vector<std::string> string_list(std::string_view field);
  // Absent or null gives an empty list.
  [[nodiscard]] std::vector<std::string> optional_string_list(std::string_view field);
  // A required array (possibly empty); nullptr after an error. Points into the object.
  [[nodiscard]] const json::Value::Array* array(std::string_view field);
  // An optional array: nullptr when absent, null or after an error.
  [[nodiscard]] const json::Value::Array* optional_array(std::string_view field);
  // A required nested object; nullptr after an error. Points into the object.
  [[nodiscard]] const json::Value* object(std::string_view field);
  // An optional nested object: nullptr when absent, null or after an error.
  [[nodiscard]] const json::Value* optional_object(std::string_view field);

  // "source" (required), "as_of" (required, YYYY-MM or YYYY-MM-DD), "confidence" and "note".
  [[nodiscard]] Provenance provenance();

  // Records a problem with a field (the first one wins).
  void fail(std::string_view field, std::string problem);
  // Records a problem found by a nested reader (the first one wins).
  void adopt(Error error);
  [[nodiscard]] bool ok() const { return !m_error.has_value(); }
  // The location prefix used in messages, including the key when set.
  [[nodiscard]] std::string where() const;

  // The first problem, or an unknown-field error, or success.
  [[nodiscard]] Result<void> finish();

 private:
  // The member, marked as read; nullptr when absent (a null value counts as absent when
  // `null_is_absent`).
  const json::Value* member(std::string_view field, bool null_is_absent);
  void fail_type(std::string_view field, const char* expected, const json::Value& found);

  const json::Value& m_object;
  std::string m_location;
  std::string m_key;
  std::vector<std::string> m_read;
  std::optional<Error> m_error;
};

// Parses a whole string as a version: "535.104.05" yes, "12.x" or "abc" no.
[[nodiscard]] std::optional<Version> parse_exact_version(std::string_view text);

// Reads "schema_version" (must be 1) and "about" (optional) of a data file's top-level object.
void read_header(RowReader& root);

// Reads the top-level "facts" array (optional) of a data file; problems go to `root`.
[[nodiscard]] std::vector<Fact> read_facts(RowReader& root, const std::string& location);

// "<location>: <table>[<index>]".
[[nodiscard]] std::string row_location(const std::string& location, std::string_view table,
                                       std::size_t index);

// Adds an error for the first duplicate in `keys` ("duplicate <what> \"<key>\"").
void check_duplicates(RowReader& root, std::string_view table, const std::vector<std::string>& keys);

}  // namespace gpuhost::knowledge
