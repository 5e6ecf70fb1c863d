// What to run: the options that sweep, verify and plan share, typed, with their defaults in one
// place (workload_defaults) and no LibTorch. The CLI registers them with one function
// (tools/accumbench.cpp, add_workload_options), the runners read them, and the report's context
// block lists them (describe_workload).
//
//   WorkloadOptions w = workload_defaults(Command::kSweep);   // gpt2-mini, T=128, batch 8, fp32
//   w.micro_batches = {1, 8};
//   w.precisions = {Precision::kBf16};
//   w.grid.knobs = true;                                     // checkpointing, optimizer-in-backward
//   w.data.padding = Padding::kLongest;                      // real data: set_lengths(w.data, "chat.txt")
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace accumbench {

// Autocast precision of the compute: fp32 (none), bf16, or fp16 with dynamic loss scaling.
enum class Precision { kFp32, kBf16, kFp16 };
std::string to_string(Precision precision);                 // "fp32" | "bf16" | "fp16"
Precision precision_from_string(const std::string& text);   // UserError naming the choices
// The same names for --weights-dtype (its message names that option).
Precision weights_dtype_from_string(const std::string& text);
// Bytes per element of the dtype (c in the plan's formulas): 4 or 2.
int64_t compute_bytes(Precision precision);

// Activation checkpointing: none, or per transformer block (keep its input, recompute it).
enum class Checkpointing { kNone, kBlocks };
std::string to_string(Checkpointing checkpointing);             // "none" | "blocks"
Checkpointing checkpointing_from_string(const std::string& text);

enum class LossNormalization {
  kToken,       // sum over the micro-batch / tokens in the whole step (correct)
  kMeanOfMeans  // mean per micro-batch / accumulation steps (the widely reported bug)
};
std::string to_string(LossNormalization normalization);  // "token" | "mean-of-means"
LossNormalization loss_normalization_from_string(const std::string& text);

// Sample lengths: all T, uniform in [T/4, T], or from a lengths file (DataSource::lengths_file).
// A token file split at an end-of-sequence id (DataSource::eos_id) gives its documents' instead.
enum class LengthMode { kFixed, kVariable, kFile };
std::string to_string(LengthMode mode);  // "fixed" | "variable" | "file"
LengthMode length_mode_from_string(const std::string& text);  // fixed or variable only

// How a micro-batch's samples are padded: to T; to its longest sample (TRL's and transformers'
// DataCollatorWithPadding default); to that rounded up to a multiple of DataSource::pad_multiple.
enum class Padding { kMax, kLongest, kMultiple };
std::string to_string(Padding padding);  // "max" | "longest" | "multiple"
// One --padding value: the padding and, for Padding::kMultiple, its N.
struct PaddingChoice {
  Padding padding = Padding::kMax;
  int64_t multiple = 0;
  bool operator==(const PaddingChoice& other) const { return padding == other.padding && multiple == other.multiple; }
  bool operator!=(const PaddingChoice& other) const { return !(*this == other); }
  bool per_micro_batch() const { return padding != Padding::kMax; }
};
// "max" | "longest" | "multiple:8"; UserError for anything else (N must be positive).
PaddingChoice padding_from_string(const std::string& text);
std::string padding_name(const PaddingChoice& choice);  // "max", "longest", "multiple:8"
// A split's padding in its label's words: "pad-max", "pad-longest", "pad-multiple8".
std::string padding_word(const PaddingChoice& choice);
// Whether `choice` pads every micro-batch to T=seq_len whatever its samples: max, or multiple:T (a
// multiple past T is refused apart, padding_past_seq_len_problem).
bool pads_every_row_to_t(const PaddingChoice& choice, int64_t seq_len);
// "max,longest,multiple:8"
std::string join_paddings(const std::vector<PaddingChoice>& choices);
// How samples are laid out in rows: one sample per row; concatenated and cut into rows of T
// (attention crosses documents, as in pretraining loaders); or whole samples packed best-fit-
// decreasing into rows of T, attention and positions restarting at each (TRL's "bfd").
enum class Packing { kNone, kWrapped, kBfd };
std::string to_string(Packing packing);  // "none" | "wrapped" | "bfd"
Packing packing_from_string(const std::string& text);
// A split's packing in its label's words: "unpacked", "pack-wrapped", "pack-bfd".
std::string packing_word(Packing packing);
// "none,bfd"
std::string join_packings(const std::vector<Packing>& packings);
// --group-by-length's list: "true" | "false"; UserError for anything else.
bool grouping_from_string(const std::string& text);
// A split's grouping in its label's words: "grouped", "ungrouped".
std::string grouping_word(bool group_by_length);
// "false,true"
std::string join_groupings(const std::vector<bool>& groupings);

// The rows a split's steps train on: how the samples are laid out in rows (packing) and the order
// the sampler visits them in (grouped by length or random). Both are grid dimensions, and each
// pair makes other steps of the same samples: splits whose rows differ are compared per real token
// (decision.hpp), and each pair's batches are built once (the runner's host batches).
struct StepRows {
  Packing packing = Packing::kNone;
  bool grouped = false;
  bool operator==(const StepRows& other) const { return packing == other.packing && grouped == other.grouped; }
  bool operator!=(const StepRows& other) const { return !(*this == other); }
};

// What model to build: a preset name or a Hugging Face config.json (which wins when given), and
// the seed of its random weights and of the synthetic tokens.
struct ModelOptions {
  std::string preset = "gpt2-mini";
  std::string hf_config;
  uint64_t seed = 0;
};

// The optimizer (--optimizer): torch.optim.AdamW as its fused kernel runs it on CUDA (2.x;
// elsewhere one tensor at a time, torch's own path there), or with torch's foreach kernels
// (AdamW's default on CUDA: every parameter's sqrt(exp_avg_sq) at once, src/engine/adamw.cpp);
// bitsandbytes' 8-bit blockwise AdamW (moments quantised per block of 256 with the dynamic map,
// src/engine/adamw8bit.cpp), its paged variant (the same step; its state pages to host memory
// under pressure on CUDA); bitsandbytes' paged 32-bit AdamW (fp32 moments, paged; the same
// emulation with every tensor's state in fp32); plain SGD without momentum (transformers'
// optim="sgd": torch.optim.SGD with the Trainer's lr and weight decay).
enum class OptimizerKind { kAdamW, kAdamWForeach, kAdamW8bit, kPagedAdamW8bit, kPagedAdamW32bit, kSgd };
// "adamw" | "adamw-foreach" | "adamw8bit" | "paged-adamw8bit" | "paged-adamw32bit" | "sgd"
std::string to_string(OptimizerKind kind);
OptimizerKind optimizer_kind_from_string(const std::string& text);  // UserError naming the choices
// transformers' OptimizerNames value of the same optimizer (TrainingArguments.optim):
// "adamw_torch_fused" | "adamw_torch" | "adamw_8bit" | "paged_adamw_8bit" | "paged_adamw_32bit" | "sgd"
std::string hf_optim_name(OptimizerKind kind);
// bitsandbytes' optimizers (8-bit AdamW plain or paged, paged 32-bit AdamW), which accumbench
// emulates with LibTorch ops (memory exact, time approximate), and which the reports say so of.
inline bool bitsandbytes_optimizer(OptimizerKind kind) {
  return kind == OptimizerKind::kAdamW8bit || kind == OptimizerKind::kPagedAdamW8bit ||
         kind == OptimizerKind::kPagedAdamW32bit;
}
// bitsandbytes' 8-bit AdamW, plain or paged: uint8 moments (tensors of at least 4096 elements) and
// the quantisation maps; its 32-bit AdamW keeps fp32 moments and no maps.
inline bool eight_bit_optimizer(OptimizerKind kind) {
  return kind == OptimizerKind::kAdamW8bit || kind == OptimizerKind::kPagedAdamW8bit;
}
// A --device that names CUDA: "cuda" or "cuda:N" ("auto" is resolved by the caller).
inline bool names_cuda(const std::string& device) { return device == "cuda" || device.rfind("cuda:", 0) == 0; }
// bitsandbytes keeps this optimizer's state in paged memory (tensors of at least 1e5 elements).
inline bool paged_optimizer(OptimizerKind kind) {
  return kind == OptimizerKind::kPagedAdamW8bit || kind == OptimizerKind::kPagedAdamW32bit;
}
// torch.optim.AdamW in either kernel: fp32-or-parameter-dtype moments, the same update.
inline bool full_precision_adamw(OptimizerKind kind) {
  return kind == OptimizerKind::kAdamW || kind == OptimizerKind::kAdamWForeach;
}

// Optimizer hyperparameters (PyTorch's defaults except the learning rate, which is the anchor's).
// beta1, beta2 and eps are AdamW's (all three variants); SGD reads lr and weight_decay.
struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kAdamW;
  double lr = 1e-4;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  // --max-grad-norm: after the last micro-step (and the all-reduce), every gradient is scaled so
  // that their global L2 norm is at most this (torch.nn.utils.clip_grad_norm_, which the Trainer
  // calls before optimizer.step()); 0: no clipping, as a plain PyTorch loop. The sweep's first
  // when it sweeps several (GridOptions::other_max_grad_norms).
  double max_grad_norm = 0;
  bool clips() const { return max_grad_norm > 0; }
};
// transformers' TrainingArguments.max_grad_norm, what a TRL or axolotl file leaving it out clips at.
inline constexpr double kTrainerMaxGradNorm = 1.0;
// TRL's SFTConfig learning rate (trl/trainer/sft_config.py), what a TRL file leaving it out trains
// with; TrainingArguments' and axolotl's weight decay is 0.
inline constexpr double kTrlLearningRate = 2e-5;

