// Trainer settings in: a TRL or axolotl YAML config read as accumbench options
// (trainer_config.hpp). The keys and their defaults, from the projects' own sources:
//
// - TRL (github.com/huggingface/trl, trl/trainer/sft_config.py, base_config.py, model_config.py;
//   `trl sft --config FILE` fills ScriptArguments, SFTConfig and ModelConfig from one YAML file):
//   max_length defaults to 1024 (null: no truncation); packing false; packing_strategy "bfd"
//   (also "bfd_split", "wrapped"); with bfd packing the batch is padding-free whatever
//   padding_free says; pad_to_multiple_of none (the collator pads to the longest sample);
//   gradient_checkpointing defaults to true; bf16 defaults to `not fp16`; learning_rate 2e-5.
//   ModelConfig: model_name_or_path, dtype (older: torch_dtype) "float32", use_peft false,
//   lora_r 16, lora_alpha 32, lora_dropout 0.05, lora_target_modules none (PEFT then picks the
//   model type's default), lora_task_type "CAUSAL_LM", load_in_4bit/8bit, use_dora, use_rslora.
// - transformers TrainingArguments (src/transformers/training_args.py):
//   per_device_train_batch_size 8, gradient_accumulation_steps 1, optim "adamw_torch" (with
//   PyTorch >= 2.8 "adamw_torch_fused"), adam_beta1 0.9, adam_beta2 0.999, adam_epsilon 1e-8.
// - PEFT's default LoRA targets (src/peft/utils/constants.py,
//   TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING): gpt2 ["c_attn"]; llama, mistral, qwen2
//   ["q_proj", "v_proj"].
// - axolotl (github.com/axolotl-ai-cloud/axolotl, src/axolotl/utils/schemas/config.py,
//   training.py, peft.py; utils/config/__init__.py normalize_config; core/builders/causal.py):
//   sequence_len 512; micro_batch_size 1; gradient_accumulation_steps 1 (or batch_size /
//   micro_batch_size when only batch_size is given); bf16 "auto" (bf16 on any GPU since Ampere);
//   gradient_checkpointing false (or "offload"/"offload_disk"); sample_packing false; the collator
//   pads to the longest sample rounded up to pad_to_multiple_of (default 64) unless
//   pad_to_sequence_len is true (to sequence_len) or false (to the longest sample); optimizer
//   "adamw_torch_fused"; lora_dropout 0.0.
#include "accumbench/trainer_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "accumbench/error.hpp"
#include "accumbench/model_config.hpp"
#include "accumbench/units.hpp"

