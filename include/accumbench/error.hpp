// Two error tiers (docs/ARCHITECTURE.md): a broken invariant fails loudly (TORCH_CHECK); a user mistake
// throws UserError with one sentence that says what is wrong and what to do; the CLI prints it
// and exits with code 2.
//
//   if (batch % micro_batch != 0)
//     throw accumbench::UserError("batch 10 is not divisible by micro-batch 4; pick a divisor of 10");
#pragma once

#include <stdexcept>
#include <string>

namespace accumbench {

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(message) {}
};

// A failure that ends the whole run rather than one split: a data-parallel peer that left or hung
// (compat::CollectiveError). What was measured is saved first; the CLI prints the sentence and
// exits 1.
class FatalRunError : public std::runtime_error {
 public:
  explicit FatalRunError(const std::string& message) : std::runtime_error(message) {}
};

// A stop signal (interrupt.hpp) ended a command that keeps nothing partial (calibrate-framework):
// its message says what was left as it was; the command exits 128 + the signal.
class Interrupted : public std::runtime_error {
 public:
  explicit Interrupted(const std::string& message) : std::runtime_error(message) {}
};

// Exit code for user mistakes (bad preset, bad config file, batch not divisible, ...).
inline constexpr int kUserErrorExitCode = 2;

}  // namespace accumbench