struct LossOptions {
  LossNormalization normalization = LossNormalization::kToken;
  // Also run every split with the chunked cross-entropy (src/engine/chunked_loss.cpp).
  bool chunked = false;
  int64_t chunk_tokens = 0;  // tokens per chunk; 0: loss_chunk_tokens()'s rule
};

// Where the tokens come from and how they are laid out in a micro-batch.
// The steps of data a sweep cycles through unless --distinct-steps says otherwise, and the most it
// may ask for (each is a whole step's batch kept in host memory).
inline constexpr int kDistinctBatchesByDefault = 2;
inline constexpr int64_t kMaxDistinctSteps = int64_t{1} << 16;

struct DataSource {
  LengthMode lengths = LengthMode::kFixed;
  std::string lengths_file;  // LengthMode::kFile: one length per line, or JSONL (input_ids or length)
  std::string token_file;  // real tokens (uint16 or uint32 ids) instead of synthetic ones
  int token_bytes = 2;
  int64_t eos_id = -1;     // >= 0 with token_file: its documents, split after each eos_id, are the samples
  Padding padding = Padding::kMax;
  int64_t pad_multiple = 0;  // Padding::kMultiple's N
  // --padding's list after its first (which is padding / pad_multiple): every split is also run
  // padded each of these ways (data_paddings, grid_paddings). A data option, so that the checks
  // made where the samples are read (a multiple past T) see every one.
  std::vector<PaddingChoice> other_paddings;
  bool group_by_length = false;  // transformers' LengthGroupedSampler (src/data/samples.cpp)
  // --group-by-length's list after its first (which is group_by_length): every split is also run on
  // the steps the other order makes of the same samples (data_groupings, grid_groupings); grouped
  // steps hold other samples than random ones, so the sweep compares them per real token, as it
  // compares packings.
  std::vector<bool> other_groupings;
  Packing packing = Packing::kNone;
  // --packing's list after its first (which is packing): every split is also run on the rows each
  // of these packings makes of the same samples (data_packings, grid_packings). A packed row holds
  // several samples, so the jobs' steps train on different amounts of data: the sweep compares
  // them per real token (decision.hpp).
  std::vector<Packing> other_packings;
  // A lengths file's completion_mask counts only the completions' labels (TRL's default for
  // prompt-completion data); false: every label but those of labels / assistant_masks columns.
  bool completion_only_loss = true;
  // Not an option but a fact of the lengths file, found where it is read
  // (completion_mask_counts): its completion_mask decided which labels count. TRL applies such a
  // mask under completion_only_loss: null only to prompt-completion data it tokenized itself, so
  // --emit trl writes completion_only_loss: true for it.
  bool completion_mask_applied = false;
  // --distinct-steps: the steps of the data a sweep cycles through (its host batches, and verify's
  // reference steps). kDefaultDistinctSteps where not given (two: the rounds alternate), a count,
  // or kEpochSteps: as many as one pass over the source takes (epoch_steps, src/data/lengths.cpp).
  int64_t distinct_steps = kDefaultDistinctSteps;
  static constexpr int64_t kDefaultDistinctSteps = 0;
  static constexpr int64_t kEpochSteps = -1;
  bool distinct_steps_given() const { return distinct_steps != kDefaultDistinctSteps; }
};

