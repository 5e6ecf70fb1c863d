// LoRA on a frozen base and the weights' storage dtype: what trains, that every split still
// computes the same update, what the plan predicts against the counting allocator, and the bad
// input that exits 2.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <iostream>

#include "plan_error.hpp"
#include "accumbench/engine.hpp"
#include "accumbench/error.hpp"
#include "accumbench/models.hpp"
#include "accumbench/plan.hpp"
#include "accumbench/throughput.hpp"
#include "accumbench/verify.hpp"

namespace ab = accumbench;

namespace {

ab::LoraOptions rank(int64_t r, const std::string& targets = "all-linear") {
  ab::LoraOptions lora;
  lora.rank = r;
  lora.targets = targets;
  return lora;
}

ab::WorkloadOptions small_lora(const std::string& preset, ab::LengthMode lengths) {
  ab::WorkloadOptions w = ab::workload_defaults(ab::Command::kVerify);
  w.data.lengths = ab::LengthMode::kVariable;  // unequal lengths: the normalization shows
  w.model.preset = preset;
  w.seq_len = 32;
  w.batch = 8;
  w.device = "cpu";
  w.threads = 1;
  w.data.lengths = lengths;
  w.lora = rank(4);
  return w;
}

}  // namespace

// The closed form of the adapters' size against the module, and what the Trainer optimizes.
TEST(Lora, AdaptersAreTheOnlyTrainableParametersAndMatchTheClosedForm) {
  for (const char* preset : {"gpt2-tiny", "llama-tiny", "qwen3-tiny"}) {
    const ab::ModelConfig cfg = ab::find_preset(preset);
    for (const char* targets : {"all-linear", "attention", "mlp", "q,v", "c_attn,c_proj"}) {
      const bool gpt2 = cfg.arch == ab::Architecture::kGpt2;
      const std::string t = targets;
      if ((t == "q,v" && gpt2) || (t == "c_attn,c_proj" && !gpt2)) continue;
      ab::LanguageModel model = ab::build_model(cfg, 0);
      ab::configure_training(*model, ab::Precision::kFp32, rank(4, targets));
      int64_t trainable = 0;
      for (const at::Tensor& p : ab::trainable_parameters(*model)) trainable += p.numel();
      EXPECT_EQ(trainable, ab::lora_parameter_count(cfg, rank(4, targets))) << preset << " " << targets;
      EXPECT_EQ(ab::count_parameters(*model), ab::parameter_count(cfg) + trainable) << preset;
    }
  }
  // llama-tiny, all-linear, r = 4: per block q (64→64), k, v (64→32), o (64→64), gate, up (64→176),
  // down (176→64): r · Σ(in + out) = 4 · (128 + 96 + 96 + 128 + 240 + 240 + 240) = 4672, two blocks.
  EXPECT_EQ(ab::lora_parameter_count(ab::find_preset("llama-tiny"), rank(4)), 2 * 4672);
}

// One step moves the adapters and nothing else; B starts at zero, as PEFT initializes it.
TEST(Lora, AStepMovesOnlyTheAdapters) {
  const ab::ModelConfig cfg = ab::find_preset("llama-tiny");
  ab::LanguageModel model = ab::build_model(cfg, 0);
  ab::configure_training(*model, ab::Precision::kFp32, rank(4));
  std::vector<at::Tensor> before;
  for (const auto& p : model->named_parameters()) {
    before.push_back(p.value().detach().clone());
    if (p.key().find("lora_B") != std::string::npos) EXPECT_EQ(p.value().abs().max().item<double>(), 0.0);
  }
  ab::Trainer trainer(model, c10::Device(c10::kCPU), ab::TrainOptions{});
  ab::DataOptions d = ab::data_options_for(cfg.vocab_size, 32, 4, false);
  const ab::TokenBatch batch = ab::make_synthetic_batches(d).front();
  ab::StepOptions step;
  step.micro_batch = 2;
  trainer.step(batch, step);
  size_t i = 0;
  for (const auto& p : model->named_parameters()) {
    const bool adapter = p.key().find("lora_") != std::string::npos;
    const bool moved = !at::equal(p.value(), before[i++]);
    EXPECT_EQ(moved, adapter) << p.key();
  }
}

