#include <torch/torch.h>

#include <algorithm>

#include "accumbench/engine.hpp"
#include "accumbench/error.hpp"
#include "accumbench/lengths.hpp"
#include "compat/compat.hpp"
#include "compat/distributed.hpp"
#include "engine/optimizer.hpp"
#include "engine/cuda_graph.hpp"
#include "engine/gradient_clipping.hpp"
#include "engine/gradient_reducer.hpp"
#include "engine/micro_step.hpp"
#include "models/adapted_linear.hpp"

namespace accumbench {

std::optional<at::ScalarType> autocast_dtype(Precision precision) {
  switch (precision) {
    case Precision::kFp32: return std::nullopt;
    case Precision::kBf16: return at::kBFloat16;
    case Precision::kFp16: return at::kHalf;
  }
  return std::nullopt;
}

StepOptions step_options_for(const SplitConfig& split, LossNormalization normalization, int64_t loss_chunk_tokens) {
  StepOptions step;
  step.micro_batch = split.micro_batch;
  step.loss_normalization = normalization;
  step.optimizer_in_backward = split.optimizer_in_backward;
  step.activation_checkpointing = split.activation_checkpointing == Checkpointing::kBlocks;
  step.cuda_graphs = split.cuda_graphs;
  step.chunked_loss = split.chunked_loss;
  step.loss_chunk_tokens = loss_chunk_tokens;
  return step;
}

void apply_padding(StepOptions& step, const DataSource& data) { apply_padding(step, padding_of(data)); }

void apply_padding(StepOptions& step, const PaddingChoice& padding) {
  step.padding = padding.padding;
  step.pad_multiple = padding.multiple;
}

c10::Device resolve_device(const std::string& name) {
  if (name == "cpu") return c10::Device(c10::kCPU);
  if (name == "auto") return compat::cuda_available() ? resolve_device("cuda") : c10::Device(c10::kCPU);
  if (name == "cuda" || name.rfind("cuda:", 0) == 0) {
    if (!compat::cuda_available()) {
      throw UserError(std::string("--device ") + name + " was asked for but no CUDA GPU is available" +
                      (compat::built_with_cuda() ? "" : " (this build uses a CPU-only LibTorch)") +
                      "; use --device cpu or run on a machine with a GPU");
    }
    if (name == "cuda") {  // data parallel (torchrun): each rank on its own GPU
      const compat::LaunchEnvironment launch = compat::launch_environment();
      return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(launch.world_size > 1 ? launch.local_rank : 0));
    }
    return c10::Device(name);
  }
  throw UserError("unknown --device \"" + name + "\"; use auto, cpu, cuda or cuda:N");
}

void require_cuda_for_graphs(c10::Device device) {
  if (device.is_cuda()) return;
  throw UserError("--cuda-graphs needs --device cuda (a graph replays GPU kernels), but the device is " +
                  device.str() + "; drop the option or run on a GPU");
}

void require_weights_dtype_runs_on(Precision dtype, c10::Device device) {
  const std::string problem = weights_dtype_device_problem(dtype, device.is_cuda(), /*planning=*/false);
  if (!problem.empty()) throw UserError(problem);
}

double StepOutcome::loss() const { return loss_sum.defined() ? loss_sum.item<double>() : 0.0; }

Trainer::Trainer(LanguageModel model, c10::Device device, TrainOptions options)
    : model_(std::move(model)), device_(device), options_(options) {
  if (options_.precision == Precision::kFp16 && !device_.is_cuda()) {
    throw UserError("fp16 needs a CUDA device (autocast with loss scaling); use bf16 or fp32 on the CPU");
  }
  model_->to(device_);
  model_->train();
  model_->set_autocast_dtype(autocast_dtype(options_.precision));
  params_ = trainable_parameters(*model_);  // with LoRA only the adapters: no .grad, no moments for the base
  TORCH_CHECK(!params_.empty(), "a model without trainable parameters");
  decays_ = weight_decay_flags(*model_);  // the Trainer's two parameter groups
  optimizer_ = make_optimizer(params_, options_.optimizer, decays_);
  if (options_.precision == Precision::kFp16) loss_scale_ = options_.initial_loss_scale;
  fp16_scale_started_ = options_.precision == Precision::kFp16;
  install_backward_hooks();
}

