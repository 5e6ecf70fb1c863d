// FLOPs per token and device peaks for MFU.
#include "accumbench/throughput.hpp"

#include <cctype>
#include <cmath>
#include <limits>
#include <string>

namespace accumbench {

namespace {

// 12·L·H·Q·T: the attention scores QKᵀ and the weighted sum over values, forward and backward.
double attention_flops(const ModelConfig& cfg, int64_t seq_len) {
  return 12.0 * static_cast<double>(cfg.n_layers) * static_cast<double>(cfg.n_heads * cfg.head_dim) *
         static_cast<double>(seq_len);
}

// Weights of the blocks' matrices (what a recomputed block multiplies by).
double block_matrix_parameters(const ModelConfig& cfg) {
  double per_block = 0;
  for (const BlockLinear& l : block_linears(cfg)) per_block += static_cast<double>(l.in * l.out);
  return static_cast<double>(cfg.n_layers) * per_block;
}

}  // namespace

double flops_per_token(const ModelConfig& cfg, int64_t seq_len, const LoraOptions& lora) {
  if (lora.enabled()) {
    // A frozen base does its forward (2N) and the input gradients of its backward (2N), but no
    // weight gradients; the adapters train in full (6·N_lora). The attention term is unchanged:
    // freezing weights does not shrink the score and context matmuls (the accounting,
    // after PaLM appendix B).
    const double n = static_cast<double>(parameter_count(cfg));
    const double n_lora = static_cast<double>(lora_parameter_count(cfg, lora));
    return 4.0 * n + 6.0 * n_lora + attention_flops(cfg, seq_len);
  }
  // PaLM (Chowdhery et al. 2022), appendix B, as coded in nanoGPT's GPT.estimate_mfu():
  //   flops_per_token = 6*N + 12*L*H*Q*T
  // 6·N: each weight does one multiply-add (2 FLOPs) per token forward and twice that backward.
  // 12·L·H·Q·T: the attention scores QKᵀ and the weighted sum over values, which have no weights
  // and grow with the context length T. H·Q = n_heads·head_dim (== d_model for GPT-2).
  // N is the full parameter count, as in the PyTorch reference (shared/bench/pytorch_anchor.py),
  // so TFLOP/s compare one to one; nanoGPT drops the position embedding (a lookup, not a matmul),
  // which moves GPT-2 124M's figure by 0.6 % and RoPE models' not at all.
  const double n = static_cast<double>(parameter_count(cfg));
  return 6.0 * n + attention_flops(cfg, seq_len);
}

double recompute_flops_per_token(const ModelConfig& cfg, int64_t seq_len, const LoraOptions& lora) {
  // Activation checkpointing runs each block's forward once more in backward (Korthikanti et al.
  // 2022, "Reducing Activation Recomputation in Large Transformer Models", section 5: hardware
  // FLOPs = model FLOPs + one forward): 2 FLOPs per block weight, the adapters' too, and the
  // forward third of the attention term.
  const double n_lora = static_cast<double>(lora_parameter_count(cfg, lora));
  return 2.0 * (block_matrix_parameters(cfg) + n_lora) + attention_flops(cfg, seq_len) / 3.0;
}

double transformers_flops_per_token(const ModelConfig& cfg, const LoraOptions& lora) {
  // transformers' PreTrainedModel.floating_point_ops(): 6 · tokens · num_parameters(
  // exclude_embeddings=True), summed into TrainerState.total_flos. The embeddings are the
  // nn.Embedding modules: the token embedding (also the tied head) and GPT-2's positions. A PEFT
  // model counts its adapters among the parameters.
  double n = static_cast<double>(parameter_count(cfg) + lora_parameter_count(cfg, lora));
  n -= static_cast<double>(cfg.vocab_size * cfg.d_model);
  if (cfg.arch == Architecture::kGpt2) n -= static_cast<double>(cfg.max_seq_len * cfg.d_model);
  return 6.0 * n;
}

namespace {

constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

// Dense peaks in TFLOP/s from NVIDIA's datasheets. The datasheets print "with sparsity" figures
// (marked *); the dense figure is half of those. "fp32" is the TF32 tensor-core rate, which is
// what fp32 matmuls run at when TF32 is allowed; without TF32 the MFU reads low.
struct DevicePeak {
  const char* model;  // matched as a whole word inside the CUDA device name, first match wins
  double bf16;
  double fp16;
  double fp32;
};

// More specific names first: "H100 PCIe" before "H100".
constexpr DevicePeak kDevicePeaks[] = {
    // H100 datasheet (PCIe): BF16/FP16 1,513*, TF32 756*.
    {"H100 PCIe", 756.5, 756.5, 378.0},
    // H100 datasheet (NVL): BF16/FP16 1,671*, TF32 835*.
    {"H100 NVL", 835.5, 835.5, 417.5},
    // H100 SXM: datasheet BF16/FP16 1,979*, TF32 989*; the H100 architecture whitepaper
    // (table 1) gives the dense figures 989.4 and 494.7.
    {"H100", 989.4, 989.4, 494.7},
    // H200 datasheet (NVL): BF16/FP16 1,671*, TF32 835*.
    {"H200 NVL", 835.5, 835.5, 417.5},
    // H200 datasheet (SXM): BF16/FP16 1,979*, TF32 989*, the H100 SXM figures (same SMs).
    {"H200", 989.4, 989.4, 494.7},
    // A100 datasheet (SXM4 and PCIe): BF16/FP16 312, TF32 156 (dense).
    {"A100", 312.0, 312.0, 156.0},
    // L40S datasheet: BF16/FP16 733*, TF32 366*.
    {"L40S", 362.05, 362.05, 183.0},
    // L4 datasheet: BF16/FP16 242*, TF32 120*.
    {"L4", 121.0, 121.0, 60.0},
    // A10 datasheet: BF16/FP16 250*, TF32 125*. The A10G (AWS) is a different part, not listed.
    {"A10", 125.0, 125.0, 62.5},
    // Ada Lovelace architecture whitepaper, RTX 4090: FP16/BF16 tensor with FP32 accumulate
    // 165.2 (PyTorch accumulates in FP32), TF32 82.6.
    {"RTX 4090", 165.2, 165.2, 82.6},
    // V100 datasheet (PCIe): tensor 112, FP32 14; Volta has no BF16 or TF32.
    {"V100-PCIE", kNone, 112.0, 14.0},
    // V100 datasheet (SXM2): tensor 125, FP32 15.7.
    {"V100", kNone, 125.0, 15.7},
    // T4 datasheet: FP16 mixed precision 65, FP32 8.1; Turing has no BF16 or TF32.
    {"T4", kNone, 65.0, 8.1},
};

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "A10" must not match "A100" or "A10G", nor "L4" match "L40S": the match needs a non-
// alphanumeric character (or the end) on both sides.
bool contains_word(const std::string& haystack, const std::string& needle) {
  const auto is_word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  for (std::size_t pos = haystack.find(needle); pos != std::string::npos;
       pos = haystack.find(needle, pos + 1)) {
    const std::size_t end = pos + needle.size();
    const bool left_ok = pos == 0 || !is_word_char(haystack[pos - 1]);
    const bool right_ok = end == haystack.size() || !is_word_char(haystack[end]);
    if (left_ok && right_ok) return true;
  }
  return false;
}

}  // namespace

double device_peak_tflops(const std::string& device_name, const std::string& precision) {
  const std::string name = lowercase(device_name);
  for (const DevicePeak& peak : kDevicePeaks) {
    if (!contains_word(name, lowercase(peak.model))) continue;
    if (precision == "bf16") return peak.bf16;
    if (precision == "fp16") return peak.fp16;
    if (precision == "fp32") return peak.fp32;
    return kNone;
  }
  return kNone;  // "cpu" and devices without a datasheet entry: MFU is not reported
}

}  // namespace accumbench
