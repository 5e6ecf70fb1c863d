// SplitMeasurement (split_measurement.hpp): the steps of measuring one split.
#include <torch/torch.h>

#include <filesystem>
#include <limits>
#include <stdexcept>

#include "accumbench/decision.hpp"
#include "accumbench/error.hpp"
#include "accumbench/statistics.hpp"
#include "accumbench/throughput.hpp"
#include "accumbench/units.hpp"
#include "accumbench/verify.hpp"
#include "compat/compat.hpp"
#include "compat/distributed.hpp"
#include "sweep/split_measurement.hpp"

namespace accumbench {

namespace {

// c10 errors carry a C++ backtrace in what(); the report wants the sentence.
std::string error_message(const std::exception& error) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&error)) {
    std::string message = c10_error->what_without_backtrace();
    const auto newline = message.find('\n');
    return newline == std::string::npos ? message : message.substr(0, newline);
  }
  return error.what();
}

// Attribute the measured peak to categories. Parameters and optimizer moments are exact; the
// gradients are counted whole when the peak falls after the first backward began (they stay
// alive across the step) and as zero before it or with optimizer-in-backward (each gradient is
// freed as soon as its parameter stepped); activations are the rest of the live bytes. The bytes
// are the split's as it was prepared (the trainer may hold another optimizer or weights dtype by now).
// The token batches and anything else live beside them count as activations, so the lines add up to
// the peak.
MemoryBreakdown attribute_peak(const RunResult& run, int64_t parameter_bytes,
                               int64_t trainable_parameter_bytes, int64_t optimizer_state_bytes) {
  MemoryBreakdown breakdown;
  breakdown.parameters_bytes = parameter_bytes;
  breakdown.optimizer_state_bytes = optimizer_state_bytes;
  const PhaseSpan* peak_span = nullptr;
  for (const auto& span : run.timeline) {
    if (peak_span == nullptr || span.peak_bytes > peak_span->peak_bytes) peak_span = &span;
  }
  // CUDA graphs keep the gradients allocated for good (the graphs write to their addresses).
  const bool gradients_alive = run.config.cuda_graphs ||
                               (peak_span != nullptr && !run.config.optimizer_in_backward &&
                                !(peak_span->micro_step == 0 && peak_span->phase != Phase::kBackward &&
                                  peak_span->phase != Phase::kOptimizer));
  if (gradients_alive) breakdown.gradients_bytes = trainable_parameter_bytes;
  const int64_t known = parameter_bytes + optimizer_state_bytes + breakdown.gradients_bytes;
  breakdown.activations_bytes = std::max<int64_t>(0, run.peak_allocated_bytes - known);
  breakdown.slack_bytes = std::max<int64_t>(0, run.peak_reserved_bytes - run.peak_allocated_bytes);
  return breakdown;
}

// "8×8 ckpt graphs" / bf16 -> "8x8-ckpt-graphs-bf16": a file name without spaces or UTF-8.
std::string file_stem(const SplitConfig& split) {
  std::string label = split.label();
  std::string stem;
  for (size_t i = 0; i < label.size(); ++i) {
    if (label.compare(i, 2, "\xC3\x97") == 0) {
      stem += 'x';
      ++i;
    } else {
      stem += label[i] == ' ' ? '-' : label[i];
    }
  }
  return stem + "-" + to_string(split.precision) + (split.max_grad_norm > 0 ? "-" + clipping_word(split.max_grad_norm) : "") +
         (split.padding.per_micro_batch() ? "-" + padding_word(split.padding) : "") +
         (split.packing != Packing::kNone ? "-" + packing_word(split.packing) : "") +
         (split.group_by_length ? "-grouped" : "");
}

}  // namespace

// What one split keeps between its own block and its rounds.
struct SplitMeasurement::Slot {
  StepOptions step;
  StepRows rows;  // whose batches it trains on
  // Data parallel: this rank's share of every batch, dealt in the split's micro-batches (shard).
  std::optional<StepBatches> share;
  std::unique_ptr<StepTracer> tracer;
  // Its parameters (in its weights dtype), those that train, and its optimizer's state, as built for it.
  int64_t parameter_bytes = 0;
  int64_t trainable_parameter_bytes = 0;
  int64_t optimizer_state_bytes = 0;
};

