// Reporters print results; they never measure (docs/ARCHITECTURE.md). One small interface, one
// class per format for a sweep, and the printers of the plan, verify and the model list; output
// lines are tested against expected text in tests/test_reports.cpp.
//
//   ConsoleReporter({/*color=*/false}).report(result, std::cout);
//   write_file_atomically("sweep.json", to_json(result));
//   SweepResult again = load_sweep_result("sweep.json");
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "accumbench/model_config.hpp"
#include "accumbench/plan.hpp"
#include "accumbench/result.hpp"
#include "accumbench/units.hpp"
#include "accumbench/verify.hpp"

namespace accumbench {

class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual void report(const SweepResult& result, std::ostream& out) const = 0;
};

// The note printed above the table when some split's every timed step gave a loss that is not
// finite (fp16's skipped steps aside): its times are of a diverging step; "" when none did.
std::string diverged_loss_note(const SweepResult& result);

// A sentence when more threads wanted a CPU than the machine had while the sweep ran: other
// processes (SweepContext::other_cpu_seconds, less the sweep's other data-parallel ranks) used a
// quarter of a core or more beyond the cores its threads left free, or its own threads outnumbered
// the cores (named, with the --threads that fits). They took turns with the steps, which moves
// the times between rounds, widens the intervals and can turn close decisions from one sweep to
// the next. Files before schema 20: the load read at the saves above the cores by half a core.
// "" on an idle enough machine, or where nothing was read.
inline constexpr double kBusyCores = 0.25;
std::string busy_machine_note(const SweepContext& context);

// Every note of a sweep, as its stderr said them above the table: the stored ones
// (SweepResult::notes), then the diverged-loss and busy-machine notes. What `report`, Markdown and
// HTML print.
std::vector<std::string> sweep_notes(const SweepResult& result);

// One row per split: split, step s ± spread, data/fwd/bwd/opt/other, tokens/s, MFU, peak memory,
// fits, vs best; the recommendation below. ANSI colour only when `color` (the CLI passes isatty).
class ConsoleReporter : public Reporter {
 public:
  struct Options {
    bool color = false;
  };
  ConsoleReporter() = default;
  explicit ConsoleReporter(Options options) : options_(options) {}
  void report(const SweepResult& result, std::ostream& out) const override;

 private:
  Options options_;
};

class JsonReporter : public Reporter {
 public:
  void report(const SweepResult& result, std::ostream& out) const override;
};

class CsvReporter : public Reporter {
 public:
  void report(const SweepResult& result, std::ostream& out) const override;
};

// Shows only the columns that vary across runs (llama-bench).
class MarkdownReporter : public Reporter {
 public:
  void report(const SweepResult& result, std::ostream& out) const override;
};

// One self-contained HTML file with inline SVG charts (src/report/html/).
class HtmlReporter : public Reporter {
 public:
  void report(const SweepResult& result, std::ostream& out) const override;
};

// Chrome Trace Event Format: one process per split, one slice per phase per micro-step, memory as
// counter events (src/report/chrome_trace.cpp).
class ChromeTraceReporter : public Reporter {
 public:
  void report(const SweepResult& result, std::ostream& out) const override;
};

std::string to_json(const SweepResult& result);
// Throws UserError naming the problem on broken JSON or a wrong schema version.
SweepResult sweep_result_from_json(const std::string& json_text, const std::string& origin);
SweepResult load_sweep_result(const std::string& path);

// Writes to PATH.tmp then renames, so a kill never leaves a half-written file.
// Throws UserError when the directory cannot be written.
void write_file_atomically(const std::string& path, const std::string& content);

// `accumbench compare a.json b.json`: side by side per split (matched by SplitConfig::key()),
// with the ratio b / a of median step time and of peak memory.
void print_comparison(const SweepResult& a, const SweepResult& b, std::ostream& out);

// ---- the plan (src/report/plan_text.cpp) ----
// The table, the per-phase peaks, and (when memory_bytes > 0) whether it fits.
void print_plan(const MemoryPlan& plan, std::ostream& out);
// One line per split: label, predicted peak per phase, the phase that holds it, the memory spare at
// the peak and fits or not (only with a memory limit: memory_bytes, after the headroom); with `workload`, also each split's per-rank Trainer settings
// (per_device_train_batch_size, gradient_accumulation_steps, gradient_checkpointing, then those
// own_trainer_keys gives it) and, below the table, the settings every split shares
// (shared_trainer_keys; target_modules as there).
void print_split_summary(const std::vector<MemoryPlan>& plans, int64_t memory_bytes, std::ostream& out,
                         const WorkloadOptions* workload = nullptr, const std::vector<std::string>& target_modules = {});
