// accumbench: parses the command line and calls the library; nothing else (docs/ARCHITECTURE.md).
// The options that sweep, verify and plan share are registered once (add_workload_options), with
// each subcommand's defaults from workload_defaults(), so help and behaviour cannot drift.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <set>
#include <thread>

#include "accumbench/cpu_runtime.hpp"
#include "accumbench/error.hpp"
#include "accumbench/interrupt.hpp"
#include "accumbench/lengths.hpp"
#include "accumbench/model_config.hpp"
#include "accumbench/options.hpp"
#include "accumbench/plan.hpp"
#include "accumbench/plan_report.hpp"
#include "accumbench/report.hpp"
#include "accumbench/sweep.hpp"
#include "accumbench/trainer_config.hpp"
#include "accumbench/verify.hpp"

namespace ab = accumbench;

namespace {

bool stdout_is_tty() { return isatty(STDOUT_FILENO) != 0 && std::getenv("NO_COLOR") == nullptr; }
bool stderr_is_tty() { return isatty(STDERR_FILENO) != 0; }

// A file or directory option given as "" would silently write nothing, or read nothing.
const CLI::Validator kNonEmptyPath(
    [](std::string& value) { return value.empty() ? std::string("an empty path names no file; give a path") : std::string(); },
    "");

// An output file: a path (kNonEmptyPath), and not "-", which reads as stdout in many tools but here
// would be a file named "-" beside the table on stdout.
const CLI::Validator kOutputPath(
    [](std::string& value) {
      if (const std::string empty = kNonEmptyPath(value); !empty.empty()) return empty;
      return value == "-" ? std::string("- would write a file named \"-\" (stdout holds the table); give a file path")
                          : std::string();
    },
    "");

struct OutputFiles {
  std::string json, csv, markdown, html, trace;

  // `sweeping`: the files are rewritten as the sweep goes (report writes them once).
  void add_to(CLI::App* command, bool sweeping) {
    command->add_option("--json", json, sweeping ? "write the results as JSON (rewritten after every split)"
                                                 : "write the results as JSON (the current schema)")
        ->check(kOutputPath);
    command->add_option("--csv", csv, "write one CSV line per split")
        ->check(kOutputPath);
    command->add_option("--markdown", markdown, "write a Markdown table (the measurements that always matter, and every column that varies between splits)")
        ->check(kOutputPath);
    command->add_option("--html", html, "write a self-contained HTML report with charts")
        ->check(kOutputPath);
    command->add_option("--trace", trace, "write a Chrome/Perfetto trace (one process per split)")
        ->check(kOutputPath);
  }
  bool any() const { return !json.empty() || !csv.empty() || !markdown.empty() || !html.empty() || !trace.empty(); }
  std::vector<std::pair<std::string, std::string>> named() const {
    return {{"--json", json}, {"--csv", csv}, {"--markdown", markdown}, {"--html", html}, {"--trace", trace}};
  }
  // Before anything is measured: a path that cannot be written stops the command at once, and so
  // do two outputs in one file, or a report over the JSON read (`input`, named by `input_option`),
  // which the JSON alone may rewrite (--resume keeps writing its file).
  void require_writable(const std::string& input = "", const std::string& input_option = "") const {
    for (const auto& [option, path] : named()) {
      if (!path.empty()) ab::require_writable_file(path, option);
    }
    ab::require_distinct_files(
        {{input_option, input}, {"--csv", csv}, {"--markdown", markdown}, {"--html", html}, {"--trace", trace}});
    ab::require_distinct_files(named());
  }
  // One "wrote FILE" line on stderr per file, once they hold the final results (a sweep rewrites
  // them after every split; the lines come at the end); a file the last write failed is named in
  // an error line instead, and the result is 2.
  int announce() const {
    for (const std::string* path : {&json, &csv, &markdown, &html, &trace}) {
      if (!path->empty() && failed.count(*path) == 0) std::cerr << "accumbench: wrote " << *path << "\n";
    }
    for (const auto& [path, why] : failed) std::cerr << "accumbench: error: " << why << "\n";
    return failed.empty() ? 0 : 2;
  }
  // Writes every file it can: a full disk or a file that cannot be replaced stops none of the
  // others, nor the sweep (which saves again after its next split); `failed` holds the files the
  // last write could not replace, with why.
  void write(const ab::SweepResult& result) const {
    failed.clear();
    const auto attempt = [&](const std::string& path, const std::function<std::string()>& content) {
      if (path.empty()) return;
      try {
        ab::write_file_atomically(path, content());
      } catch (const std::exception& error) {
        failed[path] = error.what();
      }
    };
    attempt(json, [&] { return ab::to_json(result); });
    attempt(csv, [&] { return text_of(ab::CsvReporter(), result); });
    attempt(markdown, [&] { return text_of(ab::MarkdownReporter(), result); });
    attempt(html, [&] { return text_of(ab::HtmlReporter(), result); });
    attempt(trace, [&] { return text_of(ab::ChromeTraceReporter(), result); });
  }

 private:
  mutable std::map<std::string, std::string> failed;

  static std::string text_of(const ab::Reporter& reporter, const ab::SweepResult& result) {
    std::ostringstream out;
    reporter.report(result, out);
    return out.str();
  }
};

void print_note(const std::string& note);

// No output may replace a file the command reads (a --json over the --tokens file wrote the results
// over the data set): each output against each input.
void require_inputs_kept(const std::vector<std::pair<std::string, std::string>>& outputs,
                         const std::vector<std::pair<std::string, std::string>>& inputs) {
  for (const auto& output : outputs) {
    for (const auto& input : inputs) {
      if (!output.second.empty() && !input.second.empty()) ab::require_distinct_files({input, output});
    }
  }
}

// plan and verify take a sweep's command line as it is, and their own --json is another file's
// format: a sweep's results at that path (its json_schema_version near the top) are refused rather
// than replaced, since they cannot be measured again for free.
void require_no_sweep_results(const std::string& path, const std::string& command) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  if (head.find("\"json_schema_version\"") == std::string::npos) return;
  throw ab::UserError(path + " holds a sweep's results, which " + command + " --json would replace with its own; give " +
                      command + " --json another file");
}

// A list's values once each, in their first places; a repeat gets a note in `notes` ("--optimizer
// lists adamw more than once"), since it is more often another value mistyped than a wish.
template <typename Value, typename Name>
std::vector<Value> once_each(const std::string& flag, const std::vector<Value>& values, Name name,
                             std::vector<std::string>& notes) {
  std::vector<Value> seen, repeated;
  for (const Value& value : values) {
    const bool again = std::find(seen.begin(), seen.end(), value) != seen.end();
    if (again && std::find(repeated.begin(), repeated.end(), value) == repeated.end()) repeated.push_back(value);
    if (!again) seen.push_back(value);
  }
  if (repeated.empty()) return seen;
  std::string words;
  for (size_t i = 0; i < repeated.size(); ++i) {
    words += (i == 0 ? "" : i + 1 == repeated.size() ? " and " : ", ") + name(repeated[i]);
  }
  notes.push_back(flag + " lists " + words + " more than once; the repeats are dropped");
  return seen;
}

// A note on stderr (the results stay on stdout): what the options left out, and why.
void print_note(const std::string& note) {
  if (!note.empty()) std::cerr << "accumbench: note: " << note << "\n";
}

// A --padding list's values that pad every micro-batch alike (multiple:1 as longest, multiple:T as
// max) would measure the same splits twice: the later is dropped, with a note in `notes`.
void drop_paddings_that_pad_alike(ab::WorkloadOptions& w, std::vector<std::string>& notes) {
  const auto canonical = [&w](ab::PaddingChoice p) {
    if (p.padding == ab::Padding::kMultiple && p.multiple == 1) return ab::PaddingChoice{ab::Padding::kLongest, 0};
    if (ab::pads_every_row_to_t(p, w.seq_len)) return ab::PaddingChoice{ab::Padding::kMax, 0};
    return p;
  };
  const std::vector<ab::PaddingChoice> given = ab::grid_paddings(w);
  if (given.size() < 2) return;
  std::vector<ab::PaddingChoice> kept;
  for (const ab::PaddingChoice& p : given) {
    const auto alike = std::find_if(kept.begin(), kept.end(), [&](const ab::PaddingChoice& k) { return canonical(k) == canonical(p); });
    if (alike == kept.end()) {
      kept.push_back(p);
      continue;
    }
    notes.push_back("--padding " + ab::padding_name(p) + " pads every micro-batch as " + ab::padding_name(*alike) +
                    " does at --seq-len " + std::to_string(w.seq_len) + "; it is measured once, as " +
                    ab::padding_name(*alike));
  }
  ab::set_padding(w.data, kept.front());
  w.data.other_paddings.assign(kept.begin() + 1, kept.end());
}

// The workload options as CLI11 fills them (words), turned into typed options by apply().
struct WorkloadFlags {
  ab::Command command;
  ab::WorkloadOptions workload;
  std::vector<std::string> precisions;
  std::string lengths, normalization, memory_limit;
  std::vector<std::string> paddings;        // --padding (a list)
  std::vector<std::string> packings;        // --packing (a list)
  std::vector<std::string> groupings;       // --group-by-length (a list; {""} when given bare: true)
  std::vector<std::string> weights_dtypes;  // --weights-dtype (sweep: a list)
  std::string checkpointing = "-";  // "" when the option is given bare: blocks; "-" when not given
  std::string base_quant = "none";
  std::string kbit_prep = "peft";
  std::string completion_only_loss = "true";
  std::string distinct_steps = "2";
  std::vector<std::string> adapter_dtypes = {"fp32"};  // --adapter-dtype (sweep: a list)
  std::vector<double> max_grad_norms = {0};           // --max-grad-norm (a list)
  std::vector<std::string> optimizers;     // --optimizer (sweep: a list)
  std::string trl_config, axolotl_config;  // --trl-config, --axolotl-config (read_config)
  // The files the command reads, by option (after apply()), which no output may replace.
  std::vector<std::pair<std::string, std::string>> inputs() const {
    return {{"--tokens", workload.data.token_file},
            {"--lengths", workload.data.lengths == ab::LengthMode::kFile ? workload.data.lengths_file : ""},
            {"--hf-config", workload.model.hf_config},
            {"--trl-config", trl_config},
            {"--axolotl-config", axolotl_config}};
  }
  CLI::App* cli = nullptr;                 // the subcommand: which options were given
  // Whether `option` was given on the command line (not a default, not a trainer config's).
  bool given(const std::string& option) const {
    const CLI::Option* o = cli == nullptr ? nullptr : cli->get_option_no_throw(option);
    return o != nullptr && o->count() > 0;
  }
  // The trainer config's settings that took effect (not overridden on the command line) and its
  // path, set by read_config: a value refused later under an option's name names the key too.
  mutable std::vector<ab::ConfigSetting> file_settings;
  mutable std::string file_path;
  // What reading the options noted (a trainer config as read and what it left out, a list's repeats
  // dropped), said by the command with its other notes once its checks have passed
  // (take_option_notes), so that a refusal stays stderr's one line.
  mutable std::vector<std::string> option_notes;
  std::vector<std::string> take_option_notes() const {
    std::vector<std::string> notes;
    notes.swap(option_notes);
    return notes;
  }

  // `message` (a UserError's) with the file and key behind the option it starts with, when a
  // trainer config set that option: "--lr must be ..., got -1" said of `learning_rate: -1`.
  std::string naming_file_key(const std::string& message) const {
    // The option the message starts with, else one it names with the file's value ("cannot be
    // combined with --max-grad-norm 1"): a setting of the file either way.
    // The option it starts with first: "--padding multiple:64 pads ... past --seq-len 32" is the
    // padding's doing (axolotl's default pad_to_multiple_of), though the file set --seq-len too.
    const auto starts = [&message](const ab::ConfigSetting& s) { return message.rfind(s.option + " ", 0) == 0; };
    const auto mentions = [&message](const ab::ConfigSetting& s) {
      return !s.value.empty() && message.find(" " + s.option + " " + s.value + " ") != std::string::npos;
    };
    const auto first = std::find_if(file_settings.begin(), file_settings.end(), starts);
    for (const ab::ConfigSetting& s : file_settings) {
      if (first != file_settings.end() ? &s != &*first : !mentions(s)) continue;
      const std::string source = s.by_default ? "the trainer's default for " + s.keys + ", which it leaves out" : s.keys;
      return message + " (" + file_path + " sets " + s.option + (s.value.empty() ? "" : " " + s.value) + " from " +
             source + "; " + (s.by_default ? "set the key" : "fix the key") + " in the file, or give " + s.option +
             " on the command line, which wins)";
    }
    return message;
  }
  // Whether the padding was chosen: given on the command line or set by a trainer config.
  bool padding_chosen() const {
    return given("--padding") || std::any_of(file_settings.begin(), file_settings.end(),
                                             [](const ab::ConfigSetting& s) { return s.option == "--padding"; });
  }

  bool one_job = false;  // calibrate-framework: one precision and dtype each (the sweep's defaults otherwise)

  explicit WorkloadFlags(ab::Command c) : command(c), workload(ab::workload_defaults(c)) {
    precisions = {ab::join_precisions(workload.precisions)};
    lengths = ab::to_string(workload.data.lengths);
    normalization = ab::to_string(workload.loss.normalization);
    weights_dtypes = {ab::to_string(workload.weights_dtype)};
    paddings = {ab::padding_name(workload.data)};
    packings = {ab::to_string(workload.data.packing)};
    optimizers = {ab::to_string(workload.optimizer.kind)};
  }

