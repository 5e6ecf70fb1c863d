// `accumbench verify` (verify.hpp): the whole batch in one micro-step is the reference; every
// split of the workload's grid starts from the same weights with a fresh optimizer and must end
// at the same gradient and the same updated weights.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>

#include "accumbench/data.hpp"
#include "accumbench/engine.hpp"
#include "accumbench/error.hpp"
#include "accumbench/interrupt.hpp"
#include "accumbench/sweep.hpp"
#include "accumbench/verify.hpp"
#include "compat/compat.hpp"
#include "compat/distributed.hpp"
#include "sweep/verify_export.hpp"

namespace accumbench {

double gradient_tolerance(Precision precision) { return precision == Precision::kFp32 ? 1e-5 : 3e-2; }
double update_tolerance(Precision precision) { return precision == Precision::kFp32 ? 1e-2 : 0.25; }

namespace {

struct Snapshot {
  std::vector<at::Tensor> gradients;  // fp64 copies on the CPU
  std::vector<at::Tensor> weights;
  double loss = 0;
  double grad_norm = std::numeric_limits<double>::quiet_NaN();  // before clipping; NaN without it
};

std::vector<at::Tensor> clone_to_cpu_double(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.defined() ? t.detach().to(at::kCPU, at::kDouble).clone() : at::Tensor());
  return out;
}

// One optimizer step from `initial` weights with a fresh optimizer.
Snapshot one_step(Trainer& trainer, const std::vector<at::Tensor>& initial, const TokenBatch& batch,
                  const StepOptions& options) {
  std::vector<at::Tensor> params = trainer.model()->parameters();
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) params[i].copy_(initial[i]);
  }
  trainer.reset_optimizer();
  Snapshot snapshot;
  StepOutcome outcome = trainer.accumulate(batch, options);
  std::vector<at::Tensor> grads;
  for (const auto& p : params) grads.push_back(p.grad());
  if (!options.optimizer_in_backward) snapshot.gradients = clone_to_cpu_double(grads);
  trainer.optimizer_step(outcome, options);
  snapshot.loss = outcome.loss();
  if (outcome.grad_norm.defined()) snapshot.grad_norm = outcome.grad_norm.item<double>();
  snapshot.weights = clone_to_cpu_double(params);
  return snapshot;
}

// Everything verify needs before the first step: device, model shape, grid, and the one batch.
struct VerifySetup {
  c10::Device device{c10::kCPU};
  compat::LaunchEnvironment launch;
  ModelConfig model;
  Precision precision = Precision::kFp32;
  std::vector<SplitConfig> grid;
  // The whole steps verified: the first, or with --distinct-steps each of that many (the sweep's).
  std::vector<TokenBatch> batches;
};

VerifySetup prepare(const WorkloadOptions& w) {
  validate_workload(w);
  // A workload of lists is verified job by job (run_verify_jobs): its jobs compute different updates.
  if (grid_jobs(w).size() != 1) {
    throw UserError("run_verify compares the splits of one job; run_verify_jobs verifies each job of the lists");
  }
  // The updates would all be zero, equal whatever the splits computed (and an optimizer-in-backward
  // split keeps no gradients to compare instead).
  if (!(w.optimizer.lr > 0)) {
    throw UserError("verify --lr 0 leaves every weight where it was, so the updates it compares prove nothing; give a "
                    "learning rate above 0");
  }
  configure_threads(w.threads);
  VerifySetup s;
  s.launch = compat::launch_environment();
  s.device = resolve_device(w.device);
  if (s.device.is_cuda()) compat::cuda_set_device(s.device.index());
  if (w.grid.cuda_graphs) require_cuda_for_graphs(s.device);
  s.model = resolve_model(w.model);
  check_sequence_length(s.model, w.seq_len);
  require_weights_dtype_runs_on(w.weights_dtype, s.device);
  validate_lora(s.model, w.lora);
  require_model_fits_device(w, s.model, s.device.str());
  s.precision = w.precisions.front();
  s.grid = split_grid(w, s.launch.world_size);
  // Its own memory, before anything is allocated: refused with a sentence, not killed.
  require_distinct_steps_fit(w, available_host_bytes_per_process());
  const int steps = w.data.distinct_steps_given() ? distinct_steps_of(w.data, w.seq_len, w.batch) : 1;
  const VerifyMemory memory =
      verify_memory(s.model, sweep_plan_options(w, s.device.is_cuda(), steps), w, s.launch.world_size);
  require_verify_fits(memory, s.model.name, s.device.is_cuda(),
                      s.device.is_cuda() ? describe_environment(s.device.str()).device_memory_bytes : 0,
                      available_host_bytes_per_process());

  DataOptions data = data_options_for(s.model.vocab_size, w.seq_len, w.batch, s.device.is_cuda());
  data.lengths = w.data.lengths;
  data.seed = w.model.seed;
  data.distinct_batches = steps;
  data.world_size = s.launch.world_size;  // the same samples as the sweep's first steps
  s.batches = make_batches(w.data, data);
  return s;
}

