// Model shapes: presets at published sizes, Hugging Face config.json import, closed-form
// parameter counts. No LibTorch here, so the plan and the CLI can use it without building a model.
//
//   ModelConfig cfg = accumbench::find_preset("gpt2-124m");
//   int64_t n = accumbench::parameter_count(cfg);   // 124,439,808
//   ModelConfig hf = accumbench::load_hf_config("config.json");   // or a directory, or a cached
//   ModelConfig q3 = accumbench::load_hf_config("Qwen/Qwen3-1.7B"); // Hub id (never downloaded)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "accumbench/options.hpp"

namespace accumbench {

enum class Architecture {
  kGpt2,   // learned positions, LayerNorm, GELU-tanh MLP, biases everywhere, tied embeddings
  kLlama,  // RoPE, RMSNorm, SwiGLU MLP, grouped-query attention, optional q/k/v bias (Qwen2)
           // and q/k RMSNorm over the head dim (Qwen3)
};

std::string to_string(Architecture arch);

// The MLP's activation, by the name transformers gives it (GPT-2: act(c_fc(x)); the Llama family:
// down(act(gate(x)) · up(x))). The engine runs each as one fused op that saves its input, so the
// choice changes neither a shape nor the plain plan. transformers computes gelu_new as separate
// elementwise ops (activations.py NewGELUActivation), which --framework hf-trl plans.
enum class Activation {
  kGeluNew,   // "gelu_new", GPT-2's: GELU with the tanh approximation
  kGeluTanh,  // "gelu_pytorch_tanh": the same function, one fused op in transformers too
  kGelu,      // "gelu": exact GELU (erf)
  kSilu,      // "silu" (or "swish"): the Llama family's
};

std::string to_string(Activation activation);

// transformers' rope_scaling (rope_parameters in transformers 5): how the rotary frequencies are
// rescaled for a longer context (modeling_rope_utils.py, ROPE_INIT_FUNCTIONS). Only the angles
// change: no shape, no work, no memory.
enum class RopeType {
  kDefault,  // inv_freq = 1 / theta^(2i/hd)
  kLinear,   // inv_freq / factor
  kLlama3,   // Llama 3.1+: long wavelengths / factor, short ones kept, a smooth ramp between
  kYarn,     // YaRN: a ramp between interpolated and extrapolated frequencies, cos/sin × attention_factor
  kDynamic,  // dynamic NTK: the default up to original_max_positions (beyond, refused)
};
std::string to_string(RopeType type);

struct RopeScaling {
  RopeType type = RopeType::kDefault;
  double factor = 1.0;
  int64_t original_max_positions = 0;  // llama3, yarn, dynamic
  double low_freq_factor = 1.0;        // llama3
  double high_freq_factor = 4.0;       // llama3
  double beta_fast = 32.0;             // yarn
  double beta_slow = 1.0;              // yarn
  double attention_factor = 1.0;       // yarn: multiplies cos and sin
  bool truncate = true;                // yarn: the correction range rounded to whole dimensions
};

struct ModelConfig {
  std::string name;
  Architecture arch = Architecture::kGpt2;
  int64_t vocab_size = 0;
  int64_t d_model = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;   // == n_heads for GPT-2 (multi-head attention)
  int64_t head_dim = 0;     // usually d_model / n_heads; Qwen3 sets it (attention width H·hd ≠ d)
  int64_t d_ff = 0;         // MLP hidden width (4·d for GPT-2)
  int64_t max_seq_len = 0;  // learned positions (GPT-2) / RoPE table length (Llama)
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;  // Llama family only
  double norm_eps = 1e-5;
  bool tied_embeddings = true;
  bool qkv_bias = false;    // Qwen2 puts a bias on q/k/v projections
  bool o_bias = false;      // Llama's and Qwen3's attention_bias: on o_proj too (q/k/v: qkv_bias)
  bool mlp_bias = false;    // Llama's mlp_bias: on gate_proj, up_proj and down_proj
  bool qk_norm = false;     // Qwen3: RMSNorm (weight of size head_dim, shared by the heads) on
                            // each head's q and k before RoPE
  Activation activation = Activation::kGeluNew;  // kSilu for the Llama family
  // Mistral's (and Qwen2's, with use_sliding_window) attention window in tokens; 0: none. The
  // engine attends to the whole causal prefix (sliding_window_note says so when it matters).
  int64_t sliding_window = 0;
  // How many layers the window applies to (Mistral: all; Qwen2/Qwen3: from max_window_layers on,
  // or as layer_types lists them).
  int64_t sliding_window_layers = 0;
  std::string published_parameters;  // e.g. "124M"; empty for test presets
  // The Hugging Face Hub ids whose config.json the preset was written from, as the Hub spells them
  // ("Qwen/Qwen3-1.7B"; GPT-2's also without the organisation, its legacy id); empty for test presets.
  std::vector<std::string> hub_ids;
  // A Hugging Face config's dropout probabilities that are not 0 ("attn_pdrop 0.1, ..."), which
  // transformers applies in training and the engine does not (dropout_note); empty for presets.
  std::string dropout;
  // A config.json's 16-bit checkpoint dtype (its "dtype", or "torch_dtype" before transformers 5):
  // "bfloat16" or "float16"; empty for fp32, for none, and for presets (stored_dtype_note).
  std::string stored_dtype;
  // A config.json's quantization_config (a checkpoint saved quantised): how its block linears are
  // stored, "bitsandbytes nf4", "bitsandbytes nf4 with double quant", "bitsandbytes fp4",
  // "bitsandbytes int8", or the quant_method ("gptq", "awq", ...); empty for an unquantised one.
  // validate_lora requires the matching --base-quant (adapters.cpp).
  std::string stored_quantised;
};

// Throws UserError naming the field when the shape is impossible (heads not dividing, ...).
void validate(const ModelConfig& cfg);

// Throws UserError when seq_len is not positive or beyond the model's positions.
void check_sequence_length(const ModelConfig& cfg, int64_t seq_len);

// A sentence for the user when the config's sliding window is shorter than seq_len (a
// Hugging Face model then masks keys further back than the window, which the engine does not);
// empty when it changes nothing.
std::string sliding_window_note(const ModelConfig& cfg, int64_t seq_len);

// A sentence when the config sets dropout (cfg.dropout): transformers trains with it on, the
// engine without; empty otherwise.
std::string dropout_note(const ModelConfig& cfg);
// A sentence when the config stores its weights in 16 bits (cfg.stored_dtype) and the job trains
// them in fp32 alone (`weights_dtypes`, --weights-dtype's list): which one a Hugging Face job holds
// depends on how it loads the model, and --weights-dtype names the other; "" otherwise.
std::string stored_dtype_note(const ModelConfig& cfg, const std::vector<Precision>& weights_dtypes);

// A sentence when a RoPE model runs past its max_position_embeddings (allowed, as in
// transformers: only GPT-2's learned table refuses, check_sequence_length); empty otherwise.
std::string context_length_note(const ModelConfig& cfg, int64_t seq_len);

// Closed form of the number of trainable parameters (see src/models/model_config.cpp).
int64_t parameter_count(const ModelConfig& cfg);

// Parameters outside the transformer blocks' matrices that do not take part in the 6N FLOPs
// estimate: position embeddings (token embeddings count once, through the tied/untied head).
int64_t non_embedding_parameter_count(const ModelConfig& cfg);

const std::vector<ModelConfig>& presets();

// Throws UserError listing the known names when `name` is not a preset.
const ModelConfig& find_preset(const std::string& name);

// Builds a ModelConfig from a Hugging Face config.json (model_type gpt2, llama, qwen2, qwen3,
// mistral). `spec` is the file, a model directory (its config.json) or a Hub id ORG/NAME found in
// the local cache only (resolve_hf_config_path). Throws UserError on unreadable files, broken
// JSON, unknown model_type, missing/invalid fields, an id that is not cached.
ModelConfig load_hf_config(const std::string& spec);
ModelConfig parse_hf_config(const std::string& json_text, const std::string& origin);

// The config.json that --hf-config means: a directory's config.json; for ORG/NAME that is not a
// path on disk, models--ORG--NAME/snapshots/<refs/main, or the only snapshot>/config.json in the
// local Hub cache (never the network); anything else unchanged. Throws UserError (with where it
// looked and what to do) when a directory has no config.json or an id is not cached.
std::string resolve_hf_config_path(const std::string& spec);

// The preset written from a Hub model's config.json (ModelConfig::hub_ids), by the model's id in
// any case ("Qwen/Qwen2.5-0.5B-Instruct" too: the Instruct and Base variants share the shape); ""
// for another id.
std::string preset_of_hub_id(const std::string& id);
// What a trainer config's model_name_or_path (TRL) or base_model (axolotl) names for `model`: a
// preset's Hub id, --hf-config's Hub id or model directory (a config.json's directory); "" where
// nothing truthful names it (accumbench's own small presets, a config file not named config.json).
std::string trainer_model_name(const ModelOptions& model);

// The local Hub cache huggingface_hub uses: $HF_HUB_CACHE, else $HF_HOME/hub, else
// ~/.cache/huggingface/hub.
std::string hf_hub_cache_dir();

// The model a run asks for: the Hugging Face config when one is given, else the preset.
ModelConfig resolve_model(const ModelOptions& options);
// A model named by one word, as a trainer config or `models --index` names it: the preset of that
// name, else --hf-config's spec (a config.json, a model directory or a cached Hub id).
ModelOptions model_options_for(const std::string& name);

// ---- LoRA on the block linears (src/models/adapters.cpp) ----

// One linear layer of a transformer block, as LoRA targets it.
struct BlockLinear {
  std::string name;         // Llama family: q, k, v, o, gate, up, down; GPT-2: c_attn, attn_c_proj, c_fc, mlp_c_proj
  int64_t in = 0, out = 0;  // features
  bool attention = false;   // in the attention (else in the MLP)
};
// The linears of one block, in forward order.
std::vector<BlockLinear> block_linears(const ModelConfig& cfg);
// The block linears that `targets` names: all-linear (every block linear, never the LM head, as
// PEFT's "all-linear"), attention, mlp, or a comma list of names (q_proj-style names and GPT-2's
// c_proj, which names both of its projections, are accepted too). UserError on an unknown name,
// listing the model's names.
std::vector<BlockLinear> lora_targets(const ModelConfig& cfg, const std::string& targets);
// PEFT's target_modules, read as PEFT reads them (tuners_utils.check_target_module_exists) against
// the module paths of the model's transformers class (model.layers.3.self_attn.q_proj;
// transformer.h.3.attn.c_attn): a list matches a path equal to a name or ending in "." + name; a
// string is a regular expression over the whole path, or "all-linear" (any case). Returns
// --lora-targets' value: "all-linear" or accumbench's comma list of block linears. UserError (a
// phrase to follow the key's name, "names \"q\", which matches no module ...") when a name
// matches nothing, or a match is no block linear (the embeddings, the LM head, a norm), or the
// matched linears differ between layers.
// `all_linear_hint`: what to say where "all-linear" is one of the names (PEFT's shorthand only as a
// string, not in a list).
std::string targets_from_peft_names(const ModelConfig& cfg, const std::vector<std::string>& names,
                                    const std::string& all_linear_hint = "all-linear alone, not in a list, is PEFT's shorthand");
std::string targets_from_peft_pattern(const ModelConfig& cfg, const std::string& pattern);
// Throws UserError when the LoRA options do not fit this model: a rank above a target's smaller
// dimension, an unknown target.
void validate_lora(const ModelConfig& cfg, const LoraOptions& lora);
// A sentence when --lora-rank is above the smaller dimension of an adapted linear (legal in PEFT;
// the update cannot have more than that rank); "" otherwise.
std::string lora_rank_note(const ModelConfig& cfg, const LoraOptions& lora);
// Trainable adapter parameters: L · Σ over the targets of r·(in + out).
int64_t lora_parameter_count(const ModelConfig& cfg, const LoraOptions& lora);
// alpha / rank, with alpha 0 meaning 2·rank (the CLI's default).
double lora_scaling(const LoraOptions& lora);

// ---- QLoRA: the frozen base quantised (src/models/quantization.cpp) ----

// NF4's block (bitsandbytes quantize_4bit's default blocksize) and double quant's block of
// absmax values (quantize_4bit with compress_statistics: quantize_blockwise(blocksize=256)).
inline constexpr int64_t kNf4Block = 64;
inline constexpr int64_t kNestedBlock = 256;
// The 16 NF4 values, in code order (bitsandbytes functional.py get_4bit_type("nf4")).
extern const float kNf4Values[16];

// What bitsandbytes keeps for one quantised (out, in) weight of n = out·in elements, in bytes.
// nf4: the packed codes ceil(n/2); the absmax per block of 64, fp32 ceil(n/64)·4, or with double
// quant uint8 ceil(n/64) plus the nested state: fp32 absmax per 256 absmax values, the fp32
// offset (their mean) and a copy of the 8-bit dynamic map (256 fp32); and the 16-value NF4 table
// every QuantState holds (fp32). int8: the int8 weight n and the fp32 scale per row (SCB).
struct QuantizedWeightBytes {
  int64_t codes = 0;          // packed 4-bit codes, or the int8 weight
  int64_t absmax = 0;         // per-block absmax (fp32, or uint8 with double quant), or SCB
  int64_t nested = 0;         // double quant: nested absmax, offset, dynamic map
  int64_t code_table = 0;     // the NF4 table held per weight
  int64_t total() const { return codes + absmax + nested + code_table; }
};
QuantizedWeightBytes quantized_weight_bytes(int64_t out, int64_t in, const LoraOptions& lora);
// The sum over every block linear of the model (all of them are quantised: transformers replaces
// every nn.Linear but the head, get_keys_to_not_convert).
int64_t quantized_base_bytes(const ModelConfig& cfg, const LoraOptions& lora);
// Elements of the block linears' weights, which the quantised storage replaces.
int64_t block_linear_weight_numel(const ModelConfig& cfg);
// The dequantisation of one (out, in) weight into `compute_bytes`-byte elements: the transient
// weight itself and the scratch src/models/quantized_linear.cpp allocates beside it at most (the
// dequantised absmax with double quant, one chunk's indices and values, the code-pair table), or,
// for a small nf4 weight, the higher moment of making that table or double quant's absmax first.
int64_t dequantized_weight_bytes(int64_t out, int64_t in, int64_t compute_bytes, const LoraOptions& lora);
// Codes dequantised per chunk (a multiple of 32, so that a chunk holds whole 64-blocks).
int64_t dequant_chunk_codes(int64_t numel);

}  // namespace accumbench