// How the plan names a split among `plans`: shape_label() when every plan is of one job (the
// header names it), else label() (the optimizer unless adamw, the dtypes unless fp32), and the
// precision and the clipping when the plans have several ("4×4 ckpt adamw8bit bf16 clip1").
std::string plan_label(const MemoryPlan& plan, const std::vector<MemoryPlan>& plans);
// The Trainer settings of the plans' splits past the first three (batch size, accumulation,
// checkpointing, which differ by split): those every split shares, and those of one split that are
// not shared (an optimizer or a dtype of a list: optim=adamw_bnb_8bit, dtype=bfloat16).
using SettingKeys = std::vector<std::pair<std::string, std::string>>;
SettingKeys shared_trainer_keys(const std::vector<MemoryPlan>& plans, const WorkloadOptions& workload,
                                const std::vector<std::string>& target_modules);
SettingKeys own_trainer_keys(const MemoryPlan& plan, const SettingKeys& shared, const WorkloadOptions& workload,
                             const std::vector<std::string>& target_modules);
// One line per split: the analytic peak and calibrations[i]'s prediction for plans[i].
void print_calibrated(const std::vector<MemoryPlan>& plans, const std::vector<Calibration>& calibrations,
                      std::ostream& out);

// ---- Trainer settings (src/report/trainer_settings.cpp) ----
// What one split is in the user's own trainer, per rank: transformers' TrainingArguments and TRL's
// SFTConfig, axolotl's keys, or accumbench's flags. Pure (no LibTorch, no files but a saved
// sweep's model config).
struct TrainerSettings {
  // model_name_or_path / base_model (trainer_model_name): "" where nothing names the model; then
  // `model_spec` is the --hf-config spec that named none (a comment says so), "" for a preset.
  std::string model;
  std::string model_spec;
  int64_t per_device_train_batch_size = 1;  // the micro-batch
  int64_t gradient_accumulation_steps = 1;
  int world_size = 1;                       // ranks; the two above are per rank
  int64_t batch = 1;                        // the effective batch, all ranks
  bool gradient_checkpointing = false;
  Precision precision = Precision::kFp32;
  Precision weights_dtype = Precision::kFp32;
  int64_t max_length = 0;                   // T
  int64_t lora_r = 0;                       // 0: full fine-tuning
  double lora_alpha = 0;                    // 0: 2·r
  double lora_dropout = 0;
  bool lora_rslora = false;                 // use_rslora: alpha / sqrt(r)
  std::string lora_targets;                 // as accumbench takes them (--lora-targets)
  BaseQuant base_quant = BaseQuant::kNone;  // QLoRA: load_in_4bit (nf4) or load_in_8bit (int8)
  bool double_quant = false;                // bnb_4bit_use_double_quant
  bool kbit_upcast = true;                  // --kbit-prep peft (PEFT's fp32 upcast) or none
  Precision adapter_dtype = Precision::kFp32;  // --adapter-dtype
  std::vector<std::string> target_modules;  // as PEFT takes them (peft_target_modules)
  bool lengths_vary = false;                // samples shorter than T: padding matters
  bool real_samples = false;                // a lengths file's or a token file's documents, which may run past T
  Padding padding = Padding::kMax;
  int64_t pad_multiple = 0;
  Packing packing = Packing::kNone;
  bool packing_listed = false;  // --packing lists several: --emit args names the split's, none included
  bool group_by_length = false;
  bool grouping_listed = false;  // --group-by-length lists both: --emit args names the split's, false included
  // --optimizer; TrainingArguments.optim (hf_optim_name), printed when not AdamW (the Trainer's
  // default optimizer is an AdamW with the same update).
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  bool optimizer_in_backward = false;       // these three have no Trainer setting
  bool chunked_loss = false;
  bool cuda_graphs = false;
  std::string loss_type;                    // TRL's SFTConfig.loss_type, from plan --trl-loss; empty: not stated
  // --tf32, which acts on fp32 matmuls on CUDA (transformers' and axolotl's tf32: true; left out,
  // PyTorch's default is off), and the device: CUDA, or the CPU, where transformers' adamw_torch
  // steps one tensor at a time, not with the foreach kernels.
  bool tf32 = true;
  bool cuda = false;
  // The optimizer's learning rate and weight decay, which change the update, not the time: --emit
  // args carries them when they are not accumbench's defaults, the trainers' formats say them in
  // a comment when they are not the trainer's. Negative: no part of the job (plan takes none).
  double lr = -1;
  double weight_decay = -1;
  // AdamW's betas and epsilon, said likewise where they are not the Trainer's (0.9, 0.999, 1e-8,
  // accumbench's too); negative: no part of the job.
  double beta1 = -1, beta2 = -1, eps = -1;
  // --max-grad-norm (0: no clipping): --emit args carries it when clipping; the trainers' formats
  // say it in a comment when it clips at other than their default (kTrainerMaxGradNorm). Plan takes
  // it (it decides whether the optimizer may step inside backward).
  double max_grad_norm = 0;
  // --completion-only-loss: false writes TRL's completion_only_loss: false (axolotl's
  // train_on_inputs: true) and carries the flag in --emit args.
  bool completion_only_loss = true;
  // The lengths file's completion_mask counted (DataSource::completion_mask_applied): TRL's
  // completion_only_loss: true, since its null leaves the mask of a dataset tokenized outside TRL
  // unapplied (axolotl's prepared rows carry their labels; its default leaves prompts out).
  bool completion_mask_applied = false;
};
enum class SettingsFormat { kTrl, kAxolotl, kArgs };
// --emit: "trl" | "axolotl" | "args"; UserError naming the choices.
SettingsFormat settings_format_from_string(const std::string& text);
// The split's shape, knobs, precision, optimizer, weights and adapter dtypes (and its clipping norm
// where the workload lists several), the rest of the workload's;
// `target_modules`: peft_target_modules(model, workload.lora) ({} without LoRA).
TrainerSettings trainer_settings(const SplitConfig& split, const WorkloadOptions& workload,
                                 const std::vector<std::string>& target_modules);
