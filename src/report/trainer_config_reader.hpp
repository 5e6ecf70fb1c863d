// The YAML reading that --trl-config and --axolotl-config share (src/report/trainer_config.cpp):
// a Reader walks one file's keys into accumbench option settings (TrainerConfig), refusing with
// one sentence what accumbench does not model. read_trl (trainer_config_trl.cpp) and read_axolotl
// (trainer_config_axolotl.cpp) know each trainer's keys and defaults; the helpers here are theirs.
//
//   Reader reader{root, ConfigFormat::kTrl, path, {}, {}};
//   reader.read_trl(/*world_size=*/1);   // reader.config: settings, remarks; reader.read: the keys seen
#pragma once

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "accumbench/error.hpp"
#include "accumbench/model_config.hpp"
#include "accumbench/trainer_config.hpp"
#include "accumbench/units.hpp"

namespace accumbench::trainer_config_detail {

const char* format_name(ConfigFormat format);  // "TRL" | "axolotl"
const char* option_name(ConfigFormat format);  // "--trl-config" | "--axolotl-config"
// Keys understood that change nothing accumbench measures or plans: the run's bookkeeping, the
// dataset's source and text processing, evaluation, logging, the schedule of the learning rate
// (trainer_config_trl.cpp, trainer_config_axolotl.cpp).
const std::set<std::string>& trl_unused_keys();
const std::set<std::string>& axolotl_unused_keys();
std::string num(double value);  // "2e-05": the shortest text that reads back to the same double

struct Reader {
  const YAML::Node& root;
  ConfigFormat format;
  const std::string& path;
  TrainerConfig config;
  std::set<std::string> read;  // keys handled (set, checked or known unused)

  // Present with a value (a YAML null, `key:` or `key: null`, counts as left out).
  bool has(const std::string& key) {
    read.insert(key);
    const YAML::Node node = root[key];
    return node.IsDefined() && !node.IsNull();
  }

  std::string where(const std::string& key) const { return path + ": " + key; }

  // The value as the file gives it, in quotes: a scalar's text, a list or mapping in YAML's flow
  // style (a dump of the node would show a quoted string in two pairs of quotes, a mapping on many
  // lines).
  static std::string shown_value(const YAML::Node& node) {
    try {
      if (node.IsScalar()) return text::quoted(node.Scalar());
      YAML::Emitter out;
      out.SetMapFormat(YAML::Flow);
      out.SetSeqFormat(YAML::Flow);
      out << node;
      return text::quoted(out.c_str());
    } catch (const std::exception&) {
      return "its value";
    }
  }

  [[noreturn]] void bad_value(const std::string& key, const std::string& expected) const {
    const std::string shown = shown_value(root[key]);
    throw UserError(where(key) + " is " + shown + ", not " + expected + "; fix the key in the file");
  }

  bool boolean(const std::string& key) {
    try {
      return root[key].as<bool>();
    } catch (const YAML::Exception&) {
      bad_value(key, "true or false");
    }
  }
  // PyYAML, which TRL and axolotl read with, takes YAML 1.1's digit separators (500_000); yaml-cpp
  // does not.
  std::optional<int64_t> integer(const std::string& key) {
    const YAML::Node node = root[key];
    if (!node.IsScalar()) return std::nullopt;
    std::string digits = node.Scalar();
    if (digits.find('_') != std::string::npos && node.Tag() != "!!str" && node.Tag() != "!") {
      const bool separated = digits.front() != '_' && digits.back() != '_' &&
                             digits.find_first_not_of("+-0123456789_") == std::string::npos;
      if (!separated) return std::nullopt;
      digits.erase(std::remove(digits.begin(), digits.end(), '_'), digits.end());
    }
    try {
      return YAML::Node(digits).as<int64_t>();
    } catch (const YAML::Exception&) {
      return std::nullopt;
    }
  }
  int64_t whole(const std::string& key) {
    const std::optional<int64_t> value = integer(key);
    if (value && *value > 0) return *value;
    bad_value(key, "a positive whole number");
  }
  // A whole number of 0 or more (seed: 0 is a seed like any other).
  int64_t non_negative(const std::string& key) {
    const std::optional<int64_t> value = integer(key);
    if (value && *value >= 0) return *value;
    bad_value(key, "a whole number, 0 or more");
  }
  double number(const std::string& key) {
    try {
      return root[key].as<double>();
    } catch (const YAML::Exception&) {
      bad_value(key, "a number");
    }
  }
  std::string word(const std::string& key) {
    if (!root[key].IsScalar()) bad_value(key, "a single value");
    return root[key].Scalar();
  }
  // A string or a list of strings, as PEFT's target_modules.
  std::vector<std::string> words(const std::string& key) {
    const YAML::Node node = root[key];
    if (node.IsScalar()) return {node.Scalar()};
    std::vector<std::string> items;
    if (node.IsSequence()) {
      for (const YAML::Node& item : node) {
        if (!item.IsScalar()) bad_value(key, "a list of names");
        items.push_back(item.Scalar());
      }
      if (!items.empty()) return items;
    }
    bad_value(key, "a list of names");
  }
  // True, or a non-empty string, list or map (deepspeed: a path; fsdp: "full_shard" or a list).
  bool on(const std::string& key) {
    if (!has(key)) return false;
    const YAML::Node node = root[key];
    if (node.IsScalar()) {
      bool value = false;
      if (YAML::convert<bool>::decode(node, value)) return value;
      return !node.Scalar().empty();
    }
    return node.size() > 0;
  }

