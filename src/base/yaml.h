#pragma once
// A reader for the YAML that configuration files are written in (block mappings and sequences,
// flow sequences and mappings on one line, plain and quoted scalars, comments), into the same
// json::Value tree the rest of gpuhost reads. What it does not take it refuses with the line and
// column, never guesses: anchors and aliases, tags, block scalars (| and >), several documents,
// tabs in indentation, duplicate keys, plain scalars over several lines.
//
// Scalars resolve as YAML 1.2's core schema does for the forms configs use: true/false (any case
// of those words), null/~/nothing, decimal integers; anything else, and anything quoted, is a
// string. So `"1g.10gb": 2` is a string key with the integer 2, and `devices: all` the string "all".

#include <string_view>

#include "base/error.h"
#include "base/json.h"

namespace gpuhost::yaml {

// parse_error with "line L, column C: what" on anything outside the subset above.
[[nodiscard]] Result<json::Value> parse(std::string_view text);

// Writes a tree of objects, arrays and scalars as block YAML that parse() reads back equal:
// two-space indent, sequences of scalars in flow style ([0, 1]), empty objects as {}; strings
// that would read as another type, or hold YAML's indicator characters, double-quoted.
[[nodiscard]] std::string dump(const json::Value& value);

}  // namespace gpuhost::yaml