// Whether the rows hold samples (a lengths file, --lengths variable, a token file's documents),
// each trained as transformers trains a row (n tokens, n - 1 targets), rather than a pretraining
// loader's full windows (--lengths fixed, a token file without --eos-id), on which grouping and
// packing act on nothing (idle_data_options_note): the batches stay full windows.
bool rows_are_samples(const DataSource& data);
// Whether the samples are real ones (a lengths file's, a token file's documents), which may run past
// T and are cut to it; --lengths variable draws none longer than T.
bool real_samples(const DataSource& data);
// --distinct-steps: a positive count or "epoch"; UserError for anything else.
int64_t distinct_steps_from_string(const std::string& text);
// --distinct-steps as written ("epoch", "8"); "2" where not given.
std::string distinct_steps_name(const DataSource& data);
// --lengths: "fixed" | "variable" | the path of a lengths file (any other word).
void set_lengths(DataSource& data, const std::string& text);
// --lengths as written: "fixed", "variable", the lengths file, or "documents of FILE split at eos N".
std::string lengths_name(const DataSource& data);
// --padding: "max" | "longest" | "multiple:N"; UserError for anything else (N must be positive).
// Sets the first padding (a list's others stay).
void set_padding(DataSource& data, const std::string& text);
void set_padding(DataSource& data, const PaddingChoice& choice);
PaddingChoice padding_of(const DataSource& data);  // the first padding
std::string padding_name(const DataSource& data);  // the first's: "max", "longest", "multiple:8"
// Every padding of --padding's list in the order given: the first, then other_paddings (a
// padding given twice is kept once).
std::vector<PaddingChoice> data_paddings(const DataSource& data);
// The length a micro-batch whose longest sample has `longest` positions is padded to, at most T.
int64_t padded_length(Padding padding, int64_t multiple, int64_t longest, int64_t seq_len);
int64_t padded_length(const DataSource& data, int64_t longest, int64_t seq_len);
// --padding multiple:N (any of the list's) rounds a micro-batch of `longest` positions past T
// (TRL's pad_to_multiple_of does not stop at max_length, and accumbench runs no row longer than
// T): the sentence that says so and names the fix, or "" (other paddings, wrapped rows, or a
// rounding within T).
std::string padding_past_seq_len_problem(const DataSource& data, int64_t longest, int64_t seq_len);