  // Throws UserError (exit 2) on a word that names no value.
  ab::WorkloadOptions apply() {
    ab::WorkloadOptions& w = workload;
    const auto dtype_name = [](ab::Precision p) { return ab::to_string(p); };
    std::vector<ab::Precision> given_precisions;
    for (const std::string& p : precisions) given_precisions.push_back(ab::precision_from_string(p));
    w.precisions = once_each("--precision", given_precisions, dtype_name, option_notes);
    ab::set_lengths(w.data, lengths);
    // The first is the data's padding, the rest the grid's others.
    std::vector<ab::PaddingChoice> choices;
    for (const std::string& name : paddings) choices.push_back(ab::padding_from_string(name));
    if (choices.empty()) throw ab::UserError("--padding needs at least one padding, as in --padding longest");
    ab::set_padding(w.data, choices.front());
    w.data.other_paddings.assign(choices.begin() + 1, choices.end());
    // The first is the data's packing, the rest the grid's others.
    std::vector<ab::Packing> given_packings;
    for (const std::string& name : packings) given_packings.push_back(ab::packing_from_string(name));
    if (given_packings.empty()) throw ab::UserError("--packing needs at least one packing, as in --packing bfd");
    // Once each before anything reads the list (calibrate-framework refuses a list of more than one).
    const std::vector<ab::Packing> packed =
        once_each("--packing", given_packings, [](ab::Packing p) { return ab::to_string(p); }, option_notes);
    w.data.packing = packed.front();
    w.data.other_packings.assign(packed.begin() + 1, packed.end());
    if (given("--group-by-length")) {  // else false, or a trainer config's (read_config)
      std::vector<bool> given_groupings;
      for (const std::string& name : groupings) given_groupings.push_back(name.empty() || ab::grouping_from_string(name));
      const std::vector<bool> grouped =
          once_each("--group-by-length", given_groupings, [](bool g) { return std::string(g ? "true" : "false"); }, option_notes);
      w.data.group_by_length = grouped.front();
      w.data.other_groupings.assign(grouped.begin() + 1, grouped.end());
    }
    w.data.completion_only_loss = ab::completion_only_loss_from_string(completion_only_loss);
    if (given("--distinct-steps")) w.data.distinct_steps = ab::distinct_steps_from_string(distinct_steps);
    w.loss.normalization = ab::loss_normalization_from_string(normalization);
    // The first is the workload's weights dtype, the rest the grid's others.
    std::vector<ab::Precision> dtypes;
    for (const std::string& name : weights_dtypes) dtypes.push_back(ab::weights_dtype_from_string(name));
    if (dtypes.empty()) throw ab::UserError("--weights-dtype needs at least one dtype, as in --weights-dtype bf16");
    w.weights_dtype = dtypes.front();
    w.grid.other_weights_dtypes.assign(dtypes.begin() + 1, dtypes.end());
    // The first is the workload's optimizer, the rest the grid's others.
    std::vector<ab::OptimizerKind> kinds;
    for (const std::string& name : optimizers) kinds.push_back(ab::optimizer_kind_from_string(name));
    if (kinds.empty()) throw ab::UserError("--optimizer needs at least one optimizer, as in --optimizer adamw");
    w.optimizer.kind = kinds.front();
    w.grid.other_optimizers.assign(kinds.begin() + 1, kinds.end());
    if (!memory_limit.empty()) {
      w.memory_limit_bytes = ab::parse_memory_limit(memory_limit);
      // 0 is the workload's "no limit": a limit of nothing would silently be none.
      if (w.memory_limit_bytes == 0)
        throw ab::UserError("--memory-limit " + memory_limit + " leaves no memory for any split; give the memory a "
                            "split may use, e.g. 16GiB, or drop the option for no limit");
    }
    const bool checkpointing_given = checkpointing != "-";
    w.grid.checkpointing = !checkpointing_given  ? ab::Checkpointing::kNone
                           : checkpointing.empty() ? ab::Checkpointing::kBlocks
                                                   : ab::checkpointing_from_string(checkpointing);
    w.lora.base_quant = ab::base_quant_from_string(base_quant);
    w.lora.kbit_upcast = ab::kbit_upcast_from_string(kbit_prep);
    std::vector<ab::Precision> adapters;
    for (const std::string& name : adapter_dtypes) adapters.push_back(ab::adapter_dtype_from_string(name));
    if (adapters.empty()) throw ab::UserError("--adapter-dtype needs at least one dtype, as in --adapter-dtype bf16");
    w.lora.adapter_dtype = adapters.front();
    w.grid.other_adapter_dtypes.assign(adapters.begin() + 1, adapters.end());
    // The first is the optimizer's norm (a trainer config's, when the option is not given), the rest the grid's others.
    if (max_grad_norms.empty()) throw ab::UserError("--max-grad-norm needs at least one norm, as in --max-grad-norm 1 (0: no clipping)");
    w.optimizer.max_grad_norm = max_grad_norms.front();
    w.grid.other_max_grad_norms.assign(max_grad_norms.begin() + 1, max_grad_norms.end());
    // A trainer config's gradient_checkpointing counts as given: the file says what runs.
    const bool config_checkpointing = read_config(w);
    ab::apply_base_quant_defaults(w, checkpointing_given || config_checkpointing);
    // --lengths fixed is also the default, which a token file's documents replace: typed, it says
    // otherwise than --eos-id (validate_workload refuses the other --lengths beside it).
    if (given("--lengths") && w.data.lengths == ab::LengthMode::kFixed && w.data.eos_id >= 0 && !w.data.token_file.empty()) {
      throw ab::UserError("--lengths fixed and --eos-id both give the sample lengths (--eos-id takes the documents of " +
                          w.data.token_file + " as the samples); drop --lengths fixed, or drop --eos-id for full windows "
                          "of --seq-len + 1 tokens");
    }
    w.micro_batches = once_each("--micro-batches", w.micro_batches, [](int64_t m) { return std::to_string(m); }, option_notes);
    once_each("--weights-dtype", dtypes, dtype_name, option_notes);  // the grid keeps these once (first_then_others)
    once_each("--optimizer", kinds, [](ab::OptimizerKind k) { return ab::to_string(k); }, option_notes);
    once_each("--adapter-dtype", adapters, dtype_name, option_notes);
    once_each("--max-grad-norm", max_grad_norms, [](double norm) { return ab::text::format_number(norm); }, option_notes);
    once_each("--padding", choices, [](const ab::PaddingChoice& p) { return ab::padding_name(p); }, option_notes);
    drop_paddings_that_pad_alike(w, option_notes);
    if (given("--model") && given("--hf-config")) {
      option_notes.push_back("--hf-config " + w.model.hf_config + " names the model, so --model " + w.model.preset +
                             " is not used; give one of the two");
    }
    // --lora-targets as a list of names (a trainer config's regular expression is kept as written).
    if (w.lora.targets.find_first_of("()[]{}|*+?\\^$") == std::string::npos) {
      std::vector<std::string> names;
      std::stringstream list(w.lora.targets);
      for (std::string name; std::getline(list, name, ',');) names.push_back(name);
      const std::vector<std::string> kept = once_each("--lora-targets", names, [](const std::string& n) { return n; }, option_notes);
      if (kept.size() < names.size()) {
        w.lora.targets.clear();
        for (const std::string& name : kept) w.lora.targets += (w.lora.targets.empty() ? "" : ",") + name;
      }
    }
    return w;
  }

 private:
  // Returns whether the file set --activation-checkpointing (a config always does: its key or
  // the trainer's default).
  bool read_config(ab::WorkloadOptions& w) const;
};

// `w` with the precisions and weights dtypes of every run of `result` too (a resumed file's kept
// runs of a dtype this sweep does not measure): what the device's bf16 caveat is said of.
ab::WorkloadOptions with_dtypes_of_runs(ab::WorkloadOptions w, const ab::SweepResult& result) {
  for (const ab::RunResult& run : result.runs) {
    const ab::SplitConfig& c = run.config;
    if (std::find(w.precisions.begin(), w.precisions.end(), c.precision) == w.precisions.end()) w.precisions.push_back(c.precision);
    const std::vector<ab::Precision> dtypes = ab::grid_weights_dtypes(w);
    if (std::find(dtypes.begin(), dtypes.end(), c.weights_dtype) == dtypes.end()) w.grid.other_weights_dtypes.push_back(c.weights_dtype);
  }
  return w;
}

// A sweep that padded samples to T by default (--padding not chosen) while some run computed
// padding: TRL's and transformers' collators pad to the micro-batch's longest sample, which can
// change the ranking; "" otherwise (fixed lengths, packed rows, a padding chosen).
std::string padding_to_t_note(const ab::SweepResult& result) {
  bool padded = false, wrapped = false;
  for (const ab::RunResult& run : result.runs) {
    if (run.config.padding.per_micro_batch()) return "";
    // Packed rows pad only their tails, which TRL's padding-free collator does not pad at all.
    padded = padded || (run.status == ab::RunStatus::kOk && run.config.packing == ab::Packing::kNone &&
                        run.padding_fraction > 0);
    wrapped = wrapped || run.config.packing == ab::Packing::kWrapped;
  }
  if (!padded) return "";
  // A --padding list is refused beside wrapped in a --packing list (its rows are always T long).
  return std::string("every sample was padded to T (--padding max, the default), but TRL's and transformers' collators "
                     "pad each micro-batch to its longest sample, where smaller micro-batches pad less: ") +
         (wrapped ? "--padding longest measures that (a --padding list is refused beside --packing wrapped, whose rows "
                    "are always T long: drop wrapped to measure both in the same rounds)"
                  : "--padding max,longest measures both in the same rounds");
}

// What the model's config means at this --seq-len: a sliding window it does not apply, positions
// beyond max_position_embeddings; dropout it does not run; 16-bit stored weights trained in fp32.
// Worded before a run: re-reading the config after could fail.
std::vector<std::string> shape_notes(const ab::ModelConfig& cfg, const ab::WorkloadOptions& w) {
  return {ab::sliding_window_note(cfg, w.seq_len), ab::context_length_note(cfg, w.seq_len), ab::dropout_note(cfg),
          // A 4-bit base prepared by PEFT holds every other parameter in fp32 whatever the dtype
          // (idle_weights_dtype_note): no dtype to name (helper-107: the two notes disagreed).
          w.lora.quantized() && w.lora.kbit_upcast ? std::string() : ab::stored_dtype_note(cfg, ab::grid_weights_dtypes(w)),
          ab::lora_rank_note(cfg, w.lora)};
}

// The shell's exit status for a run stopped by a signal: 128 + its number (130 for Ctrl-C); a rank
// stopped by another rank's signal exits as if terminated (143).
int interrupted_exit_code() { return 128 + (ab::stop_signal() != 0 ? ab::stop_signal() : SIGTERM); }

// The data-parallel world this process was launched into (torchrun's WORLD_SIZE; 1 without it),
// for notes only: the runners read and check the launch environment themselves.
int launched_world_size() {
  const char* text = std::getenv("WORLD_SIZE");
  return text != nullptr && std::atoi(text) > 1 ? std::atoi(text) : 1;
}

// --trl-config / --axolotl-config: the file's settings, except the options given on the command
// line; what was read goes to stderr as notes (rank 0 only under torchrun).
bool WorkloadFlags::read_config(ab::WorkloadOptions& w) const {
  if (trl_config.empty() && axolotl_config.empty()) return false;
  const bool trl = !trl_config.empty();
  // The effective batch counts every data-parallel process: plan's --world-size, or torchrun's.
  const int world = command == ab::Command::kPlan ? w.world_size : launched_world_size();
  ab::TrainerConfig config = ab::read_trainer_config(trl ? trl_config : axolotl_config,
                                                     trl ? ab::ConfigFormat::kTrl : ab::ConfigFormat::kAxolotl, world);
  if (command == ab::Command::kPlan) {
    // The optimizer's hyperparameters change no tensor's size: plan takes none of them, so the
    // file's are neither applied, checked nor named (nor the defaults it leaves out).
    // (The seed stays: it draws --lengths variable's samples, whose lengths plan judges.)
    static const std::set<std::string> kNotPlanned = {"--lr", "--weight-decay", "--beta1", "--beta2", "--adam-eps"};
    const auto not_planned = [](const std::string& option) { return kNotPlanned.count(option) != 0; };
    auto& settings = config.settings;
    settings.erase(std::remove_if(settings.begin(), settings.end(),
                                  [&](const ab::ConfigSetting& s) { return not_planned(s.option); }),
                   settings.end());
    auto& remarks = config.remarks;  // a remark about those options alone
    remarks.erase(std::remove_if(remarks.begin(), remarks.end(),
                                 [&](const ab::TrainerConfig::Remark& r) {
                                   return !r.options.empty() && std::all_of(r.options.begin(), r.options.end(), not_planned);
                                 }),
                  remarks.end());
  }
  const auto given = [this](const std::string& option) { return this->given(option); };
  // trl sft and axolotl stop without a model; accumbench's default model would be planned in silence.
  const bool names_model = std::any_of(config.settings.begin(), config.settings.end(), [](const ab::ConfigSetting& s) {
    return s.option == "--model" || s.option == "--hf-config";
  });
  if (!names_model && !given("--model") && !given("--hf-config")) {
    throw ab::UserError((trl ? trl_config : axolotl_config) + " names no model (" +
                        (trl ? "model_name_or_path" : "base_model") +
                        "), which the trainer needs too; add the key, or give --model or --hf-config");
  }
  ab::apply_trainer_config(config, w, given, ab::cuda_attached());
  file_path = trl ? trl_config : axolotl_config;
  for (const ab::ConfigSetting& s : config.settings)
    if (!given(s.option)) file_settings.push_back(s);
  const char* rank = std::getenv("RANK");
  const bool sets_checkpointing =
      !given("--activation-checkpointing") &&
      std::any_of(config.settings.begin(), config.settings.end(),
                  [](const ab::ConfigSetting& s) { return s.option == "--activation-checkpointing"; });
  if (rank != nullptr && std::atoi(rank) != 0) return sets_checkpointing;
  const std::vector<std::string> read_notes = ab::trainer_config_notes(config, given, w);
  option_notes.insert(option_notes.end(), read_notes.begin(), read_notes.end());
  // plan models TRL's own chunked_nll (PlanCommand::adopt_trl_loss); the engine's heads differ.
  // calibrate-framework (one_job) times a loop's host time around either head, and refuses
  // --chunked-loss: nothing to note there.
  if (command != ab::Command::kPlan && !one_job && config.trl_loss_by_default && !w.loss.chunked) {
    const std::string subcommand = command == ab::Command::kSweep ? "sweep" : "verify";
    option_notes.push_back(trl_config + " leaves out loss_type: TRL 1.7+ then runs chunked_nll, which never holds the "
                           "whole logits; this " + subcommand + " runs accumbench's full-logits head (TRL's nll), whose "
                           "peaks are higher by up to the logits. plan --trl-config plans TRL's own loss; --chunked-loss "
                           "adds accumbench's chunked head, the engine's nearest");
  }
  return sets_checkpointing;
}

// --emit: a split's settings in the user's trainer, ready to paste, after a blank line ("#" lines
// are YAML comments).
const char* const kEmitHelp =
    "also print the settings of %s per rank, ready to paste: trl (SFTConfig YAML for trl sft --config; the "
    "same keys as its --flags), axolotl (its YAML keys) or args (accumbench's own flags)";

std::string emit_help(const std::string& which) {
  std::string help = kEmitHelp;
  return help.replace(help.find("%s"), 2, which);
}

void print_emitted(const std::string& emit, const std::string& heading, const ab::TrainerSettings& settings) {
  if (emit.empty()) return;
  std::cout << "\n# " << heading << "\n";
  for (const std::string& line : ab::settings_lines(settings, ab::settings_format_from_string(emit))) {
    std::cout << line << "\n";
  }
}

// The legend of the split labels, under the options of sweep, plan and verify.
const char* const kSplitLegend =
    "Splits read micro-batch x accumulation steps (per rank), then the knobs that are on: ckpt = activation "
    "checkpointing, oib = the optimizer inside backward, chunked-ce = the chunked cross-entropy, graphs = replayed "
    "from CUDA graphs; then, in sweep and verify, the optimizer unless it is adamw (adamw8bit, sgd, ...) and the "
    "weights' dtype unless it is fp32 (bf16-weights, fp16-weights).";

