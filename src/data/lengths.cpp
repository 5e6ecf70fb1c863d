// Sample lengths, sampler orders, padding counts and wrapped packing (lengths.hpp). No LibTorch:
// the plan judges memory on the same lengths the sweep trains on.
#include "accumbench/lengths.hpp"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <map>
#include <mutex>
#include <numeric>
#include <random>

#include "accumbench/error.hpp"
#include "accumbench/units.hpp"

namespace accumbench {

namespace {

// One row of a lengths file: its length and, when it masks labels, the labels that count.
struct LengthRow {
  int64_t length = 0;
  std::optional<LabelSpans> kept;  // set when a column masked labels
  bool labels = false;             // the `labels` column gave them
  bool completion = false;         // completion_mask applied
  bool assistant = false;          // assistant_masks applied
  bool unapplied_completion = false;  // a completion_mask that completion-only loss off left out
  bool padded = false;                // an attention_mask with a zero (padding saved with the row)
};

// A JSON value in an error: scalars as written (a string cut short), containers by kind (an
// entry nested 100,000 deep would overflow dump()'s recursion, and a long one the message).
std::string shown(const nlohmann::json& v) {
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  if (v.is_string()) return text::quoted(v.get<std::string>(), 40);
  return v.dump();
}

// The entry count a mask column must have: one per token of the row.
void require_entries(const nlohmann::json& column, const std::string& name, int64_t length, const std::string& where) {
  if (!column.is_array()) throw UserError(where + ": " + name + " is not an array; give one entry per token");
  if (static_cast<int64_t>(column.size()) != length) {
    throw UserError(where + ": " + name + " has " + std::to_string(column.size()) + " entries for " +
                    std::to_string(length) + " tokens; give one per token");
  }
}

// Whether each label counts under a 0/1 (or false/true) mask column.
std::vector<bool> mask_column(const nlohmann::json& column, const std::string& name, int64_t length,
                              const std::string& where) {
  require_entries(column, name, length, where);
  std::vector<bool> keep;
  keep.reserve(column.size());
  for (size_t i = 0; i < column.size(); ++i) {
    const nlohmann::json& v = column[i];
    if (v.is_boolean()) {
      keep.push_back(v.get<bool>());
    } else if (v.is_number_integer() && (v.get<int64_t>() == 0 || v.get<int64_t>() == 1)) {
      keep.push_back(v.get<int64_t>() == 1);
    } else {
      throw UserError(where + ": " + name + " entry " + std::to_string(i) + " is " + shown(v) +
                      "; a mask holds 0 or 1 per token");
    }
  }
  return keep;
}

// The runs of kept labels.
LabelSpans spans_of(const std::vector<bool>& keep) {
  LabelSpans spans;
  const auto n = static_cast<int64_t>(keep.size());
  for (int64_t i = 0; i < n; ++i) {
    if (!keep[static_cast<size_t>(i)]) continue;
    if (!spans.empty() && spans.back().second == i) {
      spans.back().second = i + 1;
    } else {
      spans.emplace_back(i, i + 1);
    }
  }
  return spans;
}

// TRL's labels for a tokenized row (sft_trainer.py, build_labels): a `labels` column as it is
// (-100: does not count); otherwise `assistant_masks`, and `completion_mask` under completion-only
// loss, each 1 where the label counts.
void read_label_columns(const nlohmann::json& row, bool completion_only_loss, const std::string& where, LengthRow& out) {
  if (row.contains("labels")) {
    const nlohmann::json& labels = row["labels"];
    require_entries(labels, "labels", out.length, where);
    std::vector<bool> keep;
    keep.reserve(labels.size());
    for (size_t i = 0; i < labels.size(); ++i) {
      const nlohmann::json& v = labels[i];
      // Past int64 no vocabulary reaches (and get<int64_t> would wrap it round, perhaps to -100).
      const bool too_large = v.is_number_unsigned() &&
                             v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
      if (!v.is_number_integer() || too_large || (v.get<int64_t>() < 0 && v.get<int64_t>() != -100)) {
        throw UserError(where + ": labels entry " + std::to_string(i) + " is " + shown(v) +
                        "; give a token id, or -100 where the label does not count");
      }
      keep.push_back(v.get<int64_t>() != -100);
    }
    out.kept = spans_of(keep);
    out.labels = true;
    return;
  }
  std::vector<bool> keep;
  const auto apply = [&](const std::vector<bool>& mask) {
    if (keep.empty()) {
      keep = mask;
    } else {
      for (size_t i = 0; i < keep.size(); ++i) keep[i] = keep[i] && mask[i];
    }
  };
  if (row.contains("assistant_masks")) {
    apply(mask_column(row["assistant_masks"], "assistant_masks", out.length, where));
    out.assistant = true;
  }
  if (row.contains("completion_mask")) {
    // Off, TRL leaves the column unread: so does this.
    if (completion_only_loss) {
      apply(mask_column(row["completion_mask"], "completion_mask", out.length, where));
      out.completion = true;
    } else {
      out.unapplied_completion = true;
    }
  }
  if (out.assistant || out.completion) out.kept = spans_of(keep);
}

// One line's length (and label masks); `where` is "lengths file \"P\" line N".
LengthRow parse_length_line(const std::string& line, const std::string& where, bool completion_only_loss) {
  const size_t first = line.find_first_not_of(" \t\r");
  if (first == std::string::npos) throw UserError(where + " is empty; give one sample length per line");
  // UTF-16 text (Windows PowerShell 5's `>` writes it, with its byte-order mark) reads as bytes
  // with a NUL beside every character: said as what it is, with the fix.
  if (line.rfind("\xFF\xFE", 0) == 0 || line.rfind("\xFE\xFF", 0) == 0) {
    throw UserError(where + " starts with a UTF-16 byte-order mark: the file is UTF-16 text; save it as UTF-8 "
                    "(PowerShell: Out-File -Encoding utf8; iconv -f UTF-16 -t UTF-8)");
  }
  // Control bytes (a NUL above all) are no text: most likely a token file given to the wrong option.
  const bool binary = std::any_of(line.begin(), line.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return (byte < 0x20 && c != '\t' && c != '\r') || byte == 0x7F;
  });
  if (binary) {
    throw UserError(where + " holds binary bytes, not text; a token file goes to `sweep --tokens` (with --eos-id N for its "
                    "documents), and --lengths reads one length per line or JSONL rows");
  }
  // A JSON array (json.dump of a list, a datasets export without lines=True) is no JSONL.
  if (line[first] == '[') {
    throw UserError(where + " starts a JSON array; --lengths reads JSONL, one JSON object per line (pandas: "
                    "to_json(orient=\"records\", lines=True); datasets: Dataset.to_json)");
  }
  LengthRow out;
  if (line[first] == '{') {
    nlohmann::json row;
    try {
      row = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      throw UserError(where + " is not valid JSON; give one JSON object per line with input_ids or length");
    }
    if (row.contains("input_ids") && row["input_ids"].is_array()) {
      const nlohmann::json& ids = row["input_ids"];
      for (size_t i = 0; i < ids.size(); ++i) {
        if (!ids[i].is_number_integer() || (!ids[i].is_number_unsigned() && ids[i].get<int64_t>() < 0)) {
          throw UserError(where + ": input_ids entry " + std::to_string(i) + " is " + shown(ids[i]) +
                          ", not a token id; give each row's ids as whole numbers");
        }
      }
      out.length = static_cast<int64_t>(ids.size());
      // A length beside the ids that says otherwise: which one the user meant is not ours to guess.
      const nlohmann::json& length = row.contains("length") ? row["length"] : nlohmann::json();
      if (length.is_number() && !(length.get<double>() == static_cast<double>(out.length))) {
        throw UserError(where + ": length " + shown(length) + " disagrees with its " + std::to_string(out.length) +
                        " input_ids; drop the length column or make it the ids' count");
      }
    } else if (row.contains("input_ids") && !row["input_ids"].is_null()) {
      throw UserError(where + ": input_ids is " + shown(row["input_ids"]) + ", not an array of token ids; give each "
                      "row's ids as a list, or leave input_ids out and give its length");
    } else if (row.contains("length") && row["length"].is_number_unsigned()) {
      // Past int64: longer than any T, so cut to it like every other long sample.
      const auto length = row["length"].get<uint64_t>();
      out.length = length > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                       ? std::numeric_limits<int64_t>::max()
                       : static_cast<int64_t>(length);
    } else if (row.contains("length") && row["length"].is_number_integer()) {
      out.length = row["length"].get<int64_t>();
    } else if (row.contains("length") && row["length"].is_number_float()) {
      // Digits past uint64 parse as a float: longer than any T, as a text file's; else a fraction.
      // A whole number written as a float (10.0, 1e1: pandas writes an int column with a gap as floats)
      // is that count (helper-93: "length 10.0 is not a whole number").
      const double length = row["length"].get<double>();
      if (!(std::isfinite(length) && length == std::floor(length))) {
        throw UserError(where + ": length " + shown(row["length"]) + " is not a whole number; give each row's " +
                        "length as a whole count of tokens");
      }
      out.length = length >= 9.2e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(length);
    } else {
      throw UserError(where + " has neither an input_ids array nor a length integer; give each JSONL row one of them");
    }
    if (out.length > 0) read_label_columns(row, completion_only_loss, where, out);
    // Padding saved with the row: TRL's collator builds its own attention_mask of ones, so the
    // zeros change nothing it trains; counted for a note.
    if (row.contains("input_ids") && row.contains("attention_mask") && row["attention_mask"].is_array()) {
      const nlohmann::json& mask = row["attention_mask"];
      out.padded = std::any_of(mask.begin(), mask.end(), [](const nlohmann::json& v) {
        return (v.is_boolean() && !v.get<bool>()) || (v.is_number() && v.get<double>() == 0);
      });
    }
    return out;
  }
  const std::string text = line.substr(first, line.find_last_not_of(" \t\r") + 1 - first);
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::out_of_range&) {
    // Digits past int64: longer than any T (cut to it); as many minus digits: negative.
    const bool negative = text[0] == '-';
    const bool digits = text.find_first_not_of("0123456789", negative || text[0] == '+' ? 1 : 0) == std::string::npos;
    used = digits ? text.size() : 0;
    value = negative ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || used == 0) {
    // Carriage returns inside the line: a file with old Mac line ends (\r alone) reads as one line.
    if (text.find('\r') != std::string::npos) {
      throw UserError(where + " holds carriage returns inside it: the file ends its lines with \\r alone (old Mac "
                      "line ends); save it with \\n line ends (tr '\\r' '\\n')");
    }
    size_t parsed = 0;
    double number = 0;
    try {
      number = std::stod(text, &parsed);
    } catch (const std::exception&) {
      parsed = 0;
    }
    // A whole number written as a float (12.0, 1e2), as a JSONL row's length may be (helper-112).
    if (parsed == text.size() && std::isfinite(number) && number == std::floor(number) &&
        text.find_first_of("xXpP") == std::string::npos) {
      out.length = number >= 9.2e18 ? std::numeric_limits<int64_t>::max()
                 : number <= -9.2e18 ? std::numeric_limits<int64_t>::min()
                                     : static_cast<int64_t>(number);
      return out;
    }
    throw UserError(where + " holds " + text::quoted(text, 60) +
                    (parsed == text.size() ? ", which is not a whole number; give each length as a whole count of tokens"
                                           : ", which is not a number; give one sample length per line"));
  }
  out.length = value;
  return out;
}

