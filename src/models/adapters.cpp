// LoRA on the block linears, shape side (model_config.hpp): which linears a block has, which ones
// a target list names, and how many trainable parameters the adapters add. No LibTorch: the plan
// and the CLI's checks use it without building a model.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <regex>
#include <set>
#include <sstream>

#include "accumbench/error.hpp"
#include "accumbench/model_config.hpp"
#include "accumbench/units.hpp"

namespace accumbench {

std::vector<BlockLinear> block_linears(const ModelConfig& m) {
  const int64_t d = m.d_model, a = m.n_heads * m.head_dim, kv = m.n_kv_heads * m.head_dim, f = m.d_ff;
  if (m.arch == Architecture::kGpt2) {
    return {{"c_attn", d, 3 * a, true}, {"attn_c_proj", a, d, true}, {"c_fc", d, f, false}, {"mlp_c_proj", f, d, false}};
  }
  return {{"q", d, a, true},     {"k", d, kv, true},  {"v", d, kv, true},   {"o", a, d, true},
          {"gate", d, f, false}, {"up", d, f, false}, {"down", f, d, false}};
}

namespace {

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> names;
  std::stringstream in(text);
  std::string name;
  while (std::getline(in, name, ',')) {
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (!name.empty()) names.push_back(name);
  }
  return names;
}

// The block linears one name stands for: its own name, the HF module name (q_proj, gate_proj),
// or GPT-2's c_proj (both projections, as PEFT's target_modules=["c_proj"] matches both).
std::vector<std::string> expand(const ModelConfig& m, const std::string& name) {
  if (m.arch == Architecture::kGpt2 && name == "c_proj") return {"attn_c_proj", "mlp_c_proj"};
  const std::string suffix = "_proj";
  if (m.arch == Architecture::kLlama && name.size() > suffix.size() &&
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return {name.substr(0, name.size() - suffix.size())};
  }
  return {name};
}

}  // namespace

std::vector<BlockLinear> lora_targets(const ModelConfig& m, const std::string& targets) {
  const std::vector<BlockLinear> all = block_linears(m);
  if (targets == "all-linear") return all;
  std::vector<BlockLinear> chosen;
  if (targets == "attention" || targets == "mlp") {
    for (const BlockLinear& l : all) {
      if (l.attention == (targets == "attention")) chosen.push_back(l);
    }
    return chosen;
  }
  std::string known;
  for (const BlockLinear& l : all) known += (known.empty() ? "" : ",") + l.name;
  // GPT-2's in Hugging Face's names, as the help gives them; the two c_proj apart by their module.
  known = m.arch == Architecture::kGpt2 ? "c_attn,c_proj,c_fc (c_proj names both projections; attn_c_proj or "
                                          "mlp_c_proj one of them)"
                                        : known + " (or their Hugging Face names, q_proj, ...)";
  std::vector<std::string> wanted;
  for (const std::string& name : split_names(targets)) {
    if (name == "all-linear" || name == "attention" || name == "mlp") {
      throw UserError("--lora-targets takes " + name + " alone, not in a list with other names (" +
                      text::quoted(targets, 80) + "); give all-linear, attention or mlp by itself, or a comma list of " +
                      known);
    }
    for (const std::string& n : expand(m, name)) {
      if (std::none_of(all.begin(), all.end(), [&](const BlockLinear& l) { return l.name == n; })) {
        // Said as typed (c_proj, not its stem c). Modules the model has, that PEFT could adapt,
        // but accumbench does not, are named as such.
        const bool head = name == "lm_head";
        const bool embedding = name == "embed_tokens" || name == "embed" || name == "wte" || name == "wpe";
        if (head || embedding) {
          throw UserError("--lora-targets names " + text::quoted(name, 60) + ", " + (head ? "the LM head" : "an embedding") +
                          ", which accumbench puts no adapter on (only the block linears); use all-linear, attention, "
                          "mlp or a comma list of " + known);
        }
        throw UserError("--lora-targets names " + text::quoted(name, 60) + ", which " + m.name + " does not have; use all-linear, " +
                        "attention, mlp or a comma list of " + known);
      }
      wanted.push_back(n);
    }
  }
  for (const BlockLinear& l : all) {
    if (std::find(wanted.begin(), wanted.end(), l.name) != wanted.end()) chosen.push_back(l);
  }
  if (chosen.empty()) throw UserError("--lora-targets names no layer; use all-linear, attention, mlp or " + known);
  return chosen;
}