// Which model, and the seed of its random weights and tokens (plan: of the samples --lengths
// variable draws, whose lengths decide the activations; the weights' values change no size).
void add_model_options(CLI::App* command, WorkloadFlags& f) {
  ab::ModelOptions& model = f.workload.model;
  command->add_option("--model", model.preset, "model preset (see `accumbench models`)")->capture_default_str();
  command->add_option("--hf-config", model.hf_config,
                      "model_type gpt2, llama, qwen2, qwen3, mistral; a config.json, a model directory, or a Hub id from the local cache; overrides --model");
  command->add_option("--seed", model.seed,
                      f.command == ab::Command::kPlan
                          ? "seed of the samples --lengths variable draws, as sweep draws them (their lengths decide "
                            "the activations; nothing else in the plan depends on it)"
                          : "seed of the random weights and tokens")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            return !value.empty() && value[0] == '-' ? value + " is negative; give a seed of 0 or more" : "";
          },
          ""))
      ->capture_default_str();
}

// How a subcommand takes a list of precisions, optimizers or dtypes: sweep runs, plan plans and
// verify checks every split in each ("in each precision"; verify each job against its own reference);
// calibrate-framework measures one job (calibrate_framework refuses a list).
std::string list_help(const WorkloadFlags& f, const std::string& each) {
  if (f.one_job) return "; one value: calibrate-framework measures one job";
  const char* verb = f.command == ab::Command::kSweep ? "sweeps" : f.command == ab::Command::kPlan ? "plans" : "verifies";
  return std::string("; a list ") + verb + " each (every split " + each + ")";
}

void add_shape_options(CLI::App* command, WorkloadFlags& f) {
  ab::WorkloadOptions& w = f.workload;
  const bool sweep = f.command == ab::Command::kSweep;
  command->add_option("--seq-len", w.seq_len, "sequence length T")->capture_default_str();
  command->add_option("--batch", w.batch, "effective batch per optimizer step, in sequences")->capture_default_str();
  command->add_option("--micro-batches,--micro-batch", w.micro_batches,
                      std::string(sweep ? "micro-batch sizes to try" : "micro-batch sizes") +
                          " (default: every divisor of --batch)")
      ->delimiter(',');
  command->add_option("--device", w.device,
                      f.command == ab::Command::kPlan ? "auto, cpu, cuda or cuda:N (attention kind, memory, calibration)"
                                                      : "auto, cpu, cuda or cuda:N")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            // cuda:N with N a GPU index; LibTorch would throw on cuda:x, cuda: or cuda:1abc.
            const bool index = value.size() > 5 && value.size() <= 8 && value.rfind("cuda:", 0) == 0 &&
                               std::all_of(value.begin() + 5, value.end(),
                                           [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
            if (value == "auto" || value == "cpu" || value == "cuda" || index) return "";
            return "\"" + value + "\" names no device; use auto, cpu, cuda or cuda:N (N a GPU index: 0, 1, ...)";
          },
          ""))
      ->capture_default_str();
  command->add_option("--precision", f.precisions,
                      std::string(sweep ? "fp32, bf16 (autocast) or fp16 (autocast + loss scaling, CUDA)"
                                        : "fp32, bf16 or fp16 (autocast)") +
                          list_help(f, "in each precision"))
      ->delimiter(',')
      ->capture_default_str();
}

// What a subcommand does with each split: "run", "check" or "plan" it.
std::string verb(ab::Command command) {
  return command == ab::Command::kSweep ? "run" : command == ab::Command::kVerify ? "check" : "plan";
}

const char* const kLengthsHelp =
    "fixed, variable (uniform in [T/4, T]), or a lengths file: one length per line, or JSONL rows with input_ids or "
    "length (lengths above T are cut to T)";

void add_data_and_loss_options(CLI::App* command, WorkloadFlags& f) {
  ab::WorkloadOptions& w = f.workload;
  if (f.command != ab::Command::kPlan) {
    command->add_option("--lengths", f.lengths, kLengthsHelp)->capture_default_str();
    command->add_option("--loss-normalization", f.normalization, "token (correct) or mean-of-means (the bug)")
        ->capture_default_str();
  }
  command->add_flag("--chunked-loss", w.loss.chunked,
                    "also " + verb(f.command) +
                        " every split with the chunked cross-entropy (no (b*T, V) logits; the head's gradients are "
                        "computed in the forward)");
  command->add_option("--loss-chunk-tokens", w.loss.chunk_tokens,
                      "tokens per chunk of the chunked loss (0: at least 1024, at most 16 chunks per micro-batch)")
      ->capture_default_str();
}

// Real data: how samples are padded, ordered and packed (plan: which lengths to judge memory on).
void add_real_data_options(CLI::App* command, WorkloadFlags& f) {
  if (f.command == ab::Command::kPlan) command->add_option("--lengths", f.lengths, kLengthsHelp)->capture_default_str();
  command->add_option("--padding", f.paddings,
                      "max (every sample to T), longest (each micro-batch to its longest sample, TRL's default) or "
                      "multiple:N (that, rounded up to a multiple of N)" +
                          list_help(f, "padded each way: the same update, other shapes"))
      ->delimiter(',')
      ->capture_default_str();
  // Bare, it is the flag it always was (true); with values, a list of true and false.
  command->add_option("--group-by-length", f.groupings,
                      "order samples as transformers' LengthGroupedSampler (megabatches of the step's samples, sorted by "
                      "length, the longest first); bare: true; false: a seeded random order" +
                          (f.command == ab::Command::kPlan && !f.one_job
                               ? std::string("; a list (false,true) is planned once, as the random order (its longest micro-batch may "
                                           "come after the first, with the gradients)")
                               : list_help(f, std::string("on each order's steps of the same samples") +
                                                  (f.command == ab::Command::kSweep ? ", compared per real token" : ""))))
      ->expected(0, 8)
      ->delimiter(',');
  command->add_option("--packing", f.packings,
                      "none (one sample per row), wrapped (samples concatenated and cut into rows of T; attention "
                      "crosses documents) or bfd (whole samples packed best-fit-decreasing into rows of T, as TRL; "
                      "attention and positions restart at each)" +
                          list_help(f, "on each packing's rows of the same samples, compared per real token"))
      ->delimiter(',')
      ->capture_default_str();
  const char* const steps_help =
      f.command == ab::Command::kSweep
          ? "the steps of data every split cycles through: a number, or epoch (one pass over the lengths or token "
            "file); every split is timed on each when --steps reaches it. Default 2: the rounds alternate between two"
      : f.command == ab::Command::kVerify
          ? "verify this many steps of the data, each split against each step's whole batch: a number, or epoch "
            "(every step of one pass over the lengths file). Default: the first step"
          : "the steps of data the sweep keeps (on the CPU their batches are device memory): a number, or epoch "
            "(one pass over the lengths file). Default 2";
  command->add_option("--distinct-steps", f.distinct_steps, steps_help)->type_name("N|epoch");
  command->add_option("--completion-only-loss", f.completion_only_loss,
                      "true: a lengths file's completion_mask leaves the prompts' labels out of the loss (TRL's "
                      "default for prompt-completion data); false: they count. A labels column (-100: left out) and "
                      "assistant_masks apply either way")
      ->capture_default_str();
}

void add_grid_options(CLI::App* command, WorkloadFlags& f) {
  ab::WorkloadOptions& w = f.workload;
  command->add_flag("--knobs", w.grid.knobs,
                    "also " + verb(f.command) +
                        " each split with activation checkpointing (unless every split has it), and with the "
                        "optimizer inside backward (at accumulation 1)");
  // A value, as the README and the JSON name it; given bare (the older flag), blocks.
  command->add_option("--activation-checkpointing", f.checkpointing,
                      "none or blocks: " + verb(f.command) +
                          " every split with each transformer block checkpointed (its input kept, the block "
                          "recomputed in backward; Trainer's gradient_checkpointing); default none (blocks with "
                          "--base-quant, as PEFT's prepare_model_for_kbit_training), bare: blocks")
      ->expected(0, 1)
      ->type_name("none|blocks");  // no captured default: CLI11 would give it to the bare option
  command->add_flag("--optimizer-in-backward", w.grid.optimizer_in_backward,
                    verb(f.command) +
                        " every split with AdamW inside backward (each parameter steps once its gradient is "
                        "complete); only the split without accumulation can, so the others are left out, with a "
                        "note");
  if (f.command != ab::Command::kPlan) {
    command->add_flag("--cuda-graphs", w.grid.cuda_graphs,
                      "also " + verb(f.command) +
                          " every split replayed from CUDA graphs (forward and backward captured once per split; "
                          "CUDA only)");
  }
}

// LoRA and the weights' storage dtype: what trains, and in what the weights are kept.
void add_training_options(CLI::App* command, WorkloadFlags& f) {
  ab::WorkloadOptions& w = f.workload;
  command->add_option("--weights-dtype", f.weights_dtypes,
                      "dtype the weights are stored in: fp32, bf16 or fp16 (fp16: CUDA); with LoRA the frozen base's "
                      "(the adapters': --adapter-dtype)" +
                          list_help(f, "with the weights in each dtype"))
      ->delimiter(',')
      ->capture_default_str();
  // calibrate-framework steps AdamW on both sides whatever is given (a note says so).
  const std::string optimizer_count =
      f.one_job ? "; calibrate-framework steps adamw on both sides (the optimizer runs once per step, outside the "
                  "time per micro-step)"
                : list_help(f, "with each optimizer");
  command->add_option("--optimizer", f.optimizers,
                      "adamw (torch.optim.AdamW with the fused kernel on CUDA, one tensor at a time on the CPU: "
                      "transformers' adamw_torch_fused), adamw-foreach (torch.optim.AdamW's default kernels on CUDA, "
                      "transformers' adamw_torch there: the same update, and a copy of what trains during the step), "
                      "adamw8bit (bitsandbytes' 8-bit blockwise AdamW: uint8 moments, "
                      "one fp32 scale per 256; emulated with LibTorch ops, so its memory is exact and its time "
                      "approximate), paged-adamw8bit (the same, its state paged: evictable on CUDA), paged-adamw32bit "
                      "(bitsandbytes' paged 32-bit AdamW: fp32 moments, paged; emulated the same way) or sgd (no "
                      "momentum, no state; transformers' optim=sgd)" + optimizer_count)
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("--max-grad-norm", f.max_grad_norms,
                      "clip each step's gradient to this global L2 norm before the optimizer, as the Trainer's "
                      "max_grad_norm (torch.nn.utils.clip_grad_norm_; a --trl-config or --axolotl-config leaving "
                      "the key out clips at 1); 0: no clipping. The optimizer inside backward cannot clip" +
                          list_help(f, "clipped at each norm, 0 not at all"))
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("--lora-rank", w.lora.rank, "LoRA rank on a frozen base (0: full fine-tuning)")
      ->capture_default_str();
  command->add_option("--lora-alpha", w.lora.alpha, "LoRA alpha, at most 1e6; the adapters are scaled by alpha / rank (default and 0: 2 x rank)");
  command->add_option("--lora-targets", w.lora.targets,
                      "all-linear (every block linear, not the LM head), attention, mlp, or a comma list of the "
                      "model's linears (q,k,v,o,gate,up,down; GPT-2: c_attn,c_proj,c_fc)")
      ->capture_default_str();
  command->add_flag("--lora-rslora", w.lora.rslora,
                    "scale the adapters by alpha / sqrt(rank), as PEFT's use_rslora (rank-stabilized LoRA), not alpha / "
                    "rank: the update's size, not the step's time or memory");
  command->add_option("--lora-dropout", w.lora.dropout,
                      "dropout on each adapter's input (trl sft --use_peft defaults to 0.05)")
      ->capture_default_str();
  // QLoRA (src/models/quantized_linear.cpp): the frozen base as bitsandbytes stores it.
  command->add_option("--base-quant", f.base_quant,
                      "with LoRA, the frozen base's block linears stored quantised as bitsandbytes does: none, nf4 "
                      "(load_in_4bit, bnb_4bit_quant_type=nf4) or int8 (load_in_8bit); the other parameters in fp32 "
                      "and checkpointing on, as PEFT's prepare_model_for_kbit_training; time is approximate (LibTorch "
                      "ops, not bitsandbytes' kernels)")
      ->capture_default_str();
  command->add_flag("--double-quant", w.lora.double_quant,
                    "with --base-quant nf4, quantise the absmax again (bnb_4bit_use_double_quant)");
  command->add_option("--kbit-prep", f.kbit_prep,
                      "with --base-quant, how the other parameters are kept: peft (prepare_model_for_kbit_training "
                      "casts them to fp32 and turns checkpointing on) or none (they stay in --weights-dtype, as TRL "
                      "1.x's SFTTrainer and axolotl leave them)")
      ->capture_default_str();
  command->add_option("--adapter-dtype", f.adapter_dtypes,
                      "with LoRA, the dtype of the adapters, their gradients and AdamW moments: fp32 (PEFT's "
                      "autocast_adapter_dtype) or bf16 (TRL 1.x's SFTTrainer over a quantised base; PEFT's "
                      "autocast_adapter_dtype=False over a bf16 base)" +
                          list_help(f, "with the adapters in each dtype"))
      ->delimiter(',')
      ->capture_default_str();
}

void add_run_options(CLI::App* command, WorkloadFlags& f) {
  ab::WorkloadOptions& w = f.workload;
  if (f.command != ab::Command::kVerify) {
    command->add_option("--memory-limit,--memory", f.memory_limit,
                        f.command == ab::Command::kPlan
                            ? "device memory to fit in, with its unit: 16GiB, 16GB (default: the CUDA device's own; none "
                              "on the CPU)"
                            : "cap usable memory, with its unit: 16GiB, 16GB (CUDA: allocator fraction; CPU: counting "
                              "allocator)");
  }
  if (f.command == ab::Command::kPlan) {
    command->add_option("--world-size", w.world_size,
                        "data-parallel ranks: plan one rank's share of --batch, with the all-reduce buckets")
        ->capture_default_str();
    return;
  }
  command->add_option("--threads", w.threads,
                      "CPU threads (0: OMP_NUM_THREADS where set, as PyTorch reads it, else every hardware thread)")
      ->capture_default_str();
  command->add_option("--dist-timeout", w.dist_timeout_seconds,
                      "data parallel: seconds a rank waits for the others (joining, and every collective)")
      ->capture_default_str();
  ab::OptimizerOptions& o = w.optimizer;
  command->add_option("--lr", o.lr, "learning rate")->capture_default_str();
  command->add_option("--beta1", o.beta1, "AdamW beta1")->capture_default_str();
  command->add_option("--beta2", o.beta2, "AdamW beta2")->capture_default_str();
  command->add_option("--adam-eps", o.eps, "AdamW epsilon")->capture_default_str();
  command->add_option("--weight-decay", o.weight_decay, "weight decay, as the Trainer groups it: not on biases or norm weights (AdamW's decoupled; SGD's as torch.optim.SGD)")
      ->capture_default_str();
}

