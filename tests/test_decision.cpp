// Decisions on a deterministic fake clock (issue: decisions you can trust). A fake workload gives
// each split a true step time, multiplicative Gaussian noise and optionally a drift; run_rounds
// runs it with a fake elapsed time, exactly as the sweep runner runs real steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include <unistd.h>

#include "accumbench/decision.hpp"
#include "accumbench/error.hpp"
#include "accumbench/units.hpp"
#include "sweep/framework_overhead.hpp"

namespace accumbench {
namespace {

TEST(ConfidenceSequence, MatchesTheFormulaOnFourValues) {
  ConfidenceSequence cs(/*alpha=*/0.05, /*tightest_at=*/50);
  for (double x : {1.0, 2.0, 3.0, 4.0}) cs.add(x);
  EXPECT_EQ(cs.count(), 4);
  EXPECT_DOUBLE_EQ(cs.mean(), 2.5);
  const double l = -2 * std::log(0.05);
  const double rho2 = (l + std::log(l + 1)) / 50;
  const double z = 1.959963984540054;         // normal quantile at 0.975
  const double student = z + (z * z * z + z) / 12 + (5 * std::pow(z, 5) + 16 * z * z * z + 3 * z) / (96 * 9);
  const double sigma = std::sqrt(5.0 / 3.0) * student / z;  // sample sd of 1..4, widened (ν = 3)
  const double trho = 4 * rho2;
  const double expected = sigma * std::sqrt(2 * (trho + 1) / (4 * trho) * std::log(std::sqrt(trho + 1) / 0.05));
  EXPECT_NEAR(cs.half_width(), expected, 1e-12);
  EXPECT_NEAR(cs.low(), 2.5 - expected, 1e-12);
}

TEST(ConfidenceSequence, OneObservationHasNoInterval) {
  ConfidenceSequence cs(0.05, 50);
  cs.add(3.0);
  EXPECT_TRUE(std::isinf(cs.half_width()));
}

// Time-uniform coverage: over 400 seeded sequences of 1,000 observations with 15 % Gaussian noise,
// the interval at the level one of three intervals gets with two splits (5 % / 3) must miss the true
// mean at some time from kMinRoundsToDecide on in at most 2.5 % of them (nominal 1.7 %; the
// sequence is asymptotic, so this is measured, not guaranteed).
TEST(ConfidenceSequence, CoversTheMeanAtEveryTimeNearTheNominalLevel) {
  int ever_missed = 0;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> noise(1.0, 0.15);
    ConfidenceSequence cs(0.05 / 3, 50);
    bool missed = false;
    for (int t = 1; t <= 1000 && !missed; ++t) {
      cs.add(noise(rng));
      missed = t >= kMinRoundsToDecide && (cs.low() > 1.0 || cs.high() < 1.0);
    }
    ever_missed += missed ? 1 : 0;
  }
  EXPECT_LE(ever_missed, 10);  // 2.5 % of 400
}

// A workload with known step times, on a fake clock.
struct FakeWorkload {
  std::vector<double> true_seconds;
  double noise = 0.05;                                   // relative standard deviation per step
  double drift_after = std::numeric_limits<double>::infinity();  // fake seconds
  double drift_factor = 1.0;                             // every step is this much slower after it
  std::mt19937_64 rng;
  std::normal_distribution<double> normal{0.0, 1.0};
  double now = 0;

  FakeWorkload(std::vector<double> seconds, double relative_noise, uint64_t seed)
      : true_seconds(std::move(seconds)), noise(relative_noise), rng(seed) {}

  double step(int split) {
    const double factor = now >= drift_after ? drift_factor : 1.0;
    const double seconds = true_seconds[split] * factor * std::max(0.2, 1.0 + noise * normal(rng));
    now += seconds;
    return seconds;
  }
  // Two warm-up steps per split, as the runner's (their times are not evidence); returns the
  // number of splits.
  int warm_up() {
    for (size_t i = 0; i < true_seconds.size(); ++i) {
      step(static_cast<int>(i));
      step(static_cast<int>(i));
    }
    now = 0;  // the budget counts the timed rounds
    return static_cast<int>(true_seconds.size());
  }
};

Decision run_fake(FakeWorkload& w, double budget_seconds, int min_rounds = 5) {
  RoundEvidence evidence(w.warm_up(), 0.95);
  RoundOptions options;
  options.min_rounds = min_rounds;
  options.budget_seconds = budget_seconds;
  const std::vector<bool> candidate(w.true_seconds.size(), true);
  const RoundReport report = run_rounds(
      evidence, candidate, options, [&](int split, int64_t) { return w.step(split); }, [&] { return w.now; });
  std::vector<int> candidates;
  for (size_t i = 0; i < w.true_seconds.size(); ++i) candidates.push_back(static_cast<int>(i));
  DecisionOptions decision = options.decision;
  decision.budget_spent = report.budget_spent;
  return decide(evidence, candidates, decision);
}

struct Tally {
  int fastest_right = 0, fastest_wrong = 0, tie = 0, undecided = 0;
};

Tally tally(const std::vector<double>& seconds, double noise, double budget, double drift_after = INFINITY,
            double drift_factor = 1.0) {
  Tally t;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    FakeWorkload w(seconds, noise, seed);
    w.drift_after = drift_after;
    w.drift_factor = drift_factor;
    const Decision d = run_fake(w, budget);
    switch (d.kind) {
      case DecisionKind::kFastest:
        (d.fastest == 0 ? t.fastest_right : t.fastest_wrong) += 1;
        break;
      case DecisionKind::kTie:
        t.tie += 1;
        break;
      default:
        t.undecided += 1;
    }
  }
  return t;
}

// Split 0 takes 1.0 s, split 1 1.1 s (10 % slower), 5 % noise: 200 fake seconds of rounds.
TEST(Decisions, TenPercentApartWithFivePercentNoiseFindsTheFasterIn95Of100) {
  const Tally t = tally({1.0, 1.1}, 0.05, 200);
  EXPECT_GE(t.fastest_right, 95);
  EXPECT_EQ(t.fastest_wrong, 0);
  EXPECT_EQ(t.tie, 0);  // 10 % is beyond the 3 % tolerance
}

// 15 % noise and a budget of 20 rounds or so: never the slower one, never a tie; undecided is fine.
TEST(Decisions, FifteenPercentNoiseAndASmallBudgetNeverNamesTheSlower) {
  const Tally t = tally({1.0, 1.1}, 0.15, 40);
  EXPECT_EQ(t.fastest_wrong, 0);
  EXPECT_EQ(t.tie, 0);
  EXPECT_EQ(t.fastest_right + t.undecided, 100);
  EXPECT_GT(t.undecided, 0);  // the budget really is too small to decide every time
}

TEST(Decisions, EqualSplitsAreATieOrUndecidedNeverFaster) {
  for (double noise : {0.02, 0.05, 0.15}) {
    const Tally t = tally({1.0, 1.0, 1.0}, noise, 300);
    EXPECT_EQ(t.fastest_right + t.fastest_wrong, 0) << "noise " << noise;
    EXPECT_EQ(t.tie + t.undecided, 100) << "noise " << noise;
  }
}

// With 2 % noise equal splits are proven equivalent within ±3 % (a tie), not left undecided.
TEST(Decisions, EqualSplitsWithLowNoiseAreProvenATie) {
  const Tally t = tally({1.0, 1.0}, 0.02, 300);
  EXPECT_GE(t.tie, 95);
}

