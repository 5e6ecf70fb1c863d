// AdamW (Loshchilov & Hutter 2019) as torch.optim.AdamW computes it, with per-parameter steps so
// that optimizer-in-backward can update one parameter inside its gradient hook. The moments are
// allocated up front, so the optimizer state is a constant part of every memory measurement.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "accumbench/engine.hpp"
#include "engine/optimizer.hpp"

namespace accumbench {

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<at::Tensor> params, OptimizerOptions options);

  // Updates every parameter with a defined gradient (fused multi-tensor kernel on CUDA 2.x).
  void step() override;
  // Updates parameter `index` from its current gradient.
  void step_one(size_t index) override;
  void reset() override;  // zero moments and step counts
  int64_t state_bytes() const override;

 private:
  OptimizerOptions options_;
  std::vector<at::Tensor> exp_avg_;
  std::vector<at::Tensor> exp_avg_sq_;
  std::vector<int64_t> step_count_;
  std::vector<at::Tensor> step_tensor_;  // float scalars on the device, for the fused kernel
  bool step_tensors_stale_ = true;       // step_count_ changed outside the fused path
};

}  // namespace accumbench
