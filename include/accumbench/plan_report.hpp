// The plan as something to hand over: its split table as JSON, Markdown and HTML, read from one
// column table (plan_columns(), as the sweep's columns.cpp), the headroom under a memory limit,
// and the largest split of the batch that fits (src/report/plan_report.cpp). No LibTorch.
//
//   PlanReport r{plans, workload, target_modules, "cuda (assumed)", limit, headroom_bytes("5%", limit)};
//   r.largest = largest_fitting_splits(cfg, options, workload, r.usable_bytes());
//   write_file_atomically("plan.md", plan_markdown(r));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "accumbench/plan.hpp"

namespace accumbench {

// The largest split of a rank's share of the batch (micro-batch a divisor of it) that fits, for
// one combination of knobs; micro_batch 0 when none fits.
struct LargestSplit {
  std::string knobs;  // "", "with checkpointing", "with the chunked loss", "with both"
  SplitConfig split;  // micro_batch 0: none fits
  int64_t peak_bytes = 0;
};

// A change to the job that fine-tunes commonly make to fit in less memory, and the largest splits
// that fit with it (as largest_fitting_splits: without and with checkpointing, with the chunked loss
// when the job or the change asks for it).
struct FitChange {
  std::string options;                // as typed on the command line: "--lora-rank 16 --base-quant nf4"
  std::vector<LargestSplit> largest;  // micro_batch 0: none fits with this change either
  // How many changes at once: 1, alone; more, together (tried when none alone fits): the fewest
  // that fit, or, when no combination does, all of them.
  size_t combined = 1;
  bool fits() const;  // some split fits with it
  bool together() const { return combined > 1; }
};

struct PlanReport {
  std::vector<MemoryPlan> plans;
  WorkloadOptions workload;
  std::vector<std::string> target_modules;  // PEFT's names of the LoRA targets (trainer_settings)
  std::string device;                       // the device the plan assumes, in words
  int64_t memory_limit_bytes = 0;           // 0: none given and none known
  int64_t headroom_bytes = 0;               // kept free of the limit: CUDA context, fragmentation
  std::vector<LargestSplit> largest;
  std::vector<FitChange> changes;  // when nothing fits: changes_to_fit
  // What the splits may use: the limit less the headroom (0 without a limit).
  int64_t usable_bytes() const { return memory_limit_bytes > 0 ? memory_limit_bytes - headroom_bytes : 0; }
};

// --headroom: a size with its unit ("1GiB") or a percentage of the limit ("5%"). UserError on
// anything else, or on a headroom that leaves nothing of the limit.
int64_t headroom_bytes(const std::string& text, int64_t memory_limit_bytes);
// The default, 5 %: about 0.5-0.8 GiB of CUDA context outside the caching allocator on a 24 GB
// card, the plan's error (at most +3.7 % on the CPU, bench/plan_accuracy-2026-11-30.md) and the
// allocator's rounding. Not yet measured on a GPU.
inline constexpr char kDefaultHeadroom[] = "5%";

// For each knob combination (none, checkpointing; with the chunked loss when the workload asks for
// it), the largest micro-batch dividing a rank's share of the batch whose plan fits in
// `usable_bytes`.
std::vector<LargestSplit> largest_fitting_splits(const ModelConfig& cfg, const PlanOptions& options,
                                                 const WorkloadOptions& workload, int64_t usable_bytes);
// "largest split of 16 per rank that fits in 21.23 GiB: 4×4; with checkpointing: 4×4 ckpt"
std::string largest_line(const PlanReport& report);
// When no split fits in `usable_bytes` with any knob: each change not in effect yet, one at a time,
// from what gives up least to most (the chunked loss, which is exact, or TRL's chunked_nll; for a
// full fine-tune, the optimizer inside backward, exact at accumulation 1; bf16 autocast; 8-bit
// AdamW; 16-bit weights; LoRA r16 on every linear; a 4-bit NF4 base). When none of
// them alone fits, every combination of the fewest changes that fits together (two, else three, ...),
// and when no combination fits, all of them together. Empty when something fits or no limit is given.
std::vector<FitChange> changes_to_fit(const ModelConfig& cfg, const PlanOptions& options, const WorkloadOptions& workload,
                                      int64_t usable_bytes);
// The report's changes_to_fit as lines: a heading, then one line per change with its largest
// splits ("  --optimizer adamw8bit     none; with checkpointing: 1×16 ckpt"); when none alone fits, a
// second heading and the combinations that fit, or all of them together and what is left to try.
// Empty without any.
std::vector<std::string> changes_lines(const PlanReport& report);

// For a sweep whose splits memory stopped: one sentence on what the plan fits in `usable_bytes`.
// Splits of the job as given that the sweep did not try (`tried`: its grid) when the plan fits
// some; else the changes that would fit, alone or the fewest together (changes_to_fit); else that
// nothing tried fits. "" without memory, or when the plan fits only splits that were tried (the
// plan and the measurement disagree there).
std::string fit_advice(const ModelConfig& cfg, const PlanOptions& options, const WorkloadOptions& workload,
                       int64_t usable_bytes, const std::vector<SplitConfig>& tried);

// One column of the plan's split table (the console's, Markdown, HTML, JSON).
struct PlanColumn {
  std::string id;      // JSON key
  std::string header;  // table header
  bool right = true;   // numbers right-aligned
  bool needs_limit = false;  // only with a memory limit (fits, spare)
  std::string (*cell)(const MemoryPlan& plan, const PlanReport& report);
};
const std::vector<PlanColumn>& plan_columns();
// The columns shown for this report: those needing a limit only with one.
std::vector<const PlanColumn*> shown_plan_columns(const PlanReport& report);

std::string plan_json(const PlanReport& report);
std::string plan_markdown(const PlanReport& report);
std::string plan_html(const PlanReport& report);

}  // namespace accumbench
