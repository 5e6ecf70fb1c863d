// One line per run, for spreadsheets and pandas: the CSV view of the column table (columns.cpp),
// then the workload every line shares (the model, the shape, the device and the options that
// change what was measured, the same columns in every file), so that the files of several sweeps
// concatenate into one table.
// Numbers are the shortest text that reads back to the same double; "not measured" (NaN, or a
// run that did not finish) is an empty field. Quoting follows RFC 4180; lines end in "\n" (every
// CSV reader accepts it, and it diffs cleanly).
#include <string>
#include <utility>
#include <vector>

#include "accumbench/options.hpp"
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

}  // namespace

void CsvReporter::report(const SweepResult& result, std::ostream& out) const {
  using report::View;
  const report::TableContext context = report::TableContext::of(result);
  const std::vector<const report::ColumnDef*> columns = report::shown_columns(View::kCsv, result.runs, context);
  const SweepContext& c = result.context;
  // The workload: the context's own fields (the device as resolved), then every option the context
  // records (describe_workload) but the grid's (micro-batches, precisions, optimizers, dtypes, clipping,
  // padding, packing, grouping), which the run columns give; an option a sweep records only when set is its default where the file lacks
  // it (recorded_option), any option newer than the file `report` reads an empty field.
  // The model's parameters and those that train (the adapters' with LoRA), which say what the
  // split's time and memory are of; empty where the context has no count.
  const std::string parameters = c.parameters > 0 ? std::to_string(c.parameters) : "";
  const std::string trainable = c.parameters > 0 ? std::to_string(c.trainable_parameters) : "";
  std::vector<std::pair<std::string, std::string>> workload = {
      {"model", c.model},
      {"parameters", parameters},
      {"trainable_parameters", trainable},
      {"seq_len", std::to_string(c.seq_len)},
      {"batch", std::to_string(c.batch)},
      {"device", c.device},
      {"device_name", c.device_name}};
  // TF32 acts on CUDA's fp32 matrix products alone: "-" on the CPU, as lora_alpha without LoRA.
  const bool cuda = names_cuda(c.device);
  for (const std::string& name : workload_option_names()) {
    if (name == "model" || name == "seq_len" || name == "batch" || name == "micro_batches" || name == "device" ||
        name == "precisions" || name == "optimizer" || name == "weights_dtype" ||
        name == "adapter_dtype" || name == "max_grad_norm" || name == "padding" || name == "packing" ||
        name == "group_by_length")
      continue;
    if (name == "tf32" && !cuda) {
      workload.push_back({name, "-"});
      continue;
    }
    workload.push_back({name, recorded_option(c.options, name).value_or("")});
  }
  // What the sweep's options add that changes what was measured: the data source (a token file and
  // its documents' end id), the chunked loss's chunk, the memory limit (the fits column and the
  // splits skipped), the CPU threads and OpenMP's wait policy (times); empty in files older than them.
  for (const char* name : {"token_file", "eos_id", "loss_chunk_tokens", "memory_limit_bytes", "threads", "OMP_WAIT_POLICY"})
    workload.push_back({name, recorded_option(c.options, name).value_or("")});
  for (std::size_t i = 0; i < columns.size(); ++i) out << (i > 0 ? "," : "") << columns[i]->csv;
  for (const auto& [name, value] : workload) out << ',' << name;
  out << '\n';
  std::string shared;
  for (const auto& [name, value] : workload) shared += "," + csv_field(value);
  for (const RunResult& run : result.runs) {
    for (std::size_t i = 0; i < columns.size(); ++i) {
      // The label names the run as every report does (run_label): with a --precision, --padding or
      // --packing list, its value too, so that no two lines share one.
      // fits: empty without --memory-limit, as the JSON's null (nothing to fit in), but for a split
      // that ran out of the device's memory.
      const bool no_verdict = columns[i]->csv == "fits" && c.memory_limit_bytes <= 0 && run.fits;
      const std::string cell = columns[i]->csv == "label" ? run_label(run, result.runs)
                               : no_verdict              ? std::string()
                                                         : report::cell_text(*columns[i], View::kCsv, run, context);
      out << (i > 0 ? "," : "") << csv_field(cell);
    }
    out << shared << '\n';
  }
}

}  // namespace accumbench