// Optimizer-in-backward: each parameter steps as soon as its gradient is complete, and the
// gradient is freed at once, so the full set of gradients is never alive together.
void Trainer::install_backward_hooks() {
  backward_hooks_.clear();  // the old AccumulateGrad nodes go with their last holder
  for (size_t i = 0; i < params_.size(); ++i) {
    backward_hooks_.push_back(compat::add_post_accumulate_grad_hook(params_[i], [this, i](const at::Tensor& param) {
      if (reducer_) reducer_->on_gradient_ready(i);  // data parallel: overlap the all-reduce
      if (!step_in_backward_) return;
      optimizer_->step_one(i);
      const_cast<at::Tensor&>(param).mutable_grad().reset();
    }));
  }
}

Trainer::~Trainer() = default;

namespace {
struct PhaseScope {
  PhaseScope(PhaseObserver* observer, Phase phase, int micro_step)
      : observer_(observer), phase_(phase), micro_step_(micro_step) {
    if (observer_ != nullptr) observer_->begin(phase_, micro_step_);
  }
  ~PhaseScope() {
    if (observer_ != nullptr) observer_->end(phase_, micro_step_);
  }
  PhaseObserver* observer_;
  Phase phase_;
  int micro_step_;
};
}  // namespace

at::Tensor summed_cross_entropy(LanguageModelImpl& model, const at::Tensor& inputs, const at::Tensor& targets,
                                c10::DeviceType device_type, std::optional<at::ScalarType> autocast, bool chunked,
                                int64_t chunk_tokens, const RowDocuments& documents, int64_t counted) {
  if (chunked) {
    at::Tensor hidden;  // (b, T, C)
    {
      compat::AutocastGuard guard(device_type, autocast);
      hidden = model.final_hidden(inputs, documents);
    }
    return chunked_cross_entropy(hidden, model.head_weight(), targets, autocast, chunk_tokens, counted);
  }
  at::Tensor logits;  // (b, T, V)
  {
    compat::AutocastGuard guard(device_type, autocast);
    logits = model.forward(inputs, documents);
  }
  at::Tensor flat = logits.reshape({-1, logits.size(-1)});  // (b·T, V)
  if (flat.scalar_type() != at::kFloat) flat = flat.to(at::kFloat);
  return at::cross_entropy_loss(flat, targets.reshape({-1}), /*weight=*/{}, at::Reduction::Sum, kIgnoreIndex);
}

void Trainer::prepare(const TokenBatch& batch, const StepOptions& options) {
  const int64_t micro = options.micro_batch;
  const int64_t accum = accumulation_steps(batch.sequences(), micro);
  if (options.optimizer_in_backward) {
    if (accum != 1) {
      throw UserError("--optimizer-in-backward needs accumulation steps = 1 (micro-batch = batch), but " +
                      std::to_string(batch.sequences()) + " / " + std::to_string(micro) + " = " +
                      std::to_string(accum) + "; drop the option or use micro-batch " +
                      std::to_string(batch.sequences()));
    }
    if (options_.precision == Precision::kFp16) {
      throw UserError("--optimizer-in-backward cannot be combined with fp16 loss scaling (an overflow is only known after every parameter stepped); use bf16");
    }
    require_no_clipping_in_backward(options_.optimizer.max_grad_norm);
  }
  if (options.optimizer_in_backward && group_ != nullptr) require_one_rank_for_optimizer_in_backward(group_->world_size());
  model_->set_activation_checkpointing(options.activation_checkpointing);
  const bool packed = !batch.documents.empty();
  if (packed && device_.is_cuda() && compat::libtorch_major_version() >= 2 && options_.precision == Precision::kFp32) {
    throw UserError("--packing bfd on CUDA runs the variable-length flash kernel, which has no fp32; use --precision bf16 or fp16");
  }
  if (!options.cuda_graphs) {
    release_graphs();  // eager steps may reset the gradients the graphs write to
    return;
  }
  require_cuda_for_graphs(device_);
  if (options.padding != Padding::kMax) {
    throw UserError("--cuda-graphs replays one fixed micro-batch shape, but per-micro-batch padding changes it; use --padding max with --cuda-graphs");
  }
  if (packed) {
    throw UserError("--cuda-graphs replays one fixed attention layout, but every packed micro-batch has its own documents; use --packing none or wrapped with --cuda-graphs");
  }
  if (options.optimizer_in_backward) {
    throw UserError("--cuda-graphs cannot be combined with --optimizer-in-backward (the optimizer step inside backward would be frozen into the graph); drop one of them");
  }
  const GraphedMicroStep::Shape shape{micro, batch.inputs.size(1), options.activation_checkpointing,
                                      options.chunked_loss, options.loss_chunk_tokens};
  if (graphed_ && graphed_->shape() == shape) return;
  release_graphs();  // the previous shape's pool and workspaces go before the next capture
  step_in_backward_ = false;
  backward_hooks_.clear();  // their nodes are recreated on the capture stream
  try {
    graphed_ = std::make_unique<GraphedMicroStep>(
        *model_, params_, device_, autocast_dtype(options_.precision), options_.precision == Precision::kFp16, shape,
        batch.inputs.narrow(0, 0, micro), batch.targets.narrow(0, 0, micro), [this] { install_backward_hooks(); });
  } catch (...) {
    install_backward_hooks();  // a failed capture leaves the eager steps their hooks
    throw;
  }
}

