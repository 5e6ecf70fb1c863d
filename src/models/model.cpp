#include <torch/csrc/autograd/engine.h>
#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <regex>

#include "accumbench/models.hpp"
#include "compat/compat.hpp"
#include "models/blocks.hpp"

namespace accumbench {
namespace {

// The packed rows' tensors kept for a recompute (an autograd context holds IValues, not structs).
void save_packed(torch::autograd::AutogradContext* ctx, const PackedRows* packed) {
  if (packed == nullptr) return;
  const compat::DocumentLayout& a = packed->attention;
  for (const auto& [key, tensor] : {std::pair<const char*, at::Tensor>{"positions", a.positions},
                                    {"blocked", a.blocked}, {"cu_seqlens", a.cu_seqlens},
                                    {"rotary_cos", packed->rotary_cos}, {"rotary_sin", packed->rotary_sin}}) {
    if (tensor.defined()) ctx->saved_data[key] = tensor;
  }
  ctx->saved_data["max_seqlen"] = a.max_seqlen;
}

std::optional<PackedRows> load_packed(torch::autograd::AutogradContext* ctx) {
  if (ctx->saved_data.find("positions") == ctx->saved_data.end()) return std::nullopt;
  auto tensor = [&](const char* key) {
    const auto found = ctx->saved_data.find(key);
    return found == ctx->saved_data.end() ? at::Tensor() : found->second.toTensor();
  };
  PackedRows packed;
  packed.attention.positions = tensor("positions");
  packed.attention.blocked = tensor("blocked");
  packed.attention.cu_seqlens = tensor("cu_seqlens");
  packed.attention.max_seqlen = ctx->saved_data["max_seqlen"].toInt();
  packed.rotary_cos = tensor("rotary_cos");
  packed.rotary_sin = tensor("rotary_sin");
  return packed;
}

// Activation checkpointing: forward runs the block without building a graph and saves only its
// input (and the packed rows' layout, shared with the forward); backward recomputes the block with
// the autocast state of the forward, then backpropagates through the recomputed graph, which
// accumulates the block's parameter gradients directly (and fires their hooks), as PyTorch's
// reentrant torch.utils.checkpoint does. Unlike it, the recomputed output is let go before that
// inner backward: only its gradient edge is kept, so the block's backward holds what PyTorch's
// non-reentrant checkpoint holds (whose recompute keeps the saved tensors, not the output).
struct CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            TransformerBlockImpl* block, std::optional<at::ScalarType> autocast,
                            const PackedRows* packed) {
    ctx->save_for_backward({x});
    ctx->saved_data["block"] = reinterpret_cast<int64_t>(block);
    ctx->saved_data["autocast"] = autocast ? static_cast<int64_t>(*autocast) : int64_t{-1};
    save_packed(ctx, packed);
    return block->forward(x, packed);  // Function::apply runs forward with grad mode off
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    at::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    auto* block = reinterpret_cast<TransformerBlockImpl*>(ctx->saved_data["block"].toInt());
    const int64_t autocast_code = ctx->saved_data["autocast"].toInt();
    std::optional<at::ScalarType> autocast;
    if (autocast_code >= 0) autocast = static_cast<at::ScalarType>(autocast_code);
    const std::optional<PackedRows> packed = load_packed(ctx);
    torch::autograd::Edge output_edge;
    {
      torch::AutoGradMode enable_grad(true);
      compat::AutocastGuard guard(x.device().type(), autocast);
      output_edge = torch::autograd::impl::gradient_edge(block->forward(x, packed ? &*packed : nullptr));
    }  // the recomputed output is gone here; its graph lives on through the edge
    torch::autograd::Engine::get_default_engine().execute({output_edge}, {grad_outputs[0]}, /*keep_graph=*/false,
                                                          /*create_graph=*/false, /*accumulate_grad=*/true);
    return {x.grad(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor LanguageModelImpl::forward(const at::Tensor& tokens, const RowDocuments& documents) {
  return at::linear(final_hidden(tokens, documents), head_weight());  // (B, T, V)
}

at::Tensor LanguageModelImpl::run_block(TransformerBlockImpl& block, const at::Tensor& x, const PackedRows* packed) {
  if (checkpointing_ && is_training() && torch::GradMode::is_enabled()) {
    // Reentrant checkpointing needs an input that requires grad, or the block's output would not
    // either: with a frozen base (LoRA) the embeddings' output does not, so it is made to, as
    // transformers' enable_input_require_grads() does for PEFT models.
    const at::Tensor input = x.requires_grad() ? x : x.detach().requires_grad_(true);
    return CheckpointFunction::apply(input, &block, autocast_dtype_, packed);
  }
  return block.forward(x, packed);
}

void prepare_quantized_base(LanguageModelImpl& model, const LoraOptions& lora);

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

namespace {

at::ScalarType storage_dtype(Precision precision) {
  switch (precision) {
    case Precision::kFp32: return at::kFloat;
    case Precision::kBf16: return at::kBFloat16;
    case Precision::kFp16: return at::kHalf;
  }
  return at::kFloat;
}

}  // namespace

void configure_training(LanguageModelImpl& model, Precision weights_dtype, const LoraOptions& lora, bool nonzero_b) {
  if (weights_dtype != Precision::kFp32) model.to(storage_dtype(weights_dtype));
  if (!lora.enabled()) return;
  validate_lora(model.config(), lora);
  for (auto& p : model.parameters()) p.requires_grad_(false);
  std::vector<std::string> targets;
  for (const BlockLinear& l : lora_targets(model.config(), lora.targets)) targets.push_back(l.name);
  const double scaling = lora_scaling(lora);
  for (TransformerBlockImpl* block : model.transformer_blocks()) {
    for (auto& [name, linear] : block->linears()) {
      if (std::find(targets.begin(), targets.end(), name) != targets.end()) {
        linear->add_adapter(lora.rank, scaling, lora.dropout, nonzero_b, storage_dtype(lora.adapter_dtype));
      }
    }
  }
  if (lora.quantized()) prepare_quantized_base(model, lora);
}

void cast_weights(LanguageModelImpl& model, Precision weights_dtype, const LoraOptions& lora) {
  torch::NoGradGuard no_grad;
  const auto cast = [](const at::Tensor& t, at::ScalarType dtype) {
    if (t.defined() && t.is_floating_point() && t.scalar_type() != dtype) {
      TORCH_CHECK(!t.grad().defined(), "cast_weights: a parameter still holds its gradient");
      const_cast<at::Tensor&>(t).set_data(t.to(dtype));
    }
  };
  const at::ScalarType weights = storage_dtype(weights_dtype), adapters = storage_dtype(lora.adapter_dtype);
  // A quantised base is the same in every dtype (one --weights-dtype per sweep there): its
  // adapters alone are cast.
  for (const at::Tensor& p : model.parameters()) {
    if (lora.enabled() && p.requires_grad()) cast(p, adapters);
    else if (!lora.quantized()) cast(p, weights);
  }
  if (!lora.quantized()) {
    for (const at::Tensor& b : model.buffers()) cast(b, weights);
  }
}

// QLoRA, as transformers' from_pretrained(quantization_config=BitsAndBytesConfig(...)) and then
// PEFT's prepare_model_for_kbit_training (peft/utils/other.py at 5d602fd) leave a model:
// - every block linear's weight quantised (transformers replaces each nn.Linear but those
//   get_keys_to_not_convert names, by default the output head; the block linears are all the
//   nn.Linear modules our two families have besides the head);
// - every parameter left in 16 bits cast to fp32 ("cast all non INT8 parameters to fp32": the
//   norms, embeddings, head and the quantised linears' biases); the adapters already are;
// - gradient checkpointing on (use_gradient_checkpointing=True): the CLI turns on
//   --activation-checkpointing blocks (apply_base_quant_defaults, options.hpp).
// The adapters are drawn before the base is quantised, so a seeded run draws the same adapters.
void prepare_quantized_base(LanguageModelImpl& model, const LoraOptions& lora) {
  for (TransformerBlockImpl* block : model.transformer_blocks()) {
    for (auto& [name, linear] : block->linears()) linear->quantize_base(lora.base_quant, lora.double_quant);
  }
  if (!lora.kbit_upcast) return;  // --kbit-prep none: they stay in the weights' dtype
  torch::NoGradGuard no_grad;
  for (auto& p : model.parameters()) {
    // The adapters keep --adapter-dtype: PEFT prepares the model before it adds them, and TRL casts
    // them to bf16 after both.
    if (p.requires_grad()) continue;
    if (p.scalar_type() == at::kBFloat16 || p.scalar_type() == at::kHalf) p.set_data(p.to(at::kFloat));
  }
}

std::vector<at::Tensor> trainable_parameters(const torch::nn::Module& module) {
  std::vector<at::Tensor> trainable;
  for (const auto& p : module.parameters()) {
    if (p.requires_grad()) trainable.push_back(p);
  }
  return trainable;
}

std::vector<bool> weight_decay_flags(const torch::nn::Module& module) {
  std::vector<std::string> layer_norms;  // "h0.ln_1.": the nn.LayerNorm modules' prefixes
  for (const auto& item : module.named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    if (item.value()->as<torch::nn::LayerNorm>() != nullptr) layer_norms.push_back(item.key() + ".");
  }
  static const std::regex no_decay(R"(bias|layernorm|rmsnorm|(?:^|\.)norm(?:$|\.)|_norm(?:$|\.))");
  std::vector<bool> flags;
  for (const auto& item : module.named_parameters()) {
    if (!item.value().requires_grad()) continue;
    std::string name = item.key();
    const bool in_layer_norm = std::any_of(layer_norms.begin(), layer_norms.end(), [&name](const std::string& prefix) {
      return name.compare(0, prefix.size(), prefix) == 0;
    });
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    flags.push_back(!in_layer_norm && !std::regex_search(name, no_decay));
  }
  return flags;
}

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t total = 0;
  for (const auto& p : module.parameters()) total += p.numel();
  return total;
}

}  // namespace accumbench