// The machine gets 20 % slower half-way through the budget. Interleaved rounds put the drift on
// both splits alike, so the decision stands.
TEST(Decisions, ADriftHalfWayDoesNotFlipTheDecision) {
  const Tally t = tally({1.0, 1.1}, 0.05, 200, /*drift_after=*/100, /*drift_factor=*/1.2);
  EXPECT_EQ(t.fastest_wrong, 0);
  EXPECT_GE(t.fastest_right, 95);
}

// The same drift on splits timed one after another (all of split 0, then all of split 1) lands on
// split 1 alone: compared through the two means it looks slower by 32 % instead of 10 %, and with
// the order reversed it looks faster. This is what interleaving prevents.
TEST(Decisions, TheSameDriftFlipsASequentialMeasurement) {
  int flipped = 0;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    FakeWorkload w({1.1, 1.0}, 0.05, seed);  // the slower split is measured first
    const int splits = w.warm_up();
    w.drift_after = 60;
    w.drift_factor = 1.2;
    RoundEvidence evidence(splits, 0.95);
    for (int split = 0; split < 2; ++split) {
      for (int i = 0; i < 60; ++i) evidence.add_unpaired(split, w.step(split));
    }
    const Decision d = decide(evidence, {0, 1}, DecisionOptions{});
    flipped += d.fastest == 0 ? 1 : 0;  // split 0 is truly slower
  }
  EXPECT_GE(flipped, 95);
}

// A split decided slower early stops being timed; if the machine then runs at half speed, the
// fastest's plain mean (timed through the slow period) exceeds the stopped split's (timed before
// it). The paired estimate keeps the fastest where it is.
TEST(Decisions, ADriftAfterTheSlowerStoppedDoesNotMakeItFastest) {
  int wrong = 0, exercised = 0;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    FakeWorkload w({1.0, 1.02, 1.3}, 0.03, seed);
    RoundEvidence evidence(w.warm_up(), 0.95);
    w.drift_after = 40;
    w.drift_factor = 2.0;
    RoundOptions options;
    options.budget_seconds = 400;
    run_rounds(evidence, {true, true, true}, options, [&](int s, int64_t) { return w.step(s); }, [&] { return w.now; });
    // Only where the rounds went on into the slow period with split 2 stopped before it.
    if (evidence.count(2) >= evidence.count(0) || evidence.mean_seconds(0).value <= evidence.mean_seconds(2).value) {
      continue;
    }
    ++exercised;
    wrong += decide(evidence, {0, 1, 2}, DecisionOptions{}).fastest == 2 ? 1 : 0;
  }
  EXPECT_GE(exercised, 80);
  EXPECT_EQ(wrong, 0);
}

TEST(Decisions, TheSlowerStopsEarlyAndTheFastestKeepsGoing) {
  FakeWorkload w({1.0, 2.0, 1.02}, 0.05, 7);
  RoundEvidence evidence(w.warm_up(), 0.95);
  RoundOptions options;
  options.budget_seconds = 400;
  std::vector<int64_t> steps(3, 0);
  run_rounds(evidence, {true, true, true}, options,
             [&](int split, int64_t) {
               ++steps[split];
               return w.step(split);
             },
             [&] { return w.now; });
  EXPECT_LT(steps[1], steps[0]);  // 2× slower: decided after the first rounds that may decide
  EXPECT_EQ(steps[1], kMinRoundsToDecide);
}

// should_stop (a signal) ends the rounds before the next one, even within --steps, and the report
// says so; the budget is not what stopped them.
TEST(Decisions, AStopEndsTheRoundsBeforeTheNext) {
  for (const int stop_after : {3, 30}) {
    FakeWorkload w({1.0, 1.01}, 0.05, 5);
    RoundEvidence evidence(w.warm_up(), 0.95);
    RoundOptions options;
    options.min_rounds = 50;
    options.budget_seconds = 1000;
    int64_t asked = 0;
    options.should_stop = [&] { return asked++ == stop_after; };
    const RoundReport report =
        run_rounds(evidence, {true, true}, options, [&](int s, int64_t) { return w.step(s); }, [&] { return w.now; });
    EXPECT_TRUE(report.interrupted);
    EXPECT_FALSE(report.budget_spent);
    EXPECT_EQ(report.rounds, stop_after);
    EXPECT_EQ(evidence.count(0), stop_after);
  }
}

TEST(Decisions, ZeroBudgetRunsExactlyTheMinimumRounds) {
  FakeWorkload w({1.0, 1.1}, 0.05, 3);
  RoundEvidence evidence(w.warm_up(), 0.95);
  RoundOptions options;
  options.min_rounds = 12;
  const RoundReport report =
      run_rounds(evidence, {true, true}, options, [&](int s, int64_t) { return w.step(s); }, [&] { return w.now; });
  EXPECT_EQ(report.rounds, 12);
  EXPECT_EQ(evidence.count(0), 12);
  EXPECT_EQ(evidence.count(1), 12);
  // Two splits too close to tell apart in 12 rounds: without a budget nothing was spent (the
  // undecided's words do not name it); a budget the first rounds spend is.
  FakeWorkload close({1.0, 1.001}, 0.05, 3);
  for (const double budget : {0.0, 1e-9}) {
    RoundEvidence fresh(close.warm_up(), 0.95);
    options.budget_seconds = budget;
    const RoundReport undecided = run_rounds(
        fresh, {true, true}, options, [&](int s, int64_t) { return close.step(s); }, [&] { return close.now; });
    EXPECT_EQ(undecided.rounds, 12);
    EXPECT_EQ(undecided.budget_spent, budget > 0) << budget;
  }
}

TEST(Decisions, AFailingSplitLeavesTheRounds) {
  FakeWorkload w({1.0, 1.1}, 0.05, 3);
  RoundEvidence evidence(w.warm_up(), 0.95);
  RoundOptions options;
  options.min_rounds = 6;
  const RoundReport report = run_rounds(
      evidence, {true, true}, options,
      [&](int s, int64_t round) { return s == 1 && round == 2 ? std::nan("") : w.step(s); }, [&] { return w.now; });
  ASSERT_EQ(report.failed.size(), 1u);
  EXPECT_EQ(report.failed[0], 1);
  EXPECT_EQ(evidence.count(1), 2);
  EXPECT_EQ(evidence.count(0), 6);
}

// Data parallel: split 1 failed on another rank in round 2 (this rank measured it); the agreed
// round says NaN, and the split leaves the rounds here too, so every rank runs the same steps.
TEST(Decisions, ASplitThatFailedOnAnotherRankLeavesTheRounds) {
  FakeWorkload w({1.0, 1.1}, 0.05, 3);
  RoundEvidence evidence(w.warm_up(), 0.95);
  RoundOptions options;
  options.min_rounds = 6;
  std::vector<int64_t> steps(2, 0);
  int64_t agreed_round = 0;
  const RoundReport report = run_rounds(
      evidence, {true, true}, options,
      [&](int s, int64_t) {
        ++steps[s];
        return w.step(s);
      },
      [&] { return w.now; },
      [&](std::vector<double>& seconds, double&) {
        if (agreed_round++ == 2) seconds[1] = std::nan("");
      });
  ASSERT_EQ(report.failed.size(), 1u);
  EXPECT_EQ(report.failed[0], 1);
  EXPECT_EQ(steps[1], 3);  // rounds 0, 1 and 2, not after
  EXPECT_EQ(evidence.count(1), 2);
  EXPECT_EQ(steps[0], 6);
}

