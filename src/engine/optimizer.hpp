// The optimizer interface the Trainer steps (--optimizer): per-parameter steps, so that
// optimizer-in-backward can update one parameter inside its gradient hook, and a whole-step
// entry point that may group parameters (AdamW's fused kernel on CUDA 2.x).
//
//   std::unique_ptr<Optimizer> opt = make_optimizer(params, options);   // options.kind picks it
//   opt->step();                    // every parameter with a gradient
//   opt->zero_grad(/*set_to_none=*/true);
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "accumbench/options.hpp"

namespace accumbench {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Updates every parameter with a defined gradient.
  virtual void step();
  // Updates parameter `index` from its current gradient (no-op without one).
  virtual void step_one(size_t index) = 0;
  // set_to_none frees the gradients (torch.optim's default); otherwise they are zeroed in place.
  void zero_grad(bool set_to_none);
  virtual void reset() = 0;  // the state as freshly built (zero moments, step counts)
  virtual int64_t state_bytes() const = 0;
  const std::vector<at::Tensor>& params() const { return params_; }
  // Which parameters the weight decay acts on, one flag per parameter (empty: every one), as the
  // Trainer's two parameter groups split them (weight_decay_flags, models.hpp).
  void set_decays(std::vector<bool> decays) { decays_ = std::move(decays); }

 protected:
  explicit Optimizer(std::vector<at::Tensor> params) : params_(std::move(params)) {}
  bool decays(size_t index) const { return decays_.empty() || decays_[index]; }
  std::vector<at::Tensor> params_;
  std::vector<bool> decays_;
};

// The optimizer `options.kind` names over `params` (engine/adamw.cpp, adamw8bit.cpp, sgd.cpp).
// `decays`: which of them the weight decay acts on (empty: all), set_decays.
std::unique_ptr<Optimizer> make_optimizer(std::vector<at::Tensor> params, const OptimizerOptions& options,
                                          std::vector<bool> decays = {});

}  // namespace accumbench