// A planned split's: as above with the dtypes it was planned in, and with --framework
// hf-trl TRL's loss_type (plan --trl-loss).
TrainerSettings trainer_settings(const MemoryPlan& plan, const WorkloadOptions& workload,
                                 const std::vector<std::string>& target_modules);
// The settings of one run of a sweep, read back from its context (a saved file's too).
TrainerSettings trainer_settings(const SweepResult& result, const RunResult& run);
// The workload a sweep's context block describes, as far as the settings need it.
WorkloadOptions settings_workload(const SweepContext& context);
// PEFT's target_modules for accumbench's block linears: ["all-linear"]; Llama-family names with
// "_proj" (q -> q_proj); GPT-2's names, its two c_proj as "c_proj", "attn.c_proj" or "mlp.c_proj".
std::vector<std::string> peft_target_modules(Architecture arch, const std::vector<std::string>& block_linears,
                                             bool all_linear);
std::vector<std::string> peft_target_modules(const ModelConfig& model, const LoraOptions& lora);
// (key, value) in TRL's spelling: TrainingArguments, SFTConfig, and ModelConfig's LoRA keys.
std::vector<std::pair<std::string, std::string>> trl_settings(const TrainerSettings& settings);
// The knobs the trainers have no setting for, one sentence each (oib, chunked-ce, graphs, the
// weights' dtype to load in).
std::vector<std::string> untranslated_knobs(const TrainerSettings& settings);
// --emit: ready to paste, one line each: YAML for trl sft --config and for axolotl ("#" lines are
// comments), or accumbench's flags.
std::vector<std::string> settings_lines(const TrainerSettings& settings, SettingsFormat format);
// One line for the reports: "Trainer settings (one process): per_device_train_batch_size=4 ...".
std::string settings_summary(const TrainerSettings& settings);

// ---- verify (src/report/verify_text.cpp) ----
// The header, the tolerances, one line per split and the verdict.
void print_verify(const VerifyResult& result, std::ostream& out);
// verify --json (src/report/verify_json.cpp): every job's splits, errors and tolerances, and one
// "verdict": pass, fail, or incomplete (a signal stopped it, or `finished` is false: written while
// later jobs still run, so that an error in one keeps the jobs before it).
// `error`: what ended the run early (a data-parallel peer gone), "" for none; written as "error".
std::string verify_json(const WorkloadOptions& workload, const std::vector<VerifyResult>& results, bool finished,
                        const std::string& error = "");

// ---- the presets (src/report/models_text.cpp) ----
// `accumbench models`: one line per preset with its shape and parameter count.
void print_models(const std::vector<ModelConfig>& models, std::ostream& out);

}  // namespace accumbench
