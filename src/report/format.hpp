// The reporters' private helpers that read results (the plain number and table helpers they use
// are in accumbench/units.hpp). Numbers in words must read the same in the recommendation's
// reason and in the table, so both use the leaf module's formatters.
//
//   format_step_seconds(run.step_seconds)   // "0.191 ± 0.002"
//   context_line(result)                    // "model gpt2-mini, 1,383,168 parameters, T=128, ..."
#pragma once

#include <string>
#include <vector>

#include "accumbench/result.hpp"
#include "accumbench/units.hpp"

namespace accumbench::text {

// "0.191 ± 0.002": median step seconds with the half-width of its bootstrap interval (the noise
// the recommendation uses), or the standard deviation when no interval exists; "-" for NaN.
std::string format_step_seconds(const Summary& summary);

// "Time model (fp32, 4 splits): each micro-step costs 4.91 ms fixed + 1.20 µs per token, the
// optimizer 8.50 ms per step; it fits every split within 3.1 % (worst: 1×8)." One per model.
std::string time_model_text(const TimeModel& model, const std::vector<RunResult>& runs);

// Distinct precisions of the runs in first-seen order, joined by "/": "bf16" or "fp32/bf16".
std::string precisions_of(const std::vector<RunResult>& runs);
// Distinct optimizers of the runs in first-seen order (without runs, those of the context's
// --optimizer list that this version knows).
std::vector<OptimizerKind> optimizers_of(const SweepResult& result);
// "adamw/sgd": a list of optimizers inside a header's or title's fields, as the precisions.
std::string optimizer_words(const std::vector<OptimizerKind>& optimizers);
// "" for fp32 weights alone, else "bf16 weights" or "fp32/bf16 weights", then the adapters' the
// same way ("bf16 adapters"): for headers and titles.
std::string dtype_words(const SweepResult& result);

// "trainable 4,718,592 of 129,158,400 (3.65 %)": what LoRA trains out of the whole model.
std::string trainable_line(int64_t trainable, int64_t total);

// "nf4 with double quant, the rest in the weights' dtype (--kbit-prep none)": how a quantised base
// is kept, for the headers of sweep, plan and verify.
std::string base_quant_words(const std::string& kind, bool double_quant, bool kbit_upcast);

// One line describing what was measured (model, parameters, T, batch, device, precision, limit);
// the console and Markdown reporters open with it.
std::string context_line(const SweepResult& result);

// Outside text as one Markdown table cell or list item: "|" escaped, line breaks as spaces, and
// "<", ">", "&" as entities (every renderer would read them as HTML).
std::string markdown_cell(const std::string& value);
// A command's notes as a Markdown list under "Notes:", then a blank line; "" without notes (the
// sweep's and plan's Markdown, above their tables).
std::string markdown_notes(const std::vector<std::string>& notes);

}  // namespace accumbench::text
