// Measurement of one optimizer step: a phase timer (steady_clock on the host, CUDA events on
// the device) and a memory probe (CUDA caching-allocator stats, or a counting CPU allocator
// installed through c10) read at every phase boundary.
//
//   MemoryProbe memory(device);                 // installs the counting allocator on CPU
//   StepTracer tracer(device, &memory);
//   tracer.start_step();
//   trainer.step(batch, options, &tracer);      // the trainer calls begin()/end() per phase
//   StepSample sample = tracer.finish_step();   // synchronizes, reads events
#pragma once

#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "accumbench/engine.hpp"
#include "accumbench/result.hpp"

namespace accumbench {

// The CPU allocator that counts live bytes (current, peak) and optionally refuses to go beyond
// a limit with LibTorch's out-of-memory error. Installed once per process, on first use; it
// wraps the allocator that was installed before, so LibTorch's own behaviour is unchanged.
class CountingCpuAllocator {
 public:
  static CountingCpuAllocator& install();
  int64_t current_bytes() const;
  int64_t peak_bytes() const;
  void reset_peak();                 // peak := current
  void set_limit_bytes(int64_t limit);  // 0: no limit
  int64_t limit_bytes() const;

  // For working on the memory plan (accumbench_plan_properties --live): when tracking is on, the
  // allocator remembers every live block, its size and its place in allocation order, and for
  // each tag the blocks alive at the highest total seen under that tag, with the op that made
  // each (a RecordFunction callback, registered while tracking). StepTracer tags every
  // phase with its Phase (set_allocation_tag). Off by default: it costs a lock and a hash map
  // operation per allocation.
  struct LiveBlock {
    int64_t order = 0;  // the allocation's number among the tracked ones (from the first tracking on)
    int64_t bytes = 0;
    std::string site;  // the autograd node and op that made it ("PowBackward0 > aten::mul"), if any
  };
  struct LiveSnapshot {
    int64_t total_bytes = 0;  // live bytes at the snapshot (all blocks, those before tracking began included)
    std::vector<LiveBlock> blocks;  // those allocated since tracking began, in allocation order
  };
  void track_live_blocks(bool on);
  void reset_live_snapshots();
  std::vector<LiveSnapshot> live_snapshots() const;  // index: the tag
};

// The tag the counting allocator files its live-block snapshots under (0..15); cheap, always safe.
void set_allocation_tag(int tag);

// Allocated/reserved/peak bytes of one device, with a resettable peak.
class MemoryProbe {
 public:
  explicit MemoryProbe(c10::Device device);
  int64_t allocated_bytes() const;
  int64_t reserved_bytes() const;
  int64_t peak_allocated_bytes() const;  // since the last reset_peak()
  int64_t peak_reserved_bytes() const;
  void reset_peak();
  // Caps usable memory: CUDA via the caching allocator's memory fraction, CPU via the counting
  // allocator. 0 removes the cap. Throws UserError when the limit exceeds the device memory.
  void set_limit_bytes(int64_t limit);
  void empty_cache();  // releases cached CUDA blocks between configurations; no-op on CPU
  c10::Device device() const { return device_; }

 private:
  c10::Device device_;
};

class StepTracer : public PhaseObserver {
 public:
  StepTracer(c10::Device device, MemoryProbe* memory);
  ~StepTracer() override;

  void start_step();
  void begin(Phase phase, int micro_step) override;
  void end(Phase phase, int micro_step) override;
  // Synchronizes the device, then returns the step's phase times and peak memory. The spans of
  // this step are available from timeline() until the next start_step().
  StepSample finish_step();
  const std::vector<PhaseSpan>& timeline() const { return spans_; }
  // Peak reserved bytes (CUDA caching allocator) of the last step; == allocated on the CPU. The
  // probe's own peak is reset at every phase, so the step's peak is collected here.
  int64_t step_peak_reserved_bytes() const { return step_peak_reserved_bytes_; }

 private:
  struct OpenSpan;
  c10::Device device_;
  MemoryProbe* memory_;
  std::chrono::steady_clock::time_point step_start_;
  std::vector<PhaseSpan> spans_;
  std::vector<std::unique_ptr<OpenSpan>> open_;  // per span: host and device marks
  size_t used_ = 0;
  int64_t step_peak_bytes_ = 0;
  int64_t step_peak_reserved_bytes_ = 0;
};

}  // namespace accumbench
