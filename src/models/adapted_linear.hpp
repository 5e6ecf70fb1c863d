// Internal: the linear layer of every transformer block, with an optional LoRA adapter run as
// PEFT's lora.Linear.forward runs it (peft/tuners/lora/layer.py):
//
//   result = base(x)                                    weight (out, in) + bias, frozen with LoRA
//   x_a    = dropout(x.to(A's dtype))                   the adapter's own copy of its input
//   result = (result + B(A(x_a)) · alpha/r).to(result's dtype)
//
// Without an adapter it is torch::nn::Linear: the same parameters, names and initial draws
// (kaiming-uniform weight, uniform bias), so seeded models are unchanged.
#pragma once

#include <torch/torch.h>

namespace accumbench {

class AdaptedLinearImpl : public torch::nn::Module {
 public:
  AdaptedLinearImpl(int64_t in_features, int64_t out_features, bool bias);
  at::Tensor forward(const at::Tensor& x);  // (..., in) -> (..., out)

  // Adds the adapter: A (r, in) kaiming-uniform as PEFT, B (out, r) zero, or drawn from
  // N(0, 0.02) when `nonzero_b` (verify: so that gradients reach A too). Both fp32, on the
  // base weight's device, registered as parameters lora_A and lora_B.
  void add_adapter(int64_t rank, double scaling, double dropout, bool nonzero_b);
  bool adapted() const { return lora_A.defined(); }

  at::Tensor weight, bias, lora_A, lora_B;

 private:
  double scaling_ = 0.0;
  double dropout_ = 0.0;
};
TORCH_MODULE(AdaptedLinear);

}  // namespace accumbench