namespace {

// One module of the Hugging Face model, by the path named_modules() gives it in the CausalLM
// class (LlamaForCausalLM, Qwen2/Qwen3/MistralForCausalLM: modeling_llama.py and its copies;
// GPT2LMHeadModel: modeling_gpt2.py), which is what PEFT matches target_modules against.
struct HfModule {
  std::string path;    // "model.layers.3.self_attn.q_proj"
  std::string linear;  // the block linear it is ("q"), or "" when it is none
  int64_t layer = -1;  // its block, or -1
  // What it is when not a block linear: the embeddings and the LM head, which PEFT can adapt and
  // accumbench does not; anything else (norms, containers, dropout) PEFT refuses as well.
  std::string what;
};

std::vector<HfModule> hf_modules(const ModelConfig& m) {
  std::vector<HfModule> modules;
  auto add = [&](const std::string& path, const std::string& what, int64_t layer = -1) {
    modules.push_back({path, "", layer, what});
  };
  auto linear = [&](const std::string& path, const std::string& name, int64_t layer) {
    modules.push_back({path, name, layer, ""});
  };
  const std::string kContainer = "not a linear layer";
  add("", kContainer);  // the model itself: named_modules() yields it with an empty path
  if (m.arch == Architecture::kGpt2) {
    add("transformer", kContainer);
    add("transformer.wte", "the token embedding");
    add("transformer.wpe", "the position embedding");
    add("transformer.drop", kContainer);
    add("transformer.h", kContainer);
    for (int64_t i = 0; i < m.n_layers; ++i) {
      const std::string b = "transformer.h." + std::to_string(i);
      add(b, kContainer, i);
      add(b + ".ln_1", "a layer norm", i);
      add(b + ".attn", kContainer, i);
      linear(b + ".attn.c_attn", "c_attn", i);
      linear(b + ".attn.c_proj", "attn_c_proj", i);
      add(b + ".attn.attn_dropout", kContainer, i);
      add(b + ".attn.resid_dropout", kContainer, i);
      add(b + ".ln_2", "a layer norm", i);
      add(b + ".mlp", kContainer, i);
      linear(b + ".mlp.c_fc", "c_fc", i);
      linear(b + ".mlp.c_proj", "mlp_c_proj", i);
      add(b + ".mlp.act", kContainer, i);
      add(b + ".mlp.dropout", kContainer, i);
    }
    add("transformer.ln_f", "a layer norm");
  } else {
    add("model", kContainer);
    add("model.embed_tokens", "the token embedding");
    add("model.layers", kContainer);
    for (int64_t i = 0; i < m.n_layers; ++i) {
      const std::string b = "model.layers." + std::to_string(i);
      add(b, kContainer, i);
      add(b + ".self_attn", kContainer, i);
      for (const char* name : {"q", "k", "v", "o"}) linear(b + ".self_attn." + name + "_proj", name, i);
      if (m.qk_norm) {
        add(b + ".self_attn.q_norm", "an RMS norm", i);
        add(b + ".self_attn.k_norm", "an RMS norm", i);
      }
      add(b + ".mlp", kContainer, i);
      for (const char* name : {"gate", "up", "down"}) linear(b + ".mlp." + name + "_proj", name, i);
      add(b + ".mlp.act_fn", kContainer, i);
      add(b + ".input_layernorm", "an RMS norm", i);
      add(b + ".post_attention_layernorm", "an RMS norm", i);
    }
    add("model.norm", "an RMS norm");
    add("model.rotary_emb", kContainer);
  }
  add("lm_head", "the LM head");
  return modules;
}

// The block linears the matched modules stand for, the same in every layer; UserError when a match
// is something else, or some layers only.
std::string targets_of_matches(const ModelConfig& m, const std::vector<const HfModule*>& matched,
                               const std::string& example) {
  std::vector<std::set<std::string>> per_layer(static_cast<size_t>(m.n_layers));
  for (const HfModule* module : matched) {
    if (module->linear.empty()) {
      const bool peft_adapts = module->what == "the token embedding" || module->what == "the position embedding" ||
                               module->what == "the LM head";
      throw UserError("matches " + (module->path.empty() ? std::string("the whole model") : module->path) + " (" +
                      module->what + "), " +
                      (peft_adapts ? "which PEFT can adapt but accumbench puts no adapter on"
                                   : "which PEFT cannot put a LoRA adapter on") +
                      "; name only the block linears, as " + example);
    }
    per_layer[static_cast<size_t>(module->layer)].insert(module->linear);
  }
  for (size_t i = 1; i < per_layer.size(); ++i) {
    if (per_layer[i] != per_layer.front()) {
      std::vector<std::string> differ;
      std::set_symmetric_difference(per_layer.front().begin(), per_layer.front().end(), per_layer[i].begin(),
                                    per_layer[i].end(), std::back_inserter(differ));
      const std::string& some = differ.front();
      throw UserError("puts an adapter on " + some + " in some layers only (layer 0 and layer " + std::to_string(i) +
                      " differ); accumbench puts the same adapters in every layer: match every layer's, as " +
                      example);
    }
  }
  if (matched.empty()) return "";
  std::string targets;
  for (const BlockLinear& l : block_linears(m)) {
    if (per_layer.front().count(l.name) != 0) targets += (targets.empty() ? "" : ",") + l.name;
  }
  return targets;
}

// The module names a list may use, for the messages: q_proj, ... or c_attn, c_proj, c_fc.
std::string hf_names(const ModelConfig& m) {
  return m.arch == Architecture::kGpt2 ? "c_attn, c_proj (both projections), attn.c_proj, mlp.c_proj or c_fc"
                                       : "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj or down_proj";
}

std::string example_path(const ModelConfig& m) {
  return m.arch == Architecture::kGpt2 ? "transformer.h.0.attn.c_attn" : "model.layers.0.self_attn.q_proj";
}

}  // namespace