// How the frozen base's block linears are stored under LoRA (--base-quant, QLoRA): as they are,
// as bitsandbytes' NF4 (Linear4bit: packed 4-bit codes and a per-64 absmax; transformers'
// load_in_4bit with bnb_4bit_quant_type="nf4"), or as its LLM.int8 storage (Linear8bitLt: int8
// weight and a per-row scale; load_in_8bit). src/models/quantized_linear.cpp runs them.
enum class BaseQuant { kNone, kNf4, kInt8 };
std::string to_string(BaseQuant quant);                  // "none" | "nf4" | "int8"
BaseQuant base_quant_from_string(const std::string& text);
// --completion-only-loss: "true" | "false" (TRL's words); UserError for anything else.
bool completion_only_loss_from_string(const std::string& text);
// --kbit-prep: "peft" (true: the fp32 upcast) | "none" (false); UserError for anything else.
bool kbit_upcast_from_string(const std::string& text);
// The value of option `name` in a context's options (describe_workload's pairs): its own, or for an
// option recorded only when not its default, that default where the list lacks it (base_quant
// "none", double_quant "false", kbit_prep "peft", adapter_dtype "fp32", tf32 "on", max_grad_norm "0", completion_only_loss "true"); nullopt for any
// other option left out.
std::optional<std::string> recorded_option(const std::vector<std::pair<std::string, std::string>>& options,
                                           const std::string& name);
