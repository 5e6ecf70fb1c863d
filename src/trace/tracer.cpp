#include <torch/torch.h>

#include "accumbench/error.hpp"
#include "accumbench/units.hpp"
#include "accumbench/trace.hpp"
#include "compat/compat.hpp"

namespace accumbench {

// ---- MemoryProbe ----

MemoryProbe::MemoryProbe(c10::Device device) : device_(device) {
  if (!device_.is_cuda()) CountingCpuAllocator::install();
}

int64_t MemoryProbe::allocated_bytes() const {
  return device_.is_cuda() ? compat::cuda_memory_stats(device_.index()).allocated_bytes
                           : CountingCpuAllocator::install().current_bytes();
}
int64_t MemoryProbe::reserved_bytes() const {
  return device_.is_cuda() ? compat::cuda_memory_stats(device_.index()).reserved_bytes : allocated_bytes();
}
int64_t MemoryProbe::peak_allocated_bytes() const {
  return device_.is_cuda() ? compat::cuda_memory_stats(device_.index()).peak_allocated_bytes
                           : CountingCpuAllocator::install().peak_bytes();
}
int64_t MemoryProbe::peak_reserved_bytes() const {
  return device_.is_cuda() ? compat::cuda_memory_stats(device_.index()).peak_reserved_bytes : peak_allocated_bytes();
}
void MemoryProbe::reset_peak() {
  if (device_.is_cuda()) {
    compat::cuda_reset_peak_memory_stats(device_.index());
  } else {
    CountingCpuAllocator::install().reset_peak();
  }
}
void MemoryProbe::set_limit_bytes(int64_t limit) {
  if (limit < 0) throw UserError("--memory-limit must not be negative");
  if (!device_.is_cuda()) {
    CountingCpuAllocator::install().set_limit_bytes(limit);
    return;
  }
  const int64_t total = compat::cuda_device_total_memory_bytes(device_.index());
  if (limit > total) {
    throw UserError("--memory-limit " + format_bytes(limit) + " is more than the device's " + format_bytes(total) +
                    "; give a smaller limit or none");
  }
  compat::cuda_set_memory_fraction(limit == 0 ? 1.0 : static_cast<double>(limit) / static_cast<double>(total),
                                   device_.index());
}
void MemoryProbe::empty_cache() {
  if (device_.is_cuda()) compat::cuda_empty_cache();
}

// ---- StepTracer ----

struct StepTracer::OpenSpan {
  std::chrono::steady_clock::time_point host_begin;
  compat::DeviceEvent device_begin;
  compat::DeviceEvent device_end;
};

StepTracer::StepTracer(c10::Device device, MemoryProbe* memory) : device_(device), memory_(memory) {}
StepTracer::~StepTracer() = default;

void StepTracer::start_step() {
  if (device_.is_cuda()) compat::cuda_synchronize(device_.index());
  spans_.clear();
  used_ = 0;
  memory_->reset_peak();
  step_peak_bytes_ = memory_->allocated_bytes();
  step_peak_reserved_bytes_ = memory_->reserved_bytes();
  step_start_ = std::chrono::steady_clock::now();
}

void StepTracer::begin(Phase phase, int micro_step) {
  if (used_ == open_.size()) open_.push_back(std::make_unique<OpenSpan>());  // grows once, reused
  OpenSpan& open = *open_[used_++];
  PhaseSpan span;
  span.micro_step = micro_step;
  span.phase = phase;
  span.bytes_at_start = memory_->allocated_bytes();
  set_allocation_tag(static_cast<int>(phase));
  memory_->reset_peak();
  if (device_.is_cuda()) open.device_begin.record();
  open.host_begin = std::chrono::steady_clock::now();
  spans_.push_back(span);
}

void StepTracer::end(Phase phase, int micro_step) {
  const auto host_end = std::chrono::steady_clock::now();
  TORCH_CHECK(used_ > 0 && spans_.size() == used_, "StepTracer::end without begin");
  OpenSpan& open = *open_[used_ - 1];
  PhaseSpan& span = spans_.back();
  TORCH_CHECK(span.phase == phase && span.micro_step == micro_step, "phases must not interleave");
  if (device_.is_cuda()) open.device_end.record();
  span.start_seconds = std::chrono::duration<double>(open.host_begin - step_start_).count();
  span.duration_seconds = std::chrono::duration<double>(host_end - open.host_begin).count();
  span.bytes_at_end = memory_->allocated_bytes();
  span.peak_bytes = std::max(memory_->peak_allocated_bytes(), span.bytes_at_end);
  step_peak_bytes_ = std::max(step_peak_bytes_, span.peak_bytes);
  step_peak_reserved_bytes_ = std::max(step_peak_reserved_bytes_, memory_->peak_reserved_bytes());
}

StepSample StepTracer::finish_step() {
  if (device_.is_cuda()) compat::cuda_synchronize(device_.index());
  const auto step_end = std::chrono::steady_clock::now();
  StepSample sample;
  sample.step_seconds = std::chrono::duration<double>(step_end - step_start_).count();
  sample.device_seconds.fill(device_.is_cuda() ? 0.0 : kNotMeasured);
  double timed = 0;
  for (size_t i = 0; i < spans_.size(); ++i) {
    const auto p = static_cast<size_t>(spans_[i].phase);
    sample.host_seconds[p] += spans_[i].duration_seconds;
    timed += spans_[i].duration_seconds;
    if (device_.is_cuda()) sample.device_seconds[p] += open_[i]->device_begin.seconds_until(open_[i]->device_end);
  }
  sample.host_seconds[static_cast<size_t>(Phase::kOther)] = std::max(0.0, sample.step_seconds - timed);
  sample.peak_allocated_bytes = step_peak_bytes_;
  return sample;
}

}  // namespace accumbench
