// Model FLOPs per token and dense device peaks, the two numbers behind achieved TFLOP/s and MFU
// (model FLOPs utilization). No LibTorch here.
//
//   double fpt = accumbench::flops_per_token(find_preset("gpt2-124m"), /*seq_len=*/1024);
//   double peak = accumbench::device_peak_tflops("NVIDIA H200", "bf16");   // 989
//   double mfu = fpt * tokens_per_second / 1e12 / peak;
#pragma once

#include <cstdint>
#include <string>

#include "accumbench/model_config.hpp"

namespace accumbench {

// Training FLOPs per token (forward + backward) of a dense decoder: 6·N for the weight matrices
// plus 12·L·(n_heads·head_dim)·T for attention scores and values, N = parameter_count(cfg).
// With LoRA (a frozen base): 4·N + 6·N_lora + the attention term.
double flops_per_token(const ModelConfig& cfg, int64_t seq_len, const LoraOptions& lora = {});
// What activation checkpointing adds per token (hardware FLOPs, not in MFU): one more forward of
// the blocks.
double recompute_flops_per_token(const ModelConfig& cfg, int64_t seq_len, const LoraOptions& lora = {});
// The figure transformers reports as total_flos per token: 6 · N without the embeddings.
double transformers_flops_per_token(const ModelConfig& cfg, const LoraOptions& lora = {});

// Dense (no structured sparsity) tensor-core peak in TFLOP/s for `precision` ("fp32" counts as
// TF32, "bf16", "fp16") on the CUDA device whose name contains a known model ("NVIDIA H200",
// "NVIDIA A100-SXM4-80GB", "Tesla T4"). NaN for "cpu", unknown devices, and precisions the device
// has no tensor-core path for (bf16 on T4/V100).
double device_peak_tflops(const std::string& device_name, const std::string& precision);

}  // namespace accumbench
