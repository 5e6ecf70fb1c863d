// Internal: the linear layer of every transformer block, with an optional LoRA adapter run as
// PEFT's lora.Linear.forward runs it (peft/tuners/lora/layer.py):
//
//   result = base(x)                                    weight (out, in) + bias, frozen with LoRA
//   x_a    = dropout(x.to(A's dtype))                   the adapter's own copy of its input
//   result = (result + B(A(x_a)) · alpha/r).to(result's dtype)
//
// Without an adapter it is torch::nn::Linear: the same parameters, names and initial draws
// (kaiming-uniform weight, uniform bias), so seeded models are unchanged.
//
// QLoRA (quantize_base): the frozen weight is replaced by its quantised storage
// (models/quantized_linear.hpp) and base(x) runs on a weight dequantised per use, as
// bitsandbytes' Linear4bit / Linear8bitLt; the adapter beside it is unchanged.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "models/quantized_linear.hpp"

namespace accumbench {

class AdaptedLinearImpl : public torch::nn::Module {
 public:
  AdaptedLinearImpl(int64_t in_features, int64_t out_features, bool bias);
  at::Tensor forward(const at::Tensor& x);  // (..., in) -> (..., out)

  // Adds the adapter: A (r, in) kaiming-uniform as PEFT, B (out, r) zero, or drawn from
  // N(0, 0.02) when `nonzero_b` (verify: so that gradients reach A too). Both drawn in fp32 and
  // stored in `dtype` (--adapter-dtype), on the base weight's device, registered as parameters
  // lora_A and lora_B.
  void add_adapter(int64_t rank, double scaling, double dropout, bool nonzero_b, at::ScalarType dtype = at::kFloat);
  bool adapted() const { return lora_A.defined(); }

  // Replaces the frozen weight parameter by its quantised storage (LoRA only: nothing trains it).
  // The weight is dequantised in autocast's dtype, or in fp32 without autocast (the dtype of the
  // model after prepare_model_for_kbit_training's upcast).
  void quantize_base(BaseQuant kind, bool double_quant);
  const QuantizedWeight* quantized() const { return quantized_.get(); }

  // The quantised storage is not a parameter or buffer (Module::to(dtype) would cast its integer
  // codes); moving the module moves it too.
  using torch::nn::Module::to;
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Device device, bool non_blocking = false) override;

  at::Tensor weight, bias, lora_A, lora_B;

 private:
  at::Tensor base(const at::Tensor& x);
  std::unique_ptr<QuantizedWeight> quantized_;
  at::ScalarType compute_dtype_ = at::kFloat;
  double scaling_ = 0.0;
  double dropout_ = 0.0;
};
TORCH_MODULE(AdaptedLinear);

}  // namespace accumbench
