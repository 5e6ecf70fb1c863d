// The counting CPU allocator. Every block carries a 64-byte header holding its size, so the
// context pointer is the data pointer itself (raw_allocate/raw_deleter keep working, as LibTorch
// needs for some CPU paths) and a free knows how many bytes to give back.
#include <ATen/record_function.h>
#include <c10/core/Allocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "accumbench/units.hpp"
#include "accumbench/trace.hpp"
#include "compat/compat.hpp"

namespace accumbench {
namespace {

// Keeps c10's 64-byte alignment of CPU data (gAlignment).
constexpr size_t kHeaderBytes = 64;

std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_limit{0};

// Live-block tracking (CountingCpuAllocator::track_live_blocks): off unless asked.
constexpr int kTags = 16;
std::atomic<bool> g_tracking{false};
std::atomic<int> g_tag{0};
std::atomic<int64_t> g_order{0};
struct Tracked {
  std::mutex mutex;
  std::unordered_map<const void*, CountingCpuAllocator::LiveBlock> live;
  std::array<CountingCpuAllocator::LiveSnapshot, kTags> at_peak;
};
Tracked& tracked() {
  static Tracked t;
  return t;
}

// Where a tracked block was made: the ops running on this thread (RecordFunction's scopes, a
// callback registered while tracking is on), named by the innermost autograd node and the
// innermost op, e.g. "PowBackward0 > aten::mul".
thread_local std::vector<std::pair<std::string, bool>> t_ops;  // name, is a backward node
std::unique_ptr<at::ObserverContext> enter_op(const at::RecordFunction& fn) {
  t_ops.emplace_back(fn.name(), fn.scope() == at::RecordScope::BACKWARD_FUNCTION);
  return nullptr;
}
void leave_op(const at::RecordFunction& /*fn*/, at::ObserverContext* /*context*/) {
  if (!t_ops.empty()) t_ops.pop_back();
}
std::string allocation_site() {
  std::string node, op;
  for (auto it = t_ops.rbegin(); it != t_ops.rend(); ++it) {
    if (op.empty() && !it->second) op = it->first;
    if (it->second) {
      node = it->first;
      break;
    }
  }
  if (node.empty()) return op;
  return op.empty() ? node : node + " > " + op;
}
at::CallbackHandle g_ops_callback = 0;

}  // namespace

// A place for a debugger to stop at one allocation of a tracked run (--live prints its number):
//   gdb -ex 'break accumbench_tracked_allocation if $rdi == 808' --args accumbench_plan_properties ... --live
// ($rdi: the first argument, the order --live prints; the release build keeps no names of locals)
extern "C" __attribute__((noinline)) void accumbench_tracked_allocation(int64_t order, int64_t bytes) {
  asm volatile("" : : "r"(order), "r"(bytes) : "memory");
}

namespace {

void track_allocation(const void* data, int64_t bytes, int64_t order, int64_t now) {
  accumbench_tracked_allocation(order, bytes);
  Tracked& t = tracked();
  const std::lock_guard<std::mutex> lock(t.mutex);
  t.live[data] = CountingCpuAllocator::LiveBlock{order, bytes, allocation_site()};
  CountingCpuAllocator::LiveSnapshot& snapshot = t.at_peak[static_cast<size_t>(g_tag.load() % kTags)];
  if (now <= snapshot.total_bytes) return;
  snapshot.total_bytes = now;
  snapshot.blocks.clear();
  for (const auto& entry : t.live) snapshot.blocks.push_back(entry.second);
  std::sort(snapshot.blocks.begin(), snapshot.blocks.end(),
            [](const auto& x, const auto& y) { return x.order < y.order; });
}

void track_free(const void* data) {
  Tracked& t = tracked();
  const std::lock_guard<std::mutex> lock(t.mutex);
  t.live.erase(data);
}

void raise_peak(int64_t now) {
  int64_t seen = g_peak.load(std::memory_order_relaxed);
  while (now > seen && !g_peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

void counting_free(void* data) {
  if (data == nullptr) return;
  char* block = static_cast<char*>(data) - kHeaderBytes;
  const auto bytes = *reinterpret_cast<int64_t*>(block);
  if (g_tracking.load(std::memory_order_relaxed)) track_free(data);
  g_current.fetch_sub(bytes, std::memory_order_relaxed);
  c10::free_cpu(block);
}

class CountingAllocatorImpl final : public compat::AllocatorBase {
 public:
  c10::DataPtr allocate_bytes(size_t nbytes) const override {
    if (nbytes == 0) return {nullptr, nullptr, &counting_free, c10::Device(c10::DeviceType::CPU)};
    const auto bytes = static_cast<int64_t>(nbytes);
    const int64_t limit = g_limit.load(std::memory_order_relaxed);
    const int64_t now = g_current.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    if (limit > 0 && now > limit) {
      g_current.fetch_sub(bytes, std::memory_order_relaxed);
      std::ostringstream message;
      message << "CPU out of memory: tried to allocate " << format_bytes(bytes) << " with "
              << format_bytes(now - bytes) << " in use, over the memory limit of " << format_bytes(limit);
      C10_THROW_ERROR(OutOfMemoryError, message.str());
    }
    raise_peak(now);
    char* block = static_cast<char*>(c10::alloc_cpu(nbytes + kHeaderBytes));
    *reinterpret_cast<int64_t*>(block) = bytes;
    void* data = block + kHeaderBytes;
    // Tracking off (always, in a sweep): one relaxed load, nothing more on the step's path.
    if (g_tracking.load(std::memory_order_relaxed)) {
      track_allocation(data, bytes, g_order.fetch_add(1, std::memory_order_relaxed), now);
    }
    return {data, data, &counting_free, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &counting_free; }
};

}  // namespace

CountingCpuAllocator& CountingCpuAllocator::install() {
  static CountingAllocatorImpl allocator;
  static CountingCpuAllocator handle;
  static std::once_flag once;
  // Priority above c10's default CPU allocator (0), so ours is used from now on.
  std::call_once(once, [] { c10::SetAllocator(c10::DeviceType::CPU, &allocator, /*priority=*/100); });
  return handle;
}

int64_t CountingCpuAllocator::current_bytes() const { return g_current.load(std::memory_order_relaxed); }
int64_t CountingCpuAllocator::peak_bytes() const { return g_peak.load(std::memory_order_relaxed); }
void CountingCpuAllocator::reset_peak() { g_peak.store(g_current.load(std::memory_order_relaxed)); }
void CountingCpuAllocator::set_limit_bytes(int64_t limit) { g_limit.store(limit); }
int64_t CountingCpuAllocator::limit_bytes() const { return g_limit.load(); }

void CountingCpuAllocator::track_live_blocks(bool on) {
  Tracked& t = tracked();
  const std::lock_guard<std::mutex> lock(t.mutex);
  t.live.clear();  // blocks from before tracking began are counted in the totals only
  g_tracking.store(on);
  if (on && g_ops_callback == 0) {
    g_ops_callback = at::addGlobalCallback(at::RecordFunctionCallback(&enter_op, &leave_op));
  } else if (!on && g_ops_callback != 0) {
    at::removeCallback(g_ops_callback);
    g_ops_callback = 0;
  }
}

void CountingCpuAllocator::reset_live_snapshots() {
  Tracked& t = tracked();
  const std::lock_guard<std::mutex> lock(t.mutex);
  for (auto& snapshot : t.at_peak) snapshot = LiveSnapshot{};
}


std::vector<CountingCpuAllocator::LiveSnapshot> CountingCpuAllocator::live_snapshots() const {
  Tracked& t = tracked();
  const std::lock_guard<std::mutex> lock(t.mutex);
  return {t.at_peak.begin(), t.at_peak.end()};
}

void set_allocation_tag(int tag) { g_tag.store(tag, std::memory_order_relaxed); }

}  // namespace accumbench