  // "key: value", or the key alone when its value is no scalar.
  std::string shown_setting(const std::string& key) const {
    std::string value;
    try {
      value = root[key].IsScalar() ? ": " + root[key].Scalar() : "";
    } catch (const std::exception&) {
    }
    return key + value;
  }
  // A key whose effect on memory or time accumbench does not model: one sentence, exit 2.
  [[noreturn]] void refuse(const std::string& key, const std::string& what, const std::string& fix) const {
    throw UserError(path + " sets " + shown_setting(key) + ", which " + what + " and accumbench does not model; " + fix);
  }
  // The same for a key that is on, collected: every such key of the file in one sentence
  // (refuse_collected, after the file is read), so that removing one does not reveal the next.
  std::vector<std::pair<std::string, std::string>> refused;  // key, what it does
  void refuse_if_on(const std::string& key, const std::string& what) {
    if (on(key)) refused.emplace_back(key, what);
  }
  void refuse_collected() const {
    if (refused.empty()) return;
    if (refused.size() == 1) refuse(refused[0].first, refused[0].second, "remove the key to measure without it");
    std::string listed;
    for (size_t i = 0; i < refused.size(); ++i) {
      listed += std::string(i == 0 ? "" : i + 1 == refused.size() ? "; and " : "; ") + shown_setting(refused[i].first) +
                ", which " + refused[i].second;
    }
    throw UserError(path + " sets " + listed + "; accumbench models " + (refused.size() == 2 ? "neither" : "none of them") +
                    ": remove the keys to measure without them");
  }

  void set(const std::string& option, const std::string& value, const std::string& keys, bool by_default = false) {
    config.settings.push_back({option, value, keys, by_default});
  }

  // model_name_or_path / base_model: an accumbench preset by its name or by the Hub id it was
  // written from (preset_of_hub_id: what --emit trl|axolotl writes, read back without the Hugging
  // Face cache), else --hf-config's spec (a config.json, a model directory, or a Hub id from the
  // local cache).
  void model(const std::string& key) {
    if (!has(key)) return;
    const std::string name = word(key);
    std::error_code ec;
    const std::string preset = std::filesystem::exists(name, ec) ? "" : preset_of_hub_id(name);
    if (!preset.empty()) set("--model", preset, key + " (" + name + ")");
    else set(model_options_for(name).hf_config.empty() ? "--model" : "--hf-config", name, key);
  }

  void precision(bool bf16, bool fp16, const std::string& keys, bool by_default) {
    if (bf16 && fp16) {
      throw UserError(path + " sets both bf16 and fp16; keep the one the training uses");
    }
    set("--precision", bf16 ? "bf16" : fp16 ? "fp16" : "fp32", keys, by_default);
  }

