// The settings a split stands for in the user's own trainer: transformers' TrainingArguments and
// TRL's SFTConfig (with PEFT's LoRA keys of TRL's ModelConfig), axolotl's YAML keys, and
// accumbench's own flags. Pure: no LibTorch, no files read (report.hpp, "Trainer settings").
//
// Key names, from the projects' own sources:
// - transformers TrainingArguments: per_device_train_batch_size, gradient_accumulation_steps,
//   gradient_checkpointing, bf16, fp16, group_by_length.
// - TRL SFTConfig: max_length, packing, packing_strategy ("bfd", the default, or "wrapped"),
//   padding_free, pad_to_multiple_of, loss_type ("chunked_nll", the default since TRL 1.7.0, or
//   "nll"; only from plan --framework hf-trl). SFTConfig turns bf16 on when neither bf16 nor fp16
//   is given, and gradient_checkpointing on by default, so both are always written out.
// - TRL ModelConfig (`trl sft --use_peft`): use_peft, lora_r, lora_alpha, lora_dropout,
//   lora_target_modules (a one-element list is read as that string, which PEFT takes for a pattern
//   over the whole module path: [all-linear] is PEFT's "all-linear", one module name is written
//   as a pattern, '.*\.c_attn', since [c_attn] would match nothing).
// - axolotl: micro_batch_size, gradient_accumulation_steps, sequence_len, sample_packing,
//   pad_to_sequence_len, group_by_length, gradient_checkpointing, bf16, fp16, adapter, lora_r,
//   lora_alpha, lora_dropout, lora_target_linear, lora_target_modules.
// - QLoRA (--base-quant), TRL ModelConfig's keys, which trl.get_quantization_config turns into
//   transformers' BitsAndBytesConfig: load_in_4bit, bnb_4bit_quant_type, use_bnb_nested_quant
//   (its bnb_4bit_use_double_quant), load_in_8bit; TRL passes its dtype as
//   bnb_4bit_compute_dtype. axolotl: adapter: qlora with load_in_4bit, or load_in_8bit.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "accumbench/error.hpp"
#include "accumbench/lengths.hpp"
#include "accumbench/model_config.hpp"
#include "accumbench/report.hpp"
#include "accumbench/units.hpp"

