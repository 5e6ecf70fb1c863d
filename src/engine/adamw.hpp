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

  // Updates every parameter with a defined gradient: --optimizer adamw with the fused kernel on
  // CUDA 2.x (one tensor at a time elsewhere), adamw-foreach with torch's foreach kernels.
  void step() override;
  // Updates parameter `index` from its current gradient, alone (optimizer-in-backward; PyTorch's
  // recipe builds one optimizer per parameter with foreach=False), whichever kernel step() uses.
  void step_one(size_t index) override;
  void reset() override;  // zero moments and step counts
  int64_t state_bytes() const override;

 private:
  void step_foreach(const std::vector<size_t>& indices);

  OptimizerOptions options_;
  bool foreach_ = false;  // --optimizer adamw-foreach
  std::vector<at::Tensor> exp_avg_;
  std::vector<at::Tensor> exp_avg_sq_;
  std::vector<int64_t> step_count_;
  std::vector<at::Tensor> step_tensor_;  // float scalars on the device, for the fused kernel
  bool step_tensors_stale_ = true;       // step_count_ changed outside the fused path
};

}  // namespace accumbench
