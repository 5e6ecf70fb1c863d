// Named pure statistics, the derived fields of a run, and the recommendation with its reason.
#include "accumbench/statistics.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>

#include "accumbench/units.hpp"
#include "sweep/framework_overhead.hpp"

namespace accumbench {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A NaN in a series means "not measured" (device time on CPU); sorting it is undefined, and any
// statistic of a partly unmeasured series would be misleading, so it propagates.
bool has_nan(const std::vector<double>& values) {
  return std::any_of(values.begin(), values.end(), [](double v) { return std::isnan(v); });
}

// splitmix64 (Steele, Lea, Flood 2014; Vigna's reference code): exact integer arithmetic, so the
// bootstrap draws the same indices on every compiler and platform, unlike std::uniform_int_
// distribution whose algorithm the standard leaves open.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Modulo bias is below n / 2^64: invisible for the few hundred samples of a run.
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }

 private:
  uint64_t state_;
};

}  // namespace

double median(std::vector<double> values) {
  if (values.empty() || has_nan(values)) return kNaN;
  const std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  // nth_element leaves everything before `mid` no larger than it; the largest of those is the
  // other middle value.
  const double lower =
      *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2.0;
}

double minimum(const std::vector<double>& values) {
  if (values.empty() || has_nan(values)) return kNaN;
  return *std::min_element(values.begin(), values.end());
}

