// The sweep on the CPU: every split measured, statistics filled, out-of-memory splits recorded
// while the others finish, JSON round trip of a real result.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "accumbench/error.hpp"
#include "accumbench/interrupt.hpp"
#include "accumbench/models.hpp"
#include "accumbench/plan.hpp"
#include "accumbench/report.hpp"
#include "accumbench/sweep.hpp"

namespace ab = accumbench;

namespace {
ab::SweepOptions tiny() {
  ab::SweepOptions o;
  o.workload.model.preset = "gpt2-tiny";
  o.workload.seq_len = 32;
  o.workload.batch = 4;
  o.workload.device = "cpu";
  o.warmup = 1;
  o.steps = 2;
  o.time_budget_seconds = 0;  // exactly `steps` rounds
  o.workload.threads = 1;  // every hardware thread is ~50x slower on a busy two-core machine
  return o;
}

// "4x1 ckpt=blocks oib=true chunked": every field the grid varies, in ASCII for readable failures.
std::string key(const ab::SplitConfig& c) {
  return std::to_string(c.micro_batch) + "x" + std::to_string(c.accum_steps) + " " + ab::to_string(c.precision) +
         " ckpt=" + ab::to_string(c.activation_checkpointing) + " oib=" + (c.optimizer_in_backward ? "true" : "false") +
         (c.chunked_loss ? " chunked" : "");
}
}  // namespace

