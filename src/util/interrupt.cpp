// The stop flag behind interrupt.hpp. The handler does only what a signal handler may: it stores
// the signal number and its time (clock_gettime), writes one line with write(2), and on a second
// signal puts the default action back and raises it, ending the process.
#include "accumbench/interrupt.hpp"

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <csignal>
#include <cstring>

namespace accumbench {
namespace {

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the handler stores into it");
// Set once the command measures (measuring_begins): before, there is nothing to report.
std::atomic<bool> g_measuring{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the handler reads it");
// What the handler's line says finishes first; set once, before the handler is installed.
const char* g_in_progress = "";
const char* g_then = "then reporting what was measured";
// When the first stop signal came (CLOCK_MONOTONIC, ns); read and written only by the handler,
// which the kernel does not re-enter for the signal it is handling.
std::atomic<int64_t> g_first_signal_ns{0};  // 0: none yet
static_assert(std::atomic<int64_t>::is_always_lock_free, "the handler stores into it");
// One request can arrive twice: GNU timeout signals its command and then its own process group,
// which holds the command (`timeout -s INT 60 accumbench sweep ...`), and `kill 0` from a script
// reaches every process of the group. A second signal this soon after the first is that echo, not
// a person asking again; quitting on it lost every round of the split in progress.
constexpr int64_t kEchoNs = 500'000'000;

int64_t monotonic_ns() {
  struct timespec now {};
  clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

void write_stderr(const char* text) {
  const ssize_t ignored = write(STDERR_FILENO, text, std::strlen(text));  // both async-signal-safe
  (void)ignored;
}

extern "C" void on_stop_signal(int signal_number) {
  // Nothing measured yet (reading the inputs, perhaps blocked on a pipe, building the model, joining
  // the other ranks): nothing to report, so the signal ends the process as without the handler.
  // raise(3) is async-signal-safe; the signal stays blocked until the handler returns.
  if (!g_measuring.load()) {
    std::signal(signal_number, SIG_DFL);
    std::raise(signal_number);
    return;
  }
  const int64_t now = monotonic_ns();
  if (g_first_signal_ns.load() != 0) {
    if (now - g_first_signal_ns.load() < kEchoNs) return;
    std::signal(signal_number, SIG_DFL);
    std::raise(signal_number);
    return;
  }
  g_first_signal_ns.store(now);
  g_stop_signal.store(signal_number);
  write_stderr("\naccumbench: stopping after ");
  write_stderr(g_in_progress);
  write_stderr(", ");
  write_stderr(g_then);
  write_stderr("; interrupt again to quit at once\n");
}

}  // namespace

void stop_on_interrupt(const char* in_progress, const char* then) {
  static const bool installed = [in_progress, then] {
    g_in_progress = in_progress;
    if (then != nullptr) g_then = then;
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;  // reads and writes in progress (files, Gloo's sockets) go on
    for (const int signal_number : {SIGINT, SIGTERM}) {
      // A signal the parent set to be ignored stays ignored (nohup; `cmd &` in a script, where
      // the terminal's Ctrl-C is not meant for the background job).
      struct sigaction before {};
      if (sigaction(signal_number, nullptr, &before) == 0 && before.sa_handler == SIG_IGN) continue;
      sigaction(signal_number, &action, nullptr);
    }
    return true;
  }();
  (void)installed;
}

void measuring_begins() { g_measuring.store(true); }

bool stop_requested() { return g_stop_signal.load() != 0; }

int stop_signal() { return g_stop_signal.load(); }

std::string signal_name(int signal_number) {
  if (signal_number == SIGINT) return "SIGINT";
  if (signal_number == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(signal_number);
}

void request_stop(int signal_number) { g_stop_signal.store(signal_number); }

}  // namespace accumbench