// Every split gives the whole batch's adapter gradients and update (fp32: 1e-5 and 1e-3, as for
// a full fine-tune), fixed and variable lengths, with dropout 0; checkpointing too.
TEST(Lora, EverySplitEqualsTheWholeBatch) {
  for (const char* preset : {"gpt2-tiny", "llama-tiny", "qwen3-tiny"}) {
    for (ab::LengthMode lengths : {ab::LengthMode::kFixed, ab::LengthMode::kVariable}) {
      ab::WorkloadOptions w = small_lora(preset, lengths);
      w.grid.checkpointing = lengths == ab::LengthMode::kVariable ? ab::Checkpointing::kBlocks : ab::Checkpointing::kNone;
      const ab::VerifyResult r = ab::run_verify(w);
      ASSERT_EQ(r.splits.size(), 4u);
      EXPECT_TRUE(r.all_pass) << preset;
      EXPECT_EQ(r.trainable_parameters, ab::lora_parameter_count(ab::find_preset(preset), w.lora));
      for (const ab::VerifySplit& s : r.splits) {
        EXPECT_LT(s.rel_l2_grad_error, 1e-5) << preset << " " << s.config.label();
        EXPECT_LT(s.rel_l2_update_error, 1e-3) << preset << " " << s.config.label();
      }
    }
  }
}

// The normalization bug shows through the adapters too.
TEST(Lora, MeanOfMeansStillFails) {
  ab::WorkloadOptions w = small_lora("gpt2-tiny", ab::LengthMode::kVariable);
  w.loss.normalization = ab::LossNormalization::kMeanOfMeans;
  const ab::VerifyResult r = ab::run_verify(w);
  EXPECT_FALSE(r.all_pass);
  EXPECT_GT(r.splits.front().rel_l2_grad_error, 0.05);
}

// bf16 weights in a full fine-tune: weights, gradients and AdamW moments all in bf16.
TEST(WeightsDtype, Bf16FullFineTuneKeepsEverythingInBf16) {
  const ab::ModelConfig cfg = ab::find_preset("gpt2-tiny");
  ab::LanguageModel model = ab::build_model(cfg, 0);
  ab::configure_training(*model, ab::Precision::kBf16, ab::LoraOptions{});
  ab::Trainer trainer(model, c10::Device(c10::kCPU), ab::TrainOptions{});
  EXPECT_EQ(trainer.parameter_bytes(), 2 * ab::parameter_count(cfg));
  EXPECT_EQ(trainer.optimizer_state_bytes(), 2 * 2 * ab::parameter_count(cfg));
  ab::DataOptions d = ab::data_options_for(cfg.vocab_size, 32, 4, false);
  ab::StepOptions step;
  step.micro_batch = 4;
  const ab::StepOutcome out = trainer.accumulate(ab::make_synthetic_batches(d).front(), step);
  EXPECT_TRUE(std::isfinite(out.loss()));
  EXPECT_EQ(trainer.gradient_bytes(), 2 * ab::parameter_count(cfg));
}