SplitMeasurement::SplitMeasurement(const SweepOptions& options, const ModelConfig& cfg, c10::Device device,
                                   MemoryProbe& memory, const PackedBatches& data, compat::ProcessGroup* group,
                                   const SweepContext& context, ProgressCallback on_step)
    : options_(options), cfg_(cfg), device_(device), memory_(memory), data_(data), group_(group),
      context_(context), on_step_(std::move(on_step)), sweep_start_(std::chrono::steady_clock::now()) {
  if (!device.is_cuda() && options.workload.memory_limit_bytes == 0) {
    host_bytes_ = available_host_bytes_per_process();
    // Every rank skips the same splits (a split one rank skipped and another ran would hang the
    // other's all-reduce): the least any rank has.
    if (group_ != nullptr) {
      for (const std::string& bytes : group_->exchange("accumbench/host_bytes", std::to_string(host_bytes_))) {
        const int64_t theirs = std::stoll(bytes);
        if (theirs > 0 && (host_bytes_ == 0 || theirs < host_bytes_)) host_bytes_ = theirs;
      }
    }
  }
  // The limit holds from the configured model on: the engine builds every weight in fp32 and then
  // casts or quantises it, a transient a job loading its weights in their stored dtype never has
  // (under a CPU limit between the two, the sweep stopped inside the cast with an internal error).
  model_ = build_model(cfg, options.workload.model.seed);
  configure_training(*model_, options.workload.weights_dtype, options.workload.lora);
  storage_ = std::make_pair(options.workload.weights_dtype, options.workload.lora.adapter_dtype);
  memory_.set_limit_bytes(options.workload.memory_limit_bytes);
  plan_options_ = sweep_plan_options(options.workload, device.is_cuda(), static_cast<int>(data.total_batches()));
  plan_options_.world_size = context.world_size;
  plan_options_.batch = options.workload.batch / context.world_size;  // each rank holds its share
  count_dealt_shares(plan_options_, options.workload);
}

SplitMeasurement::~SplitMeasurement() = default;

const StepBatches& PackedBatches::of(const StepRows& rows) const {
  for (const auto& [r, batches] : batches_) {
    if (r == rows) return batches;
  }
  throw std::logic_error("no batches of --packing " + to_string(rows.packing) + " --group-by-length " +
                         (rows.grouped ? "true" : "false"));
}

const StepBatches& SplitMeasurement::batches(const Slot& slot) const {
  return slot.share ? *slot.share : data_.of(slot.rows);
}

void SplitMeasurement::record_failure(RunResult& run, const std::exception& error) {
  if (const auto* agreed = dynamic_cast<const compat::RankFailure*>(&error)) {
    // Data parallel: the same status and message on every rank (see Trainer::accumulate).
    run.status = agreed->out_of_memory() ? RunStatus::kOutOfMemory : RunStatus::kError;
    run.error = agreed->what();
    run.steps.clear();
    run.fits = false;
    if (trainer_) trainer_->reset_optimizer();
    return;
  }
  if (const auto* collective = dynamic_cast<const compat::CollectiveError*>(&error)) {
    run.status = RunStatus::kError;
    run.error = collective->what();
    run.steps.clear();
    throw FatalRunError(collective->what());  // the group is broken: no reset, no more collectives
  }
  run.status = compat::is_out_of_memory(error) ? RunStatus::kOutOfMemory : RunStatus::kError;
  run.error = error_message(error);
  run.steps.clear();
  run.fits = false;  // a split that failed fits nowhere, whatever its plan said
  if (trainer_) trainer_->reset_optimizer();  // drop partial gradients before the next split
}

void SplitMeasurement::record_failure_elsewhere(RunResult& run) {
  if (run.status != RunStatus::kOk) return;
  run.status = RunStatus::kError;
  run.error = "another rank failed this split (its output says why)";
  run.steps.clear();
  run.fits = false;
  if (trainer_) trainer_->reset_optimizer();
  finalize_run(run, context_.flops_per_token, peak_tflops(run.config));
}

