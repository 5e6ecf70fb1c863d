// Reporters print a hand-built SweepResult; every line is compared with the expected text. The
// JSON file must read back exactly what was written, and a bad file must give a plain UserError.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <unistd.h>  // getpid: ctest runs test processes in parallel; each writes its own files
#include "accumbench/error.hpp"
#include "accumbench/options.hpp"
#include "accumbench/report.hpp"

namespace accumbench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int64_t kGiB = int64_t{1} << 30;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

template <class R>
std::vector<std::string> report_lines(const R& reporter, const SweepResult& result) {
  std::ostringstream out;
  reporter.report(result, out);
  return lines_of(out.str());
}

// Line by line, so a failure names the line that differs.
void expect_lines(const std::vector<std::string>& actual,
                  const std::vector<std::string>& expected) {
  for (std::size_t i = 0; i < std::max(actual.size(), expected.size()); ++i) {
    EXPECT_EQ(i < actual.size() ? actual[i] : "<missing>",
              i < expected.size() ? expected[i] : "<extra>")
        << "line " << i;
  }
}

RunResult ok_run(int64_t micro, int64_t accum) {
  RunResult run;
  run.config.micro_batch = micro;
  run.config.accum_steps = accum;
  run.config.precision = Precision::kBf16;
  return run;
}

// Three splits on an H200: the fast one, a slow checkpointed one, one that ran out of memory.
SweepResult sample_result() {
  SweepResult result;
  SweepContext& c = result.context;
  c.date = "2025-01-01T00:00:00Z";
  c.host = "testhost";
  c.device = "cuda:0";
  c.device_name = "NVIDIA H200";
  c.device_memory_bytes = 150754820096;
  c.driver = "driver 580.65, CUDA 13.0";
  c.libtorch_version = "2.11.0";
  c.build_type = "Release";
  c.git_commit = "abc123def456";
  c.threads = 16;
  c.model = "gpt2-124m";
  c.parameters = 124439808;
  c.seq_len = 1024;
  c.batch = 64;
  c.flops_per_token = 859885056.0;
  c.peak_tflops = 989.4;
  c.options = {{"seq-len", "1024"}, {"batch", "64"}, {"model", "gpt2-124m"}};

  RunResult fast = ok_run(8, 8);
  fast.step_seconds = {0.191, 0.189, 0.1915, 0.0012, 0.00627, 0.189, 0.193, 10};
  fast.mean_seconds = {0.1915, 0.190, 0.193};
  fast.phase_median_seconds = {0.0012, 0.0021, 0.0453, 0.0987, 0.0301, 0.0137};
  fast.device_median_seconds = {0.0010, 0.0020, 0.0500, 0.1000, 0.0290, kNaN};
  fast.device_busy_fraction = 0.93;
  fast.tokens_per_step = 65536;
  fast.tokens_per_second = 343120.4;
  fast.samples_per_second = 335.08;
  fast.achieved_tflops = 295.0;
  fast.hardware_tflops = 295.0;
  fast.mfu = 0.298;
  fast.peak_allocated_bytes = 5583457484;  // 5.20 GiB
  fast.peak_reserved_bytes = 6 * kGiB;
  fast.predicted_peak_bytes = 5 * kGiB;

  RunResult slow = ok_run(1, 64);
  slow.config.activation_checkpointing = Checkpointing::kBlocks;
  slow.step_seconds = {0.402, 0.397, 0.403, 0.004, 0.00993, 0.398, 0.410, 10};
  slow.phase_median_seconds = {0.0011, 0.0020, 0.1205, 0.2610, 0.0099, 0.0075};
  slow.device_median_seconds = {0.0010, 0.0019, 0.0600, 0.1200, 0.0090, kNaN};
  slow.device_busy_fraction = 0.48;
  slow.tokens_per_step = 65536;
  slow.tokens_per_second = 163024;
  slow.samples_per_second = 159.2;
  slow.achieved_tflops = 140.2;
  slow.hardware_tflops = 187.3;  // checkpointed: one more forward of the blocks
  slow.mfu = 0.141;
  slow.peak_allocated_bytes = 3 * kGiB;
  slow.peak_reserved_bytes = 3 * kGiB;

  RunResult oom = ok_run(64, 1);
  oom.config.optimizer_in_backward = true;
  oom.status = RunStatus::kOutOfMemory;
  oom.error = "CUDA out of memory. Tried to allocate 2.00 GiB";
  oom.predicted_peak_bytes = 150 * kGiB;
  oom.fits = false;

  result.runs = {fast, slow, oom};
  result.recommendation.best_index = 0;
  result.recommendation.tied_indices = {0};
  result.recommendation.reason = "8\u00d78 is fastest.";
  return result;
}

const char* const kContextLine =
    "model gpt2-124m, 124,439,808 parameters, T=1024, batch 64, device NVIDIA H200 (cuda:0), "
    "precision bf16";

// ---- console ---------------------------------------------------------------------------------

// "decided" is paired (the rounds' means), "vs fastest" median over median: a split slower beyond
// doubt whose median reads no slower (the machine's speed moved between rounds) is marked, and the
// legend says why (helper-87 saw a row read 0.76× and "slower").
TEST(ConsoleReporter, ASlowerSplitWhoseMedianReadsNoSlowerIsMarked) {
  SweepResult result = sample_result();
  result.runs.pop_back();  // the out-of-memory split
  for (RunResult& run : result.runs) run.session = 1;  // timed in interleaved rounds
  Decision& d = result.recommendation.decision;
  d.kind = DecisionKind::kFastest;
  d.fastest = 0;
  d.rounds = 20;
  Comparison slower;
  slower.index = 1;
  slower.ratio = {1.10, 1.05, 1.15};
  slower.paired_rounds = 20;
  slower.verdict = Verdict::kSlower;
  d.comparisons = {slower};
  const auto table = [&result] {
    std::string text;
    for (const std::string& line : report_lines(ConsoleReporter(), result)) text += line + "\n";
    return text;
  };
  const std::string why =
      "; slower*: slower over the rounds both ran (their paired means), though its median step reads no slower (the "
      "machine's speed moved between rounds)";
  std::string text = table();
  EXPECT_NE(text.find(" 2.10\u00d7  slower\n"), std::string::npos) << text;
  EXPECT_EQ(text.find(why), std::string::npos) << text;
  result.runs[1].step_seconds.median = 0.185;  // 0.97× the fastest's 0.191 by medians
  text = table();
  EXPECT_NE(text.find(" 0.97\u00d7  slower*\n"), std::string::npos) << text;
  EXPECT_NE(text.find(why), std::string::npos) << text;
  // With a framework's host time the decisions weigh it, and so does the column (helper-92: 0.71×
  // "slower*", blamed on the machine, where 63 more micro-steps of framework time decided): 1×64
  // takes 0.185 + 64 × 1 ms against 0.191 + 8 × 1 ms.
  result.context.framework_seconds_per_micro_step = 0.001;
  text = table();
  EXPECT_NE(text.find(" 1.25\u00d7  slower\n"), std::string::npos) << text;
  EXPECT_EQ(text.find(why), std::string::npos) << text;
  EXPECT_NE(text.find("; vs fastest: median step time with the framework's host time (1.00 ms per micro-step) over the "
                      "fastest split's"),
            std::string::npos)
      << text;
}

TEST(ConsoleReporter, TableAndRecommendation) {
  // Each row is split after the "opt ms" column to fit the line.
  expect_lines(report_lines(ConsoleReporter(), sample_result()), {
      kContextLine,
      "",
      "split             step s  data ms  h2d ms  fwd ms  bwd ms  opt ms"
      "  other ms  tokens/s     MFU      peak   predicted  fits  vs fastest  status",
      // No --memory-limit: "fits" is "-" except for the split that ran out of memory.
      "8\u00d78        0.191 \u00b1 0.002      1.2     2.1    45.3    98.7    30.1"
      "      13.7   343,120  29.8 %  5.20 GiB    5.00 GiB  -          1.00\u00d7  ok",
      "1\u00d764 ckpt  0.402 \u00b1 0.008      1.1     2.0   120.5   261.0     9.9"
      "       7.5   163,024  14.1 %  3.00 GiB           -  -          2.10\u00d7  ok",
      "64\u00d71 oib               -        -       -       -       -       -"
      "         -         -       -         -  150.00 GiB  no             -"
      "  oom: CUDA out of memory. Tried to allocate 2.00 GiB",
      "split: micro-batch \u00d7 accumulation steps; ckpt: activation checkpointing (gradient_checkpointing); "
      "oib: the optimizer inside backward; fits: - without --memory-limit; vs fastest: median step time over the "
      "fastest split's",
      "",
      "Recommendation: 8\u00d78 \u2014 8\u00d78 is fastest.",
      "Trainer settings (one process): per_device_train_batch_size=8 gradient_accumulation_steps=8 "
      "gradient_checkpointing=false bf16=true fp16=false max_length=1024 packing=false loss_type=nll",
  });
}

// The header names the optimizers of the runs, not of the options: a --resume with --optimizer sgd
// keeps the file's adamw8bit runs, whose time is still emulated; the legend says what the label's
// last word is.
TEST(ConsoleReporter, HeaderNamesTheOptimizersOfTheRuns) {
  SweepResult result = sample_result();
  result.context.options.emplace_back("optimizer", "sgd");
  result.runs[1].config.optimizer = OptimizerKind::kSgd;
  result.runs[2].config.optimizer = OptimizerKind::kAdamW8bit;
  const std::vector<std::string> lines = report_lines(ConsoleReporter(), result);
  ASSERT_GE(lines.size(), 7u);
  EXPECT_EQ(lines[0], std::string(kContextLine) +
                          ", optimizers adamw/sgd/adamw8bit (adamw8bit emulated: memory exact, time approximate)");
  EXPECT_EQ(lines[3].rfind("8\u00d78 ", 0), 0u) << lines[3];
  EXPECT_EQ(lines[4].rfind("1\u00d764 ckpt sgd ", 0), 0u) << lines[4];
  EXPECT_EQ(lines[5].rfind("64\u00d71 oib adamw8bit ", 0), 0u) << lines[5];
  EXPECT_NE(lines[6].find("; oib: the optimizer inside backward; then the optimizer (--optimizer) unless adamw;"),
            std::string::npos)
      << lines[6];
  // One optimizer, not AdamW: named alone, as before lists existed.
  for (RunResult& run : result.runs) run.config.optimizer = OptimizerKind::kSgd;
  EXPECT_EQ(report_lines(ConsoleReporter(), result)[0], std::string(kContextLine) + ", optimizer sgd");
}

// A precision of the list that no split reached (a sweep stopped first) is named as not begun: the
// header does not read as the sweep asked (helper-106).
TEST(ConsoleReporter, ContextNamesPrecisionsNotBegun) {
  SweepResult result = sample_result();
  result.context.options.emplace_back("precisions", "bf16,fp16");
  const std::string line = report_lines(ConsoleReporter(), result)[0];
  EXPECT_EQ(line, std::string(kContextLine) + " (fp16 not begun)");
  result.context.options.back().second = "bf16";
  EXPECT_EQ(report_lines(ConsoleReporter(), result)[0].find("not begun"), std::string::npos);
}

// A token file cut into windows has no "samples" line of its own: the header names the file.
TEST(ConsoleReporter, ContextNamesATokenFilesWindows) {
  SweepResult result = sample_result();
  result.context.options.emplace_back("token_file", "shard0.bin");
  EXPECT_EQ(report_lines(ConsoleReporter(), result)[0], std::string(kContextLine) + ", tokens shard0.bin (windows of T + 1)");
  result.context.options.back().second = "synthetic";
  EXPECT_EQ(report_lines(ConsoleReporter(), result)[0], kContextLine);
  result.context.options.emplace_back("lengths", "variable");  // synthetic lengths uniform up to T: said
  EXPECT_EQ(report_lines(ConsoleReporter(), result)[0], std::string(kContextLine) + ", variable lengths");
}

// A sweep of several clipping norms (--max-grad-norm 0,1): the header names the list, a "clip"
// column beside the label says each split's ("off" or the norm), the legend says what it is, the
// recommendation names the split with its clipping; the CSV gives every run's norm (0: none) and
// the JSON keeps it. One norm above 0: the header says it, and no column.
TEST(ConsoleReporter, ClippingNormsOfTheRunsInAColumn) {
  SweepResult result = sample_result();
  result.runs[0].config.max_grad_norm = 1;
  const std::vector<std::string> lines = report_lines(ConsoleReporter(), result);
  ASSERT_GE(lines.size(), 8u);
  EXPECT_EQ(lines[0], std::string(kContextLine) + ", --max-grad-norm 1,0 (0: not clipped)");
  EXPECT_EQ(lines[2].rfind("split      clip         step s", 0), 0u) << lines[2];
  EXPECT_EQ(lines[3].rfind("8\u00d78        1     0.191", 0), 0u) << lines[3];
  EXPECT_EQ(lines[4].rfind("1\u00d764 ckpt  off   0.402", 0), 0u) << lines[4];
  EXPECT_NE(lines[6].find("; clip: the norm the step's gradients are clipped to (--max-grad-norm), off: none;"),
            std::string::npos)
      << lines[6];
  EXPECT_EQ(lines[8].rfind("Recommendation: 8\u00d78 clip1 \u2014 ", 0), 0u) << lines[8];
  const std::vector<std::string> csv = report_lines(CsvReporter(), result);
  EXPECT_NE(csv[0].find(",adapter_dtype,max_grad_norm,padding,packing,group_by_length,activation_checkpointing,"), std::string::npos) << csv[0];
  EXPECT_NE(csv[1].find(",adamw,fp32,fp32,1,max,none,"), std::string::npos) << csv[1];
  EXPECT_NE(csv[2].find(",adamw,fp32,fp32,0,max,none,false,blocks,"), std::string::npos) << csv[2];
  const SweepResult back = sweep_result_from_json(to_json(result), "clip.json");
  EXPECT_EQ(back.runs[0].config.max_grad_norm, 1);
  EXPECT_EQ(back.runs[0].config.key(), "8\u00d78/bf16/clip1");
  EXPECT_EQ(back.runs[1].config.key(), "1\u00d764 ckpt/bf16");
  for (RunResult& run : result.runs) run.config.max_grad_norm = 0.5;
  const std::vector<std::string> one = report_lines(ConsoleReporter(), result);
  EXPECT_EQ(one[0], std::string(kContextLine) + ", gradients clipped to norm 0.5");
  EXPECT_EQ(one[2].find(" clip "), std::string::npos) << one[2];
  EXPECT_EQ(one[8].rfind("Recommendation: 8\u00d78 \u2014 ", 0), 0u) << one[8];
}