// One micro-step's copy to the device, forward and backward (replayed from CUDA graphs when
// captured); returns its loss, normalized and unscaled.
at::Tensor Trainer::micro_step_loss(const at::Tensor& host_inputs, const at::Tensor& host_targets,
                                    const RowDocuments& documents, int64_t counted, double divisor, bool last,
                                    const StepOptions& options, PhaseObserver* observer, int micro_step) {
  const double loss_scale = options_.precision == Precision::kFp16 ? loss_scale_ : 1.0;
  at::Tensor loss;
  if (graphed_) {
    {
      PhaseScope scope(observer, Phase::kH2D, micro_step);
      graphed_->load(host_inputs, host_targets, divisor, loss_scale);
    }
    {
      PhaseScope scope(observer, Phase::kForward, micro_step);
      graphed_->forward();
    }
    {
      PhaseScope scope(observer, Phase::kBackward, micro_step);
      graphed_->backward();
    }
    loss = graphed_->loss().detach().clone();  // the next replay overwrites the graph's output
  } else {
    at::Tensor inputs, targets;
    {
      PhaseScope scope(observer, Phase::kH2D, micro_step);
      inputs = host_inputs.to(device_, /*non_blocking=*/device_.is_cuda());
      targets = host_targets.to(device_, /*non_blocking=*/device_.is_cuda());
    }
    {
      PhaseScope scope(observer, Phase::kForward, micro_step);
      loss = summed_cross_entropy(*model_, inputs, targets, device_.type(), autocast_dtype(options_.precision),
                                  options.chunked_loss, options.loss_chunk_tokens, documents, counted) /
             divisor;
    }
    {
      PhaseScope scope(observer, Phase::kBackward, micro_step);
      if (reducer_ && last) reducer_->arm();  // the step's last backward
      (options_.precision == Precision::kFp16 ? loss * loss_scale : loss).backward();
    }
    loss = loss.detach();
  }
  return loss;
}

StepOutcome Trainer::accumulate(const TokenBatch& batch, const StepOptions& options,
                                PhaseObserver* observer) {
  if (!reducer_) {
    prepare(batch, options);
    return micro_steps(batch, options, observer);
  }
  // Data parallel: whatever happens on this rank, it takes part in the step's collectives, so
  // that no peer is left waiting in an all-reduce; the step's status rides on the loss's.
  StepOutcome outcome;
  compat::StepStatus status;
  std::exception_ptr own;
  try {
    prepare(batch, options);
    outcome = micro_steps(batch, options, observer);
  } catch (const FatalRunError&) {
    throw;
  } catch (const std::exception& error) {
    status = compat::StepStatus::from(error);
    own = std::current_exception();
  }
  std::optional<compat::RankFailure> failure;
  {  // the step's gradient and loss, summed over the ranks, once per step
    PhaseScope scope(observer, Phase::kAllReduce, -1);  // what backward did not hide
    failure = reducer_->finish(outcome.loss_sum, status);
  }
  if (!failure) return outcome;
  if (own) {
    try {
      std::rethrow_exception(own);
    } catch (const UserError&) {
      throw;  // the same options on every rank: each stops on its own sentence
    } catch (const std::exception&) {
    }
  }
  throw *failure;
}