std::string targets_from_peft_names(const ModelConfig& m, const std::vector<std::string>& names,
                                    const std::string& all_linear_hint) {
  const std::vector<HfModule> modules = hf_modules(m);
  std::vector<const HfModule*> matched;
  for (const std::string& name : names) {
    if (name.empty()) throw UserError("holds an empty name; name the modules, as " + hf_names(m));
    bool any = false;
    for (const HfModule& module : modules) {
      const std::string& p = module.path;
      if (p == name || (p.size() > name.size() && p.compare(p.size() - name.size(), name.size(), name) == 0 &&
                        p[p.size() - name.size() - 1] == '.')) {
        any = true;
        if (std::find(matched.begin(), matched.end(), &module) == matched.end()) matched.push_back(&module);
      }
    }
    if (!any) {
      throw UserError("names " + text::quoted(name) + ", which matches no module of " + m.name +
                      " (PEFT compares each name with the end of a module's path, as " + example_path(m) + "); use " +
                      hf_names(m) + (name == "all-linear" ? " (" + all_linear_hint + ")" : ""));
    }
  }
  return targets_of_matches(m, matched, hf_names(m));
}

std::string targets_from_peft_pattern(const ModelConfig& m, const std::string& pattern) {
  std::string lower = pattern;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "all-linear") return "all-linear";
  // Python's \A and \Z (start and end of the string) are ECMAScript's ^ and $ here: the match is
  // over the whole path either way.
  std::string ecma;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size() && (pattern[i + 1] == 'A' || pattern[i + 1] == 'Z')) {
      ecma += pattern[i + 1] == 'A' ? '^' : '$';
      ++i;
    } else {
      ecma += pattern[i];
      if (pattern[i] == '\\' && i + 1 < pattern.size()) ecma += pattern[++i];
    }
  }
  std::regex re;
  try {
    re = std::regex(ecma, std::regex::ECMAScript);
  } catch (const std::regex_error& error) {
    throw UserError("is the pattern " + text::quoted(pattern) + ", which accumbench cannot read as a regular expression (" +
                    error.what() + "); list the module names instead, as " + hf_names(m));
  }
  std::vector<const HfModule*> matched;
  const std::vector<HfModule> modules = hf_modules(m);
  for (const HfModule& module : modules) {
    if (std::regex_match(module.path, re)) matched.push_back(&module);
  }
  if (matched.empty()) {
    throw UserError("is the pattern " + text::quoted(pattern) + ", which matches no module's whole path in " + m.name +
                    " (PEFT matches a pattern against the whole path, as " + example_path(m) +
                    "); write a pattern such as '.*\\." + (m.arch == Architecture::kGpt2 ? "c_attn" : "q_proj") + "'");
  }
  return targets_of_matches(m, matched, hf_names(m));
}