double mean(const std::vector<double>& values) {
  if (values.empty()) return kNaN;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double stddev(const std::vector<double>& values) {
  if (values.empty()) return kNaN;
  if (values.size() == 1) return has_nan(values) ? kNaN : 0.0;
  // Two passes: subtracting the mean first keeps precision for step times that differ in the
  // fourth significant digit (the one-pass sum-of-squares formula cancels them away).
  const double m = mean(values);
  double squares = 0.0;
  for (double v : values) squares += (v - m) * (v - m);
  return std::sqrt(squares / static_cast<double>(values.size() - 1));
}

double cv(const std::vector<double>& values) {
  const double m = mean(values);
  if (m == 0.0) return kNaN;
  return stddev(values) / m;
}

std::pair<double, double> bootstrap_median_interval(const std::vector<double>& values,
                                                    double confidence, int resamples,
                                                    uint64_t seed) {
  if (!(confidence > 0.0 && confidence < 1.0) || resamples < 1) {
    // A caller's bug, not a user mistake: fail loudly.
    throw std::invalid_argument(
        "bootstrap_median_interval: confidence must be in (0, 1) and resamples >= 1");
  }
  // One value says nothing of the spread: no interval, not one of width zero ("± 0.0000").
  if (values.size() < 2 || has_nan(values)) return {kNaN, kNaN};

  SplitMix64 rng(seed);
  std::vector<double> medians(static_cast<std::size_t>(resamples));
  std::vector<double> sample(values.size());
  for (double& m : medians) {
    for (double& s : sample) s = values[rng.below(values.size())];
    m = median(sample);
  }
  std::sort(medians.begin(), medians.end());
  // Percentile method with order statistics rather than interpolation: the bounds are resampled
  // medians themselves, so no fused multiply-add on some CPU can move them by an ulp. The 1e-9
  // absorbs representation error in (1 - confidence) / 2 · resamples (0.05 / 2 · 2000 = 50).
  const double tail = (1.0 - confidence) / 2.0;
  const std::size_t last = medians.size() - 1;
  const std::size_t k = std::min(
      static_cast<std::size_t>(std::floor(tail * static_cast<double>(resamples) + 1e-9)), last / 2);
  return {medians[k], medians[last - k]};
}

namespace {

// The bound on the run's seconds per token (per_token_scale of each step's positions) over its
// steps of `session` (a resumed split's earlier sweep ran on the machine as it was then, each sweep
// its own bound, as RoundEvidence's regimes): a step of many tokens (a grouped order's longest) is
// no stall, and is not clipped as one.
double rate_bound(const RunResult& run, int64_t session) {
  std::vector<double> rates;
  for (const StepSample& s : run.steps) {
    if (session_of(run, s) == session) rates.push_back(s.step_seconds * per_token_scale(s.positions));
  }
  return winsorizing_bound(std::move(rates));
}

// The sweep that timed the run's last step.
int64_t last_session(const RunResult& run) { return run.steps.empty() ? run.session : session_of(run, run.steps.back()); }

// The mean of `value` over a run's timed steps, weighed as winsorized_mean weighs them: over an
// epoch's distinct steps every one of which was timed, each step alike (ConfidenceSequence::add_strata).
template <class Value>
double steps_mean(const RunResult& run, Value value) {
  if (run.steps.empty()) return kNaN;
  std::vector<std::pair<int64_t, double>> values;
  int64_t strata = run.steps.front().data_steps;
  for (const StepSample& s : run.steps) {
    if (s.data_steps != strata) strata = 0;
    values.emplace_back(s.data_step, value(s));
  }
  ConfidenceSequence mean(0.05, 1.0);
  mean.add_strata(values, strata);
  return mean.mean();
}

}  // namespace

double winsorizing_bound(const RunResult& run) {
  if (run.steps.empty()) return kNaN;
  // In seconds, for a step of the run's mean positions (each step's own clip scales with its size).
  // The latest sweep's, for a resumed split that holds an earlier one's steps too.
  const int64_t latest = last_session(run);
  std::vector<double> scales;
  for (const StepSample& s : run.steps) {
    if (session_of(run, s) == latest) scales.push_back(per_token_scale(s.positions));
  }
  return rate_bound(run, latest) / common_scale(scales);
}

namespace {

// Each step's time as winsorized_mean takes it: at most its sweep's bound, scaled to its size.
auto capped_step_seconds(const RunResult& run) {
  std::map<int64_t, double> bounds;  // per sweep
  for (const StepSample& s : run.steps) {
    const int64_t session = session_of(run, s);
    if (bounds.count(session) == 0) bounds[session] = rate_bound(run, session);
  }
  return [&run, bounds = std::move(bounds)](const StepSample& s) {
    return std::min(s.step_seconds, bounds.at(session_of(run, s)) / per_token_scale(s.positions));
  };
}

}  // namespace

double winsorized_mean(const RunResult& run) {
  if (run.steps.empty()) return kNaN;
  // Each step alike over an epoch's distinct steps (steps_mean), as the decisions take them.
  return steps_mean(run, capped_step_seconds(run));
}

double mean_computed_positions(const RunResult& run) {
  return steps_mean(run, [](const StepSample& s) { return static_cast<double>(s.computed_positions); });
}

bool steps_differ_in_size(const RunResult& run) {
  return std::any_of(run.steps.begin(), run.steps.end(), [&](const StepSample& s) {
    return s.computed_positions != run.steps.front().computed_positions;
  });
}

double typical_step_seconds(const RunResult& run) {
  if (!steps_differ_in_size(run)) return run.step_seconds.median;
  return std::isfinite(run.mean_seconds.value) ? run.mean_seconds.value : winsorized_mean(run);
}

PhaseSeconds typical_phase_seconds(const RunResult& run) {
  if (!steps_differ_in_size(run)) return run.phase_median_seconds;
  // Weighed as the step is (steps_mean): over an epoch timed unevenly, each batch alike; and capped
  // as the step is: a step winsorizing cut keeps its phases in their shares of what is left of it,
  // since which phase stalled is not known (helper-99: a stalled step's uncapped phases made a row's
  // phases add up to 2.3 times its step).
  if (run.steps.empty()) return PhaseSeconds{};
  const auto capped = capped_step_seconds(run);
  PhaseSeconds seconds{};
  for (int p = 0; p < kPhaseCount; ++p) {
    seconds[p] = steps_mean(run, [&capped, p](const StepSample& s) {
      const double share = s.step_seconds > 0 ? std::min(1.0, capped(s) / s.step_seconds) : 1.0;
      return s.host_seconds[p] * share;
    });
  }
  return seconds;
}

Summary summarize(const std::vector<double>& values) {
  Summary s;
  s.median = median(values);
  s.min = minimum(values);
  s.mean = mean(values);
  s.stddev = stddev(values);
  s.cv = cv(values);
  std::tie(s.ci_low, s.ci_high) = bootstrap_median_interval(values);
  s.count = static_cast<int64_t>(values.size());
  return s;
}

void finalize_run(RunResult& run, double flops_per_token, double peak_tflops, double recompute_flops_per_token) {
  // A failed run keeps exactly what the runner recorded; there is nothing to derive.
  if (run.status != RunStatus::kOk) return;

  std::vector<double> step_seconds;
  for (const StepSample& step : run.steps) {
    step_seconds.push_back(step.step_seconds);
    run.peak_allocated_bytes = std::max(run.peak_allocated_bytes, step.peak_allocated_bytes);
  }
  run.step_seconds = summarize(step_seconds);
  if (run.steps.empty()) {
    // Warmed up but never timed (a sweep stopped before its rounds): its memory is measured, its
    // time is not, and nothing shows a rate of zero.
    run.phase_median_seconds.fill(kNaN);
    run.device_median_seconds.fill(kNaN);
    run.tokens_per_second = run.computed_tokens_per_second = run.samples_per_second = kNaN;
    run.achieved_tflops = run.hardware_tflops = kNaN;
    return;
  }
  run.clip_seconds = winsorizing_bound(run);
  run.mean_seconds = Estimate{winsorized_mean(run), kNaN, kNaN};  // the interval comes from the rounds

  for (int p = 0; p < kPhaseCount; ++p) {
    std::vector<double> host;
    std::vector<double> device;
    for (const StepSample& step : run.steps) {
      host.push_back(step.host_seconds[p]);
      device.push_back(step.device_seconds[p]);
    }
    run.phase_median_seconds[p] = median(host);
    run.device_median_seconds[p] = median(device);
  }

  const double step_median = run.step_seconds.median;
  // The rates: per median step, or, over steps of many sizes, per mean step (typical_step_seconds).
  const double step_time = typical_step_seconds(run);
  // kOther is the untimed remainder of the wall time, not device work; NaN (CPU) propagates.
  double device_busy_seconds = 0.0;
  for (int p = 0; p < kPhaseCount; ++p) {
    if (static_cast<Phase>(p) != Phase::kOther) device_busy_seconds += run.device_median_seconds[p];
  }
  run.device_busy_fraction = device_busy_seconds / step_median;

  // Real data: the steps train on batches of different real-token counts (the rounds cycle through
  // the distinct batches), so the rates take the mean count per step over the step time, the
  // real positions (tokens, as TRL's num_tokens counts them, not the targets: a sample's last token
  // has none) and the computed positions alike: tokens/s over computed/s is then the padding's
  // complement (a median count read the commonest batch, which can have no padding at all). The
  // rates use the mean itself, not the whole number shown.
  // Over an epoch's distinct steps each alike, as the mean step (steps_mean).
  const double tokens_per_step = steps_mean(run, [](const StepSample& s) { return static_cast<double>(s.positions); });
  run.tokens_per_step = tokens_per_step;
  run.tokens_per_second = tokens_per_step / step_time;
  // The padding from the same two means, so that it is tokens/s over computed/s's complement
  // where the steps timed cover the distinct steps unevenly (an odd --steps over two batches).
  const double computed_per_step = mean_computed_positions(run);
  run.computed_tokens_per_second = computed_per_step / step_time;
  run.padding_fraction = computed_per_step > 0 ? 1.0 - tokens_per_step / computed_per_step : 0.0;
  // Every rank's samples, as tokens/s; MFU against every rank's devices.
  run.samples_per_second =
      static_cast<double>(run.config.micro_batch * run.config.accum_steps * run.config.world_size) / step_time;
  run.achieved_tflops = flops_per_token * tokens_per_step / step_time / 1e12;
  run.hardware_tflops = (flops_per_token + recompute_flops_per_token) * tokens_per_step / step_time / 1e12;
  run.mfu =
      (std::isfinite(peak_tflops) && peak_tflops > 0.0) ? run.achieved_tflops / (peak_tflops * run.config.world_size) : kNaN;
}

// --------------------------------------------------------------------------------------------
// Recommendation

namespace {

std::string seconds_text(double seconds) { return text::format_significant(seconds, 3) + " s"; }

// The mean real tokens per step over the timed steps, weighed as the mean step is (steps_mean):
// the table's tokens/s and the recommendation's then agree. The file's figure without steps.
double real_tokens_per_step(const RunResult& run) {
  if (run.steps.empty()) return run.tokens_per_step;
  return steps_mean(run, [](const StepSample& s) { return static_cast<double>(s.positions); });
}

// "mostly in backward": the words after "mostly" (the phase table's).
std::string phase_words(Phase phase) { return phase_info(phase).words; }

// How long each phase held up the step: a host-bound phase is as long as its dispatch (host
// time), a device-bound one as long as its kernels (device time), whichever is larger. Host time
// alone hides device work that the host waits for elsewhere; device time alone hides a
// host-bound phase. On CPU only host time exists. kOther is host-only by definition.
PhaseSeconds limiting_phase_seconds(const RunResult& run) {
  PhaseSeconds seconds = typical_phase_seconds(run);
  for (int p = 0; p < kPhaseCount; ++p) {
    const double device = run.device_median_seconds[p];
    if (static_cast<Phase>(p) != Phase::kOther && std::isfinite(device)) {
      seconds[p] = std::max(seconds[p], device);
    }
  }
  return seconds;
}

// Each phase's gap of `slow` over `fast` where their steps were timed in the same rounds: the
// median over those rounds of the two steps' difference (each phase read as limiting_phase_seconds
// reads it), as the decision pairs them; a drift of the machine's load between a split set aside
// early and one timed to the end does not enter it, nor does one stall. Without kMinPairedPhases
// shared rounds, or where the steps differ in size: the two splits' own phases (typical_phase_seconds).
constexpr int kMinPairedPhases = 5;
PhaseSeconds phase_gaps(const RunResult& slow, const RunResult& fast) {
  const auto limiting = [](const StepSample& s) {
    PhaseSeconds seconds = s.host_seconds;
    for (int p = 0; p < kPhaseCount; ++p) {
      if (static_cast<Phase>(p) != Phase::kOther && std::isfinite(s.device_seconds[p])) {
        seconds[p] = std::max(seconds[p], s.device_seconds[p]);
      }
    }
    return seconds;
  };
  std::map<std::pair<int64_t, int64_t>, const StepSample*> fast_rounds;
  for (const StepSample& s : fast.steps) {
    if (s.round >= 0 && session_of(fast, s) != 0) fast_rounds[{session_of(fast, s), s.round}] = &s;
  }
  // A step that recorded no phase (a summary's fixture) pairs with nothing.
  const auto timed_phases = [](const StepSample& s) {
    return std::any_of(s.host_seconds.begin(), s.host_seconds.end(), [](double v) { return v > 0; });
  };
  std::array<std::vector<double>, kPhaseCount> differences;
  for (const StepSample& s : slow.steps) {
    const auto found = fast_rounds.find({session_of(slow, s), s.round});
    if (s.round < 0 || found == fast_rounds.end() || !timed_phases(s) || !timed_phases(*found->second)) continue;
    const PhaseSeconds a = limiting(s), b = limiting(*found->second);
    for (int p = 0; p < kPhaseCount; ++p) differences[p].push_back(a[p] - b[p]);
  }
  PhaseSeconds gaps{};
  // Steps of many sizes are weighed by their mean (the table's rows, the decision): the median of
  // paired differences is a short step's, which said "+433 µs" of a grouped 32×1's 78 ms more.
  const bool means = steps_differ_in_size(slow) || steps_differ_in_size(fast);
  if (means || static_cast<int>(differences[0].size()) < kMinPairedPhases) {
    const PhaseSeconds a = limiting_phase_seconds(slow), b = limiting_phase_seconds(fast);
    for (int p = 0; p < kPhaseCount; ++p) gaps[p] = a[p] - b[p];
    return gaps;
  }
  for (int p = 0; p < kPhaseCount; ++p) gaps[p] = median(differences[p]);
  return gaps;
}

bool host_bound(const RunResult& run) {
  // NaN (CPU: no device timeline) compares false: a CPU run is never called host-bound.
  return run.device_busy_fraction < 0.5;
}

std::string host_bound_words(const RunResult& run) {
  return "host-bound (device busy " + text::format_percent(run.device_busy_fraction, 0) +
         " of the step)";
}

// " bf16" when the sweep has several precisions, else "": without it a precision sweep's reason
// could name two different runs the same way.
std::string precision_suffix(const RunResult& run, const std::vector<RunResult>& runs) {
  for (const RunResult& other : runs) {
    if (other.config.precision != run.config.precision) return " " + to_string(run.config.precision);
  }
  return "";
}

// " pad-longest" when the sweep's runs are padded several ways (--padding's list), else "".
std::string padding_suffix(const RunResult& run, const std::vector<RunResult>& runs) {
  for (const RunResult& other : runs) {
    if (other.config.padding != run.config.padding) return " " + padding_word(run.config.padding);
  }
  return "";
}

// " pack-bfd" when the sweep's runs are packed several ways (--packing's list), then " grouped" when
// they are ordered both ways (--group-by-length's list); "" with one of each.
std::string rows_suffix(const RunResult& run, const std::vector<RunResult>& runs) {
  const auto differ = [&](auto field) {
    return std::any_of(runs.begin(), runs.end(), [&](const RunResult& other) { return other.config.*field != run.config.*field; });
  };
  return (differ(&SplitConfig::packing) ? " " + packing_word(run.config.packing) : "") +
         (differ(&SplitConfig::group_by_length) ? " " + grouping_word(run.config.group_by_length) : "");
}

std::string no_success_reason(const std::vector<RunResult>& runs, const std::vector<int>& ok,
                              int64_t memory_limit_bytes, const std::string& memory_advice) {
  if (runs.empty()) return "No split ran.";
  if (!ok.empty()) {
    // Every split ran but none fits the limit: name the one that came closest.
    int smallest = ok.front();
    for (int i : ok) {
      if (runs[i].peak_allocated_bytes < runs[smallest].peak_allocated_bytes) smallest = i;
    }
    return "No split fits in the " + format_bytes(memory_limit_bytes) +
           " memory limit; the smallest peak was " +
           format_bytes(runs[smallest].peak_allocated_bytes) + " (" +
           run_label(runs[smallest], runs) + ")" +
           (memory_advice.empty() ? "; try smaller micro-batches or activation checkpointing." : ". " + memory_advice);
  }
  int oom = 0, predicted = 0, errors = 0, untimed = 0;
  const RunResult* first_error = nullptr;
  for (const RunResult& run : runs) {
    switch (run.status) {
      case RunStatus::kOk:
        ++untimed;
        break;
      case RunStatus::kOutOfMemory:
        ++oom;
        break;
      case RunStatus::kPredictedOutOfMemory:
        ++predicted;
        break;
      case RunStatus::kError:
        ++errors;
        if (first_error == nullptr) first_error = &run;
        break;
    }
  }
  std::vector<std::string> parts;
  if (oom > 0) parts.push_back(std::to_string(oom) + " ran out of memory");
  if (predicted > 0) parts.push_back(std::to_string(predicted) + " predicted not to fit");
  if (errors > 0) {
    parts.push_back(std::to_string(errors) + " failed with an error (" +
                    run_label(*first_error, runs) + ": " + first_error->error + ")");
  }
  if (untimed > 0) parts.push_back(std::to_string(untimed) + " produced no timed steps");
  std::string reason = "No split ran successfully: ";
  for (std::size_t i = 0; i < parts.size(); ++i) reason += (i > 0 ? ", " : "") + parts[i];
  reason += ".";
  // Memory stopped every split: the plan knows which change to the job would fit.
  if (oom + predicted > 0) {
    reason += " " + (memory_advice.empty()
                         ? std::string("`accumbench plan` with the same job and --memory-limit names the changes that would fit.")
                         : memory_advice);
  }
  return reason;
}

// "12 rounds", "1 round".
std::string counted(int64_t n, const std::string& noun) { return std::to_string(n) + " " + noun + (n == 1 ? "" : "s"); }

std::string times_text(const Estimate& ratio) {
  // Rounded outwards, so the printed interval holds the computed one: a low bound of 0.9996
  // (undecided) reads 0.99, not the 1.00 of a low bound of 1.0004 (slower); 0.9757–1.0304 reads
  // 0.97–1.04, not the 0.98–1.03 that would look equivalent within ±3 %.
  const auto bound = [](double v, bool up) {
    return std::isfinite(v) ? text::format_fixed_outward(v, 2, up) : std::string("\u221e");
  };
  // An interval reaching down to nothing (few, noisy rounds) bounds the ratio from above only:
  // "0.00–2.15×" would read as a measured zero.
  if (!(ratio.low >= 0.005) && std::isfinite(ratio.high)) return "at most " + bound(ratio.high, true) + "\u00d7";
  return bound(ratio.low, false) + "\u2013" + bound(ratio.high, true) + "\u00d7";
}

std::string confidence_text(const Decision& d) {
  return text::format_percent(d.confidence, 0) + " confidence";
}

std::string tolerance_text(const Decision& d) { return "\u00b1" + text::format_percent(d.tie_tolerance, 0); }

const Comparison* comparison_of(const Decision& d, int index) {
  for (const Comparison& c : d.comparisons) {
    if (c.index == index) return &c;
  }
  return nullptr;
}

// "43.5 MiB vs 66.9 MiB"; in bytes where the two round alike ("110,100,480 vs 110,104,576 bytes").
std::string two_peaks(int64_t a, int64_t b) {
  if (format_bytes(a) != format_bytes(b)) return format_bytes(a) + " vs " + format_bytes(b);
  return text::format_count(a) + " vs " + text::format_count(b) + " bytes";
}

// A --time-budget value: `seconds` rounded up to two significant digits (47.3 -> 48, 1234 -> 1300).
int64_t budget_rounded_up(double seconds) {
  if (seconds <= 10) return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(seconds)));
  const double unit = std::pow(10.0, std::floor(std::log10(seconds)) - 1);
  return static_cast<int64_t>(std::ceil(seconds / unit - 1e-9) * unit);
}