// The options either list names, each once: `first`'s in order, then those only `second` has.
std::vector<std::string> option_names(const std::vector<std::pair<std::string, std::string>>& first,
                                      const std::vector<std::pair<std::string, std::string>>& second);
std::string kbit_prep_name(bool upcast);
// --adapter-dtype: "fp32" | "bf16"; UserError for anything else (fp16 adapters cannot train under
// fp16 autocast: torch's GradScaler refuses to unscale fp16 gradients).
Precision adapter_dtype_from_string(const std::string& text);

struct LoraOptions;
// Where bf16 adapters (--adapter-dtype bf16) are measured and planned: beside bf16 activations,
// where they run as an fp32 step's fp32 adapters do (no casts; their products, outputs and
// gradients in bf16). "" there or with fp32 adapters; else the sentence that names the fix (fp16
// autocast, fp32 activations, fp16 weights).
std::string adapter_dtype_problem(const LoraOptions& lora, Precision precision, Precision weights_dtype);
// Where weights stored in `dtype` run: fp16 needs CUDA (the CPU build's matrix products have no fp16
// kernels). "" where they run; else the sentence that refuses them, for the engine (`cuda`: the
// device is one) and for the plan (`planning`: it names --device cuda as a fix too).
std::string weights_dtype_device_problem(Precision dtype, bool cuda, bool planning);

// Low-rank adapters on a frozen base (rank 0: full fine-tuning).
struct LoraOptions {
  int64_t rank = 0;
  double alpha = 0;                    // 0: 2·rank; the scaling is alpha / rank
  // --lora-rslora: PEFT's use_rslora, the scaling alpha / sqrt(rank) (rank-stabilized LoRA): the
  // update's size only, not a tensor's shape, a step's time or its memory.
  bool rslora = false;
  std::string targets = "all-linear";  // all-linear | attention | mlp | a comma list of names
  double dropout = 0;
  // QLoRA: the frozen base quantised (LoRA only). double_quant quantises NF4's absmax again
  // (bnb_4bit_use_double_quant; off by default, as in transformers' BitsAndBytesConfig).
  BaseQuant base_quant = BaseQuant::kNone;
  bool double_quant = false;
  // --kbit-prep: with a quantised base, PEFT's prepare_model_for_kbit_training casts every other
  // parameter (norms, embeddings, head, biases) to fp32 and turns checkpointing on (peft, the
  // default); without it (none: TRL 1.x's SFTTrainer; axolotl casts them back after preparing)
  // they stay in the weights' dtype.
  bool kbit_upcast = true;
  // --adapter-dtype: what A and B (and so their gradients and AdamW moments) are stored in. fp32 is
  // PEFT's default (autocast_adapter_dtype=True upcasts them); bf16 is TRL 1.x's SFTTrainer over a
  // quantised base (it casts every trainable parameter to bf16 after get_peft_model) and PEFT's
  // autocast_adapter_dtype=False over a bf16 base (axolotl's peft_autocast_adapter_dtype: false).
  Precision adapter_dtype = Precision::kFp32;
  bool enabled() const { return rank > 0; }
  bool quantized() const { return rank > 0 && base_quant != BaseQuant::kNone; }
};

// The grid dimensions beyond micro-batch and precision.
struct GridOptions {
  Checkpointing checkpointing = Checkpointing::kNone;  // of every point
  // Also each split with checkpointing (unless every point already has it) and, at accumulation 1
  // in one process, with the optimizer inside backward (alone and with checkpointing: the
  // lowest-memory point).
  bool knobs = false;
  // The optimizer inside backward in every point; only the split without accumulation can have it,
  // so the grid keeps only that one (optimizer_in_backward_note names the others).
  bool optimizer_in_backward = false;
  bool cuda_graphs = false;  // also every point replayed from CUDA graphs (CUDA only)
  // Also every point with each of these optimizers (sweep's --optimizer list after its first,
  // which is WorkloadOptions::optimizer.kind); plan and verify take one optimizer.
  std::vector<OptimizerKind> other_optimizers;
  // Also every point with the weights stored in each of these dtypes (sweep's --weights-dtype list
  // after its first, which is WorkloadOptions::weights_dtype); plan and verify take one.
  std::vector<Precision> other_weights_dtypes;
  // Also every point with LoRA's adapters stored in each of these dtypes (sweep's --adapter-dtype
  // list after its first, which is LoraOptions::adapter_dtype); plan and verify take one.
  std::vector<Precision> other_adapter_dtypes;
  // Also every point clipped at each of these norms (--max-grad-norm's list after its first, which
  // is OptimizerOptions::max_grad_norm; 0 is no clipping): sweep, plan and verify take the list.
  std::vector<double> other_max_grad_norms;
};

