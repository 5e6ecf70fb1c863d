// The training step: every split computes the whole batch's gradient and update (fp32, fixed and
// variable lengths, both families); mean-of-means is right only for fixed lengths; the memory
// knobs give the same update; bad splits are user errors.
#include <limits>
#include <gtest/gtest.h>

#include <cctype>
#include <torch/torch.h>

#include "accumbench/chunked_loss.hpp"
#include "accumbench/engine.hpp"
#include "accumbench/error.hpp"
#include "accumbench/interrupt.hpp"
#include "accumbench/report.hpp"
#include "accumbench/verify.hpp"
#include "compat/distributed.hpp"
#include "engine/micro_step.hpp"

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <csignal>
#include <sstream>
#include <cstdio>
#include <thread>

namespace ab = accumbench;

namespace {

ab::WorkloadOptions small(const std::string& preset, const std::string& lengths) {
  ab::WorkloadOptions o = ab::workload_defaults(ab::Command::kVerify);
  o.data.lengths = ab::LengthMode::kVariable;  // unequal lengths: the normalization shows
  o.model.preset = preset;
  o.seq_len = 48;
  o.batch = 8;
  o.data.lengths = ab::length_mode_from_string(lengths);
  o.device = "cpu";
  return o;
}

// What `accumbench verify` prints for `result`.
std::string text_of(const ab::VerifyResult& result) {
  std::ostringstream out;
  ab::print_verify(result, out);
  return out.str();
}

// One synthetic step of `batch` variable-length sequences padded to `seq_len` for cfg's vocabulary.
ab::TokenBatch variable_batch(const ab::ModelConfig& cfg, int64_t seq_len, int64_t batch) {
  ab::DataOptions d;
  d.vocab_size = cfg.vocab_size;
  d.seq_len = seq_len;
  d.batch = batch;
  d.lengths = ab::LengthMode::kVariable;
  return ab::make_synthetic_batches(d).front();
}

}  // namespace

struct SplitCase {
  const char* preset;
  const char* lengths;
};

class EverySplit : public ::testing::TestWithParam<SplitCase> {};

// Tolerance: relative L2 gradient error 1e-5 in fp32 (ab::gradient_tolerance). Splits only change
// the order of float32 summations; measured errors are ~1e-7. The update, tighter than verify's
// bar: 1e-3 (measured up to 1.1e-4 at 1×8 on an AVX2 CPU, below 1e-4 on AVX-512 ones).
TEST_P(EverySplit, EqualsTheWholeBatch) {
  const ab::VerifyResult r = ab::run_verify(small(GetParam().preset, GetParam().lengths));
  ASSERT_EQ(r.splits.size(), 4u);  // 1, 2, 4, 8
  for (const auto& s : r.splits) {
    EXPECT_LT(s.rel_l2_grad_error, 1e-5) << s.config.label();
    EXPECT_LT(s.rel_l2_update_error, 1e-3) << s.config.label();
    EXPECT_NEAR(s.loss, r.reference_loss, 1e-5) << s.config.label();
    EXPECT_TRUE(s.pass) << s.config.label();
  }
  EXPECT_TRUE(r.all_pass);
}

