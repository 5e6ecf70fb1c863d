// The stop flag behind interrupt.hpp. The handler does only what a signal handler may: it stores
// the signal number, puts the default action back (so a second signal ends the process) and
// writes one line with write(2).
#include "accumbench/interrupt.hpp"

#include <unistd.h>

#include <atomic>
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
  g_stop_signal.store(signal_number);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  write_stderr("\naccumbench: stopping after ");
  write_stderr(g_in_progress);
  write_stderr(", then reporting what was measured; interrupt again to quit at once\n");
}

}  // namespace

void stop_on_interrupt(const char* in_progress) {
  static const bool installed = [in_progress] {
    g_in_progress = in_progress;
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
