// Byte counts in and out, numbers in words, padded plain-text tables (units.hpp).
#include "accumbench/units.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>

#include "accumbench/error.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace accumbench {

namespace {

constexpr double kKiB = 1024.0;
constexpr double kMiB = kKiB * 1024.0;
constexpr double kGiB = kMiB * 1024.0;
constexpr double kTiB = kGiB * 1024.0;

}  // namespace

std::string format_bytes(int64_t bytes) {
  if (bytes < 0) {
    // Negative byte counts appear as differences (headroom, deltas); keep the sign readable.
    const uint64_t magnitude = 0 - static_cast<uint64_t>(bytes);
    return "-" + format_bytes(static_cast<int64_t>(std::min<uint64_t>(
                     magnitude, static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))));
  }
  const double b = static_cast<double>(bytes);
  char buffer[64];
  // GiB with two decimals separates devices (79.10 GiB vs 79.65 GiB); smaller units need one.
  if (b >= kTiB) {
    std::snprintf(buffer, sizeof buffer, "%.2f TiB", b / kTiB);
  } else if (b >= kGiB) {
    std::snprintf(buffer, sizeof buffer, "%.2f GiB", b / kGiB);
  } else if (b >= kMiB) {
    std::snprintf(buffer, sizeof buffer, "%.1f MiB", b / kMiB);
  } else if (b >= kKiB) {
    std::snprintf(buffer, sizeof buffer, "%.1f KiB", b / kKiB);
  } else {
    std::snprintf(buffer, sizeof buffer, "%lld B", static_cast<long long>(bytes));
  }
  return buffer;
}

int64_t parse_bytes(const std::string& text) {
  const auto fail = [&text]() -> UserError {
    return UserError("cannot read " + text::quoted(text, 60) +
                     " as a byte count; write a number with a unit, e.g. 16GiB, "
                     "512MiB, 1.5G (1024-based), 16GB (1000-based) or 17179869184B (bytes)");
  };

  std::size_t pos = 0;
  const auto skip_spaces = [&] {
    while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
  };
  skip_spaces();
  const std::size_t number_begin = pos;
  bool digits = false;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
    ++pos;
    digits = true;
  }
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
      ++pos;
      digits = true;
    }
  }
  if (!digits) throw fail();
  // strtod on a validated [digits][.digits] span: no sign, exponent, hex or inf can sneak in.
  const double number = std::strtod(text.substr(number_begin, pos - number_begin).c_str(), nullptr);

  skip_spaces();
  std::string unit;
  while (pos < text.size() && std::isalpha(static_cast<unsigned char>(text[pos]))) {
    unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[pos])));
    ++pos;
  }
  skip_spaces();
  if (pos != text.size()) throw fail();

  // Units are case-insensitive. "KiB/MiB/GiB/TiB" and the bare letters are 1024-based (what
  // nvidia-smi and torch.cuda.memory_* print); "KB/MB/GB/TB" are SI, 1000-based.
  struct Unit {
    const char* name;
    double scale;
  };
  static const Unit kUnits[] = {
      {"", 1.0},        {"b", 1.0},
      {"k", kKiB},      {"kib", kKiB},    {"kb", 1e3},
      {"m", kMiB},      {"mib", kMiB},    {"mb", 1e6},
      {"g", kGiB},      {"gib", kGiB},    {"gb", 1e9},
      {"t", kTiB},      {"tib", kTiB},    {"tb", 1e12},
  };
  const Unit* found = nullptr;
  for (const Unit& u : kUnits) {
    if (unit == u.name) found = &u;
  }
  // Said as what it is (helper-95: 1PiB and 10^20 GiB were "cannot read ... as a byte count").
  if (found == nullptr) {
    if (unit == "p" || unit == "pib" || unit == "pb" || unit == "e" || unit == "eib" || unit == "eb") {
      throw UserError(text::quoted(text, 60) + " is past the largest unit taken, TiB (or TB); no device has that much "
                      "memory: write the size in TiB, GiB or bytes");
    }
    throw fail();
  }

  const double bytes = std::round(number * found->scale);
  // 2^63 is exactly representable; anything at or above it does not fit in int64_t.
  if (!(bytes < 9223372036854775808.0)) {
    throw UserError(text::quoted(text, 60) + " is more bytes than a 64-bit count holds (8 EiB); write a size in "
                    "GiB or TiB");
  }
  return static_cast<int64_t>(bytes);
}

