#include "compat/compat.hpp"

#include <torch/torch.h>
#include <torch/version.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <ATen/autocast_mode.h>

#define ACCUMBENCH_TORCH_2 (TORCH_VERSION_MAJOR >= 2)

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#if ACCUMBENCH_WITH_CUDA && ACCUMBENCH_TORCH_2
#include <torch/csrc/autograd/profiler_kineto.h>
#endif

#if ACCUMBENCH_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif


namespace accumbench::compat {

std::string libtorch_version() {
  std::ostringstream out;
  out << TORCH_VERSION_MAJOR << "." << TORCH_VERSION_MINOR << "." << TORCH_VERSION_PATCH;
  return out.str();
}

int libtorch_major_version() { return TORCH_VERSION_MAJOR; }

bool built_with_cuda() { return ACCUMBENCH_WITH_CUDA != 0; }

bool cuda_available() {
#if ACCUMBENCH_WITH_CUDA
  return torch::cuda::is_available();
#else
  return false;
#endif
}

namespace {

// softmax(q·kᵀ/√hd masked)·v with the keys and values repeated to H heads; `blocked` (T, T) or
// (B, 1, T, T) bool, true where a query must not see a key. masked_fill saves the mask for
// backward: the shared packed mask is saved once, not per block. The softmax runs in fp32 and its
// result is cast back to q's dtype, as transformers' eager_attention_forward does
// (softmax(..., dtype=torch.float32).to(query.dtype)): with 16-bit activations the fp32
// probabilities (softmax's saved output) and their 16-bit copy (bmm's operand) both stay for
// backward, on the CPU as on CUDA (whose autocast runs softmax in fp32 anyway).
at::Tensor masked_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& blocked,
                            bool divide_scores) {
  const int64_t heads = q.size(1);
  const int64_t kv_heads = k.size(1);
  at::Tensor keys = k;
  at::Tensor values = v;
  if (heads != kv_heads) {  // (B, Hkv, T, hd) -> (B, H, T, hd)
    keys = k.repeat_interleave(heads / kv_heads, /*dim=*/1);
    values = v.repeat_interleave(heads / kv_heads, /*dim=*/1);
  }
  const double root = std::sqrt(static_cast<double>(q.size(3)));
  at::Tensor scores = at::matmul(q, keys.transpose(-2, -1));  // (B, H, T, T)
  scores = divide_scores ? scores / root : scores * (1.0 / root);
  scores = scores.masked_fill(blocked, -std::numeric_limits<float>::infinity());
  at::Tensor weights = at::softmax(scores, /*dim=*/-1, at::kFloat).to(q.scalar_type());
  return at::matmul(weights, values);  // (B, H, T, hd)
}

bool varlen_flash_on(c10::Device device) {
#if ACCUMBENCH_TORCH_2 && ACCUMBENCH_WITH_CUDA
  return device.is_cuda();
#else
  (void)device;
  return false;
#endif
}

}  // namespace

