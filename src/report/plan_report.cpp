// The plan as something to hand over (plan_report.hpp): one column table for the split table of
// every format, the headroom, the largest split of the batch that fits, JSON, Markdown, HTML.
#include "accumbench/plan_report.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <sstream>

#include "accumbench/error.hpp"
#include "accumbench/report.hpp"
#include "accumbench/units.hpp"
#include "accumbench_report_css.hpp"  // html::kReportCss, generated from report.css
#include "report/html/text.hpp"

namespace accumbench {

namespace {

std::string phase_cell(const MemoryPlan& p, PlanPhase phase) {
  return format_bytes(p.phase_peak_bytes[static_cast<int>(phase)]);
}

// The Trainer's keys that differ between splits; trl_settings' first three.
std::string trainer_key(const MemoryPlan& p, const PlanReport& r, size_t index) {
  return trl_settings(trainer_settings(p, r.workload, r.target_modules))[index].second;
}

bool fits(const MemoryPlan& p, const PlanReport& r) { return p.peak_bytes <= r.usable_bytes(); }

}  // namespace

const std::vector<PlanColumn>& plan_columns() {
  static const std::vector<PlanColumn> columns = {
      {"split", "split", false, false, [](const MemoryPlan& p, const PlanReport&) { return p.split.label(); }},
      {"forward", "forward", true, false,
       [](const MemoryPlan& p, const PlanReport&) { return phase_cell(p, PlanPhase::kForward); }},
      {"backward", "backward", true, false,
       [](const MemoryPlan& p, const PlanReport&) { return phase_cell(p, PlanPhase::kBackward); }},
      {"optimizer", "optimizer", true, false,
       [](const MemoryPlan& p, const PlanReport&) { return phase_cell(p, PlanPhase::kOptimizer); }},
      {"peak", "peak", true, false, [](const MemoryPlan& p, const PlanReport&) { return format_bytes(p.peak_bytes); }},
      {"held_by", "held by", false, false,
       [](const MemoryPlan& p, const PlanReport&) { return std::string(plan_phase_name(p.peak_phase)); }},
      // What is left of the usable memory at the peak; negative: how much is missing.
      {"spare", "spare", true, true,
       [](const MemoryPlan& p, const PlanReport& r) { return format_bytes(r.usable_bytes() - p.peak_bytes); }},
      {"fits", "fits", false, true,
       [](const MemoryPlan& p, const PlanReport& r) { return std::string(fits(p, r) ? "yes" : "no"); }},
      {"per_device_train_batch_size", "per_device_train_batch_size", true, false,
       [](const MemoryPlan& p, const PlanReport& r) { return trainer_key(p, r, 0); }},
      {"gradient_accumulation_steps", "gradient_accumulation_steps", true, false,
       [](const MemoryPlan& p, const PlanReport& r) { return trainer_key(p, r, 1); }},
      {"gradient_checkpointing", "gradient_checkpointing", false, false,
       [](const MemoryPlan& p, const PlanReport& r) { return trainer_key(p, r, 2); }},
  };
  return columns;
}

std::vector<const PlanColumn*> shown_plan_columns(const PlanReport& report) {
  std::vector<const PlanColumn*> shown;
  for (const PlanColumn& c : plan_columns()) {
    if (!c.needs_limit || report.memory_limit_bytes > 0) shown.push_back(&c);
  }
  return shown;
}

int64_t headroom_bytes(const std::string& text, int64_t memory_limit_bytes) {
  int64_t bytes = 0;
  if (!text.empty() && text.back() == '%') {
    double percent = -1;
    try {
      size_t used = 0;
      percent = std::stod(text.substr(0, text.size() - 1), &used);
      if (used != text.size() - 1) percent = -1;
    } catch (const std::exception&) {
    }
    if (!(percent >= 0 && percent < 100)) {
      throw UserError("--headroom " + text::quoted(text) + " is no percentage from 0 to 100; write it as 5% or as a "
                      "size with its unit, 1GiB");
    }
    bytes = static_cast<int64_t>(std::llround(static_cast<double>(memory_limit_bytes) * percent / 100.0));
  } else {
    try {
      bytes = parse_memory_limit(text);
    } catch (const UserError&) {
      throw UserError("--headroom " + text::quoted(text) + " is neither a size with its unit (1GiB, 500MB) nor a "
                      "percentage of the memory limit (5%)");
    }
  }
  if (memory_limit_bytes > 0 && bytes >= memory_limit_bytes) {
    throw UserError("--headroom " + text + " leaves nothing of the " + format_bytes(memory_limit_bytes) +
                    " memory limit; give a smaller headroom");
  }
  return bytes;
}

namespace {

// A job as changes_to_fit changes it: its plan options, its precision, whether its loss is chunked,
// whether its optimizer steps inside backward (then accumulation 1 only).
struct Job {
  PlanOptions options;
  Precision precision;
  bool chunked;
  bool in_backward = false;
};

// The largest split of a rank's share of the batch that fits the job with these knobs
// (micro_batch 0: none).
LargestSplit largest_with(const ModelConfig& cfg, const Job& job, const char* words, Checkpointing checkpointing,
                          bool chunked, int64_t usable_bytes) {
  LargestSplit largest{words, {}, 0};
  largest.split.micro_batch = 0;
  const int64_t batch = job.options.batch;  // a rank's share
  const std::vector<int64_t> micro_batches = divisors(batch);
  for (auto m = micro_batches.rbegin(); m != micro_batches.rend(); ++m) {
    if (job.in_backward && *m != batch) continue;
    SplitConfig split;
    split.micro_batch = *m;
    split.accum_steps = batch / *m;
    split.precision = job.precision;
    split.activation_checkpointing = checkpointing;
    split.chunked_loss = chunked;
    split.optimizer_in_backward = job.in_backward;
    split.world_size = job.options.world_size;
    const MemoryPlan plan = plan_memory(cfg, job.options, split);
    if (plan.peak_bytes <= usable_bytes) {
      largest.split = split;
      largest.peak_bytes = plan.peak_bytes;
      break;
    }
  }
  return largest;
}

// "4×4; with checkpointing: 4×4 ckpt"
std::string largest_words(const std::vector<LargestSplit>& largest) {
  std::string words;
  for (const LargestSplit& l : largest) {
    words += std::string(words.empty() ? "" : "; ") + (l.knobs.empty() ? "" : l.knobs + ": ") +
             (l.split.micro_batch > 0 ? l.split.label() : std::string("none"));
  }
  return words;
}

bool any_fits(const std::vector<LargestSplit>& largest) {
  return std::any_of(largest.begin(), largest.end(), [](const LargestSplit& l) { return l.split.micro_batch > 0; });
}

// The largest splits that fit the changed job, without and with checkpointing; when the change is
// the chunked loss (`chunked_by_change`), only with it.
FitChange change_with(const ModelConfig& cfg, const Job& job, bool chunked_by_change, const std::string& words,
                      int64_t usable_bytes) {
  FitChange change{words, {}, false};
  const auto add = [&](const char* knobs, Checkpointing checkpointing, bool chunked) {
    change.largest.push_back(largest_with(cfg, job, knobs, checkpointing, chunked, usable_bytes));
  };
  if (!chunked_by_change) {
    add("", Checkpointing::kNone, false);
    add("with checkpointing", Checkpointing::kBlocks, false);
  }
  if (job.chunked) {
    add(chunked_by_change ? "" : "with the chunked loss", Checkpointing::kNone, true);
    add(chunked_by_change ? "with checkpointing" : "with both", Checkpointing::kBlocks, true);
  }
  return change;
}

}  // namespace

bool FitChange::fits() const { return any_fits(largest); }

std::vector<LargestSplit> largest_fitting_splits(const ModelConfig& cfg, const PlanOptions& options,
                                                 const WorkloadOptions& workload, int64_t usable_bytes) {
  if (usable_bytes <= 0 || workload.precisions.empty()) return {};
  const Job as_given{options, workload.precisions.front(), workload.loss.chunked};
  return change_with(cfg, as_given, /*chunked_by_change=*/false, "", usable_bytes).largest;
}

std::string largest_line(const PlanReport& r) {
  if (r.largest.empty() || r.plans.empty()) return "";
  return "largest split of " + std::to_string(r.plans.front().options.batch) + (r.workload.world_size > 1 ? " per rank" : "") +
         " that fits in " + format_bytes(r.usable_bytes()) + ": " + largest_words(r.largest);
}

namespace {

// One change changes_to_fit may make to the job, alone or with others.
struct Change {
  std::string words;                // as typed: "--lora-rank 16 --base-quant nf4"
  std::function<void(Job&)> edit;
  bool adds_lora = false;           // LoRA r16 on a full fine-tune
  bool brings_lora = false;         // the 4-bit base of a full fine-tune, which brings LoRA r16 with it
};

// Every way to pick `k` of `count` items, in lexicographic order of their indices.
void each_combination(size_t count, size_t k, const std::function<void(const std::vector<size_t>&)>& visit) {
  std::vector<size_t> picked(k);
  for (size_t i = 0; i < k; ++i) picked[i] = i;
  while (k <= count) {
    visit(picked);
    size_t i = k;
    while (i > 0 && picked[i - 1] == count - k + i - 1) --i;
    if (i == 0) return;
    ++picked[i - 1];
    for (size_t j = i; j < k; ++j) picked[j] = picked[j - 1] + 1;
  }
}

}  // namespace

std::vector<FitChange> changes_to_fit(const ModelConfig& cfg, const PlanOptions& options, const WorkloadOptions& workload,
                                      int64_t usable_bytes) {
  std::vector<FitChange> out;
  if (usable_bytes <= 0 || workload.precisions.empty()) return out;
  if (any_fits(largest_fitting_splits(cfg, options, workload, usable_bytes))) return out;
  const Job as_given{options, workload.precisions.front(), workload.loss.chunked};
  // The changes not in effect yet, from what gives up least to most.
  std::vector<Change> changes;
  const bool lora = options.lora.enabled();
  // TRL's step has its own loss (--trl-loss); accumbench's chunked head stands in for it otherwise.
  if (!as_given.chunked && options.framework == PlanFramework::kPlain)
    changes.push_back({"--chunked-loss", [](Job& j) { j.chunked = true; }});
  if (options.framework == PlanFramework::kHfTrl && options.trl_loss == TrlLoss::kNll)
    changes.push_back({"--trl-loss chunked_nll", [](Job& j) { j.options.trl_loss = TrlLoss::kChunkedNll; }});
  // A full fine-tune's gradients, each freed as its parameter steps (exact, at accumulation 1; one
  // process, no fp16 loss scaling, accumbench's own loop).
  if (!lora && !workload.grid.optimizer_in_backward && options.framework == PlanFramework::kPlain &&
      options.world_size <= 1 && as_given.precision != Precision::kFp16)
    changes.push_back({"--optimizer-in-backward", [](Job& j) { j.in_backward = true; }});
  if (as_given.precision == Precision::kFp32)
    changes.push_back({"--precision bf16", [](Job& j) { j.precision = Precision::kBf16; }});
  if (!lora && options.optimizer == OptimizerKind::kAdamW)  // a full fine-tune's state
    changes.push_back({"--optimizer adamw8bit", [](Job& j) { j.options.optimizer = OptimizerKind::kAdamW8bit; }});
  if (options.weights_dtype == Precision::kFp32 && !options.lora.quantized()) {
    const Precision half = as_given.precision == Precision::kFp16 ? Precision::kFp16 : Precision::kBf16;
    changes.push_back({"--weights-dtype " + to_string(half), [half](Job& j) { j.options.weights_dtype = half; }});
  }
  if (!lora) changes.push_back({"--lora-rank 16", [](Job& j) { j.options.lora.rank = 16; }, true});
  if (!options.lora.quantized()) {
    changes.push_back({lora ? "--base-quant nf4" : "--lora-rank 16 --base-quant nf4",
                       [](Job& j) {
                         if (!j.options.lora.enabled()) j.options.lora.rank = 16;
                         j.options.lora.base_quant = BaseQuant::kNf4;
                       },
                       false, !lora});
  }
  // The job with the picked changes made, planned; nullopt when two of them make the same change
  // (LoRA r16, and the 4-bit base that brings it).
  const auto planned = [&](const std::vector<size_t>& picked) -> std::optional<FitChange> {
    Job job = as_given;
    std::string words;
    bool brings_lora = false, adds_lora = false;
    for (size_t i : picked) {
      changes[i].edit(job);
      words += (words.empty() ? "" : " ") + changes[i].words;
      brings_lora = brings_lora || changes[i].brings_lora;
      adds_lora = adds_lora || changes[i].adds_lora;
    }
    if (brings_lora && adds_lora) return std::nullopt;
    FitChange change = change_with(cfg, job, job.chunked && !as_given.chunked, words, usable_bytes);
    change.combined = picked.size();
    return change;
  };
  for (size_t i = 0; i < changes.size(); ++i) out.push_back(*planned({i}));
  if (std::any_of(out.begin(), out.end(), [](const FitChange& c) { return c.fits(); })) return out;
  // None alone: the fewest changes that fit together, every combination of that many that does.
  for (size_t k = 2; k <= changes.size(); ++k) {
    bool found = false;
    each_combination(changes.size(), k, [&](const std::vector<size_t>& picked) {
      std::optional<FitChange> change = planned(picked);
      if (change && change->fits()) {
        out.push_back(*change);
        found = true;
      }
    });
    if (found) return out;
  }
  // Nothing fits in any combination: all of them at once (LoRA r16 once, where the 4-bit base
  // brings it) says so.
  std::vector<size_t> every;
  for (size_t i = 0; i < changes.size(); ++i)
    if (!changes[i].adds_lora || std::none_of(changes.begin(), changes.end(), [](const Change& c) { return c.brings_lora; }))
      every.push_back(i);
  if (every.size() > 1) out.push_back(*planned(every));
  return out;
}

namespace {

// "two" for 2: how many changes are combined, in words.
std::string count_word(size_t k) {
  static const char* const kCounts[] = {"none", "one", "two", "three", "four", "five", "six", "seven", "eight"};
  return k < 9 ? std::string(kCounts[k]) : std::to_string(k);
}

// "none alone; with two of them together (each combination that fits):", or "" when every change
// listed is alone or nothing fits together.
std::string together_heading(const std::vector<FitChange>& changes) {
  if (changes.empty() || !changes.back().together() || !changes.back().fits()) return "";
  return "none alone; with " + count_word(changes.back().combined) + " of them together (each combination that fits):";
}

bool nothing_fits(const std::vector<FitChange>& changes) {
  return std::none_of(changes.begin(), changes.end(), [](const FitChange& c) { return c.fits(); });
}

}  // namespace

std::vector<std::string> changes_lines(const PlanReport& r) {
  std::vector<std::string> lines;
  if (r.changes.empty()) return lines;
  lines.push_back("no split fits in " + format_bytes(r.usable_bytes()) +
                  "; the largest that would with one change (the plan with each option added):");
  // Each group (alone, together) aligned on its own widest option.
  const auto add_group = [&](bool together) {
    size_t width = 0;
    for (const FitChange& c : r.changes)
      if (c.together() == together) width = std::max(width, c.options.size());
    for (const FitChange& c : r.changes)
      if (c.together() == together)
        lines.push_back("  " + c.options + std::string(width - c.options.size() + 2, ' ') + largest_words(c.largest));
  };
  add_group(false);
  const std::string heading = together_heading(r.changes);
  if (!heading.empty()) {
    lines.push_back(heading);
    add_group(true);
  } else if (nothing_fits(r.changes)) {
    const FitChange& all = r.changes.back();
    if (all.together())
      lines.push_back("none alone or in any combination; all of them together (" + all.options + "): " + largest_words(all.largest));
    lines.push_back("nothing tried fits: a shorter --seq-len, a smaller model or more memory is needed (more data-parallel ranks "
                    "do not help: each holds the whole model and at least one sequence)");
  }
  return lines;
}

namespace {

// The splits of `largest` that fit, as a sweep labels them: "1×16 or 2×8 ckpt"; a micro-batch
// once, without the knobs where it fits without them.
std::string fitting_words(const std::vector<LargestSplit>& largest) {
  std::string words;
  for (auto l = largest.begin(); l != largest.end(); ++l) {
    const bool earlier = std::any_of(largest.begin(), l, [&](const LargestSplit& e) { return e.split.micro_batch == l->split.micro_batch; });
    if (l->split.micro_batch > 0 && !earlier) words += (words.empty() ? "" : " or ") + l->split.label();
  }
  return words;
}

bool was_tried(const SplitConfig& split, const std::vector<SplitConfig>& tried) {
  return std::any_of(tried.begin(), tried.end(), [&](const SplitConfig& t) {
    return t.micro_batch == split.micro_batch && t.activation_checkpointing == split.activation_checkpointing &&
           t.chunked_loss == split.chunked_loss && t.precision == split.precision &&
           t.optimizer_in_backward == split.optimizer_in_backward;
  });
}

}  // namespace

std::string fit_advice(const ModelConfig& cfg, const PlanOptions& options, const WorkloadOptions& workload,
                       int64_t usable_bytes, const std::vector<SplitConfig>& tried) {
  if (usable_bytes <= 0) return "";
  const std::vector<LargestSplit> largest = largest_fitting_splits(cfg, options, workload, usable_bytes);
  if (any_fits(largest)) {
    // Each split not tried, with the sweep options that would try it: "2×4 ckpt (--micro-batches 2
    // --activation-checkpointing)".
    std::string untried;
    for (const LargestSplit& l : largest) {
      if (l.split.micro_batch == 0 || was_tried(l.split, tried)) continue;
      const auto tried_with = [&](const std::function<bool(const SplitConfig&)>& same) {
        return std::any_of(tried.begin(), tried.end(), same);
      };
      std::string flags;
      if (!tried_with([&](const SplitConfig& t) { return t.micro_batch == l.split.micro_batch; }))
        flags += "--micro-batches " + std::to_string(l.split.micro_batch);
      if (!tried_with([&](const SplitConfig& t) { return t.activation_checkpointing == l.split.activation_checkpointing; })) {
        flags += std::string(flags.empty() ? "" : " ") + "--activation-checkpointing " +
                 to_string(l.split.activation_checkpointing);
      }
      untried += (untried.empty() ? "" : " or ") + l.split.label() + (flags.empty() ? "" : " (" + flags + ")");
    }
    if (untried.empty()) return "";
    return "The plan fits " + untried + " in " + format_bytes(usable_bytes) + ", which this sweep did not run.";
  }
  const std::vector<FitChange> changes = changes_to_fit(cfg, options, workload, usable_bytes);
  std::string fitting;
  size_t combined = 1;
  for (const FitChange& c : changes) {
    if (!c.fits()) continue;
    fitting += (fitting.empty() ? "" : ", or ") + c.options + " (" + fitting_words(c.largest) + ")";
    combined = c.combined;
  }
  if (fitting.empty()) {
    return "Nothing the plan tries fits in " + format_bytes(usable_bytes) +
           ", not even every change it knows together: a shorter --seq-len, a smaller model or more memory is needed.";
  }
  return "The plan fits it in " + format_bytes(usable_bytes) + " with " +
         (combined == 1 ? std::string("one change: ") : count_word(combined) + " changes together: ") + fitting +
         " (`accumbench plan` with the same options and --memory-limit shows each).";
}

namespace {

std::string context_words(const PlanReport& r) {
  const MemoryPlan& p = r.plans.front();
  std::string words = p.model.name + ", T=" + std::to_string(p.options.seq_len) + ", batch " +
                      std::to_string(r.workload.batch);
  if (r.workload.world_size > 1) {
    words += " over " + std::to_string(r.workload.world_size) + " data-parallel ranks, " +
             std::to_string(p.options.batch) + " per rank";
  }
  words += ", " + to_string(p.split.precision) + ", attention " + to_string(p.options.attention) + ", device " + r.device;
  if (p.options.framework != PlanFramework::kPlain)
    words += ", framework " + to_string(p.options.framework) + " (TRL loss_type " + to_string(p.options.trl_loss) + ")";
  return words;
}

std::string memory_words(const PlanReport& r) {
  if (r.memory_limit_bytes <= 0) return "no memory limit: pass --memory-limit to see which splits fit";
  return "memory limit " + format_bytes(r.memory_limit_bytes) + " less headroom " + format_bytes(r.headroom_bytes) +
         " (CUDA context, fragmentation): " + format_bytes(r.usable_bytes()) + " for the splits";
}

std::string shared_settings(const PlanReport& r) {
  const std::vector<std::pair<std::string, std::string>> keys =
      trl_settings(trainer_settings(r.plans.front(), r.workload, r.target_modules));
  std::string text;
  for (size_t k = 3; k < keys.size(); ++k) text += (text.empty() ? "" : " ") + keys[k].first + "=" + keys[k].second;
  return text;
}

const char* const kPlanLegend =
    "Splits read micro-batch x accumulation steps per rank; ckpt = activation checkpointing, oib = the optimizer "
    "inside backward, chunked-ce = the chunked cross-entropy. held by = the phase at the peak; spare = usable memory "
    "left at the peak (negative: missing).";

std::string markdown_cell(const std::string& value) {
  std::string escaped;
  for (char c : value) {
    if (c == '|') escaped += "\\|";
    else if (c == '<') escaped += "&lt;";
    else if (c == '>') escaped += "&gt;";
    else if (c == '&') escaped += "&amp;";
    else if (c == '\n') escaped += ' ';
    else escaped += c;
  }
  return escaped;
}

}  // namespace

std::string plan_json(const PlanReport& r) {
  using nlohmann::json;
  json out;
  out["kind"] = "accumbench plan";
  json context;
  const MemoryPlan& first = r.plans.front();
  context["model"] = first.model.name;
  context["seq_len"] = first.options.seq_len;
  context["batch"] = r.workload.batch;
  context["world_size"] = r.workload.world_size;
  context["batch_per_rank"] = first.options.batch;
  context["precision"] = to_string(first.split.precision);
  context["attention"] = to_string(first.options.attention);
  context["framework"] = to_string(first.options.framework);  // plan --framework
  // plan --trl-loss: null for plain, whose loss is accumbench's own
  context["trl_loss"] = first.options.framework == PlanFramework::kHfTrl ? nlohmann::json(to_string(first.options.trl_loss)) : nlohmann::json();
  context["device"] = r.device;
  context["memory_limit_bytes"] = r.memory_limit_bytes > 0 ? json(r.memory_limit_bytes) : json(nullptr);
  context["headroom_bytes"] = r.memory_limit_bytes > 0 ? json(r.headroom_bytes) : json(nullptr);
  context["usable_bytes"] = r.memory_limit_bytes > 0 ? json(r.usable_bytes()) : json(nullptr);
  for (const auto& [name, value] : describe_workload(r.workload)) context["options"][name] = value;
  out["context"] = context;
  json splits = json::array();
  for (const MemoryPlan& p : r.plans) {
    json s;
    s["split"] = p.split.label();
    s["micro_batch"] = p.split.micro_batch;
    s["accum_steps"] = p.split.accum_steps;
    s["activation_checkpointing"] = to_string(p.split.activation_checkpointing);
    s["optimizer_in_backward"] = p.split.optimizer_in_backward;
    s["chunked_loss"] = p.split.chunked_loss;
    for (int phase = 0; phase < kPlanPhaseCount; ++phase) {
      s[std::string(plan_phase_name(static_cast<PlanPhase>(phase))) + "_bytes"] = p.phase_peak_bytes[phase];
    }
    s["peak_bytes"] = p.peak_bytes;
    s["held_by"] = plan_phase_name(p.peak_phase);
    s["spare_bytes"] = r.memory_limit_bytes > 0 ? json(r.usable_bytes() - p.peak_bytes) : json(nullptr);
    s["fits"] = r.memory_limit_bytes > 0 ? json(fits(p, r)) : json(nullptr);
    json settings;
    for (const auto& [key, value] : trl_settings(trainer_settings(p, r.workload, r.target_modules))) {
      settings[key] = value;
    }
    s["trainer_settings"] = settings;
    splits.push_back(s);
  }
  out["splits"] = splits;
  const auto largest_json = [](const std::vector<LargestSplit>& list) {
    json largest = json::array();
    for (const LargestSplit& l : list) {
      largest.push_back({{"knobs", l.knobs.empty() ? "none" : l.knobs},
                         {"split", l.split.micro_batch > 0 ? json(l.split.label()) : json(nullptr)},
                         {"peak_bytes", l.split.micro_batch > 0 ? json(l.peak_bytes) : json(nullptr)}});
    }
    return largest;
  };
  out["largest_fitting"] = largest_json(r.largest);
  // When nothing fits: each change with the largest splits it would fit (empty otherwise).
  json changes = json::array();
  for (const FitChange& c : r.changes)
    changes.push_back({{"options", c.options}, {"changes", c.combined}, {"largest_fitting", largest_json(c.largest)}});
  out["changes_to_fit"] = changes;
  return out.dump(2) + "\n";
}

std::string plan_markdown(const PlanReport& r) {
  std::ostringstream out;
  out << "**accumbench plan:** " << markdown_cell(context_words(r)) << "; " << markdown_cell(memory_words(r)) << "\n\n";
  const std::vector<const PlanColumn*> columns = shown_plan_columns(r);
  std::string header = "|", rule = "|";
  for (const PlanColumn* c : columns) {
    header += " " + c->header + " |";
    rule += c->right ? " ---: |" : " --- |";
  }
  out << header << "\n" << rule << "\n";
  for (const MemoryPlan& p : r.plans) {
    out << "|";
    for (const PlanColumn* c : columns) out << " " << markdown_cell(c->cell(p, r)) << " |";
    out << "\n";
  }
  out << "\nEvery split also: " << markdown_cell(shared_settings(r)) << "\n";
  const std::string largest = largest_line(r);
  if (!largest.empty()) out << "\n" << markdown_cell(largest) << "\n";
  const std::vector<std::string> changes = changes_lines(r);
  if (!changes.empty()) {
    out << "\n" << markdown_cell(changes.front()) << "\n\n";
    const std::string heading = together_heading(r.changes);
    for (size_t i = 0; i < r.changes.size(); ++i) {
      const FitChange& c = r.changes[i];
      if (!heading.empty() && c.together() && (i == 0 || !r.changes[i - 1].together()))
        out << "\n" << markdown_cell(heading) << "\n\n";
      out << "- " << (c.together() && heading.empty() ? "all of them together, " : "") << "`" << c.options
          << "`: " << markdown_cell(largest_words(c.largest)) << "\n";
    }
    if (nothing_fits(r.changes)) out << "\n" << markdown_cell(changes.back()) << "\n";
  }
  out << "\n" << kPlanLegend << "\n";
  return out.str();
}

std::string plan_html(const PlanReport& r) {
  using html::html_escape;
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  h += "<meta name=\"generator\" content=\"accumbench\">\n";
  h += "<title>accumbench plan \u2014 " + html_escape(context_words(r)) + "</title>\n";
  h += "<style>\n" + std::string(html::kReportCss) + "</style>\n</head>\n<body>\n<main>\n";
  h += "<header><h1>accumbench plan \u00b7 " + html_escape(r.plans.front().model.name) + "</h1>";
  h += "<p class=\"subtitle\">" + html_escape(context_words(r)) + "</p>";
  h += "<p class=\"subtitle\">" + html_escape(memory_words(r)) + "</p></header>\n";
  h += "<section class=\"card table-card\"><h2>Splits</h2><div class=\"table-wrap\"><table id=\"plan-table\"><thead><tr>";
  const std::vector<const PlanColumn*> columns = shown_plan_columns(r);
  for (const PlanColumn* c : columns) h += (c->right ? "<th>" : "<th class=\"text\">") + html_escape(c->header) + "</th>";
  h += "</tr></thead><tbody>";
  for (const MemoryPlan& p : r.plans) {
    const bool bad = r.memory_limit_bytes > 0 && !fits(p, r);
    h += bad ? "<tr class=\"status-bad\">" : "<tr>";
    for (const PlanColumn* c : columns) {
      h += (c->right ? "<td>" : "<td class=\"text\">") + html_escape(c->cell(p, r)) + "</td>";
    }
    h += "</tr>";
  }
  h += "</tbody></table></div>";
  h += "<p class=\"note\">Every split also: " + html_escape(shared_settings(r)) + "</p>";
  const std::string largest = largest_line(r);
  if (!largest.empty()) h += "<p class=\"note\">" + html_escape(largest) + "</p>";
  const std::vector<std::string> changes = changes_lines(r);
  if (!changes.empty()) {
    h += "<p class=\"note\">" + html_escape(changes.front()) + "</p><ul class=\"note\">";
    const std::string heading = together_heading(r.changes);
    for (size_t i = 0; i < r.changes.size(); ++i) {
      const FitChange& c = r.changes[i];
      if (!heading.empty() && c.together() && (i == 0 || !r.changes[i - 1].together()))
        h += "</ul><p class=\"note\">" + html_escape(heading) + "</p><ul class=\"note\">";
      h += "<li>" + std::string(c.together() && heading.empty() ? "all of them together, " : "") + "<code>" +
           html_escape(c.options) + "</code>: " + html_escape(largest_words(c.largest)) + "</li>";
    }
    h += "</ul>";
    if (nothing_fits(r.changes)) h += "<p class=\"note\">" + html_escape(changes.back()) + "</p>";
  }
  h += "<p class=\"note\">" + html_escape(kPlanLegend) + "</p></section>\n";
  h += "<footer>Generated by accumbench \u00b7 the data of this page is embedded below as JSON (#accumbench-plan)</footer>\n";
  std::string data = plan_json(r);
  // "</" would end the script element early: write it as "<\/", which JSON reads the same.
  for (size_t at = data.find("</"); at != std::string::npos; at = data.find("</", at + 3)) data.replace(at, 2, "<\\/");
  h += "</main>\n<script type=\"application/json\" id=\"accumbench-plan\">" + data + "</script>\n</body>\n</html>\n";
  return h;
}

}  // namespace accumbench