// The user's own training config as the workload (src/report/trainer_config.cpp).
void add_config_options(CLI::App* command, WorkloadFlags& f) {
  f.cli = command;
  CLI::Option* trl = command->add_option(
      "--trl-config", f.trl_config,
      "set the workload from a TRL YAML config (the file trl sft --config reads): model_name_or_path, max_length, "
      "per_device_train_batch_size x gradient_accumulation_steps x processes as --batch, bf16/fp16, "
      "gradient_checkpointing, packing, pad_to_multiple_of, group_by_length, use_peft and lora_*, load_in_4bit "
      "(nf4; use_bnb_nested_quant) and load_in_8bit, optim (adamw_torch_fused, adamw_torch, adamw_8bit, paged_adamw_8bit, "
      "paged_adamw_32bit, sgd); keys it "
      "leaves out take TRL's defaults; keys accumbench does not model (fp4, other optimizers, use_liger_kernel, "
      "attn_implementation, deepspeed, fsdp, torch_compile, ...) are refused; options given here override the file");
  trl->type_name("FILE");
  CLI::Option* axolotl = command->add_option(
      "--axolotl-config", f.axolotl_config,
      "the same from an axolotl YAML config: base_model, sequence_len, micro_batch_size x gradient_accumulation_steps "
      "x processes, bf16/fp16, gradient_checkpointing, sample_packing, pad_to_sequence_len, adapter: lora or qlora "
      "(with load_in_4bit: nf4 with double quant) and lora_*, optimizer");
  axolotl->type_name("FILE");
  trl->excludes(axolotl);
}

// A token file's ids in place of synthetic tokens; with --eos-id its documents are the samples
// (sweep measures them; plan judges the activations on their lengths, as the sweep's plan does).
void add_token_file_options(CLI::App* command, WorkloadFlags& flags) {
  command->add_option("--tokens", flags.workload.data.token_file,
                      "token file (uint16 or uint32 ids) instead of synthetic tokens");
  command->add_option("--token-bytes", flags.workload.data.token_bytes, "bytes per token id in --tokens: 2 or 4")
      ->capture_default_str();
  command->add_option("--eos-id", flags.workload.data.eos_id,
                      "split --tokens into documents after each token N: they are the samples (lengths, padding)")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            return !value.empty() && value[0] == '-' ? value + " is not a token id; give your tokenizer's "
                                                               "end-of-sequence id (0 or more)"
                                                     : "";
          },
          ""));
}

// Every option of the workload, on one subcommand.
void add_workload_options(CLI::App* command, WorkloadFlags& flags) {
  command->footer(kSplitLegend);
  add_config_options(command, flags);
  add_model_options(command, flags);
  add_shape_options(command, flags);
  add_data_and_loss_options(command, flags);
  add_real_data_options(command, flags);
  add_grid_options(command, flags);
  add_training_options(command, flags);
  add_run_options(command, flags);
}

void print_progress(const ab::SweepProgress& p) {
  if (p.round >= 0) {
    std::cerr << "\r\033[K" << "round " << p.round + 1 << ", " << p.live_splits << " split" << (p.live_splits == 1 ? "" : "s")
              << " still measured, " << std::fixed << std::setprecision(0) << p.elapsed_seconds << " s elapsed"
              << std::defaultfloat << (ab::stop_requested() ? ", stopping" : "; Ctrl-C stops and reports") << std::flush;
    return;
  }
  const double done = p.split_index + static_cast<double>(p.step_index) / std::max(1, p.step_count);
  const double remaining = done > 0 ? p.elapsed_seconds * (p.split_count - done) / done : 0;
  std::cerr << "\r\033[K" << "split " << p.split_index + 1 << "/" << p.split_count << ", step " << p.step_index + 1
            << "/" << p.step_count << ", " << std::fixed << std::setprecision(0) << p.elapsed_seconds
            << " s elapsed, ~" << remaining << " s left" << std::defaultfloat
            << (ab::stop_requested() ? ", stopping" : "; Ctrl-C stops and reports") << std::flush;
}

// ---- sweep ----

struct SweepCommand {
  WorkloadFlags flags{ab::Command::kSweep};
  ab::SweepOptions options;
  OutputFiles files;
  std::string resume_path;
  std::string emit;
  std::string tf32 = "on";

  CLI::App* add_to(CLI::App& app) {
    CLI::App* command = app.add_subcommand("sweep", "measure every micro-batch x accumulation split of one batch");
    add_workload_options(command, flags);
    command->add_option("--warmup", options.warmup,
                        "untimed steps per split, alone after an emptied cache (its memory is read there; at least 1)")
        ->capture_default_str();
    command->add_option("--steps", options.steps, "interleaved rounds every split is timed in (at least)")
        ->capture_default_str();
    command->add_option("--time-budget", options.time_budget_seconds,
                        "seconds of rounds after which splits still undecided stop (0: exactly --steps rounds)")
        ->capture_default_str();
    command->add_option("--tie-tolerance", options.tie_tolerance,
                        "splits whose mean step times are proven within this fraction of each other are a tie")
        ->capture_default_str();
    command->add_option("--confidence", options.confidence, "confidence of all the sweep's intervals together")
        ->capture_default_str();
    command->add_flag("--try-predicted-oom", options.try_predicted_oom,
                      "run splits that the memory plan predicts will not fit under --memory-limit (on the CPU "
                      "without one: in the host memory available, which skips them lest the OOM killer end the sweep)");
    command->add_option("--profile", options.profile_dir,
                        "directory: one more step per split under PyTorch's Kineto profiler, saved as "
                        "<split>-<precision>.trace.json (CUDA, LibTorch 2.x); device busy then comes from the GPU's kernel time")
        ->check(kNonEmptyPath);
    command->add_option("--peak-tflops", options.peak_tflops,
                        "device peak TFLOP/s for MFU (default: built-in table; none on CPU)")
        ->check(CLI::Validator(
            [](std::string& value) -> std::string {
              // nan is the unset default, and a denormal would print an MFU of 10^300 %.
              char* end = nullptr;
              const double v = std::strtod(value.c_str(), &end);
              if (end == value.c_str() || *end != '\0') return "";  // CLI11 names a word that is no number
              return std::isfinite(v) && v >= 1e-3 ? "" : value + " is no device's peak; give TFLOP/s of 0.001 or more";
            },
            ""));
    command->add_option("--framework-overhead", options.framework_overhead,
                        "a Python training loop's host time per micro-step, in ms, added to every split before "
                        "deciding; auto: what calibrate-framework measured on this device, else none")
        ->type_name("MS|auto")
        ->capture_default_str();
    command->add_option("--tf32", tf32,
                        "on or off: fp32 matmuls on CUDA in TF32, as the PyTorch anchor runs them (PyTorch's own "
                        "default, and a trainer's without tf32: true, is off); fp32 steps' time only")
        ->check(CLI::IsMember({"on", "off"}))
        ->capture_default_str();
    add_token_file_options(command, flags);
    command->add_option("--resume", resume_path, "skip splits already measured in this JSON file (and keep writing it)")
        ->check(kNonEmptyPath);
    command->add_option("--emit", emit, emit_help("the recommended split"))->type_name("trl|axolotl|args");
    files.add_to(command, /*sweeping=*/true);
    return command;
  }

  int run(bool primary) {
    options.workload = flags.apply();
    // Given, it wins over a trainer config's tf32 (read by flags.apply); else that one stands.
    if (flags.cli->get_option("--tf32")->count() > 0) {
      options.workload.tf32 = tf32 == "on";
      const std::string& device = options.workload.device;
      if (device == "cpu" || (device == "auto" && !ab::cuda_attached())) {
        flags.option_notes.push_back("--tf32 " + tf32 + " changes nothing on the CPU: TF32 is a mode of CUDA's fp32 "
                                     "matrix products");
      }
    }
    const bool on_cpu = options.workload.device == "cpu" || (options.workload.device == "auto" && !ab::cuda_attached());
    if (options.try_predicted_oom && options.workload.memory_limit_bytes == 0 && !on_cpu) {
      flags.option_notes.push_back("--try-predicted-oom changes nothing without --memory-limit on a GPU: no split is "
                                   "judged against a limit, so none is skipped as predicted not to fit");
    }
    if (!emit.empty()) ab::settings_format_from_string(emit);  // a typo stops before the sweep, not after
    ab::SweepResult resume;
    const bool resuming = !resume_path.empty();
    if (resuming) {
      ab::require_readable_file(resume_path, "--resume file");  // named as the option, before the reader's words
      resume = ab::load_sweep_result(resume_path);
      if (files.json.empty()) files.json = resume_path;
      // The decisions are this command's: a resume without the file's --tie-tolerance or
      // --confidence decides otherwise than the sweep it goes on from, which is said (helper-91).
      const ab::Decision& before = resume.recommendation.decision;
      if (before.kind != ab::DecisionKind::kNone &&
          (std::abs(before.tie_tolerance - options.tie_tolerance) > 1e-12 ||
           std::abs(before.confidence - options.confidence) > 1e-12)) {
        const auto words = [](double tolerance, double confidence) {
          return "a tie tolerance of " + ab::text::format_number(tolerance) + " at " +
                 ab::text::format_number(confidence) + " confidence";
        };
        flags.option_notes.push_back(
            "the --resume file's sweep decided with " + words(before.tie_tolerance, before.confidence) +
            ", this one decides every split with " + words(options.tie_tolerance, options.confidence) +
            "; give --tie-tolerance " + ab::text::format_number(before.tie_tolerance) + " --confidence " +
            ab::text::format_number(before.confidence) + " to decide as it did");
      }
    }
    files.require_writable(resume_path, "--resume");  // every rank alike, before any joins (the same paths)
    require_inputs_kept(files.named(), flags.inputs());
    // The one process that writes it holds it for the whole sweep (a second sweep to it is refused).
    if (primary && !files.json.empty()) ab::lock_written_file(files.json, "--json");
    options.json_path = files.json;
    const bool progress = primary && stderr_is_tty();
    // Worded before the run: re-reading the config afterwards could fail and lose the report.
    const std::vector<std::string> model_notes = shape_notes(ab::resolve_model(options.workload.model), options.workload);
    // The notes printed above the table, kept in the result too (every save of it: the JSON, then
    // report, Markdown and HTML say them); those of the device and the padding read the runs.
    // Worded at the first save, after the sweep's checks: a note reads the data (short_source_note),
    // whose refusal is the sweep's to word.
    std::optional<std::vector<std::string>> job_notes;
    std::map<ab::Packing, int> steps_of_data;  // each packing's --distinct-steps, counted once
    double busiest = 0;                        // the highest load average read at a save
    // Other processes' CPU time from here, before the first split, to each save (cpu_times).
    const ab::CpuTimes cpu_before = ab::cpu_times();
    const auto sweep_began = std::chrono::steady_clock::now();
    const bool padding_chosen = flags.padding_chosen();
    const auto noted = [&](ab::SweepResult sweep) {
      if (!job_notes) {
        job_notes = flags.take_option_notes();
        job_notes->push_back(ab::optimizer_in_backward_note(options.workload, launched_world_size()));
        job_notes->insert(job_notes->end(), model_notes.begin(), model_notes.end());
        for (const std::string& note :
             {ab::idle_data_options_note(options.workload), ab::idle_completion_only_loss_note(options.workload),
              ab::mean_of_means_note(options.workload), ab::padded_rows_note(options.workload),
              ab::idle_weights_dtype_note(options.workload), ab::oib_foreach_note(options.workload),
              ab::short_source_note(options.workload), ab::distinct_steps_past_epoch_note(options.workload)}) {
          job_notes->push_back(note);
        }
      }
      // Every note is this command's, worded at each save over every run the file will hold (a
      // resumed file's kept runs too): none of a --resume file's is carried over, so that what its
      // sweep said of its own command line (a repeat, an idle option) or of fewer runs does not stay.
      sweep.notes.clear();
      std::vector<std::string> all = *job_notes;
      all.push_back(ab::cpu_bf16_scratch_note(with_dtypes_of_runs(options.workload, sweep),
                                              sweep.context.device.rfind("cuda", 0) == 0));
      if (!padding_chosen) all.push_back(padding_to_t_note(sweep));
      all.push_back(ab::distinct_steps_rounds_note(sweep, options.workload, &steps_of_data));
      busiest = std::max(busiest, ab::load_average());
      sweep.context.load_average = busiest;
      sweep.context.cpu_cores = static_cast<int>(std::thread::hardware_concurrency());
      const ab::CpuTimes cpu_now = ab::cpu_times();
      const double others = (cpu_now.machine_busy_seconds - cpu_before.machine_busy_seconds) -
                            (cpu_now.own_seconds - cpu_before.own_seconds);
      if (std::isfinite(others)) {
        sweep.context.other_cpu_seconds = std::max(0.0, others);
        sweep.context.other_cpu_span_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - sweep_began).count();
      }
      all.push_back(ab::grouping_steps_note(sweep, options.workload, &steps_of_data));
      for (std::string& note : all) {
        if (!note.empty() && std::find(sweep.notes.begin(), sweep.notes.end(), note) == sweep.notes.end())
          sweep.notes.push_back(std::move(note));
      }
      return sweep;
    };
    ab::stop_on_interrupt("the split or round in progress");  // Ctrl-C: the splits so far are reported (interrupt.hpp)
    // A sweep whose every split the plan skipped measured nothing: its files would hold no more than
    // the table says, and would replace an earlier sweep's results at those paths. None is written.
    // (A resumed file keeps its runs, and is written; so is a save before any split ended.)
    const auto measured_anything = [&](const ab::SweepResult& sweep) {
      return resuming || sweep.runs.empty() ||
             std::any_of(sweep.runs.begin(), sweep.runs.end(), [](const ab::RunResult& run) {
               return run.status != ab::RunStatus::kPredictedOutOfMemory;
             });
    };
    bool wrote_files = false;
    // The last save, whose error a peer gone mid-sweep leaves in it: printed as the table of what
    // was finished before the error's sentence (helper-98: the file kept it, the console nothing).
    std::optional<ab::SweepResult> last_saved;
    const auto run = [&] {
      return ab::run_sweep(
          options,
          [&](const ab::SweepResult& partial) {
            if (!primary || !measured_anything(partial)) return;
            last_saved = noted(partial);
            files.write(*last_saved);
            wrote_files = true;
          },
          resuming ? &resume : nullptr, progress ? ab::ProgressCallback(print_progress) : ab::ProgressCallback());
    };
    ab::SweepResult swept;
    try {
      swept = run();
    } catch (const ab::FatalRunError&) {
      if (progress) std::cerr << "\r\033[K" << std::flush;
      if (primary && last_saved && !last_saved->interruption.error.empty()) {
        for (const std::string& note : ab::sweep_notes(*last_saved)) print_note(note);
        ab::ConsoleReporter({stdout_is_tty()}).report(*last_saved, std::cout);
        std::cout << std::flush;
        files.announce();
      }
      throw;
    }
    const ab::SweepResult result = noted(std::move(swept));
    if (progress) std::cerr << "\r\033[K" << std::flush;
    // After the run, so that an error in the options stays the one line on stderr.
    for (const std::string& note : ab::sweep_notes(result)) if (primary) print_note(note);
    if (primary) ab::ConsoleReporter({stdout_is_tty()}).report(result, std::cout);
    if (primary && result.recommendation.best_index >= 0) {
      const ab::RunResult& best = result.runs[static_cast<size_t>(result.recommendation.best_index)];
      if (emit == "trl") {
        print_note("the TRL settings below are of the split measured in accumbench's own loop; TRL's step also holds "
                   "its loss and metrics on the logits, so its peak can be higher: plan --trl-config with these "
                   "settings plans TRL's own step before you train with them");
      }
      // Undecided, the split is the best estimate so far: the header says so, as the recommendation does.
      const bool undecided = result.recommendation.decision.kind == ab::DecisionKind::kUndecided;
      print_emitted(emit,
                    "the recommended split, " + ab::run_label(best, result.runs) +
                        (undecided ? " (undecided: the best estimate so far; see the recommendation)" : ""),
                    ab::trainer_settings(result, best));
    }
    int unwritten = 0;
    if (primary && wrote_files) {
      std::cout << std::flush;  // the "wrote" lines come last on a terminal
      unwritten = files.announce();
    } else if (primary && files.any()) {
      std::cout << std::flush;
      print_note("nothing was measured (the plan skipped every split), so no file was written: whatever the paths "
                 "held before is kept");
    }
    // A file the end could not write (a full disk): the table above still holds every measurement.
    if (unwritten != 0) return unwritten;
    // Interrupted: the shell's code for the signal (130 for Ctrl-C), after everything is written.
    if (!result.interruption.signal.empty()) return interrupted_exit_code();
    // Every split failed or was predicted not to fit: the table and the recommendation say why and
    // what would fit; stderr says so in one line (stdout may be a file), and the exit code lets
    // scripts notice. Memory alone stopping every split (the plan's prediction or the allocator) is
    // a --memory-limit this job cannot meet, bad input as an impossible limit is: exit 2, as for
    // the limits refused before anything runs; a split whose step failed otherwise: exit 1.
    if (result.recommendation.best_index >= 0) return 0;
    // A split timed but over the limit (a --resume file's, measured without it, or a peak beyond
    // it) is stopped by memory too.
    const bool memory_stopped_all =
        result.context.memory_limit_bytes > 0 && !result.runs.empty() &&
        std::all_of(result.runs.begin(), result.runs.end(), [](const ab::RunResult& run) {
          return run.status == ab::RunStatus::kOutOfMemory || run.status == ab::RunStatus::kPredictedOutOfMemory ||
                 (run.status == ab::RunStatus::kOk && !run.fits);
        });
    if (primary && memory_stopped_all) {
      std::cerr << "accumbench: error: no split of this sweep fits in --memory-limit "
                << ab::format_bytes(result.context.memory_limit_bytes)
                << "; change the job as the recommendation above says, or raise the limit\n";
    } else if (primary) {
      std::cerr << "accumbench: error: no split ran successfully; the recommendation above says why"
                << (result.context.memory_limit_bytes > 0 ? " and what would fit in --memory-limit" : "") << "\n";
    }
    return memory_stopped_all ? 2 : 1;
  }
};

