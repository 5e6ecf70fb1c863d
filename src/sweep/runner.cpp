// The sweep runner: one model and optimizer per precision, every split measured in turn with
// warmup steps discarded; a split that fails (out of memory or anything else) is recorded and the
// sweep goes on.
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <chrono>
#include <sstream>

#include "accumbench/chunked_loss.hpp"
#include "accumbench/error.hpp"
#include "accumbench/report.hpp"
#include "accumbench/statistics.hpp"
#include "accumbench/sweep.hpp"
#include "accumbench/throughput.hpp"
#include "accumbench/trace.hpp"
#include "compat/compat.hpp"
#include "compat/distributed.hpp"

namespace accumbench {

ModelConfig resolve_model(const ModelOptions& options) {
  return options.hf_config.empty() ? find_preset(options.preset) : load_hf_config(options.hf_config);
}

namespace {

template <typename T>
std::string join(const std::vector<T>& values) {
  std::ostringstream out;
  for (size_t i = 0; i < values.size(); ++i) out << (i ? "," : "") << values[i];
  return out.str();
}

std::string number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

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
// freed as soon as its parameter stepped); activations are the rest of the live bytes.
MemoryBreakdown attribute_peak(const RunResult& run, const Trainer& trainer, int64_t baseline_bytes) {
  MemoryBreakdown breakdown;
  breakdown.parameters_bytes = trainer.parameter_bytes();
  breakdown.optimizer_state_bytes = trainer.optimizer_state_bytes();
  const PhaseSpan* peak_span = nullptr;
  for (const auto& span : run.timeline) {
    if (peak_span == nullptr || span.peak_bytes > peak_span->peak_bytes) peak_span = &span;
  }
  // CUDA graphs keep the gradients allocated for good (the graphs write to their addresses).
  const bool gradients_alive = run.config.cuda_graphs ||
                               (peak_span != nullptr && !run.config.optimizer_in_backward &&
                                !(peak_span->micro_step == 0 && peak_span->phase != Phase::kBackward &&
                                  peak_span->phase != Phase::kOptimizer));
  if (gradients_alive) breakdown.gradients_bytes = breakdown.parameters_bytes;
  const int64_t known = baseline_bytes + breakdown.gradients_bytes;
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
  return stem + "-" + split.precision;
}

// One more step under the Kineto profiler: its Chrome trace, and the GPU's busy time (union of
// kernel intervals, which CUDA events per phase cannot see) over the median unprofiled step.
// The profiler's host overhead slows the profiled step, not the GPU's kernels, so the ratio uses
// the median of the timed steps. A failure here leaves the measured run as it is.
void profile_split(RunResult& run, Trainer& trainer, const TokenBatch& batch, const StepOptions& step,
                   c10::Device device, const std::string& directory) {
  compat::KernelProfile profile;
  bool profiling = false;
  try {
    compat::cuda_synchronize(device.index());
    profile.start();
    profiling = true;
    trainer.step(batch, step);
    compat::cuda_synchronize(device.index());
    // Data parallel: every rank runs the step (it all-reduces), rank 0 alone writes the trace.
    const std::string path =
        directory.empty() ? "" : (std::filesystem::path(directory) / (file_stem(run.config) + ".trace.json")).string();
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
    run.error = "profile failed: " + error_message(error);
  }
}

}  // namespace

int process_rank() { return compat::launch_environment().rank; }

std::vector<SplitConfig> sweep_grid(const SweepOptions& options, int world_size) {
  const int64_t rank_batch = sequences_per_rank(options.batch, world_size);
  std::vector<int64_t> micro_batches = options.micro_batches.empty() ? divisors(rank_batch) : options.micro_batches;
  std::vector<SplitConfig> grid;
  for (const std::string& precision : options.precisions) {
    precision_from_string(precision);  // validates
    for (int64_t micro : micro_batches) {
      SplitConfig split;
      split.micro_batch = micro;
      split.accum_steps = accumulation_steps(options.batch, micro, world_size);
      split.precision = precision;
      split.world_size = world_size;
      for (const SplitConfig& point : loss_variants(knob_variants(split, options.knobs), options.chunked_loss)) {
        grid.push_back(point);
        // CUDA graphs are their own dimension: every point again, replayed from graphs (except
        // optimizer-in-backward, whose in-backward optimizer step cannot be frozen in a graph).
        if (options.cuda_graphs && !point.optimizer_in_backward) {
          SplitConfig graphed = point;
          graphed.cuda_graphs = true;
          grid.push_back(graphed);
        }
      }
    }
  }
  return grid;
}

PlanOptions sweep_plan_options(const SweepOptions& options, bool device_is_cuda, int token_batches) {
  PlanOptions plan;
  plan.seq_len = options.seq_len;
  plan.loss_chunk_tokens = options.loss_chunk_tokens;
  plan.batch = options.batch;
  plan.cpu = !device_is_cuda;
  plan.token_batches = token_batches;
  plan.libtorch_major = std::stoi(compat::libtorch_version());
  // compat::causal_attention: scaled_dot_product_attention from LibTorch 2.0 (flash kernels on
  // CUDA), the explicit masked softmax before.
  plan.attention = plan.libtorch_major >= 2 && device_is_cuda ? AttentionKind::kFlash : AttentionKind::kExplicit;
  return plan;
}

PlanTarget plan_target(const SweepOptions& options, int token_batches) {
  check_loss_chunk_tokens(options.loss_chunk_tokens, options.chunked_loss);
  PlanTarget target;
  const bool names_cuda = options.device == "cuda" || options.device.rfind("cuda:", 0) == 0;
  if (names_cuda && !compat::cuda_available()) {
    target.cuda = true;
    target.attached = false;
    target.options = sweep_plan_options(options, /*device_is_cuda=*/true, token_batches);
    target.options.libtorch_major = std::max(target.options.libtorch_major, 2);
    target.options.attention = AttentionKind::kFlash;
    return target;
  }
  target.cuda = resolve_device(options.device).is_cuda();  // validates the name
  target.options = sweep_plan_options(options, target.cuda, token_batches);
  return target;
}

std::vector<std::pair<std::string, std::string>> describe_options(const SweepOptions& o) {
  return {
      {"model", o.model.hf_config.empty() ? o.model.preset : o.model.hf_config},
      {"seed", std::to_string(o.model.seed)},
      {"seq_len", std::to_string(o.seq_len)},
      {"batch", std::to_string(o.batch)},
      {"micro_batches", o.micro_batches.empty() ? "all divisors" : join(o.micro_batches)},
      {"device", o.device},
      {"precisions", join(o.precisions)},
      {"lengths", o.lengths},
      {"loss_normalization", o.loss_normalization},
      {"lr", number(o.optimizer.lr)},
      {"beta1", number(o.optimizer.beta1)},
      {"beta2", number(o.optimizer.beta2)},
      {"eps", number(o.optimizer.eps)},
      {"weight_decay", number(o.optimizer.weight_decay)},
      {"warmup", std::to_string(o.warmup)},
      {"steps", std::to_string(o.steps)},
      {"time_budget_seconds", number(o.time_budget_seconds)},
      {"memory_limit_bytes", std::to_string(o.memory_limit_bytes)},
      {"knobs", o.knobs ? "true" : "false"},
      {"try_predicted_oom", o.try_predicted_oom ? "true" : "false"},
      {"cuda_graphs", o.cuda_graphs ? "true" : "false"},
      {"chunked_loss", o.chunked_loss ? "true" : "false"},
      {"loss_chunk_tokens", o.loss_chunk_tokens == 0 ? "auto" : std::to_string(o.loss_chunk_tokens)},
      {"profile_dir", o.profile_dir.empty() ? "none" : o.profile_dir},
      {"peak_tflops", std::isnan(o.peak_tflops) ? "device table" : number(o.peak_tflops)},
      {"token_file", o.token_file.empty() ? "synthetic" : o.token_file},
      {"threads", o.threads == 0 ? "all" : std::to_string(o.threads)},
      {"OMP_WAIT_POLICY", std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "(unset)"},
  };
}

SweepResult run_sweep(const SweepOptions& options, const SweepCallback& on_split, const SweepResult* resume,
                      const ProgressCallback& on_step) {
  if (options.warmup < 0) throw UserError("--warmup must not be negative");
  if (options.steps <= 0) throw UserError("--steps must be positive, got " + std::to_string(options.steps));
  check_loss_chunk_tokens(options.loss_chunk_tokens, options.chunked_loss);
  if (options.threads < 0) {
    throw UserError("--threads must not be negative, got " + std::to_string(options.threads) +
                    "; use 0 for every hardware thread");
  }
  if (options.time_budget_seconds < 0) {
    std::ostringstream value;
    value << options.time_budget_seconds;
    throw UserError("--time-budget must not be negative, got " + value.str() + "; use 0 for exactly --steps steps");
  }
  configure_threads(options.threads);
  const compat::LaunchEnvironment launch = compat::launch_environment();
  const c10::Device device = resolve_device(options.device);
  if (device.is_cuda()) compat::cuda_set_device(device.index());
  if (launch.world_size > 1 && options.time_budget_seconds > 0) {
    throw UserError("--time-budget cannot be used with data parallel (each rank would stop after a different number of steps); use --steps");
  }
  if (options.cuda_graphs) require_cuda_for_graphs(device);
  if (!options.profile_dir.empty()) {
    if (!device.is_cuda() || !compat::KernelProfile::available()) {
      throw UserError("--profile needs --device cuda and a LibTorch 2.x built with Kineto (PyTorch's own; this one is " +
                      compat::libtorch_version() + " on " + device.str() + "); drop the option");
    }
    std::error_code error;
    std::filesystem::create_directories(options.profile_dir, error);
    if (error || !std::filesystem::is_directory(options.profile_dir)) {
      throw UserError("--profile " + options.profile_dir + " is not a directory that can be created (" + error.message() +
                      "); give a writable directory");
    }
  }
  MemoryProbe memory(device);  // on CPU this installs the counting allocator before anything is allocated
  const ModelConfig cfg = resolve_model(options.model);
  check_sequence_length(cfg, options.seq_len);
  const std::vector<SplitConfig> grid = sweep_grid(options, launch.world_size);
  for (const SplitConfig& split : grid) {
    if (split.precision == "fp16" && !device.is_cuda()) {
      throw UserError("fp16 needs a CUDA device (autocast with loss scaling); use bf16 or fp32 on the CPU");
    }
  }
  if (resume != nullptr) {
    // A resume file from another configuration would mix two experiments in one report.
    const SweepContext& done = resume->context;
    if (done.model != cfg.name || done.seq_len != options.seq_len || done.batch != options.batch ||
        done.world_size != launch.world_size) {
      throw UserError("--resume file holds a sweep of " + done.model + " at T=" + std::to_string(done.seq_len) +
                      ", batch " + std::to_string(done.batch) + ", not " + cfg.name + " at T=" +
                      std::to_string(options.seq_len) + ", batch " + std::to_string(options.batch) +
                      "; resume with the same model, --seq-len and --batch, or write to a new file");
    }
  }
  if (device.is_cuda()) compat::allow_tf32(true);  // as the PyTorch anchor does

  SweepResult result;
  result.context = describe_environment(device.str());
  result.context.model = cfg.name;
  result.context.parameters = parameter_count(cfg);
  result.context.seq_len = options.seq_len;
  result.context.batch = options.batch;
  result.context.flops_per_token = flops_per_token(cfg, options.seq_len);
  result.context.memory_limit_bytes = options.memory_limit_bytes;
  result.context.options = describe_options(options);
  result.context.world_size = launch.world_size;
  const std::string primary_precision = options.precisions.empty() ? "fp32" : options.precisions.front();
  result.context.peak_tflops = std::isnan(options.peak_tflops)
                                   ? (device.is_cuda() ? device_peak_tflops(result.context.device_name, primary_precision)
                                                       : kNotMeasured)
                                   : options.peak_tflops;

  DataOptions data_options = data_options_for(cfg.vocab_size, options.seq_len, options.batch, device.is_cuda());
  data_options.lengths = length_mode_from_string(options.lengths);
  data_options.seed = options.model.seed;
  std::vector<TokenBatch> batches = options.token_file.empty()
                                        ? make_synthetic_batches(data_options)
                                        : load_token_file(options.token_file, options.token_bytes, data_options);
  // Every rank builds the same global batches (same seed or file) and keeps its share.
  if (launch.world_size > 1) {
    for (TokenBatch& batch : batches) batch = shard(batch, launch.rank, launch.world_size);
  }
  const StepBatches data(std::move(batches));
  const LossNormalization normalization = loss_normalization_from_string(options.loss_normalization);

  // fp32 weights and AdamW's two fp32 moments stay allocated for the whole sweep.
  const int64_t resident_bytes = 3 * static_cast<int64_t>(sizeof(float)) * result.context.parameters;
  if (options.memory_limit_bytes > 0 && options.memory_limit_bytes < resident_bytes) {
    throw UserError("--memory-limit " + format_bytes(options.memory_limit_bytes) + " is below the " +
                    format_bytes(resident_bytes) + " that " + cfg.name +
                    "'s fp32 weights and AdamW moments alone need; raise the limit or pick a smaller model");
  }
  // Joins the other ranks last, after every check that could stop this one alone.
  const std::unique_ptr<compat::ProcessGroup> group = compat::ProcessGroup::from_environment(device);
  if (group) result.context.distributed_backend = group->backend();
  // Past this point nothing throws a UserError for the whole sweep: failures belong to one split.
  memory.set_limit_bytes(options.memory_limit_bytes);
  LanguageModel model = build_model(cfg, options.model.seed);
  PlanOptions plan_options = sweep_plan_options(options, device.is_cuda(), static_cast<int>(data.size()));
  plan_options.batch = options.batch / launch.world_size;  // each rank holds its share
  plan_options.world_size = launch.world_size;
  std::unique_ptr<Trainer> trainer;
  std::string trainer_precision;
  const auto sweep_start = std::chrono::steady_clock::now();

  for (size_t index = 0; index < grid.size(); ++index) {
    const SplitConfig& split = grid[index];
    if (resume != nullptr) {
      const auto done = std::find_if(resume->runs.begin(), resume->runs.end(), [&](const RunResult& r) {
        return r.status == RunStatus::kOk && r.config.key() == split.key();
      });
      if (done != resume->runs.end()) {
        result.runs.push_back(*done);
        result.recommendation = recommend(result.runs, options.memory_limit_bytes);
        if (on_split) on_split(result);
        continue;
      }
    }
    RunResult run;
    run.config = split;
    try {
      run.predicted_peak_bytes = plan_memory(cfg, plan_options, split).peak_bytes;
    } catch (const UserError&) {
      run.predicted_peak_bytes = -1;  // a split the plan rejects fails below with the engine's message
    }
    if (options.memory_limit_bytes > 0 && run.predicted_peak_bytes > options.memory_limit_bytes &&
        !options.try_predicted_oom) {
      run.status = RunStatus::kPredictedOutOfMemory;
      run.error = "predicted peak " + format_bytes(run.predicted_peak_bytes) + " exceeds the memory limit " +
                  format_bytes(options.memory_limit_bytes) + " (skipped; --try-predicted-oom runs it anyway)";
      run.fits = false;
      finalize_run(run, result.context.flops_per_token, kNotMeasured);
      result.runs.push_back(std::move(run));
      result.recommendation = recommend(result.runs, options.memory_limit_bytes);
      if (on_split) on_split(result);
      continue;
    }
    try {
      if (!trainer || trainer_precision != split.precision) {
        trainer.reset();  // frees the previous optimizer state first
        memory.empty_cache();
        TrainOptions train_options;
        train_options.precision = precision_from_string(split.precision);
        train_options.optimizer = options.optimizer;
        trainer = std::make_unique<Trainer>(model, device, train_options);
        trainer->set_process_group(group.get());
        trainer_precision = split.precision;
      }
      trainer->reset_optimizer();
      memory.empty_cache();
      const StepOptions step_options = step_options_for(split, normalization, options.loss_chunk_tokens);
      const int64_t baseline_bytes = memory.allocated_bytes();  // parameters + optimizer state
      trainer->prepare(data.batch(0), step_options);  // CUDA graphs: warmup + capture, untimed
      StepTracer tracer(device, &memory);
      const auto timed_start = std::chrono::steady_clock::now();
      double timed_seconds = 0;
      for (int i = 0;; ++i) {
        const bool warm = i >= options.warmup;
        if (warm && static_cast<int>(run.steps.size()) >= options.steps &&
            (options.time_budget_seconds <= 0 || timed_seconds >= options.time_budget_seconds)) {
          break;
        }
        if (on_step) {
          SweepProgress progress;
          progress.split_index = static_cast<int>(index);
          progress.split_count = static_cast<int>(grid.size());
          progress.step_index = i;
          progress.step_count = options.warmup + options.steps;
          progress.elapsed_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - sweep_start).count();
          on_step(progress);
        }
        tracer.start_step();
        StepOutcome outcome = trainer->step(data.batch(i), step_options, &tracer);
        StepSample sample = tracer.finish_step();
        sample.loss = outcome.loss();
        sample.tokens = outcome.tokens;
        sample.skipped = outcome.skipped;
        if (warm) {
          run.steps.push_back(sample);
          run.peak_reserved_bytes = std::max(run.peak_reserved_bytes, tracer.step_peak_reserved_bytes());
          timed_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - timed_start).count();
        }
      }
      run.timeline = tracer.timeline();
      for (const auto& s : run.steps) run.peak_allocated_bytes = std::max(run.peak_allocated_bytes, s.peak_allocated_bytes);
      // Replays allocate nothing: the micro-step's activations sit in the graphs' pool, which the
      // allocator counts as reserved only. They are live during every replay.
      run.peak_allocated_bytes += trainer->graph_pool_bytes();
      if (!device.is_cuda()) run.peak_reserved_bytes = run.peak_allocated_bytes;
      run.peak_breakdown = attribute_peak(run, *trainer, baseline_bytes);
    } catch (const std::exception& error) {
      run.status = compat::is_out_of_memory(error) ? RunStatus::kOutOfMemory : RunStatus::kError;
      run.error = error_message(error);
      run.steps.clear();
      if (trainer) trainer->reset_optimizer();  // drop partial gradients before the next split
    }
    const double peak = std::isnan(options.peak_tflops)
                            ? (device.is_cuda() ? device_peak_tflops(result.context.device_name, split.precision) : kNotMeasured)
                            : options.peak_tflops;
    finalize_run(run, result.context.flops_per_token, peak);
    if (!options.profile_dir.empty() && run.status == RunStatus::kOk) {
      profile_split(run, *trainer, data.batch(options.warmup + options.steps),
                    step_options_for(run.config, normalization, options.loss_chunk_tokens),
                    device, launch.rank == 0 ? options.profile_dir : "");
    }
    run.fits = run.status == RunStatus::kOk &&
               (options.memory_limit_bytes == 0 || run.peak_reserved_bytes <= options.memory_limit_bytes);
    result.runs.push_back(std::move(run));
    result.recommendation = recommend(result.runs, options.memory_limit_bytes);
    if (on_split) on_split(result);
  }
  memory.set_limit_bytes(0);
  return result;
}

}  // namespace accumbench
