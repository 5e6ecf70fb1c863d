// A --resume file's runs and the rules that keep them (resumed_runs.hpp). No LibTorch.
#include "sweep/resumed_runs.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "accumbench/statistics.hpp"
#include "accumbench/units.hpp"

namespace accumbench {

SweepResult with_this_builds_means(const SweepResult& file) {
  SweepResult out = file;
  for (RunResult& run : out.runs) {
    if (run.steps.empty()) continue;
    run.clip_seconds = winsorizing_bound(run);
    const double mean = winsorized_mean(run);
    // A mean that moved keeps no interval from the bound it had (the decisions recompute theirs).
    if (mean != run.mean_seconds.value) run.mean_seconds = Estimate{mean, kNotMeasured, kNotMeasured};
    // The rates over this build's step time (typical_step_seconds: an older file's steps of many
    // sizes were read at their median): the step time the file's rates used is its mean real
    // tokens per step (finalize_run's) over its tokens/s.
    const double step = typical_step_seconds(run);
    double positions = 0;
    for (const StepSample& s : run.steps) positions += static_cast<double>(s.positions);
    positions /= static_cast<double>(run.steps.size());
    // (A file of schema 18 or later, whose steps record their batch, was written over the mean step.)
    const bool older = run.steps.front().data_steps == 0;
    if (older && steps_differ_in_size(run) && positions > 0 && run.tokens_per_second > 0 && std::isfinite(step) && step > 0) {
      const double factor = positions / run.tokens_per_second / step;
      for (double* rate : {&run.tokens_per_second, &run.computed_tokens_per_second, &run.samples_per_second,
                           &run.achieved_tflops, &run.hardware_tflops, &run.mfu}) {
        *rate *= factor;
      }
    }
  }
  return out;
}

ResumedRuns::ResumedRuns(const SweepResult* file, const std::vector<SplitConfig>& grid, int64_t steps,
                         bool retime_undecided, std::function<void(RunResult&)> judge_fits,
                         std::function<std::string(size_t)> label_not_begun)
    : file_(file),
      grid_(grid),
      steps_(steps),
      undecided_(file != nullptr ? file->runs.size() : 0, false),
      judge_fits_(std::move(judge_fits)),
      label_not_begun_(std::move(label_not_begun)) {
  // A file whose rounds ended undecided (--time-budget spent, a signal past --steps): with a
  // --time-budget to decide in, its contenders are timed again, together, in this sweep's rounds
  // (paired rounds of one session, which the file's older rounds are not); the splits already
  // slower beyond doubt keep their times. Without one, the file's times are kept.
  if (file == nullptr || !retime_undecided) return;
  const Decision& d = file->recommendation.decision;
  const auto mark = [&](int i) {
    if (i >= 0 && static_cast<size_t>(i) < undecided_.size()) undecided_[static_cast<size_t>(i)] = true;
  };
  if (d.kind == DecisionKind::kUndecided) {
    mark(d.fastest);
    for (const Comparison& c : d.comparisons) {
      if (c.verdict == Verdict::kUndecided || c.verdict == Verdict::kFaster) mark(c.index);
    }
    return;
  }
  // A resume that times splits the file lacks (a longer list, a new precision): the file's fastest
  // is timed again beside them, so that they race it in paired rounds; timed alone they ended
  // undecided against it, the budget unspent (helper-103).
  // (A split the plan skipped in the file is likely skipped again: it is not counted.)
  const bool times_new = std::any_of(grid.begin(), grid.end(), [&](const SplitConfig& split) {
    return std::none_of(file->runs.begin(), file->runs.end(), [&](const RunResult& run) {
      return run.config.key() == split.key() &&
             (run.status == RunStatus::kPredictedOutOfMemory ||
              (run.status == RunStatus::kOk && static_cast<int64_t>(run.steps.size()) >= steps));
    });
  });
  if (!times_new || d.fastest < 0) return;
  const SplitConfig& fastest = file->runs[static_cast<size_t>(d.fastest)].config;
  if (std::any_of(grid.begin(), grid.end(), [&](const SplitConfig& split) { return split.key() == fastest.key(); })) {
    mark(d.fastest);
  }
}

const RunResult* ResumedRuns::timed_run(const SplitConfig& split) const {
  if (file_ == nullptr) return nullptr;
  for (const RunResult& run : file_->runs) {
    if (run.status == RunStatus::kOk && run.config.key() == split.key()) return &run;
  }
  return nullptr;
}

const RunResult* ResumedRuns::finished(const SplitConfig& split) const {
  if (file_ == nullptr) return nullptr;
  for (size_t i = 0; i < file_->runs.size(); ++i) {
    const RunResult& run = file_->runs[i];
    if (run.status == RunStatus::kOk && run.config.key() == split.key() &&
        static_cast<int64_t>(run.steps.size()) >= steps_ && !undecided_[i]) {
      return &run;
    }
  }
  return nullptr;
}

RunResult ResumedRuns::judged(const RunResult& run) const {
  RunResult copy = run;
  judge_fits_(copy);
  return copy;
}

std::string ResumedRuns::keep_longer(std::vector<RunResult>& runs) const {
  size_t count = 0;
  for (RunResult& run : runs) {
    if (run.status != RunStatus::kOk) continue;
    const RunResult* file = timed_run(run.config);
    if (file != nullptr && file->steps.size() > run.steps.size()) {
      run = judged(*file);
      ++count;
    }
  }
  if (count == 0) return std::string();
  return " " + std::to_string(count) + (count == 1 ? " split reads as the --resume file had it" : " splits read as the --resume file had them") +
         ", with more timed steps than this sweep reached.";
}

std::string ResumedRuns::keep_over_failures(std::vector<RunResult>& runs) const {
  std::vector<std::string> failed;
  for (RunResult& run : runs) {
    if (run.status != RunStatus::kOutOfMemory && run.status != RunStatus::kError) continue;
    const RunResult* file = timed_run(run.config);
    if (file == nullptr) continue;
    failed.push_back(run.config.label() + (run.status == RunStatus::kOutOfMemory ? " ran out of memory" : " failed"));
    run = judged(*file);
  }
  if (failed.empty()) return std::string();
  const std::string words = text::and_list(failed);
  const bool one = failed.size() == 1;
  return " " + words + " in this sweep; " + (one ? "it reads" : "they read") + " as the --resume file had " +
         (one ? "it" : "them") + ", timed.";
}

void ResumedRuns::add_not_begun(size_t begun, std::vector<RunResult>& runs, Interruption& interruption) const {
  for (size_t rest = begun; rest < grid_.size(); ++rest) {
    if (const RunResult* file = timed_run(grid_[rest])) {
      runs.push_back(judged(*file));
    } else {
      interruption.splits_not_run.push_back(label_not_begun_(rest));
    }
  }
}

}  // namespace accumbench
