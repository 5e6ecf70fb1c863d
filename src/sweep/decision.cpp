// Interleaved rounds and anytime-valid decisions (decision.hpp).
#include "accumbench/decision.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <utility>

#include "accumbench/statistics.hpp"

namespace accumbench {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The standard normal quantile z with P(Z > z) = upper, by bisection on erfc (exact to 1e-12;
// computed once per sequence).
double normal_upper_quantile(double upper) {
  double lo = 0, hi = 40;
  for (int i = 0; i < 200 && hi - lo > 1e-13; ++i) {
    const double mid = (lo + hi) / 2;
    (0.5 * std::erfc(mid / std::sqrt(2.0)) > upper ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// Student's t quantile from the normal one, Cornish-Fisher to 1/ν² (Abramowitz & Stegun 26.7.5).
double student_quantile(double z, double nu) {
  const double z3 = z * z * z, z5 = z3 * z * z;
  return z + (z3 + z) / (4 * nu) + (5 * z5 + 16 * z3 + 3 * z) / (96 * nu * nu);
}

}  // namespace

ConfidenceSequence::ConfidenceSequence(double alpha, double tightest_at) : alpha_(alpha) {
  if (!(alpha > 0 && alpha < 1) || !(tightest_at >= 1)) {
    throw std::invalid_argument("ConfidenceSequence: alpha must be in (0, 1) and tightest_at >= 1");
  }
  // Waudby-Smith et al. (2024), eq. (2.11): the mixture width ρ that makes the sequence tightest
  // after `tightest_at` observations.
  const double l = -2.0 * std::log(alpha_);
  rho_squared_ = (l + std::log(l + 1.0)) / tightest_at;
  z_ = normal_upper_quantile(alpha_ / 2);
}

void ConfidenceSequence::add(double x) {
  // Welford's update: the variance of step times that agree in four digits survives.
  ++count_;
  const double delta = x - mean_;
  mean_ += delta / static_cast<double>(count_);
  squares_ += delta * (x - mean_);
}

void ConfidenceSequence::add_strata(const std::vector<std::pair<int64_t, double>>& observations, int64_t strata) {
  count_ = 0, mean_ = 0, squares_ = 0, strata_ = 0;
  std::map<int64_t, std::pair<int64_t, double>> sums;  // per stratum: count, sum
  bool known = strata > 1;
  for (const auto& [stratum, x] : observations) {
    known = known && stratum >= 0 && stratum < strata;
    auto& [n, sum] = sums[stratum];
    ++n, sum += x;
  }
  const auto n = static_cast<int64_t>(observations.size());
  // Some stratum unseen: the plain sequence (the steps seen stand for the epoch as a sample of it).
  if (!known || static_cast<int64_t>(sums.size()) != strata) {
    for (const auto& observation : observations) add(observation.second);
    return;
  }
  // Every stratum seen, but no two degrees of freedom within them: the epoch's mean (each stratum
  // alike, as winsorized_mean's), with the plain spread, which holds the strata's differences too.
  if (n - strata < 2) {
    for (const auto& observation : observations) add(observation.second);
    double mean = 0;
    for (const auto& [stratum, count_sum] : sums) mean += count_sum.second / static_cast<double>(count_sum.first);
    mean_ = mean / static_cast<double>(strata);
    return;
  }
  double within = 0, inverse_counts = 0, mean = 0;
  for (const auto& [stratum, x] : observations) {
    const auto& [count, sum] = sums.at(stratum);
    within += (x - sum / static_cast<double>(count)) * (x - sum / static_cast<double>(count));
  }
  for (const auto& [stratum, count_sum] : sums) {
    mean += count_sum.second / static_cast<double>(count_sum.first);
    inverse_counts += 1.0 / static_cast<double>(count_sum.first);
  }
  const double s = static_cast<double>(strata);
  // The strata's mean has variance σ² / S² · Σ 1/n_s (σ² pooled within them): as the variance of
  // n observations, n times that.
  const double variance_of_mean = within / static_cast<double>(n - strata) * inverse_counts / (s * s);
  count_ = n;
  mean_ = mean / s;
  squares_ = variance_of_mean * static_cast<double>(n) * static_cast<double>(n - 1);
  strata_ = strata;
}

double ConfidenceSequence::mean() const { return count_ > 0 ? mean_ : kNaN; }

double ConfidenceSequence::half_width() const { return half_width_after(count_); }

double ConfidenceSequence::half_width_after(int64_t observations) const {
  if (count_ < 2 || observations < 2) return kInf;
  const double t = static_cast<double>(observations);
  // The sequence is asymptotic: with σ estimated from a few steps it covers less than it says
  // (simulated: 8.8 % misses at a nominal 5 % from 10 observations on). Widening σ̂ by Student's
  // t over the normal quantile, a factor that tends to 1, brings that near the nominal level for
  // symmetric noise without changing the limit.
  // Degrees of freedom: one per observation, less one per mean estimated (the strata's, or one).
  const double freedom = std::max(1.0, t - static_cast<double>(std::max<int64_t>(1, strata_)));
  const double sigma =
      std::sqrt(squares_ / (static_cast<double>(count_) - 1.0)) * student_quantile(z_, freedom) / z_;
  // Waudby-Smith et al. (2024), Theorem 2.2 (two-sided asymptotic confidence sequence):
  // σ̂_t · sqrt( 2(tρ² + 1) / (t²ρ²) · log( sqrt(tρ² + 1) / α ) ).
  const double trho = t * rho_squared_;
  return sigma * std::sqrt(2.0 * (trho + 1.0) / (t * trho) * std::log(std::sqrt(trho + 1.0) / alpha_));
}

double ConfidenceSequence::low() const { return mean() - half_width(); }
double ConfidenceSequence::high() const { return mean() + half_width(); }

// ---------------------------------------------------------------------------------------------

double winsorizing_bound(std::vector<double> seconds) {
  const auto n = static_cast<int64_t>(seconds.size());
  // Two steps tell no stall from the other step: clipping the slower to the faster would make
  // their "mean" the faster one.
  if (n < 3) return kInf;
  const int64_t k = std::max<int64_t>(1, n / kTrimmedShare);
  std::nth_element(seconds.begin(), seconds.begin() + (n - k - 1), seconds.end());
  const double below_the_slowest = seconds[static_cast<size_t>(n - k - 1)];
  return std::min(kClipFactor * median(std::move(seconds)), below_the_slowest);
}

RoundEvidence::RoundEvidence(int splits, double confidence, std::vector<double> added_seconds, int family)
    : steps_(static_cast<size_t>(std::max(0, splits))),
      added_seconds_(std::move(added_seconds)) {
  if (!(confidence > 0 && confidence < 1)) throw std::invalid_argument("RoundEvidence: confidence must be in (0, 1)");
  if (!added_seconds_.empty() && added_seconds_.size() != steps_.size()) {
    throw std::invalid_argument("RoundEvidence: one added time per split");
  }
  const double k = static_cast<double>(family > 0 ? static_cast<size_t>(family) : std::max<size_t>(1, steps_.size()));
  // Bonferroni over every mean and, per pair, its difference and its two means over the rounds
  // they shared: the family the decisions can draw from.
  alpha_each_ = (1.0 - confidence) / (k + 3 * k * (k - 1) / 2);
  bounds_.assign(steps_.size(), {});
}

double RoundEvidence::bound(int split, int64_t regime) const {
  const auto cached = bounds_[split].find(regime);
  if (cached != bounds_[split].end()) return cached->second;
  std::vector<double> seconds;
  seconds.reserve(steps_[split].size());
  for (const Step& s : steps_[split]) {
    if (s.regime == regime) seconds.push_back(s.seconds * s.scale);
  }
  return bounds_[split][regime] = winsorizing_bound(std::move(seconds));
}

double RoundEvidence::winsorized(int split, const Step& step, double scale) const {
  return (std::min(step.seconds, bound(split, step.regime) / step.scale) +
          (added_seconds_.empty() ? 0.0 : added_seconds_[split])) *
         scale;
}

double common_scale(const std::vector<double>& scales) {
  double inverse = 0;
  for (const double scale : scales) inverse += 1.0 / scale;
  return !scales.empty() && inverse > 0 ? static_cast<double>(scales.size()) / inverse : 1.0;
}

void RoundEvidence::add_round(const std::vector<double>& seconds, const std::vector<double>& scales,
                              const std::vector<Stratum>& strata, int64_t regime) {
  const int n = splits();
  if (static_cast<int>(seconds.size()) != n) throw std::invalid_argument("RoundEvidence::add_round: one time per split");
  if (!scales.empty() && static_cast<int>(scales.size()) != n) {
    throw std::invalid_argument("RoundEvidence::add_round: one scale per split");
  }
  if (!strata.empty() && static_cast<int>(strata.size()) != n) {
    throw std::invalid_argument("RoundEvidence::add_round: one stratum per split");
  }
  for (int a = 0; a < n; ++a) {
    if (std::isnan(seconds[a])) continue;
    steps_[a].push_back(
        Step{rounds_, seconds[a], scales.empty() ? 1.0 : scales[a], strata.empty() ? Stratum{} : strata[a], regime});
    bounds_[a].clear();
  }
  ++rounds_;
}

void RoundEvidence::add_unpaired(int split, double seconds, double scale, Stratum stratum) {
  steps_[split].push_back(Step{-1, seconds, scale, stratum});
  bounds_[split].clear();
}

RoundEvidence::Shared RoundEvidence::shared(int a, int b) const {
  // Both lists are in the order the rounds were added; steps outside the rounds (−1) pair with none.
  const std::vector<Step>& x = steps_[a];
  const std::vector<Step>& y = steps_[b];
  std::vector<double> xs, ys, x_scales, y_scales;
  std::vector<int64_t> regimes;  // the sweep that timed each shared round
  std::vector<int64_t> keys;  // the stratum of each shared round, where both steps trained one batch of one epoch
  int64_t strata = -1;        // the epoch's distinct steps, from the first shared round on; 0: not one epoch's
  size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    if (x[i].round < 0 || (y[j].round >= 0 && x[i].round < y[j].round)) {
      ++i;
    } else if (y[j].round < 0 || y[j].round < x[i].round) {
      ++j;
    } else {
      x_scales.push_back(x[i].scale);
      y_scales.push_back(y[j].scale);
      if (strata < 0) strata = x[i].stratum.of;
      if (x[i].stratum.of != strata || y[j].stratum.of != strata || x[i].stratum.index != y[j].stratum.index) strata = 0;
      keys.push_back(x[i].stratum.index);
      regimes.push_back(x[i].regime);
      xs.push_back(x[i++].seconds);
      ys.push_back(y[j++].seconds);
    }
  }
  // Bounds from the shared rounds alone: a split timed on after the other was set aside must not
  // have its shared steps cut at a bound its later steps set. The bound is on each step's seconds
  // per token (as bound()'s), so that a step longer in tokens is not cut as slow; and each
  // regime's (sweep's) rounds have their own, as bound()'s.
  std::map<int64_t, std::pair<double, double>> bounds;  // regime -> (a's, b's)
  for (const int64_t regime : regimes) {
    if (bounds.count(regime) != 0) continue;
    std::vector<double> x_rates, y_rates;
    for (size_t r = 0; r < xs.size(); ++r) {
      if (regimes[r] != regime) continue;
      x_rates.push_back(xs[r] * x_scales[r]);
      y_rates.push_back(ys[r] * y_scales[r]);
    }
    bounds[regime] = {winsorizing_bound(std::move(x_rates)), winsorizing_bound(std::move(y_rates))};
  }
  const double added_a = added_seconds_.empty() ? 0.0 : added_seconds_[a];
  const double added_b = added_seconds_.empty() ? 0.0 : added_seconds_[b];
  // Per real token, each side's tokens over the shared rounds (common_scale).
  const double scale_a = per_token_ ? common_scale(x_scales) : 1.0;
  const double scale_b = per_token_ ? common_scale(y_scales) : 1.0;
  const ConfidenceSequence fresh(alpha_each_, kTightestAtRounds);
  Shared shared{fresh, fresh, fresh, fresh, fresh};
  // Each sequence over the rounds' strata (add_strata: plain where they are not one epoch's).
  std::vector<std::pair<int64_t, double>> difference, first, second, first_rates, second_rates;
  for (size_t r = 0; r < xs.size(); ++r) {
    const auto [bound_a, bound_b] = bounds[regimes[r]];
    const double clipped_a = std::min(xs[r], bound_a / x_scales[r]) + added_a;
    const double clipped_b = std::min(ys[r], bound_b / y_scales[r]) + added_b;
    difference.emplace_back(keys[r], clipped_a * scale_a - clipped_b * scale_b);
    first.emplace_back(keys[r], clipped_a * scale_a);
    second.emplace_back(keys[r], clipped_b * scale_b);
    first_rates.emplace_back(keys[r], clipped_a * x_scales[r]);
    second_rates.emplace_back(keys[r], clipped_b * y_scales[r]);
  }
  shared.difference.add_strata(difference, strata);
  shared.first.add_strata(first, strata);
  shared.second.add_strata(second, strata);
  shared.first_rates.add_strata(first_rates, strata);
  shared.second_rates.add_strata(second_rates, strata);
  return shared;
}

int64_t RoundEvidence::paired_rounds(int a, int b) const {
  if (a == b) return count(a);
  return shared(std::min(a, b), std::max(a, b)).difference.count();
}

namespace {

// A mean's estimate from its sequence; below kMinRoundsToDecide observations a variance estimate
// is too rough to lean on, and the interval is [0, ∞).
Estimate estimate_of(const ConfidenceSequence& cs) {
  if (cs.count() == 0) return Estimate{};
  if (cs.count() < kMinRoundsToDecide) return Estimate{cs.mean(), 0.0, kInf};
  return Estimate{cs.mean(), std::max(0.0, cs.low()), cs.high()};
}

// mean_a / mean_b from intervals of the two means: [low_a / high_b, high_a / low_b].
Estimate ratio_of_means(const Estimate& ma, const Estimate& mb) {
  Estimate r;
  if (std::isnan(ma.value) || std::isnan(mb.value) || !(mb.value > 0)) return r;
  r.value = ma.value / mb.value;
  r.low = mb.high > 0 ? ma.low / mb.high : 0.0;
  r.high = mb.low > 0 ? ma.high / mb.low : kInf;
  return r;
}

}  // namespace

Estimate RoundEvidence::mean_seconds(int split) const {
  ConfidenceSequence mean(alpha_each_, kTightestAtRounds);
  std::vector<double> scales;
  scales.reserve(steps_[split].size());
  for (const Step& s : steps_[split]) scales.push_back(s.scale);
  const double scale = per_token_ ? common_scale(scales) : 1.0;
  std::vector<std::pair<int64_t, double>> observations;
  int64_t strata = steps_[split].empty() ? 0 : steps_[split].front().stratum.of;
  for (const Step& s : steps_[split]) {
    if (s.stratum.of != strata) strata = 0;
    observations.emplace_back(s.stratum.index, winsorized(split, s, scale));
  }
  mean.add_strata(observations, strata);
  return estimate_of(mean);
}

Estimate RoundEvidence::ratio(int a, int b) const {
  // Over the rounds both ran in only (a drift before or after them cannot enter): mean_a / mean_b
  // = 1 + δ / mean_b, δ = mean of t_a − t_b, mean_b over the same rounds.
  const Shared p = shared(std::min(a, b), std::max(a, b));
  const int64_t paired = p.difference.count();
  // Timed in no common round: through the two means, each over its own steps.
  if (paired == 0) return ratio_of_means(mean_seconds(a), mean_seconds(b));
  const ConfidenceSequence& b_shared = a < b ? p.second : p.first;
  const ConfidenceSequence& a_shared = a < b ? p.first : p.second;
  Estimate r;
  r.value = a_shared.mean() / b_shared.mean();
  if (paired < kMinRoundsToDecide || !(b_shared.mean() > 0)) {
    r.low = 0.0;
    r.high = kInf;
    return r;
  }
  const double delta_low = a < b ? p.difference.low() : -p.difference.high();
  const double delta_high = a < b ? p.difference.high() : -p.difference.low();
  // mean_b's interval: its per-token rate's, relative, at mean_b (equal for steps of one size; for
  // steps of many sizes the rates' spread is the noise, the plain times' their sizes too).
  const ConfidenceSequence& b_rates = a < b ? p.second_rates : p.first_rates;
  const Estimate rate = estimate_of(b_rates);
  if (!(rate.value > 0)) {
    r.low = 0.0;
    r.high = kInf;
    return r;
  }
  const double c = b_shared.mean() * rate.low / rate.value, d = b_shared.mean() * rate.high / rate.value;
  r.low = c > 0 ? 1.0 + (delta_low >= 0 ? delta_low / d : delta_low / c) : -kInf;
  r.high = c > 0 ? 1.0 + (delta_high >= 0 ? delta_high / c : delta_high / d) : kInf;
  r.low = std::max(r.low, 0.0);
  return r;
}

double RoundEvidence::mean_difference(int a, int b) const {
  const Shared p = shared(std::min(a, b), std::max(a, b));
  if (p.difference.count() == 0) return mean_seconds(a).value - mean_seconds(b).value;
  return a < b ? p.difference.mean() : -p.difference.mean();
}

int64_t RoundEvidence::rounds_to_decide(int a, int b, double tolerance, int64_t cap) const {
  const Shared p = shared(std::min(a, b), std::max(a, b));
  const int64_t now = p.difference.count();
  const ConfidenceSequence& b_shared = a < b ? p.second : p.first;
  const double mean_b = b_shared.mean();
  if (now < 2 || !(mean_b > 0)) return 0;
  // |ratio − 1|, and the half-width that decides: below it the interval leaves 1 out; below
  // tolerance − it, the interval lies within 1 ± tolerance. The larger is reached first.
  const double distance = std::abs(p.difference.mean() / mean_b);
  const double wanted = std::max(distance, tolerance - distance);
  // The ratio's half-width to first order, (hw_δ + |ratio − 1|·hw_b) / mean_b (ratio's bounds
  // divide δ's by the bounds of mean_b); both sequences narrow alike with t.
  const ConfidenceSequence& b_rates = a < b ? p.second_rates : p.first_rates;
  if (!(b_rates.mean() > 0)) return 0;
  const auto width = [&](int64_t t) {
    return (p.difference.half_width_after(t) + distance * b_rates.half_width_after(t) * mean_b / b_rates.mean()) / mean_b;
  };
  int64_t undecided = std::max(now, kMinRoundsToDecide) - 1;  // the width is not below wanted here ...
  int64_t decided = undecided + 1;                               // ... and is here, once found
  if (width(decided) < wanted) return std::min(cap, decided);
  // Doubling, then bisection: the width falls as t grows.
  while (!(width(decided) < wanted)) {
    if (decided >= cap) return cap;
    undecided = decided;
    decided = std::min(cap, decided * 2);
  }
  while (decided - undecided > 1) {
    const int64_t mid = undecided + (decided - undecided) / 2;
    (width(mid) < wanted ? decided : undecided) = mid;
  }
  return decided;
}

// ---------------------------------------------------------------------------------------------

namespace {

Verdict judge(const Estimate& ratio, double tolerance) {
  if (ratio.low >= 1.0 - tolerance && ratio.high <= 1.0 + tolerance) return Verdict::kEquivalent;
  if (ratio.low > 1.0) return Verdict::kSlower;
  if (ratio.high < 1.0) return Verdict::kFaster;
  return Verdict::kUndecided;
}

}  // namespace

Decision decide(const RoundEvidence& evidence, const std::vector<int>& candidates, const DecisionOptions& options) {
  Decision d;
  d.confidence = options.confidence;
  d.tie_tolerance = options.tie_tolerance;
  d.rounds = evidence.rounds();
  std::vector<int> measured;
  for (int i : candidates) {
    if (evidence.count(i) > 0) measured.push_back(i);
  }
  if (measured.empty()) return d;
  std::sort(measured.begin(), measured.end(), [&](int a, int b) {
    return evidence.mean_seconds(a).value < evidence.mean_seconds(b).value;
  });
  d.fastest = measured.front();
  if (measured.size() == 1) {
    d.kind = DecisionKind::kOnly;
    return d;
  }
  // The splits that stopped early were timed in the early rounds only, the fastest in all of them:
  // a drift of the machine moves their plain means apart. The paired estimate (over the rounds
  // both ran in) has the sign right whatever the drift, so a split it puts ahead of the one with
  // the lowest mean becomes the fastest (at most once per split: no cycles).
  for (size_t attempt = 0; attempt < measured.size(); ++attempt) {
    int faster = -1;
    double lowest = 1.0;
    for (int i : measured) {
      if (i == d.fastest) continue;
      const double r = evidence.ratio(i, d.fastest).value;
      if (r < lowest) faster = i, lowest = r;
    }
    if (faster < 0) break;
    d.fastest = faster;
  }
  bool undecided = false, equivalent = false;
  for (int i : measured) {
    if (i == d.fastest) continue;
    Comparison c;
    c.index = i;
    c.ratio = evidence.ratio(i, d.fastest);
    c.paired_rounds = evidence.paired_rounds(i, d.fastest);
    c.verdict = judge(c.ratio, options.tie_tolerance);
    undecided = undecided || c.verdict == Verdict::kUndecided || c.verdict == Verdict::kFaster;
    equivalent = equivalent || c.verdict == Verdict::kEquivalent;
    d.comparisons.push_back(c);
  }
  // Closest first: the runner-up is the split whose time is the smallest multiple of the fastest's.
  std::stable_sort(d.comparisons.begin(), d.comparisons.end(),
                   [](const Comparison& a, const Comparison& b) { return a.ratio.value < b.ratio.value; });
  d.runner_up = d.comparisons.front().index;
  d.kind = undecided ? DecisionKind::kUndecided : equivalent ? DecisionKind::kTie : DecisionKind::kFastest;
  d.budget_spent = undecided && options.budget_spent;
  d.interrupted = undecided && options.interrupted;
  return d;
}

bool compared_per_token(const std::vector<RunResult>& runs) {
  return std::any_of(runs.begin(), runs.end(),
                     [&](const RunResult& run) { return run.config.rows() != runs.front().config.rows(); });
}

RoundEvidence evidence_from_runs(const std::vector<RunResult>& runs, double confidence,
                                 double framework_seconds_per_micro_step, bool as_timed) {
  std::vector<double> added;
  int timed = 0;
  for (const RunResult& run : runs) {
    added.push_back(framework_seconds_per_step(run, framework_seconds_per_micro_step));
    if (run.status == RunStatus::kOk && !run.steps.empty()) ++timed;
  }
  RoundEvidence evidence(static_cast<int>(runs.size()), confidence, std::move(added), timed);
  const bool per_token = !as_timed && compared_per_token(runs);
  evidence.weigh_per_token(per_token);  // each step's positions place its bound either way
  // Rounds by (session, round): the runs timed together in one sweep are paired round by round,
  // also when a resumed file holds runs of several sweeps; runs of different sweeps share no
  // round, so they are compared through their means (as steps timed alone, with no round, are).
  struct Round {
    std::vector<double> seconds, scales;
    std::vector<Stratum> strata;
  };
  std::map<std::pair<int64_t, int64_t>, Round> rounds;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunResult& run = runs[i];
    if (run.status != RunStatus::kOk) continue;
    for (const StepSample& s : run.steps) {
      const double scale = per_token_scale(s.positions);
      const Stratum stratum{s.data_step, s.data_steps};
      const int64_t session = session_of(run, s);
      if (session != 0 && s.round >= 0) {
        Round& round = rounds[{session, s.round}];
        if (round.seconds.empty()) {
          round.seconds.assign(runs.size(), kNaN), round.scales.assign(runs.size(), 1.0), round.strata.assign(runs.size(), Stratum{});
        }
        round.seconds[i] = s.step_seconds;
        round.scales[i] = scale;
        round.strata[i] = stratum;
      } else {
        evidence.add_unpaired(static_cast<int>(i), s.step_seconds, scale, stratum);
      }
    }
  }
  for (const auto& [index, round] : rounds) evidence.add_round(round.seconds, round.scales, round.strata, index.first);
  return evidence;
}

// ---------------------------------------------------------------------------------------------

RoundReport run_rounds(RoundEvidence& evidence, const std::vector<bool>& candidate, const RoundOptions& options,
                       const MeasureStep& measure, const ElapsedSeconds& elapsed, const AgreeOnRound& agree,
                       const AfterRound& after_round) {
  const int n = evidence.splits();
  RoundReport report;
  std::vector<bool> failed(n, false);
  std::vector<int> live;
  for (int i = 0; i < n; ++i) live.push_back(i);
  double elapsed_seconds = 0;
  for (int64_t round = 0;; ++round) {
    if (options.should_stop && options.should_stop()) {
      report.interrupted = true;
      break;
    }
    if (round >= options.min_rounds) {
      std::vector<int> candidates;
      for (int i = 0; i < n; ++i) {
        if (candidate[i] && !failed[i]) candidates.push_back(i);
      }
      const Decision d = decide(evidence, candidates, options.decision);
      if (d.kind != DecisionKind::kUndecided) break;
      // --time-budget 0 asks for exactly the minimum rounds: nothing was spent, so the words of
      // an undecided do not blame the budget (nor do they at the cap on rounds).
      if (options.budget_seconds <= 0 || round >= options.max_rounds) break;
      if (elapsed_seconds >= options.budget_seconds) {
        report.budget_spent = true;
        break;
      }
      live = {d.fastest};
      for (const Comparison& c : d.comparisons) {
        if (c.verdict == Verdict::kUndecided || c.verdict == Verdict::kFaster) live.push_back(c.index);
      }
      std::sort(live.begin(), live.end());
    } else {
      live.clear();
      for (int i = 0; i < n; ++i) {
        if (!failed[i]) live.push_back(i);
      }
    }
    if (live.empty()) break;
    std::vector<double> seconds(n, kNaN);
    const size_t shift = static_cast<size_t>(round) % live.size();  // rotating order: drift within a round
    for (size_t k = 0; k < live.size(); ++k) {                      // falls on every split alike
      const int split = live[(k + shift) % live.size()];
      const double s = measure(split, round);
      if (std::isnan(s)) {
        failed[split] = true;
        report.failed.push_back(split);
      } else {
        seconds[split] = s;
      }
    }
    elapsed_seconds = elapsed();
    if (agree) {
      agree(seconds, elapsed_seconds);
      for (int split : live) {  // failed on another process (data parallel): out here too
        if (std::isnan(seconds[split]) && !failed[split]) {
          failed[split] = true;
          report.failed.push_back(split);
        }
      }
    }
    std::vector<double> scales;
    std::vector<Stratum> strata;
    if (options.step_stratum) {
      strata.assign(static_cast<size_t>(n), Stratum{});
      for (int split = 0; split < n; ++split) {
        if (!std::isnan(seconds[split])) strata[split] = options.step_stratum(split);
      }
    }
    if (options.step_scale) {
      scales.assign(n, 1.0);
      for (int split : live) {
        if (!std::isnan(seconds[split])) scales[split] = options.step_scale(split);
      }
    }
    evidence.add_round(seconds, scales, strata);
    report.rounds = round + 1;
    report.seconds = elapsed_seconds;  // rank 0's where agree replaced it
    if (after_round) after_round(round, live);
  }
  return report;
}

}  // namespace accumbench
