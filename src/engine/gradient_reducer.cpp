#include "engine/gradient_reducer.hpp"

#include <torch/torch.h>

#include "accumbench/error.hpp"

namespace accumbench {

GradientReducer::GradientReducer(std::vector<at::Tensor> params, compat::ProcessGroup& group, int64_t bucket_bytes)
    : params_(std::move(params)), group_(group), bucket_of_(params_.size()) {
  int64_t bytes = 0;
  for (size_t n = params_.size(); n-- > 0;) {  // reverse: backward reaches the last layers first
    const bool same_kind = !buckets_.empty() &&
                           params_[buckets_.back().params.front()].scalar_type() == params_[n].scalar_type() &&
                           params_[buckets_.back().params.front()].device() == params_[n].device();
    if (buckets_.empty() || !same_kind || bytes + static_cast<int64_t>(params_[n].nbytes()) > bucket_bytes) {
      buckets_.emplace_back();
      bytes = 0;
    }
    buckets_.back().params.push_back(n);
    bucket_of_[n] = buckets_.size() - 1;
    bytes += params_[n].nbytes();
  }
}

GradientReducer::~GradientReducer() {
  for (Bucket& b : buckets_) {
    try {
      if (b.pending) b.pending->wait();  // a collective must not outlive its buffers
    } catch (const std::exception&) {
      // The group failed (a peer is gone) and the run is ending; a destructor must not throw.
    }
  }
}

void GradientReducer::arm() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Bucket& b : buckets_) {  // leftovers of a step that failed half-way
    if (b.pending) b.pending->wait();
    b.pending.reset();
    b.ready = 0;
  }
  next_to_start_ = 0;
  overlapped_ = 0;
  armed_ = true;
}

void GradientReducer::on_gradient_ready(size_t param_index) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!armed_) return;
  ++buckets_[bucket_of_[param_index]].ready;
  while (next_to_start_ < buckets_.size() &&
         buckets_[next_to_start_].ready == buckets_[next_to_start_].params.size()) {
    start(next_to_start_++);
    ++overlapped_;
  }
}

void GradientReducer::start(size_t bucket) {
  std::vector<at::Tensor> grads;
  for (size_t i : buckets_[bucket].params) {
    if (params_[i].grad().defined()) grads.push_back(params_[i].grad());
  }
  if (!grads.empty()) buckets_[bucket].pending = group_.all_reduce_sum_async(std::move(grads));
}

void GradientReducer::start_zeros(size_t bucket) {
  // Every trainable parameter has a gradient after a whole step (the models use all of them), so
  // a peer's bucket holds every parameter's; a bucket of the same length keeps the collectives
  // matched.
  int64_t numel = 0;
  for (size_t i : buckets_[bucket].params) numel += params_[i].numel();
  const at::Tensor& first = params_[buckets_[bucket].params.front()];
  buckets_[bucket].pending = group_.all_reduce_sum_async({at::zeros({numel}, first.options().requires_grad(false))});
}

std::optional<compat::RankFailure> GradientReducer::finish(const at::Tensor& loss_sum, compat::StepStatus status) {
  std::lock_guard<std::mutex> lock(mutex_);
  armed_ = false;  // the hooks of a backward that failed half-way start nothing more
  while (next_to_start_ < buckets_.size()) {
    if (!status.failed) {
      try {
        start(next_to_start_);
        ++next_to_start_;
        continue;
      } catch (const FatalRunError&) {
        throw;
      } catch (const std::exception& error) {  // e.g. out of memory for the bucket's flat copy
        status = compat::StepStatus::from(error);
      }
    }
    try {
      start_zeros(next_to_start_++);
    } catch (const FatalRunError&) {
      throw;
    } catch (const std::exception& error) {
      throw FatalRunError("rank " + std::to_string(group_.rank()) + " failed in a step (" + status.message +
                          ") and could not keep the other ranks in step (" + compat::StepStatus::from(error).message +
                          "); the run stops here, and rank 0 saves what was finished");
    }
  }
  for (Bucket& b : buckets_) {
    if (b.pending) b.pending->wait();
    b.pending.reset();
    b.ready = 0;
  }
  next_to_start_ = 0;
  return group_.agree_on_status(status, status.failed ? at::Tensor() : loss_sum);
}

}  // namespace accumbench
