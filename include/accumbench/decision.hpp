// Deciding which split is fastest from interleaved rounds, with intervals that stay valid however
// long the sweep keeps measuring (docs/ARCHITECTURE.md, "Decisions"). No LibTorch here: the
// sweep runner feeds real step times, the tests a fake clock.
//
//   RoundEvidence evidence(/*splits=*/3, /*confidence=*/0.95);
//   RoundOptions rounds;                    // --steps rounds at least, then until --time-budget
//   RoundReport r = run_rounds(evidence, candidate, rounds,
//                              [&](int split, int64_t round) { return time_one_step(split); },
//                              [&] { return seconds_since_start(); });
//   Decision d = decide(evidence, candidates, rounds.decision);
//
// Method. Each split's step times are winsorized from above (winsorizing_bound): its slowest
// twentieth of steps (at least its slowest one) counts as the step just below them, and no step as
// more than 3× the median, so neither a stall, nor a few in a long run, nor the stalls of a busy
// machine (more than one in twenty there) can swing a decision. The cost: a slow step that recurs
// regularly beyond 3× the median (every fifth one at 6×) is counted as 3× (README, Known limits).
// The bound comes from the steps themselves, not the warm-up (a bound of 3× the warm-up median cut
// every step of a split timed while the machine ran slower, and named the slower split fastest),
// and it moves as steps come: every mean and difference is recomputed from the stored steps. A
// pair is compared over the rounds both ran in with bounds from those rounds alone, so steps
// outside them (a split set aside early) cannot enter through the bound either. For each split's
// mean, and for each pair's mean paired difference over the rounds both ran in, an asymptotic
// confidence sequence (Waudby-Smith et al. 2024, below) holds at every round at once, so stopping when it has
// seen enough ("optional stopping") does not inflate the error as re-checking a fixed 95 % interval
// would. Its validity is asymptotic (a time-uniform central limit theorem): it needs finite
// variance, which the winsorizing guarantees, and no bound known in advance, so it narrows at the
// rate of the noise actually seen; the nonasymptotic betting sequences need a range fixed in
// advance and, with a range of several step times, hundreds of rounds for a 10 % difference. A
// bound estimated from the data makes the winsorized mean's own variance slightly larger than the
// winsorized steps' (Tukey & McLaughlin): the tests check the error rates with it on a fake clock.
// Splits timed in different sweeps (a --resume file's runs) share no round and are compared through
// their means, which a drift of the machine between the sweeps moves (README, Known limits).
// Bonferroni over all K means and, for each of the K(K−1)/2 pairs, its difference and its two
// means over the rounds the pair shared makes the whole family hold at once, also for
// the pair the data later names fastest; Holm's step-down would test more sharply but gives no
// simultaneous intervals, and the recommendation prints intervals. The tests
// (tests/test_decision.cpp) check the error rates on a fake clock.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "accumbench/result.hpp"

namespace accumbench {

// The winsorizing bound (see Method): the lower of kClipFactor × the median of a split's n steps
// and their (n − k)-th smallest, k = max(1, ⌊n / kTrimmedShare⌋); +inf below three steps (of two,
// clipping the slower to the faster would make their mean the faster).
inline constexpr double kClipFactor = 3.0;
inline constexpr int64_t kTrimmedShare = 20;
double winsorizing_bound(std::vector<double> seconds);

// Rounds after which the sequences are tightest (the mixture's tuning; any choice stays valid).
inline constexpr double kTightestAtRounds = 50;
// Fewer observations than this give no interval (undecided): a variance from a handful of steps
// is too rough for the asymptotic sequence to lean on.
inline constexpr int64_t kMinRoundsToDecide = 10;

// Asymptotic confidence sequence for a mean at level 1 − alpha, two-sided, uniform over time
// (Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas, "Time-uniform central limit theory and
// asymptotic confidence sequences", Annals of Statistics 52(6), 2024, Theorem 2.2).
class ConfidenceSequence {
 public:
  ConfidenceSequence(double alpha, double tightest_at);
  void add(double x);
  // Observations of the strata of an epoch, `strata` of them (its distinct steps, each timed in
  // several rounds), as (stratum, x): once every stratum holds one, the mean is the strata's (each
  // weighing alike, as the epoch does), and once some hold two or more (two degrees of freedom
  // within them) the spread is the one within them (a step's size is no noise), over as many
  // observations as there are; with a stratum unseen each is add()ed. Replaces what it held.
  void add_strata(const std::vector<std::pair<int64_t, double>>& observations, int64_t strata);
  int64_t count() const { return count_; }
  double mean() const;        // NaN before the first observation
  double half_width() const;  // +inf below two observations
  // The half-width after `t` observations, were their spread the one measured so far: how the
  // interval narrows as rounds go on. +inf below two observations (now, or t).
  double half_width_after(int64_t t) const;
  double low() const;
  double high() const;

