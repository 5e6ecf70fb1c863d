// Internal: the block interface shared by GPT-2 and Llama, and the model constructors.
#pragma once

#include <torch/torch.h>

#include "accumbench/models.hpp"

namespace accumbench {

class TransformerBlockImpl : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& x) = 0;  // (B, T, C) -> (B, T, C)
};

LanguageModel build_gpt2(const ModelConfig& cfg);
LanguageModel build_llama(const ModelConfig& cfg);

}  // namespace accumbench
