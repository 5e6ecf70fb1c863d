// GPT-2 (Radford et al. 2019; HF transformers modeling_gpt2.py): pre-LayerNorm blocks, learned
// positions, GELU-tanh MLP of width d_ff (or the config's activation), biases everywhere, head
// tied to the token embedding.
#include "models/blocks.hpp"

#include <cmath>

#include "compat/compat.hpp"

namespace accumbench {
namespace {

class Gpt2BlockImpl : public TransformerBlockImpl {
 public:
  explicit Gpt2BlockImpl(const ModelConfig& cfg)
      : n_heads_(cfg.n_heads), head_dim_(cfg.head_dim), activation_(cfg.activation) {
    const int64_t d = cfg.d_model;
    const int64_t attn = cfg.n_heads * cfg.head_dim;
    ln_1 = register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(cfg.norm_eps)));
    c_attn = register_module("c_attn", AdaptedLinear(d, 3 * attn, /*bias=*/true));
    attn_proj = register_module("attn_c_proj", AdaptedLinear(attn, d, /*bias=*/true));
    ln_2 = register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(cfg.norm_eps)));
    c_fc = register_module("c_fc", AdaptedLinear(d, cfg.d_ff, /*bias=*/true));
    mlp_proj = register_module("mlp_c_proj", AdaptedLinear(cfg.d_ff, d, /*bias=*/true));
  }

  at::Tensor forward(const at::Tensor& x, const PackedRows* packed) override {  // x: (B, T, C)
    const int64_t batch = x.size(0);
    const int64_t seq = x.size(1);
    const int64_t attn = n_heads_ * head_dim_;
    std::vector<at::Tensor> qkv = c_attn(ln_1(x)).split(attn, /*dim=*/2);  // 3 × (B, T, H·hd)
    auto heads = [&](const at::Tensor& t) {  // (B, T, H·hd) -> (B, H, T, hd)
      return t.view({batch, seq, n_heads_, head_dim_}).transpose(1, 2);
    };
    at::Tensor y = compat::causal_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]),
                                            packed != nullptr ? &packed->attention : nullptr, /*divide_scores=*/true);
    y = y.transpose(1, 2).reshape({batch, seq, attn});  // (B, T, H·hd)
    at::Tensor h = x + attn_proj(y);
    return h + mlp_proj(mlp_activation(c_fc(ln_2(h)), activation_));
  }

  std::vector<std::pair<std::string, AdaptedLinear>> linears() override {
    return {{"c_attn", c_attn}, {"attn_c_proj", attn_proj}, {"c_fc", c_fc}, {"mlp_c_proj", mlp_proj}};
  }

  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  AdaptedLinear c_attn{nullptr}, attn_proj{nullptr}, c_fc{nullptr}, mlp_proj{nullptr};

 private:
  int64_t n_heads_;
  int64_t head_dim_;
  Activation activation_;
};

class Gpt2Impl : public LanguageModelImpl {
 public:
  explicit Gpt2Impl(const ModelConfig& cfg) : LanguageModelImpl(cfg) {
    wte = register_module("wte", torch::nn::Embedding(cfg.vocab_size, cfg.d_model));
    wpe = register_module("wpe", torch::nn::Embedding(cfg.max_seq_len, cfg.d_model));
    for (int64_t i = 0; i < cfg.n_layers; ++i) {
      blocks.push_back(register_module("h" + std::to_string(i), std::make_shared<Gpt2BlockImpl>(cfg)));
    }
    ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg.d_model}).eps(cfg.norm_eps)));
    if (!cfg.tied_embeddings) {  // a config.json may untie GPT-2's head
      lm_head = register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(cfg.d_model, cfg.vocab_size).bias(false)));
    }
    init_weights();
  }

  at::Tensor final_hidden(const at::Tensor& tokens, const RowDocuments& documents) override {  // tokens: (B, T)
    const int64_t seq = tokens.size(1);
    TORCH_CHECK(seq <= config_.max_seq_len, "sequence length ", seq, " exceeds the model's ",
                config_.max_seq_len, " positions");
    std::optional<PackedRows> packed;
    at::Tensor positions = at::arange(seq, tokens.options().dtype(at::kLong));  // (T)
    if (!documents.empty()) {  // learned positions restart at each document, (B, T)
      packed = PackedRows{compat::document_layout(documents, seq, tokens.device()), {}, {}};
      positions = packed->attention.positions;
    }
    at::Tensor x = wte(tokens) + wpe(positions);  // (B, T, C)
    for (auto& block : blocks) x = run_block(*block, x, packed ? &*packed : nullptr);
    return ln_f(x);  // (B, T, C)
  }

  at::Tensor head_weight() const override { return config_.tied_embeddings ? wte->weight : lm_head->weight; }

  std::vector<TransformerBlockImpl*> transformer_blocks() override {
    std::vector<TransformerBlockImpl*> out;
    for (auto& block : blocks) out.push_back(block.get());
    return out;
  }

  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  std::vector<std::shared_ptr<Gpt2BlockImpl>> blocks;
  torch::nn::LayerNorm ln_f{nullptr};
  torch::nn::Linear lm_head{nullptr};

 private:
  // GPT-2 / nanoGPT init: N(0, 0.02) weights, zero biases, residual projections scaled by
  // 1/sqrt(2·L) so the residual stream's variance does not grow with depth.
  void init_weights() {
    torch::NoGradGuard no_grad;
    const double std = 0.02;
    const double residual_std = std / std::sqrt(2.0 * static_cast<double>(config_.n_layers));
    wte->weight.normal_(0.0, std);
    wpe->weight.normal_(0.0, 0.01);
    if (lm_head) lm_head->weight.normal_(0.0, std);
    for (auto& block : blocks) {
      for (AdaptedLinear* linear : {&block->c_attn, &block->attn_proj, &block->c_fc, &block->mlp_proj}) {
        (*linear)->weight.normal_(0.0, std);
        (*linear)->bias.zero_();
      }
      block->attn_proj->weight.normal_(0.0, residual_std);
      block->mlp_proj->weight.normal_(0.0, residual_std);
    }
  }
};

}  // namespace

LanguageModel build_gpt2(const ModelConfig& cfg) { return std::make_shared<Gpt2Impl>(cfg); }

}  // namespace accumbench