// Runs padded differently (--padding's list): a "padded" column in --padding's words, the legend
// says what it is, the recommendation names the split's padding; the CSV gives every run's, and the
// JSON reads it back into the key.
TEST(ConsoleReporter, PaddingsOfTheRunsInAColumn) {
  SweepResult result = sample_result();
  result.runs[0].config.padding = {Padding::kLongest, 0};
  const std::vector<std::string> lines = report_lines(ConsoleReporter(), result);
  ASSERT_GE(lines.size(), 8u);
  EXPECT_EQ(lines[2].rfind("split      padded          step s", 0), 0u) << lines[2];
  EXPECT_EQ(lines[3].rfind("8\u00d78        longest  0.191 \u00b1 0.002", 0), 0u) << lines[3];
  EXPECT_EQ(lines[4].rfind("1\u00d764 ckpt  max      0.402 \u00b1 0.008", 0), 0u) << lines[4];
  EXPECT_NE(lines[6].find("; padded: how each micro-batch is padded (--padding);"), std::string::npos) << lines[6];
  EXPECT_EQ(lines[8].rfind("Recommendation: 8\u00d78 pad-longest \u2014 ", 0), 0u) << lines[8];
  const std::vector<std::string> csv = report_lines(CsvReporter(), result);
  EXPECT_NE(csv[0].find(",max_grad_norm,padding,packing,group_by_length,activation_checkpointing,"), std::string::npos) << csv[0];
  EXPECT_NE(csv[1].find(",fp32,0,longest,none,"), std::string::npos) << csv[1];
  EXPECT_NE(csv[2].find(",fp32,0,max,none,false,blocks,"), std::string::npos) << csv[2];
  const SweepResult back = sweep_result_from_json(to_json(result), "padding.json");
  EXPECT_EQ(back.runs[0].config.key(), "8\u00d78/bf16/pad-longest");
  EXPECT_EQ(back.runs[1].config.key(), "1\u00d764 ckpt/bf16");
  for (RunResult& run : result.runs) run.config.padding = {Padding::kMultiple, 8};
  const std::vector<std::string> one = report_lines(ConsoleReporter(), result);
  EXPECT_EQ(one[2].find(" padded "), std::string::npos) << one[2];
  EXPECT_EQ(one[8].rfind("Recommendation: 8\u00d78 \u2014 ", 0), 0u) << one[8];
}

// Runs packed differently (--packing's list): a "packed" column in --packing's words; "vs fastest"
// compares the median time per real token (the packed 1×64 trains four times the tokens in twice the
// time of 8×8), and the legend says both; the CSV gives every run's packing, and the JSON reads it
// back into the key.
TEST(ConsoleReporter, PackingsOfTheRunsInAColumn) {
  SweepResult result = sample_result();
  result.runs[1].config.packing = Packing::kBfd;
  result.runs[1].tokens_per_step = 4 * 65536;
  const std::vector<std::string> lines = report_lines(ConsoleReporter(), result);
  ASSERT_GE(lines.size(), 8u);
  EXPECT_EQ(lines[2].rfind("split      packed         step s", 0), 0u) << lines[2];
  EXPECT_EQ(lines[3].rfind("8\u00d78        none    0.191 \u00b1 0.002", 0), 0u) << lines[3];
  EXPECT_EQ(lines[4].rfind("1\u00d764 ckpt  bfd     0.402 \u00b1 0.008", 0), 0u) << lines[4];
  EXPECT_NE(lines[3].find(" 1.90\u00d7"), std::string::npos) << lines[3];  // 0.191 / 65536 over 0.402 / 262144
  EXPECT_NE(lines[4].find(" 1.00\u00d7"), std::string::npos) << lines[4];
  EXPECT_NE(lines[6].find("; packed: how samples are laid out in rows (--packing), compared per real token;"),
            std::string::npos)
      << lines[6];
  EXPECT_NE(lines[6].find("; vs fastest: median step time per real token over the fastest split's"), std::string::npos)
      << lines[6];
  const std::vector<std::string> csv = report_lines(CsvReporter(), result);
  EXPECT_NE(csv[0].find(",padding,packing,group_by_length,activation_checkpointing,"), std::string::npos) << csv[0];
  EXPECT_NE(csv[1].find(",max,none,false,none,"), std::string::npos) << csv[1];
  EXPECT_NE(csv[2].find(",max,bfd,false,blocks,"), std::string::npos) << csv[2];
  const SweepResult back = sweep_result_from_json(to_json(result), "packing.json");
  EXPECT_EQ(back.runs[0].config.key(), "8\u00d78/bf16");
  EXPECT_EQ(back.runs[1].config.key(), "1\u00d764 ckpt/bf16/pack-bfd");
  EXPECT_EQ(run_label(back.runs[1], back.runs), "1\u00d764 ckpt pack-bfd");
  for (RunResult& run : result.runs) run.config.packing = Packing::kBfd;
  const std::vector<std::string> one = report_lines(ConsoleReporter(), result);
  EXPECT_EQ(one[2].find(" packed "), std::string::npos) << one[2];
  EXPECT_EQ(one[6].find("per real token"), std::string::npos) << one[6];
}

// Steps of many sizes (a grouped epoch): the split's step, phases and "vs fastest" read its mean step,
// an epoch's time over its steps (typical_step_seconds), not the median step of one size, and the
// legend says so; a split of one size keeps its median beside it.
TEST(ConsoleReporter, StepsOfManySizesShowTheirMean) {
  SweepResult result = sample_result();
  RunResult& grouped = result.runs[0];
  for (const auto& [positions, backward] : {std::pair<int64_t, double>{30000, 0.05}, {65536, 0.10}, {100000, 0.15}}) {
    StepSample step;
    step.step_seconds = 2.5 * backward;
    step.host_seconds = {0.001, 0.002, 0.04, backward, 0.03, 0.01};
    step.positions = step.computed_positions = step.tokens = positions;
    grouped.steps.push_back(step);
  }
  grouped.mean_seconds = {0.25, 0.20, 0.30};
  const std::vector<std::string> lines = report_lines(ConsoleReporter(), result);
  ASSERT_GE(lines.size(), 7u);
  // The phases as the step's mean takes the steps: the slowest per token (the first) capped at the
  // winsorizing bound, its phases in their shares of what is left (uncapped: 1.0 2.0 40.0 100.0 ...).
  EXPECT_EQ(lines[3].rfind("8\u00d78        0.250 \u00b1 0.050      1.0     1.9    38.9    98.6    29.2       9.7", 0), 0u) << lines[3];
  EXPECT_EQ(lines[4].rfind("1\u00d764 ckpt  0.402 \u00b1 0.008", 0), 0u) << lines[4];
  EXPECT_NE(lines[4].find(" 1.61\u00d7"), std::string::npos) << lines[4];  // 0.402 over 0.250
  {
    // Under 10 rounds the mean has no interval, and the row no ± (it showed the steps' standard
    // deviation, stalls included: helper-99).
    SweepResult few = result;
    few.runs[0].mean_seconds.low = few.runs[0].mean_seconds.high = std::numeric_limits<double>::quiet_NaN();
    const std::vector<std::string> rows = report_lines(ConsoleReporter(), few);
    EXPECT_EQ(rows[3].rfind("8\u00d78                0.250      1.0", 0), 0u) << rows[3];
  }
  EXPECT_NE(lines[6].find("; step s: the mean step where a split's steps differ in size (an epoch's time over its "
                          "steps; the phases and rates from it); vs fastest: step time (median, or mean where the "
                          "steps differ in size) over the fastest split's"),
            std::string::npos)
      << lines[6];
  result.runs.resize(1);
  const std::vector<std::string> alone = report_lines(ConsoleReporter(), result);
  ASSERT_GE(alone.size(), 5u);
  EXPECT_NE(alone[4].find("; step s: the mean step, since the steps differ in size (an epoch's time over its steps; "
                          "the phases and rates from it); vs fastest: mean step time over the fastest split's"),
            std::string::npos)
      << alone[4];
}

// Runs of both orders (--group-by-length false,true): a grouped column, the per-token comparison
// (a grouped step holds other samples), the legend, every run's order in the CSV, the key and the
// label read back from the JSON; one order alone shows no column.
TEST(ConsoleReporter, GroupingsOfTheRunsInAColumn) {
  SweepResult result = sample_result();
  result.runs[1].config.group_by_length = true;
  result.runs[1].tokens_per_step = 4 * 65536;
  const std::vector<std::string> lines = report_lines(ConsoleReporter(), result);
  ASSERT_GE(lines.size(), 8u);
  EXPECT_EQ(lines[2].rfind("split      grouped         step s", 0), 0u) << lines[2];
  EXPECT_EQ(lines[3].rfind("8\u00d78        false    0.191 \u00b1 0.002", 0), 0u) << lines[3];
  EXPECT_EQ(lines[4].rfind("1\u00d764 ckpt  true     0.402 \u00b1 0.008", 0), 0u) << lines[4];
  EXPECT_NE(lines[3].find(" 1.90\u00d7"), std::string::npos) << lines[3];  // 0.191 / 65536 over 0.402 / 262144
  EXPECT_NE(lines[6].find("; grouped: whether the sampler groups samples by length (--group-by-length), compared per "
                          "real token;"),
            std::string::npos)
      << lines[6];
  const std::vector<std::string> csv = report_lines(CsvReporter(), result);
  EXPECT_NE(csv[1].find(",max,none,false,none,"), std::string::npos) << csv[1];
  EXPECT_NE(csv[2].find(",max,none,true,blocks,"), std::string::npos) << csv[2];
  const SweepResult back = sweep_result_from_json(to_json(result), "grouped.json");
  EXPECT_EQ(back.runs[0].config.key(), "8\u00d78/bf16");
  EXPECT_EQ(back.runs[1].config.key(), "1\u00d764 ckpt/bf16/grouped");
  EXPECT_EQ(run_label(back.runs[1], back.runs), "1\u00d764 ckpt grouped");
  EXPECT_EQ(run_label(back.runs[0], back.runs), "8\u00d78 ungrouped");
  for (RunResult& run : result.runs) run.config.group_by_length = true;
  const std::vector<std::string> one = report_lines(ConsoleReporter(), result);
  EXPECT_EQ(one[2].find(" grouped "), std::string::npos) << one[2];
  EXPECT_EQ(one[6].find("per real token"), std::string::npos) << one[6];
}

// The header names the runs' weights dtypes unless fp32 alone, the labels name each unless fp32,
// and the legend says so; the CSV gives every run's dtype in its own column.
TEST(ConsoleReporter, HeaderNamesTheWeightsDtypesOfTheRuns) {
  SweepResult result = sample_result();
  result.runs[1].config.weights_dtype = Precision::kBf16;
  result.runs[2].config.weights_dtype = Precision::kBf16;
  const std::vector<std::string> lines = report_lines(ConsoleReporter(), result);
  ASSERT_GE(lines.size(), 7u);
  EXPECT_EQ(lines[0], std::string(kContextLine) + ", fp32/bf16 weights");
  EXPECT_EQ(lines[3].rfind("8\u00d78 ", 0), 0u) << lines[3];
  EXPECT_EQ(lines[4].rfind("1\u00d764 ckpt bf16-weights ", 0), 0u) << lines[4];
  EXPECT_NE(lines[6].find("; bf16-weights: the weights stored in that dtype (--weights-dtype), fp32 unless named;"),
            std::string::npos)
      << lines[6];
  for (RunResult& run : result.runs) run.config.weights_dtype = Precision::kBf16;
  EXPECT_EQ(report_lines(ConsoleReporter(), result)[0], std::string(kContextLine) + ", bf16 weights");
  const std::vector<std::string> csv = report_lines(CsvReporter(), result);
  EXPECT_NE(csv[0].find(",optimizer,weights_dtype,adapter_dtype,max_grad_norm,padding,packing,group_by_length,activation_checkpointing,"), std::string::npos) << csv[0];
  EXPECT_NE(csv[1].find(",adamw,bf16,fp32,"), std::string::npos) << csv[1];
}

// With --memory-limit, "fits" says yes or no; "vs fastest" is relative to the fastest split that
// fits (the one the decision can name), so a faster split over the limit reads below 1.00×.
TEST(ConsoleReporter, FitsAgainstTheLimitAndRatiosAgainstTheFastest) {
  SweepResult result = sample_result();
  result.runs.pop_back();
  result.context.memory_limit_bytes = 4 * kGiB;
  result.runs[0].fits = false;  // 6 GiB reserved
  result.recommendation.best_index = 1;
  const std::vector<std::string> lines = report_lines(ConsoleReporter(), result);
  ASSERT_GE(lines.size(), 6u);
  EXPECT_NE(lines[3].find("  no         0.48\u00d7"), std::string::npos) << lines[3];
  EXPECT_NE(lines[4].find("  yes        1.00\u00d7"), std::string::npos) << lines[4];
  EXPECT_EQ(lines[5],
            "split: micro-batch \u00d7 accumulation steps; ckpt: activation checkpointing (gradient_checkpointing); "
            "vs fastest: median step time over the fastest fitting split's");
  // Markdown keeps "fits" when only it tells the splits apart, and HTML says yes or no too.
  const std::vector<std::string> markdown = report_lines(MarkdownReporter(), result);
  ASSERT_GE(markdown.size(), 5u);
  EXPECT_NE(markdown[2].find("| fits | vs fastest |"), std::string::npos) << markdown[2];
  EXPECT_NE(markdown[4].find("| no | 0.48\u00d7 |"), std::string::npos) << markdown[4];
  EXPECT_NE(markdown[5].find("| yes | 1.00\u00d7 |"), std::string::npos) << markdown[5];
  std::ostringstream html;
  HtmlReporter().report(result, html);
  EXPECT_NE(html.str().find("<td class=\"text status-bad\">no</td>"), std::string::npos);
  EXPECT_NE(html.str().find("<td class=\"text\">yes</td>"), std::string::npos);
  EXPECT_EQ(lines.back(),
            "Trainer settings (one process): per_device_train_batch_size=1 gradient_accumulation_steps=64 "
            "gradient_checkpointing=true bf16=true fp16=false max_length=1024 packing=false loss_type=nll");
}

TEST(ConsoleReporter, ColumnsThatWouldBeEmptyAreLeftOut) {
  SweepResult result = sample_result();
  result.runs.pop_back();  // no failure: no status column
  for (RunResult& run : result.runs) {
    run.phase_median_seconds[1] = 0.0;  // no host-to-device copies (CPU)
    run.predicted_peak_bytes = -1;      // no plan
    run.step_seconds.ci_low = run.step_seconds.ci_high = kNaN;  // spread falls back to stddev (0.0012, up to 0.002)
  }
  const std::vector<std::string> lines = report_lines(ConsoleReporter(), result);
  ASSERT_GE(lines.size(), 4u);
  EXPECT_EQ(lines[2],
            "split             step s  data ms  fwd ms  bwd ms  opt ms"
            "  other ms  tokens/s     MFU      peak  fits  vs fastest");
  EXPECT_EQ(lines[3],
            "8\u00d78        0.191 \u00b1 0.002      1.2    45.3    98.7    30.1"
            "      13.7   343,120  29.8 %  5.20 GiB  -          1.00\u00d7");
}

