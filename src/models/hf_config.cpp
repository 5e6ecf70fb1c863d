// Hugging Face config.json → ModelConfig, for model_type gpt2, llama, qwen2 and mistral.
//
// Only fields that set a shape (or the norm epsilon / RoPE base, which the model uses) are read;
// everything else (dropout, token ids, torch_dtype, rope_scaling, sliding_window, ...) changes
// neither the parameter count nor the amount of work per token at the lengths the benchmark runs,
// and is ignored. Field names and defaults follow transformers' GPT2Config, LlamaConfig,
// Qwen2Config and MistralConfig; shape fields have no default here, because a config.json saved
// by transformers always writes them and a missing one means the file is not what the user thinks.
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "accumbench/error.hpp"
#include "accumbench/model_config.hpp"

namespace accumbench {
namespace {

using nlohmann::json;

constexpr const char* kSupportedModelTypes = "gpt2, llama, qwen2 or mistral";

// Reads typed fields from one config object; every failure names the file and the field.
class FieldReader {
 public:
  FieldReader(const json& root, const std::string& origin) : root_(root), origin_(origin) {}

  [[noreturn]] void fail(const std::string& problem, const std::string& fix) const {
    throw UserError("config \"" + origin_ + "\": " + problem + "; " + fix);
  }

  // A field set to null means "use the default" in transformers (n_inner, head_dim, ...).
  const json* find(const char* key) const {
    const auto it = root_.find(key);
    return it == root_.end() || it->is_null() ? nullptr : &*it;
  }
  bool has(const char* key) const { return find(key) != nullptr; }

  int64_t positive_int(const char* key) const {
    const json* v = find(key);
    if (v == nullptr) missing(key);
    return to_positive_int(key, *v);
  }
  int64_t positive_int_or(const char* key, int64_t fallback) const {
    const json* v = find(key);
    return v == nullptr ? fallback : to_positive_int(key, *v);
  }
  double positive_number_or(const char* key, double fallback) const {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_number() || !(v->get<double>() > 0.0) || !std::isfinite(v->get<double>()))
      wrong(key, *v, "a positive number");
    return v->get<double>();
  }
  bool boolean_or(const char* key, bool fallback) const {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) wrong(key, *v, "true or false");
    return v->get<bool>();
  }
  std::string string(const char* key) const {
    const json* v = find(key);
    if (v == nullptr) missing(key);
    if (!v->is_string()) wrong(key, *v, "a string");
    return v->get<std::string>();
  }

  [[noreturn]] void missing(const char* key) const {
    fail(std::string("required field \"") + key + "\" is missing",
         "add it, or use the model's config.json exactly as its Hugging Face repository ships it");
  }

 private:
  int64_t to_positive_int(const char* key, const json& v) const {
    // is_number_integer() is false for 768.0: a fractional size is a broken file, not a size.
    if (!v.is_number_integer()) wrong(key, v, "a positive integer");
    if (v.is_number_unsigned()) {
      if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        wrong(key, v, "a positive integer below 2^63");
      if (v.get<uint64_t>() == 0) wrong(key, v, "a positive integer");
      return static_cast<int64_t>(v.get<uint64_t>());
    }
    if (v.get<int64_t>() <= 0) wrong(key, v, "a positive integer");
    return v.get<int64_t>();
  }

  [[noreturn]] void wrong(const char* key, const json& v, const std::string& expected) const {
    std::string shown = v.dump();
    if (shown.size() > 40) shown = shown.substr(0, 37) + "...";
    fail(std::string("field \"") + key + "\" is " + shown + " but must be " + expected,
         "correct that value in the file");
  }

  const json& root_;
  const std::string& origin_;
};

// transformers GPT2Config / GPT2LMHeadModel.
ModelConfig gpt2_from(const FieldReader& f) {
  ModelConfig c;
  c.arch = Architecture::kGpt2;
  c.vocab_size = f.positive_int("vocab_size");
  c.d_model = f.positive_int("n_embd");
  c.n_layers = f.positive_int("n_layer");
  c.n_heads = f.positive_int("n_head");
  // n_positions sizes the wpe table; n_ctx is its older alias (both are 1024 in gpt2's file).
  if (f.has("n_positions"))
    c.max_seq_len = f.positive_int("n_positions");
  else if (f.has("n_ctx"))
    c.max_seq_len = f.positive_int("n_ctx");
  else
    f.missing("n_positions");
  if (c.d_model % c.n_heads != 0)
    f.fail("field \"n_head\" (" + std::to_string(c.n_heads) + ") does not divide \"n_embd\" (" +
               std::to_string(c.d_model) + ")",
           "use a head count that divides n_embd");
  c.n_kv_heads = c.n_heads;
  c.head_dim = c.d_model / c.n_heads;
  c.d_ff = f.positive_int_or("n_inner", 4 * c.d_model);  // GPT2MLP: n_inner null → 4·n_embd
  c.norm_eps = f.positive_number_or("layer_norm_epsilon", 1e-5);
  c.tied_embeddings = f.boolean_or("tie_word_embeddings", true);
  return c;
}