// --adapter-dtype bf16 (TRL's QLoRA): the adapters, their gradients and AdamW moments in bf16, the
// adapters drawn in fp32 and rounded (so a seeded run draws what fp32 adapters round to); PEFT's
// fp32 upcast of a quantised base's other parameters leaves them bf16 (it runs before they exist).
// Every split still computes the whole batch's update, at bf16's tolerance.
TEST(Lora, Bf16AdaptersKeepTheirGradientsAndMomentsInBf16) {
  const ab::ModelConfig cfg = ab::find_preset("llama-tiny");
  ab::LoraOptions lora = rank(4);
  lora.adapter_dtype = ab::Precision::kBf16;
  const int64_t n = ab::lora_parameter_count(cfg, lora);
  ab::LanguageModel fp32_model = ab::build_model(cfg, 0);
  ab::configure_training(*fp32_model, ab::Precision::kFp32, rank(4));
  for (bool quantised : {false, true}) {
    ab::LoraOptions options = lora;
    if (quantised) options.base_quant = ab::BaseQuant::kNf4;  // kbit_upcast: PEFT's fp32 upcast
    ab::LanguageModel model = ab::build_model(cfg, 0);
    ab::configure_training(*model, ab::Precision::kBf16, options);
    const auto fp32_params = fp32_model->named_parameters();
    for (const auto& p : model->named_parameters()) {
      if (p.key().find("lora_") == std::string::npos) {
        EXPECT_EQ(p.value().scalar_type(), quantised ? at::kFloat : at::kBFloat16) << p.key();
        continue;
      }
      EXPECT_EQ(p.value().scalar_type(), at::kBFloat16) << p.key();
      EXPECT_TRUE(at::equal(p.value(), fp32_params[p.key()].to(at::kBFloat16))) << p.key();
    }
    ab::TrainOptions train;
    train.precision = ab::Precision::kBf16;
    ab::Trainer trainer(model, c10::Device(c10::kCPU), train);
    EXPECT_EQ(trainer.optimizer_state_bytes(), 2 * 2 * n);
    ab::DataOptions d = ab::data_options_for(cfg.vocab_size, 32, 4, false);
    ab::StepOptions step;
    step.micro_batch = 2;
    const ab::StepOutcome out = trainer.accumulate(ab::make_synthetic_batches(d).front(), step);
    EXPECT_TRUE(std::isfinite(out.loss()));
    EXPECT_EQ(trainer.gradient_bytes(), 2 * n);
  }
  ab::WorkloadOptions w = small_lora("qwen3-tiny", ab::LengthMode::kVariable);
  w.lora.adapter_dtype = ab::Precision::kBf16;
  w.precisions = {ab::Precision::kBf16};
  const ab::VerifyResult r = ab::run_verify(w);
  EXPECT_TRUE(r.all_pass);
  EXPECT_EQ(r.gradient_tolerance, ab::gradient_tolerance(ab::Precision::kBf16));
  // Outside bf16 activations it is refused with the fix.
  w.precisions = {ab::Precision::kFp32};
  EXPECT_THROW(ab::validate_workload(w), ab::UserError);
  w.weights_dtype = ab::Precision::kBf16;  // bf16 weights without autocast: bf16 activations
  EXPECT_NO_THROW(ab::validate_workload(w));
}

// Model FLOPs with a frozen base: 4N + 6N_lora + attention; transformers' figure is 6N without
// the embeddings; checkpointing adds one forward of the blocks, as hardware FLOPs.
TEST(Lora, FlopsCountWhatRuns) {
  const ab::ModelConfig cfg = ab::find_preset("llama-tiny");
  const double n = static_cast<double>(ab::parameter_count(cfg));
  const double n_lora = static_cast<double>(ab::lora_parameter_count(cfg, rank(4)));
  const double attention = 12.0 * cfg.n_layers * cfg.n_heads * cfg.head_dim * 64;
  EXPECT_DOUBLE_EQ(ab::flops_per_token(cfg, 64), 6 * n + attention);
  EXPECT_DOUBLE_EQ(ab::flops_per_token(cfg, 64, rank(4)), 4 * n + 6 * n_lora + attention);
  EXPECT_DOUBLE_EQ(ab::transformers_flops_per_token(cfg, rank(4)),
                   6 * (n + n_lora - static_cast<double>(cfg.vocab_size * cfg.d_model)));
  // Block matrices of llama-tiny: 2 blocks · (64·64 + 2·64·32 + 64·64 + 3·64·176) = 2 · 46,080.
  EXPECT_DOUBLE_EQ(ab::recompute_flops_per_token(cfg, 64), 2.0 * 2 * 46080 + attention / 3);
}

