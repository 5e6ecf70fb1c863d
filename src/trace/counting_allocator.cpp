// The counting CPU allocator. Every block carries a 64-byte header holding its size, so the
// context pointer is the data pointer itself (raw_allocate/raw_deleter keep working, as LibTorch
// needs for some CPU paths) and a free knows how many bytes to give back.
#include <c10/core/Allocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <mutex>
#include <sstream>

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

void raise_peak(int64_t now) {
  int64_t seen = g_peak.load(std::memory_order_relaxed);
  while (now > seen && !g_peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

void counting_free(void* data) {
  if (data == nullptr) return;
  char* block = static_cast<char*>(data) - kHeaderBytes;
  const auto bytes = *reinterpret_cast<int64_t*>(block);
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

}  // namespace accumbench
