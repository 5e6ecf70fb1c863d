// One line per run, for spreadsheets and pandas: the CSV view of the column table (columns.cpp),
// then the workload every line shares (the model, the shape, the device and the options that
// change what was measured), so that the files of several sweeps concatenate into one table.
// Numbers are the shortest text that reads back to the same double; "not measured" (NaN, or a
// run that did not finish) is an empty field. Quoting follows RFC 4180; lines end in "\n" (every
// CSV reader accepts it, and it diffs cleanly).
#include <string>
#include <utility>
#include <vector>

#include "accumbench/report.hpp"
#include "report/columns.hpp"

namespace accumbench {

namespace {

std::string csv_field(const std::string& value) {
  if (value.find_first_of(",\"\r\n") == std::string::npos) return value;
  std::string quoted = "\"";
  for (char c : value) {
    if (c == '"') quoted += '"';  // a quote inside a quoted field is doubled
    quoted += c;
  }
  return quoted + "\"";
}

// The workload's options as the JSON context names them (describe_workload), every one in every
// file: a key that a sweep leaves out (those recorded only when not their default, and any option
// newer than the file `report` reads) is written as its default, or empty where there is none.
struct WorkloadColumn {
  const char* key;
  const char* absent;
};
constexpr WorkloadColumn kWorkloadColumns[] = {
    {"seed", ""},          {"lengths", ""},       {"padding", ""},        {"group_by_length", ""},
    {"packing", ""},       {"loss_normalization", ""}, {"optimizer", ""}, {"lr", ""},
    {"beta1", ""},         {"beta2", ""},         {"eps", ""},            {"weight_decay", ""},
    {"weights_dtype", ""}, {"lora_rank", ""},     {"lora_alpha", ""},     {"lora_targets", ""},
    {"lora_dropout", ""},  {"adapter_dtype", "fp32"}, {"base_quant", "none"}, {"double_quant", "-"},
    {"kbit_prep", "-"},    {"tf32", "on"}};

std::string option_or(const SweepContext& c, const std::string& key, const std::string& absent) {
  for (const auto& [name, value] : c.options)
    if (name == key) return value;
  // A quantised base recorded without kbit_prep was prepared as PEFT does (the default).
  if (key == "kbit_prep" && option_or(c, "base_quant", "none") != "none") return "peft";
  return absent;
}

}  // namespace

void CsvReporter::report(const SweepResult& result, std::ostream& out) const {
  using report::View;
  const std::vector<const report::ColumnDef*> columns = report::shown_columns(View::kCsv, result.runs, report::TableContext::of(result));
  const SweepContext& c = result.context;
  std::vector<std::pair<std::string, std::string>> workload = {
      {"model", c.model}, {"seq_len", std::to_string(c.seq_len)}, {"batch", std::to_string(c.batch)},
      {"device", c.device}, {"device_name", c.device_name}};
  for (const WorkloadColumn& w : kWorkloadColumns) workload.push_back({w.key, option_or(c, w.key, w.absent)});
  for (std::size_t i = 0; i < columns.size(); ++i) out << (i > 0 ? "," : "") << columns[i]->csv;
  for (const auto& [name, value] : workload) out << ',' << name;
  out << '\n';
  std::string shared;
  for (const auto& [name, value] : workload) shared += "," + csv_field(value);
  for (const RunResult& run : result.runs) {
    for (std::size_t i = 0; i < columns.size(); ++i) {
      out << (i > 0 ? "," : "") << csv_field(report::cell_text(*columns[i], View::kCsv, run, {}));
    }
    out << shared << '\n';
  }
}

}  // namespace accumbench