// The greatest session stamp of any timed step: the latest sweep of a resumed file.
int64_t latest_session(const std::vector<RunResult>& runs) {
  int64_t latest = 0;
  for (const RunResult& run : runs) {
    if (run.status != RunStatus::kOk) continue;
    for (const StepSample& step : run.steps) latest = std::max(latest, session_of(run, step));
  }
  return latest;
}

// The rounds of `session` that `run` took part in: its steps timed in them.
int64_t rounds_in(const RunResult& run, int64_t session) {
  return std::count_if(run.steps.begin(), run.steps.end(),
                       [&](const StepSample& s) { return s.round >= 0 && session_of(run, s) == session; });
}

// What more rounds would cost to decide what is still open, were the step times to hold as measured
// (RoundEvidence::rounds_to_decide): each open split timed until its own verdict, the fastest
// beside the last of them, at their mean steps, scaled by what the rounds' clock ran over the
// steps it timed (the host work between steps). With the sweep's file, also what a --resume of
// it would take: it times the open splits, and no other, in rounds that go on from the file's
// (add_timed_rounds), each for the rounds still wanted but at least its --steps. "" where
// nothing can be projected: a split compared unpaired (another sweep's), pairs that go round in a
// circle.
std::string budget_to_decide(const std::vector<RunResult>& runs, const Decision& d, const RoundEvidence& evidence,
                             const DecisionOptions& options) {
  constexpr int64_t kCap = 1000000;  // RoundOptions::max_rounds
  double more_steps = 0, resumed_steps = 0;  // seconds of steps: from here on, and in a resume
  int64_t longest = 0, longest_resumed = 0, open = 1;
  const int64_t least = std::max<int64_t>(1, options.min_rounds);  // a resume's --steps
  // Below kMinRoundsToDecide rounds the spread and the difference are too rough to project from
  // (seen: budgets projected from 5 rounds decided 1 time in 9): the words then give the least it
  // takes, the rounds that bring every open split to an interval.
  bool too_few = false;
  for (const Comparison& c : d.comparisons) {
    if (c.verdict == Verdict::kFaster) return "";
    if (c.verdict != Verdict::kUndecided) continue;
    const int64_t paired = evidence.paired_rounds(c.index, d.fastest);
    if (paired == 0) return "";
    // Too few: the rounds to an interval. Else at least one more round: the projection is to first
    // order, the verdict is not.
    const bool few = paired < kMinRoundsToDecide;
    too_few = too_few || few;
    const int64_t wanted =
        few ? kMinRoundsToDecide
            : std::max(evidence.rounds_to_decide(c.index, d.fastest, d.tie_tolerance, kCap), paired + 1);
    const double mean = runs[c.index].mean_seconds.value;
    more_steps += static_cast<double>(wanted - paired) * mean;
    resumed_steps += static_cast<double>(std::max(wanted - paired, least)) * mean;
    longest = std::max(longest, wanted - paired);
    longest_resumed = std::max(longest_resumed, std::max(wanted - paired, least));
    ++open;
  }
  more_steps += static_cast<double>(longest) * runs[d.fastest].mean_seconds.value;
  resumed_steps += static_cast<double>(longest_resumed) * runs[d.fastest].mean_seconds.value;
  if (!(more_steps > 0) || !std::isfinite(more_steps)) return "";
  // An open split this command's lists leave out (a --resume kept it): the same command would time
  // the others alone (helper-113), so a resume needs the file's own lists.
  const auto outside = [&](int index) {
    return std::find(options.outside_lists.begin(), options.outside_lists.end(), runs[index].config.key()) !=
           options.outside_lists.end();
  };
  bool beyond_lists = outside(d.fastest);
  for (const Comparison& c : d.comparisons) beyond_lists = beyond_lists || (c.verdict == Verdict::kUndecided && outside(c.index));
  const std::string own_lists = beyond_lists ? " with the file's own lists (this command's leave some of them out)" : "";
  // The latest sweep's steps in rounds, against the clock --time-budget counts.
  const int64_t latest = latest_session(runs);
  double timed = 0;
  for (const RunResult& run : runs) {
    if (run.status != RunStatus::kOk) continue;
    for (const StepSample& step : run.steps) {
      if (session_of(run, step) == latest && step.round >= 0) timed += step.step_seconds;
    }
  }
  const double rounds_seconds = options.rounds_seconds;
  const bool clock = std::isfinite(rounds_seconds) && rounds_seconds > 0;
  const double overhead = clock && timed > 0 ? std::max(1.0, rounds_seconds / timed) : 1.0;
  const double more = more_steps * overhead;
  std::string words = (too_few ? "at least about " : "if the step times hold as measured, about ") +
                      text::format_duration(more) + " more of rounds can decide";
  if (clock) {
    words += " (--time-budget " + std::to_string(budget_rounded_up(rounds_seconds + more)) + " in all";
    // Only where a resume times fewer splits than the sweep did.
    const auto split_count = static_cast<int64_t>(d.comparisons.size()) + 1;
    if (!options.resume_file.empty() && open < split_count) {
      words += "; or --resume " + options.resume_file + " --time-budget " +
               std::to_string(budget_rounded_up(resumed_steps * overhead)) + own_lists + ", which times the " +
               std::to_string(open) + " splits still open again, the others kept";
    }
    words += ")";
  } else if (!options.resume_file.empty()) {
    // No rounds in this sweep (a --resume that kept every split as its file had them): no clock,
    // and the budget of a command like it would time nothing; a resume with a budget times the
    // open splits again, in rounds that go on from the file's.
    words += " (--resume " + options.resume_file + " --time-budget " +
             std::to_string(budget_rounded_up(resumed_steps)) + own_lists + ", which times the " + std::to_string(open) +
             " splits still open again" + (open < static_cast<int64_t>(d.comparisons.size()) + 1 ? ", the others kept" : "") +
             ")";
  }
  if (too_few) {
    words += ", more where a split with fewer than " + std::to_string(kMinRoundsToDecide) +
             " rounds proves closer than its rounds so far show";
  }
  return words;
}