// The spans cut to a sample's first `length` labels.
LabelSpans cut_spans(const LabelSpans& spans, int64_t length) {
  LabelSpans out;
  for (const auto& [begin, end] : spans) {
    if (begin >= length) break;
    out.emplace_back(begin, std::min(end, length));
  }
  return out;
}

// A lengths file's lines: a UTF-8 byte-order mark (Windows editors write one) skipped; blank
// lines at the end (`echo >> lengths.txt`) end the file, one inside it is refused by the reader.
// Views into `bytes`, which must outlive them (no copy of a file of gigabytes).
std::vector<std::string_view> line_views(const std::string& bytes) {
  std::string_view rest(bytes);
  if (rest.rfind("\xEF\xBB\xBF", 0) == 0) rest.remove_prefix(3);
  std::vector<std::string_view> lines;
  while (!rest.empty()) {
    const size_t end = rest.find('\n');
    lines.push_back(rest.substr(0, end));
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  while (!lines.empty() && lines.back().find_first_not_of(" \t\r") == std::string_view::npos) lines.pop_back();
  return lines;
}

std::vector<std::string> lines_of(const std::string& bytes) {
  std::vector<std::string> lines;
  for (const std::string_view line : line_views(bytes)) lines.emplace_back(line);
  return lines;
}

// "labels and assistant_masks" masked, not one column: the verb's plural.
bool several_columns(const std::string& masked_by) { return masked_by.find(" and ") != std::string::npos; }

}  // namespace

std::string nothing_counts_problem(const std::string& name, const std::string& masked_by) {
  return "no row of " + name + " has a label that counts (" + masked_by + (several_columns(masked_by) ? " mask" : " masks") +
         " every one), so there is nothing to train; check the masks";
}

