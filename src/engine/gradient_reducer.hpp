// DDP's overlap of gradient communication with backward, for the last micro-step of a step.
// Parameters are grouped into buckets of about 25 MiB in reverse order (the order backward
// produces their gradients). A bucket's all-reduce starts as soon as its last gradient has been
// accumulated, while backward goes on; buckets start in index order on every rank, because c10d
// collectives must be issued in the same order everywhere. finish() starts whatever is left (all
// of it when no hook fired, e.g. under CUDA-graph replay, which runs no host callbacks), sums
// the step's loss with them, waits, and leaves the sums in the gradients.
//
// A rank that failed in its step (out of memory, an exception) still calls finish(), with its
// status: it posts the buckets backward did not start as zeros, so that every rank's collectives
// stay matched, and the step's status rides on the loss's all-reduce
// (compat::ProcessGroup::agree_on_status): every rank learns of the failure, none is left waiting.
//
//   GradientReducer reducer(params, group);
//   reducer.arm();                    // before the step's last backward
//   ... backward: hooks call reducer.on_gradient_ready(i) ...
//   if (auto failure = reducer.finish(loss_sum, status)) throw *failure;  // phase allreduce
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
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
  // Starts the remaining buckets (zero-filled when this rank failed), waits for all, disarms, and
  // agrees on the step's status with the other ranks; `loss_sum` (undefined when this rank
  // failed before it had one) is summed along. nullopt when every rank did well, else the failure
  // every rank agreed on. Throws only when the group itself fails (compat::CollectiveError) or
  // this rank cannot even post its zeros (FatalRunError): then the ranks cannot stay in step.
  std::optional<compat::RankFailure> finish(const at::Tensor& loss_sum, compat::StepStatus status);

  size_t bucket_count() const { return buckets_.size(); }
  // Buckets whose all-reduce started inside backward during the last step (for tests/reports).
  size_t overlapped_buckets() const { return overlapped_; }

 private:
  struct Bucket {
    std::vector<size_t> params;
    size_t ready = 0;
    std::unique_ptr<compat::PendingReduce> pending;
  };
  void start(size_t bucket);        // caller holds mutex_
  void start_zeros(size_t bucket);  // the same collective, with zeros: this rank has no gradients to give
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
