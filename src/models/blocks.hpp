// Internal: the block interface shared by GPT-2 and Llama, and the model constructors.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "accumbench/models.hpp"
#include "compat/compat.hpp"
#include "models/adapted_linear.hpp"

namespace accumbench {

// What the blocks of one forward over packed rows share, built once per forward: the attention
// layout and, for Llama, the rotary tables gathered at each token's own position.
struct PackedRows {
  compat::DocumentLayout attention;
  at::Tensor rotary_cos, rotary_sin;  // Llama: (B, 1, T, hd), broadcast over the heads
};

class TransformerBlockImpl : public torch::nn::Module {
 public:
  // (B, T, C) -> (B, T, C); `packed` is null unless the rows are packed.
  virtual at::Tensor forward(const at::Tensor& x, const PackedRows* packed) = 0;
  // The block's linears, named and ordered as block_linears() (model_config.hpp) names them.
  virtual std::vector<std::pair<std::string, AdaptedLinear>> linears() = 0;
};

// The MLP's activation as one fused op: gelu_new and gelu_pytorch_tanh are the same function
// (GELU, tanh approximation), which transformers computes in separate ops for gelu_new only.
inline at::Tensor mlp_activation(const at::Tensor& x, Activation activation) {
  switch (activation) {
    case Activation::kGeluNew:
    case Activation::kGeluTanh:
      return at::gelu(x, /*approximate=*/"tanh");
    case Activation::kGelu:
      return at::gelu(x);
    case Activation::kSilu:
      return at::silu(x);
  }
  return at::silu(x);  // unreachable: every Activation is handled above
}

LanguageModel build_gpt2(const ModelConfig& cfg);
LanguageModel build_llama(const ModelConfig& cfg);

}  // namespace accumbench
