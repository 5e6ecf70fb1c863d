// The plan as something to hand over (plan_report.hpp): one column table for the split table of
// every format, what fits (plan_fit.hpp) as lines, JSON, Markdown, HTML.
#include "accumbench/plan_report.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "accumbench/error.hpp"
#include "accumbench/report.hpp"
#include "accumbench/units.hpp"
#include "accumbench_report_css.hpp"  // html::kReportCss, generated from report.css
#include "report/format.hpp"
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

// The Trainer settings of one split that not every split shares ("optim=adamw_bnb_8bit dtype=bfloat16").
std::string own_settings(const MemoryPlan& p, const PlanReport& r) {
  std::string text;
  for (const auto& [key, value] : own_trainer_keys(p, shared_trainer_keys(r.plans, r.workload, r.target_modules),
                                                   r.workload, r.target_modules)) {
    text += (text.empty() ? "" : " ") + key + "=" + value;
  }
  return text;
}

bool some_own_settings(const PlanReport& r) {
  return std::any_of(r.plans.begin(), r.plans.end(), [&](const MemoryPlan& p) { return !own_settings(p, r).empty(); });
}

}  // namespace

const std::vector<PlanColumn>& plan_columns() {
  static const std::vector<PlanColumn> columns = {
      {"split", "split", false, false, [](const MemoryPlan& p, const PlanReport& r) { return plan_label(p, r.plans); }},
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
      // An optimizer or dtype list's own keys (optim, dtype, bf16): not every split shares them.
      {"other_trainer_settings", "other Trainer settings", false, false, own_settings, some_own_settings},
  };
  return columns;
}

std::vector<const PlanColumn*> shown_plan_columns(const PlanReport& report) {
  std::vector<const PlanColumn*> shown;
  for (const PlanColumn& c : plan_columns()) {
    if ((!c.needs_limit || report.memory_limit_bytes > 0) && (c.shown == nullptr || c.shown(report))) shown.push_back(&c);
  }
  return shown;
}

// The largest splits in words; where every split of the table is checkpointed, the one without
// checkpointing is named so ("without checkpointing: 2×4"), since no row of the table is it.
std::string largest_said(const PlanReport& r, std::vector<LargestSplit> largest) {
  if (r.workload.grid.checkpointing == Checkpointing::kBlocks) {
    for (LargestSplit& l : largest) {
      if (l.knobs.empty()) l.knobs = "without checkpointing";
    }
  }
  return largest_words(largest);
}

std::vector<std::string> largest_lines(const PlanReport& r) {
  if (r.largest.empty() || r.plans.empty()) return {};
  const std::string what = "largest split of " + std::to_string(r.plans.front().options.batch) +
                           (r.workload.world_size > 1 ? " per rank" : "") + " that fits in " + format_bytes(r.usable_bytes());
  if (r.largest.size() == 1) return {what + ": " + largest_said(r, r.largest.front().largest)};
  std::vector<std::string> lines = {what + ", for each job of the lists:"};
  size_t width = 0;
  for (const JobLargest& job : r.largest) width = std::max(width, job.flags.size());
  for (const JobLargest& job : r.largest)
    lines.push_back("  " + job.flags + std::string(width - job.flags.size() + 2, ' ') + largest_said(r, job.largest));
  return lines;
}

namespace {

// "none alone; with two of them together (each combination that fits):", or "" when every change
// listed is alone or nothing fits together.
std::string together_heading(const std::vector<FitChange>& changes) {
  if (changes.empty() || !changes.back().together() || !changes.back().fits()) return "";
  return "none alone; with " + text::number_word(changes.back().combined) + " of them together (each combination that fits):";
}

bool nothing_fits(const std::vector<FitChange>& changes) {
  return std::none_of(changes.begin(), changes.end(), [](const FitChange& c) { return c.fits(); });
}

}  // namespace