StepOutcome Trainer::micro_steps(const TokenBatch& batch, const StepOptions& options, PhaseObserver* observer) {
  const int64_t micro = options.micro_batch;
  const int64_t accum = batch.sequences() / micro;
  step_in_backward_ = options.optimizer_in_backward;

  StepOutcome outcome;
  outcome.tokens = batch.step_tokens();  // over every rank with data parallel
  const int world_size = group_ != nullptr ? group_->world_size() : 1;
  outcome.accum_steps = accum;
  TORCH_CHECK(outcome.tokens > 0, "a step without target tokens");
  for (int64_t k = 0; k < accum; ++k) {
    const int micro_step = static_cast<int>(k);
    at::Tensor host_inputs, host_targets;
    RowDocuments documents;  // packed rows: this micro-batch's
    {
      PhaseScope scope(observer, Phase::kData, micro_step);
      if (!batch.documents.empty()) {
        documents.assign(batch.documents.begin() + k * micro, batch.documents.begin() + (k + 1) * micro);
      }
      // (b, P): P = T with --padding max (a view, no copy), else this micro-batch's padded length.
      const auto first = batch.sequence_tokens.begin() + k * micro;
      const int64_t longest = *std::max_element(first, first + micro);
      const int64_t padded = padded_length(options.padding, options.pad_multiple, longest, batch.inputs.size(1));
      host_inputs = batch.inputs.narrow(0, k * micro, micro).narrow(1, 0, padded);
      host_targets = batch.targets.narrow(0, k * micro, micro).narrow(1, 0, padded);
      if (padded != batch.inputs.size(1)) {
        host_inputs = host_inputs.contiguous();
        host_targets = host_targets.contiguous();
      }
    }
    // Token normalization divides by the whole step's token count, over every rank (known on the
    // host: no sync); mean-of-means divides by this micro-batch's own count, by the accumulation
    // steps and, as DDP averages gradients, by the world size. A micro-batch without a target (its
    // samples one token each) adds a loss of zero under either (transformers' mean over no target
    // would be NaN).
    const int64_t counted = batch.targets_in(k * micro, micro);  // this micro-batch's targets (host)
    const double divisor = options.loss_normalization == LossNormalization::kToken
                               ? static_cast<double>(outcome.tokens)
                               : static_cast<double>(std::max<int64_t>(1, counted) * accum * world_size);
    const at::Tensor loss =
        micro_step_loss(host_inputs, host_targets, documents, counted, divisor, k == accum - 1, options, observer, micro_step);
    outcome.loss_sum = outcome.loss_sum.defined() ? outcome.loss_sum + loss : loss;
  }
  // The positions of the step's micro-batches as padded above; with data parallel every rank's
  // (consecutive blocks of the step's sequences, shard), known on the host from the step every rank
  // holds: no sync.
  const PaddingCount counted =
      count_padding(batch.step_sequence_tokens.empty() ? batch.sequence_tokens : batch.step_sequence_tokens, micro,
                    options.padding, options.pad_multiple, batch.inputs.size(1));
  outcome.positions = counted.real_positions;
  outcome.computed_positions = counted.computed_positions;
  return outcome;
}

void Trainer::optimizer_step(StepOutcome& outcome, const StepOptions& options, PhaseObserver* observer) {
  PhaseScope scope(observer, Phase::kOptimizer, -1);
  if (options.optimizer_in_backward) {
    step_in_backward_ = false;  // every parameter already stepped inside backward
    return;
  }
  torch::NoGradGuard no_grad;
  bool finite = true;
  if (options_.precision == Precision::kFp16) {
    // GradScaler.unscale_ + step: one check of all gradients, then unscale or skip.
    std::vector<at::Tensor> flags;
    for (const auto& p : params_) {
      if (p.grad().defined()) flags.push_back(p.grad().isfinite().all().logical_not());
    }
    finite = flags.empty() || !at::stack(flags).any().item<bool>();
    if (finite) {
      for (auto& p : params_) {
        if (p.grad().defined()) p.mutable_grad().mul_(1.0 / loss_scale_);
      }
    }
  }
  // The Trainer clips what the step accumulated (summed over the ranks, unscaled: accelerate
  // unscales before clipping), once per step; a skipped fp16 step has nothing to clip.
  if (finite && options_.optimizer.clips()) outcome.grad_norm = clip_gradient_norm(params_, options_.optimizer.max_grad_norm);
  run_optimizer(finite);
  outcome.skipped = !finite;
}

void Trainer::run_optimizer(bool gradients_finite) {
  if (gradients_finite) optimizer_->step();
  optimizer_->zero_grad(/*set_to_none=*/!graphed_);  // captured graphs write to the gradients' addresses
  if (options_.precision != Precision::kFp16) return;
  if (!gradients_finite) {
    loss_scale_ *= options_.loss_scale_backoff_factor;
    steps_since_backoff_ = 0;
  } else if (++steps_since_backoff_ >= options_.loss_scale_growth_interval) {
    loss_scale_ *= options_.loss_scale_growth_factor;
    steps_since_backoff_ = 0;
  }
}

