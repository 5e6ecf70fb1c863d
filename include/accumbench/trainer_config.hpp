// Trainer settings in: a TRL SFTConfig YAML (the file `trl sft --config` reads) or an axolotl
// YAML config, read as the accumbench options it stands for (src/report/trainer_config.cpp).
// The reverse of report.hpp's "Trainer settings" (--emit): what --emit trl prints, read back,
// gives the same workload.
//
//   TrainerConfig c = read_trainer_config("sft.yaml", ConfigFormat::kTrl, 1);
//   apply_trainer_config(c, w, [&](const std::string& option) { return given_on_command_line(option); });
//   // c.notes(): what was read, and the keys not used or not understood
//
// Each setting is kept as an accumbench option and its value as accumbench writes it
// ("--seq-len", "1024"), so that an option given on the command line wins over the file, and the
// note can print the file as the command line it stands for.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "accumbench/options.hpp"

namespace accumbench {

enum class ConfigFormat { kTrl, kAxolotl };

struct ConfigSetting {
  std::string option;  // "--seq-len"
  std::string value;   // "1024"; "" for a flag that is on ("--group-by-length")
  std::string keys;    // the file's keys it comes from
  bool by_default = false;  // the file leaves the key out: the trainer's default
};

// LoRA's target modules as the file gives them, PEFT's target_modules: a list of names, or a
// pattern (a string; with TRL also a one-name list, which its ModelConfig unwraps into that
// string). Matched against the model's module paths once the model is known (apply_trainer_config).
struct PeftTargetModules {
  std::string key;                  // "lora_target_modules"; "" when the file names none
  std::vector<std::string> names;   // a list,
  std::string pattern;              // or a pattern
  bool one_name_list = false;       // the pattern came from TRL's one-name list
  // axolotl's lora_target_linear: find_all_linear_names' modules (nn.Linear and bitsandbytes'
  // layers, never the LM head) in union with the list. GPT-2's transformers Conv1D projections are
  // none of those unless a quantised base replaced them.
  bool all_linear = false;
  bool named() const { return all_linear || !key.empty(); }
};

struct TrainerConfig {
  std::string path;
  ConfigFormat format = ConfigFormat::kTrl;
  std::vector<ConfigSetting> settings;
  // LoRA without target modules: PEFT's default for the model's type, resolved once the model is
  // known (apply_trainer_config), as the command line may name another model.
  bool lora_default_targets = false;
  PeftTargetModules lora_target_modules;
  // TRL's loss_type: "chunked_nll" when left out (TRL's default since 1.7.0); "" for axolotl.
  // Not a setting: only plan models it (WorkloadOptions::trl_loss).
  std::string trl_loss;
  bool trl_loss_by_default = false;
  // What the trainer does with this file that its keys do not say and accumbench measures
  // otherwise or not at all (axolotl's fused LoRA kernels, a dtype cast after loading): one
  // sentence each, for stderr, left out when the command line gives one of `options` (the
  // remark is then about a run that is not the one measured).
  struct Remark {
    std::string text;
    std::vector<std::string> options;
  };
  std::vector<Remark> remarks;
  // axolotl's excess_length_strategy as the file sets it ("" left out: axolotl drops a sample longer
  // than sequence_len), said beside real samples, which accumbench cuts to T (trainer_config_notes).
  std::string excess_length_strategy;
  // What the file sets that accumbench does not model, refused by apply_trainer_config (the whole
  // sentence, the file named) unless the command line gives one of `options`, which replace it.
  std::vector<Remark> refusals;
  // The adapters' dtype the trainer picks, which depends on options the command line may change
  // (the base's quantisation, the precision, the weights' dtype), so apply_trainer_config resolves
  // it from the workload it leaves: PEFT's fp32; TRL 1.x's bf16 over a quantised base (a use_peft
  // file with load_in_4bit or load_in_8bit); axolotl's peft_autocast_adapter_dtype: false, the base
  // layer's dtype.
  enum class AdapterRule { kPeft, kTrlQuantised, kPeftBaseDtype };
  AdapterRule adapter_rule = AdapterRule::kPeft;
  // transformers' optim "adamw_torch": torch.optim.AdamW with its own default kernels, the foreach
  // ones on CUDA (--optimizer adamw-foreach) and one tensor at a time on the CPU (accumbench's
  // adamw there), resolved by apply_trainer_config from the device the workload runs on. The key
  // that names it (TRL's "optim", axolotl's "optimizer"); empty otherwise.
  std::string torch_default_adamw;
  std::vector<std::string> unused;   // keys understood that change nothing accumbench measures
  std::vector<std::string> unknown;  // keys not understood: listed, ignored
};

// Reads the YAML text of a config. Keys that change memory or time but that accumbench does not
// model (quantized weights, other optimizers, fused kernels, other attention, sharding, compile,
// offloading) throw UserError naming the key and the file. `world_size` is the number of
// data-parallel processes: the effective batch is per-device batch x accumulation x processes.
TrainerConfig parse_trainer_config(const std::string& yaml_text, ConfigFormat format, int world_size,
                                   const std::string& path);
// The same, from a file (UserError when it cannot be read or is not YAML).
TrainerConfig read_trainer_config(const std::string& path, ConfigFormat format, int world_size);

// Sets the workload from the config, except the options `given` says were on the command line and
// the file's settings those options leave nothing to shape (under --lora-rank 0 the adapters'
// alpha, targets, dropout and the base's quantisation; under --base-quant other than nf4,
// --double-quant). Throws UserError (naming the key) on a value that the option's own parser refuses.
// `auto_is_cuda`: --device auto runs on CUDA here (the optimizer adamw_torch stands for depends
// on the device).
void apply_trainer_config(const TrainerConfig& config, WorkloadOptions& workload,
                          const std::function<bool(const std::string& option)>& given, bool auto_is_cuda = false);

// Notes for stderr: the file as the options it set (those the command line overrode or left
// nothing to shape named), and the keys not used or not understood. `workload` is the one
// apply_trainer_config set.
std::vector<std::string> trainer_config_notes(const TrainerConfig& config,
                                              const std::function<bool(const std::string& option)>& given,
                                              const WorkloadOptions& workload);

}  // namespace accumbench
