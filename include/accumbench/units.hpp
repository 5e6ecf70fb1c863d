// Units and text: byte counts in and out, numbers in words, and plain-text tables padded by
// terminal columns. The leaf of the project (docs/ARCHITECTURE.md, "Layers"): no LibTorch, no
// other accumbench header, so every layer may use it, and messages, plans and reports print
// numbers the same way.
//
//   format_bytes(3 * (int64_t{1} << 30));   // "3.00 GiB"
//   parse_bytes("16GiB");                    // 17179869184; UserError on "16 parsecs"
//   text::format_count(342737);              // "342,737"
//   text::TextTable t({{"split", text::Align::kLeft}, {"step s", text::Align::kRight}});
//   t.add_row({"8×8", "0.191"});  t.render(std::cout);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace accumbench {

// Human-readable byte counts in GiB/MiB/KiB (1024-based): "2.98 GiB", "512.0 MiB".
std::string format_bytes(int64_t bytes);
// Parses "16GiB", "16 GiB", "512MiB", "16GB" (1000-based), "1.5G" (1024-based), plain bytes.
// Throws UserError with the accepted forms on anything else.
int64_t parse_bytes(const std::string& text);
// --memory-limit: parse_bytes, but a unit is required ("24" would be 24 bytes, never meant);
// "24B" still says bytes. UserError naming the fix.
int64_t parse_memory_limit(const std::string& text);

namespace text {

// Columns on a terminal, not bytes: UTF-8 continuation bytes take no column ("×", "±", "—").
std::size_t display_width(const std::string& s);

enum class Align { kLeft, kRight };
// `s` padded with spaces to `width` terminal columns (never cut).
std::string pad(const std::string& s, std::size_t width, Align align = Align::kLeft);

// Decimals needed to show `value` with `digits` significant digits (0 for |value| >= 10^digits).
int decimals_for_significant(double value, int digits);
// Fixed notation with `decimals` decimals; "-" for NaN/inf.
std::string format_fixed(double value, int decimals);
// format_fixed rounded away from the value's side of an interval (`up`: towards +inf, else towards
// -inf), so that a printed bound holds the computed one; a value already on a last digit (1.0, or
// within 1e-9 of one) stays as it is.
std::string format_fixed_outward(double value, int decimals, bool up);
// `digits` significant digits in fixed notation: 0.19134 → "0.191", 1.4712 → "1.47", 123.4 → "123".
std::string format_significant(double value, int digits);
// Three significant digits in s, ms, µs or ns, whichever keeps the number at or above 1: "4.91 ms";
// below a nanosecond, seconds in scientific notation ("1e-303 s").
std::string format_duration(double seconds);
// Integer with thousands separators: 342737 → "342,737"; -1234 → "-1,234".
std::string format_count(int64_t value);
// Rounds, then format_count; "-" for NaN/inf.
std::string format_count(double value);
// 0.234 → "23 %" (decimals = 0) or "23.4 %" (decimals = 1); "-" for NaN.
std::string format_percent(double fraction, int decimals);
// 2.104 → "2.10×" (decimals = 2); "-" for NaN/inf.
std::string format_ratio(double ratio, int decimals);
// Shortest text that reads back to the same double (std::to_chars); "" for NaN and ±inf (an
// interval without a bound: the JSON writes null there, and CSV readers do not take "inf").
std::string format_exact(double value);
// As printf's %g with the fewest significant digits, 6 or more, that read back to the same
// double: 0.0002 → "0.0002" (format_exact: "2e-04"), 2e-5 → "2e-05", 1.23456789e-4 in full.
std::string format_number(double value);
// The double a text holds, as format_number wrote it: strtod's reading, a subnormal included (which
// std::stod refuses); std::invalid_argument for text that is not one number.
double number_from_text(const std::string& text);

// A small count in words: 2 → "two" (0 to 8), digits beyond: 12 → "12".
std::string number_word(std::size_t n);
// Items as a sentence lists them: "a", "a and b", "a, b and c"; "" for none.
std::string and_list(const std::vector<std::string>& items);
// ASCII letters in upper case ("passive" -> "PASSIVE"), for values read in any case.
std::string upper(std::string text);

// A value from outside as a message quotes it: in double quotes, cut to `max_chars` characters
// with "…" when longer, so a 500,000-character argument does not flood the terminal, and its
// control bytes written as C escapes (\n, \t, \x1b), so that the message stays one line.
std::string quoted(const std::string& value, std::size_t max_chars = 80);
// Control bytes (below 0x20, and 0x7F) as C escapes; every other byte as it is.
std::string escaped_controls(const std::string& text);
// The same cut without the quotes.
std::string shortened(const std::string& value, std::size_t max_chars = 80);
// A JSON parser's message as a sentence quotes it: nlohmann's "[json.exception.parse_error.101] "
// tag dropped, and every byte outside printable ASCII (what "last read" echoes of a binary or
// badly encoded file) written as \xNN, so no raw byte reaches the terminal.
std::string json_error_text(const std::string& what);

struct Column {
  std::string header;
  Align align = Align::kRight;
};

// A plain-text table whose columns are padded to the widest cell (by display width). The last
// column is not padded, so lines carry no trailing spaces. Two spaces separate columns.
class TextTable {
 public:
  explicit TextTable(std::vector<Column> columns) : columns_(std::move(columns)) {}
  // `prefix`/`suffix` wrap the whole rendered line without counting toward widths (ANSI colour).
  void add_row(std::vector<std::string> cells, std::string prefix = "", std::string suffix = "");
  void render(std::ostream& out) const;