  // transformers' OptimizerNames (training_args.py) that accumbench runs: torch's AdamW, fused
  // (adamw_torch_fused) or with torch's default kernels (adamw_torch: foreach on CUDA, resolved
  // by device in apply_trainer_config), bitsandbytes' 8-bit AdamW (adamw_8bit is adamw_bnb_8bit),
  // paged or not, and SGD.
  void optimizer(const std::string& key) {
    if (!has(key)) return;
    const std::string name = word(key);
    if (name == "adamw_torch") {
      config.torch_default_adamw = key;
    } else if (name == "adamw_torch_fused") set("--optimizer", "adamw", key);
    else if (name == "adamw_8bit" || name == "adamw_bnb_8bit") set("--optimizer", "adamw8bit", key);
    else if (name == "paged_adamw_8bit") set("--optimizer", "paged-adamw8bit", key);
    else if (name == "paged_adamw_32bit") set("--optimizer", "paged-adamw32bit", key);
    else if (name == "sgd") set("--optimizer", "sgd", key);
    else
      throw UserError(path + " sets " + key + ": " + name + ", an optimizer accumbench does not run; " +
                      (name.find("8bit") != std::string::npos ? "the nearest is adamw_8bit (bitsandbytes'); " : "") +
                      "use adamw_torch, adamw_torch_fused, adamw_8bit (adamw_bnb_8bit), paged_adamw_8bit, "
                      "paged_adamw_32bit or sgd, or remove the key");
  }

  // bitsandbytes' quantised base: load_in_4bit as NF4 (fp4, transformers' own default, is not
  // offered), load_in_8bit as LLM.int8. `quant_type_default`: TRL's ModelConfig defaults
  // bnb_4bit_quant_type to nf4 (trl/trainer/model_config.py at f2cd577).
  void base_quant(const std::string& quant_type_key, const std::string& nested_key, bool nested_default) {
    if (on("load_in_4bit") && on("load_in_8bit")) {
      throw UserError(path + " sets both load_in_4bit and load_in_8bit, which TRL and transformers refuse; keep the "
                             "one the training uses");
    }
    if (on("load_in_4bit")) {
      const std::string type = has(quant_type_key) ? word(quant_type_key) : "nf4";
      if (type == "fp4") refuse(quant_type_key, "picks bitsandbytes' fp4 codes", "use nf4, or remove the key");
      if (type != "nf4") bad_value(quant_type_key, "nf4 or fp4 (bitsandbytes' two 4-bit codes; accumbench models nf4)");
      set("--base-quant", "nf4", has(quant_type_key) ? "load_in_4bit, " + quant_type_key : "load_in_4bit");
      const bool nested = nested_key.empty() ? nested_default : (has(nested_key) ? boolean(nested_key) : nested_default);
      if (nested) set("--double-quant", "", nested_key.empty() ? "load_in_4bit (axolotl's qlora loader)" : nested_key);
    } else if (on("load_in_8bit")) {
      set("--base-quant", "int8", "load_in_8bit");
      for (const std::string& key : {quant_type_key, nested_key})
        if (!key.empty() && has(key)) config.unused.push_back(key + " (4-bit only; load_in_8bit)");
    } else {
      for (const std::string& key : {quant_type_key, nested_key})
        if (!key.empty() && has(key)) config.unused.push_back(key + " (no load_in_4bit)");
    }
  }

