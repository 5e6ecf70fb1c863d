// LibTorch modules for the two families: GPT-2 and Llama (also Qwen2, Mistral, SmolLM2).
// Weights are random and seeded: time and memory do not depend on their values.
//
//   auto model = accumbench::build_model(accumbench::find_preset("gpt2-tiny"), /*seed=*/0);
//   model->to(torch::kCPU);
//   at::Tensor logits = model->forward(tokens);      // tokens (B, T) int64 -> logits (B, T, V)
//   logits = model->forward(tokens, {{3, 5}, {8}});  // packed rows: documents of 3 and 5 positions
//   model->set_activation_checkpointing(true);       // recompute each block in backward
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "accumbench/model_config.hpp"

namespace accumbench {

// One transformer block, (B, T, C) -> (B, T, C); defined in src/models/blocks.hpp.
class TransformerBlockImpl;
// What the blocks of one forward over packed rows share; defined in src/models/blocks.hpp.
struct PackedRows;

// Packed rows (--packing bfd): per row, the lengths of the documents it holds, in order. Their
// sum may fall short of T: the tail is padding. Empty: one sequence per row.
using RowDocuments = std::vector<std::vector<int64_t>>;

class LanguageModelImpl : public torch::nn::Module {
 public:
  explicit LanguageModelImpl(ModelConfig config) : config_(std::move(config)) {}
  // tokens: (B, T) int64 with T <= max_seq_len. Returns logits (B, T, V): the head applied to
  // final_hidden(tokens). With `documents`, positions and attention restart at each document.
  at::Tensor forward(const at::Tensor& tokens, const RowDocuments& documents = {});
  // The final norm's output (B, T, C), the head's input. The chunked cross-entropy
  // (src/engine/chunked_loss.cpp) takes it with head_weight() instead of the logits.
  virtual at::Tensor final_hidden(const at::Tensor& tokens, const RowDocuments& documents = {}) = 0;
  // The head's weight (V, C): the token embedding's when tied.
  virtual at::Tensor head_weight() const = 0;
  // The transformer blocks, first to last.
  virtual std::vector<TransformerBlockImpl*> transformer_blocks() = 0;

  const ModelConfig& config() const { return config_; }

  // Activation checkpointing per block: forward keeps only each block's input; backward
  // recomputes the block. `autocast_dtype` is the autocast state to recompute under.
  void set_activation_checkpointing(bool enabled) { checkpointing_ = enabled; }
  bool activation_checkpointing() const { return checkpointing_; }
  void set_autocast_dtype(std::optional<at::ScalarType> dtype) { autocast_dtype_ = dtype; }
  // Frees what forward keeps between calls (Llama's rotary tables, built for the last length and
  // dtype it saw), so that the next step starts from what a fresh model holds: a sweep calls it
  // before each split reads its baseline, whatever split ran before.
  virtual void release_caches() {}

 protected:
  // Runs `block` on x, through a checkpoint when enabled (src/models/model.cpp); `packed`: null
  // unless the rows are packed.
  at::Tensor run_block(TransformerBlockImpl& block, const at::Tensor& x, const PackedRows* packed);

  ModelConfig config_;
  bool checkpointing_ = false;
  std::optional<at::ScalarType> autocast_dtype_;
};

using LanguageModel = std::shared_ptr<LanguageModelImpl>;

// Builds the architecture of cfg.arch with weights drawn from a generator seeded by `seed`
// (GPT-2 init: normal(0, 0.02), residual projections scaled by 1/sqrt(2·L)).
LanguageModel build_model(const ModelConfig& cfg, uint64_t seed);

// How a run trains the model (options.hpp): every parameter is stored in `weights_dtype`; with
// LoRA every parameter is then frozen (no .grad, no optimizer state) and each target linear of
// every block gets an fp32 adapter (PEFT's defaults: A kaiming-uniform, B zero, or B drawn from
// N(0, 0.02) with `nonzero_b`, as verify needs so that gradients reach A). The adapters are drawn
// from the generator build_model seeded, after the base weights. With lora.base_quant (QLoRA)
// every block linear's weight is then quantised as bitsandbytes stores it and the parameters left
// in 16 bits are cast to fp32, as PEFT's prepare_model_for_kbit_training does (src/models/model.cpp).
// Throws UserError for a LoRA request that does not fit the model.
void configure_training(LanguageModelImpl& model, Precision weights_dtype, const LoraOptions& lora,
                        bool nonzero_b = false);

// A model configure_training left in one weights and adapter dtype, stored as configure_training
// would have stored it for `weights_dtype` and lora.adapter_dtype: every parameter (with LoRA every
// frozen one) and every floating buffer in the weights' dtype, the adapters in theirs; with a
// quantised base the adapters only (the base is the same in every dtype). A tensor already in its
// dtype is left as it is, so a cast that failed half-way (out of memory) completes on the next
// call. Gradients and the optimizer's state must be gone first: a trainer built before the cast
// does not serve after it.
void cast_weights(LanguageModelImpl& model, Precision weights_dtype, const LoraOptions& lora);

// The parameters that train: all of them, or the adapters' with LoRA.
std::vector<at::Tensor> trainable_parameters(const torch::nn::Module& module);
// One flag per parameter of trainable_parameters, in its order: whether the Trainer's weight decay
// acts on it. transformers' Trainer.get_decay_parameter_names leaves out every parameter of an
// nn.LayerNorm and every one whose lower-cased name matches bias, layernorm, rmsnorm, a "norm"
// module or a "_norm" one: GPT-2's ln_*, Llama's input_layernorm, post_attention_layernorm and
// norm, Qwen3's q_norm and k_norm, and every bias; the matrices, embeddings and LoRA adapters decay.
std::vector<bool> weight_decay_flags(const torch::nn::Module& module);

int64_t count_parameters(const torch::nn::Module& module);

}  // namespace accumbench