std::vector<std::string> lengths_file_lines(const std::string& path) {
  const std::shared_ptr<const std::string> bytes = read_file_bytes(path);
  if (bytes == nullptr) throw UserError("--lengths " + text::quoted(path, 240) + " " + why_unreadable(path));
  return lines_of(*bytes);
}

int64_t kept_labels_in(const LabelSpans& kept, int64_t length) {
  int64_t labels = 0;
  for (const auto& [begin, end] : kept) labels += std::max<int64_t>(0, std::min(end, length) - begin);
  return labels;
}

int64_t kept_targets(const LabelSpans& kept, int64_t length) {
  int64_t targets = 0;
  for (const auto& [begin, end] : kept) targets += std::max<int64_t>(0, std::min(end, length) - std::max<int64_t>(begin, 1));
  return targets;
}

namespace {

// A lengths file parsed at one T: the same path, options and bytes (their size and hash).
struct LengthsKey {
  std::string path;
  int64_t seq_len = 0;
  bool completion_only_loss = false;
  size_t size = 0;
  size_t hash = 0;
  bool operator==(const LengthsKey& o) const {
    return path == o.path && seq_len == o.seq_len && completion_only_loss == o.completion_only_loss && size == o.size &&
           hash == o.hash;
  }
};

// The last few files parsed in this process (a test binary reads many; a command one or two).
constexpr size_t kParsedFilesKept = 4;
std::mutex parsed_mutex;
std::deque<std::pair<LengthsKey, SampleLengths>>& parsed_files() {
  static std::deque<std::pair<LengthsKey, SampleLengths>> files;
  return files;
}

std::optional<SampleLengths> parsed_lengths(const LengthsKey& key) {
  const std::lock_guard<std::mutex> lock(parsed_mutex);
  for (const auto& [known, lengths] : parsed_files()) {
    if (known == key) return lengths;
  }
  return std::nullopt;
}

void keep_parsed_lengths(const LengthsKey& key, const SampleLengths& lengths) {
  const std::lock_guard<std::mutex> lock(parsed_mutex);
  std::deque<std::pair<LengthsKey, SampleLengths>>& files = parsed_files();
  files.emplace_back(key, lengths);
  if (files.size() > kParsedFilesKept) files.pop_front();
}

SampleLengths parse_lengths_file(const std::string& bytes, const std::string& path, int64_t seq_len,
                                 bool completion_only_loss);

}  // namespace

SampleLengths read_lengths_file(const std::string& path, int64_t seq_len, bool completion_only_loss) {
  const std::shared_ptr<const std::string> bytes = read_file_bytes(path);
  if (bytes == nullptr) {
    const std::string why = why_unreadable(path);
    if (why == "is a directory" || why.rfind("is a device", 0) == 0) {
      throw UserError("--lengths " + text::quoted(path, 240) + " " + why + "; give a lengths file");
    }
    // There, but not readable (its permissions): not an unknown word (helper-104).
    if (why == "cannot be read") {
      throw UserError("--lengths " + text::quoted(path, 240) + " cannot be read; check its permissions");
    }
    // A value that looks like a path (a.txt, data/lengths) is a file that is not there.
    if (why == "does not exist" && path.find_first_of("/.") != std::string::npos) {
      throw UserError("--lengths " + text::quoted(path, 240) + " does not exist; give the path of a lengths file " +
                      "(one length per line, or JSONL rows with input_ids or length), or fixed or variable");
    }
    if (path == "-") {  // the shells' word for standard input, which a path names here
      throw UserError("--lengths - is no file; to read standard input give --lengths /dev/stdin");
    }
    throw UserError("unknown --lengths " + text::quoted(path, 240) + "; use fixed or variable, or the path of a lengths file " +
                    "(one length per line, or JSONL rows with input_ids or length)");
  }
  // Start-up reads a source in several places (the plan's longest micro-batch, each packing's
  // epoch, the notes): a file already parsed, the same bytes at the same T, is not parsed again
  // (a JSONL dataset of gigabytes takes seconds each time).
  const LengthsKey key{path, seq_len, completion_only_loss, bytes->size(), std::hash<std::string_view>{}(*bytes)};
  if (const std::optional<SampleLengths> known = parsed_lengths(key)) return *known;
  SampleLengths out = parse_lengths_file(*bytes, path, seq_len, completion_only_loss);
  keep_parsed_lengths(key, out);
  return out;
}

namespace {

SampleLengths parse_lengths_file(const std::string& bytes, const std::string& path, int64_t seq_len,
                                 bool completion_only_loss) {
  const std::vector<std::string_view> lines = line_views(bytes);
  SampleLengths out;
  std::vector<std::optional<LabelSpans>> kept;
  bool masked = false, labels = false, completion = false, assistant = false;
  // JSONL when its first line is a JSON object: a blank line there asks for one object per line.
  const size_t opening = lines.empty() ? std::string::npos : lines.front().find_first_not_of(" \t\r");
  const bool jsonl = opening != std::string::npos && lines.front()[opening] == '{';
  for (size_t index = 0; index < lines.size(); ++index) {
    const std::string where = "lengths file \"" + path + "\" line " + std::to_string(index + 1);
    if (jsonl && lines[index].find_first_not_of(" \t\r") == std::string::npos) {
      throw UserError(where + " is empty; JSONL holds one JSON object on every line, so remove the blank line");
    }
    LengthRow row = parse_length_line(std::string(lines[index]), where, completion_only_loss);
    const int64_t length = row.length;
    if (length <= 0) {
      const std::string shown = length == std::numeric_limits<int64_t>::min() ? "a negative length" : "the length " + std::to_string(length);
      throw UserError(where + " holds " + shown + "; sample lengths must be positive");
    }
    out.truncated += length > seq_len ? 1 : 0;
    out.cut.push_back(length > seq_len);
    out.lengths.push_back(std::min(length, seq_len));
    out.unapplied_completion_masks += row.unapplied_completion ? 1 : 0;
    out.padded_rows += row.padded ? 1 : 0;
    out.nothing_counts += row.kept && row.kept->empty() ? 1 : 0;
    masked = masked || row.kept.has_value();
    labels = labels || row.labels;
    completion = completion || row.completion;
    assistant = assistant || row.assistant;
    kept.push_back(std::move(row.kept));
  }
  if (out.lengths.empty()) throw UserError("lengths file \"" + path + "\" is empty; give one sample length per line");
  if (masked) {  // rows without a mask keep every label
    for (size_t i = 0; i < kept.size(); ++i) {
      out.kept_labels.push_back(kept[i] ? cut_spans(*kept[i], out.lengths[i]) : LabelSpans{{0, out.lengths[i]}});
    }
    std::vector<std::string> columns;
    if (labels) columns.push_back("labels");
    if (completion) columns.push_back("completion_mask");
    if (assistant) columns.push_back("assistant_masks");
    out.masked_by = text::and_list(columns);
  }
  return out;
}

}  // namespace

