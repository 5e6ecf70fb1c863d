// QLoRA's plan terms (quantized_base.hpp). The byte counts of the storage and of the
// dequantisation come from src/models/quantization.cpp, which cites bitsandbytes for each.
#include "plan/quantized_base.hpp"

#include <algorithm>
#include <array>

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
  if (q.kbit_upcast) {
    t.add("other parameters, upcast to fp32", "(P − N_linear)·4", (parameter_count(m) - linear) * kFp32,
          "norms, embeddings, head, biases: prepare_model_for_kbit_training casts them to fp32");
  } else {
    const int64_t w = compute_bytes(o.weights_dtype);
    t.add("other parameters", "(P − N_linear)·w", (parameter_count(m) - linear) * w,
          "norms, embeddings, head, biases in --weights-dtype (--kbit-prep none: no fp32 upcast)");
  }
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

// One block's int8 kept inputs, per linear group in forward order (kLinearGroups: the attention's
// input projections, its output projection, the MLP's input projections, its output projection):
// all of them, and those that are the input itself rather than a cast; in block 0 (`block0`)
// without the groups before its first adapter (its frozen prefix keeps none).
struct Int8Group {
  int64_t bytes = 0, themselves = 0;
};
using Int8Groups = std::array<Int8Group, kLinearGroups>;

Int8Groups int8_inputs(const ModelConfig& m, const PlanOptions& o, int64_t N, const Dtypes& dt, bool block0) {
  Int8Groups r;
  if (o.lora.base_quant != BaseQuant::kInt8) return r;
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
  const std::array<Group, kLinearGroups> groups =
      gpt2 ? std::array<Group, kLinearGroups>{Group{{"c_attn"}, d, w, FrozenPrefix::kInput},
                                              Group{{"attn_c_proj"}, a, c, FrozenPrefix::kAttention},
                                              Group{{"c_fc"}, d, w, FrozenPrefix::kToMlp},
                                              Group{{"mlp_c_proj"}, f, c, FrozenPrefix::kToMlpOut}}
           : std::array<Group, kLinearGroups>{Group{{"q", "k", "v"}, d, w, FrozenPrefix::kInput},
                                              Group{{"o"}, a, c, FrozenPrefix::kAttention},
                                              Group{{"gate", "up"}, d, w, FrozenPrefix::kToMlp},
                                              Group{{"down"}, f, c, FrozenPrefix::kToMlpOut}};
  const bool dropout = o.lora.dropout > 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    const Group& g = groups[i];
    // The attention output with flash attention: its kernel keeps it already (a view).
    if (g.in == a && g.bytes == c && o.attention == AttentionKind::kFlash && g.frozen_from == FrozenPrefix::kAttention) continue;
    // In block 0 an input that does not require grad makes no autograd node: nothing is kept.
    if (block0 && g.frozen_from != FrozenPrefix::kNone && dt.frozen_prefix >= g.frozen_from) continue;
    if (g.bytes != c) {
      // quantized_linear casts its input to the compute dtype: one cast per linear, each kept.
      r[i].bytes = static_cast<int64_t>(g.names.size()) * N * g.in * c;
    } else {
      // The input itself, kept once for the group; an adapter keeps the same tensor when it
      // takes it as it is (in the adapter's dtype, no dropout: x.to(fp32) of an fp32 input is no copy).
      const bool adapter_keeps_it =
          !dropout && c == dt.a &&
          std::any_of(g.names.begin(), g.names.end(), [&](const char* n) { return adapted_count(m, o, {n}) > 0; });
      r[i].bytes = r[i].themselves = adapter_keeps_it ? 0 : N * g.in * c;
    }
  }
  return r;
}

// Whether a group's input is one of the block forward's locals (block_tensors.cpp), or the
// moment's own input, where its moments count it already: all but GPT-2's ln_1(x), a temporary of
// c_attn's call that only int8's keeping holds on to.
bool input_is_local(const ModelConfig& m, size_t group) { return !(m.arch == Architecture::kGpt2 && group == 0); }

}  // namespace

int64_t int8_block_inputs(const ModelConfig& m, const PlanOptions& o, int64_t N, const Dtypes& dt, bool block0) {
  int64_t bytes = 0;
  for (const Int8Group& g : int8_inputs(m, o, N, dt, block0)) bytes += g.bytes;
  return bytes;
}

int64_t int8_kept_at(const ModelConfig& m, const PlanOptions& o, int64_t N, const Dtypes& dt, int groups_run, bool block0) {
  const Int8Groups groups = int8_inputs(m, o, N, dt, block0);
  int64_t bytes = 0;
  for (size_t i = 0; i < groups.size() && static_cast<int>(i) < groups_run; ++i)
    bytes += groups[i].bytes - (input_is_local(m, i) ? groups[i].themselves : 0);
  return bytes;
}

int64_t int8_kept_locals(const ModelConfig& m, const PlanOptions& o, int64_t N, const Dtypes& dt, bool block0) {
  const Int8Groups groups = int8_inputs(m, o, N, dt, block0);
  int64_t bytes = 0;
  for (size_t i = 0; i < groups.size(); ++i) bytes += input_is_local(m, i) ? groups[i].themselves : 0;
  return bytes;
}

int64_t int8_inputs_after_attention(const ModelConfig& m, const PlanOptions& o, int64_t N, const Dtypes& dt, bool block0) {
  return int8_block_inputs(m, o, N, dt, block0) - int8_inputs(m, o, N, dt, block0)[0].bytes;
}

int64_t int8_mlp_out_input(const ModelConfig& m, const PlanOptions& o, int64_t N, const Dtypes& dt) {
  return int8_inputs(m, o, N, dt, /*block0=*/false)[kLinearGroups - 1].bytes;
}

void int8_saved_inputs(const ModelConfig& m, const PlanOptions& o, int64_t N, int64_t layers, const Dtypes& dt,
                       const Table& t) {
  if (o.lora.base_quant != BaseQuant::kInt8 || layers <= 0) return;
  const int64_t total = (layers - 1) * int8_block_inputs(m, o, N, dt, false) + int8_block_inputs(m, o, N, dt, true);
  if (total > 0) {
    t.add("int8 base: the linears' kept inputs", dt.frozen_prefix != FrozenPrefix::kNone ? "(L−1)·Σ b·T·in·c + block 0's"
                                                                                        : "L·Σ b·T·in·c",
          total, "MatMul8bitLt keeps its input A (cast to c) for backward; none in block 0 before its first adapter");
  }
}

}  // namespace accumbench::plan_detail
