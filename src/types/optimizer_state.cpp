// Sizes of each optimizer's state and step temporaries (optimizer_state.hpp). The engine's
// optimizers allocate exactly these; tests/test_optimizers.cpp checks them against the tensors.
#include "accumbench/optimizer_state.hpp"

#include <algorithm>

namespace accumbench {

int64_t optimizer_state_bytes(OptimizerKind kind, int64_t numel, int64_t param_bytes) {
  switch (kind) {
    case OptimizerKind::kAdamW:
    case OptimizerKind::kAdamWForeach: return 2 * numel * param_bytes;
    case OptimizerKind::kAdamW8bit:
    case OptimizerKind::kPagedAdamW8bit:
    case OptimizerKind::kPagedAdamW32bit:
      // bitsandbytes: state1/state2 uint8 like the parameter, absmax1/absmax2 float32 per block;
      // below min_8bit_size, and with optim_bits=32 always, both states are float32 (whatever
      // the parameter's dtype).
      return eight_bit_state(kind, numel) ? 2 * numel + 2 * quant_blocks(numel) * 4 : 2 * numel * 4;
    case OptimizerKind::kSgd: return 0;
  }
  return 0;
}

int64_t paged_state_bytes(OptimizerKind kind, int64_t numel) {
  if (!paged_optimizer(kind) || numel < kPagedMinSize) return 0;
  return eight_bit_state(kind, numel) ? 2 * numel : 2 * numel * 4;
}

int64_t optimizer_step_temporary_bytes(OptimizerKind kind, int64_t numel, int64_t param_bytes) {
  switch (kind) {
    case OptimizerKind::kAdamW:
    case OptimizerKind::kAdamWForeach: return 2 * numel * param_bytes;
    case OptimizerKind::kAdamW8bit:
    case OptimizerKind::kPagedAdamW8bit:
    case OptimizerKind::kPagedAdamW32bit: {
      const int64_t k = std::min(numel, kStepChunk);
      const int64_t copies = param_bytes == 4 ? 0 : 4 * k;  // the gradient's or the parameter's fp32 copy
      return eight_bit_state(kind, numel) ? 12 * k + copies : 4 * k + copies;
    }
    case OptimizerKind::kSgd: return 0;
  }
  return 0;
}

}  // namespace accumbench
