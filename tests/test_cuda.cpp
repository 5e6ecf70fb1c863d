// GPU tests (built with -DACCUMBENCH_GPU_TESTS=ON; each skips without a CUDA device):
// CUDA-graph micro-steps compute the eager step's gradients and updates, and the memory plan
// predicts the measured CUDA peak within 5 % for the two real models.
// Packed rows (--packing bfd) stay apart in the variable-length flash kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <torch/torch.h>

#include "accumbench/engine.hpp"
#include "accumbench/error.hpp"
#include "accumbench/plan.hpp"
#include "accumbench/report.hpp"
#include "accumbench/sweep.hpp"
#include "accumbench/verify.hpp"
#include "compat/compat.hpp"
#include "engine/gradient_clipping.hpp"

#if ACCUMBENCH_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif
#include <map>

namespace ab = accumbench;

namespace {

#define SKIP_WITHOUT_CUDA() \
  if (!ab::compat::cuda_available()) GTEST_SKIP() << "no CUDA device"

double relative_l2(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want) {
  double diff_sq = 0, ref_sq = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const at::Tensor a = got[i].to(at::kCPU, at::kDouble);
    const at::Tensor b = want[i].to(at::kCPU, at::kDouble);
    diff_sq += (a - b).pow(2).sum().item<double>();
    ref_sq += b.pow(2).sum().item<double>();
  }
  return ref_sq > 0 ? std::sqrt(diff_sq / ref_sq) : 0.0;
}

std::vector<at::Tensor> gradients(ab::Trainer& trainer) {
  std::vector<at::Tensor> out;
  for (const auto& p : trainer.model()->parameters()) out.push_back(p.grad().detach().clone());
  return out;
}

std::vector<at::Tensor> weights(ab::Trainer& trainer) {
  std::vector<at::Tensor> out;
  for (const auto& p : trainer.model()->parameters()) out.push_back(p.detach().clone());
  return out;
}

struct GraphCase {
  const char* preset;
  ab::Precision precision;
  bool checkpointing;
};

std::string case_name(const ::testing::TestParamInfo<GraphCase>& info) {
  std::string name = std::string(info.param.preset) + "_" + ab::to_string(info.param.precision) +
                     (info.param.checkpointing ? "_ckpt" : "");
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

// gpt2-mini, T=128, batch 8 on the GPU: the workload the verify and sweep tests share.
ab::WorkloadOptions gpt2_mini_on_cuda() {
  ab::WorkloadOptions o = ab::workload_defaults(ab::Command::kVerify);
  o.data.lengths = ab::LengthMode::kVariable;  // unequal lengths: the normalization shows
  o.model.preset = "gpt2-mini";
  o.seq_len = 128;
  o.batch = 8;
  o.device = "cuda";
  return o;
}

}  // namespace

class GraphedSteps : public ::testing::TestWithParam<GraphCase> {};

