// The analytic memory plan: exact arithmetic on known shapes (no LibTorch). The comparison with
// measured peaks is in tests/test_memory.cpp.
#include <gtest/gtest.h>

#include <algorithm>

#include <sstream>

#include "accumbench/chunked_loss.hpp"
#include "accumbench/error.hpp"
#include "accumbench/plan.hpp"
#include "accumbench/report.hpp"

namespace ab = accumbench;

namespace {

ab::PlanOptions options(int64_t seq_len, int64_t batch, ab::AttentionKind attention = ab::AttentionKind::kExplicit) {
  ab::PlanOptions o;
  o.seq_len = seq_len;
  o.batch = batch;
  o.attention = attention;
  return o;
}

ab::SplitConfig split(int64_t micro, int64_t accum, const std::string& precision = "fp32") {
  ab::SplitConfig s;
  s.micro_batch = micro;
  s.accum_steps = accum;
  s.precision = ab::precision_from_string(precision);
  return s;
}

int64_t line_bytes(const std::vector<ab::PlanLine>& lines, const std::string& name) {
  for (const auto& line : lines) {
    if (line.name == name) return line.bytes;
  }
  ADD_FAILURE() << "no line " << name;
  return -1;
}

}  // namespace

TEST(Plan, WeightsAndAdamWMomentsOfGpt2_124m) {
  const ab::MemoryPlan p = ab::plan_memory(ab::find_preset("gpt2-124m"), options(1024, 64), split(8, 8));
  EXPECT_EQ(line_bytes(p.resident, "weights"), 124439808LL * 4);
  EXPECT_EQ(line_bytes(p.resident, "AdamW exp_avg"), 124439808LL * 4);
  EXPECT_EQ(line_bytes(p.resident, "AdamW exp_avg_sq"), 124439808LL * 4);
  EXPECT_EQ(ab::total_bytes(p.gradients), 124439808LL * 4);
  // Two host batches of inputs and targets, (64, 1024) int64 each.
  EXPECT_EQ(line_bytes(p.resident, "token batches (inputs, targets)"), 2LL * 2 * 64 * 1024 * 8);
}

TEST(Plan, ExplicitAttentionSavesTheProbabilitiesFlashTheLogsumexp) {
  const ab::ModelConfig m = ab::find_preset("gpt2-124m");
  const int64_t b = 2, T = 1024, H = 12, L = 12;
  const auto s = split(b, 1);
  const int64_t explicit_saved = ab::total_bytes(ab::plan_memory(m, options(T, b), s).saved);
  const int64_t flash_saved = ab::total_bytes(ab::plan_memory(m, options(T, b, ab::AttentionKind::kFlash), s).saved);
  // Per layer: (b, H, T, T) fp32 probabilities and the (T, T) bool mask, against a (b, H, T)
  // fp32 logsumexp; q, k, v and the output cost 4·b·T·a·c in both.
  EXPECT_EQ(explicit_saved - flash_saved, L * (b * H * T * T * 4 + T * T - b * H * T * 4));
}