// Everything that says which training step is measured, verified or planned.
struct WorkloadOptions {
  ModelOptions model;
  int64_t seq_len = 128;
  int64_t batch = 8;                        // effective batch per optimizer step, in sequences
  std::vector<int64_t> micro_batches;       // empty: every divisor of a rank's share of the batch
  std::string device = "auto";              // auto | cpu | cuda | cuda:N
  std::vector<Precision> precisions = {Precision::kFp32};
  // Storage dtype of the weights (with LoRA: of the frozen base; the adapters stay fp32). Without
  // LoRA the AdamW moments are in it too, as torch.optim keeps them in the parameter's dtype.
  // The sweep's first when it sweeps several (grid.other_weights_dtypes).
  Precision weights_dtype = Precision::kFp32;
  LossOptions loss;
  DataSource data;
  LoraOptions lora;
  GridOptions grid;
  OptimizerOptions optimizer;
  int64_t memory_limit_bytes = 0;           // 0: the device's own memory
  int world_size = 1;                       // plan: data-parallel ranks to plan for
  double dist_timeout_seconds = 300;        // data parallel: how long a rank waits for the others
  int threads = 0;                          // CPU threads; 0: every hardware thread
  // sweep --tf32: fp32 matmuls on CUDA in TF32 (torch.backends.cuda.matmul.allow_tf32), as the
  // PyTorch anchor runs them; PyTorch's own default, and transformers' and axolotl's without
  // `tf32: true`, is off. Only fp32 steps on CUDA change (their time).
  bool tf32 = true;
  // --trl-config: TRL's SFTConfig.loss_type ("chunked_nll" when the file leaves it out, TRL's
  // default since 1.7.0; "" without a TRL config). plan models TRL's own step with it (--framework
  // hf-trl --trl-loss); sweep and verify measure the engine, whose loss it does not change.
  std::string trl_loss;
  bool trl_loss_by_default = false;
};

// Limits of the shape options: far above any real run, low enough that every byte count the plan
// computes stays in int64.
inline constexpr int64_t kMaxSeqLen = int64_t{1} << 20;
inline constexpr int64_t kMaxBatch = int64_t{1} << 20;
inline constexpr int64_t kMaxStepTokens = int64_t{1} << 28;

enum class Command { kSweep, kVerify, kPlan };
// The defaults of each subcommand, kept here and nowhere else (the CLI's help prints them).
// sweep: gpt2-mini, T=128, batch 8, fixed lengths. verify: gpt2-tiny, T=64, batch 8, variable
// lengths (padding is what token normalization is about). plan: gpt2-124m, T=1024, batch 64.
WorkloadOptions workload_defaults(Command command);

// Throws UserError for values no run can use: non-positive T or batch, negative threads or
// memory limit, a negative chunk size or one without the chunked loss, a negative LoRA rank,
// LoRA options without a rank, a dropout outside [0, 1), --padding multiple:N with N <= 0, CUDA
// graphs with per-micro-batch padding, --eos-id without --tokens or with a lengths file or
// variable lengths, an --eos-id-less --tokens file with options that shape samples.
void validate_workload(const WorkloadOptions& workload);

// A sentence for the user when data options change nothing in this run ("" otherwise): packing or
// length grouping of samples that are all T tokens (--lengths fixed), padding of wrapped rows,
// which are always full (lengths.hpp's completion_only_loss_note says the same of
// --completion-only-loss false).
std::string idle_data_options_note(const WorkloadOptions& workload);
// "" or the note that --weights-dtype changes nothing: a quantised base under --kbit-prep peft
// (the base is the same in any dtype, every other parameter upcast to fp32).
std::string idle_weights_dtype_note(const WorkloadOptions& workload);
// "" or the note that adamw-foreach's splits with the optimizer inside backward (--knobs,
// --optimizer-in-backward) step one tensor at a time, as adamw's do: each parameter steps alone
// as its gradient completes, and foreach kernels batch tensors only across a whole step.
std::string oib_foreach_note(const WorkloadOptions& workload);

