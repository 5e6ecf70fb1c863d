// Gradient clipping by the global L2 norm, as torch.nn.utils.clip_grad_norm_(params, max_norm)
// computes it (PyTorch 2.x, norm_type 2): each gradient's norm in its own dtype (one foreach norm
// per dtype), the norm of those norms, then every gradient scaled in place by
// clamp(max_norm / (norm + 1e-6), max=1). No host sync: the coefficient stays on the device.
//
//   at::Tensor norm = clip_gradient_norm(params, 1.0);   // before clipping; undefined without gradients
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace accumbench {

// Clips the defined .grad of `params` so that their global L2 norm is at most `max_norm` (> 0);
// returns that norm before clipping as a device scalar (undefined when no gradient is defined).
at::Tensor clip_gradient_norm(const std::vector<at::Tensor>& params, double max_norm);

}  // namespace accumbench
