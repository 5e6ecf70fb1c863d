// The memory plan: what one optimizer step keeps alive, one line per tensor group with its
// formula and the reason it is alive (llm.c's activation table), the predicted peak per phase,
// the largest micro-batch that fits and which splits of a batch fit. Pure arithmetic on the
// model's shape: no LibTorch here, nothing is allocated.
//
//   PlanOptions o;                                   // T, batch, attention kind, device kind
//   o.seq_len = 1024; o.batch = 64; o.attention = AttentionKind::kFlash; o.cpu = false;
//   SplitConfig split; split.micro_batch = 8; split.accum_steps = 8; split.precision = Precision::kBf16;
//   MemoryPlan plan = plan_memory(find_preset("gpt2-124m"), o, split);
//   plan.peak_bytes;                                 // predicted peak, plan.peak_phase holds it
//   print_plan(plan, std::cout);                     // the table (report.hpp)
//
// The calibrated prediction (src/plan/calibrate.cpp, in accumbench_core because it measures)
// corrects the analytic plan with a line through two measured probes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "accumbench/model_config.hpp"
#include "accumbench/result.hpp"

namespace accumbench {

// How attention is computed, which decides what it saves for backward (compat::causal_attention):
// kExplicit (LibTorch 1.x): softmax(QKᵀ/√d + mask)·V saves the (b, H, T, T) probabilities;
// kFlash (LibTorch 2.x scaled_dot_product_attention): saves only the output and the logsumexp.
enum class AttentionKind { kExplicit, kFlash };
std::string to_string(AttentionKind kind);                        // "explicit" | "flash"
AttentionKind attention_kind_from_string(const std::string& text);  // UserError on others

// What does not change between the splits of one batch.
// What runs around the training step's math (plan --framework): accumbench's own loop, or HF
// Trainer + TRL's SFTTrainer (bench/reference/hf_trl.py cites each line of transformers,
// accelerate, TRL).
enum class PlanFramework { kPlain, kHfTrl };
std::string to_string(PlanFramework framework);  // "plain", "hf-trl"
PlanFramework plan_framework_from_string(const std::string& text);  // UserError otherwise

// TRL's SFTConfig.loss_type under --framework hf-trl. "nll": the model's loss on the full logits,
// which the per-step metrics then hold and copy. "chunked_nll" (TRL's default since v1.7.0): the
// forward stops at the final norm; the head and the loss run in checkpointed chunks of 256 valid
// tokens, recomputed in backward; never the full logits.
enum class TrlLoss { kNll, kChunkedNll };
std::string to_string(TrlLoss loss);                 // "nll", "chunked_nll"
TrlLoss trl_loss_from_string(const std::string& text);  // UserError otherwise
inline constexpr int64_t kTrlChunkTokens = 256;      // TRL's _CHUNKED_LM_HEAD_CHUNK_SIZE

// What the data's rows decide of a plan (one packing's rows of the samples, each padding of them):
// PlanOptions holds the planned job's, and with a --packing list each packing's too.
struct PlannedRows {
  // Real data with per-micro-batch padding: the positions of the longest padded micro-batch of
  // the whole lengths file (worst_micro_batch in lengths.hpp), which a real run meets sooner or
  // later; activations are planned for it, the host token batches still for seq_len. 0: seq_len.
  int64_t activation_seq_len = 0;
  std::string worst_micro_batch;  // which micro-batch that is, in words; empty without real data
  // For each padding of a --padding list (PlanOptions::padding), the two fields above as that
  // padding gives them (max: 0 and ""), which plan_options_for copies for a split padded that way;
  // the fields above then name every padding of the list at once (a header's words).
  struct PaddedWorst {
    PaddingChoice padding;
    int64_t activation_seq_len = 0;
    std::string worst_micro_batch;
  };
  std::vector<PaddedWorst> worst_by_padding;
  // With a --padding list of paddings per micro-batch: the words naming every padding's at once
  // ("…, padded to 64 (--padding max), 40 (--padding longest)"), which plan_options_for keeps;
  // "" otherwise.
  std::string worst_micro_batch_every_padding;
  // Rows of samples (no packing): the activation length were each micro-batch padded to its longest
  // sample (--padding longest, TRL's collator): the same update, which changes_to_fit offers where
  // it is shorter than T. 0 where every row reaches T or no samples were read.
  int64_t longest_padding_activation_seq_len = 0;
  // --packing bfd: rows of T holding several documents, with positions (b, T) and, for explicit
  // attention, one block-diagonal mask per micro-step instead of each block's (T, T) causal mask.
  bool packed_documents = false;
  // Where counted rows are gathered (PlanOptions::counted_rows_gathered), [i]: the most targets any
  // i + 1 rows of the data count (a lengths file's samples,
  // one per row, or with --packing bfd the rows packed of them, largest first; at most the batch's
  // count of them): no micro-batch of b gathers more than [b - 1] rows, or with a shorter source,
  // repeated, (b / m)·[m - 1] + [b % m - 1]. Empty: T − 1 per row (variable lengths, wrapped rows).
  std::vector<int64_t> most_counted_targets;
  // --group-by-length, one order, one process, rows of samples: the source's sample lengths (cut to
  // T) in the order a grouped epoch visits them, `grouped_step` to a step. A grouped step holds its
  // longest samples first, so each split is planned by where its micro-batches fall (plan_memory):
  // a step's first micro-batch before any gradient exists, the later ones with the gradients at
  // their own longest. Empty: every micro-batch as the longest of the data, with the gradients.
  std::vector<int64_t> grouped_lengths;
  int64_t grouped_step = 0;
};

struct PlanOptions : PlannedRows {
  int64_t seq_len = 1024;
  int64_t batch = 64;  // effective batch, in sequences
  AttentionKind attention = AttentionKind::kExplicit;
  // CPU: the host token batches are device memory too (DataOptions::distinct_batches of them,
  // each the whole step's inputs and targets). CUDA: only one micro-batch's copy is on the device.
  bool cpu = true;
  int token_batches = kDistinctBatchesByDefault;
  // Data parallel on the CPU: every rank keeps the whole step's batches (the global batch), and a
  // split with more than one micro-batch per rank deals its share as copies, which a sweep keeps for
  // all its rounds: the batches those copies hold, over every such split of the grid
  // (count_dealt_shares). 0 in one process.
  int dealt_batches = 0;
  // Autograd formulas differ between LibTorch 1.x and 2.x (mean's backward keeps its input on 1.x).
  int libtorch_major = 1;
  // Data-parallel ranks. Above 1 the all-reduce buckets copy the gradients at the end of the
  // last backward (batch is then one rank's share).
  int world_size = 1;
  // Tokens per chunk of the chunked loss (--loss-chunk-tokens); 0: loss_chunk_tokens()'s rule.
  int64_t loss_chunk_tokens = 0;
  // The weights' storage dtype and LoRA (options.hpp): what is frozen, what trains.
  Precision weights_dtype = Precision::kFp32;
  LoraOptions lora;
  // --optimizer: its state and its step's temporaries (accumbench/optimizer_state.hpp).
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  // --max-grad-norm; above 0 the optimizer phase starts with clip_grad_norm_'s norms (clip_peak),
  // and the optimizer cannot step inside backward.
  double max_grad_norm = 0;
  bool clips_gradients() const { return max_grad_norm > 0; }
  // The padding of the job planned (plan_options_for sets it from the split's; --padding's list is
  // a grid dimension; PlannedRows::worst_by_padding holds each padding's longest micro-batch).
  PaddingChoice padding;
  // Rows of samples (not full windows): some targets do not count (each sample's last position,
  // padding, masked labels), so accumbench's chunked head gathers the rows that do (its order,
  // each chunk's gathered copy), as TRL's chunked_nll does; full windows are walked as views.
  bool counted_rows_gathered = false;
  // The packing of the job planned (plan_options_for sets it from the split's; --packing's list is a
  // grid dimension), and with a list each packing's PlannedRows, which plan_options_for copies for
  // a split packed that way.
  Packing packing = Packing::kNone;
  struct PackedRows {
    Packing packing = Packing::kNone;
    PlannedRows rows;
  };
  std::vector<PackedRows> rows_by_packing;
  // --framework hf-trl: TRL's loss and metrics replace accumbench's loss head (--trl-loss).
  PlanFramework framework = PlanFramework::kPlain;
  TrlLoss trl_loss = TrlLoss::kChunkedNll;
  // TRL's chunked_nll is planned (framework hf-trl with loss_type chunked_nll).
  bool trl_chunked() const { return framework == PlanFramework::kHfTrl && trl_loss == TrlLoss::kChunkedNll; }
  // The T of every activation formula.
  int64_t activation_length() const { return activation_seq_len > 0 ? activation_seq_len : seq_len; }
};

enum class PlanPhase : int { kForward = 0, kBackward, kOptimizer };
inline constexpr int kPlanPhaseCount = 3;
const char* plan_phase_name(PlanPhase phase);  // "forward", "backward", "optimizer"

// One tensor (or a group of identical tensors) with its size and why it is alive.
struct PlanLine {
  std::string name;     // "c_fc output (gelu input)"
  std::string formula;  // "L·b·T·dff·4"
  int64_t bytes = 0;
  std::string why;      // "saved by gelu's backward"
};

struct MemoryPlan {
  SplitConfig split;
  ModelConfig model;
  PlanOptions options;
  // Alive for the whole step: weights, optimizer moments, token batches.
  std::vector<PlanLine> resident;
  // Gradients: alive from the first backward to the optimizer's zero_grad (not with
  // optimizer-in-backward, where each one is freed right after its parameter steps).
  std::vector<PlanLine> gradients;
  // Saved for backward by one micro-step's forward, alive at the end of the forward.
  std::vector<PlanLine> saved;
  // Short-lived tensors on top of the above at the moment each phase peaks.
  std::vector<PlanLine> forward_peak;    // the loss head: logits and their fp32 copies (or one chunk's)
  // A block's forward at a moment with nothing of its own saved (`block_forward_what` says which):
  // LoRA's block 0 before anything requires grad, or the last block run without grad
  // (checkpointing), on top of what is saved before it; empty when it cannot happen.
  std::vector<PlanLine> block_forward_peak;
  std::string block_forward_what;
  // The last block's forward with grad at its highest moment (`last_block_forward_what`: the
  // attention's softmax, or a LoRA adapter's fp32 input copy), on top of what is saved before it.
  std::vector<PlanLine> last_block_forward_peak;
  std::string last_block_forward_what;
  // --framework hf-trl: after the loss, on top of everything the micro-step saved, the outputs
  // that compute_loss keeps and TRL's metrics on them (empty for plain).
  std::vector<PlanLine> framework_forward_peak;
  std::vector<PlanLine> backward_peak;   // gradients of the loss head, first node of backward
  std::vector<PlanLine> block_backward_peak;  // the last block's backward (recomputed with checkpointing)
  // QLoRA: the largest block weight dequantised for one forward or backward (src/plan/quantized_base.cpp),
  // on top of a block's forward and of the block backward's peak.
  std::vector<PlanLine> dequant_peak;
  std::vector<PlanLine> optimizer_peak;  // the optimizer's temporaries for the largest parameter
  // --max-grad-norm: the clipping's norms, alive before the optimizer steps (freed by then), on top
  // of the resident tensors and the gradients: the optimizer phase's peak is the larger of the two.
  std::vector<PlanLine> clip_peak;
  // paged-adamw8bit or paged-adamw32bit on CUDA: the part of the resident optimizer state in paged memory, which the
  // driver may evict to the host under pressure. peak_bytes counts it; peak_bytes − this is the
  // peak with it evicted (0 for every other optimizer and on the CPU).
  int64_t evictable_bytes = 0;

