// Gradient clipping (--max-grad-norm): torch.nn.utils.clip_grad_norm_'s formula, once per step on
// the accumulated gradient, the same update from every split, refused with the optimizer inside
// backward, and its temporaries as the plan's clip_peak counts them.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>

#include "accumbench/engine.hpp"
#include "accumbench/error.hpp"
#include "accumbench/plan.hpp"
#include "accumbench/trace.hpp"
#include "accumbench/verify.hpp"
#include "engine/gradient_clipping.hpp"

namespace ab = accumbench;

namespace {

double rel_l2(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.to(at::kDouble), y = b.to(at::kDouble);
  return (x - y).norm().item<double>() / std::max(1e-300, y.norm().item<double>());
}

// The global L2 norm of the gradients, in fp64.
double fp64_norm(const std::vector<at::Tensor>& grads) {
  double sum = 0;
  for (const at::Tensor& g : grads) sum += g.to(at::kDouble).pow(2).sum().item<double>();
  return std::sqrt(sum);
}

std::vector<at::Tensor> grads_of(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : params) grads.push_back(p.grad().clone());
  return grads;
}

ab::TokenBatch variable_batch(const ab::ModelConfig& cfg, int64_t seq_len, int64_t batch) {
  ab::DataOptions data = ab::data_options_for(cfg.vocab_size, seq_len, batch, /*cuda=*/false);
  data.lengths = ab::LengthMode::kVariable;  // padded rows: the token count differs per micro-batch
  return ab::make_synthetic_batches(data).front();
}

// verify's defaults on variable lengths with SGD (its update is the clipped gradient itself).
ab::WorkloadOptions sgd_verify_workload() {
  ab::WorkloadOptions w = ab::workload_defaults(ab::Command::kVerify);
  w.data.lengths = ab::LengthMode::kVariable;
  w.device = "cpu";
  w.threads = 1;
  w.optimizer.kind = ab::OptimizerKind::kSgd;
  return w;
}

}  // namespace

// Every gradient scaled by min(1, max_norm / (norm + 1e-6)), the norm over two dtypes at once;
// LibTorch's own clip_grad_norm_ (which syncs to return a double) gives the same gradients and
// norm; a norm under max_norm leaves the gradients bit for bit. Bound: 1e-6 relative (fp32
// rounding of a sum of squares; bf16 gradients are scaled in bf16, so 1e-2 for those).
TEST(Clipping, ClipGradNormFormula) {
  torch::manual_seed(3);
  std::vector<at::Tensor> params = {torch::zeros({300, 70}).set_requires_grad(true),
                                    torch::zeros({70}).set_requires_grad(true),
                                    torch::zeros({40, 30}, at::kBFloat16).set_requires_grad(true)};
  for (at::Tensor& p : params) p.mutable_grad() = torch::randn(p.sizes()).to(p.scalar_type());
  const std::vector<at::Tensor> before = grads_of(params);
  const double norm = fp64_norm(before);
  const double max_norm = 0.1 * norm;
  const at::Tensor measured = ab::clip_gradient_norm(params, max_norm);
  EXPECT_NEAR(measured.item<double>() / norm, 1.0, 1e-2);  // the bf16 group's norm is rounded to bf16
  const double coefficient = max_norm / (measured.item<double>() + 1e-6);
  for (size_t i = 0; i < params.size(); ++i) {
    const double bound = params[i].scalar_type() == at::kBFloat16 ? 1e-2 : 1e-6;
    EXPECT_LT(rel_l2(params[i].grad(), before[i] * coefficient), bound) << i;
  }

  // fp32 alone against LibTorch's C++ clip_grad_norm_ on copies.
  std::vector<at::Tensor> ours = {torch::zeros({500}).set_requires_grad(true), torch::zeros({20, 9}).set_requires_grad(true)};
  std::vector<at::Tensor> theirs = {torch::zeros({500}).set_requires_grad(true), torch::zeros({20, 9}).set_requires_grad(true)};
  for (size_t i = 0; i < ours.size(); ++i) {
    ours[i].mutable_grad() = torch::randn(ours[i].sizes());
    theirs[i].mutable_grad() = ours[i].grad().clone();
  }
  const double our_norm = ab::clip_gradient_norm(ours, 0.5).item<double>();
  const double their_norm = torch::nn::utils::clip_grad_norm_(theirs, 0.5);
  EXPECT_NEAR(our_norm / their_norm, 1.0, 1e-6);
  for (size_t i = 0; i < ours.size(); ++i) EXPECT_LT(rel_l2(ours[i].grad(), theirs[i].grad()), 1e-6);

  // Under the bound nothing moves; no gradient, no norm.
  const std::vector<at::Tensor> kept = grads_of(ours);
  ab::clip_gradient_norm(ours, 1e6);
  for (size_t i = 0; i < ours.size(); ++i) EXPECT_TRUE(torch::equal(ours[i].grad(), kept[i]));
  EXPECT_FALSE(ab::clip_gradient_norm({torch::zeros({3}).set_requires_grad(true)}, 1.0).defined());
}