// ---- calibrate-framework ----

#ifndef ACCUMBENCH_SOURCE_DIR
#define ACCUMBENCH_SOURCE_DIR "."
#endif

struct CalibrateFrameworkCommand {
  WorkloadFlags flags{ab::Command::kSweep};
  ab::FrameworkCalibrationOptions options;

  CLI::App* add_to(CLI::App& app) {
    CLI::App* command = app.add_subcommand(
        "calibrate-framework",
        "measure a Python training loop's host time per micro-step on this device (the PyTorch reference, plain "
        "and hf-trl, against the engine, on the same job: full or LoRA, checkpointed or not) for sweep "
        "--framework-overhead auto");
    flags.one_job = true;
    add_workload_options(command, flags);
    // The workload options the reference's step lacks are refused (refuse_what_the_reference_lacks,
    // with the fix); the help says so rather than what sweep does with them.
    for (const auto& [name, help] : std::initializer_list<std::pair<const char*, const char*>>{
             {"--chunked-loss", "not here: the reference's step computes the plain loss head (sweep, verify and plan take it)"},
             {"--knobs", "not here: the reference's step has no memory knobs (sweep and plan take it)"},
             {"--optimizer-in-backward", "not here: the reference's step has no memory knobs (sweep, verify and plan take it)"},
             {"--cuda-graphs", "not here: the reference's step is not replayed from CUDA graphs (sweep and verify take it)"},
             {"--lengths", "fixed only: the reference draws fixed-length random tokens (sweep, verify and plan take the others)"},
             {"--packing", "none only: the reference draws fixed-length random tokens (sweep, verify and plan pack)"},
             {"--distinct-steps", "not here: the reference draws fixed-length random tokens, every step alike (sweep, verify and plan take it)"},
             {"--base-quant", "none only: the reference has no bitsandbytes base (sweep, verify and plan quantise it)"}}) {
      command->get_option(name)->description(help);
    }
    options.reference_dir = std::string(ACCUMBENCH_SOURCE_DIR) + "/bench/reference";
    command->add_option("--steps", options.sweep.steps, "timed steps per split on each side")->capture_default_str();
    command->add_option("--python", options.python, "a Python that imports torch, for the reference")
        ->capture_default_str();
    command->add_option("--reference-dir", options.reference_dir, "the folder of step_bench.py")
        ->capture_default_str();
    command->add_option("--frameworks", options.frameworks,
                        "the reference's modes to calibrate: plain, hf-trl (HF Trainer + TRL around the same math), hf "
                        "(transformers' own model, PEFT's LoRA; joins by itself on CUDA where transformers imports)")
        ->delimiter(',')
        ->check(CLI::Validator(
            [](std::string& value) {
              if (value.empty()) return std::string("an empty value; give one, or leave the option out");
              if (value == "plain" || value == "hf-trl" || value == "hf") return std::string();
              return ab::text::quoted(value, 40) + " is not a mode of the reference; give plain, hf-trl or hf";
            },
            ""))
        ->type_name("TEXT:{plain,hf-trl,hf}")
        ->capture_default_str();
    return command;
  }

  int run() {
    options.sweep.workload = flags.apply();
    options.sweep.warmup = 1;
    options.reference_steps = options.sweep.steps;
    // Ctrl-C or SIGTERM: the engine's split or the Python reference in progress stops, its temporary
    // folder goes, and the cache is left as it was (a calibration is one measurement or none).
    ab::stop_on_interrupt("the step in progress", "then leaving the cache as it was");
    ab::measuring_begins();
    ab::FrameworkCalibration c;
    try {
      c = ab::calibrate_framework(options);
    } catch (const ab::Interrupted& stopped) {
      std::cerr << "accumbench: calibrate-framework " << stopped.what()
                << ": nothing was written, and the cache keeps its earlier calibrations\n";
      return interrupted_exit_code();
    }
    for (const std::string& note : flags.take_option_notes()) print_note(note);
    for (const std::string& note : c.notes) print_note(note);
    std::vector<const ab::FrameworkCalibrationSide*> sides = {&c.engine};
    for (const auto& side : c.references) sides.push_back(&side);
    // The model and shape too: the cache keeps an entry per model (framework_model).
    std::cout << "median step s, " << ab::resolve_model(options.sweep.workload.model).name << " at T="
              << options.sweep.workload.seq_len << ", " << c.device_name << ", " << c.precision
              << (options.sweep.workload.weights_dtype != ab::Precision::kFp32
                      ? " with " + ab::to_string(options.sweep.workload.weights_dtype) + " weights"
                      : std::string())
              << ", batch " << c.batch
              << ", " << c.job << "\n\n";
    std::cout << ab::text::pad("split", 8);
    for (const auto* side : sides) std::cout << ab::text::pad(side->name, 12, ab::text::Align::kRight);
    std::cout << "\n";
    for (size_t i = 0; i < c.engine.micro_batches.size(); ++i) {
      const int64_t m = c.engine.micro_batches[i];
      std::cout << ab::text::pad(std::to_string(m) + "\u00d7" + std::to_string(c.batch / m), 8);
      for (const auto* side : sides) {
        std::cout << ab::text::pad(ab::text::format_significant(side->step_seconds[i], 4), 12, ab::text::Align::kRight);
      }
      std::cout << "\n";
    }
    std::cout << ab::text::pad("per \u00b5step", 8);
    for (const auto* side : sides) {
      std::cout << ab::text::pad(ab::text::format_duration(side->seconds_per_micro_step), 12, ab::text::Align::kRight);
    }
    std::cout << "\n\n";
    for (const auto& side : c.references) {
      const double overhead = side.seconds_per_micro_step - c.engine.seconds_per_micro_step;
      const auto signed_duration = [](double seconds) {
        return std::string(seconds < 0 ? "-" : "+") + ab::text::format_duration(std::abs(seconds));
      };
      std::cout << side.name << ": " << signed_duration(overhead) << " per micro-step against the engine";
      // The interval the steps give (helper-92: four runs read +0.98, -5.20, +2.41 and +1.10 ms).
      const bool interval = std::isfinite(side.overhead_low) && std::isfinite(side.overhead_high);
      if (interval) {
        std::cout << " (95 %: " << signed_duration(side.overhead_low) << " \u2026 " << signed_duration(side.overhead_high);
        if (side.overhead_low <= 0 && side.overhead_high >= 0) {
          std::cout << "; not told from 0 at these steps: more --steps, or an idle machine, narrows it";
        }
        std::cout << ")";
      }
      if (overhead < 0) std::cout << "; below zero, sweep --framework-overhead auto counts it as 0";
      std::cout << "\n";
    }
    if (!c.packages.empty()) std::cout << "Python packages: " << c.packages << "\n";
    std::cout << "accumbench: wrote " << c.cache_path << " (sweep --framework-overhead auto reads it)\n";
    return 0;
  }
};

// ---- verify ----

// A sweep's options another command takes so that a sweep's command line runs there as it is, each
// ignored, and named in one note when given (plan: those that change no tensor's size; verify: those
// that change no update).
struct IgnoredSweepOptions {
  std::map<std::string, std::string> values;
  bool try_predicted_oom = false;
  void add_to(CLI::App* command, const std::vector<const char*>& names, const std::string& group) {
    for (const char* name : names) command->add_option(name, values[name], "ignored")->group(group);
    command->add_flag("--try-predicted-oom", try_predicted_oom, "ignored")->group(group);
  }
  // "--json and --steps are a sweep's options, which change <what>: <who> ignores them"; "" for none.
  std::string note(const CLI::App* cli, const std::string& what, const std::string& who) const {
    std::vector<std::string> given;
    for (const auto& [name, value] : values) {
      if (cli != nullptr && cli->count(name) > 0) given.push_back(name);
    }
    if (try_predicted_oom) given.push_back("--try-predicted-oom");
    if (given.empty()) return "";
    return ab::text::and_list(given) + (given.size() == 1 ? " is a sweep's option, which changes " : " are a sweep's options, which change ") +
           what + ": " + who + " ignores " + (given.size() == 1 ? "it" : "them");
  }
};

struct VerifyCommand {
  WorkloadFlags flags{ab::Command::kVerify};
  std::string export_dir;
  std::string json_path;  // --json: every job's verdict for a script (ab::verify_json)

  CLI::App* add_to(CLI::App& app) {
    CLI::App* command =
        app.add_subcommand("verify", "prove that every split computes the same update as the whole batch");
    add_workload_options(command, flags);
    command->add_option("--export", export_dir,
                        "write the initial weights, the batch, the config and the whole batch's loss and "
                        "gradients to this directory for bench/reference/ (docs/EXPORT.md)")
        ->check(kNonEmptyPath);
    command->add_option("--json", json_path,
                        "write every split's errors, the tolerances and the verdict (pass, fail or incomplete) as "
                        "JSON; rewritten after each job, so an error in a later one keeps those before it")
        ->check(kOutputPath);
    add_measurement_options(command);
    return command;
  }

  int run(bool primary) {
    const ab::WorkloadOptions w = flags.apply();
    if (!json_path.empty()) {
      // The export is a directory of files a reference reads (index.json first): the JSON may be
      // neither that directory nor a file in it (helper-101: it replaced the export's index.json).
      if (!export_dir.empty()) {
        const auto normal = [](const std::string& path) {
          std::filesystem::path p = std::filesystem::absolute(path).lexically_normal();
          return p.filename().empty() ? p.parent_path() : p;  // "dir/" as "dir"
        };
        const std::filesystem::path json = normal(json_path), dir = normal(export_dir);
        if (std::mismatch(dir.begin(), dir.end(), json.begin(), json.end()).first == dir.end()) {
          throw ab::UserError("--json " + ab::text::quoted(json_path, 240) + " is " +
                              (json == dir ? std::string("the --export directory")
                                           : "inside the --export directory " + ab::text::quoted(export_dir, 240)) +
                              ", whose files the reference reads; write the JSON elsewhere");
        }
      }
      ab::require_writable_file(json_path, "--json");
      require_inputs_kept({{"--json", json_path}}, flags.inputs());
      require_no_sweep_results(json_path, "verify");
    }
    const std::vector<std::string> model_notes = shape_notes(ab::resolve_model(w.model), w);  // before the run
    flags.option_notes.push_back(measurement_note());
    ab::stop_on_interrupt("the split in progress");  // Ctrl-C: the splits verified so far are printed (interrupt.hpp)
    // Lists: each job of them on its own (its splits against its own reference).
    // Each job's result as it ends (a list of jobs takes one verify each), after the notes.
    bool noted = false;
    const auto notes = [&] {
      if (noted || !primary) return;
      noted = true;
      for (const std::string& note : flags.take_option_notes()) print_note(note);
      print_note(ab::optimizer_in_backward_note(w, launched_world_size()));
      for (const std::string& note : model_notes) print_note(note);
      print_note(ab::idle_data_options_note(w));
      print_note(ab::idle_completion_only_loss_note(w));
      print_note(ab::padded_rows_note(w));
      print_note(ab::idle_weights_dtype_note(w));
      print_note(ab::short_source_note(w));
      print_note(ab::distinct_steps_past_epoch_note(w));
    };
    size_t printed = 0;
    std::vector<ab::VerifyResult> so_far;  // for --json, rewritten after each job
    // --json, rank 0's: after each job, at the end, and with the error of a data-parallel peer gone
    // (the file keeps the jobs before it and says why); `say` names the file on stderr.
    const auto write_json = [&](const std::vector<ab::VerifyResult>& jobs, bool finished, const std::string& error,
                                bool say) {
      if (!primary || json_path.empty()) return;
      ab::write_file_atomically(json_path, ab::verify_json(w, jobs, finished, error));
      if (say) std::cerr << "accumbench: wrote " << json_path << "\n";
    };
    std::vector<ab::VerifyResult> results;
    try {
    results =
        ab::run_verify_jobs(ab::VerifyOptions{w, export_dir}, [&](const ab::VerifyResult& result) {
          notes();
          if (!primary) return;
          if (printed++ > 0) std::cout << "\n";
          ab::print_verify(result, std::cout);
          std::cout << std::flush;
          so_far.push_back(result);
          write_json(so_far, /*finished=*/false, "", /*say=*/false);
        });
    } catch (const ab::FatalRunError& error) {
      // What was verified stays on screen with what was not (helper-101: a peer's loss said nothing of it).
      if (primary) print_jobs_summary(w, so_far, "not verified (stopped by an error)");
      write_json(so_far, /*finished=*/false, error.what(), /*say=*/true);
      throw;
    }
    notes();
    if (primary) print_jobs_summary(w, results);
    write_json(results, /*finished=*/true, "", /*say=*/true);
    // A split that failed is the finding; otherwise an interrupted verify exits as the signal asks.
    const bool all_pass =
        std::all_of(results.begin(), results.end(), [](const ab::VerifyResult& r) { return r.all_pass; });
    if (!all_pass) return 1;
    if (!results.empty() && !results.back().interruption.signal.empty()) return interrupted_exit_code();
    return 0;
  }

