// Data parallel across processes through PyTorch's c10d: Gloo on CPU builds, NCCL on CUDA
// builds. Launched torchrun-style (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; LOCAL_RANK picks
// the GPU), so `torchrun --nproc-per-node 2 --no-python accumbench sweep ...` works; or, for
// tests, two threads or processes sharing a file store.
//
//   std::unique_ptr<compat::ProcessGroup> group = compat::ProcessGroup::from_environment(device);
//   if (group) group->all_reduce_sum_async({gradient})->wait();   // every rank gets the sum
// (src/engine/gradient_reducer.cpp groups the gradients into buckets and overlaps them.)
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "accumbench/error.hpp"

namespace accumbench::compat {

// A collective that failed (a peer closed its connection, or did not answer within the timeout):
// the group cannot be trusted any more, so it ends the run on this rank.
class CollectiveError : public FatalRunError {
 public:
  explicit CollectiveError(const std::string& message) : FatalRunError(message) {}
};

// What one rank brings to the agreement on a step: whether it failed, and why.
struct StepStatus {
  bool failed = false;
  bool out_of_memory = false;
  std::string message;  // one line, without a backtrace
  static StepStatus from(const std::exception& error);
};

// A failure that every rank agreed on (ProcessGroup::agree_on_status): the same rank, kind and
// message on every rank, so every rank records the same error for the split and goes on.
class RankFailure : public std::runtime_error {
 public:
  RankFailure(int rank, bool out_of_memory, const std::string& message)
      : std::runtime_error("rank " + std::to_string(rank) + ": " + message), rank_(rank), out_of_memory_(out_of_memory) {}
  int rank() const { return rank_; }
  bool out_of_memory() const { return out_of_memory_; }

 private:
  int rank_;
  bool out_of_memory_;
};

// The torchrun variables of this process; world_size 1 when WORLD_SIZE is unset.
struct LaunchEnvironment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr;
  int master_port = 0;
};
// Throws UserError when WORLD_SIZE > 1 but RANK, MASTER_ADDR or MASTER_PORT is missing or
// malformed, or RANK is outside [0, WORLD_SIZE) (a RANK other than 0 with WORLD_SIZE unset too).
LaunchEnvironment launch_environment();

// An all-reduce under way; wait() blocks until it is done and writes the sums back.
class PendingReduce {
 public:
  ~PendingReduce();
  PendingReduce(const PendingReduce&) = delete;
  PendingReduce& operator=(const PendingReduce&) = delete;
  void wait();

 private:
  friend class ProcessGroup;
  struct State;
  explicit PendingReduce(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

class ProcessGroup {
 public:
  // nullptr when WORLD_SIZE is unset or 1. Connects to the TCP store at MASTER_ADDR:MASTER_PORT
  // (rank 0 serves it) and waits up to `timeout_seconds` for every rank; after a few seconds of
  // waiting it says so once on stderr ("waiting for N ranks at ADDR:PORT").
  static std::unique_ptr<ProcessGroup> from_environment(c10::Device device, double timeout_seconds = 300);
  // Ranks that share `path` (a file store; the file must not exist before the first rank comes).
  static std::unique_ptr<ProcessGroup> from_file(const std::string& path, int rank, int world_size,
                                                 c10::Device device, double timeout_seconds = 120);
  // "gloo" on CPU builds, "nccl" on CUDA builds; empty when this build has neither.
  static std::string backend_for(c10::Device device);

  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  const std::string& backend() const { return backend_; }

  // Starts summing `tensors` (one dtype, one device) through one flat buffer and returns at once.
  // Every rank must start its collectives in the same order.
  std::unique_ptr<PendingReduce> all_reduce_sum_async(std::vector<at::Tensor> tensors);
  void barrier();
  // Every rank's status, agreed with one small all-reduce (so every rank must call it at the same
  // point, after the same collectives): nullopt when every rank did well, else the failure of
  // the lowest failed rank, the same on every rank (its message travels through the store).
  // `carry` (one element, optional) is summed along and written back: the step's loss rides on it.
  std::optional<RankFailure> agree_on_status(const StepStatus& mine, const at::Tensor& carry = {});
  // Every rank's `value` under `key`, in rank order, through the store (no collective). Throws
  // UserError when a rank does not answer within the timeout.
  std::vector<std::string> exchange(const std::string& key, const std::string& value);

 private:
  struct Impl;
  ProcessGroup(std::unique_ptr<Impl> impl, int rank, int world_size, std::string backend);
  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
  int world_size_ = 1;
  std::string backend_;
};

}  // namespace accumbench::compat
