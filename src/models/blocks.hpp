// Internal: the block interface shared by GPT-2 and Llama, and the model constructors.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "accumbench/models.hpp"
#include "models/adapted_linear.hpp"

namespace accumbench {

class TransformerBlockImpl : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& x) = 0;  // (B, T, C) -> (B, T, C)
  // The block's linears, named and ordered as block_linears() (model_config.hpp) names them.
  virtual std::vector<std::pair<std::string, AdaptedLinear>> linears() = 0;
};

LanguageModel build_gpt2(const ModelConfig& cfg);
LanguageModel build_llama(const ModelConfig& cfg);

}  // namespace accumbench