// The rounds rotate their order: split k runs first in rounds k, k + n, ...
TEST(Decisions, RoundsRotateTheOrder) {
  RoundEvidence evidence(3, 0.95);
  RoundOptions options;
  options.min_rounds = 3;
  std::vector<int> order;
  run_rounds(evidence, {true, true, true}, options,
             [&](int s, int64_t) {
               order.push_back(s);
               return 0.5;
             },
             [] { return 0.0; });
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 1, 2, 0, 2, 0, 1}));
}

TEST(Decisions, OneCandidateIsTheOnlyOne) {
  RoundEvidence evidence(2, 0.95);
  evidence.add_round({0.5, 0.6});
  const Decision d = decide(evidence, {1}, DecisionOptions{});
  EXPECT_EQ(d.kind, DecisionKind::kOnly);
  EXPECT_EQ(d.fastest, 1);
}

TEST(Winsorizing, TheSlowestTwentiethCountsAsTheStepBelowItAndNoStepAsMoreThanThreeMedians) {
  EXPECT_DOUBLE_EQ(winsorizing_bound({1, 2, 3}), 2.0);          // below 40 steps: the slowest one
  EXPECT_DOUBLE_EQ(winsorizing_bound({1, 1, 1, 100}), 1.0);     // a stall counts as a step
  EXPECT_DOUBLE_EQ(winsorizing_bound({1, 1, 1, 1, 9, 9}), 3.0); // two stalls in six: 3 medians
  std::vector<double> forty;
  for (int i = 1; i <= 40; ++i) forty.push_back(i);
  EXPECT_DOUBLE_EQ(winsorizing_bound(forty), 38.0);             // the two slowest of 40 meet the 38th
  EXPECT_TRUE(std::isinf(winsorizing_bound({5})));
  EXPECT_TRUE(std::isinf(winsorizing_bound({1, 2})));  // two steps: their mean is their mean, not the faster
  EXPECT_TRUE(std::isinf(winsorizing_bound({})));
}

// A slow step every fifth one, within 3 medians, is a mode of the step, which training pays for: it
// counts in full. Split 0 takes 10 ms with every fifth step at 25 ms (mean 13 ms), split 1 a steady
// 12 ms: split 1 is faster (the median alone would say split 0).
TEST(Decisions, ASlowStepEveryFifthWithinThreeMediansCountsInFull) {
  RoundEvidence evidence(2, 0.95);
  for (int r = 0; r < 200; ++r) evidence.add_round({r % 5 == 4 ? 0.025 : 0.010, 0.012 + 1e-5 * (r % 3)});
  const Decision d = decide(evidence, {0, 1}, DecisionOptions{});
  EXPECT_EQ(d.fastest, 1);
  EXPECT_NEAR(evidence.mean_seconds(0).value, 0.013, 1e-12);
}

// Split 0 runs on after split 1 is set aside; a slow patch of the machine (rounds 8 to 11, every
// step 4× as long) lies in the rounds both ran in. Over those rounds the two are 0.5 % apart, and
// the pair's bounds come from those rounds alone: split 0's later steps must not cut its slow
// ones there while split 1 keeps its own.
TEST(Decisions, ASplitSetAsideIsComparedOnTheSharedRoundsAlone) {
  RoundEvidence evidence(2, 0.95);
  for (int r = 0; r < 200; ++r) {
    const double machine = r >= 8 && r < 12 ? 4.0 : 1.0;
    const double noise = 1.0 + 0.002 * ((r * 7) % 5 - 2);
    evidence.add_round({0.010 * machine * noise, r < 12 ? 0.01005 * machine * noise : std::nan("")});
  }
  EXPECT_EQ(evidence.paired_rounds(0, 1), 12);
  EXPECT_NEAR(evidence.ratio(1, 0).value, 1.005, 1e-9);
}

// Pairs compared on the rounds both ran in need not be transitive: split 0 ran only in rounds
// 0–9, where 2 was 5 % faster than 0 and 0 was 10 % faster than 1; in rounds 10–89 split 1 was far
// faster than 2. Paired, 0 < 1 < 2 < 0, each beyond doubt. Picking the fastest ends (at most one
// move per split), and with a split faster than the one it ends on the rounds are undecided: no
// split is named fastest of a cycle.
TEST(Decisions, ACycleOfPairedVerdictsIsUndecided) {
  RoundEvidence evidence(3, 0.95);
  for (int r = 0; r < 90; ++r) {
    const double noise = 1.0 + 0.001 * ((r * 7) % 5 - 2);
    if (r < 10) {
      evidence.add_round({1.0 * noise, 1.10 * noise, 0.95 * noise});
    } else {
      evidence.add_round({std::nan(""), 1.0 * noise, 1.3 * noise});
    }
  }
  ASSERT_LT(evidence.ratio(0, 1).high, 1.0);
  ASSERT_LT(evidence.ratio(1, 2).high, 1.0);
  ASSERT_LT(evidence.ratio(2, 0).high, 1.0);
  const Decision d = decide(evidence, {0, 1, 2}, DecisionOptions{});
  EXPECT_EQ(d.kind, DecisionKind::kUndecided);
  const bool some_split_is_faster = std::any_of(d.comparisons.begin(), d.comparisons.end(),
                                                [](const Comparison& c) { return c.verdict == Verdict::kFaster; });
  EXPECT_TRUE(some_split_is_faster);
}

// A machine slower in the timed rounds than in the warm-up (seen on this project's CI machine: 6
// of 12 steps of one split above 3× its warm-up median) must not cut one split's steps: the bound
// comes from the timed steps. Split 0 is 10 % slower than split 1 in every one of 12 rounds.
TEST(Decisions, TheSlowerInEveryRoundIsNeverFastest) {
  RoundEvidence evidence(2, 0.95);
  std::mt19937_64 rng(11);
  std::normal_distribution<double> noise(1.0, 0.02);
  for (int r = 0; r < 12; ++r) {
    const double shared = noise(rng);
    evidence.add_round({0.0165 * shared * noise(rng) * 1.0, 0.0150 * shared * noise(rng) * 1.0});
  }
  const Decision d = decide(evidence, {0, 1}, DecisionOptions{});
  EXPECT_EQ(d.fastest, 1);
  EXPECT_GT(evidence.ratio(0, 1).value, 1.05);
}