TEST(Lora, BadOptionsAreUserErrors) {
  const ab::ModelConfig cfg = ab::find_preset("llama-tiny");
  // Above min(in, out) = 64 (k and v: 32): PEFT builds it, a note says it buys nothing.
  EXPECT_NO_THROW(ab::validate_lora(cfg, rank(65)));
  EXPECT_EQ(ab::lora_rank_note(cfg, rank(65)),
            "--lora-rank 65 is above the smaller dimension of q, k, v, o, gate, up and down in llama-tiny (down to 32): "
            "PEFT builds such adapters, whose update cannot have more than that rank, so the extra width costs memory "
            "and time for nothing");
  EXPECT_EQ(ab::lora_rank_note(cfg, rank(16)), "");
  EXPECT_THROW(ab::validate_lora(cfg, rank(4, "q,fc")), ab::UserError);      // fc is GPT-2's
  EXPECT_NO_THROW(ab::validate_lora(cfg, rank(4, "q_proj, v_proj")));
  ab::WorkloadOptions w = ab::workload_defaults(ab::Command::kSweep);
  w.lora.rank = -1;
  EXPECT_THROW(ab::validate_workload(w), ab::UserError);
  w.lora.rank = 0;
  w.lora.dropout = 0.1;  // a LoRA option without LoRA
  EXPECT_THROW(ab::validate_workload(w), ab::UserError);
  w.lora.rank = 4;
  w.lora.dropout = 1.0;
  EXPECT_THROW(ab::validate_workload(w), ab::UserError);
  EXPECT_THROW(ab::require_weights_dtype_runs_on(ab::Precision::kFp16, c10::Device(c10::kCPU)), ab::UserError);
}

// ---- the plan against the counting allocator ----

namespace {

double plan_error(const char* preset, ab::Precision precision, ab::Precision weights, const ab::LoraOptions& lora,
                  int64_t micro, int64_t accum, bool checkpointing) {
  return accumbench_test::lora_plan_error("lora plan", preset, precision, weights, lora, micro, accum, checkpointing);
}

}  // namespace

// LoRA, fp32 and bf16 autocast, fp32 and bf16 weights (the seed job's recipe is bf16 autocast on
// half-precision weights), with and without accumulation. Measured without checkpointing: −0.01 %
// .. +0.15 % (2026-12-01); asserted: within 3 %, never under by more than 2 %.
TEST(LoraPlan, WithinThreePercentOfMeasured) {
  for (const char* preset : {"gpt2-tiny", "llama-tiny"}) {
    for (ab::Precision precision : {ab::Precision::kFp32, ab::Precision::kBf16}) {
      for (ab::Precision weights : {ab::Precision::kFp32, ab::Precision::kBf16}) {
        for (auto [micro, accum] : {std::pair<int64_t, int64_t>{1, 2}, {4, 1}}) {
          const double e = plan_error(preset, precision, weights, rank(4), micro, accum, false);
          EXPECT_LT(e, 0.03);
          EXPECT_GT(e, -0.02);
        }
      }
    }
  }
}

