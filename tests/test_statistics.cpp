// Statistics are exact on small vectors; the recommendation is checked on hand-built runs whose
// numbers make the expected choice and reason obvious.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "accumbench/model_config.hpp"
#include "accumbench/statistics.hpp"
#include "accumbench/throughput.hpp"
#include "report/format.hpp"
#include "sweep/resumed_runs.hpp"

namespace accumbench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int64_t kGiB = int64_t{1} << 30;

// ---- named statistics ------------------------------------------------------------------------

TEST(Median, OddSizeIsTheMiddleValue) {
  EXPECT_EQ(median({3, 1, 2}), 2.0);
  EXPECT_EQ(median({5}), 5.0);
}

TEST(Median, EvenSizeIsTheMeanOfTheTwoMiddleValues) {
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median({0.2, 0.1}), 0.15000000000000002);  // (0.1 + 0.2) / 2 in binary
}

TEST(Median, EmptyOrNotMeasuredIsNaN) {
  EXPECT_TRUE(std::isnan(median({})));
  EXPECT_TRUE(std::isnan(median({1.0, kNaN, 3.0})));
}

TEST(Minimum, SmallestValue) {
  EXPECT_EQ(minimum({3, 1, 2}), 1.0);
  EXPECT_EQ(minimum({-0.5, 7}), -0.5);
  EXPECT_TRUE(std::isnan(minimum({})));
}

TEST(Mean, ArithmeticMean) {
  EXPECT_EQ(mean({2, 4, 4, 4, 5, 5, 7, 9}), 5.0);
  EXPECT_EQ(mean({1, 2}), 1.5);
  EXPECT_TRUE(std::isnan(mean({})));
}

TEST(Stddev, SampleStandardDeviationDividesByNMinusOne) {
  // Squared deviations from 5 sum to 32; 32 / 7 (n - 1), not 32 / 8 (which would give exactly 2).
  EXPECT_DOUBLE_EQ(stddev({2, 4, 4, 4, 5, 5, 7, 9}), 2.138089935299395);
  EXPECT_EQ(stddev({1, 3}), std::sqrt(2.0));
}

TEST(Stddev, SingleValueIsZeroEmptyIsNaN) {
  EXPECT_EQ(stddev({0.25}), 0.0);
  EXPECT_TRUE(std::isnan(stddev({})));
}

TEST(Cv, StddevOverMean) {
  EXPECT_DOUBLE_EQ(cv({2, 4, 4, 4, 5, 5, 7, 9}), 2.138089935299395 / 5.0);
  EXPECT_EQ(cv({3, 3, 3}), 0.0);
  EXPECT_TRUE(std::isnan(cv({0, 0})));
  EXPECT_TRUE(std::isnan(cv({})));
}

// ---- bootstrap interval ----------------------------------------------------------------------

const std::vector<double> kSteps = {0.105, 0.101, 0.099, 0.110, 0.102, 0.098, 0.103, 0.100};

TEST(Bootstrap, KnownValuesForTheDefaultSeed) {
  // Reference values from an independent Python implementation of the same splitmix64 draws
  // (index = next() % n) and order-statistic percentiles: the interval is the same everywhere.
  const auto [low, high] = bootstrap_median_interval(kSteps);
  EXPECT_EQ(low, 0.099);
  EXPECT_EQ(high, 0.105);
  const auto [low90, high90] = bootstrap_median_interval(kSteps, 0.90, 500, /*seed=*/1);
  EXPECT_EQ(low90, 0.0995);
  EXPECT_EQ(high90, 0.104);
}

TEST(Bootstrap, ReproducibleAndBracketsTheMedian) {
  const auto first = bootstrap_median_interval(kSteps);
  const auto second = bootstrap_median_interval(kSteps);
  EXPECT_EQ(first, second);
  const double m = median(kSteps);  // 0.1015
  EXPECT_LE(first.first, m);
  EXPECT_GE(first.second, m);
  EXPECT_GE(first.first, minimum(kSteps));
  EXPECT_LE(first.second, 0.110);
  EXPECT_LT(first.first, first.second);  // eight different values: the interval has a width
}

// Durations: each unit keeps the number at or above 1; below a nanosecond, scientific notation
// (--framework-overhead 1e-300 printed 60 zeros of µs).
TEST(Units, DurationsKeepThreeDigits) {
  EXPECT_EQ(text::format_duration(0.00491), "4.91 ms");
  EXPECT_EQ(text::format_duration(2.5e-7), "250 ns");
  EXPECT_EQ(text::format_duration(0.000001 * 1e-3), "1.00 ns");  // --framework-overhead 0.000001 (ms): 9.99…e-10 s
  EXPECT_EQ(text::format_duration(0.9996e-3), "1.00 ms");
  EXPECT_EQ(text::format_duration(0.9994e-3), "999 \u00b5s");
  EXPECT_EQ(text::format_duration(1e-303), "1e-303 s");
  EXPECT_EQ(text::format_duration(0.0), "0.00 s");
  EXPECT_EQ(text::format_duration(-5e-4), "-500 \u00b5s");
}

// A ratio keeps its decimals, and two digits where they would round it to 0 (compare's peak B/A of
// 2.8 MiB against 2.29 GiB read 0.00×).
TEST(Units, RatiosNeverReadZero) {
  EXPECT_EQ(text::format_ratio(1.234, 2), "1.23\u00d7");
  EXPECT_EQ(text::format_ratio(0.005, 2), "0.01\u00d7");
  EXPECT_EQ(text::format_ratio(0.0012, 2), "0.0012\u00d7");
  EXPECT_EQ(text::format_ratio(0.0, 2), "0.00\u00d7");
  EXPECT_EQ(text::format_ratio(std::nan(""), 2), "-");
}

// A list as a sentence gives it.
TEST(Units, AndListReadsAsASentence) {
  EXPECT_EQ(text::and_list({}), "");
  EXPECT_EQ(text::and_list({"a"}), "a");
  EXPECT_EQ(text::and_list({"a", "b"}), "a and b");
  EXPECT_EQ(text::and_list({"a", "b", "c"}), "a, b and c");
}

// One timed step (--steps 1) has no interval and no spread in the table, not "± 0.000".
TEST(Bootstrap, OneStepHasNoSpread) {
  const Summary one = summarize({0.0248});
  EXPECT_TRUE(std::isnan(one.ci_low));
  EXPECT_TRUE(std::isnan(one.ci_high));
  EXPECT_EQ(text::format_step_seconds(one), "0.0248");
  EXPECT_EQ(text::format_step_seconds(summarize({0.0248, 0.0250})).rfind("0.0249 \u00b1 ", 0), 0u);
}

TEST(Bootstrap, DegenerateInputs) {
  const auto one = bootstrap_median_interval({0.5});  // one step: no spread to bound
  EXPECT_TRUE(std::isnan(one.first));
  EXPECT_TRUE(std::isnan(one.second));
  EXPECT_EQ(bootstrap_median_interval({2, 2, 2}), std::make_pair(2.0, 2.0));
  const auto empty = bootstrap_median_interval({});
  EXPECT_TRUE(std::isnan(empty.first));
  EXPECT_TRUE(std::isnan(empty.second));
}

TEST(Summarize, AllFieldsFromOneSeries) {
  const Summary s = summarize({2, 4, 4, 4, 5, 5, 7, 9});
  EXPECT_EQ(s.median, 4.5);
  EXPECT_EQ(s.min, 2.0);
  EXPECT_EQ(s.mean, 5.0);
  EXPECT_DOUBLE_EQ(s.stddev, 2.138089935299395);
  EXPECT_DOUBLE_EQ(s.cv, 2.138089935299395 / 5.0);
  EXPECT_LE(s.ci_low, 4.5);
  EXPECT_GE(s.ci_high, 4.5);
  EXPECT_EQ(s.count, 8);
}

// ---- finalize_run ----------------------------------------------------------------------------

// A step of full windows: its targets are its real positions.
StepSample step(double seconds, PhaseSeconds host, int64_t tokens, int64_t peak_bytes) {
  StepSample s;
  s.step_seconds = seconds;
  s.host_seconds = host;
  s.device_seconds.fill(kNaN);  // CPU: no device timeline
  s.tokens = s.positions = s.computed_positions = tokens;
  s.peak_allocated_bytes = peak_bytes;
  return s;
}

// Steps of one size (every step computes 4,096 positions, padding included; one has 96 fewer real).
RunResult cpu_run() {
  RunResult run;
  run.config.micro_batch = 2;
  run.config.accum_steps = 4;
  //                    data   h2d  forward backward optimizer other
  run.steps.push_back(step(0.30, {0.01, 0.0, 0.06, 0.12, 0.02, 0.09}, 4096, 100));
  run.steps.push_back(step(0.20, {0.03, 0.0, 0.04, 0.10, 0.02, 0.01}, 4000, 300));
  run.steps.push_back(step(0.25, {0.02, 0.0, 0.05, 0.14, 0.02, 0.02}, 4096, 200));
  for (StepSample& s : run.steps) s.computed_positions = 4096;
  return run;
}