// Relative L2 errors of `got` against the reference (gradient and weight update), and the pass.
VerifySplit compare(const SplitConfig& config, const Snapshot& got, const Snapshot& reference,
                    const std::vector<at::Tensor>& initial_cpu, const VerifyResult& result) {
  VerifySplit split;
  split.config = config;
  split.loss = got.loss;
  double diff_sq = 0, ref_sq = 0;
  for (size_t i = 0; i < got.gradients.size(); ++i) {
    if (!reference.gradients[i].defined() || !got.gradients[i].defined()) continue;
    const at::Tensor diff = got.gradients[i] - reference.gradients[i];
    split.max_abs_grad_diff = std::max(split.max_abs_grad_diff, diff.abs().max().item<double>());
    diff_sq += diff.pow(2).sum().item<double>();
    ref_sq += reference.gradients[i].pow(2).sum().item<double>();
  }
  // Non-finite sums (a NaN learning rate, an overflow) are an error, never a pass: NaN > 0 is false,
  // so they must not fall through to the "no reference, no error" zero.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  // A zero reference is matched only by zero: any difference from it is an infinite relative error.
  const auto relative = [&](double difference, double of) {
    return !std::isfinite(difference) || !std::isfinite(of) ? nan
           : of > 0                                          ? std::sqrt(difference / of)
           : difference > 0                                  ? inf
                                                             : 0.0;
  };
  split.gradients_compared = !got.gradients.empty() || reference.gradients.empty();
  split.rel_l2_grad_error = relative(diff_sq, ref_sq);
  // The update where the gradient decides its direction: an element whose whole-batch gradient is
  // zero up to the gradient's bar (|g| within the tolerance times its tensor's RMS gradient) may
  // take either sign in a split, and AdamW's first step, lr·g/(|g|+eps), moves it by up to 2·lr
  // there however small the difference, more of them the smaller --adam-eps (at 1e-30, 1.9 % of
  // the update with a gradient error of 1.6e-7). The gradient's bar judges such elements; the
  // update's leaves them out (verify.hpp, update_tolerance). A real difference (mean-of-means)
  // moves elements far from zero too, and its update error stays.
  double update_diff_sq = 0, update_ref_sq = 0;
  for (size_t i = 0; i < got.weights.size(); ++i) {
    at::Tensor diff = got.weights[i] - reference.weights[i];
    const at::Tensor reference_update = reference.weights[i] - initial_cpu[i];
    split.max_weight_diff = std::max(split.max_weight_diff, diff.abs().max().item<double>());
    if (i < reference.gradients.size() && reference.gradients[i].defined()) {
      const at::Tensor& gradient = reference.gradients[i];
      const double rms = std::sqrt(gradient.pow(2).mean().item<double>());
      const at::Tensor undecided = gradient.abs() <= result.gradient_tolerance * rms;
      diff = diff.masked_fill(undecided, 0.0);
      update_ref_sq += reference_update.masked_fill(undecided, 0.0).pow(2).sum().item<double>();
    } else {
      update_ref_sq += reference_update.pow(2).sum().item<double>();
    }
    update_diff_sq += diff.pow(2).sum().item<double>();
  }
  split.rel_l2_update_error = relative(update_diff_sq, update_ref_sq);
  // The clip's own measurement, where the reference clipped (helper-96: the update alone barely
  // shows a wrong clipping scale under AdamW).
  const bool clipped = std::isfinite(reference.grad_norm);
  if (clipped) {
    split.grad_norm = got.grad_norm;
    split.rel_grad_norm_error = relative(std::pow(got.grad_norm - reference.grad_norm, 2.0), std::pow(reference.grad_norm, 2.0));
  }
  split.within_tolerance =
      (!clipped || split.rel_grad_norm_error <= result.gradient_tolerance) &&
      (!split.gradients_compared || split.rel_l2_grad_error <= result.gradient_tolerance) &&
      split.rel_l2_update_error <= result.update_tolerance &&
      std::abs(split.loss - reference.loss) <= result.gradient_tolerance * std::max(1.0, std::abs(reference.loss));
  split.pass = split.within_tolerance;
  return split;
}

