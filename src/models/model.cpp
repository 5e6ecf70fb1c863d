#include <torch/torch.h>

#include "accumbench/models.hpp"
#include "compat/compat.hpp"
#include "models/blocks.hpp"

namespace accumbench {
namespace {

// Activation checkpointing as PyTorch's reentrant torch.utils.checkpoint: forward runs the block
// without building a graph and saves only its input; backward recomputes the block with the
// autocast state of the forward, then backpropagates through the recomputed graph, which
// accumulates the block's parameter gradients directly (and fires their hooks).
struct CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            TransformerBlockImpl* block, std::optional<at::ScalarType> autocast) {
    ctx->save_for_backward({x});
    ctx->saved_data["block"] = reinterpret_cast<int64_t>(block);
    ctx->saved_data["autocast"] = autocast ? static_cast<int64_t>(*autocast) : int64_t{-1};
    return block->forward(x);  // Function::apply runs forward with grad mode off
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    at::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    auto* block = reinterpret_cast<TransformerBlockImpl*>(ctx->saved_data["block"].toInt());
    const int64_t autocast_code = ctx->saved_data["autocast"].toInt();
    std::optional<at::ScalarType> autocast;
    if (autocast_code >= 0) autocast = static_cast<at::ScalarType>(autocast_code);
    at::Tensor y;
    {
      torch::AutoGradMode enable_grad(true);
      compat::AutocastGuard guard(x.device().type(), autocast);
      y = block->forward(x);
    }
    torch::autograd::backward({y}, {grad_outputs[0]});
    return {x.grad(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor LanguageModelImpl::forward(const at::Tensor& tokens) {
  return at::linear(final_hidden(tokens), head_weight());  // (B, T, V)
}

at::Tensor LanguageModelImpl::run_block(TransformerBlockImpl& block, const at::Tensor& x) {
  if (checkpointing_ && is_training() && torch::GradMode::is_enabled()) {
    return CheckpointFunction::apply(x, &block, autocast_dtype_);
  }
  return block.forward(x);
}

LanguageModel build_model(const ModelConfig& cfg, uint64_t seed) {
  validate(cfg);
  torch::manual_seed(seed);  // weights are drawn on the CPU generator, then moved by the caller
  switch (cfg.arch) {
    case Architecture::kGpt2:
      return build_gpt2(cfg);
    case Architecture::kLlama:
      return build_llama(cfg);
  }
  TORCH_CHECK(false, "unknown architecture");
}

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t total = 0;
  for (const auto& p : module.parameters()) total += p.numel();
  return total;
}

}  // namespace accumbench