// With per-micro-batch padding the real tokens/s sit next to the computed ones and the padding
// fraction; without padding (the tests above) neither column shows.
TEST(ConsoleReporter, PaddedRunsShowComputedTokensAndThePaddingFraction) {
  SweepResult result = sample_result();
  result.runs.pop_back();
  for (RunResult& run : result.runs) {
    run.phase_median_seconds[1] = 0.0;
    run.predicted_peak_bytes = -1;
    run.step_seconds.ci_low = run.step_seconds.ci_high = kNaN;
  }
  result.runs[0].computed_tokens_per_second = 400000;
  result.runs[0].padding_fraction = 0.15;
  result.runs[1].computed_tokens_per_second = 163024;
  const std::vector<std::string> lines = report_lines(ConsoleReporter(), result);
  ASSERT_GE(lines.size(), 5u);
  EXPECT_EQ(lines[2],
            "split             step s  data ms  fwd ms  bwd ms  opt ms"
            "  other ms  tokens/s  computed/s     pad     MFU      peak  fits  vs fastest");
  EXPECT_EQ(lines[3],
            "8\u00d78        0.191 \u00b1 0.002      1.2    45.3    98.7    30.1"
            "      13.7   343,120     400,000  15.0 %  29.8 %  5.20 GiB  -          1.00\u00d7");
  EXPECT_EQ(lines[4],
            "1\u00d764 ckpt  0.402 \u00b1 0.004      1.1   120.5   261.0     9.9"
            "       7.5   163,024     163,024   0.0 %  14.1 %  3.00 GiB  -          2.10\u00d7");
}

TEST(ConsoleReporter, ColourMarksTheBestRowGreenAndFailuresRed) {
  const std::vector<std::string> lines =
      report_lines(ConsoleReporter({/*color=*/true}), sample_result());
  ASSERT_GE(lines.size(), 6u);
  EXPECT_EQ(lines[2].find('\x1b'), std::string::npos);  // header plain
  EXPECT_EQ(lines[3].rfind("\x1b[32m8\u00d78 ", 0), 0u);
  EXPECT_EQ(lines[3].substr(lines[3].size() - 4), "\x1b[0m");
  EXPECT_EQ(lines[4].find('\x1b'), std::string::npos);  // an ordinary run stays plain
  EXPECT_EQ(lines[5].rfind("\x1b[31m64\u00d71 oib", 0), 0u);
  // Without colour there is no escape anywhere.
  std::ostringstream plain;
  ConsoleReporter().report(sample_result(), plain);
  EXPECT_EQ(plain.str().find('\x1b'), std::string::npos);
}

TEST(ConsoleReporter, NoRecommendation) {
  SweepResult result = sample_result();
  result.recommendation = {};
  result.recommendation.reason = "No split ran successfully: 3 ran out of memory.";
  const std::vector<std::string> lines = report_lines(ConsoleReporter(), result);
  EXPECT_EQ(lines.back(),
            "Recommendation: none \u2014 No split ran successfully: 3 ran out of memory.");
  // "vs fastest" still has the fastest finished split, but no settings line follows.
  EXPECT_NE(lines[3].find("  1.00\u00d7  ok"), std::string::npos) << lines[3];
}

// ---- CSV -------------------------------------------------------------------------------------

// The sample's options name none of the workload's keys: empty fields, and the defaults of the
// options a sweep records only when they differ.
const std::string kWorkload = ",gpt2-124m,124439808,0,1024,64,cuda:0,NVIDIA H200,,,,,,,,,,,,,none,false,peft,on,true,2,,,,,,";

TEST(CsvReporter, HeaderAndOneLinePerRun) {
  expect_lines(report_lines(CsvReporter(), sample_result()), {
      "label,micro_batch,accum_steps,precision,optimizer,weights_dtype,adapter_dtype,max_grad_norm,padding,packing,"
      "group_by_length,activation_checkpointing,optimizer_in_backward,"
      "cuda_graphs,chunked_loss,world_size,status,steps,tables_read,mean_seconds,mean_seconds_low,mean_seconds_high,"
      "step_seconds_median,step_seconds_min,step_seconds_mean,"
      "step_seconds_stddev,step_seconds_cv,step_seconds_ci_low,step_seconds_ci_high,data_seconds,"
      "h2d_seconds,forward_seconds,backward_seconds,allreduce_seconds,optimizer_seconds,other_seconds,"
      "device_busy_fraction,tokens_per_second,computed_tokens_per_second,padding_fraction,samples_per_second,"
      "achieved_tflops,hardware_tflops,mfu,peak_allocated_bytes,peak_reserved_bytes,predicted_peak_bytes,fits,vs_fastest,decided,error,"
      "model,parameters,trainable_parameters,seq_len,batch,device,device_name,seed,lengths,loss_normalization,"
      "lr,beta1,beta2,eps,weight_decay,lora_rank,lora_alpha,lora_targets,lora_dropout,"
      "base_quant,double_quant,kbit_prep,tf32,completion_only_loss,distinct_steps,token_file,eos_id,loss_chunk_tokens,"
      "memory_limit_bytes,threads,OMP_WAIT_POLICY",
      // vs_fastest: the step time over the fastest's (0.402 / 0.191 = 2.10); decided: empty where no
      // rounds decided (the tables' "-").
      "8\u00d78,8,8,bf16,adamw,fp32,fp32,0,max,none,false,none,false,false,false,1,ok,10,median,0.1915,0.19,0.193,0.191,0.189,0.1915,0.0012,0.00627,0.189,0.193,"
      "0.0012,0.0021,0.0453,0.0987,0,0.0301,0.0137,0.93,343120.4,0,0,335.08,295,295,0.298,5583457484,"
      "6442450944,5368709120,,1,," + kWorkload,
      "1\u00d764 ckpt,1,64,bf16,adamw,fp32,fp32,0,max,none,false,blocks,false,false,false,1,ok,10,median,,,,0.402,0.397,0.403,0.004,0.00993,0.398,"
      "0.41,0.0011,0.002,0.1205,0.261,0,0.0099,0.0075,0.48,163024,0,0,159.2,140.2,187.3,0.141,3221225472,"
      "3221225472,-1,,2.1047120418848166,," + kWorkload,
      // A failed run has no measurements: empty fields, not zeros.
      "64\u00d71 oib,64,1,bf16,adamw,fp32,fp32,0,max,none,false,none,true,false,false,1,oom,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,161061273600,false,,,"
      "CUDA out of memory. Tried to allocate 2.00 GiB" + kWorkload,
  });
}

// The workload columns from a real sweep's options: a comma list quoted, a quantised base recorded
// before --kbit-prep existed prepared as PEFT does, the options recorded only when not their
// default written as that default.
TEST(CsvReporter, WorkloadColumnsFromTheSweepsOptions) {
  SweepResult result = sample_result();
  WorkloadOptions w;
  w.optimizer.kind = OptimizerKind::kAdamWForeach;  // the runs' own column names it, not the workload's
  w.lora.rank = 16;
  w.lora.targets = "q_proj,v_proj";
  w.lora.base_quant = BaseQuant::kNf4;
  w.lora.double_quant = true;
  result.context.options = describe_workload(w);
  result.context.options.emplace_back("token_file", "shard0.bin");  // the sweep's own options
  result.context.options.emplace_back("eos_id", "none");
  // What else changes the measurement: the loss's chunk, the memory limit, the threads, OpenMP's wait.
  result.context.options.emplace_back("loss_chunk_tokens", "auto");
  result.context.options.emplace_back("memory_limit_bytes", "41943040");
  result.context.options.emplace_back("threads", "1");
  result.context.options.emplace_back("OMP_WAIT_POLICY", "PASSIVE");
  const std::vector<std::string> lines = report_lines(CsvReporter(), result);
  ASSERT_EQ(lines.size(), 4u);
  const std::string tail = ",gpt2-124m,124439808,0,1024,64,cuda:0,NVIDIA H200,0,fixed,token,0.0001,0.9,0.999,"
                           "1e-08,0.01,16,32,\"q_proj,v_proj\",0,nf4,true,peft,on,true,2,shard0.bin,none,auto,41943040,1,"
                           "PASSIVE";
  for (size_t i = 1; i < lines.size(); ++i) {
    ASSERT_GE(lines[i].size(), tail.size());
    EXPECT_EQ(lines[i].substr(lines[i].size() - tail.size()), tail) << lines[i];
  }
}

// A CPU sweep's CSV: the parameters and those that train (a LoRA's adapters) as counted, and tf32
// "-", which acts on CUDA's fp32 products alone.
TEST(CsvReporter, ACpuSweepSaysItsParametersAndNoTf32) {
  SweepResult result = sample_result();
  result.context.device = "cpu";
  result.context.device_name = "Xeon";
  result.context.trainable_parameters = 811008;
  const std::vector<std::string> lines = report_lines(CsvReporter(), result);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[1].find(",gpt2-124m,124439808,811008,1024,64,cpu,Xeon,"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find(",none,false,peft,-,true,2,"), std::string::npos) << lines[1];
}

// Runs of a --padding list share a shape: each line's label names its padding, as the tables'
// split names do, so that no two lines read the same.
TEST(CsvReporter, LabelsNameWhatAListVaries) {
  SweepResult result = sample_result();
  result.runs[1] = result.runs[0];
  result.runs[1].config.padding = PaddingChoice{Padding::kLongest, 0};
  const std::vector<std::string> lines = report_lines(CsvReporter(), result);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[1].rfind("8\u00d78 pad-max,", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("8\u00d78 pad-longest,", 0), 0u) << lines[2];
}

TEST(CsvReporter, QuotesFieldsWithCommasAndQuotesPerRfc4180) {
  SweepResult result = sample_result();
  result.runs[2].status = RunStatus::kError;
  result.runs[2].error = "bad value \"x\", giving up";
  const std::vector<std::string> lines = report_lines(CsvReporter(), result);
  ASSERT_EQ(lines.size(), 4u);
  const std::string expected_tail = ",false,,,\"bad value \"\"x\"\", giving up\"" + kWorkload;
  EXPECT_EQ(lines[3].substr(lines[3].size() - expected_tail.size()), expected_tail);
}

// An interval without an upper bound (too few rounds) is an empty field, as the JSON's null reads
// back in `report --csv`; "inf" is not a number CSV readers take.
TEST(CsvReporter, AnUnboundedIntervalIsAnEmptyField) {
  SweepResult result = sample_result();
  result.runs[0].mean_seconds = {0.1915, 0.0, std::numeric_limits<double>::infinity()};
  const std::vector<std::string> lines = report_lines(CsvReporter(), result);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[1].find(",ok,10,median,0.1915,0,,0.191,"), std::string::npos) << lines[1];
  const SweepResult read_back = sweep_result_from_json(to_json(result), "r.json");
  EXPECT_EQ(report_lines(CsvReporter(), read_back), lines);
}

// ---- Markdown --------------------------------------------------------------------------------

// Markdown keeps its own columns and every console column whose cells differ between the runs
// (the phases, "vs fastest"), so nothing that tells the splits apart is dropped; the legend under
// the table spells out the labels' abbreviations and the columns shown, as the console's does.
TEST(MarkdownReporter, ShowsOnlyColumnsThatVary) {
  expect_lines(report_lines(MarkdownReporter(), sample_result()), {
      kContextLine,
      "",
      "| split | step s | data ms | h2d ms | fwd ms | bwd ms | opt ms | other ms | tokens/s | MFU | peak | predicted "
      "| fits | vs fastest | status |",
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |",
      "| 8\u00d78 | 0.191 \u00b1 0.002 | 1.2 | 2.1 | 45.3 | 98.7 | 30.1 | 13.7 | 343,120 | 29.8 % | 5.20 GiB | "
      "5.00 GiB | - | 1.00\u00d7 | ok |",
      "| 1\u00d764 ckpt | 0.402 \u00b1 0.008 | 1.1 | 2.0 | 120.5 | 261.0 | 9.9 | 7.5 | 163,024 | 14.1 % | "
      "3.00 GiB | - | - | 2.10\u00d7 | ok |",
      "| 64\u00d71 oib | - | - | - | - | - | - | - | - | - | - | 150.00 GiB | no | - | oom: CUDA out of memory. "
      "Tried to allocate 2.00 GiB |",
      "",
      "split: micro-batch \u00d7 accumulation steps; ckpt: activation checkpointing (gradient_checkpointing); oib: the "
      "optimizer inside backward; fits: - without --memory-limit; vs fastest: median step time over the fastest split's",
      "",
      "**Recommendation:** 8\u00d78 \u2014 8\u00d78 is fastest.",
      "",
      "Trainer settings (one process): per_device_train_batch_size=8 gradient_accumulation_steps=8 "
      "gradient_checkpointing=false bf16=true fp16=false max_length=1024 packing=false loss_type=nll",
  });
}

TEST(MarkdownReporter, MinimalTableWhenNothingVaries) {
  SweepResult result = sample_result();
  result.runs.pop_back();
  for (RunResult& run : result.runs) {
    run.mfu = kNaN;
    run.predicted_peak_bytes = -1;
  }
  result.runs[1].config.precision = Precision::kFp32;  // now precision varies and gets a column
  result.runs[1].error = "a|b";              // a pipe would split the cell; never shown here
  const std::vector<std::string> lines = report_lines(MarkdownReporter(), result);
  ASSERT_GE(lines.size(), 6u);
  EXPECT_EQ(lines[0],
            "model gpt2-124m, 124,439,808 parameters, T=1024, batch 64, device NVIDIA H200 "
            "(cuda:0), precision bf16/fp32");
  EXPECT_EQ(lines[2], "| split | precision | step s | data ms | h2d ms | fwd ms | bwd ms | opt ms | other ms | "
                      "tokens/s | peak | vs fastest |");
  EXPECT_EQ(lines[3], "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  EXPECT_EQ(lines[5], "| 1\u00d764 ckpt | fp32 | 0.402 \u00b1 0.008 | 1.1 | 2.0 | 120.5 | 261.0 | 9.9 | 7.5 | "
                      "163,024 | 3.00 GiB | 2.10\u00d7 |");

  result.runs[1].config.precision = Precision::kBf16;
  EXPECT_EQ(report_lines(MarkdownReporter(), result)[2],
            "| split | step s | data ms | h2d ms | fwd ms | bwd ms | opt ms | other ms | tokens/s | peak | vs fastest |");
  // One run: nothing varies, and the table is the minimal one.
  result.runs.pop_back();
  EXPECT_EQ(report_lines(MarkdownReporter(), result)[2], "| split | step s | tokens/s | peak |");
}