// The trainer clips the step's accumulated gradient once, after the last micro-step: with SGD
// (lr, no decay) the update is −lr·coefficient·gradient, the coefficient from the whole step's norm,
// which StepOutcome::grad_norm reports (fp64 recomputation within 1e-5); the update within 1e-5
// relative L2 over all parameters (unclipped, it would be 1/coefficient, about 100 times, larger).
TEST(Clipping, TrainerClipsTheAccumulatedGradientOnce) {
  const ab::ModelConfig cfg = ab::find_preset("gpt2-tiny");
  const ab::TokenBatch batch = variable_batch(cfg, 32, 8);
  ab::TrainOptions options;
  options.optimizer.kind = ab::OptimizerKind::kSgd;
  options.optimizer.lr = 10;  // an update well above fp32 rounding of the weights
  options.optimizer.weight_decay = 0;
  options.optimizer.max_grad_norm = 0.05;
  ab::Trainer trainer(ab::build_model(cfg, /*seed=*/1), c10::Device(c10::kCPU), options);
  const std::vector<at::Tensor> params = ab::trainable_parameters(*trainer.model());
  std::vector<at::Tensor> start;
  for (const at::Tensor& p : params) start.push_back(p.detach().clone());
  ab::StepOptions step;
  step.micro_batch = 2;  // four micro-steps
  ab::StepOutcome outcome = trainer.accumulate(batch, step);
  const std::vector<at::Tensor> grads = grads_of(params);
  const double norm = fp64_norm(grads);
  ASSERT_GT(norm, 10 * options.optimizer.max_grad_norm);  // the case clips
  trainer.optimizer_step(outcome, step);
  ASSERT_TRUE(outcome.grad_norm.defined());
  EXPECT_NEAR(outcome.grad_norm.item<double>() / norm, 1.0, 1e-5);
  const double coefficient = options.optimizer.max_grad_norm / (norm + 1e-6);
  std::vector<at::Tensor> update, expected;
  for (size_t i = 0; i < params.size(); ++i) {
    update.push_back((params[i].detach().to(at::kDouble) - start[i].to(at::kDouble)).flatten());
    expected.push_back((-options.optimizer.lr * coefficient * grads[i].to(at::kDouble)).flatten());
  }
  // Over every parameter: the updates of weights near 1 (the norms') keep fp32's rounding of
  // start + update, a few 1e-7 relative to the weight, which the embedding's larger updates dwarf.
  EXPECT_LT(rel_l2(torch::cat(update), torch::cat(expected)), 1e-5);
  // Without clipping the same trainer reports no norm.
  ab::TrainOptions plain = options;
  plain.optimizer.max_grad_norm = 0;
  ab::Trainer unclipped(ab::build_model(cfg, /*seed=*/1), c10::Device(c10::kCPU), plain);
  EXPECT_FALSE(unclipped.step(batch, step).grad_norm.defined());
  // The norm is a setting of the step (a sweep's list of norms shares one trainer): set, it clips.
  unclipped.set_max_grad_norm(options.optimizer.max_grad_norm);
  EXPECT_TRUE(unclipped.step(batch, step).grad_norm.defined());
  unclipped.set_max_grad_norm(0);
  EXPECT_FALSE(unclipped.step(batch, step).grad_norm.defined());
}

// verify: every split of a variable-length batch gives the whole batch's clipped update (SGD, so
// the update is proportional to the clipped gradient; AdamW's first update hardly depends on a
// common factor), and the reference really clipped: its norm is far above the bound.
TEST(Clipping, VerifyPassesWithClipping) {
  ab::WorkloadOptions w = sgd_verify_workload();
  w.optimizer.max_grad_norm = 0.01;
  const ab::VerifyResult r = ab::run_verify(w);
  EXPECT_TRUE(r.all_pass);
  EXPECT_EQ(r.max_grad_norm, 0.01);
  EXPECT_GT(r.reference_grad_norm, 10 * w.optimizer.max_grad_norm);
  for (const ab::VerifySplit& s : r.splits) EXPECT_LT(s.rel_l2_update_error, 1e-4) << s.config.label();
}

