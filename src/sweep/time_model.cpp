// The time model of a sweep (statistics.hpp, fit_time_models): a fixed cost per micro-step and a
// cost per computed token, fitted across the splits of one precision and set of knobs.
#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "accumbench/statistics.hpp"

namespace accumbench {

namespace {

// "8×8 ckpt chunked-ce" -> "ckpt chunked-ce"; "8×8" -> ""; clipped at 1: "clip1" after them (its
// pass over the gradients is in the optimizer phase, which the model takes as one median); with
// several paddings among the runs, the split's last ("pad-longest": other shapes, fitted apart), and
// with several packings or orders its rows ("pack-bfd grouped": other rows).
std::string knobs_of(const SplitConfig& split, bool several_paddings, bool several_packings, bool several_orders) {
  const std::string label = split.label();
  const auto space = label.find(' ');
  std::string knobs = space == std::string::npos ? "" : label.substr(space + 1);
  if (split.max_grad_norm > 0) knobs += (knobs.empty() ? "" : " ") + clipping_word(split.max_grad_norm);
  if (several_packings) knobs += (knobs.empty() ? "" : " ") + packing_word(split.packing);
  if (several_orders) knobs += (knobs.empty() ? "" : " ") + grouping_word(split.group_by_length);
  if (several_paddings) knobs += (knobs.empty() ? "" : " ") + padding_word(split.padding);
  return knobs;
}

double mean_step_seconds(const RunResult& run) {
  return std::isfinite(run.mean_seconds.value) ? run.mean_seconds.value : run.step_seconds.median;
}

// One rank's positions (a step counts every rank's; each rank computes its share in parallel),
// weighed over the steps as the mean step time the model fits is (an epoch's batches alike).
double computed_positions_per_step(const RunResult& run) {
  return run.steps.empty() ? 0.0 : mean_computed_positions(run) / std::max(1, run.config.world_size);
}

}  // namespace

std::vector<TimeModel> fit_time_models(const std::vector<RunResult>& runs) {
  const bool several_paddings = std::any_of(runs.begin(), runs.end(), [&](const RunResult& run) {
    return run.config.padding != runs.front().config.padding;
  });
  const bool several_packings = std::any_of(runs.begin(), runs.end(), [&](const RunResult& run) {
    return run.config.packing != runs.front().config.packing;
  });
  const bool several_orders = std::any_of(runs.begin(), runs.end(), [&](const RunResult& run) {
    return run.config.group_by_length != runs.front().config.group_by_length;
  });
  std::map<std::pair<Precision, std::string>, std::vector<int>> groups;
  for (int i = 0; i < static_cast<int>(runs.size()); ++i) {
    const RunResult& run = runs[i];
    if (run.status != RunStatus::kOk || !std::isfinite(mean_step_seconds(run)) || run.steps.empty()) continue;
    if (run.config.optimizer_in_backward) continue;  // its optimizer runs inside backward: another model
    groups[{run.config.precision, knobs_of(run.config, several_paddings, several_packings, several_orders)}].push_back(i);
  }
  std::vector<TimeModel> models;
  for (const auto& [key, members] : groups) {
    // Three splits at least, two accumulation counts at least: otherwise the two values fit
    // exactly and the residuals say nothing.
    if (members.size() < 3) continue;
    TimeModel model;
    model.precision = key.first;
    model.knobs = key.second;
    std::vector<double> optimizer;
    for (int i : members) optimizer.push_back(runs[i].phase_median_seconds[static_cast<int>(Phase::kOptimizer)]);
    model.optimizer_seconds = median(optimizer);
    if (!std::isfinite(model.optimizer_seconds)) model.optimizer_seconds = 0;
    // Least squares without intercept: y = α·n + β·P, y = mean step − optimizer, n = accumulation
    // steps, P = computed positions per step. Normal equations, 2×2.
    double snn = 0, snp = 0, spp = 0, sny = 0, spy = 0;
    for (int i : members) {
      const double n = static_cast<double>(runs[i].config.accum_steps);
      const double p = computed_positions_per_step(runs[i]);
      const double y = mean_step_seconds(runs[i]) - model.optimizer_seconds;
      snn += n * n, snp += n * p, spp += p * p, sny += n * y, spy += p * y;
    }
    const double det = snn * spp - snp * snp;
    // Every split with the same accumulation count (or the same ratio of tokens to micro-steps):
    // the fixed cost cannot be told from the per-token cost.
    if (!(std::abs(det) > 1e-9 * snn * spp)) continue;
    model.fixed_seconds = (sny * spp - spy * snp) / det;
    model.seconds_per_token = (snn * spy - snp * sny) / det;
    if (model.fixed_seconds < 0 || model.seconds_per_token < 0) {
      // Neither cost can be negative: when larger micro-batches are slower per token than smaller
      // ones (a cache the micro-batch outgrows), the free fit pays them back with a negative fixed
      // cost. The least squares within α, β >= 0 then lies on an edge: one of the two alone.
      const auto squared_error = [&](double a, double b) {  // Σ(y − a·n − b·p)² less Σy², which both share
        return -2 * a * sny - 2 * b * spy + a * a * snn + 2 * a * b * snp + b * b * spp;
      };
      const double fixed_only = std::max(0.0, sny / snn);
      const double tokens_only = std::max(0.0, spy / spp);
      const bool fixed_fits_better = squared_error(fixed_only, 0) < squared_error(0, tokens_only);
      model.fixed_seconds = fixed_fits_better ? fixed_only : 0.0;
      model.seconds_per_token = fixed_fits_better ? 0.0 : tokens_only;
    }
    model.max_relative_residual = 0;
    for (int i : members) {
      TimeModelResidual r;
      r.index = i;
      r.measured_seconds = mean_step_seconds(runs[i]);
      r.fitted_seconds = static_cast<double>(runs[i].config.accum_steps) * model.fixed_seconds +
                         computed_positions_per_step(runs[i]) * model.seconds_per_token + model.optimizer_seconds;
      model.max_relative_residual =
          std::max(model.max_relative_residual, std::abs(r.measured_seconds - r.fitted_seconds) / r.measured_seconds);
      model.residuals.push_back(r);
    }
    models.push_back(std::move(model));
  }
  return models;
}

}  // namespace accumbench