// cpu_times reads the machine's busy time and the process's own: a second of this process's busy
// threads counts in both, so what the busy-machine note takes for other processes' stays small.
TEST(Sweep, TheMachinesAndTheProcesssCpuTimeAreRead) {
  const accumbench::CpuTimes before = accumbench::cpu_times();
  ASSERT_TRUE(std::isfinite(before.machine_busy_seconds)) << "no /proc/stat on this system";
  ASSERT_TRUE(std::isfinite(before.own_seconds));
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  for (int i = 0; i < threads; ++i) {
    spinners.emplace_back([&stop] {
      volatile uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) n = n + 1;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop = true;
  for (std::thread& t : spinners) t.join();
  const accumbench::CpuTimes after = accumbench::cpu_times();
  const double own = after.own_seconds - before.own_seconds;
  const double machine = after.machine_busy_seconds - before.machine_busy_seconds;
  // The spinners had every core for half a second, as far as the machine let them.
  EXPECT_GT(own, 0.1 * threads) << "own " << own;
  // The machine's busy time holds this process's (clock ticks: 10 ms each, per core, of slack).
  EXPECT_GE(machine + 0.02 * threads + 0.05, own) << "machine " << machine << ", own " << own;
}

// Without --threads, PyTorch's own default: OMP_NUM_THREADS where set (torchrun sets 1 for each of
// several processes; a list's first level), else every hardware thread.
TEST(Sweep, DefaultThreadsFollowOmpNumThreads) {
  const char* before = std::getenv("OMP_NUM_THREADS");
  const std::string saved = before != nullptr ? before : "";
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  unsetenv("OMP_NUM_THREADS");
  EXPECT_EQ(accumbench::default_threads(), hardware);
  setenv("OMP_NUM_THREADS", "1", 1);
  EXPECT_EQ(accumbench::default_threads(), 1);
  setenv("OMP_NUM_THREADS", "3,2", 1);
  EXPECT_EQ(accumbench::default_threads(), 3);
  setenv("OMP_NUM_THREADS", "many", 1);
  EXPECT_EQ(accumbench::default_threads(), hardware);
  if (before != nullptr) setenv("OMP_NUM_THREADS", saved.c_str(), 1);
  else unsetenv("OMP_NUM_THREADS");
}

TEST(Sweep, MeasuresEverySplitAndRecommendsOne) {
  int callbacks = 0;
  const ab::SweepResult r = ab::run_sweep(tiny(), [&](const ab::SweepResult& partial) {
    ++callbacks;
    if (callbacks <= 3) {  // saved after each split's warm-up: its memory, no timed step yet
      EXPECT_EQ(partial.runs.size(), static_cast<size_t>(callbacks));
      for (const auto& run : partial.runs) EXPECT_TRUE(run.steps.empty());
      return;
    }
    EXPECT_EQ(partial.runs.size(), 3u);  // then once every split has its --steps rounds, and at the end
    for (const auto& run : partial.runs) EXPECT_EQ(run.steps.size(), 2u);
  });
  ASSERT_EQ(r.runs.size(), 3u);  // 1×4, 2×2, 4×1
  EXPECT_EQ(callbacks, 5);
  for (const auto& run : r.runs) {
    EXPECT_EQ(run.status, ab::RunStatus::kOk) << run.error;
    ASSERT_EQ(run.steps.size(), 2u);
    // Timed in interleaved rounds 0 and 1 of one session, winsorized at 3× the warm-up step.
    EXPECT_EQ(run.steps[0].round, 0);
    EXPECT_EQ(run.steps[1].round, 1);
    EXPECT_EQ(run.session, r.runs[0].session);
    EXPECT_NE(run.session, 0);
    EXPECT_GT(run.clip_seconds, 0);
    EXPECT_GT(run.mean_seconds.value, 0);
    EXPECT_GT(run.step_seconds.median, 0);
    EXPECT_EQ(run.tokens_per_step, 4 * 32);
    EXPECT_GT(run.peak_allocated_bytes, 0);
    // Phases add up to the step: 'other' is the remainder, never negative.
    double sum = 0;
    for (double s : run.steps[0].host_seconds) sum += s;
    EXPECT_NEAR(sum, run.steps[0].step_seconds, 1e-9 + 1e-6 * run.steps[0].step_seconds);
    // The timeline has data/h2d/forward/backward per micro-step plus the optimizer.
    EXPECT_EQ(run.timeline.size(), static_cast<size_t>(4 * run.config.accum_steps + 1));
  }
  // Larger micro-batches hold more activations at once.
  EXPECT_LT(r.runs[0].peak_allocated_bytes, r.runs[2].peak_allocated_bytes);
  EXPECT_GE(r.recommendation.best_index, 0);
  EXPECT_FALSE(r.recommendation.reason.empty());
  EXPECT_EQ(r.context.parameters, 149248);
  // Two rounds are too few to decide anything (kMinRoundsToDecide): said so, not guessed.
  EXPECT_EQ(r.recommendation.decision.kind, ab::DecisionKind::kUndecided);
  EXPECT_EQ(r.recommendation.decision.rounds, 2);
}

// With a budget the rounds go on past --steps for the splits not yet decided, on the same samples
// per round for every split, and the sweep says what it decided.
TEST(Sweep, AdaptiveRoundsMeasureTheContendersLonger) {
  ab::SweepOptions o = tiny();
  o.workload.data.lengths = ab::LengthMode::kVariable;  // the same samples per round show in the token counts
  o.time_budget_seconds = 3;
  const ab::SweepResult r = ab::run_sweep(o);
  ASSERT_EQ(r.runs.size(), 3u);
  size_t most = 0;
  for (const auto& run : r.runs) {
    ASSERT_EQ(run.status, ab::RunStatus::kOk) << run.error;
    EXPECT_GE(run.steps.size(), 2u);
    most = std::max(most, run.steps.size());
    for (const auto& step : run.steps) {
      for (const auto& other : r.runs) {
        for (const auto& same_round : other.steps) {
          if (same_round.round == step.round) EXPECT_EQ(same_round.tokens, step.tokens) << "round " << step.round;
        }
      }
    }
  }
  EXPECT_GT(most, 2u);
  EXPECT_EQ(r.recommendation.decision.rounds, static_cast<int64_t>(most));
  EXPECT_NE(r.recommendation.decision.kind, ab::DecisionKind::kNone);
  EXPECT_EQ(r.recommendation.decision.fastest >= 0, true);
}

TEST(Sweep, OutOfMemorySplitsAreRecordedAndTheRestFinish) {
  // First find the peaks without a limit, then cap memory between the smallest and largest.
  const ab::SweepResult free = ab::run_sweep(tiny());
  const int64_t small_peak = free.runs.front().peak_allocated_bytes;
  const int64_t large_peak = free.runs.back().peak_allocated_bytes;
  ASSERT_LT(small_peak, large_peak);
  ab::SweepOptions capped = tiny();
  capped.workload.memory_limit_bytes = (small_peak + large_peak) / 2;
  capped.try_predicted_oom = true;  // run the split the plan would skip, to test the real OOM path
  const ab::SweepResult r = ab::run_sweep(capped);
  ASSERT_EQ(r.runs.size(), 3u);
  EXPECT_EQ(r.runs.front().status, ab::RunStatus::kOk);
  EXPECT_EQ(r.runs.back().status, ab::RunStatus::kOutOfMemory);
  EXPECT_NE(r.runs.back().error.find("out of memory"), std::string::npos);
  EXPECT_GE(r.recommendation.best_index, 0);
  EXPECT_NE(r.runs[r.recommendation.best_index].status, ab::RunStatus::kOutOfMemory);
}

TEST(Sweep, JsonRoundTripOfARealSweep) {
  const ab::SweepResult r = ab::run_sweep(tiny());
  const ab::SweepResult back = ab::sweep_result_from_json(ab::to_json(r), "memory");
  EXPECT_EQ(ab::to_json(back), ab::to_json(r));
  ASSERT_EQ(back.runs.size(), r.runs.size());
  EXPECT_EQ(back.runs[1].step_seconds.median, r.runs[1].step_seconds.median);
}

TEST(Sweep, ResumeSkipsFinishedSplits) {
  ab::SweepResult first = ab::run_sweep(tiny());
  first.runs.pop_back();  // as if killed before the last split
  const ab::SweepResult resumed = ab::run_sweep(tiny(), nullptr, &first);
  ASSERT_EQ(resumed.runs.size(), 3u);
  EXPECT_EQ(resumed.runs[0].step_seconds.median, first.runs[0].step_seconds.median);  // copied
  EXPECT_EQ(resumed.runs[1].step_seconds.median, first.runs[1].step_seconds.median);
  EXPECT_EQ(resumed.runs[2].status, ab::RunStatus::kOk);                              // measured
}

// A file whose rounds ended undecided: --resume with a --time-budget times its contenders again,
// together (one session, paired rounds), and keeps the splits already slower beyond doubt; it used
// to copy them all, run no round, and say "a longer --time-budget can decide" again. Without a
// budget (exactly --steps rounds) the file's times are kept.
TEST(Sweep, ResumeWithABudgetTimesTheUndecidedAgain) {
  ab::SweepResult first = ab::run_sweep(tiny());  // 2 rounds: too few to decide
  ASSERT_EQ(first.recommendation.decision.kind, ab::DecisionKind::kUndecided);
  ab::Decision& d = first.recommendation.decision;
  ASSERT_EQ(d.comparisons.size(), 2u);
  d.comparisons[1].verdict = ab::Verdict::kSlower;  // as if one were slower beyond doubt
  const int slower = d.comparisons[1].index;

  const ab::SweepResult kept = ab::run_sweep(tiny(), nullptr, &first);  // no --time-budget
  for (size_t i = 0; i < kept.runs.size(); ++i) EXPECT_EQ(kept.runs[i].session, first.runs[i].session) << i;

  ab::SweepOptions budget = tiny();
  budget.time_budget_seconds = 0.5;
  const ab::SweepResult resumed = ab::run_sweep(budget, nullptr, &first);
  ASSERT_EQ(resumed.runs.size(), first.runs.size());
  for (size_t i = 0; i < resumed.runs.size(); ++i) {
    if (static_cast<int>(i) == slower) {
      EXPECT_EQ(resumed.runs[i].session, first.runs[i].session) << "kept: slower beyond doubt";
      EXPECT_EQ(resumed.runs[i].step_seconds.median, first.runs[i].step_seconds.median);
    } else {
      EXPECT_NE(resumed.runs[i].session, first.runs[i].session) << i << " timed again";
      EXPECT_GE(resumed.runs[i].steps.size(), 2u);
    }
  }
}

// A sweep stopped mid-rounds saves splits with fewer than --steps timed steps: --resume measures
// those again, beside the file's steps (each with the sweep that timed it), and keeps the complete ones.
TEST(Sweep, ResumeMeasuresAgainSplitsShortOfTheirRounds) {
  ab::SweepResult first = ab::run_sweep(tiny());
  first.runs[1].steps.pop_back();  // 2×2 had one round of two when the sweep stopped
  const ab::SweepResult resumed = ab::run_sweep(tiny(), nullptr, &first);
  ASSERT_EQ(resumed.runs.size(), 3u);
  EXPECT_EQ(resumed.runs[0].step_seconds.median, first.runs[0].step_seconds.median);  // copied
  ASSERT_EQ(resumed.runs[1].steps.size(), 3u);  // the file's one, and two measured again
  EXPECT_NE(resumed.runs[1].session, first.runs[1].session);
  EXPECT_EQ(ab::session_of(resumed.runs[1], resumed.runs[1].steps[0]), first.runs[1].session);
  EXPECT_EQ(resumed.runs[1].steps[0].step_seconds, first.runs[1].steps[0].step_seconds);
  for (size_t k = 1; k < 3; ++k) EXPECT_EQ(ab::session_of(resumed.runs[1], resumed.runs[1].steps[k]), resumed.runs[1].session);
  EXPECT_EQ(resumed.runs[2].step_seconds.median, first.runs[2].step_seconds.median);
}

// --steps may grow on --resume (to time every split on each of an epoch's steps, say): the splits of
// this grid that the file timed on fewer rounds are measured again with the new count, beside the
// file's steps; one this
// grid leaves out keeps the file's rounds, and the recommendation says it is short of --steps.
// A smaller --steps keeps every run of the file.
TEST(Sweep, ResumeWithMoreStepsMeasuresTheShortSplitsAgain) {
  const ab::SweepResult first = ab::run_sweep(tiny());
  ab::SweepOptions more = tiny();
  more.steps = 3;
  more.workload.micro_batches = {1, 2};
  const ab::SweepResult resumed = ab::run_sweep(more, nullptr, &first);
  ASSERT_EQ(resumed.runs.size(), 3u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(resumed.runs[i].steps.size(), 2u + 3u) << resumed.runs[i].config.label();  // the file's 2, 3 again
    EXPECT_NE(resumed.runs[i].session, first.runs[i].session);
  }
  EXPECT_EQ(resumed.runs[2].config.micro_batch, 4);
  EXPECT_EQ(resumed.runs[2].step_seconds.median, first.runs[2].step_seconds.median);  // kept, 2 rounds
  EXPECT_NE(resumed.recommendation.reason.find("1 split short of --steps 3 (timed steps 4\u00d71: 2)"), std::string::npos)
      << resumed.recommendation.reason;
  ab::SweepOptions fewer = tiny();
  fewer.steps = 1;
  const ab::SweepResult kept = ab::run_sweep(fewer, nullptr, &first);
  ASSERT_EQ(kept.runs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(kept.runs[i].step_seconds.median, first.runs[i].step_seconds.median);
}

// Ctrl-C during the warm-ups (interrupt.hpp; the progress callback stands in for the signal): the
// splits begun keep their memory, the others are named, nothing is timed, and --resume finishes
// the grid from the file.
TEST(Sweep, AStopDuringTheWarmUpsReportsWhatWasMeasured) {
  ab::request_stop(0);
  const ab::SweepResult r = ab::run_sweep(tiny(), nullptr, nullptr, [](const ab::SweepProgress& progress) {
    if (progress.round < 0 && progress.split_index == 1) ab::request_stop(SIGINT);
  });
  ab::request_stop(0);
  ASSERT_EQ(r.runs.size(), 2u);  // the stop is heard between splits: 2×2 finished its warm-up
  for (const auto& run : r.runs) {
    EXPECT_EQ(run.status, ab::RunStatus::kOk) << run.error;
    EXPECT_TRUE(run.steps.empty());
    EXPECT_GT(run.peak_allocated_bytes, 0);
    EXPECT_TRUE(std::isnan(run.tokens_per_second));  // not a rate of zero
    EXPECT_TRUE(std::isnan(run.phase_median_seconds[0]));
  }
  EXPECT_EQ(r.interruption.signal, "SIGINT");
  EXPECT_EQ(r.interruption.splits_not_run, std::vector<std::string>{"4\u00d71"});
  EXPECT_EQ(r.recommendation.best_index, -1);
  EXPECT_EQ(r.recommendation.reason,
            "Interrupted by SIGINT: 1 split not begun (4\u00d71), 2 splits with their memory measured but no timed "
            "step; below is what was measured, which no file keeps: rerun with --json FILE to save a sweep as it "
            "goes, and --resume FILE then measures what is missing (every split not begun or short of its --steps).");
  const ab::SweepResult back = ab::sweep_result_from_json(ab::to_json(r), "memory");
  EXPECT_EQ(back.interruption.signal, "SIGINT");
  EXPECT_EQ(back.interruption.splits_not_run, r.interruption.splits_not_run);

  const ab::SweepResult resumed = ab::run_sweep(tiny(), nullptr, &r);
  ASSERT_EQ(resumed.runs.size(), 3u);
  for (const auto& run : resumed.runs) EXPECT_EQ(run.steps.size(), 2u) << run.config.label();
  EXPECT_TRUE(resumed.interruption.signal.empty());
  EXPECT_GE(resumed.recommendation.best_index, 0);
}

// A resume measures a split short of --steps again beside the file's steps; stopped before the new
// run has timed any, it holds the file's, and the file's runs of the splits it never began: a
// stopped resume never leaves the file with less than it held.
TEST(Sweep, AStoppedResumeKeepsWhatTheFileHeld) {
  ab::SweepResult file = ab::run_sweep(tiny());
  ASSERT_EQ(file.runs.size(), 3u);
  file.runs[0].steps.pop_back();  // 1×4: one timed step of --steps 2, as a stopped sweep leaves it
  const std::string first = key(file.runs[0].config);

  // Stopped in 1×4's warm-up: its new run has no timed step, the file's has one.
  ab::request_stop(0);
  const ab::SweepResult warm = ab::run_sweep(tiny(), nullptr, &file, [](const ab::SweepProgress& progress) {
    if (progress.round < 0 && progress.split_index == 0) ab::request_stop(SIGINT);
  });
  ab::request_stop(0);
  ASSERT_EQ(warm.runs.size(), 3u);
  for (const auto& run : warm.runs) {
    const auto held = std::find_if(file.runs.begin(), file.runs.end(),
                                   [&](const ab::RunResult& r) { return key(r.config) == key(run.config); });
    ASSERT_NE(held, file.runs.end()) << key(run.config);
    EXPECT_EQ(run.steps.size(), held->steps.size()) << key(run.config);
  }
  EXPECT_TRUE(warm.interruption.splits_not_run.empty());
  EXPECT_EQ(ab::session_of(warm.runs[0], warm.runs[0].steps[0]), file.runs[0].session);

  // Stopped before the first split: every split of the file is kept as it was.
  ab::request_stop(SIGINT);
  const ab::SweepResult none = ab::run_sweep(tiny(), nullptr, &file);
  ab::request_stop(0);
  ASSERT_EQ(none.runs.size(), 3u);
  EXPECT_EQ(key(none.runs[0].config), first);
  EXPECT_EQ(none.runs[0].steps.size(), 1u);
  EXPECT_TRUE(none.interruption.splits_not_run.empty());
}

// Every save before the end (the --json written after each split and during the rounds) says it
// is one, with the splits not yet begun, so that a file left by kill -9 does not read as a whole
// sweep; the last save, the sweep's end, is whole.
TEST(Sweep, SavesBeforeTheEndSayTheyAreUnfinished) {
  std::vector<ab::SweepResult> saves;
  ab::SweepOptions options = tiny();
  options.json_path = "run.json";  // where the caller saves it, for the words
  const ab::SweepResult r = ab::run_sweep(options, [&](const ab::SweepResult& saved) { saves.push_back(saved); });
  ASSERT_GE(saves.size(), 5u);  // after each of the 3 warm-ups, once the rounds reach --steps, the end
  for (size_t i = 0; i + 1 < saves.size(); ++i) {
    const ab::Interruption& stop = saves[i].interruption;
    EXPECT_TRUE(stop.saved_while_running) << i;
    EXPECT_TRUE(stop.signal.empty()) << i;
    EXPECT_TRUE(stop.error.empty()) << i;
    EXPECT_FALSE(stop.whole()) << i;
  }
  EXPECT_EQ(saves[0].interruption.splits_not_run, (std::vector<std::string>{"2\u00d72", "4\u00d71"}));
  EXPECT_EQ(saves[0].recommendation.reason.rfind(
                "Saved while the sweep ran; a file left like this is from a sweep that did not reach its end "
                "(killed, or ended by an error): 2 splits not begun (2\u00d72, 4\u00d71), 1 split with its memory "
                "measured but no timed step; below is what was measured, and the same command with --resume run.json "
                "measures what is missing (every split not begun or short of its --steps).",
                0),
            0u)
      << saves[0].recommendation.reason;
  ASSERT_EQ(saves[0].runs.size(), 1u);  // no timed step yet: no times, not times of zero
  EXPECT_GT(saves[0].runs[0].peak_allocated_bytes, 0);
  EXPECT_TRUE(std::isnan(saves[0].runs[0].tokens_per_second));
  EXPECT_TRUE(std::isnan(saves[0].runs[0].phase_median_seconds[0]));
  EXPECT_EQ(saves[2].interruption.splits_not_run, std::vector<std::string>{});
  const ab::SweepResult& timed = saves[saves.size() - 2];  // every split at its --steps rounds
  EXPECT_EQ(timed.recommendation.reason.rfind("Saved while the sweep ran; a file left like this is from a sweep "
                                              "that did not reach its end (killed, or ended by an error): the timed "
                                              "rounds had reached 2, every split past its --steps 2; ",
                                              0),
            0u)
      << timed.recommendation.reason;
  const ab::SweepResult back = ab::sweep_result_from_json(ab::to_json(saves[0]), "saved.json");
  EXPECT_TRUE(back.interruption.saved_while_running);
  EXPECT_EQ(back.interruption.splits_not_run, saves[0].interruption.splits_not_run);

  EXPECT_TRUE(saves.back().interruption.whole());
  EXPECT_TRUE(r.interruption.whole());
  EXPECT_EQ(ab::to_json(saves.back()), ab::to_json(r));
  EXPECT_EQ(r.recommendation.reason.find("Saved while"), std::string::npos);
}

// With two precisions in the grid, the splits not begun carry theirs: "2×2" alone would name
// either row.
TEST(Sweep, SplitsNotBegunNameTheirPrecisionWhenTheGridHasTwo) {
  ab::request_stop(0);
  ab::SweepOptions o = tiny();
  o.workload.precisions = {ab::Precision::kFp32, ab::Precision::kBf16};
  const ab::SweepResult r = ab::run_sweep(o, nullptr, nullptr, [](const ab::SweepProgress& progress) {
    if (progress.round < 0 && progress.split_index == 0) ab::request_stop(SIGINT);
  });
  ab::request_stop(0);
  ASSERT_EQ(r.interruption.splits_not_run.size(), 5u);
  for (const std::string& label : r.interruption.splits_not_run) {
    const bool named = label.size() > 5 && (label.substr(label.size() - 5) == " fp32" || label.substr(label.size() - 5) == " bf16");
    EXPECT_TRUE(named) << label;
  }
}

// A stopped file clipped at 1 alone named its splits not begun without a clipping word: resumed
// without clipping, they are not this sweep's splits (which are unclipped), so they stay not begun,
// named now with their norm beside this sweep's unclipped ones.
TEST(Sweep, SplitsNotBegunOfAnotherNormStayNotBegun) {
  ab::request_stop(0);
  ab::SweepOptions clipped = tiny();
  clipped.workload.optimizer.max_grad_norm = 1;
  const ab::SweepResult stopped = ab::run_sweep(clipped, nullptr, nullptr, [](const ab::SweepProgress& progress) {
    if (progress.round < 0 && progress.split_index == 0) ab::request_stop(SIGINT);
  });
  ab::request_stop(0);
  ASSERT_EQ(stopped.interruption.splits_not_run, (std::vector<std::string>{"2\u00d72", "4\u00d71"}));
  const ab::SweepResult resumed = ab::run_sweep(tiny(), nullptr, &stopped);
  EXPECT_EQ(resumed.interruption.splits_not_run, (std::vector<std::string>{"2\u00d72 clip1", "4\u00d71 clip1"}));
  for (const ab::RunResult& run : resumed.runs) {
    if (run.config.max_grad_norm == 0) EXPECT_EQ(run.status, ab::RunStatus::kOk) << run.config.key();
  }
  // Resumed at its own norm, they are this sweep's: measured, and none is left.
  EXPECT_TRUE(ab::run_sweep(clipped, nullptr, &stopped).interruption.splits_not_run.empty());
}

// A stop during the timed rounds ends them after the round in progress: every split keeps the
// same number of steps, and the decision says why it is undecided.
TEST(Sweep, AStopDuringTheRoundsEndsThemAndKeepsTheirSteps) {
  ab::request_stop(0);
  ab::SweepOptions o = tiny();
  o.steps = 5;
  const ab::SweepResult r = ab::run_sweep(o, nullptr, nullptr, [](const ab::SweepProgress& progress) {
    if (progress.round == 1) ab::request_stop(SIGTERM);  // after round 1, the second
  });
  ab::request_stop(0);
  ASSERT_EQ(r.runs.size(), 3u);
  for (const auto& run : r.runs) EXPECT_EQ(run.steps.size(), 2u) << run.config.label();
  EXPECT_EQ(r.interruption.signal, "SIGTERM");
  EXPECT_TRUE(r.interruption.splits_not_run.empty());
  EXPECT_EQ(r.recommendation.decision.rounds, 2);
  EXPECT_EQ(r.recommendation.decision.kind, ab::DecisionKind::kUndecided);
  EXPECT_TRUE(r.recommendation.decision.interrupted);
  EXPECT_FALSE(r.recommendation.decision.budget_spent);
  EXPECT_EQ(r.recommendation.reason.rfind("Interrupted by SIGTERM: the timed rounds stopped after 2 of --steps 5; ", 0),
            0u)
      << r.recommendation.reason;
  EXPECT_NE(r.recommendation.reason.find("Undecided after 2 rounds (interrupted): "), std::string::npos)
      << r.recommendation.reason;
  EXPECT_NE(r.recommendation.reason.find("a sweep left to run to its end can decide"), std::string::npos);
}

TEST(Sweep, BadInputIsAUserError) {
  ab::SweepOptions o = tiny();
  o.workload.micro_batches = {3};
  EXPECT_THROW(ab::run_sweep(o), ab::UserError);
  o = tiny();
  o.workload.model.preset = "gpt2-125m";
  EXPECT_THROW(ab::run_sweep(o), ab::UserError);
  o = tiny();
  o.workload.memory_limit_bytes = 1000;  // below the weights and AdamW moments
  EXPECT_THROW(ab::run_sweep(o), ab::UserError);
  o = tiny();
  o.workload.seq_len = 100000;
  EXPECT_THROW(ab::run_sweep(o), ab::UserError);
  o = tiny();
  o.workload.grid.cuda_graphs = true;  // CI's device is the CPU
  EXPECT_THROW(ab::run_sweep(o), ab::UserError);
}

TEST(Sweep, CudaGraphsAreTheirOwnGridDimension) {
  ab::SweepOptions o = tiny();
  o.workload.micro_batches = {1, 4};
  o.workload.grid.knobs = true;
  o.workload.grid.cuda_graphs = true;
  std::vector<std::string> labels;
  for (const ab::SplitConfig& s : ab::split_grid(o.workload, 1)) labels.push_back(s.label());
  // Every point again from graphs, except optimizer-in-backward (its step cannot be captured).
  auto split = [](int micro, int accum, const char* knobs) {
    return std::to_string(micro) + "\xC3\x97" + std::to_string(accum) + knobs;  // "1×4 graphs"
  };
  const std::vector<std::string> expected = {
      split(1, 4, ""), split(1, 4, " graphs"), split(1, 4, " ckpt"), split(1, 4, " ckpt graphs"),
      split(4, 1, ""), split(4, 1, " graphs"), split(4, 1, " ckpt"), split(4, 1, " ckpt graphs"),
      split(4, 1, " oib"), split(4, 1, " ckpt oib")};
  EXPECT_EQ(labels, expected);
}

// --resume refuses a file measured with another option that changes a measurement, naming it.
TEST(Sweep, ResumeRefusesAnotherConfiguration) {
  const ab::SweepResult first = ab::run_sweep(tiny());
  ab::SweepOptions other = tiny();
  other.workload.optimizer.lr = 1e-3;
  try {
    ab::run_sweep(other, nullptr, &first);
    FAIL() << "a different --lr was resumed";
  } catch (const ab::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--lr \"0.0001\", this sweep has \"0.001\""), std::string::npos) << e.what();
  }
  other = tiny();
  other.workload.optimizer.eps = 1e-6;  // named by its flag, not the context's field name
  try {
    ab::run_sweep(other, nullptr, &first);
    FAIL() << "a different --adam-eps was resumed";
  } catch (const ab::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("measured with --adam-eps \"1e-08\", this sweep has \"1e-06\""),
              std::string::npos)
        << e.what();
  }
  other = tiny();
  other.warmup = 2;  // which step of the data each round trains
  EXPECT_THROW(ab::run_sweep(other, nullptr, &first), ab::UserError);
  // How long to go on deciding changes no finished split: a resume may take another budget (and
  // another --steps: Sweep.ResumeWithMoreStepsMeasuresTheShortSplitsAgain).
  other = tiny();
  other.time_budget_seconds = 1;
  EXPECT_NO_THROW(ab::run_sweep(other, nullptr, &first));
  other = tiny();
  other.workload.model.seed = 7;
  EXPECT_THROW(ab::run_sweep(other, nullptr, &first), ab::UserError);
  // Options recorded only when set stand for their defaults where left out, both ways: a file
  // measured with --kbit-prep none or --base-quant is not resumed by a sweep without them.
  for (const auto& [option, value, words] :
       {std::tuple<std::string, std::string, std::string>{"kbit_prep", "none", "--kbit-prep \"none\", this sweep has \"peft\""},
        {"base_quant", "nf4", "--base-quant \"nf4\", this sweep has \"none\""}}) {
    ab::SweepResult set = first;
    set.context.options.push_back({option, value});
    try {
      ab::run_sweep(tiny(), nullptr, &set);
      FAIL() << option << " " << value << " was resumed by a sweep without it";
    } catch (const ab::UserError& e) {
      EXPECT_NE(std::string(e.what()).find("measured with " + words), std::string::npos) << e.what();
    }
  }
  // A CPU of the same name with other cores is another machine (helper-113); the same cores resume.
  ab::SweepResult elsewhere = first;
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  elsewhere.context.cpu_cores = cores + 62;
  try {
    ab::run_sweep(tiny(), nullptr, &elsewhere);
    FAIL() << "a file of another machine's cores was resumed";
  } catch (const ab::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--resume file was measured on a CPU of " + std::to_string(cores + 62) +
                                         " cores, this machine has " + std::to_string(cores)),
              std::string::npos)
        << e.what();
  }
  elsewhere.context.cpu_cores = cores;
  EXPECT_NO_THROW(ab::run_sweep(tiny(), nullptr, &elsewhere));
}

