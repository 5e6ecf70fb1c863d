// Hugging Face config.json → ModelConfig, for model_type gpt2, llama, qwen2, qwen3 and mistral,
// read from a file, a model directory or a Hub id in the local Hugging Face cache (never the
// network).
//
// Only fields that set a shape, the values the model uses (norm epsilon, RoPE base, the MLP's
// activation) and the sliding window (a note when --seq-len exceeds it) are read; everything else
// (dropout, token ids, torch_dtype, rope_scaling, ...) changes neither the parameter count nor the
// amount of work per token, and is ignored. Field names and defaults follow transformers'
// GPT2Config, LlamaConfig, Qwen2Config, Qwen3Config and MistralConfig; shape fields have no default
// here, because a config.json saved by transformers always writes them and a missing one means the
// file is not what the user thinks.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "accumbench/error.hpp"
#include "accumbench/units.hpp"
#include "accumbench/model_config.hpp"

namespace accumbench {
namespace {

using nlohmann::json;

constexpr const char* kSupportedModelTypes = "gpt2, llama, qwen2, qwen3 or mistral";

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
  // A count that may be 0 (max_window_layers: 0 puts the window on every layer).
  int64_t count_or(const char* key, int64_t fallback) const {
    const json* v = find(key);
    if (v == nullptr) return fallback;
    if (v->is_number_integer() && !v->is_number_unsigned() && v->get<int64_t>() < 0)
      wrong(key, *v, "an integer of at least 0");
    if (v->is_number_integer() && v->get<int64_t>() == 0) return 0;
    return to_positive_int(key, *v);
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

  // A key present with null, which for some fields means "none" rather than "the default".
  bool is_null(const char* key) const {
    const auto it = root_.find(key);
    return it != root_.end() && it->is_null();
  }

  [[noreturn]] void wrong(const char* key, const json& v, const std::string& expected) const {
    std::string shown = v.dump();
    if (shown.size() > 40) shown = shown.substr(0, 37) + "...";
    fail(std::string("field \"") + key + "\" is " + shown + " but must be " + expected,
         "correct that value in the file");
  }

  [[noreturn]] void missing(const char* key) const {
    fail(std::string("required field \"") + key + (is_null(key) ? "\" is null" : "\" is missing"),
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

  const json& root_;
  const std::string& origin_;
};

// The RoPE base: "rope_theta" at the top (transformers 4), or inside "rope_parameters"
// (transformers 5, which saves it there; for per-layer-type parameters, the full attention's).
// A file holding both (one written by transformers 4, edited for 5, or the other way) must agree:
// each version reads its own key, so two values would train two models.
double rope_theta_of(const FieldReader& f) {
  const bool top = f.has("rope_theta");
  const double top_theta = f.positive_number_or("rope_theta", 10000.0);
  if (!f.has("rope_parameters")) return top_theta;
  const json* parameters = f.find("rope_parameters");
  if (!parameters->is_object()) f.wrong("rope_parameters", *parameters, "an object");
  const json* holder = parameters;
  if (!parameters->contains("rope_theta") && parameters->contains("full_attention") &&
      (*parameters)["full_attention"].is_object()) {
    holder = &(*parameters)["full_attention"];
  }
  const auto theta = holder->find("rope_theta");
  if (theta == holder->end() || theta->is_null()) return top_theta;
  if (!theta->is_number() || !(theta->get<double>() > 0.0) || !std::isfinite(theta->get<double>()))
    f.wrong("rope_parameters.rope_theta", *theta, "a positive number");
  if (top && theta->get<double>() != top_theta)
    f.fail("field \"rope_theta\" (" + f.find("rope_theta")->dump() + ") differs from \"rope_parameters.rope_theta\" (" +
               theta->dump() + "): transformers 4 rotates with the first, 5 with the second",
           "make the two agree (the RoPE base the model was trained with), or remove one");
  return theta->get<double>();
}

// The rope scaling object: "rope_scaling" (transformers 4), or "rope_parameters" (transformers 5,
// which keeps rope_theta beside the scaling's keys; for per-layer-type parameters, the full
// attention's). nullptr when the file has none.
// The scaling an object states, as one comparable object: rope_theta left out (rope_theta_of reads
// it), "type" read as "rope_type", a per-layer-type object's full attention's ("default" states no
// scaling, which another scaling contradicts). Empty: it states nothing (the base alone).
json stated_scaling(const json& object) {
  json scaling = object.contains("full_attention") && object["full_attention"].is_object() &&
                         !object.contains("rope_type") && !object.contains("type")
                     ? object["full_attention"]
                     : object;
  if (!scaling.is_object()) return json::object();
  scaling.erase("rope_theta");
  if (scaling.contains("type") && !scaling.contains("rope_type")) scaling["rope_type"] = scaling["type"];
  scaling.erase("type");
  for (auto it = scaling.begin(); it != scaling.end();) it = it->is_null() ? scaling.erase(it) : std::next(it);
  return scaling;
}

// rope_scaling and rope_parameters both state a scaling: they must agree, as rope_theta_of asks of
// the base, since transformers 4 reads the first and 5 the second.
void require_one_rope_scaling(const FieldReader& f) {
  const json* old_key = f.find("rope_scaling");
  const json* new_key = f.find("rope_parameters");
  if (old_key == nullptr || new_key == nullptr || !old_key->is_object() || !new_key->is_object()) return;
  const json said_old = stated_scaling(*old_key);
  const json said_new = stated_scaling(*new_key);
  if (said_new.empty() || said_old == said_new) return;
  f.fail("fields \"rope_scaling\" (" + said_old.dump() + ") and \"rope_parameters\" (" + said_new.dump() +
             ") state different rotary scalings: transformers 4 reads the first, 5 the second",
         "make the two agree (the scaling the model was trained with), or remove one");
}

const json* rope_scaling_object(const FieldReader& f, std::string& key) {
  require_one_rope_scaling(f);
  key = f.has("rope_scaling") ? "rope_scaling" : "rope_parameters";
  const json* object = f.find(key.c_str());
  if (object == nullptr) return nullptr;
  if (!object->is_object()) f.wrong(key.c_str(), *object, "an object");
  if (!object->contains("rope_type") && !object->contains("type") && object->contains("full_attention") &&
      (*object)["full_attention"].is_object()) {
    // One rotary embedding serves every layer of these models (transformers builds it from the
    // config without a layer type), so parameters that differ per layer type cannot be run as given.
    for (const auto& [layer_type, parameters] : object->items()) {
      if (parameters != (*object)["full_attention"])
        f.fail("field \"" + key + "." + layer_type + "\" differs from \"" + key +
                   ".full_attention\", but these models rotate every layer with one rotary embedding",
               "give one set of rope parameters (the full attention's) for every layer type");
    }
    key += ".full_attention";
    object = &(*object)["full_attention"];
  }
  return object;
}

// transformers' rope types (modeling_rope_utils.py, ROPE_INIT_FUNCTIONS) with their keys and
// defaults: linear and dynamic take factor; llama3 factor, low_freq_factor, high_freq_factor and
// original_max_position_embeddings; yarn factor and optionally attention_factor (else from mscale
// and mscale_all_dim, else 0.1·ln(factor) + 1), beta_fast (32), beta_slow (1),
// original_max_position_embeddings (max_position_embeddings) and truncate (true). Any other type
// (longrope, ...) is refused: its frequencies would differ from accumbench's.
RopeScaling rope_scaling_of(const FieldReader& f, int64_t max_positions) {
  RopeScaling r;
  std::string key;
  const json* object = rope_scaling_object(f, key);
  if (object == nullptr) return r;
  auto field = [&](const char* name) -> const json* {
    const auto it = object->find(name);
    return it == object->end() || it->is_null() ? nullptr : &*it;
  };
  auto path = [&](const char* name) { return key + "." + name; };
  auto number = [&](const char* name, bool required, double fallback) {
    const json* v = field(name);
    if (v == nullptr) {
      if (required) f.missing(path(name).c_str());
      return fallback;
    }
    if (!v->is_number() || !(v->get<double>() > 0.0) || !std::isfinite(v->get<double>()))
      f.wrong(path(name).c_str(), *v, "a positive number");
    return v->get<double>();
  };
  // The length the model was pretrained at. transformers 5 (standardize_rope_params) takes a
  // top-level original_max_position_embeddings before the scaling's own; 4 reads only the
  // scaling's. Both given and different would compute other frequencies on each: refused.
  auto positions = [&](bool required) -> int64_t {
    const auto integer = [&](const json* v, const std::string& name) {
      if (!v->is_number_integer() || v->get<int64_t>() <= 0) f.wrong(name.c_str(), *v, "a positive integer");
      return v->get<int64_t>();
    };
    const json* top = f.find("original_max_position_embeddings");
    const json* own = field("original_max_position_embeddings");
    const int64_t top_value = top != nullptr ? integer(top, "original_max_position_embeddings") : 0;
    const int64_t own_value = own != nullptr ? integer(own, path("original_max_position_embeddings")) : 0;
    if (top != nullptr && own != nullptr && top_value != own_value)
      f.fail("field \"original_max_position_embeddings\" (" + std::to_string(top_value) + ") differs from \"" +
                 path("original_max_position_embeddings") + "\" (" + std::to_string(own_value) +
                 "): transformers 5 computes the rotary frequencies with the first, transformers 4 with the second",
             "make the two agree (the length the model was pretrained at)");
    if (top != nullptr) return top_value;
    if (own != nullptr) return own_value;
    if (required) f.missing(path("original_max_position_embeddings").c_str());
    return max_positions;
  };
  const json* type_value = field("rope_type") != nullptr ? field("rope_type") : field("type");
  if (type_value == nullptr) return r;  // rope_parameters holding rope_theta alone
  if (!type_value->is_string()) f.wrong(path("rope_type").c_str(), *type_value, "a string");
  const std::string type = type_value->get<std::string>();
  if (type == "default") return r;
  if (type != "linear" && type != "dynamic" && type != "llama3" && type != "yarn") {
    f.fail("field \"" + path("rope_type") + "\" is " + text::quoted(type) +
               ", a rotary scaling accumbench does not compute (its frequencies would differ from transformers')",
           "use a model with default, linear, dynamic, llama3 or yarn rope scaling, or remove the field to "
           "benchmark the same shapes with plain RoPE");
  }
  if (const json* partial = field("partial_rotary_factor"); partial != nullptr && !(partial->is_number() && partial->get<double>() == 1.0))
    f.fail("field \"" + path("partial_rotary_factor") + "\" rotates only part of each head",
           "accumbench rotates the whole head, as these model types do: remove the field");
  r.factor = number("factor", true, 1.0);
  if (type == "linear") {
    r.type = RopeType::kLinear;
  } else if (type == "dynamic") {
    // transformers' dynamic NTK starts from max_position_embeddings (its original_max_seq_len),
    // whatever the scaling's own original_max_position_embeddings says.
    r.type = RopeType::kDynamic;
    r.original_max_positions = max_positions;
  } else if (type == "llama3") {
    r.type = RopeType::kLlama3;
    r.low_freq_factor = number("low_freq_factor", true, 1.0);
    r.high_freq_factor = number("high_freq_factor", true, 4.0);
    r.original_max_positions = positions(true);
    if (!(r.high_freq_factor > r.low_freq_factor))
      f.fail("field \"" + path("high_freq_factor") + "\" is not above low_freq_factor",
             "correct the rope scaling: Llama 3's is low_freq_factor 1, high_freq_factor 4");
  } else {  // yarn
    r.type = RopeType::kYarn;
    r.original_max_positions = positions(false);
    r.beta_fast = number("beta_fast", false, 32.0);
    r.beta_slow = number("beta_slow", false, 1.0);
    const auto mscale = [&](double scale, double m) { return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
    // mscale and mscale_all_dim count only when both are set and not 0 (DeepSeek's configs set 0).
    const auto optional_scale = [&](const char* name) {
      const json* v = field(name);
      return v != nullptr && v->is_number() && v->get<double>() == 0.0 ? 0.0 : number(name, false, 0.0);
    };
    const double m = optional_scale("mscale"), m_all = optional_scale("mscale_all_dim");
    r.attention_factor = field("attention_factor") != nullptr ? number("attention_factor", true, 1.0)
                         : m > 0 && m_all > 0                  ? mscale(r.factor, m) / mscale(r.factor, m_all)
                                                               : mscale(r.factor, 1.0);
    if (const json* t = field("truncate")) {
      if (!t->is_boolean()) f.wrong(path("truncate").c_str(), *t, "true or false");
      r.truncate = t->get<bool>();
    }
  }
  return r;
}

// The config's dropout probabilities that are not 0 ("attn_pdrop 0.1 (the default), ..."), each
// `fallback` when left out: transformers trains with them on and the engine runs without dropout.
std::string dropouts(const FieldReader& f, std::initializer_list<const char*> keys, double fallback) {
  std::string text;
  for (const char* key : keys) {
    double p = fallback;
    if (const json* v = f.find(key)) {
      if (!v->is_number() || v->get<double>() < 0.0 || v->get<double>() >= 1.0 || !std::isfinite(v->get<double>()))
        f.wrong(key, *v, "a probability from 0 to below 1");
      p = v->get<double>();
    }
    if (p == 0.0) continue;
    std::ostringstream value;
    value << p;
    text += (text.empty() ? "" : ", ") + std::string(key) + " " + value.str() + (f.has(key) ? "" : " (the default)");
  }
  return text;
}

// transformers' ACT2FN names (activations.py) for the activations the engine computes; any other
// would benchmark a different function, so the file is refused with the names that work.
Activation activation_from(const FieldReader& f, const char* key, const std::string& fallback) {
  const std::string name = f.has(key) ? f.string(key) : fallback;
  for (const Activation a : {Activation::kGeluNew, Activation::kGeluTanh, Activation::kGelu, Activation::kSilu})
    if (name == to_string(a)) return a;
  if (name == "swish") return Activation::kSilu;  // ACT2FN's other name for SiLU
  f.fail(std::string("field \"") + key + "\" is " + text::quoted(name) + ", an activation accumbench does not compute",
         "use gelu_new, gelu_pytorch_tanh, gelu or silu (the same shape and nearly the same cost) to benchmark "
         "the model with that activation instead");
}

// How many of a Qwen2/Qwen3 model's layers use the sliding window. Qwen2Config and Qwen3Config
// (transformers 4.53+) take an explicit layer_types list, one "full_attention" or
// "sliding_attention" per layer; without it they build one with the window on layers
// max_window_layers and up (default 28), so a 24-layer Qwen2 with the defaults has none.
int64_t qwen_sliding_layers(const FieldReader& f, int64_t n_layers) {
  const json* types = f.find("layer_types");
  if (types == nullptr) return std::max<int64_t>(0, n_layers - f.count_or("max_window_layers", 28));
  const std::string expected = std::to_string(n_layers) + " strings, each \"full_attention\" or \"sliding_attention\"";
  if (!types->is_array() || static_cast<int64_t>(types->size()) != n_layers) f.wrong("layer_types", *types, expected);
  int64_t sliding = 0;
  for (const json& t : *types) {
    if (t == "sliding_attention")
      ++sliding;
    else if (t != "full_attention")
      f.wrong("layer_types", *types, expected);
  }
  return sliding;
}

// transformers GPT2Config / GPT2LMHeadModel.
ModelConfig gpt2_from(const FieldReader& f) {
  ModelConfig c;
  c.arch = Architecture::kGpt2;
  c.vocab_size = f.positive_int("vocab_size");
  // GPT2Config's attribute_map: hidden_size, num_hidden_layers, num_attention_heads and
  // max_position_embeddings set n_embd, n_layer, n_head and n_positions (a config written with the
  // common names loads the same model). Both given and different: refused, as no one file says which.
  const auto field = [&f](const char* name, const char* alias) {
    if (f.has(name) && f.has(alias) && f.positive_int(name) != f.positive_int(alias)) {
      f.fail(std::string("fields \"") + name + "\" (" + std::to_string(f.positive_int(name)) + ") and \"" + alias +
                 "\" (" + std::to_string(f.positive_int(alias)) + "), which GPT2Config maps to it, differ",
             std::string("keep one of them"));
    }
    return f.has(name) || !f.has(alias) ? name : alias;
  };
  c.d_model = f.positive_int(field("n_embd", "hidden_size"));
  c.n_layers = f.positive_int(field("n_layer", "num_hidden_layers"));
  c.n_heads = f.positive_int(field("n_head", "num_attention_heads"));
  // n_positions sizes the wpe table; n_ctx is its older alias (both are 1024 in gpt2's file).
  const char* positions = field("n_positions", "max_position_embeddings");
  if (f.has(positions))
    c.max_seq_len = f.positive_int(positions);
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
  c.activation = activation_from(f, "activation_function", "gelu_new");  // GPT2Config's default
  // GPT2Attention's options that change the scores' math (modeling_gpt2.py): refused away from
  // GPT-2's own values, which the engine computes.
  if (!f.boolean_or("scale_attn_weights", true))
    f.fail("field \"scale_attn_weights\" is false, which leaves the attention scores unscaled by 1/sqrt(head_dim) "
           "and accumbench scales them",
           "remove the field to benchmark the same shapes with GPT-2's scaled attention");
  if (f.boolean_or("scale_attn_by_inverse_layer_idx", false))
    f.fail("field \"scale_attn_by_inverse_layer_idx\" is true, which also divides each layer's attention scores by "
           "its index + 1 and accumbench does not",
           "remove the field (or set it false) to benchmark the same shapes with GPT-2's attention");
  if (f.boolean_or("reorder_and_upcast_attn", false))
    f.fail("field \"reorder_and_upcast_attn\" is true, which computes the attention scores in fp32 under autocast "
           "(more memory than accumbench's attention)",
           "remove the field (or set it false) to benchmark GPT-2's attention");
  // An encoder-decoder's GPT-2 (GPT2Block adds a cross-attention and ln_cross_attn per layer):
  // other parameters and another step.
  if (f.boolean_or("add_cross_attention", false))
    f.fail("field \"add_cross_attention\" is true, which adds a cross-attention over an encoder's states to every "
           "block (an encoder-decoder's decoder) and accumbench trains a decoder alone",
           "remove the field (or set it false) to benchmark the decoder-only GPT-2");
  // GPT2Config's dropouts default to 0.1 each: transformers trains with them.
  c.dropout = dropouts(f, {"embd_pdrop", "attn_pdrop", "resid_pdrop"}, 0.1);
  return c;
}

// transformers LlamaConfig / Qwen2Config / Qwen3Config / MistralConfig (same field names).
ModelConfig llama_family_from(const FieldReader& f, const std::string& model_type) {
  ModelConfig c;
  c.arch = Architecture::kLlama;
  c.vocab_size = f.positive_int("vocab_size");
  c.d_model = f.positive_int("hidden_size");
  c.d_ff = f.positive_int("intermediate_size");
  c.n_layers = f.positive_int("num_hidden_layers");
  c.n_heads = f.positive_int("num_attention_heads");
  // Not a shape here (RoPE has no position table): absent, the class's default, as transformers
  // loads such a file (the first Llama uploads named it max_sequence_length, which it ignores).
  const int64_t positions_default = model_type == "llama"     ? 2048
                                    : model_type == "mistral" ? 4096 * 32
                                                              : 32768;  // Qwen2Config, Qwen3Config
  c.max_seq_len = f.positive_int_or("max_position_embeddings", positions_default);
  // num_key_value_heads absent: the class's default, the head count for LlamaConfig, 8 for
  // MistralConfig, 32 for Qwen2Config and Qwen3Config; null: the head count in every one.
  const bool kv_absent = !f.has("num_key_value_heads") && !f.is_null("num_key_value_heads");
  const int64_t kv_default = !kv_absent ? c.n_heads
                             : model_type == "mistral"                        ? 8
                             : model_type == "qwen2" || model_type == "qwen3" ? 32
                                                                              : c.n_heads;
  c.n_kv_heads = f.positive_int_or("num_key_value_heads", kv_default);
  if (c.n_heads % c.n_kv_heads != 0) {
    if (kv_absent)
      f.fail("field \"num_key_value_heads\" is missing, and transformers' default for " + model_type + ", " +
                 std::to_string(c.n_kv_heads) + ", does not divide \"num_attention_heads\" (" +
                 std::to_string(c.n_heads) + ")",
             "give num_key_value_heads in the file (the model's own config.json always does)");
    f.fail("field \"num_key_value_heads\" (" + std::to_string(c.n_kv_heads) +
               ") does not divide \"num_attention_heads\" (" + std::to_string(c.n_heads) + ")",
           "grouped-query attention needs a key/value head count that divides the head count");
  }
  // An explicit head_dim may make n_heads·head_dim differ from hidden_size (Mistral-Nemo:
  // 32 × 128 ≠ 5120; Qwen3-0.6B: 16 × 128 ≠ 1024); without it transformers uses
  // hidden_size / num_attention_heads, except Qwen3Config, whose head_dim defaults to 128.
  if (f.has("head_dim")) {
    c.head_dim = f.positive_int("head_dim");
  } else if (model_type == "qwen3" && f.is_null("head_dim")) {
    // Qwen3Config keeps the null and Qwen3Attention reads it as given (transformers 4), or the
    // config refuses it (5): no model is built, where Llama's, Mistral's and Qwen2's read null as
    // hidden_size / num_attention_heads.
    f.fail("field \"head_dim\" is null, which transformers' Qwen3 cannot build a model from (it takes the value "
           "as given, where Llama's config reads null as hidden_size / num_attention_heads)",
           "give the head size, or leave the field out for Qwen3's default of 128");
  } else if (model_type == "qwen3") {
    c.head_dim = 128;
  } else {
    if (c.d_model % c.n_heads != 0)
      f.fail("field \"num_attention_heads\" (" + std::to_string(c.n_heads) +
                 ") does not divide \"hidden_size\" (" + std::to_string(c.d_model) + ")",
             "use a head count that divides hidden_size, or give head_dim explicitly");
    c.head_dim = c.d_model / c.n_heads;
  }
  c.rope_theta = rope_theta_of(f);
  c.rope_scaling = rope_scaling_of(f, c.max_seq_len);
  if (f.has("partial_rotary_factor") && f.positive_number_or("partial_rotary_factor", 1.0) != 1.0)
    f.fail("field \"partial_rotary_factor\" rotates only part of each head",
           "accumbench rotates the whole head, as these model types do: remove the field");
  c.norm_eps = f.positive_number_or("rms_norm_eps", 1e-6);  // all three classes default to 1e-6
  c.dropout = dropouts(f, {"attention_dropout"}, 0.0);  // the attention probabilities' (default 0)
  c.tied_embeddings = f.boolean_or("tie_word_embeddings", false);
  c.activation = activation_from(f, "hidden_act", "silu");  // every one of the four configs' default
  // MistralConfig: sliding_window 4096 unless given; null turns it off. Qwen2Config/Qwen3Config:
  // only with use_sliding_window (default false), then sliding_window (default 4096).
  const bool windowed = model_type == "mistral" || ((model_type == "qwen2" || model_type == "qwen3") &&
                                                    f.boolean_or("use_sliding_window", false));
  if (windowed && !f.is_null("sliding_window")) {
    c.sliding_window = f.positive_int_or("sliding_window", 4096);
    c.sliding_window_layers = model_type == "mistral" ? c.n_layers : qwen_sliding_layers(f, c.n_layers);
    if (c.sliding_window_layers == 0) c.sliding_window = 0;  // no layer masks: nothing differs
  }

  if (model_type == "qwen2") {
    c.qkv_bias = true;  // Qwen2Attention: q/k/v_proj bias=True, o_proj bias=False, always
  } else if (model_type == "qwen3") {
    // Qwen3Attention: q_norm, k_norm (RMSNorm over head_dim) before RoPE; no bias unless
    // attention_bias, which (as in Llama) puts one on o_proj too. Qwen3MLP has none.
    c.qk_norm = true;
    c.qkv_bias = c.o_bias = f.boolean_or("attention_bias", false);
  } else if (model_type == "llama") {
    // LlamaAttention puts attention_bias on q/k/v and o_proj, LlamaMLP mlp_bias on all three MLP
    // projections.
    c.qkv_bias = c.o_bias = f.boolean_or("attention_bias", false);
    c.mlp_bias = f.boolean_or("mlp_bias", false);
  }
  return c;
}

}  // namespace

namespace {

// quantization_config, as transformers saves it with a quantised checkpoint (BitsAndBytesConfig's
// to_dict: quant_method "bitsandbytes", load_in_4bit / load_in_8bit, bnb_4bit_quant_type,
// bnb_4bit_use_double_quant; GPTQ, AWQ and others by their quant_method).
std::string stored_quantisation(const json& root, const std::string& origin) {
  const auto it = root.find("quantization_config");
  if (it == root.end() || it->is_null()) return "";
  const FieldReader q(*it, origin);
  if (!it->is_object()) q.wrong("quantization_config", *it, "an object");
  const std::string method = q.has("quant_method") ? q.string("quant_method") : "bitsandbytes";
  if (method != "bitsandbytes") return method;
  if (q.boolean_or("load_in_4bit", false)) {
    const std::string type = q.has("bnb_4bit_quant_type") ? q.string("bnb_4bit_quant_type") : "fp4";
    return "bitsandbytes " + type + (q.boolean_or("bnb_4bit_use_double_quant", false) ? " with double quant" : "");
  }
  return q.boolean_or("load_in_8bit", false) ? "bitsandbytes int8" : "";
}

// "architectures" names the class the checkpoint was saved from. accumbench measures a causal
// language model's step (the LM head over the vocabulary and its loss), so a sequence classifier
// (...ForSequenceClassification, a d × num_labels head, as reward models ship) or a bare model
// (MistralModel, no head, as embedding models ship) would be planned with a head and a loss it
// does not have: refused. Absent, null or empty: the model_type's causal LM.
void require_causal_lm(const json& root, const FieldReader& f) {
  const auto it = root.find("architectures");
  if (it == root.end() || it->is_null()) return;
  if (!it->is_array()) f.wrong("architectures", *it, "a list of class names");
  const auto ends_with = [](const std::string& name, const std::string& tail) {
    return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  for (const json& name : *it) {
    if (!name.is_string()) f.wrong("architectures", *it, "a list of class names");
    // LlamaForCausalLM, Qwen3ForCausalLM, the first uploads' LLaMAForCausalLM; GPT2LMHeadModel.
    if (ends_with(name.get<std::string>(), "ForCausalLM") || ends_with(name.get<std::string>(), "LMHeadModel")) return;
  }
  if (it->empty()) return;
  f.fail("field \"architectures\" names " + it->front().get<std::string>() +
             ", not a causal language model (...ForCausalLM), whose head and loss are not the language-model step "
             "accumbench measures",
         "remove \"architectures\" to benchmark the causal language model of the same shape, or give a "
         "...ForCausalLM config");
}

}  // namespace

ModelConfig parse_hf_config(const std::string& json_text, const std::string& origin) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::parse_error& e) {
    // what() is "[json.exception.parse_error.101] parse error at line L, column C: ..."; keep the
    // part after the tag, which carries the position in the terms an editor shows.
    const std::string detail = text::shortened(text::json_error_text(e.what()), 200);
    throw UserError("config \"" + origin + "\" is not valid JSON (" + detail +
                    "); fix the file or download config.json again");
  } catch (const json::out_of_range& e) {
    // nlohmann reports a number such as 1e999 that no double can hold as out_of_range 406.
    throw UserError("config \"" + origin + "\" holds a number too large for a double (" +
                    text::shortened(text::json_error_text(e.what()), 120) + "); fix the file or download config.json again");
  }
  if (!root.is_object())
    throw UserError("config \"" + origin + "\" holds a JSON " + root.type_name() +
                    " instead of an object; pass a model's config.json");

  const FieldReader fields(root, origin);
  const std::string model_type = fields.string("model_type");
  ModelConfig cfg;
  if (model_type == "gpt2") {
    cfg = gpt2_from(fields);
  } else if (model_type == "llama" || model_type == "qwen2" || model_type == "qwen3" || model_type == "mistral") {
    cfg = llama_family_from(fields, model_type);
  } else {
    fields.fail("model_type \"" + model_type + "\" is not supported",
                std::string("use a config whose model_type is one of ") + kSupportedModelTypes);
  }
  require_causal_lm(root, fields);
  cfg.name = origin;
  cfg.stored_quantised = stored_quantisation(root, origin);
  // The checkpoint's dtype (transformers 4's torch_dtype, 4.56's and 5's dtype, which wins where
  // a file has both), kept where it is 16-bit.
  const json* dtype = fields.find("dtype");
  if (dtype == nullptr) dtype = fields.find("torch_dtype");
  if (dtype != nullptr && dtype->is_string() && (*dtype == "bfloat16" || *dtype == "float16")) {
    cfg.stored_dtype = dtype->get<std::string>();
  }
  validate(cfg);  // the remaining shape rules (odd head_dim, overflow); messages name the file
  return cfg;
}

namespace {

namespace fs = std::filesystem;

// A Hub model id, ORG/NAME or NAME (huggingface_hub's repo-id characters), that is not a path on disk; a
// name ending in .json is a mistyped file, not an id.
bool looks_like_hub_id(const std::string& text) {
  // ORG/NAME, or a NAME alone: the Hub's oldest models have no organisation (gpt2, distilgpt2),
  // and huggingface_hub caches them as models--NAME.
  const auto slash = text.find('/');
  if (text.empty() || slash == 0 || (slash != std::string::npos && slash + 1 == text.size()) ||
      (slash != std::string::npos && text.find('/', slash + 1) != std::string::npos))
    return false;
  if (text.size() >= 5 && text.compare(text.size() - 5, 5, ".json") == 0) return false;
  for (const char ch : text)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && std::strchr("/-_.", ch) == nullptr) return false;
  return text[0] != '.' && (slash == std::string::npos || text[slash + 1] != '.');
}

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

// Which rule picked the cache directory, for the not-found message.
std::string hub_cache_origin() {
  if (!env_or_empty("HF_HUB_CACHE").empty()) return "$HF_HUB_CACHE";
  if (!env_or_empty("HF_HOME").empty()) return "$HF_HOME/hub";
  return "the default cache";
}

// huggingface_hub's layout: models--ORG--NAME/refs/main holds the revision of the snapshot
// directory snapshots/<rev>/, whose files link into blobs/.
fs::path cached_snapshot(const std::string& id, const fs::path& repo_dir) {
  std::error_code ec;
  const fs::path snapshots = repo_dir / "snapshots";
  std::ifstream ref(repo_dir / "refs" / "main");
  if (ref) {
    std::string rev;
    ref >> rev;
    if (!rev.empty() && fs::is_directory(snapshots / rev, ec)) return snapshots / rev;
    throw UserError("the cached Hub model \"" + id + "\" names revision \"" + rev + "\" in " +
                    (repo_dir / "refs" / "main").string() + " but has no snapshot " +
                    (snapshots / rev).string() + "; download it again (huggingface-cli download " +
                    id + " config.json)");
  }
  std::vector<fs::path> found;
  for (fs::directory_iterator it(snapshots, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec)) found.push_back(it->path());
  if (found.size() == 1) return found.front();
  if (found.empty())
    throw UserError("the Hub model \"" + id + "\" has no snapshot in the local Hugging Face cache (" +
                    snapshots.string() + " is empty or missing); download it with huggingface-cli download " +
                    id + " config.json, or pass the path of its config.json");
  throw UserError("the cached Hub model \"" + id + "\" has " + std::to_string(found.size()) +
                  " snapshots under " + snapshots.string() +
                  " and no refs/main to choose one; pass the snapshot directory you mean instead of the id");
}

// The config.json of a Hub id from the local cache only: --hf-config never downloads.
std::string cached_hub_config(const std::string& id) {
  // models--ORG--NAME, or models--NAME for an id without an organisation.
  std::string repo = id;
  if (const auto slash = repo.find('/'); slash != std::string::npos) repo.replace(slash, 1, "--");
  const std::string cache = hf_hub_cache_dir();
  const fs::path repo_dir = fs::path(cache) / ("models--" + repo);
  std::error_code ec;
  if (!fs::is_directory(repo_dir, ec))
    throw UserError("\"" + id + "\" is neither a file nor a directory, and as a Hub id it is not in the local " +
                    "Hugging Face cache (looked for " + repo_dir.string() + ", from " + hub_cache_origin() +
                    "); download it with huggingface-cli download " + id +
                    " config.json, set HF_HUB_CACHE to the cache that holds it, or pass the path of its config.json" +
                    (!preset_of_hub_id(id).empty()
                         ? "; or give --model " + preset_of_hub_id(id) + ", the preset written from its config.json"
                     : id.find('/') == std::string::npos ? " (or a preset's name: accumbench models)"
                                                          : ""));
  const fs::path config = cached_snapshot(id, repo_dir) / "config.json";
  if (!fs::is_regular_file(config, ec))
    throw UserError("the cached Hub model \"" + id + "\" has no " + config.string() +
                    "; download it with huggingface-cli download " + id + " config.json");
  return config.string();
}

std::string read_config_text(const std::string& path) {
  require_readable_file(path, "--hf-config");
  require_file_size_at_most(path, int64_t{64} << 20, "--hf-config",
                            "a Hugging Face config.json, which is kilobytes (a weights file?)");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw UserError("cannot read config \"" + path + "\" (" + std::strerror(errno) +
                    "); pass the path of a Hugging Face config.json, a model directory or a cached Hub id");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad())
    throw UserError("cannot read config \"" + path + "\" (" + std::strerror(errno) +
                    "); pass the path of a readable Hugging Face config.json");
  return text.str();
}

}  // namespace

std::string hf_hub_cache_dir() {
  // huggingface_hub's constants: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub.
  const std::string hub_cache = env_or_empty("HF_HUB_CACHE");
  if (!hub_cache.empty()) return hub_cache;
  const std::string hf_home = env_or_empty("HF_HOME");
  if (!hf_home.empty()) return (fs::path(hf_home) / "hub").string();
  const std::string home = env_or_empty("HOME");
  return ((home.empty() ? fs::path("~") : fs::path(home)) / ".cache" / "huggingface" / "hub").string();
}

// The preset written from a Hub model's config.json (ModelConfig::hub_ids), by its id, in any case
// (the Instruct and Base variants share the shape); "" for another id.
std::string preset_of_hub_id(const std::string& id) {
  const auto lower = [](std::string text) {
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
  };
  std::string name = lower(id);
  for (const char* suffix : {"-instruct", "-base"}) {
    const std::string tail = suffix;
    if (name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0)
      name.resize(name.size() - tail.size());
  }
  for (const ModelConfig& preset : presets()) {
    for (const std::string& hub : preset.hub_ids)
      if (name == lower(hub)) return preset.name;
  }
  return "";
}

// model_name_or_path / base_model for --emit trl|axolotl: what from_pretrained loads the model
// from. A preset's first Hub id (the Hub model its shape was written from); --hf-config's Hub id as
// given; a model directory as given, a config.json's directory (from_pretrained takes the
// directory, not the file). "" where nothing names the model: accumbench's own small presets, a
// config file of another name, a spec that is neither path nor Hub id.
std::string trainer_model_name(const ModelOptions& model) {
  std::string spec = model.hf_config;
  if (spec.empty()) {
    for (const ModelConfig& preset : presets())
      if (preset.name == model.preset) return preset.hub_ids.empty() ? "" : preset.hub_ids.front();
    spec = model.preset;  // a saved sweep's context names a config path where --hf-config ran
  }
  std::error_code ec;
  if (fs::is_directory(spec, ec)) return spec;
  if (fs::exists(spec, ec)) {
    if (fs::path(spec).filename() != "config.json") return "";
    const fs::path directory = fs::path(spec).parent_path();
    return directory.empty() ? "." : directory.string();
  }
  return looks_like_hub_id(spec) ? spec : "";
}

std::string resolve_hf_config_path(const std::string& spec) {
  std::error_code ec;
  if (fs::is_directory(spec, ec)) {
    const fs::path config = fs::path(spec) / "config.json";
    if (!fs::exists(config, ec))
      throw UserError("config directory \"" + spec +
                      "\" has no config.json; pass a model directory that holds one, or the config.json file itself");
    return config.string();
  }
  if (!fs::exists(spec, ec) && looks_like_hub_id(spec)) return cached_hub_config(spec);
  return spec;
}

ModelConfig load_hf_config(const std::string& spec) {
  const std::string path = resolve_hf_config_path(spec);
  ModelConfig cfg = parse_hf_config(read_config_text(path), path);
  std::error_code ec;
  if (!fs::exists(spec, ec)) cfg.name = spec;  // a Hub id names the model, not its snapshot path
  return cfg;
}

}  // namespace accumbench