// Attention much wider than the MLP (H·hd = 8·d, f = d/2, a 100-token vocabulary; hd 64 > T/2):
// the output projection's and bmm(probabilities, v)'s backward nodes decide the peak, which the
// plan missed by up to 10.6 % (full fine-tuning), 13.6 % (optimizer inside backward) and 24 %
// (QLoRA) before it had their moments; GPT-2 with a thin MLP by 5.8 % (c_attn's concatenated
// output gradient). On a quantised base (nf4, int8) the dequantised weights decide it: o_proj's
// in the forward, the recompute and its base's node (int8 keeping the copy), c_attn's next to its
// concatenated output gradient and in the forward; missed by up to 17 % (int8, checkpointed)
// before. Asserted the plan-accuracy bar, 3 % and -2 %.
TEST(LoraPlan, WideAttentionOverAThinMlp) {
  ab::ModelConfig wide = ab::find_preset("qwen3-tiny");
  wide.name = "wide-attention";
  wide.vocab_size = 100;
  wide.d_model = 128;
  wide.d_ff = 64;
  wide.n_layers = 1;
  wide.n_heads = 16;
  wide.n_kv_heads = 2;
  wide.head_dim = 64;
  ab::ModelConfig thin = ab::find_preset("gpt2-tiny");
  thin.name = "gpt2-thin-mlp";
  thin.vocab_size = 100;
  thin.d_model = 128;
  thin.n_heads = 4;
  thin.head_dim = 32;
  thin.n_kv_heads = 4;
  thin.d_ff = 32;
  thin.n_layers = 2;
  const auto fp32 = ab::Precision::kFp32;
  for (const ab::ModelConfig& cfg : {wide, thin}) {
    ab::validate(cfg);
    for (auto [micro, accum] : {std::pair<int64_t, int64_t>{1, 2}, {2, 1}}) {
      for (bool ckpt : {false, true}) {
        for (const ab::OptimizerKind optimizer : {ab::OptimizerKind::kAdamW, ab::OptimizerKind::kSgd}) {
          const double e = accumbench_test::lora_plan_error("wide plan", cfg, fp32, fp32, {}, micro, accum, ckpt, false,
                                                            optimizer);
          EXPECT_LT(e, 0.03);
          EXPECT_GT(e, -0.02);
        }
        const double e = accumbench_test::lora_plan_error("wide plan", cfg, fp32, fp32, rank(8), micro, accum, ckpt);
        EXPECT_LT(e, 0.03);
        EXPECT_GT(e, -0.02);
      }
    }
    const double oib = accumbench_test::lora_plan_error("wide plan", cfg, fp32, fp32, {}, 2, 1, false, true);
    EXPECT_LT(oib, 0.03);
    EXPECT_GT(oib, -0.02);
  }
  // Adapters on some linears only over a quantised base, checkpointed: the output projection's
  // frozen base node (its dequantised weight and input gradient) and its recompute, with no adapter
  // of its own (-24 % before). Partial targets still miss over a full-precision base at 1x2
  // (-5.5 %), without checkpointing, and on GPT-2 (README, Known limits).
  for (const ab::BaseQuant quant : {ab::BaseQuant::kNf4, ab::BaseQuant::kInt8}) {
    for (const char* targets : {"mlp", "q,v"}) {
      ab::LoraOptions partial = rank(8, targets);
      partial.base_quant = quant;
      for (auto [micro, accum] : {std::pair<int64_t, int64_t>{1, 2}, {2, 1}}) {
        const double e = accumbench_test::lora_plan_error("wide plan", wide, fp32, fp32, partial, micro, accum, true);
        EXPECT_LT(e, 0.03);
        EXPECT_GT(e, -0.02);
      }
    }
  }
  for (const ab::BaseQuant quant : {ab::BaseQuant::kNf4, ab::BaseQuant::kInt8}) {
    ab::LoraOptions qlora = rank(8);
    qlora.base_quant = quant;
    for (const ab::ModelConfig& cfg : {wide, thin}) {
      for (auto [micro, accum] : {std::pair<int64_t, int64_t>{1, 2}, {2, 1}}) {
        for (bool ckpt : {false, true}) {
          const double e = accumbench_test::lora_plan_error("wide plan", cfg, fp32, fp32, qlora, micro, accum, ckpt);
          EXPECT_LT(e, 0.03);
          EXPECT_GT(e, -0.02);
        }
      }
    }
  }
}