// A resumed sweep over fewer micro-batches keeps the file's other splits, and judges every
// "fits" again against today's memory limit.
TEST(Sweep, ResumeKeepsOtherSplitsAndJudgesFitsAgain) {
  const ab::SweepResult first = ab::run_sweep(tiny());
  ASSERT_EQ(first.runs.size(), 3u);
  ab::SweepOptions subset = tiny();
  subset.workload.micro_batches = {1};
  subset.workload.memory_limit_bytes = first.runs[1].peak_reserved_bytes;  // 1×4 and 2×2 fit, 4×1 not
  const ab::SweepResult resumed = ab::run_sweep(subset, nullptr, &first);
  ASSERT_EQ(resumed.runs.size(), 3u);
  EXPECT_EQ(resumed.runs[0].config.label(), "1\u00d74");
  EXPECT_EQ(resumed.runs[0].step_seconds.median, first.runs[0].step_seconds.median);  // copied
  EXPECT_EQ(resumed.runs[2].config.label(), "4\u00d71");                              // kept
  EXPECT_TRUE(resumed.runs[1].fits);
  EXPECT_FALSE(resumed.runs[2].fits);
}

// A split the file holds timed, measured again (short of --steps) and now out of memory for real
// (--try-predicted-oom runs it past the plan's prediction): the file's times stand, judged against
// today's limit, and the reason says what failed. "Out-of-memory ... loses nothing already measured."
TEST(Sweep, ResumeKeepsTheFilesTimesOfASplitThatFailsNow) {
  ab::SweepResult file = ab::run_sweep(tiny());
  ASSERT_EQ(file.runs.size(), 3u);
  file.runs[2].steps.pop_back();  // 4×1 short of --steps: measured again
  ab::SweepOptions tight = tiny();
  tight.workload.memory_limit_bytes = file.runs[1].peak_reserved_bytes;  // 4×1 does not fit
  tight.try_predicted_oom = true;
  const ab::SweepResult resumed = ab::run_sweep(tight, nullptr, &file);
  ASSERT_EQ(resumed.runs.size(), 3u);
  EXPECT_EQ(resumed.runs[2].config.label(), "4\u00d71");
  EXPECT_EQ(resumed.runs[2].status, ab::RunStatus::kOk) << resumed.runs[2].error;
  EXPECT_EQ(resumed.runs[2].steps.size(), 1u);  // the file's run
  EXPECT_EQ(resumed.runs[2].session, file.runs[2].session);
  EXPECT_FALSE(resumed.runs[2].fits);
  EXPECT_EQ(resumed.recommendation.reason.rfind("4\u00d71 ran out of memory in this sweep; it reads as the --resume "
                                                "file had it, timed. ",
                                                0),
            0u)
      << resumed.recommendation.reason;
  // Without the file the same sweep records the failure.
  const ab::SweepResult fresh = ab::run_sweep(tight);
  EXPECT_EQ(fresh.runs[2].status, ab::RunStatus::kOutOfMemory) << fresh.runs[2].error;
}

