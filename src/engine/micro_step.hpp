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
at::Tensor summed_cross_entropy(LanguageModelImpl& model, const at::Tensor& inputs, const at::Tensor& targets,
                                c10::DeviceType device_type, std::optional<at::ScalarType> autocast);

}  // namespace accumbench