// Adapters on the MLP's output projection alone, without checkpointing: in block 0 nothing before
// that adapter needs a gradient, so the input projections and the activation save nothing there
// (their outputs are temporaries of the block's last expression). The plan counted them in every
// block: +11.8 % at 4×1 of llama-tiny's down_proj (3·b·T·f·4 too much), +22 % with a 4× MLP.
// Measured now within 0.02 %; asserted the plan-accuracy bar, 3 % and −2 %.
TEST(LoraPlan, AdaptersOnTheMlpOutputAlone) {
  for (const auto& [preset, targets] : {std::pair<const char*, const char*>{"llama-tiny", "down"},
                                        {"gpt2-tiny", "mlp_c_proj"}}) {
    for (ab::Precision precision : {ab::Precision::kFp32, ab::Precision::kBf16}) {
      for (auto [micro, accum] : {std::pair<int64_t, int64_t>{1, 2}, {4, 1}}) {
        const double e = plan_error(preset, precision, ab::Precision::kFp32, rank(8, targets), micro, accum, false);
        EXPECT_LT(e, 0.03) << preset << " " << ab::to_string(precision) << " " << micro << "x" << accum;
        EXPECT_GT(e, -0.02) << preset << " " << ab::to_string(precision) << " " << micro << "x" << accum;
      }
    }
    // With LoRA dropout block 0's adapter input needs no gradient either: dropout keeps no noise
    // there (+5.8 % at 4×1 of gpt2-tiny's mlp_c_proj before).
    ab::LoraOptions dropped = rank(8, targets);
    dropped.dropout = 0.1;
    const double e = plan_error(preset, ab::Precision::kFp32, ab::Precision::kFp32, dropped, 4, 1, false);
    EXPECT_LT(e, 0.03) << preset << " dropout";
    EXPECT_GT(e, -0.02) << preset << " dropout";
  }
}

// Adapters on some of the attention's input projections, without checkpointing (PEFT's default
// q,v among them): in block 0 only those take a gradient, and bmm keeps an operand only for the
// other's gradient (q for k's, k for q's, v for the scores'), softmax and the mask only where the
// scores take one, Qwen3's q/k norm each part where its projection does; the same for one of gate
// and up (the product keeps act(gate) for up's gradient, up for gate's). The plan counted all in
// block 0: +4.2 % (q,v) and +14 % (v) at 4×1 of qwen3-tiny. Measured now within 0.05 %;
// asserted the plan-accuracy bar, 3 % and −2 %.
TEST(LoraPlan, SomeOfTheAttentionInputsAdapted) {
  for (const auto& [preset, targets] :
       {std::pair<const char*, const char*>{"qwen3-tiny", "q,v"}, {"qwen3-tiny", "v"}, {"llama-tiny", "k"}, {"llama-tiny", "q,v"},
        {"llama-tiny", "up,down"}, {"qwen3-tiny", "gate"}}) {
    for (ab::Precision precision : {ab::Precision::kFp32, ab::Precision::kBf16}) {
      for (auto [micro, accum] : {std::pair<int64_t, int64_t>{1, 2}, {4, 1}}) {
        const double e = plan_error(preset, precision, ab::Precision::kFp32, rank(8, targets), micro, accum, false);
        EXPECT_LT(e, 0.03) << preset << " " << targets << " " << ab::to_string(precision) << " " << micro << "x" << accum;
        EXPECT_GT(e, -0.02) << preset << " " << targets << " " << ab::to_string(precision) << " " << micro << "x" << accum;
      }
    }
  }
}

// With checkpointing (the seed job's setting). Measured −1.8 % .. +2.0 % (2026-12-01) over fp32, bf16
// autocast on fp32 or bf16 weights, and bf16 weights without autocast; asserted the
// plan-accuracy bar, 3 % and −2 %.
TEST(LoraPlan, CheckpointedWithinThreePercent) {
  for (const char* preset : {"gpt2-tiny", "llama-tiny"}) {
    for (auto [precision, weights] : {std::pair{ab::Precision::kFp32, ab::Precision::kFp32},
                                      {ab::Precision::kBf16, ab::Precision::kFp32},
                                      {ab::Precision::kFp32, ab::Precision::kBf16},
                                      {ab::Precision::kBf16, ab::Precision::kBf16}}) {
      for (auto [micro, accum] : {std::pair<int64_t, int64_t>{1, 2}, {4, 1}}) {
        const double e = plan_error(preset, precision, weights, rank(4), micro, accum, true);
        EXPECT_LT(e, 0.03);
        EXPECT_GT(e, -0.02);
      }
    }
  }
}

