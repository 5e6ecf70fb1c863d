// The optimizer interface's shared parts, plain SGD, and the factory behind --optimizer.
#include "engine/optimizer.hpp"

#include <torch/torch.h>

#include "engine/adamw.hpp"
#include "engine/adamw8bit.hpp"

namespace accumbench {

void Optimizer::step() {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].grad().defined()) step_one(i);
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  if (set_to_none) {
    for (auto& p : params_) p.mutable_grad().reset();
    return;
  }
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (auto& p : params_) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  at::_foreach_zero_(grads);
}

namespace {

// transformers' optim="sgd" is torch.optim.SGD(params, lr=learning_rate) with the Trainer's
// weight decay in the parameter groups (Trainer.get_optimizer_cls_and_kwargs): momentum 0,
// dampening 0, no Nesterov, so no state at all. torch.optim.sgd._single_tensor_sgd computes
// d_p = g + wd·p, p −= lr·d_p; here the same update is written p·(1 − lr·wd) − lr·g, in place,
// so no tensor of the parameter's size is allocated (the plan's SGD step has no temporaries).
class Sgd : public Optimizer {
 public:
  Sgd(std::vector<at::Tensor> params, OptimizerOptions options) : Optimizer(std::move(params)), options_(options) {}

  void step_one(size_t index) override {
    torch::NoGradGuard no_grad;
    at::Tensor& param = params_[index];
    const at::Tensor& grad = param.grad();
    if (!grad.defined()) return;
    if (options_.weight_decay != 0 && decays(index)) param.mul_(1.0 - options_.lr * options_.weight_decay);
    param.add_(grad, -options_.lr);
  }
  void reset() override {}
  int64_t state_bytes() const override { return 0; }

 private:
  OptimizerOptions options_;
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(std::vector<at::Tensor> params, const OptimizerOptions& options,
                                          std::vector<bool> decays) {
  TORCH_CHECK(decays.empty() || decays.size() == params.size(), "one weight-decay flag per parameter");
  std::unique_ptr<Optimizer> optimizer;
  switch (options.kind) {
    case OptimizerKind::kAdamW:
    case OptimizerKind::kAdamWForeach: optimizer = std::make_unique<AdamW>(std::move(params), options); break;
    case OptimizerKind::kAdamW8bit:
    case OptimizerKind::kPagedAdamW8bit:
    case OptimizerKind::kPagedAdamW32bit: optimizer = std::make_unique<AdamW8bit>(std::move(params), options); break;
    case OptimizerKind::kSgd: optimizer = std::make_unique<Sgd>(std::move(params), options); break;
  }
  TORCH_CHECK(optimizer, "unknown optimizer kind");
  optimizer->set_decays(std::move(decays));
  return optimizer;
}

}  // namespace accumbench
