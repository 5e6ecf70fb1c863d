// Llama family (HF transformers modeling_llama.py; Qwen2 and Mistral share it): pre-RMSNorm
// blocks, rotary position embeddings, grouped-query attention, SwiGLU MLP, no biases except
// Qwen2's q/k/v projections and what attention_bias (q/k/v/o) and mlp_bias add, head tied or untied.
#include "models/blocks.hpp"

#include <cmath>

#include "compat/compat.hpp"

namespace accumbench {
namespace {

// RMSNorm as HF computes it: in fp32, then back to the input dtype before the weight.
class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int64_t dim, double eps) : eps_(eps) {
    weight = register_parameter("weight", torch::ones({dim}));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor xf = x.to(at::kFloat);
    at::Tensor normed = xf * at::rsqrt(xf.pow(2).mean(/*dim=*/{-1}, /*keepdim=*/true) + eps_);
    return weight * normed.to(x.scalar_type());
  }
  at::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RmsNorm);

// The rotary inverse frequencies, in fp32 as transformers computes them (modeling_rope_utils.py:
// _compute_default_rope_parameters and the linear, llama3 and yarn rescalings; dynamic is the
// default up to its original length, and check_sequence_length refuses beyond).
at::Tensor inverse_frequencies(int64_t head_dim, double theta, const RopeScaling& rope) {
  const auto f32 = torch::TensorOptions().dtype(at::kFloat);
  const double dim = static_cast<double>(head_dim);
  const at::Tensor exponents = at::arange(0, head_dim, 2, torch::TensorOptions().dtype(at::kLong)).to(at::kFloat) / dim;
  at::Tensor inv_freq = 1.0 / at::pow(theta, exponents);
  switch (rope.type) {
    case RopeType::kDefault:
    case RopeType::kDynamic:
      return inv_freq;
    case RopeType::kLinear:
      return inv_freq / rope.factor;
    case RopeType::kLlama3: {
      // Wavelengths shorter than original/high_freq_factor are kept, longer than
      // original/low_freq_factor divided by factor, and those between blended smoothly.
      const double original = static_cast<double>(rope.original_max_positions);
      const double low_wavelen = original / rope.low_freq_factor, high_wavelen = original / rope.high_freq_factor;
      const at::Tensor wavelen = 2 * M_PI / inv_freq;
      at::Tensor scaled = at::where(wavelen > low_wavelen, inv_freq / rope.factor, inv_freq);
      const at::Tensor smooth = (original / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor);
      const at::Tensor smoothed = (1 - smooth) * scaled / rope.factor + smooth * scaled;
      const at::Tensor medium = (wavelen >= high_wavelen).logical_and(wavelen <= low_wavelen);
      return at::where(medium, smoothed, scaled);
    }
    case RopeType::kYarn: {
      // Interpolated (÷ factor) below the correction range's dimensions, extrapolated (kept)
      // above it, a linear ramp between.
      const double original = static_cast<double>(rope.original_max_positions);
      auto correction_dim = [&](double rotations) {
        return dim * std::log(original / (rotations * 2 * M_PI)) / (2 * std::log(theta));
      };
      double low = correction_dim(rope.beta_fast), high = correction_dim(rope.beta_slow);
      if (rope.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, dim - 1);
      if (low == high) high += 0.001;  // transformers' guard against a zero-width ramp
      const at::Tensor ramp = ((at::arange(head_dim / 2, f32) - low) / (high - low)).clamp(0, 1);
      const at::Tensor extrapolation = 1 - ramp;
      const at::Tensor pos_freqs = at::pow(theta, exponents);
      return (1.0 / (rope.factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation;
    }
  }
  return inv_freq;
}

// cos/sin tables of rotary embeddings for the sequence length in use (not for max positions:
// Llama 3.2's 131,072-position table would cost 64 MiB for nothing).
class RotaryCache {
 public:
  RotaryCache(int64_t head_dim, double theta, const RopeScaling& rope)
      : head_dim_(head_dim), theta_(theta), rope_(rope) {}

  // Returns (cos, sin), each (T, hd), on `like`'s device in `like`'s dtype.
  std::pair<at::Tensor, at::Tensor> get(int64_t seq, const at::Tensor& like) {
    if (!cos_.defined() || cos_.size(0) != seq || cos_.device() != like.device() ||
        cos_.scalar_type() != like.scalar_type()) {
      torch::NoGradGuard no_grad;
      auto f32 = torch::TensorOptions().dtype(at::kFloat);
      const at::Tensor inv_freq = inverse_frequencies(head_dim_, theta_, rope_);
      at::Tensor freqs = at::outer(at::arange(seq, f32), inv_freq);  // (T, hd/2)
      at::Tensor angles = at::cat({freqs, freqs}, /*dim=*/-1);          // (T, hd)
      at::Tensor cos = angles.cos(), sin = angles.sin();
      if (rope_.attention_factor != 1.0) {  // YaRN's magnitude correction
        cos = cos * rope_.attention_factor;
        sin = sin * rope_.attention_factor;
      }
      cos_ = cos.to(like.device(), like.scalar_type());
      sin_ = sin.to(like.device(), like.scalar_type());
    }
    return {cos_, sin_};
  }
  void release() {
    cos_ = at::Tensor();
    sin_ = at::Tensor();
  }

 private:
  int64_t head_dim_;
  double theta_;
  RopeScaling rope_;
  at::Tensor cos_, sin_;
};

at::Tensor rotate_half(const at::Tensor& x) {
  std::vector<at::Tensor> halves = x.chunk(2, /*dim=*/-1);
  return at::cat({-halves[1], halves[0]}, /*dim=*/-1);
}

class LlamaBlockImpl : public TransformerBlockImpl {
 public:
  LlamaBlockImpl(const ModelConfig& cfg, std::shared_ptr<RotaryCache> rotary)
      : n_heads_(cfg.n_heads), n_kv_heads_(cfg.n_kv_heads), head_dim_(cfg.head_dim),
        activation_(cfg.activation), rotary_(std::move(rotary)) {
    const int64_t d = cfg.d_model;
    auto linear = [](int64_t in, int64_t out, bool bias) { return AdaptedLinear(in, out, bias); };
    input_layernorm = register_module("input_layernorm", RmsNorm(d, cfg.norm_eps));
    q_proj = register_module("q_proj", linear(d, n_heads_ * head_dim_, cfg.qkv_bias));
    k_proj = register_module("k_proj", linear(d, n_kv_heads_ * head_dim_, cfg.qkv_bias));
    v_proj = register_module("v_proj", linear(d, n_kv_heads_ * head_dim_, cfg.qkv_bias));
    if (cfg.qk_norm) {  // Qwen3Attention: one weight of size head_dim each, shared by the heads
      q_norm = register_module("q_norm", RmsNorm(head_dim_, cfg.norm_eps));
      k_norm = register_module("k_norm", RmsNorm(head_dim_, cfg.norm_eps));
    }
    o_proj = register_module("o_proj", linear(n_heads_ * head_dim_, d, cfg.o_bias));
    post_attention_layernorm = register_module("post_attention_layernorm", RmsNorm(d, cfg.norm_eps));
    gate_proj = register_module("gate_proj", linear(d, cfg.d_ff, cfg.mlp_bias));
    up_proj = register_module("up_proj", linear(d, cfg.d_ff, cfg.mlp_bias));
    down_proj = register_module("down_proj", linear(cfg.d_ff, d, cfg.mlp_bias));
  }

  at::Tensor forward(const at::Tensor& x, const PackedRows* packed) override {  // x: (B, T, C)
    const int64_t batch = x.size(0);
    const int64_t seq = x.size(1);
    at::Tensor normed = input_layernorm(x);
    auto heads = [&](const at::Tensor& t, int64_t n) {  // (B, T, n·hd) -> (B, n, T, hd)
      return t.view({batch, seq, n, head_dim_}).transpose(1, 2);
    };
    at::Tensor q = heads(q_proj(normed), n_heads_);
    at::Tensor k = heads(k_proj(normed), n_kv_heads_);
    at::Tensor v = heads(v_proj(normed), n_kv_heads_);
    if (q_norm) {  // Qwen3: RMSNorm over each head's hd on the (B, T, n, hd) view, before RoPE, as HF
      q = q_norm(q.transpose(1, 2)).transpose(1, 2);
      k = k_norm(k.transpose(1, 2)).transpose(1, 2);
    }
    // (T, hd), broadcast over (B, H); packed rows: each token's own position, (B, 1, T, hd). In
    // the hidden state's dtype, as LlamaRotaryEmbedding casts them to its input's (the embeddings'):
    // under autocast over fp32 weights q·cos promotes to fp32, as in transformers.
    auto [cos, sin] = packed != nullptr ? std::make_pair(packed->rotary_cos, packed->rotary_sin) : rotary_->get(seq, x);
    q = q * cos + rotate_half(q) * sin;
    k = k * cos + rotate_half(k) * sin;
    at::Tensor y = compat::causal_attention(q, k, v, packed != nullptr ? &packed->attention : nullptr)
                       .transpose(1, 2)
                       .reshape({batch, seq, n_heads_ * head_dim_});
    at::Tensor h = x + o_proj(y);
    at::Tensor m = post_attention_layernorm(h);
    return h + down_proj(mlp_activation(gate_proj(m), activation_) * up_proj(m));
  }

  std::vector<std::pair<std::string, AdaptedLinear>> linears() override {
    return {{"q", q_proj},       {"k", k_proj},   {"v", v_proj},     {"o", o_proj},
            {"gate", gate_proj}, {"up", up_proj}, {"down", down_proj}};
  }

  RmsNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  RmsNorm q_norm{nullptr}, k_norm{nullptr};  // Qwen3 only
  AdaptedLinear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  AdaptedLinear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};

 private:
  int64_t n_heads_, n_kv_heads_, head_dim_;
  Activation activation_;
  std::shared_ptr<RotaryCache> rotary_;
};

class LlamaImpl : public LanguageModelImpl {
 public:
  explicit LlamaImpl(const ModelConfig& cfg) : LanguageModelImpl(cfg) {
    auto rotary = std::make_shared<RotaryCache>(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling);
    rotary_ = rotary;
    embed_tokens = register_module("embed_tokens", torch::nn::Embedding(cfg.vocab_size, cfg.d_model));
    for (int64_t i = 0; i < cfg.n_layers; ++i) {
      layers.push_back(register_module("layers" + std::to_string(i), std::make_shared<LlamaBlockImpl>(cfg, rotary)));
    }
    norm = register_module("norm", RmsNorm(cfg.d_model, cfg.norm_eps));
    if (!cfg.tied_embeddings) {
      lm_head = register_module("lm_head", torch::nn::Linear(torch::nn::LinearOptions(cfg.d_model, cfg.vocab_size).bias(false)));
    }
    init_weights();
  }

  at::Tensor final_hidden(const at::Tensor& tokens, const RowDocuments& documents) override {  // tokens: (B, T)
    at::Tensor x = embed_tokens(tokens);  // (B, T, C)
    std::optional<PackedRows> packed;
    if (!documents.empty()) {
      // Rotary positions restart at each document, as HF's position_ids do for padding-free
      // batches: the (T, hd) tables gathered at each token's position, once for every block.
      const int64_t batch = tokens.size(0), seq = tokens.size(1);
      packed = PackedRows{compat::document_layout(documents, seq, tokens.device()), {}, {}};
      // In the hidden state's dtype (the blocks' tables are).
      auto [cos, sin] = rotary_->get(seq, x);
      const at::Tensor at_position = packed->attention.positions.reshape({-1});  // (B·T)
      packed->rotary_cos = cos.index_select(0, at_position).view({batch, 1, seq, cos.size(1)});
      packed->rotary_sin = sin.index_select(0, at_position).view({batch, 1, seq, sin.size(1)});
    }
    for (auto& layer : layers) x = run_block(*layer, x, packed ? &*packed : nullptr);
    return norm(x);  // (B, T, C)
  }

  at::Tensor head_weight() const override { return config_.tied_embeddings ? embed_tokens->weight : lm_head->weight; }

  void release_caches() override { rotary_->release(); }

  std::vector<TransformerBlockImpl*> transformer_blocks() override {
    std::vector<TransformerBlockImpl*> out;
    for (auto& layer : layers) out.push_back(layer.get());
    return out;
  }

  torch::nn::Embedding embed_tokens{nullptr};
  std::vector<std::shared_ptr<LlamaBlockImpl>> layers;
  RmsNorm norm{nullptr};
  torch::nn::Linear lm_head{nullptr};

 private:
  std::shared_ptr<RotaryCache> rotary_;  // the blocks' shared tables

  // HF LlamaPreTrainedModel._init_weights: N(0, initializer_range = 0.02), zero biases.
  void init_weights() {
    torch::NoGradGuard no_grad;
    for (auto& p : named_parameters()) {
      if (p.key().find("layernorm") != std::string::npos || p.key().rfind("norm.", 0) == 0) continue;
      if (p.key().find("q_norm.") != std::string::npos || p.key().find("k_norm.") != std::string::npos) continue;
      if (p.value().dim() == 1) {
        p.value().zero_();  // the projections' biases (Qwen2's q/k/v, attention_bias, mlp_bias)
      } else {
        p.value().normal_(0.0, 0.02);
      }
    }
  }
};

}  // namespace

LanguageModel build_llama(const ModelConfig& cfg) { return std::make_shared<LlamaImpl>(cfg); }

}  // namespace accumbench
