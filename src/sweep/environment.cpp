// Facts about the machine for the report's context block, and the CPU thread count of a run.
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "accumbench/sweep.hpp"
#include "compat/compat.hpp"

#include "accumbench_build_info.hpp"

namespace accumbench {
namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "CPU";
}

// AVX-512: LibTorch 1.13 hands bf16 matmuls to oneDNN there (README, Known limits).
bool cpu_has_avx512() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) return line.find(" avx512f") != std::string::npos;
  }
  return false;
}

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

}  // namespace

int configure_threads(int threads) {
  const int wanted = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(wanted);
  return at::get_num_threads();
}

double load_average() {
  // "2.06 2.64 2.36 3/85 28479": the 1-minute average lags a load that began seconds ago (a short
  // resume beside three busy loops read 2.0 on 2 cores), so the threads runnable now (3, this one
  // among them) count too.
  std::ifstream in("/proc/loadavg");
  double minute = 0, five = 0, fifteen = 0;
  std::string runnable;
  if (!(in >> minute >> five >> fifteen >> runnable)) return minute > 0 ? minute : 0.0;
  const auto slash = runnable.find('/');
  double now = 0;
  try {
    now = slash == std::string::npos ? 0.0 : std::stod(runnable.substr(0, slash));
  } catch (const std::exception&) {
    now = 0;
  }
  return std::max(minute, now);
}

double cpu_wait_seconds() {
  // "9518340000 8755700000 4121": nanoseconds on a CPU, waiting on a run queue, time slices. A
  // thread that ended took its delay with it; the sweep's threads (the main one, the intra-op pool)
  // live as long as it does.
  std::error_code error;
  std::filesystem::directory_iterator tasks("/proc/self/task", error);
  if (error) return std::numeric_limits<double>::quiet_NaN();
  double waited = 0;
  bool read = false;
  for (const auto& task : tasks) {
    std::ifstream in(task.path() / "schedstat");
    unsigned long long on_cpu = 0, waiting = 0;
    if (!(in >> on_cpu >> waiting)) continue;
    waited += static_cast<double>(waiting) * 1e-9;
    read = true;
  }
  return read ? waited : std::numeric_limits<double>::quiet_NaN();
}

std::string cpu_bf16_scratch_note(const WorkloadOptions& workload, bool cuda) {
  const std::vector<Precision> weights = grid_weights_dtypes(workload);
  const bool bf16 = std::find(weights.begin(), weights.end(), Precision::kBf16) != weights.end() ||
                    std::find(workload.precisions.begin(), workload.precisions.end(), Precision::kBf16) !=
                        workload.precisions.end();
  if (cuda || !bf16 || !cpu_has_avx512()) return "";
  return "on this AVX-512 CPU LibTorch runs bf16 matmuls through oneDNN, whose per-call scratch the plan does not "
         "count: a bf16 split can peak above its prediction, by a few percent and more at tiny shapes (README, "
         "Known limits)";
}

SweepContext describe_environment(const std::string& device_name) {
  SweepContext context;
  context.date = utc_now_iso8601();
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) == 0) context.host = host;
  const c10::Device device(device_name);
  context.device = device.str();
  if (device.is_cuda()) {
    const int index = device.has_index() ? device.index() : 0;
    context.device_name = compat::cuda_device_name(index);
    context.device_memory_bytes = compat::cuda_device_total_memory_bytes(index);
    context.driver = compat::cuda_driver_description();
  } else {
    context.device_name = cpu_model_name();
    context.device_memory_bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  }
  context.libtorch_version = compat::libtorch_version();
  context.build_type = ACCUMBENCH_BUILD_TYPE;
  context.git_commit = ACCUMBENCH_GIT_COMMIT;
  context.threads = at::get_num_threads();
  return context;
}

std::string build_description() {
  const std::string build_type = std::string(ACCUMBENCH_BUILD_TYPE).empty() ? "default" : ACCUMBENCH_BUILD_TYPE;
  return std::string("accumbench ") + ACCUMBENCH_VERSION + " (commit " + ACCUMBENCH_GIT_COMMIT + ", " + build_type +
         " build, LibTorch " + compat::libtorch_version() + (compat::built_with_cuda() ? ", CUDA" : ", CPU only") + ")";
}

}  // namespace accumbench