// Half-precision full fine-tuning (--weights-dtype bf16: weights, gradients, moments and the
// residual stream in bf16; activations in bf16 without autocast too). Measured +0.02 % .. +1.17 %;
// asserted 3 % and −2 %.
TEST(WeightsDtypePlan, Bf16FullFineTuneWithinThreePercent) {
  for (const char* preset : {"gpt2-tiny", "llama-tiny"}) {
    for (ab::Precision precision : {ab::Precision::kFp32, ab::Precision::kBf16}) {
      for (bool ckpt : {false, true}) {
        for (auto [micro, accum] : {std::pair<int64_t, int64_t>{1, 2}, {4, 1}}) {
          const double e = plan_error(preset, precision, ab::Precision::kBf16, ab::LoraOptions{}, micro, accum, ckpt);
          EXPECT_LT(e, 0.03);
          EXPECT_GT(e, -0.02);
        }
      }
    }
  }
}

// Dropout keeps a dropped copy and the noise per adapter. Measured +0.01 % (gpt2-tiny) and −0.002 %
// (llama-tiny, three adapters on one input) on 2026-12-01 (+2.3 % and +3.7 % before the plan's
// adapter terms were traced); asserted 6 % and −2 %.
TEST(LoraPlan, DropoutIsPlanned) {
  ab::LoraOptions lora = rank(4);
  lora.dropout = 0.1;
  for (const char* preset : {"gpt2-tiny", "llama-tiny"}) {
    const double e = plan_error(preset, ab::Precision::kFp32, ab::Precision::kFp32, lora, 4, 1, false);
    EXPECT_LT(e, 0.06) << preset;
    EXPECT_GT(e, -0.02) << preset;
  }
}

// bf16 adapters (--adapter-dtype bf16) against the counting allocator, oneDNN off: bf16 autocast
// over fp32 and bf16 weights, and bf16 weights without autocast; with and without checkpointing
// and dropout; both splits. Measured within 0.2 % (the drawn set: plan_properties.adapter_bf16).
TEST(LoraPlan, Bf16AdaptersWithinOnePercent) {
  for (const char* preset : {"gpt2-tiny", "llama-tiny", "qwen3-tiny"}) {
    for (const double dropout : {0.0, 0.1}) {
      ab::LoraOptions lora = rank(4);
      lora.dropout = dropout;
      lora.adapter_dtype = ab::Precision::kBf16;
      const std::pair<ab::Precision, ab::Precision> dtypes[] = {{ab::Precision::kBf16, ab::Precision::kFp32},
                                                                {ab::Precision::kBf16, ab::Precision::kBf16},
                                                                {ab::Precision::kFp32, ab::Precision::kBf16}};
      for (const auto& [precision, weights] : dtypes) {
        for (const auto& [micro, accum] : {std::pair<int64_t, int64_t>{4, 1}, {1, 4}}) {
          for (bool checkpointing : {false, true}) {
            const double e = accumbench_test::lora_plan_error("bf16 adapters", ab::find_preset(preset), precision, weights,
                                                              lora, micro, accum, checkpointing);
            EXPECT_LT(std::abs(e), 0.01) << preset << " " << ab::to_string(precision) << " weights "
                                         << ab::to_string(weights) << " dropout " << dropout << " " << micro << "x"
                                         << accum << (checkpointing ? " ckpt" : "");
          }
        }
      }
    }
  }
}