// Same weights, same batches, 2×4 split, three optimizer steps: eager and graphed trainers must
// agree. The graphs replay the kernels eager mode launched for this shape, so fp32 agrees to
// summation order (1e-6, a 10× margin over float32 accumulation noise of these sizes) and
// bf16/fp16 within verify's autocast tolerance (3e-2). Three steps check that the in-place
// zeroing between steps and the static input buffers work, not just the first replay.
TEST_P(GraphedSteps, MatchEagerGradientsAndUpdates) {
  SKIP_WITHOUT_CUDA();
  const GraphCase c = GetParam();
  const ab::ModelConfig cfg = ab::find_preset(c.preset);
  const c10::Device cuda(c10::kCUDA, 0);
  ab::TrainOptions train;
  train.precision = c.precision;
  ab::Trainer eager(ab::build_model(cfg, 7), cuda, train);
  ab::Trainer graphed(ab::build_model(cfg, 7), cuda, train);
  ab::DataOptions d;
  d.vocab_size = cfg.vocab_size;
  d.seq_len = 64;
  d.batch = 8;
  d.lengths = ab::LengthMode::kVariable;
  d.distinct_batches = 3;
  d.pin_memory = true;
  const std::vector<ab::TokenBatch> batches = ab::make_synthetic_batches(d);
  ab::StepOptions eager_options;
  eager_options.micro_batch = 2;
  eager_options.activation_checkpointing = c.checkpointing;
  ab::StepOptions graph_options = eager_options;
  graph_options.cuda_graphs = true;
  const double gradient_tolerance = c.precision == ab::Precision::kFp32 ? 1e-6 : ab::gradient_tolerance(c.precision);
  const double update_tolerance = c.precision == ab::Precision::kFp32 ? 1e-5 : ab::update_tolerance(c.precision);
  std::vector<at::Tensor> start = weights(eager);

  for (int step = 0; step < 3; ++step) {
    ab::StepOutcome a = eager.accumulate(batches[step], eager_options);
    ab::StepOutcome b = graphed.accumulate(batches[step], graph_options);
    const double grad_error = relative_l2(gradients(graphed), gradients(eager));
    EXPECT_LE(grad_error, gradient_tolerance) << "step " << step;
    EXPECT_NEAR(b.loss(), a.loss(), gradient_tolerance * std::max(1.0, std::abs(a.loss()))) << "step " << step;
    eager.optimizer_step(a, eager_options);
    graphed.optimizer_step(b, graph_options);
    EXPECT_EQ(a.skipped, b.skipped);
    std::vector<at::Tensor> eager_update, graphed_update;
    const std::vector<at::Tensor> after_eager = weights(eager);
    const std::vector<at::Tensor> after_graphed = weights(graphed);
    for (size_t i = 0; i < start.size(); ++i) {
      eager_update.push_back(after_eager[i] - start[i]);
      graphed_update.push_back(after_graphed[i] - start[i]);
    }
    const double update_error = relative_l2(graphed_update, eager_update);
    EXPECT_LE(update_error, update_tolerance) << "step " << step;
    std::cout << "[ graphs ] " << c.preset << " " << ab::to_string(c.precision) << (c.checkpointing ? " ckpt" : "")
              << " step " << step << ": rel L2 grad " << grad_error << ", update " << update_error << "\n";
  }
  EXPECT_GT(graphed.graph_pool_bytes(), 0);
}

INSTANTIATE_TEST_SUITE_P(Cuda, GraphedSteps,
                         ::testing::Values(GraphCase{"gpt2-tiny", ab::Precision::kFp32, false},
                                           GraphCase{"gpt2-tiny", ab::Precision::kBf16, false},
                                           GraphCase{"gpt2-tiny", ab::Precision::kFp16, false},
                                           GraphCase{"gpt2-tiny", ab::Precision::kBf16, true},
                                           GraphCase{"llama-tiny", ab::Precision::kFp32, false},
                                           GraphCase{"llama-tiny", ab::Precision::kBf16, false}),
                         case_name);

// The user-facing proof: `verify --cuda-graphs` on a real preset shape, every split eager and graphed.
TEST(CudaGraphs, VerifyPassesForEveryGraphedSplit) {
  SKIP_WITHOUT_CUDA();
  ab::WorkloadOptions o = gpt2_mini_on_cuda();
  o.precisions = {ab::Precision::kBf16};
  o.data.lengths = ab::LengthMode::kVariable;
  o.grid.cuda_graphs = true;
  const ab::VerifyResult r = ab::run_verify(o);
  ab::print_verify(r, std::cout);
  int graphed = 0;
  for (const auto& s : r.splits) graphed += s.config.cuda_graphs ? 1 : 0;
  EXPECT_EQ(graphed, 4);  // 1, 2, 4, 8
  EXPECT_TRUE(r.all_pass);
}

// The chunked cross-entropy on the GPU, eager and captured in graphs, against the plain head's
// whole batch: the same tolerance as every bf16 split (3e-2), and on GPT-2's real vocabulary
// (50257; 8 chunks of 1024 tokens at micro-batch 8, T=1024) the measured peak below the plain
// head's by at least half the logits' bytes. PlanOnCuda checks the chunked plan.
TEST(ChunkedLoss, VerifyPassesEagerAndGraphedOnCuda) {
  SKIP_WITHOUT_CUDA();
  for (const char* precision : {"bf16", "fp16"}) {  // fp16: the weight product in fp32, loss scaling
    ab::WorkloadOptions o = gpt2_mini_on_cuda();
    o.micro_batches = {1, 8};
    o.precisions = {ab::precision_from_string(precision)};
    o.data.lengths = ab::LengthMode::kVariable;
    o.grid.cuda_graphs = true;
    o.loss.chunked = true;
    const ab::VerifyResult r = ab::run_verify(o);
    ab::print_verify(r, std::cout);
    int chunked = 0;
    for (const auto& s : r.splits) chunked += s.config.chunked_loss ? 1 : 0;
    EXPECT_EQ(chunked, 4) << precision;  // 1 and 8, eager and graphed
    EXPECT_TRUE(r.all_pass) << precision;
  }
}