StepOutcome Trainer::step(const TokenBatch& batch, const StepOptions& options, PhaseObserver* observer) {
  StepOutcome outcome = accumulate(batch, options, observer);
  if (!reducer_) {
    optimizer_step(outcome, options, observer);
    return outcome;
  }
  try {
    optimizer_step(outcome, options, observer);
  } catch (const FatalRunError&) {
    throw;
  } catch (const std::exception& error) {
    // Past the step's agreement: the other ranks stepped and go on to the next collective.
    throw FatalRunError("rank " + std::to_string(group_->rank()) + " failed in its optimizer step (" +
                        compat::StepStatus::from(error).message +
                        ") after the other ranks had agreed on the step; the run stops here, and rank 0 saves what was finished");
  }
  return outcome;
}

void Trainer::set_precision(Precision precision) {
  if (precision == options_.precision) return;
  if (precision == Precision::kFp16 && !device_.is_cuda()) {
    throw UserError("fp16 needs a CUDA device (autocast with loss scaling); use bf16 or fp32 on the CPU");
  }
  release_graphs();  // captured under the previous autocast
  options_.precision = precision;
  model_->set_autocast_dtype(autocast_dtype(precision));
  // fp16's loss scale carries over between its steps, as in one training run; the first fp16 step
  // starts from the initial scale.
  if (precision == Precision::kFp16 && !fp16_scale_started_) loss_scale_ = options_.initial_loss_scale;
  fp16_scale_started_ = fp16_scale_started_ || precision == Precision::kFp16;
}

void Trainer::set_optimizer(OptimizerKind kind) {
  if (optimizer_ && kind == options_.optimizer.kind) return;
  reset_optimizer();
  optimizer_.reset();  // its state goes before the new one is allocated: one state at a time
  options_.optimizer.kind = kind;
  // Out of memory here leaves no optimizer: the next set_optimizer builds one again.
  optimizer_ = make_optimizer(params_, options_.optimizer, decays_);
}

void Trainer::set_max_grad_norm(double max_grad_norm) { options_.optimizer.max_grad_norm = max_grad_norm; }

void Trainer::reset_optimizer() {
  release_graphs();
  if (optimizer_) {  // none only after set_optimizer ran out of memory, which dropped the gradients
    optimizer_->zero_grad(/*set_to_none=*/true);
    optimizer_->reset();
  }
  if (options_.precision == Precision::kFp16) loss_scale_ = options_.initial_loss_scale;
  fp16_scale_started_ = options_.precision == Precision::kFp16;
  steps_since_backoff_ = 0;
}

int64_t Trainer::parameter_bytes() const {
  int64_t total = 0;
  for (const auto& p : model_->parameters()) total += p.nbytes();
  // A quantised base (QLoRA) keeps its codes and scales beside the parameters, not among them.
  for (const auto& module : model_->modules(/*include_self=*/false)) {
    if (const auto* linear = dynamic_cast<const AdaptedLinearImpl*>(module.get()); linear && linear->quantized())
      total += linear->quantized()->bytes();
  }
  return total;
}

int64_t Trainer::trainable_parameter_bytes() const {
  int64_t total = 0;
  for (const auto& p : params_) total += p.nbytes();
  return total;
}

int64_t Trainer::gradient_bytes() const {
  int64_t total = 0;
  for (const auto& p : params_) {
    if (p.grad().defined()) total += p.grad().nbytes();
  }
  return total;
}

int64_t Trainer::optimizer_state_bytes() const { return optimizer_ ? optimizer_->state_bytes() : 0; }

void Trainer::set_process_group(compat::ProcessGroup* group, int64_t bucket_bytes) {
  group_ = group;
  reducer_ = group != nullptr && group->world_size() > 1
                 ? std::make_unique<GradientReducer>(params_, *group, bucket_bytes)
                 : nullptr;
}

size_t Trainer::overlapped_buckets() const { return reducer_ ? reducer_->overlapped_buckets() : 0; }

int64_t Trainer::graph_pool_bytes() const { return graphed_ ? graphed_->pool_bytes() : 0; }

void Trainer::release_graphs() {
  if (!graphed_) return;
  graphed_.reset();
  install_backward_hooks();  // the capture stream's AccumulateGrad nodes went with the graphs
  // The capture stream's cuBLAS workspaces would stay allocated for the rest of the process. On
  // the H200 (bench/h200-2026-12-01.md) the sweep's steps started 0.34-0.48 GB above weights and
  // moments after a sweep's captures, a bare trainer 3 MB: these workspaces are the suspect.
  if (device_.is_cuda()) compat::cuda_synchronize(device_.index());
  compat::cuda_clear_blas_workspaces();
}

}  // namespace accumbench
