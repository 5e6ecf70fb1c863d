#include "engine/cuda_graph.hpp"

#include <torch/torch.h>
#include <ATen/autocast_mode.h>

#include "accumbench/error.hpp"
#include "compat/compat.hpp"
#include "engine/micro_step.hpp"

#if ACCUMBENCH_WITH_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace accumbench {

#if ACCUMBENCH_WITH_CUDA

namespace {

// A CUDA graph that can give up a capture an error interrupted. PyTorch's capture_end() throws
// at cudaStreamEndCapture when the capture was invalidated, before it hands the private memory
// pool back and before it takes the random generators out of capture mode; its reset() then
// releases neither, as no capture ended. The pool would hold every block the capture allocated
// for the rest of the process (the next splits run out of memory beside it) and every later
// random op would fail ("Offset increment outside graph capture"). abandon() does what
// capture_end() did not.
class Graph : public at::cuda::CUDAGraph {
 public:
  void abandon() noexcept {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(capture_stream_.stream(), &status) == cudaSuccess &&
        status != cudaStreamCaptureStatusNone) {
      cudaGraph_t partial = nullptr;
      if (cudaStreamEndCapture(capture_stream_.stream(), &partial) == cudaSuccess && partial != nullptr) {
        cudaGraphDestroy(partial);
      }
    }
    (void)cudaGetLastError();  // the capture's error is reported by the exception in flight
    for (auto& entry : captured_generator_states_) entry.first->capturing_ = false;
    if (capture_ended_ || capture_dev_ == UNDEFINED_DEVICE) return;  // reset() releases an ended capture's pool
    try {
      c10::cuda::CUDACachingAllocator::endAllocateToPool(capture_dev_, mempool_id_);
    } catch (const std::exception&) {  // capture_end() got that far before it threw
    }
    try {
      c10::cuda::CUDACachingAllocator::releasePool(capture_dev_, mempool_id_);
    } catch (const std::exception&) {
    }
  }
};

// An open stream capture that an exception interrupts must still be ended, or every later CUDA
// call of the process fails (capture mode is global); the half-captured graph is discarded.
class CaptureScope {
 public:
  CaptureScope(Graph& graph, c10::MempoolId_t pool) : graph_(graph) {
    graph_.capture_begin(pool);
    open_ = true;
  }
  void end() {
    try {
      graph_.capture_end();
    } catch (...) {
      graph_.abandon();
      open_ = false;
      throw;
    }
    open_ = false;
  }
  ~CaptureScope() {
    if (open_) graph_.abandon();
  }
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

 private:
  Graph& graph_;
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
  Graph forward_graph;
  Graph backward_graph;
};

GraphedMicroStep::GraphedMicroStep(LanguageModelImpl& model, const std::vector<at::Tensor>& params,
                                   c10::Device device, std::optional<at::ScalarType> autocast, bool scaled_loss,
                                   const Shape& shape, const at::Tensor& host_inputs,
                                   const at::Tensor& host_targets, const std::function<void()>& on_capture_stream)
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
    if (on_capture_stream) on_capture_stream();
    // Warmup on the capture stream itself: cuBLAS keys its workspace by stream, and the autograd
    // engine's device thread, lazy kernel initialization and the rotary tables must exist before
    // capture (none of them may allocate or synchronize inside it).
    for (int i = 0; i < kWarmupMicroSteps; ++i) torch::autograd::backward({micro_step()});
    zero_gradients();
    s.loss = at::Tensor();
    capture_stream.synchronize();
    const compat::DeviceMemoryStats before = compat::cuda_memory_stats(device.index());

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
    // The pool's segments, less the tensors the capture left alive in it (the saved activations
    // backward_root keeps): those the allocator still counts as allocated.
    const compat::DeviceMemoryStats after = compat::cuda_memory_stats(device.index());
    s.pool_bytes = (after.reserved_bytes - before.reserved_bytes) - (after.allocated_bytes - before.allocated_bytes);
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
                                   const at::Tensor&, const std::function<void()>&) {
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
