#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuhost {

[[nodiscard]] std::string_view trim(std::string_view s);
[[nodiscard]] std::vector<std::string> split(std::string_view s, char sep);
// Splits on runs of whitespace, dropping empty fields.
[[nodiscard]] std::vector<std::string> split_whitespace(std::string_view s);
[[nodiscard]] std::vector<std::string> split_lines(std::string_view s);
[[nodiscard]] std::string join(const std::vector<std::string>& parts, std::string_view sep);
[[nodiscard]] std::string to_lower(std::string_view s);
[[nodiscard]] bool contains_icase(std::string_view haystack, std::string_view needle);
[[nodiscard]] bool iequals(std::string_view a, std::string_view b);
[[nodiscard]] std::string replace_all(std::string s, std::string_view from, std::string_view to);

// Parses a whole string as an integer / double; nullopt on any junk.
[[nodiscard]] std::optional<long long> parse_int(std::string_view s, int base = 10);
[[nodiscard]] std::optional<double> parse_double(std::string_view s);

// Edit distance (optimal string alignment: a swap of two neighbours is one edit), for "did you mean".
[[nodiscard]] std::size_t edit_distance(std::string_view a, std::string_view b);
// The candidate closest to `word` if it is close enough to be a plausible typo, else nullopt.
[[nodiscard]] std::optional<std::string> closest_match(std::string_view word,
                                                       const std::vector<std::string>& candidates);

// "12.3 GiB" style sizes (binary units).
[[nodiscard]] std::string format_bytes(double bytes);

// `digits` random lowercase hex digits from std::random_device: names that must not collide
// (run tokens, probe objects), never secrets.
[[nodiscard]] std::string random_hex(std::size_t digits);

// Appends the UTF-8 encoding of `code_point` (REQUIRES: at most U+10FFFF, not a surrogate).
void append_utf8(std::string& out, std::uint32_t code_point);

}  // namespace gpuhost
