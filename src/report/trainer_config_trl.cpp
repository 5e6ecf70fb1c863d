// TRL's keys read as accumbench options (trainer_config_reader.hpp, trainer_config.hpp). The keys
// and their defaults, from the projects' own sources:
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

#include "report/trainer_config_reader.hpp"

namespace accumbench::trainer_config_detail {

const std::set<std::string>& trl_unused_keys() {
  static const std::set<std::string> keys = {
      // trl ScriptArguments
      "dataset_name", "dataset_config", "dataset_train_split", "dataset_test_split", "dataset_streaming",
      "dataset_mixture", "datasets", "gradient_checkpointing_use_reentrant", "ignore_bias_buffers", "env",
      // SFTConfig
      "model_init_kwargs", "trust_remote_code", "router_aux_loss_coef", "chat_template_path", "dataset_text_field",
      "dataset_kwargs", "dataset_num_proc", "eos_token", "pad_token", "truncation_mode", "shuffle_dataset",
      "eval_packing",
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
      "hub_private_repo", "hub_always_push", "resume_from_checkpoint",
      "include_num_input_tokens_seen", "include_tokens_per_second", "neftune_noise_alpha",
      "torch_empty_cache_steps", "average_tokens_across_devices", "half_precision_backend", "fp16_opt_level",
      "skip_memory_metrics", "restore_callback_states_from_checkpoint", "past_index", "project",
      "trackio_space_id", "batch_eval_metrics", "eval_do_concat_batches", "optim_args", "optim_target_modules",
      "length_column_name", "ddp_static_graph", "jit_mode_eval", "debug", "accelerator_config", "include_for_metrics",
      "include_inputs_for_metrics", "eval_use_gather_object", "hub_revision", "tpu_num_cores", "tpu_metrics_debug",
      "liger_kernel_config", "use_mps_device", "mp_parameters", "ray_scope", "parallelism_config",
      "use_legacy_prediction_loop", "split_batches", "dispatch_batches", "save_strategy",
      // accelerate launch's own keys, which trl sft passes on to it
      "num_machines", "machine_rank", "main_process_ip", "main_process_port", "same_network", "rdzv_backend",
      "config_file", "gpu_ids", "quiet", "cpu", "multi_gpu",
      // accelerate's own precision: the Trainer's bf16/fp16 set it for the run (TrainingArguments
      // exports ACCELERATE_MIXED_PRECISION from them)
      "mixed_precision"};
  return keys;
}

// The first key of the file that only TRL before 1.7.0 reads (max_seq_length: up to 0.19;
// torch_dtype: up to 0.26; packing_strategy ffd: 0.19), "" when none.
std::string Reader::legacy_trl_key() {
  if (has("max_seq_length")) return "max_seq_length";
  if (has("torch_dtype")) return "torch_dtype";
  if (has("packing_strategy") && word("packing_strategy") == "ffd") return "packing_strategy: ffd";
  return "";
}

void Reader::read_trl(int world_size) {
  std::string weights = "fp32", precision_word;  // as the file sets them (ModelConfig's dtype default)
  // An explicit null is no key left out in TRL: TrlParser.set_defaults_with_config (trl/scripts/
  // utils.py at f2cd577) makes each of the file's values its argparse default, None included, so
  // the dataclass gets None where it has a default of its own. For these keys the run then stops
  // (the Trainer multiplies the batch sizes, torch's AdamW and PEFT compare the hyperparameters,
  // set_seed hands None to torch.manual_seed, and a key handed on to accelerate launch arrives as
  // `--num_processes None`); the LoRA keys count only under use_peft (ModelConfig holds None
  // without using it otherwise).
  std::vector<std::string> nulls;
  const bool peft = has("use_peft") && boolean("use_peft");
  for (const char* key : {"per_device_train_batch_size", "gradient_accumulation_steps", "learning_rate", "weight_decay",
                          "adam_beta1", "adam_beta2", "adam_epsilon", "seed", "lora_r", "lora_alpha", "lora_dropout",
                          "num_processes"}) {
    const bool lora = std::string(key).rfind("lora_", 0) == 0;
    if (root[key].IsDefined() && root[key].IsNull() && (peft || !lora)) nulls.push_back(key);
  }
  if (!nulls.empty()) {
    std::string listed;
    for (size_t i = 0; i < nulls.size(); ++i)
      listed += std::string(i == 0 ? "" : i + 1 == nulls.size() ? " and " : ", ") + nulls[i];
    const bool one = nulls.size() == 1;
    throw UserError(path + " sets " + listed + " to null, which TRL passes on as None (not as " +
                    (one ? "its default" : "their defaults") + "), and the training stops on it; give " +
                    (one ? "a value" : "each a value") + " or leave " + (one ? "the key" : "the keys") + " out");
  }
  model("model_name_or_path");
  refuse_if_on("use_liger_kernel", "swaps in Liger's fused kernels");
  refuse_if_on("torch_compile", "compiles the model");
  refuse_if_on("activation_offloading", "moves activations to the CPU");
  refuse_if_on("deepspeed", "shards the training state with DeepSpeed");
  refuse_if_on("fsdp", "shards the training state with FSDP");
  refuse_if_on("fsdp_config", "shards the training state with FSDP");
  refuse_if_on("auto_find_batch_size", "changes the per-device batch while training");
  refuse_if_on("use_dora", "trains DoRA adapters");
  refuse_if_on("lora_modules_to_save", "trains whole modules beside the adapters");
  refuse_if_on("lora_target_parameters", "puts adapters on parameters rather than modules");
  // GRPO's and RLOO's configs (trl/trainer/grpo_config.py): generation and rewards, not SFT's step.
  refuse_if_on("reward_funcs", "belongs to GRPO or RLOO (generation and rewards), not to SFT");
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
    else if (dtype == "auto") refuse(dtype_key, "leaves the weights' dtype to the checkpoint", "write float32, bfloat16 or float16");
    else bad_value(dtype_key, "one of ModelConfig's choices that accumbench models: float32, bfloat16 or float16");
    weights = dtype == "bfloat16" ? "bf16" : dtype == "float16" ? "fp16" : "fp32";
  }
  precision_word = bf16 ? "bf16" : fp16 ? "fp16" : "fp32";
  // A null is None, not SFTConfig's default true (see the nulls above): the Trainer's `if
  // args.gradient_checkpointing:` leaves checkpointing off.
  const bool checkpointing_null = root["gradient_checkpointing"].IsDefined() && root["gradient_checkpointing"].IsNull();
  const bool checkpointing = has("gradient_checkpointing") ? boolean("gradient_checkpointing") : !checkpointing_null;
  set("--activation-checkpointing", checkpointing ? "blocks" : "none", "gradient_checkpointing",
      !has("gradient_checkpointing") && !checkpointing_null);
  if (checkpointing_null) {
    config.remarks.push_back({"sets gradient_checkpointing to null, which TRL passes on as None, not as SFTConfig's "
                              "default true, so the Trainer does not checkpoint: --activation-checkpointing none; "
                              "write true or false to say which",
                              {"--activation-checkpointing"}});
  }
  reentrant_checkpointing(checkpointing, /*reentrant_by_default=*/false, "");

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
  const bool grouped = has("group_by_length") && boolean("group_by_length");
  if (grouped) set("--group-by-length", "", "group_by_length");
  // transformers 5 replaced group_by_length with train_sampling_strategy: random (the default),
  // sequential or group_by_length. Each transformers reads one of the two keys (trl sft drops the
  // other, --emit trl writes both): a file whose two disagree is refused.
  if (has("train_sampling_strategy")) {
    const std::string strategy = word("train_sampling_strategy");
    if (has("group_by_length") && grouped != (strategy == "group_by_length")) {
      throw UserError(path + " sets group_by_length: " + (grouped ? "true" : "false") +
                      " (transformers 4) and train_sampling_strategy: " + strategy +
                      " (transformers 5), which disagree; keep the key your transformers reads");
    }
    if (strategy == "group_by_length") {
      if (!grouped) set("--group-by-length", "", "train_sampling_strategy");
    } else if (strategy == "sequential") {
      config.remarks.push_back(
          {"train_sampling_strategy: sequential visits the samples in the dataset's order; accumbench visits them in "
           "a seeded random order (random), which groups other samples into each micro-batch when lengths differ",
           {"--group-by-length"}});
    } else if (strategy != "random") {
      bad_value("train_sampling_strategy", "random, sequential or group_by_length");
    }
  }
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

