#include "compat/distributed.hpp"

#include <torch/torch.h>

#include <netdb.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include "accumbench/error.hpp"
#include "compat/compat.hpp"

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
#ifdef C10_USE_GLOG  // Debian's LibTorch 1.x logs through glog; PyTorch's 2.x wheels through c10's own logger
#include <glog/logging.h>
#endif

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

// `example`: a value the launch would accept, for the message.
int integer_variable(const char* name, const char* value, const char* example) {
  try {
    size_t used = 0;
    const int parsed = std::stoi(value, &used);
    if (used == std::string(value).size()) return parsed;
  } catch (const std::out_of_range&) {
    throw UserError(std::string(name) + "=\"" + std::string(value).substr(0, 40) + "\" is far beyond any world of "
                    "processes; set it as torchrun does (e.g. " + name + "=" + example + ")");
  } catch (const std::exception&) {
  }
  throw UserError(std::string(name) + "=\"" + value + "\" is not an integer; set it as torchrun does (e.g. " + name +
                  "=" + example + ")");
}

bool loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1";
}

// c10 errors carry a C++ backtrace in what(); messages want the first line.
std::string first_line(const std::exception& error) {
  std::string what = error.what();
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&error)) what = c10_error->what_without_backtrace();
  return what.substr(0, what.find('\n'));
}

// Says once on stderr, after kAfterSeconds, that this rank is still waiting for the others, so
// that a rank that never started is not mistaken for a hang. `remaining` is updated by the
// joining code as ranks arrive.
class JoinNotice {
 public:
  static constexpr double kAfterSeconds = 3;

  JoinNotice(std::string address, int remaining, double timeout_seconds)
      : address_(std::move(address)), remaining_(remaining) {
    thread_ = std::thread([this, timeout_seconds] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (cv_.wait_for(lock, std::chrono::duration<double>(kAfterSeconds), [this] { return done_; })) return;
      const int n = remaining_.load();
      if (n == 0) {  // every rank joined the store: the backend's own connections are under way
        std::cerr << "accumbench: every rank joined at " << address_ << "; waiting for them to connect to each other"
                  << std::endl;
      } else {
        // A rank that stopped at once (a refused option) never comes: say how long the wait lasts.
        std::cerr << "accumbench: waiting for " << n << (n == 1 ? " rank" : " ranks") << " at " << address_
                  << ", for up to " << static_cast<int64_t>(timeout_seconds) << " s (--dist-timeout); if "
                  << (n == 1 ? "that rank" : "one of them") << " already stopped with an error, Ctrl-C stops this one"
                  << std::endl;
      }
    });
  }
  ~JoinNotice() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  JoinNotice(const JoinNotice&) = delete;
  JoinNotice& operator=(const JoinNotice&) = delete;
  void set_remaining(int n) { remaining_ = n; }

 private:
  std::string address_;
  std::atomic<int> remaining_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

StepStatus StepStatus::from(const std::exception& error) {
  StepStatus status;
  status.failed = true;
  if (const auto* agreed = dynamic_cast<const RankFailure*>(&error)) {
    status.out_of_memory = agreed->out_of_memory();
  } else {
    status.out_of_memory = is_out_of_memory(error);
  }
  status.message = first_line(error);
  return status;
}

