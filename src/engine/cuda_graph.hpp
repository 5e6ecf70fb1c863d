// One micro-step shape captured as two CUDA graphs, forward (with the loss) and backward, that
// share one private memory pool, as torch.cuda.make_graphed_callables does. Replays read static
// input buffers and accumulate into the parameters' persistent .grad tensors (the captured
// AccumulateGrad adds in place), so a step of k micro-batches is k × (load, forward, backward)
// with two graph launches each instead of one launch per kernel.
//
//   GraphedMicroStep graphed(*model, params, device, at::kBFloat16, /*scaled_loss=*/false, shape,
//                            first_inputs, first_targets);       // warmup + capture, once per shape
//   graphed.load(host_inputs, host_targets, /*divisor=*/tokens, /*loss_scale=*/1.0);
//   graphed.forward();
//   graphed.backward();
//   at::Tensor loss = graphed.loss().clone();   // overwritten by the next forward
//
// While it exists the gradients must be zeroed in place, never reset: the graph writes to their
// addresses. CPU-only builds compile this with a constructor that throws UserError.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "accumbench/models.hpp"

namespace accumbench {

class GraphedMicroStep {
 public:
  struct Shape {
    int64_t micro_batch = 0;
    int64_t seq_len = 0;
    bool activation_checkpointing = false;
    bool chunked_loss = false;  // the captured forward runs chunked_cross_entropy
    int64_t loss_chunk_tokens = 0;
    bool operator==(const Shape& other) const {
      return micro_batch == other.micro_batch && seq_len == other.seq_len &&
             activation_checkpointing == other.activation_checkpointing && chunked_loss == other.chunked_loss &&
             loss_chunk_tokens == other.loss_chunk_tokens;
    }
  };

  // Creates zeroed gradients where missing, runs `kWarmupMicroSteps` eager micro-steps on the
  // capture stream (cuBLAS workspaces, autograd threads, kernel selection), zeroes the gradients
  // again and captures. host_inputs/host_targets: (micro_batch, seq_len) int64, used for warmup.
  // `scaled_loss`: backward starts from loss × loss scale (fp16 loss scaling).
  // `on_capture_stream` runs first with the capture stream current: the caller creates there
  // whatever autograd nodes it keeps alive across steps (the parameters' AccumulateGrad nodes
  // that gradient hooks hold), since a node remembers the stream it was made on, and one made on
  // the default stream would make the captured backward wait on that stream, which CUDA refuses
  // during capture ("operation would make the legacy stream depend on a capturing blocking stream").
  GraphedMicroStep(LanguageModelImpl& model, const std::vector<at::Tensor>& params, c10::Device device,
                   std::optional<at::ScalarType> autocast, bool scaled_loss, const Shape& shape,
                   const at::Tensor& host_inputs, const at::Tensor& host_targets,
                   const std::function<void()>& on_capture_stream = {});
  ~GraphedMicroStep();
  GraphedMicroStep(const GraphedMicroStep&) = delete;
  GraphedMicroStep& operator=(const GraphedMicroStep&) = delete;

  static constexpr int kWarmupMicroSteps = 3;  // as PyTorch's CUDA-graph examples

  const Shape& shape() const;
  // Copies one micro-batch into the static buffers (asynchronously from pinned memory) and sets
  // the loss divisor and loss scale the graphs read.
  void load(const at::Tensor& host_inputs, const at::Tensor& host_targets, double divisor, double loss_scale);
  void forward();   // replays forward + loss
  void backward();  // replays backward: gradients += d(loss × scale)/dw
  // The last forward's loss / divisor (unscaled), a device scalar in the graph's pool.
  const at::Tensor& loss() const;
  // Bytes of the graphs' private pool (reserved by the capture) that the caching allocator does
  // not report as allocated: the micro-step's temporaries and the activations freed at the end of
  // the capture, live again during every replay. The activations the captured autograd graph keeps
  // are allocated, and counted there.
  int64_t pool_bytes() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace accumbench