// The first sentence: what the rounds decided and which split is recommended, with what is worth
// knowing about it. `options`: the rounds' clock and the sweep's file (budget_to_decide).
std::string why_chosen(const std::vector<RunResult>& runs, const Decision& d, const std::vector<int>& ties, int best,
                       int64_t memory_limit_bytes, const RoundEvidence& decided, bool with_framework,
                       const DecisionOptions& options) {
  const RunResult& b = runs[best];
  const RunResult& f = runs[d.fastest];
  // The mean step, which the decisions compare, and the tokens per second it gives; "a mean of",
  // since the table's step column and tokens/s are per median step (unless the steps differ in
  // size). With a framework's host time the decisions compare the means with it added: that mean,
  // beside the engine's.
  // Per real token (a --packing list) the evidence's means are seconds per kTokenUnit tokens.
  const double mean = !with_framework            ? b.mean_seconds.value
                      : compared_per_token(runs) ? b.mean_seconds.value +
                                                       framework_seconds_per_step(b, options.framework_seconds_per_micro_step)
                                                 : decided.mean_seconds(best).value;
  const double tokens_per_second = real_tokens_per_step(b) > 0 ? real_tokens_per_step(b) / mean
                                                               : b.tokens_per_second * b.mean_seconds.value / mean;
  const std::string per_step =
      "a mean of " + seconds_text(mean) + " per step" + (with_framework ? " with the framework's host time" : "") + " (" +
      text::format_count(tokens_per_second) + " tokens/s" +
      (with_framework ? "; " + seconds_text(b.mean_seconds.value) + " in the engine alone" : "") + ")";
  std::string lead;
  switch (d.kind) {
    case DecisionKind::kOnly:
      lead = run_label(b, runs) + " is the only split that ran" + (memory_limit_bytes > 0 ? " and fits" : "") + ": " +
             per_step;
      break;
    case DecisionKind::kFastest: {
      const Comparison* r = comparison_of(d, d.runner_up);
      lead = run_label(b, runs) + " is fastest at " + per_step;
      if (r != nullptr) {
        lead += ": the runner-up " + run_label(runs[r->index], runs) + " takes " + times_text(r->ratio) +
                " its time (" + confidence_text(d) + ", " +
                (r->paired_rounds > 0 ? counted(r->paired_rounds, "paired round")
                                      : std::string("unpaired: timed in different sweeps")) +
                ")";
      }
      break;
    }
    case DecisionKind::kTie:
    case DecisionKind::kUndecided: {
      if (best == d.fastest && ties.size() > 1) {
        // Equivalent in time: none is "fastest", the memory chooses.
        lead = run_label(b, runs) + " needs the least memory (" + format_bytes(b.peak_allocated_bytes) + ") of the " +
               std::to_string(ties.size()) + " splits equivalent in time within " + tolerance_text(d) + " (" +
               confidence_text(d) + "), at " + per_step;
      } else if (best == d.fastest) {
        lead = run_label(b, runs) + " is fastest at " + per_step;
      } else {
        const Comparison* c = comparison_of(d, best);
        lead = run_label(b, runs) + " ties with the fastest split " + run_label(f, runs) + " (it takes " +
               times_text(c->ratio) + " its time, equivalent within " + tolerance_text(d) + " at " +
               confidence_text(d) + ") and is chosen for its lower peak memory (" +
               two_peaks(b.peak_allocated_bytes, f.peak_allocated_bytes) + ")";
      }
      if (d.kind == DecisionKind::kUndecided) {
        // What is still open, and the recommendation as the best estimate so far. A split with
        // fewer than kMinRoundsToDecide rounds beside the fastest has no interval yet: named only.
        // A split faster beyond doubt than the one ahead: the pairs, each compared on the rounds
        // both ran in, went round in a circle (decide's pick ended on a move), which more rounds of
        // them together can settle.
        // A split with its rounds but still no upper bound (steps too noisy for one): said with
        // its rounds, not as one with too few.
        std::string list, too_few, unbounded, faster;
        int unbounded_count = 0;
        for (const Comparison& c : d.comparisons) {
          if (c.verdict != Verdict::kUndecided && c.verdict != Verdict::kFaster) continue;
          const std::string name = run_label(runs[c.index], runs);
          if (!std::isfinite(c.ratio.high) && c.paired_rounds >= kMinRoundsToDecide) {
            unbounded += (unbounded.empty() ? "" : ", ") + name + " (" + counted(c.paired_rounds, "paired round") + ")";
            ++unbounded_count;
          } else if (!std::isfinite(c.ratio.high)) {
            too_few += (too_few.empty() ? "" : ", ") + name;
          } else if (c.verdict == Verdict::kFaster) {
            faster += (faster.empty() ? "" : ", ") + name + " takes " + times_text(c.ratio) + " its time";
          } else {
            list += list.empty() ? name + " may still take " + times_text(c.ratio) + " its time"
                                 : ", " + name + " " + times_text(c.ratio);
          }
        }
        std::string open;
        if (!list.empty()) open = "but " + list + " (" + confidence_text(d) + ")";
        if (!faster.empty()) {
          open += (open.empty() ? "but " : "; ") + faster + " (" + confidence_text(d) +
                  "; the pairs, each compared on the rounds both ran in, go round in a circle)";
          if (best == d.fastest && ties.size() <= 1) lead = run_label(b, runs) + " is the best estimate at " + per_step;
        }
        if (!too_few.empty()) {
          open += (open.empty() ? "but " : "; ") + too_few + " had fewer than " + std::to_string(kMinRoundsToDecide) +
                  " rounds beside it, too few for an interval";
        }
        if (!unbounded.empty()) {
          open += (open.empty() ? "but " : "; ") + unbounded +
                  (unbounded_count > 1 ? " still have" : " still has") +
                  " no upper bound, the steps too noisy beside the fastest's for one so far";
        }
        const char* stopped = d.interrupted ? (options.stopped_by_error ? " (stopped by an error)" : " (interrupted)")
                              : d.budget_spent ? " (--time-budget spent)"
                                               : "";
        const std::string projected = d.interrupted ? "" : budget_to_decide(runs, d, decided, options);
        // An open pair one of which this sweep did not time (a --resume kept it as the file had
        // it): more rounds of this command never pair them again, a resume that times them
        // together does.
        const int64_t latest = latest_session(runs);
        const bool apart = std::any_of(d.comparisons.begin(), d.comparisons.end(), [&](const Comparison& c) {
          return (c.verdict == Verdict::kUndecided || c.verdict == Verdict::kFaster) &&
                 (rounds_in(runs[c.index], latest) == 0 || rounds_in(f, latest) == 0);
        });
        const std::string more = d.interrupted ? "a sweep left to run to its end can decide"
                                 : apart && !options.resume_file.empty()
                                     ? "the --resume " + options.resume_file +
                                           " with the file's own lists times them side by side, which can decide"
                                 : !projected.empty() ? projected
                                                      : "a longer --time-budget can decide";
        // The rounds the fastest took part in: all of this sweep's, unless a --resume kept it as
        // an earlier sweep timed it.
        // The rounds the fastest took part in, in the latest sweep that timed it: all of this
        // sweep's, unless it dropped out (decided, then open again) or a --resume kept it as an
        // earlier sweep timed it.
        int64_t its_latest = 0;
        for (const StepSample& s : f.steps) its_latest = std::max(its_latest, session_of(f, s));
        const int64_t fastest_rounds = rounds_in(f, its_latest);
        const std::string rounds = fastest_rounds > 0 && fastest_rounds < d.rounds
                                       ? counted(fastest_rounds, "round") + " of " + run_label(f, runs) + " (up to " +
                                             std::to_string(d.rounds) + " of the others)"
                                       : counted(d.rounds, "round");
        lead = "Undecided after " + rounds + stopped + ": " + run_label(f, runs) + " is ahead, " + open + "; " + more +
               ". As it stands, " + lead;
      }
      break;
    }
    case DecisionKind::kNone:
      break;
  }

  std::vector<std::string> clauses;
  if (host_bound(b)) clauses.push_back("it is " + host_bound_words(b));
  // Of the step the sentence named: with a framework's time, that mean (the engine's 3.9 ms read 13 %
  // beside a 23.9 ms step).
  const double optimizer_share = typical_phase_seconds(b)[static_cast<int>(Phase::kOptimizer)] /
                                 (with_framework && !compared_per_token(runs) ? mean : b.mean_seconds.value +
                                  (with_framework ? framework_seconds_per_step(b, options.framework_seconds_per_micro_step) : 0.0));
  // Above a tenth of the step the optimizer is worth knowing about: it is the part that
  // accumulation amortizes and that fused/in-backward optimizers shrink.
  if (optimizer_share > 0.10) {
    clauses.push_back("the optimizer takes " + text::format_percent(optimizer_share, 0) + " of its step");
  }
  if (memory_limit_bytes > 0) {
    clauses.push_back("its " + format_bytes(b.peak_allocated_bytes) + " peak leaves " +
                      format_bytes(memory_limit_bytes - b.peak_allocated_bytes) + " of the " +
                      format_bytes(memory_limit_bytes) + " limit free");
  }
  std::string reason = lead;
  for (const std::string& clause : clauses) reason += "; " + clause;
  return reason + ".";
}

