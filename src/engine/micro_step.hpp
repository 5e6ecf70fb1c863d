// Pieces of one micro-step shared by the eager step (trainer.cpp) and the CUDA-graph capture
// (cuda_graph.cpp), so both run exactly the same operations.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>

#include <optional>

#include "accumbench/models.hpp"

namespace accumbench {

// Σ cross-entropy over the non-ignored targets of one micro-batch (a device scalar, fp32).
// inputs, targets: (b, T) int64 on the model's device. The model runs under autocast with
// `autocast` (none: fp32); the cross-entropy runs in fp32, as autocast runs it on CUDA.
// `chunked`: through chunked_cross_entropy (chunk_tokens: 0 for its rule) instead of the logits.
// `documents`: packed rows' documents (models.hpp), empty for one sequence per row. `counted`:
// the micro-batch's non-ignored targets when known on the host (chunked_cross_entropy), else -1.
at::Tensor summed_cross_entropy(LanguageModelImpl& model, const at::Tensor& inputs, const at::Tensor& targets,
                                c10::DeviceType device_type, std::optional<at::ScalarType> autocast,
                                bool chunked = false, int64_t chunk_tokens = 0, const RowDocuments& documents = {},
                                int64_t counted = -1);

// Σ cross-entropy of linear(hidden, weight) over the non-ignored targets, chunk by chunk of
// loss_chunk_tokens() tokens (src/engine/chunked_loss.cpp): the same value and gradients as the
// plain head, without the (b·T, V) logits. hidden (b, T, C), weight (V, C), targets (b, T);
// the head's matmuls run in `autocast` (none: fp32), softmax and sums in fp32. With gradients,
// they are computed in the forward and only scaled in backward, which may run once.
// chunk_tokens: 0 for loss_chunk_tokens(b·T)'s rule, else tokens per chunk (--loss-chunk-tokens).
// counted: the targets that are not ignored, known on the host (0 <= counted < b·T): the chunks
// run over those rows alone, gathered first, as TRL's chunked_nll runs them, so padding and masked
// labels cost no head product; -1 (or b·T): every row, in place (CUDA graphs: a fixed shape).
at::Tensor chunked_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets,
                                 std::optional<at::ScalarType> autocast, int64_t chunk_tokens = 0,
                                 int64_t counted = -1);

}  // namespace accumbench
