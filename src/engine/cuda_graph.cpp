#include "engine/cuda_graph.hpp"

#include <torch/torch.h>
#include <ATen/autocast_mode.h>

#include "accumbench/error.hpp"
#include "compat/compat.hpp"
#include "engine/micro_step.hpp"

#if ACCUMBENCH_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace accumbench {

#if ACCUMBENCH_WITH_CUDA

namespace {

// An open stream capture that an exception interrupts must still be ended, or every later CUDA
// call of the process fails (capture mode is global); the half-captured graph is discarded.
class CaptureScope {
 public:
  CaptureScope(at::cuda::CUDAGraph& graph, c10::MempoolId_t pool) : graph_(graph) {
    graph_.capture_begin(pool);
    open_ = true;
  }
  void end() {
    open_ = false;
    graph_.capture_end();
  }
  ~CaptureScope() {
    if (!open_) return;
    try {
      graph_.capture_end();
    } catch (const std::exception&) {  // the capture was invalidated by the error being thrown
    }
  }
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

 private:
  at::cuda::CUDAGraph& graph_;
  bool open_ = false;
};

// torch.cuda.graph's advice: autocast's cast cache would hand tensors cast during capture to
// later eager code (or the reverse); casts inside the graph must be captured every time.
class AutocastCacheOff {
 public:
  AutocastCacheOff() : previous_(at::autocast::is_autocast_cache_enabled()) {
    at::autocast::set_autocast_cache_enabled(false);
  }
  ~AutocastCacheOff() { at::autocast::set_autocast_cache_enabled(previous_); }
  AutocastCacheOff(const AutocastCacheOff&) = delete;
  AutocastCacheOff& operator=(const AutocastCacheOff&) = delete;

 private:
  bool previous_;
};

}  // namespace

struct GraphedMicroStep::State {
  Shape shape;
  at::Tensor inputs;         // (b, T) int64, static
  at::Tensor targets;        // (b, T) int64, static
  at::Tensor divisor;        // () fp32: tokens of the step (token normalization) or per micro-batch
  at::Tensor loss_scale;     // () fp32: fp16 loss scale, 1 otherwise
  at::Tensor loss;           // () fp32: Σ CE / divisor, written by the forward graph
  at::Tensor backward_root;  // loss or loss × scale; owns the captured autograd graph and its saved activations
  int64_t pool_bytes = 0;
  // Declared last: destroyed first, before the tensors that live in their pool.
  at::cuda::CUDAGraph forward_graph;
  at::cuda::CUDAGraph backward_graph;
};