TEST(ChunkedLoss, LowersTheMeasuredPeakOfGpt2_124m) {
  SKIP_WITHOUT_CUDA();
  const ab::ModelConfig cfg = ab::find_preset("gpt2-124m");
  ab::PlanOptions o;
  o.seq_len = 1024;
  o.batch = 8;
  o.cpu = false;
  o.attention = ab::AttentionKind::kFlash;
  o.libtorch_major = 2;
  ab::SplitConfig plain;
  plain.micro_batch = 8;
  plain.accum_steps = 1;
  plain.precision = ab::Precision::kBf16;
  ab::SplitConfig chunked = plain;
  chunked.chunked_loss = true;
  const int64_t plain_measured = ab::measure_step_peak(cfg, o, plain, "cuda");
  const int64_t chunked_measured = ab::measure_step_peak(cfg, o, chunked, "cuda");
  std::cout << "[ chunked ] gpt2-124m 8×1 bf16 T=1024: plain " << plain_measured << " B, chunked " << chunked_measured
            << " B\n";
  const int64_t logits_bytes = int64_t{8} * 1024 * cfg.vocab_size * (2 + 4);  // bf16 logits + fp32 copy
  EXPECT_GT(plain_measured - chunked_measured, logits_bytes / 2);
}

TEST(CudaGraphs, SweepMeasuresGraphedSplits) {
  SKIP_WITHOUT_CUDA();
  ab::SweepOptions o;
  o.workload = gpt2_mini_on_cuda();
  o.workload.data.lengths = ab::LengthMode::kFixed;
  o.workload.micro_batches = {1, 8};
  o.workload.precisions = {ab::Precision::kBf16};
  o.workload.grid.cuda_graphs = true;
  o.warmup = 1;
  o.steps = 3;
  o.time_budget_seconds = 0;  // exactly these rounds
  const ab::SweepResult result = ab::run_sweep(o);
  ASSERT_EQ(result.runs.size(), 4u);
  for (const auto& run : result.runs) {
    EXPECT_EQ(run.status, ab::RunStatus::kOk) << run.config.label() << ": " << run.error;
    EXPECT_EQ(run.steps.size(), 3u) << run.config.label();
    EXPECT_GT(run.peak_allocated_bytes, 0) << run.config.label();
    EXPECT_GE(run.peak_reserved_bytes, run.peak_allocated_bytes - (64 << 20)) << run.config.label();
    std::cout << "[ graphs ] " << run.config.label() << " median step " << run.step_seconds.median << " s, peak "
              << run.peak_allocated_bytes << " B allocated (plan " << run.predicted_peak_bytes << "), "
              << run.peak_reserved_bytes << " B reserved\n";
  }
}

