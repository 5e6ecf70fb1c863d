// AdamW (Loshchilov & Hutter 2019) as torch.optim.AdamW computes it, with per-parameter steps so
// that optimizer-in-backward can update one parameter inside its gradient hook. The moments are
// allocated up front, so the optimizer state is a constant part of every memory measurement.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "accumbench/engine.hpp"

namespace accumbench {

class AdamW {
 public:
  AdamW(std::vector<at::Tensor> params, OptimizerOptions options);

  // Updates every parameter with a defined gradient (fused multi-tensor kernel on CUDA 2.x).
  void step();
  // Updates parameter `index` from its current gradient.
  void step_one(size_t index);
  // set_to_none frees the gradients (torch.optim's default); otherwise they are zeroed in place.
  void zero_grad(bool set_to_none);
  void reset();      // zero moments and step counts
  int64_t state_bytes() const;
  const std::vector<at::Tensor>& params() const { return params_; }

 private:
  std::vector<at::Tensor> params_;
  OptimizerOptions options_;
  std::vector<at::Tensor> exp_avg_;
  std::vector<at::Tensor> exp_avg_sq_;
  std::vector<int64_t> step_count_;
  std::vector<at::Tensor> step_tensor_;  // float scalars on the device, for the fused kernel
  bool step_tensors_stale_ = true;       // step_count_ changed outside the fused path
};

}  // namespace accumbench
