// QLoRA: the frozen base stored as bitsandbytes stores it (--base-quant nf4|int8): the NF4 format
// against values worked out by hand from its table, the stored bytes against the closed forms,
// the quantised linear's gradient, prepare_model_for_kbit_training's upcast, verify's split
// invariance and the plan against the counting allocator.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <iostream>

#include "plan_error.hpp"
#include "accumbench/engine.hpp"
#include "accumbench/error.hpp"
#include "accumbench/models.hpp"
#include "accumbench/plan.hpp"
#include "accumbench/verify.hpp"
#include "models/blocks.hpp"
#include "models/quantized_linear.hpp"

namespace ab = accumbench;

namespace {

ab::LoraOptions qlora(ab::BaseQuant quant, bool double_quant = false, int64_t rank = 4) {
  ab::LoraOptions lora;
  lora.rank = rank;
  lora.base_quant = quant;
  lora.double_quant = double_quant;
  return lora;
}

}  // namespace

// One 64-block with absmax 2: values on the NF4 grid come back exactly, the others go to the
// nearest grid value; two codes a byte, the first in the high nibble (bitsandbytes' packing).
TEST(Nf4, RoundTripAgainstTheTableByHand) {
  std::vector<float> w(64, 0.0f);
  w[0] = -2.0f;   // -1.0 · 2: code 0
  w[1] = 2.0f;    // 1.0 · 2: code 15, and the block's absmax
  w[2] = 0.0f;    // code 7
  w[3] = 0.16f;   // 0.08 after scaling: nearest 0.0795803 (code 8), not 0.1609302 (code 9)
  w[4] = -0.75f;  // -0.375: between -0.3949175 (3) and -0.2844414 (4), nearer 3
  w[5] = 1.3f;    // 0.65: between 0.5626170 (13) and 0.7229568 (14), nearer 14 (midpoint 0.6428)
  const at::Tensor weight = torch::from_blob(w.data(), {1, 64}).clone();
  const ab::QuantizedWeight q = ab::quantize_weight(weight, ab::BaseQuant::kNf4, false);
  ASSERT_EQ(q.codes.numel(), 32);
  EXPECT_EQ(q.codes[0].item<int>(), 0x0F);  // codes 0, 15
  EXPECT_EQ(q.codes[1].item<int>(), 0x78);  // codes 7, 8
  EXPECT_EQ(q.codes[2].item<int>(), 0x3E);  // codes 3, 14
  EXPECT_EQ(q.codes[3].item<int>(), 0x77);  // zeros: code 7
  EXPECT_FLOAT_EQ(q.absmax[0].item<float>(), 2.0f);
  const at::Tensor back = ab::dequantize_weight(q, at::kFloat);
  EXPECT_FLOAT_EQ(back[0][0].item<float>(), -2.0f);
  EXPECT_FLOAT_EQ(back[0][1].item<float>(), 2.0f);
  EXPECT_FLOAT_EQ(back[0][2].item<float>(), 0.0f);
  EXPECT_FLOAT_EQ(back[0][3].item<float>(), 2.0f * 0.07958029955625534f);
  EXPECT_FLOAT_EQ(back[0][4].item<float>(), 2.0f * -0.39491748809814453f);
  EXPECT_FLOAT_EQ(back[0][5].item<float>(), 2.0f * 0.7229568362236023f);
  // In bf16 the same values, rounded once.
  const at::Tensor bf16 = ab::dequantize_weight(q, at::kBFloat16);
  EXPECT_EQ(bf16.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(at::equal(bf16, back.to(at::kBFloat16)));
}

// A random weight: every element within half a grid step of the block's scale, and a tail that is
// not a whole block (n = 3 · 37 = 111: one full block, a tail of 47, an odd count of codes).
TEST(Nf4, RandomWeightsWithinHalfAGridStep) {
  torch::manual_seed(0);
  for (auto [out, in] : {std::pair<int64_t, int64_t>{3, 37}, {64, 200}}) {
    const at::Tensor weight = torch::randn({out, in}) * 0.02;
    const ab::QuantizedWeight q = ab::quantize_weight(weight, ab::BaseQuant::kNf4, false);
    const at::Tensor back = ab::dequantize_weight(q, at::kFloat);
    const int64_t n = out * in, blocks = (n + 63) / 64;
    at::Tensor padded = torch::zeros({blocks * 64});
    padded.narrow(0, 0, n).copy_(weight.reshape(-1));
    const at::Tensor absmax = std::get<0>(padded.view({blocks, 64}).abs().max(1));
    EXPECT_TRUE(at::allclose(q.absmax, absmax));
    // The widest gap in the NF4 table is −0.6961928 − (−1) = 0.3038: half of it, times absmax.
    const at::Tensor scale = absmax.repeat_interleave(64).narrow(0, 0, n).view({out, in});
    EXPECT_LE(((back - weight).abs() / scale).max().item<double>(), 0.1520) << out << "x" << in;
  }
}

// Double quant: the absmax as uint8 codes of the dynamic map plus the nested state; dequantised,
// each absmax within the dynamic map's resolution (its widest step near 1 is 1/64: 0.8 %).
TEST(Nf4, DoubleQuantRestoresTheAbsmax) {
  const at::Tensor map = ab::dynamic_map();
  ASSERT_EQ(map.numel(), 256);
  EXPECT_FLOAT_EQ(map[255].item<float>(), 1.0f);
  EXPECT_TRUE(at::equal(std::get<0>(at::sort(map)), map));
  EXPECT_EQ((map == 0).sum().item<int64_t>(), 1);
  torch::manual_seed(1);
  const at::Tensor weight = torch::randn({128, 300});  // 600 blocks: 3 nested blocks, the last short
  const ab::QuantizedWeight plain = ab::quantize_weight(weight, ab::BaseQuant::kNf4, false);
  const ab::QuantizedWeight dq = ab::quantize_weight(weight, ab::BaseQuant::kNf4, true);
  EXPECT_EQ(dq.absmax.scalar_type(), at::kByte);
  EXPECT_EQ(dq.nested_absmax.numel(), 3);
  EXPECT_TRUE(at::equal(dq.codes, plain.codes));  // the codes do not depend on double quant
  const at::Tensor a = ab::dequantize_weight(plain, at::kFloat), b = ab::dequantize_weight(dq, at::kFloat);
  const double scale = plain.absmax.max().item<double>();
  EXPECT_LT(((a - b).abs().max().item<double>()) / scale, 0.01);
  EXPECT_GT((a - b).abs().max().item<double>(), 0.0);  // it is a quantisation
}

// The stored bytes are the closed forms of quantized_weight_bytes, element for element.
// LLM.int8's storage (Int8Params._quantize): the weight cast to fp16, then row_stats = max |row|
// and round(W·127/row) in fp32 from the fp16 values. Quantising the fp32 weight directly moves
// some codes by one (the check can tell the two apart).
TEST(Int8, QuantisesTheFp16CastAsBitsandbytes) {
  torch::manual_seed(7);
  const at::Tensor weight = torch::randn({513, 512}) * 0.02;
  const ab::QuantizedWeight q = ab::quantize_weight(weight, ab::BaseQuant::kInt8, false);
  const at::Tensor w16 = weight.to(at::kHalf).to(at::kFloat);
  const at::Tensor rows16 = std::get<0>(w16.abs().max(1));
  const at::Tensor codes16 = at::round(w16 * (127.0 / rows16).unsqueeze(1)).to(at::kChar);
  const at::Tensor rows32 = std::get<0>(weight.abs().max(1));
  const at::Tensor codes32 = at::round(weight * (127.0 / rows32).unsqueeze(1)).to(at::kChar);
  EXPECT_TRUE(torch::equal(q.absmax, rows16));
  EXPECT_TRUE(torch::equal(q.codes, codes16));
  EXPECT_GT(torch::ne(codes16, codes32).sum().item<int64_t>(), 0) << "the check could not tell the two apart";
}

TEST(QuantizedStorage, BytesAreExact) {
  for (auto [out, in] : {std::pair<int64_t, int64_t>{64, 64}, {3, 7}, {128, 300}, {176, 64}}) {
    for (bool dq : {false, true}) {
      const ab::QuantizedWeight q = ab::quantize_weight(torch::randn({out, in}), ab::BaseQuant::kNf4, dq);
      EXPECT_EQ(q.bytes(), ab::quantized_weight_bytes(out, in, qlora(ab::BaseQuant::kNf4, dq)).total()) << out << "x" << in;
    }
    const ab::QuantizedWeight q8 = ab::quantize_weight(torch::randn({out, in}), ab::BaseQuant::kInt8, false);
    EXPECT_EQ(q8.bytes(), ab::quantized_weight_bytes(out, in, qlora(ab::BaseQuant::kInt8)).total());
  }
  // By hand, 64×64 (4096 weights, 64 blocks): codes 2048, absmax 64·4, NF4 table 64 = 2368 bytes;
  // with double quant: absmax 64 uint8, one nested fp32 absmax 4, offset 4, dynamic map 1024,
  // table 64 = 3208. int8: 4096 + 64·4 = 4352. 3×7 (21 weights): 11 + 4 + 64 = 79.
  EXPECT_EQ(ab::quantized_weight_bytes(64, 64, qlora(ab::BaseQuant::kNf4)).total(), 2368);
  EXPECT_EQ(ab::quantized_weight_bytes(64, 64, qlora(ab::BaseQuant::kNf4, true)).total(), 3208);
  EXPECT_EQ(ab::quantized_weight_bytes(64, 64, qlora(ab::BaseQuant::kInt8)).total(), 4352);
  EXPECT_EQ(ab::quantized_weight_bytes(3, 7, qlora(ab::BaseQuant::kNf4)).total(), 79);
}

// The quantised linear computes x · Wᵀ on the dequantised weight, and its input gradient flows
// through the same weight; nothing else gets a gradient.
TEST(QuantizedLinear, ForwardAndInputGradientThroughTheDequantisedWeight) {
  torch::manual_seed(2);
  for (ab::BaseQuant kind : {ab::BaseQuant::kNf4, ab::BaseQuant::kInt8}) {
    const ab::QuantizedWeight q = ab::quantize_weight(torch::randn({48, 32}) * 0.02, kind, kind == ab::BaseQuant::kNf4);
    const at::Tensor bias = torch::randn({48});
    const at::Tensor x = torch::randn({2, 5, 32}, torch::requires_grad());
    const at::Tensor y = ab::quantized_linear(x, q, bias, at::kFloat);
    const at::Tensor w = ab::dequantize_weight(q, at::kFloat);
    EXPECT_TRUE(at::allclose(y, at::linear(x.detach(), w, bias), 1e-6, 1e-6));
    const at::Tensor g = torch::randn({2, 5, 48});
    y.backward(g);
    EXPECT_TRUE(at::allclose(x.grad(), at::matmul(g, w), 1e-6, 1e-6));
  }
}

// prepare_model_for_kbit_training: no block weight left as a parameter, the adapters the only
// trainable ones, every other parameter in fp32 even when the weights were loaded in bf16.
TEST(QuantizedStorage, ModelKeepsTheQuantisedBaseAndUpcastsTheRest) {
  for (const char* preset : {"gpt2-tiny", "llama-tiny"}) {
    const ab::ModelConfig cfg = ab::find_preset(preset);
    ab::LanguageModel model = ab::build_model(cfg, 0);
    ab::configure_training(*model, ab::Precision::kBf16, qlora(ab::BaseQuant::kNf4, true));
    int64_t stored = 0;
    for (ab::TransformerBlockImpl* block : model->transformer_blocks()) {
      for (auto& [name, linear] : block->linears()) {
        EXPECT_FALSE(linear->weight.defined()) << name;
        ASSERT_NE(linear->quantized(), nullptr);
        stored += linear->quantized()->bytes();
      }
    }
    EXPECT_EQ(stored, ab::quantized_base_bytes(cfg, qlora(ab::BaseQuant::kNf4, true))) << preset;
    for (const auto& p : model->named_parameters()) EXPECT_EQ(p.value().scalar_type(), at::kFloat) << p.key();
    int64_t trainable = 0;
    for (const at::Tensor& p : ab::trainable_parameters(*model)) trainable += p.numel();
    EXPECT_EQ(trainable, ab::lora_parameter_count(cfg, qlora(ab::BaseQuant::kNf4)));
    EXPECT_EQ(ab::count_parameters(*model), ab::parameter_count(cfg) - ab::block_linear_weight_numel(cfg) + trainable);
    // The trainer's weights (the memory breakdown's "parameters"): the fp32 rest, the adapters and
    // the quantised base, which is no parameter (it was counted as activations).
    ab::Trainer trainer(model, torch::kCPU, {});
    EXPECT_EQ(trainer.parameter_bytes(), 4 * ab::count_parameters(*model) + stored) << preset;
  }
}

// --kbit-prep none: the same quantised base, the other parameters left in the weights' dtype
// (bf16 here), the adapters fp32 as PEFT creates them; no checkpointing implied.
TEST(QuantizedStorage, WithoutPeftsPreparationTheRestKeepsItsDtype) {
  for (const char* preset : {"gpt2-tiny", "llama-tiny"}) {
    ab::LoraOptions lora = qlora(ab::BaseQuant::kNf4, true);
    lora.kbit_upcast = false;
    ab::LanguageModel model = ab::build_model(ab::find_preset(preset), 0);
    ab::configure_training(*model, ab::Precision::kBf16, lora);
    for (const auto& p : model->named_parameters()) {
      const bool adapter = p.key().find("lora_") != std::string::npos;
      EXPECT_EQ(p.value().scalar_type(), adapter ? at::kFloat : at::kBFloat16) << p.key();
    }
  }
  ab::WorkloadOptions w = ab::workload_defaults(ab::Command::kSweep);
  w.lora = qlora(ab::BaseQuant::kNf4);
  w.lora.kbit_upcast = false;
  ab::apply_base_quant_defaults(w, /*checkpointing_given=*/false);
  EXPECT_EQ(w.grid.checkpointing, ab::Checkpointing::kNone);
  EXPECT_EQ(ab::describe_workload(w).back(), (std::pair<std::string, std::string>{"kbit_prep", "none"}));
  // --tf32 off is recorded (on, the default, stands where a file lacks it).
  ab::WorkloadOptions off = w;
  off.tf32 = false;
  EXPECT_EQ(ab::describe_workload(off).back(), (std::pair<std::string, std::string>{"tf32", "off"}));
  EXPECT_EQ(ab::recorded_option({}, "tf32"), std::optional<std::string>("on"));
  EXPECT_EQ(ab::recorded_option({{"tf32", "off"}}, "tf32"), std::optional<std::string>("off"));
  EXPECT_EQ(ab::recorded_option({}, "lr"), std::nullopt);
  // Only with a quantised base, and only beside the autocast of the weights' own dtype.
  w.weights_dtype = ab::Precision::kBf16;
  w.precisions = {ab::Precision::kBf16};
  EXPECT_NO_THROW(ab::validate_workload(w));
  w.precisions = {ab::Precision::kFp32};
  EXPECT_THROW(ab::validate_workload(w), ab::UserError);
  w.precisions = {ab::Precision::kBf16};
  w.lora.base_quant = ab::BaseQuant::kNone;
  EXPECT_THROW(ab::validate_workload(w), ab::UserError);
  EXPECT_THROW(ab::kbit_upcast_from_string("trl"), ab::UserError);
}

// verify: the quantisation happens once, before the splits, so every split runs on the same
// weights and the fp32 tolerances of LoRA hold (checkpointed, as prepare_model_for_kbit_training).
TEST(QuantizedStorage, EverySplitEqualsTheWholeBatch) {
  for (const char* preset : {"gpt2-tiny", "llama-tiny"}) {
    for (ab::BaseQuant kind : {ab::BaseQuant::kNf4, ab::BaseQuant::kInt8}) {
      ab::WorkloadOptions w = ab::workload_defaults(ab::Command::kVerify);
      w.data.lengths = ab::LengthMode::kVariable;  // unequal lengths: the normalization shows
      w.model.preset = preset;
      w.seq_len = 32;
      w.batch = 8;
      w.device = "cpu";
      w.threads = 1;
      w.lora = qlora(kind, kind == ab::BaseQuant::kNf4);
      ab::apply_base_quant_defaults(w, /*checkpointing_given=*/false);
      EXPECT_EQ(w.grid.checkpointing, ab::Checkpointing::kBlocks);
      const ab::VerifyResult r = ab::run_verify(w);
      ASSERT_EQ(r.splits.size(), 4u);
      EXPECT_TRUE(r.all_pass) << preset;
      for (const ab::VerifySplit& s : r.splits) {
        EXPECT_LT(s.rel_l2_grad_error, 1e-5) << preset << " " << s.config.label();
        EXPECT_LT(s.rel_l2_update_error, 1e-3) << preset << " " << s.config.label();
      }
    }
  }
  // Without PEFT's fp32 upcast, in bf16 weights under bf16 autocast: verify's bf16 bar.
  ab::WorkloadOptions w = ab::workload_defaults(ab::Command::kVerify);
  w.data.lengths = ab::LengthMode::kVariable;
  w.model.preset = "llama-tiny";
  w.seq_len = 32;
  w.batch = 4;
  w.device = "cpu";
  w.threads = 1;
  w.weights_dtype = ab::Precision::kBf16;
  w.precisions = {ab::Precision::kBf16};
  w.lora = qlora(ab::BaseQuant::kNf4, true);
  w.lora.kbit_upcast = false;
  const ab::VerifyResult r = ab::run_verify(w);
  EXPECT_TRUE(r.all_pass);
  EXPECT_EQ(r.splits.size(), 3u);
}

TEST(QuantizedStorage, BaseQuantWithoutLoraIsAUserError) {
  ab::WorkloadOptions w = ab::workload_defaults(ab::Command::kSweep);
  w.lora.base_quant = ab::BaseQuant::kNf4;
  EXPECT_THROW(ab::validate_workload(w), ab::UserError);
  w.lora.rank = 4;
  EXPECT_NO_THROW(ab::validate_workload(w));
  w.lora.base_quant = ab::BaseQuant::kInt8;
  w.lora.double_quant = true;
  EXPECT_THROW(ab::validate_workload(w), ab::UserError);
  EXPECT_THROW(ab::base_quant_from_string("nf8"), ab::UserError);
}

// ---- the plan against the counting allocator ----

namespace {

double qlora_plan_error(const char* preset, ab::Precision precision, const ab::LoraOptions& lora, int64_t micro,
                        int64_t accum, bool checkpointing) {
  return accumbench_test::lora_plan_error("qlora plan", preset, precision, ab::Precision::kFp32, lora, micro, accum,
                                          checkpointing);
}

}  // namespace

// Without checkpointing, where LoRA's own terms hold: within 3 %, never under by more than 2 %.
// Measured on 2026-12-01: −0.01 % .. +0.09 % for nf4, nf4 + double quant and int8 (+0.64 % ..
// +2.79 % before the plan's terms were read off the live blocks).
TEST(QloraPlan, WithinThreePercentOfMeasured) {
  for (const char* preset : {"gpt2-tiny", "llama-tiny"}) {
    for (ab::Precision precision : {ab::Precision::kFp32, ab::Precision::kBf16}) {
      for (const ab::LoraOptions& lora : {qlora(ab::BaseQuant::kNf4), qlora(ab::BaseQuant::kNf4, true), qlora(ab::BaseQuant::kInt8)}) {
        for (auto [micro, accum] : {std::pair<int64_t, int64_t>{1, 2}, {4, 1}}) {
          const double e = qlora_plan_error(preset, precision, lora, micro, accum, false);
          EXPECT_LT(e, 0.03);
          EXPECT_GT(e, -0.02);
        }
      }
    }
  }
}

// With checkpointing (PEFT's default for a quantised base): measured −0.37 % .. +0.11 % on
// 2026-12-01 (−2.7 % .. +3.7 % under LoRA's old "larger pair alone" rule). Asserted: the
// plan-accuracy bar, 3 % and −2 %.
TEST(QloraPlan, CheckpointedWithinThreePercent) {
  for (const char* preset : {"gpt2-tiny", "llama-tiny"}) {
    for (ab::Precision precision : {ab::Precision::kFp32, ab::Precision::kBf16}) {
      for (auto [micro, accum] : {std::pair<int64_t, int64_t>{1, 2}, {4, 1}}) {
        const double e = qlora_plan_error(preset, precision, qlora(ab::BaseQuant::kNf4, true), micro, accum, true);
        EXPECT_LT(e, 0.03);
        EXPECT_GT(e, -0.02);
      }
    }
  }
}

// --kbit-prep none (TRL 1.x's SFTTrainer, axolotl after its cast back): the norms, embeddings
// and head stay in the weights' dtype. Under bf16 autocast, with and without checkpointing:
// measured −0.01 % .. +0.21 % on 2026-12-03; asserted: the plan-accuracy bar, 3 % and −2 %.
TEST(QloraPlan, WithoutTheFp32UpcastWithinThreePercent) {
  for (const char* preset : {"gpt2-tiny", "llama-tiny"}) {
    for (const ab::LoraOptions& base : {qlora(ab::BaseQuant::kNf4, true), qlora(ab::BaseQuant::kInt8)}) {
      ab::LoraOptions lora = base;
      lora.kbit_upcast = false;
      for (bool checkpointing : {false, true}) {
        // fp32 weights under bf16 autocast: the same bytes as PEFT's upcast (for fp32 weights
        // --kbit-prep changes nothing but the checkpointing default).
        for (ab::Precision weights : {ab::Precision::kBf16, ab::Precision::kFp32}) {
          for (auto [micro, accum] : {std::pair<int64_t, int64_t>{1, 2}, {4, 1}}) {
            const double e = accumbench_test::lora_plan_error("qlora plan, no upcast", ab::find_preset(preset),
                                                              ab::Precision::kBf16, weights, lora, micro, accum,
                                                              checkpointing);
            EXPECT_LT(e, 0.03);
            EXPECT_GT(e, -0.02);
          }
        }
      }
    }
  }
}
