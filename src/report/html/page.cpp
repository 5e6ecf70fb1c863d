// HtmlReporter: one self-contained page a user can mail around. Inline CSS (report.css, embedded
// at build time), inline SVG charts drawn by charts.hpp, no script that runs and no network
// reference (the only URL is the SVG namespace).
//
//   header + recommendation
//   charts  #chart-step-time  #chart-throughput  #chart-memory  #chart-timeline
//   the table of every number (table.cpp), the context block, the sweep as JSON (to_json) for tools
//
// Failed runs keep their slot in every chart as a labelled gap ("OOM") so a reader sees what is
// missing. Every text that came from outside (model, host, errors) goes through html_escape, and
// the embedded JSON through json_for_script, so a hostile name cannot close the <script>.
#include <algorithm>
#include <string>
#include <vector>

#include "accumbench/report.hpp"
#include "accumbench/result.hpp"
#include "accumbench/statistics.hpp"
#include "accumbench_report_css.hpp"  // html::kReportCss, generated from report.css
#include "report/columns.hpp"
#include "report/format.hpp"
#include "report/html/charts.hpp"
#include "report/html/frame.hpp"
#include "report/html/table.hpp"
#include "report/html/text.hpp"

namespace accumbench {
namespace html {
namespace {

// JSON inside <script> must never contain "</script" or "<!--". JSON syntax outside strings never
// uses '<', '>' or '&', and inside strings \u003c is the same character, so a textual replace is
// exact and the parsed data is unchanged.
std::string json_for_script(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (char c : json) {
    switch (c) {
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// The clipping norms, paddings, packings and orders of the runs where they differ ("clip off/1 \u00b7
// padding max/longest \u00b7 packing none/bfd \u00b7 grouped false/true"; the table's clip, padded, packed
// and grouped columns say which run is which), else "".
std::string grid_list_words(const std::vector<RunResult>& runs) {
  std::vector<std::string> norms, paddings, packings, groupings;
  const auto add = [](std::vector<std::string>& seen, const std::string& value) {
    if (std::find(seen.begin(), seen.end(), value) == seen.end()) seen.push_back(value);
  };
  for (const RunResult& run : runs) {
    add(norms, run.config.max_grad_norm > 0 ? text::format_number(run.config.max_grad_norm) : "off");
    add(paddings, padding_name(run.config.padding));
    add(packings, to_string(run.config.packing));
    add(groupings, run.config.group_by_length ? "true" : "false");
  }
  const auto slashed = [](const std::vector<std::string>& values) {
    std::string out;
    for (const std::string& v : values) out += (out.empty() ? "" : "/") + v;
    return out;
  };
  std::string words;
  if (norms.size() > 1) words += "clip " + slashed(norms);
  if (paddings.size() > 1) words += std::string(words.empty() ? "" : " \u00b7 ") + "padding " + slashed(paddings);
  if (packings.size() > 1) words += std::string(words.empty() ? "" : " \u00b7 ") + "packing " + slashed(packings);
  if (groupings.size() > 1) words += std::string(words.empty() ? "" : " \u00b7 ") + "grouped " + slashed(groupings);
  return words;
}

// Model, shape, precision (of every run, "bf16/fp32" when several), the weights' and adapters'
// dtypes unless fp32 alone (text::dtype_words), the optimizers unless AdamW alone, the clipping
// norms and paddings where the runs differ in them, device and ranks.
std::string title_line(const SweepContext& c, const std::string& precisions, const std::string& dtypes,
                       const std::string& optimizers, const std::string& lists) {
  std::string t = c.model.empty() ? "unnamed model" : c.model;
  t += " \u00b7 seq len " + std::to_string(c.seq_len) + " \u00b7 batch " + std::to_string(c.batch);
  if (!precisions.empty()) t += " \u00b7 " + precisions;
  if (!dtypes.empty()) t += " \u00b7 " + dtypes;
  if (!optimizers.empty() && optimizers != "adamw") t += " \u00b7 " + optimizers;
  if (!lists.empty()) t += " \u00b7 " + lists;
  if (!c.device_name.empty() || !c.device.empty())
    t += " \u00b7 " + (c.device_name.empty() ? c.device : c.device_name);
  if (c.world_size > 1) t += " \u00d7 " + std::to_string(c.world_size) + " ranks";
  return t;
}

std::string kpi(const std::string& key, const std::string& value) {
  return "<div class=\"kpi\"><div class=\"k\">" + html_escape(key) + "</div><div class=\"v\">" +
         html_escape(value) + "</div></div>";
}

// The recommended split's headline numbers.
std::string kpis(const SweepResult& result, const std::vector<Slot>& slots, const RunResult& best) {
  std::string h = "<div class=\"kpis\">";
  h += kpi(steps_differ_in_size(best) ? "mean step" : "median step", format_duration(typical_step_seconds(best)));
  h += kpi("tokens / s", format_compact(best.tokens_per_second));
  if (finite(best.mfu)) h += kpi("MFU", format_mfu(best.mfu));
  const int64_t limit = memory_limit(result.context);
  h += kpi("peak memory", format_bytes(best.peak_allocated_bytes) +
                              (limit > 0 ? " of " + format_bytes(limit) : ""));
  // Per real token where the runs differ in rows (a --packing or --group-by-length list), as the decision
  // compares them.
  // With --framework-overhead, as the console's "vs fastest" and the decision weigh them
  // (TableContext::compared_seconds; helper-99: the page gave the engine-only ratio).
  const report::TableContext table = report::TableContext::of(result);
  double slowest = kNotMeasured;
  for (const Slot& s : slots) {
    const double m = table.compared_seconds(*s.run);
    if (s.ok && finite(m) && !(m <= slowest)) slowest = m;
  }
  const double median = table.compared_seconds(best);
  if (finite(slowest) && finite(median) && median > 0 && slowest > median * 1.0005) {
    h += kpi(std::string(table.per_token ? "vs slowest split, per real token" : "vs slowest split") +
                 (table.framework_seconds_per_micro_step > 0 ? ", with the framework's host time" : ""),
             text::format_ratio(slowest / median, 2) + " faster");
  }
  // The rounds keep the contenders longer: one count only when every split has it.
  const bool same_count = std::all_of(slots.begin(), slots.end(), [&](const Slot& s) {
    return !s.ok || s.run->step_seconds.count == best.step_seconds.count;
  });
  h += kpi(same_count ? "timed steps per split" : "timed steps of " + run_label(best, result.runs),
           std::to_string(best.step_seconds.count));
  return h + "</div>";
}

std::string recommendation_section(const SweepResult& result, const std::vector<Slot>& slots) {
  const Recommendation& rec = result.recommendation;
  const bool has_best =
      rec.best_index >= 0 && rec.best_index < static_cast<int>(result.runs.size());
  std::string h = std::string("<section class=\"card recommendation") + (has_best ? "" : " none") +
                  "\" id=\"recommendation\">";
  if (!has_best) {
    h += "<div class=\"rec-kicker\">No recommendation</div><div class=\"rec-label\">No split "
         "completed</div>";
    h += "<p class=\"rec-reason\">" +
         html_escape(rec.reason.empty() ? "Every configuration failed; see the table below."
                                        : rec.reason) +
         "</p>";
    return h + "</section>\n";
  }
  const RunResult& best = result.runs[static_cast<std::size_t>(rec.best_index)];
  h += "<div class=\"rec-kicker\">Recommended split (micro-batch \u00d7 accumulation steps)</div>";
  h += "<div class=\"rec-label\">" + html_escape(run_label(best, result.runs)) + "</div>";
  if (!rec.reason.empty()) h += "<p class=\"rec-reason\">" + html_escape(rec.reason) + "</p>";

  std::string ties;
  for (int i : rec.tied_indices) {
    if (i == rec.best_index || i < 0 || i >= static_cast<int>(result.runs.size())) continue;
    ties += (ties.empty() ? "" : ", ") + run_label(result.runs[static_cast<std::size_t>(i)], result.runs);
  }
  if (!ties.empty()) {
    h += "<p class=\"rec-ties\">Equivalent to the fastest within \u00b1" +
         text::format_percent(rec.decision.tie_tolerance, 0) + ": " + html_escape(ties) +
         " (the lower peak memory wins a tie).</p>";
  }
  for (const TimeModel& model : result.time_models) {
    h += "<p class=\"rec-time-model\">" + html_escape(text::time_model_text(model, result.runs)) + "</p>";
  }
  h += "<p class=\"rec-settings\">" + html_escape(settings_summary(trainer_settings(result, best))) + "</p>";
  return h + kpis(result, slots, best) + "</section>\n";
}

std::string chart_section(const std::string& id, const std::string& title, const std::string& note,
                          const std::string& svg) {
  return "<section class=\"card\"><h2>" + html_escape(title) + "</h2><p class=\"note\">" +
         html_escape(note) + "</p><figure class=\"chart\" id=\"" + id + "\">" + svg +
         "</figure></section>\n";
}

std::string throughput_note(const SweepContext& c, const std::vector<Slot>& slots) {
  return std::string("Real (non-pad) tokens per second of wall time, counted as TRL's num_tokens counts them: every "
                     "position of the samples, padding left out.") +
         (any_mfu(slots) ? " MFU = achieved model FLOP/s \u00f7 device peak (" +
                               text::format_significant(c.peak_tflops, 4) + " TFLOP/s)."
                         : " MFU is not shown: the peak FLOP/s of this device is unknown.");
}

std::string memory_note(const SweepContext& c) {
  std::string note =
      "Peak allocated bytes during a timed step, split by what held them at the peak.";
  const int64_t limit = memory_limit(c);
  if (limit > 0) {
    note += std::string(c.memory_limit_bytes > 0 ? " Dashed line: the memory limit "
                                                 : " Dashed line: device memory ") +
            format_bytes(limit) + ".";
  }
  return note + " Diamonds: the memory plan's prediction.";
}

std::string chart_sections(const SweepResult& result, const std::vector<Slot>& slots) {
  std::string h = chart_section(
      "chart-step-time", "Step time by phase",
      any_means(slots)
          ? "Median seconds per optimizer step (the mean for a split whose steps differ in size), split into "
            "phases: each phase's median (or mean) over the timed steps, drawn as its share of their sum, since "
            "medians of parts need not add up to the median of the whole. Whiskers: bootstrap interval of the "
            "median (the rounds' interval of a mean), or min\u2013max of the timed steps where no interval was "
            "computed."
          : "Median seconds per optimizer step, split into phases: each phase's median over the timed steps, "
            "drawn as its share of their sum, since medians of parts need not add up to the median of the whole. "
            "Whiskers: bootstrap interval of the median, or min\u2013max of the timed steps where no "
            "interval was computed.",
      step_time_chart(slots, report::TableContext::of(result)));
  h += chart_section("chart-throughput", "Throughput", throughput_note(result.context, slots),
                     throughput_chart(slots));
  h += chart_section("chart-memory", "Peak memory", memory_note(result.context),
                     memory_chart(result, slots));
  h += chart_section("chart-timeline", "Memory through one optimizer step",
                     "Allocated bytes across the last timed step (a split stopped before its timed steps: its last "
                     "warm-up step, as its panel says), phase by phase: each block is "
                     "the peak inside that phase, the line joins the values at the phase "
                     "boundaries. Each panel has its own memory scale.",
                     timeline_chart(result));
  return h;
}

std::string context_entry(const std::string& key, const std::string& value) {
  return "<dt>" + html_escape(key) + "</dt><dd>" + html_escape(value.empty() ? kDash : value) +
         "</dd>";
}

std::string bytes_with_unit(int64_t bytes, const std::string& zero_means) {
  if (bytes <= 0) return std::to_string(bytes) + " (" + zero_means + ")";
  return text::format_count(bytes) + " B (" + format_bytes(bytes) + ")";
}

std::string context_section(const SweepResult& result) {
  const SweepContext& c = result.context;
  std::string h =
      "<section class=\"card context-card\" id=\"context\"><h2>Context</h2><p class=\"note\">"
      "Everything needed to reproduce and interpret these numbers.</p><dl class=\"context\">";
  h += context_entry("json_schema_version", std::to_string(c.json_schema_version));
  h += context_entry("date", c.date);
  h += context_entry("host", c.host);
  h += context_entry("device", c.device);
  h += context_entry("device_name", c.device_name);
  h += context_entry("device_memory_bytes", bytes_with_unit(c.device_memory_bytes, "unknown"));
  h += context_entry("driver", c.driver);
  h += context_entry("libtorch_version", c.libtorch_version);
  h += context_entry("build_type", c.build_type);
  h += context_entry("git_commit", c.git_commit);
  h += context_entry("threads", std::to_string(c.threads));
  h += context_entry("model", c.model);
  h += context_entry("parameters", text::format_count(c.parameters));
  if (c.trainable_parameters > 0 && c.trainable_parameters != c.parameters) {
    h += context_entry("trainable_parameters", text::trainable_line(c.trainable_parameters, c.parameters));
  }
  for (const auto& [name, value] : c.options) {
    if (name == "base_quant" && value != "none") {  // QLoRA (--base-quant)
      h += context_entry("time", "approximate: the quantised base is dequantised by LibTorch ops, not bitsandbytes' kernels");
    }
  }
  // The bitsandbytes optimizers among the runs' (a --resume keeps runs of optimizers no longer given).
  for (const OptimizerKind kind : text::optimizers_of(result)) {
    if (!bitsandbytes_optimizer(kind)) continue;
    h += context_entry("optimizer_time", "approximate: " + to_string(kind) +
                                             " is emulated by LibTorch ops (its memory exact, its time not bitsandbytes' kernel's)");
  }
  h += context_entry("seq_len", std::to_string(c.seq_len));
  h += context_entry("batch", std::to_string(c.batch) + " sequences");
  h += context_entry("flops_per_token", text::format_count(c.flops_per_token));
  if (finite(c.transformers_flops_per_token)) {
    h += context_entry("transformers_flops_per_token",
                       text::format_count(c.transformers_flops_per_token) + " (6N without embeddings: total_flos)");
  }
  h += context_entry("peak_tflops", finite(c.peak_tflops)
                                        ? text::format_significant(c.peak_tflops, 4)
                                        : "unknown (no MFU)");
  h += context_entry("memory_limit_bytes", bytes_with_unit(c.memory_limit_bytes, "unlimited"));
  h += context_entry("world_size", c.world_size > 1
                                       ? std::to_string(c.world_size) + " ranks (" +
                                             c.distributed_backend + "; rank 0's times and memory)"
                                       : "1 (one process)");
  h += "</dl><h3>Options</h3>";
  if (c.options.empty()) {
    h += "<p class=\"note\">none recorded</p>";
  } else {
    h += "<dl class=\"context options\">";
    for (const auto& [name, value] : c.options) h += context_entry(name, value);
    h += "</dl>";
  }
  return h + "</section>\n";
}

std::string head(const std::string& title) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  h += "<meta name=\"generator\" content=\"accumbench\">\n";
  h += "<title>accumbench \u2014 " + html_escape(title) + "</title>\n";
  h += "<style>\n" + std::string(kReportCss) + "</style>\n</head>\n";
  return h;
}

}  // namespace
}  // namespace html

void HtmlReporter::report(const SweepResult& result, std::ostream& out) const {
  using namespace html;
  const SweepContext& c = result.context;
  const std::vector<Slot> slots = make_slots(result);
  const std::string precisions = text::precisions_of(result.runs);
  const std::string title =
      title_line(c, precisions, text::dtype_words(result), text::optimizer_words(text::optimizers_of(result)),
                 grid_list_words(result.runs));
  std::string page = head(title);
  page += "<body>\n<main>\n";
  page +=
      "<header><h1>accumbench \u00b7 " + html_escape(c.model.empty() ? "sweep" : c.model) + "</h1>";
  page += "<p class=\"subtitle\">" + html_escape(title) +
          (c.date.empty() ? "" : " \u00b7 " + html_escape(c.date)) + "</p></header>\n";
  page += recommendation_section(result, slots);
  page += notes_card(sweep_notes(result));  // as the sweep's stderr said them
  page += chart_sections(result, slots);
  page += table_section(result, slots);
  page += context_section(result);
  page += "<footer>Generated by accumbench \u00b7 JSON schema v" +
          std::to_string(c.json_schema_version) +
          " \u00b7 the data of this page is embedded below as JSON (#accumbench-data)</footer>\n";
  page += "</main>\n<script type=\"application/json\" id=\"accumbench-data\">" +
          json_for_script(to_json(result)) + "</script>\n</body>\n</html>\n";
  out << page;
}

}  // namespace accumbench
