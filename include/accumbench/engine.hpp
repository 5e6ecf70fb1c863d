// One optimizer step as docs/ARCHITECTURE.md specifies: per micro-batch a summed cross-entropy
// over non-ignored targets divided by the token count of the WHOLE step, so every split computes
// the same gradient, also for variable-length padded batches.
//
//   Trainer trainer(model, torch::kCPU, TrainOptions{});
//   StepOptions step{/*micro_batch=*/4};
//   StepOutcome out = trainer.step(batch, step, &tracer);   // tracer: a PhaseObserver, optional
//   double loss = out.loss();                                // synchronizes
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "accumbench/data.hpp"
#include "accumbench/models.hpp"
#include "accumbench/result.hpp"

namespace accumbench {

namespace compat {
class ProcessGroup;  // src/compat/distributed.hpp
}

// Precision, LossNormalization and OptimizerOptions are in accumbench/options.hpp.
// The autocast dtype of a precision; none for fp32.
std::optional<at::ScalarType> autocast_dtype(Precision precision);

struct TrainOptions {
  Precision precision = Precision::kFp32;
  OptimizerOptions optimizer;
  // fp16 dynamic loss scaling (torch.cuda.amp.GradScaler's defaults).
  double initial_loss_scale = 65536.0;
  double loss_scale_growth_factor = 2.0;
  double loss_scale_backoff_factor = 0.5;
  int loss_scale_growth_interval = 2000;
};

struct StepOptions {
  int64_t micro_batch = 1;
  LossNormalization loss_normalization = LossNormalization::kToken;
  bool optimizer_in_backward = false;  // accumulation steps must be 1
  bool activation_checkpointing = false;
  // Replay each micro-step from CUDA graphs (forward and backward, captured once per micro-batch
  // shape). CUDA only; not with optimizer_in_backward.
  bool cuda_graphs = false;
  // Cross-entropy chunk by chunk of tokens with the head's gradients computed in the forward
  // (src/engine/chunked_loss.cpp): the (b·T, V) logits are never materialized.
  bool chunked_loss = false;
  int64_t loss_chunk_tokens = 0;  // tokens per chunk; 0: loss_chunk_tokens()'s rule
  // Each micro-batch is trimmed from T to its padded length (--padding; max keeps T): padding
  // sits at the end of each row, so the trimmed positions are pads whose targets are ignored.
  Padding padding = Padding::kMax;
  int64_t pad_multiple = 0;
};

// Copies --padding (the first of a list) into `step`; the second, one padding of the list.
void apply_padding(StepOptions& step, const DataSource& data);
void apply_padding(StepOptions& step, const PaddingChoice& padding);

// Observes phase boundaries of a step (src/trace implements it). micro_step is -1 for the
// optimizer phase. Called on the host thread, never inside a phase's work.
class PhaseObserver {
 public:
  virtual ~PhaseObserver() = default;
  virtual void begin(Phase phase, int micro_step) = 0;
  virtual void end(Phase phase, int micro_step) = 0;
};

struct StepOutcome {
  at::Tensor loss_sum;       // device scalar: Σ_k loss_k (already normalized), unscaled
  int64_t tokens = 0;        // non-ignored targets in the whole step
  int64_t accum_steps = 0;
  int64_t positions = 0;           // non-pad positions computed in the step, over every rank
  int64_t computed_positions = 0;  // positions computed in the step, padding included, over every rank
  bool skipped = false;      // fp16: gradients overflowed, no update (known after step())
  // With --max-grad-norm: the step's gradient norm before clipping (device scalar; undefined
  // without clipping or when an fp16 step was skipped).
  at::Tensor grad_norm;
  double loss() const;       // reads loss_sum (synchronizes)
};

class Optimizer;
class GraphedMicroStep;
class GradientReducer;

class Trainer {
 public:
  Trainer(LanguageModel model, c10::Device device, TrainOptions options);
  ~Trainer();

  // Forward and backward over every micro-batch of `batch` (phases data, h2d, forward, backward),
  // leaving the step's gradient in the parameters' .grad (unless optimizer_in_backward).
  // Throws UserError when batch % micro_batch != 0 or optimizer-in-backward meets accumulation.
  StepOutcome accumulate(const TokenBatch& batch, const StepOptions& options,
                         PhaseObserver* observer = nullptr);
  // Optimizer step (--optimizer) and zeroing of gradients (phase optimizer). With fp16, unscales and skips the step
  // on inf/nan. Clips first with TrainOptions::optimizer.max_grad_norm. Sets outcome.skipped and grad_norm.
  void optimizer_step(StepOutcome& outcome, const StepOptions& options,
                      PhaseObserver* observer = nullptr);
  // Validates `options` against this trainer and, with cuda_graphs, captures the graphs for the
  // micro-batch shape of `batch` (warmup micro-steps included) unless already captured, so that
  // capture does not land in a timed step. accumulate() calls it too.
  void prepare(const TokenBatch& batch, const StepOptions& options);
  // accumulate + optimizer_step.
  StepOutcome step(const TokenBatch& batch, const StepOptions& options,
                   PhaseObserver* observer = nullptr);