 private:
  // A sweep's options that change what is timed, judged or written, never the update: verify takes
  // them, so that a sweep's command line verifies as it is, and names them in one note (plan takes
  // them likewise). --tf32, which changes fp32 matmuls on CUDA, and the token files, which verify
  // does not read, stay refused.
  IgnoredSweepOptions measurement;
  void add_measurement_options(CLI::App* command) {
    measurement.add_to(command,
                       {"--steps", "--warmup", "--time-budget", "--tie-tolerance", "--confidence", "--peak-tflops",
                        "--framework-overhead", "--memory-limit", "--csv", "--html", "--markdown", "--trace",
                        "--profile", "--resume", "--emit"},
                       "A sweep's options, taken so that its command line verifies as it is; they change what is "
                       "timed, judged or written, not the update, and verify ignores them");
  }
  std::string measurement_note() const {
    return measurement.note(flags.cli, "what is timed, judged or written, not the update", "verify");
  }

  // With lists or --distinct-steps, a last line over the jobs and steps: which failed, which a signal
  // left unverified.
  // `left_words`: what the rest are, "not started (interrupted)" after a signal (the job it stopped
  // is in `results`), "not verified (stopped by an error)" after an error (the job it stopped is not).
  static void print_jobs_summary(const ab::WorkloadOptions& w, const std::vector<ab::VerifyResult>& results,
                                 const std::string& left_words = "not started (interrupted)") {
    const std::vector<ab::GridJob> jobs = ab::grid_jobs(w);
    // The results come job by job, each job's steps in order (run_verify_jobs); each job has its own
    // count of steps (with --distinct-steps epoch, each packing its own epoch).
    std::string failed, left;
    size_t failures = 0, units = 0, next = 0;
    int most_steps = 1;
    bool equal_steps = true;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const std::string flags = jobs.size() > 1 ? ab::job_flags(jobs[i], w) : "";
      const auto name = [&](int step, int steps) {
        return steps > 1 ? flags + (flags.empty() ? "step " : " step ") + std::to_string(step + 1) : flags;
      };
      const size_t first = next;
      while (next < results.size() && (jobs.size() == 1 || results[next].job == flags)) ++next;
      if (next == first) {  // a signal stopped the jobs before this one began
        left += (left.empty() ? "" : "; ") + flags;
        continue;
      }
      const int steps = std::max(1, results[first].steps);
      if (i > 0 && steps != most_steps) equal_steps = false;
      most_steps = std::max(most_steps, steps);
      units += static_cast<size_t>(steps);
      for (size_t k = first; k < next; ++k) {
        if (results[k].all_pass) continue;
        failed += (failed.empty() ? "" : "; ") + name(results[k].step, steps);
        ++failures;
      }
      for (int step = static_cast<int>(next - first); step < steps; ++step) left += (left.empty() ? "" : "; ") + name(step, steps);
    }
    if (jobs.size() <= 1 && most_steps <= 1) return;
    const bool stepped = most_steps > 1;
    const std::string what = jobs.size() > 1 && stepped ? "jobs' steps" : jobs.size() > 1 ? "jobs of the lists" : "steps";
    std::cout << "\n";
    if (!failed.empty()) {
      std::cout << "FAIL in " << failures << " of " << units << " " << what << ": " << failed << "\n";
    } else if (left.empty()) {
      // A --padding list's jobs share one reference (the whole batch, unpadded): each padding of a
      // job computes that one update.
      const size_t paddings = ab::grid_paddings(w).size();
      std::cout << "PASS in every " << (jobs.size() > 1 ? "job of the lists (" + std::to_string(jobs.size()) + ")" : "")
                << (jobs.size() > 1 && stepped ? " on every " : "")
                << (stepped ? "step of the data (" +
                                  (equal_steps ? std::to_string(most_steps) : std::to_string(units) + " in all") + ")"
                            : "")
                << ": each split computes " << (jobs.size() > 1 ? "its job's" : "the") << " update as "
                << (stepped ? "each step's" : "the job's") << " whole batch does"
                << (paddings > 1 ? ", in each of the " + std::to_string(paddings) + " paddings the same update" : "")
                << "\n";
    }
    if (!left.empty()) {
      std::cout << (stepped ? "steps" : "jobs") << " " << left_words << ": " << left
                << (stepped ? "; run verify again" : "; run verify again with those") << "\n";
    }
  }
};

// ---- plan ----

struct PlanCommand {
  WorkloadFlags flags{ab::Command::kPlan};
  std::string attention = "auto";
  bool calibrate = false;
  std::string detail = "on";  // --detail: the per-tensor plan of one split after the split table
  std::string emit;
  std::string framework = "plain";
  std::string trl_loss;  // empty: TRL's default (chunked_nll) with --framework hf-trl
  std::string headroom = ab::kDefaultHeadroom;
  std::string json_path, markdown_path, html_path;  // the split table to hand over (plan_report.hpp)

  CLI::App* add_to(CLI::App& app) {
    CLI::App* command = app.add_subcommand("plan", "predict peak memory per split without running anything (src/plan)");
    add_workload_options(command, flags);
    command->add_option("--attention", attention,
                        "explicit (LibTorch 1.x / CPU) or flash (LibTorch 2.x on CUDA); auto picks from this build "
                        "and --device")
        ->capture_default_str();
    command->add_flag("--calibrate", calibrate,
                      "also measure two short probes (micro-batches 1 and 2) on --device and print calibrated peaks");
    command->add_option("--emit", emit, emit_help("the split whose memory plan is shown (the largest that fits)"))
        ->type_name("trl|axolotl|args");
    command->add_option("--framework", framework,
                        "plain: accumbench's own loop; hf-trl: HF Trainer + TRL's SFTTrainer, with TRL's loss "
                        "(--trl-loss) in place of accumbench's loss head")
        ->capture_default_str();
    command->add_option("--trl-loss", trl_loss,
                        "with --framework hf-trl, TRL's SFTConfig.loss_type: chunked_nll (TRL's default since v1.7.0: "
                        "the head and the loss in checkpointed chunks of 256 tokens, no full logits) or nll (the full "
                        "fp32 logits, which TRL's per-step metrics keep and copy after the loss)")
        ->type_name("chunked_nll|nll");
    add_token_file_options(command, flags);
    add_handover_options(command);
    add_sweep_only_options(command);
    return command;
  }

  int run();

 private:
  // A sweep's options that change the update, what is timed, decided or written, never a tensor's
  // size: plan takes them, so that a sweep's command line plans as it is (the sweep's recommendation says
  // "accumbench plan with the same options"), and names them in one note.
  IgnoredSweepOptions sweep_only;
  void add_sweep_only_options(CLI::App* command) {
    sweep_only.add_to(command,
                      {"--steps", "--warmup", "--time-budget", "--tie-tolerance", "--confidence", "--threads", "--lr",
                       "--beta1", "--beta2", "--adam-eps", "--weight-decay", "--tf32", "--peak-tflops", "--dist-timeout",
                       "--framework-overhead", "--loss-normalization", "--csv", "--trace", "--profile", "--resume"},
                      "A sweep's options, taken so that its command line plans as it is; they change the update, what "
                      "is timed, decided or written, not any tensor's size, and the plan ignores them");
  }
  // The note naming those given ("" without any).
  std::string sweep_only_note() const {
    return sweep_only.note(flags.cli, "the update, what is timed, decided or written, not any tensor's size", "the plan");
  }
  void add_handover_options(CLI::App* command) {
    command->add_option("--headroom", headroom,
                        "memory kept free of the limit for what the plan does not count (on CUDA: the context and "
                        "fragmentation): a size (1GiB) or a percentage of the limit (5%)")
        ->capture_default_str();
    command->add_option("--detail", detail,
                        "on: after the split table, the memory plan of one split tensor group by tensor group (the "
                        "largest that fits, or the smallest), with each group's formula; off: the split table only")
        ->check(CLI::IsMember({"on", "off"}))
        ->capture_default_str();
    command->add_option("--json", json_path, "write the split table as JSON (with every split's Trainer settings, typed as the YAML reads them)")
        ->check(kOutputPath);
    command->add_option("--markdown", markdown_path, "write the split table as Markdown")
        ->check(kOutputPath);
    command->add_option("--html", html_path, "write the split table as a self-contained HTML page")
        ->check(kOutputPath);
  }
  void write_files(const ab::PlanReport& report) const;
  void adopt_trl_loss(ab::WorkloadOptions& w);
  ab::PlanOptions plan_options(const ab::WorkloadOptions& w, const ab::PlanTarget& target) const;
  int64_t memory_bytes(const ab::WorkloadOptions& w, const ab::PlanTarget& target) const;
};

ab::PlanOptions PlanCommand::plan_options(const ab::WorkloadOptions& w, const ab::PlanTarget& target) const {
  if (calibrate && !target.attached) {
    throw ab::UserError("--calibrate measures two probes on --device " + w.device +
                        ", which is not attached here; drop --calibrate or run the plan on the machine with the GPU");
  }
  if (calibrate && w.world_size > 1) {
    throw ab::UserError("--calibrate measures probes in one process, which cannot calibrate a --world-size " +
                        std::to_string(w.world_size) + " plan; drop one of the two options");
  }
  ab::PlanOptions o = target.options;
  o.batch = ab::sequences_per_rank(w.batch, w.world_size);  // one rank's share
  o.world_size = w.world_size;
  ab::count_dealt_shares(o, w);  // a sweep of this grid over the ranks, on the CPU
  if (attention != "auto") o.attention = ab::attention_kind_from_string(attention);
  o.framework = ab::plan_framework_from_string(framework);
  if (!trl_loss.empty()) {
    if (o.framework != ab::PlanFramework::kHfTrl) {
      throw ab::UserError("--trl-loss is TRL's loss_type and needs --framework hf-trl; add --framework hf-trl or drop --trl-loss");
    }
    o.trl_loss = ab::trl_loss_from_string(trl_loss);
  }
  if (calibrate && o.framework != ab::PlanFramework::kPlain) {
    throw ab::UserError("--calibrate measures accumbench's own step, not " + framework +
                        "'s; drop --calibrate or plan with --framework plain");
  }
  return o;
}

int64_t PlanCommand::memory_bytes(const ab::WorkloadOptions& w, const ab::PlanTarget& target) const {
  if (w.memory_limit_bytes > 0) return w.memory_limit_bytes;
  return target.cuda && target.attached ? ab::describe_environment(w.device).device_memory_bytes : 0;
}

void PlanCommand::write_files(const ab::PlanReport& report) const {
  if (!json_path.empty()) ab::write_file_atomically(json_path, ab::plan_json(report));
  if (!markdown_path.empty()) ab::write_file_atomically(markdown_path, ab::plan_markdown(report));
  if (!html_path.empty()) ab::write_file_atomically(html_path, ab::plan_html(report));
  std::cout << std::flush;
  for (const std::string* path : {&json_path, &markdown_path, &html_path}) {
    if (!path->empty()) std::cerr << "accumbench: wrote " << *path << "\n";
  }
}

// --trl-config describes a TRL job: planned as TRL runs it, with the file's loss_type (TRL's
// default chunked_nll when it has none), unless --framework plain is given. accumbench's chunked head,
// which stands for chunked_nll in a sweep, is left out then: the plan models TRL's own.
void PlanCommand::adopt_trl_loss(ab::WorkloadOptions& w) {
  const auto given = [this](const char* option) { return flags.given(option); };
  // --framework plain plans accumbench's own loop; hf-trl given, TRL's with the file's loss_type
  // unless --trl-loss is given too.
  if (w.trl_loss.empty() || (given("--framework") && framework != "hf-trl")) return;
  framework = "hf-trl";
  const bool from_file = !given("--trl-loss");
  if (from_file) trl_loss = w.trl_loss;
  // The "read as" note listed --chunked-loss (a sweep's stand-in for chunked_nll): say it is not used.
  const bool replaced_chunked = w.loss.chunked && !given("--chunked-loss");
  if (replaced_chunked) w.loss.chunked = false;
  std::string why = "the command line's --trl-loss";
  if (from_file) {
    const std::string since = w.trl_loss == "nll" ? "the default before TRL 1.7.0, which the file is written for"
                                                  : "TRL's default since 1.7.0";
    why = flags.trl_config + (w.trl_loss_by_default ? " leaves out loss_type: " + since : "'s loss_type");
  }
  flags.option_notes.push_back("planning TRL's step: --framework hf-trl --trl-loss " + trl_loss + " (" + why + ")" +
                               (replaced_chunked ? ", in place of the --chunked-loss it reads as for a sweep" : "") +
                               "; --framework plain plans accumbench's own loop");
}

// The largest split of `shown`'s kind (its job, knobs and precision; any micro-batch of the
// table) whose peak under TRL's own step fits in `memory`: each planned with --framework hf-trl and
// the loss_type its settings write (chunked_nll for the chunked head, else nll). nullopt: none fits.
std::optional<ab::MemoryPlan> largest_under_trl(const ab::ModelConfig& cfg, const std::vector<ab::MemoryPlan>& plans,
                                                const ab::MemoryPlan& shown, int64_t memory) {
  std::optional<ab::MemoryPlan> best;
  for (const ab::MemoryPlan& p : plans) {
    ab::SplitConfig same_kind = p.split;
    same_kind.micro_batch = shown.split.micro_batch;
    same_kind.accum_steps = shown.split.accum_steps;
    if (same_kind.key() != shown.split.key()) continue;
    if (best && p.split.micro_batch <= best->split.micro_batch) continue;
    ab::PlanOptions trl = p.options;
    trl.framework = ab::PlanFramework::kHfTrl;
    trl.trl_loss = p.split.chunked_loss ? ab::TrlLoss::kChunkedNll : ab::TrlLoss::kNll;
    ab::SplitConfig split = p.split;
    split.chunked_loss = false;  // TRL's own chunked loss stands for accumbench's head
    ab::MemoryPlan planned = ab::plan_memory(cfg, trl, split);
    planned.split.chunked_loss = p.split.chunked_loss;  // the table's split, to find its row and label
    if (planned.peak_bytes <= memory) best = std::move(planned);
  }
  return best;
}

