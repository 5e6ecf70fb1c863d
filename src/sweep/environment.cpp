// Facts about the machine for the report's context block, and the CPU thread count of a run.
#include <torch/torch.h>
#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <limits>
#include <thread>

#include "accumbench/error.hpp"
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
  long long requested = 0;  // OMP_NUM_THREADS's first level, read once here
  if (const char* omp = std::getenv("OMP_NUM_THREADS"); threads <= 0 && omp != nullptr) {
    // libgomp warns of a value it cannot read and runs on every core; say it once, with the fix.
    char* end = nullptr;
    errno = 0;
    const long long n = requested = std::strtoll(omp, &end, 10);
    while (end != omp && *end == ' ') ++end;
    if (end == omp || (*end != '\0' && *end != ',') || n <= 0 || errno == ERANGE) {
      throw UserError("OMP_NUM_THREADS=\"" + std::string(omp).substr(0, 40) +
                      "\" is not a positive whole number of threads; set it to one, unset it, or pass --threads N, "
                      "which it then leaves alone");
    }
  }
  const int wanted = threads > 0 ? threads : default_threads();
  // Without --threads, OMP_NUM_THREADS sets them (default_threads): held to --threads' limit
  // (helper-104: 5000 hung in creating the thread pool before anything was measured). Here, where
  // sweep and verify set them, not for plan, which runs none.
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (threads <= 0 && wanted > 4 * hardware) {
    throw UserError("OMP_NUM_THREADS=" + std::string(std::getenv("OMP_NUM_THREADS")) + " asks for " +
                    std::to_string(requested) + " threads, above the limit of " + std::to_string(4 * hardware) +
                    " (four times this machine's " + std::to_string(hardware) +
                    " hardware threads); set it lower, or pass --threads N, which it then leaves alone");
  }
  at::set_num_threads(wanted);
  // OpenBLAS built with its own threads (Debian's libopenblas0-pthread, which LibTorch's matrix
  // products call on the CPU) keeps a pool of every core whatever OpenMP is told: --threads 1 ran
  // its sgemm on two (helper-91). Looked up at run time, since another BLAS may be linked.
  using SetThreads = void (*)(int);
  if (const auto set_blas_threads = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set_blas_threads(wanted);
  }
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

CpuTimes cpu_times() {
  CpuTimes times;
  // "cpu  10284802 0 412 2462311 45 0 15 0 0 0": user, nice, system, idle, iowait, irq, softirq,
  // steal, guest, guest_nice in clock ticks (guest time is counted in user already).
  std::ifstream in("/proc/stat");
  std::string label;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  const long ticks = sysconf(_SC_CLK_TCK);
  if (in >> label >> user >> nice >> system >> idle >> iowait >> irq >> softirq && label == "cpu" && ticks > 0) {
    if (!(in >> steal)) steal = 0;
    times.machine_busy_seconds = (user + nice + system + irq + softirq + steal) / static_cast<double>(ticks);
  }
  rusage own{};
  if (getrusage(RUSAGE_SELF, &own) == 0) {
    const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
    times.own_seconds = seconds(own.ru_utime) + seconds(own.ru_stime);
  }
  return times;
}

std::string cpu_bf16_scratch_note(const WorkloadOptions& workload, bool cuda) {
  const std::vector<Precision> weights = grid_weights_dtypes(workload);
  const bool bf16 = std::find(weights.begin(), weights.end(), Precision::kBf16) != weights.end() ||
                    std::find(workload.precisions.begin(), workload.precisions.end(), Precision::kBf16) !=
                        workload.precisions.end();
  if (cuda || !bf16 || !cpu_has_avx512()) return "";
  // The chunked head's products are small beside that scratch (a helper's LoRA job at T=32: 17.7 %).
  return std::string("on this AVX-512 CPU LibTorch runs bf16 matmuls through oneDNN, whose per-call scratch the plan "
                     "does not count: a bf16 split can peak above its prediction, by a few percent and more at tiny "
                     "shapes") +
         (workload.loss.chunked ? ", up to about 18 % with --chunked-loss, whose chunk products are small beside it"
                                : "") +
         " (README, Known limits)";
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