const TimeModel* time_model_of(const std::vector<TimeModel>& models, int index) {
  for (const TimeModel& m : models) {
    for (const TimeModelResidual& r : m.residuals) {
      if (r.index == index) return &m;
    }
  }
  return nullptr;
}

// The second sentence: what the slowest split that ran loses against the chosen one, where, and
// how much of it the fixed cost per micro-step explains; empty when it is the chosen one or within
// 1 % of it (noise, and "slower" would mislead) or proven equivalent to it. `decided`: the
// evidence the decision weighed (with a framework's time, when given), whose paired ratios (over
// the rounds both splits ran in) the sentence says: plain means over different rounds (a split set
// aside early) would say another ratio. A ratio the rounds have not decided is said as the
// estimate it is. `engine`: the same without the framework's time, for the gap the engine's time
// model explains.
std::string what_the_slowest_loses(const std::vector<RunResult>& runs, const std::vector<int>& candidates, int best,
                                   const std::vector<TimeModel>& models, const RoundEvidence& decided,
                                   const RoundEvidence& engine, double tie_tolerance, bool with_framework) {
  int slowest = best;
  Estimate ratio{1.0, 1.0, 1.0};
  for (int i : candidates) {
    if (i == best) continue;
    const Estimate r = decided.ratio(i, best);
    if (r.value > ratio.value) slowest = i, ratio = r;
  }
  if (slowest == best || ratio.value < 1.01) return "";
  if (ratio.low >= 1.0 - tie_tolerance && ratio.high <= 1.0 + tie_tolerance) return "";  // equivalent: said above
  const RunResult& s = runs[slowest];
  const RunResult& b = runs[best];
  std::string reason = " " + run_label(s, runs) + (ratio.low > 1.0 ? " is " : " looks ");
  if (host_bound(s)) reason += host_bound_words(s) + " and ";
  reason += text::format_ratio(ratio.value, ratio.value < 1.095 ? 2 : 1) + " slower";
  // Splits of different rows (packings, orders) train other data per step: compared per token,
  // and their phases per step say nothing of one another.
  const bool other_rows = s.config.rows() != b.config.rows();
  if (other_rows) reason += " per real token";
  if (with_framework) reason += " with the framework's host time";
  if (!(ratio.low > 1.0)) {
    reason += std::isfinite(ratio.high)                                      ? " (undecided: " + times_text(ratio) + " its time)"
              : decided.paired_rounds(slowest, best) >= kMinRoundsToDecide ? " (undecided: no upper bound yet)"
                                                                          : " (too few rounds to decide)";
  }
  // The table's "vs fastest" reads each split's median over the rounds it ran: where a split left
  // the rounds early and the machine's speed changed after, the two figures part (helper-110: 3.85×
  // in the table beside 1.7× here), and the sentence says which one pairs the rounds.
  if (!with_framework && !other_rows) {
    const double table = typical_step_seconds(s) / typical_step_seconds(b);
    if (std::isfinite(table) && table > 0 && (table > ratio.value * 1.25 || table * 1.25 < ratio.value)) {
      reason += " (by the medians of the rounds each ran, as the table compares them, " + text::format_ratio(table, 2) +
                ": the machine's speed changed between those rounds, and this figure pairs the rounds both ran)";
    }
  }
  const int64_t extra = s.config.accum_steps - b.config.accum_steps;
  // With a framework's host time per micro-step, the part of the gap it adds (more micro-steps, more
  // of it), said apart from the engine's: where the engine alone is no slower, the phases explain
  // nothing and are not named.
  const double engine_gap = engine.mean_difference(slowest, best);
  const double framework_gap = with_framework ? decided.mean_difference(slowest, best) - engine_gap : 0.0;
  const bool framework_explains = with_framework && framework_gap > 0 && !other_rows;
  const std::string more_steps =
      extra > 0 ? " over its " + std::to_string(extra) + (extra == 1 ? " more micro-step" : " more micro-steps") : "";
  // The framework's time is most of the gap: said first, and the engine's phases are not named.
  const bool framework_first = framework_explains && framework_gap >= engine_gap;
  if (framework_first) {
    reason += ": the framework's host time adds " + text::format_duration(framework_gap) + " per step" + more_steps +
              (engine_gap > 0 ? ", the engine " + text::format_duration(engine_gap)
                              : ", while the engine alone is " + text::format_duration(-engine_gap) + " faster");
  }
  const PhaseSeconds gaps = phase_gaps(s, b);
  int widest = -1;
  double widest_seconds = 0.0;
  for (int p = 0; p < kPhaseCount && !other_rows && !framework_first; ++p) {
    const double difference = gaps[p];
    if (difference > widest_seconds) {
      widest = p;
      widest_seconds = difference;
    }
  }
  if (widest >= 0) {
    reason += ", mostly " + phase_words(static_cast<Phase>(widest)) + " (+" + text::format_duration(widest_seconds) + ")";
  }
  if (framework_explains && !framework_first) {
    reason += "; of its gap the framework's host time is " + text::format_duration(framework_gap) + " per step" +
              more_steps + ", the engine's " + text::format_duration(engine_gap);
  }
  const TimeModel* model = time_model_of(models, slowest);
  if (model != nullptr && model == time_model_of(models, best) && extra > 0 && model->fixed_seconds > 0 &&
      model->max_relative_residual <= kLooseTimeModel) {
    const double fixed = static_cast<double>(extra) * model->fixed_seconds;
    const double gap = engine_gap;
    // The model fits each split only within its residual, so its estimate may exceed the gap, by
    // as much as that residual of the slower split's step; beyond it the model (fitted on each
    // split's own mean, over rounds the machine's load may have moved) does not explain this gap
    // (paired), and is not said to.
    if (fixed > gap + model->max_relative_residual * s.mean_seconds.value) return reason + ".";
    reason += "; " + std::to_string(extra) + (extra == 1 ? " more micro-step \u00d7 " : " more micro-steps \u00d7 ") + text::format_duration(model->fixed_seconds) +
              " of fixed cost each = " + text::format_duration(fixed) +
              (fixed < gap ? " of its " + text::format_duration(gap) + " more per step"
                           : ", the whole of its " + text::format_duration(gap) + " more per step (within the time model's fit)") +
              (with_framework ? " in the engine alone" : "");
  }
  return reason + ".";
}