// Between optimizer steps only the weights and AdamW's moments stay allocated (the gradients are
// set to None by the step): what the plan starts every step from. A persistent extra (a cache, a
// buffer a kernel keeps) would be an error of the plan on every split; on failure the live blocks
// are listed by size, to name it. Allowance: 64 MiB for cuBLAS/cuBLASLt workspaces.
TEST(CudaMemory, BetweenStepsOnlyWeightsAndMomentsStayAllocated) {
  SKIP_WITHOUT_CUDA();
  const ab::ModelConfig cfg = ab::find_preset("gpt2-124m");
  const c10::Device cuda(c10::kCUDA, 0);
  ab::TrainOptions train;
  train.precision = ab::Precision::kBf16;
  {  // cuBLAS/cuBLASLt workspaces of this thread and autograd's, on this stream: allocated once
    ab::compat::AutocastGuard autocast(c10::kCUDA, at::kBFloat16);
    const auto options = at::TensorOptions().device(cuda);
    const at::Tensor w = torch::randn({64, 64}, options).requires_grad_();
    at::linear(torch::randn({8, 64}, options), w, torch::randn({64}, options)).sum().backward();
  }
  ab::compat::cuda_synchronize(0);
  ab::compat::cuda_empty_cache();
  const int64_t before = ab::compat::cuda_memory_stats(0).allocated_bytes;
  ab::Trainer trainer(ab::build_model(cfg, 7), cuda, train);
  ab::DataOptions d;
  d.vocab_size = cfg.vocab_size;
  d.seq_len = 1024;
  d.batch = 2;
  d.distinct_batches = 2;
  const std::vector<ab::TokenBatch> batches = ab::make_synthetic_batches(d);
  ab::StepOptions options;
  options.micro_batch = 1;
  for (int step = 0; step < 2; ++step) trainer.step(batches[step], options);
  ab::compat::cuda_synchronize(0);
  const int64_t kept = ab::compat::cuda_memory_stats(0).allocated_bytes - before;
  const int64_t expected = trainer.parameter_bytes() + trainer.optimizer_state_bytes();
  std::cout << "[ memory ] kept between steps " << kept << " B, weights + moments " << expected << " B, extra "
            << kept - expected << " B\n";
#if ACCUMBENCH_WITH_CUDA
  if (kept - expected > (64 << 20)) {
    std::map<size_t, int> blocks;  // requested size → count, the largest first below
    for (const auto& segment : c10::cuda::CUDACachingAllocator::snapshot().segments) {
      for (const auto& block : segment.blocks) {
        if (block.allocated) ++blocks[block.requested_size];
      }
    }
    for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
      std::cout << "[ memory ] live block " << it->first << " B x " << it->second << "\n";
    }
  }
#endif
  EXPECT_LE(kept - expected, 64 << 20);
}

// Issue 3/4's GPU goal: the plan within 5 % of the measured CUDA peak (allocated bytes) for
// GPT-2 124M and Qwen2.5-0.5B at T=1024, bf16, with and without accumulation.
class PlanOnCuda : public ::testing::TestWithParam<const char*> {};

TEST_P(PlanOnCuda, PredictedPeakWithinFivePercentOfMeasured) {
  SKIP_WITHOUT_CUDA();
  ab::SweepOptions o;
  o.workload.model.preset = GetParam();
  o.workload.seq_len = 1024;
  o.workload.batch = 8;
  o.workload.micro_batches = {1, 4, 8};
  o.workload.device = "cuda";
  o.workload.precisions = {ab::Precision::kBf16};
  o.workload.grid.knobs = true;
  o.workload.loss.chunked = true;
  o.warmup = 1;
  o.steps = 2;
  o.time_budget_seconds = 0;  // exactly these rounds
  const ab::SweepResult result = ab::run_sweep(o);
  for (const auto& run : result.runs) {
    ASSERT_EQ(run.status, ab::RunStatus::kOk) << run.config.label() << ": " << run.error;
    ASSERT_GT(run.predicted_peak_bytes, 0) << run.config.label();
    const double error = static_cast<double>(run.predicted_peak_bytes - run.peak_allocated_bytes) /
                         static_cast<double>(run.peak_allocated_bytes);
    std::cout << "[ plan   ] " << GetParam() << " " << run.config.label() << " predicted " << run.predicted_peak_bytes
              << " measured " << run.peak_allocated_bytes << " error " << 100 * error << " %\n";
    EXPECT_LE(std::abs(error), 0.05) << run.config.label();
  }
}