 private:
  double alpha_;
  double rho_squared_;
  double z_;  // normal quantile at alpha / 2, for the small-sample widening
  int64_t count_ = 0;
  double mean_ = 0;
  double squares_ = 0;  // Σ (x − mean)², Welford; stratified: (count − 1) × count × the mean's variance
  int64_t strata_ = 0;  // add_strata's strata, whose means cost as many degrees of freedom
};

// Which of a run's distinct batches a step trained on (StepSample::data_step of data_steps): the
// stratum RoundEvidence weighs its rounds by. `of` 0: not known.
struct Stratum {
  int64_t index = -1;
  int64_t of = 0;
};

// The evidence of one sweep: every split's step times by round, with the confidence sequences of
// every mean and every pair over the steps winsorized at each split's current bound. Splits timed
// outside the rounds (session differs, or round −1) are compared unpaired, through their two means.
class RoundEvidence {
 public:
  // `confidence`: of the whole family. `added_seconds[i]` (empty: none) is added to every step of
  // split i after winsorizing: a Python framework's host time per step (--framework-overhead × the
  // split's accumulation steps), which the decisions then weigh as if it had been measured.
  // `family` (0: `splits`): how many splits the confidence is shared among (Bonferroni), the
  // splits with timed steps when some have none (a predicted out-of-memory split in a file).
  RoundEvidence(int splits, double confidence, std::vector<double> added_seconds = {}, int family = 0);

  // Step times of one interleaved round (NaN where a split did not run). `scales` (empty: 1 each):
  // per_token_scale of the positions each step trained. A step's time is winsorized on its
  // seconds per token, so that a step of many tokens (a grouped order's longest) is not clipped as
  // a stall. Where the splits are weighed per token (weigh_per_token: the splits of a --packing or
  // --group-by-length list train different amounts of data per step), every estimate below is one
  // of seconds per kTokenUnit tokens, a split's total time over its total tokens (its steps' times ×
  // one scale, kTokenUnit over their mean positions, over the rounds compared), as an epoch of the
  // data takes them; otherwise of seconds per step.
  // `strata` (empty: none known): the distinct batch each step trained on; where two splits' rounds
  // are strata of one epoch, their estimates are stratified (ConfidenceSequence::add_strata).
  // `regime`: the sweep that timed the round (a resumed file's rounds come from several, each on
  // the machine as it was then): a step is winsorized against the steps of its own regime only, so
  // that a busier sweep's steps are not all cut at a bound a quieter one's set.
  void add_round(const std::vector<double>& seconds, const std::vector<double>& scales = {},
                 const std::vector<Stratum>& strata = {}, int64_t regime = 0);
  // Whether the estimates are per real token (true, the default) or per step (scales then only
  // place each step's winsorizing bound).
  void weigh_per_token(bool per_token) { per_token_ = per_token; }
  // One step of split i outside the rounds (not paired with anything).
  void add_unpaired(int split, double seconds, double scale = 1.0, Stratum stratum = {});

  int splits() const { return static_cast<int>(steps_.size()); }
  int64_t rounds() const { return rounds_; }
  int64_t count(int split) const { return static_cast<int64_t>(steps_[split].size()); }
  int64_t paired_rounds(int a, int b) const;
  // Split i's winsorizing bound over its steps so far of `regime` (winsorizing_bound), on each
  // step's seconds × its scale.
  double bound(int split, int64_t regime = 0) const;
  // Winsorized mean step seconds of split i, with its interval.
  Estimate mean_seconds(int split) const;
  // mean(a) / mean(b), with its interval: over the rounds a and b shared, from their paired
  // differences; without a shared round, from the two means' intervals.
  Estimate ratio(int a, int b) const;
  // Seconds split a takes more than split b per step: the mean of t_a − t_b over the rounds both
  // ran in (without one, the difference of their means), winsorized as ratio's.
  double mean_difference(int a, int b) const;
  // The paired rounds of a beside b after which their verdict would no longer be undecided, were
  // the mean difference and the spread of their rounds so far to hold: the ratio's interval
  // narrowed until it leaves 1 out (faster or slower) or lies within 1 ± tolerance (equivalent),
  // whichever comes first; at least kMinRoundsToDecide, at most `cap`. 0: fewer than two rounds
  // together, nothing to project from.
  int64_t rounds_to_decide(int a, int b, double tolerance, int64_t cap) const;