TEST(FinalizeRun, DerivedNumbersOnCpu) {
  RunResult run = cpu_run();
  finalize_run(run, /*flops_per_token=*/1e9, /*peak_tflops=*/kNaN);
  EXPECT_EQ(run.step_seconds.median, 0.25);
  EXPECT_EQ(run.step_seconds.min, 0.20);
  EXPECT_EQ(run.step_seconds.count, 3);
  EXPECT_EQ(run.phase_median_seconds[0], 0.02);
  EXPECT_EQ(run.phase_median_seconds[2], 0.05);
  EXPECT_EQ(run.phase_median_seconds[3], 0.12);
  EXPECT_EQ(run.phase_median_seconds[5], 0.02);
  EXPECT_TRUE(std::isnan(run.device_median_seconds[2]));
  EXPECT_TRUE(std::isnan(run.device_busy_fraction));
  EXPECT_EQ(run.tokens_per_step, 4064);                 // the mean of 4096, 4000, 4096
  EXPECT_DOUBLE_EQ(run.tokens_per_second, 16256.0);     // 4064 / 0.25
  EXPECT_EQ(run.samples_per_second, 32.0);              // 2 × 4 / 0.25
  EXPECT_DOUBLE_EQ(run.achieved_tflops, 16.256);        // 1e9 · 4064 / 0.25 / 1e12
  EXPECT_TRUE(std::isnan(run.mfu));            // CPU: no peak, no MFU
  EXPECT_EQ(run.peak_allocated_bytes, 300);
}

// Steps of many sizes (a grouped epoch: 1,000, 2,000 and 9,000 positions): the median step is the
// middle size's, the epoch's time is their sum, so the rates, the shown step and the phases read
// the mean step (typical_step_seconds); the median stays in step_seconds.
TEST(FinalizeRun, StepsOfManySizesReadTheirMean) {
  RunResult run;
  run.config.micro_batch = 4;
  run.config.accum_steps = 2;
  run.steps.push_back(step(0.1, {0.0, 0.0, 0.04, 0.05, 0.01, 0.0}, 1000, 100));
  run.steps.push_back(step(0.2, {0.0, 0.0, 0.08, 0.11, 0.01, 0.0}, 2000, 100));
  run.steps.push_back(step(0.9, {0.0, 0.0, 0.38, 0.51, 0.01, 0.0}, 9000, 100));
  finalize_run(run, /*flops_per_token=*/1e9, /*peak_tflops=*/kNaN);
  EXPECT_TRUE(steps_differ_in_size(run));
  EXPECT_EQ(run.step_seconds.median, 0.2);
  // Winsorized per token: 0.1, 0.2 and 0.9 s are 100 µs per token each, so none is clipped.
  EXPECT_DOUBLE_EQ(run.mean_seconds.value, 0.4);
  EXPECT_DOUBLE_EQ(typical_step_seconds(run), 0.4);
  EXPECT_DOUBLE_EQ(run.tokens_per_second, 4000.0 / 0.4);  // 12,000 tokens in 1.2 s
  EXPECT_DOUBLE_EQ(run.samples_per_second, 8 / 0.4);
  EXPECT_DOUBLE_EQ(run.achieved_tflops, 1e9 * 4000.0 / 0.4 / 1e12);
  EXPECT_NEAR(typical_phase_seconds(run)[static_cast<int>(Phase::kBackward)], 0.67 / 3, 1e-15);
  EXPECT_EQ(run.phase_median_seconds[static_cast<int>(Phase::kBackward)], 0.11);
  // Steps of one size keep the median.
  const RunResult uniform = [] {
    RunResult r = cpu_run();
    finalize_run(r, 1e9, kNaN);
    return r;
  }();
  EXPECT_FALSE(steps_differ_in_size(uniform));
  EXPECT_EQ(typical_step_seconds(uniform), 0.25);
}

// An epoch of two distinct steps timed unevenly (the short one three times, the long one once, as
// rounds that stop part-way through a later pass leave them): the mean step is the epoch's, each
// step alike (0.2 s, not the rounds' plain 0.15 s), and so are the rates, the tokens per step and
// the decisions' mean of the same steps, so the table's step and its interval agree.
TEST(FinalizeRun, AnEpochTimedUnevenlyWeighsEachStepAlike) {
  RunResult run;
  run.config.micro_batch = 2;
  run.config.accum_steps = 2;
  for (const auto& [index, seconds, positions] :
       {std::tuple<int64_t, double, int64_t>{0, 0.1, 1000}, {1, 0.3, 3000}, {0, 0.1, 1000}, {0, 0.1, 1000}}) {
    StepSample s = step(seconds, {0.0, 0.0, seconds / 2, seconds / 2, 0.0, 0.0}, positions, 100);
    s.data_step = index;
    s.data_steps = 2;
    run.steps.push_back(s);
  }
  finalize_run(run, /*flops_per_token=*/1e9, /*peak_tflops=*/kNaN);
  EXPECT_DOUBLE_EQ(run.mean_seconds.value, 0.2);
  EXPECT_DOUBLE_EQ(typical_step_seconds(run), 0.2);
  // The phases weigh the batches alike too, and add up to the step: 0.1 + 0.1, not 0.075 each.
  EXPECT_DOUBLE_EQ(typical_phase_seconds(run)[2], 0.1);
  EXPECT_DOUBLE_EQ(typical_phase_seconds(run)[3], 0.1);
  EXPECT_EQ(run.tokens_per_step, 2000);
  // The time model's positions per step likewise (1500 by the plain mean).
  EXPECT_DOUBLE_EQ(mean_computed_positions(run), 2000);
  EXPECT_DOUBLE_EQ(run.computed_tokens_per_second, 2000 / 0.2);
  EXPECT_DOUBLE_EQ(run.tokens_per_second, 2000 / 0.2);
  RoundEvidence evidence(1, 0.95);
  for (const StepSample& s : run.steps) {
    evidence.add_round({s.step_seconds}, {per_token_scale(s.positions)}, {Stratum{s.data_step, s.data_steps}});
  }
  evidence.weigh_per_token(false);
  EXPECT_DOUBLE_EQ(evidence.mean_seconds(0).value, run.mean_seconds.value);
  // Without the batches recorded (an older file), the plain mean.
  for (StepSample& s : run.steps) s.data_step = -1, s.data_steps = 0;
  finalize_run(run, 1e9, kNaN);
  EXPECT_DOUBLE_EQ(run.mean_seconds.value, 0.15);
}

// A --resume file from a build that read steps of many sizes at their median: its rates are read
// again over the mean step, as this build's sweep would have written them; a file of this build's
// and steps of one size are unchanged.
TEST(FinalizeRun, AResumedFilesRatesOverTheMeanStep) {
  SweepResult file;
  RunResult grouped;
  grouped.config.micro_batch = 4;
  grouped.config.accum_steps = 2;
  grouped.steps.push_back(step(0.1, {0.0, 0.0, 0.04, 0.05, 0.01, 0.0}, 1000, 100));
  grouped.steps.push_back(step(0.2, {0.0, 0.0, 0.08, 0.11, 0.01, 0.0}, 2000, 100));
  grouped.steps.push_back(step(0.9, {0.0, 0.0, 0.38, 0.51, 0.01, 0.0}, 9000, 100));
  finalize_run(grouped, /*flops_per_token=*/1e9, /*peak_tflops=*/100.0);
  RunResult older = grouped;  // the older build's rates: over the median step, 0.2 s
  for (double* rate : {&older.tokens_per_second, &older.computed_tokens_per_second, &older.samples_per_second,
                       &older.achieved_tflops, &older.hardware_tflops, &older.mfu}) {
    *rate *= 2.0;
  }
  RunResult uniform = cpu_run();
  finalize_run(uniform, 1e9, 100.0);
  file.runs = {older, grouped, uniform};
  const SweepResult now = with_this_builds_means(file);
  for (const RunResult& run : {now.runs[0], now.runs[1]}) {
    EXPECT_DOUBLE_EQ(run.tokens_per_second, 4000.0 / 0.4);
    EXPECT_DOUBLE_EQ(run.computed_tokens_per_second, 4000.0 / 0.4);
    EXPECT_DOUBLE_EQ(run.samples_per_second, 8 / 0.4);
    EXPECT_DOUBLE_EQ(run.achieved_tflops, grouped.achieved_tflops);
    EXPECT_DOUBLE_EQ(run.mfu, grouped.mfu);
  }
  EXPECT_EQ(now.runs[2].tokens_per_second, uniform.tokens_per_second);
}