// The candidates grouped by `key_of` their split (`keys`, in first-seen order) and the fastest of
// each group by mean step time, index for index; by mean time per real token where the runs differ
// in packing (compared_per_token), as the decision weighs them.
template <class Key, class KeyOf>
std::vector<int> fastest_of_each(const std::vector<RunResult>& runs, const std::vector<int>& candidates,
                                 std::vector<Key>& keys, KeyOf key_of) {
  const bool per_token = compared_per_token(runs);
  const auto compared = [&](int i) { return compared_seconds(runs[i].mean_seconds.value, runs[i], per_token); };
  std::vector<int> fastest;
  for (int i : candidates) {
    const Key key = key_of(runs[i].config);
    const auto found = std::find(keys.begin(), keys.end(), key);
    if (found == keys.end()) {
      keys.push_back(key);
      fastest.push_back(i);
    } else if (compared(i) < compared(fastest[found - keys.begin()])) {
      fastest[found - keys.begin()] = i;
    }
  }
  return fastest;
}

// With several optimizers, weights dtypes or clipping norms among the candidates: they compute
// different updates (SGD has no moments, the 8-bit ones approximate AdamW's; 16-bit weights run
// 16-bit products and, trained, round their updates; clipping scales a gradient down whenever its
// norm is above the limit), which the sweep's choice (time, then memory) does not weigh; the fastest
// candidate of each, so that the user weighs the update against its cost. Empty with one of each.
std::string per_update_sentence(const std::vector<RunResult>& runs, const std::vector<int>& candidates) {
  using Update = std::tuple<OptimizerKind, Precision, Precision, double>;  // optimizer, weights, adapters, clipping
  std::vector<Update> updates;
  const std::vector<int> fastest = fastest_of_each(runs, candidates, updates, [](const SplitConfig& c) {
    return Update{c.optimizer, c.weights_dtype, c.adapter_dtype, c.max_grad_norm};
  });
  if (updates.size() < 2) return "";
  bool optimizers = false, weights = false, adapters = false, clipping = false;
  for (const Update& u : updates) {
    optimizers = optimizers || std::get<0>(u) != std::get<0>(updates[0]);
    weights = weights || std::get<1>(u) != std::get<1>(updates[0]);
    adapters = adapters || std::get<2>(u) != std::get<2>(updates[0]);
    clipping = clipping || std::get<3>(u) != std::get<3>(updates[0]);
  }
  std::string list;
  for (size_t k = 0; k < updates.size(); ++k) {
    const RunResult& run = runs[fastest[k]];
    // Named as run_label names it, less what leads: the optimizer, then "on bf16 weights", "with
    // bf16 adapters", then the clipping ("no-clip", "clip1").
    std::string lead = optimizers ? to_string(std::get<0>(updates[k])) : "";
    if (weights) lead += (lead.empty() ? "" : " on ") + to_string(std::get<1>(updates[k])) + " weights";
    if (adapters) lead += (lead.empty() ? "" : " with ") + to_string(std::get<2>(updates[k])) + " adapters";
    if (clipping) lead += (lead.empty() ? "" : " ") + clipping_word(std::get<3>(updates[k]));
    list += (k == 0 ? "" : ", ") + lead + " " + run.config.shape_label() + precision_suffix(run, runs) +
            rows_suffix(run, runs) + padding_suffix(run, runs) + " (" +
            seconds_text(run.mean_seconds.value) + ", " + format_bytes(run.peak_allocated_bytes) +
            (bitsandbytes_optimizer(std::get<0>(updates[k])) ? "; time emulated" : "") + ")";
  }
  const std::string dtypes = weights && adapters ? "weights and adapter dtypes"
                             : weights             ? "weights dtypes"
                             : adapters            ? "adapter dtypes"
                                                   : "";
  std::vector<std::string> parts;
  if (optimizers) parts.push_back("optimizers");
  if (!dtypes.empty()) parts.push_back(dtypes);
  if (clipping) parts.push_back("clipping norms (--max-grad-norm)");
  std::string subject = "The " + parts.front();
  for (size_t k = 1; k < parts.size(); ++k) subject += (k + 1 == parts.size() ? " and the " : ", the ") + parts[k];
  subject += parts.size() == 1 && !dtypes.empty() ? " compute in different precision" : " compute different updates";
  std::string why;
  if (weights) {
    why = "16-bit weights without autocast run 16-bit products, and a full fine-tune of them updates them in 16 bits, "
          "where a step below a weight's rounding is lost";
  }
  if (adapters) {
    why += std::string(why.empty() ? "" : "; ") +
           "bf16 adapters keep their gradients and updates in bf16, summed in bf16 across micro-steps";
  }
  if (clipping) {
    why += std::string(why.empty() ? "" : "; ") +
           "clipping scales the step's gradient down whenever its global norm is above the limit";
  }
  if (!why.empty()) why = " (" + why + ")";
  return " " + subject + why + ", which the choice above does not weigh; the fastest split of each, by its mean step: " + list + ".";
}