// Mean-of-means weights a target of micro-batch j by 1/(k·n_j), and with data parallel by
// 1/(W·k·n_j) as DDP averages the ranks' gradients (the engine's divisor); the whole batch each by
// 1/N: how far apart at most, as a share of 1/N (VerifySplit::normalization_skew), over every rank's
// micro-batches (shard deals them as the split does). A micro-batch without targets weights none.
// Also counts the micro-batches without a target (VerifySplit::micro_batches_without_target).
double mean_of_means_skew(const TokenBatch& batch, const SplitConfig& config, int world_size, int64_t& without_target) {
  const int64_t total = batch.step_tokens();
  const int64_t ways = config.accum_steps * world_size;
  double skew = 0;
  without_target = 0;
  for (int rank = 0; rank < world_size; ++rank) {
    const TokenBatch share = world_size > 1 ? shard(batch, rank, world_size, config.micro_batch) : batch;
    for (int64_t j = 0; j < config.accum_steps; ++j) {
      const int64_t n = share.targets_in(j * config.micro_batch, config.micro_batch);
      if (n <= 0) ++without_target;
      if (n <= 0 || n * ways == total) continue;
      skew = std::max(skew, std::abs(static_cast<double>(total) / static_cast<double>(ways * n) - 1.0));
    }
  }
  return skew;
}

}  // namespace

namespace {

// Every check of run_verify before it builds anything (the options, the device, the memory):
// run_verify_jobs makes them for each job before the first one runs.
VerifySetup checked_setup(const VerifyOptions& options, const WorkloadOptions& w) {
  // The PyTorch reference (bench/reference/models.py) reads full-precision weights.
  if (!options.export_dir.empty() && w.lora.quantized()) {
    throw UserError("--export writes full-precision weights for the PyTorch reference, which has no quantised base; "
                    "drop --base-quant or --export");
  }
  // index.json has each row's tokens and mask, not bfd's document boundaries, where positions
  // restart and attention stops: the reference would compute another step. check_export.py
  // rebuilds masked labels from each row's line of the file, which a wrapped row cuts across.
  const std::string masked_by =
      !options.export_dir.empty() && w.data.lengths == LengthMode::kFile
          ? read_lengths_file(w.data.lengths_file, std::max<int64_t>(1, w.seq_len), w.data.completion_only_loss).masked_by
          : "";
  if (!options.export_dir.empty() && w.data.packing == Packing::kBfd) {
    throw UserError(std::string("--export does not write --packing bfd's document boundaries, so the PyTorch reference "
                                "would attend across documents; use --packing ") +
                    (masked_by.empty() ? "wrapped or none" : "none") + " with --export, or drop --export");
  }
  if (!masked_by.empty() && w.data.packing == Packing::kWrapped) {
    throw UserError("--export names each row's sample so that check_export.py can rebuild its labels from " +
                    w.data.lengths_file + " (its " + masked_by + "), and --packing wrapped cuts rows across " +
                    "samples; use --packing none with --export, or drop --export");
  }
  VerifySetup setup = prepare(w);
  // The reference attends as the engine does, to the whole causal prefix; transformers masks keys
  // beyond a sliding window shorter than T, so a PASS would vouch for a step it does not run.
  if (!options.export_dir.empty() && !sliding_window_note(setup.model, w.seq_len).empty()) {
    throw UserError("--export's PyTorch reference attends to every earlier position, as accumbench does, but " +
                    setup.model.name + "'s sliding window of " + std::to_string(setup.model.sliding_window) +
                    " positions is shorter than --seq-len " + std::to_string(w.seq_len) +
                    ", where transformers masks further back; use --seq-len " +
                    std::to_string(setup.model.sliding_window) + " or less with --export, or drop --export");
  }
  require_reducible_gradients(w, setup.device.str(), setup.launch.world_size);
  return setup;
}

// LoRA dropout draws a random mask in every micro-step: no two splits (no two runs) draw the
// same masks, so their updates differ by the dropout's noise, not by normalization. verify
// checks the splits with the adapters' dropout off, and says so (VerifyResult::dropout_off).
WorkloadOptions without_dropout(WorkloadOptions w) {
  w.lora.dropout = 0;
  return w;
}

// What the ranks compare before they verify: the options (as verify runs them) and the content
// of the files they read, each rank its own copy.
std::vector<std::pair<std::string, std::string>> rank_compared(const WorkloadOptions& w) {
  std::vector<std::pair<std::string, std::string>> compared = describe_workload(without_dropout(w));
  const std::vector<std::pair<std::string, std::string>> files = file_fingerprints(w);
  compared.insert(compared.end(), files.begin(), files.end());
  return compared;
}

// One job's verify over `group` (null: one process). The jobs of a list share one group: a group
// made again per job would let a fast rank reach the old store as it closes.
// `step`: which of setup.batches it verifies.
VerifyResult verify_job(const VerifyOptions& options, const VerifySetup& setup, compat::ProcessGroup* group, size_t step);

}  // namespace