std::vector<std::string> changes_lines(const PlanReport& r) {
  std::vector<std::string> lines;
  if (r.changes.empty()) return lines;
  lines.push_back("no split fits in " + format_bytes(r.usable_bytes()) +
                  (r.changes_which.empty() ? "" : ", even with " + r.changes_which) +
                  "; the largest that would with one change (the plan with each option added):");
  // Each group (alone, together) aligned on its own widest option.
  const auto add_group = [&](bool together) {
    size_t width = 0;
    for (const FitChange& c : r.changes)
      if (c.together() == together) width = std::max(width, c.options.size());
    for (const FitChange& c : r.changes)
      if (c.together() == together)
        lines.push_back("  " + c.options + std::string(width - c.options.size() + 2, ' ') + largest_said(r, c.largest));
  };
  add_group(false);
  const std::string heading = together_heading(r.changes);
  if (!heading.empty()) {
    lines.push_back(heading);
    add_group(true);
  } else if (nothing_fits(r.changes)) {
    const FitChange& all = r.changes.back();
    if (all.together())
      lines.push_back("none alone or in any combination; all of them together (" + all.options + "): " + largest_said(r, all.largest));
    lines.push_back("nothing tried fits: a shorter --seq-len, a smaller model or more memory is needed (more data-parallel ranks "
                    "do not help: each holds the whole model and at least one sequence)");
  }
  return lines;
}


namespace {

// "bf16", or the list of a plan of several: "fp32,bf16".
std::string precision_words(const PlanReport& r) { return join_precisions(r.workload.precisions); }

// The longest padded micro-batch the plans' activations are planned at, in words: one padding's,
// or every padding's of a --padding list; "" without real data padded per micro-batch.
std::string worst_micro_batches(const PlanReport& r) {
  const PlanOptions& first = r.plans.front().options;
  return first.worst_micro_batch_every_padding.empty() ? first.worst_micro_batch : first.worst_micro_batch_every_padding;
}

// A --packing list: each packing's longest micro-batch ("--packing none: ...; --packing bfd: rows of
// T"); "" with one packing.
std::string every_packings_micro_batch(const PlanOptions& o) {
  if (o.rows_by_packing.size() < 2) return "";
  std::string words;
  for (const PlanOptions::PackedRows& packed : o.rows_by_packing) {
    const PlannedRows& rows = packed.rows;
    const std::string worst = !rows.worst_micro_batch_every_padding.empty() ? rows.worst_micro_batch_every_padding
                              : !rows.worst_micro_batch.empty()
                                  ? std::to_string(rows.activation_seq_len) + " positions, " + rows.worst_micro_batch
                                  : "rows of T=" + std::to_string(o.seq_len);
    words += (words.empty() ? "" : "; ") + std::string("--packing ") + to_string(packed.packing) + ": " + worst;
  }
  return words;
}

std::string context_words(const PlanReport& r) {
  const MemoryPlan& p = r.plans.front();
  std::string words = p.model.name + ", T=" + std::to_string(p.options.seq_len);
  const bool one_padding = std::all_of(r.plans.begin(), r.plans.end(),
                                       [&](const MemoryPlan& other) { return other.split.padding == p.split.padding; });
  if (const std::string packings = every_packings_micro_batch(p.options); !packings.empty()) {
    words += " (activations at the longest micro-batch of each packing: " + packings + ")";
  } else if (!p.options.worst_micro_batch.empty() && one_padding) {
    words += " (activations at " + std::to_string(p.options.activation_length()) +
             " positions, the longest padded micro-batch: " + p.options.worst_micro_batch + ")";
  } else if (!one_padding && !worst_micro_batches(r).empty()) {
    words += " (activations at the longest padded micro-batch of each padding: " + worst_micro_batches(r) + ")";
  }
  words += ", batch " + std::to_string(r.workload.batch);
  if (r.workload.world_size > 1) {
    words += " over " + std::to_string(r.workload.world_size) + " data-parallel ranks, " +
             std::to_string(p.options.batch) + " per rank";
  }
  words += ", " + precision_words(r) + ", attention " + to_string(p.options.attention) + ", device " + r.device;
  if (p.options.framework != PlanFramework::kPlain)
    words += ", framework " + to_string(p.options.framework) + " (TRL loss_type " + to_string(p.options.trl_loss) + ")";
  return words;
}

}  // namespace

std::string activation_length_line(const PlanOptions& o) {
  if (const std::string packings = every_packings_micro_batch(o); !packings.empty()) {
    return "activations at the longest micro-batch of each packing: " + packings;
  }
  // A --padding list: each padding's longest padded micro-batch (the same samples, padded its way).
  if (!o.worst_micro_batch_every_padding.empty()) {
    return "activations at the longest padded micro-batch of each padding: " + o.worst_micro_batch_every_padding;
  }
  // Real data: the activations are planned at the longest padded micro-batch, not at T.
  if (!o.worst_micro_batch.empty()) {
    return "activations at " + std::to_string(o.activation_length()) + " positions, the longest padded micro-batch: " +
           o.worst_micro_batch + grouped_words(o);
  }
  return "";
}