LaunchEnvironment launch_environment() {
  LaunchEnvironment env;
  // A RANK other than 0 in one process: a launch that lost its WORLD_SIZE, where every process would
  // run the whole sweep alone and write the same files.
  const char* stray_rank = std::getenv("RANK");
  const bool other_rank = stray_rank != nullptr && *stray_rank != '\0' && integer_variable("RANK", stray_rank, "0") != 0;
  const char* world = std::getenv("WORLD_SIZE");
  if (world == nullptr || *world == '\0') {
    if (other_rank) {
      throw UserError("RANK=" + std::string(stray_rank) +
                      " is set but WORLD_SIZE is not, so each process would run the whole command alone; launch with "
                      "torchrun (or set WORLD_SIZE, MASTER_ADDR and MASTER_PORT for every process), or unset RANK to run one");
    }
    return env;
  }
  env.world_size = integer_variable("WORLD_SIZE", world, "2");
  if (env.world_size < 1) throw UserError("WORLD_SIZE must be at least 1, got " + std::string(world));
  if (env.world_size == 1) {
    if (other_rank) {
      throw UserError("RANK=" + std::string(stray_rank) +
                      " is outside [0, WORLD_SIZE=1); one process is RANK 0 (or unset RANK), and more take WORLD_SIZE > 1");
    }
    return env;
  }
  auto required = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') {
      throw UserError(std::string("WORLD_SIZE > 1 but ") + name +
                      " is not set; launch with torchrun, or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT for every process");
    }
    return value;
  };
  env.rank = integer_variable("RANK", required("RANK").c_str(), "0");
  // The rank's own mistake first: a process with a RANK outside the world is misplaced wherever
  // its master is.
  if (env.rank < 0 || env.rank >= env.world_size) {
    throw UserError("RANK=" + std::to_string(env.rank) + " is outside [0, WORLD_SIZE=" + std::to_string(env.world_size) +
                    "); give each process a different RANK from 0 to WORLD_SIZE-1");
  }
  env.master_addr = required("MASTER_ADDR");
  env.master_port = integer_variable("MASTER_PORT", required("MASTER_PORT").c_str(), "29500");
  if (const char* local = std::getenv("LOCAL_RANK"); local != nullptr && *local != '\0') {
    env.local_rank = integer_variable("LOCAL_RANK", local, "0");
  } else {
    env.local_rank = env.rank;
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
  c10::Device device = c10::kCPU;  // where the status all-reduce's tensor lives (NCCL: the rank's GPU)
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

// Mutes glog while the store is built: its sockets log each failure ("failed to bind to [::]:29500
// (errno: 98 - Address already in use)", a client's refused connections while rank 0 starts) in
// four lines before the exception that accumbench turns into one sentence, and the JoinNotice
// already says who is awaited. A no-op where c10 does not log through glog.
class QuietStoreLogs {
 public:
#ifdef C10_USE_GLOG
  QuietStoreLogs() : saved_(FLAGS_minloglevel) { FLAGS_minloglevel = google::GLOG_FATAL; }
  ~QuietStoreLogs() { FLAGS_minloglevel = saved_; }
  QuietStoreLogs(const QuietStoreLogs&) = delete;
  QuietStoreLogs& operator=(const QuietStoreLogs&) = delete;

 private:
  int saved_;
#endif
};

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
  const std::string address = env.master_addr + ":" + std::to_string(env.master_port);
  // A name that does not resolve would only time out, after --dist-timeout, in words about the socket.
  {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int resolved = getaddrinfo(env.master_addr.c_str(), nullptr, &hints, &found);
    if (found != nullptr) freeaddrinfo(found);
    if (resolved != 0) {
      throw UserError("MASTER_ADDR " + env.master_addr + " does not resolve on this machine (" + gai_strerror(resolved) +
                      "); give rank 0's IP address, or a host name every rank's machine resolves");
    }
  }
  // Until the store answers, this rank cannot know who has joined: all the others, for all it knows.
  JoinNotice notice(address, env.world_size - 1, timeout_seconds);
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(env.master_port);
  options.isServer = env.rank == 0;
  options.numWorkers = env.world_size;
  options.waitWorkers = false;  // counted below, so that the notice can say how many are missing
  options.timeout = to_milliseconds(timeout_seconds);
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  const auto could_not_join = [&](const std::string& why) {
    return UserError("rank " + std::to_string(env.rank) + " could not join the process group at " + address + " (" +
                     why + "); start all WORLD_SIZE ranks with the same MASTER_ADDR and a free MASTER_PORT, or raise --dist-timeout");
  };
  try {
    {
      const QuietStoreLogs quiet;
      impl->store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
    }
    // Ranks started with different WORLD_SIZEs would wait for each other until the timeout: rank 0
    // posts its own, and the others compare before they count themselves in.
    const std::string world_key = "accumbench/world_size";
    const std::string world = std::to_string(env.world_size);
    if (env.rank == 0) {
      impl->store->set(world_key, std::vector<uint8_t>(world.begin(), world.end()));
    } else {
      const std::vector<uint8_t> posted = impl->store->get(world_key);
      const std::string theirs(posted.begin(), posted.end());
      if (theirs != world) {
        throw UserError("rank " + std::to_string(env.rank) + " was started with WORLD_SIZE=" + world + ", rank 0 at " +
                        address + " with WORLD_SIZE=" + theirs + "; start every rank with the same WORLD_SIZE");
      }
    }
    // A second process started with this RANK (rank 0's twin finds its port taken, above) would
    // wait on collectives that never pair up: each rank counts itself in under its own key first.
    if (impl->store->add("accumbench/rank/" + std::to_string(env.rank), 1) > 1) {
      throw UserError("another process already joined the process group at " + address + " as RANK=" +
                      std::to_string(env.rank) + "; give each process its own RANK, 0 to WORLD_SIZE-1");
    }
    const std::string key = "accumbench/joined";
    impl->store->add(key, 1);
    const auto start = std::chrono::steady_clock::now();
    for (int64_t joined = impl->store->add(key, 0); joined < env.world_size; joined = impl->store->add(key, 0)) {
      notice.set_remaining(env.world_size - static_cast<int>(joined));
      if (std::chrono::steady_clock::now() - start > to_milliseconds(timeout_seconds)) {
        throw could_not_join(std::to_string(joined) + " of " + std::to_string(env.world_size) + " ranks joined within " +
                             std::to_string(static_cast<int64_t>(timeout_seconds)) + " s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    notice.set_remaining(0);
    impl->backend = make_backend(impl->store, env.rank, env.world_size, env.master_addr, timeout_seconds);
  } catch (const UserError&) {
    throw;
  } catch (const std::exception& error) {  // c10's and the store's socket errors (a port in use, no answer)
    const std::string why = first_line(error);
    if (env.rank == 0 && why.find("Address already in use") != std::string::npos) {
      // Another job, or a second process started as RANK=0 of this one (helper-98).
      throw UserError("MASTER_PORT " + std::to_string(env.master_port) + " is already in use on rank 0's machine (" +
                      env.master_addr + "), by another job or another process started with RANK=0; give each "
                      "process its own RANK, and every rank a free MASTER_PORT");
    }
    throw could_not_join(why);
  }
  return std::unique_ptr<ProcessGroup>(new ProcessGroup(std::move(impl), env.rank, env.world_size, kBackendName));
}

std::unique_ptr<ProcessGroup> ProcessGroup::from_file(const std::string& path, int rank, int world_size,
                                                      c10::Device device, double timeout_seconds) {
  require_backend(device);
  auto impl = std::make_unique<Impl>();
  impl->device = device;
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
    // Rank 0 may be the one that left: another rank cannot promise its save.
    const bool first = launch_environment().rank == 0;
    throw CollectiveError("an all-reduce with the other ranks failed (" + first_line(error) +
                          "): a rank has left or stopped answering; the run stops here" +
                          (first ? std::string(", and this rank saves what was finished")
                                 : std::string(", and rank 0, unless it is the one that left, saves what was finished")));
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
  // Frees the bucket's copy now. Dropping our handle is not enough: the backend's work object,
  // which Gloo's worker thread lets go of some time after the wait returns, holds the same tensor,
  // and until then the copy stayed alive into the optimizer step (a whole set of gradients above
  // the plan in some steps of two ranks). set_() empties the one TensorImpl all handles share.
  for (at::Tensor& copy : state_->flat) copy.set_();
  state_->flat.clear();
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

std::optional<RankFailure> ProcessGroup::agree_on_status(const StepStatus& mine, const at::Tensor& carry) {
  torch::NoGradGuard no_grad;
  const std::string failure_key = "accumbench/failure/";
  // Published before this rank's part of the all-reduce, so it is there when the others read it
  // after theirs; one key per rank, overwritten by its next failure, which cannot be published
  // before every rank has passed this all-reduce.
  if (mine.failed) impl_->store->set(failure_key + std::to_string(rank_), std::vector<uint8_t>(mine.message.begin(), mine.message.end()));
  // (1 + W) doubles: the carried value, then each rank's status in its own slot (0 ok, 1 error,
  // 2 out of memory), so that the sum tells every rank who failed and how.
  at::Tensor values = at::zeros({1 + world_size_}, at::TensorOptions().dtype(at::kDouble).device(impl_->device));
  if (carry.defined() && !mine.failed) values.narrow(0, 0, 1).copy_(carry.reshape({1}));
  values.narrow(0, 1 + rank_, 1).fill_(mine.failed ? (mine.out_of_memory ? 2.0 : 1.0) : 0.0);
  all_reduce_sum_async({values})->wait();
  if (carry.defined() && !mine.failed) carry.copy_(values.narrow(0, 0, 1).reshape(carry.sizes()));
  const at::Tensor codes = values.narrow(0, 1, world_size_).cpu();
  for (int r = 0; r < world_size_; ++r) {
    const double code = codes[r].item<double>();
    if (code == 0) continue;
    std::string message = mine.message;
    if (r != rank_) {
      try {
        const std::vector<uint8_t> bytes = impl_->store->get(failure_key + std::to_string(r));
        message.assign(bytes.begin(), bytes.end());
      } catch (const c10::Error& error) {
        throw CollectiveError("rank " + std::to_string(r) + " failed a step but its reason could not be read (" +
                              first_line(error) + "); the run stops here, and rank 0 saves what was finished");
      }
    }
    return RankFailure(r, code == 2, message);
  }
  return std::nullopt;
}

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
std::optional<RankFailure> ProcessGroup::agree_on_status(const StepStatus&, const at::Tensor&) { return std::nullopt; }
std::vector<std::string> ProcessGroup::exchange(const std::string&, const std::string& value) { return {value}; }

#endif

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl, int rank, int world_size, std::string backend)
    : impl_(std::move(impl)), rank_(rank), world_size_(world_size), backend_(std::move(backend)) {}

ProcessGroup::~ProcessGroup() = default;

}  // namespace accumbench::compat