VerifyResult run_verify(const VerifyOptions& options) {
  const VerifySetup setup = checked_setup(options, without_dropout(options.workload));
  const std::unique_ptr<compat::ProcessGroup> group =
      compat::ProcessGroup::from_environment(setup.device, options.workload.dist_timeout_seconds);
  if (group) require_same_options_on_every_rank(*group, "verify", rank_compared(options.workload));
  return verify_job(options, setup, group.get(), 0);
}

namespace {

VerifyResult verify_job(const VerifyOptions& options, const VerifySetup& setup, compat::ProcessGroup* group, size_t step) {
  const WorkloadOptions w = without_dropout(options.workload);
  const TokenBatch& batch = setup.batches[step];
  if (!options.export_dir.empty() && setup.launch.rank == 0) create_export_directory(options.export_dir);
  TrainOptions train_options;
  train_options.precision = setup.precision;
  train_options.optimizer = w.optimizer;
  LanguageModel model = build_model(setup.model, w.model.seed);
  // A fresh adapter's B is zero, which leaves A without a gradient: verify draws B so that
  // every adapter weight is checked (and says so).
  configure_training(*model, w.weights_dtype, w.lora, /*nonzero_b=*/true);
  Trainer trainer(model, setup.device, train_options);
  std::vector<at::Tensor> initial;
  for (const auto& p : trainer.model()->parameters()) initial.push_back(p.detach().clone());

  VerifyResult result;
  result.model = setup.model.name;
  result.parameters = parameter_count(setup.model) + lora_parameter_count(setup.model, w.lora);
  result.trainable_parameters = w.lora.enabled() ? lora_parameter_count(setup.model, w.lora) : result.parameters;
  result.weights_dtype = w.weights_dtype;
  result.optimizer = w.optimizer.kind;
  result.lora = w.lora;
  result.dropout_off = options.workload.lora.enabled() ? options.workload.lora.dropout : 0;
  result.seq_len = w.seq_len;
  result.batch = w.batch;
  result.tokens = batch.token_count;
  result.step = static_cast<int>(step);
  result.steps = static_cast<int>(setup.batches.size());
  result.precision = setup.precision;
  result.lengths = w.data.lengths;
  result.data = w.data;
  if (const std::optional<SampleSource> source = read_sample_source(w.data, w.seq_len, setup.model.vocab_size)) {
    result.label_masking = source->masking;
    result.samples = static_cast<int64_t>(source->lengths.size());
    result.samples_cut = w.data.packing == Packing::kWrapped ? -1 : source->truncated;
  }
  const std::vector<int64_t>& rows = batch.sequence_targets;
  result.equal_sequences = std::adjacent_find(rows.begin(), rows.end(), std::not_equal_to<>()) == rows.end();
  result.loss_normalization = w.loss.normalization;
  result.world_size = setup.launch.world_size;
  const Precision judged = verify_compute_precision(setup.precision, w.weights_dtype, w.lora);
  result.gradient_tolerance = gradient_tolerance(judged);
  result.update_tolerance = update_tolerance(judged);
  const std::vector<at::Tensor> initial_cpu = clone_to_cpu_double(initial);

  // The reference: the whole batch in one micro-batch, token-normalized, plain loss head and
  // optimizer step, in this process alone.
  StepOptions reference_options;
  reference_options.micro_batch = w.batch;
  measuring_begins();  // a signal from here on reports the splits verified so far (interrupt.hpp)
  const Snapshot reference = one_step(trainer, initial, batch, reference_options);
  result.reference_loss = reference.loss;
  result.max_grad_norm = w.optimizer.max_grad_norm;
  result.reference_grad_norm = reference.grad_norm;
  // Every rank computed the same reference alone; one writes it.
  if (!options.export_dir.empty() && setup.launch.rank == 0) {
    ReferenceStep exported{setup.model, w, setup.precision, batch, {}, reference.gradients, reference.loss,
                             reference.grad_norm, {}, {}};
    const auto named = trainer.model()->named_parameters();
    const std::vector<bool> decays = weight_decay_flags(*trainer.model());  // one per trainable parameter
    for (size_t i = 0, trained = 0; i < named.size(); ++i) {
      exported.weights.emplace_back(named[i].key(), initial[i]);
      const bool trains = named[i].value().requires_grad();
      exported.updated.push_back(trains ? reference.weights[i] : at::Tensor());
      exported.decays.push_back(trains && decays[trained++]);
    }
    write_reference_step(options.export_dir, exported);
    result.export_dir = options.export_dir;
  }
  trainer.set_process_group(group);

  for (const SplitConfig& config : setup.grid) {
    Interruption& stop = result.interruption;
    if (!stop.signal.empty() || stop_requested_on_any_rank(group, setup.device.str())) {
      if (stop.signal.empty()) stop.signal = stop_cause();
      stop.splits_not_run.push_back(config.label());
      continue;
    }
    StepOptions step = step_options_for(config, w.loss.normalization, w.loss.chunk_tokens);
    apply_padding(step, w.data);
    // Data parallel: the split runs on this rank's share, dealt in its micro-batches, and sums
    // gradients over the ranks; the reference is still the whole batch in one process, computed by
    // every rank alone.
    const TokenBatch share = setup.launch.world_size > 1
                                 ? shard(batch, setup.launch.rank, setup.launch.world_size, config.micro_batch)
                                 : batch;
    const Snapshot got = one_step(trainer, initial, share, step);
    result.splits.push_back(compare(config, got, reference, initial_cpu, result));
    VerifySplit& split = result.splits.back();
    if (w.loss.normalization == LossNormalization::kMeanOfMeans) {
      split.normalization_skew =
          mean_of_means_skew(batch, config, setup.launch.world_size, split.micro_batches_without_target);
      split.pass = split.pass && split.normalization_skew == 0;
    }
    result.all_pass = result.all_pass && split.pass;
  }
  return result;
}

}  // namespace