TEST(MarkdownReporter, EscapesPipes) {
  SweepResult result = sample_result();
  result.runs[2].error = "a|b";
  const std::vector<std::string> lines = report_lines(MarkdownReporter(), result);
  EXPECT_EQ(lines[6], "| 64\u00d71 oib | - | - | - | - | - | - | - | - | - | - | 150.00 GiB | no | - | oom: a\\|b |");
}

// The sweep's notes (stored, then the diverged-loss note derived from the steps) as a list between
// the context line and the table; none: the table right under the context line, as before.
TEST(MarkdownReporter, NotesBetweenTheContextLineAndTheTable) {
  SweepResult result = sample_result();
  EXPECT_EQ(report_lines(MarkdownReporter(), result)[2].rfind("| split |", 0), 0u);
  result.notes = {"--group-by-length changes nothing here", "a <b> | c"};
  StepSample step;
  step.step_seconds = 0.2;
  step.loss = kNaN;
  result.runs[0].steps = {step};
  const std::vector<std::string> lines = report_lines(MarkdownReporter(), result);
  ASSERT_GE(lines.size(), 8u);
  EXPECT_EQ(lines[1], "");
  EXPECT_EQ(lines[2], "Notes:");
  EXPECT_EQ(lines[3], "");
  EXPECT_EQ(lines[4], "- --group-by-length changes nothing here");
  EXPECT_EQ(lines[5], "- a &lt;b&gt; \\| c");
  EXPECT_EQ(lines[6].rfind("- the loss of 8\u00d78 is not finite in any timed step", 0), 0u) << lines[6];
  EXPECT_EQ(lines[7], "");
  EXPECT_EQ(lines[8].rfind("| split |", 0), 0u) << lines[8];
}

// ---- compare ---------------------------------------------------------------------------------

// Runs whose steps differ in size (a grouped epoch) are compared at their mean step with the rounds'
// interval of it, as their tables read them (the medians 0.191 and 0.382 would say 2.00×), and the
// legend says so.
TEST(PrintComparison, StepsOfManySizesCompareTheirMeans) {
  SweepResult a = sample_result();
  a.runs.resize(1);
  for (const int64_t positions : {30000, 65536, 100000, 65536, 30000}) {
    StepSample step;
    step.step_seconds = 0.2;
    step.positions = step.computed_positions = step.tokens = positions;
    a.runs[0].steps.push_back(step);
  }
  a.runs[0].step_seconds.count = 5;
  a.runs[0].mean_seconds = {0.25, 0.24, 0.26};
  SweepResult b = a;
  for (StepSample& step : b.runs[0].steps) step.step_seconds = 0.3;  // B's own steps (the same ones read "same")
  b.runs[0].step_seconds.median = 0.382;
  b.runs[0].mean_seconds = {0.30, 0.29, 0.31};
  std::ostringstream out;
  print_comparison(a, b, out);
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_GE(lines.size(), 5u);
  EXPECT_EQ(lines[4].rfind("8\u00d78       0.250     0.300  1.20\u00d7  yes", 0), 0u) << lines[4];
  EXPECT_EQ(lines[5].rfind("step s: median step time, or the mean step where a split's steps differ in size (its "
                           "table's); differs: yes when the two 95 % intervals do not overlap",
                           0),
            0u)
      << lines[5];
}

TEST(PrintComparison, MatchedByKeyUnmatchedShownWithDash) {
  const SweepResult a = sample_result();
  SweepResult b = sample_result();
  b.context.device_name = "NVIDIA A100-SXM4-80GB";
  b.context.git_commit = "";
  b.runs[0].step_seconds.median = 0.382;
  b.runs[0].step_seconds.ci_low = 0.378;  // apart from A's 0.189–0.193: the difference is clear
  b.runs[0].step_seconds.ci_high = 0.386;
  b.runs[0].peak_allocated_bytes = 2 * a.runs[0].peak_allocated_bytes;
  RunResult only_b = ok_run(2, 32);
  only_b.step_seconds.median = 0.25;
  only_b.peak_allocated_bytes = 4 * kGiB;
  b.runs = {b.runs[0], b.runs[2], only_b};  // 1×64 ckpt only in A, 2×32 only in B

  std::ostringstream out;
  print_comparison(a, b, out);
  expect_lines(lines_of(out.str()), {
      "A: NVIDIA H200, model gpt2-124m, T=1024, batch 64, commit abc123def456, "
      "2025-01-01T00:00:00Z",
      "B: NVIDIA A100-SXM4-80GB, model gpt2-124m, T=1024, batch 64, 2025-01-01T00:00:00Z",
      "note: the two sweeps ran on other devices (NVIDIA H200 vs NVIDIA A100-SXM4-80GB); the ratios compare the "
      "devices, with whatever else differs",
      "",
      "split      A step s  B step s    B/A  differs    A peak     B peak    B/A",
      "8\u00d78           0.191     0.382  2.00\u00d7  yes      5.20 GiB  10.40 GiB  2.00\u00d7",
      "1\u00d764 ckpt     0.402         -      -  -        3.00 GiB          -      -",
      "64\u00d71 oib        oom       oom      -  -               -          -      -",
      "2\u00d732              -     0.250      -  -               -   4.00 GiB      -",
      "step s: median step time; differs: yes when the two medians' 95 % intervals do not overlap, unsure when they "
      "do (the difference may be noise), - with fewer than 5 timed steps on a side",
      "recommended: A 8\u00d78 (fastest by its table), B 8\u00d78 (fastest by its table)",
  });
  // The same medians with overlapping intervals: the difference may be noise.
  b.runs[0].step_seconds.ci_low = 0.190;
  std::ostringstream overlapping;
  print_comparison(a, b, overlapping);
  EXPECT_NE(overlapping.str().find("0.382  2.00\u00d7  unsure "), std::string::npos) << overlapping.str();
}

// Packed rows hold more samples: a step of B trains 4× A's real tokens and takes twice as long, so
// B is the faster per token. The table adds tokens/s and its ratio, `differs` compares tokens/s,
// and a note says step times do not compare; tokens per step under a tenth apart keep the plain
// table (the mean over the steps a split timed moves with their number).
TEST(PrintComparison, StepsOfOtherTokensCompareByTokensPerSecond) {
  const SweepResult a = sample_result();
  SweepResult b = sample_result();
  b.context.options.push_back({"packing", "bfd"});
  b.runs[0].step_seconds.median = 0.382;
  b.runs[0].step_seconds.ci_low = 0.378;
  b.runs[0].step_seconds.ci_high = 0.386;
  b.runs[0].tokens_per_step = 4 * 65536;
  b.runs[0].tokens_per_second = 686240.8;
  std::ostringstream out;
  print_comparison(a, b, out);
  expect_lines(lines_of(out.str()), {
      "A: NVIDIA H200, model gpt2-124m, T=1024, batch 64, commit abc123def456, 2025-01-01T00:00:00Z",
      "B: NVIDIA H200, model gpt2-124m, T=1024, batch 64, commit abc123def456, 2025-01-01T00:00:00Z",
      "note: a step of B trains other tokens than a step of A (262,144 vs 65,536 real tokens per step at 8\u00d78), "
      "so their step times do not compare; tokens/s does (an epoch takes its real tokens divided by tokens/s)",
      "",
      "split      A step s  B step s    B/A  differs  A tokens/s  B tokens/s    B/A    A peak    B peak    B/A",
      "8\u00d78           0.191     0.382  2.00\u00d7  yes         343,120     686,241  2.00\u00d7  5.20 GiB  5.20 GiB  1.00\u00d7",
      "1\u00d764 ckpt     0.402     0.402  1.00\u00d7  unsure      163,024     163,024  1.00\u00d7  3.00 GiB  3.00 GiB  1.00\u00d7",
      "64\u00d71 oib        oom       oom      -  -               oom         oom      -         -         -      -",
      "step s: median step time; differs: yes when the two medians' 95 % intervals do not overlap, unsure when they "
      "do (the difference may be noise), - with fewer than 5 timed steps on a side; tokens/s: real (non-pad) tokens "
      "per second at the median step (differs compares their intervals where the steps train a tenth or more other "
      "tokens)",
      "recommended: A 8\u00d78 (fastest by its table), B 8\u00d78 (fastest by its table)",
  });
  // Twice the step time for twice the tokens: the same tokens/s, whose intervals overlap.
  b.runs[0].tokens_per_step = 2 * 65536;
  std::ostringstream twice;
  print_comparison(a, b, twice);
  EXPECT_NE(twice.str().find("2.00\u00d7  unsure "), std::string::npos) << twice.str();
  b.runs[0].tokens_per_step = 65536 * 109 / 100;  // 9 % more: within what the steps timed move a mean by
  std::ostringstream same;
  print_comparison(a, b, same);
  EXPECT_EQ(same.str().find("tokens/s"), std::string::npos) << same.str();
}

// Each sweep's recommendation closes the comparison; where they differ, what may explain it: a tie
// that holds the other's pick, an undecided sweep, a busy machine, other configurations. Both
// decided on idle machines from one configuration: the rows are where they part.
TEST(PrintComparison, RecommendationsAndWhyTheyDiffer) {
  SweepResult a = sample_result();
  SweepResult b = sample_result();
  a.recommendation.decision.kind = DecisionKind::kFastest;
  a.recommendation.decision.rounds = 12;
  a.recommendation.tied_indices = {0};
  b.recommendation.tied_indices = {1};
  b.recommendation.best_index = 1;
  b.recommendation.decision.kind = DecisionKind::kUndecided;
  b.recommendation.decision.rounds = 40;
  const auto tail = [&](int n) {
    std::ostringstream out;
    print_comparison(a, b, out);
    std::vector<std::string> lines = lines_of(out.str());
    return std::vector<std::string>(lines.end() - std::min<int>(n, static_cast<int>(lines.size())), lines.end());
  };
  expect_lines(tail(2), {
      "recommended: A 8\u00d78 (decided in 12 rounds), B 1\u00d764 ckpt (undecided after 40 rounds)",
      "note: the two sweeps recommend different splits: B's is undecided (a --resume with a --time-budget times the "
      "undecided more rounds)",
  });
  // B ties A's pick with its own, on a busy machine (3.1 of 2 cores taken by other processes).
  b.recommendation.decision.kind = DecisionKind::kTie;
  b.recommendation.tied_indices = {1, 0};
  b.context.cpu_cores = 2;
  b.context.threads = 2;
  b.context.other_cpu_seconds = 31;
  b.context.other_cpu_span_seconds = 10;
  expect_lines(tail(3), {
      "recommended: A 8\u00d78 (decided in 12 rounds), B 1\u00d764 ckpt (tied with 1 other in 40 rounds)",
      "note: B: the machine was busy while this sweep ran (other processes used 3.1 of its 2 cores on average): the "
      "steps took turns on the cores, which moves their times from round to round and can turn a close decision "
      "from one sweep to the next",
      "note: the two sweeps recommend different splits: one sweep ties the other's pick with its own; B's machine "
      "was busy",
  });
  b.recommendation.decision.kind = DecisionKind::kFastest;
  b.recommendation.tied_indices = {1};
  b.context.other_cpu_seconds = 0;
  expect_lines(tail(2), {
      "recommended: A 8\u00d78 (decided in 12 rounds), B 1\u00d764 ckpt (decided in 40 rounds)",
      "note: the two sweeps recommend different splits: both decided, on idle machines, from the same configuration; "
      "the rows above show where their step times part",
  });
  b.recommendation.best_index = 0;  // the same pick: no note
  expect_lines(tail(1), {"recommended: A 8\u00d78 (decided in 12 rounds), B 8\u00d78 (decided in 40 rounds)"});
}

// A file compared with its copy: every row holds the very same steps, "same", not "unsure" (helper-113).
TEST(PrintComparison, TheSameStepsReadSame) {
  SweepResult a = sample_result();
  for (int i = 0; i < 5; ++i) {
    StepSample step;
    step.step_seconds = 0.19 + 0.001 * i;
    a.runs[0].steps.push_back(step);
  }
  a.runs[0].step_seconds.count = 5;
  std::ostringstream out;
  print_comparison(a, a, out);
  EXPECT_NE(out.str().find("0.191  1.00\u00d7  same "), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("; same: both hold the very same timed steps (nothing to tell apart)"), std::string::npos);
  SweepResult b = a;
  b.runs[0].steps[4].step_seconds = 0.2;  // one step of its own: compared as two measurements
  std::ostringstream apart;
  print_comparison(a, b, apart);
  EXPECT_EQ(apart.str().find("same"), std::string::npos) << apart.str();
}

TEST(PrintComparison, MixedPrecisionsNameEachRowsPrecision) {
  SweepResult a = sample_result();
  SweepResult b = sample_result();
  b.runs[0].config.precision = Precision::kFp32;
  std::ostringstream out;
  print_comparison(a, b, out);
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_GE(lines.size(), 8u);
  // As every other report writes a precision sweep's split: the label, then the precision.
  EXPECT_EQ(lines[4].rfind("8\u00d78 bf16 ", 0), 0u) << lines[4];
  EXPECT_EQ(lines[7].rfind("8\u00d78 fp32 ", 0), 0u) << lines[7];
}

TEST(PrintComparison, MixedWorldSizesNameEachRowsWorld) {
  // A single-GPU sweep against a 2-rank one: the same label on two rows was unreadable.
  SweepResult a = sample_result();
  SweepResult b = sample_result();
  b.context.world_size = 2;
  b.context.batch = 128;  // 8×8 per rank
  for (RunResult& run : b.runs) run.config.world_size = 2;
  std::ostringstream out;
  print_comparison(a, b, out);
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_GE(lines.size(), 10u);
  EXPECT_EQ(lines[1], "B: NVIDIA H200, model gpt2-124m, T=1024, batch 128 over 2 ranks, commit abc123def456, "
                      "2025-01-01T00:00:00Z");
  EXPECT_EQ(lines[3],
            "note: no split was measured in both: their data-parallel world sizes differ, and a split is "
            "micro-batch \u00d7 accumulation per rank; each sweep's own recommendation names its fastest split");
  EXPECT_EQ(lines[6].rfind("8\u00d78 world 1 ", 0), 0u) << out.str();
  EXPECT_EQ(lines[9].rfind("8\u00d78 world 2 ", 0), 0u) << out.str();
}

