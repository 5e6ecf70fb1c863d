// The splits of a sweep, measured in named steps (google/benchmark's BenchmarkRunner::
// DoOneRepetition): each split alone first (plan, prepare, warm up; its memory is read there),
// then the timed steps in interleaved rounds (decision.hpp's run_rounds calls timed_step), then
// finish (memory attribution, derived fields, profile). run_sweep (runner.cpp) owns the grid and
// the rounds; this owns the one model and the trainer that the splits share: the step's shape and
// precision depend on the split, and so do the optimizer (a split of another optimizer than the
// step before replaces it, its state built afresh) and the weights' and adapters' dtypes (a split
// of another one casts the model and builds a new trainer).
//
//   SplitMeasurement m(options, cfg, device, memory, data, group, context, on_step);
//   RunResult run = m.prepare(split, index, grid_size);   // never throws for a failing split
//   double seconds = m.timed_step(run, index, round);     // NaN when the split failed
//   m.finish(run, index);
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <utility>

#include "accumbench/engine.hpp"
#include "accumbench/sweep.hpp"
#include "accumbench/trace.hpp"

namespace accumbench {

namespace compat {
class ProcessGroup;
}

// The batches of every packing and order of a sweep (--packing's and --group-by-length's lists),
// each built once: a split trains on its own rows of the same samples.
class PackedBatches {
 public:
  void add(const StepRows& rows, StepBatches batches) { batches_.emplace_back(rows, std::move(batches)); }
  // Throws std::logic_error for rows not added.
  const StepBatches& of(const StepRows& rows) const;
  // Every packing's and order's batches together: the host memory the plan counts (planned_token_batches).
  size_t total_batches() const {
    size_t total = 0;
    for (const auto& packed : batches_) total += packed.second.size();
    return total;
  }

 private:
  std::vector<std::pair<StepRows, StepBatches>> batches_;
};

class SplitMeasurement {
 public:
  SplitMeasurement(const SweepOptions& options, const ModelConfig& cfg, c10::Device device, MemoryProbe& memory,
                   const PackedBatches& data, compat::ProcessGroup* group, const SweepContext& context,
                   ProgressCallback on_step);
  ~SplitMeasurement();
  // The split alone: plan, prepare, warm-up steps (at least one) after an emptied cache, which
  // give its peak memory and the bound its step times are winsorized at. Splits with CUDA graphs
  // are also timed here (their captured shape cannot change between rounds) and come back
  // finished. `index` names the split's slot for timed_step and finish.
  RunResult prepare(const SplitConfig& split, size_t index, size_t count);
  // Whether `run` (as prepare left it) takes part in the rounds.
  bool in_rounds(const RunResult& run) const;
  // One timed step of the prepared split in round `round`; NaN (and the run recorded as failed)
  // when it fails. Throws FatalRunError when a collective failed (data parallel).
  double timed_step(RunResult& run, size_t index, int64_t round);
  // Memory attribution, derived fields, the profile step (final only), the fits verdict.
  void finish(RunResult& run, size_t index, bool final = true);
  // The "fits" verdict of a finished run under today's --memory-limit (also for runs read back
  // from a --resume file).
  void judge_fits(RunResult& run) const;
  // Data parallel: the ranks' agreement on a round shows that `run` failed on another rank; no-op
  // when it failed here too.
  void record_failure_elsewhere(RunResult& run);
  // Progress of the rounds, for the CLI.
  void report_round(int64_t round, int live, size_t count);
  // The plan of this sweep's job (a rank's share of the batch), as each split is planned (with the
  // sweep's first optimizer; each split's plan has its own).
  const PlanOptions& plan_options() const { return plan_options_; }

 private:
  struct Slot;
  // The plan's peak; false (and the run recorded as predicted-oom) when it exceeds the limit.
  bool plan(RunResult& run);
  Trainer& trainer_for(const SplitConfig& split);
  // The batches a slot's steps train on: the whole step's, or with data parallel this rank's share.
  const StepBatches& batches(const Slot& slot) const;
  StepSample traced_step(Slot& slot, int64_t batch_index);
  void record_failure(RunResult& run, const std::exception& error);
  void warm_up(RunResult& run, Slot& slot, size_t index, size_t count);
  void time_alone(RunResult& run, Slot& slot, size_t index, size_t count);
  void record_memory(RunResult& run, const Slot& slot);
  void profile(RunResult& run, Slot& slot);
  double peak_tflops(const SplitConfig& split) const;
  // The workload's LoRA options with the split's adapter dtype.
  LoraOptions split_lora(const SplitConfig& split) const;

  const SweepOptions& options_;
  const ModelConfig& cfg_;
  c10::Device device_;
  MemoryProbe& memory_;
  const PackedBatches& data_;  // every rank's sequences of each step: each split deals this rank's share
  compat::ProcessGroup* group_;
  const SweepContext& context_;
  ProgressCallback on_step_;
  LanguageModel model_;
  // What model_'s weights and adapters are stored in; none while a cast is unfinished.
  std::optional<std::pair<Precision, Precision>> storage_;
  PlanOptions plan_options_;
  // On the CPU without --memory-limit: the host memory available when the sweep began (0: not
  // read). A split planned past it is skipped as predicted-oom rather than left to the kernel's
  // OOM killer, which would end the sweep.
  int64_t host_bytes_ = 0;
  std::unique_ptr<Trainer> trainer_;
  std::chrono::steady_clock::time_point sweep_start_;
  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace accumbench