namespace accumbench {

namespace {

const char* format_name(ConfigFormat format) { return format == ConfigFormat::kTrl ? "TRL" : "axolotl"; }
const char* option_name(ConfigFormat format) {
  return format == ConfigFormat::kTrl ? "--trl-config" : "--axolotl-config";
}

// Keys understood that change nothing accumbench measures or plans: the run's bookkeeping, the
// dataset's source and text processing, evaluation, logging, the schedule of the learning rate.
const std::set<std::string>& trl_unused_keys() {
  static const std::set<std::string> keys = {
      // trl ScriptArguments
      "dataset_name", "dataset_config", "dataset_train_split", "dataset_test_split", "dataset_streaming",
      "dataset_mixture", "datasets", "gradient_checkpointing_use_reentrant", "ignore_bias_buffers", "env",
      // SFTConfig
      "model_init_kwargs", "trust_remote_code", "router_aux_loss_coef", "chat_template_path", "dataset_text_field",
      "dataset_kwargs", "dataset_num_proc", "eos_token", "pad_token", "truncation_mode", "shuffle_dataset",
      "eval_packing", "completion_only_loss", "assistant_only_loss",
      // ModelConfig (bnb_4bit_quant_type and use_bnb_nested_quant are read with load_in_4bit)
      "model_revision", "bnb_4bit_quant_storage",
      // TrainingArguments
      "output_dir", "overwrite_output_dir", "do_train", "do_eval", "do_predict", "eval_strategy",
      "evaluation_strategy", "prediction_loss_only", "per_device_eval_batch_size", "eval_accumulation_steps",
      "eval_delay", "eval_steps", "eval_on_start", "num_train_epochs", "max_steps", "lr_scheduler_type",
      "lr_scheduler_kwargs", "warmup_ratio", "warmup_steps", "log_level", "log_level_replica", "logging_dir",
      "logging_strategy", "logging_first_step", "logging_steps", "logging_nan_inf_filter", "save_strategy",
      "save_steps", "save_total_limit", "save_safetensors", "save_on_each_node", "save_only_model", "data_seed",
      "full_determinism", "bf16_full_eval", "fp16_full_eval", "local_rank", "ddp_backend", "ddp_timeout",
      "ddp_find_unused_parameters", "ddp_bucket_cap_mb", "ddp_broadcast_buffers", "dataloader_drop_last",
      "dataloader_num_workers", "dataloader_pin_memory", "dataloader_persistent_workers",
      "dataloader_prefetch_factor", "run_name", "disable_tqdm", "remove_unused_columns", "label_names",
      "load_best_model_at_end", "metric_for_best_model", "greater_is_better", "ignore_data_skip",
      "label_smoothing_factor", "report_to", "push_to_hub", "hub_model_id", "hub_strategy", "hub_token",
      "hub_private_repo", "hub_always_push", "resume_from_checkpoint", "gradient_checkpointing_kwargs",
      "include_num_input_tokens_seen", "include_tokens_per_second", "neftune_noise_alpha", "max_grad_norm",
      "torch_empty_cache_steps", "average_tokens_across_devices", "half_precision_backend", "fp16_opt_level",
      "skip_memory_metrics", "restore_callback_states_from_checkpoint", "past_index", "project",
      "trackio_space_id", "batch_eval_metrics", "eval_do_concat_batches", "save_steps"};
  return keys;
}

const std::set<std::string>& axolotl_unused_keys() {
  static const std::set<std::string> keys = {
      "datasets", "test_datasets", "dataset_prepared_path", "dataset_processes", "shuffle_merged_datasets",
      "val_set_size", "output_dir", "num_epochs", "max_steps", "lr_scheduler", "lr_scheduler_kwargs",
      "cosine_min_lr_ratio", "lr_quadratic_warmup", "warmup_steps", "warmup_ratio", "logging_steps",
      "evals_per_epoch", "saves_per_epoch", "eval_steps", "save_steps", "save_strategy", "eval_strategy",
      "save_total_limit", "save_first_step", "save_safetensors", "wandb_project", "wandb_entity", "wandb_watch",
      "wandb_name", "wandb_log_model", "use_wandb", "use_mlflow", "mlflow_experiment_name", "special_tokens",
      "tokens", "chat_template", "default_system_message", "train_on_inputs", "strict",
      "early_stopping_patience", "resume_from_checkpoint", "auto_resume_from_checkpoints", "local_rank", "debug",
      "hub_model_id", "hub_strategy", "push_dataset_to_hub", "eval_sample_packing", "eval_batch_size",
      "eval_sequence_len", "eval_max_new_tokens", "eval_table_size", "lora_fan_in_fan_out", "lora_model_dir",
      "trust_remote_code", "is_llama_derived_model", "is_qwen_derived_model", "is_mistral_derived_model",
      "tokenizer_type", "tokenizer_config", "tokenizer_use_fast", "tokenizer_legacy", "model_type",
      "max_grad_norm", "gradient_checkpointing_kwargs", "loss_watchdog_threshold", "loss_watchdog_patience",
      "gc_steps", "excess_length_strategy", "neftune_noise_alpha", "ddp_timeout", "ddp_bucket_cap_mb",
      "ddp_broadcast_buffers", "remove_unused_columns", "embeddings_skip_upcast", "fsdp_version",
      "dataloader_num_workers", "dataloader_pin_memory", "dataloader_prefetch_factor",
      "logging_dir", "report_to"};
  return keys;
}

// A number as the shortest text that reads back the same to 6 digits ("2e-05", "0.05", "32"), as
// --emit writes them; std::to_string would print 1e-8 as "0.000000".
std::string num(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

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

  [[noreturn]] void bad_value(const std::string& key, const std::string& expected) const {
    std::string shown;
    try {
      shown = text::quoted(YAML::Dump(root[key]));
    } catch (const std::exception&) {
      shown = "its value";
    }
    throw UserError(where(key) + " is " + shown + ", not " + expected + "; fix the key in the file");
  }

  bool boolean(const std::string& key) {
    try {
      return root[key].as<bool>();
    } catch (const YAML::Exception&) {
      bad_value(key, "true or false");
    }
  }
  int64_t whole(const std::string& key) {
    try {
      const int64_t value = root[key].as<int64_t>();
      if (value > 0) return value;
    } catch (const YAML::Exception&) {
    }
    bad_value(key, "a positive whole number");
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

  // A key whose effect on memory or time accumbench does not model: one sentence, exit 2.
  [[noreturn]] void refuse(const std::string& key, const std::string& what, const std::string& fix) const {
    std::string value;
    try {
      value = root[key].IsScalar() ? ": " + root[key].Scalar() : "";
    } catch (const std::exception&) {
    }
    throw UserError(path + " sets " + key + value + ", which " + what + " and accumbench does not model; " + fix);
  }
  void refuse_if_on(const std::string& key, const std::string& what) {
    if (on(key)) refuse(key, what, "remove the key to measure without it");
  }

  void set(const std::string& option, const std::string& value, const std::string& keys, bool by_default = false) {
    config.settings.push_back({option, value, keys, by_default});
  }

  // model_name_or_path / base_model: an accumbench preset by its name, else --hf-config's spec (a
  // config.json, a model directory, or a Hub id from the local cache).
  void model(const std::string& key) {
    if (!has(key)) return;
    const std::string name = word(key);
    set(model_options_for(name).hf_config.empty() ? "--model" : "--hf-config", name, key);
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
      refuse(key, "chooses an optimizer accumbench does not run",
             "use adamw_torch, adamw_torch_fused, adamw_8bit, paged_adamw_8bit, paged_adamw_32bit or sgd, or remove the key");
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
      if (type != "nf4") refuse(quant_type_key, "picks bitsandbytes' fp4 codes", "use nf4, or remove the key");
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
          throw UserError(where(shown) + " is " + text::quoted(YAML::Dump(value)) +
                          ", which picks bitsandbytes' fp4 codes (or no code) and accumbench does not model it; use "
                          "nf4, or remove the key");
        }
      } else if (name == "bnb_4bit_use_double_quant") {
        bool nested = false;
        if (!value.IsScalar() || !YAML::convert<bool>::decode(value, nested)) {
          throw UserError(where(shown) + " is " + text::quoted(YAML::Dump(value)) +
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
  void tf32() {
    const bool on = has("tf32") && boolean("tf32");
    set("--tf32", on ? "on" : "off", "tf32", !has("tf32"));
  }

  void hyperparameters() {
    if (has("learning_rate")) set("--lr", num(number("learning_rate")), "learning_rate");
    if (has("weight_decay")) set("--weight-decay", num(number("weight_decay")), "weight_decay");
    if (has("adam_beta1")) set("--beta1", num(number("adam_beta1")), "adam_beta1");
    if (has("adam_beta2")) set("--beta2", num(number("adam_beta2")), "adam_beta2");
    if (has("adam_epsilon")) set("--adam-eps", num(number("adam_epsilon")), "adam_epsilon");
    if (has("seed")) set("--seed", std::to_string(whole("seed")), "seed");
  }

  // PEFT's target_modules, kept as the file gives them: matched once the model is known. TRL's
  // ModelConfig.__post_init__ turns a one-element list into its element (trl/trainer/model_config.py
  // at bc13ae6), which PEFT then reads as a pattern; axolotl passes a list as a list.
  void lora_targets(const std::string& key) {
    PeftTargetModules& targets = config.lora_target_modules;
    targets.key = key;
    const std::vector<std::string> names = words(key);
    if (root[key].IsScalar()) {
      targets.pattern = names.front();
    } else if (format == ConfigFormat::kTrl && names.size() == 1) {
      targets.pattern = names.front();
      targets.one_name_list = true;
    } else {
      targets.names = names;
    }
  }

  // `keys` names the per-device key first; left out, its default stands (the note names it).
  void batch(int64_t per_device, int64_t accumulation, int world_size, const std::string& keys) {
    const std::string per_device_key = keys.substr(0, keys.find(' '));
    set("--batch", std::to_string(per_device * accumulation * world_size),
        keys + ": " + std::to_string(per_device) + " per device x " + std::to_string(accumulation) +
            " accumulation steps x " + std::to_string(world_size) + (world_size == 1 ? " process" : " processes"),
        !has(per_device_key));
  }

  // The first key of the file that only TRL before 1.7.0 reads (max_seq_length: up to 0.19;
  // torch_dtype: up to 0.26; packing_strategy ffd: 0.19), "" when none.
  std::string legacy_trl_key() {
    if (has("max_seq_length")) return "max_seq_length";
    if (has("torch_dtype")) return "torch_dtype";
    if (has("packing_strategy") && word("packing_strategy") == "ffd") return "packing_strategy: ffd";
    return "";
  }

  void read_trl(int world_size) {
    std::string weights = "fp32", precision_word;  // as the file sets them (ModelConfig's dtype default)
    model("model_name_or_path");
    refuse_if_on("use_liger_kernel", "swaps in Liger's fused kernels");
    refuse_if_on("torch_compile", "compiles the model");
    refuse_if_on("activation_offloading", "moves activations to the CPU");
    refuse_if_on("deepspeed", "shards the training state with DeepSpeed");
    refuse_if_on("fsdp", "shards the training state with FSDP");
    refuse_if_on("fsdp_config", "shards the training state with FSDP");
    refuse_if_on("auto_find_batch_size", "changes the per-device batch while training");
    refuse_if_on("use_dora", "trains DoRA adapters");
    refuse_if_on("use_rslora", "scales the adapters by alpha / sqrt(r)");
    refuse_if_on("lora_modules_to_save", "trains whole modules beside the adapters");
    refuse_if_on("lora_target_parameters", "puts adapters on parameters rather than modules");
    attention_implementation();
    // TrainingArguments.__post_init__ turns torch_compile on when either is set.
    for (const char* key : {"torch_compile_mode", "torch_compile_backend"}) {
      if (has(key)) refuse(key, "turns on torch_compile, which compiles the model", "remove the key to measure without it");
    }
    if (has("label_smoothing_factor") && number("label_smoothing_factor") != 0.0) {
      refuse("label_smoothing_factor", "smooths the labels (the Trainer's own loss on the whole logits)",
             "remove the key, or set it to 0");
    }
    // `trl sft --config` hands accelerate launch the keys it does not know (trl/cli/commands/
    // training.py): num_processes is the job's process count, accelerate_config a launch config.
    if (has("num_processes") && whole("num_processes") != world_size) {
      throw UserError(path + " sets num_processes: " + std::to_string(whole("num_processes")) +
                      " (accelerate launch's processes), but this command plans " + std::to_string(world_size) +
                      (world_size == 1 ? " process" : " processes") +
                      "; plan it with plan --world-size " + std::to_string(whole("num_processes")) +
                      ", or sweep it under torchrun --nproc-per-node " + std::to_string(whole("num_processes")));
    }
    if (has("accelerate_config")) {
      refuse("accelerate_config", "launches through an accelerate config (zero2/zero3/fsdp shard the training state; "
                                  "multi_gpu starts its own processes)",
             "remove the key, and give the processes as num_processes (plan --world-size)");
    }
    if (has("lora_task_type") && word("lora_task_type") != "CAUSAL_LM") {
      refuse("lora_task_type", "trains another task than a causal LM", "remove the key");
    }
    // loss_type: TRL's own loss, which plan models (--framework hf-trl --trl-loss); the sweep's
    // nearest is accumbench's chunked head, which also never holds the logits.
    if (has("loss_type")) {
      const std::string loss = word("loss_type");
      if (loss == "chunked_nll") set("--chunked-loss", "", "loss_type");
      else if (loss != "nll") refuse("loss_type", "changes the loss", "use nll or chunked_nll, or remove the key");
      config.trl_loss = loss;
    } else if (const std::string legacy = legacy_trl_key(); !legacy.empty()) {
      // A key TRL 1.7 no longer reads: the file was written for a TRL whose loss was the full nll.
      config.trl_loss = "nll";
      config.trl_loss_by_default = true;
      config.remarks.push_back({"sets " + legacy + ", which only TRL before 1.7.0 reads: planned with that TRL's loss, "
                                "nll over the whole logits (loss_type chunked_nll is TRL's default since 1.7.0; set "
                                "loss_type to choose)",
                                {"--trl-loss", "--framework"}});
    } else {
      config.trl_loss = "chunked_nll";  // SFTConfig.__post_init__ since TRL 1.7.0 (without Liger)
      config.trl_loss_by_default = true;
    }

    // The shape of a step.
    // TRL 0.19 and before: max_seq_length, when given, overrides max_length (later TRL reads only max_length).
    const std::string length_key = has("max_seq_length") ? "max_seq_length" : has("max_length") ? "max_length" : "";
    if (length_key == "max_seq_length" && has("max_length")) config.unused.push_back("max_length (max_seq_length overrides it)");
    if (!length_key.empty()) {
      set("--seq-len", std::to_string(whole(length_key)), length_key);
    } else if (root["max_length"].IsDefined()) {
      throw UserError(path + " sets max_length: null (no truncation); write the longest sequence the training sees");
    } else {
      set("--seq-len", "1024", "max_length", true);
    }
    const int64_t per_device = has("per_device_train_batch_size") ? whole("per_device_train_batch_size") : 8;
    const int64_t accumulation = has("gradient_accumulation_steps") ? whole("gradient_accumulation_steps") : 1;
    batch(per_device, accumulation, world_size, "per_device_train_batch_size x gradient_accumulation_steps");

    // Precision: SFTConfig's bf16 defaults to `not fp16`.
    const bool fp16 = has("fp16") && boolean("fp16");
    const bool bf16 = has("bf16") ? boolean("bf16") : !fp16;
    precision(bf16, fp16, "bf16", !has("bf16") && !fp16);
    if (has("use_cpu") && boolean("use_cpu")) set("--device", "cpu", "use_cpu");
    const std::string dtype_key = has("dtype") ? "dtype" : has("torch_dtype") ? "torch_dtype" : "";
    if (!dtype_key.empty()) {
      const std::string dtype = word(dtype_key);
      if (dtype == "float32") set("--weights-dtype", "fp32", dtype_key);
      else if (dtype == "bfloat16") set("--weights-dtype", "bf16", dtype_key);
      else if (dtype == "float16") set("--weights-dtype", "fp16", dtype_key);
      else refuse(dtype_key, "leaves the weights' dtype to the checkpoint", "write float32, bfloat16 or float16");
      weights = dtype == "bfloat16" ? "bf16" : dtype == "float16" ? "fp16" : "fp32";
    }
    precision_word = bf16 ? "bf16" : fp16 ? "fp16" : "fp32";
    const bool checkpointing = has("gradient_checkpointing") ? boolean("gradient_checkpointing") : true;
    set("--activation-checkpointing", checkpointing ? "blocks" : "none", "gradient_checkpointing",
        !has("gradient_checkpointing"));

    // The data's layout.
    const bool packing = has("packing") && boolean("packing");
    const std::string strategy = has("packing_strategy") ? word("packing_strategy") : "bfd";
    if (packing) {
      // TRL 0.19's "ffd" was this best-fit-decreasing packing, renamed bfd in 0.20.
      if (strategy != "bfd" && strategy != "wrapped" && strategy != "ffd") {
        refuse("packing_strategy", "packs differently from bfd and wrapped", "use bfd or wrapped");
      }
      set("--packing", strategy == "ffd" ? "bfd" : strategy, "packing, packing_strategy");
    } else {
      set("--packing", "none", "packing");
    }
    if (has("padding_free") && boolean("padding_free") && !(packing && (strategy == "bfd" || strategy == "ffd"))) {
      refuse("padding_free", "flattens each micro-batch without padding",
             "use packing: true with packing_strategy: bfd (padding-free, as accumbench models it), or remove the key");
    }
    // pad_to_multiple_of: T is --padding max (the longest sample rounded up to T is T).
    if (has("pad_to_multiple_of")) {
      const int64_t multiple = whole("pad_to_multiple_of");
      const bool to_t = std::any_of(config.settings.begin(), config.settings.end(), [&](const ConfigSetting& s) {
        return s.option == "--seq-len" && s.value == std::to_string(multiple);
      });
      set("--padding", to_t ? "max" : "multiple:" + std::to_string(multiple), "pad_to_multiple_of");
    } else {
      set("--padding", "longest", "pad_to_multiple_of", true);  // the collator pads to the longest sample
    }
    if (has("group_by_length") && boolean("group_by_length")) set("--group-by-length", "", "group_by_length");
    // bfd packing runs padding-free, which keeps documents apart only under a flash kernel
    // (sft_trainer.py at f2cd577 warns of cross-contamination otherwise: the flattened micro-batch
    // is one causal sequence). accumbench restarts attention at each document.
    const bool flash = has("attn_implementation") && word("attn_implementation").find("flash") != std::string::npos;
    if (packing && strategy != "wrapped" && !flash) {
      config.remarks.push_back(
          {"packs with bfd under " +
               (has("attn_implementation") ? word("attn_implementation") : std::string("transformers' default sdpa")) +
               " attention, where TRL's padding-free rows attend across documents (one causal sequence per "
               "micro-batch; SFTTrainer warns); accumbench measures attention restarting at each document, as "
               "flash attention runs it: add attn_implementation: flash_attention_2",
           {"--packing"}});
    }

    // LoRA (ModelConfig, with trl sft's --use_peft).
    if (has("use_peft") && boolean("use_peft")) {
      set("--lora-rank", std::to_string(has("lora_r") ? whole("lora_r") : 16), "lora_r");
      set("--lora-alpha", num(has("lora_alpha") ? number("lora_alpha") : 32.0), "lora_alpha");
      set("--lora-dropout", num(has("lora_dropout") ? number("lora_dropout") : 0.05), "lora_dropout");
      if (has("lora_target_modules")) lora_targets("lora_target_modules");
      else config.lora_default_targets = true;
    } else {
      for (const char* key : {"lora_r", "lora_alpha", "lora_dropout", "lora_target_modules"}) {
        if (has(key)) config.unused.push_back(std::string(key) + " (no use_peft)");
      }
    }
    base_quant("bnb_4bit_quant_type", "use_bnb_nested_quant", false);
    tf32();
    if (has("use_peft") && boolean("use_peft") && (on("load_in_4bit") || on("load_in_8bit")) &&
        legacy_trl_key().empty()) {
      // trl/trainer/sft_trainer.py at f2cd577: no prepare_model_for_kbit_training (the
      // embeddings, head and norms stay in dtype), and the trainable parameters of a quantised
      // model cast to bf16 after get_peft_model. (TRL 0.19 and 0.20, which a file with an older
      // key is written for, still prepared the model.) 16-bit weights under another autocast stay
      // with PEFT's preparation, which accumbench can run.
      if (weights == "fp32" || weights == precision_word) {
        set("--kbit-prep", "none", "use_peft, " + std::string(on("load_in_4bit") ? "load_in_4bit" : "load_in_8bit") +
                                       " (TRL 1.x's SFTTrainer does not prepare the model)");
      }
      // The adapters' dtype follows the precision and the base the command line may change.
      config.adapter_rule = TrainerConfig::AdapterRule::kTrlQuantised;
    }
    optimizer("optim");
    hyperparameters();
  }

  // adapter: lora with load_in_4bit: the base loads unquantised in the training dtype, and
  // _prepare_model_for_quantization still runs PEFT's prepare_model_for_kbit_training (load_in_4bit
  // is set), which casts every 16-bit parameter to fp32; the norms, embeddings and head go back to
  // the training dtype afterwards (_convert_embedding_modules_dtype). The block linears, the bulk,
  // stay fp32: planned as fp32 weights under the file's autocast.
  void lora_over_an_unquantised_base() {
    auto& settings = config.settings;
    settings.erase(std::remove_if(settings.begin(), settings.end(),
                                  [](const ConfigSetting& s) { return s.option == "--weights-dtype"; }),
                   settings.end());
    set("--weights-dtype", "fp32", "adapter: lora, load_in_4bit");
    config.remarks.push_back(
        {"sets load_in_4bit with adapter: lora, for which axolotl builds no 4-bit config (only adapter: qlora does): "
         "the base loads unquantised and prepare_model_for_kbit_training casts it to fp32, so it is planned as fp32 "
         "weights (axolotl casts the embeddings, head and norms back to 16 bits: counted in fp32 here); write "
         "adapter: qlora for a 4-bit base",
         {"--base-quant", "--weights-dtype", "--lora-rank"}});
    if (has("bnb_config_kwargs")) config.unused.push_back("bnb_config_kwargs (no 4-bit config with adapter: lora)");
  }

  // What axolotl does around its LoRA that the file's keys do not say.
  void lora_remarks(const std::string& adapter, const std::string& weights, const std::string& precision_word) {
    // check_auto_enable_lora_kernels (utils/schemas/config.py): left unset, the fused LoRA kernels
    // go on, except for lora over an 8-bit base or with trust_remote_code.
    bool kernels = false;
    for (const char* key : {"lora_mlp_kernel", "lora_qkv_kernel", "lora_o_kernel"}) {
      if (has(key)) kernels = kernels || boolean(key);
    }
    const bool any_set = has("lora_mlp_kernel") || has("lora_qkv_kernel") || has("lora_o_kernel") ||
                         has("lora_embedding_kernel");
    if (has("lora_embedding_kernel")) (void)boolean("lora_embedding_kernel");  // checked: its kernel fuses no linear
    const bool automatic = !any_set && !(adapter == "lora" && on("load_in_8bit")) && !on("trust_remote_code");
    if (kernels || automatic) {
      config.remarks.push_back({std::string(automatic ? "leaves the lora_*_kernel keys unset, so axolotl turns on"
                                                      : "turns on") +
                                    " its fused LoRA kernels (custom autograd over q/k/v, o and the MLP): accumbench "
                                    "measures PEFT's LoRA layers, so axolotl's step may save less and run faster than "
                                    "measured; set lora_mlp_kernel, lora_qkv_kernel and lora_o_kernel to false to train "
                                    "what accumbench measures",
                                {"--lora-rank"}});
    }
    // A quantised base: after prepare_model_for_kbit_training's fp32 cast, axolotl casts the norms,
    // embeddings and head back to the training dtype (_convert_embedding_modules_dtype), which
    // --kbit-prep none keeps them in (under the autocast of that dtype, which accumbench runs).
    const bool quantised = (adapter == "qlora" && on("load_in_4bit")) || (adapter == "lora" && on("load_in_8bit"));
    if (quantised && (weights == "fp32" || weights == precision_word)) {
      set("--kbit-prep", "none", "adapter: " + adapter + " (axolotl casts the embeddings and norms back)");
    }
    // peft_autocast_adapter_dtype (utils/schemas/peft.py), handed to get_peft_model
    // (loaders/adapter.py): false keeps PEFT's adapters in their base layer's dtype
    // (_move_adapter_to_device_of_base_layer, peft/tuners/tuners_utils.py at 5d602fd), which a
    // quantised layer's integer storage is not: fp32 there, as over fp32 weights (adapter: lora
    // with load_in_4bit has cast the base to fp32 by then).
    if (has("peft_autocast_adapter_dtype") && !boolean("peft_autocast_adapter_dtype")) {
      // Resolved from the weights' dtype and the base the command line may change (fp16 weights
      // refused there).
      config.adapter_rule = TrainerConfig::AdapterRule::kPeftBaseDtype;
    }
  }

  void read_axolotl(int world_size) {
    model(has("base_model_config") ? "base_model_config" : "base_model");
    read.insert("base_model");
    refuse_if_on("torch_compile", "compiles the model");
    refuse_if_on("activation_offloading", "moves activations to the CPU");
    refuse_if_on("deepspeed", "shards the training state with DeepSpeed");
    refuse_if_on("fsdp", "shards the training state with FSDP");
    refuse_if_on("fsdp_config", "shards the training state with FSDP");
    refuse_if_on("plugins", "loads plugins that patch the model");
    refuse_if_on("cut_cross_entropy", "swaps in a fused cross-entropy");
    refuse_if_on("unfrozen_parameters", "trains only some parameters");
    refuse_if_on("lora_modules_to_save", "trains whole modules beside the adapters");
    refuse_if_on("peft_use_dora", "trains DoRA adapters");
    refuse_if_on("peft_use_rslora", "scales the adapters by alpha / sqrt(r)");
    refuse_if_on("xformers_attention", "picks xformers' attention kernel");
    refuse_if_on("flex_attention", "picks flex attention");
    refuse_if_on("s2_attention", "picks shifted-sparse attention");
    refuse_if_on("eager_attention", "picks eager attention");
    refuse_if_on("lisa_n_layers", "trains a few layers at a time (LISA)");
    refuse_if_on("relora", "merges the adapters into the base and restarts them (ReLoRA)");
    // normalize_attn_implementation (utils/schemas/config.py): the legacy flags or the canonical key.
    for (const char* flag : {"flash_attention", "sdp_attention", "xformers_attention", "flex_attention",
                             "sage_attention", "eager_attention"}) {
      if (has("attn_implementation") && on(flag)) {
        throw UserError(path + " sets attn_implementation beside the legacy " + flag +
                        ", which axolotl refuses; keep only attn_implementation");
      }
    }
    attention_implementation();
    for (const std::string& key : {std::string("tensor_parallel_size"), std::string("context_parallel_size")}) {
      if (has(key) && whole(key) > 1) refuse(key, "splits the model over devices", "remove the key");
    }
    for (const auto& item : root) {
      const std::string key = item.first.Scalar();
      if (key.rfind("liger_", 0) == 0) refuse_if_on(key, "swaps in Liger's fused kernels");
    }
    // flash_attention / sdp_attention: memory-efficient attention, which is accumbench's own on
    // CUDA with PyTorch 2.x (the plan's header names the attention it assumes).
    for (const char* key : {"flash_attention", "sdp_attention"}) {
      if (has(key)) config.unused.push_back(std::string(key) + " (accumbench's attention follows the device)");
    }
    if (has("adapter")) {
      const std::string adapter = word("adapter");
      if (adapter == "qlora" && !on("load_in_4bit")) {
        throw UserError(path + " sets adapter: qlora without load_in_4bit: true; add it, as axolotl needs");
      }
      if (adapter != "lora" && adapter != "qlora") refuse("adapter", "trains another adapter than LoRA", "use adapter: lora or qlora, or remove the key");
    }

    const int64_t length = has("sequence_len") ? whole("sequence_len") : 512;
    set("--seq-len", std::to_string(length), "sequence_len", !has("sequence_len"));
    const int64_t micro = has("micro_batch_size") ? whole("micro_batch_size") : 1;
    int64_t accumulation = 1;
    // axolotl's config validation (check_gas_bsz) refuses a file that sets both.
    if (has("gradient_accumulation_steps") && has("batch_size")) {
      throw UserError(path + " sets both gradient_accumulation_steps and batch_size, which axolotl refuses; keep one "
                      "(batch_size is micro_batch_size x gradient_accumulation_steps)");
    }
    if (has("gradient_accumulation_steps")) {
      accumulation = whole("gradient_accumulation_steps");
    } else if (has("batch_size")) {
      // normalize_config: gradient_accumulation_steps = batch_size // micro_batch_size.
      const int64_t per_device = whole("batch_size");
      if (per_device % micro != 0) {
        throw UserError(path + ": batch_size " + std::to_string(per_device) + " is not a multiple of micro_batch_size " +
                        std::to_string(micro) + "; give gradient_accumulation_steps instead");
      }
      accumulation = per_device / micro;
    }
    batch(micro, accumulation, world_size, "micro_batch_size x gradient_accumulation_steps");

    // bf16: auto is bf16 on any GPU since Ampere, the devices accumbench plans for.
    const bool bf16_auto = !has("bf16") || (root["bf16"].IsScalar() && root["bf16"].Scalar() == "auto");
    const bool fp16 = has("fp16") && boolean("fp16");
    const bool bf16 = bf16_auto ? !fp16 : boolean("bf16");  // auto gives way to an explicit fp16
    precision(bf16, fp16, "bf16", !has("bf16") && !fp16);
    // resolve_dtype (utils/config/__init__.py): bf16 (or bfloat16) loads the model in bfloat16, fp16
    // (or float16) in float16, else float32; so bf16: true is bf16 weights under bf16 autocast.
    const bool bfloat16 = has("bfloat16") && boolean("bfloat16");
    const bool float16 = has("float16") && boolean("float16");
    const std::string weights = bf16 || bfloat16 ? "bf16" : fp16 || float16 ? "fp16" : "fp32";
    const std::string weights_key = bf16 ? "bf16" : bfloat16 ? "bfloat16" : fp16 ? "fp16" : float16 ? "float16" : "bf16";
    set("--weights-dtype", weights, weights_key, weights_key == "bf16" && !has("bf16"));

    bool checkpointing = false;
    if (has("gradient_checkpointing")) {
      if (root["gradient_checkpointing"].IsScalar() && root["gradient_checkpointing"].Scalar().rfind("offload", 0) == 0) {
        refuse("gradient_checkpointing", "offloads the checkpoints", "use true or false");
      }
      checkpointing = boolean("gradient_checkpointing");
    }
    set("--activation-checkpointing", checkpointing ? "blocks" : "none", "gradient_checkpointing",
        !has("gradient_checkpointing"));

    // axolotl's sample packing keeps samples whole, attention restarting at each: bfd.
    const bool packing = has("sample_packing") && boolean("sample_packing");
    set("--packing", packing ? "bfd" : "none", "sample_packing");
    // The collator (core/builders/causal.py): pad_to_sequence_len true pads to T; unset, to a
    // multiple of pad_to_multiple_of (64 by default); false, to the longest sample.
    const int64_t multiple = has("pad_to_multiple_of") ? whole("pad_to_multiple_of") : 64;
    if (packing && !has("pad_to_sequence_len")) {
      // hint_sample_packing_padding (utils/schemas/validation.py) sets it true with sample_packing.
      set("--padding", "max", "pad_to_sequence_len (true with sample_packing)", true);
    } else if (has("pad_to_sequence_len") && boolean("pad_to_sequence_len")) {
      set("--padding", "max", "pad_to_sequence_len");
    } else if (has("pad_to_sequence_len")) {
      set("--padding", "longest", "pad_to_sequence_len");
    } else {
      set("--padding", multiple >= length ? "max" : "multiple:" + std::to_string(multiple), "pad_to_sequence_len",
          true);
    }
    if (has("group_by_length") && boolean("group_by_length")) set("--group-by-length", "", "group_by_length");

    if (has("adapter")) {
      const std::string adapter = "adapter: " + word("adapter");
      if (!has("lora_r")) throw UserError(path + " sets " + adapter + " without lora_r; add lora_r");
      set("--lora-rank", std::to_string(whole("lora_r")), "lora_r");
      if (!has("lora_alpha")) throw UserError(path + " sets " + adapter + " without lora_alpha; add lora_alpha");
      set("--lora-alpha", num(number("lora_alpha")), "lora_alpha");
      set("--lora-dropout", num(has("lora_dropout") ? number("lora_dropout") : 0.0), "lora_dropout");
      // _build_peft_lora_config (src/axolotl/loaders/adapter.py): lora_target_modules, or [],
      // joined by find_all_linear_names' modules under lora_target_linear; PeftConfig takes the
      // layer selections as they are.
      refuse_if_on("peft_layers_to_transform", "puts adapters on some layers only");
      refuse_if_on("peft_layers_pattern", "puts adapters on some layers only");
      refuse_if_on("lora_exclude_modules", "leaves modules out of the adapters' targets");
      config.lora_target_modules.all_linear = has("lora_target_linear") && boolean("lora_target_linear");
      if (has("lora_target_modules")) lora_targets("lora_target_modules");
      if (!config.lora_target_modules.named()) {
        throw UserError(path + " sets adapter: " + word("adapter") +
                        " without lora_target_modules or lora_target_linear, so axolotl passes PEFT no target "
                        "module and PEFT stops; add lora_target_linear: true or list lora_target_modules");
      }
    } else {
      for (const char* key : {"lora_r", "lora_alpha", "lora_dropout", "lora_target_linear", "lora_target_modules"}) {
        if (has(key)) config.unused.push_back(std::string(key) + " (no adapter)");
      }
    }
    // axolotl's loader (src/axolotl/loaders/model.py at 067b021, _set_quantization_config):
    // load_in_4bit with adapter: qlora is nf4 with bnb_4bit_use_double_quant True, and
    // bnb_config_kwargs updated over those; with adapter: lora no 4-bit config is built at all.
    const std::string adapter_kind = has("adapter") ? word("adapter") : "";
    if (adapter_kind == "lora" && on("load_in_4bit") && !on("load_in_8bit")) {
      lora_over_an_unquantised_base();
    } else {
      base_quant("", "", true);
      bnb_config_kwargs();
    }
    if (adapter_kind == "lora" || adapter_kind == "qlora") lora_remarks(adapter_kind, weights, bf16 ? "bf16" : fp16 ? "fp16" : "fp32");
    tf32();
    optimizer("optimizer");
    hyperparameters();
  }
};

int64_t whole_number(const ConfigSetting& s) { return std::stoll(s.value); }
double real_number(const ConfigSetting& s) { return std::stod(s.value); }

// Both model options name the model: either one on the command line wins over the file's.
bool overridden(const ConfigSetting& s, const std::function<bool(const std::string&)>& given) {
  if (s.option == "--model" || s.option == "--hf-config") return given("--model") || given("--hf-config");
  return given(s.option);
}

// A file's setting that only shapes what the command line turned off: the adapters' alpha, targets,
// dropout and the base's quantisation under --lora-rank 0 (full fine-tuning), NF4's double
// quantisation under another --base-quant. They are dropped with it, as overridden. Only options
// given on the command line are read from `w`, so the answer is the same before and after the
// file is applied.
bool moot(const ConfigSetting& s, const std::function<bool(const std::string&)>& given, const WorkloadOptions& w) {
  static const std::set<std::string> kAdapterOptions = {"--lora-alpha", "--lora-targets", "--lora-dropout",
                                                         "--base-quant", "--double-quant", "--kbit-prep"};
  if (given("--lora-rank") && !w.lora.enabled() && kAdapterOptions.count(s.option) != 0) return true;
  if (s.option == "--kbit-prep" && given("--base-quant") && w.lora.base_quant == BaseQuant::kNone) return true;
  return s.option == "--double-quant" && given("--base-quant") && w.lora.base_quant != BaseQuant::kNf4;
}

// The adapters' dtype the trainer gives the workload the file and the command line leave
// (TrainerConfig::adapter_rule): TRL 1.x's SFTTrainer casts a quantised model's trainable
// parameters to bf16 (trl/trainer/sft_trainer.py at f2cd577), which accumbench plans beside bf16
// activations only, so under another precision they stay fp32 (a note says so); PEFT's
// autocast_adapter_dtype=False keeps them in the base layer's dtype, fp32 over a quantised or fp32
// base (_move_adapter_to_device_of_base_layer, peft/tuners/tuners_utils.py at 5d602fd).
Precision rule_adapter_dtype(const TrainerConfig& config, const WorkloadOptions& w) {
  switch (config.adapter_rule) {
    case TrainerConfig::AdapterRule::kPeft:
      return Precision::kFp32;
    case TrainerConfig::AdapterRule::kTrlQuantised:
      return w.lora.quantized() && w.precisions == std::vector<Precision>{Precision::kBf16} ? Precision::kBf16
                                                                                          : Precision::kFp32;
    case TrainerConfig::AdapterRule::kPeftBaseDtype:
      if (w.lora.quantized() || w.weights_dtype == Precision::kFp32) return Precision::kFp32;
      if (w.weights_dtype == Precision::kFp16) {
        throw UserError(config.path + " sets peft_autocast_adapter_dtype: false, which keeps the adapters in the fp16 "
                        "weights' dtype, whose fp16 gradients torch's GradScaler refuses to unscale under fp16; remove "
                        "the key (PEFT's fp32 adapters) or give --adapter-dtype fp32, or train in bf16");
      }
      return Precision::kBf16;
  }
  return Precision::kFp32;
}

void apply_setting(const ConfigSetting& s, WorkloadOptions& w) {
  const std::string& o = s.option;
  if (o == "--model") {
    w.model.preset = s.value;
    w.model.hf_config.clear();
  } else if (o == "--hf-config") {
    w.model.hf_config = s.value;
  } else if (o == "--seq-len") {
    w.seq_len = whole_number(s);
  } else if (o == "--batch") {
    w.batch = whole_number(s);
  } else if (o == "--precision") {
    w.precisions = {precision_from_string(s.value)};
  } else if (o == "--weights-dtype") {
    w.weights_dtype = weights_dtype_from_string(s.value);
  } else if (o == "--activation-checkpointing") {
    w.grid.checkpointing = checkpointing_from_string(s.value);
  } else if (o == "--packing") {
    w.data.packing = packing_from_string(s.value);
  } else if (o == "--padding") {
    set_padding(w.data, s.value);
  } else if (o == "--group-by-length") {
    w.data.group_by_length = true;
  } else if (o == "--chunked-loss") {
    w.loss.chunked = true;
  } else if (o == "--device") {
    w.device = s.value;
  } else if (o == "--lora-rank") {
    w.lora.rank = whole_number(s);
  } else if (o == "--lora-alpha") {
    w.lora.alpha = real_number(s);
  } else if (o == "--lora-dropout") {
    w.lora.dropout = real_number(s);
  } else if (o == "--lora-targets") {
    w.lora.targets = s.value;
  } else if (o == "--lr") {
    w.optimizer.lr = real_number(s);
  } else if (o == "--weight-decay") {
    w.optimizer.weight_decay = real_number(s);
  } else if (o == "--beta1") {
    w.optimizer.beta1 = real_number(s);
  } else if (o == "--beta2") {
    w.optimizer.beta2 = real_number(s);
  } else if (o == "--adam-eps") {
    w.optimizer.eps = real_number(s);
  } else if (o == "--seed") {
    w.model.seed = static_cast<uint64_t>(whole_number(s));
  } else if (o == "--optimizer") {
    w.optimizer.kind = optimizer_kind_from_string(s.value);
  } else if (o == "--base-quant") {
    w.lora.base_quant = base_quant_from_string(s.value);
  } else if (o == "--double-quant") {
    w.lora.double_quant = true;
  } else if (o == "--kbit-prep") {
    w.lora.kbit_upcast = kbit_upcast_from_string(s.value);
  } else if (o == "--adapter-dtype") {
    w.lora.adapter_dtype = adapter_dtype_from_string(s.value);
  } else if (o == "--tf32") {
    w.tf32 = s.value == "on";
  }
}

// PEFT's default target modules for the model's type: c_attn on GPT-2, q_proj and v_proj on the
// Llama family (llama, mistral, qwen2, qwen3).
std::string peft_default_targets(const ModelConfig& model) {
  return model.arch == Architecture::kGpt2 ? "c_attn" : "q_proj,v_proj";
}

// The file's target_modules as --lora-targets for this model, or UserError naming the file and key.
std::string lora_targets_of(const TrainerConfig& config, const ModelConfig& model, bool quantized_base) {
  const PeftTargetModules& t = config.lora_target_modules;
  try {
    const std::string listed = t.key.empty() ? ""
                               : t.pattern.empty() && !t.one_name_list ? targets_from_peft_names(model, t.names)
                                                                        : targets_from_peft_pattern(model, t.pattern);
    if (!t.all_linear) return listed;
    // find_all_linear_names finds GPT-2's Conv1D projections only as bitsandbytes' layers.
    if (model.arch != Architecture::kGpt2 || quantized_base) return "all-linear";
    if (!listed.empty()) return listed;
    throw UserError(config.path + " sets lora_target_linear: true, but axolotl's find_all_linear_names finds no "
                    "linear layer in GPT-2 (its projections are transformers' Conv1D, not nn.Linear, unless a "
                    "quantised base replaced them), so PEFT gets no target module and stops; list them instead: "
                    "lora_target_modules: [c_attn, c_proj, c_fc]");
  } catch (const UserError& error) {
    if (t.key.empty() || std::string(error.what()).rfind(config.path, 0) == 0) throw;
    throw UserError(config.path + ": " + t.key + " " +
                    (t.one_name_list ? "[" + t.pattern + "] reaches PEFT as one string (TRL's ModelConfig unwraps a "
                                                         "one-name list) and "
                                     : std::string()) +
                    error.what());
  }
}

}  // namespace

TrainerConfig parse_trainer_config(const std::string& yaml_text, ConfigFormat format, int world_size,
                                   const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& error) {
    throw UserError(path + " is not YAML (line " + std::to_string(error.mark.line + 1) + ": " + error.msg +
                    "); pass the file " + (format == ConfigFormat::kTrl ? "trl sft --config" : "axolotl train") +
                    " reads");
  }
  if (!root.IsMap()) {
    if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);  // an empty file: every default
    else throw UserError(path + " holds no YAML mapping of keys; pass the file of " + format_name(format) + " keys");
  }
  // PyYAML, which TRL and axolotl read with, keeps a repeated key's last value; yaml-cpp its first.
  std::set<std::string> seen;
  for (const auto& item : root) {
    const std::string key = item.first.Scalar();
    if (!seen.insert(key).second) {
      throw UserError(path + " sets " + key + " twice (again on line " + std::to_string(item.first.Mark().line + 1) +
                      "); TRL and axolotl would take the last value, accumbench takes none: keep one");
    }
  }
  Reader reader{root, format, path, {}, {}};
  reader.config.path = path;
  reader.config.format = format;
  if (format == ConfigFormat::kTrl) reader.read_trl(std::max(1, world_size));
  else reader.read_axolotl(std::max(1, world_size));
  const std::set<std::string>& unused = format == ConfigFormat::kTrl ? trl_unused_keys() : axolotl_unused_keys();
  for (const auto& item : root) {
    const std::string key = item.first.Scalar();
    if (reader.read.count(key) != 0) continue;
    if (unused.count(key) != 0) reader.config.unused.push_back(key);
    else reader.config.unknown.push_back(key);
  }
  return reader.config;
}

TrainerConfig read_trainer_config(const std::string& path, ConfigFormat format, int world_size) {
  const std::shared_ptr<const std::string> text = read_file_bytes(path);  // a pipe too
  if (text == nullptr) {
    const std::string why = why_unreadable(path);
    throw UserError(std::string(option_name(format)) + " " + text::quoted(path) + " " +
                    (why == "is a directory" ? why : "cannot be read") + "; pass the path of your " +
                    format_name(format) + " YAML config");
  }
  return parse_trainer_config(*text, format, world_size, path);
}

void apply_trainer_config(const TrainerConfig& config, WorkloadOptions& workload,
                          const std::function<bool(const std::string& option)>& given, bool auto_is_cuda) {
  for (const ConfigSetting& s : config.settings) {
    if (overridden(s, given) || moot(s, given, workload)) continue;
    try {
      apply_setting(s, workload);
    } catch (const UserError& error) {
      throw UserError(config.path + ": " + s.keys + ": " + error.what());
    }
  }
  if (!given("--lora-targets") && workload.lora.enabled()) {
    if (config.lora_target_modules.named()) {
      workload.lora.targets = lora_targets_of(config, resolve_model(workload.model), workload.lora.quantized());
    } else if (config.lora_default_targets) {
      workload.lora.targets = peft_default_targets(resolve_model(workload.model));
    }
  }
  if (config.adapter_rule != TrainerConfig::AdapterRule::kPeft && !given("--adapter-dtype") && workload.lora.enabled())
    workload.lora.adapter_dtype = rule_adapter_dtype(config, workload);
  if (!config.torch_default_adamw.empty() && !given("--optimizer")) {
    const bool cuda = workload.device.rfind("cuda", 0) == 0 || (workload.device == "auto" && auto_is_cuda);
    workload.optimizer.kind = cuda ? OptimizerKind::kAdamWForeach : OptimizerKind::kAdamW;
  }
  workload.trl_loss = config.trl_loss;
  workload.trl_loss_by_default = config.trl_loss_by_default;
}

std::vector<std::string> trainer_config_notes(const TrainerConfig& config,
                                              const std::function<bool(const std::string& option)>& given,
                                              const WorkloadOptions& workload) {
  std::string read = "read " + config.path + " as";
  std::string defaults, overridden_options, moot_options;
  for (const ConfigSetting& s : config.settings) {
    if (overridden(s, given)) {
      overridden_options += " " + s.option;
      continue;
    }
    if (moot(s, given, workload)) {
      moot_options += " " + s.option;
      continue;
    }
    read += " " + s.option + (s.value.empty() ? "" : " " + s.value);
    if (s.option == "--batch") read += " (" + s.keys + ")";
    if (!s.by_default) continue;
    // The batch's default is its per-device key's; one key may stand for two options (axolotl's
    // bf16: the precision and the weights' dtype), named once.
    const std::string key = s.option == "--batch" ? s.keys.substr(0, s.keys.find(' ')) : s.keys;
    if ((", " + defaults + ",").find(", " + key + ",") == std::string::npos)
      defaults += (defaults.empty() ? "" : ", ") + key;
  }
  // The adapters' dtype as the trainer picks it for this workload (rule_adapter_dtype).
  std::string adapter_note;
  if (config.adapter_rule != TrainerConfig::AdapterRule::kPeft && !given("--adapter-dtype") && workload.lora.enabled()) {
    const bool trl = config.adapter_rule == TrainerConfig::AdapterRule::kTrlQuantised;
    if (workload.lora.adapter_dtype == Precision::kBf16) {
      read += " --adapter-dtype bf16";
    } else if (trl && workload.lora.quantized()) {
      adapter_note = config.path + ": TRL 1.x's SFTTrainer casts the adapters of a quantised model to bf16, which "
                     "accumbench plans under bf16 autocast only (here " + join_precisions(workload.precisions) +
                     "): they are kept in fp32, as PEFT creates them, so the plan counts twice the adapters' weights, "
                     "gradients and optimizer state";
    } else if (!trl) {
      adapter_note = config.path + ": peft_autocast_adapter_dtype: false changes nothing here: PEFT keeps the adapters "
                     "in fp32 over " + (workload.lora.quantized() ? "a quantised base" : "fp32 weights");
    }
  }
  // adamw_torch as the device runs it (apply_trainer_config).
  std::string optimizer_note;
  if (!config.torch_default_adamw.empty()) {
    if (given("--optimizer")) {
      overridden_options += " --optimizer";
    } else if (workload.optimizer.kind == OptimizerKind::kAdamWForeach) {
      read += " --optimizer adamw-foreach (" + config.torch_default_adamw + ")";
    } else {
      read += " --optimizer adamw (" + config.torch_default_adamw + ")";
      optimizer_note = config.path + ": " + config.torch_default_adamw + " adamw_torch steps one tensor at a time on the "
                       "CPU, as accumbench's adamw; on CUDA torch runs its foreach kernels, which --device cuda "
                       "measures and plans (--optimizer adamw-foreach: a copy of what trains during the step)";
    }
  }
  const bool file_targets = config.lora_target_modules.named();
  if (!given("--lora-targets") && workload.lora.enabled()) {
    if (file_targets) read += " --lora-targets " + workload.lora.targets;
    else if (config.lora_default_targets) read += " --lora-targets PEFT's default for the model";
  } else if (file_targets && given("--lora-targets")) {
    overridden_options += " --lora-targets";
  } else if (file_targets && given("--lora-rank")) {
    moot_options += " --lora-targets";
  }
  std::vector<std::string> notes = {read};
  if (!defaults.empty()) {
    notes.push_back(config.path + " leaves out " + defaults + ": " + format_name(config.format) + "'s defaults stand");
  }
  if (!overridden_options.empty()) {
    notes.push_back("the command line overrides " + config.path + "'s" + overridden_options +
                    (moot_options.empty() ? "" : ", and with it drops" + moot_options + " (nothing left to shape)"));
  }
  auto list = [](const std::vector<std::string>& keys) {
    std::string text;
    for (const std::string& key : keys) text += (text.empty() ? "" : ", ") + key;
    return text;
  };
  for (const TrainerConfig::Remark& remark : config.remarks) {
    if (std::none_of(remark.options.begin(), remark.options.end(), given)) notes.push_back(config.path + ": " + remark.text);
  }
  if (!adapter_note.empty()) notes.push_back(adapter_note);
  if (!optimizer_note.empty()) notes.push_back(optimizer_note);
  if (!config.unused.empty()) {
    notes.push_back(config.path + ": not used (no effect on the step accumbench measures): " + list(config.unused));
  }
  if (!config.unknown.empty()) {
    notes.push_back(config.path + ": not understood, ignored: " + list(config.unknown) +
                    " (if one of them changes memory or time, the results do not show it)");
  }
  return notes;
}

}  // namespace accumbench