// A split whose every timed step lost its loss to inf or nan is named above the table; one finite
// step, or fp16's skipped steps beside finite ones, name nothing.
TEST(ConsoleReporter, DivergedLossIsNoted) {
  SweepResult result = sample_result();
  StepSample step;
  step.step_seconds = 0.2;
  step.loss = std::numeric_limits<double>::quiet_NaN();
  result.runs[0].steps = {step, step};
  EXPECT_EQ(diverged_loss_note(result),
            "the loss of 8\u00d78 is not finite in any timed step: the step diverges (its times are of arithmetic on "
            "inf and nan), so check what scales it (--lr, --lora-alpha, the weights' dtype) before reading the times");
  result.runs[0].steps[1].loss = 2.5;
  EXPECT_EQ(diverged_loss_note(result), "");
  result.runs[0].steps[1].skipped = true;  // fp16: an overflowed step, skipped
  result.runs[0].steps[0].loss = 2.5;
  EXPECT_EQ(diverged_loss_note(result), "");
}

// What report, Markdown and HTML say of a sweep's notes: the stored ones in order, then the
// diverged-loss note; an empty stored note is skipped.
TEST(SweepNotes, StoredThenDerived) {
  SweepResult result = sample_result();
  EXPECT_TRUE(sweep_notes(result).empty());
  result.notes = {"first", "", "second"};
  EXPECT_EQ(sweep_notes(result), (std::vector<std::string>{"first", "second"}));
  StepSample step;
  step.step_seconds = 0.2;
  step.loss = kNaN;
  result.runs[0].steps = {step};
  const std::vector<std::string> notes = sweep_notes(result);
  ASSERT_EQ(notes.size(), 3u);
  EXPECT_EQ(notes[2], diverged_loss_note(result));
}

// ---- JSON ------------------------------------------------------------------------------------

// Every field set, NaN in several places, every status, non-alphabetical options.
SweepResult populated_result() {
  SweepResult result = sample_result();
  result.context.memory_limit_bytes = 16 * kGiB;

  RunResult& fast = result.runs[0];
  fast.config.cuda_graphs = true;
  fast.config.chunked_loss = true;
  fast.peak_breakdown = {497758208, 497758208, 995516416, 3500000000, 123456789};
  StepSample s1;
  s1.step_seconds = 0.1 + 0.2;  // 0.30000000000000004: the shortest text must read back exactly
  s1.host_seconds = {0.001, 0.002, 0.05, 0.1, 0.03, 0.0137};
  s1.device_seconds = {0.0009, 0.0019, 0.049, 0.099, kNaN, kNaN};
  s1.loss = 10.987654321;
  s1.tokens = 65536;
  s1.peak_allocated_bytes = 5583457484;
  StepSample s2 = s1;
  s2.step_seconds = 1.0 / 3.0;
  s2.skipped = true;
  s2.loss = kNaN;
  fast.steps = {s1, s2};
  fast.step_seconds.count = 2;  // the summary of these two steps
  fast.timeline = {{0, Phase::kForward, 0.0, 0.05, 1000, 2000, 2500},
                   {-1, Phase::kOptimizer, 0.25, 0.03, 2000, 1000, 3000}};

  RunResult predicted = ok_run(32, 2);
  predicted.status = RunStatus::kPredictedOutOfMemory;
  predicted.predicted_peak_bytes = 80 * kGiB;
  predicted.fits = false;
  RunResult error = ok_run(16, 4);
  error.status = RunStatus::kError;
  error.error = "quote \" backslash \\ newline \n tab \t \u00d7";
  result.runs.push_back(predicted);
  result.runs.push_back(error);
  result.recommendation = {0, {0, 1}, "tied \u00d7 reason"};
  return result;
}

TEST(Json, RoundTripIsLossless) {
  SweepResult original = populated_result();
  original.interruption = Interruption{"SIGINT", {"8\u00d71", "16\u00d71"}};
  original.recommendation.decision.interrupted = true;
  original.notes = {"--group-by-length ... changes nothing here", "quote \" and \u00d7"};
  const std::string text = to_json(original);
  const SweepResult back = sweep_result_from_json(text, "test.json");
  EXPECT_EQ(to_json(back), text);
  EXPECT_EQ(back.notes, original.notes);

  // The re-serialized text would hide a field both directions forgot; check values directly.
  EXPECT_EQ(back.context.options, original.context.options);
  EXPECT_EQ(back.context.memory_limit_bytes, 16 * kGiB);
  EXPECT_EQ(back.context.peak_tflops, 989.4);
  EXPECT_EQ(back.interruption.signal, "SIGINT");
  EXPECT_EQ(back.interruption.splits_not_run, (std::vector<std::string>{"8\u00d71", "16\u00d71"}));
  EXPECT_TRUE(back.recommendation.decision.interrupted);
  ASSERT_EQ(back.runs.size(), 5u);
  const RunResult& fast = back.runs[0];
  EXPECT_TRUE(fast.config.cuda_graphs);
  EXPECT_TRUE(fast.config.chunked_loss);
  EXPECT_EQ(fast.config.key(), "8\u00d78 chunked-ce graphs/bf16");
  EXPECT_EQ(fast.steps[0].step_seconds, 0.1 + 0.2);
  EXPECT_EQ(fast.steps[1].step_seconds, 1.0 / 3.0);
  EXPECT_TRUE(fast.steps[1].skipped);
  EXPECT_TRUE(std::isnan(fast.steps[1].loss));
  EXPECT_TRUE(std::isnan(fast.steps[0].device_seconds[4]));
  EXPECT_EQ(fast.steps[0].device_seconds[3], 0.099);
  EXPECT_EQ(fast.steps[0].loss, 10.987654321);
  EXPECT_TRUE(std::isnan(fast.device_median_seconds[5]));
  EXPECT_EQ(fast.peak_breakdown.activations_bytes, 3500000000);
  EXPECT_EQ(fast.peak_breakdown.slack_bytes, 123456789);
  EXPECT_EQ(fast.step_seconds.count, 2);
  ASSERT_EQ(fast.timeline.size(), 2u);
  EXPECT_EQ(fast.timeline[1].micro_step, -1);
  EXPECT_EQ(fast.timeline[1].phase, Phase::kOptimizer);
  EXPECT_EQ(fast.timeline[0].peak_bytes, 2500);
  EXPECT_EQ(back.runs[1].config.activation_checkpointing, Checkpointing::kBlocks);
  EXPECT_EQ(back.runs[2].status, RunStatus::kOutOfMemory);
  EXPECT_EQ(back.runs[3].status, RunStatus::kPredictedOutOfMemory);
  EXPECT_EQ(back.runs[3].predicted_peak_bytes, 80 * kGiB);
  EXPECT_FALSE(back.runs[3].fits);
  EXPECT_EQ(back.runs[4].status, RunStatus::kError);
  EXPECT_EQ(back.runs[4].error, original.runs[4].error);
  EXPECT_TRUE(std::isnan(back.runs[4].step_seconds.median));
  EXPECT_EQ(back.recommendation.tied_indices, std::vector<int>({0, 1}));
  EXPECT_EQ(back.recommendation.reason, "tied \u00d7 reason");
}

// What a split never timed did not measure is null, not a measured 0, and reads back as the sweep
// held it; fits is null without a limit; a run says which statistic its tables read (schema 19).
TEST(Json, WhatWasNotMeasuredIsNull) {
  SweepResult result = sample_result();
  RunResult skipped;
  skipped.config = result.runs[1].config;
  skipped.config.micro_batch = 64;
  skipped.config.accum_steps = 1;
  skipped.config.activation_checkpointing = Checkpointing::kNone;
  skipped.status = RunStatus::kPredictedOutOfMemory;
  skipped.predicted_peak_bytes = 80 * kGiB;
  skipped.fits = false;
  result.runs.push_back(skipped);
  result.context.memory_limit_bytes = 0;
  const nlohmann::ordered_json file = nlohmann::ordered_json::parse(to_json(result));
  const auto& never = file["runs"][3];
  for (const char* key : {"tokens_per_step", "tokens_per_second", "computed_tokens_per_second", "padding_fraction",
                          "samples_per_second", "achieved_tflops", "hardware_tflops", "peak_allocated_bytes",
                          "peak_reserved_bytes", "tables_read", "phase_mean_seconds"}) {
    EXPECT_TRUE(never[key].is_null()) << key << ": " << never[key];
  }
  EXPECT_TRUE(never["phase_median_seconds"]["forward"].is_null());
  EXPECT_TRUE(never["device_median_seconds"]["optimizer"].is_null());
  EXPECT_EQ(never["fits"], false);              // out of memory: no, limit or not
  EXPECT_TRUE(file["runs"][0]["fits"].is_null());  // no limit: nothing to fit in
  EXPECT_EQ(file["runs"][0]["tables_read"], "median");
  EXPECT_TRUE(file["runs"][0]["phase_mean_seconds"].is_null());

  const SweepResult back = sweep_result_from_json(to_json(result), "sweep.json");
  EXPECT_EQ(back.runs[3].tokens_per_second, 0.0);
  EXPECT_EQ(back.runs[3].peak_allocated_bytes, 0);
  EXPECT_EQ(back.runs[3].phase_median_seconds[static_cast<int>(Phase::kForward)], 0.0);
  EXPECT_FALSE(back.runs[3].fits);
  EXPECT_TRUE(back.runs[0].fits);
  EXPECT_EQ(back.runs[0].tokens_per_step, result.runs[0].tokens_per_step);
}

// A split that ran but was never timed (a sweep stopped in its warm-up) reads back as the sweep held
// it: rates and phases not measured (NaN), so the tables say "-", not "0 tokens/s" (helper-106).
TEST(Json, AWarmedUpSplitReadsBackUntimed) {
  SweepResult result = sample_result();
  RunResult& warmed = result.runs[1];
  // As finalize_run leaves a run without timed steps.
  warmed.steps.clear();
  warmed.step_seconds = Summary{};
  warmed.phase_median_seconds.fill(kNaN);
  warmed.device_median_seconds.fill(kNaN);
  warmed.tokens_per_second = warmed.computed_tokens_per_second = warmed.samples_per_second = kNaN;
  warmed.achieved_tflops = warmed.hardware_tflops = kNaN;
  const SweepResult back = sweep_result_from_json(to_json(result), "sweep.json");
  const RunResult& read = back.runs[1];
  EXPECT_EQ(read.status, RunStatus::kOk);
  EXPECT_TRUE(std::isnan(read.tokens_per_second));
  EXPECT_TRUE(std::isnan(read.samples_per_second));
  EXPECT_TRUE(std::isnan(read.achieved_tflops));
  EXPECT_TRUE(std::isnan(read.phase_median_seconds[static_cast<int>(Phase::kForward)]));
  EXPECT_EQ(read.peak_allocated_bytes, warmed.peak_allocated_bytes);
  bool found = false;
  for (const std::string& line : report_lines(MarkdownReporter(), back)) {
    if (line.rfind("| " + read.config.label() + " |", 0) != 0) continue;
    found = true;
    EXPECT_EQ(line.find("| 0 |"), std::string::npos) << line;
    EXPECT_EQ(line.find("| 0.0 |"), std::string::npos) << line;
  }
  EXPECT_TRUE(found);
}

// Each timed step names the sweep that timed it (schema 19); a file of schema 18 reads its steps as
// its run's session, the only one a run held then.
TEST(Json, StepsCarryTheirSession) {
  SweepResult result = populated_result();
  result.runs[0].session = 42;
  result.runs[0].steps[0].session = 7;
  const SweepResult back = sweep_result_from_json(to_json(result), "sweep.json");
  EXPECT_EQ(back.runs[0].steps[0].session, 7);
  EXPECT_EQ(back.runs[0].steps[1].session, 0);
  EXPECT_EQ(session_of(back.runs[0], back.runs[0].steps[1]), 42);

  nlohmann::ordered_json old = nlohmann::ordered_json::parse(to_json(result));
  old["json_schema_version"] = 18;
  old["context"]["json_schema_version"] = 18;
  for (auto& step : old["runs"][0]["steps"]) step.erase("session");
  const SweepResult upgraded = sweep_result_from_json(old.dump(), "old.json");
  EXPECT_EQ(upgraded.runs[0].steps[0].session, 42);
  EXPECT_EQ(upgraded.runs[0].steps[1].session, 42);
}

// The CPU time other processes took while the sweep ran, over how long (schema 20), reads back; a
// file of schema 19 reads it as not read.
TEST(Json, OtherProcessesCpuTimeReadsBack) {
  SweepResult result = populated_result();
  result.context.other_cpu_seconds = 2.5;
  result.context.other_cpu_span_seconds = 10.0;
  const SweepResult back = sweep_result_from_json(to_json(result), "sweep.json");
  EXPECT_EQ(back.context.other_cpu_seconds, 2.5);
  EXPECT_EQ(back.context.other_cpu_span_seconds, 10.0);

  nlohmann::ordered_json old = nlohmann::ordered_json::parse(to_json(result));
  old["json_schema_version"] = 19;
  old["context"]["json_schema_version"] = 19;
  old["context"].erase("other_cpu_seconds");
  old["context"].erase("other_cpu_span_seconds");
  const SweepResult upgraded = sweep_result_from_json(old.dump(), "old.json");
  EXPECT_EQ(upgraded.context.json_schema_version, kJsonSchemaVersion);
  EXPECT_EQ(upgraded.context.other_cpu_seconds, 0.0);
  EXPECT_EQ(upgraded.context.other_cpu_span_seconds, 0.0);
}

// The busy-machine note: other processes' CPU time beyond the cores the sweep left free (a burst
// between two saves counts, the sweep's own threads do not); a sweep of more threads than cores is
// told so, with the fix; files before schema 20 go by the load read at the saves.
TEST(Report, TheBusyMachineNoteSaysItsEvidence) {
  SweepContext context;
  context.cpu_cores = 2;
  context.threads = 2;
  context.load_average = 3.0;  // the runnable threads at a save, the sweep's own among them
  context.other_cpu_span_seconds = 10;
  context.other_cpu_seconds = 0.2;
  EXPECT_EQ(busy_machine_note(context), "");  // 0.02 of a core: idle enough, whatever the load read
  const std::string tail =
      " with the steps, which moves their times from round to round, widens the intervals and can turn a close "
      "decision from one sweep to the next; an idle machine measures the splits as they run alone";
  context.other_cpu_seconds = 9.0;
  EXPECT_EQ(busy_machine_note(context),
            "the machine was busy while this sweep ran (other processes used 0.9 of its 2 cores on average): other "
            "work took turns" + tail);
  // One thread on 2 cores leaves one free: another process's one core takes nothing from it.
  context.threads = 1;
  EXPECT_EQ(busy_machine_note(context), "");
  context.other_cpu_seconds = 13.0;
  EXPECT_NE(busy_machine_note(context), "");
  // Two ranks of one thread: the other rank's core is the sweep's own.
  context.world_size = 2;
  context.other_cpu_seconds = 10.0;
  EXPECT_EQ(busy_machine_note(context), "");
  // Beyond it, the number said is the strangers' alone (helper-111: 1.6, of which 1.0 was rank 1).
  context.other_cpu_seconds = 16.0;
  EXPECT_EQ(busy_machine_note(context).rfind(
                "the machine was busy while this sweep ran (other processes used 0.6 of its 2 cores on average, beside "
                "its 2 ranks): other work took turns", 0),
            0u)
      << busy_machine_note(context);
  // Two ranks of two threads on 2 cores: more threads than cores.
  context.threads = 2;
  context.other_cpu_seconds = 20.0;
  EXPECT_EQ(busy_machine_note(context),
            "the sweep ran more threads than the machine has cores (4 threads over 2 processes on 2 cores): they took "
            "turns with the steps, which moves their times from round to round, widens the intervals and can turn a "
            "close decision from one sweep to the next; --threads 1 on an idle machine measures the splits as they run "
            "alone");
  // Not read (schema 19): the load alone.
  context.world_size = 1;
  context.other_cpu_span_seconds = 0;
  context.load_average = 4.0;
  EXPECT_EQ(busy_machine_note(context),
            "the machine was busy while this sweep ran (a load of 4.0 on 2 cores): other work took turns" + tail);
  context.load_average = 2.4;
  EXPECT_EQ(busy_machine_note(context), "");
}

