// One split of a sweep, measured in named steps (google/benchmark's BenchmarkRunner::
// DoOneRepetition): plan, prepare, warm up, time, memory, profile, finalize. run_sweep (runner.cpp)
// owns the loop over the grid; this owns the model and trainer that every split reuses.
//
//   SplitMeasurement m(options, cfg, device, memory, data, group, context, on_step);
//   RunResult run = m.run(split, index, grid_size);   // never throws for a failing split
#pragma once

#include <chrono>
#include <memory>

#include "accumbench/engine.hpp"
#include "accumbench/sweep.hpp"
#include "accumbench/trace.hpp"

namespace accumbench {

namespace compat {
class ProcessGroup;
}

class SplitMeasurement {
 public:
  SplitMeasurement(const SweepOptions& options, const ModelConfig& cfg, c10::Device device, MemoryProbe& memory,
                   const StepBatches& data, compat::ProcessGroup* group, const SweepContext& context,
                   ProgressCallback on_step);
  ~SplitMeasurement();
  RunResult run(const SplitConfig& split, size_t index, size_t count);
  // The "fits" verdict of a finished run under today's --memory-limit (also for runs read back
  // from a --resume file).
  void judge_fits(RunResult& run) const;
  // Set when a split failed in a collective (data parallel): the sweep saves and stops.
  const std::string& fatal_error() const { return fatal_error_; }

 private:
  // The plan's peak; false (and the run recorded as predicted-oom) when it exceeds the limit.
  bool plan(RunResult& run);
  Trainer& trainer_for(Precision precision);
  // Warmup steps (discarded), then timed steps until --steps and --time-budget are both met.
  void warm_up_and_time(RunResult& run, Trainer& trainer, const StepOptions& step, size_t index, size_t count);
  void record_memory(RunResult& run, const Trainer& trainer, int64_t baseline_bytes);
  void profile(RunResult& run, Trainer& trainer, const StepOptions& step);
  double peak_tflops(Precision precision) const;

  const SweepOptions& options_;
  const ModelConfig& cfg_;
  c10::Device device_;
  MemoryProbe& memory_;
  const StepBatches& data_;
  compat::ProcessGroup* group_;
  const SweepContext& context_;
  ProgressCallback on_step_;
  LanguageModel model_;
  PlanOptions plan_options_;
  std::unique_ptr<Trainer> trainer_;
  std::chrono::steady_clock::time_point sweep_start_;
  std::unique_ptr<StepTracer> tracer_;
  std::string fatal_error_;
};

}  // namespace accumbench
