#include "engine/adamw.hpp"

#include <cmath>

#include "compat/compat.hpp"

namespace accumbench {

AdamW::AdamW(std::vector<at::Tensor> params, OptimizerOptions options)
    : Optimizer(std::move(params)), options_(options), foreach_(options.kind == OptimizerKind::kAdamWForeach) {
  torch::NoGradGuard no_grad;
  for (const auto& p : params_) {
    // Moments in fp32 like the parameters (torch.optim keeps them in the parameter's dtype).
    exp_avg_.push_back(torch::zeros_like(p, at::MemoryFormat::Preserve));
    exp_avg_sq_.push_back(torch::zeros_like(p, at::MemoryFormat::Preserve));
    step_count_.push_back(0);
  }
}

void AdamW::step_one(size_t index) {
  torch::NoGradGuard no_grad;
  at::Tensor& param = params_[index];
  const at::Tensor& grad = param.grad();
  if (!grad.defined()) return;
  const OptimizerOptions& o = options_;
  const int64_t step = ++step_count_[index];
  step_tensors_stale_ = true;
  // torch.optim.adamw._single_tensor_adamw, term by term (its group's weight decay: none on the
  // biases and norm weights, as the Trainer groups them).
  if (decays(index)) param.mul_(1.0 - o.lr * o.weight_decay);
  exp_avg_[index].mul_(o.beta1).add_(grad, 1.0 - o.beta1);
  exp_avg_sq_[index].mul_(o.beta2).addcmul_(grad, grad, 1.0 - o.beta2);
  const double bias_correction1 = 1.0 - std::pow(o.beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(o.beta2, static_cast<double>(step));
  const double step_size = o.lr / bias_correction1;
  at::Tensor denom = (exp_avg_sq_[index].sqrt() / std::sqrt(bias_correction2)).add_(o.eps);
  param.addcdiv_(exp_avg_[index], denom, -step_size);
}

void AdamW::step() {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
  std::vector<size_t> indices;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    indices.push_back(i);
  }
  if (foreach_) {
    step_foreach(indices);
    return;
  }
  if (!indices.empty() && params_[indices.front()].is_cuda()) {
    if (step_tensor_.empty()) {
      for (const auto& p : params_) step_tensor_.push_back(torch::zeros({}, p.options().dtype(at::kFloat)));
      step_tensors_stale_ = true;
    }
    if (step_tensors_stale_) {  // after per-parameter steps (optimizer-in-backward) or a reset
      for (size_t i = 0; i < params_.size(); ++i) step_tensor_[i].fill_(static_cast<double>(step_count_[i]));
      step_tensors_stale_ = false;
    }
    for (size_t i : indices) {
      params.push_back(params_[i]);
      grads.push_back(params_[i].grad());
      exp_avgs.push_back(exp_avg_[i]);
      exp_avg_sqs.push_back(exp_avg_sq_[i]);
      steps.push_back(step_tensor_[i]);
    }
    // The fused kernel reads the already-incremented step, as torch.optim increments first. One
    // call per parameter group, as torch.optim makes them: the decayed, then the rest.
    at::_foreach_add_(steps, 1.0);
    const auto group = [&](bool decayed) {
      std::vector<at::Tensor> p, g, m, v, t;
      for (size_t k = 0; k < indices.size(); ++k) {
        if (decays(indices[k]) != decayed) continue;
        p.push_back(params[k]), g.push_back(grads[k]), m.push_back(exp_avgs[k]), v.push_back(exp_avg_sqs[k]), t.push_back(steps[k]);
      }
      return p.empty() || compat::fused_adamw(p, g, m, v, t, options_.lr, options_.beta1, options_.beta2,
                                             decayed ? options_.weight_decay : 0.0, options_.eps);
    };
    const bool decayed_fused = group(true);
    if (decayed_fused && group(false)) {
      for (size_t i : indices) ++step_count_[i];
      return;
    }
    // No fused kernel in this build: one tensor at a time. Should only the decayed group have gone
    // through it, that group keeps its step (stepped twice, it would move twice as far).
    if (decayed_fused) {
      for (size_t i : indices) {
        if (decays(i)) ++step_count_[i];
      }
      step_tensors_stale_ = true;
      for (size_t i : indices) {
        if (!decays(i)) step_one(i);
      }
      return;
    }
    at::_foreach_sub_(steps, 1.0);
  }
  for (size_t i : indices) step_one(i);
}

// torch.optim.adamw._multi_tensor_adamw (foreach=True, capturable=False), list by list: every
// moment update in place, then sqrt(exp_avg_sq) of all parameters at once (one more copy of what
// trains), divided by the bias corrections in place; PyTorch 1.x adds eps out of place (a second
// copy: `denom = torch._foreach_add(exp_avg_sq_sqrt, eps)`), 2.x in place. The first moment is
// mul_ + add_ as 1.x writes it (2.x's lerp_ rounds differently, allocates the same).
void AdamW::step_foreach(const std::vector<size_t>& indices) {
  if (indices.empty()) return;
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs;
  std::vector<at::Scalar> correction2_sqrt, step_size;
  for (size_t i : indices) {
    params.push_back(params_[i]);
    grads.push_back(params_[i].grad());
    exp_avgs.push_back(exp_avg_[i]);
    exp_avg_sqs.push_back(exp_avg_sq_[i]);
    const auto step = static_cast<double>(++step_count_[i]);
    correction2_sqrt.emplace_back(std::sqrt(1.0 - std::pow(options_.beta2, step)));
    step_size.emplace_back(-options_.lr / (1.0 - std::pow(options_.beta1, step)));
  }
  step_tensors_stale_ = true;
  const OptimizerOptions& o = options_;
  // The decay of the decayed group only (the Trainer's groups); every other line is the same
  // for both groups, so one list runs them, with torch's temporaries of the whole list.
  std::vector<at::Tensor> decayed;
  for (size_t k = 0; k < indices.size(); ++k) {
    if (decays(indices[k])) decayed.push_back(params[k]);
  }
  if (!decayed.empty()) at::_foreach_mul_(decayed, 1.0 - o.lr * o.weight_decay);
  at::_foreach_mul_(exp_avgs, o.beta1);
  at::_foreach_add_(exp_avgs, grads, 1.0 - o.beta1);
  at::_foreach_mul_(exp_avg_sqs, o.beta2);
  at::_foreach_addcmul_(exp_avg_sqs, grads, grads, 1.0 - o.beta2);
  std::vector<at::Tensor> denom = at::_foreach_sqrt(exp_avg_sqs);
  at::_foreach_div_(denom, correction2_sqrt);
  if (compat::libtorch_major_version() >= 2) {
    at::_foreach_add_(denom, o.eps);
  } else {
    denom = at::_foreach_add(denom, o.eps);  // the sqrt list is freed only when denom is replaced
  }
  at::_foreach_addcdiv_(params, exp_avgs, denom, step_size);
}

void AdamW::reset() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    exp_avg_[i].zero_();
    exp_avg_sq_[i].zero_();
    step_count_[i] = 0;
  }
  step_tensors_stale_ = true;
}

int64_t AdamW::state_bytes() const {
  int64_t total = 0;
  for (size_t i = 0; i < params_.size(); ++i) total += exp_avg_[i].nbytes() + exp_avg_sq_[i].nbytes();
  return total;
}

}  // namespace accumbench
