// The plan's optimizer lines (--optimizer): the state each optimizer keeps, per trained tensor,
// and the largest step's temporaries, from optimizer_state.hpp's sizes, which are the engine's.
// The 8-bit state depends on each tensor's size (small tensors keep 32-bit state), so the
// trained tensors are listed one by one, as the modules register them (src/models/gpt2.cpp,
// llama.cpp, adapted_linear.cpp); tests/test_optimizers.cpp checks the list against the module.
#include <algorithm>
#include <utility>

#include "accumbench/optimizer_state.hpp"
#include "plan/block_tensors.hpp"

namespace accumbench::plan_detail {

std::vector<int64_t> trained_tensor_numels(const ModelConfig& m, const LoraOptions& lora) {
  std::vector<int64_t> numels;
  const int64_t d = m.d_model;
  if (lora.enabled()) {  // A (r, in) and B (out, r) of every target in every block
    for (int64_t layer = 0; layer < m.n_layers; ++layer) {
      for (const BlockLinear& l : lora_targets(m, lora.targets)) {
        numels.push_back(lora.rank * l.in);
        numels.push_back(l.out * lora.rank);
      }
    }
    return numels;
  }
  numels.push_back(m.vocab_size * d);  // token embedding
  if (m.arch == Architecture::kGpt2) numels.push_back(m.max_seq_len * d);  // learned positions
  for (int64_t layer = 0; layer < m.n_layers; ++layer) {
    for (const BlockLinear& l : block_linears(m)) {
      numels.push_back(l.in * l.out);
      const bool bias = m.arch == Architecture::kGpt2 || (m.qkv_bias && (l.name == "q" || l.name == "k" || l.name == "v")) ||
                        (m.o_bias && l.name == "o") || (m.mlp_bias && (l.name == "gate" || l.name == "up" || l.name == "down"));
      if (bias) numels.push_back(l.out);
    }
    // Norm weights (and GPT-2's LayerNorm biases): two per block, Qwen3's q and k norms.
    const int64_t norm_tensors = m.arch == Architecture::kGpt2 ? 4 : 2;
    for (int64_t i = 0; i < norm_tensors; ++i) numels.push_back(d);
    if (m.qk_norm) {
      numels.push_back(m.head_dim);
      numels.push_back(m.head_dim);
    }
  }
  for (int64_t i = 0; i < (m.arch == Architecture::kGpt2 ? 2 : 1); ++i) numels.push_back(d);  // final norm
  if (!m.tied_embeddings) numels.push_back(m.vocab_size * d);  // the head
  return numels;
}

void optimizer_state_lines(OptimizerKind kind, const std::vector<int64_t>& numels, int64_t t, const std::string& n_t,
                           bool cpu, const Table& resident, int64_t* evictable_bytes) {
  int64_t trained = 0;
  for (int64_t n : numels) trained += n;
  *evictable_bytes = 0;
  switch (kind) {
    case OptimizerKind::kAdamW:
    case OptimizerKind::kAdamWForeach:
      resident.add("AdamW exp_avg", n_t, trained * t, "first moment of what trains, allocated up front (src/engine/adamw.cpp)");
      resident.add("AdamW exp_avg_sq", n_t, trained * t, "second moment, allocated up front");
      return;
    case OptimizerKind::kSgd:
      resident.add("SGD state", "0", 0, "torch.optim.SGD without momentum keeps none (transformers' optim=\"sgd\")");
      return;
    case OptimizerKind::kAdamW8bit:
    case OptimizerKind::kPagedAdamW8bit:
    case OptimizerKind::kPagedAdamW32bit: break;
  }
  const bool paged = paged_optimizer(kind);
  int64_t codes = 0, paged_codes = 0, blocks = 0, small = 0, paged_small = 0;
  for (int64_t n : numels) {
    const bool pages = paged && n >= kPagedMinSize;
    if (eight_bit_state(kind, n)) {
      (pages ? paged_codes : codes) += n;
      blocks += quant_blocks(n);
    } else {
      (pages ? paged_small : small) += n;
    }
  }
  const std::string why_paged = cpu ? "bitsandbytes pages it only on CUDA; on the CPU it is ordinary memory"
                                    : "paged: the driver may evict it to host memory under pressure";
  if (paged_codes > 0) {
    resident.add("8-bit state1, state2 codes (paged)", "2·N8p·1", 2 * paged_codes,
                 "uint8 moments of tensors ≥ 1e5 elements; " + why_paged);
  }
  if (codes > 0) {
    resident.add("8-bit state1, state2 codes", paged ? "2·N8·1 (n < 1e5)" : "2·N8·1", 2 * codes,
                 "uint8 moments of tensors ≥ 4096 elements (bitsandbytes' min_8bit_size)");
  }
  if (blocks > 0) {
    resident.add("8-bit absmax1, absmax2", "2·Σ⌈n/256⌉·4", 2 * blocks * kFp32, "one fp32 scale per block of 256, per moment");
  }
  if (!eight_bit_optimizer(kind)) {  // bitsandbytes' optim_bits=32: fp32 moments for every tensor, no maps
    if (paged_small > 0) {
      resident.add("32-bit state1, state2 (paged)", "2·N32p·4", 2 * paged_small * kFp32,
                   "fp32 moments of tensors ≥ 1e5 elements; " + why_paged);
    }
    if (small > 0) {
      resident.add("32-bit state1, state2", "2·N32·4 (n < 1e5)", 2 * small * kFp32, "fp32 moments of the smaller tensors");
    }
    if (!cpu) *evictable_bytes = 2 * paged_small * kFp32;
    return;
  }
  if (paged_small + small > 0) {
    resident.add("32-bit state of small tensors", "2·N32·4", 2 * (small + paged_small) * kFp32,
                 "tensors under 4096 elements keep fp32 moments");
  }
  resident.add("dynamic quantisation maps", "2·(256+255)·4", kQuantMapBytes, "signed and unsigned maps and their midpoints");
  if (paged && !cpu) *evictable_bytes = 2 * paged_codes;
}

int64_t largest_step_temporaries(OptimizerKind kind, const std::vector<int64_t>& numels, int64_t t) {
  int64_t largest = 0;
  for (int64_t n : numels) largest = std::max(largest, optimizer_step_temporary_bytes(kind, n, t));
  return largest;
}

}  // namespace accumbench::plan_detail

namespace accumbench {

int64_t optimizer_state_total_bytes(const ModelConfig& cfg, const LoraOptions& lora, Precision weights_dtype,
                                    OptimizerKind kind) {
  // What trains: the adapters in --adapter-dtype, or every weight in --weights-dtype.
  const int64_t t = compute_bytes(lora.enabled() ? lora.adapter_dtype : weights_dtype);
  int64_t total = eight_bit_optimizer(kind) ? kQuantMapBytes : 0;  // the quantisation maps
  for (int64_t n : plan_detail::trained_tensor_numels(cfg, lora)) total += optimizer_state_bytes(kind, n, t);
  return total;
}

OptimizerKind lightest_optimizer(const ModelConfig& cfg, const WorkloadOptions& w) {
  // The smallest state; at equal state the fused kernel before foreach, whose step holds a copy
  // of what trains.
  const auto weight = [&](OptimizerKind kind) {
    return std::make_pair(optimizer_state_total_bytes(cfg, w.lora, w.weights_dtype, kind),
                          kind == OptimizerKind::kAdamWForeach);
  };
  OptimizerKind lightest = w.optimizer.kind;
  for (const OptimizerKind kind : grid_optimizers(w)) {
    if (weight(kind) < weight(lightest)) lightest = kind;
  }
  return lightest;
}

}  // namespace accumbench