// What the CLI cases cli.sweep.knobs and cli.sweep.chunked_loss ask the library for.
// --knobs: every split again with checkpointed blocks; the optimizer inside backward (alone and
// checkpointed) only where there is no accumulation, since it steps before the next micro-batch.
TEST(SweepGrid, KnobsCheckpointEverySplitAndPutTheOptimizerInBackwardWithoutAccumulation) {
  ab::SweepOptions o = tiny();
  o.workload.grid.knobs = true;
  std::vector<std::string> keys;
  for (const ab::SplitConfig& c : ab::split_grid(o.workload, 1)) keys.push_back(key(c));
  const std::vector<std::string> expected = {
      "1x4 fp32 ckpt=none oib=false", "1x4 fp32 ckpt=blocks oib=false",
      "2x2 fp32 ckpt=none oib=false", "2x2 fp32 ckpt=blocks oib=false",
      "4x1 fp32 ckpt=none oib=false", "4x1 fp32 ckpt=blocks oib=false",
      "4x1 fp32 ckpt=none oib=true",  "4x1 fp32 ckpt=blocks oib=true"};
  EXPECT_EQ(keys, expected);
}

// --activation-checkpointing blocks: every split checkpointed; --knobs then adds no second copy
// of it, only the optimizer-in-backward points at accumulation 1.
TEST(SweepGrid, PlainCheckpointingAppliesToEverySplitAndKnobsDoNotRepeatIt) {
  ab::SweepOptions o = tiny();
  o.workload.grid.checkpointing = ab::Checkpointing::kBlocks;
  std::vector<std::string> keys;
  for (const ab::SplitConfig& c : ab::split_grid(o.workload, 1)) keys.push_back(key(c));
  EXPECT_EQ(keys, (std::vector<std::string>{"1x4 fp32 ckpt=blocks oib=false", "2x2 fp32 ckpt=blocks oib=false",
                                            "4x1 fp32 ckpt=blocks oib=false"}));
  o.workload.grid.knobs = true;
  keys.clear();
  for (const ab::SplitConfig& c : ab::split_grid(o.workload, 1)) keys.push_back(key(c));
  EXPECT_EQ(keys, (std::vector<std::string>{"1x4 fp32 ckpt=blocks oib=false", "2x2 fp32 ckpt=blocks oib=false",
                                            "4x1 fp32 ckpt=blocks oib=false", "4x1 fp32 ckpt=blocks oib=true"}));
}