SampleLengths document_lengths(const std::vector<int64_t>& tokens, int64_t eos_id, int64_t seq_len,
                               std::vector<int64_t>* starts) {
  SampleLengths out;
  int64_t start = 0;
  const auto size = static_cast<int64_t>(tokens.size());
  for (int64_t i = 0; i < size; ++i) {
    if (tokens[static_cast<size_t>(i)] != eos_id && i + 1 < size) continue;
    const int64_t positions = i - start + 1;  // its tokens, the eos id included: n - 1 of them have a next token
    const int64_t begin = start;
    start = i + 1;
    if (positions <= 1) continue;  // one token (an eos right after another) trains nothing
    if (starts != nullptr) starts->push_back(begin);
    out.truncated += positions > seq_len ? 1 : 0;
    out.lengths.push_back(std::min(positions, seq_len));
  }
  return out;
}

namespace {

// 4-byte ids read 2 bytes at a time come out as the id's low half, then its high half: for any
// vocabulary under 2^18 a value below 4 at every second position, which no real 2-byte stream
// holds (read on, the documents would be twice as long and half zeros, silently). `bytes`: the
// whole file, or its head.
void refuse_wide_ids_read_narrow(std::string_view bytes, const std::string& path) {
  if (bytes.size() < 32) return;
  const auto half = [&](size_t k) {
    return static_cast<unsigned>(static_cast<unsigned char>(bytes[2 * k])) |
           static_cast<unsigned>(static_cast<unsigned char>(bytes[2 * k + 1])) << 8;
  };
  const size_t count = bytes.size() / 2;
  bool high_halves = true;
  bool some_low_half_large = false;
  for (size_t k = 0; k + 1 < count && high_halves; k += 2) {
    high_halves = half(k + 1) < 4;
    some_low_half_large = some_low_half_large || half(k) >= 4;
  }
  if (high_halves && some_low_half_large) {
    throw UserError("token file " + text::quoted(path, 240) + " reads as 2-byte ids of which every second one is below "
                    "4, the high halves of 4-byte ids; pass --token-bytes 4");
  }
}

// What TokenFile's constructor refuses, without reading the file whole (a pretraining shard is
// gigabytes, and the sweep's loader reads it anyway): where TokenFile would refuse it (a bad width,
// a missing file, a directory, an empty file, a size off the width) it is left to say so; else the
// first 64 KiB are checked for 4-byte ids read as 2-byte ones.
void check_token_file(const std::string& path, int token_bytes) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (std::filesystem::is_fifo(status)) return;  // the sweep's to read, once
  if (std::filesystem::is_character_file(status) || std::filesystem::is_block_file(status)) {
    throw UserError("token file " + text::quoted(path, 240) + " " + why_unreadable(path) + "; check the path");  // as the sweep says
  }
  const auto bytes = std::filesystem::is_regular_file(status) ? std::filesystem::file_size(path, error) : 0;
  if ((token_bytes != 2 && token_bytes != 4) || !std::filesystem::is_regular_file(status) || error || bytes == 0 ||
      bytes % static_cast<uintmax_t>(token_bytes) != 0) {
    TokenFile(path, token_bytes);  // its sentence
    return;
  }
  if (token_bytes != 2) return;
  std::ifstream in(path, std::ios::binary);
  if (!in) TokenFile(path, token_bytes);  // unreadable: its sentence
  std::string head(static_cast<size_t>(std::min<uintmax_t>(bytes, uintmax_t{1} << 16)) & ~size_t{3}, '\0');
  if (in.read(&head[0], static_cast<std::streamsize>(head.size()))) refuse_wide_ids_read_narrow(head, path);
}

}  // namespace

TokenFile::TokenFile(const std::string& path, int token_bytes, int64_t max_ids) : path_(path), width_(token_bytes) {
  if (token_bytes != 2 && token_bytes != 4) {
    throw UserError("--token-bytes " + std::to_string(token_bytes) +
                    ": token ids are 2 (uint16) or 4 (uint32) bytes wide; pass --token-bytes 2 or 4");
  }
  struct stat info {};
  const int fd = ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) ? ::open(path.c_str(), O_RDONLY | O_CLOEXEC) : -1;
  if (fd >= 0) {
    // Only the ids asked for (helper-104: a 10 GB shard was read whole, then widened, until memory
    // ran out), read, not mapped: a file cut short while it is read is a sentence, not a SIGBUS
    // (helper-108). The first MiB at least, for the width check below.
    size_ = static_cast<size_t>(info.st_size);
    const int64_t wanted_ids = std::max<int64_t>(max_ids, (int64_t{1} << 20) / token_bytes);
    const size_t wanted = wanted_ids >= static_cast<int64_t>(size_ / static_cast<size_t>(token_bytes))
                              ? size_
                              : static_cast<size_t>(wanted_ids) * static_cast<size_t>(token_bytes);
    auto bytes = std::make_shared<std::string>();
    size_t got = 0;
    try {
      bytes->resize(wanted);
      while (got < wanted) {
        const ssize_t n = ::read(fd, &(*bytes)[got], wanted - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<size_t>(n);
      }
    } catch (const std::bad_alloc&) {
      ::close(fd);
      throw UserError("token file " + text::quoted(path, 240) + " asks for " + format_bytes(static_cast<int64_t>(wanted)) +
                      " of ids, more than this process can hold in memory; give a shard of it");
    }
    ::close(fd);
    if (got < wanted) {
      throw UserError("token file " + text::quoted(path, 240) + " ended after " + std::to_string(got) + " of its " +
                      std::to_string(wanted) + " bytes while it was read (changed meanwhile?); give a file nothing writes");
    }
    bytes_ = std::move(bytes);
  } else {
    bytes_ = read_file_bytes(path);
    if (bytes_ == nullptr) throw UserError("token file " + text::quoted(path, 240) + " " + why_unreadable(path) + "; check the path");
    size_ = bytes_->size();
  }
  if (size_ == 0)
    throw UserError("token file \"" + path + "\" is empty; give a file of token ids (uint16, or uint32 with "
                    "--token-bytes 4), as a tokenizer's output written with numpy's tofile");
  if (size_ % static_cast<size_t>(token_bytes) != 0) {
    throw UserError("token file \"" + path + "\" has " + std::to_string(size_) +
                    " bytes, not a multiple of the " + std::to_string(token_bytes) +
                    "-byte token width; pass the right --token-bytes");
  }
  // The first MiB decides (a shard of gigabytes is not scanned whole before its first window).
  if (token_bytes == 2) refuse_wide_ids_read_narrow(std::string_view(*bytes_).substr(0, size_t{1} << 20), path);
}