 private:
  struct Row {
    std::vector<std::string> cells;
    std::string prefix;
    std::string suffix;
  };
  std::string render_cells(const std::vector<std::string>& cells,
                           const std::vector<std::size_t>& widths) const;
  std::vector<Column> columns_;
  std::vector<Row> rows_;
};

}  // namespace text

// The whole content of the file at `path`; nullptr when it cannot be opened or is a directory.
// A pipe can be read only once (`--lengths <(python lengths.py)`, `--tokens /dev/stdin`), and a
// command reads its data several times (the plan, the context block, the batches): the first
// read of anything but a regular file keeps its bytes for the rest of the process, and every
// later read of that path returns them. Regular files are read afresh each time.
std::shared_ptr<const std::string> read_file_bytes(const std::string& path);
// Why read_file_bytes gave nullptr, for a message: "does not exist", "is a directory" or "cannot
// be read".
std::string why_unreadable(const std::string& path);

// FNV-1a 64-bit hash of a file's bytes (read_file_bytes), as 16 hex digits; "" when it cannot be
// read. Identifies a config.json, lengths or token file in a result's context, so --resume can
// tell an edited file. A regular file above 256 MiB (a token shard) is sampled: its size and 256
// blocks of 64 KiB spread over it.
std::string file_fingerprint(const std::string& path);

// Throws UserError unless `path` names a regular file that can be opened for reading: a
// directory, a FIFO or a device gets "is a directory" and the like. `what` is the option that
// named it ("--tokens", "--hf-config").
void require_readable_file(const std::string& path, const std::string& what);
// Throws UserError when the regular file at `path` is larger than `limit` bytes, which a file of
// its kind never is (a config.json is kilobytes; helper-104: a weights file given as --hf-config
// was read whole). `what`: the option ("--hf-config"); `kind`: "a Hugging Face config.json". Other
// kinds of path (a pipe) are left to their reader.
// accumbench's cache directory: $ACCUMBENCH_CACHE_DIR, else $XDG_CACHE_HOME/accumbench, else
// $HOME/.cache/accumbench (./.cache/accumbench without a HOME). Not created here.
std::string cache_directory();

// Holds an advisory lock on the file a long run writes again and again (a sweep's --json), for
// the process's life, so that a second accumbench writing the same file is refused rather than
// each replacing the other's saves (helper-104: both said "wrote same.json", one's results lost).
// The lock is a file in cache_directory()/locks named by the path's canonical form; where that
// cannot be made (a read-only cache) nothing is locked. UserError naming the other process's pid
// when it holds the lock. `option`: "--json".
void lock_written_file(const std::string& path, const std::string& option);

// The name of a temporary file beside `path`: "<path>.<tag>.tmp", or, where that name would pass
// the file system's 255 bytes of a name (a legal long name of the user's), ".accumbench-<tag>.tmp"
// in the same directory (helper-104: a 250-character --json name was refused).
std::string temporary_beside(const std::string& path, const std::string& tag);
void require_file_size_at_most(const std::string& path, int64_t limit, const std::string& what, const std::string& kind);

// Throws UserError unless a file can be written at `path` (write_file_atomically: a temporary
// beside it, renamed over it): the directory exists and is writable, and `path` is not a
// directory, FIFO or device. Checked before a sweep measures anything, so that a mistyped
// --json does not surface only when the first result is saved. `what`: the option ("--json").
void require_writable_file(const std::string& path, const std::string& what);
// The file a write to `path` lands in: `path`, or where its chain of symbolic links ends (the
// shell's `>` writes through a link); UserError for a loop of links.
std::string written_path(const std::string& path);

// Throws UserError when two of `named` (option, path; empty paths are skipped) are the same file,
// by its canonical path or, where both exist, its inode: a report written over the sweep's JSON,
// or over another report, would silently replace it.
void require_distinct_files(const std::vector<std::pair<std::string, std::string>>& named);

}  // namespace accumbench