// The chunked loss head on GPT-2 124M, T=1024, micro-batch 8, bf16, flash attention (the H200
// configuration): 8 chunks of 1024 tokens; the plain head's forward holds the bf16 logits, their
// fp32 copy and log_softmax's fp32 output, 10 bytes per logit; the chunked one holds the head's
// two gradients, the hidden states, their bf16 casts, and one chunk's fp32 logits with its
// log_softmax output.
TEST(Plan, ChunkedLossReplacesTheLogitsByOneChunk) {
  const ab::ModelConfig m = ab::find_preset("gpt2-124m");
  ab::PlanOptions o = options(1024, 64, ab::AttentionKind::kFlash);
  o.cpu = false;
  ab::SplitConfig chunked = split(8, 8, "bf16");
  chunked.chunked_loss = true;
  const ab::MemoryPlan plain = ab::plan_memory(m, o, split(8, 8, "bf16"));
  const ab::MemoryPlan with_chunks = ab::plan_memory(m, o, chunked);
  const int64_t N = 8 * 1024, V = 50257, d = 768, r = 1024;
  EXPECT_EQ(ab::loss_chunk_tokens(N), r);
  EXPECT_EQ(ab::total_bytes(plain.forward_peak), N * V * (2 + 4));
  EXPECT_EQ(line_bytes(plain.saved, "log_softmax output"), N * V * 4);
  EXPECT_EQ(line_bytes(with_chunks.saved, "chunked loss: grad of the hidden states"), N * d * 4);
  EXPECT_EQ(line_bytes(with_chunks.saved, "chunked loss: grad of the head weight"), V * d * 4);
  EXPECT_EQ(line_bytes(with_chunks.forward_peak, "chunk log_softmax output"), r * V * 4);  // > r·V·2 + V·d·2
  EXPECT_EQ(ab::total_bytes(with_chunks.forward_peak), N * d * 4 + (N + V) * d * 2 + 2 * r * V * 4);
  EXPECT_TRUE(with_chunks.backward_peak.empty());  // backward only scales what the forward made
  // 4.1 GB of logits per micro-batch of 8 become 0.5 GB: the peak falls by more than 3 GiB.
  EXPECT_GT(plain.peak_bytes - with_chunks.peak_bytes, int64_t{3} << 30);
  const int64_t memory = int64_t{16} << 30;
  EXPECT_GT(ab::largest_micro_batch(m, o, ab::Precision::kBf16, ab::Checkpointing::kNone, memory, /*chunked_loss=*/true),
            ab::largest_micro_batch(m, o, ab::Precision::kBf16, ab::Checkpointing::kNone, memory));
}

// Over samples the chunked head gathers the counted rows: the order (N·8) and a chunk's gathered
// rows, the chunk at most the micro-batch's counted targets: with a source of 4 samples counting
// 5, 5, 5 and 5 targets (prefix sums 5, 10, 15, 20), a micro-batch of 8 repeats them twice: 40
// rows, and of 3 holds 15. Under CUDA graphs every row, as before.
TEST(Plan, ChunkedLossOverSamplesGathersTheCountedRows) {
  const ab::ModelConfig m = ab::find_preset("gpt2-tiny");
  ab::PlanOptions o = options(32, 8);
  o.counted_rows_gathered = true;
  o.most_counted_targets = {5, 10, 15, 20};
  const int64_t V = m.vocab_size, d = m.d_model;
  for (const auto& [micro, rows] : {std::pair<int64_t, int64_t>{8, 40}, {3, 15}, {4, 20}}) {
    ab::SplitConfig chunked = split(micro, 1);
    chunked.chunked_loss = true;
    const ab::MemoryPlan p = ab::plan_memory(m, o, chunked);
    EXPECT_EQ(line_bytes(p.forward_peak, "one chunk's logits, fp32"), rows * V * 4) << micro;
    EXPECT_EQ(line_bytes(p.forward_peak, "counted rows' order"), micro * 32 * 8) << micro;
    EXPECT_EQ(line_bytes(p.forward_peak, "one chunk's gathered rows"), rows * (d * 4 + 8)) << micro;
  }
  o.most_counted_targets.clear();  // variable lengths: T − 1 per row
  ab::SplitConfig chunked = split(2, 4);
  chunked.chunked_loss = true;
  EXPECT_EQ(line_bytes(ab::plan_memory(m, o, chunked).forward_peak, "one chunk's logits, fp32"), 2 * 31 * V * 4);
  chunked.cuda_graphs = true;
  const ab::MemoryPlan graphed = ab::plan_memory(m, o, chunked);
  EXPECT_EQ(line_bytes(graphed.forward_peak, "one chunk's logits, fp32"), 2 * 32 * V * 4);
  EXPECT_TRUE(std::none_of(graphed.forward_peak.begin(), graphed.forward_peak.end(),
                           [](const ab::PlanLine& line) { return line.name == "counted rows' order"; }));
}

TEST(Plan, AccumulationKeepsTheGradientsAliveDuringForward) {
  const ab::ModelConfig m = ab::find_preset("gpt2-mini");
  const ab::MemoryPlan one = ab::plan_memory(m, options(128, 8), split(4, 1));
  const ab::MemoryPlan two = ab::plan_memory(m, options(128, 8), split(4, 2));
  EXPECT_EQ(two.phase_peak_bytes[0] - one.phase_peak_bytes[0], ab::parameter_count(m) * 4);
  EXPECT_EQ(two.phase_peak_bytes[2], one.phase_peak_bytes[2]);  // the optimizer step is the same
}