namespace {

// The little-endian id of `width` bytes at `at`; UserError naming its position when it is >= vocab_size.
int64_t decode_id(const char* at, int width, int64_t position, int64_t vocab_size, const std::string& path) {
  uint32_t id = 0;
  for (int k = width - 1; k >= 0; --k) id = (id << 8) | static_cast<unsigned char>(at[k]);
  if (static_cast<int64_t>(id) >= vocab_size) {
    throw UserError("token file \"" + path + "\" holds token id " + std::to_string(id) + " at position " +
                    std::to_string(position) + ", outside the model's vocabulary of " + std::to_string(vocab_size) +
                    "; use a matching model or token width");
  }
  return id;
}

}  // namespace

int64_t TokenFile::id(int64_t i, int64_t vocab_size) const {
  const size_t at = static_cast<size_t>(i) * static_cast<size_t>(width_);
  if (at + static_cast<size_t>(width_) > bytes_->size()) {
    throw std::logic_error("token id " + std::to_string(i) + " of " + path_ + " was not read");
  }
  return decode_id(bytes_->data() + at, width_, i, vocab_size, path_);
}

std::string too_few_tokens_problem(const std::string& path, int64_t count, int64_t seq_len, int64_t batch) {
  const int64_t need = (seq_len + 1) * batch;
  if (count >= need) return "";
  return "token file \"" + path + "\" holds " + std::to_string(count) + " tokens, fewer than one step needs (" +
         std::to_string(need) + " = batch × (seq-len + 1)); use a longer file or a smaller batch";
}

void check_token_windows(const DataSource& data, int64_t seq_len, int64_t batch, int64_t vocab_size, int64_t steps) {
  if (data.token_file.empty() || data.eos_id >= 0 || seq_len <= 0 || batch <= 0) return;
  check_token_file(data.token_file, data.token_bytes);  // what TokenFile refuses, first
  std::error_code error;
  if (!std::filesystem::is_regular_file(data.token_file, error)) return;
  const auto bytes = std::filesystem::file_size(data.token_file, error);
  if (error) return;
  const int width = data.token_bytes;
  const int64_t count = static_cast<int64_t>(bytes) / width;
  if (const std::string problem = too_few_tokens_problem(data.token_file, count, seq_len, batch); !problem.empty()) {
    throw UserError(problem);
  }
  // load_token_file's steps: whole steps of windows, the first `steps` of them.
  const int64_t step_ids = (seq_len + 1) * batch;
  const int64_t read = std::min({count / step_ids * step_ids, std::max<int64_t>(1, steps) * step_ids,
                                 (int64_t{64} << 20) / width});
  std::ifstream in(data.token_file, std::ios::binary);
  std::vector<char> chunk(size_t{1} << 20);
  for (int64_t done = 0; done < read && in;) {
    const int64_t ids = std::min<int64_t>(read - done, static_cast<int64_t>(chunk.size()) / width);
    if (!in.read(chunk.data(), static_cast<std::streamsize>(ids * width))) return;  // the sweep's to say
    for (int64_t i = 0; i < ids; ++i) decode_id(chunk.data() + i * width, width, done + i, vocab_size, data.token_file);
    done += ids;
  }
}

std::vector<int64_t> read_token_ids(const std::string& path, int token_bytes, int64_t vocab_size) {
  // Every id as int64 (the documents' samples are cut from them): refused, before anything is read,
  // where that would take more than half of this machine's memory (helper-104: a 10 GB shard ran it
  // out of memory). A pipe's size is known only once read (TokenFile).
  struct stat info {};
  const double ids = ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && (token_bytes == 2 || token_bytes == 4)
                         ? static_cast<double>(info.st_size / token_bytes)
                         : 0.0;
  const double physical = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  const double widened = ids * sizeof(int64_t);
  if (physical > 0 && widened > physical / 2) {
    throw UserError("token file " + text::quoted(path, 240) + " holds " + std::to_string(static_cast<int64_t>(ids)) +
                    " ids, and --eos-id reads every one to split its documents (" + format_bytes(static_cast<int64_t>(widened)) +
                    "), more than half of this machine's " + format_bytes(static_cast<int64_t>(physical)) +
                    " of memory; give a shard of it (e.g. head -c 1G FILE > shard.bin), or drop --eos-id for windows, "
                    "which read only what the steps take");
  }
  const TokenFile file(path, token_bytes);
  std::vector<int64_t> out(static_cast<size_t>(file.size()));
  for (int64_t i = 0; i < file.size(); ++i) out[static_cast<size_t>(i)] = file.id(i, vocab_size);
  return out;
}

