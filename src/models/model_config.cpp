// Model shapes: presets, validation and the closed-form parameter count.
//
// The count below must match what src/models/gpt2.cpp and src/models/llama.cpp register as
// parameters, and for the published presets it must equal the published count exactly (checked
// in tests/test_model_config.cpp), so that the memory plan and the 6N FLOPs estimate use the
// same N as the real model.
#include "accumbench/model_config.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <system_error>

#include "accumbench/error.hpp"
#include "accumbench/units.hpp"

namespace accumbench {

std::string to_string(Architecture arch) {
  switch (arch) {
    case Architecture::kGpt2:
      return "gpt2";
    case Architecture::kLlama:
      return "llama";
  }
  return "unknown";
}

std::string to_string(Activation activation) {
  switch (activation) {
    case Activation::kGeluNew:
      return "gelu_new";
    case Activation::kGeluTanh:
      return "gelu_pytorch_tanh";
    case Activation::kGelu:
      return "gelu";
    case Activation::kSilu:
      return "silu";
  }
  return "unknown";
}

std::string to_string(RopeType type) {
  switch (type) {
    case RopeType::kDefault:
      return "default";
    case RopeType::kLinear:
      return "linear";
    case RopeType::kLlama3:
      return "llama3";
    case RopeType::kYarn:
      return "yarn";
    case RopeType::kDynamic:
      return "dynamic";
  }
  return "unknown";
}

namespace {

// Sums and products of shape sizes: a shape read from a hand-edited config.json can be large
// enough to overflow int64, and a silently wrapped count would poison every memory prediction.
class CheckedCount {
 public:
  explicit CheckedCount(const ModelConfig& cfg) : cfg_(cfg) {}

  int64_t mul(int64_t a, int64_t b) const {
    int64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r)) overflow();
    return r;
  }
  int64_t add(int64_t a, int64_t b) const {
    int64_t r = 0;
    if (__builtin_add_overflow(a, b, &r)) overflow();
    return r;
  }

 private:
  [[noreturn]] void overflow() const {
    throw UserError("model \"" + cfg_.name +
                    "\" has more parameters than a 64-bit count can hold; check its sizes "
                    "(vocab_size, d_model, d_ff, n_layers) for a typo");
  }
  const ModelConfig& cfg_;
};

// Position-embedding table: learned for GPT-2 (wpe, max_seq_len × d), none for RoPE models
// (the rotary cos/sin tables are buffers, not parameters).
int64_t position_embedding_parameters(const ModelConfig& cfg, const CheckedCount& c) {
  return cfg.arch == Architecture::kGpt2 ? c.mul(cfg.max_seq_len, cfg.d_model) : 0;
}

// Parameters of one transformer block.
int64_t block_parameters(const ModelConfig& cfg, const CheckedCount& c) {
  const int64_t d = cfg.d_model;
  if (cfg.arch == Architecture::kGpt2) {
    // GPT-2 block (HF GPT2Block; nanoGPT model.py Block): every Linear has a bias.
    const int64_t norms = c.mul(2, c.mul(2, d));                    // ln_1, ln_2: weight+bias
    const int64_t qkv = c.add(c.mul(d, c.mul(3, d)), c.mul(3, d));  // c_attn d→3d
    const int64_t attn_out = c.add(c.mul(d, d), d);                 // attn.c_proj d→d
    const int64_t fc = c.add(c.mul(d, cfg.d_ff), cfg.d_ff);         // c_fc d→d_ff
    const int64_t mlp_out = c.add(c.mul(cfg.d_ff, d), d);           // mlp.c_proj d_ff→d
    return c.add(c.add(c.add(norms, qkv), c.add(attn_out, fc)), mlp_out);
  }
  // Llama-family block (HF LlamaDecoderLayer / Qwen2DecoderLayer / Qwen3DecoderLayer): no biases
  // except the q/k/v bias of Qwen2 and what attention_bias (q/k/v and o) and Llama's mlp_bias (the
  // three MLP projections) add; q and o use n_heads·head_dim, which may differ from d
  // (explicit head_dim in config.json), k and v use n_kv_heads·head_dim (grouped-query attention).
  const int64_t q_width = c.mul(cfg.n_heads, cfg.head_dim);
  const int64_t kv_width = c.mul(cfg.n_kv_heads, cfg.head_dim);
  const int64_t norms = c.mul(2, d);                                      // two RMSNorm weights
  int64_t attn = c.add(c.mul(d, q_width), c.mul(2, c.mul(d, kv_width)));  // q, k, v
  if (cfg.qkv_bias) attn = c.add(attn, c.add(q_width, c.mul(2, kv_width)));
  // Qwen3Attention's q_norm and k_norm: one RMSNorm weight of size head_dim each, shared by all
  // heads (not H·hd: the norm runs over the last dim of the (…, H, hd) view).
  if (cfg.qk_norm) attn = c.add(attn, c.mul(2, cfg.head_dim));
  attn = c.add(attn, c.mul(q_width, d));  // o_proj
  if (cfg.o_bias) attn = c.add(attn, d);
  int64_t mlp = c.mul(3, c.mul(d, cfg.d_ff));  // gate, up, down
  if (cfg.mlp_bias) mlp = c.add(mlp, c.add(c.mul(2, cfg.d_ff), d));
  return c.add(c.add(norms, attn), mlp);
}