TEST(Plan, CudaGraphsKeepGradientsAndTheActivationPoolThroughTheStep) {
  const ab::ModelConfig m = ab::find_preset("gpt2-mini");
  const ab::PlanOptions o = options(128, 8, ab::AttentionKind::kFlash);
  ab::SplitConfig graphed = split(8, 1);
  graphed.cuda_graphs = true;
  const ab::MemoryPlan eager = ab::plan_memory(m, o, split(8, 1));
  const ab::MemoryPlan g = ab::plan_memory(m, o, graphed);
  // The gradients exist before the first forward, as with accumulation.
  EXPECT_EQ(g.phase_peak_bytes[0] - eager.phase_peak_bytes[0], ab::parameter_count(m) * 4);
  // The optimizer step runs next to the pool: the micro-step's high-water mark above the
  // weights, moments, batches and gradients.
  const int64_t resident_and_grads = ab::total_bytes(g.resident) + ab::total_bytes(g.gradients);
  const int64_t pool = std::max(g.phase_peak_bytes[0], g.phase_peak_bytes[1]) - resident_and_grads;
  EXPECT_EQ(g.phase_peak_bytes[2], resident_and_grads + ab::total_bytes(g.optimizer_peak) + pool);
  EXPECT_EQ(g.peak_phase, ab::PlanPhase::kOptimizer);
  EXPECT_GT(g.peak_bytes, eager.peak_bytes);
}

TEST(Plan, OptimizerInBackwardHasNoGradientsAtTheOptimizerPhase) {
  const ab::ModelConfig m = ab::find_preset("gpt2-124m");
  ab::SplitConfig s = split(1, 1);
  s.optimizer_in_backward = true;
  const ab::MemoryPlan p = ab::plan_memory(m, options(64, 1), s);
  EXPECT_EQ(p.phase_peak_bytes[static_cast<int>(ab::PlanPhase::kOptimizer)], ab::total_bytes(p.resident));
  // Short sequences: without the knob the optimizer step holds the peak, with it backward does.
  const ab::MemoryPlan plain = ab::plan_memory(m, options(64, 1), split(1, 1));
  EXPECT_EQ(plain.phase_peak_bytes[static_cast<int>(ab::PlanPhase::kOptimizer)], plain.peak_bytes);
  EXPECT_EQ(p.peak_phase, ab::PlanPhase::kBackward);
  s.accum_steps = 2;
  EXPECT_THROW(ab::plan_memory(m, options(64, 2), s), ab::UserError);
}

TEST(Plan, CheckpointingKeepsOnlyBlockInputs) {
  const ab::ModelConfig m = ab::find_preset("llama-mini");
  ab::SplitConfig s = split(4, 1);
  s.activation_checkpointing = ab::Checkpointing::kBlocks;
  const ab::MemoryPlan p = ab::plan_memory(m, options(128, 4), s);
  EXPECT_EQ(line_bytes(p.saved, "block input x (checkpoint)"), m.n_layers * 4 * 128 * m.d_model * 4);
  EXPECT_LT(p.peak_bytes, ab::plan_memory(m, options(128, 4), split(4, 1)).peak_bytes);
}

TEST(Plan, LargestMicroBatchIsTheLastThatFits) {
  const ab::ModelConfig m = ab::find_preset("gpt2-124m");
  const ab::PlanOptions o = options(1024, 64);
  const int64_t memory = 16LL << 30;
  const int64_t best = ab::largest_micro_batch(m, o, ab::Precision::kBf16, ab::Checkpointing::kNone, memory);
  ASSERT_GT(best, 0);
  EXPECT_LE(ab::plan_memory(m, o, split(best, 2, "bf16")).peak_bytes, memory);
  EXPECT_GT(ab::plan_memory(m, o, split(best + 1, 2, "bf16")).peak_bytes, memory);
  EXPECT_EQ(ab::largest_micro_batch(m, o, ab::Precision::kFp32, ab::Checkpointing::kNone, 1 << 20), 0);  // 1 MiB: not even weights
}