RunResult SplitMeasurement::prepare(const SplitConfig& split, size_t index, size_t count) {
  if (slots_.size() <= index) slots_.resize(index + 1);
  slots_[index] = std::make_unique<Slot>();
  Slot& slot = *slots_[index];
  RunResult run;
  run.config = split;
  const LossOptions& loss = options_.workload.loss;
  slot.step = step_options_for(split, loss.normalization, loss.chunk_tokens);
  slot.rows = split.rows();
  apply_padding(slot.step, split.padding);
  if (!plan(run)) return run;
  try {
    compat::StepStatus setup;  // data parallel: a failure here must stop the split on every rank
    try {
      Trainer& trainer = trainer_for(split);
      trainer.reset_optimizer();
      // Every split starts as a fresh model would: no rotary tables of the split before (another
      // length or dtype) in its baseline, so its breakdown does not depend on the grid's order.
      model_->release_caches();
      memory_.empty_cache();
      slot.parameter_bytes = trainer.parameter_bytes();
      slot.trainable_parameter_bytes = trainer.trainable_parameter_bytes();
      slot.optimizer_state_bytes = trainer.optimizer_state_bytes();
      if (group_ != nullptr) {
        slot.share = data_.of(split.rows()).dealt(group_->rank(), group_->world_size(), split.micro_batch);
      }
      trainer.prepare(batches(slot).batch(0), slot.step);       // CUDA graphs: warmup + capture, untimed
      slot.tracer = std::make_unique<StepTracer>(device_, &memory_);
    } catch (const FatalRunError&) {
      throw;
    } catch (const std::exception& error) {
      if (group_ == nullptr) throw;
      setup = compat::StepStatus::from(error);
    }
    if (group_ != nullptr) {
      if (std::optional<compat::RankFailure> failure = group_->agree_on_status(setup)) throw *failure;
    }
    warm_up(run, slot, index, count);
    if (split.cuda_graphs) time_alone(run, slot, index, count);
  } catch (const FatalRunError&) {
    throw;
  } catch (const std::exception& error) {
    record_failure(run, error);
  }
  if (run.status != RunStatus::kOk) {
    finalize_run(run, context_.flops_per_token, peak_tflops(split));
  } else if (split.cuda_graphs) {
    finish(run, index);
    // The rounds that follow run eager splits only: their steps must not start beside this
    // split's pool and saved activations (nor measure them).
    if (trainer_) trainer_->release_graphs();
  } else {
    judge_fits(run);  // on the own block's memory: whether the split is a candidate in the rounds
  }
  return run;
}

bool SplitMeasurement::in_rounds(const RunResult& run) const {
  return run.status == RunStatus::kOk && !run.config.cuda_graphs;
}

StepSample SplitMeasurement::traced_step(Slot& slot, int64_t batch_index) {
  // Data parallel: the trainer's step agrees on failures with the other ranks; one of the tracer
  // around it would be this rank's alone, and the ranks would fall out of step.
  const auto alone = [&](const std::exception& error) {
    if (group_ != nullptr) {
      throw FatalRunError("rank " + std::to_string(group_->rank()) + " failed outside a step (" + error_message(error) +
                          ") where the other ranks cannot learn of it; the run stops here, and rank 0 saves what was finished");
    }
  };
  try {
    slot.tracer->start_step();
  } catch (const std::exception& error) {
    alone(error);
    throw;
  }
  StepOutcome outcome = trainer_->step(batches(slot).batch(batch_index), slot.step, slot.tracer.get());
  StepSample sample;
  try {
    sample = slot.tracer->finish_step();
  } catch (const std::exception& error) {
    alone(error);
    throw;
  }
  sample.loss = outcome.loss();
  sample.tokens = outcome.tokens;
  sample.positions = outcome.positions;
  sample.computed_positions = outcome.computed_positions;
  sample.skipped = outcome.skipped;
  sample.data_steps = static_cast<int64_t>(batches(slot).size());
  sample.data_step = batch_index % sample.data_steps;
  return sample;
}

// The split's own block: warm-up steps right after an emptied cache, so that the CUDA caching
// allocator's reserved bytes are this split's alone (the rounds that follow run every split on one
// cache, which the largest split has grown, as a training run's allocator is after its first step).
void SplitMeasurement::warm_up(RunResult& run, Slot& slot, size_t index, size_t count) {
  const int warmup = std::max(1, options_.warmup);
  for (int i = 0; i < warmup; ++i) {
    if (on_step_) {
      SweepProgress progress;
      progress.split_index = static_cast<int>(index);
      progress.split_count = static_cast<int>(count);
      progress.step_index = i;
      progress.step_count = warmup;
      progress.elapsed_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - sweep_start_).count();
      on_step_(progress);
    }
    const StepSample sample = traced_step(slot, i);
    run.peak_reserved_bytes = std::max(run.peak_reserved_bytes, slot.tracer->step_peak_reserved_bytes());
    run.peak_allocated_bytes = std::max(run.peak_allocated_bytes, sample.peak_allocated_bytes);
  }
}

// CUDA graphs: the timed steps follow the warm-up in the split's own block (their steps are not
// paired with the rounds'; the decisions compare them through the means).
void SplitMeasurement::time_alone(RunResult& run, Slot& slot, size_t index, size_t count) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (i >= options_.steps && (options_.time_budget_seconds <= 0 || elapsed >= options_.time_budget_seconds / count)) {
      break;
    }
    run.steps.push_back(traced_step(slot, std::max(1, options_.warmup) + i));
    run.peak_reserved_bytes = std::max(run.peak_reserved_bytes, slot.tracer->step_peak_reserved_bytes());
  }
}