  // axolotl's bnb_config_kwargs: overrides of the 4-bit BitsAndBytesConfig (only load_in_4bit
  // uses it). The quant type and double quantisation change the base's bytes; the compute and
  // storage dtypes do not change what accumbench measures (the storage holds the same bytes; under
  // autocast the matmuls run in its precision).
  void bnb_config_kwargs() {
    const std::string key = "bnb_config_kwargs";
    if (!has(key)) return;
    const YAML::Node kwargs = root[key];
    if (!kwargs.IsMap()) bad_value(key, "a mapping of BitsAndBytesConfig arguments");
    if (!on("load_in_4bit")) {
      config.unused.push_back(key + " (4-bit only; no load_in_4bit)");
      return;
    }
    for (const auto& item : kwargs) {
      const std::string name = item.first.Scalar();
      const std::string shown = key + "." + name;
      const YAML::Node value = item.second;
      if (name == "bnb_4bit_quant_type") {
        if (!value.IsScalar() || value.Scalar() != "nf4") {
          const bool fp4 = value.IsScalar() && value.Scalar() == "fp4";
          throw UserError(where(shown) + " is " + shown_value(value) +
                          (fp4 ? ", which picks bitsandbytes' fp4 codes and accumbench does not model it; use nf4, or "
                                 "remove the key"
                               : ", not nf4 or fp4 (bitsandbytes' two 4-bit codes; accumbench models nf4); fix the key "
                                 "in the file"));
        }
      } else if (name == "bnb_4bit_use_double_quant") {
        bool nested = false;
        if (!value.IsScalar() || !YAML::convert<bool>::decode(value, nested)) {
          throw UserError(where(shown) + " is " + shown_value(value) +
                          ", not true or false; fix the key in the file");
        }
        auto& settings = config.settings;
        settings.erase(std::remove_if(settings.begin(), settings.end(),
                                      [](const ConfigSetting& s) { return s.option == "--double-quant"; }),
                       settings.end());
        if (nested) set("--double-quant", "", shown);
      } else if (name == "bnb_4bit_compute_dtype" || name == "bnb_4bit_quant_storage") {
        config.unused.push_back(shown);
      } else if (name.rfind("llm_int8_", 0) == 0) {
        config.unused.push_back(shown + " (8-bit only)");
      } else {
        config.unknown.push_back(shown);
      }
    }
  }

  // attn_implementation (from_pretrained's; axolotl's canonical key): the memory-efficient kernels
  // (sdpa, transformers' default, flash_attention_2/3, a Hub flash kernel) are what accumbench runs
  // on CUDA with PyTorch 2 (explicit attention on the CPU, where no other runs); eager attention's
  // (b, H, T, T) scores and the other kernels are refused.
  void attention_implementation() {
    const std::string key = "attn_implementation";
    if (!has(key)) return;
    const std::string impl = word(key);
    const bool hub_flash = impl.find('/') != std::string::npos && impl.find("flash") != std::string::npos;
    if (impl == "sdpa" || impl == "flash_attention_2" || impl == "flash_attention_3" || hub_flash) {
      config.unused.push_back(key + " (accumbench's attention follows the device)");
    } else if (impl == "eager") {
      refuse(key, "runs eager attention and its (b, H, T, T) scores",
             "remove the key to measure memory-efficient attention (sdpa, transformers' default), or see eager "
             "attention's memory with plan --attention explicit");
    } else {
      refuse(key, "picks an attention kernel", "use sdpa or flash_attention_2, or remove the key");
    }
  }

  // tf32: transformers turns TF32 matmuls on with true and off with false; left out, PyTorch's
  // default (off) stands; axolotl turns it on only with true. A sweep on CUDA follows (--tf32).
  // TF32: TrainingArguments' tf32 None leaves PyTorch's default, off; axolotl's "auto", its
  // default, turns it on wherever the GPU has TF32 (Ampere and later, the GPUs accumbench plans for;
  // schemas/config.py check_tf32 at 067b021), as its bf16 "auto" is bf16 there.
  void tf32(bool auto_on = false) {
    const bool stated_auto = auto_on && has("tf32") && root["tf32"].IsScalar() && root["tf32"].Scalar() == "auto";
    // axolotl's explicit null stays None, which its builder reads as off (`cfg.tf32 is True`); left
    // out, its default is auto.
    const bool stated_null = root["tf32"].IsDefined() && root["tf32"].IsNull();
    bool parsed = false;
    if (auto_on && has("tf32") && !stated_auto && !YAML::convert<bool>::decode(root["tf32"], parsed))
      bad_value("tf32", "true, false or auto");  // axolotl's schema takes auto too
    const bool on = has("tf32") && !stated_auto ? boolean("tf32") : auto_on && !stated_null;  // TRL's "auto" is refused
    set("--tf32", on ? "on" : "off", "tf32", !has("tf32"));
  }