// An epoch of 16 steps of sizes 1 to 16, timed three times over (48 rounds): split 0 is faster on
// the short steps and slower on the long ones, 2.6 % slower over the epoch, with 1 % noise per step.
// Counted as 48 draws of one distribution, the step sizes' spread is taken for noise and the pair
// stays undecided; stratified by the step each round trained (its strata's means, the spread
// within them), it is decided slower. The stratified mean of a balanced design is the plain one.
TEST(Decisions, AnEpochsStepsAreStrataNotNoise) {
  RoundEvidence plain(2, 0.95), stratified(2, 0.95);
  std::mt19937_64 rng(5);
  std::normal_distribution<double> noise(1.0, 0.01);
  for (int r = 0; r < 48; ++r) {
    const int step = r % 16;
    const double size = step + 1;
    const double b = (0.01 * size + 0.01) * noise(rng);
    const double a = (0.01 * size + 0.01 + 0.001 * (size - 6)) * noise(rng);
    plain.add_round({a, b});
    stratified.add_round({a, b}, {}, {Stratum{step, 16}, Stratum{step, 16}});
  }
  EXPECT_NEAR(stratified.mean_seconds(0).value, plain.mean_seconds(0).value, 1e-12);
  EXPECT_NEAR(stratified.ratio(0, 1).value, plain.ratio(0, 1).value, 1e-12);
  EXPECT_NEAR(stratified.ratio(0, 1).value, 1.026, 0.005);
  const Decision undecided = decide(plain, {0, 1}, DecisionOptions{});
  ASSERT_EQ(undecided.comparisons.size(), 1u);
  EXPECT_EQ(undecided.comparisons[0].verdict, Verdict::kUndecided);
  const Decision decided = decide(stratified, {0, 1}, DecisionOptions{});
  EXPECT_EQ(decided.fastest, 1);
  ASSERT_EQ(decided.comparisons.size(), 1u);
  EXPECT_EQ(decided.comparisons[0].verdict, Verdict::kSlower);
  const Estimate narrow = stratified.ratio(0, 1), wide = plain.ratio(0, 1);
  EXPECT_LT(narrow.high - narrow.low, (wide.high - wide.low) / 3);
  // Fewer rounds than the epoch has steps: the steps seen are a sample of it, not its strata.
  RoundEvidence part(2, 0.95), part_plain(2, 0.95);
  for (int r = 0; r < 12; ++r) {
    const double a = 0.01 * (r + 1), b = 0.011 * (r + 1);
    part.add_round({a, b}, {}, {Stratum{r, 16}, Stratum{r, 16}});
    part_plain.add_round({a, b});
  }
  EXPECT_EQ(part.ratio(0, 1).low, part_plain.ratio(0, 1).low);
  EXPECT_EQ(part.ratio(0, 1).high, part_plain.ratio(0, 1).high);
}

// One stall of 30 step times in 30 rounds, in the faster split (5 % ahead, 2 % noise): capped at
// 3 medians it would add 2/30 of a step to its mean and turn the lead; the slowest twentieth's
// bound keeps it. Over 100 seeds the slower split is never named.
TEST(Decisions, OneStallInThirtyRoundsDoesNotTurnAFivePercentLead) {
  int right = 0;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> noise(1.0, 0.02);
    RoundEvidence evidence(2, 0.95);
    for (int r = 0; r < 30; ++r) evidence.add_round({r == 17 ? 30.0 : 1.0 * noise(rng), 1.05 * noise(rng)});
    const Decision d = decide(evidence, {0, 1}, DecisionOptions{});
    right += d.fastest == 0 ? 1 : 0;
  }
  EXPECT_EQ(right, 100);
}

// --framework-overhead: a split of 8 micro-steps measured at 0.100 s beats one of 1 at 0.110 s
// for the engine alone; with 5 ms of framework time per micro-step (0.140 against 0.115 s) the
// single micro-step is decided fastest, on the same measured rounds (±1 % seeded noise).
// half_width_after: the half-width now at the count so far; narrower after more observations of
// the same spread, about as 1/√t (×√(log t)); none below two observations.
TEST(ConfidenceSequence, HalfWidthAfterMoreObservationsNarrows) {
  ConfidenceSequence cs(0.05, 50);
  for (double x : {1.0, 1.2, 0.9, 1.1, 1.0, 0.8}) cs.add(x);
  EXPECT_DOUBLE_EQ(cs.half_width_after(6), cs.half_width());
  EXPECT_LT(cs.half_width_after(24), cs.half_width());
  EXPECT_GT(cs.half_width_after(24), cs.half_width() / 4);
  EXPECT_LT(cs.half_width_after(1000), cs.half_width_after(100));
  EXPECT_TRUE(std::isinf(cs.half_width_after(1)));
}

// The projection of the rounds a pair needs, made at the 10th round, against the rounds it took
// when the rounds went on: splits 4 % apart (the tie band ±3 %) under 5 % noise, 60 seeds. Each
// projection rests on 10 noisy rounds, so single ones miss; their median must be within a factor
// of 1.5 of the truth, and four of five within 3×.
TEST(Decisions, TheRoundsProjectedToDecideAreNearTheRoundsItTakes) {
  std::vector<double> ratios;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    FakeWorkload w({1.0, 1.04}, 0.05, seed);
    RoundEvidence evidence(w.warm_up(), 0.95);
    int64_t projected = 0, took = 0;
    for (int64_t round = 1; round <= 20000 && took == 0; ++round) {
      evidence.add_round({w.step(0), w.step(1)});
      if (round == kMinRoundsToDecide) {
        projected = evidence.rounds_to_decide(1, 0, 0.03, 1000000);
        ASSERT_GE(projected, kMinRoundsToDecide) << seed;
      }
      if (round >= kMinRoundsToDecide && decide(evidence, {0, 1}, DecisionOptions{}).kind != DecisionKind::kUndecided) {
        took = round;
      }
    }
    ASSERT_GT(took, 0) << seed;
    ratios.push_back(static_cast<double>(took) / static_cast<double>(projected));
  }
  std::sort(ratios.begin(), ratios.end());
  const double median = ratios[ratios.size() / 2];
  EXPECT_GT(median, 1 / 1.5);
  EXPECT_LT(median, 1.5);
  const auto within = std::count_if(ratios.begin(), ratios.end(), [](double r) { return r > 1.0 / 3 && r < 3; });
  EXPECT_GE(within, 48) << "median " << median;
}

// Nothing to project from below two rounds together; far apart with little noise, the minimum.
TEST(Decisions, TheRoundsProjectedToDecideNeedTwoRounds) {
  RoundEvidence evidence(2, 0.95);
  evidence.add_round({1.0, 1.5});
  EXPECT_EQ(evidence.rounds_to_decide(1, 0, 0.03, 1000), 0);
  for (double noise : {0.01, -0.01, 0.0, 0.02}) evidence.add_round({1.0 + noise, 1.5 - noise});
  EXPECT_EQ(evidence.rounds_to_decide(1, 0, 0.03, 1000), kMinRoundsToDecide);
  EXPECT_EQ(evidence.rounds_to_decide(1, 0, 0.03, 5), 5);  // the cap
}

TEST(Decisions, FrameworkOverheadPerMicroStepTurnsTheDecision) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(1.0, 0.01);
  std::vector<std::vector<double>> rounds;
  for (int r = 0; r < 20; ++r) rounds.push_back({0.100 * noise(rng), 0.110 * noise(rng)});
  RoundEvidence engine(2, 0.95);
  RoundEvidence framework(2, 0.95, {8 * 0.005, 1 * 0.005});
  for (const auto& round : rounds) {
    engine.add_round(round);
    framework.add_round(round);
  }
  const Decision alone = decide(engine, {0, 1}, DecisionOptions{});
  EXPECT_EQ(alone.kind, DecisionKind::kFastest);
  EXPECT_EQ(alone.fastest, 0);
  const Decision with = decide(framework, {0, 1}, DecisionOptions{});
  EXPECT_EQ(with.kind, DecisionKind::kFastest);
  EXPECT_EQ(with.fastest, 1);
  EXPECT_NEAR(framework.mean_seconds(0).value - engine.mean_seconds(0).value, 0.040, 1e-12);
  EXPECT_NEAR(framework.mean_seconds(1).value - engine.mean_seconds(1).value, 0.005, 1e-12);
}