int64_t parse_memory_limit(const std::string& text) {
  const bool has_unit = std::any_of(text.begin(), text.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); });
  const int64_t bytes = parse_bytes(text);  // garbage is refused with the accepted forms first
  if (!has_unit && bytes == 0) {  // "0GiB" would only be refused next, as leaving nothing (helper-117)
    throw UserError("--memory-limit " + text::quoted(text, 24) + " leaves no memory for any split; give the memory the "
                    "job may use, with its unit (e.g. 24GiB)");
  }
  if (!has_unit && text.size() > 24) {  // the value once, cut short, not four times whole
    throw UserError("--memory-limit " + text::quoted(text, 24) + " has no unit and would mean that many bytes; write "
                    "the unit: GiB (1024-based), GB (1000-based) or B for bytes");
  }
  if (!has_unit) {
    throw UserError("--memory-limit " + text + " has no unit and would mean " + text +
                    " bytes; write the unit: " + text + "GiB (1024-based), " + text + "GB (1000-based) or " + text +
                    "B for bytes");
  }
  return bytes;
}

namespace text {

std::string number_word(std::size_t n) {
  static const char* const kWords[] = {"none", "one", "two", "three", "four", "five", "six", "seven", "eight"};
  return n < 9 ? std::string(kWords[n]) : std::to_string(n);
}

std::string upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

std::string and_list(const std::vector<std::string>& items) {
  std::string words;
  for (size_t i = 0; i < items.size(); ++i) words += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  return words;
}

std::size_t display_width(const std::string& s) {
  std::size_t width = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++width;  // count lead bytes only
  }
  return width;
}

int decimals_for_significant(double value, int digits) {
  if (!std::isfinite(value) || value == 0.0) return std::max(0, digits - 1);
  const double magnitude = std::fabs(value);
  const int exponent = static_cast<int>(std::floor(std::log10(magnitude)));
  int decimals = std::max(0, digits - 1 - exponent);
  // 0.9996 at 3 digits rounds up to 1.00, not 1.000: one decade more, one decimal fewer.
  const double scale = std::pow(10.0, decimals);
  if (decimals > 0 && std::round(magnitude * scale) / scale >= std::pow(10.0, exponent + 1)) {
    --decimals;
  }
  return decimals;
}

std::string format_fixed_outward(double value, int decimals, bool up) {
  const double scale = std::pow(10.0, decimals);
  const double units = value * scale;
  const double nearest = std::round(units);
  const double cut = std::abs(units - nearest) < 1e-9 ? nearest : up ? std::ceil(units) : std::floor(units);
  return format_fixed(cut / scale, decimals);
}

std::string format_fixed(double value, int decimals) {
  if (!std::isfinite(value)) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  const double magnitude = std::abs(seconds);
  // Each unit from where three significant digits round up to 1.00 of it: 0.000001 ms, which is
  // 9.99999…e-10 s in binary, reads "1.00 ns", not "1e-09 s" or "1000 ps".
  constexpr double kRoundsUp = 0.9995;
  if (magnitude >= kRoundsUp || magnitude == 0.0) return format_significant(seconds, 3) + " s";
  if (magnitude >= kRoundsUp * 1e-3) return format_significant(seconds * 1e3, 3) + " ms";
  if (magnitude >= kRoundsUp * 1e-6) return format_significant(seconds * 1e6, 3) + " \u00b5s";
  if (magnitude >= kRoundsUp * 1e-9) return format_significant(seconds * 1e9, 3) + " ns";
  // Below a nanosecond (a value given by hand, e.g. 1e-300 ms): three significant digits in
  // scientific notation, not hundreds of zeros.
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g s", seconds);
  return buffer;
}

