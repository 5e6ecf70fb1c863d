// The only place that knows LibTorch versions: Debian's 1.13 (CPU) and PyTorch 2.11 + CUDA 13 on
// the GPU machine. Everything else calls these functions.
//
//   at::Tensor y = compat::causal_attention(q, k, v);        // SDPA on 2.x, masked softmax on 1.13
//   compat::DocumentLayout docs = compat::document_layout({{3, 5}, {8}}, /*width=*/8, device);
//   at::Tensor z = compat::causal_attention(q, k, v, &docs);  // packed rows: per document
//   compat::AutocastGuard autocast(device.type(), at::kBFloat16);
//   compat::add_post_accumulate_grad_hook(p, [&](const at::Tensor& param) { ... });
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <torch/version.h>

#include <cstring>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace accumbench::compat {

std::string libtorch_version();  // "1.13.0", "2.11.0"
int libtorch_major_version();     // 1, 2: autograd formulas and attention kernels differ
bool cuda_available();
bool built_with_cuda();

// Packed rows (--packing bfd): documents that share a row but neither attention nor positions.
// Built once per forward; every block reads it.
struct DocumentLayout {
  at::Tensor positions;    // (B, T) int64: each token's position inside its document, from 0
  // Masked softmax (LibTorch 1.x, or any CPU): (B, 1, T, T) bool, true where a query must not see
  // a key (a later position, or another document): the block-diagonal causal mask.
  at::Tensor blocked;
  // Variable-length flash attention (LibTorch 2.x on CUDA): where each segment of the B·T
  // flattened tokens begins, (segments + 1) int32 on the device, and the longest segment.
  at::Tensor cu_seqlens;
  int64_t max_seqlen = 0;
};
// The layout of rows `width` positions wide whose documents have the given lengths, row by row
// (their sum may fall short of width: that tail is padding, a segment of its own, whose targets
// no loss reads), on `device`, with what causal_attention uses there. Positions restart at 0 in
// each document and in the tail.
DocumentLayout document_layout(const std::vector<std::vector<int64_t>>& documents, int64_t width,
                               c10::Device device);

// Causal self-attention. q: (B, H, T, hd); k, v: (B, Hkv, T, hd) with H % Hkv == 0 (grouped-query
// attention repeats each k/v head H/Hkv times). Returns (B, H, T, hd). With `documents`, a token
// attends only to the earlier tokens of its own document: the block-diagonal mask, or on CUDA
// with LibTorch 2.x the variable-length flash kernel (fp16/bf16 only), never a dense T×T mask.
// The explicit path scales the scores as transformers' eager attention does: times
// head_dim ** -0.5 (the Llama family), or divided by sqrt(head_dim) with `divide_scores` (GPT-2);
// in 16 bits the two round apart unless sqrt(head_dim) is a power of two.
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const DocumentLayout* documents = nullptr, bool divide_scores = false);

// Autocast on `device_type` with `dtype` for the guard's lifetime; no-op when dtype is nullopt.
// Restores the previous state and clears the cast cache on exit (as torch.autocast does).
class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType device_type, std::optional<at::ScalarType> dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_type_;
  bool active_ = false;
  bool previous_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kFloat;
};

// The dtype autocast computes in on `device_type`, or nullopt when autocast is off there.
std::optional<at::ScalarType> active_autocast_dtype(c10::DeviceType device_type);

// Calls hook(param) after param's gradient has been accumulated in backward (PyTorch 2.1's
// register_post_accumulate_grad_hook, built the way that API is: a post-hook on the parameter's
// AccumulateGrad node, which exists on 1.13 and 2.x alike). Keep the returned handle alive while
// the hook should run: it owns the node, which the parameter only references weakly.
std::shared_ptr<void> add_post_accumulate_grad_hook(
    const at::Tensor& param, std::function<void(const at::Tensor& param)> hook);

