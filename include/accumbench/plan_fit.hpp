// Which splits of a job fit in a memory budget, and which changes to the job would make one fit
// when none does: the plan asked again with each option added, alone and together
// (src/plan/fit.cpp). The plan's arithmetic only, no LibTorch; the sweep's recommendation and the
// plan's report (plan_report.hpp) both read it.
//
//   const int64_t usable = limit - headroom_bytes(kDefaultHeadroom, limit);
//   for (const FitChange& c : changes_to_fit(cfg, options, workload, usable)) ...
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
// The largest splits of each job of the workload's lists (grid_jobs), as largest_fitting_splits
// finds them for the job alone; `flags` names the job among the others ("" with one job).
struct JobLargest {
  GridJob job;
  std::string flags;
  std::vector<LargestSplit> largest;  // each split names the job (optimizer, dtypes; precision)
  bool fits() const;                  // some split fits
};
std::vector<JobLargest> largest_fitting_per_job(const ModelConfig& cfg, const PlanOptions& options,
                                                const WorkloadOptions& workload, int64_t usable_bytes);
// The job of the workload's lists that needs least memory, whose changes a plan or a sweep names
// when nothing fits: the narrowest weights and adapters, the optimizer of the smallest state, the
// precision whose smallest split the plan finds lightest (autocast's casts of the weights can
// outweigh its narrower activations), and no clipping where --max-grad-norm's list has 0.
struct LightestJob {
  GridJob job;
  // How it was picked, where a list gave a choice: "adamw8bit (the smallest state of --optimizer
  // adamw,adamw8bit) on bf16 weights (the narrowest of --weights-dtype fp32,bf16)"; "" with one job.
  std::string which;
};
LightestJob lightest_job(const ModelConfig& cfg, const PlanOptions& options, const WorkloadOptions& workload);

// "4×4; with checkpointing: 4×4 ckpt" (none where no split fits with those knobs)
std::string largest_words(const std::vector<LargestSplit>& largest);
// When no split fits in `usable_bytes` with any knob: each change not in effect yet, one at a time,
// from what gives up least to most (samples padded to T: padding to each micro-batch's longest
// sample, the same update; the chunked loss, which is exact, or TRL's chunked_nll; for a
// full fine-tune, the optimizer inside backward, exact at accumulation 1; bf16 autocast; 8-bit
// AdamW; 16-bit weights; LoRA r16 on every linear; a 4-bit NF4 base). When none of
// them alone fits, every combination of the fewest changes that fits together (two, else three, ...),
// and when no combination fits, all of them together. Empty when something fits or no limit is given.
// `lists`: the workload of lists the job is one of (lightest_job); a change to a value those lists
// hold already is left out, since that job is planned (or swept) beside it.
std::vector<FitChange> changes_to_fit(const ModelConfig& cfg, const PlanOptions& options, const WorkloadOptions& workload,
                                      int64_t usable_bytes, const WorkloadOptions* lists = nullptr);
// The same for the lightest job of `lists` (lightest_job), as the plan and the sweep's advice name them.
std::vector<FitChange> changes_to_fit(const ModelConfig& cfg, const PlanOptions& options, const WorkloadOptions& lists,
                                      const LightestJob& lightest, int64_t usable_bytes);
// For a sweep whose splits memory stopped: one sentence on what the plan fits in `usable_bytes`.
// Splits of the job as given, in each of its precisions, that the sweep did not try (`tried`: its
// grid) when the plan fits some; else the changes that would fit, alone or the fewest together (changes_to_fit); else that
// nothing tried fits. "" without memory, or when the plan fits only splits that were tried (the
// plan and the measurement disagree there).
std::string fit_advice(const ModelConfig& cfg, const PlanOptions& options, const WorkloadOptions& workload,
                       int64_t usable_bytes, const std::vector<SplitConfig>& tried);

}  // namespace accumbench
