#include <torch/torch.h>

#include <cmath>
#include <iomanip>

#include "accumbench/chunked_loss.hpp"
#include "accumbench/error.hpp"
#include "accumbench/verify.hpp"
#include "compat/compat.hpp"
#include "compat/distributed.hpp"
#include "report/format.hpp"

namespace accumbench {

double gradient_tolerance(Precision precision) { return precision == Precision::kFp32 ? 1e-5 : 3e-2; }
double update_tolerance(Precision precision) { return precision == Precision::kFp32 ? 1e-3 : 1e-1; }

namespace {

// Pads to `width` terminal columns; "×" is two bytes but one column.
std::string pad_right(const std::string& text, size_t width) {
  const size_t columns = text::display_width(text);
  return text + std::string(columns < width ? width - columns : 0, ' ');
}

struct Snapshot {
  std::vector<at::Tensor> gradients;  // fp64 copies on the CPU
  std::vector<at::Tensor> weights;
  double loss = 0;
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
  snapshot.weights = clone_to_cpu_double(params);
  return snapshot;
}

}  // namespace

VerifyResult run_verify(const VerifyOptions& options) {
  configure_threads(options.threads);
  const compat::LaunchEnvironment launch = compat::launch_environment();
  const c10::Device device = resolve_device(options.device);
  if (device.is_cuda()) compat::cuda_set_device(device.index());
  if (options.cuda_graphs) require_cuda_for_graphs(device);
  check_loss_chunk_tokens(options.loss_chunk_tokens, options.chunked_loss);
  if (options.optimizer_in_backward) require_one_rank_for_optimizer_in_backward(launch.world_size);
  const ModelConfig cfg = resolve_model(options.model);
  check_sequence_length(cfg, options.seq_len);
  const Precision precision = precision_from_string(options.precision);
  const int64_t rank_batch = sequences_per_rank(options.batch, launch.world_size);
  const std::vector<int64_t> micro_batches = options.micro_batches.empty() ? divisors(rank_batch) : options.micro_batches;
  for (int64_t micro : micro_batches) accumulation_steps(options.batch, micro, launch.world_size);

  DataOptions data_options = data_options_for(cfg.vocab_size, options.seq_len, options.batch, device.is_cuda());
  data_options.lengths = length_mode_from_string(options.lengths);
  data_options.seed = options.model.seed;
  data_options.distinct_batches = 1;
  const TokenBatch batch = make_synthetic_batches(data_options).front();
  // Data parallel: the splits run on this rank's share and sum gradients over the ranks; the
  // reference is still the whole batch in one process, computed by every rank alone.
  const TokenBatch rank_share = launch.world_size > 1 ? shard(batch, launch.rank, launch.world_size) : batch;
  const std::unique_ptr<compat::ProcessGroup> group = compat::ProcessGroup::from_environment(device);

  TrainOptions train_options;
  train_options.precision = precision;
  train_options.optimizer = options.optimizer;
  Trainer trainer(build_model(cfg, options.model.seed), device, train_options);
  std::vector<at::Tensor> initial;
  for (const auto& p : trainer.model()->parameters()) initial.push_back(p.detach().clone());

  VerifyResult result;
  result.model = cfg.name;
  result.parameters = parameter_count(cfg);
  result.seq_len = options.seq_len;
  result.batch = options.batch;
  result.tokens = batch.token_count;
  result.precision = options.precision;
  result.lengths = options.lengths;
  result.loss_normalization = options.loss_normalization;
  result.gradient_tolerance = gradient_tolerance(precision);
  result.update_tolerance = update_tolerance(precision);
  const std::vector<at::Tensor> initial_cpu = clone_to_cpu_double(initial);

  // The reference: the whole batch in one micro-batch, token-normalized, plain optimizer step.
  StepOptions reference_options;
  reference_options.micro_batch = options.batch;
  const Snapshot reference = one_step(trainer, initial, batch, reference_options);
  result.reference_loss = reference.loss;
  result.world_size = launch.world_size;
  trainer.set_process_group(group.get());

  // The splits as grid points (what the sweep would label them), each run through
  // step_options_for like a sweep's: every micro-batch, again from CUDA graphs, the whole batch
  // with the optimizer in backward, and all of them again with the chunked loss.
  const LossNormalization normalization = loss_normalization_from_string(options.loss_normalization);
  std::vector<SplitConfig> runs;
  auto split_of = [&](int64_t micro) {
    SplitConfig split;
    split.micro_batch = micro;
    split.accum_steps = rank_batch / micro;
    split.world_size = launch.world_size;
    split.precision = options.precision;
    split.activation_checkpointing = options.activation_checkpointing ? "blocks" : "none";
    return split;
  };
  for (int64_t micro : micro_batches) runs.push_back(split_of(micro));
  if (options.cuda_graphs) {
    const size_t eager_runs = runs.size();
    for (size_t i = 0; i < eager_runs; ++i) {
      SplitConfig graphed = runs[i];
      graphed.cuda_graphs = true;
      runs.push_back(graphed);
    }
  }
  if (options.optimizer_in_backward) {
    SplitConfig in_backward = split_of(options.batch);
    in_backward.optimizer_in_backward = true;
    runs.push_back(in_backward);
  }
  runs = loss_variants(std::move(runs), options.chunked_loss);  // the reference stays the plain head

  for (const SplitConfig& config : runs) {
    const Snapshot got =
        one_step(trainer, initial, rank_share, step_options_for(config, normalization, options.loss_chunk_tokens));
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
    split.rel_l2_grad_error = ref_sq > 0 ? std::sqrt(diff_sq / ref_sq) : 0.0;
    double update_diff_sq = 0, update_ref_sq = 0;
    for (size_t i = 0; i < got.weights.size(); ++i) {
      const at::Tensor diff = got.weights[i] - reference.weights[i];
      const at::Tensor reference_update = reference.weights[i] - initial_cpu[i];
      split.max_weight_diff = std::max(split.max_weight_diff, diff.abs().max().item<double>());
      update_diff_sq += diff.pow(2).sum().item<double>();
      update_ref_sq += reference_update.pow(2).sum().item<double>();
    }
    split.rel_l2_update_error = update_ref_sq > 0 ? std::sqrt(update_diff_sq / update_ref_sq) : 0.0;
    split.pass = split.rel_l2_grad_error <= result.gradient_tolerance &&
                 split.rel_l2_update_error <= result.update_tolerance &&
                 std::abs(split.loss - reference.loss) <= result.gradient_tolerance * std::max(1.0, std::abs(reference.loss));
    result.all_pass = result.all_pass && split.pass;
    result.splits.push_back(split);
  }
  return result;
}

void print_verify(const VerifyResult& r, std::ostream& out) {
  out << "verify " << r.model << " (" << r.parameters << " parameters), T=" << r.seq_len << ", batch " << r.batch
      << ", " << r.tokens << " target tokens, " << r.lengths << " lengths, " << r.precision << ", loss normalization "
      << r.loss_normalization;
  if (r.world_size > 1) out << ", data parallel over " << r.world_size << " ranks (splits per rank)";
  out << "\n";
  out << "reference: 1 micro-batch of " << r.batch << ", token-normalized, loss " << std::fixed << std::setprecision(6)
      << r.reference_loss << "\n";
  out << std::defaultfloat << "tolerance: relative L2 error of the gradient <= " << r.gradient_tolerance
      << ", of the weight update <= " << r.update_tolerance << "\n\n";
  size_t label_width = 14;  // wider only when a label needs it ("8×1 ckpt graphs")
  for (const auto& s : r.splits) label_width = std::max(label_width, s.config.label().size() + 1);
  out << pad_right("split", label_width) << std::right << std::setw(12) << "loss" << std::setw(14) << "max |dgrad|"
      << std::setw(14) << "rel L2 grad" << std::setw(14) << "max |dw|" << std::setw(16) << "rel L2 update"
      << "  result\n";
  for (const auto& s : r.splits) {
    out << pad_right(s.config.label(), label_width) << std::right << std::fixed << std::setprecision(6) << std::setw(12) << s.loss
        << std::scientific << std::setprecision(2) << std::setw(14) << s.max_abs_grad_diff << std::setw(14)
        << s.rel_l2_grad_error << std::setw(14) << s.max_weight_diff << std::setw(16) << s.rel_l2_update_error << "  "
        << (s.pass ? "PASS" : "FAIL") << "\n";
  }
  out << std::defaultfloat << "\n"
      << (r.all_pass ? "PASS: every split computes the same update as the whole batch"
                     : "FAIL: some splits compute a different update than the whole batch")
      << "\n";
}

}  // namespace accumbench
