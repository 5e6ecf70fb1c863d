// A sweep that the user stops (Ctrl-C, or SIGTERM from a job scheduler or torchrun) reports what
// it measured instead of losing it. The first signal only asks: the sweep finishes the split or
// round in progress, writes every output file and prints its table, and the process exits with
// 128 + the signal's number. A second signal ends the process at once, as without the handler, and
// so does the first one before anything is measured (measuring_begins). A second signal within half
// a second of the first is the same request arriving twice (GNU timeout signals its command and
// then its process group) and is let go.
//
//   accumbench::stop_on_interrupt("the split or round in progress");  // the CLI, before a sweep
//   if (accumbench::stop_requested()) ...     // the sweep, between splits and rounds
#pragma once

#include <string>

namespace accumbench {

// Installs the handler for SIGINT and SIGTERM (once; later calls do nothing), except for a signal
// the process inherited as ignored. Library code never calls it: a program that embeds the sweep
// keeps its own signal handling. in_progress, a string literal, is what the handler's line says
// finishes first ("stopping after <in_progress>, then reporting ...").
// `then`, also a literal, what comes after it ("then reporting what was measured" when null).
void stop_on_interrupt(const char* in_progress, const char* then = nullptr);

// The command has begun to measure: from here the first signal asks (above). Before it the handler
// ends the process at once, as without it: there is nothing to report yet, and a read blocked on a
// pipe or a wait for the other ranks would never reach a point where the stop is seen. The sweep
// and verify call it before their first measured step; it does nothing without the handler.
void measuring_begins();

// True once a signal asked the sweep to stop (or request_stop was called).
bool stop_requested();

// The signal that asked, 0 when none; its name ("SIGINT", "SIGTERM", or "signal N").
int stop_signal();
std::string signal_name(int signal_number);

// What the handler does, for code that stops for another reason and for the tests; 0 clears it.
void request_stop(int signal_number);

}  // namespace accumbench
