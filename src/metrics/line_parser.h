#pragma once
// Training scalars from the lines a trainer prints, with no change to the trainer: `key=value`,
// `key: value`, Hugging Face Trainer's dict lines, nanoGPT's `iter N: loss x, time y ms`, and
// tqdm / Lightning progress bars. No regular expressions: this runs on every output line.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "metrics/point.h"

namespace gpuhost::metrics {

// Splits a byte stream, fed in chunks of any size, into lines. A line ends at `\n`, `\r\n` or a
// bare `\r` (tqdm redraws its bar after a `\r`), even when the terminator is split across chunks.
// ANSI escape sequences (colours, cursor moves) are removed; empty lines are not reported. A line
// longer than `max_line_bytes` is dropped whole and counted, so a 10 MB line or binary garbage
// never holds more than `max_line_bytes` of memory. Move-only state; not thread-safe.
class LineSplitter {
 public:
  static constexpr std::size_t k_default_max_line_bytes = 16 * 1024;
  explicit LineSplitter(std::size_t max_line_bytes = k_default_max_line_bytes);

  // Appends each line that `chunk` completes to `lines`.
  void feed(std::string_view chunk, std::vector<std::string>& lines);
  // End of stream: the unterminated rest, if any, becomes a last line.
  void finish(std::vector<std::string>& lines);

  [[nodiscard]] std::uint64_t lines() const { return m_lines; }
  [[nodiscard]] std::uint64_t overlong_lines_dropped() const { return m_overlong; }

 private:
  void complete(std::vector<std::string>& lines);

  std::size_t m_max_line_bytes;
  std::string m_partial;
  bool m_after_cr = false;    // the last byte seen was `\r`: a following `\n` ends nothing
  bool m_discarding = false;  // inside an over-long line, until its terminator
  std::uint64_t m_lines = 0;
  std::uint64_t m_overlong = 0;
};

// `text` without ANSI escape sequences: CSI (`ESC [ ... final`), OSC (`ESC ] ... BEL` or
// `ESC \`) and `ESC [intermediates] final` (`ESC ( B`); other control bytes but tab become spaces.
[[nodiscard]] std::string strip_ansi(std::string_view text);

struct ParsedLine {
  std::vector<Point> points;  // wall_time 0 (the caller knows when the line arrived)
  // The line is a progress bar (tqdm / Lightning: a `N%|` bar or an `it/s` / `s/it` rate).
  bool progress_bar = false;
};

// The training scalars in one line (terminator and ANSI already removed), at most
// `k_max_points_per_line` of them. What counts:
//   * `key=value` and `key = value` (HF's `eval_loss = 0.69`), `key: value` (a space after the
//     colon, so `cuda:0` and `localhost:8080` are not metrics), and quoted keys, `'loss': 0.5`
//     (HF Trainer's Python dict repr) and `"loss": 0.5`;
//   * a field made only of `key value` pairs (`step 12 loss 0.45 lr 3e-4`, hand-written loops),
//     or `key value` pairs when each fills a field delimited by `,` `;` `|` `: ` or the line ends,
//     and the line has at least two pairs in all, one of them a step, `epoch` or `*loss*` key:
//     nanoGPT's `iter 100: loss 2.3456, time 12.3ms`, `step 500: train loss 2.1, val loss 2.2`
//     (a two-word key becomes `train_loss`), but not "CUDA 12.1, cuDNN 8902";
//   * a tqdm rate `15.0it/s` or `2.1s/it`: the point `iterations_per_second`.
// A key starts with a letter ([A-Za-z][A-Za-z0-9_./@-]*, at most 100 bytes) and begins the line
// or follows a space or one of `,;|[{(`; a value is one whole token: an integer or decimal
// number, `1e-5`, `nan`, `inf`, `-inf` (any case), optionally wrapped as `tensor(x)` or
// `np.float64(x)`, optionally followed by a unit, converted to base units and named for it:
// `ms` and `s` give `<key>_seconds` in seconds, `%` gives `<key>_percent` (kept in percent, as
// the user saw it). Dates, times (12:30:45), versions (1.2.3), hex (0x1f), paths and URLs are not
// whole number tokens, so they give nothing. The keys `step`, `global_step`, `iter`, `iteration`
// (any case) with an integer value set Point::step of the line's other points instead of being
// points; `v_num`, `pid`, `port`, `rank`, `local_rank`, `world_size`, `seed` and `version` are
// identifiers, not metrics, and are ignored. Pure function; thread-safe.
[[nodiscard]] ParsedLine parse_line(std::string_view line);
inline constexpr std::size_t k_max_points_per_line = 64;

// Parses a whole token as a number as parse_line does (no unit): "-1.5e-3", "nan", "inf".
// False for anything else ("1.2.3", "0x1f", "12:30", "").
[[nodiscard]] bool parse_number_token(std::string_view token, double& value);

// One output stream of the trainer (stdout or stderr; one object each): splits chunks into lines
// and parses them. A progress-bar redraw yields only the values that changed since the previous
// redraw of this stream (a bar redrawn ten times a second with the same loss gives one point).
// Not thread-safe: one thread feeds it.
class OutputStreamParser {
 public:
  explicit OutputStreamParser(std::size_t max_line_bytes = LineSplitter::k_default_max_line_bytes);

  // Appends the points of every line `chunk` completes to `out`.
  void feed(std::string_view chunk, std::vector<Point>& out);
  // End of stream: parses the unterminated rest.
  void finish(std::vector<Point>& out);

  [[nodiscard]] std::uint64_t lines() const { return m_splitter.lines(); }
  [[nodiscard]] std::uint64_t overlong_lines_dropped() const { return m_splitter.overlong_lines_dropped(); }

 private:
  void parse_lines(std::vector<Point>& out);

  LineSplitter m_splitter;
  std::vector<std::string> m_lines;                    // reused buffer
  std::unordered_map<std::string, double> m_last_bar;  // name -> value at the last redraw
};

}  // namespace gpuhost::metrics