double SplitMeasurement::timed_step(RunResult& run, size_t index, int64_t round) {
  Slot& slot = *slots_[index];
  try {
    trainer_for(run.config);
    // Every split of round r trains on the same samples: step r after the warm-up.
    StepSample sample = traced_step(slot, std::max(1, options_.warmup) + round);
    sample.round = round;
    sample.session = run.session;
    run.steps.push_back(sample);
    return sample.step_seconds;
  } catch (const FatalRunError&) {
    throw;
  } catch (const std::exception& error) {
    record_failure(run, error);
    finalize_run(run, context_.flops_per_token, peak_tflops(run.config));
    return std::numeric_limits<double>::quiet_NaN();
  }
}

void SplitMeasurement::report_round(int64_t round, int live, size_t count) {
  if (!on_step_) return;
  SweepProgress progress;
  progress.split_count = static_cast<int>(count);
  progress.round = round;
  progress.live_splits = live;
  progress.budget_seconds = options_.time_budget_seconds;
  progress.elapsed_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - sweep_start_).count();
  on_step_(progress);
}

void SplitMeasurement::finish(RunResult& run, size_t index, bool final) {
  if (run.status != RunStatus::kOk) return;
  Slot& slot = *slots_[index];
  record_memory(run, slot);
  const double recompute = run.config.activation_checkpointing == Checkpointing::kBlocks
                               ? recompute_flops_per_token(cfg_, options_.workload.seq_len, options_.workload.lora)
                               : 0.0;
  finalize_run(run, context_.flops_per_token, peak_tflops(run.config), recompute);
  if (final && !options_.profile_dir.empty()) profile(run, slot);
  judge_fits(run);
}

void SplitMeasurement::judge_fits(RunResult& run) const {
  const int64_t limit = options_.workload.memory_limit_bytes;
  // With per-micro-batch padding the timed steps need not have met the longest micro-batch of the
  // lengths file; the plan for it must fit too (PlanOptions::activation_seq_len).
  const bool worst_fits =
      plan_options_for(plan_options_, run.config).activation_seq_len == 0 || run.predicted_peak_bytes <= limit;
  run.fits = run.status == RunStatus::kOk && (limit == 0 || (run.peak_reserved_bytes <= limit && worst_fits));
}

bool SplitMeasurement::plan(RunResult& run) {
  try {
    run.predicted_peak_bytes = plan_memory(cfg_, plan_options_for(plan_options_, run.config), run.config).peak_bytes;
  } catch (const UserError&) {
    run.predicted_peak_bytes = -1;  // a split the plan rejects fails later with the engine's message
  }
  const int64_t limit = options_.workload.memory_limit_bytes;
  if (limit == 0 && host_bytes_ > 0 && run.predicted_peak_bytes > host_bytes_ && !options_.try_predicted_oom) {
    run.status = RunStatus::kPredictedOutOfMemory;
    run.error = "predicted peak " + format_bytes(run.predicted_peak_bytes) + " exceeds the " + format_bytes(host_bytes_) +
                " of host memory available (skipped, lest the kernel's out-of-memory killer end the sweep; "
                "--try-predicted-oom runs it anyway)";
    finalize_run(run, context_.flops_per_token, kNotMeasured);
    return false;
  }
  if (limit == 0 || run.predicted_peak_bytes <= limit || options_.try_predicted_oom) return true;
  run.status = RunStatus::kPredictedOutOfMemory;
  // Two sizes that round alike are written in bytes, lest "4.2 MiB exceeds 4.2 MiB" contradict itself.
  const bool alike = format_bytes(run.predicted_peak_bytes) == format_bytes(limit);
  const auto size = [alike](int64_t bytes) { return alike ? std::to_string(bytes) + " bytes" : format_bytes(bytes); };
  run.error = "predicted peak " + size(run.predicted_peak_bytes) + " exceeds the memory limit " + size(limit) +
              " (skipped; --try-predicted-oom runs it anyway)";
  run.fits = false;
  finalize_run(run, context_.flops_per_token, kNotMeasured);
  return false;
}