TEST(Json, LayoutVersionFirstNaNAsNullPhasesByName) {
  const std::string text = to_json(populated_result());
  EXPECT_EQ(text.rfind("{\n  \"json_schema_version\": 20,\n  \"context\": {\n", 0), 0u);
  EXPECT_NE(text.find("\"options\": [\n      [\n        \"seq-len\",\n        \"1024\"\n      ],"),
            std::string::npos);
  EXPECT_NE(text.find("\"loss\": null"), std::string::npos);
  EXPECT_NE(text.find("\"phase\": \"optimizer\""), std::string::npos);
  EXPECT_NE(text.find("\"status\": \"predicted-oom\""), std::string::npos);
  EXPECT_NE(text.find("\"host_seconds\": {\n            \"data\": 0.001,"), std::string::npos);
  EXPECT_EQ(text.find("NaN"), std::string::npos);
  EXPECT_EQ(text.find("nan"), std::string::npos);
}

std::string user_error_of(const std::string& json_text) {
  try {
    sweep_result_from_json(json_text, "sweep.json");
  } catch (const UserError& e) {
    return e.what();
  }
  return "<no UserError>";
}

TEST(Json, BrokenJsonIsAUserErrorNamingTheFile) {
  const std::string message = user_error_of("{\"json_schema_version\": 1, \"context\": ");
  EXPECT_EQ(message.rfind("sweep.json is not valid JSON (", 0), 0u) << message;
  const std::string tail = "); pass a file written by `accumbench sweep --json`";
  EXPECT_EQ(message.substr(message.size() - tail.size()), tail) << message;
}

TEST(Json, MissingOrWrongSchemaVersion) {
  EXPECT_EQ(user_error_of("{}"),
            "sweep.json has no json_schema_version, so it is not an accumbench result; pass a "
            "file written by `accumbench sweep --json`");
  EXPECT_EQ(user_error_of("[1, 2]"), user_error_of("{}"));
  EXPECT_EQ(user_error_of("{\"json_schema_version\": 1}"),
            "sweep.json has json_schema_version 1 but this accumbench reads versions 2 to 20; rerun the "
            "sweep with this build or read it with the build that wrote it");
  EXPECT_EQ(user_error_of("{\"json_schema_version\": \"1\"}").find("json_schema_version \"1\""),
            std::string("sweep.json has ").size());
  // 20.0 or "20" is no version: said so, not "reads versions 2 to 20" (helper-113).
  EXPECT_EQ(user_error_of("{\"json_schema_version\": 20.0}"),
            "sweep.json has json_schema_version 20.0, not a whole number as accumbench writes it; pass a file written "
            "by `accumbench sweep --json`, or write the version as a whole number");
  EXPECT_NE(user_error_of("{\"json_schema_version\": \"20\"}").find("\"20\", not a whole number"), std::string::npos);
}

// A result as a version-3 file (before LoRA) held it: every parameter trains, no recompute
// FLOPs, no transformers figure.
// A result as a version-4 file (before real data) held it: every sample padded to T, so no padding
// counts and computed tokens per second equal to the real ones.
SweepResult version_4_result() {
  SweepResult r = populated_result();
  for (RunResult& run : r.runs) {
    run.padding_fraction = 0;
    run.computed_tokens_per_second = run.tokens_per_second;
    for (StepSample& step : run.steps) step.positions = step.computed_positions = step.tokens;
  }
  return r;
}

nlohmann::json as_version_4(const SweepResult& result) {
  nlohmann::json doc = nlohmann::json::parse(to_json(result));
  doc["json_schema_version"] = 4;
  doc["context"]["json_schema_version"] = 4;
  for (auto& run : doc["runs"]) {
    run.erase("padding_fraction");
    run.erase("computed_tokens_per_second");
    for (auto& step : run["steps"]) step.erase("positions"), step.erase("computed_positions");
  }
  return doc;
}

SweepResult version_3_result() {
  SweepResult r = version_4_result();
  r.context.trainable_parameters = r.context.parameters;
  r.context.transformers_flops_per_token = kNotMeasured;
  for (RunResult& run : r.runs) run.hardware_tflops = run.achieved_tflops;
  return r;
}

nlohmann::json as_version_3(const SweepResult& result) {
  nlohmann::json doc = as_version_4(result);
  doc["json_schema_version"] = 3;
  doc["context"]["json_schema_version"] = 3;
  doc["context"].erase("trainable_parameters");
  doc["context"].erase("transformers_flops_per_token");
  for (auto& run : doc["runs"]) run.erase("hardware_tflops");
  return doc;
}

// A version-4 file (before real data) reads as version 5 without padding: padding fraction 0,
// computed tokens per second the real ones, every step's positions its tokens.
TEST(Json, Version4ReadsWithoutPadding) {
  const SweepResult original = version_4_result();
  const SweepResult back = sweep_result_from_json(as_version_4(original).dump(), "v4.json");
  EXPECT_EQ(back.context.json_schema_version, kJsonSchemaVersion);
  ASSERT_FALSE(back.runs.empty());
  EXPECT_EQ(back.runs[0].computed_tokens_per_second, original.runs[0].tokens_per_second);
  EXPECT_EQ(to_json(back), to_json(original));
}

// A version-11 file counted a data-parallel step's positions on rank 0 alone (and multiplied them by
// the world size in its rates): its steps read as every rank's, so padding and computed/s stay as
// reported; a one-process run's steps are unchanged.
TEST(Json, Version11DataParallelStepsReadAsEveryRanks) {
  SweepResult original = populated_result();
  ASSERT_GE(original.runs.size(), 2u);
  ASSERT_FALSE(original.runs[0].steps.empty());
  original.runs[0].config.world_size = 4;
  original.runs[1].config.world_size = 1;
  nlohmann::json doc = nlohmann::json::parse(to_json(original));
  doc["json_schema_version"] = 11;
  doc["context"]["json_schema_version"] = 11;
  const SweepResult back = sweep_result_from_json(doc.dump(), "v11.json");
  EXPECT_EQ(back.context.json_schema_version, kJsonSchemaVersion);
  for (size_t i = 0; i < original.runs[0].steps.size(); ++i) {
    EXPECT_EQ(back.runs[0].steps[i].positions, 4 * original.runs[0].steps[i].positions);
    EXPECT_EQ(back.runs[0].steps[i].computed_positions, 4 * original.runs[0].steps[i].computed_positions);
  }
  ASSERT_EQ(back.runs[1].steps.size(), original.runs[1].steps.size());
  for (size_t i = 0; i < original.runs[1].steps.size(); ++i)
    EXPECT_EQ(back.runs[1].steps[i].positions, original.runs[1].steps[i].positions);
}

// A version-7 file (before interruptions were recorded) reads as a sweep that ran to its end.
TEST(Json, Version7ReadsAsASweepThatRanToItsEnd) {
  const SweepResult original = populated_result();
  nlohmann::json doc = nlohmann::json::parse(to_json(original));
  doc["json_schema_version"] = 7;
  doc["context"]["json_schema_version"] = 7;
  doc.erase("interruption");
  doc["recommendation"]["decision"].erase("interrupted");
  const SweepResult back = sweep_result_from_json(doc.dump(), "v7.json");
  EXPECT_EQ(back.context.json_schema_version, kJsonSchemaVersion);
  EXPECT_TRUE(back.interruption.signal.empty());
  EXPECT_TRUE(back.interruption.splits_not_run.empty());
  EXPECT_FALSE(back.recommendation.decision.interrupted);
  EXPECT_EQ(to_json(back), to_json(original));
}

