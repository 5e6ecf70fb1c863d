// Library behaviour that the CLI test script used to check through the command line: the grid
// that --knobs asks for, and what a --chunked-loss sweep measures. The CLI cases (tests/cli:
// cli.sweep.knobs, cli.sweep.chunked_loss) check that the flags reach the library and what is
// printed and written; these check what the library does with them.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "accumbench/result.hpp"
#include "accumbench/sweep.hpp"

namespace ab = accumbench;

namespace {

// The CLI cases' tiny sweep: gpt2-tiny, T=32, batch 4 (splits 1×4, 2×2, 4×1), one warmup and
// two timed steps, one CPU thread (every hardware thread is ~50x slower on a busy machine).
ab::SweepOptions tiny() {
  ab::SweepOptions o;
  o.workload.model.preset = "gpt2-tiny";
  o.workload.seq_len = 32;
  o.workload.batch = 4;
  o.workload.device = "cpu";
  o.workload.threads = 1;
  o.warmup = 1;
  o.steps = 2;
  return o;
}

// "4x1 ckpt=blocks oib=true chunked": every field the grid varies, in ASCII for readable failures.
std::string key(const ab::SplitConfig& c) {
  return std::to_string(c.micro_batch) + "x" + std::to_string(c.accum_steps) + " " + ab::to_string(c.precision) +
         " ckpt=" + ab::to_string(c.activation_checkpointing) + " oib=" + (c.optimizer_in_backward ? "true" : "false") +
         (c.chunked_loss ? " chunked" : "");
}

}  // namespace

// --knobs: every split again with checkpointed blocks; the optimizer inside backward (alone and
// checkpointed) only where there is no accumulation, since it steps before the next micro-batch.
TEST(SweepGrid, KnobsCheckpointEverySplitAndPutTheOptimizerInBackwardWithoutAccumulation) {
  ab::SweepOptions o = tiny();
  o.workload.grid.knobs = true;
  std::vector<std::string> keys;
  for (const ab::SplitConfig& c : ab::split_grid(o.workload, 1)) keys.push_back(key(c));
  const std::vector<std::string> expected = {
      "1x4 fp32 ckpt=none oib=false", "1x4 fp32 ckpt=blocks oib=false",
      "2x2 fp32 ckpt=none oib=false", "2x2 fp32 ckpt=blocks oib=false",
      "4x1 fp32 ckpt=none oib=false", "4x1 fp32 ckpt=blocks oib=false",
      "4x1 fp32 ckpt=none oib=true",  "4x1 fp32 ckpt=blocks oib=true"};
  EXPECT_EQ(keys, expected);
}

// --chunked-loss: every split measured with the plain head and then the chunked one; the chunked
// head holds one chunk's logits instead of the (b·T, V) ones, so at 4×1 (128 tokens, V=512) it
// peaks lower, and the plan predicts its peak within 10 %.
TEST(ChunkedLossSweep, RunsEverySplitTwicePeaksLowerAndIsPlannedWithinTenPercent) {
  ab::SweepOptions o = tiny();
  o.workload.loss.chunked = true;
  const ab::SweepResult r = ab::run_sweep(o);
  std::vector<std::string> keys;
  for (const ab::RunResult& run : r.runs) {
    keys.push_back(key(run.config));
    EXPECT_EQ(run.status, ab::RunStatus::kOk) << key(run.config) << ": " << run.error;
  }
  const std::vector<std::string> expected = {
      "1x4 fp32 ckpt=none oib=false", "1x4 fp32 ckpt=none oib=false chunked",
      "2x2 fp32 ckpt=none oib=false", "2x2 fp32 ckpt=none oib=false chunked",
      "4x1 fp32 ckpt=none oib=false", "4x1 fp32 ckpt=none oib=false chunked"};
  ASSERT_EQ(keys, expected);

  const ab::RunResult& plain = r.runs[4];
  const ab::RunResult& chunked = r.runs[5];
  EXPECT_LT(chunked.peak_allocated_bytes, plain.peak_allocated_bytes);
  for (size_t i = 1; i < r.runs.size(); i += 2) {
    const ab::RunResult& run = r.runs[i];
    ASSERT_GT(run.peak_allocated_bytes, 0) << key(run.config);
    ASSERT_GT(run.predicted_peak_bytes, 0) << key(run.config);
    const double error = std::abs(static_cast<double>(run.predicted_peak_bytes - run.peak_allocated_bytes)) /
                         static_cast<double>(run.peak_allocated_bytes);
    EXPECT_LE(error, 0.10) << key(run.config) << ": planned " << run.predicted_peak_bytes << " bytes, measured "
                           << run.peak_allocated_bytes;
  }
}