std::optional<SampleSource> read_sample_source(const DataSource& data, int64_t seq_len, int64_t vocab_size) {
  // TRL cuts no sample before wrapped packing (it truncates only when it does not pack): the
  // stream carries a long one on into the next rows. Bounded all the same (a million rows' worth),
  // so that a length of 2^63 neither overflows a sum nor asks for its tokens.
  const int64_t rows_worth = std::numeric_limits<int64_t>::max() >> 20;
  const int64_t cut = data.packing != Packing::kWrapped ? seq_len
                      : seq_len > rows_worth            ? std::numeric_limits<int64_t>::max()
                                                        : seq_len << 20;
  SampleSource source;
  SampleLengths lengths;
  std::string name;
  if (data.lengths == LengthMode::kFile) {
    lengths = read_lengths_file(data.lengths_file, cut, data.completion_only_loss);
    name = data.lengths_file;
  } else if (!data.token_file.empty() && data.eos_id >= 0) {
    if (data.eos_id >= vocab_size) {
      throw UserError("--eos-id " + std::to_string(data.eos_id) + " is outside the model's vocabulary of " +
                      std::to_string(vocab_size) + " ids, so it never ends a document; use the id of your tokenizer's "
                      "end-of-sequence token");
    }
    source.token_ids = read_token_ids(data.token_file, data.token_bytes, vocab_size);
    if (std::find(source.token_ids.begin(), source.token_ids.end(), data.eos_id) == source.token_ids.end()) {
      throw UserError("token file \"" + data.token_file + "\" never holds --eos-id " + std::to_string(data.eos_id) +
                      ", so the whole file would be one document; check --eos-id and --token-bytes, or drop --eos-id "
                      "to cut the file into windows of --seq-len + 1 tokens");
    }
    lengths = document_lengths(source.token_ids, data.eos_id, cut, &source.starts);
    name = data.token_file + " split at eos " + std::to_string(data.eos_id);
    if (lengths.lengths.empty()) {
      throw UserError("token file \"" + data.token_file + "\" has no document of two or more tokens between --eos-id " +
                      std::to_string(data.eos_id) + " tokens; check --eos-id and --token-bytes");
    }
  } else {
    // Token windows: no samples to read, but the file is checked as the sweep's loader checks it
    // (a plan refused nothing: a missing file, or uint32 ids read as uint16, planned as fine).
    if (!data.token_file.empty()) check_token_file(data.token_file, data.token_bytes);
    return std::nullopt;
  }
  if (!lengths.lengths.empty()) {
    const int64_t longest = *std::max_element(lengths.lengths.begin(), lengths.lengths.end());
    if (const std::string problem = padding_past_seq_len_problem(data, longest, seq_len); !problem.empty()) {
      throw UserError(problem);
    }
  }
  source.truncated = data.packing == Packing::kWrapped ? 0 : lengths.truncated;
  source.masked_by = lengths.masked_by;
  source.nothing_counts = lengths.nothing_counts;
  if (lengths.kept_labels.empty()) {
    source.lengths = std::move(lengths.lengths);
  } else {
    // TRL drops the samples its cut to max_length leaves without a label that counts, unless it
    // packs (sft_trainer.py's _prepare_dataset: truncate, then filter, both skipped when packing;
    // the filter since 1.9.0, commit a10ff3e; before it such a sample stayed, with no target).
    // Wrapped rows run across samples: each label counts there, the first one included (the
    // previous sample's last position predicts it), so the words count labels, not targets.
    const bool wrapped = data.packing == Packing::kWrapped;
    int64_t unmasked = 0, trained = 0, truncated = 0;
    for (size_t i = 0; i < lengths.lengths.size(); ++i) {
      if (data.packing == Packing::kNone && lengths.kept_labels[i].empty()) {
        ++source.dropped;
        continue;
      }
      source.rows.push_back(static_cast<int64_t>(i));
      const int64_t n = lengths.lengths[i];
      unmasked += wrapped ? n : n - 1;
      trained += wrapped ? kept_labels_in(lengths.kept_labels[i], n) : kept_targets(lengths.kept_labels[i], n);
      truncated += lengths.cut[i] ? 1 : 0;
      source.lengths.push_back(n);
      source.kept_labels.push_back(std::move(lengths.kept_labels[i]));
    }
    if (!wrapped) source.truncated = truncated;  // the samples kept
    if (source.dropped == 0) source.rows.clear();
    if (source.lengths.empty()) {
      if (lengths.nothing_counts == static_cast<int64_t>(lengths.lengths.size())) {
        throw UserError(nothing_counts_problem("lengths file \"" + name + "\"", source.masked_by));
      }
      throw UserError("every sample of lengths file \"" + name + "\" has its counted labels (" + source.masked_by +
                      ") past T=" + std::to_string(seq_len) + ", so the cut to T leaves nothing to train; raise " +
                      "--seq-len, or give rows whose counted labels start within it");
    }
    const std::string what = wrapped ? " labels (" : " targets (";
    source.masking = source.masked_by + (several_columns(source.masked_by) ? " keep " : " keeps ") +
                     text::format_count(trained) + " of " + text::format_count(unmasked) + what +
                     text::format_percent(unmasked > 0 ? static_cast<double>(trained) / static_cast<double>(unmasked) : 0.0, 1) +
                     ")";
    if (source.dropped > 0) {
      source.masking += "; " + text::format_count(source.dropped) + (source.dropped == 1 ? " sample" : " samples") +
                        " left out with no label that counts within T=" + std::to_string(seq_len) +
                        " (as TRL 1.9+ drops them when it does not pack)";
    }
  }
  if (lengths.unapplied_completion_masks > 0) {
    source.masking += (source.masking.empty() ? "" : "; ") +
                      std::string("the prompts' labels count (--completion-only-loss false leaves completion_mask out)");
  }
  // Wrapped rows cut no sample (the stream runs on into the next row).
  source.description = name + ": " + std::to_string(source.lengths.size()) +
                       (source.lengths.size() == 1 ? " sample" : " samples") +
                       (data.packing == Packing::kWrapped ? std::string(", none cut (wrapped rows run on)")
                                                          : ", " + std::to_string(source.truncated) + " cut to T=" +
                                                                std::to_string(seq_len)) +
                       (source.masking.empty() ? "" : ", " + source.masking);
  return source;
}

std::string repeated_samples_words(const SampleSource& source, const DataSource& data, int64_t batch, int64_t seq_len) {
  const auto samples = static_cast<int64_t>(source.lengths.size());
  const std::string step = "the step's " + std::to_string(batch) + " sequences";
  if (data.packing == Packing::kBfd) {
    const auto rows = static_cast<int64_t>(pack_bfd_in_groups(source.lengths, seq_len).size());  // as the batches pack them
    if (rows >= batch) return "";
    return "packed into " + std::to_string(rows) + (rows == 1 ? " row" : " rows") + ", fewer than " + step +
           ": each step repeats some";
  }
  if (data.packing == Packing::kWrapped) {
    // Each sample brings its tokens (its positions); a step's rows take batch × T.
    const int64_t tokens = std::accumulate(source.lengths.begin(), source.lengths.end(), int64_t{0});
    if (tokens >= batch * seq_len) return "";
    return std::to_string(tokens) + " tokens, fewer than " + step + " of T=" + std::to_string(seq_len) +
           " take: each step repeats some";
  }
  if (samples >= batch) return "";
  return "fewer than " + step + ": each step repeats some";
}

std::string short_source_note(const WorkloadOptions& w) {
  // Each packing of a --packing list makes its own rows of the samples: some may repeat, some not.
  const std::vector<Packing> packings = data_packings(w.data);
  std::string note;
  for (const Packing packing : packings) {
    DataSource data = w.data;
    data.packing = packing;
    data.other_packings.clear();
    const std::optional<SampleSource> source = read_sample_source(data, w.seq_len, std::numeric_limits<int64_t>::max());
    if (!source) return "";
    const std::string words = repeated_samples_words(*source, data, w.batch, w.seq_len);
    if (words.empty()) continue;
    note += (note.empty() ? "" : "; ") + (packings.size() > 1 ? "with --packing " + to_string(packing) + ", " : "") +
            source->description + ", " + words;
  }
  if (note.empty()) return "";
  return note + " (a training run would start its next epoch there); for steps like a real run's, give a source that "
         "fills --batch " + std::to_string(w.batch) + " sequences";
}