  // Data parallel: `batch` holds this rank's share of the step (see shard()), and accumulate()
  // sums the gradients over the group's ranks once per step, as DDP with no_sync() on the other
  // micro-steps does: 25 MiB buckets start their all-reduce during the last micro-step's
  // backward as their gradients complete, and phase allreduce (micro_step -1) is the wait for
  // what backward did not hide. The step's loss is summed too. nullptr (the default): one process.
  // A step that fails on some ranks (out of memory, an exception in forward or backward) keeps
  // the ranks' collectives matched and ends on every rank with the same compat::RankFailure
  // (a UserError stays one on the rank that raised it); a failure in the optimizer step, after the
  // ranks agreed, ends the run (FatalRunError), as the others could not learn of it.
  void set_process_group(compat::ProcessGroup* group, int64_t bucket_bytes = 25 << 20);
  // Buckets whose all-reduce started inside the last step's backward (0 without data parallel).
  size_t overlapped_buckets() const;

  // Drops gradients and the optimizer's moments and step counts (as if freshly built).
  void reset_optimizer();
  // Steps from now on run in `precision` (autocast dtype, fp16 loss scaling); the weights and the
  // optimizer's state stay, so one trainer serves every split of a sweep's rounds.
  void set_precision(Precision precision);
  // Steps from now on use the optimizer `kind`: a different one replaces the current one, whose
  // state is freed first, with fresh state (as reset_optimizer; gradients dropped); the same one
  // changes nothing. One trainer serves a sweep of several optimizers so.
  void set_optimizer(OptimizerKind kind);
  // Steps from now on clip their gradients to this global norm (0: not at all); nothing else
  // changes (a step with the optimizer inside backward refuses a norm above 0, as it does at build).
  void set_max_grad_norm(double max_grad_norm);

  LanguageModel& model() { return model_; }
  c10::Device device() const { return device_; }
  const TrainOptions& options() const { return options_; }
  double loss_scale() const { return loss_scale_; }

  int64_t parameter_bytes() const;            // every parameter, frozen or not
  int64_t trainable_parameter_bytes() const;  // those with gradients and optimizer state
  int64_t gradient_bytes() const;        // bytes of currently defined .grad tensors
  int64_t optimizer_state_bytes() const;
  // Bytes held by the captured graphs' private pool (0 without graphs): activations that the
  // caching allocator does not count as allocated while graphs replay.
  int64_t graph_pool_bytes() const;
  // Frees the captured CUDA graphs (their pool and the activations they keep) and gives eager
  // steps AccumulateGrad nodes on their own stream again. A no-op without graphs.
  void release_graphs();

 private:
  void run_optimizer(bool gradients_finite);
  // (Re)creates the post-accumulate-grad hooks, and with them the parameters' AccumulateGrad
  // nodes, on the current stream (see GraphedMicroStep's on_capture_stream).
  void install_backward_hooks();
  StepOutcome micro_steps(const TokenBatch& batch, const StepOptions& options, PhaseObserver* observer);
  // counted: the micro-batch's targets that are not ignored (the chunked head gathers those rows).
  at::Tensor micro_step_loss(const at::Tensor& host_inputs, const at::Tensor& host_targets,
                             const RowDocuments& documents, int64_t counted, double divisor, bool last,
                             const StepOptions& options, PhaseObserver* observer, int micro_step);

  LanguageModel model_;
  c10::Device device_;
  TrainOptions options_;
  std::vector<at::Tensor> params_;
  std::vector<bool> decays_;  // weight_decay_flags(params_): the Trainer's decayed group
  std::unique_ptr<Optimizer> optimizer_;  // TrainOptions::optimizer.kind (src/engine/optimizer.hpp)
  std::unique_ptr<GraphedMicroStep> graphed_;  // with StepOptions::cuda_graphs
  compat::ProcessGroup* group_ = nullptr;      // not owned
  std::unique_ptr<GradientReducer> reducer_;   // with a group of more than one rank
  std::vector<std::shared_ptr<void>> backward_hooks_;
  bool step_in_backward_ = false;  // read by the post-accumulate-grad hooks
  double loss_scale_ = 1.0;
  bool fp16_scale_started_ = false;
  int steps_since_backoff_ = 0;
};

// The step options of one grid point (micro-batch and knobs of `split`).
StepOptions step_options_for(const SplitConfig& split, LossNormalization normalization = LossNormalization::kToken,
                             int64_t loss_chunk_tokens = 0);

// Throws UserError when the weights cannot be stored in `dtype` on `device`: fp16 on the CPU
// (LibTorch 1.13's CPU matrix products have no fp16 kernels).
void require_weights_dtype_runs_on(Precision dtype, c10::Device device);

// Throws UserError unless `device` is CUDA (--cuda-graphs replays GPU kernels).
void require_cuda_for_graphs(c10::Device device);

// Resolves "auto" | "cpu" | "cuda" | "cuda:N". Throws UserError for cuda without a GPU. With
// data parallel (WORLD_SIZE > 1) "cuda" and "auto" mean cuda:LOCAL_RANK.
c10::Device resolve_device(const std::string& name);

}  // namespace accumbench
