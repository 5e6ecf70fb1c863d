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

int64_t dequant_transient(const ModelConfig& m, const PlanOptions& o, int64_t c, const Table& t) {
  int64_t largest = 0;
  std::string name;
  for (const BlockLinear& l : block_linears(m)) {
    const int64_t bytes = dequantized_weight_bytes(l.out, l.in, c, o.lora);
    if (bytes > largest) largest = bytes, name = l.name;
  }
  t.add("dequantised weight (" + name + ") and scratch", "out·in·c + chunk", largest,
        "each forward and backward of a quantised linear dequantises its weight, then frees it");
  return largest;
}

void int8_saved_inputs(const ModelConfig& m, const PlanOptions& o, int64_t N, int64_t layers, const Dtypes& dt,
                       const Table& t) {
  if (o.lora.base_quant != BaseQuant::kInt8 || layers <= 0) return;
  const std::vector<BlockLinear> all = block_linears(m);
  const std::vector<BlockLinear> adapted = lora_targets(m, o.lora.targets);
  auto is_adapted = [&](const std::string& name) {
    return std::any_of(adapted.begin(), adapted.end(), [&](const BlockLinear& l) { return l.name == name; });
  };
  int64_t bytes = 0;
  if (dt.autocast) {
    for (const BlockLinear& l : all) bytes += N * l.in * dt.c;  // one cast copy per linear
    t.add("int8 base: each linear's input cast", "L·Σ b·T·in·c", layers * bytes, "MatMul8bitLt keeps its input A for backward");
    return;
  }
  // The groups of linears that read one input: an adapter in the group already keeps it.
  const bool gpt2 = m.arch == Architecture::kGpt2;
  const std::vector<std::vector<const char*>> groups =
      gpt2 ? std::vector<std::vector<const char*>>{{"c_attn"}, {"attn_c_proj"}, {"c_fc"}, {"mlp_c_proj"}}
           : std::vector<std::vector<const char*>>{{"q", "k", "v"}, {"o"}, {"gate", "up"}, {"down"}};
  for (const auto& group : groups) {
    const std::string first = group.front();
    // The attention output: with flash attention its kernel keeps it already (a view).
    if ((first == "o" || first == "attn_c_proj") && o.attention == AttentionKind::kFlash) continue;
    if (std::any_of(group.begin(), group.end(), [&](const char* name) { return is_adapted(name); })) continue;
    const auto it = std::find_if(all.begin(), all.end(), [&](const BlockLinear& l) { return l.name == first; });
    bytes += N * it->in * dt.c;
  }
  if (bytes > 0) {
    t.add("int8 base: inputs no adapter keeps", "L·Σ b·T·in·4", layers * bytes, "MatMul8bitLt keeps its input A for backward");
  }
}

}  // namespace accumbench::plan_detail
