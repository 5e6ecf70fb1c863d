// QLoRA's plan terms (quantized_base.hpp). The byte counts of the storage and of the
// dequantisation come from src/models/quantization.cpp, which cites bitsandbytes for each.
#include "plan/quantized_base.hpp"

#include <algorithm>

namespace accumbench::plan_detail {

void quantized_resident(const ModelConfig& m, const PlanOptions& o, const Table& t) {
  const LoraOptions& q = o.lora;
  const int64_t linear = block_linear_weight_numel(m);
  if (q.base_quant == BaseQuant::kInt8) {
    t.add("quantised base: int8 weight, row scale", "L·Σ(out·in + out·4)", quantized_base_bytes(m, q),
          "LLM.int8 storage (load_in_8bit): int8 CB and an fp32 SCB per row, every block linear");
  } else {
    t.add(q.double_quant ? "quantised base: nf4 codes, 8-bit absmax" : "quantised base: nf4 codes, absmax",
          q.double_quant ? "L·Σ(⌈n/2⌉+⌈n/64⌉+⌈n/16384⌉·4+1092)" : "L·Σ(⌈n/2⌉+⌈n/64⌉·4+64)", quantized_base_bytes(m, q),
          q.double_quant ? "4-bit codes, uint8 absmax per 64; per 256 of them an fp32 absmax; offset, dynamic map, NF4 table"
                         : "4-bit codes two a byte, an fp32 absmax per 64 weights, the NF4 table per weight");
  }
  t.add("other parameters, upcast to fp32", "(P − N_linear)·4", (parameter_count(m) - linear) * kFp32,
        "norms, embeddings, head, biases: prepare_model_for_kbit_training casts them to fp32");
}

namespace {
// On the CPU an int8 weight dequantised into a 16-bit c is scaled in place by its fp32 row scale
// (mul_): TensorIterator computes that in fp32, through a copy of the weight and a result (CUDA
// casts inside the kernel).
bool cpu_upcast(const PlanOptions& o, int64_t c) { return o.cpu && o.lora.base_quant == BaseQuant::kInt8 && c != kFp32; }
}  // namespace

int64_t dequantized_linear_bytes(const PlanOptions& o, int64_t out, int64_t in, int64_t c) {
  return dequantized_weight_bytes(out, in, c, o.lora) + (cpu_upcast(o, c) ? 2 * out * in * kFp32 : 0);
}

int64_t dequant_transient(const ModelConfig& m, const PlanOptions& o, int64_t c, const Table& t) {
  int64_t largest = 0;
  std::string name;
  for (const BlockLinear& l : block_linears(m)) {
    const int64_t bytes = dequantized_linear_bytes(o, l.out, l.in, c);
    if (bytes > largest) largest = bytes, name = l.name;
  }
  t.add("dequantised weight (" + name + ") and scratch", cpu_upcast(o, c) ? "out·in·(c + 8) + out·4" : "out·in·c + chunk", largest,
        cpu_upcast(o, c) ? "each forward and backward of a quantised linear dequantises its weight, then frees it; the CPU "
                     "scales a 16-bit weight through two fp32 temporaries"
                   : "each forward and backward of a quantised linear dequantises its weight, then frees it");
  return largest;
}

namespace {

// One block's int8 kept inputs: all of them, block 0's (its frozen prefix keeps none) and those
// that are the input itself rather than a cast.
struct Int8Inputs {
  int64_t per_block = 0, block0 = 0, themselves = 0, themselves0 = 0;
  int64_t after_attention = 0, after_attention0 = 0;  // of the linears after the attention's product
  int64_t mlp_out = 0;                                // the MLP output projection's
};

Int8Inputs int8_inputs(const ModelConfig& m, const PlanOptions& o, int64_t N, const Dtypes& dt) {
  Int8Inputs r;
  // The groups of linears that read one input, the input's width and dtype (the norms' outputs
  // in the residual's w, the attention output and the MLP's activation in c), and the part of
  // block 0 (FrozenPrefix) from which that input requires grad there.
  struct Group {
    std::vector<const char*> names;
    int64_t in, bytes;
    FrozenPrefix frozen_from;
  };
  const bool gpt2 = m.arch == Architecture::kGpt2;
  const int64_t d = m.d_model, a = m.n_heads * m.head_dim, f = m.d_ff;
  const int64_t c = dt.c, w = dt.w;
  const std::vector<Group> groups =
      gpt2 ? std::vector<Group>{{{"c_attn"}, d, w, FrozenPrefix::kInput}, {{"attn_c_proj"}, a, c, FrozenPrefix::kAttention},
                                {{"c_fc"}, d, w, FrozenPrefix::kToMlp}, {{"mlp_c_proj"}, f, c, FrozenPrefix::kNone}}
           : std::vector<Group>{{{"q", "k", "v"}, d, w, FrozenPrefix::kInput}, {{"o"}, a, c, FrozenPrefix::kAttention},
                                {{"gate", "up"}, d, w, FrozenPrefix::kToMlp}, {{"down"}, f, c, FrozenPrefix::kNone}};
  const bool dropout = o.lora.dropout > 0;
  for (const Group& g : groups) {
    // The attention output with flash attention: its kernel keeps it already (a view).
    if (g.in == a && g.bytes == c && o.attention == AttentionKind::kFlash && g.frozen_from == FrozenPrefix::kAttention) continue;
    int64_t bytes = 0;
    if (g.bytes != c) {
      // quantized_linear casts its input to the compute dtype: one cast per linear, each kept.
      bytes = static_cast<int64_t>(g.names.size()) * N * g.in * c;
    } else {
      // The input itself, kept once for the group; an adapter keeps the same tensor when it
      // takes it as it is (fp32, no dropout: x.to(fp32) is no copy).
      const bool adapter_keeps_it =
          !dropout && c == kFp32 &&
          std::any_of(g.names.begin(), g.names.end(), [&](const char* n) { return adapted_count(m, o, {n}) > 0; });
      bytes = adapter_keeps_it ? 0 : N * g.in * c;
      r.themselves += bytes;
    }
    r.per_block += bytes;
    const bool after_attention = g.frozen_from != FrozenPrefix::kInput;
    if (after_attention) r.after_attention += bytes;
    if (g.frozen_from == FrozenPrefix::kNone) r.mlp_out = bytes;
    // In block 0 an input that does not require grad makes no autograd node: nothing is kept.
    if (g.frozen_from == FrozenPrefix::kNone || dt.frozen_prefix < g.frozen_from) {
      r.block0 += bytes;
      if (g.bytes == c) r.themselves0 += bytes;
      if (after_attention) r.after_attention0 += bytes;
    }
  }
  return r;
}

}  // namespace

int64_t int8_inputs_kept_as_themselves(const ModelConfig& m, const PlanOptions& o, int64_t N, const Dtypes& dt, bool block0) {
  if (o.lora.base_quant != BaseQuant::kInt8) return 0;
  const Int8Inputs inputs = int8_inputs(m, o, N, dt);
  return block0 ? inputs.themselves0 : inputs.themselves;
}

int64_t int8_inputs_after_attention(const ModelConfig& m, const PlanOptions& o, int64_t N, const Dtypes& dt, bool block0) {
  if (o.lora.base_quant != BaseQuant::kInt8) return 0;
  const Int8Inputs inputs = int8_inputs(m, o, N, dt);
  return block0 ? inputs.after_attention0 : inputs.after_attention;
}

int64_t int8_mlp_out_input(const ModelConfig& m, const PlanOptions& o, int64_t N, const Dtypes& dt) {
  return o.lora.base_quant == BaseQuant::kInt8 ? int8_inputs(m, o, N, dt).mlp_out : 0;
}

void int8_saved_inputs(const ModelConfig& m, const PlanOptions& o, int64_t N, int64_t layers, const Dtypes& dt,
                       const Table& t) {
  if (o.lora.base_quant != BaseQuant::kInt8 || layers <= 0) return;
  const Int8Inputs inputs = int8_inputs(m, o, N, dt);
  const int64_t total = (layers - 1) * inputs.per_block + inputs.block0;
  if (total > 0) {
    t.add("int8 base: the linears' kept inputs", dt.frozen_prefix != FrozenPrefix::kNone ? "(L−1)·Σ b·T·in·c + block 0's"
                                                                                        : "L·Σ b·T·in·c",
          total, "MatMul8bitLt keeps its input A (cast to c) for backward; none in block 0 before its first adapter");
  }
}

}  // namespace accumbench::plan_detail