// --optimizer-in-backward on every split: only 4×1 can (1×4 and 2×2 accumulate), so the grid is
// that split alone, per precision, with the note naming the two left out; with --knobs it is also
// checkpointed; micro-batches that miss the whole batch leave nothing and are refused; CUDA
// graphs cannot capture the step inside backward.
TEST(SweepGrid, PlainOptimizerInBackwardKeepsOnlyTheSplitWithoutAccumulation) {
  ab::SweepOptions o = tiny();
  o.workload.grid.optimizer_in_backward = true;
  o.workload.precisions = {ab::Precision::kFp32, ab::Precision::kBf16};
  std::vector<std::string> keys;
  for (const ab::SplitConfig& c : ab::split_grid(o.workload, 1)) keys.push_back(key(c));
  EXPECT_EQ(keys, (std::vector<std::string>{"4x1 fp32 ckpt=none oib=true", "4x1 bf16 ckpt=none oib=true"}));
  EXPECT_EQ(ab::optimizer_in_backward_note(o.workload, 1),
            "--optimizer-in-backward needs accumulation 1 (each parameter steps inside backward): of the splits of 4 "
            "only 4\u00d71 is kept; 1\u00d74, 2\u00d72 accumulate and are left out (drop the option to compare them)");
  o.workload.precisions = {ab::Precision::kFp32};
  o.workload.grid.knobs = true;
  o.workload.loss.chunked = true;
  keys.clear();
  for (const ab::SplitConfig& c : ab::split_grid(o.workload, 1)) keys.push_back(key(c));
  EXPECT_EQ(keys, (std::vector<std::string>{"4x1 fp32 ckpt=none oib=true", "4x1 fp32 ckpt=blocks oib=true",
                                            "4x1 fp32 ckpt=none oib=true chunked",
                                            "4x1 fp32 ckpt=blocks oib=true chunked"}));
  o.workload.micro_batches = {2, 4};
  EXPECT_EQ(ab::optimizer_in_backward_note(o.workload, 1),
            "--optimizer-in-backward needs accumulation 1 (each parameter steps inside backward): of the splits of 4 "
            "only 4\u00d71 is kept; 2\u00d72 accumulates and is left out (drop the option to compare them)");
  o.workload.micro_batches = {4};
  EXPECT_EQ(ab::optimizer_in_backward_note(o.workload, 1), "");  // nothing left out
  // --knobs over data-parallel ranks leaves its optimizer-in-backward variants out, and says so.
  ab::WorkloadOptions knobs = o.workload;
  knobs.grid.optimizer_in_backward = false;
  knobs.micro_batches = {};
  EXPECT_EQ(ab::optimizer_in_backward_note(knobs, 1), "");
  EXPECT_EQ(ab::optimizer_in_backward_note(knobs, 2),
            "--knobs leaves the optimizer inside backward out with 2 data-parallel ranks (each parameter would step "
            "before its gradient is summed over the ranks): it adds the checkpointed splits only");
  for (const ab::SplitConfig& c : ab::split_grid(knobs, 2)) EXPECT_FALSE(c.optimizer_in_backward) << key(c);
  o.workload.micro_batches = {1, 2};
  EXPECT_EQ(ab::optimizer_in_backward_note(o.workload, 1), "");  // the error below says it
  try {
    ab::split_grid(o.workload, 1);
    FAIL() << "no split without accumulation was accepted";
  } catch (const ab::UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--optimizer-in-backward needs accumulation 1, but no micro-batch of --micro-batches 1,2 is the whole "
              "batch of 4; add 4 to --micro-batches or drop --optimizer-in-backward");
  }
  o.workload.micro_batches = {};
  o.workload.grid.cuda_graphs = true;
  EXPECT_THROW(ab::validate_workload(o.workload), ab::UserError);
  EXPECT_THROW(ab::split_grid(o.workload, 2), ab::UserError);  // data parallel: refused
}

// --chunked-loss: every split measured with the plain head and then the chunked one; the chunked
// head holds one chunk's logits instead of the (b·T, V) ones, so at 4×1 (128 tokens, V=512) it
// peaks lower, and the plan predicts its peak within 10 %.
TEST(ChunkedLossSweep, RunsEverySplitTwicePeaksLowerAndIsPlannedWithinTenPercent) {
  ab::SweepOptions o = tiny();
  o.workload.loss.chunked = true;
  const ab::SweepResult r = ab::run_sweep(o);
  std::vector<std::string> keys;
  for (const ab::RunResult& run : r.runs) {
    keys.push_back(key(run.config));
    EXPECT_EQ(run.status, ab::RunStatus::kOk) << key(run.config) << ": " << run.error;
  }
  const std::vector<std::string> expected = {
      "1x4 fp32 ckpt=none oib=false", "1x4 fp32 ckpt=none oib=false chunked",
      "2x2 fp32 ckpt=none oib=false", "2x2 fp32 ckpt=none oib=false chunked",
      "4x1 fp32 ckpt=none oib=false", "4x1 fp32 ckpt=none oib=false chunked"};
  ASSERT_EQ(keys, expected);

  const ab::RunResult& plain = r.runs[4];
  const ab::RunResult& chunked = r.runs[5];
  EXPECT_LT(chunked.peak_allocated_bytes, plain.peak_allocated_bytes);
  for (size_t i = 1; i < r.runs.size(); i += 2) {
    const ab::RunResult& run = r.runs[i];
    ASSERT_GT(run.peak_allocated_bytes, 0) << key(run.config);
    ASSERT_GT(run.predicted_peak_bytes, 0) << key(run.config);
    const double error = std::abs(static_cast<double>(run.predicted_peak_bytes - run.peak_allocated_bytes)) /
                         static_cast<double>(run.peak_allocated_bytes);
    EXPECT_LE(error, 0.10) << key(run.config) << ": planned " << run.predicted_peak_bytes << " bytes, measured "
                           << run.peak_allocated_bytes;
  }
}

// --optimizer adamw,adamw8bit,sgd: a grid dimension, outermost (the rounds change optimizer as
// rarely as the grid does); each point's label names an optimizer other than adamw, its key with
// it; a name given twice is kept once.
TEST(SweepGrid, OptimizersAreAGridDimensionOutermost) {
  ab::SweepOptions o = tiny();
  o.workload.micro_batches = {2, 4};
  o.workload.optimizer.kind = ab::OptimizerKind::kAdamW;
  o.workload.grid.other_optimizers = {ab::OptimizerKind::kAdamW8bit, ab::OptimizerKind::kAdamW,
                                      ab::OptimizerKind::kSgd};
  std::vector<std::string> labels;
  std::vector<std::string> keys;
  for (const ab::SplitConfig& c : ab::split_grid(o.workload, 1)) {
    labels.push_back(c.label());
    keys.push_back(c.key());
  }
  EXPECT_EQ(labels, (std::vector<std::string>{"2\u00d72", "4\u00d71", "2\u00d72 adamw8bit", "4\u00d71 adamw8bit",
                                              "2\u00d72 sgd", "4\u00d71 sgd"}));
  EXPECT_EQ(keys[2], "2\u00d72 adamw8bit/fp32");
  EXPECT_EQ(ab::join_optimizers(ab::grid_optimizers(o.workload)), "adamw,adamw8bit,sgd");
  // The knobs come before the optimizer in a label.
  o.workload.grid.other_optimizers = {ab::OptimizerKind::kPagedAdamW32bit};
  o.workload.grid.knobs = true;
  EXPECT_EQ(ab::split_grid(o.workload, 1).back().label(), "4\u00d71 ckpt oib paged-adamw32bit");
}