// PEFT's prepare_model_for_kbit_training turns gradient checkpointing on by default
// (use_gradient_checkpointing=True): with --base-quant and no --activation-checkpointing given,
// every split is checkpointed. `checkpointing_given`: the user chose it.
void apply_base_quant_defaults(WorkloadOptions& workload, bool checkpointing_given);

// Every option as (name, value), for the report's context block.
std::vector<std::pair<std::string, std::string>> describe_workload(const WorkloadOptions& workload);
// The names describe_workload can give, in its order, those it gives only when not their default
// included (recorded_option supplies their defaults).
std::vector<std::string> workload_option_names();

// The sweep's optimizers in the order given: optimizer.kind, then grid.other_optimizers (a name
// given twice is kept once).
std::vector<OptimizerKind> grid_optimizers(const WorkloadOptions& workload);
// "adamw,adamw8bit"
// The threads a step runs on without --threads: OMP_NUM_THREADS where it is set, as PyTorch reads it
// (torchrun sets 1 for each of several processes), else every hardware thread.
int default_threads();
std::string join_optimizers(const std::vector<OptimizerKind>& optimizers);

// "fp32,bf16"
std::string join_precisions(const std::vector<Precision>& precisions);

// The sweep's weights dtypes in the order given: weights_dtype, then grid.other_weights_dtypes (a
// dtype given twice is kept once).
std::vector<Precision> grid_weights_dtypes(const WorkloadOptions& workload);
// The workload with its weights stored in `dtype` and no other dtype in its grid: one point of a
// --weights-dtype list, as the checks, the plan and the trainer settings take it.
WorkloadOptions with_weights_dtype(WorkloadOptions workload, Precision dtype);
// The same for the adapters: lora.adapter_dtype, then grid.other_adapter_dtypes; and the workload
// with its adapters in `dtype` alone.
std::vector<Precision> grid_adapter_dtypes(const WorkloadOptions& workload);
WorkloadOptions with_adapter_dtype(WorkloadOptions workload, Precision dtype);
// The same for padding: data_paddings (the first, then data.other_paddings); and the workload
// padded the one way `choice` says.
std::vector<PaddingChoice> grid_paddings(const WorkloadOptions& workload);
WorkloadOptions with_padding(WorkloadOptions workload, const PaddingChoice& choice);
// The same for packing: data.packing, then data.other_packings (a packing given twice is kept
// once); and the workload packed the one way `packing` says.
std::vector<Packing> data_packings(const DataSource& data);
std::vector<Packing> grid_packings(const WorkloadOptions& workload);
WorkloadOptions with_packing(WorkloadOptions workload, Packing packing);
// The same for grouping: data.group_by_length, then data.other_groupings; and the workload whose
// sampler groups (or not) as `grouped` says.
std::vector<bool> data_groupings(const DataSource& data);
std::vector<bool> grid_groupings(const WorkloadOptions& workload);
WorkloadOptions with_grouping(WorkloadOptions workload, bool grouped);
// Every packing × grouping of the grid, packings outermost (grid_jobs' order); and the workload with
// that one packing and grouping.
std::vector<StepRows> grid_step_rows(const WorkloadOptions& workload);
WorkloadOptions with_step_rows(WorkloadOptions workload, const StepRows& rows);
// The same for clipping: optimizer.max_grad_norm, then grid.other_max_grad_norms (0 for none); and
// the workload clipped at `norm` alone.
std::vector<double> grid_max_grad_norms(const WorkloadOptions& workload);
WorkloadOptions with_max_grad_norm(WorkloadOptions workload, double norm);
// Whether any job of the workload clips (a norm above 0 in the list).
bool grid_clips(const WorkloadOptions& workload);
// "0,1": each norm exactly as format_number writes it (it reads back to the same double).
std::string join_norms(const std::vector<double>& norms);
// A split's clipping in its label's words: "clip1", "clip0.5"; "no-clip" for 0.
std::string clipping_word(double max_grad_norm);

}  // namespace accumbench