INSTANTIATE_TEST_SUITE_P(Fp32, EverySplit,
                         ::testing::Values(SplitCase{"gpt2-tiny", "fixed"}, SplitCase{"gpt2-tiny", "variable"},
                                           SplitCase{"llama-tiny", "fixed"}, SplitCase{"llama-tiny", "variable"},
                                           SplitCase{"qwen3-tiny", "fixed"}, SplitCase{"qwen3-tiny", "variable"}),
                         [](const ::testing::TestParamInfo<SplitCase>& info) {
                           std::string name = std::string(info.param.preset) + "_" + info.param.lengths;
                           for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

TEST(LossNormalization, MeanOfMeansEqualsTokenOnFixedLengths) {
  ab::WorkloadOptions o = small("gpt2-tiny", "fixed");
  o.loss.normalization = ab::LossNormalization::kMeanOfMeans;
  const ab::VerifyResult r = ab::run_verify(o);
  for (const auto& s : r.splits) EXPECT_LT(s.rel_l2_grad_error, 1e-5) << s.config.label();
  EXPECT_TRUE(r.all_pass);
}

TEST(LossNormalization, MeanOfMeansDiffersOnVariableLengths) {
  ab::WorkloadOptions o = small("gpt2-tiny", "variable");
  o.loss.normalization = ab::LossNormalization::kMeanOfMeans;
  const ab::VerifyResult r = ab::run_verify(o);
  EXPECT_FALSE(r.all_pass);
  // Splits whose micro-batches hold different token counts weigh short sequences' tokens more:
  // errors of several %. (Two micro-batches can happen to hold equal counts, so 4×2 may agree.)
  for (const auto& s : r.splits) {
    if (s.config.accum_steps >= 4) {
      EXPECT_GT(s.rel_l2_grad_error, 1e-2) << s.config.label();
      EXPECT_FALSE(s.pass) << s.config.label();
    } else if (s.config.accum_steps == 1) {
      EXPECT_LT(s.rel_l2_grad_error, 1e-5);
    }
  }
}

// Mean-of-means computes the whole batch's update exactly when a split's micro-batches hold equal
// target counts: a split with a skew fails, one without passes (8×1 always: one micro-batch of all).
TEST(LossNormalization, MeanOfMeansSkewFollowsTheMicroBatchCounts) {
  ab::WorkloadOptions o = small("gpt2-tiny", "variable");
  o.loss.normalization = ab::LossNormalization::kMeanOfMeans;
  const ab::VerifyResult r = ab::run_verify(o);
  ASSERT_EQ(r.splits.size(), 4u);
  for (const auto& s : r.splits) {
    if (s.config.accum_steps == 1) EXPECT_EQ(s.normalization_skew, 0) << s.config.label();
    EXPECT_EQ(s.pass, s.normalization_skew == 0) << s.config.label();
    if (s.normalization_skew == 0) EXPECT_LT(s.rel_l2_grad_error, 1e-5) << s.config.label();
  }
  EXPECT_GT(r.splits[0].normalization_skew, 0);  // 1×8: eight sequences of different lengths
  // Token normalization has no skew to judge.
  o.loss.normalization = ab::LossNormalization::kToken;
  for (const auto& s : ab::run_verify(o).splits) EXPECT_EQ(s.normalization_skew, 0) << s.config.label();
}

// A tiny --adam-eps makes AdamW's first step lr·sign(g): elements whose gradient is zero up to
// rounding take either sign. They are left out of the update's comparison (the gradient's bar judges
// them), so correct splits pass (at 1e-30 1×8's update error was 2.8e-2 with a gradient error of 1.6e-7).
TEST(Verify, ATinyAdamEpsStillPasses) {
  ab::WorkloadOptions o = small("gpt2-tiny", "variable");
  o.optimizer.eps = 1e-30;
  const ab::VerifyResult r = ab::run_verify(o);
  for (const auto& s : r.splits) {
    EXPECT_LT(s.rel_l2_grad_error, 1e-5) << s.config.label();
    EXPECT_LT(s.rel_l2_update_error, 1e-3) << s.config.label();
  }
  EXPECT_TRUE(r.all_pass);
}

// Under mean-of-means a micro-batch without a target (samples of one token) counts as a loss of 0 in
// the split's average: the splits that have one are named, and why their loss is low. Four samples
// of one token among eight: 1×8 meets such micro-batches whatever the seeded order.
TEST(Verify, MicroBatchesWithoutATargetAreNamedUnderMeanOfMeans) {
  const std::string path = ::testing::TempDir() + std::to_string(::getpid()) + "-one_token_samples.txt";
  std::ofstream(path) << "1\n1\n1\n1\n20\n30\n25\n12\n";
  ab::WorkloadOptions o = small("gpt2-tiny", "fixed");
  ab::set_lengths(o.data, path);
  o.loss.normalization = ab::LossNormalization::kMeanOfMeans;
  o.micro_batches = {1, 8};
  const ab::VerifyResult r = ab::run_verify(o);
  ASSERT_EQ(r.splits.size(), 2u);
  EXPECT_EQ(r.splits[0].micro_batches_without_target, 4);  // 1×8: each one-token sample alone
  EXPECT_LT(r.splits[0].loss, 0.75 * r.reference_loss);    // four of eight means count as 0
  EXPECT_EQ(r.splits[1].micro_batches_without_target, 0);
  EXPECT_NE(text_of(r).find("\n1\u00d78 has micro-batches without a target (samples of one token, or labels all "
                            "masked): mean-of-means counts each one's loss as 0 in its average"),
            std::string::npos)
      << text_of(r);
  o.loss.normalization = ab::LossNormalization::kToken;  // token normalization has nothing to count
  EXPECT_EQ(ab::run_verify(o).splits[0].micro_batches_without_target, 0);
}

// bf16's bar can hide a mean-of-means skew that fp32's shows: such a split fails, and a line says
// why; a verify whose splits all run the whole batch in one micro-step says it checked no accumulation.
TEST(Verify, WhatTheBarCannotTellIsSaid) {
  ab::VerifyResult r;
  r.model = "gpt2-tiny";
  r.batch = 8;
  r.seq_len = 32;
  r.precision = ab::Precision::kBf16;
  r.loss_normalization = ab::LossNormalization::kMeanOfMeans;
  r.all_pass = false;
  ab::VerifySplit split;
  split.config.micro_batch = 4;
  split.config.accum_steps = 2;
  split.within_tolerance = true;
  split.normalization_skew = 0.1234;
  r.splits = {split};
  EXPECT_NE(text_of(r).find("\n4\u00d72 fails within the tolerance: its micro-batches hold different numbers of "
                            "targets, so mean-of-means weights their tokens up to 12.3 % apart from the whole batch's, a "
                            "different update that this precision's rounding hides; --precision fp32 measures it\n"),
            std::string::npos)
      << text_of(r);
  EXPECT_EQ(text_of(r).find("nothing is accumulated"), std::string::npos);
  // fp32 autocast over bf16 weights (or adapters): the flag that made the step 16-bit is named.
  r.precision = ab::Precision::kFp32;
  r.weights_dtype = ab::Precision::kBf16;
  EXPECT_NE(text_of(r).find("rounding hides; --weights-dtype fp32 measures it\n"), std::string::npos) << text_of(r);
  r.weights_dtype = ab::Precision::kFp32;
  r.lora.rank = 4;
  r.lora.adapter_dtype = ab::Precision::kBf16;
  EXPECT_NE(text_of(r).find("rounding hides; --adapter-dtype fp32 measures it\n"), std::string::npos) << text_of(r);
  r.lora = {};
  r.precision = ab::Precision::kBf16;
  r.splits[0].within_tolerance = false;  // measured past the bar: the table says it
  EXPECT_EQ(text_of(r).find("within the tolerance:"), std::string::npos);
  r.splits[0].config = {};
  r.splits[0].config.micro_batch = 8;
  r.splits[0].config.accum_steps = 1;
  r.splits[0].normalization_skew = 0;
  r.splits[0].pass = r.all_pass = true;
  EXPECT_NE(text_of(r).find("\nevery split verified computes the whole batch in one micro-step, as the reference does: "
                            "nothing is accumulated, so the loss normalization is not checked; give --micro-batches "
                            "below 8 to check accumulation\n"),
            std::string::npos)
      << text_of(r);
  r.splits[0].config.optimizer_in_backward = true;
  EXPECT_NE(text_of(r).find("the optimizer inside backward runs without accumulation, so verify without "
                            "--optimizer-in-backward to check accumulation\n"),
            std::string::npos)
      << text_of(r);
  r.batch = 1;
  r.splits[0].config.micro_batch = 1;
  EXPECT_NE(text_of(r).find("; give --batch 2 or more to check accumulation\n"), std::string::npos) << text_of(r);
}

// The optimizer inside backward frees each gradient as its parameter steps: its split is judged on
// its loss and update, and the gradient columns say "-" rather than a difference of 0 never measured.
TEST(Verify, OptimizerInBackwardIsJudgedOnItsUpdate) {
  ab::WorkloadOptions o = small("gpt2-tiny", "variable");
  o.grid.optimizer_in_backward = true;
  const ab::VerifyResult r = ab::run_verify(o);
  ASSERT_FALSE(r.splits.empty());
  for (const auto& s : r.splits) {
    EXPECT_TRUE(s.config.optimizer_in_backward);
    EXPECT_FALSE(s.gradients_compared) << s.config.label();
    EXPECT_TRUE(s.pass) << s.config.label();
    EXPECT_TRUE(std::isfinite(s.rel_l2_update_error)) << s.config.label();  // the update is compared
  }
  std::ostringstream text;
  ab::print_verify(r, text);
  EXPECT_NE(text.str().find(" oib  "), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("             -             -"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("\noib: the optimizer inside backward frees each gradient once its parameter stepped, so "
                            "those splits are judged on their loss and their update\n"),
            std::string::npos)
      << text.str();
}

// A FAIL says why where the run tells: a whole batch whose loss is not finite has nothing to match,
// a mean of micro-batch means is the known bug, and a token-normalized split past the tolerance is
// neither (the mean-of-means sentence blamed a normalization the run did not use).
TEST(Verify, AFailSaysWhyAsTheRunTells) {
  ab::VerifyResult r;
  r.model = "gpt2-tiny";
  r.batch = 4;
  r.seq_len = 8;
  r.all_pass = false;
  ab::VerifySplit split;
  split.config.micro_batch = 1;
  split.config.accum_steps = 4;
  split.rel_l2_grad_error = 0.5;
  r.splits = {split};
  const std::string bug = "a loss averaged per micro-batch (mean-of-means) is the accumulation bug";
  const std::string fault = "token normalization gives every split the whole batch's update up to rounding";
  r.loss_normalization = ab::LossNormalization::kToken;
  EXPECT_EQ(text_of(r).find(bug), std::string::npos);
  EXPECT_NE(text_of(r).find(fault), std::string::npos);
  EXPECT_NE(text_of(r).find("please report it"), std::string::npos);
  // A LoRA scale far above the usual: its rounding, not a fault (alpha 1000 at rank 8 gave 1.5e-5).
  r.lora.rank = 8;
  r.lora.alpha = 1000;
  EXPECT_NE(text_of(r).find("but a LoRA scale of 125 (--lora-alpha 1000 / rank 8) makes the adapters' products "
                            "dominate the step and its rounding grow past the tolerance; verify at the alpha you train "
                            "with (usually 1 to 4 times the rank)\n"),
            std::string::npos)
      << text_of(r);
  EXPECT_EQ(text_of(r).find("please report it"), std::string::npos);
  r.lora.alpha = 256;  // scale 32 passed the bar: a FAIL there is still reported as a fault
  EXPECT_NE(text_of(r).find("please report it"), std::string::npos);
  r.lora = {};
  r.loss_normalization = ab::LossNormalization::kMeanOfMeans;
  EXPECT_NE(text_of(r).find(bug), std::string::npos);
  r.reference_loss = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(text_of(r).find("the whole batch's loss is nan, not a finite number: the step diverges, so no split can "
                            "match it; check what scales it (--lr, --lora-alpha, the weights' dtype)\n"),
            std::string::npos)
      << text_of(r);
  EXPECT_EQ(text_of(r).find(bug), std::string::npos);
}

// A stop (Ctrl-C; interrupt.hpp) is heard between splits: the splits not verified are named, and
// the text says how far the check got instead of PASS.
TEST(Verify, AStopLeavesTheRestUnverifiedAndSaysSo) {
  ab::request_stop(SIGINT);  // before the first split
  ab::VerifyResult r = ab::run_verify(small("gpt2-tiny", "fixed"));
  ab::request_stop(0);
  EXPECT_TRUE(r.splits.empty());
  EXPECT_TRUE(r.all_pass);
  EXPECT_EQ(r.interruption.signal, "SIGINT");
  EXPECT_EQ(r.interruption.splits_not_run, (std::vector<std::string>{"1\u00d78", "2\u00d74", "4\u00d72", "8\u00d71"}));
  std::ostringstream none;
  ab::print_verify(r, none);
  EXPECT_NE(none.str().find("\nInterrupted by SIGINT: 4 splits not verified (1\u00d78, 2\u00d74, 4\u00d72, 8\u00d71); run "
                            "verify again to check them\nno split verified\n"),
            std::string::npos)
      << none.str();
  EXPECT_EQ(none.str().find("PASS"), std::string::npos);

  // Stopped after two splits: those two are shown and passed so far.
  const ab::VerifyResult full = ab::run_verify(small("gpt2-tiny", "fixed"));
  ASSERT_EQ(full.splits.size(), 4u);
  EXPECT_TRUE(full.interruption.signal.empty());
  r.splits = {full.splits[0], full.splits[1]};
  r.interruption.splits_not_run = {"4\u00d72", "8\u00d71"};
  std::ostringstream some;
  ab::print_verify(r, some);
  EXPECT_NE(some.str().find("\nInterrupted by SIGINT: 2 splits not verified (4\u00d72, 8\u00d71); run verify again to "
                            "check them\nPASS so far: every split above computes the same update as the whole batch\n"),
            std::string::npos)
      << some.str();
}

TEST(MemoryKnobs, CheckpointingAndOptimizerInBackwardGiveTheSameUpdate) {
  for (const char* preset : {"gpt2-tiny", "llama-tiny", "qwen3-tiny"}) {
    ab::WorkloadOptions o = small(preset, "variable");
    o.grid.checkpointing = ab::Checkpointing::kBlocks;
    std::vector<ab::VerifySplit> splits = ab::run_verify(o).splits;
    ASSERT_EQ(splits.size(), 4u);  // 1, 2, 4, 8, every one checkpointed
    // On every split, the optimizer inside backward leaves only 8×1, the split without accumulation.
    o.grid.optimizer_in_backward = true;
    const ab::VerifyResult in_backward = ab::run_verify(o);
    ASSERT_EQ(in_backward.splits.size(), 1u);
    EXPECT_TRUE(in_backward.splits[0].config.optimizer_in_backward);
    splits.push_back(in_backward.splits[0]);
    for (const auto& s : splits) {
      EXPECT_EQ(s.config.activation_checkpointing, ab::Checkpointing::kBlocks);
      EXPECT_LT(s.rel_l2_grad_error, 1e-5) << preset << " " << s.config.label();
      EXPECT_LT(s.rel_l2_update_error, 1e-3) << preset << " " << s.config.label();  // as EverySplit
    }
  }
}

// The chunked cross-entropy against the plain head's whole-batch reference: same loss, gradient
// and update for every split, with padding (ignored targets), both families (tied and untied
// heads), checkpointing. fp32: measured rel L2 gradient errors up to 5e-7 (the chunked head
// scales its gradients by 1/tokens after the matmuls, the plain head before), asserted at the
// verify tolerance 1e-5.
TEST(ChunkedLoss, EverySplitEqualsThePlainHeadsWholeBatch) {
  for (const char* preset : {"gpt2-tiny", "llama-tiny", "gpt2-mini"}) {
    ab::WorkloadOptions o = small(preset, "variable");
    o.loss.chunked = true;
    o.grid.checkpointing = std::string(preset) == "llama-tiny" ? ab::Checkpointing::kBlocks : ab::Checkpointing::kNone;
    const ab::VerifyResult r = ab::run_verify(o);
    ASSERT_EQ(r.splits.size(), 8u);  // 1, 2, 4, 8, each plain then chunked (split_grid's order)
    for (size_t i = 0; i < r.splits.size(); ++i) {
      const ab::VerifySplit& s = r.splits[i];
      EXPECT_EQ(s.config.chunked_loss, i % 2 == 1);
      EXPECT_EQ(s.config.micro_batch, int64_t{1} << (i / 2));
      EXPECT_LT(s.rel_l2_grad_error, 1e-5) << preset << " " << s.config.label();
      EXPECT_NEAR(s.loss, r.reference_loss, 1e-5) << preset << " " << s.config.label();
      EXPECT_TRUE(s.pass) << preset << " " << s.config.label();
    }
  }
}

// bf16: the head's matmuls in bf16 as autocast runs them; the weight gradient is summed over the
// chunks in fp32 (the plain head rounds it to bf16 once), measured 5e-3 against the 3e-2 tolerance.
TEST(ChunkedLoss, Bf16WithinTheStatedTolerance) {
  ab::WorkloadOptions o = small("gpt2-mini", "variable");
  o.precisions = {ab::Precision::kBf16};
  o.loss.chunked = true;
  o.micro_batches = {2, 8};
  const ab::VerifyResult r = ab::run_verify(o);
  ASSERT_EQ(r.splits.size(), 4u);
  for (const auto& s : r.splits) {
    EXPECT_LT(s.rel_l2_grad_error, 3e-2) << s.config.label();
    EXPECT_TRUE(s.pass) << s.config.label();
  }
}

// Several chunks, the last one short, against the plain head through autograd: the loss and
// both gradients (hidden states, head weight) within 1e-6 relative in fp32, 3e-2 in bf16 (the
// plain head rounds its weight gradient to bf16 once, the chunks sum theirs in fp32); without
// gradients (evaluation) the same sum. Chunk sizes from loss_chunk_tokens: at least 1024 tokens,
// at most 16 chunks.
TEST(ChunkedLoss, SeveralChunksGiveThePlainLossAndGradients) {
  const ab::ModelConfig cfg = ab::find_preset("llama-tiny");  // untied head
  ab::LanguageModel model = ab::build_model(cfg, 0);
  // 3·40 = 120 tokens in chunks of 16: 7 full ones and 8 rows.
  const ab::TokenBatch batch = variable_batch(cfg, /*seq_len=*/40, /*batch=*/3);
  at::Tensor hidden_data;
  {
    torch::NoGradGuard no_grad;
    hidden_data = model->final_hidden(batch.inputs);
  }
  const at::Tensor weight_data = model->head_weight().detach();
  struct Result {
    double loss;
    at::Tensor grad_hidden, grad_weight;
  };
  // The counted targets, known on the host: given, the chunks walk those rows alone (gathered).
  const int64_t counted = batch.token_count;
  ASSERT_LT(counted, 120);  // variable lengths: each sample's last position and the padding do not count
  auto run = [&](bool chunked, std::optional<at::ScalarType> autocast, int64_t gathered = -1) {
    at::Tensor hidden = hidden_data.clone().requires_grad_(true);
    at::Tensor weight = weight_data.clone().requires_grad_(true);
    at::Tensor loss;
    if (chunked) {
      loss = ab::chunked_cross_entropy(hidden, weight, batch.targets, autocast, /*chunk_tokens=*/16, gathered);
    } else {
      at::Tensor logits = autocast ? at::linear(hidden.to(*autocast), weight.to(*autocast)).to(at::kFloat)
                                   : at::linear(hidden, weight);
      loss = at::cross_entropy_loss(logits.reshape({-1, cfg.vocab_size}), batch.targets.reshape({-1}), {},
                                    at::Reduction::Sum, ab::kIgnoreIndex);
    }
    (loss * 0.5).backward();  // backward scales by the incoming gradient
    return Result{loss.item<double>(), hidden.grad(), weight.grad()};
  };
  auto rel_l2 = [](const at::Tensor& a, const at::Tensor& b) {
    return ((a.to(at::kDouble) - b.to(at::kDouble)).norm() / b.to(at::kDouble).norm()).item<double>();
  };
  for (const auto& [autocast, tolerance] :
       {std::pair<std::optional<at::ScalarType>, double>{std::nullopt, 1e-6}, {at::kBFloat16, 3e-2}}) {
    const Result plain = run(false, autocast);
    for (const int64_t gathered : {int64_t{-1}, counted}) {
      const Result chunked = run(true, autocast, gathered);
      EXPECT_NEAR(chunked.loss, plain.loss, tolerance * plain.loss) << gathered;
      EXPECT_LT(rel_l2(chunked.grad_hidden, plain.grad_hidden), tolerance) << gathered;
      EXPECT_LT(rel_l2(chunked.grad_weight, plain.grad_weight), tolerance) << gathered;
      // Gathered, the rows whose target does not count get an exact zero.
      const at::Tensor uncounted = batch.targets.reshape({-1}).eq(ab::kIgnoreIndex);
      EXPECT_EQ(chunked.grad_hidden.reshape({-1, cfg.d_model}).index({uncounted}).abs().max().item<double>(), 0.0);
    }
  }
  // Nothing counted: a zero loss and zero gradients, no chunk run.
  {
    at::Tensor hidden = hidden_data.clone().requires_grad_(true);
    at::Tensor weight = weight_data.clone().requires_grad_(true);
    const at::Tensor none = at::full_like(batch.targets, ab::kIgnoreIndex);
    at::Tensor loss = ab::chunked_cross_entropy(hidden, weight, none, std::nullopt, 16, /*counted=*/0);
    loss.backward();
    EXPECT_EQ(loss.item<double>(), 0.0);
    EXPECT_EQ(hidden.grad().abs().max().item<double>(), 0.0);
    EXPECT_EQ(weight.grad().abs().max().item<double>(), 0.0);
  }
  const double plain_loss = run(false, std::nullopt).loss;
  torch::NoGradGuard no_grad;
  const double evaluation = ab::chunked_cross_entropy(hidden_data, weight_data, batch.targets, std::nullopt, 16).item<double>();
  EXPECT_NEAR(evaluation, plain_loss, 1e-6 * plain_loss);

  EXPECT_EQ(ab::loss_chunk_tokens(120), 120);             // one chunk: the whole micro-batch
  EXPECT_EQ(ab::loss_chunk_tokens(8 * 1024), 1024);       // 8 chunks of at least 1024
  EXPECT_EQ(ab::loss_chunk_tokens(64 * 1024), 4096);      // at most 16 chunks
  EXPECT_EQ(ab::loss_chunk_tokens(3000), 1024);           // 3 chunks, the last one short
  EXPECT_EQ(ab::loss_chunk_tokens(3000, 100), 100);       // --loss-chunk-tokens 100
  EXPECT_EQ(ab::loss_chunk_tokens(120, 500), 120);        // never more than the tokens
}

TEST(Precision, Bf16SplitsAgreeWithinTheStatedTolerance) {
  for (const char* preset : {"llama-tiny", "qwen3-tiny"}) {
    ab::WorkloadOptions o = small(preset, "variable");
    o.precisions = {ab::Precision::kBf16};
    const ab::VerifyResult r = ab::run_verify(o);
    EXPECT_EQ(r.gradient_tolerance, 3e-2);
    for (const auto& s : r.splits) EXPECT_LT(s.rel_l2_grad_error, 3e-2) << preset << " " << s.config.label();
  }
}

// bf16 weights without autocast compute in bf16: verify judges them by bf16's bar (fp32's
// failed every split of a correct step here, at 3e-3 gradient error), and the mean-of-means bug
// still fails it. A quantised base is dequantised to fp32: fp32's bar stays.
TEST(Precision, Bf16WeightsAreJudgedAsBf16) {
  ab::WorkloadOptions o = small("qwen3-tiny", "variable");
  o.weights_dtype = ab::Precision::kBf16;
  const ab::VerifyResult r = ab::run_verify(o);
  EXPECT_EQ(r.gradient_tolerance, 3e-2);
  EXPECT_EQ(r.update_tolerance, 0.25);
  EXPECT_TRUE(r.all_pass);
  double worst = 0;
  for (const auto& s : r.splits) worst = std::max(worst, s.rel_l2_grad_error);
  EXPECT_GT(worst, ab::gradient_tolerance(ab::Precision::kFp32));  // bf16 rounding, not fp32's
  o.loss.normalization = ab::LossNormalization::kMeanOfMeans;
  EXPECT_FALSE(ab::run_verify(o).all_pass);

  ab::LoraOptions full, qlora, bf16_adapters;
  qlora.rank = bf16_adapters.rank = 4;
  qlora.base_quant = ab::BaseQuant::kNf4;
  bf16_adapters.adapter_dtype = ab::Precision::kBf16;
  EXPECT_EQ(ab::verify_compute_precision(ab::Precision::kFp32, ab::Precision::kBf16, qlora), ab::Precision::kFp32);
  EXPECT_EQ(ab::verify_compute_precision(ab::Precision::kFp32, ab::Precision::kFp16, full), ab::Precision::kFp16);
  EXPECT_EQ(ab::verify_compute_precision(ab::Precision::kBf16, ab::Precision::kFp32, full), ab::Precision::kBf16);
  qlora.adapter_dtype = ab::Precision::kBf16;  // TRL's QLoRA: the adapters' products and gradients in bf16
  EXPECT_EQ(ab::verify_compute_precision(ab::Precision::kFp32, ab::Precision::kFp32, qlora), ab::Precision::kBf16);
  EXPECT_EQ(ab::verify_compute_precision(ab::Precision::kFp32, ab::Precision::kFp32, bf16_adapters), ab::Precision::kBf16);
}

TEST(Trainer, LossMatchesAPlainCrossEntropy) {
  const ab::ModelConfig cfg = ab::find_preset("gpt2-tiny");
  ab::LanguageModel model = ab::build_model(cfg, 0);
  const ab::TokenBatch batch = variable_batch(cfg, /*seq_len=*/16, /*batch=*/4);
  at::Tensor expected;
  {
    torch::NoGradGuard no_grad;
    at::Tensor logits = model->forward(batch.inputs);
    expected = torch::nn::functional::cross_entropy(
        logits.reshape({-1, cfg.vocab_size}), batch.targets.reshape({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(ab::kIgnoreIndex));
  }
  ab::Trainer trainer(model, torch::kCPU, {});
  ab::StepOptions step;
  step.micro_batch = 1;
  const ab::StepOutcome out = trainer.accumulate(batch, step);
  EXPECT_EQ(out.tokens, batch.token_count);
  EXPECT_EQ(out.accum_steps, 4);
  EXPECT_NEAR(out.loss(), expected.item<double>(), 1e-5);
}

TEST(Trainer, RejectsBadSplitsAsUserErrors) {
  const ab::ModelConfig cfg = ab::find_preset("gpt2-tiny");
  ab::Trainer trainer(ab::build_model(cfg, 0), torch::kCPU, {});
  ab::DataOptions d;
  d.vocab_size = cfg.vocab_size;
  d.seq_len = 8;
  d.batch = 6;
  const ab::TokenBatch batch = ab::make_synthetic_batches(d).front();
  ab::StepOptions step;
  step.micro_batch = 4;
  EXPECT_THROW(trainer.step(batch, step), ab::UserError);
  step.micro_batch = 2;
  step.optimizer_in_backward = true;
  EXPECT_THROW(trainer.step(batch, step), ab::UserError);
  ab::TrainOptions fp16;
  fp16.precision = ab::Precision::kFp16;
  EXPECT_THROW(ab::Trainer(ab::build_model(cfg, 0), torch::kCPU, fp16), ab::UserError);
  EXPECT_THROW(ab::resolve_device("cuda"), ab::UserError);  // CI has no GPU
  step.optimizer_in_backward = false;
  step.cuda_graphs = true;  // graphs replay GPU kernels
  EXPECT_THROW(trainer.step(batch, step), ab::UserError);
  ab::WorkloadOptions graphed = small("gpt2-tiny", "fixed");
  graphed.grid.cuda_graphs = true;
  EXPECT_THROW(ab::run_verify(graphed), ab::UserError);
  EXPECT_EQ(ab::divisors(12), (std::vector<int64_t>{1, 2, 3, 4, 6, 12}));
}

TEST(Data, VariableLengthsArePaddedWithIgnoredTargets) {
  ab::DataOptions d;
  d.vocab_size = 100;
  d.seq_len = 40;
  d.batch = 16;
  d.lengths = ab::LengthMode::kVariable;
  d.seed = 3;
  const ab::TokenBatch b = ab::make_synthetic_batches(d).front();
  int64_t counted = (b.targets != ab::kIgnoreIndex).sum().item<int64_t>();
  EXPECT_EQ(counted, b.token_count);
  EXPECT_LT(b.token_count, 16 * 40);
  // A sample of n tokens: n real positions (inputs past them are the pad id 0) and n - 1 targets,
  // its last position predicting nothing, as transformers shifts the labels within a row.
  for (int64_t row = 0; row < 16; ++row) {
    const int64_t len = b.sequence_tokens[static_cast<size_t>(row)];
    EXPECT_GE(len, 10);  // ceil(0.25 · 40)
    EXPECT_LE(len, 40);
    EXPECT_EQ(b.sequence_targets[static_cast<size_t>(row)], len - 1);
    EXPECT_EQ((b.targets[row] != ab::kIgnoreIndex).sum().item<int64_t>(), len - 1) << row;
    EXPECT_EQ(b.targets[row][len - 1].item<int64_t>(), ab::kIgnoreIndex) << row;
    if (len > 1) EXPECT_EQ(b.targets[row][len - 2].item<int64_t>(), b.inputs[row][len - 1].item<int64_t>()) << row;
    if (len < 40) EXPECT_EQ(b.inputs[row].narrow(0, len, 40 - len).abs().sum().item<int64_t>(), 0) << row;
  }
  EXPECT_EQ(b.targets_in(0, 16), b.token_count);
  // Fixed lengths are a pretraining loader's windows: T positions, T targets.
  d.lengths = ab::LengthMode::kFixed;
  const ab::TokenBatch fixed = ab::make_synthetic_batches(d).front();
  EXPECT_EQ(fixed.token_count, 16 * 40);
  EXPECT_EQ(fixed.sequence_targets, std::vector<int64_t>(16, 40));
  d.lengths = ab::LengthMode::kVariable;
  // Same seed, same data.
  EXPECT_TRUE(torch::equal(ab::make_synthetic_batches(d).front().inputs, b.inputs));
}

// ---- data parallel (c10d) ----

// Two ranks in two threads of this process (Gloo over loopback, a file store): each computes a
// 2×2 split of its half of an 8-sequence variable-length batch and the bucketed all-reduce,
// started during the last backward, sums them. The
// result must be the single-process gradient of the whole batch (fp32 tolerance 1e-5 as verify;
// only the summation order differs), and the step's loss the whole batch's.
TEST(DataParallel, TwoRanksSumToTheWholeBatchGradient) {
  const ab::ModelConfig cfg = ab::find_preset("gpt2-tiny");
  const ab::TokenBatch batch = variable_batch(cfg, /*seq_len=*/32, /*batch=*/8);

  ab::Trainer whole(ab::build_model(cfg, 3), torch::kCPU, {});
  ab::StepOptions one;
  one.micro_batch = 8;
  const double whole_loss = whole.accumulate(batch, one).loss();
  std::vector<at::Tensor> expected;
  for (const auto& p : whole.model()->parameters()) expected.push_back(p.grad().clone());

  const std::string store = ::testing::TempDir() + "accumbench-dp-store-" + std::to_string(::getpid());
  std::remove(store.c_str());
  std::vector<std::vector<at::Tensor>> got(2);
  std::vector<double> losses(2, 0.0);
  std::vector<size_t> overlapped(2, 0);
  std::vector<std::string> errors(2);
  // Built here: build_model seeds and draws from LibTorch's one global generator, which two
  // threads must not share.
  std::vector<ab::LanguageModel> models = {ab::build_model(cfg, 3), ab::build_model(cfg, 3)};
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        auto group = ab::compat::ProcessGroup::from_file(store, rank, 2, torch::kCPU, /*timeout_seconds=*/60);
        ab::Trainer trainer(models[rank], torch::kCPU, {});
        // 64 KiB buckets: gpt2-tiny's 0.6 MB of gradients in several, so that some start their
        // all-reduce inside backward (overlap) and the order across ranks matters.
        trainer.set_process_group(group.get(), /*bucket_bytes=*/64 << 10);
        ab::StepOptions split;
        split.micro_batch = 2;
        const ab::TokenBatch share = ab::shard(batch, rank, 2, split.micro_batch);
        EXPECT_EQ(share.sequences(), 4);
        EXPECT_EQ(share.step_tokens(), batch.token_count);
        losses[rank] = trainer.accumulate(share, split).loss();
        for (const auto& p : trainer.model()->parameters()) got[rank].push_back(p.grad().clone());
        overlapped[rank] = trainer.overlapped_buckets();
        group->barrier();
      } catch (const std::exception& error) {
        errors[rank] = error.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  std::remove(store.c_str());
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(errors[rank].empty()) << "rank " << rank << ": " << errors[rank];
    ASSERT_EQ(got[rank].size(), expected.size());
    double diff_sq = 0, ref_sq = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      diff_sq += (got[rank][i] - expected[i]).pow(2).sum().item<double>();
      ref_sq += expected[i].pow(2).sum().item<double>();
    }
    EXPECT_LT(std::sqrt(diff_sq / ref_sq), 1e-5) << "rank " << rank;
    EXPECT_NEAR(losses[rank], whole_loss, 1e-5) << "rank " << rank;
    EXPECT_GT(overlapped[rank], 1u) << "rank " << rank << ": no bucket started inside backward";
  }
  EXPECT_THROW(ab::shard(batch, 0, 3), ab::UserError);  // 8 sequences over 3 ranks
}

// A step that fails on rank 1 only (a token id outside the vocabulary: the embedding throws in
// forward, before any bucket started) must not leave rank 0 waiting in the bucket all-reduces:
// rank 1 posts them with zeros, and both ranks end the step with the same failure, naming rank 1,
// without an optimizer step. The next step, on good data, pairs up as before: every rank's
// gradient and loss are the whole batch's (tolerance 1e-5, as above), so no collective was left
// over or mismatched. 64 KiB buckets: several, some started inside backward on rank 0.
TEST(DataParallel, AFailureOnOneRankEndsTheStepOnEveryRankAndTheNextStepPairsUp) {
  const ab::ModelConfig cfg = ab::find_preset("gpt2-tiny");
  const ab::TokenBatch batch = variable_batch(cfg, /*seq_len=*/32, /*batch=*/8);
  ab::TokenBatch bad = batch;
  bad.inputs = batch.inputs.clone();
  bad.inputs.narrow(0, 4, 4).fill_(cfg.vocab_size + 7);  // rank 1's half of the step

  ab::Trainer whole(ab::build_model(cfg, 3), torch::kCPU, {});
  ab::StepOptions one;
  one.micro_batch = 8;
  const double whole_loss = whole.accumulate(batch, one).loss();
  std::vector<at::Tensor> expected;
  for (const auto& p : whole.model()->parameters()) expected.push_back(p.grad().clone());

  const std::string store = ::testing::TempDir() + "accumbench-dp-fail-store-" + std::to_string(::getpid());
  std::remove(store.c_str());
  std::vector<std::string> failures(2), errors(2);
  std::vector<int> failed_rank(2, -1);
  std::vector<bool> weights_unchanged(2, false);
  std::vector<std::vector<at::Tensor>> got(2);
  std::vector<double> losses(2, 0.0);
  std::vector<ab::LanguageModel> models = {ab::build_model(cfg, 3), ab::build_model(cfg, 3)};
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        auto group = ab::compat::ProcessGroup::from_file(store, rank, 2, torch::kCPU, /*timeout_seconds=*/60);
        ab::Trainer trainer(models[rank], torch::kCPU, {});
        trainer.set_process_group(group.get(), /*bucket_bytes=*/64 << 10);
        ab::StepOptions split;
        split.micro_batch = 2;
        const at::Tensor before = trainer.model()->parameters().front().detach().clone();
        try {
          trainer.step(ab::shard(bad, rank, 2), split);
        } catch (const ab::compat::RankFailure& failure) {
          failures[rank] = failure.what();
          failed_rank[rank] = failure.rank();
        }
        weights_unchanged[rank] = torch::equal(before, trainer.model()->parameters().front());
        trainer.reset_optimizer();  // as the sweep does after a failed split
        losses[rank] = trainer.accumulate(ab::shard(batch, rank, 2), split).loss();
        for (const auto& p : trainer.model()->parameters()) got[rank].push_back(p.grad().clone());
        group->barrier();
      } catch (const std::exception& error) {
        errors[rank] = error.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  std::remove(store.c_str());
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(errors[rank].empty()) << "rank " << rank << ": " << errors[rank];
    EXPECT_EQ(failed_rank[rank], 1) << "rank " << rank << ": " << failures[rank];
    EXPECT_EQ(failures[rank].rfind("rank 1: ", 0), 0u) << failures[rank];
    EXPECT_NE(failures[rank].find("index out of range"), std::string::npos) << failures[rank];
    EXPECT_TRUE(weights_unchanged[rank]) << "rank " << rank << " stepped on a failed step";
    ASSERT_EQ(got[rank].size(), expected.size());
    double diff_sq = 0, ref_sq = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      diff_sq += (got[rank][i] - expected[i]).pow(2).sum().item<double>();
      ref_sq += expected[i].pow(2).sum().item<double>();
    }
    EXPECT_LT(std::sqrt(diff_sq / ref_sq), 1e-5) << "rank " << rank;
    EXPECT_NEAR(losses[rank], whole_loss, 1e-5) << "rank " << rank;
  }
  EXPECT_EQ(failures[0], failures[1]);
}