// Real data over steps of different batches: the mean token count is a half (69.5). The rates use
// it as it is, so with no padding computed/s equals tokens/s; so does the file (schema 19).
TEST(FinalizeRun, RatesUseTheMeanTokensNotTheRoundedCount) {
  RunResult run;
  run.config.micro_batch = 1;
  run.config.accum_steps = 8;
  for (const int64_t tokens : {62, 77}) {
    run.steps.push_back(step(0.5, {0.0, 0.0, 0.2, 0.2, 0.1, 0.0}, tokens, 100));
  }
  finalize_run(run, /*flops_per_token=*/1e9, /*peak_tflops=*/kNaN);
  EXPECT_EQ(run.tokens_per_step, 69.5);
  EXPECT_DOUBLE_EQ(run.tokens_per_second, 139.0);  // 69.5 / 0.5
  EXPECT_DOUBLE_EQ(run.computed_tokens_per_second, run.tokens_per_second);
  EXPECT_EQ(run.padding_fraction, 0.0);
}

// Padded batches that alternate (a micro-batch padded to its longest sample in one batch, none in
// the other): tokens/s over computed/s is the padding's complement. The median count read the
// unpadded batch's 512 in three of five steps, and tokens/s equalled computed/s beside "pad 3.5 %".
// Tokens/s counts real positions, not targets (8 samples: 8 targets fewer than positions).
TEST(FinalizeRun, TokensOverComputedIsThePaddingsComplement) {
  RunResult run;
  run.config.micro_batch = 2;
  run.config.accum_steps = 4;
  for (const int64_t tokens : {512, 467, 512, 467, 512}) {
    StepSample s = step(0.5, {0.0, 0.0, 0.2, 0.2, 0.1, 0.0}, tokens, 100);
    s.tokens = tokens - 8;
    s.computed_positions = 512;
    run.steps.push_back(s);
  }
  finalize_run(run, /*flops_per_token=*/1e9, /*peak_tflops=*/kNaN);
  EXPECT_NEAR(run.padding_fraction, 90.0 / 2560.0, 1e-12);
  EXPECT_NEAR(run.tokens_per_second / run.computed_tokens_per_second, 1.0 - run.padding_fraction, 1e-12);
  EXPECT_DOUBLE_EQ(run.tokens_per_second, 494.0 / 0.5);
}

TEST(FinalizeRun, DeviceBusyFractionAndMfuOnCuda) {
  RunResult run = cpu_run();
  for (StepSample& s : run.steps) s.device_seconds = {0.01, 0.0, 0.05, 0.10, 0.02, 0.5};
  run.peak_allocated_bytes = 500;  // already larger (set by the runner): kept
  finalize_run(run, 1e9, /*peak_tflops=*/100.0);
  // kOther (0.5) is not device work: (0.01 + 0 + 0.05 + 0.10 + 0.02) / 0.25.
  EXPECT_DOUBLE_EQ(run.device_busy_fraction, 0.72);
  EXPECT_EQ(run.device_median_seconds[3], 0.10);
  EXPECT_DOUBLE_EQ(run.mfu, 0.16256);
  EXPECT_EQ(run.peak_allocated_bytes, 500);
}

// A run's winsorized mean judges each step's seconds per token (Winsorizing.ALongStepIsNoStall):
// a step of ten times the tokens in ten times the time counts in full, one of the usual tokens in
// ten times the time is a stall and counts as the step below it.
TEST(FinalizeRun, ALongStepIsNoStall) {
  RunResult run;
  for (int r = 0; r < 20; ++r) {
    StepSample step;
    step.step_seconds = r == 7 ? 10.0 : 1.0;
    step.positions = r == 7 ? 1000 : 100;
    step.round = r;
    run.steps.push_back(step);
  }
  EXPECT_NEAR(winsorized_mean(run), 29.0 / 20, 1e-12);
  run.steps[7].positions = 100;
  EXPECT_NEAR(winsorized_mean(run), 1.0, 1e-12);
}

TEST(FinalizeRun, FailedRunsAreLeftAlone) {
  RunResult run = cpu_run();
  run.status = RunStatus::kOutOfMemory;
  finalize_run(run, 1e9, 100.0);
  EXPECT_TRUE(std::isnan(run.step_seconds.median));
  EXPECT_EQ(run.tokens_per_second, 0.0);
  EXPECT_EQ(run.peak_allocated_bytes, 0);
}

// ---- recommend -------------------------------------------------------------------------------

// A run as the sweep leaves it, with what recommend reads: `rounds` interleaved steps of one
// session around `seconds`. Every run shares the round-to-round pattern (what a round's drift does
// to all splits alike) with relative size `shared`, and has its own with size `own`.
RunResult timed(int64_t micro, int64_t accum, double seconds, int64_t peak_bytes, double shared = 0.01,
                double own = 0.002, int rounds = 20) {
  RunResult run;
  run.config.micro_batch = micro;
  run.config.accum_steps = accum;
  run.session = 1;
  const double phase = static_cast<double>(micro * 7 + accum);  // each run's own pattern
  for (int r = 0; r < rounds; ++r) {
    StepSample s;
    s.round = r;
    s.step_seconds = seconds * (1 + shared * std::sin(1.7 * r) + own * std::sin(2.3 * r + phase));
    s.tokens = s.positions = s.computed_positions = 65536;
    run.steps.push_back(s);
  }
  std::vector<double> all;
  for (const StepSample& s : run.steps) all.push_back(s.step_seconds);
  run.step_seconds = summarize(all);
  run.mean_seconds.value = winsorized_mean(run);
  run.peak_allocated_bytes = peak_bytes;
  run.tokens_per_second = 65536 / run.mean_seconds.value;
  run.phase_median_seconds.fill(0.0);
  run.device_median_seconds.fill(kNaN);
  return run;
}

RunResult failed(int64_t micro, int64_t accum, RunStatus status, std::string error) {
  RunResult run;
  run.config.micro_batch = micro;
  run.config.accum_steps = accum;
  run.status = status;
  run.error = std::move(error);
  return run;
}

// 8×8 is device-bound and fast; 1×64 is host-bound and slow, the difference in backward.
std::vector<RunResult> gpu_like_runs() {
  RunResult fast = timed(8, 8, 0.191, 5 * kGiB);
  fast.phase_median_seconds = {0.001, 0.001, 0.02, 0.04, 0.008, 0.121};
  fast.device_median_seconds = {0.001, 0.001, 0.06, 0.12, 0.008, kNaN};
  fast.device_busy_fraction = 0.99;
  RunResult slow = timed(1, 64, 0.400, 3 * kGiB);
  slow.phase_median_seconds = {0.001, 0.001, 0.12, 0.26, 0.008, 0.010};
  slow.device_median_seconds = {0.001, 0.001, 0.03, 0.05, 0.008, kNaN};
  slow.device_busy_fraction = 0.23;
  return {fast, slow, failed(64, 1, RunStatus::kOutOfMemory, "CUDA out of memory")};
}

// What every recommendation ends with when no framework overhead was given or calibrated.
constexpr const char* kEngineOnly =
    " Engine only: a Python training loop adds host time per micro-step (not calibrated on this machine).";

TEST(Recommend, FastestWinsAndTheReasonSaysWhy) {
  const Recommendation r = recommend(gpu_like_runs());
  EXPECT_EQ(r.best_index, 0);
  EXPECT_EQ(r.tied_indices, std::vector<int>({0}));
  EXPECT_EQ(r.decision.kind, DecisionKind::kFastest);
  EXPECT_EQ(r.decision.runner_up, 1);
  EXPECT_EQ(r.reason, "8\u00d78 is fastest at a mean of 0.191 s per step (343,009 tokens/s): the runner-up 1\u00d764 takes "
            "2.07\u20132.11\u00d7 its time (95 % confidence, 20 paired rounds). 1\u00d764 is host-bound (device "
            "busy 23 % of the step) and 2.1\u00d7 slower, mostly in backward (+140 ms)." + std::string(kEngineOnly));
}

TEST(Recommend, TieGoesToTheLowerPeakMemory) {
  std::vector<RunResult> runs = gpu_like_runs();
  // 4×16: 1.6 % slower, proven within the 3 % tolerance.
  runs.push_back(timed(4, 16, 0.194, 3 * kGiB));
  runs[3].device_busy_fraction = 0.95;
  const Recommendation r = recommend(runs);
  EXPECT_EQ(r.decision.kind, DecisionKind::kTie);
  EXPECT_EQ(r.best_index, 3);
  EXPECT_EQ(r.tied_indices, std::vector<int>({0, 3}));
  EXPECT_EQ(r.reason.substr(0, r.reason.find(". ") + 1), "4\u00d716 ties with the fastest split 8\u00d78 (it takes 1.01\u20131.02\u00d7 its time, equivalent "
            "within \u00b13 % at 95 % confidence) and is chosen for its lower peak memory (3.00 GiB vs 5.00 GiB).");
  // Peaks a few KiB apart print alike in GiB: the sentence gives them in bytes.
  runs[3].peak_allocated_bytes = 5 * kGiB - 4096;
  const std::string close = recommend(runs).reason;
  EXPECT_NE(close.find("chosen for its lower peak memory (5,368,705,024 vs 5,368,709,120 bytes)."), std::string::npos)
      << close;
}