std::string format_significant(double value, int digits) {
  return format_fixed(value, decimals_for_significant(value, digits));
}

std::string format_count(int64_t value) {
  const bool negative = value < 0;
  uint64_t magnitude = negative ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
  std::string digits = std::to_string(magnitude);
  std::string out;
  const std::size_t n = digits.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0 && (n - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return negative ? "-" + out : out;
}

std::string format_count(double value) {
  if (!std::isfinite(value)) return "-";
  return format_count(static_cast<int64_t>(std::llround(value)));
}

std::string format_percent(double fraction, int decimals) {
  if (!std::isfinite(fraction)) return "-";
  return format_fixed(fraction * 100.0, decimals) + " %";
}

std::string format_ratio(double ratio, int decimals) {
  if (!std::isfinite(ratio)) return "-";
  // A ratio the decimals would round to 0 (2.8 MiB against 2.29 GiB: 0.0012) keeps two digits.
  if (ratio > 0 && ratio < 0.5 * std::pow(10.0, -decimals)) return format_significant(ratio, 2) + "\xC3\x97";
  return format_fixed(ratio, decimals) + "\xC3\x97";  // ×
}

std::string format_exact(double value) {
  if (!std::isfinite(value)) return "";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

std::string format_number(double value) {
  char buffer[64];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof buffer, "%.*g", digits, value);
    if (!std::isfinite(value) || std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

double number_from_text(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size()) throw std::invalid_argument("not a number: " + text);
  return value;
}

std::string pad(const std::string& s, std::size_t width, Align align) {
  const std::size_t columns = display_width(s);
  const std::string fill(columns < width ? width - columns : 0, ' ');
  return align == Align::kRight ? fill + s : s + fill;
}

void TextTable::add_row(std::vector<std::string> cells, std::string prefix, std::string suffix) {
  cells.resize(columns_.size());
  rows_.push_back({std::move(cells), std::move(prefix), std::move(suffix)});
}

std::string TextTable::render_cells(const std::vector<std::string>& cells,
                                    const std::vector<std::size_t>& widths) const {
  std::string line;
  for (std::size_t i = 0; i < columns_.size(); ++i) {
    if (i > 0) line += "  ";
    const std::size_t pad = widths[i] - display_width(cells[i]);
    const bool last = i + 1 == columns_.size();
    if (columns_[i].align == Align::kRight) {
      line += std::string(pad, ' ') + cells[i];
    } else {
      line += cells[i];
      if (!last) line += std::string(pad, ' ');
    }
  }
  return line;
}

void TextTable::render(std::ostream& out) const {
  std::vector<std::size_t> widths(columns_.size(), 0);
  std::vector<std::string> header;
  for (std::size_t i = 0; i < columns_.size(); ++i) {
    header.push_back(columns_[i].header);
    widths[i] = display_width(columns_[i].header);
  }
  for (const Row& row : rows_) {
    for (std::size_t i = 0; i < columns_.size(); ++i) {
      widths[i] = std::max(widths[i], display_width(row.cells[i]));
    }
  }
  out << render_cells(header, widths) << '\n';
  for (const Row& row : rows_) {
    out << row.prefix << render_cells(row.cells, widths) << row.suffix << '\n';
  }
}

std::string shortened(const std::string& value, std::size_t max_chars) {
  if (display_width(value) <= max_chars) return value;
  // Cut at a character boundary: skip back over UTF-8 continuation bytes.
  std::size_t cut = 0, chars = 0;
  while (cut < value.size() && chars < max_chars) {
    ++cut;
    while (cut < value.size() && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) ++cut;
    ++chars;
  }
  return value.substr(0, cut) + "\u2026 (" + std::to_string(value.size()) + " bytes)";
}

std::string json_error_text(const std::string& what) {
  std::string text = what;
  if (text.rfind("[json.exception.", 0) == 0) {
    const auto tag_end = text.find("] ");
    if (tag_end != std::string::npos) text = text.substr(tag_end + 2);
  }
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f) {
      out += c;
    } else {
      static const char* const kHex = "0123456789abcdef";
      out += std::string("\\x") + kHex[byte >> 4] + kHex[byte & 15];
    }
  }
  return out;
}