// transformers LlamaConfig / Qwen2Config / MistralConfig (same field names).
ModelConfig llama_family_from(const FieldReader& f, const std::string& model_type) {
  ModelConfig c;
  c.arch = Architecture::kLlama;
  c.vocab_size = f.positive_int("vocab_size");
  c.d_model = f.positive_int("hidden_size");
  c.d_ff = f.positive_int("intermediate_size");
  c.n_layers = f.positive_int("num_hidden_layers");
  c.n_heads = f.positive_int("num_attention_heads");
  c.max_seq_len = f.positive_int("max_position_embeddings");
  // Absent num_key_value_heads means multi-head attention (the original Llama).
  c.n_kv_heads = f.positive_int_or("num_key_value_heads", c.n_heads);
  if (c.n_heads % c.n_kv_heads != 0)
    f.fail("field \"num_key_value_heads\" (" + std::to_string(c.n_kv_heads) +
               ") does not divide \"num_attention_heads\" (" + std::to_string(c.n_heads) + ")",
           "grouped-query attention needs a key/value head count that divides the head count");
  // An explicit head_dim may make n_heads·head_dim differ from hidden_size (Mistral-Nemo:
  // 32 × 128 ≠ 5120); without it transformers uses hidden_size / num_attention_heads.
  if (f.has("head_dim")) {
    c.head_dim = f.positive_int("head_dim");
  } else {
    if (c.d_model % c.n_heads != 0)
      f.fail("field \"num_attention_heads\" (" + std::to_string(c.n_heads) +
                 ") does not divide \"hidden_size\" (" + std::to_string(c.d_model) + ")",
             "use a head count that divides hidden_size, or give head_dim explicitly");
    c.head_dim = c.d_model / c.n_heads;
  }
  c.rope_theta = f.positive_number_or("rope_theta", 10000.0);
  c.norm_eps = f.positive_number_or("rms_norm_eps", 1e-6);  // all three classes default to 1e-6
  c.tied_embeddings = f.boolean_or("tie_word_embeddings", false);

  if (model_type == "qwen2") {
    c.qkv_bias = true;  // Qwen2Attention: q/k/v_proj bias=True, o_proj bias=False, always
  } else if (model_type == "llama") {
    // LlamaAttention puts attention_bias on o_proj as well as q/k/v, and mlp_bias on all three
    // MLP projections; the Llama module here has neither, so such a file cannot be modelled
    // faithfully, and counting it as something else would skew every memory prediction.
    if (f.boolean_or("attention_bias", false))
      f.fail(
          "field \"attention_bias\" is true, which adds a bias to o_proj that the Llama model "
          "here does not have",
          "set it to false to benchmark the same shape without attention biases");
    if (f.boolean_or("mlp_bias", false))
      f.fail("field \"mlp_bias\" is true, which the Llama model here does not support",
             "set it to false to benchmark the same shape without MLP biases");
  }
  return c;
}

}  // namespace

ModelConfig parse_hf_config(const std::string& json_text, const std::string& origin) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::parse_error& e) {
    // what() is "[json.exception.parse_error.101] parse error at line L, column C: ..."; keep the
    // part after the tag, which carries the position in the terms an editor shows.
    std::string detail = e.what();
    const auto tag_end = detail.find("] ");
    if (tag_end != std::string::npos) detail = detail.substr(tag_end + 2);
    throw UserError("config \"" + origin + "\" is not valid JSON (" + detail +
                    "); fix the file or download config.json again");
  }
  if (!root.is_object())
    throw UserError("config \"" + origin + "\" holds a JSON " + root.type_name() +
                    " instead of an object; pass a model's config.json");

  const FieldReader fields(root, origin);
  const std::string model_type = fields.string("model_type");
  ModelConfig cfg;
  if (model_type == "gpt2") {
    cfg = gpt2_from(fields);
  } else if (model_type == "llama" || model_type == "qwen2" || model_type == "mistral") {
    cfg = llama_family_from(fields, model_type);
  } else {
    fields.fail("model_type \"" + model_type + "\" is not supported",
                std::string("use a config whose model_type is one of ") + kSupportedModelTypes);
  }
  cfg.name = origin;
  validate(cfg);  // the remaining shape rules (odd head_dim, overflow); messages name the file
  return cfg;
}

ModelConfig load_hf_config(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw UserError("config \"" + path + "\" is a directory; pass the config.json file inside it");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw UserError("cannot read config \"" + path + "\" (" + std::strerror(errno) +
                    "); pass the path of a Hugging Face config.json");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad())
    throw UserError("cannot read config \"" + path + "\" (" + std::strerror(errno) +
                    "); pass the path of a readable Hugging Face config.json");
  return parse_hf_config(text.str(), path);
}

}  // namespace accumbench