// c10::Allocator changed in 2.x: allocate() is no longer const and copy_data() is pure virtual.
// Derive from this and implement allocate_bytes() to work with both.
class AllocatorBase : public c10::Allocator {
 public:
  virtual c10::DataPtr allocate_bytes(size_t nbytes) const = 0;
#if TORCH_VERSION_MAJOR >= 2
  c10::DataPtr allocate(size_t nbytes) override { return allocate_bytes(nbytes); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
#else
  c10::DataPtr allocate(size_t nbytes) const override { return allocate_bytes(nbytes); }
#endif
};

// True when the error is an allocator out-of-memory (CUDA caching allocator, or our counting CPU
// allocator under --memory-limit).
bool is_out_of_memory(const std::exception& error);

// ---- CUDA (all no-ops / zero on CPU-only builds) ----
struct DeviceMemoryStats {
  int64_t allocated_bytes = 0;
  int64_t reserved_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
};
DeviceMemoryStats cuda_memory_stats(int device_index);
void cuda_reset_peak_memory_stats(int device_index);
void cuda_empty_cache();
// Frees cuBLAS/cuBLASLt's workspaces: LibTorch keeps one per (thread's handle, stream) for the
// life of the process, allocated (and counted) by the caching allocator, so every CUDA-graph
// capture stream would otherwise leave its own behind. They are remade on the next product.
void cuda_clear_blas_workspaces();
void cuda_set_memory_fraction(double fraction, int device_index);
void cuda_synchronize(int device_index);
// Makes `device_index` the current CUDA device of this thread: events and streams without an
// explicit device (the tracer's) then refer to it (data parallel: cuda:LOCAL_RANK).
void cuda_set_device(int device_index);
std::string cuda_device_name(int device_index);
int64_t cuda_device_total_memory_bytes(int device_index);
std::string cuda_driver_description();  // "CUDA runtime 13.0, driver 13.0"
void allow_tf32(bool allow);

// A CUDA event on the current stream. On CPU builds record() is a no-op and elapsed is NaN.
class DeviceEvent {
 public:
  DeviceEvent();
  ~DeviceEvent();
  DeviceEvent(const DeviceEvent&) = delete;
  DeviceEvent& operator=(const DeviceEvent&) = delete;
  DeviceEvent(DeviceEvent&& other) noexcept;
  void record();
  // Seconds from this event to `later`; both must have completed (after a synchronize).
  double seconds_until(const DeviceEvent& later) const;

 private:
  void* event_ = nullptr;  // cudaEvent_t
};

// PyTorch's Kineto profiler (CPU operators, and CUDA kernels through CUPTI) around one region,
// saved as a Chrome trace that Perfetto, chrome://tracing and TensorBoard open. LibTorch 2.x
// with CUDA only: Debian's 1.13 is built without Kineto (available() is false there).
//
//   compat::KernelProfile profile;
//   profile.start();
//   ... one training step ...
//   compat::KernelProfile::Summary s = profile.stop("split.trace.json");  // after a synchronize
class KernelProfile {
 public:
  struct Summary {
    double device_busy_seconds = 0;  // union of the GPU's kernel, memcpy and memset intervals
    int64_t device_events = 0;
  };
  static bool available();
  void start();
  Summary stop(const std::string& trace_path);
};

// AdamW over many tensors at once: at::_fused_adamw_ on CUDA (2.x), otherwise nullopt-returning
// false so the caller uses the per-tensor path. `steps` are float scalar tensors (1-based after
// increment) kept on the parameters' device, as the fused kernel expects.
bool fused_adamw(std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads,
                 std::vector<at::Tensor>& exp_avgs, std::vector<at::Tensor>& exp_avg_sqs,
                 std::vector<at::Tensor>& steps, double lr, double beta1, double beta2,
                 double weight_decay, double eps);

// Every tensor of `tensors` times the device scalar `factor`, in place, without a host sync:
// at::_foreach_mul_ with a tensor factor (2.x), else one mul_ per tensor.
void foreach_mul_(std::vector<at::Tensor>& tensors, const at::Tensor& factor);

}  // namespace accumbench::compat