int PlanCommand::run() {
  ab::WorkloadOptions w = flags.apply();
  if (!json_path.empty()) ab::require_writable_file(json_path, "--json");
  if (!json_path.empty()) require_no_sweep_results(json_path, "plan");
  if (!markdown_path.empty()) ab::require_writable_file(markdown_path, "--markdown");
  if (!html_path.empty()) ab::require_writable_file(html_path, "--html");
  ab::require_distinct_files({{"--json", json_path}, {"--markdown", markdown_path}, {"--html", html_path}});
  require_inputs_kept({{"--json", json_path}, {"--markdown", markdown_path}, {"--html", html_path}}, flags.inputs());
  adopt_trl_loss(w);
  // Under torchrun, plan still runs alone: a launch's world is planned with --world-size.
  if (launched_world_size() > 1 && !flags.given("--world-size")) {
    flags.option_notes.push_back("WORLD_SIZE=" + std::to_string(launched_world_size()) +
                                 " is set, but plan runs in one process and plans --world-size " +
                                 std::to_string(w.world_size) + "; give --world-size " +
                                 std::to_string(launched_world_size()) + " to plan each rank's share");
  }
  if (!emit.empty()) ab::settings_format_from_string(emit);
  const ab::ModelConfig cfg = ab::resolve_model(w.model);
  ab::check_sequence_length(cfg, w.seq_len);  // before the data is read (a dataset takes seconds)
  ab::validate_lora(cfg, w.lora);  // the rank against the model, a checkpoint stored quantised
  const ab::PlanTarget target = ab::plan_target(w);  // the CPU's host batches: every order's (below)
  // A --group-by-length list is planned once, as the random order, whose longest micro-batch may
  // come at any micro-step (a grouped step's comes first, before the gradients: less); its Trainer
  // settings are the first order's.
  const std::vector<bool> orders = ab::grid_groupings(w);
  if (orders.size() > 1) {
    flags.option_notes.push_back(
        "--group-by-length " + ab::join_groupings(orders) + ": each split is planned once for both orders" +
        (target.cuda ? std::string() : std::string(" (the host batches count each order's, as a sweep keeps them)")) +
        ", as the random one, whose longest micro-batch may come after a step's first, with the gradients (a grouped "
        "order alone plans lower: its steps hold their longest samples first); its Trainer settings (--emit) are the first order's, --group-by-length " + (orders.front() ? "true" : "false") +
        "; a sweep times each");
    w = ab::with_grouping(std::move(w), orders.front());
  }
  ab::PlanOptions o = plan_options(w, target);
  // Planned once for both orders: as the random one, whose longest micro-batch may come at any
  // micro-step (a grouped step's comes first, before the gradients: less).
  if (orders.size() > 1) {
    o.grouped_lengths.clear();
    for (ab::PlanOptions::PackedRows& rows : o.rows_by_packing) rows.rows.grouped_lengths.clear();
  }
  const int64_t limit = memory_bytes(w, target);
  // What the splits may use: the limit less the headroom (the CUDA context and fragmentation).
  // Checked even without a limit to take it from: 150% or -1GiB is a mistake either way.
  const int64_t checked_headroom = ab::headroom_bytes(headroom, std::max<int64_t>(limit, 0));
  const int64_t headroom_bytes = limit > 0 ? checked_headroom : 0;
  const int64_t memory = limit - headroom_bytes;
  // Planned before anything is printed, so that a refused option leaves stdout empty.
  const std::vector<ab::MemoryPlan> plans = ab::plan_splits(cfg, o, w);
  // The notes on stderr, kept for the files too (--json's notes, Markdown, HTML).
  std::vector<std::string> notes = flags.take_option_notes();
  notes.push_back(sweep_only_note());
  notes.push_back(ab::optimizer_in_backward_note(w, w.world_size));
  for (const std::string& note : shape_notes(cfg, w)) notes.push_back(note);
  notes.push_back(ab::cpu_bf16_scratch_note(w, target.cuda));
  if (target.cuda && w.data.distinct_steps_given()) {
    notes.push_back("--distinct-steps " + ab::distinct_steps_name(w.data) + " changes nothing in a CUDA plan: the " +
                    "sweep keeps its steps' batches in host memory, and only one micro-batch's copy is on the device");
  }
  if (flags.cli->count("--seed") > 0 && w.data.lengths != ab::LengthMode::kVariable) {
    notes.push_back("--seed " + std::to_string(w.model.seed) + " changes nothing in this plan: it draws the samples of "
                    "--lengths variable, and the weights' and tokens' values change no tensor's size");
  }
  if (limit <= 0 && flags.cli->count("--headroom") > 0) {
    notes.push_back("--headroom " + headroom + " keeps nothing back: there is no memory limit to take it from (" +
                    (target.cuda ? std::string("no GPU attached to read its memory, and no --memory-limit")
                                 : std::string("the CPU without --memory-limit")) +
                    ")");
  }
  for (const std::string& note : {ab::idle_data_options_note(w), ab::idle_completion_only_loss_note(w), ab::padded_rows_note(w),
                                  ab::idle_weights_dtype_note(w), ab::oib_foreach_note(w), ab::short_source_note(w),
                                  ab::distinct_steps_past_epoch_note(w)}) {
    notes.push_back(note);
  }
  // The plan is arithmetic and holds for NCCL; a sweep of the same job over Gloo would stop.
  if (!target.cuda) {
    try {
      ab::require_reducible_gradients(w, "cpu", w.world_size);
    } catch (const ab::UserError& refusal) {
      notes.push_back(std::string("sweep and verify refuse this job on the CPU: ") + refusal.what());
    }
  }
  notes.erase(std::remove(notes.begin(), notes.end(), std::string()), notes.end());
  for (const std::string& note : notes) print_note(note);
  // The device the plan assumes, always: its attention kernel and memory change the answer.
  std::string device_words = w.device + " (not attached here: PyTorch 2.x on CUDA assumed)";
  if (!target.attached) {
    std::cout << "planning for " << w.device << ", which is not attached here: PyTorch 2.x on CUDA assumed"
              << (attention == "auto" ? " (flash attention)" : "")
              << (memory == 0 ? "; pass --memory to see which splits fit" : "") << "\n\n";
  } else {
    // plan_target resolved "auto": CUDA when it is there, else the CPU.
    const ab::SweepContext here = ab::describe_environment(w.device == "auto" ? (target.cuda ? "cuda" : "cpu") : w.device);
    device_words = here.device + " (" + here.device_name + ")";
    std::cout << "planning for " << here.device << " (" << here.device_name << "; LibTorch " << o.libtorch_major
              << ".x, attention " << ab::to_string(o.attention) << ")";
    if (!target.cuda) std::cout << "; pass --device cuda to plan for a GPU";
    std::cout << "\n\n";
  }
  // The table shown: the largest plain split (no knobs beyond the grid's own checkpointing, the
  // chunked loss head when it was asked for) of the first job of the lists (any padding of it) that
  // has one that fits; else the largest split with knobs that fits (--knobs: the optimizer inside backward may
  // be the one that does); else the smallest of all.
  // The paddings of a --padding list compute one update: the largest split of any of them (the
  // first padding's among equals).
  const auto same_update = [](ab::GridJob a, const ab::GridJob& b) {
    a.padding = b.padding;
    return a == b;
  };
  const ab::MemoryPlan* shown = nullptr;
  for (const ab::GridJob& job : ab::grid_jobs(w)) {
    for (const auto& p : plans) {
      const bool plain = same_update(ab::job_of(p.split), job) &&
                         p.split.optimizer_in_backward == w.grid.optimizer_in_backward &&
                         p.split.activation_checkpointing == w.grid.checkpointing &&
                         p.split.chunked_loss == w.loss.chunked;
      if (plain && (memory == 0 || p.peak_bytes <= memory) &&
          (shown == nullptr || p.split.micro_batch > shown->split.micro_batch)) {
        shown = &p;
      }
    }
    if (shown != nullptr) break;
  }
  if (shown == nullptr && memory > 0) {  // no plain split fits (without a limit one is shown)
    for (const auto& p : plans) {
      if (p.peak_bytes <= memory && (shown == nullptr || p.split.micro_batch > shown->split.micro_batch)) shown = &p;
    }
  }
  if (shown == nullptr) {
    shown = &*std::min_element(plans.begin(), plans.end(),
                               [](const ab::MemoryPlan& a, const ab::MemoryPlan& b) { return a.peak_bytes < b.peak_bytes; });
  }
  std::cout << "splits of batch " << w.batch;
  if (w.world_size > 1) std::cout << " over " << w.world_size << " data-parallel ranks, " << o.batch << " per rank";
  std::cout << " (" << ab::join_precisions(w.precisions) << ", attention " << ab::to_string(o.attention)
            << (ab::grid_max_grad_norms(w).size() > 1 ? ", --max-grad-norm " + ab::join_norms(ab::grid_max_grad_norms(w))
                : w.optimizer.clips()                 ? ", gradients clipped to norm " + ab::text::format_number(w.optimizer.max_grad_norm)
                                                      : "")
            << (ab::grid_packings(w).size() > 1 ? ", --packing " + ab::join_packings(ab::grid_packings(w)) : "")
            << (ab::grid_paddings(w).size() > 1 ? ", --padding " + ab::join_paddings(ab::grid_paddings(w)) : "")
            << "):\n";
  if (const std::string line = ab::activation_length_line(o); !line.empty()) std::cout << line << "\n";
  if (limit > 0) {
    std::cout << "memory limit " << ab::format_bytes(limit) << " less headroom " << ab::format_bytes(headroom_bytes)
              << " (--headroom " << headroom << "): " << ab::format_bytes(memory) << " for the splits\n";
  }
  const std::vector<std::string> target_modules = ab::peft_target_modules(cfg, w.lora);
  // The Trainer settings of the device planned for (tf32 and adamw_torch act on CUDA only).
  ab::WorkloadOptions planned = w;
  if (planned.device == "auto") planned.device = target.cuda ? "cuda" : "cpu";
  planned.data.completion_mask_applied = ab::completion_mask_counts(w.data, w.seq_len);
  ab::print_split_summary(plans, memory, std::cout, &planned, target_modules);
  ab::PlanReport report{plans, planned, target_modules, device_words, limit, headroom_bytes, {}, {}, "", notes, {}};
  if (orders.size() > 1) report.orders_planned_once = orders;
  report.largest = ab::largest_fitting_per_job(cfg, o, w, memory);
  // Nothing fits in any job of the lists: the changes to the lightest of them.
  if (memory > 0 && std::none_of(report.largest.begin(), report.largest.end(), [](const ab::JobLargest& job) { return job.fits(); })) {
    const ab::LightestJob lightest = ab::lightest_job(cfg, o, w);
    report.changes = ab::changes_to_fit(cfg, o, w, lightest, memory);
    report.changes_which = lightest.which;
  }
  for (const std::string& line : ab::largest_lines(report)) std::cout << line << "\n";
  for (const std::string& line : ab::changes_lines(report)) std::cout << line << "\n";
  if (detail == "on") {
    std::cout << "\n";
    ab::print_plan(*shown, std::cout);
  }
  if (calibrate) {
    std::cout << "\ncalibrated (probes at micro-batches 1 and 2 on " << w.device << "):\n";
    std::vector<ab::Calibration> calibrations;
    for (const auto& p : plans) calibrations.push_back(ab::calibrate(cfg, ab::plan_options_for(o, p.split), p.split, w.device, 1, 2));
    ab::print_calibrated(plans, calibrations, std::cout);
  }
  std::string heading = "split " + ab::plan_label(*shown, plans) +
                        (memory == 0 ? ": the largest planned (no memory limit given)"
                         : shown->peak_bytes <= memory ? ": the largest that fits in " + ab::format_bytes(memory)
                                                       : ": none fits in " + ab::format_bytes(memory) + ", the smallest");
  const ab::MemoryPlan* emitted = shown;
  // accumbench's own loop planned, TRL's settings asked for: TRL's step also holds its loss and
  // metrics on the logits, which can put the table's split over the limit there (helper-102). The
  // file names the largest split of the same kind that fits under TRL's own step.
  std::optional<ab::MemoryPlan> trl_step;
  if (emit == "trl" && o.framework == ab::PlanFramework::kPlain) {
    if (memory == 0) {
      print_note("the TRL settings below come from accumbench's own loop (--framework plain); TRL's step also holds "
                 "its loss and metrics on the logits, so its peak can be higher: plan --framework hf-trl (or "
                 "--trl-config with these settings) plans TRL's own step before you train with them");
    } else {
      trl_step = largest_under_trl(cfg, plans, *shown, memory);
      const std::string trl_loss_words = shown->split.chunked_loss ? "chunked_nll" : "nll";
      if (!trl_step) {
        heading += "; none of its kind fits under TRL's own step (--framework hf-trl --trl-loss " + trl_loss_words + ")";
      } else if (trl_step->split.micro_batch != shown->split.micro_batch) {
        heading = "split " + ab::plan_label(*trl_step, plans) + ": the largest that fits in " + ab::format_bytes(memory) +
                  " under TRL's own step (--framework hf-trl --trl-loss " + trl_loss_words + ", " +
                  ab::format_bytes(trl_step->peak_bytes) + "), which holds its loss and metrics on the logits too; " +
                  "accumbench's own loop fits " +
                  (shown->peak_bytes <= memory ? ab::plan_label(*shown, plans) : std::string("none of them"));
        emitted = &*std::find_if(plans.begin(), plans.end(), [&](const ab::MemoryPlan& p) { return p.split.key() == trl_step->split.key(); });
      } else if (shown->peak_bytes > memory) {  // TRL's own loss holds less than accumbench's loop here
        heading = "split " + ab::plan_label(*shown, plans) + ": none fits in " + ab::format_bytes(memory) +
                  " in accumbench's own loop, but under TRL's own step (--framework hf-trl --trl-loss " + trl_loss_words +
                  ") it does, at " + ab::format_bytes(trl_step->peak_bytes);
      } else {
        heading += ", under TRL's own step too (--framework hf-trl --trl-loss " + trl_loss_words + ": " +
                   ab::format_bytes(trl_step->peak_bytes) + ")";
      }
    }
  }
  print_emitted(emit, heading, ab::trainer_settings(*emitted, planned, target_modules));
  write_files(report);
  // No split fits, and no change the plan tries makes one fit: the limit is impossible for this
  // job, as a sweep finds it (exit 2 there too), after the plan that shows why.
  // (No change left to try, every one already given, is no change that fits: helper-108.)
  const bool impossible = memory > 0 &&
                          std::none_of(report.largest.begin(), report.largest.end(),
                                       [](const ab::JobLargest& job) { return job.fits(); }) &&
                          std::none_of(report.changes.begin(), report.changes.end(),
                                       [](const ab::FitChange& change) { return change.fits(); });
  if (impossible) {
    throw ab::UserError("nothing fits in the " + ab::format_bytes(memory) + " left for the splits (" +
                        (w.memory_limit_bytes > 0 ? "--memory-limit " : "the GPU's ") + ab::format_bytes(limit) +
                        " less --headroom), " +
                        (report.changes.empty() ? std::string("and every change the plan would try is already given")
                                                : std::string("even with every change the plan tried above")) +
                        "; plan a shorter --seq-len or a smaller model, or give more memory");
  }
  return 0;
}