std::string grouped_words(const PlanOptions& o) {
  if (o.grouped_lengths.empty() || o.world_size > 1) return "";
  return "; --group-by-length puts a step's longest samples in its first micro-batch, planned before any gradient "
         "exists, and each later micro-batch at its own longest, with the gradients (per split: activation_seq_len "
         "in --json)";
}

namespace {

std::string memory_words(const PlanReport& r) {
  if (r.memory_limit_bytes <= 0) return "no memory limit: pass --memory-limit to see which splits fit";
  const bool cpu = !r.plans.empty() && r.plans.front().options.cpu;
  return "memory limit " + format_bytes(r.memory_limit_bytes) + " less headroom " + format_bytes(r.headroom_bytes) +
         (cpu ? " (what the plan does not count)" : " (CUDA context, fragmentation)") + ": " +
         format_bytes(r.usable_bytes()) + " for the splits";
}

std::string shared_settings(const PlanReport& r) {
  std::string text;
  for (const auto& [key, value] : shared_trainer_keys(r.plans, r.workload, r.target_modules))
    text += (text.empty() ? "" : " ") + key + "=" + value;
  return text;
}

const char* const kPlanLegend =
    "Splits read micro-batch \u00d7 accumulation steps per rank; ckpt = activation checkpointing, oib = the optimizer "
    "inside backward, chunked-ce = the chunked cross-entropy. held by = the phase at the peak; spare = usable memory "
    "left at the peak (negative: missing).";

// The legend, and for a plan of several jobs how a split names its job.
std::string legend(const PlanReport& r) {
  if (grid_jobs(r.workload).size() <= 1) return kPlanLegend;
  return std::string(kPlanLegend) + " A split of a list's job also names its optimizer unless adamw, its weights' and "
         "adapters' dtypes unless fp32 (bf16-weights, bf16-adapters) and, with several, its precision, its clipping "
         "(no-clip, clip1), its packing (unpacked, pack-bfd) and its padding (pad-max, pad-longest).";
}

}  // namespace

namespace {
// The job of a split or of a largest split, in the sweep JSON's words.
void add_job(nlohmann::json& entry, const GridJob& job) {
  entry["precision"] = to_string(job.precision);
  entry["optimizer"] = to_string(job.optimizer);
  entry["weights_dtype"] = to_string(job.weights_dtype);
  entry["adapter_dtype"] = to_string(job.adapter_dtype);
  entry["max_grad_norm"] = job.max_grad_norm;
  entry["padding"] = padding_name(job.padding);
  entry["packing"] = to_string(job.packing);
  entry["group_by_length"] = job.group_by_length;
}
}  // namespace

