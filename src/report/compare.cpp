// `accumbench compare a.json b.json`: two sweeps side by side (two devices, two builds, before
// and after a change), one row per split.
#include <algorithm>
#include <set>
#include <cmath>
#include <exception>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "accumbench/report.hpp"
#include "accumbench/statistics.hpp"
#include "report/columns.hpp"
#include "report/format.hpp"

namespace accumbench {

namespace {

const RunResult* find_run(const SweepResult& sweep, const std::string& key) {
  for (const RunResult& run : sweep.runs) {
    if (run.config.key() == key) return &run;
  }
  return nullptr;
}

// The two measurements compared, read through the column table (columns.cpp).
double step_seconds(const RunResult& run) { return report::column("step_seconds").number(run); }
double peak_bytes(const RunResult& run) { return report::column("peak").number(run); }

// A missing split is "-"; a split that failed shows why (its status), not a blank.
std::string step_cell(const RunResult* run) {
  if (run == nullptr) return "-";
  if (run->status != RunStatus::kOk) return run_status_name(run->status);
  return text::format_significant(step_seconds(*run), 3);
}

std::string peak_cell(const RunResult* run) {
  if (run == nullptr) return "-";
  return report::cell_text(report::column("peak"), report::View::kConsole, *run, {});
}

bool usable(const RunResult* run) { return run != nullptr && run->status == RunStatus::kOk; }

// Whether a step of the two trains different real tokens (packing puts several samples in a row,
// another lengths file or T other samples): then their step times do not compare, tokens/s does.
// A tenth apart or more: over samples the mean moves with the steps a split timed (one job on the
// chat lengths, 5 steps against 50: 2.6 %); padding, which adds no real token, does not count.
constexpr double kOtherTokens = 0.10;

bool tokens_differ(const RunResult* a, const RunResult* b) {
  if (!usable(a) || !usable(b) || a->tokens_per_step <= 0 || b->tokens_per_step <= 0) return false;
  const double x = a->tokens_per_step, y = b->tokens_per_step;
  return std::abs(x - y) >= kOtherTokens * std::max(x, y);
}

std::string tokens_cell(const RunResult* run) {
  if (run == nullptr) return "-";
  if (run->status != RunStatus::kOk) return run_status_name(run->status);
  return text::format_count(run->tokens_per_second);
}

// Whether B's median differs from A's beyond the noise: "yes" when the two medians' bootstrap 95 %
// intervals do not overlap, "unsure" when they do (it may be noise: the sweeps were timed apart,
// so no paired rounds can tell more), "-" below kStepsToCompare timed steps on a side or when one
// did not run. With few steps the bootstrap interval is the steps' whole range, and two ranges of
// the same noise miss each other by chance: 1 in 3 with 2 steps each, 1 in 10 with 3, 1 in 126
// with 5 (two of the C(10, 5) orders of ten steps).
constexpr int64_t kStepsToCompare = 5;

// `per_token`: the two steps train different tokens (tokens_differ), so the intervals compared are
// of tokens/s, the step's real tokens over each end of the step time's interval.
// Both hold the very same timed steps (a file and its copy, or rows a --resume kept as they were).
bool same_steps(const RunResult* a, const RunResult* b) {
  if (!usable(a) || !usable(b) || a->steps.empty() || a->steps.size() != b->steps.size()) return false;
  for (size_t i = 0; i < a->steps.size(); ++i) {
    const StepSample &x = a->steps[i], &y = b->steps[i];
    if (x.step_seconds != y.step_seconds || session_of(*a, x) != session_of(*b, y) || x.round != y.round) return false;
  }
  return true;
}

std::string differs_cell(const RunResult* a, const RunResult* b, bool per_token) {
  if (!usable(a) || !usable(b)) return "-";
  if (same_steps(a, b)) return "same";
  // A run whose steps differ in size is compared at its mean step, with the rounds' interval of it
  // (typical_step_seconds), as its table row reads.
  const auto compared = [](const RunResult& run) {
    Summary s = run.step_seconds;
    if (steps_differ_in_size(run)) s.ci_low = run.mean_seconds.low, s.ci_high = run.mean_seconds.high;
    return s;
  };
  const Summary x = compared(*a);
  const Summary y = compared(*b);
  if (x.count < kStepsToCompare || y.count < kStepsToCompare) return "-";
  if (!std::isfinite(x.ci_low) || !std::isfinite(x.ci_high) || !std::isfinite(y.ci_low) || !std::isfinite(y.ci_high)) {
    return "-";
  }
  if (!per_token) return y.ci_low > x.ci_high || y.ci_high < x.ci_low ? "yes" : "unsure";
  if (!(x.ci_low > 0) || !(y.ci_low > 0)) return "-";
  const double ta = a->tokens_per_step, tb = b->tokens_per_step;
  return tb / y.ci_high > ta / x.ci_low || tb / y.ci_low < ta / x.ci_high ? "yes" : "unsure";
}

// Options that change how long a sweep measured or how it decided, not what it measured.
bool decides_only(const std::string& name) {
  // (The warm-up is not among them: it changes what a timed step finds, the caches and the
  // allocator's pool, so --resume refuses another one.)
  return name == "steps" || name == "time_budget_seconds" || name == "tie_tolerance" ||
         name == "confidence" || name == "memory_limit_bytes" || name == "try_predicted_oom" ||
         name == "profile_dir" || name == "peak_tflops" || name == "dist_timeout_seconds";
}

std::string describe(const SweepResult& sweep) {
  const SweepContext& c = sweep.context;
  std::string line = c.device_name.empty() ? c.device : c.device_name;
  line += ", model " + c.model + ", T=" + std::to_string(c.seq_len) + ", batch " +
          std::to_string(c.batch);
  if (c.world_size > 1) line += " over " + std::to_string(c.world_size) + " ranks";
  if (!c.git_commit.empty()) line += ", commit " + c.git_commit;
  if (!c.date.empty()) line += ", " + c.date;
  return line;
}

// The items of a comma list, sorted.
std::vector<std::string> sorted_items(const std::string& list) {
  std::vector<std::string> items;
  std::istringstream in(list);
  for (std::string item; std::getline(in, item, ',');) items.push_back(item);
  std::sort(items.begin(), items.end());
  return items;
}

bool on_cuda(const SweepContext& c) { return names_cuda(c.device); }

// Two devices, the comparison compare is most often for: said, so that the ratios read as the
// devices' and not as a change of the engine.
std::string device_note(const SweepContext& a, const SweepContext& b) {
  const std::string x = a.device_name.empty() ? a.device : a.device_name;
  const std::string y = b.device_name.empty() ? b.device : b.device_name;
  if (x == y) return "";
  return "note: the two sweeps ran on other devices (" + text::shortened(x, 60) + " vs " + text::shortened(y, 60) +
         "); the ratios compare the devices, with whatever else differs";
}

// Two CPU sweeps run with different threads or OpenMP wait policies: their times differ by that too
// (PASSIVE against ACTIVE made steps 2.5–4× apart on 2 cores), which a comparison of two builds or
// two machines would otherwise read as theirs. Empty where they agree or either ran on CUDA.
std::string cpu_settings_note(const SweepContext& a, const SweepContext& b) {
  if (on_cuda(a) || on_cuda(b)) return "";
  std::vector<std::string> differences;
  if (a.threads > 0 && b.threads > 0 && a.threads != b.threads)
    differences.push_back("threads (" + std::to_string(a.threads) + " vs " + std::to_string(b.threads) + ")");
  const std::optional<std::string> x = recorded_option(a.options, "OMP_WAIT_POLICY");
  const std::optional<std::string> y = recorded_option(b.options, "OMP_WAIT_POLICY");
  if (x && y && text::upper(*x) != text::upper(*y)) differences.push_back("OMP_WAIT_POLICY (" + *x + " vs " + *y + ")");
  if (differences.empty()) return "";
  std::string text = differences.front();
  if (differences.size() > 1) text += ", " + differences.back();
  return "note: the two sweeps ran with other CPU settings: " + text +
         "; every step's time depends on them, so the ratios measure them too";
}

// Two sweeps of other --micro-batches lists: each split is compared where both measured it, and a
// split of one alone is shown with the other side empty. Empty where the lists hold the same.
// B a --resume of A (or A of B): its splits hold the other's timed steps (each step records the
// sweep that timed it), so the two are not independent measurements (helper-99). Empty otherwise.
std::string shared_steps_note(const SweepResult& a, const SweepResult& b) {
  const auto sessions = [](const SweepResult& r) {
    std::set<int64_t> out;
    for (const RunResult& run : r.runs) {
      for (const StepSample& step : run.steps) {
        if (const int64_t session = session_of(run, step); session != 0) out.insert(session);
      }
    }
    return out;
  };
  const auto shared_in = [](const SweepResult& r, const std::set<int64_t>& others) {
    int64_t shared = 0, all = 0;
    for (const RunResult& run : r.runs) {
      for (const StepSample& step : run.steps) {
        ++all;
        if (others.count(session_of(run, step)) > 0) ++shared;
      }
    }
    return std::make_pair(shared, all);
  };
  const auto [in_b, of_b] = shared_in(b, sessions(a));
  const auto [in_a, of_a] = shared_in(a, sessions(b));
  if (in_b == 0 && in_a == 0) return "";
  if (in_b == of_b && in_a == of_a) {
    return "note: A and B hold the same sweep's timed steps (one file and its copy, or a --resume that timed nothing "
           "more): every pair compares a run with itself";
  }
  // The continuation is the file whose steps are not all shared (it timed more): every step of the
  // file it continues is in it (helper-101: "B holds 8 of its 8" named the original).
  const bool b_holds = in_a == of_a ? true : in_b == of_b ? false : in_b * of_a <= in_a * of_b;
  const int64_t shared = b_holds ? in_b : in_a, all = b_holds ? of_b : of_a;
  return std::string("note: ") + (b_holds ? "B" : "A") + " holds " + std::to_string(shared) + " of its " +
         std::to_string(all) + " timed steps from " + (b_holds ? "A" : "B") +
         "'s sweep (a --resume continues its file), so the two are not independent measurements: their "
         "differences are the later steps' alone, diluted; compare sweeps run apart to tell a change";
}

std::string micro_batches_note(const SweepContext& a, const SweepContext& b) {
  // "all divisors" is a list too: every divisor of a rank's share of the batch.
  const auto listed = [](const SweepContext& c) {
    const std::optional<std::string> value = recorded_option(c.options, "micro_batches");
    if (!value || *value != "all divisors" || c.world_size < 1 || c.batch % c.world_size != 0) {
      return value ? sorted_items(*value) : std::vector<std::string>{};
    }
    std::string every;
    for (const int64_t d : divisors(c.batch / c.world_size)) every += (every.empty() ? "" : ",") + std::to_string(d);
    return sorted_items(every);
  };
  const std::optional<std::string> x = recorded_option(a.options, "micro_batches");
  const std::optional<std::string> y = recorded_option(b.options, "micro_batches");
  if (!x || !y || listed(a) == listed(b)) return "";
  // "all divisors" says which (helper-95: "all divisors vs all divisors" of two batches).
  const auto shown = [&](const SweepContext& c, const std::string& value) {
    if (value != "all divisors") return text::shortened(value, 40);
    std::string items;
    for (const std::string& item : listed(c)) items += (items.empty() ? "" : ",") + item;
    return text::shortened("all divisors of " + std::to_string(c.batch / std::max(1, c.world_size)) + ": " + items, 60);
  };
  return "note: the two sweeps measured other micro-batches (" + shown(a, *x) + " vs " + shown(b, *y) +
         "): each split is compared where both measured it, one that only one measured has the other side empty";
}

// The per-micro-step host time of a Python loop each sweep's decision added (--framework-overhead),
// which changes the recommendation, not the steps measured. Empty where they agree.
std::string framework_difference(const SweepContext& a, const SweepContext& b) {
  const double x = a.framework_seconds_per_micro_step, y = b.framework_seconds_per_micro_step;
  if (x == y || (std::isnan(x) && std::isnan(y))) return "";
  const auto ms = [](double seconds) {
    return (seconds == 0 ? std::string("0") : text::format_significant(seconds * 1e3, 3)) + " ms";
  };
  return "framework overhead (" + ms(x) + " vs " + ms(y) + " per micro-step)";
}

// What differs between the two sweeps' configurations, "model (a vs b), seq_len (...)"; empty when
// they measured the same thing (compare is meant for two devices or two builds of one sweep).
// `deciding`: the options that only change how long they measured or how they decided
// (decides_only) instead of the others.
std::string configuration_differences(const SweepContext& a, const SweepContext& b, bool deciding = false) {
  std::vector<std::string> differences;
  const auto differ = [&](const std::string& name, const std::string& x, const std::string& y) {
    if (x != y) differences.push_back(name + " (" + text::shortened(x, 40) + " vs " + text::shortened(y, 40) + ")");
  };
  if (!deciding) {
    differ("model", a.model, b.model);
    differ("seq_len", std::to_string(a.seq_len), std::to_string(b.seq_len));
    differ("batch", std::to_string(a.batch), std::to_string(b.batch));
    differ("world_size", std::to_string(a.world_size), std::to_string(b.world_size));
  }
  // A's options, then those only B has; one recorded only when set (--base-quant, --kbit-prep)
  // stands for its default on the side that left it out.
  const bool on_cpus = !on_cuda(a) && !on_cuda(b);
  for (const std::string& name : option_names(a.options, b.options)) {
    if (name == "model" || name == "seq_len" || name == "batch" || name == "device" || name == "OMP_WAIT_POLICY" ||
        name == "threads" || name == "memory_judged_on" || (name == "tf32" && on_cpus) || name == "micro_batches") {
      // Named above, a property of the machine rather than of the measurement (cpu_settings_note),
      // words derived from options compared themselves (the lengths, the padding), TF32 where it
      // acts on nothing, or the splits measured, which never share a row (micro_batches_note).
      continue;
    }
    if (decides_only(name) != deciding) continue;
    const std::optional<std::string> x = recorded_option(a.options, name), y = recorded_option(b.options, name);
    if (!x || !y) continue;
    // A grid dimension's list measures the same splits in any order: "fp32,bf16" is "bf16,fp32".
    const bool list = name == "precisions" || name == "optimizer" || name == "weights_dtype" ||
                      name == "adapter_dtype" || name == "max_grad_norm" || name == "padding" ||
                      name == "packing" || name == "group_by_length";
    if (list && sorted_items(*x) == sorted_items(*y)) continue;
    if (name == "memory_limit_bytes") {  // in the units a limit is given in; 0: none
      const auto limit = [](const std::string& bytes) {
        try {
          const int64_t value = std::stoll(bytes);
          return value > 0 ? format_bytes(value) : std::string("none");
        } catch (const std::exception&) {
          return bytes;
        }
      };
      differ("--memory-limit", limit(*x), limit(*y));
      continue;
    }
    differ(name, *x, *y);
  }
  std::string text;
  for (size_t i = 0; i < differences.size() && i < 6; ++i) text += (i ? ", " : "") + differences[i];
  if (differences.size() > 6) text += ", and " + std::to_string(differences.size() - 6) + " more";
  return text;
}

}  // namespace

// How a sweep's recommendation was reached, in a word or two: "decided in 12 rounds", "tied with
// 2 others", "undecided after 40 rounds", "the only split measured".
std::string decision_words(const Recommendation& r) {
  const Decision& d = r.decision;
  const std::string rounds = std::to_string(d.rounds) + (d.rounds == 1 ? " round" : " rounds");
  switch (d.kind) {
    case DecisionKind::kOnly: return "the only split measured";
    case DecisionKind::kFastest: return "decided in " + rounds;
    case DecisionKind::kTie: {
      const size_t others = r.tied_indices.empty() ? 0 : r.tied_indices.size() - 1;
      return "tied with " + std::to_string(others) + (others == 1 ? " other" : " others") + " in " + rounds;
    }
    case DecisionKind::kUndecided: return "undecided after " + rounds;
    case DecisionKind::kNone: break;
  }
  return "fastest by its table";  // files before the decision was recorded
}

// Each sweep's recommended split, and where they differ what may explain it: an undecided
// recommendation, a busy machine (either moves a close decision from one sweep to the next), or
// different configurations.
void print_recommendations(const SweepResult& a, const SweepResult& b,
                           const std::function<std::string(const SplitConfig&)>& cell, std::ostream& out) {
  const auto best = [](const SweepResult& sweep) -> const RunResult* {
    const int i = sweep.recommendation.best_index;
    return i >= 0 && i < static_cast<int>(sweep.runs.size()) ? &sweep.runs[static_cast<size_t>(i)] : nullptr;
  };
  const RunResult* best_a = best(a);
  const RunResult* best_b = best(b);
  const auto words = [&](const SweepResult& sweep, const RunResult* run) {
    return run == nullptr ? std::string("none (no split ran)") : cell(run->config) + " (" + decision_words(sweep.recommendation) + ")";
  };
  out << "recommended: A " << words(a, best_a) << ", B " << words(b, best_b) << "\n";
  const std::string busy_a = busy_machine_note(a.context), busy_b = busy_machine_note(b.context);
  if (!busy_a.empty() || !busy_b.empty()) {
    // Each note's first clause, up to its measure in parentheses; one shared consequence.
    const auto clause = [](const std::string& note) { return note.substr(0, note.find("): ") + 1); };
    out << "note: ";
    if (!busy_a.empty()) out << "A: " << clause(busy_a) << (busy_b.empty() ? "" : "; ");
    if (!busy_b.empty()) out << "B: " << clause(busy_b);
    out << ": the steps took turns on the cores, which moves their times from round to round and can turn a close "
           "decision from one sweep to the next\n";
  }
  if (best_a == nullptr || best_b == nullptr || best_a->config.key() == best_b->config.key()) return;
  // Does either sweep count the other's pick among its equals?
  const auto tied_in = [](const SweepResult& sweep, const std::string& key) {
    for (int i : sweep.recommendation.tied_indices) {
      if (i >= 0 && i < static_cast<int>(sweep.runs.size()) && sweep.runs[static_cast<size_t>(i)].config.key() == key)
        return true;
    }
    return false;
  };
  std::vector<std::string> why;
  if (tied_in(a, best_b->config.key()) || tied_in(b, best_a->config.key()))
    why.push_back("one sweep ties the other's pick with its own");
  for (const auto& [name, sweep] : {std::pair<const char*, const SweepResult*>{"A", &a}, {"B", &b}}) {
    if (sweep->recommendation.decision.kind == DecisionKind::kUndecided)
      why.push_back(std::string(name) + "'s is undecided");
  }
  if (!busy_a.empty() || !busy_b.empty())
    why.push_back(std::string(!busy_a.empty() && !busy_b.empty() ? "both machines were" : !busy_a.empty() ? "A's machine was" : "B's machine was") +
                  " busy");
  if (!configuration_differences(a.context, b.context).empty()) why.push_back("they measured different configurations");
  out << "note: the two sweeps recommend different splits";
  if (why.empty()) {
    out << ": both decided, on idle machines, from the same configuration; the rows above show where their step times "
           "part\n";
    return;
  }
  out << ": ";
  for (size_t i = 0; i < why.size(); ++i) out << (i == 0 ? "" : "; ") << why[i];
  const bool undecided = a.recommendation.decision.kind == DecisionKind::kUndecided ||
                         b.recommendation.decision.kind == DecisionKind::kUndecided;
  out << (undecided ? " (a --resume with a --time-budget times the undecided more rounds)" : "") << "\n";
}

void print_comparison(const SweepResult& a, const SweepResult& b, std::ostream& out) {
  // A's order first, then splits only B has, so a sweep compared with itself reads top to bottom.
  std::vector<std::string> keys;
  const auto add_key = [&keys](const std::string& key) {
    for (const std::string& k : keys) {
      if (k == key) return;
    }
    keys.push_back(key);
  };
  for (const RunResult& run : a.runs) add_key(run.config.key());
  for (const RunResult& run : b.runs) add_key(run.config.key());

  // Precision and world size are part of the key; each only needs a place in the split cell when
  // it differs, and then reads as the other reports write it ("2×2 bf16", "2×2 world 2").
  bool mixed_precision = false;
  bool mixed_world = false;
  bool mixed_clipping = false;
  bool mixed_padding = false, mixed_packing = false, mixed_grouping = false;
  const SplitConfig* first = nullptr;
  for (const SweepResult* sweep : {&a, &b}) {
    for (const RunResult& run : sweep->runs) {
      if (first == nullptr) first = &run.config;
      mixed_precision = mixed_precision || run.config.precision != first->precision;
      mixed_world = mixed_world || run.config.world_size != first->world_size;
      mixed_clipping = mixed_clipping || run.config.max_grad_norm != first->max_grad_norm;
      mixed_padding = mixed_padding || run.config.padding != first->padding;
      mixed_packing = mixed_packing || run.config.packing != first->packing;
      mixed_grouping = mixed_grouping || run.config.group_by_length != first->group_by_length;
    }
  }
  const auto split_cell = [&](const SplitConfig& config) {
    std::string cell = config.label();
    if (mixed_precision) cell += " " + to_string(config.precision);
    if (mixed_clipping) cell += " " + clipping_word(config.max_grad_norm);
    if (mixed_packing) cell += " " + packing_word(config.packing);
    if (mixed_grouping) cell += " " + grouping_word(config.group_by_length);
    if (mixed_padding) cell += " " + padding_word(config.padding);
    if (mixed_world) cell += " world " + std::to_string(config.world_size);
    return cell;
  };

  // The first pair whose steps train different tokens: the table then compares tokens/s too.
  const RunResult *tokens_a = nullptr, *tokens_b = nullptr;
  for (const std::string& key : keys) {
    const RunResult *ra = find_run(a, key), *rb = find_run(b, key);
    if (tokens_a == nullptr && tokens_differ(ra, rb)) tokens_a = ra, tokens_b = rb;
  }
  const bool by_tokens = tokens_a != nullptr;

  using text::Align;
  std::vector<text::Column> columns = {{"split", Align::kLeft},   {"A step s", Align::kRight},
                                                  {"B step s", Align::kRight}, {"B/A", Align::kRight},
                                                  {"differs", Align::kLeft}};
  if (by_tokens) {
    for (const char* name : {"A tokens/s", "B tokens/s", "B/A"}) columns.push_back({name, Align::kRight});
  }
  for (const char* name : {"A peak", "B peak", "B/A"}) columns.push_back({name, Align::kRight});
  text::TextTable table(columns);
  for (const std::string& key : keys) {
    const RunResult* ra = find_run(a, key);
    const RunResult* rb = find_run(b, key);
    const RunResult* any = ra != nullptr ? ra : rb;
    const bool both = usable(ra) && usable(rb);
    const std::string step_ratio = both ? text::format_ratio(step_seconds(*rb) / step_seconds(*ra), 2) : "-";
    const std::string peak_ratio =
        both && peak_bytes(*ra) > 0 ? text::format_ratio(peak_bytes(*rb) / peak_bytes(*ra), 2) : "-";
    std::vector<std::string> row = {split_cell(any->config), step_cell(ra), step_cell(rb), step_ratio,
                                    differs_cell(ra, rb, tokens_differ(ra, rb))};
    if (by_tokens) {
      row.push_back(tokens_cell(ra));
      row.push_back(tokens_cell(rb));
      row.push_back(both && ra->tokens_per_second > 0 ? text::format_ratio(rb->tokens_per_second / ra->tokens_per_second, 2)
                                                      : "-");
    }
    for (const std::string& cell : {peak_cell(ra), peak_cell(rb), peak_ratio}) row.push_back(cell);
    table.add_row(row);
  }

  out << "A: " << describe(a) << '\n' << "B: " << describe(b) << "\n";
  const std::string differences = configuration_differences(a.context, b.context);
  if (!differences.empty()) out << "warning: the two sweeps measured different configurations: " << differences << "\n";
  for (const std::string& note : {device_note(a.context, b.context), cpu_settings_note(a.context, b.context),
                                  micro_batches_note(a.context, b.context), shared_steps_note(a, b)}) {
    if (!note.empty()) out << note << "\n";
  }
  std::string deciding = configuration_differences(a.context, b.context, /*deciding=*/true);
  const std::string framework = framework_difference(a.context, b.context);
  if (!framework.empty()) deciding += (deciding.empty() ? "" : ", ") + framework;
  if (!deciding.empty()) {
    // With several distinct steps of data, rounds train step after step of it: a sweep of fewer
    // rounds met fewer of them (the grouped order's longest first), and its steps' tokens may say so.
    const bool steps_differ = recorded_option(a.context.options, "steps") != recorded_option(b.context.options, "steps");
    // Recorded only where given (recorded_option reads a default into a file without it).
    const auto distinct_steps_given = [](const SweepContext& c) {
      return std::any_of(c.options.begin(), c.options.end(), [](const auto& o) { return o.first == "distinct_steps"; });
    };
    if (steps_differ && (distinct_steps_given(a.context) || distinct_steps_given(b.context))) {
      out << "note: the two sweeps differ in how long they measured or how they decided: " << deciding
          << "; under --distinct-steps each round trains the next step of the data, so a sweep of fewer rounds "
             "than the data has steps timed only the first of them";
      if (by_tokens) {
        out << ", and the same split's steps trained other tokens (" << split_cell(tokens_a->config) << ": "
            << text::format_count(tokens_a->tokens_per_step) << " against " << text::format_count(tokens_b->tokens_per_step)
            << " a step): compare the tokens/s";
      }
      out << "\n";
    } else {
      out << "note: the two sweeps differ in how long they measured or how they decided, not in what they measured: "
          << deciding << "\n";
    }
  }
  // A stopped sweep's splits may have fewer timed steps than the other's, or none.
  for (const auto& [name, result] : {std::pair<const char*, const SweepResult*>{"A", &a}, {"B", &b}}) {
    const Interruption& stop = result->interruption;
    if (stop.whole()) {
      // A --resume with shorter lists keeps what the file had not finished outside them (a stopped
      // sweep's splits, or runs short of a --steps raised since).
      int64_t steps = 0;
      try {
        steps = std::stoll(recorded_option(result->context.options, "steps").value_or("0"));
      } catch (const std::exception&) {  // a file without a readable --steps: no run is short of it
      }
      size_t short_runs = 0;
      for (const RunResult& run : result->runs) {
        if (run.status == RunStatus::kOk && static_cast<int64_t>(run.steps.size()) < steps) ++short_runs;
      }
      if (short_runs == 0 && stop.splits_not_run.empty()) continue;
      out << "warning: " << name << " keeps splits outside its last sweep's lists that are not measured to its --steps ("
          << short_runs << " short of --steps, " << stop.splits_not_run.size()
          << " never begun); its recommendation names them, and --resume with their lists finishes them\n";
      continue;
    }
    out << "warning: " << name
        << (!stop.signal.empty() ? " was interrupted by " + stop.signal
            : !stop.error.empty() ? std::string(" was stopped by an error")
                                  : std::string(" was saved while its sweep ran, which did not reach its end"));
    if (!stop.splits_not_run.empty()) {
      out << " (" << stop.splits_not_run.size() << (stop.splits_not_run.size() == 1 ? " split" : " splits")
          << " not begun)";
    }
    out << "; its splits may have fewer timed steps than --steps, and --resume finishes it\n";
  }
  // No row pairs up: the splits' keys carry the precision, the optimizer and the dtypes, so two
  // sweeps that differ in one of those have nothing to divide. One sweep of both measures them in
  // paired rounds.
  const bool any_pair = std::any_of(a.runs.begin(), a.runs.end(),
                                    [&](const RunResult& run) { return find_run(b, run.config.key()) != nullptr; });
  const bool none_pairs = !any_pair && !a.runs.empty() && !b.runs.empty();
  if (none_pairs && mixed_world) {
    out << "note: no split was measured in both: their data-parallel world sizes differ, and a split is "
           "micro-batch × accumulation per rank; each sweep's own recommendation names its fastest split\n";
  } else if (none_pairs && a.context.batch != b.context.batch) {
    out << "note: no split was measured in both: their batches differ (" << a.context.batch << " vs "
        << b.context.batch << "), and a split is micro-batch × accumulation of its own batch; each sweep's own "
        << "recommendation names its fastest split\n";
  } else if (none_pairs) {
    out << "note: no split was measured in both (a split is named by its shape, precision, optimizer, dtypes, "
           "clipping, packing, grouping and padding); to compare them, sweep them together (--precision, --optimizer, "
           "--weights-dtype, --adapter-dtype, --max-grad-norm, --packing, --group-by-length and --padding take "
           "lists), which times them in paired rounds\n";
  }
  if (by_tokens) {
    out << "note: a step of B trains other tokens than a step of A (" << text::format_count(tokens_b->tokens_per_step)
        << " vs " << text::format_count(tokens_a->tokens_per_step) << " real tokens per step at "
        << split_cell(tokens_a->config)
        << "), so their step times do not compare; tokens/s does (an epoch takes its real tokens divided by "
           "tokens/s)\n";
  }
  out << "\n";
  table.render(out);
  bool any_same = false;
  for (const std::string& key : keys) any_same = any_same || same_steps(find_run(a, key), find_run(b, key));
  // Runs whose steps differ in size are compared at their mean step (differs_cell), as their tables read them.
  const auto many_sizes = [](const SweepResult& sweep) {
    return std::any_of(sweep.runs.begin(), sweep.runs.end(), [](const RunResult& run) { return steps_differ_in_size(run); });
  };
  const bool means = many_sizes(a) || many_sizes(b);
  if (means) {
    out << "step s: median step time, or the mean step where a split's steps differ in size (its table's); differs: yes "
           "when the two 95 % intervals do not overlap, unsure when they do (the difference may be noise), - with fewer "
           "than " << kStepsToCompare << " timed steps on a side, or a mean without its interval (fewer than "
        << kMinRoundsToDecide << " rounds)";
  } else {
    out << "step s: median step time; differs: yes when the two medians' 95 % intervals do not overlap, unsure when "
           "they do (the difference may be noise), - with fewer than " << kStepsToCompare << " timed steps on a side";
  }
  if (by_tokens) {
    out << "; tokens/s: real (non-pad) tokens per second at the " << (means ? "step time above" : "median step")
        << " (differs compares their intervals "
           "where the steps train a tenth or more other tokens)";
  }
  if (any_same) out << "; same: both hold the very same timed steps (nothing to tell apart)";
  out << "\n";
  print_recommendations(a, b, split_cell, out);
}

}  // namespace accumbench
