// What a --resume file holds, and the rules that keep a sweep from ever leaving it with less: a
// split the file finished is reused; one it had short of --steps, or left undecided with a
// --time-budget to decide in, is measured again; and whatever this sweep then does not finish
// (stopped before it, stopped with fewer timed steps, failed) reads as the file had it.
//
//   ResumedRuns file(resume, grid, options.steps, retime_undecided, judge_fits, label_not_begun);
//   if (const RunResult* done = file.finished(grid[i])) runs.push_back(file.judged(*done));
//   std::string words = file.keep_longer(runs) + file.keep_over_failures(runs);
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "accumbench/result.hpp"

namespace accumbench {

// The file's runs with their means under this build's winsorizing bound, which the decisions on
// them use (decision.hpp): a file from a build that bounded from the warm-up, or with edited
// steps, would print one mean and decide on another. Unchanged for this build's files.
SweepResult with_this_builds_means(const SweepResult& file);

class ResumedRuns {
 public:
  // `file`: the --resume file (nullptr: none), outliving this. `steps`: the sweep's --steps.
  // `retime_undecided`: a --time-budget to decide in, so the contenders of a file whose rounds
  // ended undecided are timed again. `judge_fits` judges a copied run against today's
  // --memory-limit; `label_not_begun(i)` names grid split i when it is not begun.
  ResumedRuns(const SweepResult* file, const std::vector<SplitConfig>& grid, int64_t steps, bool retime_undecided,
              std::function<void(RunResult&)> judge_fits, std::function<std::string(size_t)> label_not_begun);

  // The file's timed run of `split` (status ok), or nullptr.
  const RunResult* timed_run(const SplitConfig& split) const;
  // The file's run of `split` when it is done: timed, with --steps timed steps at least, and not
  // one of the undecided contenders timed again; else nullptr.
  const RunResult* finished(const SplitConfig& split) const;
  // A copy of the file's run, judged against today's --memory-limit.
  RunResult judged(const RunResult& run) const;

  // Runs begun again from zero that have fewer timed steps than the file's: the file's instead.
  // Returns the words that say so, with a leading space ("" when none).
  std::string keep_longer(std::vector<RunResult>& runs) const;
  // Runs that failed in this sweep (out of memory under --try-predicted-oom or a device another
  // process now shares, an error) that the file holds timed: the file's instead, since the failure
  // measured nothing that could replace them. Returns the words naming the failures, with a
  // leading space ("" when none).
  std::string keep_over_failures(std::vector<RunResult>& runs) const;
  // The grid's splits from `begun` on: the file's runs of them appended to `runs`, the others
  // named in `interruption` as not begun.
  void add_not_begun(size_t begun, std::vector<RunResult>& runs, Interruption& interruption) const;

 private:
  const SweepResult* file_;
  const std::vector<SplitConfig>& grid_;
  int64_t steps_;
  std::vector<bool> undecided_;  // per file run: a contender timed again
  std::function<void(RunResult&)> judge_fits_;
  std::function<std::string(size_t)> label_not_begun_;
};

}  // namespace accumbench
