// What each --optimizer keeps per trained tensor and what one tensor's step allocates on top:
// the sizes the engine's optimizers (src/engine/adamw.cpp, adamw8bit.cpp, optimizer.cpp) really
// have, in one torch-free place that the plan reads.
//
//   int64_t state = optimizer_state_bytes(OptimizerKind::kAdamW8bit, /*numel=*/1 << 20, /*param_bytes=*/4);
//   // 2·(2^20 + 4·4096) = 2,129,920: one byte per moment and element, a float absmax per block
//   int64_t peak = optimizer_step_temporary_bytes(OptimizerKind::kAdamW8bit, 1 << 20, 4);  // 12·2^20
#pragma once

#include <cstdint>

#include "accumbench/options.hpp"

namespace accumbench {

// bitsandbytes' 8-bit blockwise optimizers (bitsandbytes/optim/optimizer.py, Optimizer2State.init_state):
// one absmax per block of 256 elements ("blocksize = 256"), 32-bit state for tensors with fewer
// than min_8bit_size = 4096 elements (its default), and paged buffers only for tensors of at least
// 1e5 elements (Optimizer8bit.get_state_buffer: "if not self.is_paged or p.numel() < 1e5").
inline constexpr int64_t kQuantBlock = 256;
inline constexpr int64_t kMin8bitSize = 4096;
inline constexpr int64_t kPagedMinSize = 100000;
// Our emulation steps a tensor in passes of this many elements (a multiple of kQuantBlock), so the
// fp32 copies of the dequantised moments never exceed a few of them (the fused CUDA kernel has
// none); see optimizer_step_temporary_bytes.
inline constexpr int64_t kStepChunk = int64_t{1} << 20;
// The two dynamic quantisation maps (signed for the first moment, unsigned for the second), 256
// floats each, and the 255 midpoints between neighbours that quantisation searches, per map.
inline constexpr int64_t kQuantMapBytes = 2 * (256 + 255) * 4;

// Does the 8-bit optimizer keep this tensor's moments in 8 bits?
inline bool quantized_state(int64_t numel) { return numel >= kMin8bitSize; }
// Does `kind` keep this tensor's moments in 8 bits (an 8-bit optimizer, a tensor large enough)?
inline bool eight_bit_state(OptimizerKind kind, int64_t numel) {
  return eight_bit_optimizer(kind) && quantized_state(numel);
}
inline int64_t quant_blocks(int64_t numel) { return (numel + kQuantBlock - 1) / kQuantBlock; }

// Bytes of optimizer state for one trained tensor of `numel` elements stored in `param_bytes`
// per element: AdamW two moments in the parameter's dtype (torch.optim keeps them so);
// 8-bit AdamW two uint8 moments plus two float absmax per block, or two fp32 moments for small
// tensors; paged 32-bit AdamW two fp32 moments; SGD none. The shared quantisation maps of the
// 8-bit optimizers are not included (kQuantMapBytes, once).
int64_t optimizer_state_bytes(OptimizerKind kind, int64_t numel, int64_t param_bytes);
// The part of it that bitsandbytes' paged variants put in paged (evictable) memory: the two
// moment buffers of tensors with at least kPagedMinSize elements; absmax stays on the device.
int64_t paged_state_bytes(OptimizerKind kind, int64_t numel);
// The peak bytes one tensor's optimizer step allocates on top of the state and the gradient.
// AdamW, either kernel, stepping one tensor alone (the CPU's path, and every step inside backward,
// src/engine/adamw.cpp): sqrt(exp_avg_sq) and the denominator, 2·n·param_bytes (the fused CUDA
// kernel and the foreach lists of a whole step are the plan's, memory_plan.cpp). 8-bit AdamW,
// per pass of k = min(n, kStepChunk) elements: both moments dequantised to fp32 and one more
// k-sized fp32 tensor (the int32 codes being gathered, the denominator, or the new codes), 12·k;
// with 2-byte parameters also the fp32 copy of the gradient or of the parameter, 16·k. For its
// 32-bit small tensors, and every tensor of the 32-bit optimizer: the denominator (with 2-byte
// parameters also the parameter's fp32 copy). SGD: none (the update is in place).
int64_t optimizer_step_temporary_bytes(OptimizerKind kind, int64_t numel, int64_t param_bytes);

}  // namespace accumbench