GraphedMicroStep::GraphedMicroStep(LanguageModelImpl& model, const std::vector<at::Tensor>& params,
                                   c10::Device device, std::optional<at::ScalarType> autocast, bool scaled_loss,
                                   const Shape& shape, const at::Tensor& host_inputs,
                                   const at::Tensor& host_targets)
    : state_(std::make_unique<State>()) {
  TORCH_CHECK(device.is_cuda(), "CUDA graphs need a CUDA device, got ", device.str());
  TORCH_CHECK(host_inputs.size(0) == shape.micro_batch && host_inputs.size(1) == shape.seq_len,
              "warmup inputs do not have the captured shape");
  State& s = *state_;
  s.shape = shape;
  c10::cuda::CUDAGuard device_guard(device);
  const auto scalar_options = at::TensorOptions().dtype(at::kFloat).device(device);
  s.inputs = host_inputs.to(device).contiguous();
  s.targets = host_targets.to(device).contiguous();
  s.divisor = at::full({}, static_cast<double>(shape.micro_batch * shape.seq_len), scalar_options);
  s.loss_scale = at::ones({}, scalar_options);
  auto zero_gradients = [&] {
    torch::NoGradGuard no_grad;
    for (const auto& p : params) {
      if (p.grad().defined()) {
        p.mutable_grad().zero_();
      } else {
        p.mutable_grad() = at::zeros_like(p);  // persistent: AccumulateGrad now adds in place
      }
    }
  };
  auto micro_step = [&]() -> at::Tensor {  // the backward root
    at::Tensor summed = summed_cross_entropy(model, s.inputs, s.targets, device.type(), autocast, shape.chunked_loss,
                                             shape.loss_chunk_tokens);
    s.loss = summed / s.divisor;
    return scaled_loss ? s.loss * s.loss_scale : s.loss;
  };
  zero_gradients();
  compat::cuda_synchronize(device.index());  // the capture stream starts after the buffers above

  const c10::cuda::CUDAStream capture_stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
  {
    c10::cuda::CUDAStreamGuard stream_guard(capture_stream);
    // Warmup on the capture stream itself: cuBLAS keys its workspace by stream, and the autograd
    // engine's device thread, lazy kernel initialization and the rotary tables must exist before
    // capture (none of them may allocate or synchronize inside it).
    for (int i = 0; i < kWarmupMicroSteps; ++i) torch::autograd::backward({micro_step()});
    zero_gradients();
    s.loss = at::Tensor();
    capture_stream.synchronize();
    const int64_t reserved_before = compat::cuda_memory_stats(device.index()).reserved_bytes;

    AutocastCacheOff no_cast_cache;
    {
      CaptureScope capture(s.forward_graph, /*pool=*/{0, 0});
      s.backward_root = micro_step();
      capture.end();
    }
    {
      // Same pool: the backward graph reads the activations the forward graph saved. Graphs
      // sharing a pool must replay in capture order, which forward() then backward() does.
      CaptureScope capture(s.backward_graph, s.forward_graph.pool());
      torch::autograd::backward({s.backward_root}, /*grad_tensors=*/{}, /*retain_graph=*/true);
      capture.end();
    }
    capture_stream.synchronize();
    s.pool_bytes = compat::cuda_memory_stats(device.index()).reserved_bytes - reserved_before;
  }
}

GraphedMicroStep::~GraphedMicroStep() = default;

const GraphedMicroStep::Shape& GraphedMicroStep::shape() const { return state_->shape; }

void GraphedMicroStep::load(const at::Tensor& host_inputs, const at::Tensor& host_targets, double divisor,
                            double loss_scale) {
  State& s = *state_;
  TORCH_CHECK(host_inputs.sizes() == s.inputs.sizes(), "micro-batch shape differs from the captured one");
  s.inputs.copy_(host_inputs, /*non_blocking=*/true);
  s.targets.copy_(host_targets, /*non_blocking=*/true);
  s.divisor.fill_(divisor);
  s.loss_scale.fill_(loss_scale);
}

void GraphedMicroStep::forward() { state_->forward_graph.replay(); }
void GraphedMicroStep::backward() { state_->backward_graph.replay(); }
const at::Tensor& GraphedMicroStep::loss() const { return state_->loss; }
int64_t GraphedMicroStep::pool_bytes() const { return state_->pool_bytes; }

#else  // CPU-only LibTorch

struct GraphedMicroStep::State {
  Shape shape;
  at::Tensor loss;
};

GraphedMicroStep::GraphedMicroStep(LanguageModelImpl&, const std::vector<at::Tensor>&, c10::Device,
                                   std::optional<at::ScalarType>, bool, const Shape&, const at::Tensor&,
                                   const at::Tensor&) {
  throw UserError("--cuda-graphs needs a CUDA build of accumbench (this one uses a CPU-only LibTorch); drop the option");
}
GraphedMicroStep::~GraphedMicroStep() = default;
const GraphedMicroStep::Shape& GraphedMicroStep::shape() const { return state_->shape; }
void GraphedMicroStep::load(const at::Tensor&, const at::Tensor&, double, double) {}
void GraphedMicroStep::forward() {}
void GraphedMicroStep::backward() {}
const at::Tensor& GraphedMicroStep::loss() const { return state_->loss; }
int64_t GraphedMicroStep::pool_bytes() const { return 0; }

#endif

}  // namespace accumbench