  std::array<int64_t, kPlanPhaseCount> phase_peak_bytes{};
  int64_t peak_bytes = 0;
  PlanPhase peak_phase = PlanPhase::kForward;
  // A grouped order's first micro-batch of a step (PlannedRows::grouped_lengths), planned apart: its
  // activation length and its forward and backward peaks, before any gradient exists, which
  // phase_peak_bytes include; 0 where every micro-batch of the split is planned alike (the tables
  // above are then the later micro-batches').
  int64_t first_micro_batch_length = 0;
  int64_t first_micro_batch_forward_bytes = 0;
  int64_t first_micro_batch_backward_bytes = 0;
};

// Bytes of the optimizer's state for what trains (the model, or its LoRA adapters), as the plan's
// resident lines count it: AdamW's moments in the weights' dtype, 8-bit codes and scales, none.
int64_t optimizer_state_total_bytes(const ModelConfig& cfg, const LoraOptions& lora, Precision weights_dtype,
                                    OptimizerKind kind);
// Of the workload's optimizers (grid_optimizers), the one with the smallest state: what every split
// of a sweep of several needs at least, and whose job the memory advice changes (at equal state the
// fused adamw before adamw-foreach, whose step copies what trains).
OptimizerKind lightest_optimizer(const ModelConfig& cfg, const WorkloadOptions& workload);

// Sum of a table's bytes.
int64_t total_bytes(const std::vector<PlanLine>& lines);

// The element sizes the plan's formulas use: w, the weights' and the residual stream's (fp32
// around a quantised base: prepare_model_for_kbit_training upcasts every parameter it does not
// quantise); c, the activations': autocast's dtype, else the weights' (bf16 weights compute in bf16).
struct PlanElementBytes {
  int64_t c = 4, w = 4;
};
PlanElementBytes plan_element_bytes(const PlanOptions& options, const SplitConfig& split);

// The plan of one split. Throws UserError on a bad precision, on fp16 on the CPU, or on
// optimizer-in-backward with accumulation.
MemoryPlan plan_memory(const ModelConfig& cfg, const PlanOptions& options, const SplitConfig& split);

// The largest micro-batch (any size, not only divisors of the batch) whose step fits in
// `memory_bytes` with accumulation (gradients alive during the later micro-steps' forward),
// with the given precision, activation checkpointing and loss head. 0 when not even 1 fits.
int64_t largest_micro_batch(const ModelConfig& cfg, const PlanOptions& options, Precision precision,
                            Checkpointing checkpointing, int64_t memory_bytes, bool chunked_loss = false);

// The options planned for one job of a workload's lists (or a split of it): its optimizer, its
// weights' dtype and its adapters' (the precision is the split's own, SplitConfig).
// Sets options.dealt_batches for a sweep of `workload`'s grid over options.world_size ranks on the
// CPU (0 otherwise): token_batches' distinct batches of each split's own packing, for each split
// with more than one micro-batch per rank.
void count_dealt_shares(PlanOptions& options, const WorkloadOptions& workload);
PlanOptions plan_options_for(PlanOptions options, const GridJob& job);
PlanOptions plan_options_for(const PlanOptions& options, const SplitConfig& split);

// One plan per point of split_grid(workload, options.world_size): the same grid a sweep of this
// workload measures (micro-batches, precisions, optimizers, dtypes, knobs, chunked loss), each
// split planned with its own options (plan_options_for).
std::vector<MemoryPlan> plan_splits(const ModelConfig& cfg, const PlanOptions& options, const WorkloadOptions& workload);

// Calibration: the analytic plan plus a line through the two probes' measured − predicted
// errors, so a constant the plan misses (allocator temporaries, a library's cache) and a
// per-sequence one both vanish.
struct Calibration {
  int64_t micro_batch_a = 0, micro_batch_b = 0;
  int64_t measured_a = 0, measured_b = 0;   // measured peaks of the probes
  int64_t predicted_a = 0, predicted_b = 0; // analytic peaks of the probes
  // error(b) = intercept + slope·b, in bytes.
  double intercept_bytes = 0;
  double slope_bytes = 0;
  int64_t predict(const MemoryPlan& plan) const;
};
Calibration fit_calibration(int64_t micro_batch_a, int64_t measured_a, int64_t predicted_a,
                            int64_t micro_batch_b, int64_t measured_b, int64_t predicted_b);

// Measured peak bytes of one optimizer step of `split` on `device` ("cpu" or "cuda:N"), after a
// warmup step, counted from before the model was built: weights, optimizer moments, token
// batches, activations, gradients, temporaries. Builds the model and runs two steps; lives in
// accumbench_core (src/plan/calibrate.cpp). `timeline` (optional) receives the measured step's phases.
int64_t measure_step_peak(const ModelConfig& cfg, const PlanOptions& options, const SplitConfig& split,
                          const std::string& device, std::vector<PhaseSpan>* timeline = nullptr);

// Two probes (split's knobs at micro-batches a and b, with the split's accumulation pattern)
// measured with measure_step_peak, fitted by fit_calibration. accumbench_core.
Calibration calibrate(const ModelConfig& cfg, const PlanOptions& options, const SplitConfig& split,
                      const std::string& device, int64_t micro_batch_a, int64_t micro_batch_b);

}  // namespace accumbench