// The optimizer inside backward steps each parameter before the global norm exists: refused by
// the trainer and by the grid, and --knobs leaves it out with a note.
TEST(Clipping, NotWithTheOptimizerInsideBackward) {
  const ab::ModelConfig cfg = ab::find_preset("gpt2-tiny");
  ab::TrainOptions options;
  options.optimizer.max_grad_norm = 1;
  ab::Trainer trainer(ab::build_model(cfg, 1), c10::Device(c10::kCPU), options);
  ab::StepOptions step;
  step.micro_batch = 4;
  step.optimizer_in_backward = true;
  try {
    trainer.step(variable_batch(cfg, 16, 4), step);
    FAIL() << "no error";
  } catch (const ab::UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--optimizer-in-backward cannot be combined with --max-grad-norm 1 (each parameter would step inside "
              "backward, before the global gradient norm it is clipped by is known); use --max-grad-norm 0 or drop "
              "--optimizer-in-backward");
  }
  ab::WorkloadOptions w = ab::workload_defaults(ab::Command::kSweep);
  w.batch = 4;
  w.optimizer.max_grad_norm = 0.5;
  w.grid.knobs = true;
  for (const ab::SplitConfig& s : ab::split_grid(w, 1)) EXPECT_FALSE(s.optimizer_in_backward) << s.label();
  EXPECT_EQ(ab::optimizer_in_backward_note(w, 1),
            "--knobs leaves the optimizer inside backward out with --max-grad-norm 0.5 (each parameter would step "
            "before the global gradient norm it is clipped by is known): it adds the checkpointed splits only");
  // Without a split of accumulation 1 the knob adds no oib point, so nothing is left out to say.
  w.micro_batches = {1, 2};
  EXPECT_EQ(ab::optimizer_in_backward_note(w, 1), "");
  w.micro_batches = {};
  w.grid.optimizer_in_backward = true;
  EXPECT_THROW(ab::split_grid(w, 1), ab::UserError);
  w.optimizer.max_grad_norm = 0;
  EXPECT_FALSE(ab::split_grid(w, 1).empty());
}

// clip_peak against the counting allocator: the norms, their stack and the scalars that
// clip_gradient_norm allocates on top of the gradients, for a full fine-tune in fp32 and bf16 and
// for LoRA adapters. Exact: these are the only allocations.
TEST(Clipping, PlannedTemporariesAsCounted) {
  ab::CountingCpuAllocator& counter = ab::CountingCpuAllocator::install();
  for (const char* preset : {"gpt2-tiny", "llama-tiny"}) {
    for (const auto& [weights, rank] : std::vector<std::pair<ab::Precision, int64_t>>{
             {ab::Precision::kFp32, 0}, {ab::Precision::kBf16, 0}, {ab::Precision::kFp32, 4}}) {
      const ab::ModelConfig cfg = ab::find_preset(preset);
      ab::PlanOptions o;
      o.seq_len = 32;
      o.batch = 2;
      o.cpu = true;
      o.weights_dtype = weights;
      o.lora.rank = rank;
      o.max_grad_norm = 1;
      ab::SplitConfig split;
      split.micro_batch = 2;
      split.accum_steps = 1;
      const int64_t planned = ab::total_bytes(ab::plan_memory(cfg, o, split).clip_peak);
      ab::LanguageModel model = ab::build_model(cfg, 1);
      ab::configure_training(*model, weights, o.lora);
      const std::vector<at::Tensor> params = ab::trainable_parameters(*model);
      for (const at::Tensor& p : params) const_cast<at::Tensor&>(p).mutable_grad() = torch::randn(p.sizes()).to(p.scalar_type());
      const int64_t before = counter.current_bytes();
      counter.reset_peak();
      const at::Tensor norm = ab::clip_gradient_norm(params, 1e-3);
      const int64_t measured = counter.peak_bytes() - before;
      std::cout << "[ clip tmp ] " << preset << " " << ab::to_string(weights) << " rank " << rank << " tensors "
                << params.size() << " planned " << planned << " measured " << measured << "\n";
      EXPECT_EQ(measured, planned) << preset << " " << ab::to_string(weights) << " rank " << rank;
    }
  }
}