INSTANTIATE_TEST_SUITE_P(Cuda, PlanOnCuda, ::testing::Values("gpt2-124m", "qwen2.5-0.5b"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

// --packing bfd on CUDA (LibTorch 2.x: the variable-length flash kernel, bf16): a document's
// logits do not change when another document of its row changes, and equal those of the same
// tokens alone in a row (positions restart). bf16 logits of magnitude ~1 round to 2^-8 of
// themselves, and the packed and lone runs tile the matmuls differently: 3e-2 absolute.
TEST(PackedDocuments, VarlenFlashKeepsDocumentsApartOnCuda) {
  SKIP_WITHOUT_CUDA();
  for (const char* preset : {"gpt2-mini", "llama-tiny"}) {
    const ab::ModelConfig cfg = ab::find_preset(preset);
    ab::LanguageModel model = ab::build_model(cfg, 0);
    model->to(torch::kCUDA);
    model->eval();
    torch::NoGradGuard no_grad;
    torch::manual_seed(2);
    const ab::RowDocuments documents = {{40, 70}, {128}};
    const at::Tensor tokens = torch::randint(cfg.vocab_size, {2, 128}, torch::kLong).to(torch::kCUDA);
    at::Tensor changed = tokens.clone();
    changed.narrow(1, 0, 40).random_(0, cfg.vocab_size);
    changed[1].copy_(tokens[1]);
    at::Tensor a, b, alone;
    {
      ab::compat::AutocastGuard autocast(c10::DeviceType::CUDA, at::kBFloat16);
      a = model->forward(tokens, documents).to(at::kFloat);
      b = model->forward(changed, documents).to(at::kFloat);
      alone = model->forward(tokens[0].narrow(0, 40, 70).unsqueeze(0)).to(at::kFloat);
    }
    const at::Tensor second_a = a[0].narrow(0, 40, 70), second_b = b[0].narrow(0, 40, 70);
    EXPECT_LT((second_a - second_b).abs().max().item<double>(), 1e-6) << preset;  // the same kernel, the same values
    EXPECT_GT((a[0].narrow(0, 0, 40) - b[0].narrow(0, 0, 40)).abs().max().item<double>(), 1e-2) << preset;
    EXPECT_LT((second_a - alone[0]).abs().max().item<double>(), 3e-2) << preset;
  }
}

// verify with bfd packing on CUDA: every bf16 split against the whole batch (verify's bf16 bar).
TEST(PackedDocuments, VerifyPassesWithBfdOnCuda) {
  SKIP_WITHOUT_CUDA();
  ab::WorkloadOptions o = gpt2_mini_on_cuda();
  o.precisions = {ab::Precision::kBf16};
  o.data.lengths = ab::LengthMode::kVariable;
  o.data.packing = ab::Packing::kBfd;
  const ab::VerifyResult r = ab::run_verify(o);
  ab::print_verify(r, std::cout);
  EXPECT_TRUE(r.all_pass);
}

// Gradient clipping on the GPU (PyTorch 2.x's foreach norm and a tensor-scaled foreach multiply):
// the norm and the clipped gradients of the CPU's path (1e-5 relative in fp32; bf16 gradients are
// scaled in bf16: 1e-2), and verify with SGD, whose update is the clipped gradient, passes.
TEST(Clipping, CudaMatchesTheCpuAndVerifyPasses) {
  SKIP_WITHOUT_CUDA();
  torch::manual_seed(5);
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    std::vector<at::Tensor> cpu, gpu;
    for (const int64_t n : {3000, 70, 512 * 33}) {
      at::Tensor p = torch::zeros({n}, dtype).set_requires_grad(true);
      p.mutable_grad() = torch::randn({n}).to(dtype);
      at::Tensor q = torch::zeros({n}, torch::TensorOptions().dtype(dtype).device(torch::kCUDA)).set_requires_grad(true);
      q.mutable_grad() = p.grad().to(torch::kCUDA);
      cpu.push_back(p);
      gpu.push_back(q);
    }
    const double bound = dtype == at::kFloat ? 1e-5 : 1e-2;
    const double on_cpu = ab::clip_gradient_norm(cpu, 1.0).item<double>();
    const double on_gpu = ab::clip_gradient_norm(gpu, 1.0).item<double>();
    EXPECT_NEAR(on_gpu / on_cpu, 1.0, bound) << c10::toString(dtype);
    for (size_t i = 0; i < cpu.size(); ++i) {
      const at::Tensor a = cpu[i].grad().to(at::kDouble), b = gpu[i].grad().cpu().to(at::kDouble);
      EXPECT_LT((a - b).norm().item<double>() / a.norm().item<double>(), bound) << c10::toString(dtype) << " " << i;
    }
  }
  ab::WorkloadOptions o = gpt2_mini_on_cuda();
  o.optimizer.kind = ab::OptimizerKind::kSgd;
  o.optimizer.max_grad_norm = 0.01;
  const ab::VerifyResult r = ab::run_verify(o);
  ab::print_verify(r, std::cout);
  EXPECT_GT(r.reference_grad_norm, 10 * o.optimizer.max_grad_norm);
  EXPECT_TRUE(r.all_pass);
}
