#include "engine/gradient_clipping.hpp"

#include <ATen/ATen.h>

#include <map>

#include "compat/compat.hpp"

namespace accumbench {

at::Tensor clip_gradient_norm(const std::vector<at::Tensor>& params, double max_norm) {
  // torch.nn.utils.clip_grad_norm_ groups the gradients by device and dtype (every trained
  // parameter of a trainer is on one device) and takes each group's norms in the group's dtype.
  std::map<at::ScalarType, std::vector<at::Tensor>> groups;
  for (const at::Tensor& p : params) {
    if (p.grad().defined()) groups[p.grad().scalar_type()].push_back(p.grad());
  }
  if (groups.empty()) return {};
  std::vector<at::Tensor> norms;
  for (const auto& [dtype, grads] : groups) {
    for (at::Tensor& norm : at::_foreach_norm(grads, 2)) norms.push_back(std::move(norm));
  }
  const at::Tensor total = at::linalg_vector_norm(at::stack(norms), 2);
  // max_norm / (total + 1e-6) as Python's Tensor.__rtruediv__ computes it, reciprocal() * max_norm,
  // clamped to 1: in place on one scalar, so that no more than it outlives the stack.
  at::Tensor coefficient = total + 1e-6;
  coefficient.reciprocal_().mul_(max_norm).clamp_max_(1.0);
  for (auto& [dtype, grads] : groups) compat::foreach_mul_(grads, coefficient);
  return total;
}

}  // namespace accumbench