void validate_lora(const ModelConfig& m, const LoraOptions& lora) {
  // A checkpoint saved quantised loads with its own storage (transformers reads its
  // quantization_config) and trains only under adapters: the run must quantise the same way.
  if (!m.stored_quantised.empty()) {
    const std::string& q = m.stored_quantised;
    const bool nf4 = q.rfind("bitsandbytes nf4", 0) == 0, int8 = q == "bitsandbytes int8";
    const bool double_quant = q.find("double quant") != std::string::npos;
    if (!nf4 && !int8) {
      throw UserError(m.name + " is a checkpoint stored quantised (" + q + "), whose storage and kernels accumbench "
                      "does not model; give the config.json of the unquantised model (with --base-quant nf4 or int8 "
                      "for a bitsandbytes base)");
    }
    const std::string flags = "--lora-rank R --base-quant " + std::string(nf4 ? "nf4" : "int8") + (double_quant ? " --double-quant" : "");
    if (!lora.enabled() || lora.base_quant != (nf4 ? BaseQuant::kNf4 : BaseQuant::kInt8) || lora.double_quant != double_quant) {
      throw UserError(m.name + " is a checkpoint stored quantised (" + q + "), which loads so and trains only under "
                      "LoRA adapters; add " + flags + " to measure it as it loads");
    }
  }
  // The targets name linears of this model (UserError otherwise). A rank above a linear's smaller
  // dimension is legal in PEFT (the update's rank cannot exceed it, so the extra adapter width buys
  // nothing): built and planned as given, said by a note (lora_rank_note).
  (void)lora_targets(m, lora.targets);
}

std::string lora_rank_note(const ModelConfig& m, const LoraOptions& lora) {
  if (!lora.enabled()) return "";
  std::vector<std::string> narrow;
  int64_t smallest = std::numeric_limits<int64_t>::max();
  for (const BlockLinear& l : lora_targets(m, lora.targets)) {
    const int64_t smaller = std::min(l.in, l.out);
    if (lora.rank <= smaller) continue;
    narrow.push_back(l.name);
    smallest = std::min(smallest, smaller);
  }
  if (narrow.empty()) return "";
  return "--lora-rank " + std::to_string(lora.rank) + " is above the smaller dimension of " + text::and_list(narrow) +
         " in " + m.name + " (down to " + std::to_string(smallest) + "): PEFT builds such adapters, whose update cannot "
         "have more than that rank, so the extra width costs memory and time for nothing";
}

int64_t lora_parameter_count(const ModelConfig& m, const LoraOptions& lora) {
  if (!lora.enabled()) return 0;
  int64_t per_block = 0;
  for (const BlockLinear& l : lora_targets(m, lora.targets)) per_block += lora.rank * (l.in + l.out);
  return m.n_layers * per_block;
}

double lora_scaling(const LoraOptions& lora) {
  if (!lora.enabled()) return 0.0;
  const double alpha = lora.alpha > 0 ? lora.alpha : 2.0 * static_cast<double>(lora.rank);
  const double rank = static_cast<double>(lora.rank);
  return alpha / (lora.rslora ? std::sqrt(rank) : rank);
}

}  // namespace accumbench