// Values the format allows but no sweep writes are refused, naming the place: a hand edit would
// otherwise show a "0×4" split, recommend per_device_train_batch_size=0 on --resume, or print
// "Recommendation: none" over a reason that names a split.
TEST(Json, EditsNoSweepWritesAreRefused) {
  const SweepResult original = populated_result();
  const auto refusal = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json doc = nlohmann::json::parse(to_json(original));
    edit(doc);
    try {
      (void)sweep_result_from_json(doc.dump(), "edited.json");
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NO_THROW((void)sweep_result_from_json(to_json(original), "as written"));
  EXPECT_EQ(refusal([](nlohmann::json& d) { d["runs"][0]["config"]["micro_batch"] = 0; }),
            "edited.json: runs[0].config.micro_batch is 0 but must be at least 1; the file is damaged or was edited, "
            "so rerun the sweep to write it again");
  EXPECT_EQ(refusal([](nlohmann::json& d) { d["runs"][0]["config"]["accum_steps"] = 7; }).rfind(
                "edited.json: runs[0].config makes ", 0),
            0u);
  EXPECT_NE(refusal([](nlohmann::json& d) { d["runs"][1]["config"] = d["runs"][0]["config"]; }).find(
                "runs[1].config repeats an earlier run's split"),
            std::string::npos);
  EXPECT_NE(refusal([](nlohmann::json& d) { d["runs"][0]["step_seconds"]["median"] = -1; })
                .find("runs[0].step_seconds.median is -1 but cannot be negative"),
            std::string::npos);
  EXPECT_NE(refusal([](nlohmann::json& d) { d["runs"][0]["step_seconds"]["count"] = -3; })
                .find("runs[0].step_seconds.count is -3 but cannot be negative"),
            std::string::npos);
  EXPECT_NE(refusal([](nlohmann::json& d) { d["runs"][0]["peak_allocated_bytes"] = -5; })
                .find("runs[0].peak_allocated_bytes is -5 but cannot be negative"),
            std::string::npos);
  EXPECT_NE(refusal([](nlohmann::json& d) { d["runs"][0]["config"]["world_size"] = 0; })
                .find("runs[0].config.world_size is 0 but must be at least 1"),
            std::string::npos);
  EXPECT_NE(refusal([](nlohmann::json& d) { d["runs"][0]["steps"][0]["step_seconds"] = 0; })
                .find("runs[0].steps[0].step_seconds is 0 but a timed step takes more than 0 s"),
            std::string::npos);
  // helper-95: a null step time (NaN as written) blanked its split in a resume; negative counts and
  // phase times, and a negative machine, were carried into the rewritten file.
  EXPECT_NE(refusal([](nlohmann::json& d) { d["runs"][0]["steps"][0]["step_seconds"] = nullptr; })
                .find("runs[0].steps[0].step_seconds is null but a timed step takes more than 0 s"),
            std::string::npos);
  EXPECT_NE(refusal([](nlohmann::json& d) { d["runs"][0]["steps"][0]["tokens"] = -5; })
                .find("runs[0].steps[0].tokens is -5 but cannot be negative"),
            std::string::npos);
  EXPECT_NE(refusal([](nlohmann::json& d) { d["runs"][0]["steps"][0]["host_seconds"]["forward"] = -1; })
                .find("runs[0].steps[0].host_seconds.forward is -1 but cannot be negative"),
            std::string::npos);
  EXPECT_NE(refusal([](nlohmann::json& d) { d["context"]["cpu_cores"] = -2; })
                .find("context.cpu_cores is -2 but cannot be negative"),
            std::string::npos);
  EXPECT_NE(refusal([](nlohmann::json& d) { d["context"]["load_average"] = -1; })
                .find("context.load_average is -1 but is a count of runnable threads"),
            std::string::npos);
  EXPECT_NE(refusal([](nlohmann::json& d) { d["runs"][0]["steps"][0]["data_step"] = 7, d["runs"][0]["steps"][0]["data_steps"] = 2; })
                .find("runs[0].steps[0].data_step is 7 of 2 but must be one of its run's distinct steps"),
            std::string::npos);
  EXPECT_NE(refusal([](nlohmann::json& d) { d["context"]["trainable_parameters"] = 1000000000000; })
                .find("context.trainable_parameters is 1000000000000 but must be from 0 to context.parameters"),
            std::string::npos);
  EXPECT_NE(refusal([](nlohmann::json& d) { d["runs"][0]["steps"][0]["round"] = -2; })
                .find("runs[0].steps[0].round is -2 but must be -1 (timed alone) or a round from 0 to 1000000000"),
            std::string::npos);
  EXPECT_NE(refusal([](nlohmann::json& d) { d["runs"][0]["steps"][0]["round"] = 1000000000000; })
                .find("runs[0].steps[0].round is 1000000000000"),
            std::string::npos);
  // A failed split keeps no step, and the recommendation never names one (every status set to
  // oom by hand, the steps and the recommendation left as they were).
  EXPECT_NE(refusal([](nlohmann::json& d) { d["runs"][0]["status"] = "oom"; })
                .find("runs[0].steps holds 2 timed steps but the run's status is oom, which keeps none"),
            std::string::npos);
  EXPECT_NE(refusal([](nlohmann::json& d) {
              d["runs"][0]["status"] = "predicted-oom";
              d["runs"][0]["steps"] = nlohmann::json::array();
              d["runs"][0]["step_seconds"]["count"] = 0;
            }).find("recommendation.best_index names runs[0], whose status is predicted-oom, not ok"),
            std::string::npos);
  EXPECT_NE(refusal([](nlohmann::json& d) { d["recommendation"]["tied_indices"][1] = 2; })
                .find("recommendation.tied_indices[1] names runs[2], whose status is oom, not ok"),
            std::string::npos);
  // Rates and shares are never negative; padding is at most every position.
  EXPECT_NE(refusal([](nlohmann::json& d) { d["runs"][0]["tokens_per_second"] = -1; })
                .find("runs[0].tokens_per_second is -1 but cannot be negative"),
            std::string::npos);
  EXPECT_NE(refusal([](nlohmann::json& d) { d["runs"][1]["phase_median_seconds"]["forward"] = -0.5; })
                .find("runs[1].phase_median_seconds.forward is -0.5 but cannot be negative"),
            std::string::npos);
  EXPECT_NE(refusal([](nlohmann::json& d) { d["runs"][0]["padding_fraction"] = 1.5; })
                .find("runs[0].padding_fraction is 1.5 but is a share of the positions computed, at most 1"),
            std::string::npos);
  // The summary counts the steps it holds; a timed step computes real positions.
  EXPECT_NE(refusal([](nlohmann::json& d) { d["runs"][0]["step_seconds"]["count"] = 1000000; })
                .find("runs[0].step_seconds.count is 1000000 but the run holds 2 timed steps"),
            std::string::npos);
  EXPECT_NE(refusal([](nlohmann::json& d) { d["runs"][0]["tokens_per_step"] = 0; })
                .find("runs[0].tokens_per_step is 0 but a timed step computes at least one real position"),
            std::string::npos);
  EXPECT_NE(refusal([](nlohmann::json& d) { d["recommendation"]["best_index"] = 17; })
                .find("recommendation.best_index is 17 but the file holds"),
            std::string::npos);
  EXPECT_NE(refusal([](nlohmann::json& d) { d["context"]["batch"] = 0; }).find("context.batch is 0 but must be at least 1"),
            std::string::npos);
  EXPECT_NE(refusal([](nlohmann::json& d) {
              d = nlohmann::json{{"kind", "accumbench plan"}, {"splits", nlohmann::json::array()}};
            }).find("edited.json is a plan (`accumbench plan --json`), not a sweep's results"),
            std::string::npos);
}

// A version-8 file (before saves marked themselves unfinished) reads as what it says: without a
// signal, a sweep that ran to its end.
TEST(Json, Version8ReadsWithoutTheUnfinishedMarks) {
  const SweepResult original = populated_result();
  nlohmann::json doc = nlohmann::json::parse(to_json(original));
  doc["json_schema_version"] = 8;
  doc["context"]["json_schema_version"] = 8;
  doc["interruption"].erase("saved_while_running");
  doc["interruption"].erase("error");
  const SweepResult back = sweep_result_from_json(doc.dump(), "v8.json");
  EXPECT_EQ(back.context.json_schema_version, kJsonSchemaVersion);
  EXPECT_FALSE(back.interruption.saved_while_running);
  EXPECT_TRUE(back.interruption.error.empty());
  EXPECT_EQ(to_json(back), to_json(original));

  SweepResult stopped = original;
  stopped.interruption.error = "an all-reduce with the other ranks failed";
  stopped.interruption.splits_not_run = {"8\u00d71"};
  const SweepResult read = sweep_result_from_json(to_json(stopped), "stopped.json");
  EXPECT_EQ(read.interruption.error, stopped.interruption.error);
  EXPECT_FALSE(read.interruption.whole());
}

// A file of schema 5 lacks time_models and interruption at its top level; adding them moves the
// other members of an ordered_json, so the upgrade must not hold references across it (it read
// the version as garbage and refused the file).
TEST(Json, Version5WithoutTheLaterTopLevelKeysReads) {
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(to_json(populated_result()));
  doc["json_schema_version"] = 5;
  doc["context"]["json_schema_version"] = 5;
  doc.erase("time_models");
  doc.erase("interruption");
  doc["recommendation"].erase("decision");
  for (auto& run : doc["runs"]) {
    run.erase("clip_seconds");
    run.erase("session");
    run.erase("mean_seconds");
    run["config"].erase("optimizer");
    for (auto& step : run["steps"]) step.erase("round");
  }
  doc["context"].erase("framework_seconds_per_micro_step");
  doc["context"].erase("framework_source");
  const SweepResult back = sweep_result_from_json(doc.dump(), "v5.json");
  EXPECT_EQ(back.context.json_schema_version, kJsonSchemaVersion);
  ASSERT_FALSE(back.runs.empty());
  EXPECT_EQ(back.runs[0].config.optimizer, OptimizerKind::kAdamW);
  EXPECT_EQ(back.runs[0].steps[0].round, -1);  // unpaired, as version 5 timed each split alone
}

// A version-9 file swept one optimizer, named in its context's options only: each run's split
// reads with it (adamw where the file predates the option), so that --resume keys its splits as a
// sweep of today does ("4×1 adamw8bit/fp32").
TEST(Json, Version9ReadsTheOptimizerIntoEverySplit) {
  SweepResult original = populated_result();
  original.context.options.emplace_back("optimizer", "adamw8bit");
  for (RunResult& run : original.runs) run.config.optimizer = OptimizerKind::kAdamW8bit;
  nlohmann::json doc = nlohmann::json::parse(to_json(original));
  doc["json_schema_version"] = 9;
  doc["context"]["json_schema_version"] = 9;
  for (auto& run : doc["runs"]) run["config"].erase("optimizer");
  const SweepResult back = sweep_result_from_json(doc.dump(), "v9.json");
  EXPECT_EQ(back.context.json_schema_version, kJsonSchemaVersion);
  ASSERT_FALSE(back.runs.empty());
  EXPECT_EQ(back.runs[0].config.optimizer, OptimizerKind::kAdamW8bit);
  EXPECT_NE(back.runs[0].config.key().find(" adamw8bit/"), std::string::npos) << back.runs[0].config.key();
  EXPECT_EQ(to_json(back), to_json(original));

  // Without the option (files from before --optimizer): AdamW.
  doc["context"]["options"].erase(std::remove_if(doc["context"]["options"].begin(), doc["context"]["options"].end(),
                                                 [](const nlohmann::json& o) { return o[0] == "optimizer"; }),
                                  doc["context"]["options"].end());
  EXPECT_EQ(sweep_result_from_json(doc.dump(), "v9.json").runs[0].config.optimizer, OptimizerKind::kAdamW);
}

// Version 10 stored the weights and the adapters in one dtype each per sweep, named in the
// context's options: every run's split reads with them (fp32 where a file has none), and the
// labels name them.
TEST(Json, Version10ReadsTheWeightsDtypeIntoEverySplit) {
  SweepResult original = populated_result();
  original.context.options.emplace_back("weights_dtype", "bf16");
  original.context.options.emplace_back("adapter_dtype", "bf16");
  for (RunResult& run : original.runs) run.config.weights_dtype = run.config.adapter_dtype = Precision::kBf16;
  nlohmann::json doc = nlohmann::json::parse(to_json(original));
  doc["json_schema_version"] = 10;
  doc["context"]["json_schema_version"] = 10;
  for (auto& run : doc["runs"]) {
    run["config"].erase("weights_dtype");
    run["config"].erase("adapter_dtype");
  }
  const SweepResult back = sweep_result_from_json(doc.dump(), "v10.json");
  EXPECT_EQ(back.context.json_schema_version, kJsonSchemaVersion);
  ASSERT_FALSE(back.runs.empty());
  EXPECT_EQ(back.runs[0].config.weights_dtype, Precision::kBf16);
  EXPECT_EQ(back.runs[0].config.adapter_dtype, Precision::kBf16);
  EXPECT_NE(back.runs[0].config.key().find(" bf16-weights bf16-adapters/"), std::string::npos) << back.runs[0].config.key();
  EXPECT_EQ(to_json(back), to_json(original));

  // Without the options (files from before them, or adapters in fp32, which was not recorded): fp32.
  doc["context"]["options"].erase(std::remove_if(doc["context"]["options"].begin(), doc["context"]["options"].end(),
                                                 [](const nlohmann::json& o) {
                                                   return o[0] == "weights_dtype" || o[0] == "adapter_dtype";
                                                 }),
                                  doc["context"]["options"].end());
  const SweepResult older = sweep_result_from_json(doc.dump(), "v10.json");
  EXPECT_EQ(older.runs[0].config.weights_dtype, Precision::kFp32);
  EXPECT_EQ(older.runs[0].config.adapter_dtype, Precision::kFp32);
}

// Version 12 clipped every split at one norm, named in the context's options when above 0: every
// run's split reads it (0 without it), and so keys it for --resume and compare.
TEST(Json, Version12ReadsTheClippingNormIntoEverySplit) {
  SweepResult original = populated_result();
  original.context.options.emplace_back("max_grad_norm", "0.3");
  for (RunResult& run : original.runs) run.config.max_grad_norm = 0.3;
  nlohmann::json doc = nlohmann::json::parse(to_json(original));
  doc["json_schema_version"] = 12;
  doc["context"]["json_schema_version"] = 12;
  for (auto& run : doc["runs"]) run["config"].erase("max_grad_norm");
  const SweepResult back = sweep_result_from_json(doc.dump(), "v12.json");
  EXPECT_EQ(back.context.json_schema_version, kJsonSchemaVersion);
  ASSERT_FALSE(back.runs.empty());
  EXPECT_EQ(back.runs[0].config.max_grad_norm, 0.3);
  EXPECT_NE(back.runs[0].config.key().find("/clip0.3"), std::string::npos) << back.runs[0].config.key();
  EXPECT_EQ(to_json(back), to_json(original));
  doc["context"]["options"].erase(std::remove_if(doc["context"]["options"].begin(), doc["context"]["options"].end(),
                                                 [](const nlohmann::json& o) { return o[0] == "max_grad_norm"; }),
                                  doc["context"]["options"].end());
  EXPECT_EQ(sweep_result_from_json(doc.dump(), "v12.json").runs[0].config.max_grad_norm, 0);
  // A norm the file cannot hold: named by its field.
  nlohmann::json bad = nlohmann::json::parse(to_json(original));
  bad["runs"][0]["config"]["max_grad_norm"] = -1;
  try {
    sweep_result_from_json(bad.dump(), "bad.json");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("runs[0].config.max_grad_norm must be a number of 0 or more"), std::string::npos)
        << e.what();
  }
}

// A version-13 file padded every split one way, named in its context's options: every run's split
// reads it (its key names it), a file without the option reads max, and a padding no version
// wrote is named by its field.
TEST(Json, Version13ReadsThePaddingIntoEverySplit) {
  SweepResult original = populated_result();
  original.context.options.erase(std::remove_if(original.context.options.begin(), original.context.options.end(),
                                                [](const auto& o) { return o.first == "padding"; }),
                                 original.context.options.end());
  original.context.options.emplace_back("padding", "multiple:8");
  for (RunResult& run : original.runs) run.config.padding = {Padding::kMultiple, 8};
  nlohmann::json doc = nlohmann::json::parse(to_json(original));
  EXPECT_EQ(doc["runs"][0]["config"]["padding"], "multiple:8");
  doc["json_schema_version"] = 13;
  doc["context"]["json_schema_version"] = 13;
  for (auto& run : doc["runs"]) run["config"].erase("padding");
  const SweepResult back = sweep_result_from_json(doc.dump(), "v13.json");
  EXPECT_EQ(back.context.json_schema_version, kJsonSchemaVersion);
  ASSERT_FALSE(back.runs.empty());
  EXPECT_TRUE(back.runs[0].config.padding == (PaddingChoice{Padding::kMultiple, 8}));
  EXPECT_NE(back.runs[0].config.key().find("/pad-multiple8"), std::string::npos) << back.runs[0].config.key();
  EXPECT_EQ(to_json(back), to_json(original));
  doc["context"]["options"].erase(std::remove_if(doc["context"]["options"].begin(), doc["context"]["options"].end(),
                                                 [](const nlohmann::json& o) { return o[0] == "padding"; }),
                                  doc["context"]["options"].end());
  EXPECT_TRUE(sweep_result_from_json(doc.dump(), "v13.json").runs[0].config.padding == PaddingChoice{});
  nlohmann::json bad = nlohmann::json::parse(to_json(original));
  bad["runs"][0]["config"]["padding"] = "multiple:0";
  try {
    sweep_result_from_json(bad.dump(), "bad.json");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("runs[0].config.padding is \"multiple:0\", not a known value"), std::string::npos)
        << e.what();
  }
}

// A version-15 file packed every split one way, named in its context's options: every run's split
// reads it (its key names it), and a file without the option reads none.
TEST(Json, Version15ReadsThePackingIntoEverySplit) {
  SweepResult original = populated_result();
  original.context.options.erase(std::remove_if(original.context.options.begin(), original.context.options.end(),
                                                [](const auto& o) { return o.first == "packing"; }),
                                 original.context.options.end());
  original.context.options.emplace_back("packing", "bfd");
  for (RunResult& run : original.runs) run.config.packing = Packing::kBfd;
  nlohmann::json doc = nlohmann::json::parse(to_json(original));
  EXPECT_EQ(doc["runs"][0]["config"]["packing"], "bfd");
  doc["json_schema_version"] = 15;
  doc["context"]["json_schema_version"] = 15;
  for (auto& run : doc["runs"]) run["config"].erase("packing");
  const SweepResult back = sweep_result_from_json(doc.dump(), "v15.json");
  EXPECT_EQ(back.context.json_schema_version, kJsonSchemaVersion);
  ASSERT_FALSE(back.runs.empty());
  EXPECT_EQ(back.runs[0].config.packing, Packing::kBfd);
  EXPECT_NE(back.runs[0].config.key().find("/pack-bfd"), std::string::npos) << back.runs[0].config.key();
  EXPECT_EQ(to_json(back), to_json(original));
  doc["context"]["options"].erase(std::remove_if(doc["context"]["options"].begin(), doc["context"]["options"].end(),
                                                 [](const nlohmann::json& o) { return o[0] == "packing"; }),
                                  doc["context"]["options"].end());
  EXPECT_EQ(sweep_result_from_json(doc.dump(), "v15.json").runs[0].config.packing, Packing::kNone);
  nlohmann::json bad = nlohmann::json::parse(to_json(original));
  bad["runs"][0]["config"]["packing"] = "tight";
  try {
    sweep_result_from_json(bad.dump(), "bad.json");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("runs[0].config.packing is \"tight\", not a known value"), std::string::npos)
        << e.what();
  }
}

// Version 17 did not record the batch each step trained on: its steps read as not recorded (-1 of 0),
// which the decisions do not stratify, and the file otherwise reads as written.
TEST(Json, Version17StepsReadWithoutTheirBatch) {
  SweepResult original = populated_result();
  for (RunResult& run : original.runs) {
    for (StepSample& step : run.steps) step.data_step = -1, step.data_steps = 0;
  }
  nlohmann::json doc = nlohmann::json::parse(to_json(original));
  ASSERT_FALSE(doc["runs"][0]["steps"].empty());
  EXPECT_EQ(doc["runs"][0]["steps"][0]["data_step"], -1);
  doc["json_schema_version"] = 17;
  doc["context"]["json_schema_version"] = 17;
  for (auto& run : doc["runs"]) {
    for (auto& step : run["steps"]) step.erase("data_step"), step.erase("data_steps");
  }
  const SweepResult back = sweep_result_from_json(doc.dump(), "v17.json");
  EXPECT_EQ(back.context.json_schema_version, kJsonSchemaVersion);
  EXPECT_EQ(back.runs[0].steps[0].data_step, -1);
  EXPECT_EQ(back.runs[0].steps[0].data_steps, 0);
  EXPECT_EQ(to_json(back), to_json(original));
}