 private:
  struct Step {
    int64_t round;  // −1: timed outside the rounds
    double seconds;
    double scale;   // 1, or per real token (add_round)
    Stratum stratum;
    int64_t regime = 0;  // the sweep that timed it (add_round)
  };
  // Capped where its seconds per token (× its own scale) reach bound(split), plus the added time,
  // times `scale` (the split's common scale).
  double winsorized(int split, const Step& step, double scale) const;
  // Over the rounds a < b both ran in: the difference t_a − t_b and the two step times, each
  // winsorized at its bound over those rounds, plus the added time.
  // first_rates, second_rates: the same steps each at its own per-token scale (seconds per token,
  // alike from short step to long): the precision of a mean whose steps differ in size (a grouped
  // order's), which the spread of their plain times would overstate.
  struct Shared {
    ConfidenceSequence difference, first, second, first_rates, second_rates;
  };
  Shared shared(int a, int b) const;

  double alpha_each_;  // the level of every sequence (Bonferroni over the family)
  std::vector<std::vector<Step>> steps_;
  std::vector<double> added_seconds_;
  int64_t rounds_ = 0;
  mutable std::vector<std::map<int64_t, double>> bounds_;  // cached per split and regime; cleared as steps come
  bool per_token_ = true;               // weigh_per_token
};

struct DecisionOptions {
  double tie_tolerance = 0.03;  // equivalent when the ratio's interval lies within 1 ± this
  double confidence = 0.95;     // of all intervals together
  bool budget_spent = false;    // the runner stopped on --time-budget (the words of an undecided)
  bool interrupted = false;     // a signal stopped the runner (the words of an undecided)
  bool stopped_by_error = false;  // with interrupted: an error did (a peer gone), not a signal
  // --framework-overhead: seconds a Python training loop adds to every micro-step, added to each
  // split's steps (× its accumulation steps) before deciding; `framework_source` says where the
  // number came from ("" with none: the engine alone, which the recommendation then says).
  double framework_seconds_per_micro_step = 0;
  std::string framework_source;
  // What the plan fits when memory stopped every split (fit_advice in plan_fit.hpp); without
  // it the recommendation points at `accumbench plan`.
  std::string memory_advice;
  // The seconds the latest sweep's rounds took by --time-budget's clock (RoundReport::seconds);
  // NaN where unknown. An undecided recommendation then says what budget in all would decide.
  double rounds_seconds = std::numeric_limits<double>::quiet_NaN();
  // Where the sweep is saved (--json, or the --resume file); "" for none. An undecided
  // recommendation then also says what a --resume of it, timing only the open splits, would take:
  // the rounds still wanted after the file's, but at least `min_rounds` (--steps) of each.
  std::string resume_file;
  int64_t min_rounds = 5;
  // The keys (SplitConfig::key) of the runs a --resume kept outside this sweep's lists: a resume
  // with the same lists would not time them again, so the words ask for the file's own lists.
  std::vector<std::string> outside_lists;
};

// The verdict on every candidate against the fastest: the candidate that no other is ahead of by
// the paired estimate of their ratio (Decision in result.hpp).
Decision decide(const RoundEvidence& evidence, const std::vector<int>& candidates, const DecisionOptions& options);

// Splits that train different amounts of data per step (a --packing list: a packed row holds
// several samples; a --group-by-length list: a grouped step holds other samples than a random one)
// are compared per real token: the steps' times (with any framework time) are multiplied by
// kTokenUnit / the mean real positions of the steps compared, so that the decision weighs seconds
// per million tokens, the total time over the total tokens, what an epoch of the data takes. Within
// one packing and order every split of a round trains the same samples, so the paired ratios of
// its splits are those of their step times.
inline constexpr double kTokenUnit = 1e6;
inline double per_token_scale(int64_t positions) {
  return positions > 0 ? kTokenUnit / static_cast<double>(positions) : 1.0;
}
// One scale for all of a split's steps, given each step's per_token_scale: kTokenUnit over their
// mean positions (1 / the mean of 1 / scale; 1 for none), so that a mean of scaled steps is the
// steps' total time over their total tokens, as an epoch takes them. Each step by its own positions
// would weigh a short step's seconds per token as much as a long one's, and two splits on the same
// steps (one packing and order) could then rank otherwise than by their time.
double common_scale(const std::vector<double>& scales);
// Whether `runs` differ in their rows (packing or grouping: SplitConfig::rows), and are so compared
// per real token.
bool compared_per_token(const std::vector<RunResult>& runs);
// `seconds` of a step of `run` (its median or mean), per real token where `per_token`: what the
// reports compare of splits that differ in packing.
inline double compared_seconds(double seconds, const RunResult& run, bool per_token) {
  return per_token && run.tokens_per_step > 0 ? seconds / run.tokens_per_step : seconds;
}

// What --framework-overhead adds to each step of `run`: the time per micro-step × its micro-steps.
inline double framework_seconds_per_step(const RunResult& run, double framework_seconds_per_micro_step) {
  return framework_seconds_per_micro_step * static_cast<double>(run.config.accum_steps);
}

// The evidence held by finished runs: their timed steps by (session, round), each sweep's runs
// paired within its own rounds (a resumed file holds several sweeps'); steps with round −1 (timed
// alone) are unpaired. Every run is winsorized at its bound over all its steps (the clip_seconds
// older files wrote from the warm-up is not used). `framework_seconds_per_micro_step` is added to
// every step (framework_seconds_per_step).
// Runs that differ in packing are compared per real token (compared_per_token), unless `as_timed`:
// the step times themselves (what a difference in seconds per step is said from).
RoundEvidence evidence_from_runs(const std::vector<RunResult>& runs, double confidence,
                                 double framework_seconds_per_micro_step = 0, bool as_timed = false);

struct RoundOptions {
  int min_rounds = 5;          // --steps: every split, every round, before any stops
  double budget_seconds = 0;   // --time-budget: more rounds for the undecided until this; 0: none
  int64_t max_rounds = 1000000;
  DecisionOptions decision;
  // The per_token_scale of split's step in a round (its positions), asked right after the round
  // measured it (RoundEvidence::add_round's scales: they place each step's winsorizing bound, and
  // weigh it where the evidence is per token); unset: 1.
  std::function<double(int split)> step_scale;
  // The distinct batch split's step of the round trained on (unset: none known).
  std::function<Stratum(int split)> step_stratum;
  // Asked before every round: true ends the rounds there (a signal, interrupt.hpp). With data
  // parallel it must answer alike on every rank (the runner agrees on it over the group).
  std::function<bool()> should_stop;
};

struct RoundReport {
  int64_t rounds = 0;
  double seconds = 0;          // the rounds' clock (elapsed) when they ended: what --time-budget counts
  bool budget_spent = false;   // stopped with contenders still undecided
  bool interrupted = false;    // should_stop ended the rounds
  std::vector<int> failed;     // splits whose step failed (measure returned NaN)
};

// Runs rounds: in each, one step of every live split, the order rotating by one split per round.
// Every split is live for min_rounds rounds; after that only the fastest candidate and the
// candidates not yet decided against it. `measure(split, round)` times one step (NaN: the split
// failed and leaves); `elapsed()` is the seconds since the rounds began. `agree(seconds, elapsed)`
// may replace a round's times and the clock with agreed ones (data parallel: rank 0's), so every
// rank makes the same decisions; a live split whose agreed time is NaN (it failed on another
// rank) leaves the rounds as if it had failed here. `evidence` receives every round.
using MeasureStep = std::function<double(int split, int64_t round)>;
using ElapsedSeconds = std::function<double()>;
using AgreeOnRound = std::function<void(std::vector<double>& seconds, double& elapsed)>;
using AfterRound = std::function<void(int64_t round, const std::vector<int>& live)>;
RoundReport run_rounds(RoundEvidence& evidence, const std::vector<bool>& candidate, const RoundOptions& options,
                       const MeasureStep& measure, const ElapsedSeconds& elapsed, const AgreeOnRound& agree = nullptr,
                       const AfterRound& after_round = nullptr);

}  // namespace accumbench