std::string escaped_controls(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte != 0x7F) {
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      static const char* const kHex = "0123456789abcdef";
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xF];
    }
  }
  return out;
}

std::string quoted(const std::string& value, std::size_t max_chars) {
  return "\"" + escaped_controls(shortened(value, max_chars)) + "\"";
}

}  // namespace text

std::shared_ptr<const std::string> read_file_bytes(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const std::string>> kept;  // pipes read so far
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto found = kept.find(path); found != kept.end()) return found->second;
  struct stat info {};
  // A device (/dev/zero, /dev/urandom) never ends: read whole, it would take every byte of memory.
  if (::stat(path.c_str(), &info) != 0 || S_ISDIR(info.st_mode) || S_ISCHR(info.st_mode) || S_ISBLK(info.st_mode))
    return nullptr;
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return nullptr;
  auto bytes = std::make_shared<std::string>();
  char buffer[65536];
  std::size_t n = 0;
  try {
    if (S_ISREG(info.st_mode)) bytes->reserve(static_cast<std::size_t>(info.st_size));
    while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) bytes->append(buffer, n);
  } catch (const std::bad_alloc&) {  // helper-104: "internal error: std::bad_alloc", exit 1
    std::fclose(file);
    throw UserError(text::quoted(path, 240) + " is larger than this process can hold in memory (" +
                    format_bytes(S_ISREG(info.st_mode) ? static_cast<int64_t>(info.st_size)
                                                       : static_cast<int64_t>(bytes->size())) +
                    " and more); give a smaller file");
  }
  std::fclose(file);
  if (!S_ISREG(info.st_mode)) kept.emplace(path, bytes);
  return bytes;
}

std::string why_unreadable(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return "does not exist";
  if (S_ISCHR(info.st_mode) || S_ISBLK(info.st_mode)) return "is a device, not a file or a pipe";
  return S_ISDIR(info.st_mode) ? "is a directory" : "cannot be read";
}

namespace {
constexpr uint64_t kFnvOffsetBasis = 14695981039346656037ull;
// FNV-1a 64-bit of `n` bytes, continued from `hash`.
uint64_t fnv1a(uint64_t hash, const char* data, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) hash = (hash ^ static_cast<unsigned char>(data[i])) * 1099511628211ull;
  return hash;
}
}  // namespace