// Version 16 grouped every split one way, the context's group_by_length ("true" or "false", a
// string): every run's split reads it as a boolean, and a file without the option reads false.
TEST(Json, Version16ReadsTheGroupingIntoEverySplit) {
  SweepResult original = populated_result();
  original.context.options.erase(std::remove_if(original.context.options.begin(), original.context.options.end(),
                                                [](const auto& o) { return o.first == "group_by_length"; }),
                                 original.context.options.end());
  original.context.options.emplace_back("group_by_length", "true");
  for (RunResult& run : original.runs) run.config.group_by_length = true;
  nlohmann::json doc = nlohmann::json::parse(to_json(original));
  EXPECT_EQ(doc["runs"][0]["config"]["group_by_length"], true);
  doc["json_schema_version"] = 16;
  doc["context"]["json_schema_version"] = 16;
  for (auto& run : doc["runs"]) run["config"].erase("group_by_length");
  const SweepResult back = sweep_result_from_json(doc.dump(), "v16.json");
  EXPECT_EQ(back.context.json_schema_version, kJsonSchemaVersion);
  ASSERT_FALSE(back.runs.empty());
  EXPECT_TRUE(back.runs[0].config.group_by_length);
  EXPECT_NE(back.runs[0].config.key().find("/grouped"), std::string::npos) << back.runs[0].config.key();
  EXPECT_EQ(to_json(back), to_json(original));
  doc["context"]["options"].erase(std::remove_if(doc["context"]["options"].begin(), doc["context"]["options"].end(),
                                                 [](const nlohmann::json& o) { return o[0] == "group_by_length"; }),
                                  doc["context"]["options"].end());
  EXPECT_FALSE(sweep_result_from_json(doc.dump(), "v16.json").runs[0].config.group_by_length);
  nlohmann::json bad = nlohmann::json::parse(to_json(original));
  bad["runs"][0]["config"]["group_by_length"] = "yes";
  try {
    sweep_result_from_json(bad.dump(), "bad.json");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("runs[0].config.group_by_length"), std::string::npos) << e.what();
  }
}

// Version 14 kept no notes (stderr only): it reads with none and writes back as the current version;
// an empty note is no sentence a sweep writes.
TEST(Json, Version14ReadsWithoutNotes) {
  SweepResult original = populated_result();
  nlohmann::json doc = nlohmann::json::parse(to_json(original));
  ASSERT_TRUE(doc.contains("notes"));
  doc.erase("notes");
  doc["json_schema_version"] = 14;
  doc["context"]["json_schema_version"] = 14;
  const SweepResult back = sweep_result_from_json(doc.dump(), "v14.json");
  EXPECT_EQ(back.context.json_schema_version, kJsonSchemaVersion);
  EXPECT_TRUE(back.notes.empty());
  EXPECT_EQ(to_json(back), to_json(original));
  nlohmann::json current = nlohmann::json::parse(to_json(original));
  current.erase("notes");
  EXPECT_NE(user_error_of(current.dump()).find("notes"), std::string::npos) << user_error_of(current.dump());
  current["notes"] = {"said", ""};
  EXPECT_NE(user_error_of(current.dump()).find("notes[1] is empty but a note says something"), std::string::npos)
      << user_error_of(current.dump());
  current["notes"] = {"  "};
  EXPECT_NE(user_error_of(current.dump()).find("notes[0] is empty but a note says something"), std::string::npos);
  current["notes"] = {"one\ntwo"};
  EXPECT_NE(user_error_of(current.dump()).find("notes[0] breaks a line but a note is one line"), std::string::npos);
}

// A version-2 file (written before the chunked loss existed) reads as version 5 with the chunked
// loss off in every run, and writes back as version 5.
TEST(Json, Version2ReadsWithTheChunkedLossOff) {
  SweepResult original = version_3_result();
  for (RunResult& run : original.runs) run.config.chunked_loss = false;
  nlohmann::json doc = as_version_3(original);
  doc["json_schema_version"] = 2;
  doc["context"]["json_schema_version"] = 2;
  for (auto& run : doc["runs"]) run["config"].erase("chunked_loss");
  const SweepResult back = sweep_result_from_json(doc.dump(), "old.json");
  ASSERT_EQ(back.runs.size(), original.runs.size());
  for (const RunResult& run : back.runs) EXPECT_FALSE(run.config.chunked_loss);
  EXPECT_EQ(back.context.json_schema_version, kJsonSchemaVersion);
  EXPECT_EQ(to_json(back), to_json(original));
}

// A version-3 file (before LoRA) reads as version 5: every parameter trainable, hardware TFLOP/s
// equal to the model's, transformers' figure not measured, no padding.
TEST(Json, Version3ReadsAsFullFineTuning) {
  const SweepResult original = version_3_result();
  const SweepResult back = sweep_result_from_json(as_version_3(original).dump(), "v3.json");
  EXPECT_EQ(back.context.json_schema_version, kJsonSchemaVersion);
  EXPECT_EQ(back.context.trainable_parameters, original.context.parameters);
  EXPECT_TRUE(std::isnan(back.context.transformers_flops_per_token));
  ASSERT_FALSE(back.runs.empty());
  EXPECT_EQ(back.runs[0].hardware_tflops, original.runs[0].achieved_tflops);
  EXPECT_EQ(to_json(back), to_json(original));
}

TEST(Json, MissingFieldOrWrongTypeNamesThePlace) {
  nlohmann::json doc = nlohmann::json::parse(to_json(populated_result()));
  doc["runs"][0]["steps"][1].erase("loss");
  EXPECT_EQ(user_error_of(doc.dump()),
            "sweep.json: runs[0].steps[1] has no field \"loss\"; the file is damaged or was "
            "edited, so rerun the sweep to write it again");

  doc = nlohmann::json::parse(to_json(populated_result()));
  doc["runs"] = nlohmann::json::object();
  EXPECT_EQ(user_error_of(doc.dump()),
            "sweep.json: runs is object, expected an array; the file is damaged or was edited, "
            "so rerun the sweep to write it again");

  doc = nlohmann::json::parse(to_json(populated_result()));
  doc["runs"][2]["status"] = "exploded";
  EXPECT_NE(user_error_of(doc.dump()).find("runs[2].status is \"exploded\", not a run status"),
            std::string::npos);

  doc = nlohmann::json::parse(to_json(populated_result()));
  doc.erase("recommendation");
  EXPECT_NE(user_error_of(doc.dump()).find("sweep.json: the top level has no field "
                                           "\"recommendation\""),
            std::string::npos);
}

TEST(Json, FileWriteAndLoad) {
  const std::string path = ::testing::TempDir() + std::to_string(::getpid()) + "-accumbench_test_sweep.json";
  // A file of the user's named like a temporary is not ours to touch (helper-95: "<path>.tmp" was).
  std::ofstream(path + ".tmp") << "mine";
  write_file_atomically(path, to_json(populated_result()));
  std::string kept;
  std::getline(std::ifstream(path + ".tmp"), kept);
  EXPECT_EQ(kept, "mine");
  std::remove((path + ".tmp").c_str());
  // The temporary was renamed away: nothing but the file is left beside it.
  const std::string stem = std::filesystem::path(path).filename().string();
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(path).parent_path())) {
    const std::string name = entry.path().filename().string();
    EXPECT_FALSE(name.rfind(stem, 0) == 0 && name != stem) << name;
  }
  const SweepResult back = load_sweep_result(path);
  EXPECT_EQ(to_json(back), to_json(populated_result()));
  std::remove(path.c_str());

  EXPECT_THROW(load_sweep_result(path), UserError);
  EXPECT_THROW(write_file_atomically("/nonexistent-dir/x/sweep.json", "{}"), UserError);
}

// A symbolic link is written through, as the shell's `>` writes: the link stays a link, and the
// file it names (here by a relative path) holds the content.
TEST(Json, FileWriteThroughASymbolicLink) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("accumbench-link-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "real.json") << "old";
  fs::create_symlink("real.json", dir / "link.json");
  write_file_atomically((dir / "link.json").string(), "new");
  EXPECT_TRUE(fs::is_symlink(dir / "link.json"));
  std::ifstream real(dir / "real.json");
  const std::string content((std::istreambuf_iterator<char>(real)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "new");
  // A link into a directory that does not exist is refused before anything is measured, as a path
  // there would be; a loop of links is refused too.
  fs::create_symlink("missing/x.json", dir / "dangling.json");
  EXPECT_THROW(require_writable_file((dir / "dangling.json").string(), "--json"), UserError);
  fs::create_symlink("b.json", dir / "a.json");
  fs::create_symlink("a.json", dir / "b.json");
  EXPECT_THROW(require_writable_file((dir / "a.json").string(), "--json"), UserError);
  EXPECT_THROW(write_file_atomically((dir / "a.json").string(), "x"), UserError);
  fs::remove_all(dir);
}

TEST(Json, InvalidUtf8InAnErrorMessageIsReplacedNotFatal) {
  SweepResult result = sample_result();
  result.runs[2].error = "bad \xff byte";
  std::string text;
  ASSERT_NO_THROW(text = to_json(result));
  EXPECT_NE(text.find("\"error\": \"bad \xEF\xBF\xBD byte\""), std::string::npos);  // U+FFFD
}

TEST(JsonReporter, PrintsToJson) {
  std::ostringstream out;
  JsonReporter().report(sample_result(), out);
  EXPECT_EQ(out.str(), to_json(sample_result()));
}

// ---- bytes -----------------------------------------------------------------------------------

TEST(FormatBytes, BinaryUnits) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1.0 KiB");
  EXPECT_EQ(format_bytes(536870912), "512.0 MiB");
  EXPECT_EQ(format_bytes(3200000000), "2.98 GiB");
  EXPECT_EQ(format_bytes(16 * kGiB), "16.00 GiB");
  EXPECT_EQ(format_bytes(2048 * kGiB), "2.00 TiB");
  EXPECT_EQ(format_bytes(-kGiB), "-1.00 GiB");
}

TEST(ParseBytes, AcceptedForms) {
  EXPECT_EQ(parse_bytes("16GiB"), 17179869184);
  EXPECT_EQ(parse_bytes("16 GiB"), 17179869184);
  EXPECT_EQ(parse_bytes("16gib"), 17179869184);
  EXPECT_EQ(parse_bytes("512MiB"), 536870912);
  EXPECT_EQ(parse_bytes("16GB"), 16000000000);
  EXPECT_EQ(parse_bytes("1.5G"), 1610612736);
  EXPECT_EQ(parse_bytes("4096"), 4096);
  EXPECT_EQ(parse_bytes("4096 B"), 4096);
  EXPECT_EQ(parse_bytes(" 2 KiB "), 2048);
  EXPECT_EQ(parse_bytes("1TB"), 1000000000000);
  EXPECT_EQ(parse_bytes(".5K"), 512);
}

// --memory-limit 24 would be 24 bytes: the limit needs its unit (B for bytes).
TEST(ParseBytes, MemoryLimitNeedsAUnit) {
  EXPECT_EQ(parse_memory_limit("24GiB"), 24 * kGiB);
  EXPECT_EQ(parse_memory_limit("24GB"), 24000000000);
  EXPECT_EQ(parse_memory_limit("4096B"), 4096);
  try {
    parse_memory_limit("24");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--memory-limit 24 has no unit and would mean 24 bytes; write the unit: 24GiB (1024-based), 24GB "
              "(1000-based) or 24B for bytes");
  }
  EXPECT_THROW(parse_memory_limit("24 parsecs"), UserError);
  // 0 leaves nothing (its suggested 0GiB was refused next); a long value is said once, cut short.
  const auto refusal = [](const std::string& text) {
    try {
      parse_memory_limit(text);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refusal("0"), "--memory-limit \"0\" leaves no memory for any split; give the memory the job may use, with its "
                          "unit (e.g. 24GiB)");
  const std::string message = refusal(std::string(300, '0') + "5");
  EXPECT_LT(message.size(), 200u) << message;
  EXPECT_NE(message.find("has no unit and would mean that many bytes"), std::string::npos) << message;
}

TEST(ParseBytes, RejectsEverythingElseWithTheAcceptedForms) {
  for (const char* bad : {"", "GiB", "-1GiB", "16 XB", "1e3", "16GiBs", "1.2.3", "0x10",
                          "99999999999TiB"}) {
    EXPECT_THROW(parse_bytes(bad), UserError) << bad;
  }
  try {
    parse_bytes("16 XB");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(),
                 "cannot read \"16 XB\" as a byte count; write a number with a unit, "
                 "e.g. 16GiB, 512MiB, 1.5G (1024-based), 16GB (1000-based) or 17179869184B "
                 "(bytes)");
  }
  // Too large is said as too large, a unit past TiB as such (helper-95).
  const auto message = [](const char* text) {
    try {
      parse_bytes(text);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message("99999999999TiB"),
            "\"99999999999TiB\" is more bytes than a 64-bit count holds (8 EiB); write a size in GiB or TiB");
  EXPECT_EQ(message("1PiB"), "\"1PiB\" is past the largest unit taken, TiB (or TB); no device has that much memory: "
                             "write the size in TiB, GiB or bytes");
}

TEST(SplitConfig, LabelAndKey) {
  SplitConfig c;
  c.micro_batch = 8;
  c.accum_steps = 8;
  EXPECT_EQ(c.label(), "8\u00d78");
  EXPECT_EQ(c.key(), "8\u00d78/fp32");
  c.activation_checkpointing = Checkpointing::kBlocks;
  c.optimizer_in_backward = true;
  c.cuda_graphs = true;
  c.precision = Precision::kBf16;
  EXPECT_EQ(c.label(), "8\u00d78 ckpt oib graphs");
  EXPECT_EQ(c.key(), "8\u00d78 ckpt oib graphs/bf16");
  c.optimizer_in_backward = false;
  c.chunked_loss = true;
  EXPECT_EQ(c.label(), "8\u00d78 ckpt chunked-ce graphs");
}

TEST(RunStatusNames, BothWays) {
  for (RunStatus s : {RunStatus::kOk, RunStatus::kOutOfMemory, RunStatus::kPredictedOutOfMemory,
                      RunStatus::kError}) {
    EXPECT_EQ(run_status_from_name(run_status_name(s)), s);
  }
  EXPECT_STREQ(run_status_name(RunStatus::kPredictedOutOfMemory), "predicted-oom");
  EXPECT_THROW(run_status_from_name("OOM"), UserError);
  EXPECT_STREQ(phase_name(Phase::kH2D), "h2d");
  EXPECT_STREQ(phase_name(Phase::kOther), "other");
}

}  // namespace
}  // namespace accumbench