// One sweep of three optimizers measures each split as a sweep of that optimizer alone does: the
// trainer frees one optimizer's state before it builds the next (the 8-bit splits follow AdamW's,
// whose 2 × 4 bytes per parameter would otherwise sit in their peaks), the peak breakdown names
// each split's own state, and each split is planned with its own optimizer (the counting
// allocator's peaks are exact: equal bytes).
TEST(Sweep, SeveralOptimizersMeasureEachSplitAsItsOwnSweepWould) {
  ab::SweepOptions o = tiny();
  o.workload.micro_batches = {2, 4};
  o.workload.grid.other_optimizers = {ab::OptimizerKind::kAdamW8bit, ab::OptimizerKind::kSgd};
  const ab::SweepResult together = ab::run_sweep(o);
  ASSERT_EQ(together.runs.size(), 6u);
  const ab::ModelConfig cfg = ab::find_preset("gpt2-tiny");
  for (const ab::OptimizerKind kind : {ab::OptimizerKind::kAdamW, ab::OptimizerKind::kAdamW8bit, ab::OptimizerKind::kSgd}) {
    ab::SweepOptions alone = tiny();
    alone.workload.micro_batches = {2, 4};
    alone.workload.optimizer.kind = kind;
    const ab::SweepResult single = ab::run_sweep(alone);
    ASSERT_EQ(single.runs.size(), 2u);
    const int64_t state = ab::optimizer_state_total_bytes(cfg, {}, ab::Precision::kFp32, kind);
    for (const ab::RunResult& run : single.runs) {
      const auto same = std::find_if(together.runs.begin(), together.runs.end(),
                                     [&](const ab::RunResult& r) { return r.config.key() == run.config.key(); });
      ASSERT_NE(same, together.runs.end()) << run.config.label();
      ASSERT_EQ(same->status, ab::RunStatus::kOk) << same->error;
      EXPECT_EQ(same->config.optimizer, kind);
      EXPECT_EQ(same->peak_allocated_bytes, run.peak_allocated_bytes) << run.config.label();
      EXPECT_EQ(same->predicted_peak_bytes, run.predicted_peak_bytes) << run.config.label();
      EXPECT_EQ(same->peak_breakdown.optimizer_state_bytes, state) << run.config.label();
      EXPECT_EQ(same->peak_breakdown.optimizer_state_bytes, run.peak_breakdown.optimizer_state_bytes);
    }
  }
  EXPECT_NE(together.recommendation.reason.find("The optimizers compute different updates, which the choice above does "
                                                "not weigh; the fastest split of each, by its mean step: adamw "),
            std::string::npos)
      << together.recommendation.reason;
  EXPECT_NE(together.recommendation.reason.find("; time emulated), sgd "), std::string::npos)
      << together.recommendation.reason;
}

// The weights dtype is the grid's outermost dimension, before the optimizer; the label names it
// after the optimizer unless it is fp32, and a dtype given twice is swept once.
TEST(SweepGrid, WeightsDtypesAreAGridDimensionOutermost) {
  ab::SweepOptions o = tiny();
  o.workload.micro_batches = {2, 4};
  o.workload.weights_dtype = ab::Precision::kBf16;
  o.workload.grid.other_weights_dtypes = {ab::Precision::kFp32, ab::Precision::kBf16};
  o.workload.grid.other_optimizers = {ab::OptimizerKind::kSgd};
  std::vector<std::string> labels;
  for (const ab::SplitConfig& c : ab::split_grid(o.workload, 1)) labels.push_back(c.label());
  EXPECT_EQ(labels, (std::vector<std::string>{"2\u00d72 bf16-weights", "4\u00d71 bf16-weights",
                                              "2\u00d72 sgd bf16-weights", "4\u00d71 sgd bf16-weights", "2\u00d72",
                                              "4\u00d71", "2\u00d72 sgd", "4\u00d71 sgd"}));
  EXPECT_EQ(ab::split_grid(o.workload, 1)[0].key(), "2\u00d72 bf16-weights/fp32");
  EXPECT_EQ(ab::split_grid(o.workload, 1)[0].shape_label(), "2\u00d72");
  EXPECT_EQ(ab::join_precisions(ab::grid_weights_dtypes(o.workload)), "bf16,fp32");
  EXPECT_EQ(ab::recorded_option(ab::describe_workload(o.workload), "weights_dtype"), "bf16,fp32");
}

// The jobs of the lists in the grid's order (a precision given twice once), each the workload with
// one of each list, named by the options that tell it from the others.
TEST(SweepGrid, JobsOfTheListsInTheGridsOrder) {
  ab::SweepOptions o = tiny();
  o.workload.micro_batches = {2, 4};
  o.workload.grid.other_weights_dtypes = {ab::Precision::kBf16};
  o.workload.grid.other_optimizers = {ab::OptimizerKind::kSgd};
  o.workload.precisions = {ab::Precision::kFp32, ab::Precision::kBf16, ab::Precision::kFp32};
  const std::vector<ab::GridJob> jobs = ab::grid_jobs(o.workload);
  std::vector<std::string> flags;
  for (const ab::GridJob& job : jobs) flags.push_back(ab::job_flags(job, o.workload));
  EXPECT_EQ(flags, (std::vector<std::string>{
                       "--weights-dtype fp32 --optimizer adamw --precision fp32", "--weights-dtype fp32 --optimizer adamw --precision bf16",
                       "--weights-dtype fp32 --optimizer sgd --precision fp32", "--weights-dtype fp32 --optimizer sgd --precision bf16",
                       "--weights-dtype bf16 --optimizer adamw --precision fp32", "--weights-dtype bf16 --optimizer adamw --precision bf16",
                       "--weights-dtype bf16 --optimizer sgd --precision fp32", "--weights-dtype bf16 --optimizer sgd --precision bf16"}));
  // split_grid walks the same jobs, two splits each.
  const std::vector<ab::SplitConfig> grid = ab::split_grid(o.workload, 1);
  ASSERT_EQ(grid.size(), 2 * jobs.size());
  for (size_t i = 0; i < grid.size(); ++i) EXPECT_EQ(ab::job_of(grid[i]), jobs[i / 2]) << grid[i].key();
  const ab::WorkloadOptions one = ab::job_workload(o.workload, jobs[7]);
  EXPECT_EQ(ab::grid_jobs(one).size(), 1u);
  EXPECT_EQ(ab::job_of(ab::split_grid(one, 1)[0]), jobs[7]);
  EXPECT_EQ(ab::job_flags(jobs[7], one), "");
}

// One sweep of fp32 and bf16 weights (and two optimizers) measures each split as a sweep of that
// dtype alone does, to the byte: the trainer of one dtype is dropped (gradients, optimizer state)
// before the model is cast, each split is planned in its own dtype, and its breakdown names its
// own parameters. LoRA on llama-tiny, bf16 first: the cast back to fp32 leaves the fp32 adapters
// as they are and casts the frozen base (the rotary tables follow the hidden state's dtype); and
// the adapters' dtype as a list of its own beside the weights', under bf16 autocast.
TEST(Sweep, SeveralWeightsDtypesMeasureEachSplitAsItsOwnSweepWould) {
  // `o` with its lists; each (weights, adapters) pair swept alone must measure what the sweep of all did.
  const auto check = [](const ab::SweepOptions& o, ab::SweepResult& together) {
    together = ab::run_sweep(o);
    const std::vector<ab::Precision> weights = ab::grid_weights_dtypes(o.workload);
    const std::vector<ab::Precision> adapters = ab::grid_adapter_dtypes(o.workload);
    ASSERT_EQ(together.runs.size(), 2 * weights.size() * adapters.size() * ab::grid_optimizers(o.workload).size());
    for (const ab::Precision dtype : weights) {
      for (const ab::Precision adapter : adapters) {
        ab::SweepOptions alone = o;
        alone.workload = ab::with_adapter_dtype(ab::with_weights_dtype(o.workload, dtype), adapter);
        const ab::SweepResult single = ab::run_sweep(alone);
        for (const ab::RunResult& run : single.runs) {
          const auto same = std::find_if(together.runs.begin(), together.runs.end(),
                                         [&](const ab::RunResult& r) { return r.config.key() == run.config.key(); });
          ASSERT_NE(same, together.runs.end()) << run.config.label();
          ASSERT_EQ(same->status, ab::RunStatus::kOk) << same->error;
          EXPECT_EQ(same->config.weights_dtype, dtype);
          EXPECT_EQ(same->config.adapter_dtype, adapter);
          EXPECT_EQ(same->peak_allocated_bytes, run.peak_allocated_bytes) << run.config.label();
          EXPECT_EQ(same->predicted_peak_bytes, run.predicted_peak_bytes) << run.config.label();
          EXPECT_EQ(same->peak_breakdown.parameters_bytes, run.peak_breakdown.parameters_bytes) << run.config.label();
          EXPECT_EQ(same->peak_breakdown.gradients_bytes, run.peak_breakdown.gradients_bytes) << run.config.label();
          EXPECT_EQ(same->peak_breakdown.optimizer_state_bytes, run.peak_breakdown.optimizer_state_bytes);
          // Llama's rotary tables of the split before (another dtype) are not in its baseline.
          EXPECT_EQ(same->peak_breakdown.activations_bytes, run.peak_breakdown.activations_bytes) << run.config.label();
          // The lines add up to the peak (the token batches count with the activations).
          const ab::MemoryBreakdown& b = same->peak_breakdown;
          EXPECT_EQ(b.parameters_bytes + b.gradients_bytes + b.optimizer_state_bytes + b.activations_bytes,
                    same->peak_allocated_bytes)
              << run.config.label();
        }
      }
    }
  };
  ab::SweepOptions full = tiny();
  full.workload.micro_batches = {2, 4};
  full.workload.grid.other_weights_dtypes = {ab::Precision::kBf16};
  full.workload.grid.other_optimizers = {ab::OptimizerKind::kSgd};
  ab::SweepResult both;
  check(full, both);
  ASSERT_EQ(both.runs.size(), 8u);
  // Full fine-tuning: bf16 parameters, gradients and moments are half the fp32 ones.
  EXPECT_EQ(both.runs[0].peak_breakdown.parameters_bytes, 2 * both.runs[4].peak_breakdown.parameters_bytes);
  EXPECT_NE(both.recommendation.reason.find(" (16-bit weights without autocast run 16-bit products"), std::string::npos)
      << both.recommendation.reason;
  EXPECT_NE(both.recommendation.reason.find(", adamw on bf16 weights "), std::string::npos) << both.recommendation.reason;

  ab::SweepOptions lora = tiny();
  lora.workload.model.preset = "llama-tiny";
  lora.workload.micro_batches = {2, 4};
  lora.workload.lora.rank = 4;
  lora.workload.weights_dtype = ab::Precision::kBf16;
  lora.workload.grid.other_weights_dtypes = {ab::Precision::kFp32};
  ab::SweepResult adapted;
  check(lora, adapted);

  ab::SweepOptions adapters = lora;
  adapters.workload.precisions = {ab::Precision::kBf16};
  adapters.workload.grid.other_adapter_dtypes = {ab::Precision::kBf16};
  ab::SweepResult two;
  check(adapters, two);
  ASSERT_EQ(two.runs.size(), 8u);
  // bf16 adapters: their parameters, gradients and moments are half the fp32 ones.
  EXPECT_EQ(two.runs[0].peak_breakdown.optimizer_state_bytes, 2 * two.runs[2].peak_breakdown.optimizer_state_bytes);
  EXPECT_EQ(two.runs[2].config.label(), "2\u00d72 bf16-weights bf16-adapters");
  EXPECT_NE(two.recommendation.reason.find("The weights and adapter dtypes compute in different precision (16-bit "),
            std::string::npos)
      << two.recommendation.reason;
  EXPECT_NE(two.recommendation.reason.find("bf16 weights with bf16 adapters "), std::string::npos)
      << two.recommendation.reason;
}