namespace accumbench {

namespace {

std::string yes(bool value) { return value ? "true" : "false"; }

// TF32 changes fp32 matmuls on CUDA only.
bool tf32_acts(const TrainerSettings& s) { return s.tf32 && s.cuda && s.precision == Precision::kFp32; }

// The shortest text that reads back to the same double, as the readers' num() writes it: a stream's
// six significant digits would turn --lora-dropout 0.123456789 into another dropout.
std::string number(double value) { return text::format_number(value); }

std::string yaml_list(const std::vector<std::string>& items) {
  std::string text = "[";
  for (size_t i = 0; i < items.size(); ++i) text += (i ? ", " : "") + items[i];
  return text + "]";
}

// The length TRL pads a micro-batch to, given as pad_to_multiple_of: N for --padding multiple:N,
// T for --padding max (the longest sample rounded up to a multiple of T is T), none for longest
// (TRL's collator pads to the longest sample already). With fixed lengths every sample is T long
// and padding changes nothing, so none is written.
int64_t pad_to_multiple_of(const TrainerSettings& s) {
  if (!s.lengths_vary || s.packing != Packing::kNone) return 0;
  if (s.padding == Padding::kMultiple) return s.pad_multiple;
  if (s.padding == Padding::kMax) return s.max_length;
  return 0;
}

// TRL's lora_target_modules: a list, except that one name becomes the pattern PEFT matches against
// every module's whole path ("c_attn" alone matches none of them).
std::string trl_target_modules(const std::vector<std::string>& modules) {
  if (modules.size() != 1 || modules.front() == "all-linear") return yaml_list(modules);
  std::string pattern = "'.*\\.";
  for (const char c : modules.front()) pattern += c == '.' ? std::string("\\.") : std::string(1, c);
  return pattern + "'";
}

double lora_alpha(const TrainerSettings& s) { return s.lora_alpha > 0 ? s.lora_alpha : 2.0 * s.lora_r; }

}  // namespace

SettingsFormat settings_format_from_string(const std::string& text) {
  if (text == "trl") return SettingsFormat::kTrl;
  if (text == "axolotl") return SettingsFormat::kAxolotl;
  if (text == "args") return SettingsFormat::kArgs;
  throw UserError("unknown --emit " + text::quoted(text) + "; use trl, axolotl or args");
}

std::vector<std::string> peft_target_modules(Architecture arch, const std::vector<std::string>& block_linears,
                                             bool all_linear) {
  if (all_linear) return {"all-linear"};
  std::vector<std::string> names;
  bool attn_proj = false, mlp_proj = false;
  for (const std::string& name : block_linears) {
    if (arch != Architecture::kGpt2) {
      names.push_back(name + "_proj");  // q -> q_proj: the Hugging Face module names
    } else if (name == "attn_c_proj") {
      attn_proj = true;
    } else if (name == "mlp_c_proj") {
      mlp_proj = true;
    } else {
      names.push_back(name);  // c_attn, c_fc
    }
  }
  // PEFT matches a target against the end of the module path: "c_proj" is both GPT-2 projections.
  if (attn_proj && mlp_proj) names.push_back("c_proj");
  else if (attn_proj) names.push_back("attn.c_proj");
  else if (mlp_proj) names.push_back("mlp.c_proj");
  return names;
}

TrainerSettings trainer_settings(const SplitConfig& split, const WorkloadOptions& w,
                                 const std::vector<std::string>& target_modules) {
  TrainerSettings s;
  s.model = trainer_model_name(w.model);
  if (s.model.empty()) {
    const bool preset = w.model.hf_config.empty() &&
                        std::any_of(presets().begin(), presets().end(), [&](const ModelConfig& p) { return p.name == w.model.preset; });
    if (!preset) s.model_spec = w.model.hf_config.empty() ? w.model.preset : w.model.hf_config;
  }
  s.per_device_train_batch_size = split.micro_batch;
  s.gradient_accumulation_steps = split.accum_steps;
  s.world_size = split.world_size;
  s.batch = w.batch;
  s.gradient_checkpointing = split.activation_checkpointing == Checkpointing::kBlocks;
  s.precision = split.precision;
  s.weights_dtype = split.weights_dtype;
  s.max_length = w.seq_len;
  s.lora_r = w.lora.rank;
  s.lora_alpha = w.lora.alpha;
  s.lora_dropout = w.lora.dropout;
  s.lora_rslora = w.lora.rslora;
  s.lora_targets = w.lora.targets;
  s.base_quant = w.lora.base_quant;
  s.double_quant = w.lora.double_quant;
  s.kbit_upcast = w.lora.kbit_upcast;
  s.adapter_dtype = split.adapter_dtype;
  s.target_modules = target_modules;
  s.lengths_vary = w.data.lengths != LengthMode::kFixed || w.data.eos_id >= 0;
  s.real_samples = real_samples(w.data);
  // The split's padding where --padding lists several, else the workload's own.
  const PaddingChoice padding = grid_paddings(w).size() > 1 ? split.padding : padding_of(w.data);
  s.padding = padding.padding;
  s.pad_multiple = padding.multiple;
  // The split's packing where --packing lists several, else the workload's own.
  s.packing_listed = grid_packings(w).size() > 1;
  s.packing = s.packing_listed ? split.packing : w.data.packing;
  // The split's grouping where --group-by-length lists both, else the workload's own.
  s.grouping_listed = grid_groupings(w).size() > 1;
  s.group_by_length = s.grouping_listed ? split.group_by_length : w.data.group_by_length;
  s.optimizer = split.optimizer;
  s.optimizer_in_backward = split.optimizer_in_backward;
  s.chunked_loss = split.chunked_loss;
  s.cuda_graphs = split.cuda_graphs;
  s.tf32 = w.tf32;
  s.cuda = names_cuda(w.device);
  s.lr = w.optimizer.lr;
  s.weight_decay = w.optimizer.weight_decay;
  s.beta1 = w.optimizer.beta1;
  s.beta2 = w.optimizer.beta2;
  s.eps = w.optimizer.eps;
  // The split's job's norm: the workload's own, or where --max-grad-norm lists several, the split's.
  s.max_grad_norm = grid_max_grad_norms(w).size() > 1 ? split.max_grad_norm : w.optimizer.max_grad_norm;
  s.completion_only_loss = w.data.completion_only_loss;
  s.completion_mask_applied = w.data.completion_only_loss && w.data.completion_mask_applied;
  return s;
}

TrainerSettings trainer_settings(const MemoryPlan& plan, const WorkloadOptions& w,
                                 const std::vector<std::string>& target_modules) {
  TrainerSettings s = trainer_settings(plan.split, w, target_modules);
  s.weights_dtype = plan.options.weights_dtype;  // what the plan planned (a change may be to it)
  s.adapter_dtype = plan.options.lora.adapter_dtype;
  if (plan.options.framework == PlanFramework::kHfTrl) s.loss_type = to_string(plan.options.trl_loss);
  // plan takes no learning rate, decay, betas or epsilon (its clipping norm stays: it plans the norms)
  s.lr = s.weight_decay = s.beta1 = s.beta2 = s.eps = -1;
  return s;
}

std::vector<std::pair<std::string, std::string>> trl_settings(const TrainerSettings& s) {
  std::vector<std::pair<std::string, std::string>> keys = {
      {"per_device_train_batch_size", std::to_string(s.per_device_train_batch_size)},
      {"gradient_accumulation_steps", std::to_string(s.gradient_accumulation_steps)},
      {"gradient_checkpointing", yes(s.gradient_checkpointing)},
      {"bf16", yes(s.precision == Precision::kBf16)},
      {"fp16", yes(s.precision == Precision::kFp16)},
      {"max_length", std::to_string(s.max_length)},
      {"packing", yes(s.packing != Packing::kNone)},
  };
  if (s.packing != Packing::kNone) keys.push_back({"packing_strategy", to_string(s.packing)});
  // The processes, which trl sft hands to accelerate launch: the file then trains the measured
  // batch, and reads back as it (helper-96: without it, a 2-rank split read back as half the batch).
  if (s.world_size > 1) keys.push_back({"num_processes", std::to_string(s.world_size)});
  // TRL's bfd packing runs padding-free (every row's documents flattened, positions restarting),
  // which keeps documents apart only with flash attention (SFTTrainer warns of cross-contamination
  // under another kernel); attn_implementation is ModelConfig's, read from the same file.
  if (s.packing == Packing::kBfd) {
    keys.push_back({"padding_free", "true"});
    keys.push_back({"attn_implementation", "flash_attention_2"});
  }
  if (const int64_t multiple = pad_to_multiple_of(s)) keys.push_back({"pad_to_multiple_of", std::to_string(multiple)});
  // Grouped, or random where --group-by-length lists both (the split's order, said either way).
  if (s.group_by_length || s.grouping_listed) keys.push_back({"group_by_length", yes(s.group_by_length)});
  if (!s.completion_only_loss) keys.push_back({"completion_only_loss", "false"});
  // The mask counted: TRL's null would apply it to prompt-completion data it tokenizes itself and
  // leave it unapplied on rows tokenized before (sft_trainer.py: null is true only where the first
  // row has prompt and completion columns); true applies it to both.
  if (s.completion_mask_applied) keys.push_back({"completion_only_loss", "true"});
  // What was measured: TRL's own loss where the plan modelled it, else the engine's (the chunked
  // head is TRL's chunked_nll; the whole logits, nll, which TRL 1.7+ no longer runs by default).
  keys.push_back({"loss_type", !s.loss_type.empty() ? s.loss_type : s.chunked_loss ? "chunked_nll" : "nll"});
  // Nothing for adamw: transformers' default, adamw_torch_fused from PyTorch 2.8 (adamw_torch before
  // it, which is --optimizer adamw-foreach on CUDA); the pasted file names it (settings_lines).
  if (s.optimizer != OptimizerKind::kAdamW) keys.push_back({"optim", hf_optim_name(s.optimizer)});
  // Left out, TrainingArguments leaves TF32 off: an fp32 CUDA split measured with it on says so.
  if (tf32_acts(s)) keys.push_back({"tf32", "true"});
  // ModelConfig's dtype (trl sft reads it from the same file): the weights as they were measured.
  if (s.weights_dtype != Precision::kFp32) {
    keys.push_back({"dtype", s.weights_dtype == Precision::kBf16 ? "bfloat16" : "float16"});
  }
  if (s.lora_r > 0) {
    keys.push_back({"use_peft", "true"});
    keys.push_back({"lora_r", std::to_string(s.lora_r)});
    keys.push_back({"lora_alpha", number(lora_alpha(s))});
    keys.push_back({"lora_dropout", number(s.lora_dropout)});
    keys.push_back({"lora_target_modules", trl_target_modules(s.target_modules)});
    if (s.lora_rslora) keys.push_back({"use_rslora", "true"});
  }
  if (s.base_quant == BaseQuant::kNf4) {
    keys.push_back({"load_in_4bit", "true"});
    keys.push_back({"bnb_4bit_quant_type", "nf4"});
    keys.push_back({"use_bnb_nested_quant", yes(s.double_quant)});  // bnb_4bit_use_double_quant
  } else if (s.base_quant == BaseQuant::kInt8) {
    keys.push_back({"load_in_8bit", "true"});
  }
  return keys;
}

std::vector<std::string> untranslated_knobs(const TrainerSettings& s) {
  std::vector<std::string> notes;
  if (s.optimizer_in_backward) notes.push_back("optimizer-in-backward (oib) has no Trainer or axolotl setting");
  if (s.chunked_loss) {
    notes.push_back("the chunked cross-entropy (chunked-ce) is TRL's loss_type: chunked_nll and has no axolotl "
                    "setting; use_liger_kernel's fused linear cross-entropy also never holds the whole logits");
  }
  if (s.cuda_graphs) notes.push_back("CUDA graphs have no Trainer or axolotl setting");
  // A full fine-tune of fp16 weights under fp16 autocast trains fp16 gradients, which torch's
  // GradScaler refuses to unscale (torch/amp/grad_scaler.py: "Attempting to unscale FP16 gradients.");
  // the Trainer's fp16 steps through it, so the job does not run there (accumbench's own scaler
  // unscales them).
  if (s.lora_r == 0 && s.weights_dtype == Precision::kFp16 && s.precision == Precision::kFp16) {
    notes.push_back("the Trainer cannot run this split: fp16: true steps through torch's GradScaler, which refuses to "
                    "unscale the fp16 gradients of fp16 weights (\"Attempting to unscale FP16 gradients\"); its fp16 "
                    "jobs keep fp32 weights (--weights-dtype fp32) or train adapters (--lora-rank)");
  }
  if (s.lora_r > 0 && lora_alpha(s) != std::floor(lora_alpha(s))) {
    notes.push_back("lora_alpha " + number(lora_alpha(s)) + " is no whole number, which TRL's ModelConfig and "
                    "axolotl's schema refuse (an int); alpha scales the update, not its time or memory");
  }
  if (s.base_quant != BaseQuant::kNone) {
    notes.push_back("the quantised base's time is approximate: accumbench dequantises with LibTorch ops, not "
                    "bitsandbytes' kernels");
  }
  if (s.base_quant != BaseQuant::kNone && s.kbit_upcast) {
    notes.push_back("measured with PEFT's prepare_model_for_kbit_training (the other parameters in fp32); TRL 1.x and "
                    "axolotl keep them in the weights' dtype, which --kbit-prep none measures");
  }
  if (s.optimizer == OptimizerKind::kAdamWForeach && !s.cuda) {
    notes.push_back("adamw-foreach ran torch's foreach kernels here; adamw_torch runs them on CUDA only and steps one "
                    "tensor at a time on the CPU (accumbench's adamw, a smaller optimizer step)");
  }
  return notes;
}

namespace {

// --adapter-dtype against what each trainer does with it: TRL 1.x casts a quantised model's
// adapters to bf16 and has no key for it otherwise; axolotl's peft_autocast_adapter_dtype: false
// keeps them in a 16-bit base's dtype, and over a quantised base PEFT keeps them in fp32.
std::vector<std::string> adapter_dtype_notes(const TrainerSettings& s, SettingsFormat format) {
  if (s.lora_r == 0) return {};
  const bool bf16 = s.adapter_dtype == Precision::kBf16, quantised = s.base_quant != BaseQuant::kNone;
  if (format == SettingsFormat::kTrl) {
    if (quantised && !bf16)
      return {"TRL 1.x casts a quantised model's adapters to bf16: this split has fp32 adapters "
              "(--adapter-dtype bf16 is TRL's)"};
    if (!quantised && bf16) return {"bf16 adapters over an unquantised base have no TRL key (TRL keeps PEFT's fp32)"};
  } else if (format == SettingsFormat::kAxolotl && bf16 && (quantised || s.weights_dtype != Precision::kBf16)) {
    return {"bf16 adapters have no axolotl key here: peft_autocast_adapter_dtype: false keeps them in the base's dtype "
            "only over bf16 weights (over a quantised base PEFT keeps fp32)"};
  }
  return {};
}

// The run's learning rate, weight decay and Adam constants where the trainer's defaults differ: a
// comment, not keys, since they change the update, not the time, and the user's own file has its
// own (TRL's SFTConfig: learning_rate 2e-5; TrainingArguments' and axolotl's weight_decay 0;
// axolotl requires learning_rate). Plan's settings have no learning rate or decay. A clipping norm
// is a key (clip_key): clipping is a pass over the gradients in every step.
std::string hyperparameter_note(const TrainerSettings& s, SettingsFormat format) {
  // Said when chosen: neither accumbench's default (which no one picked) nor the trainer's.
  const OptimizerOptions ours;
  const std::string trainer = format == SettingsFormat::kTrl ? "TRL" : "axolotl";
  std::vector<std::string> parts;
  if (format == SettingsFormat::kTrl && s.lr >= 0 && s.lr != kTrlLearningRate && s.lr != ours.lr) {
    parts.push_back("learning_rate " + text::format_number(s.lr) + " (" + trainer +
                    "'s default: " + text::format_number(kTrlLearningRate) + ")");
  }
  // axolotl has no default learning rate: its config must give one.
  if (format == SettingsFormat::kAxolotl && s.lr >= 0 && s.lr != ours.lr) {
    parts.push_back("learning_rate " + text::format_number(s.lr) + " (axolotl requires the key)");
  }
  // TrainingArguments' adam_beta1, adam_beta2 and adam_epsilon (axolotl's keys too) default to ours.
  const std::pair<const char*, std::pair<double, double>> adam[] = {
      {"adam_beta1", {s.beta1, ours.beta1}}, {"adam_beta2", {s.beta2, ours.beta2}}, {"adam_epsilon", {s.eps, ours.eps}}};
  for (const auto& [key, values] : adam) {
    if (values.first >= 0 && values.first != values.second)
      parts.push_back(std::string(key) + " " + text::format_number(values.first) + " (" + trainer +
                      "'s default: " + text::format_number(values.second) + ")");
  }
  if (s.weight_decay >= 0 && s.weight_decay != 0 && s.weight_decay != ours.weight_decay)
    parts.push_back("weight_decay " + text::format_number(s.weight_decay) + " (" + trainer + "'s default: 0)");
  if (parts.empty()) return "";
  return "this run's " + text::and_list(parts) + (parts.size() > 1 ? " change" : " changes") + " the update, not the time";
}

}  // namespace

// The run's clipping norm as a key where it clips at another norm than the trainers' default
// (TrainingArguments' max_grad_norm 1; axolotl's unset leaves it there): a threshold chosen for the
// run, the same pass over the gradients. A run that did not clip (accumbench's default) gets a
// comment instead (settings_lines): the user's own file keeps its clipping.
namespace {
std::string clip_key(const TrainerSettings& s) {
  if (s.max_grad_norm > 0 && s.max_grad_norm != kTrainerMaxGradNorm)
    return "max_grad_norm: " + text::format_number(s.max_grad_norm);
  return "";
}

// The model's key, which --trl-config / --axolotl-config read back (a preset's Hub id as that
// preset). accumbench's own small presets are no model to train: no key. A --hf-config file that
// is not a model directory's config.json names nothing from_pretrained loads: said instead.
void model_lines(const TrainerSettings& s, const std::string& key, std::vector<std::string>& lines) {
  if (!s.model.empty()) {
    // A directory's path may hold what YAML reads otherwise (": ", "#", a leading quote): single-quoted then.
    const bool plain = std::all_of(s.model.begin(), s.model.end(), [](unsigned char c) {
      return std::isalnum(c) || std::strchr("/._-", c) != nullptr;
    });
    std::string quoted = "'";
    for (const char c : s.model) quoted += c == '\'' ? std::string("''") : std::string(1, c);
    lines.push_back(key + ": " + (plain ? s.model : quoted + "'"));
  }
  else if (!s.model_spec.empty())
    lines.push_back("# " + key + ": " + text::escaped_controls(s.model_spec) +
                    " is a config file, not a model directory or Hub id: write the model it describes");
}

}  // namespace

std::vector<std::string> settings_lines(const TrainerSettings& s, SettingsFormat format) {
  std::vector<std::string> lines;
  const std::string per_rank =
      s.world_size > 1 ? "per rank, " + std::to_string(s.world_size) + " ranks" : "one process";
  if (format == SettingsFormat::kTrl) {
    lines.push_back("# TRL SFTConfig, for trl sft --config FILE.yaml (" + per_rank + "; each key is also a --KEY flag)");
    model_lines(s, "model_name_or_path", lines);
    for (const auto& [key, value] : trl_settings(s)) {
      // transformers 5 replaced group_by_length by train_sampling_strategy, and trl sft hands a
      // config key no parser of its own knows to accelerate launch, which stops on it
      // (trl/cli/commands/training.py): one key, transformers 5's, and the other as a comment.
      if (key == "group_by_length") {
        lines.push_back(std::string("train_sampling_strategy: ") + (s.group_by_length ? "group_by_length" : "random"));
        lines.push_back("# with transformers 4 write group_by_length: " + value +
                        " instead (trl sft stops on a key its transformers lacks)");
        continue;
      }
      lines.push_back(key + ": " + value);
      // What needs an Ampere or newer GPU, said where the file asks for it (helper-102: a T4 user
      // pasting these gets a file the card cannot run).
      if (key == "bf16" && value == "true")
        lines.push_back("# bf16 needs an Ampere or newer GPU (compute capability 8.0+); on a T4 or V100 write fp16: true "
                        "instead, and measure it with --precision fp16 on that card");
      if (key == "attn_implementation" && value == "flash_attention_2")
        lines.push_back("# flash_attention_2 needs an Ampere or newer GPU; without it, pack with packing_strategy: wrapped "
                        "(accumbench's --packing wrapped) instead of bfd's padding-free rows");
      // adamw on CUDA is torch's fused kernel, the Trainer's default from PyTorch 2.8 only (before it
      // adamw_torch, the foreach kernels, with a copy of what trains during the step): named in the
      // file to paste. On the CPU nothing: either default steps the tensors in place there.
      if (key == "loss_type" && s.optimizer == OptimizerKind::kAdamW && s.cuda) lines.push_back("optim: adamw_torch_fused");
      // TRL's bfd packing runs padding-free: a split measured with its packed rows padded to T
      // (--padding max) did more work than the file below asks for.
      if (key == "padding_free" && s.padding != Padding::kLongest) {
        lines.push_back(std::string("# measured with every packed row padded to ") +
                        (s.padding == Padding::kMax ? "max_length (--padding max)"
                                                    : "a multiple of " + std::to_string(s.pad_multiple) +
                                                          " (--padding multiple:" + std::to_string(s.pad_multiple) + ")") +
                        "; TRL's bfd packing pads nothing, which accumbench measures with --padding longest");
      }
    }
    if (const std::string clip = clip_key(s); !clip.empty()) lines.push_back(clip);
  } else if (format == SettingsFormat::kAxolotl) {
    lines.push_back("# axolotl (" + per_rank + ")");
    model_lines(s, "base_model", lines);
    lines.push_back("micro_batch_size: " + std::to_string(s.per_device_train_batch_size));
    lines.push_back("gradient_accumulation_steps: " + std::to_string(s.gradient_accumulation_steps));
    lines.push_back("sequence_len: " + std::to_string(s.max_length));
    // axolotl drops a sample longer than sequence_len unless told (handle_long_seq_in_dataset,
    // utils/data/utils.py at 067b021); accumbench cuts it to T, as TRL truncates to max_length.
    if (s.real_samples && s.packing != Packing::kWrapped) lines.push_back("excess_length_strategy: truncate");
    lines.push_back("gradient_checkpointing: " + yes(s.gradient_checkpointing));
    // axolotl's normalize_config checkpoints reentrant unless told: the checkpoint measured is not.
    if (s.gradient_checkpointing) {
      lines.push_back("gradient_checkpointing_kwargs:");
      lines.push_back("  use_reentrant: false");
    }
    lines.push_back("bf16: " + yes(s.precision == Precision::kBf16));
    lines.push_back("fp16: " + yes(s.precision == Precision::kFp16));
    // resolve_dtype loads the model in bfloat16 under bf16 (float16 under fp16), or with
    // bfloat16/float16 alone: 16-bit weights without autocast. fp32 weights under 16-bit autocast
    // have no axolotl setting.
    if (s.weights_dtype == Precision::kBf16 && s.precision != Precision::kBf16) lines.push_back("bfloat16: true");
    if (s.weights_dtype == Precision::kFp16 && s.precision != Precision::kFp16) lines.push_back("float16: true");
    if (s.weights_dtype == Precision::kFp32 && s.precision != Precision::kFp32) {
      // A full fine-tune of fp16 weights under fp16 does not run there (untranslated_knobs says why).
      const bool runs = s.precision != Precision::kFp16 || s.lora_r > 0;
      lines.push_back("# axolotl's " + to_string(s.precision) + ": true also loads the weights in " + to_string(s.precision) +
                      "; these were measured in fp32 (" +
                      (runs ? "--weights-dtype " + to_string(s.precision) + " measures axolotl's job)"
                            : "a full fine-tune of fp16 weights does not run under its GradScaler, which refuses to "
                              "unscale fp16 gradients: axolotl has no setting for this job)"));
    }
    // axolotl's sample packing keeps documents whole, attention restarting at each: bfd's layout.
    lines.push_back("sample_packing: " + yes(s.packing == Packing::kBfd));
    // Packed samples stay apart only under a varlen kernel (check_sample_packing_without_attention).
    if (s.packing == Packing::kBfd) lines.push_back("attn_implementation: flash_attention_2");
    if (s.packing == Packing::kWrapped) lines.push_back("# packing wrapped (documents cut at T) has no axolotl key");
    // axolotl's collator (core/builders/causal.py): pad_to_sequence_len true pads every batch to
    // pad_to_multiple_of (64 unset) × ceil(T / it); unset, each batch to its longest rounded up to
    // pad_to_multiple_of; false, to its longest. Where T is no multiple of 64, pad_to_multiple_of: T
    // keeps a batch padded to T at T.
    const int64_t multiple = pad_to_multiple_of(s);
    const std::string multiple_of_t = "pad_to_multiple_of: " + std::to_string(s.max_length);
    const bool t_rounds = s.max_length % 64 != 0;
    if (s.packing == Packing::kBfd) {
      // With sample_packing, unset means true (hint_sample_packing_padding): written either way,
      // false for packed rows measured padded to their longest.
      lines.push_back(std::string("pad_to_sequence_len: ") + (s.padding == Padding::kMax ? "true" : "false"));
      if (s.padding == Padding::kMax && t_rounds) lines.push_back(multiple_of_t);
      // Packed rows padded to a multiple of N have no axolotl key: its unset pad_to_sequence_len
      // becomes true under sample_packing (hint_sample_packing_padding, utils/schemas/validation.py
      // at 067b021), and false pads each batch to its longest row, which the file above asks for.
      if (s.padding == Padding::kMultiple) {
        lines.push_back("# measured with every packed row padded to a multiple of " + std::to_string(s.pad_multiple) +
                        " (--padding multiple:" + std::to_string(s.pad_multiple) +
                        "); axolotl's sample_packing pads to the longest row (pad_to_sequence_len: false) or to "
                        "sequence_len (true, also when unset), which accumbench measures with --padding longest or max");
      }
    } else if (multiple > 0 && multiple == s.max_length) {
      lines.push_back("pad_to_sequence_len: true");
      if (t_rounds) lines.push_back(multiple_of_t);
    } else if (multiple > 0) {
      lines.push_back("pad_to_multiple_of: " + std::to_string(multiple));
    } else if (s.lengths_vary && s.packing == Packing::kNone && s.padding == Padding::kLongest) {
      lines.push_back("pad_to_sequence_len: false");
    } else if (!s.lengths_vary && s.packing == Packing::kNone && t_rounds) {
      lines.push_back(multiple_of_t);  // samples of T: unset would round them up to a multiple of 64
    }
    if (s.group_by_length || s.grouping_listed) lines.push_back("group_by_length: " + yes(s.group_by_length));
    // axolotl's prompt strategies leave the prompt's labels out unless train_on_inputs.
    if (!s.completion_only_loss) lines.push_back("train_on_inputs: true");
    // axolotl's optimizer key takes transformers' OptimizerNames; its default is adamw_torch_fused.
    if (s.optimizer != OptimizerKind::kAdamW) lines.push_back("optimizer: " + hf_optim_name(s.optimizer));
    // axolotl's default, "auto", is TF32 on any GPU since Ampere: an fp32 CUDA split says what it ran.
    if (s.cuda && s.precision == Precision::kFp32) lines.push_back("tf32: " + yes(tf32_acts(s)));
    if (const std::string clip = clip_key(s); !clip.empty()) lines.push_back(clip);
    if (s.base_quant == BaseQuant::kNf4) {
      lines.push_back("adapter: qlora");
      lines.push_back("load_in_4bit: true");
      // axolotl's qlora loader quantises nf4 with double quant unless bnb_config_kwargs says not.
      if (!s.double_quant) {
        lines.push_back("bnb_config_kwargs:");
        lines.push_back("  bnb_4bit_use_double_quant: false");
      }
    } else if (s.base_quant == BaseQuant::kInt8) {
      lines.push_back("adapter: lora");
      lines.push_back("load_in_8bit: true");
    } else if (s.lora_r > 0) {
      lines.push_back("adapter: lora");
    }
    if (s.adapter_dtype == Precision::kBf16 && s.base_quant == BaseQuant::kNone && s.weights_dtype == Precision::kBf16)
      lines.push_back("peft_autocast_adapter_dtype: false");
    if (s.lora_r > 0) {
      lines.push_back("lora_r: " + std::to_string(s.lora_r));
      lines.push_back("lora_alpha: " + number(lora_alpha(s)));
      lines.push_back("lora_dropout: " + number(s.lora_dropout));
      if (s.lora_rslora) lines.push_back("peft_use_rslora: true");
      if (s.target_modules == std::vector<std::string>{"all-linear"}) {
        lines.push_back("lora_target_linear: true");
      } else {
        lines.push_back("lora_target_modules: " + yaml_list(s.target_modules));
      }
      // Left unset, axolotl turns its fused LoRA kernels on (check_auto_enable_lora_kernels);
      // accumbench runs PEFT's LoRA layers, which these keys keep.
      for (const char* key : {"lora_mlp_kernel", "lora_qkv_kernel", "lora_o_kernel"}) lines.push_back(std::string(key) + ": false");
    }
  } else {
    std::string args = "--batch " + std::to_string(s.batch) + " --micro-batches " +
                       std::to_string(s.per_device_train_batch_size) + " --seq-len " + std::to_string(s.max_length) +
                       " --precision " + to_string(s.precision) + " --activation-checkpointing " +
                       (s.gradient_checkpointing ? "blocks" : "none");
    if (s.optimizer_in_backward) args += " --optimizer-in-backward";
    if (s.chunked_loss) args += " --chunked-loss";
    if (s.cuda_graphs) args += " --cuda-graphs";
    if (s.weights_dtype != Precision::kFp32) args += " --weights-dtype " + to_string(s.weights_dtype);
    if (s.lora_r > 0) {
      args += " --lora-rank " + std::to_string(s.lora_r) + " --lora-alpha " + number(lora_alpha(s)) +
              " --lora-targets " + s.lora_targets + " --lora-dropout " + number(s.lora_dropout);
      if (s.lora_rslora) args += " --lora-rslora";
    }
    if (s.base_quant != BaseQuant::kNone) args += " --base-quant " + to_string(s.base_quant);
    if (s.double_quant) args += " --double-quant";
    if (s.base_quant != BaseQuant::kNone && !s.kbit_upcast) args += " --kbit-prep none";
    if (s.lora_r > 0 && s.adapter_dtype != Precision::kFp32) args += " --adapter-dtype " + to_string(s.adapter_dtype);
    if (s.packing != Packing::kNone || s.packing_listed) args += " --packing " + to_string(s.packing);
    if (s.lengths_vary && s.packing != Packing::kWrapped) {  // bfd's rows are padded per micro-batch too
      DataSource data;
      data.padding = s.padding;
      data.pad_multiple = s.pad_multiple;
      args += " --padding " + padding_name(data);
    }
    // The order, wherever samples are ordered (false too: these flags may sit beside a trainer
    // config that groups, which the command line overrides).
    if (s.group_by_length) {
      args += " --group-by-length";
    } else if (s.grouping_listed || (s.lengths_vary && s.packing != Packing::kWrapped)) {
      args += " --group-by-length false";
    }
    if (!s.completion_only_loss) args += " --completion-only-loss false";
    if (s.optimizer != OptimizerKind::kAdamW) args += " --optimizer " + to_string(s.optimizer);
    const OptimizerOptions defaults;
    if (s.lr >= 0 && s.lr != defaults.lr) args += " --lr " + text::format_number(s.lr);
    if (s.weight_decay >= 0 && s.weight_decay != defaults.weight_decay)
      args += " --weight-decay " + text::format_number(s.weight_decay);
    if (s.beta1 >= 0 && s.beta1 != defaults.beta1) args += " --beta1 " + text::format_number(s.beta1);
    if (s.beta2 >= 0 && s.beta2 != defaults.beta2) args += " --beta2 " + text::format_number(s.beta2);
    if (s.eps >= 0 && s.eps != defaults.eps) args += " --adam-eps " + text::format_number(s.eps);
    if (s.max_grad_norm != defaults.max_grad_norm) args += " --max-grad-norm " + text::format_number(s.max_grad_norm);
    // The split's flags only, as the YAML formats give the split's keys: the model, the data files
    // and the measurement options are the run's own.
    lines.push_back("# accumbench (" + per_rank + "): the split's flags; keep the model and data options of this run");
    lines.push_back(args);
    return lines;  // accumbench's own flags name every knob
  }
  for (const std::string& note : untranslated_knobs(s)) lines.push_back("# " + note);
  for (const std::string& note : adapter_dtype_notes(s, format)) lines.push_back("# " + note);
  if (const std::string note = hyperparameter_note(s, format); !note.empty()) lines.push_back("# " + note);
  // No key for it: the user's own file keeps its clipping, and the trainers clip by default.
  if (s.max_grad_norm == 0) {
    lines.push_back(std::string("# this run did not clip the gradients; ") +
                    (format == SettingsFormat::kTrl ? "TRL" : "axolotl") + " clips at max_grad_norm " +
                    text::format_number(kTrainerMaxGradNorm) +
                    " unless the file sets another (0: none): a pass over the gradients in every step, which --max-grad-norm " +
                    text::format_number(kTrainerMaxGradNorm) + " measures");
  }
  return lines;
}

std::string settings_summary(const TrainerSettings& s) {
  std::string text = "Trainer settings (" +
                     (s.world_size > 1 ? "per rank, " + std::to_string(s.world_size) + " ranks" : std::string("one process")) +
                     "):";
  for (const auto& [key, value] : trl_settings(s)) text += " " + key + "=" + value;
  const std::vector<std::string> notes = untranslated_knobs(s);
  for (const std::string& note : notes) text += "; " + note;
  for (const std::string& note : adapter_dtype_notes(s, SettingsFormat::kTrl)) text += "; " + note;
  return text;
}

std::vector<std::string> peft_target_modules(const ModelConfig& model, const LoraOptions& lora) {
  if (!lora.enabled()) return {};
  // GPT-2's projections are transformers' Conv1D: PEFT's all-linear takes them, axolotl's
  // lora_target_linear (find_all_linear_names) does not, so they are named.
  if (lora.targets == "all-linear" && model.arch == Architecture::kGpt2) return {"c_attn", "c_fc", "c_proj"};
  if (lora.targets == "all-linear") return {"all-linear"};
  std::vector<std::string> names;
  for (const BlockLinear& linear : lora_targets(model, lora.targets)) names.push_back(linear.name);
  return peft_target_modules(model.arch, names, false);
}

namespace {

// The columns that masked labels in a sweep's samples words (lengths.cpp's SampleSource
// description: the name, the counts, then "COLUMNS keep(s) N of M ..."); "" where none did.
std::string masking_columns(const std::string& samples) {
  size_t counts = samples.find(" cut to T=");
  if (counts == std::string::npos) counts = samples.find(", none cut (wrapped rows run on)");
  if (counts == std::string::npos) return "";
  const size_t start = samples.find(", ", counts + 1);
  if (start == std::string::npos) return "";
  const size_t keep = samples.find(" keep", start);
  return keep == std::string::npos ? "" : samples.substr(start + 2, keep - start - 2);
}

}  // namespace

namespace {

// The values of a comma list, each read by `parse` (which throws UserError on a bad one); UserError
// for an empty list.
template <class Value>
std::vector<Value> comma_values(const std::string& list, Value (*parse)(const std::string&)) {
  std::vector<Value> values;
  std::istringstream in(list);
  for (std::string item; std::getline(in, item, ',');) values.push_back(parse(item));
  if (values.empty()) throw UserError("an empty list");
  return values;
}

}  // namespace

WorkloadOptions settings_workload(const SweepContext& context) {
  WorkloadOptions w;
  w.seq_len = context.seq_len;
  w.batch = context.batch;
  // A file written before an option existed lacks it: its default stands.
  for (const auto& [name, value] : context.options) {
    try {
      // A data list: "longest" or "max,longest", "bfd" or "none,bfd", "true" or "false,true" (each
      // split names its own); the first is the data's own, the rest the grid's others.
      if (name == "padding") {
        const std::vector<PaddingChoice> paddings = comma_values(value, padding_from_string);
        set_padding(w.data, paddings.front());
        w.data.other_paddings.assign(paddings.begin() + 1, paddings.end());
      }
      if (name == "packing") {
        const std::vector<Packing> packings = comma_values(value, packing_from_string);
        w.data.packing = packings.front();
        w.data.other_packings.assign(packings.begin() + 1, packings.end());
      }
      if (name == "group_by_length") {
        const std::vector<bool> groupings = comma_values(value, grouping_from_string);
        w.data.group_by_length = groupings.front();
        w.data.other_groupings.assign(groupings.begin() + 1, groupings.end());
      }
      // "fixed", "variable", or the lengths file's name ("documents of FILE ..." for a token file's)
      if (name == "lengths") {
        w.data.lengths = value == "fixed"      ? LengthMode::kFixed
                         : value == "variable" ? LengthMode::kVariable
                                               : LengthMode::kFile;
      }
      if (name == "eos_id" && value != "none") w.data.eos_id = std::stoll(value);
      if (name == "weights_dtype") w.weights_dtype = weights_dtype_from_string(value);
      if (name == "lora_rank") w.lora.rank = std::stoll(value);
      if (name == "lora_alpha" && value != "-") w.lora.alpha = std::stod(value);
      if (name == "lora_targets" && value != "-") w.lora.targets = value;
      if (name == "lora_dropout" && value != "-") w.lora.dropout = std::stod(value);
      if (name == "base_quant") w.lora.base_quant = base_quant_from_string(value);
      if (name == "double_quant") w.lora.double_quant = value == "true";
      if (name == "lora_rslora") w.lora.rslora = value == "true";
      if (name == "kbit_prep") w.lora.kbit_upcast = kbit_upcast_from_string(value);
      if (name == "adapter_dtype") w.lora.adapter_dtype = adapter_dtype_from_string(value);
      if (name == "tf32") w.tf32 = value != "off";
      if (name == "lr") w.optimizer.lr = std::stod(value);
      if (name == "weight_decay") w.optimizer.weight_decay = std::stod(value);
      if (name == "beta1") w.optimizer.beta1 = std::stod(value);
      if (name == "beta2") w.optimizer.beta2 = std::stod(value);
      if (name == "eps") w.optimizer.eps = std::stod(value);
      if (name == "max_grad_norm") {  // "1", or a list "0,1" (each split names its own)
        std::vector<double> norms;
        std::istringstream list(value);
        for (std::string norm; std::getline(list, norm, ',');) norms.push_back(text::number_from_text(norm));
        if (!norms.empty()) {
          w.optimizer.max_grad_norm = norms.front();
          w.grid.other_max_grad_norms.assign(norms.begin() + 1, norms.end());
        }
      }
      if (name == "completion_only_loss") w.data.completion_only_loss = value != "false";
      if (name == "labels_masked_by") w.data.completion_mask_applied = completion_mask_counts(value);
      // A file from before labels_masked_by: the samples' words name the columns that masked
      // ("FILE: 11 samples, 2 cut to T=32, completion_mask keeps 93 of 231 targets ..."); a
      // labels_masked_by, recorded after them, decides.
      if (name == "samples") w.data.completion_mask_applied = completion_mask_counts(masking_columns(value));
    } catch (const std::exception&) {
      // An option this version cannot read keeps its default; the settings are a translation.
    }
  }
  // "model" is the preset name or the config path (describe_workload).
  for (const auto& [name, value] : context.options) {
    if (name == "model") w.model.preset = value;
  }
  return w;
}

namespace {

// The PEFT target_modules of a saved sweep's LoRA, from its model (a preset, or a config file
// that may have gone since: then the names as accumbench was given them).
std::vector<std::string> saved_target_modules(const WorkloadOptions& w) {
  if (!w.lora.enabled()) return {};
  try {
    return peft_target_modules(resolve_model(model_options_for(w.model.preset)), w.lora);
  } catch (const std::exception&) {
    return {w.lora.targets};
  }
}

}  // namespace

TrainerSettings trainer_settings(const SweepResult& result, const RunResult& run) {
  WorkloadOptions w = settings_workload(result.context);
  w.device = result.context.device;  // as the sweep resolved it ("auto" ran somewhere)
  return trainer_settings(run.config, w, saved_target_modules(w));
}

}  // namespace accumbench