namespace {
// A Trainer setting's value as the YAML file it is written for types it: true and false, whole and
// real numbers, a [list] of module names, a 'quoted' pattern as its text; a word stays a string.
nlohmann::json typed_setting(const std::string& value) {
  if (value == "true" || value == "false") return value == "true";
  if (value.size() >= 2 && value.front() == '[' && value.back() == ']') {
    nlohmann::json items = nlohmann::json::array();
    std::stringstream in(value.substr(1, value.size() - 2));
    for (std::string item; std::getline(in, item, ',');) {
      item.erase(0, item.find_first_not_of(' '));
      item.erase(item.find_last_not_of(' ') + 1);
      if (!item.empty()) items.push_back(item);
    }
    return items;
  }
  if (value.size() >= 2 && value.front() == '\'' && value.back() == '\'') {
    std::string text = value.substr(1, value.size() - 2);
    for (size_t at = text.find("''"); at != std::string::npos; at = text.find("''", at + 1)) text.erase(at, 1);
    return text;
  }
  if (!value.empty()) {
    char* end = nullptr;
    errno = 0;
    const long long whole = std::strtoll(value.c_str(), &end, 10);
    if (errno == 0 && end == value.c_str() + value.size()) return static_cast<int64_t>(whole);
    const double real = std::strtod(value.c_str(), &end);
    if (end == value.c_str() + value.size() && std::isfinite(real)) return real;
  }
  return value;
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
  // Real data padded per micro-batch: the activations are planned at the longest padded one (the
  // first split's here; each split's own, under a --padding list, in its entry).
  context["activation_seq_len"] = first.options.activation_length();
  const std::string packings = every_packings_micro_batch(first.options);
  const std::string worst = packings.empty() ? worst_micro_batches(r) : packings;
  context["memory_judged_on"] = worst.empty() ? json(nullptr) : json(worst);
  context["batch"] = r.workload.batch;
  context["world_size"] = r.workload.world_size;
  context["batch_per_rank"] = first.options.batch;
  // The sweep's host batches (--distinct-steps of every packing), device memory on the CPU only.
  context["token_batches"] = first.options.cpu ? json(first.options.token_batches) : json(nullptr);
  context["precision"] = precision_words(r);  // "fp32,bf16" for a plan of both
  context["attention"] = to_string(first.options.attention);
  context["framework"] = to_string(first.options.framework);  // plan --framework
  // plan --trl-loss: null for plain, whose loss is accumbench's own
  context["trl_loss"] = first.options.framework == PlanFramework::kHfTrl ? nlohmann::json(to_string(first.options.trl_loss)) : nlohmann::json();
  context["device"] = r.device;
  context["memory_limit_bytes"] = r.memory_limit_bytes > 0 ? json(r.memory_limit_bytes) : json(nullptr);
  context["headroom_bytes"] = r.memory_limit_bytes > 0 ? json(r.headroom_bytes) : json(nullptr);
  context["usable_bytes"] = r.memory_limit_bytes > 0 ? json(r.usable_bytes()) : json(nullptr);
  for (const auto& [name, value] : describe_workload(r.workload)) context["options"][name] = value;
  if (r.orders_planned_once.size() > 1) context["options"]["group_by_length"] = join_groupings(r.orders_planned_once);
  out["context"] = context;
  json splits = json::array();
  for (const MemoryPlan& p : r.plans) {
    json s;
    s["split"] = plan_label(p, r.plans);
    s["micro_batch"] = p.split.micro_batch;
    s["accum_steps"] = p.split.accum_steps;
    s["activation_checkpointing"] = to_string(p.split.activation_checkpointing);
    s["optimizer_in_backward"] = p.split.optimizer_in_backward;
    s["chunked_loss"] = p.split.chunked_loss;
    add_job(s, job_of(p.split));
    s["activation_seq_len"] = p.options.activation_length();
    // A grouped step's first micro-batch, planned apart (before any gradient): null where not.
    s["first_micro_batch_activation_seq_len"] =
        p.first_micro_batch_length > 0 ? json(p.first_micro_batch_length) : json(nullptr);
    for (int phase = 0; phase < kPlanPhaseCount; ++phase) {
      s[std::string(plan_phase_name(static_cast<PlanPhase>(phase))) + "_bytes"] = p.phase_peak_bytes[phase];
    }
    s["peak_bytes"] = p.peak_bytes;
    s["held_by"] = plan_phase_name(p.peak_phase);
    s["spare_bytes"] = r.memory_limit_bytes > 0 ? json(r.usable_bytes() - p.peak_bytes) : json(nullptr);
    s["fits"] = r.memory_limit_bytes > 0 ? json(fits(p, r)) : json(nullptr);
    json settings;
    for (const auto& [key, value] : trl_settings(trainer_settings(p, r.workload, r.target_modules))) {
      settings[key] = typed_setting(value);
    }
    s["trainer_settings"] = settings;
    splits.push_back(s);
  }
  out["splits"] = splits;
  const auto largest_json = [](const std::vector<LargestSplit>& list, const GridJob* job) {
    json largest = json::array();
    for (const LargestSplit& l : list) {
      json entry = {{"knobs", l.knobs.empty() ? "none" : l.knobs},
                    {"split", l.split.micro_batch > 0 ? json(l.split.shape_label()) : json(nullptr)},
                    {"peak_bytes", l.split.micro_batch > 0 ? json(l.peak_bytes) : json(nullptr)}};
      if (job != nullptr) add_job(entry, *job);
      largest.push_back(entry);
    }
    return largest;
  };
  // Per job of the lists, one after the other (each entry names its job).
  json largest = json::array();
  for (const JobLargest& job : r.largest) {
    for (json& entry : largest_json(job.largest, &job.job)) largest.push_back(entry);
  }
  out["largest_fitting"] = largest;
  // When nothing fits: each change with the largest splits it would fit (empty otherwise).
  json changes = json::array();
  for (const FitChange& c : r.changes)
    changes.push_back({{"options", c.options}, {"changes", c.combined}, {"largest_fitting", largest_json(c.largest, nullptr)}});
  out["changes_to_fit"] = changes;
  // The job the changes are to, when the lists gave a choice (lightest_job); null otherwise.
  out["changes_to"] = r.changes_which.empty() ? json(nullptr) : json(r.changes_which);
  out["notes"] = r.notes;
  return out.dump(2) + "\n";
}

std::string plan_markdown(const PlanReport& r) {
  std::ostringstream out;
  out << "**accumbench plan:** " << text::markdown_cell(context_words(r)) << "; " << text::markdown_cell(memory_words(r)) << "\n\n";
  out << text::markdown_notes(r.notes);
  const std::vector<const PlanColumn*> columns = shown_plan_columns(r);
  std::string header = "|", rule = "|";
  for (const PlanColumn* c : columns) {
    header += " " + c->header + " |";
    rule += c->right ? " ---: |" : " --- |";
  }
  out << header << "\n" << rule << "\n";
  for (const MemoryPlan& p : r.plans) {
    out << "|";
    for (const PlanColumn* c : columns) out << " " << text::markdown_cell(c->cell(p, r)) << " |";
    out << "\n";
  }
  out << "\nEvery split also: " << text::markdown_cell(shared_settings(r)) << "\n";
  const std::vector<std::string> largest = largest_lines(r);
  if (!largest.empty()) out << "\n" << text::markdown_cell(largest.front()) << "\n";
  for (size_t i = 1; i < largest.size(); ++i)  // per job: "--optimizer adamw8bit: 8×2; ..."
    out << (i == 1 ? "\n" : "") << "- `" << r.largest[i - 1].flags << "`: " << text::markdown_cell(largest_said(r, r.largest[i - 1].largest)) << "\n";
  const std::vector<std::string> changes = changes_lines(r);
  if (!changes.empty()) {
    out << "\n" << text::markdown_cell(changes.front()) << "\n\n";
    const std::string heading = together_heading(r.changes);
    for (size_t i = 0; i < r.changes.size(); ++i) {
      const FitChange& c = r.changes[i];
      if (!heading.empty() && c.together() && (i == 0 || !r.changes[i - 1].together()))
        out << "\n" << text::markdown_cell(heading) << "\n\n";
      out << "- " << (c.together() && heading.empty() ? "all of them together, " : "") << "`" << c.options
          << "`: " << text::markdown_cell(largest_said(r, c.largest)) << "\n";
    }
    if (nothing_fits(r.changes)) out << "\n" << text::markdown_cell(changes.back()) << "\n";
  }
  out << "\n" << legend(r) << "\n";
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
  h += html::notes_card(r.notes);
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
  const std::vector<std::string> largest = largest_lines(r);
  if (!largest.empty()) h += "<p class=\"note\">" + html_escape(largest.front()) + "</p>";
  if (largest.size() > 1) {
    h += "<ul class=\"note\">";
    for (const JobLargest& job : r.largest)
      h += "<li><code>" + html_escape(job.flags) + "</code>: " + html_escape(largest_said(r, job.largest)) + "</li>";
    h += "</ul>";
  }
  const std::vector<std::string> changes = changes_lines(r);
  if (!changes.empty()) {
    h += "<p class=\"note\">" + html_escape(changes.front()) + "</p><ul class=\"note\">";
    const std::string heading = together_heading(r.changes);
    for (size_t i = 0; i < r.changes.size(); ++i) {
      const FitChange& c = r.changes[i];
      if (!heading.empty() && c.together() && (i == 0 || !r.changes[i - 1].together()))
        h += "</ul><p class=\"note\">" + html_escape(heading) + "</p><ul class=\"note\">";
      h += "<li>" + std::string(c.together() && heading.empty() ? "all of them together, " : "") + "<code>" +
           html_escape(c.options) + "</code>: " + html_escape(largest_said(r, c.largest)) + "</li>";
    }
    h += "</ul>";
    if (nothing_fits(r.changes)) h += "<p class=\"note\">" + html_escape(changes.back()) + "</p>";
  }
  h += "<p class=\"note\">" + html_escape(legend(r)) + "</p></section>\n";
  h += "<footer>Generated by accumbench \u00b7 the data of this page is embedded below as JSON (#accumbench-plan)</footer>\n";
  std::string data = plan_json(r);
  // "</" would end the script element early: write it as "<\/", which JSON reads the same.
  for (size_t at = data.find("</"); at != std::string::npos; at = data.find("</", at + 3)) data.replace(at, 2, "<\\/");
  h += "</main>\n<script type=\"application/json\" id=\"accumbench-plan\">" + data + "</script>\n</body>\n</html>\n";
  return h;
}

}  // namespace accumbench
