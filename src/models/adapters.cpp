// LoRA on the block linears, shape side (model_config.hpp): which linears a block has, which ones
// a target list names, and how many trainable parameters the adapters add. No LibTorch: the plan
// and the CLI's checks use it without building a model.
#include <algorithm>
#include <sstream>

#include "accumbench/error.hpp"
#include "accumbench/model_config.hpp"

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
  std::vector<std::string> wanted;
  for (const std::string& name : split_names(targets)) {
    for (const std::string& n : expand(m, name)) wanted.push_back(n);
  }
  std::string known;
  for (const BlockLinear& l : all) known += (known.empty() ? "" : ",") + l.name;
  for (const std::string& name : wanted) {
    if (std::none_of(all.begin(), all.end(), [&](const BlockLinear& l) { return l.name == name; })) {
      throw UserError("--lora-targets names \"" + name + "\", which " + m.name + " does not have; use all-linear, " +
                      "attention, mlp or a comma list of " + known);
    }
  }
  for (const BlockLinear& l : all) {
    if (std::find(wanted.begin(), wanted.end(), l.name) != wanted.end()) chosen.push_back(l);
  }
  if (chosen.empty()) throw UserError("--lora-targets names no layer; use all-linear, attention, mlp or " + known);
  return chosen;
}

void validate_lora(const ModelConfig& m, const LoraOptions& lora) {
  if (!lora.enabled()) return;
  for (const BlockLinear& l : lora_targets(m, lora.targets)) {
    const int64_t smaller = std::min(l.in, l.out);
    if (lora.rank > smaller) {
      throw UserError("--lora-rank " + std::to_string(lora.rank) + " is larger than " + l.name + "'s smaller dimension (" +
                      std::to_string(smaller) + ") in " + m.name + "; pick a rank of at most " + std::to_string(smaller));
    }
  }
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
  return alpha / static_cast<double>(lora.rank);
}

}  // namespace accumbench