// A resumed file whose contenders were timed again under another load: split 0 and split 1 were
// timed together in session 1 (split 1 at 1.3× split 0's time beyond doubt, then kept), split 0 and
// split 2 again in session 2 on a machine twice as busy. Split 0 keeps its session-1 steps beside
// its session-2 ones (StepSample::session), so split 1 is still compared with it on the rounds they
// shared, and stays slower; with split 0's session-1 steps dropped (as before schema 19), split 1
// was compared through the two means across sessions, and was put ahead of both.
TEST(Decisions, AResumedSplitKeepsItsEarlierRoundsToPairWith) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(1.0, 0.02);
  std::vector<RunResult> runs(3);
  for (int i = 0; i < 3; ++i) runs[i].config.micro_batch = i + 1;
  const auto add = [&](int i, int64_t session, int64_t round, double seconds) {
    StepSample step;
    step.step_seconds = seconds;
    step.positions = 1000;
    step.round = round;
    step.session = session;
    runs[i].steps.push_back(step);
  };
  for (int r = 0; r < 30; ++r) {
    add(0, 1, r, 0.100 * noise(rng));
    add(1, 1, r, 0.130 * noise(rng));
  }
  for (int r = 0; r < 30; ++r) {
    add(0, 2, r, 0.200 * noise(rng));  // twice as busy
    add(2, 2, r, 0.202 * noise(rng));
  }
  runs[0].session = runs[2].session = 2;
  runs[1].session = 1;
  const Decision d = decide(evidence_from_runs(runs, 0.95), {0, 1, 2}, DecisionOptions{});
  EXPECT_EQ(d.fastest, 0);
  const RoundEvidence evidence = evidence_from_runs(runs, 0.95);
  EXPECT_EQ(evidence.paired_rounds(1, 0), 30);
  EXPECT_EQ(evidence.paired_rounds(2, 0), 30);
  EXPECT_GT(evidence.ratio(1, 0).low, 1.2);
  for (const Comparison& c : d.comparisons) {
    if (c.index == 1) EXPECT_EQ(c.verdict, Verdict::kSlower);
  }
  // Split 0's session-1 steps dropped: split 1's 0.13 s against split 0's mean of 0.2 s.
  runs[0].steps.erase(runs[0].steps.begin(), runs[0].steps.begin() + 30);
  const RoundEvidence without = evidence_from_runs(runs, 0.95);
  EXPECT_EQ(without.paired_rounds(1, 0), 0);
  EXPECT_LT(without.ratio(1, 0).value, 0.7);
}

// Each sweep's steps are winsorized against that sweep's own: in a quiet sweep split 1 takes 1.1×
// split 0's time; resumed on a machine 20 times as busy, it takes 0.6× of it. One bound over both
// sweeps (3× a median the quiet steps set) cut every busy step of both to its split's bound, whose
// ratio is the quiet one's, and so read split 1 as slower beyond doubt; per sweep, the busy rounds
// count as timed, and split 1 is not slower.
TEST(Decisions, EachSweepsStepsAreWinsorizedOnTheirOwn) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> noise(1.0, 0.01);
  RoundEvidence evidence(2, 0.95);
  for (int r = 0; r < 30; ++r) evidence.add_round({0.010 * noise(rng), 0.011 * noise(rng)}, {}, {}, /*regime=*/1);
  for (int r = 0; r < 25; ++r) evidence.add_round({0.200 * noise(rng), 0.120 * noise(rng)}, {}, {}, /*regime=*/2);
  EXPECT_LT(evidence.ratio(1, 0).value, 1.0);
  EXPECT_LT(evidence.ratio(1, 0).low, 1.0);
  EXPECT_LT(evidence.mean_seconds(1).value, evidence.mean_seconds(0).value);
  // One regime for all: the busy steps cut at the quiet sweep's bounds.
  RoundEvidence one(2, 0.95);
  std::mt19937_64 again(11);
  std::normal_distribution<double> same(1.0, 0.01);
  for (int r = 0; r < 30; ++r) one.add_round({0.010 * same(again), 0.011 * same(again)});
  for (int r = 0; r < 25; ++r) one.add_round({0.200 * same(again), 0.120 * same(again)});
  EXPECT_GT(one.ratio(1, 0).low, 1.0);
}

// A --packing list: a packed step takes twice the time of an unpacked one but trains four times the
// tokens, so per real token (the scales) the packed split is the faster; the step times alone name
// the other. Within one packing the scales are the same in a round and the ratio is the step times'.
// From saved runs (evidence_from_runs) the scales come from each step's positions, only where the
// runs differ in packing.
TEST(Decisions, PackingsAreComparedPerRealToken) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(1.0, 0.01);
  RoundEvidence as_timed(3, 0.95), per_token(3, 0.95);
  std::vector<RunResult> runs(3);
  runs[0].config.packing = Packing::kBfd;
  runs[2].config.micro_batch = 2;
  for (int r = 0; r < 20; ++r) {
    const std::vector<double> seconds = {0.200 * noise(rng), 0.100 * noise(rng), 0.120 * noise(rng)};
    const std::vector<int64_t> positions = {4000, 1000, 1000};
    as_timed.add_round(seconds);
    per_token.add_round(seconds, {per_token_scale(positions[0]), per_token_scale(positions[1]), per_token_scale(positions[2])});
    for (int i = 0; i < 3; ++i) {
      StepSample step;
      step.step_seconds = seconds[i];
      step.positions = positions[i];
      step.round = r;
      runs[i].steps.push_back(step);
      runs[i].session = 1;
    }
  }
  EXPECT_EQ(decide(as_timed, {0, 1, 2}, DecisionOptions{}).fastest, 1);
  const Decision d = decide(per_token, {0, 1, 2}, DecisionOptions{});
  EXPECT_EQ(d.kind, DecisionKind::kFastest);
  EXPECT_EQ(d.fastest, 0);
  EXPECT_NEAR(per_token.ratio(1, 0).value, 2.0, 0.05);
  EXPECT_NEAR(per_token.ratio(2, 1).value, as_timed.ratio(2, 1).value, 1e-12);  // one packing: as timed
  EXPECT_NEAR(per_token.mean_seconds(0).value, as_timed.mean_seconds(0).value * kTokenUnit / 4000, 1e-9);
  EXPECT_THROW(per_token.add_round({0.1, 0.1, 0.1}, {1.0}), std::invalid_argument);

  EXPECT_TRUE(compared_per_token(runs));
  EXPECT_EQ(decide(evidence_from_runs(runs, 0.95), {0, 1, 2}, DecisionOptions{}).fastest, 0);
  EXPECT_EQ(decide(evidence_from_runs(runs, 0.95, 0, /*as_timed=*/true), {0, 1, 2}, DecisionOptions{}).fastest, 1);
  runs[0].config.packing = Packing::kNone;  // one packing: the step times decide
  EXPECT_FALSE(compared_per_token(runs));
  EXPECT_EQ(decide(evidence_from_runs(runs, 0.95), {0, 1, 2}, DecisionOptions{}).fastest, 1);
}