// ---- report, compare, models ----

struct ReportCommand {
  std::string input;
  OutputFiles files;

  CLI::App* add_to(CLI::App& app) {
    CLI::App* command = app.add_subcommand("report", "render a saved sweep JSON again (console, or files)");
    command->add_option("results", input, "a JSON file written by `accumbench sweep --json`");
    files.add_to(command, /*sweeping=*/false);
    return command;
  }

  int run() const {
    if (input.empty()) throw ab::UserError("report needs the JSON file a sweep wrote: accumbench report FILE.json");
    files.require_writable(input, "the results file");
    const ab::SweepResult result = ab::load_sweep_result(input);
    files.write(result);
    const int unwritten = files.announce();
    if (!files.any()) {
      for (const std::string& note : ab::sweep_notes(result)) print_note(note);  // as the sweep said them
      ab::ConsoleReporter({stdout_is_tty()}).report(result, std::cout);
    }
    return unwritten;
  }
};

struct CompareCommand {
  std::string a, b;

  CLI::App* add_to(CLI::App& app) {
    CLI::App* command = app.add_subcommand("compare", "compare two sweep JSON files split by split");
    command->add_option("a", a, "baseline JSON");
    command->add_option("b", b, "other JSON");
    return command;
  }

  int run() const {
    if (a.empty() || b.empty()) {
      throw ab::UserError(std::string("compare needs two JSON files that sweeps wrote") +
                          (a.empty() ? "" : ", and got one") + ": accumbench compare A.json B.json");
    }
    const ab::SweepResult first = ab::load_sweep_result(a);  // in order: errors name the first bad file
    const ab::SweepResult second = ab::load_sweep_result(b);
    try {
      ab::require_distinct_files({{"a", a}, {"b", b}});
    } catch (const ab::UserError&) {
      print_note("A and B are the same file, " + ab::text::quoted(a, 240) + ": every pair compares a run with itself");
    }
    ab::print_comparison(first, second, std::cout);
    return 0;
  }
};

// CLI11 splits a list option at its commas and drops the empty items, so "--optimizer adamw,"
// would run as "--optimizer adamw" without a word: a typo (a value left out) is refused instead.
void refuse_empty_list_items(int argc, char** argv) {
  static const char* const kLists[] = {"--micro-batches", "--micro-batch",   "--precision",     "--optimizer",
                                       "--weights-dtype", "--adapter-dtype", "--max-grad-norm", "--frameworks",
                                       "--padding",       "--packing",       "--group-by-length"};
  const auto check = [](const std::string& flag, const std::string& value) {
    if (value.find(',') == std::string::npos) return;
    if (value.front() != ',' && value.back() != ',' && value.find(",,") == std::string::npos) return;
    const std::string example = flag == "--micro-batches" || flag == "--micro-batch" ? "1,2,4"
                                : flag == "--optimizer"                           ? "adamw,sgd"
                                : flag == "--frameworks"                          ? "plain,hf-trl"
                                : flag == "--max-grad-norm"                       ? "0,1"
                                : flag == "--padding"                             ? "max,longest"
                                : flag == "--packing"                             ? "none,bfd"
                                : flag == "--group-by-length"                     ? "false,true"
                                                                                  : "fp32,bf16";
    throw ab::UserError(flag + " " + ab::text::quoted(value, 60) +
                        " has an empty item (a comma too many, or a value left out); separate the values by single "
                        "commas, as in " + flag + " " + example);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    // Bare, --group-by-length is true; an empty value (an unset shell variable) is not the flag.
    if (arg == "--group-by-length=" || (arg == "--group-by-length" && i + 1 < argc && argv[i + 1][0] == '\0')) {
      throw ab::UserError("--group-by-length has an empty value; give true or false (or a list, false,true), or the "
                          "flag alone for true");
    }
    for (const char* list : kLists) {
      const std::string flag = list;
      if (arg.rfind(flag + "=", 0) == 0) check(flag, arg.substr(flag.size() + 1));
      if (arg != flag) continue;
      // Its values: the words up to the next option (a vector option takes several).
      for (int j = i + 1; j < argc && argv[j][0] != '-'; ++j) check(flag, argv[j]);
    }
  }
}

// Every option that takes a value, in every subcommand: an empty value is refused (an unset shell
// variable ran `--lr ""` as a learning rate of 0), and an integer written with leading zeros reads
// as the decimal it looks like (CLI11 reads "010" as octal 8 and refuses "08"). Options whose value
// may be left out (--activation-checkpointing) keep their own rules.
void harden_values(CLI::App& app) {
  const CLI::Validator not_empty(
      [](std::string& value) {
        return value.empty() ? std::string("an empty value; give one, or leave the option out") : std::string();
      },
      "");
  // CLI11 reads an integer past 64 bits as the largest one (strtoll saturates): "--batch
  // 99999999999999999999" was refused as "--batch 9223372036854775807 is above the limit", and a
  // --seed that large ran as another seed. `largest`: the type's largest magnitude, in digits.
  const auto decimal = [](bool is_unsigned) {
    return CLI::Validator(
        [is_unsigned](std::string& value) {
          const size_t sign = !value.empty() && (value[0] == '-' || value[0] == '+') ? 1 : 0;
          size_t first = sign;
          while (first + 1 < value.size() && value[first] == '0' &&
                 std::isdigit(static_cast<unsigned char>(value[first + 1])))
            ++first;
          // CLI11 reads 0x10 as 16 and 0b11 as 3: a number in another base is refused, not guessed.
          if (value.size() > sign + 1 && value[sign] == '0' &&
              std::string("xXbBoO").find(value[sign + 1]) != std::string::npos) {
            return ab::text::shortened(value, 40) + " is not a decimal whole number; write it in decimal digits";
          }
          const bool digits = value.size() > sign &&
                              std::all_of(value.begin() + static_cast<std::ptrdiff_t>(sign), value.end(),
                                          [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
          if (!digits) return std::string();
          const std::string magnitude = value.substr(first);
          const bool negative = value[0] == '-';
          const std::string largest = is_unsigned ? "18446744073709551615"
                                      : negative  ? "9223372036854775808"
                                                  : "9223372036854775807";
          if (magnitude.size() > largest.size() || (magnitude.size() == largest.size() && magnitude > largest)) {
            return ab::text::shortened(value, 40) + " is beyond the largest whole number accumbench reads (" +
                   (negative ? "-" : "") + largest + "); give a smaller value";
          }
          if (first > sign) value = value.substr(0, sign) + magnitude;
          return std::string();
        },
        "");
  };
  const CLI::Validator signed_decimal = decimal(false), unsigned_decimal = decimal(true);
  for (CLI::App* command : app.get_subcommands({})) {
    for (CLI::Option* option : command->get_options()) {
      if (option->get_type_size_max() == 0 || option->get_expected_min() == 0) continue;  // flags, optional values
      option->check(not_empty);
      const std::string type = option->get_type_name();
      if (type.rfind("INT", 0) == 0) option->transform(signed_decimal);
      if (type.rfind("UINT", 0) == 0) option->transform(unsigned_decimal);
    }
  }
}

// A parse error: one sentence naming the problem and where to look.
int parse_error(const CLI::App& app, const CLI::ParseError& error, int argc, char** argv) {
  if (app.get_subcommands().empty()) {
    std::string names;
    for (const CLI::App* sub : app.get_subcommands({})) names += (names.empty() ? "" : ", ") + sub->get_name();
    std::cerr << "accumbench: error: "
              << (argc > 1 ? "unknown subcommand or option " + ab::text::quoted(argv[1]) : std::string("no subcommand given"))
              << "; use one of " << names << " (see `accumbench --help`)\n";
    return ab::kUserErrorExitCode;
  }
  const std::string command = app.get_subcommands().front()->get_name();
  std::string what = error.what();
  // CLI11's own words for two common slips, said as this tool says things.
  const std::string twice = ": At Most 1 required but received ";
  if (const auto at = what.find(twice); at != std::string::npos) {
    what = what.substr(0, at) + " is given more than once; give it once";
  } else if (dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr) {
    // CLI11 lists the extras last first; name the first option the user typed among them.
    const std::string list = what.substr(what.find(':') + 1);
    std::string option;
    for (int i = 2; i < argc && option.empty(); ++i) {
      const std::string word = argv[i];
      if (word.size() > 1 && word[0] == '-' && (" " + list + " ").find(" " + word + " ") != std::string::npos) option = word;
    }
    what = option.empty() ? "unexpected argument(s)" + list + " (a value without its option?)"
                          : option + " is not an option of `accumbench " + command + "`";
  } else if (dynamic_cast<const CLI::ConversionError*>(&error) != nullptr) {
    // CLI11's "Could not convert: --steps = 3000000000" (not a number, or past what the option's
    // integer holds), said with what the option takes.
    const std::string head = "Could not convert: ";
    const auto equals = what.find(" = ");
    if (what.rfind(head, 0) == 0 && equals != std::string::npos) {
      const std::string option = what.substr(head.size(), equals - head.size());
      const std::string value = what.substr(equals + 3);
      std::string type;
      try {
        type = app.get_subcommands().front()->get_option(option)->get_type_name();
      } catch (const CLI::Error&) {  // not an option of this name: CLI11's words stand
      }
      const bool whole = type.find("INT") != std::string::npos;
      const size_t sign = !value.empty() && (value[0] == '-' || value[0] == '+') ? 1 : 0;
      const bool integer = value.size() > sign && value.find_first_not_of("0123456789", sign) == std::string::npos;
      if (!type.empty()) {
        what = option + " " + ab::text::quoted(value) + " is not " +
               (!whole    ? std::string("a number; give one")
                : integer ? "a whole number " + option + " can hold; give " + (value[0] == '-' ? "a positive" : "a smaller") +
                                " one"
                          : std::string("a whole number; give one"));
      }
    }
  }
  // CLI11 echoes the offending value whole; a 500,000-character argument must not flood stderr.
  std::cerr << "accumbench: error: " << ab::text::shortened(what, 200) << "; see `accumbench " << command
            << " --help`\n";
  return ab::kUserErrorExitCode;
}

int run(int argc, char** argv) {
  CLI::App app{
      "accumbench: which micro-batch x gradient-accumulation split of your effective batch is fastest,\n"
      "which fit in memory, and why, measured on this device with LibTorch.",
      "accumbench"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every subcommand");
  app.set_version_flag("--version", std::function<std::string()>(ab::build_description),
                       "the version, git commit, build type and LibTorch it was built with");
  SweepCommand sweep;
  VerifyCommand verify;
  PlanCommand plan;
  ReportCommand report;
  CompareCommand compare;
  CalibrateFrameworkCommand calibrate;
  CLI::App* sweep_cmd = sweep.add_to(app);
  CLI::App* verify_cmd = verify.add_to(app);
  CLI::App* plan_cmd = plan.add_to(app);
  CLI::App* report_cmd = report.add_to(app);
  CLI::App* compare_cmd = compare.add_to(app);
  CLI::App* calibrate_cmd = calibrate.add_to(app);
  CLI::App* models_cmd = app.add_subcommand("models", "list the model presets");
  std::string model_index;
  models_cmd->add_option("--index", model_index,
                         "print one model's shape as verify --export's index.json holds it, without weights (a preset name, "
                         "or a config.json, model directory or Hub id as --hf-config takes): what bench/reference/step_bench.py "
                         "and hf_real_step.py read with --export")
      ->type_name("MODEL");
  harden_values(app);
  refuse_empty_list_items(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) return app.exit(error);  // --help
    return parse_error(app, error, argc, argv);
  }
  if (*models_cmd) {
    if (model_index.empty()) {
      ab::print_models(ab::presets(), std::cout);
      return 0;
    }
    try {
      std::cout << ab::model_index_json(ab::resolve_model(ab::model_options_for(model_index)));
    } catch (const ab::UserError& error) {
      // The config is read as --hf-config reads it; named as the user gave it (helper-95).
      const std::string what = error.what(), read_as = "--hf-config ";
      if (what.rfind(read_as, 0) != 0) throw;
      throw ab::UserError("models --index " + what.substr(read_as.size()));
    }
    return 0;
  }
  if (*compare_cmd) return compare.run();
  if (*report_cmd) return report.run();
  // A value a trainer config set, refused under its option's name, names the file's key too.
  const auto naming_file_keys = [](const WorkloadFlags& flags, const std::function<int()>& body) {
    try {
      return body();
    } catch (const ab::UserError& error) {
      throw ab::UserError(flags.naming_file_key(error.what()));
    }
  };
  if (*plan_cmd) return naming_file_keys(plan.flags, [&] { return plan.run(); });
  if (*calibrate_cmd) return naming_file_keys(calibrate.flags, [&] { return calibrate.run(); });
  // Data parallel (torchrun): every rank measures, rank 0 alone prints and writes files.
  const bool primary = ab::process_rank() == 0;
  if (*verify_cmd) return naming_file_keys(verify.flags, [&] { return verify.run(primary); });
  (void)sweep_cmd;
  return naming_file_keys(sweep.flags, [&] { return sweep.run(primary); });
}

// What the command printed must have reached stdout: on a full disk or a closed stdout the table of
// a sweep without --json would be lost while the command said it succeeded.
// The fix names a file option only for the commands that have one.
int with_output_checked(int code, const std::string& command) {
  std::cout.flush();
  if (std::cout.good()) return code;
  const std::string fix =
      command == "sweep" ? "write the results to a file (--json FILE, which accumbench report FILE prints again) or "
                           "give stdout room"
      : command == "plan" ? "write the plan to a file (--json FILE) or give stdout room"
                          : "send stdout to a file or a stream with room (> FILE)";
  std::cerr << "accumbench: error: writing to standard output failed (a full disk or a closed stream), so what the "
               "command printed there is lost; "
            << fix << "\n";
  return code == 0 ? ab::kUserErrorExitCode : code;
}

}  // namespace

int main(int argc, char** argv) {
  // Only the commands that run training steps; the others never start a parallel region.
  if (argc > 1 && (std::string(argv[1]) == "sweep" || std::string(argv[1]) == "verify" ||
                   std::string(argv[1]) == "plan" || std::string(argv[1]) == "calibrate-framework")) {
    ab::use_passive_openmp_wait(argv);
  }
  try {
    return with_output_checked(run(argc, argv), argc > 1 ? argv[1] : "");
  } catch (const ab::UserError& error) {
    // One line whatever a value it names holds (a path or a preset name with a newline in it).
    std::cerr << "accumbench: error: " << ab::text::escaped_controls(error.what()) << "\n";
    return ab::kUserErrorExitCode;
  } catch (const ab::FatalRunError& error) {  // a data-parallel peer gone: saved, then stopped
    std::cerr << "accumbench: error: " << ab::text::escaped_controls(error.what()) << "\n";
    return 1;
  } catch (const std::exception& error) {
    std::cerr << "accumbench: internal error: " << error.what() << "\n";
    return 1;
  }
}
