// AdaptedLinear (adapted_linear.hpp).
#include "models/adapted_linear.hpp"

#include <cmath>

#include "compat/compat.hpp"

namespace accumbench {

AdaptedLinearImpl::AdaptedLinearImpl(int64_t in_features, int64_t out_features, bool with_bias) {
  // torch::nn::LinearImpl::reset() and reset_parameters(), draw for draw.
  weight = register_parameter("weight", torch::empty({out_features, in_features}));
  bias = with_bias ? register_parameter("bias", torch::empty(out_features))
                   : register_parameter("bias", {}, /*requires_grad=*/false);
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (with_bias) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    torch::nn::init::uniform_(bias, -bound, bound);
  }
}

void AdaptedLinearImpl::add_adapter(int64_t rank, double scaling, double dropout, bool nonzero_b, at::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  const auto fp32 = weight.options().dtype(at::kFloat);
  lora_A = register_parameter("lora_A", torch::empty({rank, weight.size(1)}, fp32));
  lora_B = register_parameter("lora_B", torch::zeros({weight.size(0), rank}, fp32));
  torch::nn::init::kaiming_uniform_(lora_A, std::sqrt(5.0));  // PEFT's reset_lora_parameters
  if (nonzero_b) lora_B.normal_(0.0, 0.02);
  // Drawn in fp32 and then cast, as PEFT draws its nn.Linear layers before moving them to the base's
  // dtype, and TRL casts param.data after get_peft_model.
  if (dtype != at::kFloat) {
    lora_A.set_data(lora_A.to(dtype));
    lora_B.set_data(lora_B.to(dtype));
  }
  scaling_ = scaling;
  dropout_ = dropout;
}

void AdaptedLinearImpl::quantize_base(BaseQuant kind, bool double_quant) {
  compute_dtype_ = at::kFloat;  // the upcast model's dtype (prepare_model_for_kbit_training)
  quantized_ = std::make_unique<QuantizedWeight>(quantize_weight(weight, kind, double_quant));
  // The full-precision weight is gone, as transformers' load_in_4bit / load_in_8bit never keeps it.
  parameters_.erase("weight");
  weight = at::Tensor();
}

void AdaptedLinearImpl::to(torch::Device device, torch::Dtype dtype, bool non_blocking) {
  torch::nn::Module::to(device, dtype, non_blocking);
  if (quantized_) quantized_->to(device);
}

void AdaptedLinearImpl::to(torch::Device device, bool non_blocking) {
  torch::nn::Module::to(device, non_blocking);
  if (quantized_) quantized_->to(device);
}

// The frozen base's output: a plain linear, or (QLoRA) one on the weight dequantised in the
// compute dtype: autocast's, or without autocast the bias's (fp32 after prepare_model_for_kbit_
// training's upcast; bitsandbytes' bnb_4bit_compute_dtype).
at::Tensor AdaptedLinearImpl::base(const at::Tensor& x) {
  if (!quantized_) return at::linear(x, weight, bias);
  const std::optional<at::ScalarType> autocast = compat::active_autocast_dtype(x.device().type());
  return quantized_linear(x, *quantized_, bias, autocast.value_or(compute_dtype_));
}

at::Tensor AdaptedLinearImpl::forward(const at::Tensor& x) {
  at::Tensor result = base(x);
  if (!lora_A.defined()) return result;
  at::Tensor input = x.to(lora_A.scalar_type());  // a copy only when x is in another dtype
  // PEFT uses nn.Identity for p = 0: no mask, no copy.
  if (dropout_ > 0.0 && is_training()) input = at::dropout(input, dropout_, /*train=*/true);
  const at::Tensor delta = at::linear(at::linear(input, lora_A), lora_B) * scaling_;
  return (result + delta).to(result.scalar_type());
}

}  // namespace accumbench