// Steps of different sizes (a grouped order's short and long steps) are weighed as an epoch takes
// them: a split's total time over its total tokens. Splits 0 and 1 run the same steps (100 and 1,000
// tokens in turn): split 1 is faster on the short steps (0.8 s against 1.0 s) and slower on the
// long ones (11.0 s against 10.0 s), 11.8 s against 11.0 s a pair of steps, so split 0 is the faster,
// by step times and per token alike. Weighing each step by its own tokens (1 / 100 against 1 / 1,000)
// made the short steps count ten times as much, and named split 1 (0.95×). Split 2, of other rows,
// trains 1,100 tokens in every step in 10.5 s: 0.955× split 0 per token.
TEST(Decisions, PerTokenWeighsTheStepsByTheirTokens) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> noise(1.0, 0.002);
  RoundEvidence per_token(3, 0.95);
  for (int r = 0; r < 40; ++r) {
    const bool long_step = r % 2 == 1;
    const std::vector<double> seconds = {(long_step ? 10.0 : 1.0) * noise(rng), (long_step ? 11.0 : 0.8) * noise(rng),
                                         5.25 * noise(rng)};
    const double own = per_token_scale(long_step ? 1000 : 100);
    per_token.add_round(seconds, {own, own, per_token_scale(550)});
  }
  const Decision d = decide(per_token, {0, 1, 2}, DecisionOptions{});
  EXPECT_EQ(d.fastest, 2);
  EXPECT_NEAR(per_token.ratio(1, 0).value, 11.8 / 11.0, 0.002);
  EXPECT_NEAR(per_token.ratio(2, 0).value, 10.5 / 11.0, 0.002);
  // Per real token: seconds per kTokenUnit tokens, the total over the total.
  EXPECT_NEAR(per_token.mean_seconds(0).value, 11.0 / 1100 * kTokenUnit, 0.002 * 11.0 / 1100 * kTokenUnit);
  const Decision two = decide(per_token, {0, 1}, DecisionOptions{});
  EXPECT_EQ(two.kind, DecisionKind::kFastest);
  EXPECT_EQ(two.fastest, 0);
}

// The winsorizing judges each step's seconds per token: one step of ten times the tokens taking
// ten times as long is no stall and counts in full; a step of the usual tokens taking ten times as
// long is one, and counts as the step below it. Per step (weigh_per_token(false)) the mean is then
// of seconds per step. (A run's own mean: FinalizeRun.ALongStepIsNoStall.)
TEST(Winsorizing, ALongStepIsNoStall) {
  for (const bool stall : {false, true}) {
    RoundEvidence evidence(1, 0.95);
    evidence.weigh_per_token(false);
    for (int r = 0; r < 20; ++r) {
      const bool odd = r == 7;
      evidence.add_round({odd ? 10.0 : 1.0}, {per_token_scale(odd && !stall ? 1000 : 100)});
    }
    EXPECT_NEAR(evidence.mean_seconds(0).value, stall ? 1.0 : 29.0 / 20, 1e-12) << stall;
  }
}