std::vector<VerifyResult> run_verify_jobs(const VerifyOptions& options,
                                          const std::function<void(const VerifyResult&)>& on_job) {
  const WorkloadOptions& w = options.workload;
  validate_workload(w);  // every combination of the lists
  const std::vector<GridJob> jobs = grid_jobs(w);
  if (jobs.size() > 1 && !options.export_dir.empty()) {
    throw UserError("--export writes one reference step, and the lists make " + std::to_string(jobs.size()) +
                    " jobs (" + job_flags(jobs.front(), w) + ", ...); give one of each list with --export");
  }
  if (const int steps = w.data.distinct_steps_given() ? distinct_steps_of(w.data, w.seq_len, w.batch) : 1;
      steps > 1 && !options.export_dir.empty()) {
    throw UserError("--export writes one reference step, and --distinct-steps " + distinct_steps_name(w.data) +
                    " verifies " + std::to_string(steps) + "; drop --distinct-steps with --export (the first step is exported)");
  }
  // Every job checked before the first runs: a refused one loses no verified job.
  std::vector<VerifySetup> setups;
  for (const GridJob& job : jobs) {
    const VerifyOptions one{job_workload(w, job), options.export_dir};
    setups.push_back(checked_setup(one, without_dropout(one.workload)));
  }
  const std::unique_ptr<compat::ProcessGroup> group =
      compat::ProcessGroup::from_environment(setups.front().device, w.dist_timeout_seconds);
  // Once, with the lists (the exchange's store key is one: a second would read the first's).
  if (group) require_same_options_on_every_rank(*group, "verify", rank_compared(w));
  std::vector<VerifyResult> results;
  // Each job, each of its steps (--distinct-steps) against that step's own whole batch.
  for (size_t i = 0; i < jobs.size(); ++i) {
    bool stopped = false;
    for (size_t step = 0; step < setups[i].batches.size() && !stopped; ++step) {
      results.push_back(
          verify_job(VerifyOptions{job_workload(w, jobs[i]), options.export_dir}, setups[i], group.get(), step));
      if (jobs.size() > 1) results.back().job = job_flags(jobs[i], w);
      if (on_job) on_job(results.back());
      stopped = !results.back().interruption.signal.empty();  // the steps and jobs after it are not verified
    }
    if (stopped) break;
  }
  return results;
}

}  // namespace accumbench
