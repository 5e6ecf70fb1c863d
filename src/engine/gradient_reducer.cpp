#include "engine/gradient_reducer.hpp"

#include <torch/torch.h>

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

void GradientReducer::finish(const at::Tensor& loss_sum) {
  std::lock_guard<std::mutex> lock(mutex_);
  while (next_to_start_ < buckets_.size()) start(next_to_start_++);
  std::unique_ptr<compat::PendingReduce> loss = group_.all_reduce_sum_async({loss_sum.view({1})});  // in place
  for (Bucket& b : buckets_) {
    if (b.pending) b.pending->wait();
    b.pending.reset();
    b.ready = 0;
  }
  loss->wait();
  next_to_start_ = 0;
  armed_ = false;
}

}  // namespace accumbench