DocumentLayout document_layout(const std::vector<std::vector<int64_t>>& documents, int64_t width,
                               c10::Device device) {
  const auto rows = static_cast<int64_t>(documents.size());
  at::Tensor positions = at::empty({rows, width}, at::kLong);  // (B, T)
  at::Tensor ids = at::empty({rows, width}, at::kLong);        // (B, T): segment of each token
  auto pos = positions.accessor<int64_t, 2>();
  auto id = ids.accessor<int64_t, 2>();
  std::vector<int32_t> starts{0};
  int64_t longest = 0;
  for (int64_t b = 0; b < rows; ++b) {
    std::vector<int64_t> segments = documents[static_cast<size_t>(b)];
    int64_t used = 0;
    for (int64_t length : segments) {
      TORCH_CHECK(length > 0, "a packed document of ", length, " positions");
      used += length;
    }
    TORCH_CHECK(used <= width, "row ", b, "'s documents hold ", used, " positions, more than its ", width);
    if (used < width) segments.push_back(width - used);  // the padded tail
    int64_t t = 0;
    for (int64_t length : segments) {
      const auto segment = static_cast<int64_t>(starts.size()) - 1;
      for (int64_t i = 0; i < length; ++i, ++t) {
        pos[b][t] = i;
        id[b][t] = segment;
      }
      starts.push_back(static_cast<int32_t>(starts.back() + length));
      longest = std::max(longest, length);
    }
  }
  DocumentLayout layout;
  layout.positions = positions.to(device);
  if (varlen_flash_on(device)) {
    layout.cu_seqlens = at::tensor(starts, at::kInt).to(device);
    layout.max_seqlen = longest;
    return layout;
  }
  at::Tensor segment = ids.to(device);
  at::Tensor future = at::ones({width, width}, at::TensorOptions(device).dtype(at::kBool)).triu(/*diagonal=*/1);
  // (B, T, T): another document's key, or a later position; one (B, 1, T, T) mask for every head.
  layout.blocked = segment.unsqueeze(2).ne(segment.unsqueeze(1)).logical_or_(future).unsqueeze(1);
  return layout;
}

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const DocumentLayout* documents, bool divide_scores) {
  const int64_t heads = q.size(1);
  const int64_t kv_heads = k.size(1);
  TORCH_CHECK(heads % kv_heads == 0, "query heads ", heads, " not a multiple of kv heads ", kv_heads);
  if (documents != nullptr && documents->blocked.defined()) return masked_attention(q, k, v, documents->blocked, divide_scores);
#if ACCUMBENCH_TORCH_2
  // q and k rotated in fp32 beside v in 16 bits (RoPE under autocast over fp32 weights): the
  // kernels take one dtype. Autocast casts SDPA's operands to its dtype, and transformers' flash
  // path casts q, k and v to the 16-bit one; the flash call below is outside autocast's lists.
  if (q.scalar_type() != v.scalar_type() || k.scalar_type() != v.scalar_type())
    return causal_attention(q.to(v.scalar_type()), k.to(v.scalar_type()), v, documents, divide_scores);
  if (documents != nullptr) {
    // Packed rows on CUDA: the variable-length flash kernel over the B·T tokens as one batch of
    // segments (cu_seqlens), as transformers' padding-free path calls flash_attn_varlen_func;
    // nothing T×T is formed. Its autograd node is _flash_attention_backward. GQA is native
    // (Hkv heads of k, v). Shapes: (B, H, T, hd) -> (B·T, H, hd), a view where the heads' layout
    // allows (the kernel needs only the last dimension contiguous).
    TORCH_CHECK(documents->cu_seqlens.defined(), "packed rows without cu_seqlens or a mask");
    const int64_t batch = q.size(0), seq = q.size(2), head_dim = q.size(3);
    auto tokens = [&](const at::Tensor& t) { return t.transpose(1, 2).reshape({batch * seq, t.size(1), head_dim}); };
    const at::Tensor out = std::get<0>(at::_flash_attention_forward(
        tokens(q), tokens(k), tokens(v), documents->cu_seqlens, documents->cu_seqlens,
        /*max_q=*/documents->max_seqlen, /*max_k=*/documents->max_seqlen, /*dropout_p=*/0.0,
        /*is_causal=*/true, /*return_debug_mask=*/false));  // (B·T, H, hd)
    return out.view({batch, seq, heads, head_dim}).transpose(1, 2);  // (B, H, T, hd)
  }
  // Flash / memory-efficient kernels; GQA handled inside the kernel without copying k and v.
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                          /*is_causal=*/true, /*scale=*/std::nullopt,
                                          /*enable_gqa=*/heads != kv_heads);
#else
  TORCH_CHECK(documents == nullptr, "packed rows without a mask");
  const int64_t seq_len = q.size(2);
  return masked_attention(q, k, v, at::ones({seq_len, seq_len}, q.options().dtype(at::kBool)).triu(/*diagonal=*/1),
                          divide_scores);
#endif
}

// ---- autocast ----