// With several packings or orders among the candidates (--packing's, --group-by-length's lists): a
// packed row holds several samples, and a grouped step samples of like length, so a step of each
// trains on other data, and the choice above weighed the splits per real token
// (compared_per_token), as an epoch of the data would take them; the fastest candidate of each with
// its step time and tokens per second. Empty with one of each.
std::string per_rows_sentence(const std::vector<RunResult>& runs, const std::vector<int>& candidates) {
  std::vector<StepRows> rows;
  const std::vector<int> fastest = fastest_of_each(runs, candidates, rows, [](const SplitConfig& c) { return c.rows(); });
  if (rows.size() < 2) return "";
  const bool packings = std::any_of(rows.begin(), rows.end(), [&](const StepRows& r) { return r.packing != rows[0].packing; });
  const bool orders = std::any_of(rows.begin(), rows.end(), [&](const StepRows& r) { return r.grouped != rows[0].grouped; });
  std::string list;
  for (size_t k = 0; k < rows.size(); ++k) {
    const RunResult& run = runs[fastest[k]];
    const double tokens_per_second =
        real_tokens_per_step(run) > 0 ? real_tokens_per_step(run) / run.mean_seconds.value : run.tokens_per_second;
    list += (k == 0 ? "" : ", ") + run_label(run, runs) + " (" + seconds_text(run.mean_seconds.value) + " per step, " +
            text::format_count(tokens_per_second) + " tokens/s, " + format_bytes(run.peak_allocated_bytes) + ")";
  }
  const std::string packed = "The packings (--packing) put other amounts of data in a step (a packed row holds several "
                             "samples, so its step averages more of them: an update of its own)";
  const std::string ordered = "orders (--group-by-length) put other samples in a step (a grouped step holds samples of "
                              "like length, a random one any: each step an update of its own)";
  const std::string subject = packings && orders ? packed + ", and the " + ordered
                              : packings         ? packed
                                                 : "The " + ordered;
  return " " + subject + ", so the splits are compared per real token, as an epoch of the data takes them, and each "
         "ratio above is per token; the fastest split of each, by its mean step: " + list + ".";
}

