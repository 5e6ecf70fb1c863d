// DDP's overlap of gradient communication with backward, for the last micro-step of a step.
// Parameters are grouped into buckets of about 25 MiB in reverse order (the order backward
// produces their gradients). A bucket's all-reduce starts as soon as its last gradient has been
// accumulated, while backward goes on; buckets start in index order on every rank, because c10d
// collectives must be issued in the same order everywhere. finish() starts whatever is left (all
// of it when no hook fired, e.g. under CUDA-graph replay, which runs no host callbacks), sums
// the step's loss with them, waits, and leaves the sums in the gradients.
//
//   GradientReducer reducer(params, group);
//   reducer.arm();                    // before the step's last backward
//   ... backward: hooks call reducer.on_gradient_ready(i) ...
//   reducer.finish(loss_sum);         // phase allreduce: waits for what is still in flight
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "compat/distributed.hpp"

namespace accumbench {

class GradientReducer {
 public:
  GradientReducer(std::vector<at::Tensor> params, compat::ProcessGroup& group, int64_t bucket_bytes = 25 << 20);
  ~GradientReducer();

  // The next backward is the step's last: start buckets as their gradients complete.
  void arm();
  // Called from the parameter's post-accumulate-grad hook (any thread); ignored unless armed.
  void on_gradient_ready(size_t param_index);
  // Starts the remaining buckets and the loss, waits for all, disarms. `loss_sum` is summed too.
  void finish(const at::Tensor& loss_sum);

  size_t bucket_count() const { return buckets_.size(); }
  // Buckets whose all-reduce started inside backward during the last step (for tests/reports).
  size_t overlapped_buckets() const { return overlapped_; }

 private:
  struct Bucket {
    std::vector<size_t> params;
    size_t ready = 0;
    std::unique_ptr<compat::PendingReduce> pending;
  };
  void start(size_t bucket);  // caller holds mutex_
  std::vector<at::Tensor> params_;
  compat::ProcessGroup& group_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // parameter index -> bucket
  size_t next_to_start_ = 0;
  size_t overlapped_ = 0;
  bool armed_ = false;
  std::mutex mutex_;  // hooks run on the autograd engine's threads
};

}  // namespace accumbench