TEST(Plan, CalibrationRecoversALinearError) {
  // error(b) = 1000 + 250·b: probes at 1 and 4 find it, and predict b = 8 exactly.
  const ab::Calibration c = ab::fit_calibration(1, 10000 + 1250, 10000, 4, 40000 + 2000, 40000);
  EXPECT_DOUBLE_EQ(c.slope_bytes, 250.0);
  EXPECT_DOUBLE_EQ(c.intercept_bytes, 1000.0);
  ab::MemoryPlan p;
  p.split.micro_batch = 8;
  p.peak_bytes = 80000;
  EXPECT_EQ(c.predict(p), 80000 + 1000 + 250 * 8);
  EXPECT_THROW(ab::fit_calibration(2, 1, 1, 2, 1, 1), ab::UserError);
}

TEST(Plan, RejectsUnknownNamesAndImpossibleSplits) {
  EXPECT_EQ(ab::attention_kind_from_string("flash"), ab::AttentionKind::kFlash);
  EXPECT_EQ(ab::attention_kind_from_string("explicit"), ab::AttentionKind::kExplicit);
  EXPECT_THROW(ab::attention_kind_from_string("sdpa"), ab::UserError);
  const ab::ModelConfig m = ab::find_preset("gpt2-tiny");
  EXPECT_THROW(ab::plan_memory(m, options(64, 4), split(4, 1, "fp16")), ab::UserError);  // CPU
  EXPECT_THROW(ab::plan_memory(m, options(64, 4), split(4, 1, "int8")), ab::UserError);
  EXPECT_THROW(ab::plan_memory(m, options(4096, 4), split(4, 1)), ab::UserError);  // > max positions
}

