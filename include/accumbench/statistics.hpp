// Statistics are named pure functions (docs/ARCHITECTURE.md, google/benchmark), each tested exactly on small
// vectors in tests/test_statistics.cpp. No LibTorch here.
//
//   std::vector<double> s = {0.12, 0.10, 0.11};
//   double m = accumbench::median(s);                 // 0.11
//   Summary sum = accumbench::summarize(s);           // median, min, mean, stddev, cv, bootstrap CI
//   Recommendation r = accumbench::recommend(runs);   // decided from the rounds (decision.hpp)
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "accumbench/decision.hpp"
#include "accumbench/result.hpp"

namespace accumbench {

// All return NaN for an empty input.
double median(std::vector<double> values);      // mean of the two middle values for even sizes
double minimum(const std::vector<double>& values);
double mean(const std::vector<double>& values);
double stddev(const std::vector<double>& values);  // sample standard deviation (n − 1); 0 for n == 1
double cv(const std::vector<double>& values);      // stddev / mean

// Percentile bootstrap interval of the median: `resamples` resamples with replacement drawn by a
// fixed-seed generator, so the interval is reproducible. NaN for fewer than two values.
std::pair<double, double> bootstrap_median_interval(const std::vector<double>& values,
                                                    double confidence = 0.95,
                                                    int resamples = 2000,
                                                    uint64_t seed = 0x5eed);

Summary summarize(const std::vector<double>& values);

// The bound a run's step times are winsorized at, from its timed steps (decision.hpp's rule; a
// file's clip_seconds is not read); NaN without steps.
double winsorizing_bound(const RunResult& run);
// Mean step seconds of a run's timed steps, each capped at winsorizing_bound: the mean the
// decisions are made on (over an epoch's distinct steps, every one timed, the mean of each step's
// own mean: ConfidenceSequence::add_strata).
double winsorized_mean(const RunResult& run);

// The positions a step computed (padding included, every rank's), over the timed steps weighed as
// winsorized_mean weighs their time (an epoch's batches alike once every one was timed). NaN
// without steps.
double mean_computed_positions(const RunResult& run);

// Whether a run's timed steps computed different numbers of positions (real data padded to each
// micro-batch's longest, a grouped order, an epoch's distinct steps): its median step is then one
// size's step, and what an epoch of them takes is their mean.
bool steps_differ_in_size(const RunResult& run);
// The step time a run's rates read and the tables show: its median, or, where its steps differ in
// size, its winsorized mean (mean_seconds: the steps' total time over their count, as the decision
// weighs them). NaN without steps.
double typical_step_seconds(const RunResult& run);
// Each phase's host seconds per step likewise: the medians (phase_median_seconds), or, where the
// steps differ in size, the means over the timed steps, weighed as the mean step is (an epoch's
// batches alike once every one was timed).
PhaseSeconds typical_phase_seconds(const RunResult& run);

// Fills the derived fields of a run from its steps: step_seconds summary, per-phase medians,
// device busy fraction, tokens/s, samples/s, achieved TFLOP/s and MFU (NaN when peak_tflops is
// NaN; the rates over typical_step_seconds), peak memory. `flops_per_token` comes from the context.
// `recompute_flops_per_token`: what checkpointing adds, counted in hardware_tflops only.
void finalize_run(RunResult& run, double flops_per_token, double peak_tflops, double recompute_flops_per_token = 0);

// The recommendation from what the rounds decided (decision.hpp): among the runs with status kOk
// that fit the memory limit, the fastest (decide) when every other is slower beyond doubt;
// among the fastest and the splits proven equivalent to it within options.tie_tolerance, the one
// with the lowest peak memory; when something is still undecided, the same choice, said as
// undecided with the intervals. The reason is one or two sentences from the measurements
// (decision and interval, host-bound, optimizer share, memory headroom, the phase and the fixed
// cost per micro-step that the slowest split loses).
Recommendation recommend(const std::vector<RunResult>& runs, int64_t memory_limit_bytes = 0,
                         const DecisionOptions& options = DecisionOptions{});

// The time model of each group of at least three splits that share precision and knobs (result.hpp,
// TimeModel); groups that cannot tell a fixed cost from a per-token cost are left out.
std::vector<TimeModel> fit_time_models(const std::vector<RunResult>& runs);

}  // namespace accumbench