// One model for the whole sweep and one trainer for each weights dtype in turn: a step's precision
// is a setting of the step (Trainer::set_precision), the optimizer is replaced when the split's is
// another (Trainer::set_optimizer: the old state freed, fresh state built), and a split of another
// weights or adapter dtype drops the trainer (gradients, optimizer state, the hooks on the
// parameters) before the model is cast (cast_weights), so that one model's weights and one state
// are alive at a time, and builds a new one. All outside the timed step, which starts after this.
Trainer& SplitMeasurement::trainer_for(const SplitConfig& split) {
  const std::pair<Precision, Precision> storage = {split.weights_dtype, split.adapter_dtype};
  if (storage_ != storage) {
    if (trainer_) trainer_->reset_optimizer();
    trainer_.reset();
    storage_.reset();  // mixed until the cast completes; the next call casts what is left
    memory_.empty_cache();
    cast_weights(*model_, split.weights_dtype, split_lora(split));
    storage_ = storage;
  }
  if (!trainer_) {
    memory_.empty_cache();
    TrainOptions train_options;
    train_options.precision = split.precision;
    train_options.optimizer = options_.workload.optimizer;
    train_options.optimizer.kind = split.optimizer;
    trainer_ = std::make_unique<Trainer>(model_, device_, train_options);
    trainer_->set_process_group(group_);
  }
  trainer_->set_precision(split.precision);
  trainer_->set_optimizer(split.optimizer);
  trainer_->set_max_grad_norm(split.max_grad_norm);
  return *trainer_;
}

void SplitMeasurement::record_memory(RunResult& run, const Slot& slot) {
  run.timeline = slot.tracer->timeline();
  for (const auto& s : run.steps) run.peak_allocated_bytes = std::max(run.peak_allocated_bytes, s.peak_allocated_bytes);
  // Replays allocate nothing: the micro-step's temporaries sit in the graphs' pool, which the
  // allocator counts as reserved only (GraphedMicroStep::pool_bytes). They are live during every replay.
  if (run.config.cuda_graphs) run.peak_allocated_bytes += trainer_->graph_pool_bytes();
  if (!device_.is_cuda()) run.peak_reserved_bytes = run.peak_allocated_bytes;
  run.peak_breakdown = attribute_peak(run, slot.parameter_bytes, slot.trainable_parameter_bytes,
                                      slot.optimizer_state_bytes);
}

// One more step under the Kineto profiler: its Chrome trace, and the GPU's busy time (union of
// kernel intervals, which CUDA events per phase cannot see) over the median unprofiled step.
// The profiler's host overhead slows the profiled step, not the GPU's kernels, so the ratio uses
// the median of the timed steps. A failure here leaves the measured run as it is.
void SplitMeasurement::profile(RunResult& run, Slot& slot) {
  compat::KernelProfile profile;
  bool profiling = false;
  try {
    Trainer& trainer = trainer_for(run.config);
    compat::cuda_synchronize(device_.index());
    profile.start();
    profiling = true;
    trainer.step(batches(slot).batch(options_.warmup + options_.steps), slot.step);
    compat::cuda_synchronize(device_.index());
    // Data parallel: every rank runs the step (it all-reduces), rank 0 alone writes the trace.
    const bool writes = compat::launch_environment().rank == 0;
    const std::string path =
        writes ? (std::filesystem::path(options_.profile_dir) / (file_stem(run.config) + ".trace.json")).string() : "";
    profiling = false;
    const compat::KernelProfile::Summary summary = profile.stop(path);
    if (run.step_seconds.median > 0 && summary.device_events > 0) {
      run.device_busy_fraction = std::min(1.0, summary.device_busy_seconds / run.step_seconds.median);
    }
  } catch (const std::exception& error) {
    if (profiling) {
      try {
        profile.stop("");
      } catch (const std::exception&) {  // the profiler was not running after all
      }
    }
    if (dynamic_cast<const FatalRunError*>(&error) != nullptr) throw;  // the ranks are out of step
    run.error = "profile failed: " + error_message(error);
  }
}

// The device's peak for what the split's matmuls run in: autocast's dtype, else the stored
// weights' (bf16 weights without autocast run bf16 products).
LoraOptions SplitMeasurement::split_lora(const SplitConfig& split) const {
  LoraOptions lora = options_.workload.lora;
  lora.adapter_dtype = split.adapter_dtype;
  return lora;
}

double SplitMeasurement::peak_tflops(const SplitConfig& split) const {
  if (!std::isnan(options_.peak_tflops)) return options_.peak_tflops;
  const Precision computed = verify_compute_precision(split.precision, split.weights_dtype, split_lora(split));
  return device_.is_cuda() ? device_peak_tflops(context_.device_name, to_string(computed)) : kNotMeasured;
}

}  // namespace accumbench
