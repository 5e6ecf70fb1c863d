// The chunked cross-entropy's sizing, shared by the engine (src/engine/chunked_loss.cpp) and the
// memory plan (src/plan), which must agree on it. No LibTorch here.
//
//   int64_t rows = loss_chunk_tokens(/*tokens=*/64 * 1024);   // 4096: 16 chunks
//   int64_t one = loss_chunk_tokens(/*tokens=*/8 * 128);      // 1024: the whole micro-batch
//   int64_t set = loss_chunk_tokens(/*tokens=*/8 * 128, 100);  // 100: --loss-chunk-tokens 100
//
// The chunked loss never materializes the (b·T, V) logits: the head's matmul, the softmax and
// the head's gradients run over `rows` tokens at a time, inside the forward. Liger-Kernel's fused
// linear cross-entropy (liger_kernel/ops/fused_linear_cross_entropy.py) makes a chunk's logits
// about as large as the hidden states, ⌈V/d⌉ chunks (66 for GPT-2); but every chunk also reads
// and writes the fp32 weight gradient (V·d) and launches several kernels, which at small micro-
// batches makes the step slower: GPT-2 124M at 1×8, T=128, with that rule's chunks of 2 tokens
// (`sweep --chunked-loss --loss-chunk-tokens 2`) takes 2.1× as long on the CPU. So: at most 16
// chunks (one chunk's fp32 logits are then 1/16 of one copy; the plain head holds three to four)
// and at least 1024 tokens per chunk (matmuls of 1024 × d × V stay efficient), a power of two.
#pragma once

#include <algorithm>
#include <cstdint>

namespace accumbench {

inline constexpr int64_t kMaxLossChunks = 16;
inline constexpr int64_t kMinLossChunkTokens = 1024;

// `requested` > 0 (--loss-chunk-tokens) overrides the rule; a chunk never exceeds the tokens.
inline int64_t loss_chunk_tokens(int64_t tokens, int64_t requested = 0) {
  const int64_t most = std::max<int64_t>(1, tokens);
  if (requested > 0) return std::min(requested, most);
  const int64_t wanted = std::max(kMinLossChunkTokens, (tokens + kMaxLossChunks - 1) / kMaxLossChunks);
  int64_t rows = 1;
  while (rows < wanted) rows *= 2;
  return std::min(rows, most);
}

}  // namespace accumbench
