// Pieces shared by the synthetic, token-file and real-data loaders (src/data/).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "accumbench/data.hpp"

namespace accumbench {

// What a row of a batch is (data.hpp's two conventions): a window of T + 1 tokens trains all of
// its `length` positions; a sample of `length` tokens trains length - 1, its last position
// predicting nothing.
enum class RowKind { kWindow, kSample };

// Builds a batch from (B, T + 1) token rows: inputs are the first T, targets the last T
// (next-token prediction). Positions at or past a row's length get the ignore index, and a
// sample's last position too.
TokenBatch make_batch(const at::Tensor& windows, const std::vector<int64_t>& lengths, RowKind kind, bool pin);

// Throws UserError for a non-positive vocabulary, T or batch.
void check_shape(const DataOptions& options);

}  // namespace accumbench