TEST(Plan, PrintsThePeakPerPhase) {
  const ab::MemoryPlan p = ab::plan_memory(ab::find_preset("gpt2-tiny"), options(64, 4), split(4, 1));
  std::ostringstream out;
  ab::print_plan(p, out);
  EXPECT_NE(out.str().find("memory plan: gpt2-tiny, T=64, split 4×1, fp32, attention explicit\n"), std::string::npos);
  EXPECT_NE(out.str().find("  weights                                   P·4                   "), std::string::npos);
  EXPECT_NE(out.str().find(" peak 5.9 MiB in backward\n"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find(" b=4 c=4 w=4\n"), std::string::npos) << out.str();
}

// The header names the formulas' element sizes as the plan uses them: c, the activations' (bf16
// weights without autocast compute in bf16), and w, the weights' and the residual's (fp32 around
// a quantised base).
TEST(Plan, HeaderNamesTheElementSizesTheFormulasUse) {
  const ab::ModelConfig m = ab::find_preset("llama-tiny");
  ab::PlanOptions o = options(64, 4);
  o.weights_dtype = ab::Precision::kBf16;
  std::ostringstream bf16_weights;
  ab::print_plan(ab::plan_memory(m, o, split(4, 1)), bf16_weights);
  EXPECT_NE(bf16_weights.str().find(" b=4 c=2 w=2\n"), std::string::npos) << bf16_weights.str();
  o.weights_dtype = ab::Precision::kFp32;
  o.lora.rank = 8;
  o.lora.base_quant = ab::BaseQuant::kNf4;
  std::ostringstream qlora;
  ab::print_plan(ab::plan_memory(m, o, split(4, 1, "bf16")), qlora);
  EXPECT_NE(qlora.str().find(" b=4 c=2 w=4\n"), std::string::npos) << qlora.str();
}

// 8-bit AdamW state of gpt2-124m by hand: the tensors of at least 4096 elements (wte 50257·768,
// wpe 1024·768, per block c_attn 768·2304, attn c_proj 768², c_fc and mlp c_proj 768·3072) hold
// N8 = 124,318,464 elements, the biases and LayerNorms N32 = 121,344 (P − N8). Codes 2·N8 bytes;
// one absmax per 256 (every big tensor is a multiple: 485,619 blocks) per moment; fp32 moments
// for the rest; the maps once. Paged (CUDA): every big tensor is over 1e5 elements, so all codes
// may be evicted; on the CPU nothing is.
TEST(Plan, EightBitAdamWStateOfGpt2_124m) {
  ab::PlanOptions o = options(1024, 8);
  o.optimizer = ab::OptimizerKind::kAdamW8bit;
  const ab::ModelConfig m = ab::find_preset("gpt2-124m");
  ab::MemoryPlan p = ab::plan_memory(m, o, split(8, 1));
  EXPECT_EQ(line_bytes(p.resident, "8-bit state1, state2 codes"), 2LL * 124318464);
  EXPECT_EQ(line_bytes(p.resident, "8-bit absmax1, absmax2"), 2LL * 485619 * 4);
  EXPECT_EQ(line_bytes(p.resident, "32-bit state of small tensors"), 2LL * 121344 * 4);
  EXPECT_EQ(line_bytes(p.resident, "dynamic quantisation maps"), 4088);
  EXPECT_EQ(p.evictable_bytes, 0);
  // The step's temporaries: one pass of 2^20 elements of the largest tensor, 12 bytes each.
  EXPECT_EQ(ab::total_bytes(p.optimizer_peak), 12LL << 20);
  EXPECT_EQ(ab::optimizer_state_total_bytes(m, {}, ab::Precision::kFp32, ab::OptimizerKind::kAdamW8bit),
            2LL * 124318464 + 2LL * 485619 * 4 + 2LL * 121344 * 4 + 4088);

  o.optimizer = ab::OptimizerKind::kPagedAdamW8bit;
  o.cpu = false;
  p = ab::plan_memory(m, o, split(8, 1));
  EXPECT_EQ(line_bytes(p.resident, "8-bit state1, state2 codes (paged)"), 2LL * 124318464);
  EXPECT_EQ(p.evictable_bytes, 2LL * 124318464);
  std::ostringstream text;
  ab::print_plan(p, text);
  EXPECT_NE(text.str().find("paged optimizer state: 237.1 MiB of it may be evicted"), std::string::npos) << text.str();

  // SGD keeps nothing and steps in place.
  o.optimizer = ab::OptimizerKind::kSgd;
  p = ab::plan_memory(m, o, split(8, 1));
  EXPECT_EQ(line_bytes(p.resident, "SGD state"), 0);
  EXPECT_TRUE(p.optimizer_peak.empty());
  EXPECT_EQ(p.phase_peak_bytes[static_cast<int>(ab::PlanPhase::kOptimizer)],
            ab::total_bytes(p.resident) + ab::total_bytes(p.gradients));
}

// plan --framework hf-trl: the outputs compute_loss keeps and TRL's metrics on them, on top of
// everything the micro-step saved (bench/reference/hf_trl.py). gpt2-124m, T=256: at 8×1 the
// shifted logits' copy and three 128-row entropy temporaries; at 1×8 the slice needs no copy.
// Measured by the reference on this CPU (bench/results/hf-trl-cpu-2026-12-03, with GPT-2's
// gelu_new op by op as transformers runs it): 5233688520 bytes at 8×1, 2502079464 at 1×8;
// tests/reference/plan_memory.sh compares plan and reference in ctest.
TEST(Plan, HfTrlMetricsKeepTheLogitsAndCopyThemAfterTheLoss) {
  const ab::ModelConfig cfg = ab::find_preset("gpt2-124m");
  ab::PlanOptions o = options(256, 8);
  const ab::MemoryPlan plain = ab::plan_memory(cfg, o, split(8, 1));
  o.framework = ab::PlanFramework::kHfTrl;
  o.trl_loss = ab::TrlLoss::kNll;  // TRL before 1.7 (the default is chunked_nll, below)
  const ab::MemoryPlan trl = ab::plan_memory(cfg, o, split(8, 1));
  const int64_t V = cfg.vocab_size, N = 8 * 256;
  EXPECT_TRUE(plain.framework_forward_peak.empty());
  EXPECT_EQ(line_bytes(trl.framework_forward_peak, "logits kept in the outputs, fp32"), N * V * 4);
  EXPECT_EQ(line_bytes(trl.framework_forward_peak, "shifted logits reshaped (a copy)"), 8 * 255 * V * 4);
  EXPECT_EQ(line_bytes(trl.framework_forward_peak, "entropy chunk: log_softmax, exp, product"), 3 * 128 * V * 4);
  // The moment adds the copy and the chunk to plain's loss-head forward (fp32: the logits alone),
  // and the forward saved gelu_new's three more tensors per block (HfTrlRunsGeluNewOpByOp).
  const int64_t gelu_new = 3 * cfg.n_layers * N * cfg.d_ff * 4;
  EXPECT_EQ(trl.phase_peak_bytes[0], plain.phase_peak_bytes[0] + gelu_new + 8 * 255 * V * 4 + 3 * 128 * V * 4);
  EXPECT_EQ(trl.peak_phase, ab::PlanPhase::kForward);
  EXPECT_NEAR(static_cast<double>(trl.peak_bytes), 5233688520.0, 0.001 * 5233688520.0);
  const ab::MemoryPlan one = ab::plan_memory(cfg, o, split(1, 8));
  for (const auto& line : one.framework_forward_peak) EXPECT_NE(line.name, "shifted logits reshaped (a copy)");
  EXPECT_NEAR(static_cast<double>(one.peak_bytes), 2502079464.0, 0.001 * 2502079464.0);
  ab::SplitConfig chunked = split(8, 1);
  chunked.chunked_loss = true;
  EXPECT_THROW(ab::plan_memory(cfg, o, chunked), ab::UserError);
  EXPECT_THROW(ab::plan_framework_from_string("trl"), ab::UserError);
}

// TRL's default loss since v1.7.0 (--trl-loss chunked_nll): no (b·T, V) logits at all; the
// gathered hidden states are kept for the chunks' recompute, and one chunk of 256 rows holds
// four (r, V) fp32 tensors. Against the PyTorch reference (bench/reference/step_bench.py
// --framework hf-trl --trl-loss chunked_nll, the profiler's allocation events), gpt2-124m T=256:
// 8×1 measured 4393239016 bytes with gelu_new op by op (the plan says 4393273216).
// transformers computes GPT-2's gelu_new op by op (activations.py NewGELUActivation): autograd keeps
// the tanh, 1 + tanh and 0.5·x beside x, three more b·T·f tensors per block than the fused op that
// accumbench (and gelu_pytorch_tanh) runs; under CUDA autocast pow runs in fp32, so x's fp32 copy
// and the two tanh tensors are fp32: 12 more bytes per element whatever c is. Measured on this CPU
// (tests/reference/plan_memory.sh: gpt2-tiny hf-trl nll against gelu_pytorch_tanh; gpt2-124m in
// HfTrlMetricsKeepTheLogitsAndCopyThemAfterTheLoss: +905969952 bytes at 8×1, predicted +905969664).
TEST(Plan, HfTrlRunsGeluNewOpByOp) {
  const ab::ModelConfig gelu_new = ab::find_preset("gpt2-124m");
  ab::ModelConfig fused = gelu_new;
  fused.activation = ab::Activation::kGeluTanh;
  const int64_t L = gelu_new.n_layers, f = gelu_new.d_ff, N = 4 * 256;
  ab::PlanOptions o = options(256, 4);
  o.framework = ab::PlanFramework::kHfTrl;
  o.trl_loss = ab::TrlLoss::kNll;
  auto saved = [&](const ab::ModelConfig& m, const std::string& precision) {
    return ab::total_bytes(ab::plan_memory(m, o, split(4, 1, precision)).saved);
  };
  EXPECT_EQ(saved(gelu_new, "fp32") - saved(fused, "fp32"), 3 * L * N * f * 4);
  EXPECT_EQ(saved(gelu_new, "bf16") - saved(fused, "bf16"), 3 * L * N * f * 2);
  EXPECT_EQ(line_bytes(ab::plan_memory(gelu_new, o, split(4, 1)).saved, "gelu_new op by op: tanh, 1 + tanh, 0.5·x"),
            3 * L * N * f * 4);
  o.cpu = false;
  o.libtorch_major = 2;
  o.attention = ab::AttentionKind::kFlash;
  EXPECT_EQ(saved(gelu_new, "bf16") - saved(fused, "bf16"), L * N * f * 12);
  EXPECT_EQ(saved(gelu_new, "fp32") - saved(fused, "fp32"), 3 * L * N * f * 4);
  // The plain plan is the engine's step, whose fused op saves x alone, whatever the name.
  o.framework = ab::PlanFramework::kPlain;
  EXPECT_EQ(saved(gelu_new, "bf16"), saved(fused, "bf16"));
  // The Llama family's silu is one fused op in transformers too.
  o.framework = ab::PlanFramework::kHfTrl;
  for (const auto& line : ab::plan_memory(ab::find_preset("llama-mini"), o, split(4, 1, "bf16")).saved)
    EXPECT_EQ(line.name.find("op by op"), std::string::npos) << line.name;
}

TEST(Plan, TrlChunkedNllNeverMakesTheLogits) {
  const ab::ModelConfig cfg = ab::find_preset("gpt2-124m");
  ab::PlanOptions o = options(256, 8);
  o.framework = ab::PlanFramework::kHfTrl;
  EXPECT_EQ(o.trl_loss, ab::TrlLoss::kChunkedNll);  // TRL's default
  const ab::MemoryPlan chunked = ab::plan_memory(cfg, o, split(8, 1));
  o.trl_loss = ab::TrlLoss::kNll;
  const ab::MemoryPlan nll = ab::plan_memory(cfg, o, split(8, 1));
  const int64_t V = cfg.vocab_size, d = cfg.d_model, n = 8 * 255;
  for (const auto& line : chunked.saved) EXPECT_EQ(line.name.find("log_softmax"), std::string::npos) << line.name;
  EXPECT_TRUE(chunked.framework_forward_peak.empty());
  EXPECT_EQ(line_bytes(chunked.saved, "TRL chunk inputs: gathered hidden"), n * d * 4);
  EXPECT_EQ(line_bytes(chunked.forward_peak, "chunk: logits, log_softmax, exp, product"), 4 * 256 * V * 4);
  // Eight chunks: from the second on, the weight's input buffer adds each chunk's (V, d)
  // gradient out of place, beside the hidden states' sum.
  EXPECT_EQ(line_bytes(chunked.backward_peak, "weight gradient: old sum, new, sum"), 3 * V * d * 4);
  EXPECT_EQ(line_bytes(chunked.backward_peak, "earlier chunks' hidden gradient sum"), n * d * 4);
  EXPECT_EQ(chunked.peak_phase, ab::PlanPhase::kBackward);
  EXPECT_LT(chunked.peak_bytes, nll.peak_bytes - 2 * 8 * 256 * V * 4);
  const double measured = 4393239016.0;  // bench/results/hf-trl-cpu-2026-12-03
  EXPECT_NEAR(static_cast<double>(chunked.peak_bytes), measured, 0.001 * measured);
  EXPECT_EQ(ab::trl_loss_from_string("chunked_nll"), ab::TrlLoss::kChunkedNll);
  EXPECT_THROW(ab::trl_loss_from_string("chunked-nll"), ab::UserError);
}

// LoRA dropout keeps, per adapter, what it needs for backward: on the CPU the fp32 noise tensor
// x · noise multiplied by; on CUDA at::dropout is native_dropout, which keeps a bool mask
// (ATen's Dropout.cpp, is_fused_kernel_acceptable). gpt2-tiny, T=64, 2×1, adapters on c_attn.
TEST(Plan, LoraDropoutKeepsAnFp32NoiseOnTheCpuAndABoolMaskOnCuda) {
  const ab::ModelConfig cfg = ab::find_preset("gpt2-tiny");
  ab::PlanOptions o = options(64, 2);
  o.lora.rank = 4;
  o.lora.targets = "c_attn";
  o.lora.dropout = 0.1;
  const ab::MemoryPlan cpu = ab::plan_memory(cfg, o, split(2, 1));
  o.cpu = false;
  const ab::MemoryPlan cuda = ab::plan_memory(cfg, o, split(2, 1));
  const int64_t N = 2 * 64, d = cfg.d_model, L = cfg.n_layers;
  // Block 0's input requires no grad (the embedding is frozen): its dropout keeps nothing.
  EXPECT_EQ(line_bytes(cpu.saved, "ln_1 output, dropout noise"), (L - 1) * N * d * 4);
  EXPECT_EQ(line_bytes(cuda.saved, "ln_1 output, dropout mask"), (L - 1) * N * d * 1);
  EXPECT_EQ(line_bytes(cpu.saved, "ln_1 output, dropped, per adapter"), line_bytes(cuda.saved, "ln_1 output, dropped, per adapter"));
}
