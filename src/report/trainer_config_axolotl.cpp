// axolotl's keys read as accumbench options (trainer_config_reader.hpp, trainer_config.hpp). The
// keys and their defaults, from its own sources:
// - axolotl (github.com/axolotl-ai-cloud/axolotl, src/axolotl/utils/schemas/config.py,
//   training.py, peft.py; utils/config/__init__.py normalize_config; core/builders/causal.py):
//   sequence_len 512; micro_batch_size 1; gradient_accumulation_steps 1 (or batch_size /
//   micro_batch_size when only batch_size is given); bf16 "auto" (bf16 on any GPU since Ampere);
//   tf32 "auto" (TF32 on any GPU since Ampere);
//   gradient_checkpointing false (or "offload"/"offload_disk"); sample_packing false; the collator
//   pads to the longest sample rounded up to pad_to_multiple_of (default 64) unless
//   pad_to_sequence_len is true (to sequence_len) or false (to the longest sample); optimizer
//   "adamw_torch_fused"; lora_dropout 0.0.

#include <cmath>

#include "report/trainer_config_reader.hpp"

namespace accumbench::trainer_config_detail {

const std::set<std::string>& axolotl_unused_keys() {
  static const std::set<std::string> keys = {
      "datasets", "test_datasets", "dataset_prepared_path", "dataset_processes", "shuffle_merged_datasets",
      "val_set_size", "output_dir", "num_epochs", "max_steps", "lr_scheduler", "lr_scheduler_kwargs",
      "cosine_min_lr_ratio", "lr_quadratic_warmup", "warmup_steps", "warmup_ratio", "logging_steps",
      "evals_per_epoch", "saves_per_epoch", "eval_steps", "save_steps", "save_strategy", "eval_strategy",
      "save_total_limit", "save_first_step", "save_safetensors", "wandb_project", "wandb_entity", "wandb_watch",
      "wandb_name", "wandb_log_model", "use_wandb", "use_mlflow", "mlflow_experiment_name", "special_tokens",
      "tokens", "chat_template", "default_system_message", "strict",
      "early_stopping_patience", "resume_from_checkpoint", "auto_resume_from_checkpoints", "local_rank", "debug",
      "hub_model_id", "hub_strategy", "push_dataset_to_hub", "eval_sample_packing", "eval_batch_size",
      "eval_sequence_len", "eval_max_new_tokens", "eval_table_size", "lora_fan_in_fan_out", "lora_model_dir",
      "trust_remote_code", "is_llama_derived_model", "is_qwen_derived_model", "is_mistral_derived_model",
      "tokenizer_type", "tokenizer_config", "tokenizer_use_fast", "tokenizer_legacy",
      "loss_watchdog_threshold", "loss_watchdog_patience",
      "gc_steps", "neftune_noise_alpha", "ddp_timeout", "ddp_bucket_cap_mb",
      "ddp_broadcast_buffers", "remove_unused_columns", "embeddings_skip_upcast", "fsdp_version",
      "dataloader_num_workers", "dataloader_pin_memory", "dataloader_prefetch_factor",
      "logging_dir", "report_to",
      // What helper-53 found in axolotl's examples that touches no step: loading, logging, metrics.
      "torchdistx_path", "revision_of_model", "hf_use_auth_token", "low_cpu_mem_usage", "wandb_run_id",
      "use_otel_metrics", "otel_metrics_host", "otel_metrics_port", "do_causal_lm_eval", "eval_causal_lm_metrics",
      "streaming_multipack_buffer_size", "gptq_groupsize", "gptq_model_v1", "gptq_disable_exllama"};
  return keys;
}

// adapter: lora with load_in_4bit: the base loads unquantised in the training dtype, and
// _prepare_model_for_quantization still runs PEFT's prepare_model_for_kbit_training (load_in_4bit
// is set), which casts every 16-bit parameter to fp32; the norms, embeddings and head go back to
// the training dtype afterwards (_convert_embedding_modules_dtype). The block linears, the bulk,
// stay fp32: planned as fp32 weights under the file's autocast.
void Reader::lora_over_an_unquantised_base() {
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
void Reader::lora_remarks(const std::string& adapter, const std::string& weights, const std::string& precision_word) {
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

void Reader::read_axolotl(int world_size) {
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
  // sequence_parallel_degree: the older name axolotl still copies into context_parallel_size.
  for (const std::string& key : {std::string("tensor_parallel_size"), std::string("context_parallel_size"),
                                 std::string("sequence_parallel_degree")}) {
    if (has(key) && whole(key) > 1) refuse(key, "splits the model over devices", "remove the key");
  }
  // Preference and RL training (dpo, kto, orpo, grpo, ...) run other steps than SFT's: a reference
  // model's forward, chosen and rejected pairs, generation.
  refuse_if_on("rl", "trains with a preference or RL objective (a reference model, paired or generated samples)");
  refuse_if_on("fp8", "computes the matmuls in FP8 (torchao)");
  // What axolotl's examples set that changes the model, its head or its kernels (helper-53 ran
  // axolotl 067b021's examples/): src/axolotl/loaders/model.py (gptq, flash_optimum),
  // core/builders/causal.py (reward_model, process_reward_model, use_eaft),
  // loaders/patch_manager.py (flash_attn_cross_entropy, tiled_mlp), the MoE options.
  refuse_if_on("gptq", "loads a GPTQ-quantised base");
  refuse_if_on("reward_model", "trains a reward model (a scoring head over chosen and rejected answers)");
  refuse_if_on("process_reward_model", "trains a process reward model (a classification head)");
  refuse_if_on("use_eaft", "swaps in the EAFT loss");
  refuse_if_on("flash_attn_cross_entropy", "swaps in flash-attn's fused cross-entropy");
  refuse_if_on("flash_optimum", "runs the model through BetterTransformer");
  refuse_if_on("tiled_mlp", "computes the MLP in tiles");
  refuse_if_on("lora_target_parameters", "puts adapters on parameters rather than modules");
  refuse_if_on("processor_type", "trains a vision-language model (a processor for images and text)");
  refuse_if_on("model_quantization_config", "quantises the model with its own config");
  refuse_if_on("max_packed_sequence_len", "packs by the option axolotl no longer takes (it refuses it too)");
  for (const char* key : {"quantize_moe_experts", "use_scattermoe", "use_sonicmoe", "experts_implementation"})
    refuse_if_on(key, "acts on a mixture-of-experts model's experts");
  refuse_if_on("use_kernels", "swaps in kernels from the Hub");
  refuse_if_on("fused_attn_kernel", "swaps in a fused RMSNorm and RoPE kernel");
  refuse_if_on("flash_attn_fuse_mlp", "swaps in xformers' fused SwiGLU MLP");
  refuse_if_on("flash_attn_rms_norm", "swaps in flash-attn's fused RMSNorm");
  // What axolotl 067b021 reads that changes memory or time beyond the keys above:
  // loaders/patch_manager.py (chunked_cross_entropy: monkeypatch/loss/chunked.py, torchtune's
  // CEWithChunkedOutputLoss, which still takes the whole (b, T, V) logits from the head and upcasts
  // one chunk at a time under torch.compile, so accumbench's --chunked-loss, which never holds the
  // logits, is not it), loaders/adapter.py (lora_rank_pattern: other ranks per module),
  // core/trainers/mixins/layer_offloading.py, loaders/model.py (qat's fake quantisation,
  // selective_checkpointing's saved ops, fp32_norms, which needs FSDP2, and
  // _resize_token_embeddings' multiple of 32).
  refuse_if_on("chunked_cross_entropy",
               "computes the loss over the whole logits one fp32 chunk at a time, compiled (accumbench's "
               "--chunked-loss never holds the logits, which is not the same memory)");
  refuse_if_on("lora_rank_pattern", "gives some modules' adapters other ranks than lora_r");
  refuse_if_on("layer_offloading", "offloads the layers' weights to the CPU during the step");
  refuse_if_on("qat", "trains with fake quantisation (quantisation-aware training)");
  refuse_if_on("selective_checkpointing", "saves some operations' outputs inside each checkpointed block");
  refuse_if_on("fp32_norms", "keeps the norms in fp32 under FSDP2");
  refuse_if_on("resize_token_embeddings_to_32x", "resizes the embeddings and head to the tokenizer's length rounded "
                                                 "up to a multiple of 32");
  for (const char* key : {"dp_shard_size", "expert_parallel_size"}) {
    if (has(key) && whole(key) > 1) refuse(key, "shards the model over devices", "remove the key");
  }
  // model_type: the class axolotl loads; anything but a causal LM has another head (or a vision
  // tower: AutoModelForImageTextToText).
  if (has("model_type")) {
    const std::string type = word("model_type");
    const std::string suffix = "ForCausalLM";
    if (type.size() < suffix.size() || type.compare(type.size() - suffix.size(), suffix.size(), suffix) != 0)
      refuse("model_type", "loads another model than a causal language model", "use AutoModelForCausalLM, or remove the key");
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
    // normalize_config: gradient_accumulation_steps = batch_size // micro_batch_size, floored (0
    // below one micro-batch, which the Trainer cannot run).
    const int64_t per_device = whole("batch_size");
    if (per_device < micro) {
      throw UserError(path + ": batch_size " + std::to_string(per_device) + " is below micro_batch_size " +
                      std::to_string(micro) + ", which axolotl floors to 0 accumulation steps; raise batch_size or give "
                      "gradient_accumulation_steps instead");
    }
    accumulation = per_device / micro;
    if (per_device % micro != 0) {
      config.remarks.push_back(
          {"batch_size " + std::to_string(per_device) + " is not a multiple of micro_batch_size " + std::to_string(micro) +
               ": axolotl floors it to " + std::to_string(accumulation) + " accumulation steps, an effective batch of " +
               std::to_string(accumulation * micro) + " per device, which is what is measured",
           {"--batch"}});
    }
  }
  batch(micro, accumulation, world_size, "micro_batch_size x gradient_accumulation_steps");
  // check_batch_size_fields (utils/schemas/validation.py at 067b021): at least two of the three set.
  int batch_keys = 0;
  for (const char* key : {"micro_batch_size", "gradient_accumulation_steps", "batch_size"}) {
    if (has(key) && !(root[key].IsScalar() && (root[key].Scalar() == "0" || root[key].Scalar() == "false"))) ++batch_keys;
  }
  if (batch_keys < 2) {
    config.remarks.push_back(
        {"sets " + std::string(batch_keys == 0 ? "none" : "one") +
             " of micro_batch_size, gradient_accumulation_steps and batch_size, and axolotl refuses a file without two "
             "of them (check_batch_size_fields); read here as " + std::to_string(micro) + " per device x " +
             std::to_string(accumulation) + (accumulation == 1 ? " accumulation step" : " accumulation steps") +
             ", the split to add to the file",
         {"--batch"}});
  }

  // bf16: auto is bf16 on any GPU since Ampere, the devices accumbench plans for.
  // Left out, bf16 is "auto"; an explicit null stays None, which skips auto and trains without it.
  const bool bf16_null = root["bf16"].IsDefined() && root["bf16"].IsNull();
  const bool bf16_auto = (!has("bf16") && !bf16_null) || (root["bf16"].IsScalar() && root["bf16"].Scalar() == "auto");
  bool fp16 = has("fp16") && boolean("fp16");
  if (!bf16_auto && !bf16_null) {
    bool value = false;
    if (!root["bf16"].IsScalar() || !YAML::convert<bool>::decode(root["bf16"], value)) bad_value("bf16", "true, false or auto");
  }
  const bool bf16 = bf16_auto ? !fp16 : !bf16_null && boolean("bf16");  // auto gives way to an explicit fp16
  // resolve_dtype (utils/config/__init__.py at 067b021): `if cfg.bf16: cfg.fp16 = False`, so a file
  // with both trains bf16 (and loads the weights in bf16), where TRL's TrainingArguments refuses both.
  if (bf16 && fp16) {
    fp16 = false;
    config.remarks.push_back({"sets both bf16: true and fp16: true; axolotl's resolve_dtype turns fp16 off when bf16 is "
                              "on, so it trains bf16: --precision bf16 (remove fp16 to say so in the file)",
                              {"--precision"}});
  }
  precision(bf16, fp16, "bf16", !has("bf16") && !fp16);
  // resolve_dtype (utils/config/__init__.py): bf16 (or bfloat16) loads the model in bfloat16, fp16
  // (or float16) in float16, else float32; so bf16: true is bf16 weights under bf16 autocast.
  const bool bfloat16 = has("bfloat16") && boolean("bfloat16");
  const bool float16 = has("float16") && boolean("float16");
  const std::string weights = bf16 || bfloat16 ? "bf16" : fp16 || float16 ? "fp16" : "fp32";
  const std::string weights_key = bf16 ? "bf16" : bfloat16 ? "bfloat16" : fp16 ? "fp16" : float16 ? "float16" : "bf16";
  set("--weights-dtype", weights, weights_key, weights_key == "bf16" && !has("bf16"));
  // resolve_dtype again: load_in_8bit without bf16 loads the model in float16, as float16: true
  // does; without fp16: true it trains without autocast: float16 norms and embeddings beside the
  // 8-bit layers' outputs, which accumbench does not model (--kbit-prep none needs fp16 autocast).
  if (on("load_in_8bit") && !bf16 && !bfloat16 && !fp16) {
    config.refusals.push_back(
        {path + " sets load_in_8bit without bf16 or fp16, so axolotl loads the model in float16 and trains it without "
                "autocast, which accumbench does not model; set bf16: true (or fp16: true), or give --precision",
         {"--precision"}});
  }

  bool checkpointing = false;
  if (has("gradient_checkpointing")) {
    if (root["gradient_checkpointing"].IsScalar() && root["gradient_checkpointing"].Scalar().rfind("offload", 0) == 0) {
      refuse("gradient_checkpointing", "offloads the checkpoints", "use true or false");
    }
    checkpointing = boolean("gradient_checkpointing");
  }
  set("--activation-checkpointing", checkpointing ? "blocks" : "none", "gradient_checkpointing",
      !has("gradient_checkpointing"));
  reentrant_checkpointing(checkpointing, /*reentrant_by_default=*/true,
                          "axolotl's default: normalize_config sets it where gradient_checkpointing_kwargs is left out");

  // axolotl's sample packing keeps samples whole, attention restarting at each: bfd.
  const bool packing = has("sample_packing") && boolean("sample_packing");
  // batch_flattening (DataCollatorWithFlattening, core/builders/causal.py): each micro-batch as one
  // row without padding. Its "auto" turns it on under a varlen attention kernel without
  // sample_packing above one sample per micro-batch (check_batch_flattening_fa,
  // utils/schemas/validation.py at 067b021).
  if (has("batch_flattening")) {
    const bool stated_auto = root["batch_flattening"].IsScalar() && root["batch_flattening"].Scalar() == "auto";
    const bool varlen = (has("attn_implementation") && word("attn_implementation").find("flash") != std::string::npos) ||
                        on("flash_attention");
    if (stated_auto ? varlen && !packing && micro > 1 : on("batch_flattening"))
      refused.emplace_back("batch_flattening", "flattens each micro-batch into one row without padding");
  }
  set("--packing", packing ? "bfd" : "none", "sample_packing");
  // The collator (core/builders/causal.py): pad_to_sequence_len true pads every batch to
  // pad_to_multiple_of (64 by default) × ceil(sequence_len / it), which is T only when T is such
  // a multiple; unset, each batch to its longest sample rounded up to that multiple (past T too);
  // false, to the longest sample.
  const int64_t multiple = has("pad_to_multiple_of") ? whole("pad_to_multiple_of") : 64;
  // hint_sample_packing_padding (utils/schemas/validation.py) sets it true with sample_packing.
  const bool to_sequence_len =
      has("pad_to_sequence_len") ? boolean("pad_to_sequence_len") : packing;
  if (to_sequence_len) {
    const int64_t rounded = (length + multiple - 1) / multiple * multiple;
    if (rounded != length) {
      throw UserError(path + ": pad_to_sequence_len pads every batch to " + std::to_string(rounded) +
                      " (sequence_len " + std::to_string(length) + " rounded up to a multiple of pad_to_multiple_of " +
                      std::to_string(multiple) + (has("pad_to_multiple_of") ? "" : ", its default") +
                      "), and accumbench runs no row longer than --seq-len; set sequence_len to " +
                      std::to_string(rounded) + ", or pad_to_multiple_of to " + std::to_string(length));
    }
    set("--padding", "max", has("pad_to_sequence_len") ? "pad_to_sequence_len" : "pad_to_sequence_len (true with sample_packing)",
        !has("pad_to_sequence_len"));
  } else if (has("pad_to_sequence_len")) {
    set("--padding", "longest", "pad_to_sequence_len");
  } else {
    // Past T when the multiple is: refused with its fix where the samples are known (options.cpp).
    set("--padding", multiple == length ? "max" : "multiple:" + std::to_string(multiple), "pad_to_sequence_len",
        true);
  }
  if (has("group_by_length") && boolean("group_by_length")) set("--group-by-length", "", "group_by_length");
  if (has("excess_length_strategy")) {
    config.excess_length_strategy = word("excess_length_strategy");
    if (config.excess_length_strategy != "drop" && config.excess_length_strategy != "truncate" &&
        config.excess_length_strategy != "raise")
      bad_value("excess_length_strategy", "drop, truncate or raise");
  }
  // axolotl's prompt strategies label the prompt too under train_on_inputs (its prepared rows'
  // labels hold the choice, taken as they are); a lengths file's completion_mask is then left out.
  if (has("train_on_inputs") && boolean("train_on_inputs")) set("--completion-only-loss", "false", "train_on_inputs");

  if (has("adapter")) {
    const std::string adapter = "adapter: " + word("adapter");
    if (!has("lora_r")) throw UserError(path + " sets " + adapter + " without lora_r; add lora_r");
    set("--lora-rank", std::to_string(whole("lora_r")), "lora_r");
    if (!has("lora_alpha")) throw UserError(path + " sets " + adapter + " without lora_alpha; add lora_alpha");
    // axolotl's schema types lora_alpha as an int (schemas/peft.py at 067b021): 16.0 passes, 12.5 not.
    const double alpha = number("lora_alpha");
    if (alpha != std::floor(alpha)) {
      throw UserError(where("lora_alpha") + " is " + num(alpha) + ", which axolotl's schema refuses (an integer); "
                      "write a whole number");
    }
    set("--lora-alpha", num(alpha), "lora_alpha");
    set("--lora-dropout", num(has("lora_dropout") ? number("lora_dropout") : 0.0), "lora_dropout");
    if (has("peft_use_rslora") && boolean("peft_use_rslora")) set("--lora-rslora", "true", "peft_use_rslora");
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
    for (const char* key : {"lora_r", "lora_alpha", "lora_dropout", "lora_target_linear", "lora_target_modules", "peft_use_rslora"}) {
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
  tf32(/*auto_on=*/true);
  optimizer("optimizer");
  if (!has("learning_rate")) {
    config.remarks.push_back({"leaves out learning_rate, which axolotl requires; accumbench's --lr " +
                                  num(OptimizerOptions{}.lr) + " stands (it changes verify's update, not a step's time)",
                              {"--lr"}});
  }
  hyperparameters();
}

}  // namespace accumbench::trainer_config_detail