// --max-grad-norm 0,0.5: each split measured without and with clipping, each as its own sweep
// measures it (peak and plan to the byte: the one trainer's norm is a setting of the step), keyed
// apart, named apart where the runs differ in it, and the recommendation says that the norms
// compute different updates. A --resume of the unclipped file adds the clipped splits and keeps
// the file's: the norm, like the other lists, may change on resume.
TEST(Sweep, ClippingNormsAreAGridDimension) {
  ab::SweepOptions o = tiny();
  o.workload.micro_batches = {2, 4};
  o.workload.optimizer.kind = ab::OptimizerKind::kSgd;  // no moments: the clipping's temporaries can set the peak
  o.workload.grid.other_max_grad_norms = {0.5};
  const ab::SweepResult together = ab::run_sweep(o);
  ASSERT_EQ(together.runs.size(), 4u);
  for (const double norm : {0.0, 0.5}) {
    ab::SweepOptions alone = o;
    alone.workload = ab::with_max_grad_norm(o.workload, norm);
    for (const ab::RunResult& run : ab::run_sweep(alone).runs) {
      const auto same = std::find_if(together.runs.begin(), together.runs.end(),
                                     [&](const ab::RunResult& r) { return r.config.key() == run.config.key(); });
      ASSERT_NE(same, together.runs.end()) << run.config.key();
      ASSERT_EQ(same->status, ab::RunStatus::kOk) << same->error;
      EXPECT_EQ(same->config.max_grad_norm, norm);
      EXPECT_EQ(same->peak_allocated_bytes, run.peak_allocated_bytes) << run.config.key();
      EXPECT_EQ(same->predicted_peak_bytes, run.predicted_peak_bytes) << run.config.key();
    }
  }
  EXPECT_EQ(together.runs[2].config.key(), "2\u00d72 sgd/fp32/clip0.5");
  EXPECT_EQ(ab::run_label(together.runs[2], together.runs), "2\u00d72 sgd clip0.5");
  EXPECT_EQ(ab::run_label(together.runs[0], together.runs), "2\u00d72 sgd no-clip");
  EXPECT_NE(together.recommendation.reason.find(
                " The clipping norms (--max-grad-norm) compute different updates (clipping scales the step's gradient "
                "down whenever its global norm is above the limit), which the choice above does not weigh; the fastest "
                "split of each, by its mean step: no-clip "),
            std::string::npos)
      << together.recommendation.reason;
  EXPECT_EQ(ab::recorded_option(together.context.options, "max_grad_norm"), std::optional<std::string>("0,0.5"));

  ab::SweepOptions first = tiny();
  first.workload.micro_batches = {2, 4};
  first.workload.optimizer.kind = ab::OptimizerKind::kSgd;
  const ab::SweepResult unclipped = ab::run_sweep(first);
  const ab::SweepResult resumed = ab::run_sweep(o, nullptr, &unclipped);
  ASSERT_EQ(resumed.runs.size(), 4u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(resumed.runs[i].config.max_grad_norm, 0);
    EXPECT_EQ(resumed.runs[i].step_seconds.median, unclipped.runs[i].step_seconds.median);  // copied
    EXPECT_EQ(resumed.runs[i + 2].config.max_grad_norm, 0.5);
    EXPECT_EQ(resumed.runs[i + 2].status, ab::RunStatus::kOk) << resumed.runs[i + 2].error;
  }
}

// --padding max,longest,multiple:8 is a grid dimension: each split measures what its own sweep of
// that padding measures (the same positions computed, the same peak to the byte, the same plan), the
// label names the padding where the runs differ, the recommendation chooses among every padding
// (they compute the same update) and names the fastest of each; --resume may add a padding.
TEST(Sweep, PaddingsAreAGridDimension) {
  ab::SweepOptions o = tiny();
  o.workload.micro_batches = {1, 4};
  o.workload.data.lengths = ab::LengthMode::kVariable;
  o.workload.data.other_paddings = {{ab::Padding::kLongest, 0}, {ab::Padding::kMultiple, 8}};
  const ab::SweepResult together = ab::run_sweep(o);
  ASSERT_EQ(together.runs.size(), 6u);
  for (const ab::PaddingChoice& padding : ab::grid_paddings(o.workload)) {
    ab::SweepOptions alone = o;
    alone.workload = ab::with_padding(o.workload, padding);
    for (const ab::RunResult& run : ab::run_sweep(alone).runs) {
      const auto same = std::find_if(together.runs.begin(), together.runs.end(),
                                     [&](const ab::RunResult& r) { return r.config.key() == run.config.key(); });
      ASSERT_NE(same, together.runs.end()) << run.config.key();
      ASSERT_EQ(same->status, ab::RunStatus::kOk) << same->error;
      EXPECT_TRUE(same->config.padding == padding) << run.config.key();
      ASSERT_EQ(same->steps.size(), run.steps.size());
      for (size_t i = 0; i < run.steps.size(); ++i) {
        EXPECT_EQ(same->steps[i].computed_positions, run.steps[i].computed_positions) << run.config.key();
        EXPECT_EQ(same->steps[i].positions, run.steps[i].positions) << run.config.key();
      }
      EXPECT_EQ(same->peak_allocated_bytes, run.peak_allocated_bytes) << run.config.key();
      EXPECT_EQ(same->predicted_peak_bytes, run.predicted_peak_bytes) << run.config.key();
    }
  }
  // Padded to T, every micro-batch computes B·T positions; padded to its longest, fewer, and never
  // fewer than its samples' own positions.
  const auto computed = [](const ab::RunResult& run) { return run.steps.front().computed_positions; };
  EXPECT_EQ(computed(together.runs[0]), 4 * 32);
  EXPECT_LT(computed(together.runs[2]), computed(together.runs[0]));
  EXPECT_GE(computed(together.runs[2]), together.runs[2].steps.front().positions);
  EXPECT_LE(computed(together.runs[2]), computed(together.runs[4]));  // multiple:8 rounds the longest up
  EXPECT_EQ(computed(together.runs[4]) % 8, 0);
  EXPECT_EQ(together.runs[2].config.key(), "1\u00d74/fp32/pad-longest");
  EXPECT_EQ(together.runs[0].config.key(), "1\u00d74/fp32");  // max: the key of a file without the list
  EXPECT_EQ(ab::run_label(together.runs[5], together.runs), "4\u00d71 pad-multiple8");
  EXPECT_EQ(ab::run_label(together.runs[0], together.runs), "1\u00d74 pad-max");
  EXPECT_NE(together.recommendation.reason.find(" The paddings (--padding) compute the same update from the same "
                                                "samples, so the choice is among them all; the fastest split of each, by its mean step: "),
            std::string::npos)
      << together.recommendation.reason;
  EXPECT_EQ(ab::recorded_option(together.context.options, "padding"), std::optional<std::string>("max,longest,multiple:8"));

  ab::SweepOptions first = o;
  first.workload.data.other_paddings.clear();
  const ab::SweepResult padded_to_t = ab::run_sweep(first);
  const ab::SweepResult resumed = ab::run_sweep(o, nullptr, &padded_to_t);
  ASSERT_EQ(resumed.runs.size(), 6u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(resumed.runs[i].step_seconds.median, padded_to_t.runs[i].step_seconds.median);  // copied
    EXPECT_EQ(resumed.runs[i + 2].config.padding.padding, ab::Padding::kLongest);
    EXPECT_EQ(resumed.runs[i + 2].status, ab::RunStatus::kOk) << resumed.runs[i + 2].error;
  }
}