int64_t checked_parameter_count(const ModelConfig& cfg) {
  const CheckedCount c(cfg);
  const int64_t token_embedding = c.mul(cfg.vocab_size, cfg.d_model);
  // An untied head is a second V×d matrix without bias (GPT2LMHeadModel and LlamaForCausalLM
  // both build lm_head with bias=False); a tied head reuses the token embedding.
  const int64_t head = cfg.tied_embeddings ? 0 : token_embedding;
  // Final norm: LayerNorm weight+bias (GPT-2 ln_f) or RMSNorm weight (Llama norm).
  const int64_t final_norm = cfg.arch == Architecture::kGpt2 ? c.mul(2, cfg.d_model) : cfg.d_model;
  const int64_t blocks = c.mul(cfg.n_layers, block_parameters(cfg, c));
  return c.add(c.add(c.add(token_embedding, head), position_embedding_parameters(cfg, c)),
               c.add(blocks, final_norm));
}

[[noreturn]] void invalid(const ModelConfig& cfg, const std::string& problem,
                          const std::string& fix) {
  throw UserError("model \"" + cfg.name + "\": " + problem + "; " + fix);
}

void require_positive(const ModelConfig& cfg, const char* field, int64_t value) {
  if (value <= 0)
    invalid(cfg, std::string(field) + " is " + std::to_string(value),
            std::string("set ") + field + " to a positive integer");
}

