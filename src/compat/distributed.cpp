#include "compat/distributed.hpp"

#include <torch/torch.h>

#include <chrono>
#include <cstdlib>

#include "accumbench/error.hpp"

#if ACCUMBENCH_WITH_CUDA
#if ACCUMBENCH_WITH_NCCL
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL 1
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#else
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO 1
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace accumbench::compat {

namespace {

#if !ACCUMBENCH_WITH_CUDA
using Backend = c10d::ProcessGroupGloo;
constexpr const char* kBackendName = "gloo";
#elif ACCUMBENCH_WITH_NCCL
using Backend = c10d::ProcessGroupNCCL;
constexpr const char* kBackendName = "nccl";
#else
constexpr const char* kBackendName = "";
#endif

std::chrono::milliseconds to_milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

int integer_variable(const char* name, const char* value) {
  try {
    size_t used = 0;
    const int parsed = std::stoi(value, &used);
    if (used == std::string(value).size()) return parsed;
  } catch (const std::exception&) {
  }
  throw UserError(std::string(name) + "=\"" + value + "\" is not an integer; set it as torchrun does (e.g. " + name +
                  "=0)");
}

bool loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1";
}

}  // namespace

LaunchEnvironment launch_environment() {
  LaunchEnvironment env;
  const char* world = std::getenv("WORLD_SIZE");
  if (world == nullptr || *world == '\0') return env;
  env.world_size = integer_variable("WORLD_SIZE", world);
  if (env.world_size < 1) throw UserError("WORLD_SIZE must be at least 1, got " + std::string(world));
  if (env.world_size == 1) return env;
  auto required = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') {
      throw UserError(std::string("WORLD_SIZE > 1 but ") + name +
                      " is not set; launch with torchrun, or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT for every process");
    }
    return value;
  };
  env.rank = integer_variable("RANK", required("RANK").c_str());
  env.master_addr = required("MASTER_ADDR");
  env.master_port = integer_variable("MASTER_PORT", required("MASTER_PORT").c_str());
  if (const char* local = std::getenv("LOCAL_RANK"); local != nullptr && *local != '\0') {
    env.local_rank = integer_variable("LOCAL_RANK", local);
  } else {
    env.local_rank = env.rank;
  }
  if (env.rank < 0 || env.rank >= env.world_size) {
    throw UserError("RANK=" + std::to_string(env.rank) + " is outside [0, WORLD_SIZE=" + std::to_string(env.world_size) +
                    "); give each process a different RANK from 0 to WORLD_SIZE-1");
  }
  if (env.master_port <= 0 || env.master_port > 65535) {
    throw UserError("MASTER_PORT=" + std::to_string(env.master_port) + " is not a TCP port; use one in 1..65535");
  }
  return env;
}

std::string ProcessGroup::backend_for(c10::Device device) {
  const std::string backend = kBackendName;
  if (backend == "gloo" && !device.is_cpu()) return "";
  if (backend == "nccl" && !device.is_cuda()) return "";
  return backend;
}

#if !ACCUMBENCH_WITH_CUDA || ACCUMBENCH_WITH_NCCL

struct ProcessGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<Backend> backend;
};

namespace {

c10::intrusive_ptr<Backend> make_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
                                         const std::string& host, double timeout_seconds) {
#if !ACCUMBENCH_WITH_CUDA
  auto options = c10d::ProcessGroupGloo::Options::create(to_milliseconds(timeout_seconds));
  // Loopback needs no name resolution (containers often cannot resolve their own hostname).
  options->devices.push_back(loopback(host) ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                            : c10d::ProcessGroupGloo::createDefaultDevice());
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, options);
#else
  (void)host;
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = to_milliseconds(timeout_seconds);
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, options);
#endif
}

void require_backend(c10::Device device) {
  if (ProcessGroup::backend_for(device).empty()) {
    throw UserError(std::string("data parallel on ") + device.str() + " needs " +
                    (device.is_cuda() ? "NCCL" : "Gloo") + ", which this build of accumbench does not have (it uses " +
                    (std::string(kBackendName).empty() ? "none" : kBackendName) + "); run the ranks on " +
                    (device.is_cuda() ? "the CPU build" : "--device cuda"));
  }
}

}  // namespace

std::unique_ptr<ProcessGroup> ProcessGroup::from_environment(c10::Device device, double timeout_seconds) {
  const LaunchEnvironment env = launch_environment();
  if (env.world_size == 1) return nullptr;
  require_backend(device);
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(env.master_port);
  options.isServer = env.rank == 0;
  options.numWorkers = env.world_size;
  options.waitWorkers = true;
  options.timeout = to_milliseconds(timeout_seconds);
  auto impl = std::make_unique<Impl>();
  try {
    impl->store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
    impl->backend = make_backend(impl->store, env.rank, env.world_size, env.master_addr, timeout_seconds);
  } catch (const c10::Error& error) {
    throw UserError("rank " + std::to_string(env.rank) + " could not join the process group at " + env.master_addr + ":" +
                    std::to_string(env.master_port) + " (" + error.what_without_backtrace() +
                    "); start all WORLD_SIZE ranks with the same MASTER_ADDR and a free MASTER_PORT");
  }
  return std::unique_ptr<ProcessGroup>(new ProcessGroup(std::move(impl), env.rank, env.world_size, kBackendName));
}