  // Left out, the trainer's defaults stand: weight_decay 0 in transformers' TrainingArguments and
  // axolotl; learning_rate kTrlLearningRate in TRL's SFTConfig (`trl_default_lr`; axolotl requires
  // the key, and without it accumbench's --lr stands). Neither changes what a step costs but sgd's and
  // adamw8bit's decay multiply, and both are verify's update and the JSON's record of it; the
  // clipping is a pass over the gradients in every step's optimizer phase.
  void hyperparameters(std::optional<double> trl_default_lr = std::nullopt) {
    if (has("learning_rate")) {
      set("--lr", num(number("learning_rate")), "learning_rate");
    } else if (trl_default_lr) {
      set("--lr", num(*trl_default_lr), "learning_rate", true);
    }
    set("--weight-decay", has("weight_decay") ? num(number("weight_decay")) : "0", "weight_decay", !has("weight_decay"));
    if (has("adam_beta1")) set("--beta1", num(number("adam_beta1")), "adam_beta1");
    if (has("adam_beta2")) set("--beta2", num(number("adam_beta2")), "adam_beta2");
    if (has("adam_epsilon")) set("--adam-eps", num(number("adam_epsilon")), "adam_epsilon");
    if (has("seed")) set("--seed", std::to_string(non_negative("seed")), "seed");
    clipping();
  }

  // The Trainer clips the gradients once per optimizer step when max_grad_norm is above 0
  // (transformers' `if args.max_grad_norm is not None and args.max_grad_norm > 0`), at
  // kTrainerMaxGradNorm when the key is left out. TRL hands a null on as None: no clipping.
  // axolotl passes the key to TrainingArguments whenever it is not None (core/builders/base.py at
  // 067b021; up to 0.9 only when truthy), so its 0 turns clipping off and its null, its schema's
  // default, leaves the Trainer's 1 in place, said as a remark.
  void clipping() {
    const std::string key = "max_grad_norm";
    const YAML::Node node = root[key];
    read.insert(key);
    if (!node.IsDefined()) {
      set("--max-grad-norm", num(kTrainerMaxGradNorm), key, /*by_default=*/true);
      return;
    }
    const double value = node.IsNull() ? 0 : number(key);
    if (!std::isfinite(value)) bad_value(key, "a finite number");
    if (format == ConfigFormat::kAxolotl && node.IsNull()) {
      set("--max-grad-norm", num(kTrainerMaxGradNorm), key);
      config.remarks.push_back({"sets max_grad_norm to null, which axolotl does not pass on (it sets the key only when "
                                "it is not null), so the Trainer's default clips at 1: --max-grad-norm 1; max_grad_norm: 0 "
                                "(or --max-grad-norm 0) measures without clipping",
                                {"--max-grad-norm"}});
      return;
    }
    set("--max-grad-norm", num(std::max(0.0, value)), key);  // 0 or below: no clipping
  }

  // PEFT's target_modules, kept as the file gives them: matched once the model is known. TRL's
  // ModelConfig.__post_init__ turns a one-element list into its element (trl/trainer/model_config.py
  // at bc13ae6), which PEFT then reads as a pattern; axolotl passes a list as a list.
  // axolotl turns one name into a one-name list (its load_lora under lora_target_linear, its
  // adapter builder always), which PEFT matches as a list: by the end of a module's path.
  void lora_targets(const std::string& key) {
    PeftTargetModules& targets = config.lora_target_modules;
    targets.key = key;
    const YAML::Node node = root[key];
    const bool empty = (node.IsSequence() && node.size() == 0) || (node.IsScalar() && node.Scalar().empty());
    if (empty && !(format == ConfigFormat::kAxolotl && targets.all_linear)) {
      throw UserError(where(key) + " is empty, which gives PEFT no module to adapt (it stops); name the modules, or " +
                      (format == ConfigFormat::kTrl ? std::string("remove the key for PEFT's default for the model")
                                                    : std::string("use lora_target_linear: true")));
    }
    if (empty) return;  // axolotl: lora_target_linear's linears alone
    const std::vector<std::string> names = words(key);
    // axolotl wraps one name in a list only beside lora_target_linear (_build_peft_lora_config,
    // loaders/adapter.py at 067b021); otherwise the string reaches PEFT, which matches it as a
    // regular expression against each module's whole name, as TRL's.
    if (root[key].IsScalar() && format == ConfigFormat::kAxolotl && targets.all_linear) {
      targets.names = names;
    } else if (root[key].IsScalar()) {
      targets.pattern = names.front();
    } else if (format == ConfigFormat::kTrl && names.size() == 1) {
      targets.pattern = names.front();
      targets.one_name_list = true;
    } else {
      targets.names = names;
    }
  }