std::string file_fingerprint(const std::string& path) {
  uint64_t hash = kFnvOffsetBasis;
  const auto add = [&hash](const char* data, std::size_t n) { hash = fnv1a(hash, data, n); };
  struct stat info {};
  constexpr int64_t kSampledAbove = int64_t{256} << 20;
  const bool regular = ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
  if (regular && info.st_size > kSampledAbove) {
    // A pretraining shard of gigabytes is sampled, not read whole before every sweep (helper-108: 73 s
    // for 20 GB): its size and 256 blocks of 64 KiB spread over it, the first and the last among
    // them. An edit that keeps the size and misses every block goes unseen.
    std::FILE* file = std::fopen(path.c_str(), "rb");
    if (file == nullptr) return "";
    const std::string size = std::to_string(info.st_size);
    add(size.data(), size.size());
    char buffer[65536];
    constexpr int kBlocks = 256;
    for (int k = 0; k < kBlocks; ++k) {
      const int64_t at = (static_cast<int64_t>(info.st_size) - int64_t{sizeof buffer}) / (kBlocks - 1) * k;
      if (::fseeko(file, static_cast<off_t>(at), SEEK_SET) != 0) break;
      add(buffer, std::fread(buffer, 1, sizeof buffer, file));
    }
    std::fclose(file);
  } else if (regular) {
    // Streamed: a token file is not held twice.
    std::FILE* file = std::fopen(path.c_str(), "rb");
    if (file == nullptr) return "";
    char buffer[65536];
    std::size_t n = 0;
    while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) add(buffer, n);
    std::fclose(file);
  } else {
    const std::shared_ptr<const std::string> bytes = read_file_bytes(path);
    if (bytes == nullptr) return "";
    add(bytes->data(), bytes->size());
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

std::string written_path(const std::string& path) {
  std::string target = path;
  std::error_code error;
  for (int hops = 0; std::filesystem::is_symlink(target, error); ++hops) {
    if (hops == 40) {
      throw UserError(text::quoted(path, 240) + " is a loop of symbolic links; give the path of a file to write");
    }
    const std::filesystem::path link = std::filesystem::read_symlink(target, error);
    if (error) break;
    target = (link.is_absolute() ? link : std::filesystem::path(target).parent_path() / link).string();
  }
  return target;
}

void require_writable_file(const std::string& named, const std::string& what) {
  const std::string shown = text::quoted(named, 240);
  // A link is written through (write_file_atomically): its target's directory must take the file.
  const std::string path = written_path(named);
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode)) throw UserError(what + " " + shown + " is a directory; give the path of a file to write");
    if (!S_ISREG(info.st_mode)) {
      throw UserError(what + " " + shown + " is not a regular file (a FIFO, socket or device), which accumbench " +
                      "would replace rather than write into; give the path of a file");
    }
  }
  const auto slash = path.find_last_of('/');
  const std::string directory = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const std::string directory_shown = text::quoted(directory, 240);
  // A name past the file system's 255 bytes can be neither created nor renamed onto; said before
  // anything runs (the temporary beside it takes a short name of its own: temporary_beside).
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.size() > 255) {
    throw UserError(what + " " + shown + " has a name of " + std::to_string(name.size()) +
                    " bytes, more than a file system takes (255); give a shorter name");
  }
  if (::stat(directory.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    throw UserError(what + " " + shown + " is in " + directory_shown +
                    ", which is not an existing directory; create it or write the file elsewhere");
  }
  if (::access(directory.c_str(), W_OK | X_OK) != 0) {
    throw UserError(what + " " + shown + " cannot be written: the directory " + directory_shown +
                    " is not writable; check its permissions or write the file elsewhere");
  }
  // access() says yes to root everywhere, and to a read-only or pseudo file system (/sys, /proc):
  // only creating a file beside it, as write_file_atomically creates its temporary, tells.
  const std::string temporary = temporary_beside(path, std::to_string(::getpid()) + "-probe");
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd >= 0) {
    ::close(fd);
    ::unlink(temporary.c_str());
  } else if (errno != EEXIST) {
    throw UserError(what + " " + shown + " cannot be written: creating a file in " + directory_shown + " fails (" +
                    std::strerror(errno) + "); write the file elsewhere");
  }
}

void require_distinct_files(const std::vector<std::pair<std::string, std::string>>& named) {
  const auto same = [](const std::string& a, const std::string& b) {
    std::error_code error;
    // Absolute first: weakly_canonical leaves a relative path whose first part does not exist as
    // it is ("f.json"), but resolves "./f.json" against the working directory.
    const std::filesystem::path x = std::filesystem::weakly_canonical(std::filesystem::absolute(a, error), error);
    if (error) return a == b;
    const std::filesystem::path y = std::filesystem::weakly_canonical(std::filesystem::absolute(b, error), error);
    if (error) return a == b;
    struct stat first {}, second {};
    const bool links = ::stat(a.c_str(), &first) == 0 && ::stat(b.c_str(), &second) == 0 &&
                       first.st_dev == second.st_dev && first.st_ino == second.st_ino;
    return x == y || links;
  };
  for (size_t i = 0; i < named.size(); ++i) {
    for (size_t j = i + 1; j < named.size(); ++j) {
      const auto& [first_option, first_path] = named[i];
      const auto& [second_option, second_path] = named[j];
      if (first_path.empty() || second_path.empty() || !same(first_path, second_path)) continue;
      throw UserError(first_option + " and " + second_option + " name the same file, " + text::quoted(second_path, 240) +
                      ", and one would replace the other; give each its own path");
    }
  }
}