int64_t rows_in_source(const SampleSource& source, const DataSource& data, int64_t seq_len) {
  if (data.packing == Packing::kBfd) return static_cast<int64_t>(pack_bfd_in_groups(source.lengths, seq_len).size());
  if (data.packing == Packing::kWrapped) {
    const int64_t tokens = std::accumulate(source.lengths.begin(), source.lengths.end(), int64_t{0});
    return std::max<int64_t>(1, (tokens + seq_len - 1) / seq_len);
  }
  return static_cast<int64_t>(source.lengths.size());
}

int64_t epoch_steps(const DataSource& data, int64_t seq_len, int64_t batch) {
  if (batch <= 0 || seq_len <= 0) return 0;
  if (!data.token_file.empty() && data.eos_id < 0) {
    // load_token_file's steps: whole windows of T + 1, whole steps of them. A regular file's ids are
    // counted from its size (a pretraining shard is gigabytes; load_token_file checks its content);
    // a pipe is read once and kept (read_file_bytes).
    std::error_code error;
    const auto bytes = std::filesystem::is_regular_file(data.token_file, error)
                           ? static_cast<int64_t>(std::filesystem::file_size(data.token_file, error))
                           : -1;
    const int64_t ids = bytes >= 0 && !error ? bytes / data.token_bytes : TokenFile(data.token_file, data.token_bytes).size();
    return std::max<int64_t>(1, ids / ((seq_len + 1) * batch));
  }
  const std::optional<SampleSource> source = read_sample_source(data, seq_len, std::numeric_limits<int64_t>::max());
  if (!source) return 0;
  return epoch_steps(*source, data, seq_len, batch);
}

int64_t epoch_steps(const SampleSource& source, const DataSource& data, int64_t seq_len, int64_t batch) {
  if (batch <= 0 || seq_len <= 0) return 0;
  return std::max<int64_t>(1, (rows_in_source(source, data, seq_len) + batch - 1) / batch);
}

int64_t requested_distinct_steps(const DataSource& data, int64_t seq_len, int64_t batch) {
  if (!data.distinct_steps_given()) return kDistinctBatchesByDefault;
  const bool windows = !data.token_file.empty() && data.eos_id < 0;
  if (data.distinct_steps != DataSource::kEpochSteps && !windows) return data.distinct_steps;
  const int64_t epoch = epoch_steps(data, seq_len, batch);
  // A token file cut into full windows has no more steps than its pass (load_token_file stops there).
  return data.distinct_steps == DataSource::kEpochSteps ? epoch : std::min(data.distinct_steps, epoch);
}

int distinct_steps_of(const DataSource& data, int64_t seq_len, int64_t batch) {
  return static_cast<int>(std::clamp<int64_t>(requested_distinct_steps(data, seq_len, batch), 1, kMaxDistinctSteps));
}

std::string distinct_steps_past_epoch_note(const WorkloadOptions& w) {
  if (!w.data.distinct_steps_given() || w.data.distinct_steps == DataSource::kEpochSteps) return "";
  std::string past;  // each packing whose pass is shorter: "12 (--packing none)"
  const std::vector<Packing> packings = data_packings(w.data);
  for (const Packing packing : packings) {
    const int64_t epoch = epoch_steps(with_packing(w, packing).data, w.seq_len, w.batch);
    if (epoch <= 0 || epoch >= w.data.distinct_steps) continue;
    past += (past.empty() ? "" : ", ") + std::to_string(epoch) +
            (packings.size() > 1 ? " (--packing " + to_string(packing) + ")" : "");
  }
  if (past.empty()) return "";
  const bool windows = !w.data.token_file.empty() && w.data.eos_id < 0;
  return "--distinct-steps " + std::to_string(w.data.distinct_steps) + " is more than the " + past + " steps of " +
         std::to_string(w.batch) + " sequences one pass over " + (windows ? w.data.token_file : lengths_name(w.data)) +
         " takes: " +
         (windows ? "the file has no more windows, so the steps stop there"
                  : "the steps after it run over the same rows again, as a second epoch would") +
         "; --distinct-steps epoch passes over it once";
}

std::string padded_rows_note(const WorkloadOptions& w) {
  if (w.data.lengths != LengthMode::kFile) return "";
  int64_t padded = 0;
  try {
    padded = read_lengths_file(w.data.lengths_file, std::max<int64_t>(1, w.seq_len), w.data.completion_only_loss).padded_rows;
  } catch (const UserError&) {
    return "";  // the run refuses the file with its own sentence
  }
  if (padded == 0) return "";
  return std::to_string(padded) + (padded == 1 ? " row" : " rows") + " of " + w.data.lengths_file +
         (padded == 1 ? " holds" : " hold") +
         " attention_mask zeros (padding saved with the rows): TRL's collator builds its own attention_mask, "
         "of ones, and trains every input_id, so accumbench counts them as tokens too; save the rows unpadded to "
         "measure the job without them";
}

std::string idle_completion_only_loss_note(const WorkloadOptions& w) {
  if (w.data.completion_only_loss) return "";
  const bool file = w.data.lengths == LengthMode::kFile;
  if (file) {
    try {
      if (read_lengths_file(w.data.lengths_file, std::max<int64_t>(1, w.seq_len), false).unapplied_completion_masks > 0) {
        return "";
      }
    } catch (const UserError&) {
      return "";  // the run refuses the file with its own sentence
    }
  }
  return "--completion-only-loss false changes nothing here: it lets a lengths file's completion_mask count the "
         "prompts' labels, and " +
         (file ? "no row of " + w.data.lengths_file + " has one it would apply (a row's labels column, where it has "
                 "one, is taken as it is)"
               : std::string("there is no lengths file"));
}

std::string mean_of_means_note(const WorkloadOptions& w) {
  // Full windows hold T targets each: every micro-batch the same count, one update either way.
  if (w.loss.normalization != LossNormalization::kMeanOfMeans || !rows_are_samples(w.data)) return "";
  return "--loss-normalization mean-of-means divides each micro-batch's loss by its own targets, so splits whose "
         "micro-batches hold different numbers of them train different updates (the accumulation bug transformers "
         "fixed in 2024; `accumbench verify` with these options says by how much, and a Trainer since then "
         "normalizes by the whole batch's tokens); the times compare all the same, the loss costing what token "
         "normalization's does";
}

bool completion_mask_counts(const std::string& masked_by) {
  return masked_by.find("completion_mask") != std::string::npos;
}

