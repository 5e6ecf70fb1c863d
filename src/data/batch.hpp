// Pieces shared by the synthetic, token-file and real-data loaders (src/data/).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "accumbench/data.hpp"

namespace accumbench {

// Builds a batch from (B, T + 1) token windows: inputs are the first T, targets the last T
// (next-token prediction). Positions at or past a sequence's length get the ignore index.
TokenBatch make_batch(const at::Tensor& windows, const std::vector<int64_t>& lengths, bool pin);

// Throws UserError for a non-positive vocabulary, T or batch.
void check_shape(const DataOptions& options);

}  // namespace accumbench