namespace {
bool autocast_enabled(c10::DeviceType type) {
#if ACCUMBENCH_TORCH_2
  return at::autocast::is_autocast_enabled(type);
#else
  return type == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}
void set_autocast_enabled(c10::DeviceType type, bool enabled) {
#if ACCUMBENCH_TORCH_2
  at::autocast::set_autocast_enabled(type, enabled);
#else
  if (type == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_cpu_enabled(enabled);
  }
#endif
}
at::ScalarType autocast_dtype(c10::DeviceType type) {
#if ACCUMBENCH_TORCH_2
  return at::autocast::get_autocast_dtype(type);
#else
  return type == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                       : at::autocast::get_autocast_cpu_dtype();
#endif
}
void set_autocast_dtype(c10::DeviceType type, at::ScalarType dtype) {
#if ACCUMBENCH_TORCH_2
  at::autocast::set_autocast_dtype(type, dtype);
#else
  if (type == c10::DeviceType::CUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}
}  // namespace

std::optional<at::ScalarType> active_autocast_dtype(c10::DeviceType device_type) {
  if (!autocast_enabled(device_type)) return std::nullopt;
  return autocast_dtype(device_type);
}

AutocastGuard::AutocastGuard(c10::DeviceType device_type, std::optional<at::ScalarType> dtype)
    : device_type_(device_type) {
  if (!dtype) return;
  active_ = true;
  previous_enabled_ = autocast_enabled(device_type);
  previous_dtype_ = autocast_dtype(device_type);
  set_autocast_enabled(device_type, true);
  set_autocast_dtype(device_type, *dtype);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  // As torch.autocast.__exit__: the cast cache lives until the outermost region closes.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast_enabled(device_type_, previous_enabled_);
  set_autocast_dtype(device_type_, previous_dtype_);
}

// ---- post-accumulate-grad hook ----

namespace {
class PostAccumulateHook : public torch::autograd::FunctionPostHook {
 public:
  PostAccumulateHook(at::Tensor param, std::function<void(const at::Tensor&)> hook)
      : param_(std::move(param)), hook_(std::move(hook)) {}
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    hook_(param_);
    return outputs;
  }

 private:
  // A weak reference would do, but AccumulateGrad already holds the parameter strongly, so
  // this adds no cycle: the parameter only holds its accumulator weakly.
  at::Tensor param_;
  std::function<void(const at::Tensor&)> hook_;
};
}  // namespace

std::shared_ptr<void> add_post_accumulate_grad_hook(
    const at::Tensor& param, std::function<void(const at::Tensor& param)> hook) {
  TORCH_CHECK(param.is_leaf() && param.requires_grad(), "hook needs a leaf that requires grad");
  std::shared_ptr<torch::autograd::Node> accumulator = torch::autograd::impl::grad_accumulator(param);
  accumulator->add_post_hook(std::make_unique<PostAccumulateHook>(param, std::move(hook)));
  return accumulator;
}

bool is_out_of_memory(const std::exception& error) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&error) != nullptr) return true;
  const std::string message = error.what();
  return message.find("out of memory") != std::string::npos ||
         message.find("Out of memory") != std::string::npos;
}

// ---- CUDA ----

#if ACCUMBENCH_WITH_CUDA
namespace {
constexpr size_t kAggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
}

DeviceMemoryStats cuda_memory_stats(int device_index) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_index);
  DeviceMemoryStats out;
  out.allocated_bytes = stats.allocated_bytes[kAggregate].current;
  out.reserved_bytes = stats.reserved_bytes[kAggregate].current;
  out.peak_allocated_bytes = stats.allocated_bytes[kAggregate].peak;
  out.peak_reserved_bytes = stats.reserved_bytes[kAggregate].peak;
  return out;
}
void cuda_reset_peak_memory_stats(int device_index) {
  c10::cuda::CUDACachingAllocator::resetPeakStats(device_index);
}
void cuda_empty_cache() { c10::cuda::CUDACachingAllocator::emptyCache(); }
void cuda_clear_blas_workspaces() { at::cuda::clearCublasWorkspaces(); }
void cuda_set_memory_fraction(double fraction, int device_index) {
  c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, device_index);
}
void cuda_set_device(int device_index) { c10::cuda::set_device(static_cast<c10::DeviceIndex>(device_index)); }
void cuda_synchronize(int device_index) {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_index));
  C10_CUDA_CHECK(cudaDeviceSynchronize());
}
std::string cuda_device_name(int device_index) {
  return at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(device_index))->name;
}
int64_t cuda_device_total_memory_bytes(int device_index) {
  return static_cast<int64_t>(
      at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(device_index))->totalGlobalMem);
}
std::string cuda_driver_description() {
  int runtime = 0;
  int driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::ostringstream out;
  out << "CUDA runtime " << runtime / 1000 << "." << (runtime % 1000) / 10 << ", driver "
      << driver / 1000 << "." << (driver % 1000) / 10;
  return out.str();
}
void allow_tf32(bool allow) {
  at::globalContext().setAllowTF32CuBLAS(allow);
  at::globalContext().setAllowTF32CuDNN(allow);
}

DeviceEvent::DeviceEvent() {
  cudaEvent_t event = nullptr;
  C10_CUDA_CHECK(cudaEventCreate(&event));
  event_ = event;
}
DeviceEvent::~DeviceEvent() {
  if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}