// A sweep of a data list (`together`) against the sweep of one of its values (`alone`): every split
// of `alone` is in `together` under the same key, with `of_value` its value, and trains the same
// positions in every step; `together` holds the other values' host batches too, which its plan
// counts (the plan's error is the same).
template <class OfValue>
void expect_each_split_as_alone(const ab::SweepResult& together, const ab::SweepOptions& alone, OfValue of_value) {
  for (const ab::RunResult& run : ab::run_sweep(alone).runs) {
    const auto same = std::find_if(together.runs.begin(), together.runs.end(),
                                   [&](const ab::RunResult& r) { return r.config.key() == run.config.key(); });
    ASSERT_NE(same, together.runs.end()) << run.config.key();
    ASSERT_EQ(same->status, ab::RunStatus::kOk) << same->error;
    EXPECT_TRUE(of_value(same->config)) << run.config.key();
    ASSERT_EQ(same->steps.size(), run.steps.size());
    for (size_t i = 0; i < run.steps.size(); ++i) {
      EXPECT_EQ(same->steps[i].positions, run.steps[i].positions) << run.config.key();
      EXPECT_EQ(same->steps[i].computed_positions, run.steps[i].computed_positions) << run.config.key();
    }
    EXPECT_GT(same->peak_allocated_bytes, run.peak_allocated_bytes) << run.config.key();  // the other's batches
    EXPECT_EQ(same->predicted_peak_bytes - same->peak_allocated_bytes, run.predicted_peak_bytes - run.peak_allocated_bytes)
        << run.config.key();
  }
}

// --packing none,bfd is a grid dimension: each split trains on the positions its own sweep of that
// packing trains on, and holds the other packing's host batches besides, which its plan counts (the
// plan's error is the one alone's); the key and label name the packing; the recommendation weighs the
// splits per real token and names the fastest of each packing; a resume of the same lists copies the
// file's splits and measures the new micro-batch under both packings.
TEST(Sweep, PackingsAreAGridDimension) {
  ab::SweepOptions o = tiny();
  o.workload.micro_batches = {1, 4};
  o.workload.data.lengths = ab::LengthMode::kVariable;
  o.workload.data.padding = ab::Padding::kLongest;
  o.workload.data.other_packings = {ab::Packing::kBfd};
  const ab::SweepResult together = ab::run_sweep(o);
  ASSERT_EQ(together.runs.size(), 4u);
  for (const ab::Packing packing : ab::grid_packings(o.workload)) {
    ab::SweepOptions alone = o;
    alone.workload = ab::with_packing(o.workload, packing);
    expect_each_split_as_alone(together, alone, [&](const ab::SplitConfig& c) { return c.packing == packing; });
  }
  // Packed rows hold several samples: more real positions per step than one sample per row.
  EXPECT_GT(together.runs[2].steps.front().positions, together.runs[0].steps.front().positions);
  EXPECT_EQ(together.runs[2].config.key(), "1\u00d74/fp32/pad-longest/pack-bfd");
  EXPECT_EQ(together.runs[0].config.key(), "1\u00d74/fp32/pad-longest");
  EXPECT_EQ(ab::run_label(together.runs[3], together.runs), "4\u00d71 pack-bfd");
  EXPECT_EQ(ab::run_label(together.runs[1], together.runs), "4\u00d71 unpacked");
  EXPECT_NE(together.recommendation.reason.find(" The packings (--packing) put other amounts of data in a step (a "
                                                "packed row holds several samples, so its step averages more of them: "
                                                "an update of its own), so the splits are compared per real token, as "
                                                "an epoch of the data takes them, and each ratio above is per token; "
                                                "the fastest split of each, by its mean step: "),
            std::string::npos)
      << together.recommendation.reason;
  EXPECT_EQ(ab::recorded_option(together.context.options, "packing"), std::optional<std::string>("none,bfd"));

  ab::SweepOptions more = o;
  more.workload.micro_batches = {1, 2, 4};
  const ab::SweepResult resumed = ab::run_sweep(more, nullptr, &together);
  ASSERT_EQ(resumed.runs.size(), 6u);
  EXPECT_EQ(resumed.runs[0].step_seconds.median, together.runs[0].step_seconds.median);  // copied
  EXPECT_EQ(resumed.runs[5].step_seconds.median, together.runs[3].step_seconds.median);
  for (const size_t i : {1, 4}) {
    EXPECT_EQ(resumed.runs[i].config.micro_batch, 2);
    EXPECT_EQ(resumed.runs[i].status, ab::RunStatus::kOk) << resumed.runs[i].error;
  }
  EXPECT_EQ(resumed.runs[4].config.packing, ab::Packing::kBfd);
}

// --group-by-length false,true: each split on the steps each order makes of the same samples (every
// step's positions those of the order's sweep alone), keyed and labelled by its order, compared per
// real token (the sentence names the orders); the plan counts the other order's host batches as the
// run holds them; --resume adds an order to a sweep of one, keeping the file's runs.
TEST(Sweep, GroupingsAreAGridDimension) {
  ab::SweepOptions o = tiny();
  o.workload.micro_batches = {2, 4};
  o.workload.data.lengths = ab::LengthMode::kVariable;
  o.workload.data.padding = ab::Padding::kLongest;
  o.workload.data.other_groupings = {true};
  const ab::SweepResult together = ab::run_sweep(o);
  ASSERT_EQ(together.runs.size(), 4u);
  for (const bool grouped : ab::grid_groupings(o.workload)) {
    ab::SweepOptions alone = o;
    alone.workload = ab::with_grouping(o.workload, grouped);
    expect_each_split_as_alone(together, alone, [&](const ab::SplitConfig& c) { return c.group_by_length == grouped; });
  }
  // Sorted by length, a grouped step's micro-batches hold samples of like length: less padding at 2×2.
  const auto computed = [](const ab::RunResult& run) {  // over the two distinct steps
    int64_t sum = 0;
    for (size_t i = 0; i < 2 && i < run.steps.size(); ++i) sum += run.steps[i].computed_positions - run.steps[i].positions;
    return sum;
  };
  EXPECT_LT(computed(together.runs[2]), computed(together.runs[0]));
  EXPECT_EQ(together.runs[2].config.key(), "2\u00d72/fp32/pad-longest/grouped");
  EXPECT_EQ(together.runs[0].config.key(), "2\u00d72/fp32/pad-longest");
  EXPECT_EQ(ab::run_label(together.runs[3], together.runs), "4\u00d71 grouped");
  EXPECT_EQ(ab::run_label(together.runs[1], together.runs), "4\u00d71 ungrouped");
  EXPECT_NE(together.recommendation.reason.find(" The orders (--group-by-length) put other samples in a step (a grouped "
                                                "step holds samples of like length, a random one any: each step an "
                                                "update of its own), so the splits are compared per real token"),
            std::string::npos)
      << together.recommendation.reason;
  EXPECT_EQ(ab::recorded_option(together.context.options, "group_by_length"), std::optional<std::string>("false,true"));
  // The plan command counts the host batches the sweep held: two steps of each order.
  EXPECT_EQ(ab::planned_token_batches(o.workload), 4);
  EXPECT_EQ(ab::plan_target(o.workload).options.token_batches, 4);

  ab::SweepOptions first = o;
  first.workload = ab::with_grouping(o.workload, false);
  const ab::SweepResult ungrouped = ab::run_sweep(first);
  const ab::SweepResult resumed = ab::run_sweep(o, nullptr, &ungrouped);
  ASSERT_EQ(resumed.runs.size(), 4u);
  EXPECT_EQ(resumed.runs[0].step_seconds.median, ungrouped.runs[0].step_seconds.median);  // copied
  EXPECT_EQ(resumed.runs[1].step_seconds.median, ungrouped.runs[1].step_seconds.median);
  for (const size_t i : {2, 3}) {
    EXPECT_TRUE(resumed.runs[i].config.group_by_length);
    EXPECT_EQ(resumed.runs[i].status, ab::RunStatus::kOk) << resumed.runs[i].error;
  }
}

// --resume with an optimizer added: the file's splits are copied, the new optimizer's measured; a
// file of another optimizer alone keeps its splits and the sweep measures this one's.
TEST(Sweep, ResumeAddsAnOptimizer) {
  const ab::SweepResult first = ab::run_sweep(tiny());
  ab::SweepOptions more = tiny();
  more.workload.grid.other_optimizers = {ab::OptimizerKind::kSgd};
  const ab::SweepResult resumed = ab::run_sweep(more, nullptr, &first);
  ASSERT_EQ(resumed.runs.size(), 6u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(resumed.runs[i].config.optimizer, ab::OptimizerKind::kAdamW);
    EXPECT_EQ(resumed.runs[i].step_seconds.median, first.runs[i].step_seconds.median);  // copied
  }
  for (size_t i = 3; i < 6; ++i) {
    EXPECT_EQ(resumed.runs[i].config.optimizer, ab::OptimizerKind::kSgd);
    EXPECT_EQ(resumed.runs[i].status, ab::RunStatus::kOk) << resumed.runs[i].error;
    EXPECT_EQ(resumed.runs[i].peak_breakdown.optimizer_state_bytes, 0);
  }
}