// The sweep's options record the norm only when clipping, so that files written before
// --max-grad-norm resume as not clipping (recorded_option's default "0"), and a list as given.
TEST(Clipping, RecordedOnlyWhenClipping) {
  ab::WorkloadOptions w = ab::workload_defaults(ab::Command::kSweep);
  const auto plain = ab::describe_workload(w);
  EXPECT_EQ(ab::recorded_option(plain, "max_grad_norm"), std::optional<std::string>("0"));
  for (const auto& [name, value] : plain) EXPECT_NE(name, "max_grad_norm");
  w.optimizer.max_grad_norm = 0.5;
  EXPECT_EQ(ab::recorded_option(ab::describe_workload(w), "max_grad_norm"), std::optional<std::string>("0.5"));
  w.grid.other_max_grad_norms = {0, 1};
  EXPECT_EQ(ab::recorded_option(ab::describe_workload(w), "max_grad_norm"), std::optional<std::string>("0.5,0,1"));
}

// --max-grad-norm 0,1 is a grid dimension, innermost: each job of the other lists without and with
// clipping, named by its flag; --knobs keeps the optimizer inside backward for the unclipped job
// alone and says so; --optimizer-in-backward refuses a list that clips; every norm is validated.
TEST(Clipping, ListIsAGridDimension) {
  ab::WorkloadOptions w = ab::workload_defaults(ab::Command::kSweep);
  w.batch = 4;
  w.micro_batches = {2, 4};
  w.precisions = {ab::Precision::kFp32, ab::Precision::kBf16};
  w.grid.other_max_grad_norms = {1};
  const std::vector<ab::GridJob> jobs = ab::grid_jobs(w);
  ASSERT_EQ(jobs.size(), 4u);
  EXPECT_EQ(jobs[0].max_grad_norm, 0);
  EXPECT_EQ(jobs[1].max_grad_norm, 1);
  EXPECT_EQ(jobs[1].precision, ab::Precision::kFp32);
  EXPECT_EQ(ab::job_flags(jobs[1], w), "--precision fp32 --max-grad-norm 1");
  const ab::WorkloadOptions one = ab::job_workload(w, jobs[1]);
  EXPECT_EQ(one.optimizer.max_grad_norm, 1);
  EXPECT_EQ(ab::grid_max_grad_norms(one), std::vector<double>{1});
  const std::vector<ab::SplitConfig> grid = ab::split_grid(w, 1);
  ASSERT_EQ(grid.size(), 8u);
  EXPECT_EQ(grid[2].max_grad_norm, 1);
  EXPECT_EQ(grid[2].key(), "2\u00d72/fp32/clip1");
  EXPECT_EQ(ab::job_of(grid[2]), jobs[1]);

  w.precisions = {ab::Precision::kFp32};
  w.grid.knobs = true;
  for (const ab::SplitConfig& s : ab::split_grid(w, 1)) {
    if (s.optimizer_in_backward) EXPECT_EQ(s.max_grad_norm, 0) << s.key();
  }
  EXPECT_EQ(ab::optimizer_in_backward_note(w, 1),
            "--knobs leaves the optimizer inside backward out of the splits clipped at --max-grad-norm 1 (each "
            "parameter would step before the global gradient norm it is clipped by is known); the --max-grad-norm 0 "
            "splits have it");
  w.grid.knobs = false;
  w.grid.optimizer_in_backward = true;
  EXPECT_THROW(ab::split_grid(w, 1), ab::UserError);
  w.grid.optimizer_in_backward = false;
  w.grid.other_max_grad_norms = {-1};
  try {
    ab::validate_workload(w);
    FAIL() << "no error";
  } catch (const ab::UserError& e) {
    EXPECT_EQ(std::string(e.what()), "--max-grad-norm must be a finite number of 0 or more (0: no clipping), got -1");
  }
}

// verify of --max-grad-norm 0,0.01: each job against its own reference (SGD: the update is the
// clipped gradient), the clipped one's reference far above its bound, every split passing.
TEST(Clipping, VerifyChecksEachNormOfAList) {
  ab::WorkloadOptions w = sgd_verify_workload();
  w.grid.other_max_grad_norms = {0.01};
  const std::vector<ab::VerifyResult> results = ab::run_verify_jobs(ab::VerifyOptions{w, ""});
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].max_grad_norm, 0);
  EXPECT_EQ(results[1].max_grad_norm, 0.01);
  EXPECT_GT(results[1].reference_grad_norm, 10 * 0.01);
  for (const ab::VerifyResult& r : results) {
    EXPECT_TRUE(r.all_pass);
    for (const ab::VerifySplit& s : r.splits) EXPECT_EQ(s.config.max_grad_norm, r.max_grad_norm) << s.config.key();
  }
}
