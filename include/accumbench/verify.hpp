// `accumbench verify`: from identical weights and data, one optimizer step with the whole batch
// and one with each split of the workload's grid; the gradients and the updated weights must
// agree within a tolerance stated per precision.
//
//   WorkloadOptions w = workload_defaults(Command::kVerify);   // gpt2-tiny, variable lengths
//   VerifyResult r = run_verify(w);
//   print_verify(r, std::cout);      // report.hpp; exit code 1 when !r.all_pass
//
//   VerifyOptions o{w, /*export_dir=*/"ref"};  // also write the weights, the batch and the
//   run_verify(o);                              // reference step for bench/reference/ (docs/EXPORT.md)
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "accumbench/options.hpp"
#include "accumbench/plan.hpp"
#include "accumbench/result.hpp"

namespace accumbench {

// Tolerances on the relative L2 error of the gradient, per precision, and the justification.
// fp32: summation order differs between splits, so errors are a few float32 ulps of the
// accumulated sums: 1e-5 leaves a 10× margin over what we measure. bf16/fp16 autocast rounds every
// activation to 8 (bf16) or 11 (fp16) mantissa bits, and a different micro-batch changes which
// kernel tiles and reductions are used: 3e-2.
double gradient_tolerance(Precision precision);
// Relative L2 error of the weight update (w_after − w_before) against the whole batch's update.
// AdamW's first update is lr·g/(|g|+eps), whose slope at g ≈ 0 is lr/eps: a gradient element
// that is zero up to rounding can flip sign and move by 2·lr, so the update is checked in L2
// (a few flipped elements stay small) and not element by element, and over the elements whose
// whole-batch gradient is not zero up to the gradient's bar (|g| above the gradient tolerance
// times its tensor's RMS gradient): those may take either sign, the gradient's bar judges them,
// and below eps ≈ 1e-11 they alone took fp32's update error past 1e-2. Flips come from the elements
// within the gradient's rounding noise of zero, so their share grows with the gradient error ε,
// and the update error as 2·sqrt(c·ε) (c: how many gradients sit near zero; measured 0.2–1.3).
// The bar follows from the gradient's: fp32 1e-2 (measured rounding-level errors up to 1.5e-3:
// the chunked loss on gpt2-tiny at T=48, variable lengths, on an AVX2 CPU whose OpenBLAS kernels
// sum in another order than AVX-512's; gpt2-mini gave 2.9e-4 there, 1.3e-4 on an AVX-512 machine;
// a real error, mean-of-means on variable lengths, gives 0.45–0.65). bf16/fp16: 0.25 (measured up to 0.15 at a 2.6e-2 gradient
// error, the chunked loss on gpt2-mini; mean-of-means 0.5–0.65). The same for every
// --optimizer: verify compares one step from fresh state, and bitsandbytes' 8-bit AdamW updates
// the weights with the fp32 moments before it quantises them, so its first update is AdamW's
// (measured: tests/test_optimizers.cpp, Optimizers.VerifyPassesWithEveryOptimizer); its
// quantisation enters from the second step on, where a split's rounding-level gradient
// difference moves the update by at most what Optimizers.QuantisedStateKeepsSplitsTogether states.
double update_tolerance(Precision precision);
// The precision verify judges a step by, what its matmuls run in: autocast's (`precision`), else
// the stored weights' (bf16 or fp16 weights compute in that dtype without autocast, adapters'
// gradients included, since they flow back through the frozen base); a quantised base is
// dequantised to fp32 and its other parameters are fp32 (prepare_model_for_kbit_training). bf16
// adapters (--adapter-dtype) run their products in bf16 and sum their gradients in it.
inline Precision verify_compute_precision(Precision precision, Precision weights_dtype, const LoraOptions& lora) {
  if (precision != Precision::kFp32) return precision;
  if (lora.enabled() && lora.adapter_dtype != Precision::kFp32) return lora.adapter_dtype;
  return lora.quantized() ? Precision::kFp32 : weights_dtype;
}

struct VerifySplit {
  SplitConfig config;
  double loss = 0;
  double max_abs_grad_diff = 0;
  double rel_l2_grad_error = 0;
  double max_weight_diff = 0;       // reported, not judged (see update_tolerance)
  double rel_l2_update_error = 0;
  // With clipping (--max-grad-norm): the global norm the split's clip measured on its accumulated
  // gradients, and its relative error against the reference's, judged at the gradient's bar: a clip
  // that measured something else (a micro-batch's gradients, one rank's) shows here, where AdamW's
  // first update, hardly moved by a common scale, would hide it. NaN without clipping.
  double grad_norm = std::numeric_limits<double>::quiet_NaN();
  double rel_grad_norm_error = std::numeric_limits<double>::quiet_NaN();
  // False for the optimizer inside backward: each gradient is freed once its parameter stepped, so
  // the split is judged on its loss and its update alone.
  bool gradients_compared = true;
  // Mean-of-means: how far the split weights a target token from the whole batch's 1/N at most,
  // |N/(W·k·n_j) − 1| over the k micro-batches of n_j targets of each of W ranks; 0 when every
  // micro-batch holds N/(W·k), where both normalizations give one update. Above 0 the split computes
  // another update by construction, and fails even where the precision's bar cannot resolve it (bf16).
  double normalization_skew = 0;
  // Mean-of-means: its micro-batches (every rank's) without a target, whose loss the average counts as
  // 0 (the engine's; PyTorch's mean over no target is NaN).
  int64_t micro_batches_without_target = 0;
  bool pass = false;
  // Its errors are within the tolerances (pass, but for a skewed normalization).
  bool within_tolerance = false;
};

// What verify runs: the workload, and where to export the reference step, if anywhere.
struct VerifyOptions {
  WorkloadOptions workload;
  // When not empty: the directory (created if missing) that receives the initial weights by
  // parameter name, the batch (inputs, targets, attention mask), the model config and the
  // reference step's loss and gradients, as raw little-endian tensors with an index.json
  // (docs/EXPORT.md), so that a PyTorch reference (bench/reference/) can recompute the step.
  std::string export_dir;
};

struct VerifyResult {
  std::string model;
  int64_t parameters = 0;
  int64_t trainable_parameters = 0;  // the adapters' with LoRA
  Precision weights_dtype = Precision::kFp32;
  OptimizerKind optimizer = OptimizerKind::kAdamW;  // --optimizer: whose update is compared
  LoraOptions lora;               // with LoRA, B is drawn non-zero (so that gradients reach A)
  double dropout_off = 0;         // --lora-dropout as given, which verify turns off (random masks)
  int64_t seq_len = 0;
  int64_t batch = 0;
  int64_t tokens = 0;             // non-ignored targets in the step
  Precision precision = Precision::kFp32;
  LengthMode lengths = LengthMode::kFixed;
  DataSource data;                // lengths file, padding, grouping, packing as given
  // A lengths file's samples and how many were cut to T (-1: none cut, wrapped rows run on), as
  // the sweep's context line counts them; 0 samples without a file.
  int64_t samples = 0;
  int64_t samples_cut = 0;
  // Over the whole lengths file, when its rows mask labels: "completion_mask keeps 293 of 1,021
  // targets (28.7 %)" (SampleSource::masking); "" otherwise.
  std::string label_masking;
  // Every sequence of the step holds the same number of targets (fixed lengths; wrapped rows; a
  // lengths file whose samples all reach T): then any normalization gives the same update.
  bool equal_sequences = false;
  LossNormalization loss_normalization = LossNormalization::kToken;
  int world_size = 1;             // data-parallel ranks that ran the splits
  double reference_loss = 0;      // loss of the whole batch in one micro-batch
  // --max-grad-norm (0: no clipping), and the reference step's gradient norm before clipping
  // (NaN without clipping): above max_grad_norm every update was scaled by their ratio.
  double max_grad_norm = 0;
  double reference_grad_norm = std::numeric_limits<double>::quiet_NaN();
  double gradient_tolerance = 0;
  double update_tolerance = 0;
  std::vector<VerifySplit> splits;
  bool all_pass = true;
  std::string export_dir;         // where the reference step was exported; empty when not
  Interruption interruption;      // a signal stopped it between splits: its name, the splits not verified
  // A job of the lists: the options that tell it from the others ("--max-grad-norm 0 --padding
  // max", job_flags); "" with one job.
  std::string job;
  // --distinct-steps: the step of the data verified (0-based) and how many of its job's are.
  int step = 0;
  int steps = 1;
};

// What verify holds at its peak (src/sweep/verify_memory.cpp): the training step of its largest
// micro-step (the reference: the whole batch at once; plan_memory), a copy of the initial weights
// on the device, and on the host the fp64 copies it compares: the initial weights, the
// reference's gradients and updated weights, one split's, and the comparison's temporaries.
struct VerifyMemory {
  int64_t step_bytes = 0;          // plan_memory's peak, the largest over the reference and the splits
  int64_t initial_copy_bytes = 0;  // the initial weights, kept on the device to restart each split
  int64_t snapshot_bytes = 0;      // the fp64 copies on the host
  // What the host holds: the snapshots, and on the CPU the step and the copy too.
  int64_t host_bytes(bool cuda) const { return snapshot_bytes + (cuda ? 0 : step_bytes + initial_copy_bytes); }
};
// `plan` as sweep_plan_options gives it for verify's device (its batch is set to the whole batch).
VerifyMemory verify_memory(const ModelConfig& model, PlanOptions plan, const WorkloadOptions& workload,
                           int world_size);
// UserError, one sentence, when the host (host_available_bytes) or the CUDA device (device_bytes,
// 0: not CUDA) cannot hold it, instead of being killed by the out-of-memory killer.
void require_verify_fits(const VerifyMemory& memory, const std::string& model, bool cuda, int64_t device_bytes,
                         int64_t host_available_bytes);

// The splits are split_grid(workload) (one job of the lists; grid.knobs is not a verify option) against
// the whole batch in one micro-step with the plain loss head, on the data's first step (run_verify_jobs
// verifies each of --distinct-steps). Throws UserError on bad options.
VerifyResult run_verify(const VerifyOptions& options);
inline VerifyResult run_verify(const WorkloadOptions& workload) { return run_verify(VerifyOptions{workload, {}}); }
// verify of a workload's lists (--precision, --optimizer, --weights-dtype, --adapter-dtype,
// --max-grad-norm): each job of grid_jobs on its own, its splits against its own reference (two
// jobs compute different updates), in the grid's order; every job is checked before the first runs. A signal stops after
// the job it interrupted: the results end there. --export takes one job. With --distinct-steps each
// job is verified on each step of the data (a result per job and step, steps within a job). `on_job`, when given, has
// each job's result as the job ends (the CLI prints it then, not after the last job).
std::vector<VerifyResult> run_verify_jobs(const VerifyOptions& options,
                                          const std::function<void(const VerifyResult&)>& on_job = {});

// The model alone as `verify --export`'s index.json holds it ({"model": {...}}, docs/EXPORT.md):
// what bench/reference/step_bench.py and hf_real_step.py read for a shape, without the weights
// (`accumbench models --index`).
std::string model_index_json(const ModelConfig& model);

}  // namespace accumbench