// A cache that is not what calibrate-framework writes is refused in one sentence naming what is
// wrong in the file's own terms (a field by its name, a directory as such), never nlohmann's words
// ("cannot use at() with array", "type must be string").
TEST(FrameworkCache, AMalformedCacheIsSaidInItsOwnTerms) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("accumbench-framework-cache-bad-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::filesystem::path file = dir / "framework-overhead.json";
  const auto error_of = [&](const std::string& text) {
    std::ofstream(file) << text;
    try {
      read_framework_cache(file.string());
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string entry = R"({"device_name": "H", "precision": "bf16", "framework": "hf-trl", "seconds_per_micro_step": 0.004)";
  const std::pair<std::string, std::string> cases[] = {
      {"[]", "(it holds a JSON array, not an object with \"entries\")"},
      {R"({"entries": "x"})", "(it holds a JSON object without a list of \"entries\")"},
      {"{}", "(it holds a JSON object without a list of \"entries\")"},
      {R"({"entries": [5]})", "(an entry is number, not an object)"},
      {R"({"entries": [)" + entry + R"(, "date": 5}]})", "(an entry's \"date\" is 5, not a string)"},
      {R"({"entries": [{"device_name": "H", "precision": "bf16", "framework": "x", "seconds_per_micro_step": "fast"}]})",
       "(an entry's \"seconds_per_micro_step\" is \"fast\", not a number)"},
      {R"({"entries": [{"device_name": "H", "precision": "bf16", "framework": "x"}]})",
       "(an entry has no \"seconds_per_micro_step\")"},
  };
  for (const auto& [text, said] : cases) {
    const std::string error = error_of(text);
    EXPECT_EQ(error, "the framework-overhead cache " + text::quoted(file.string()) +
                         " is not what calibrate-framework writes " + said +
                         "; delete it and run accumbench calibrate-framework again")
        << text;
  }
  EXPECT_NE(error_of("{").find("(parse error at line 1, column 2"), std::string::npos) << error_of("{");  // the position
  std::filesystem::remove(file);
  std::filesystem::create_directories(file);  // a directory where the file belongs
  try {
    read_framework_cache(file.string());
    ADD_FAILURE() << "a directory read as a cache";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("(it is a directory)"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

// The cache of calibrate-framework, keyed by model, weights dtype and job: an entry from before
// jobs were recorded counts as full fine-tuning; a job's own entry wins over a more faithful
// framework's entry for another job; the closest other job (the same adapters first) is used only
// when the job has none, and the source says whose time it is. Another model's or weights dtype's entry is never used, and the source
// says what the device has; an entry from before models were recorded is such an entry.
// An entry's conditions (threads, LoRA dropout, TRL's loss): a calibration under others does not
// replace it, a sweep reads its own conditions' entry first, and another's with its conditions named
// (helper-92: a --threads 2 calibration replaced the --threads 1 one, which a sweep then read as its own).
TEST(FrameworkCache, EntriesKeepTheirConditions) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("accumbench-framework-conditions-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ASSERT_EQ(setenv("ACCUMBENCH_CACHE_DIR", dir.c_str(), 1), 0);
  FrameworkCacheEntry one;
  one.device_name = "H";
  one.precision = "fp32";
  one.framework = "plain";
  one.model = "M";
  one.seq_len = 32;
  one.conditions = "1 thread";
  one.seconds_per_micro_step = 0.001;
  one.date = "2026-12-07";
  FrameworkCacheEntry two = one;
  two.conditions = "2 threads";
  two.seconds_per_micro_step = 0.003;
  write_framework_cache(framework_cache_path(), {one});
  write_framework_cache(framework_cache_path(), {two});
  ASSERT_EQ(read_framework_cache(framework_cache_path()).size(), 2u);
  const auto with = [](const std::string& conditions) {
    return FrameworkKey{Precision::kFp32, Precision::kFp32, "M", "full fine-tuning", 32, conditions};
  };
  EXPECT_DOUBLE_EQ(resolve_framework_overhead("auto", "H", with("1 thread")).seconds_per_micro_step, 0.001);
  EXPECT_DOUBLE_EQ(resolve_framework_overhead("auto", "H", with("2 threads")).seconds_per_micro_step, 0.003);
  EXPECT_EQ(resolve_framework_overhead("auto", "H", with("2 threads")).source, "calibrated 2026-12-07, plain, full fine-tuning");
  EXPECT_EQ(resolve_framework_overhead("auto", "H", with("4 threads")).source.find(
                ", not this sweep's 4 threads: calibrate-framework with the same options measures it"),
            resolve_framework_overhead("auto", "H", with("4 threads")).source.size() -
                std::string(", not this sweep's 4 threads: calibrate-framework with the same options measures it").size());
  std::filesystem::remove_all(dir);
  unsetenv("ACCUMBENCH_CACHE_DIR");
}

TEST(FrameworkCache, EachJobReadsItsOwnEntryAndFallsBackSayingSo) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("accumbench-framework-cache-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ASSERT_EQ(setenv("ACCUMBENCH_CACHE_DIR", dir.c_str(), 1), 0);
  std::ofstream(dir / "framework-overhead.json")
      << R"({"entries": [{"device_name": "H", "precision": "bf16", "framework": "hf-trl", "model": "M",)"
      << R"( "seconds_per_micro_step": 0.004, "date": "2026-11-30"}]})";
  EXPECT_EQ(read_framework_cache(framework_cache_path()).at(0).job, "full fine-tuning");
  EXPECT_EQ(read_framework_cache(framework_cache_path()).at(0).weights_dtype, "fp32");
  FrameworkCacheEntry lora;
  lora.device_name = "H";
  lora.precision = "bf16";
  lora.framework = "plain";
  lora.model = "M";
  lora.job = "LoRA, checkpointed";
  lora.seconds_per_micro_step = 0.009;
  lora.date = "2026-12-01";
  write_framework_cache(framework_cache_path(), {lora});
  // The same job on bf16 weights is another entry: it does not replace the fp32 weights' one.
  FrameworkCacheEntry bf16_weights = lora;
  bf16_weights.weights_dtype = "bf16";
  bf16_weights.seconds_per_micro_step = 0.002;
  write_framework_cache(framework_cache_path(), {bf16_weights});
  ASSERT_EQ(read_framework_cache(framework_cache_path()).size(), 3u);

  const auto key = [](Precision precision, const std::string& model, const std::string& job,
                      Precision weights = Precision::kFp32) { return FrameworkKey{precision, weights, model, job}; };
  const FrameworkOverhead full = resolve_framework_overhead("auto", "H", key(Precision::kBf16, "M", "full fine-tuning"));
  EXPECT_DOUBLE_EQ(full.seconds_per_micro_step, 0.004);
  EXPECT_EQ(full.source, "calibrated 2026-11-30, hf-trl, full fine-tuning");
  const FrameworkOverhead own = resolve_framework_overhead("auto", "H", key(Precision::kBf16, "M", "LoRA, checkpointed"));
  EXPECT_DOUBLE_EQ(own.seconds_per_micro_step, 0.009);  // plain's, of this job, before hf-trl's of another
  EXPECT_EQ(own.source, "calibrated 2026-12-01, plain, LoRA, checkpointed");
  EXPECT_DOUBLE_EQ(
      resolve_framework_overhead("auto", "H", key(Precision::kBf16, "M", "LoRA, checkpointed", Precision::kBf16)).seconds_per_micro_step,
      0.002);
  // LoRA without checkpointing: the closest job is LoRA's with it (the same adapters), not full
  // fine-tuning's, whose framework is more faithful.
  const FrameworkOverhead other = resolve_framework_overhead("auto", "H", key(Precision::kBf16, "M", "LoRA"));
  EXPECT_DOUBLE_EQ(other.seconds_per_micro_step, 0.009);
  EXPECT_EQ(other.source, "calibrated 2026-12-01, plain, on LoRA, checkpointed; none for LoRA");
  const FrameworkOverhead full_ckpt = resolve_framework_overhead("auto", "H", key(Precision::kBf16, "M", "full fine-tuning, checkpointed"));
  EXPECT_DOUBLE_EQ(full_ckpt.seconds_per_micro_step, 0.004);
  EXPECT_EQ(full_ckpt.source, "calibrated 2026-11-30, hf-trl, on full fine-tuning; none for full fine-tuning, checkpointed");
  // Another precision: what the device has, and the option that would calibrate this one.
  EXPECT_EQ(resolve_framework_overhead("auto", "H", key(Precision::kFp32, "M", "LoRA")).source,
            "none calibrated in fp32; this device's calibrations are in bf16: run accumbench calibrate-framework with "
            "--precision fp32");
  EXPECT_EQ(resolve_framework_overhead("auto", "another device", key(Precision::kFp32, "M", "LoRA")).source, "");
  // Another model: nothing added, and the source names what is calibrated.
  const FrameworkOverhead big = resolve_framework_overhead("auto", "H", key(Precision::kBf16, "N", "LoRA"));
  EXPECT_FALSE(big.added);
  EXPECT_EQ(big.seconds_per_micro_step, 0.0);
  EXPECT_EQ(big.source, "none calibrated for N; this device's bf16 calibrations are for M and 1 other: run accumbench "
                        "calibrate-framework with this model");
  EXPECT_EQ(resolve_framework_overhead("auto", "H", key(Precision::kBf16, "M", "LoRA", Precision::kFp16)).source,
            "none calibrated for M with fp16 weights; this device's bf16 calibrations of this model are with fp32, bf16 "
            "weights: run accumbench calibrate-framework with --weights-dtype fp16");
  EXPECT_EQ(framework_sentence(big.seconds_per_micro_step, big.source),
            "Engine only: no framework host time added (" + big.source + ").");

  // A sweep of two precisions adds one time to every split: with the cache's bf16 time and no fp32
  // one, none (fp32's host time is not bf16's), and the source says why.
  WorkloadOptions two;
  two.precisions = {Precision::kBf16, Precision::kFp32};
  ModelConfig m;
  m.name = "m";
  m.n_layers = 2;
  m.d_model = 64;
  m.d_ff = 256;
  m.vocab_size = 512;
  m.n_heads = m.n_kv_heads = 4;
  EXPECT_EQ(framework_model(m), "gpt2, 2 layers, d_model 64, 4 heads (4 kv), d_ff 256, vocab 512");
  FrameworkCacheEntry of_m = lora;
  of_m.seq_len = two.seq_len;
  of_m.model = framework_model(m);
  of_m.job = "full fine-tuning";
  of_m.seconds_per_micro_step = 0.004;
  write_framework_cache(framework_cache_path(), {of_m});
  const FrameworkOverhead mixed = sweep_framework_overhead("auto", "H", two, m);
  EXPECT_EQ(mixed.seconds_per_micro_step, 0.0);
  EXPECT_EQ(mixed.source, "the calibrated times differ across this sweep's jobs: bf16 4.00 ms, fp32 none; one time is "
                          "added to a whole sweep, so none is: sweep them apart, or give --framework-overhead MS");
  two.precisions = {Precision::kBf16};
  EXPECT_DOUBLE_EQ(sweep_framework_overhead("auto", "H", two, m).seconds_per_micro_step, 0.004);
  two.grid.other_weights_dtypes = {Precision::kBf16};  // bf16 weights have no entry of this model
  EXPECT_EQ(sweep_framework_overhead("auto", "H", two, m).source,
            "the calibrated times differ across this sweep's jobs: bf16 on fp32 weights 4.00 ms, bf16 on bf16 weights none; "
            "one time is added to a whole sweep, so none is: sweep them apart, or give --framework-overhead MS");
  EXPECT_THROW(resolve_framework_overhead("0x10", "H", key(Precision::kBf16, "M", "LoRA")), UserError);  // decimal only
  // Below the smallest normal double is still a value (stod threw on it).
  EXPECT_EQ(resolve_framework_overhead("5e-324", "H", key(Precision::kBf16, "M", "LoRA")).source, "--framework-overhead");
  // Under --knobs the checkpointed job falls back to the plain one's entry: the same time, so it is
  // added, and the source names each job's.
  two.grid.other_weights_dtypes.clear();
  two.grid.knobs = true;
  EXPECT_EQ(sweep_framework_overhead("auto", "H", two, m).source,
            "bf16 full fine-tuning: calibrated 2026-12-01, plain, full fine-tuning; bf16 full fine-tuning, checkpointed: "
            "calibrated 2026-12-01, plain, on full fine-tuning; none for full fine-tuning, checkpointed");
  // A calibration below zero counts as 0, saying so.
  of_m.seconds_per_micro_step = -0.004;
  write_framework_cache(framework_cache_path(), {of_m});
  two.grid.knobs = false;
  const FrameworkOverhead negative = sweep_framework_overhead("auto", "H", two, m);
  EXPECT_EQ(negative.seconds_per_micro_step, 0.0);
  EXPECT_EQ(negative.source, "calibrated 2026-12-01, plain, full fine-tuning; it measured -4.00 ms per micro-step, noise, "
                             "counted as 0");

  // A value no calibration writes (beyond a minute either way) is refused like a broken file, as
  // is the same on the command line; a little below zero is calibration noise, counted as 0.
  for (const char* value : {"1e308", "-75"}) {
    std::ofstream(dir / "framework-overhead.json")
        << R"({"entries": [{"device_name": "H", "precision": "bf16", "framework": "plain",)"
        << R"( "seconds_per_micro_step": )" << value << "}]}";
    // auto (the default) goes on with the engine's time and says why (helper-104: a broken cache
    // stopped every sweep); read_framework_cache itself refuses it (calibrate-framework's writes).
    const FrameworkOverhead o =
        resolve_framework_overhead("auto", "H", FrameworkKey{Precision::kBf16, Precision::kFp32, "M", "LoRA"});
    EXPECT_FALSE(o.added) << value;
    EXPECT_EQ(o.seconds_per_micro_step, 0.0) << value;
    EXPECT_NE(o.source.find("is outside -60 to 60 s); delete it and run accumbench calibrate-framework again; engine only "
                            "until then"),
              std::string::npos)
        << o.source;
    EXPECT_THROW(read_framework_cache(framework_cache_path()), UserError) << value;
  }
  // T: the closest calibration by ratio, named when it is not this T; a T=512 calibration sits
  // beside T=128's (another entry, not a replacement). An entry of unknown T (written before T was
  // a field, with no T in its shape) comes last.
  std::filesystem::remove(dir / "framework-overhead.json");
  FrameworkCacheEntry at = of_m;
  at.seconds_per_micro_step = 0.004;
  at.seq_len = 128;
  at.shape = "m, T=128, batch 8, micro-batches 1,2,4,8";
  write_framework_cache(framework_cache_path(), {at});
  at.seq_len = 512;
  at.seconds_per_micro_step = 0.003;
  at.shape = "m, T=512, batch 8, micro-batches 1,2,4,8";
  write_framework_cache(framework_cache_path(), {at});
  ASSERT_EQ(read_framework_cache(framework_cache_path()).size(), 2u);
  const auto at_t = [&](int64_t t) {
    return resolve_framework_overhead("auto", "H", FrameworkKey{Precision::kBf16, Precision::kFp32, at.model, at.job, t});
  };
  EXPECT_DOUBLE_EQ(at_t(512).seconds_per_micro_step, 0.003);
  EXPECT_EQ(at_t(512).source, "calibrated 2026-12-01, plain, full fine-tuning");
  EXPECT_DOUBLE_EQ(at_t(200).seconds_per_micro_step, 0.004);  // 200/128 = 1.56 is closer than 512/200 = 2.56
  EXPECT_DOUBLE_EQ(at_t(400).seconds_per_micro_step, 0.003);
  EXPECT_EQ(at_t(2048).source, "calibrated 2026-12-01, plain, full fine-tuning; at T=512, not this T=2048: "
                               "calibrate-framework with this model and --seq-len 2048 measures it");
  // Two Ts as far by ratio (32 and 128 for 64): the newer calibration, then the smaller T, in
  // either order of the file.
  for (const bool newer_first : {false, true}) {
    std::filesystem::remove(dir / "framework-overhead.json");
    FrameworkCacheEntry t32 = at, t128 = at;
    t32.seq_len = 32;
    t32.seconds_per_micro_step = 0.001;
    t32.date = "2026-12-01";
    t128.seq_len = 128;
    t128.seconds_per_micro_step = 0.002;
    t128.date = "2026-12-02";
    write_framework_cache(framework_cache_path(), newer_first ? std::vector{t128, t32} : std::vector{t32, t128});
    EXPECT_DOUBLE_EQ(at_t(64).seconds_per_micro_step, 0.002) << newer_first;
    t128.date = t32.date;  // the same date: the smaller T
    write_framework_cache(framework_cache_path(), {t128});
    EXPECT_DOUBLE_EQ(at_t(64).seconds_per_micro_step, 0.001) << newer_first;
  }
  // A seq_len that is no whole number of tokens is refused, naming the field (1e30 read as an
  // int64 wrapped to a negative number before).
  const std::vector<std::pair<std::string, std::string>> bad_t = {
      {"1e30", "1e+30"}, {"9223372036854775808", "9223372036854775808"}, {"-64", "-64"}, {"\"64\"", "\"64\""},
      {"32.5", "32.5"}};
  for (const auto& [value, shown] : bad_t) {
    std::ofstream(dir / "framework-overhead.json")
        << R"({"entries": [{"device_name": "H", "precision": "bf16", "framework": "plain", "model": "M",)"
        << R"( "seconds_per_micro_step": 0.004, "seq_len": )" << value << "}]}";
    const FrameworkOverhead o = resolve_framework_overhead("auto", "H", FrameworkKey{});
    EXPECT_FALSE(o.added) << value;
    EXPECT_NE(o.source.find("(seq_len " + shown + " is not a whole number of tokens)"), std::string::npos) << o.source;
    EXPECT_THROW(read_framework_cache(framework_cache_path()), UserError) << value;
  }
  // The T of an older entry is read from its shape.
  std::ofstream(dir / "framework-overhead.json")
      << R"({"entries": [{"device_name": "H", "precision": "bf16", "framework": "hf-trl", "model": "M",)"
      << R"( "seconds_per_micro_step": 0.004, "date": "2026-11-30", "shape": "gpt2-124m, T=256, batch 8"},)"
      << R"( {"device_name": "H", "precision": "bf16", "framework": "hf-trl", "model": "M",)"
      << R"( "seconds_per_micro_step": 0.005, "date": "2026-11-29"}]})";
  EXPECT_EQ(read_framework_cache(framework_cache_path()).at(0).seq_len, 256);
  const FrameworkKey at_1024{Precision::kBf16, Precision::kFp32, "M", "full fine-tuning", 1024};
  EXPECT_EQ(resolve_framework_overhead("auto", "H", at_1024).source,
            "calibrated 2026-11-30, hf-trl, full fine-tuning; at T=256, not this T=1024: calibrate-framework "
            "with this model and --seq-len 1024 measures it");
  std::ofstream(dir / "framework-overhead.json")
      << R"({"entries": [{"device_name": "H", "precision": "bf16", "framework": "hf-trl", "model": "M",)"
      << R"( "seconds_per_micro_step": 0.005, "date": "2026-11-29"}]})";
  EXPECT_EQ(resolve_framework_overhead("auto", "H", at_1024).source,
            "calibrated 2026-11-29, hf-trl, full fine-tuning; at a T not recorded, not this T=1024: "
            "calibrate-framework with this model and --seq-len 1024 measures it");

  const FrameworkKey any{Precision::kBf16, Precision::kFp32, "M", "LoRA"};
  EXPECT_THROW(resolve_framework_overhead("60001", "H", any), UserError);
  EXPECT_DOUBLE_EQ(resolve_framework_overhead("60000", "H", any).seconds_per_micro_step, 60.0);
  unsetenv("ACCUMBENCH_CACHE_DIR");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace accumbench