  // Which labels count (sft_trainer.py at f2cd577, _prepare_dataset's build_labels): a
  // completion_mask only under completion_only_loss (null, the default: when the dataset is
  // prompt-completion, which is what gives its rows one); assistant_masks whenever the rows have
  // them (assistant_only_loss: true is what makes them). The rows are the lengths file's.
  if (has("completion_only_loss")) {
    set("--completion-only-loss", boolean("completion_only_loss") ? "true" : "false", "completion_only_loss");
  }
  if (has("assistant_only_loss") && boolean("assistant_only_loss")) {
    config.remarks.push_back(
        {"sets assistant_only_loss: true, so TRL trains only the assistant tokens its assistant_masks mark; accumbench "
         "counts the labels a lengths file's rows keep: give --lengths the JSONL of your prepared dataset (its "
         "labels or assistant_masks per row), or every label counts",
         {"--lengths"}});
  }

  // LoRA (ModelConfig, with trl sft's --use_peft).
  if (has("use_peft") && boolean("use_peft")) {
    set("--lora-rank", std::to_string(has("lora_r") ? whole("lora_r") : 16), "lora_r");
    set("--lora-alpha", num(has("lora_alpha") ? number("lora_alpha") : 32.0), "lora_alpha");
    set("--lora-dropout", num(has("lora_dropout") ? number("lora_dropout") : 0.05), "lora_dropout");
    if (has("use_rslora") && boolean("use_rslora")) set("--lora-rslora", "true", "use_rslora");
    if (has("lora_target_modules")) lora_targets("lora_target_modules");
    else config.lora_default_targets = true;
  } else {
    for (const char* key : {"lora_r", "lora_alpha", "lora_dropout", "lora_target_modules", "use_rslora"}) {
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
  // transformers' default optimizer depends on the user's PyTorch, which the file does not say.
  if (!has("optim")) {
    config.remarks.push_back(
        {"leaves out optim, whose default in transformers is adamw_torch_fused from PyTorch 2.8 (accumbench's adamw, "
         "what runs here) and adamw_torch before it (on CUDA --optimizer adamw-foreach: a copy of what trains during "
         "the step); sweep --optimizer adamw,adamw-foreach measures both",
         {"--optimizer"}});
  }
  hyperparameters(kTrlLearningRate);
}

}  // namespace accumbench::trainer_config_detail