void DeviceEvent::record() {
  C10_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_),
                                 at::cuda::getCurrentCUDAStream().stream()));
}
double DeviceEvent::seconds_until(const DeviceEvent& later) const {
  float milliseconds = 0;
  C10_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, static_cast<cudaEvent_t>(event_),
                                      static_cast<cudaEvent_t>(later.event_)));
  return milliseconds / 1e3;
}
#else
DeviceMemoryStats cuda_memory_stats(int) { return {}; }
void cuda_reset_peak_memory_stats(int) {}
void cuda_empty_cache() {}
void cuda_clear_blas_workspaces() {}
void cuda_set_memory_fraction(double, int) {}
void cuda_synchronize(int) {}
void cuda_set_device(int) {}
std::string cuda_device_name(int) { return ""; }
int64_t cuda_device_total_memory_bytes(int) { return 0; }
std::string cuda_driver_description() { return ""; }
void allow_tf32(bool) {}
DeviceEvent::DeviceEvent() = default;
DeviceEvent::~DeviceEvent() = default;
void DeviceEvent::record() {}
double DeviceEvent::seconds_until(const DeviceEvent&) const {
  return std::numeric_limits<double>::quiet_NaN();
}
#endif

DeviceEvent::DeviceEvent(DeviceEvent&& other) noexcept : event_(other.event_) {
  other.event_ = nullptr;
}

// ---- Kineto ----

#if ACCUMBENCH_WITH_CUDA && ACCUMBENCH_TORCH_2
namespace {
namespace kineto = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;
const std::set<ActivityType>& profiled_activities() {
  static const std::set<ActivityType> activities = {ActivityType::CPU, ActivityType::CUDA};
  return activities;
}
}  // namespace

bool KernelProfile::available() { return cuda_available(); }

void KernelProfile::start() {
  const ProfilerConfig config(ProfilerState::KINETO, /*report_input_shapes=*/true);
  kineto::prepareProfiler(config, profiled_activities());
  kineto::enableProfiler(config, profiled_activities());
}

KernelProfile::Summary KernelProfile::stop(const std::string& trace_path) {
  std::unique_ptr<kineto::ProfilerResult> result = kineto::disableProfiler();
  std::vector<std::pair<uint64_t, uint64_t>> intervals;  // [start, end) in ns, GPU activities
  for (const auto& event : result->events()) {
    if (event.deviceType() != c10::DeviceType::CUDA || event.durationNs() == 0) continue;
    intervals.emplace_back(event.startNs(), event.startNs() + event.durationNs());
  }
  std::sort(intervals.begin(), intervals.end());
  Summary summary;
  summary.device_events = static_cast<int64_t>(intervals.size());
  uint64_t covered_ns = 0, open_start = 0, open_end = 0;
  for (const auto& [start, end] : intervals) {  // union: concurrent streams count once
    if (start > open_end) {
      covered_ns += open_end - open_start;
      open_start = start;
      open_end = end;
    } else {
      open_end = std::max(open_end, end);
    }
  }
  covered_ns += open_end - open_start;
  summary.device_busy_seconds = static_cast<double>(covered_ns) / 1e9;
  if (!trace_path.empty()) result->save(trace_path);
  return summary;
}
#else
bool KernelProfile::available() { return false; }
void KernelProfile::start() { TORCH_CHECK(false, "KernelProfile needs LibTorch 2.x with CUDA"); }
KernelProfile::Summary KernelProfile::stop(const std::string&) { return {}; }
#endif

bool fused_adamw(std::vector<at::Tensor>& params, std::vector<at::Tensor>& grads,
                 std::vector<at::Tensor>& exp_avgs, std::vector<at::Tensor>& exp_avg_sqs,
                 std::vector<at::Tensor>& steps, double lr, double beta1, double beta2,
                 double weight_decay, double eps) {
#if ACCUMBENCH_TORCH_2 && ACCUMBENCH_WITH_CUDA
  if (params.empty() || !params.front().is_cuda()) return false;
  at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, lr, beta1,
                    beta2, weight_decay, eps, /*amsgrad=*/false, /*maximize=*/false);
  return true;
#else
  return false;
#endif
}

void foreach_mul_(std::vector<at::Tensor>& tensors, const at::Tensor& factor) {
#if ACCUMBENCH_TORCH_2
  at::_foreach_mul_(tensors, factor);
#else
  for (at::Tensor& t : tensors) t.mul_(factor);
#endif
}

}  // namespace accumbench::compat