std::unique_ptr<ProcessGroup> ProcessGroup::from_file(const std::string& path, int rank, int world_size,
                                                      c10::Device device, double timeout_seconds) {
  require_backend(device);
  auto impl = std::make_unique<Impl>();
  impl->store = c10::make_intrusive<c10d::FileStore>(path, world_size);
  impl->store->setTimeout(to_milliseconds(timeout_seconds));
  impl->backend = make_backend(impl->store, rank, world_size, "127.0.0.1", timeout_seconds);
  return std::unique_ptr<ProcessGroup>(new ProcessGroup(std::move(impl), rank, world_size, kBackendName));
}

struct PendingReduce::State {
  std::vector<at::Tensor> tensors;  // where the sums go
  std::vector<at::Tensor> flat;     // the one buffer the collective reduces
  c10::intrusive_ptr<c10d::Work> work;
};

PendingReduce::PendingReduce(std::unique_ptr<State> state) : state_(std::move(state)) {}
PendingReduce::~PendingReduce() = default;

void PendingReduce::wait() {
  if (!state_->work) return;
  const auto work = std::move(state_->work);  // waited once, even when it fails
  try {
    work->wait();
  } catch (const std::exception& error) {
    std::string what = error.what();
    if (const auto* c10_error = dynamic_cast<const c10::Error*>(&error)) what = c10_error->what_without_backtrace();
    what = what.substr(0, what.find('\n'));
    throw CollectiveError("an all-reduce with the other ranks failed (" + what +
                          "): a rank has left or stopped answering; the run stops here, with what it finished saved");
  }
  const at::Tensor& flat = state_->flat.front();
  if (flat.is_same(state_->tensors.front())) return;  // reduced in place
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (const at::Tensor& t : state_->tensors) {
    const int64_t n = t.numel();
    t.copy_(flat.narrow(0, offset, n).view(t.sizes()));
    offset += n;
  }
  state_->flat.clear();  // frees the bucket's copy now, not when the handle goes
}

std::unique_ptr<PendingReduce> ProcessGroup::all_reduce_sum_async(std::vector<at::Tensor> tensors) {
  TORCH_CHECK(!tensors.empty(), "an all-reduce of nothing");
  torch::NoGradGuard no_grad;
  auto state = std::make_unique<PendingReduce::State>();
  if (tensors.size() == 1 && tensors.front().is_contiguous()) {
    state->flat.push_back(tensors.front());  // reduced in place, no copy
  } else {
    std::vector<at::Tensor> views;
    for (const at::Tensor& t : tensors) {
      TORCH_CHECK(t.scalar_type() == tensors.front().scalar_type() && t.device() == tensors.front().device(),
                  "one all-reduce bucket needs one dtype and one device");
      views.push_back(t.reshape({-1}));
    }
    state->flat.push_back(at::cat(views));
  }
  state->tensors = std::move(tensors);
  state->work = impl_->backend->allreduce(state->flat);
  return std::unique_ptr<PendingReduce>(new PendingReduce(std::move(state)));
}

void ProcessGroup::barrier() { impl_->backend->barrier()->wait(); }

std::vector<std::string> ProcessGroup::exchange(const std::string& key, const std::string& value) {
  // Through the store, before any collective: a mismatch found here cannot pair up collectives.
  impl_->store->set(key + "/" + std::to_string(rank_), std::vector<uint8_t>(value.begin(), value.end()));
  std::vector<std::string> values;
  for (int r = 0; r < world_size_; ++r) {
    try {
      const std::vector<uint8_t> bytes = impl_->store->get(key + "/" + std::to_string(r));
      values.emplace_back(bytes.begin(), bytes.end());
    } catch (const c10::Error& error) {
      throw UserError("rank " + std::to_string(r) + " did not answer rank " + std::to_string(rank_) + " (" +
                      error.what_without_backtrace() + "); start every rank, or raise --dist-timeout");
    }
  }
  return values;
}

#else  // CUDA build without NCCL headers

struct ProcessGroup::Impl {};

std::unique_ptr<ProcessGroup> ProcessGroup::from_environment(c10::Device, double) {
  const LaunchEnvironment env = launch_environment();
  if (env.world_size == 1) return nullptr;
  throw UserError("data parallel needs NCCL, which this CUDA build of accumbench was configured without (no nccl.h); "
                  "rebuild with -DACCUMBENCH_NCCL_INCLUDE_DIR=<folder with nccl.h>");
}
std::unique_ptr<ProcessGroup> ProcessGroup::from_file(const std::string&, int, int, c10::Device, double) {
  throw UserError("data parallel needs NCCL, which this CUDA build of accumbench was configured without (no nccl.h); "
                  "rebuild with -DACCUMBENCH_NCCL_INCLUDE_DIR=<folder with nccl.h>");
}
struct PendingReduce::State {};
PendingReduce::PendingReduce(std::unique_ptr<State> state) : state_(std::move(state)) {}
PendingReduce::~PendingReduce() = default;
void PendingReduce::wait() {}
std::unique_ptr<PendingReduce> ProcessGroup::all_reduce_sum_async(std::vector<at::Tensor>) { return nullptr; }
void ProcessGroup::barrier() {}
std::vector<std::string> ProcessGroup::exchange(const std::string&, const std::string& value) { return {value}; }

#endif

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl, int rank, int world_size, std::string backend)
    : impl_(std::move(impl)), rank_(rank), world_size_(world_size), backend_(std::move(backend)) {}

ProcessGroup::~ProcessGroup() = default;

}  // namespace accumbench::compat
