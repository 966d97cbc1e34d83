#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/version.h"

namespace gpuhost::knowledge {

// The host OS a compatibility answer is for. WSL2 counts as linux.
enum class Os { linux, windows };

[[nodiscard]] const char* os_name(Os os);  // "linux" / "windows"
[[nodiscard]] std::optional<Os> parse_os(std::string_view text);

// How firmly a row is established. `unofficial`: not published by the vendor (A10G's compute
// capability); `unconfirmed`: a future-dated or single-source row kept for completeness.
enum class Confidence { confirmed, secondary, unofficial, unconfirmed };

[[nodiscard]] const char* confidence_name(Confidence confidence);
[[nodiscard]] std::optional<Confidence> parse_confidence(std::string_view text);

// Where a row came from, for a report to cite.
struct Provenance {
  std::string source;  // URL or document name, as written in the data file
  std::string as_of;   // "2026-11" or "2026-11-30": when the source was read
  Confidence confidence = Confidence::confirmed;
  std::string note;  // empty when the file gives none
};

// A sourced statement that is not a table row: a rule, a message text, a command. `value` holds
// the machine-usable part where there is one ("2.10", "525.60.13", a command line).
struct Fact {
  std::string id;
  std::string value;
  std::string text;
  Provenance provenance;
};

// The fact with this id, or nullptr.
[[nodiscard]] const Fact* find_fact(const std::vector<Fact>& facts, std::string_view id);

// major.minor of a version ("3.11.4" -> "3.11"), for comparing Python and CUDA versions.
[[nodiscard]] Version major_minor(const Version& version);

}  // namespace gpuhost::knowledge
