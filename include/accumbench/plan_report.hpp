// The plan as something to hand over: its split table as JSON, Markdown and HTML, read from one
// column table (plan_columns(), as the sweep's columns.cpp), the headroom under a memory limit,
// the largest split of the batch that fits and the changes that would (plan_fit.hpp) as lines
// (src/report/plan_report.cpp). No LibTorch.
//
//   PlanReport r{plans, workload, target_modules, "cuda (assumed)", limit, headroom_bytes("5%", limit)};
//   r.largest = largest_fitting_per_job(cfg, options, workload, r.usable_bytes());
//   write_file_atomically("plan.md", plan_markdown(r));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "accumbench/plan.hpp"
#include "accumbench/plan_fit.hpp"

namespace accumbench {

struct PlanReport {
  std::vector<MemoryPlan> plans;
  WorkloadOptions workload;
  std::vector<std::string> target_modules;  // PEFT's names of the LoRA targets (trainer_settings)
  std::string device;                       // the device the plan assumes, in words
  int64_t memory_limit_bytes = 0;           // 0: none given and none known
  int64_t headroom_bytes = 0;               // kept free of the limit: CUDA context, fragmentation
  std::vector<JobLargest> largest;  // per job of the lists (one without lists)
  // When nothing fits in any job: changes_to_fit of the lightest (lightest_job), and its `which`.
  std::vector<FitChange> changes;
  std::string changes_which;
  // What plan noted on stderr (an option left idle, what the model's config means at this T, ...),
  // one sentence each: the JSON's notes, a list above the Markdown table, a card in the HTML.
  std::vector<std::string> notes;
  // --group-by-length's list where it holds both orders, which the plan plans once, with the first
  // (the JSON's options name the list); empty with one order.
  std::vector<bool> orders_planned_once;
  // What the splits may use: the limit less the headroom (0 without a limit).
  int64_t usable_bytes() const { return memory_limit_bytes > 0 ? memory_limit_bytes - headroom_bytes : 0; }
};

// "largest split of 16 per rank that fits in 21.23 GiB: 4×4; with checkpointing: 4×4 ckpt"; with
// several jobs, a heading and a line per job ("  --optimizer adamw8bit  8×2; with checkpointing:
// 16×1 ckpt"). Empty without a limit.
std::vector<std::string> largest_lines(const PlanReport& report);
// The report's changes_to_fit as lines: a heading, then one line per change with its largest
// splits ("  --optimizer adamw8bit     none; with checkpointing: 1×16 ckpt"); when none alone fits, a
// second heading and the combinations that fit, or all of them together and what is left to try.
// Empty without any.
std::vector<std::string> changes_lines(const PlanReport& report);

// One column of the plan's split table (the console's, Markdown, HTML, JSON).
struct PlanColumn {
  std::string id;      // JSON key
  std::string header;  // table header
  bool right = true;   // numbers right-aligned
  bool needs_limit = false;  // only with a memory limit (fits, spare)
  std::string (*cell)(const MemoryPlan& plan, const PlanReport& report);
  bool (*shown)(const PlanReport& report) = nullptr;  // when not always (another condition than the limit)
};
const std::vector<PlanColumn>& plan_columns();
// The columns shown for this report: those needing a limit only with one.
std::vector<const PlanColumn*> shown_plan_columns(const PlanReport& report);

// What the plans' activations are planned at, as the plan's header says it ("activations at 147
// positions, the longest padded micro-batch: ..."; a --padding list's every padding, a --packing
// list's every packing); "" where every micro-batch is T long.
std::string activation_length_line(const PlanOptions& options);
// With one grouped order (PlannedRows::grouped_lengths): how the plan places a step's micro-batches,
// after "; "; "" otherwise.
std::string grouped_words(const PlanOptions& options);

std::string plan_json(const PlanReport& report);
std::string plan_markdown(const PlanReport& report);
std::string plan_html(const PlanReport& report);

}  // namespace accumbench