// 5 % slower, measured precisely: slower beyond the tolerance, so never a tie, whatever the memory.
TEST(Recommend, NeverATieWhenTheIntervalSaysSlowerThanTheTolerance) {
  std::vector<RunResult> runs = {timed(8, 8, 1.00, 5 * kGiB), timed(4, 16, 1.05, 1 * kGiB)};
  const Recommendation r = recommend(runs);
  EXPECT_EQ(r.decision.kind, DecisionKind::kFastest);
  EXPECT_EQ(r.best_index, 0);
  EXPECT_EQ(r.tied_indices, std::vector<int>({0}));
  ASSERT_EQ(r.decision.comparisons.size(), 1u);
  EXPECT_EQ(r.decision.comparisons[0].verdict, Verdict::kSlower);
  EXPECT_GT(r.decision.comparisons[0].ratio.low, 1.03);
}

TEST(Recommend, TheToleranceDecidesWhatIsATie) {
  std::vector<RunResult> runs = {timed(8, 8, 1.00, 5 * kGiB), timed(4, 16, 1.04, 1 * kGiB)};
  DecisionOptions options;
  options.tie_tolerance = 0.03;
  EXPECT_EQ(recommend(runs, 0, options).best_index, 0);
  options.tie_tolerance = 0.08;  // 4 % is now within it: the lower memory wins
  EXPECT_EQ(recommend(runs, 0, options).best_index, 1);
  EXPECT_EQ(recommend(runs, 0, options).decision.kind, DecisionKind::kTie);
}

// Noisy and few rounds: the recommendation says it could not tell, and names the intervals.
TEST(Recommend, UndecidedSaysSoWithTheIntervals) {
  std::vector<RunResult> runs = {timed(8, 8, 1.00, 5 * kGiB, 0.0, 0.2, 12), timed(4, 16, 1.05, 1 * kGiB, 0.0, 0.2, 12)};
  DecisionOptions options;
  options.budget_spent = true;
  const Recommendation r = recommend(runs, 0, options);
  EXPECT_EQ(r.decision.kind, DecisionKind::kUndecided);
  EXPECT_TRUE(r.decision.budget_spent);
  EXPECT_EQ(r.best_index, 0);  // the lowest mean, as the best estimate
  EXPECT_EQ(r.reason.substr(0, r.reason.find(". ") + 1), "Undecided after 12 rounds (--time-budget spent): 8\u00d78 is ahead, but "
            "4\u00d716 may still take 0.77\u20131.31\u00d7 its time (95 % confidence); if the step times hold "
            "as measured, about 637 s more of rounds can decide.");
}

// The slowest split's ratio as the decisions estimate it, said as undecided when the rounds left it
// open: 1.5× over 5 rounds (too few for an interval), 1.05× over 12 noisy rounds (an interval
// across 1); one round is "1 round".
TEST(Recommend, AnUndecidedSlowestSplitLooksSlowerAndSaysWhy) {
  const auto reason_of = [](const std::vector<RunResult>& runs) { return recommend(runs, 0, DecisionOptions{}).reason; };
  const std::string few = reason_of({timed(8, 8, 1.00, 5 * kGiB, 0.0, 0.002, 5), timed(4, 16, 1.50, 1 * kGiB, 0.0, 0.002, 5)});
  EXPECT_NE(few.find(" 4\u00d716 looks 1.5\u00d7 slower (too few rounds to decide)"), std::string::npos) << few;
  const std::string noisy =
      reason_of({timed(8, 8, 1.00, 5 * kGiB, 0.0, 0.2, 12), timed(4, 16, 1.05, 1 * kGiB, 0.0, 0.2, 12)});
  EXPECT_NE(noisy.find(" 4\u00d716 looks 1.0"), std::string::npos) << noisy;
  EXPECT_NE(noisy.find(" slower (undecided: 0.77\u20131.31\u00d7 its time)"), std::string::npos) << noisy;
  const std::string one = reason_of({timed(8, 8, 1.00, 5 * kGiB, 0.0, 0.002, 1), timed(4, 16, 1.50, 1 * kGiB, 0.0, 0.002, 1)});
  EXPECT_EQ(one.rfind("Undecided after 1 round: ", 0), 0u) << one;
}