bool completion_mask_counts(const DataSource& data, int64_t seq_len) {
  if (data.lengths != LengthMode::kFile || !data.completion_only_loss) return false;
  try {
    return completion_mask_counts(read_lengths_file(data.lengths_file, std::max<int64_t>(1, seq_len), true).masked_by);
  } catch (const UserError&) {
    return false;  // the run refuses the file with its own sentence
  }
}

std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

// transformers' get_length_grouped_indices (src/transformers/trainer_pt_utils.py), which the
// Trainer's LengthGroupedSampler calls with batch_size = train_batch_size ×
// gradient_accumulation_steps: a random permutation; megabatches of mega_batch_mult × batch_size
// samples, mega_batch_mult = min(n // (4 · batch_size), 50) and at least 1; each megabatch sorted
// by length, longest first (Python's sorted is stable, so is stable_sort); then the first element
// of the megabatch with the longest sample is swapped with the very first element, so the longest
// sample comes first and an out-of-memory shows at once. The permutation is ours (mt19937_64, not
// torch.randperm), so the order is transformers' rule, not its exact indices.
std::vector<int64_t> length_grouped_order(const std::vector<int64_t>& lengths, int64_t batch_size, uint64_t seed) {
  const auto n = static_cast<int64_t>(lengths.size());
  const int64_t mega_batch_mult = std::max<int64_t>(1, std::min<int64_t>(n / (batch_size * 4), 50));
  const int64_t megabatch_size = mega_batch_mult * batch_size;
  std::vector<int64_t> order = shuffled_order(n, seed);
  const auto longer = [&](int64_t a, int64_t b) { return lengths[static_cast<size_t>(a)] > lengths[static_cast<size_t>(b)]; };
  size_t longest_megabatch = 0;
  for (int64_t start = 0; start < n; start += megabatch_size) {
    const auto first = order.begin() + start;
    std::stable_sort(first, order.begin() + std::min(n, start + megabatch_size), longer);
    if (longer(*first, order[longest_megabatch])) longest_megabatch = static_cast<size_t>(start);  // argmax: first max
  }
  if (n > 0) std::swap(order[0], order[longest_megabatch]);
  return order;
}

double PaddingCount::fraction() const {
  return computed_positions > 0
             ? static_cast<double>(computed_positions - real_positions) / static_cast<double>(computed_positions)
             : 0.0;
}

PaddingCount count_padding(const std::vector<int64_t>& lengths, int64_t micro_batch, const DataSource& data,
                           int64_t seq_len) {
  return count_padding(lengths, micro_batch, data.padding, data.pad_multiple, seq_len);
}

PaddingCount count_padding(const std::vector<int64_t>& lengths, int64_t micro_batch, Padding padding,
                           int64_t pad_multiple, int64_t seq_len) {
  PaddingCount count;
  const auto n = static_cast<int64_t>(lengths.size());
  for (int64_t start = 0; start < n; start += micro_batch) {
    const auto first = lengths.begin() + start;
    const auto last = lengths.begin() + std::min(n, start + micro_batch);
    count.real_positions += std::accumulate(first, last, int64_t{0});
    count.computed_positions +=
        (last - first) * padded_length(padding, pad_multiple, *std::max_element(first, last), seq_len);
  }
  return count;
}

WorstMicroBatch worst_micro_batch(const std::vector<int64_t>& lengths, const DataSource& data, int64_t seq_len) {
  WorstMicroBatch worst;
  if (lengths.empty()) return worst;
  const auto longest = std::max_element(lengths.begin(), lengths.end());
  worst.sample = longest - lengths.begin();
  worst.length = std::min(*longest, seq_len);
  worst.padded_length = data.packing == Packing::kWrapped ? seq_len : padded_length(data, worst.length, seq_len);
  return worst;
}

std::vector<std::vector<int64_t>> pack_wrapped(const std::vector<std::vector<int64_t>>& samples, int64_t seq_len) {
  std::vector<std::vector<int64_t>> rows;
  std::vector<int64_t> row;
  for (const std::vector<int64_t>& sample : samples) {
    for (int64_t token : sample) {
      row.push_back(token);
      if (static_cast<int64_t>(row.size()) == seq_len) rows.push_back(std::move(row)), row.clear();
    }
  }
  if (!row.empty()) rows.push_back(std::move(row));
  return rows;
}

std::vector<PackedRow> pack_bfd_in_groups(const std::vector<int64_t>& lengths, int64_t seq_len) {
  std::vector<PackedRow> rows;
  const auto n = static_cast<int64_t>(lengths.size());
  for (int64_t first = 0; first < n; first += kBfdGroupSamples) {
    const std::vector<int64_t> group(lengths.begin() + first, lengths.begin() + std::min(n, first + kBfdGroupSamples));
    for (PackedRow& row : pack_bfd(group, seq_len)) {
      for (int64_t& sample : row.samples) sample += first;
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

// TRL's _pack_bfd (trl/data_utils.py, pack_dataset's default strategy "bfd"): samples longer
// than seq_length are truncated to it (list_slice; "bfd_split" would split them instead), empty
// ones dropped; the samples are sorted by length, longest first (a stable Arrow sort, ties in
// source order); each goes into the open bin with the least space left that still holds it, the
// bin that reached that space first among equals (a segment tree over spaces, a FIFO deque per
// space); when none holds it a new bin opens. Bins come out in the order they were opened.
// Our own code: an ordered map from space left to the bins with that space.
std::vector<PackedRow> pack_bfd(const std::vector<int64_t>& lengths, int64_t seq_len) {
  std::vector<int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  const auto clamped = [&](int64_t i) { return std::min(lengths[static_cast<size_t>(i)], seq_len); };
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return clamped(a) > clamped(b); });
  std::vector<PackedRow> bins;
  std::map<int64_t, std::deque<size_t>> bins_by_space;  // space left (1 .. seq_len - 1) -> bins, FIFO
  for (int64_t sample : order) {
    const int64_t length = clamped(sample);
    if (length <= 0) continue;
    size_t bin = bins.size();
    const auto best = bins_by_space.lower_bound(length);  // the least space that holds `length`
    if (best != bins_by_space.end()) {
      bin = best->second.front();
      best->second.pop_front();
      if (best->second.empty()) bins_by_space.erase(best);
    } else {
      bins.emplace_back();
    }
    bins[bin].samples.push_back(sample);
    bins[bin].length += length;
    const int64_t space = seq_len - bins[bin].length;
    if (space > 0) bins_by_space[space].push_back(bin);
  }
  return bins;
}

}  // namespace accumbench