// With several paddings among the candidates (--padding's list): they compute the same update from
// the same samples, so the choice above is among them all; the fastest candidate of each, so that
// the user sees what each padding costs at its best split. Empty with one padding.
std::string per_padding_sentence(const std::vector<RunResult>& runs, const std::vector<int>& candidates) {
  std::vector<PaddingChoice> paddings;
  const std::vector<int> fastest =
      fastest_of_each(runs, candidates, paddings, [](const SplitConfig& c) { return c.padding; });
  if (paddings.size() < 2) return "";
  std::string list;
  for (size_t k = 0; k < paddings.size(); ++k) {
    const RunResult& run = runs[fastest[k]];
    list += (k == 0 ? "" : ", ") + run_label(run, runs) + " (" + seconds_text(run.mean_seconds.value) + ", " +
            format_bytes(run.peak_allocated_bytes) + ")";
  }
  return " The paddings (--padding) compute the same update from the same samples, so the choice is among them all; "
         "the fastest split of each, by its mean step: " + list + ".";
}

}  // namespace

Recommendation recommend(const std::vector<RunResult>& runs, int64_t memory_limit_bytes, const DecisionOptions& options) {
  Recommendation rec;
  std::vector<int> ok;          // ran and has timed steps
  std::vector<int> candidates;  // ... and fits the memory limit
  for (int i = 0; i < static_cast<int>(runs.size()); ++i) {
    const RunResult& run = runs[i];
    if (run.status != RunStatus::kOk || run.steps.empty() || !std::isfinite(run.mean_seconds.value)) continue;
    ok.push_back(i);
    if (memory_limit_bytes <= 0 || run.fits) candidates.push_back(i);
  }
  if (candidates.empty()) {
    rec.reason = no_success_reason(runs, ok, memory_limit_bytes, options.memory_advice);
    return rec;
  }
  const RoundEvidence evidence = evidence_from_runs(runs, options.confidence, options.framework_seconds_per_micro_step);
  // The engine's step times as timed, for differences in seconds per step: the decision's evidence
  // unless it adds a framework's time or weighs the splits per real token (a --packing list).
  const bool with_framework = options.framework_seconds_per_micro_step > 0;
  std::optional<RoundEvidence> as_timed;
  if (with_framework || compared_per_token(runs)) {
    as_timed.emplace(evidence_from_runs(runs, options.confidence, 0, /*as_timed=*/true));
  }
  Decision d = decide(evidence, candidates, options);
  // The rounds of the latest sweep (a resumed file also holds an earlier one's, numbered from 0): the
  // largest session stamp, the wall clock at its start.
  int64_t latest = 0;
  for (int i : candidates) {
    for (const StepSample& s : runs[i].steps) latest = std::max(latest, session_of(runs[i], s));
  }
  d.rounds = 0;
  for (int i : candidates) {
    for (const StepSample& s : runs[i].steps) {
      if (session_of(runs[i], s) == latest) d.rounds = std::max<int64_t>(d.rounds, s.round + 1);
    }
  }

  std::vector<int> ties = {d.fastest};
  for (const Comparison& c : d.comparisons) {
    if (c.verdict == Verdict::kEquivalent) ties.push_back(c.index);
  }
  // Among ties: lowest peak memory, then the faster (per real token where the packings differ).
  const bool per_token = compared_per_token(runs);
  const auto faster = [&](int a, int b) {
    return per_token ? evidence.mean_seconds(a).value < evidence.mean_seconds(b).value
                     : runs[a].mean_seconds.value < runs[b].mean_seconds.value;
  };
  int best = ties.front();
  for (int i : ties) {
    const RunResult& a = runs[i];
    const RunResult& b = runs[best];
    if (a.peak_allocated_bytes < b.peak_allocated_bytes ||
        (a.peak_allocated_bytes == b.peak_allocated_bytes && faster(i, best))) {
      best = i;
    }
  }
  std::sort(ties.begin(), ties.end());
  rec.best_index = best;
  rec.tied_indices = ties;
  rec.decision = d;
  // Among the candidates only: a split over the memory limit is no option to compare with.
  rec.reason = why_chosen(runs, d, ties, best, memory_limit_bytes, evidence, with_framework, options) +
               what_the_slowest_loses(runs, candidates, best, fit_time_models(runs), evidence,
                                      as_timed ? *as_timed : evidence, d.tie_tolerance, with_framework) +
               per_update_sentence(runs, candidates) + per_rows_sentence(runs, candidates) +
               per_padding_sentence(runs, candidates) + " " +
               framework_sentence(options.framework_seconds_per_micro_step, options.framework_source);
  return rec;
}

}  // namespace accumbench