std::string cache_directory() {
  const auto env = [](const char* name) {
    const char* value = std::getenv(name);
    return std::string(value != nullptr ? value : "");
  };
  if (!env("ACCUMBENCH_CACHE_DIR").empty()) return env("ACCUMBENCH_CACHE_DIR");
  if (!env("XDG_CACHE_HOME").empty()) return (std::filesystem::path(env("XDG_CACHE_HOME")) / "accumbench").string();
  return (std::filesystem::path(env("HOME").empty() ? "." : env("HOME")) / ".cache" / "accumbench").string();
}

void lock_written_file(const std::string& path, const std::string& option) {
  std::error_code error;
  const std::string canonical =
      std::filesystem::weakly_canonical(std::filesystem::absolute(path, error), error).string();
  if (error) return;
  const uint64_t hash = fnv1a(kFnvOffsetBasis, canonical.data(), canonical.size());  // the lock's name
  const std::filesystem::path dir = std::filesystem::path(cache_directory()) / "locks";
  std::filesystem::create_directories(dir, error);
  if (error) return;
  char name[32];
  std::snprintf(name, sizeof name, "%016llx.lock", static_cast<unsigned long long>(hash));
  const std::string lock = (dir / name).string();
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int why = errno;
    char pid[32] = {0};
    const ssize_t n = ::pread(fd, pid, sizeof pid - 1, 0);
    ::close(fd);
    if (why != EWOULDBLOCK) return;
    std::string holder = n > 0 ? std::string(pid, static_cast<size_t>(n)) : std::string();
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    throw UserError("another accumbench" + (holder.empty() ? std::string() : " (pid " + holder + ")") + " is writing " +
                    text::quoted(path, 240) + " (its " + option + "); wait for it to finish, or give this one another " +
                    option + " file");
  }
  const std::string mine = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) == 0) (void)::pwrite(fd, mine.data(), mine.size(), 0);
  // Kept open (and locked) until the process ends: the lock goes with it, however it ends.
}

std::string temporary_beside(const std::string& path, const std::string& tag) {
  const auto slash = path.find_last_of('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const std::string suffix = "." + tag + ".tmp";
  if (name.size() + suffix.size() <= 255) return path + suffix;
  return (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) + ".accumbench-" + tag + ".tmp";
}

void require_file_size_at_most(const std::string& path, int64_t limit, const std::string& what, const std::string& kind) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode) || info.st_size <= limit) return;
  throw UserError(what + " " + text::quoted(path, 240) + " is " + format_bytes(info.st_size) + ", far larger than " + kind +
                  " (at most " + format_bytes(limit) + " is read); check the path");
}

void require_readable_file(const std::string& path, const std::string& what) {
  struct stat info {};
  const std::string shown = text::quoted(path, 240);  // paths are long; a 500,000-character one is still cut
  if (::stat(path.c_str(), &info) != 0) {
    throw UserError(what + " " + shown + " does not exist; give the path of an existing file");
  }
  if (S_ISDIR(info.st_mode)) throw UserError(what + " " + shown + " is a directory; give a file");
  if (!S_ISREG(info.st_mode)) {
    throw UserError(what + " " + shown + " is not a regular file (a FIFO, socket or device); give a file");
  }
  if (::access(path.c_str(), R_OK) != 0) throw UserError(what + " " + shown + " cannot be read; check its permissions");
}

}  // namespace accumbench