  // gradient_checkpointing_kwargs' use_reentrant, else the trainer's default (axolotl's
  // normalize_config sets true; TRL sets false for transformers 4, as transformers 5 does): a
  // reentrant checkpoint keeps each block's recomputed output through its backward, which the
  // engine's non-reentrant one lets go. Said, not measured.
  void reentrant_checkpointing(bool checkpointing, bool reentrant_by_default, const std::string& default_words) {
    const std::string key = "gradient_checkpointing_kwargs";
    bool reentrant = reentrant_by_default;
    bool stated = false;
    const bool json_text = format == ConfigFormat::kTrl && has(key) && root[key].IsScalar() &&
                           root[key].Scalar().rfind('{', 0) == 0;
    if (json_text) {
      // TrainingArguments.__post_init__ (transformers at 00349ae) reads a string that starts with
      // "{" in its _VALID_DICT_FIELDS, gradient_checkpointing_kwargs one, with json.loads, then
      // _convert_str_dict turns "true"/"false" into booleans.
      const nlohmann::json kwargs = nlohmann::json::parse(root[key].Scalar(), nullptr, /*allow_exceptions=*/false);
      if (kwargs.is_discarded() || !kwargs.is_object())
        bad_value(key, "a mapping, as {use_reentrant: false}, or its JSON text, as '{\"use_reentrant\": false}'");
      const auto found = kwargs.find("use_reentrant");
      if (found != kwargs.end() && !found->is_null()) {
        std::string lowered = found->is_string() ? found->get<std::string>() : "";
        std::transform(lowered.begin(), lowered.end(), lowered.begin(), [](unsigned char c) { return std::tolower(c); });
        if (!found->is_boolean() && lowered != "true" && lowered != "false")
          throw UserError(where(key) + ".use_reentrant is not true or false; fix the key in the file");
        reentrant = found->is_boolean() ? found->get<bool>() : lowered == "true";
        stated = true;
      }
    } else if (has(key)) {
      const YAML::Node kwargs = root[key];
      if (!kwargs.IsMap()) bad_value(key, "a mapping, as {use_reentrant: false}");
      if (kwargs["use_reentrant"].IsDefined() && !kwargs["use_reentrant"].IsNull()) {
        try {
          reentrant = kwargs["use_reentrant"].as<bool>();
        } catch (const YAML::Exception&) {
          throw UserError(where(key) + ".use_reentrant is not true or false; fix the key in the file");
        }
        stated = true;
      }
    }
    if (!checkpointing || !reentrant) return;
    config.remarks.push_back(
        {"checkpoints with use_reentrant: true (" + (stated ? std::string("gradient_checkpointing_kwargs") : default_words) +
             "), which keeps each block's recomputed output through that block's backward; accumbench measures and "
             "plans the non-reentrant checkpoint, which lets it go, so the trainer's checkpointed peaks can be higher "
             "by about one b·T·d activation (1.0–2.9 % in the README's side by side); "
             "gradient_checkpointing_kwargs: {use_reentrant: false} runs what accumbench measures",
         {"--activation-checkpointing"}});
  }

  // `keys` names the per-device key first; left out, its default stands (the note names it).
  void batch(int64_t per_device, int64_t accumulation, int world_size, const std::string& keys) {
    const std::string per_device_key = keys.substr(0, keys.find(' '));
    set("--batch", std::to_string(per_device * accumulation * world_size),
        keys + ": " + std::to_string(per_device) + " per device x " + std::to_string(accumulation) +
            " accumulation steps x " + std::to_string(world_size) + (world_size == 1 ? " process" : " processes"),
        !has(per_device_key));
  }

  // TRL's SFTConfig, ModelConfig and TrainingArguments keys (trainer_config_trl.cpp).
  std::string legacy_trl_key();
  void read_trl(int world_size);

  // axolotl's keys (trainer_config_axolotl.cpp).
  void lora_over_an_unquantised_base();
  void lora_remarks(const std::string& adapter, const std::string& weights, const std::string& precision_word);
  void read_axolotl(int world_size);
};

}  // namespace accumbench::trainer_config_detail