// An interval whose low end reaches zero bounds the ratio from above only: "at most", not "0.00–".
TEST(Recommend, AnIntervalDownToZeroSaysAtMost) {
  std::vector<RunResult> runs = {timed(8, 8, 1.00, 5 * kGiB, 0.0, 0.9, 12), timed(4, 16, 1.05, 1 * kGiB, 0.0, 0.9, 12)};
  const Recommendation r = recommend(runs, 0, DecisionOptions{});
  ASSERT_EQ(r.decision.kind, DecisionKind::kUndecided);
  ASSERT_LT(r.decision.comparisons.front().ratio.low, 0.005);
  EXPECT_EQ(r.reason.find("0.00\u2013"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("may still take at most "), std::string::npos) << r.reason;
}

// Five rounds are too few for any interval: the reason names the splits instead of printing
// intervals from zero to infinity.
TEST(Recommend, TooFewRoundsForAnIntervalSaysSo) {
  std::vector<RunResult> runs = {timed(8, 8, 1.00, 5 * kGiB, 0.0, 0.2, 5), timed(4, 16, 1.05, 1 * kGiB, 0.0, 0.2, 5)};
  DecisionOptions options;
  options.budget_spent = true;
  const Recommendation r = recommend(runs, 0, options);
  EXPECT_EQ(r.decision.kind, DecisionKind::kUndecided);
  EXPECT_EQ(r.reason.substr(0, r.reason.find(". ") + 1),
            "Undecided after 5 rounds (--time-budget spent): 8\u00d78 is ahead, but 4\u00d716 had fewer than 10 "
            "rounds beside it, too few for an interval; at least about 10.4 s more of rounds can decide, more where "
            "a split with fewer than 10 rounds proves closer than its rounds so far show.");
}

// Undecided for too few rounds, with the rounds' clock known: at least the budget that would give
// each open split the rounds of an interval, at the step times measured. 5 rounds of 1.0 s and 1.5 s steps (no noise)
// need 5 more of each: 12.5 s of steps, which the clock ran 15 s over 12.5 s of timed steps (×1.2):
// 15.0 s more, 30 s in all. Without the clock, the seconds of steps alone.
TEST(Recommend, AnUndecidedSweepSaysTheBudgetThatWouldDecide) {
  const std::vector<RunResult> runs = {timed(8, 8, 1.00, 5 * kGiB, 0.0, 0.0, 5), timed(4, 16, 1.50, 1 * kGiB, 0.0, 0.0, 5)};
  DecisionOptions options;
  options.budget_spent = true;
  options.rounds_seconds = 15.0;
  const Recommendation r = recommend(runs, 0, options);
  ASSERT_EQ(r.decision.kind, DecisionKind::kUndecided);
  EXPECT_EQ(r.reason.substr(0, r.reason.find(". ") + 1),
            "Undecided after 5 rounds (--time-budget spent): 8\u00d78 is ahead, but 4\u00d716 had fewer than 10 "
            "rounds beside it, too few for an interval; at least about 15.0 s more of rounds can decide "
            "(--time-budget 30 in all), more where a split with fewer than 10 rounds proves closer than its rounds "
            "so far show.");
  options.rounds_seconds = std::numeric_limits<double>::quiet_NaN();
  const std::string unclocked = recommend(runs, 0, options).reason;
  EXPECT_NE(unclocked.find("too few for an interval; at least about 12.5 s more of rounds can decide, more where "),
            std::string::npos)
      << unclocked;
  // Both splits are open: a --resume of the file would time them all again, so it is not offered.
  options.rounds_seconds = 15.0;
  options.resume_file = "sweep.json";
  EXPECT_EQ(recommend(runs, 0, options).reason.find("--resume"), std::string::npos);
  // A --resume that ran no round (every split kept as the file had it) has no clock: a resume with a
  // budget times both again in rounds that go on from the file's 5, the 5 more of 1.0 s and 1.5 s
  // steps that bring them to 10 (it was 25 s, 10 rounds of each, as though from the first round).
  options.rounds_seconds = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(recommend(runs, 0, options)
                .reason.find("can decide (--resume sweep.json --time-budget 13, which times the 2 splits still open again), "),
            std::string::npos)
      << recommend(runs, 0, options).reason;
  // One of them kept outside this command's lists (--micro-batches 8 over a file of 8 and 4): the
  // same command would time 8×8 alone, so the resume asks for the file's own lists (helper-113).
  options.outside_lists = {runs[1].config.key()};
  EXPECT_NE(recommend(runs, 0, options)
                .reason.find("(--resume sweep.json --time-budget 13 with the file's own lists (this command's leave some "
                             "of them out), which times the 2 splits still open again)"),
            std::string::npos)
      << recommend(runs, 0, options).reason;
  options.outside_lists.clear();
  options.rounds_seconds = 15.0;
  // Timed in different sweeps (a --resume kept one): nothing paired to project from, and more
  // rounds of this sweep pair nothing; a resume that times them together can.
  std::vector<RunResult> unpaired = runs;
  unpaired[1].session = 2;
  EXPECT_NE(recommend(unpaired, 0, options)
                .reason.find("; the --resume sweep.json with the file's own lists times them side by side, which can decide."),
            std::string::npos);
  options.resume_file.clear();
  EXPECT_NE(recommend(unpaired, 0, options).reason.find("a longer --time-budget can decide"), std::string::npos);
}

// With the sweep's file, a split already slower beyond doubt need not be timed again: the words
// also name the --resume that times only the open splits (8×8 and 2×32; 4×16 is 1.5× slower).
TEST(Recommend, AnUndecidedSweepWithAFileOffersAResumeOfTheOpenSplits) {
  const std::vector<RunResult> runs = {timed(8, 8, 1.00, 5 * kGiB, 0.0, 0.0, 12), timed(4, 16, 1.50, 1 * kGiB, 0.0, 0.0, 12),
                                       timed(2, 32, 1.05, 1 * kGiB, 0.0, 0.2, 12)};
  DecisionOptions options;
  options.budget_spent = true;
  options.rounds_seconds = 50.0;
  options.resume_file = "runs/sweep.json";
  const Recommendation r = recommend(runs, 0, options);
  ASSERT_EQ(r.decision.kind, DecisionKind::kUndecided);
  const std::string& reason = r.reason;
  const size_t resume = reason.find("; or --resume runs/sweep.json --time-budget ");
  ASSERT_NE(resume, std::string::npos) << reason;
  EXPECT_NE(reason.find(", which times the 2 splits still open again, the others kept). ", resume), std::string::npos)
      << reason;
  // The resume goes on from the file's 12 rounds and times fewer splits: it needs less than the
  // sweep again from its first round (it was projected from a first round, and asked for more).
  const std::string decide = "more of rounds can decide (--time-budget ";
  const size_t in_all = reason.find(decide);
  ASSERT_NE(in_all, std::string::npos) << reason;
  const int whole = std::stoi(reason.substr(in_all + decide.size()));
  const int resumed = std::stoi(reason.substr(resume + std::string("; or --resume runs/sweep.json --time-budget ").size()));
  EXPECT_LE(resumed, whole - 50) << reason;  // the 50 s the sweep's rounds took are not run again (it read 230)
  // At least --steps rounds of each: a resume with --steps 40 asks for more.
  options.min_rounds = 40;
  const std::string longer = recommend(runs, 0, options).reason;
  const size_t resume40 = longer.find("; or --resume runs/sweep.json --time-budget ");
  ASSERT_NE(resume40, std::string::npos) << longer;
  EXPECT_GE(std::stoi(longer.substr(resume40 + std::string("; or --resume runs/sweep.json --time-budget ").size())),
            40 * (1.00 + 1.05))
      << longer;
  options.min_rounds = 5;
  options.resume_file.clear();
  EXPECT_EQ(recommend(runs, 0, options).reason.find("--resume"), std::string::npos);
}

// Splits timed in separate blocks (round -1, e.g. from an older file) are compared through their
// means: still decided when the difference is large.
TEST(Recommend, UnpairedRunsAreComparedThroughTheirMeans) {
  std::vector<RunResult> runs = gpu_like_runs();
  for (RunResult& run : runs) {
    for (StepSample& s : run.steps) s.round = -1;
  }
  const Recommendation r = recommend(runs);
  EXPECT_EQ(r.decision.kind, DecisionKind::kFastest);
  EXPECT_EQ(r.best_index, 0);
  ASSERT_EQ(r.decision.comparisons.size(), 1u);
  EXPECT_EQ(r.decision.comparisons[0].paired_rounds, 0);
}

// A resumed sweep: the file's split (another session) first, then two measured now. The two of
// this session pair by round; the file's one is compared through the means.
TEST(Recommend, RunsOfTheFileAreUnpairedWithThoseMeasuredNow) {
  std::vector<RunResult> runs = {timed(1, 64, 2.0, 1 * kGiB), timed(8, 8, 1.0, 5 * kGiB), timed(4, 16, 1.05, 3 * kGiB)};
  runs[0].session = 5;
  const Recommendation r = recommend(runs);
  EXPECT_EQ(r.decision.fastest, 1);
  ASSERT_EQ(r.decision.comparisons.size(), 2u);
  EXPECT_EQ(r.decision.comparisons[0].index, 2);
  EXPECT_EQ(r.decision.comparisons[0].paired_rounds, 20);
  EXPECT_EQ(r.decision.comparisons[1].index, 0);
  EXPECT_EQ(r.decision.comparisons[1].paired_rounds, 0);
}

// A file resumed twice holds two sweeps of two runs each: each pair is paired within its own
// sweep's rounds (a tie between sessions used to pair the lower id's runs only, and the fastest
// and its runner-up of the other sweep were compared unpaired, "0 paired rounds"); runs of
// different sweeps are compared through their means, and the reason says so.
TEST(Recommend, EachSweepsRunsPairWithinItsOwnRounds) {
  std::vector<RunResult> runs = {timed(1, 64, 2.0, 1 * kGiB), timed(2, 32, 1.9, 1 * kGiB), timed(8, 8, 1.0, 5 * kGiB),
                                 timed(4, 16, 1.05, 3 * kGiB)};
  runs[0].session = runs[1].session = 3;
  runs[2].session = runs[3].session = 7;
  const Recommendation r = recommend(runs);
  EXPECT_EQ(r.decision.fastest, 2);
  ASSERT_EQ(r.decision.comparisons.size(), 3u);
  for (const Comparison& c : r.decision.comparisons) {
    EXPECT_EQ(c.paired_rounds, c.index == 3 ? 20 : 0) << c.index;
  }
  EXPECT_NE(r.reason.find("20 paired rounds"), std::string::npos) << r.reason;

  // The runner-up of another sweep: compared through the means, in those words.
  runs[3].session = 3;
  const Recommendation unpaired = recommend(runs);
  EXPECT_EQ(unpaired.decision.fastest, 2);
  EXPECT_NE(unpaired.reason.find("unpaired: timed in different sweeps"), std::string::npos) << unpaired.reason;
  EXPECT_EQ(unpaired.reason.find("0 paired rounds"), std::string::npos) << unpaired.reason;
}

TEST(Recommend, PrecisionSweepsNameThePrecisionInTheReason) {
  std::vector<RunResult> runs = gpu_like_runs();
  runs.resize(2);
  for (RunResult& run : runs) run.config.precision = Precision::kFp32;
  RunResult bf16 = timed(8, 8, 0.100, 5 * kGiB);
  bf16.config.precision = Precision::kBf16;
  runs.push_back(bf16);
  const Recommendation r = recommend(runs);
  EXPECT_EQ(r.best_index, 2);
  EXPECT_EQ(r.reason.substr(0, r.reason.find(" (")), "8\u00d78 bf16 is fastest at a mean of 0.100 s per step");
  EXPECT_NE(r.reason.find("1\u00d764 fp32 is host-bound"), std::string::npos) << r.reason;
}

// Several optimizers: they compute different updates, so the reason ends with the fastest split of
// each (its precision too where the sweep has several); with one optimizer nothing is added.
TEST(Recommend, SeveralOptimizersNameTheFastestSplitOfEach) {
  std::vector<RunResult> runs = {timed(4, 2, 0.200, 3 * kGiB), timed(8, 1, 0.150, 5 * kGiB),
                                 timed(4, 2, 0.120, 2 * kGiB), timed(8, 1, 0.130, 4 * kGiB)};
  runs[2].config.optimizer = runs[3].config.optimizer = OptimizerKind::kAdamW8bit;
  runs[3].config.precision = Precision::kBf16;
  const Recommendation r = recommend(runs);
  EXPECT_EQ(r.best_index, 2);
  EXPECT_NE(r.reason.find(" The optimizers compute different updates, which the choice above does not weigh; the "
                          "fastest split of each, by its mean step: adamw 8\u00d71 fp32 (0.150 s, 5.00 GiB), adamw8bit 4\u00d72 fp32 "
                          "(0.120 s, 2.00 GiB; time emulated)."),
            std::string::npos)
      << r.reason;
  runs.resize(2);
  EXPECT_EQ(recommend(runs).reason.find("The optimizers compute"), std::string::npos);
}

TEST(Recommend, FastestTiedSplitThatAlsoUsesLeastMemorySaysSo) {
  std::vector<RunResult> runs = {timed(8, 8, 0.100, 2 * kGiB), timed(4, 16, 0.1005, 3 * kGiB)};
  const Recommendation r = recommend(runs);
  EXPECT_EQ(r.best_index, 0);
  EXPECT_EQ(r.reason, "8\u00d78 needs the least memory (2.00 GiB) of the 2 splits equivalent in time within \u00b13 % "
            "(95 % confidence), at a mean of 0.100 s per step (655,148 tokens/s)." + std::string(kEngineOnly));
}

TEST(Recommend, FailedRunsAreIgnoredEvenWhenTheirNumbersLookFast) {
  std::vector<RunResult> runs = gpu_like_runs();
  RunResult broken = timed(2, 32, 0.001, 1);
  broken.status = RunStatus::kError;
  runs.push_back(broken);
  EXPECT_EQ(recommend(runs).best_index, 0);
}

TEST(Recommend, AllFailedGivesNoBestAndSaysWhy) {
  const std::vector<RunResult> runs = {
      failed(8, 1, RunStatus::kOutOfMemory, "CUDA out of memory"),
      failed(4, 2, RunStatus::kPredictedOutOfMemory, ""),
      failed(2, 4, RunStatus::kError, "boom")};
  const Recommendation r = recommend(runs);
  EXPECT_EQ(r.best_index, -1);
  EXPECT_TRUE(r.tied_indices.empty());
  EXPECT_EQ(r.reason,
            "No split ran successfully: 1 ran out of memory, 1 predicted not to fit, 1 failed "
            "with an error (2\u00d74: boom). `accumbench plan` with the same job and --memory-limit names the changes that would fit.");
  // Without memory among the causes, no pointer to the plan.
  EXPECT_EQ(recommend({failed(2, 4, RunStatus::kError, "boom")}).reason,
            "No split ran successfully: 1 failed with an error (2\u00d74: boom).");
  EXPECT_EQ(recommend({}).reason, "No split ran.");
  // With the plan's advice (fit_advice), the advice in place of the pointer.
  DecisionOptions advised;
  advised.memory_advice = "The plan fits 1\u00d78 ckpt (--activation-checkpointing blocks) in 40.0 MiB, which this sweep did not run.";
  EXPECT_EQ(recommend(runs, 0, advised).reason,
            "No split ran successfully: 1 ran out of memory, 1 predicted not to fit, 1 failed "
            "with an error (2\u00d74: boom). " + advised.memory_advice);
  EXPECT_EQ(recommend({failed(2, 4, RunStatus::kError, "boom")}, 0, advised).reason,
            "No split ran successfully: 1 failed with an error (2\u00d74: boom).");
}

TEST(Recommend, MemoryLimitExcludesSplitsThatDoNotFitAndReportsHeadroom) {
  std::vector<RunResult> runs = gpu_like_runs();
  runs[0].fits = false;  // 5 GiB over a 4 GiB limit
  const Recommendation r = recommend(runs, 4 * kGiB);
  EXPECT_EQ(r.best_index, 1);
  EXPECT_EQ(r.decision.kind, DecisionKind::kOnly);
  EXPECT_EQ(r.reason, "1\u00d764 is the only split that ran and fits: a mean of 0.400 s per step (163,781 tokens/s); "
            "it is host-bound (device busy 23 % of the step); its 3.00 GiB peak leaves 1.00 GiB "
            "of the 4.00 GiB limit free." + std::string(kEngineOnly));

  runs[1].fits = false;
  const Recommendation none = recommend(runs, 2 * kGiB);
  EXPECT_EQ(none.best_index, -1);
  EXPECT_EQ(none.reason,
            "No split fits in the 2.00 GiB memory limit; the smallest peak was 3.00 GiB "
            "(1\u00d764); try smaller micro-batches or activation checkpointing.");
  DecisionOptions advised;
  advised.memory_advice = "The plan fits it in 2.00 GiB with one change: --lora-rank 16 (8\u00d78 ckpt).";
  EXPECT_EQ(recommend(runs, 2 * kGiB, advised).reason,
            "No split fits in the 2.00 GiB memory limit; the smallest peak was 3.00 GiB (1\u00d764). " +
                advised.memory_advice);
}

TEST(Recommend, MentionsALargeOptimizerShare) {
  std::vector<RunResult> runs = {timed(8, 8, 0.200, 2 * kGiB), timed(1, 64, 0.300, 2 * kGiB)};
  runs[0].phase_median_seconds[static_cast<int>(Phase::kOptimizer)] = 0.03;  // 15 %
  runs[1].phase_median_seconds[static_cast<int>(Phase::kForward)] = 0.13;
  const std::string reason = recommend(runs).reason;
  EXPECT_NE(reason.find("; the optimizer takes 15 % of its step."), std::string::npos) << reason;
  EXPECT_NE(reason.find(" 1\u00d764 is 1.5\u00d7 slower, mostly in forward (+130 ms)."), std::string::npos) << reason;
}

// "Mostly in" reads the two splits' phases in the rounds both ran in. 1×64 was timed in the first 10
// rounds only, on a quiet machine, its backward 40 ms longer than 8×8's and its optimizer 2 ms; 8×8
// went on for 40 more rounds on a machine whose load stretched its backward to 180 ms. By each
// split's own medians the gap was in the optimizer (+2 ms; 8×8's median backward is a busy round's);
// paired, it is backward (+40 ms).
TEST(Recommend, ThePhaseOfTheGapIsReadOnPairedRounds) {
  std::vector<RunResult> runs = {timed(8, 8, 0.200, 2 * kGiB, 0.01, 0.002, 50), timed(1, 64, 0.240, 2 * kGiB, 0.01, 0.002, 10)};
  const int forward = static_cast<int>(Phase::kForward), backward = static_cast<int>(Phase::kBackward),
            optimizer = static_cast<int>(Phase::kOptimizer);
  for (size_t k = 0; k < runs[0].steps.size(); ++k) {
    StepSample& s = runs[0].steps[k];
    s.host_seconds[forward] = 0.080;
    s.host_seconds[backward] = k < 10 ? 0.100 : 0.180;
    s.host_seconds[optimizer] = 0.010;
  }
  for (StepSample& s : runs[1].steps) {
    s.host_seconds[forward] = 0.080;
    s.host_seconds[backward] = 0.140;
    s.host_seconds[optimizer] = 0.012;
  }
  runs[0].phase_median_seconds[forward] = 0.080, runs[0].phase_median_seconds[backward] = 0.180;
  runs[0].phase_median_seconds[optimizer] = 0.010;
  runs[1].phase_median_seconds[forward] = 0.080, runs[1].phase_median_seconds[backward] = 0.140;
  runs[1].phase_median_seconds[optimizer] = 0.012;
  const std::string reason = recommend(runs).reason;
  EXPECT_NE(reason.find("slower, mostly in backward (+40.0 ms)"), std::string::npos) << reason;
}

// The slowest split's ratio pairs the rounds both ran; the table's "vs fastest" reads each split's
// median over its own rounds. 1×64 ran the first 10 rounds beside 8×8 (1.2× its time); 8×8 went on
// for 40 rounds on a machine that ran it 2.5× slower, so by medians 1×64 reads 0.48×: the sentence
// says the two differ and why (helper-110: 1.7× beside a table's 3.85×, unexplained).
TEST(Recommend, SaysWhereTheTablesMediansPartFromThePairedRatio) {
  std::vector<RunResult> runs = {timed(8, 8, 0.200, 2 * kGiB, 0.01, 0.002, 50), timed(1, 64, 0.240, 2 * kGiB, 0.01, 0.002, 10)};
  std::vector<double> all;
  for (size_t k = 10; k < runs[0].steps.size(); ++k) runs[0].steps[k].step_seconds *= 2.5;
  for (const StepSample& step : runs[0].steps) all.push_back(step.step_seconds);
  runs[0].step_seconds = summarize(all);
  runs[0].mean_seconds.value = winsorized_mean(runs[0]);
  const std::string reason = recommend(runs).reason;
  EXPECT_NE(reason.find("1\u00d764 is 1.2\u00d7 slower (by the medians of the rounds each ran, as the table compares "
                        "them, 0.48\u00d7: the machine's speed changed between those rounds, and this figure pairs the "
                        "rounds both ran)"),
            std::string::npos)
      << reason;
  // Rounds of one speed: no such words.
  const std::vector<RunResult> steady = {timed(8, 8, 0.200, 2 * kGiB, 0.01, 0.002, 50), timed(1, 64, 0.240, 2 * kGiB, 0.01, 0.002, 10)};
  EXPECT_EQ(recommend(steady).reason.find("by the medians of the rounds"), std::string::npos);
}

// Steps of many sizes (a grouped epoch) are weighed by their means, the gap's phase too: paired
// medians read a short step's difference (helper's grouped 32×1 was "mostly in forward (+433 µs)"
// of 78 ms more). Here 8 short steps differ by 10 ms of backward, 2 long ones by 450 ms of forward:
// medians say backward +10 ms, the means forward +90 ms.
TEST(Recommend, StepsOfManySizesGiveTheGapsPhaseByTheirMeans) {
  const int forward = static_cast<int>(Phase::kForward), backward = static_cast<int>(Phase::kBackward);
  const auto grouped = [&](int64_t micro, int64_t accum, double long_forward, double long_backward, double short_backward) {
    RunResult run = timed(micro, accum, 0.1, 2 * kGiB, 0.0, 0.0, 10);
    for (size_t k = 0; k < run.steps.size(); ++k) {
      StepSample& step = run.steps[k];
      const bool long_step = k % 5 == 4;
      step.tokens = step.positions = step.computed_positions = long_step ? 10000 : 1000;
      step.host_seconds[forward] = long_step ? long_forward : 0.05;
      step.host_seconds[backward] = long_step ? long_backward : short_backward;
      step.step_seconds = step.host_seconds[forward] + step.host_seconds[backward] + 0.01;
    }
    std::vector<double> all;
    for (const StepSample& step : run.steps) all.push_back(step.step_seconds);
    run.step_seconds = summarize(all);
    run.mean_seconds.value = winsorized_mean(run);
    run.tokens_per_second = 2800 / run.mean_seconds.value;
    return run;
  };
  const std::vector<RunResult> runs = {grouped(2, 16, 0.10, 0.40, 0.03), grouped(32, 1, 0.55, 0.40, 0.04)};
  ASSERT_TRUE(steps_differ_in_size(runs[1]));
  const std::string reason = recommend(runs).reason;
  EXPECT_NE(reason.find(", mostly in forward (+90.0 ms)."), std::string::npos) << reason;
}

// An open split with its 10 rounds whose interval still has no upper bound (steps too noisy) is
// said so with its rounds, not as one with too few rounds for an interval.
TEST(Recommend, AnUnboundedIntervalIsNotCalledTooFewRounds) {
  std::vector<RunResult> runs = {timed(8, 8, 0.200, 2 * kGiB, 0.9, 0.97, 10), timed(1, 64, 0.210, 2 * kGiB, 0.9, 0.97, 10)};
  const Recommendation r = recommend(runs);
  ASSERT_EQ(r.decision.kind, DecisionKind::kUndecided) << r.reason;
  ASSERT_FALSE(std::isfinite(r.decision.comparisons.front().ratio.high)) << r.reason;
  EXPECT_EQ(r.reason.find("fewer than 10 rounds"), std::string::npos) << r.reason;
  EXPECT_EQ(r.reason.find("too few rounds"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("1\u00d764 (10 paired rounds) still has no upper bound"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("1\u00d764 looks 1.02\u00d7 slower (undecided: no upper bound yet)"), std::string::npos) << r.reason;
}

// Three splits of one precision: the time model's fixed cost per micro-step names the slowest's loss.
TEST(Recommend, TheTimeModelExplainsTheSlowest) {
  // step = n · 10 ms + 65,536 tokens · 1 µs + 5 ms: 1×64 0.7105 s, 8×8 0.1505 s, 64×1 0.0805 s.
  std::vector<RunResult> runs = {timed(1, 64, 0.7105, 1 * kGiB), timed(8, 8, 0.1505, 2 * kGiB),
                                 timed(64, 1, 0.0805, 8 * kGiB)};
  for (RunResult& run : runs) run.phase_median_seconds[static_cast<int>(Phase::kOptimizer)] = 0.005;
  const std::vector<TimeModel> models = fit_time_models(runs);
  ASSERT_EQ(models.size(), 1u);
  EXPECT_NEAR(models[0].fixed_seconds, 0.010, 2e-4);
  EXPECT_NEAR(models[0].seconds_per_token, 1e-6, 2e-8);
  EXPECT_NEAR(models[0].optimizer_seconds, 0.005, 1e-12);
  EXPECT_LT(models[0].max_relative_residual, 0.01);
  const std::string reason = recommend(runs).reason;
  EXPECT_NE(reason.find("63 more micro-steps \u00d7 10"), std::string::npos) << reason;

  // The model fits each split within its residual: where its fixed cost adds up to more than the
  // slowest's whole gap, the clause says it explains the whole gap, not "720 ms of its 700 ms".
  runs[2] = timed(64, 1, 0.0905, 8 * kGiB);  // the fit's fixed cost: 9.91 ms, × 63 = 624 ms > 620 ms
  runs[2].phase_median_seconds[static_cast<int>(Phase::kOptimizer)] = 0.005;
  const std::string over = recommend(runs).reason;
  EXPECT_NE(over.find(", the whole of its 620 ms more per step (within the time model's fit)."), std::string::npos) << over;
}

// Larger micro-batches slower per token (a cache the micro-batch outgrows): the free fit's fixed
// cost would be negative. Neither cost goes below zero, the line says it does not explain these
// splits, and the reason does not blame the slowest on a fixed cost.
TEST(Recommend, ATimeModelThatCannotExplainTheSplitsSaysSo) {
  // Measured on a CPU (gpt2-mini, T=128, batch 8): 1×8 0.157 s, 2×4 0.133, 4×2 0.117, 8×1 0.195.
  std::vector<RunResult> runs = {timed(1, 8, 0.157, 1 * kGiB), timed(2, 4, 0.133, 1 * kGiB),
                                 timed(4, 2, 0.117, 1 * kGiB), timed(8, 1, 0.195, 2 * kGiB)};
  for (RunResult& run : runs) run.phase_median_seconds[static_cast<int>(Phase::kOptimizer)] = 0.0055;
  const std::vector<TimeModel> models = fit_time_models(runs);
  ASSERT_EQ(models.size(), 1u);
  EXPECT_GE(models[0].fixed_seconds, 0.0);
  EXPECT_GE(models[0].seconds_per_token, 0.0);
  EXPECT_GT(models[0].max_relative_residual, kLooseTimeModel);
  const std::string line = text::time_model_text(models[0], runs);
  ASSERT_TRUE(models[0].fixed_seconds == 0 || models[0].seconds_per_token == 0);  // the fit's edge
  EXPECT_EQ(line.find(" 0.00 s "), std::string::npos) << line;  // not "0.00 s fixed"
  EXPECT_NE(line.find(models[0].fixed_seconds == 0 ? ", nothing fixed," : ", nothing per token,"), std::string::npos)
      << line;
  EXPECT_NE(line.find(", too loosely to explain them: these step times are not a fixed cost per micro-step plus "
                      "a cost per token."),
            std::string::npos)
      << line;
  EXPECT_EQ(recommend(runs).reason.find("of fixed cost each"), std::string::npos) << recommend(runs).reason;

  // The same splits near a line keep their free fit, and its words.
  std::vector<RunResult> linear = {timed(1, 8, 0.0855, 1 * kGiB), timed(2, 4, 0.0455, 1 * kGiB),
                                   timed(4, 2, 0.0255, 1 * kGiB), timed(8, 1, 0.0155, 2 * kGiB)};
  for (RunResult& run : linear) run.phase_median_seconds[static_cast<int>(Phase::kOptimizer)] = 0.0055;
  const std::vector<TimeModel> fitted = fit_time_models(linear);
  ASSERT_EQ(fitted.size(), 1u);
  EXPECT_NEAR(fitted[0].fixed_seconds, 0.010, 2e-4);
  const std::string close = text::time_model_text(fitted[0], linear);
  EXPECT_EQ(close.find("too loosely"), std::string::npos);
  // A fit closer than the one decimal shown gives its bound, not "within 0.0 %".
  ASSERT_LT(fitted[0].max_relative_residual, 0.0005);
  EXPECT_NE(close.find("it fits every split within 0.05 % (worst: "), std::string::npos) << close;
}

// ---- FLOPs and device peaks ------------------------------------------------------------------

TEST(FlopsPerToken, SixNPlusAttention) {
  const ModelConfig& cfg = find_preset("gpt2-124m");
  // 6 · 124,439,808 + 12 · 12 layers · (12 heads · 64) · 1024 = 746,638,848 + 113,246,208.
  EXPECT_EQ(flops_per_token(cfg, 1024), 859885056.0);
  // Only the attention term grows with T.
  EXPECT_EQ(flops_per_token(cfg, 2048) - flops_per_token(cfg, 1024), 113246208.0);
}

TEST(DevicePeak, DatasheetTableByDeviceName) {
  EXPECT_DOUBLE_EQ(device_peak_tflops("NVIDIA H200", "bf16"), 989.4);
  EXPECT_DOUBLE_EQ(device_peak_tflops("NVIDIA H100 80GB HBM3", "fp32"), 494.7);
  EXPECT_DOUBLE_EQ(device_peak_tflops("NVIDIA H100 PCIe", "bf16"), 756.5);
  EXPECT_DOUBLE_EQ(device_peak_tflops("NVIDIA A100-SXM4-80GB", "fp16"), 312.0);
  EXPECT_DOUBLE_EQ(device_peak_tflops("NVIDIA A100-SXM4-80GB", "fp32"), 156.0);
  EXPECT_DOUBLE_EQ(device_peak_tflops("NVIDIA L4", "bf16"), 121.0);
  EXPECT_DOUBLE_EQ(device_peak_tflops("NVIDIA L40S", "bf16"), 362.05);  // not the L4
  EXPECT_DOUBLE_EQ(device_peak_tflops("NVIDIA A10", "bf16"), 125.0);
  EXPECT_DOUBLE_EQ(device_peak_tflops("Tesla T4", "fp16"), 65.0);
  EXPECT_DOUBLE_EQ(device_peak_tflops("Tesla T4", "fp32"), 8.1);
  EXPECT_DOUBLE_EQ(device_peak_tflops("Tesla V100-SXM2-16GB", "fp16"), 125.0);
}

TEST(DevicePeak, NaNWhenUnknown) {
  EXPECT_TRUE(std::isnan(device_peak_tflops("cpu", "fp32")));
  EXPECT_TRUE(std::isnan(device_peak_tflops("Intel(R) Xeon(R) CPU @ 2.20GHz", "fp32")));
  EXPECT_TRUE(std::isnan(device_peak_tflops("NVIDIA A10G", "bf16")));  // not the A10
  EXPECT_TRUE(std::isnan(device_peak_tflops("Tesla T4", "bf16")));     // no bf16 tensor cores
  EXPECT_TRUE(std::isnan(device_peak_tflops("NVIDIA H200", "int8")));
}

}  // namespace
// With a framework's host time added, the recommendation quotes the mean the decision compared
// (with it), beside the engine's, and the slowest split's ratio says it holds that time: 8×8 pays
// it 8 times a step, 1×64 64 times.
TEST(Recommend, AFrameworksTimeIsNamedWhereItIsIncluded) {
  DecisionOptions options;
  options.framework_seconds_per_micro_step = 0.001;
  options.framework_source = "--framework-overhead";
  const Recommendation r = recommend(gpu_like_runs(), 0, options);
  EXPECT_EQ(r.best_index, 0);
  EXPECT_EQ(r.reason,
            "8\u00d78 is fastest at a mean of 0.199 s per step with the framework's host time (329,224 tokens/s; 0.191 s "
            "in the engine alone): the runner-up 1\u00d764 takes 2.31\u20132.35\u00d7 its time (95 % confidence, 20 "
            "paired rounds). 1\u00d764 is host-bound (device busy 23 % of the step) and 2.3\u00d7 slower with the "
            "framework's host time, mostly in backward (+140 ms); of its gap the framework's host time is 56.0 ms per "
            "step over its 56 more micro-steps, the engine's 209 ms. Weighed with 1.00 ms of framework host time added "
            "to every micro-step (--framework-overhead); the step times shown are the engine's.");
  // A framework's time that turns the decision: the slower split is faster in the engine alone,
  // and its phases are not said to explain a gap the framework's time makes.
  options.framework_seconds_per_micro_step = 0.010;
  const Recommendation turned =
      recommend({timed(2, 8, 0.100, kGiB), timed(16, 1, 0.140, kGiB)}, 0, options);  // 0.180 s against 0.150 s
  ASSERT_EQ(turned.best_index, 1);
  EXPECT_NE(turned.reason.find("2\u00d78 is 1.2\u00d7 slower with the framework's host time: the framework's host time "
                               "adds 70.0 ms per step over its 7 more micro-steps, while the engine alone is"),
            std::string::npos)
      << turned.reason;
  EXPECT_EQ(turned.reason.find("mostly"), std::string::npos) << turned.reason;
}

// Pairs compared on the rounds both ran in can go round in a circle (1×4 ran in the first 10
// rounds only; Decisions.ACycleOfPairedVerdictsIsUndecided): the split faster beyond doubt than
// the one ahead is not said to "may still" be faster, the circle is named, and the one ahead is
// the best estimate, not "fastest". The rounds said are the one ahead's, beside the most any ran.
TEST(Recommend, ACycleOfPairsIsNamed) {
  std::vector<RunResult> runs = {timed(1, 4, 1.0, kGiB, 0, 0, 90), timed(2, 2, 1.0, kGiB, 0, 0, 90), timed(4, 1, 1.0, kGiB, 0, 0, 90)};
  for (int r = 0; r < 90; ++r) {
    const double noise = 1.0 + 0.001 * ((r * 7) % 5 - 2);
    runs[0].steps[r].step_seconds = 1.0 * noise;
    runs[1].steps[r].step_seconds = (r < 10 ? 1.10 : 1.0) * noise;
    runs[2].steps[r].step_seconds = (r < 10 ? 0.95 : 1.3) * noise;
  }
  runs[0].steps.resize(10);
  for (RunResult& run : runs) {
    std::vector<double> all;
    for (const StepSample& s : run.steps) all.push_back(s.step_seconds);
    run.step_seconds = summarize(all);
    run.mean_seconds.value = winsorized_mean(run);
  }
  const Recommendation r = recommend(runs);
  EXPECT_EQ(r.decision.kind, DecisionKind::kUndecided);
  EXPECT_EQ(r.reason,
            "Undecided after 10 rounds of 1\u00d74 (up to 90 of the others): 1\u00d74 is ahead, but 4\u00d71 takes 0.94\u20130.96\u00d7 its time (95 % "
            "confidence; the pairs, each compared on the rounds both ran in, go round in a circle); a longer "
            "--time-budget can decide. As it stands, 1\u00d74 is the best estimate at a mean of 1.00 s per step (65,536 "
            "tokens/s). 2\u00d72 is 1.1\u00d7 slower." + std::string(kEngineOnly));
}

// A --packing list: the packed splits train four times the tokens in twice the time, so per real
// token they are the faster; the decision, the slowest split's sentence, the packings' sentence and
// the paddings' "fastest split of each" all weigh them per token, and the mean quoted is the step's.
TEST(Recommend, PackingsAreWeighedPerRealToken) {
  std::vector<RunResult> runs = {timed(8, 1, 0.100, kGiB), timed(8, 1, 0.200, kGiB), timed(8, 1, 0.090, kGiB),
                                 timed(8, 1, 0.180, kGiB)};
  runs[1].config.packing = runs[3].config.packing = Packing::kBfd;
  runs[2].config.padding = runs[3].config.padding = {Padding::kLongest, 0};
  for (RunResult& run : runs) {
    const int64_t positions = run.config.packing == Packing::kBfd ? 4 * 65536 : 65536;
    for (StepSample& s : run.steps) s.tokens = s.positions = s.computed_positions = positions;
    run.tokens_per_step = positions;
  }
  const Recommendation r = recommend(runs);
  EXPECT_EQ(r.best_index, 3);
  EXPECT_EQ(r.decision.kind, DecisionKind::kFastest);
  const std::string& why = r.reason;
  EXPECT_EQ(why.rfind("8\u00d71 pack-bfd pad-longest is fastest at a mean of 0.180 s per step (1,455,", 0), 0u) << why;
  // 0.100 s for 65,536 tokens over 0.180 s for 262,144: 2.2 times the time per token.
  EXPECT_NE(why.find(" 8\u00d71 unpacked pad-max is 2.2\u00d7 slower per real token."), std::string::npos) << why;
  EXPECT_NE(why.find("the fastest split of each, by its mean step: 8\u00d71 pack-bfd pad-max (0.200 s, 1.00 GiB), 8\u00d71 pack-bfd "
                     "pad-longest (0.180 s, 1.00 GiB)."),
            std::string::npos)
      << why;
  EXPECT_NE(why.find(" The packings (--packing) put other amounts of data in a step"), std::string::npos) << why;
  EXPECT_NE(why.find("the fastest split of each, by its mean step: 8\u00d71 unpacked pad-longest (0.0900 s per step, 727,"),
            std::string::npos)
      << why;
}

}  // namespace accumbench