std::string format_double(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

static void require_at_most(const ModelConfig& cfg, const char* field, int64_t value, int64_t limit) {
  if (value <= limit) return;
  throw UserError("model \"" + cfg.name + "\" has " + field + " " + std::to_string(value) + ", above the " +
                  std::to_string(limit) + " accumbench can plan for; check the config for a typo");
}

void validate(const ModelConfig& cfg) {
  require_positive(cfg, "vocab_size", cfg.vocab_size);
  require_positive(cfg, "d_model", cfg.d_model);
  require_positive(cfg, "n_layers", cfg.n_layers);
  require_positive(cfg, "n_heads", cfg.n_heads);
  require_positive(cfg, "n_kv_heads", cfg.n_kv_heads);
  require_positive(cfg, "head_dim", cfg.head_dim);
  require_positive(cfg, "d_ff", cfg.d_ff);
  require_positive(cfg, "max_seq_len", cfg.max_seq_len);
  // One token has nothing to predict: the loss and every gradient are 0, and verify would pass on
  // zeros.
  if (cfg.vocab_size < 2) {
    throw UserError("model \"" + cfg.name + "\" has vocab_size 1, so every next token is certain and nothing "
                    "trains; give the tokenizer's vocabulary size");
  }
  // Limits far above any published model that keep every size in the plan's int64 arithmetic
  // (bytes of the largest tensors) from overflowing.
  require_at_most(cfg, "vocab_size", cfg.vocab_size, int64_t{1} << 27);
  require_at_most(cfg, "d_model", cfg.d_model, int64_t{1} << 17);
  require_at_most(cfg, "n_layers", cfg.n_layers, int64_t{1} << 12);
  require_at_most(cfg, "n_heads", cfg.n_heads, int64_t{1} << 12);
  require_at_most(cfg, "n_kv_heads", cfg.n_kv_heads, int64_t{1} << 12);
  require_at_most(cfg, "head_dim", cfg.head_dim, int64_t{1} << 12);
  require_at_most(cfg, "d_ff", cfg.d_ff, int64_t{1} << 20);
  require_at_most(cfg, "max_seq_len", cfg.max_seq_len, int64_t{1} << 24);
  if (!(cfg.norm_eps > 0.0) || !std::isfinite(cfg.norm_eps))
    invalid(cfg, "norm_eps is " + format_double(cfg.norm_eps),
            "set norm_eps to a small positive number such as 1e-5");

  if (cfg.arch == Architecture::kGpt2) {
    // GPT-2 splits d_model into heads (c_attn is d→3d), so the heads must tile d exactly.
    if (cfg.d_model % cfg.n_heads != 0)
      invalid(cfg,
              "n_heads " + std::to_string(cfg.n_heads) + " does not divide d_model " +
                  std::to_string(cfg.d_model),
              "pick n_heads that divides d_model");
    if (cfg.head_dim != cfg.d_model / cfg.n_heads)
      invalid(cfg,
              "head_dim " + std::to_string(cfg.head_dim) +
                  " is not d_model / n_heads = " + std::to_string(cfg.d_model / cfg.n_heads),
              "GPT-2 has no separate head_dim, so set head_dim to d_model / n_heads");
    if (cfg.n_kv_heads != cfg.n_heads)
      invalid(cfg,
              "n_kv_heads " + std::to_string(cfg.n_kv_heads) + " differs from n_heads " +
                  std::to_string(cfg.n_heads),
              "GPT-2 uses multi-head attention, so set n_kv_heads equal to n_heads");
  } else {
    // Each key/value head serves n_heads / n_kv_heads query heads (grouped-query attention).
    if (cfg.n_heads % cfg.n_kv_heads != 0)
      invalid(cfg,
              "n_kv_heads " + std::to_string(cfg.n_kv_heads) + " does not divide n_heads " +
                  std::to_string(cfg.n_heads),
              "pick n_kv_heads that divides n_heads");
    // RoPE rotates pairs of channels within a head.
    if (cfg.head_dim % 2 != 0)
      invalid(cfg, "head_dim " + std::to_string(cfg.head_dim) + " is odd",
              "RoPE rotates channel pairs, so use an even head_dim");
    if (!(cfg.rope_theta > 0.0) || !std::isfinite(cfg.rope_theta))
      invalid(cfg, "rope_theta is " + format_double(cfg.rope_theta),
              "set rope_theta to a positive base such as 10000");
  }
  checked_parameter_count(cfg);  // throws when the count overflows int64
}

// Closed form, one term per parameter tensor (see block_parameters for the per-block list):
//   GPT-2: V·d (wte, tied head) + T·d (wpe) + L·(4d + 3d²+3d + d²+d + 2·d·d_ff + d_ff + d) + 2d
//   Llama: V·d (+ V·d untied head) + L·(2d + d·(H+2K)·hd [+ (H+2K)·hd bias] [+ 2·hd q/k norm]
//          + H·hd·d + 3·d·d_ff) + d
// Assumes validate(cfg) passed; throws UserError only when the count overflows int64.
int64_t parameter_count(const ModelConfig& cfg) { return checked_parameter_count(cfg); }

// nanoGPT's convention (GPT.get_num_params(non_embedding=True)): subtract the position
// embeddings only. The token embedding stays in because, tied or not, it is the output head's
// weight and takes part in the head matmul, which the 6N estimate counts. This differs from
// Kaplan et al. (2020), who drop all embeddings; for RoPE models nothing is subtracted.
// Informational only (the models listing); no prediction depends on it.
int64_t non_embedding_parameter_count(const ModelConfig& cfg) {
  const CheckedCount c(cfg);
  return checked_parameter_count(cfg) - position_embedding_parameters(cfg, c);
}

namespace {

ModelConfig gpt2(std::string name, int64_t vocab, int64_t d, int64_t layers, int64_t heads,
                 int64_t max_seq_len, int64_t d_ff, std::string published) {
  ModelConfig c;
  c.name = std::move(name);
  c.arch = Architecture::kGpt2;
  c.vocab_size = vocab;
  c.d_model = d;
  c.n_layers = layers;
  c.n_heads = heads;
  c.n_kv_heads = heads;
  c.head_dim = d / heads;
  c.d_ff = d_ff;
  c.max_seq_len = max_seq_len;
  c.norm_eps = 1e-5;  // layer_norm_epsilon in every GPT-2 config.json
  c.tied_embeddings = true;
  c.qkv_bias = false;  // GPT-2's biases are part of the architecture, not this flag
  c.published_parameters = std::move(published);
  return c;
}

struct LlamaShape {
  int64_t vocab, d, layers, heads, kv_heads, d_ff, max_seq_len;
  double rope_theta, norm_eps;
  bool tied, qkv_bias;
  int64_t head_dim = 0;  // 0: d / heads, as transformers does without an explicit head_dim
  bool qk_norm = false;  // Qwen3
};

ModelConfig llama(std::string name, const LlamaShape& s, std::string published) {
  ModelConfig c;
  c.name = std::move(name);
  c.arch = Architecture::kLlama;
  c.vocab_size = s.vocab;
  c.d_model = s.d;
  c.n_layers = s.layers;
  c.n_heads = s.heads;
  c.n_kv_heads = s.kv_heads;
  c.head_dim = s.head_dim > 0 ? s.head_dim : s.d / s.heads;
  c.d_ff = s.d_ff;
  c.max_seq_len = s.max_seq_len;
  c.rope_theta = s.rope_theta;
  c.norm_eps = s.norm_eps;
  c.tied_embeddings = s.tied;
  c.qkv_bias = s.qkv_bias;
  c.qk_norm = s.qk_norm;
  c.activation = Activation::kSilu;
  c.published_parameters = std::move(published);
  return c;
}

std::vector<ModelConfig> make_presets() {
  std::vector<ModelConfig> p;
  // GPT-2 family: Radford et al. 2019 and the openai-community/gpt2{,-medium,-large,-xl}
  // config.json files (vocab 50257, n_positions 1024, n_inner null → 4·n_embd).
  // Counts: 124,439,808 / 354,823,168 / 774,030,080 / 1,557,611,200, as GPT2LMHeadModel reports
  // them; OpenAI's corrected names (124M, 355M, 774M, 1.5B) replace the paper's 117M/345M/762M.
  p.push_back(gpt2("gpt2-124m", 50257, 768, 12, 12, 1024, 4 * 768, "124M"));
  p.back().hub_ids = {"openai-community/gpt2", "gpt2"};
  p.push_back(gpt2("gpt2-350m", 50257, 1024, 24, 16, 1024, 4 * 1024, "355M"));
  p.back().hub_ids = {"openai-community/gpt2-medium", "gpt2-medium"};
  p.push_back(gpt2("gpt2-774m", 50257, 1280, 36, 20, 1024, 4 * 1280, "774M"));
  p.back().hub_ids = {"openai-community/gpt2-large", "gpt2-large"};
  p.push_back(gpt2("gpt2-1.5b", 50257, 1600, 48, 25, 1024, 4 * 1600, "1.5B"));
  p.back().hub_ids = {"openai-community/gpt2-xl", "gpt2-xl"};

  // HuggingFaceTB/SmolLM2-135M and -360M config.json (LlamaForCausalLM, tied, rope_theta 1e5).
  p.push_back(llama("smollm2-135m", {49152, 576, 30, 9, 3, 1536, 8192, 100000.0, 1e-5, true, false},
                    "135M"));
  p.back().hub_ids = {"HuggingFaceTB/SmolLM2-135M"};
  p.push_back(llama("smollm2-360m",
                    {49152, 960, 32, 15, 5, 2560, 8192, 100000.0, 1e-5, true, false}, "360M"));
  p.back().hub_ids = {"HuggingFaceTB/SmolLM2-360M"};
  // Qwen/Qwen2.5-0.5B config.json (Qwen2ForCausalLM: q/k/v bias, tied); model card: 0.49B.
  p.push_back(llama("qwen2.5-0.5b",
                    {151936, 896, 24, 14, 2, 4864, 32768, 1000000.0, 1e-6, true, true}, "0.49B"));
  p.back().hub_ids = {"Qwen/Qwen2.5-0.5B"};
  // meta-llama/Llama-3.2-1B config.json (head_dim 64 = 2048/32, tied); model card: 1.23B. Its
  // llama3 rope_scaling (factor 32, low_freq_factor 1, high_freq_factor 4, original 8192 positions)
  // rescales the RoPE frequencies only: no shape or cost.
  p.push_back(llama("llama-3.2-1b",
                    {128256, 2048, 16, 32, 8, 8192, 131072, 500000.0, 1e-5, true, false}, "1.23B"));
  p.back().hub_ids = {"meta-llama/Llama-3.2-1B"};
  p.back().rope_scaling.type = RopeType::kLlama3;
  p.back().rope_scaling.factor = 32.0;
  p.back().rope_scaling.original_max_positions = 8192;
  // Qwen/Qwen3-0.6B and Qwen/Qwen3-1.7B config.json (Qwen3ForCausalLM: q/k RMSNorm, no bias,
  // explicit head_dim 128, so H·hd = 2048 ≠ d = 1024 for 0.6B; tied). Model cards: 0.6B total
  // and 0.44B non-embedding; 1.7B and 1.4B (checked in tests/test_model_config.cpp).
  p.push_back(llama("qwen3-0.6b",
                    {151936, 1024, 28, 16, 8, 3072, 40960, 1000000.0, 1e-6, true, false, 128, true}, "0.6B"));
  p.back().hub_ids = {"Qwen/Qwen3-0.6B"};
  p.push_back(llama("qwen3-1.7b",
                    {151936, 2048, 28, 16, 8, 6144, 40960, 1000000.0, 1e-6, true, false, 128, true}, "1.7B"));
  p.back().hub_ids = {"Qwen/Qwen3-1.7B"};

  // Small shapes for CPU tests and the default run; not published models.
  // gpt2-mini is the default sweep model: big enough that a step is not pure overhead, small
  // enough that a sweep finishes in well under a minute on two CPU cores.
  p.push_back(gpt2("gpt2-tiny", 512, 64, 2, 4, 256, 256, ""));
  p.push_back(gpt2("gpt2-mini", 4096, 128, 4, 4, 512, 512, ""));
  // d_ff follows Llama's SwiGLU sizing, 2/3·4d rounded up to a multiple (Touvron et al. 2023;
  // meta-llama/llama model.py `multiple_of`): 2/3·256 = 170.7 → 176 (×16), 2/3·512 = 341.3 →
  // 352 (×32). llama-tiny is untied so the separate lm_head path is exercised too.
  p.push_back(llama("llama-tiny", {512, 64, 2, 4, 2, 176, 256, 10000.0, 1e-5, false, false}, ""));
  p.push_back(llama("llama-mini", {4096, 128, 4, 4, 2, 352, 512, 10000.0, 1e-5, true, false}, ""));
  // qwen3-tiny: llama-tiny's size with Qwen3's attention: q/k norms, and head_dim 32 ≠ 64/4, so
  // the attention width H·hd = 128 is twice d (as in Qwen3-0.6B); tied, like the small Qwen3s.
  p.push_back(llama("qwen3-tiny", {512, 64, 2, 4, 2, 176, 256, 1000000.0, 1e-6, true, false, 32, true}, ""));
  return p;
}

}  // namespace

const std::vector<ModelConfig>& presets() {
  static const std::vector<ModelConfig> kPresets = make_presets();
  return kPresets;
}

ModelOptions model_options_for(const std::string& name) {
  ModelOptions model;
  const bool preset = std::any_of(presets().begin(), presets().end(), [&](const ModelConfig& p) { return p.name == name; });
  if (preset) model.preset = name;
  else model.hf_config = name;
  return model;
}

const ModelConfig& find_preset(const std::string& name) {
  for (const ModelConfig& cfg : presets())
    if (cfg.name == name) return cfg;
  std::string names;
  for (const ModelConfig& cfg : presets()) names += (names.empty() ? "" : ", ") + cfg.name;
  // A path or a Hub id given to --model is meant for --hf-config.
  std::error_code error;
  const bool json_name = name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0;
  const bool looks_like_config = name.find('/') != std::string::npos || json_name || std::filesystem::exists(name, error);
  if (looks_like_config) {
    throw UserError("--model takes a preset name, and " + text::quoted(name) +
                    " is none; a config.json, a model directory or a Hub id goes in --hf-config " + text::quoted(name) +
                    " (presets: " + names + ")");
  }
  throw UserError("unknown model preset " + text::quoted(name) +
                  "; run \"accumbench models\" to list presets (" + names + ")");
}

void check_sequence_length(const ModelConfig& cfg, int64_t seq_len) {
  if (seq_len <= 0) throw UserError("--seq-len must be positive, got " + std::to_string(seq_len) + "; give the tokens per sequence, e.g. --seq-len 1024");
  // Only a learned position table (GPT-2's wpe) ends at max_seq_len; rotary positions go on, and
  // transformers runs a RoPE model past max_position_embeddings (context_length_note).
  if (cfg.arch == Architecture::kGpt2 && seq_len > cfg.max_seq_len) {
    throw UserError("--seq-len " + std::to_string(seq_len) + " exceeds " + cfg.name + "'s " +
                    std::to_string(cfg.max_seq_len) +
                    " positions, the rows of its learned position table; use a shorter sequence");
  }
  // Dynamic NTK scaling is plain RoPE up to its original length; beyond, transformers recomputes
  // the frequencies from each batch's longest position, which accumbench does not.
  const RopeScaling& rope = cfg.rope_scaling;
  if (rope.type == RopeType::kDynamic && seq_len > rope.original_max_positions) {
    throw UserError("--seq-len " + std::to_string(seq_len) + " is beyond the " +
                    std::to_string(rope.original_max_positions) + " positions of " + cfg.name +
                    "'s dynamic rope scaling, where transformers recomputes the rotary frequencies per batch and "
                    "accumbench does not; use --seq-len " + std::to_string(rope.original_max_positions) +
                    " or less (time and memory do not depend on the frequencies)");
  }
}

std::string context_length_note(const ModelConfig& cfg, int64_t seq_len) {
  if (cfg.arch == Architecture::kGpt2 || seq_len <= cfg.max_seq_len) return "";
  return "--seq-len " + std::to_string(seq_len) + " is beyond " + cfg.name + "'s max_position_embeddings " +
         std::to_string(cfg.max_seq_len) +
         ": rotary positions have no table to outgrow, so the step runs as transformers runs it (a context "
         "extension with rope_scaling or a larger rope_theta); time and memory are the same whatever the "
         "frequencies, the loss values are not";
}

std::string dropout_note(const ModelConfig& cfg) {
  if (cfg.dropout.empty()) return "";
  return cfg.name + " sets " + cfg.dropout +
         ": transformers trains with dropout on, accumbench without (the base model has no dropout; "
         "--lora-dropout is the adapters' own), so a Hugging Face step also holds the dropout masks and runs their "
         "elementwise ops, which the times and peaks here leave out, and its loss values differ; set them to 0.0 in a "
         "copy of the file to compare the same step";
}

std::string stored_dtype_note(const ModelConfig& cfg, const std::vector<Precision>& weights_dtypes) {
  if (cfg.stored_dtype.empty()) return "";
  if (std::any_of(weights_dtypes.begin(), weights_dtypes.end(), [](Precision p) { return p != Precision::kFp32; })) {
    return "";
  }
  const std::string flag = cfg.stored_dtype == "bfloat16" ? "bf16" : "fp16";
  return cfg.name + " stores its weights in " + cfg.stored_dtype + "; here they are held in fp32 (--weights-dtype fp32, " +
         "the default), as TRL's ModelConfig (dtype float32) and transformers 4's from_pretrained without a dtype " +
         "load them, while transformers 5 loads the stored " + cfg.stored_dtype + " by default: --weights-dtype " + flag +
         " measures that job, --weights-dtype fp32," + flag + " both" +
         (flag == "fp16" ? " (on a CUDA device: the CPU has no fp16 matrix products)" : "");
}

std::string sliding_window_note(const ModelConfig& cfg, int64_t seq_len) {
  if (cfg.sliding_window <= 0 || seq_len <= cfg.sliding_window) return "";
  const std::string where = cfg.sliding_window_layers < cfg.n_layers
                                ? " on " + std::to_string(cfg.sliding_window_layers) + " of its " +
                                      std::to_string(cfg.n_layers) + " layers"
                                : "";
  return cfg.name + " sets sliding_window " + std::to_string(cfg.sliding_window) + where +
         ", shorter than --seq-len " + std::to_string(seq_len) +
         ": accumbench attends to every earlier position, while transformers masks keys beyond the window "
         "(the same attention work with sdpa or eager, less with flash_attention_2); time and memory here "
         "are full causal attention's, and loss values differ";
}

ModelConfig resolve_model(const ModelOptions& options) {
  return options.hf_config.empty() ? find_preset(options.preset) : load_hf_config(options.hf_config);
}

}  // namespace accumbench
