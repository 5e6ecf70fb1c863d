// Which splits fit in a memory budget, and which changes to the job would make one fit
// (plan_fit.hpp): the plan asked again with each option, alone and together. No LibTorch.
#include "accumbench/plan_fit.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "accumbench/error.hpp"
#include "accumbench/units.hpp"

namespace accumbench {

int64_t headroom_bytes(const std::string& text, int64_t memory_limit_bytes) {
  int64_t bytes = 0;
  if (text == "0") return 0;  // none: the same in every unit
  if (!text.empty() && text.back() == '%') {
    double percent = -1;
    try {
      size_t used = 0;
      percent = std::stod(text.substr(0, text.size() - 1), &used);
      if (used != text.size() - 1) percent = -1;
    } catch (const std::exception&) {
    }
    if (!(percent >= 0 && percent <= 100)) {  // 100 %: refused below, as leaving nothing
      throw UserError("--headroom " + text::quoted(text) + " is no percentage from 0 to 100; write it as 5% or as a "
                      "size with its unit, 1GiB");
    }
    bytes = static_cast<int64_t>(std::llround(static_cast<double>(memory_limit_bytes) * percent / 100.0));
  } else {
    try {
      bytes = parse_memory_limit(text);
    } catch (const UserError&) {
      throw UserError("--headroom " + text::quoted(text) + " is neither a size with its unit (1GiB, 500MB) nor a "
                      "percentage of the memory limit (5%); write it as one of those, or 0 for none");
    }
  }
  if (memory_limit_bytes > 0 && bytes >= memory_limit_bytes) {
    throw UserError("--headroom " + text + " leaves nothing of the " + format_bytes(memory_limit_bytes) +
                    " memory limit; give a smaller headroom");
  }
  return bytes;
}

namespace {

// A job as changes_to_fit changes it: its plan options, its precision, whether its loss is chunked,
// whether its optimizer steps inside backward (then accumulation 1 only).
struct Job {
  PlanOptions options;
  Precision precision;
  bool chunked;
  bool in_backward = false;
  // --knobs on one rank: the grid also steps the optimizer inside backward at accumulation 1, so
  // the largest splits that fit count those too.
  bool knob_in_backward = false;
};

// The job as the options give it; --optimizer-in-backward runs every split so (at accumulation 1),
// so the largest that fits and the changes are judged so too, as the table planned them.
Job given_job(const PlanOptions& options, const WorkloadOptions& workload) {
  const bool in_backward = workload.grid.optimizer_in_backward;
  return {options, workload.precisions.front(), workload.loss.chunked, in_backward,
          workload.grid.knobs && !in_backward && options.world_size <= 1 && !options.clips_gradients()};
}

// The largest split of a rank's share of the batch that fits the job with these knobs
// (micro_batch 0: none).
LargestSplit largest_with(const ModelConfig& cfg, const Job& job, const char* words, Checkpointing checkpointing,
                          bool chunked, int64_t usable_bytes) {
  LargestSplit largest{words, {}, 0};
  largest.split.micro_batch = 0;
  const int64_t batch = job.options.batch;  // a rank's share
  const std::vector<int64_t> micro_batches = divisors(batch);
  for (auto m = micro_batches.rbegin(); m != micro_batches.rend(); ++m) {
    if (job.in_backward && *m != batch) continue;
    SplitConfig split;
    split.micro_batch = *m;
    split.accum_steps = batch / *m;
    split.precision = job.precision;
    split.activation_checkpointing = checkpointing;
    split.chunked_loss = chunked;
    split.optimizer_in_backward = job.in_backward;
    split.world_size = job.options.world_size;
    split.optimizer = job.options.optimizer;  // the split names its job, as the grid's do
    split.weights_dtype = job.options.weights_dtype;
    split.adapter_dtype = job.options.lora.adapter_dtype;
    split.max_grad_norm = job.options.max_grad_norm;
    split.padding = job.options.padding;
    const MemoryPlan plan = plan_memory(cfg, job.options, split);
    if (plan.peak_bytes <= usable_bytes) {
      largest.split = split;
      largest.peak_bytes = plan.peak_bytes;
      break;
    }
  }
  return largest;
}

bool any_fits(const std::vector<LargestSplit>& largest) {
  return std::any_of(largest.begin(), largest.end(), [](const LargestSplit& l) { return l.split.micro_batch > 0; });
}

// The largest splits that fit the changed job, without and with checkpointing; when the change is
// the chunked loss (`chunked_by_change`), only with it.
FitChange change_with(const ModelConfig& cfg, const Job& job, bool chunked_by_change, const std::string& words,
                      int64_t usable_bytes) {
  FitChange change{words, {}};
  const auto add = [&](const char* knobs, Checkpointing checkpointing, bool chunked) {
    change.largest.push_back(largest_with(cfg, job, knobs, checkpointing, chunked, usable_bytes));
  };
  if (!chunked_by_change) {
    add("", Checkpointing::kNone, false);
    add("with checkpointing", Checkpointing::kBlocks, false);
  }
  if (job.chunked) {
    add(chunked_by_change ? "" : "with the chunked loss", Checkpointing::kNone, true);
    add(chunked_by_change ? "with checkpointing" : "with both", Checkpointing::kBlocks, true);
  }
  // The whole batch in one micro-step with the optimizer inside backward (its gradients freed as
  // they step), where the split without it is smaller; named only where it fits.
  if (!chunked_by_change && job.knob_in_backward) {
    Job stepping = job;
    stepping.in_backward = true;
    const LargestSplit plain = change.largest[0], checkpointed = change.largest[1];
    const auto add_stepping = [&](const char* knobs, Checkpointing checkpointing, const LargestSplit& without) {
      if (without.split.micro_batch == job.options.batch) return;
      const LargestSplit l = largest_with(cfg, stepping, knobs, checkpointing, false, usable_bytes);
      if (l.split.micro_batch > 0) change.largest.push_back(l);
    };
    add_stepping("with the optimizer in backward", Checkpointing::kNone, plain);
    add_stepping("with checkpointing and the optimizer in backward", Checkpointing::kBlocks, checkpointed);
  }
  return change;
}

}  // namespace

bool FitChange::fits() const { return any_fits(largest); }
bool JobLargest::fits() const { return any_fits(largest); }

std::vector<LargestSplit> largest_fitting_splits(const ModelConfig& cfg, const PlanOptions& options,
                                                 const WorkloadOptions& workload, int64_t usable_bytes) {
  if (usable_bytes <= 0 || workload.precisions.empty()) return {};
  const Job as_given = given_job(options, workload);
  return change_with(cfg, as_given, /*chunked_by_change=*/false, "", usable_bytes).largest;
}

// "4×4; with checkpointing: 4×4 ckpt"
std::string largest_words(const std::vector<LargestSplit>& largest) {
  std::string words;
  for (const LargestSplit& l : largest) {
    words += std::string(words.empty() ? "" : "; ") + (l.knobs.empty() ? "" : l.knobs + ": ") +
             (l.split.micro_batch > 0 ? l.split.shape_label() : std::string("none"));
  }
  return words;
}

namespace {

// One change changes_to_fit may make to the job, alone or with others.
struct Change {
  std::string words;                // as typed: "--lora-rank 16 --base-quant nf4"
  std::function<void(Job&)> edit;
  bool adds_lora = false;           // LoRA r16 on a full fine-tune
  bool brings_lora = false;         // the 4-bit base of a full fine-tune, which brings LoRA r16 with it
  bool optimizer = false;           // replaces the optimizer (one such change at a time)
};

// Every way to pick `k` of `count` items, in lexicographic order of their indices.
void each_combination(size_t count, size_t k, const std::function<void(const std::vector<size_t>&)>& visit) {
  std::vector<size_t> picked(k);
  for (size_t i = 0; i < k; ++i) picked[i] = i;
  while (k <= count) {
    visit(picked);
    size_t i = k;
    while (i > 0 && picked[i - 1] == count - k + i - 1) --i;
    if (i == 0) return;
    ++picked[i - 1];
    for (size_t j = i; j < k; ++j) picked[j] = picked[j - 1] + 1;
  }
}

}  // namespace

std::vector<FitChange> changes_to_fit(const ModelConfig& cfg, const PlanOptions& options, const WorkloadOptions& workload,
                                      int64_t usable_bytes, const WorkloadOptions* lists) {
  std::vector<FitChange> out;
  if (usable_bytes <= 0 || workload.precisions.empty()) return out;
  if (any_fits(largest_fitting_splits(cfg, options, workload, usable_bytes))) return out;
  const Job as_given = given_job(options, workload);
  // The changes not in effect yet, from what gives up least to most; a value of the lists is none
  // (its job is planned already).
  const std::vector<Precision> listed_precisions = lists != nullptr ? lists->precisions : std::vector<Precision>{};
  const std::vector<OptimizerKind> listed_optimizers = lists != nullptr ? grid_optimizers(*lists) : std::vector<OptimizerKind>{};
  const std::vector<Precision> listed_weights = lists != nullptr ? grid_weights_dtypes(*lists) : std::vector<Precision>{};
  const auto listed = [](const auto& values, auto value) {
    return std::find(values.begin(), values.end(), value) != values.end();
  };
  std::vector<Change> changes;
  const bool lora = options.lora.enabled();
  // Samples padded to T: padded to each micro-batch's longest sample instead (TRL's collator) the
  // step computes the same update on shorter activations, so it gives up nothing.
  const int64_t longest = options.longest_padding_activation_seq_len;
  const std::vector<PaddingChoice> listed_paddings = lists != nullptr ? grid_paddings(*lists) : std::vector<PaddingChoice>{};
  if (options.padding.padding == Padding::kMax && longest > 0 && longest < options.seq_len &&
      !listed(listed_paddings, PaddingChoice{Padding::kLongest, 0})) {
    changes.push_back({"--padding longest", [longest](Job& j) {
                         j.options.padding = {Padding::kLongest, 0};
                         j.options.activation_seq_len = longest;
                       }});
  }
  // TRL's step has its own loss (--trl-loss); accumbench's chunked head stands in for it otherwise.
  if (!as_given.chunked && options.framework == PlanFramework::kPlain)
    changes.push_back({"--chunked-loss", [](Job& j) { j.chunked = true; }});
  if (options.framework == PlanFramework::kHfTrl && options.trl_loss == TrlLoss::kNll)
    changes.push_back({"--trl-loss chunked_nll", [](Job& j) { j.options.trl_loss = TrlLoss::kChunkedNll; }});
  // A full fine-tune's gradients, each freed as its parameter steps (exact, at accumulation 1; one
  // process, no fp16 loss scaling, accumbench's own loop); with clipping only by giving it up,
  // which the change then says (also where the job is the unclipped one of a --max-grad-norm list
  // that clips: the option refuses the list).
  const bool clipping_given = options.clips_gradients() || (lists != nullptr && grid_clips(*lists));
  // --knobs plans the oib splits already (helper-94: the change was offered beside them).
  if (!lora && !workload.grid.optimizer_in_backward && !workload.grid.knobs && options.framework == PlanFramework::kPlain &&
      options.world_size <= 1 && as_given.precision != Precision::kFp16) {
    changes.push_back({clipping_given ? "--optimizer-in-backward --max-grad-norm 0" : "--optimizer-in-backward",
                       [](Job& j) {
                         j.in_backward = true;
                         j.options.max_grad_norm = 0;
                       }});
  }
  if (as_given.precision == Precision::kFp32 && !listed(listed_precisions, Precision::kBf16))
    changes.push_back({"--precision bf16", [](Job& j) { j.precision = Precision::kBf16; }});
  // torch's foreach AdamW holds a copy of what trains in its step; the fused kernel (the one-tensor
  // loop on the CPU) does not.
  // One optimizer at a time: two optimizer changes are never made together (Change::optimizer).
  if (options.optimizer == OptimizerKind::kAdamWForeach && !listed(listed_optimizers, OptimizerKind::kAdamW))
    changes.push_back({"--optimizer adamw", [](Job& j) { j.options.optimizer = OptimizerKind::kAdamW; }, false, false, true});
  if (!lora && full_precision_adamw(options.optimizer) && !listed(listed_optimizers, OptimizerKind::kAdamW8bit))  // a full fine-tune's state
    changes.push_back({"--optimizer adamw8bit", [](Job& j) { j.options.optimizer = OptimizerKind::kAdamW8bit; }, false, false, true});
  if (!lora && options.optimizer == OptimizerKind::kPagedAdamW32bit &&
      !listed(listed_optimizers, OptimizerKind::kPagedAdamW8bit))  // fp32 moments, paged or not
    changes.push_back({"--optimizer paged-adamw8bit", [](Job& j) { j.options.optimizer = OptimizerKind::kPagedAdamW8bit; },
                       false, false, true});
  if (options.weights_dtype == Precision::kFp32 && !options.lora.quantized()) {
    const Precision half = as_given.precision == Precision::kFp16 ? Precision::kFp16 : Precision::kBf16;
    // A full fine-tune of fp16 weights under fp16 autocast is what the Trainer's GradScaler refuses
    // ("Attempting to unscale FP16 gradients", trainer_settings.cpp): not offered (helper-102: a T4
    // user was told it fits). With LoRA the trained adapters stay fp32, and it runs.
    const bool trainer_refuses = half == Precision::kFp16 && !lora;
    if (!listed(listed_weights, half) && !trainer_refuses)
      changes.push_back({"--weights-dtype " + to_string(half), [half](Job& j) { j.options.weights_dtype = half; }});
  }
  if (!lora) changes.push_back({"--lora-rank 16", [](Job& j) { j.options.lora.rank = 16; }, true});
  if (!options.lora.quantized()) {
    changes.push_back({lora ? "--base-quant nf4" : "--lora-rank 16 --base-quant nf4",
                       [](Job& j) {
                         if (!j.options.lora.enabled()) j.options.lora.rank = 16;
                         j.options.lora.base_quant = BaseQuant::kNf4;
                       },
                       false, !lora});
  }
  // The job with the picked changes made, planned; nullopt when two of them make the same change
  // (LoRA r16, and the 4-bit base that brings it).
  const auto planned = [&](const std::vector<size_t>& picked) -> std::optional<FitChange> {
    Job job = as_given;
    std::string words;
    bool brings_lora = false, adds_lora = false;
    int optimizers = 0;
    for (size_t i : picked) {
      changes[i].edit(job);
      words += (words.empty() ? "" : " ") + changes[i].words;
      brings_lora = brings_lora || changes[i].brings_lora;
      adds_lora = adds_lora || changes[i].adds_lora;
      optimizers += changes[i].optimizer ? 1 : 0;
    }
    if ((brings_lora && adds_lora) || optimizers > 1) return std::nullopt;
    FitChange change = change_with(cfg, job, job.chunked && !as_given.chunked, words, usable_bytes);
    change.combined = picked.size();
    return change;
  };
  for (size_t i = 0; i < changes.size(); ++i) out.push_back(*planned({i}));
  if (std::any_of(out.begin(), out.end(), [](const FitChange& c) { return c.fits(); })) return out;
  // None alone: the fewest changes that fit together, every combination of that many that does.
  for (size_t k = 2; k <= changes.size(); ++k) {
    bool found = false;
    each_combination(changes.size(), k, [&](const std::vector<size_t>& picked) {
      std::optional<FitChange> change = planned(picked);
      if (change && change->fits()) {
        out.push_back(*change);
        found = true;
      }
    });
    if (found) return out;
  }
  // Nothing fits in any combination: all of them at once (LoRA r16 once, where the 4-bit base
  // brings it; the last optimizer change, of the smallest state) says so.
  std::vector<size_t> every;
  for (size_t i = 0; i < changes.size(); ++i) {
    const bool later_optimizer = changes[i].optimizer && std::any_of(changes.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                                                                     changes.end(), [](const Change& c) { return c.optimizer; });
    if (later_optimizer) continue;
    if (!changes[i].adds_lora || std::none_of(changes.begin(), changes.end(), [](const Change& c) { return c.brings_lora; }))
      every.push_back(i);
  }
  if (every.size() > 1) out.push_back(*planned(every));
  return out;
}

namespace {

// The splits of `largest` that fit, as a sweep labels them: "1×16 or 2×8 ckpt"; a micro-batch
// once, without the knobs where it fits without them.
std::string fitting_words(const std::vector<LargestSplit>& largest) {
  std::string words;
  for (auto l = largest.begin(); l != largest.end(); ++l) {
    const bool earlier =
        std::any_of(largest.begin(), l, [&](const LargestSplit& e) { return e.split.micro_batch == l->split.micro_batch; });
    if (l->split.micro_batch > 0 && !earlier) words += (words.empty() ? "" : " or ") + l->split.shape_label();
  }
  return words;
}

bool was_tried(const SplitConfig& split, const std::vector<SplitConfig>& tried) {
  return std::any_of(tried.begin(), tried.end(), [&](const SplitConfig& t) {
    return t.micro_batch == split.micro_batch && t.activation_checkpointing == split.activation_checkpointing &&
           t.chunked_loss == split.chunked_loss && t.precision == split.precision &&
           t.optimizer_in_backward == split.optimizer_in_backward && t.optimizer == split.optimizer &&
           t.weights_dtype == split.weights_dtype && t.adapter_dtype == split.adapter_dtype &&
           t.max_grad_norm == split.max_grad_norm && t.padding == split.padding && t.packing == split.packing &&
           t.group_by_length == split.group_by_length;
  });
}

}  // namespace

std::vector<JobLargest> largest_fitting_per_job(const ModelConfig& cfg, const PlanOptions& options,
                                                const WorkloadOptions& workload, int64_t usable_bytes) {
  std::vector<JobLargest> out;
  if (usable_bytes <= 0) return out;
  for (const GridJob& job : grid_jobs(workload)) {
    out.push_back({job, job_flags(job, workload),
                   largest_fitting_splits(cfg, plan_options_for(options, job), job_workload(workload, job), usable_bytes)});
  }
  return out;
}

LightestJob lightest_job(const ModelConfig& cfg, const PlanOptions& options, const WorkloadOptions& workload) {
  const auto narrowest_of = [](const std::vector<Precision>& dtypes) {
    Precision narrowest = dtypes.front();
    for (const Precision dtype : dtypes) {
      if (compute_bytes(dtype) < compute_bytes(narrowest)) narrowest = dtype;
    }
    return narrowest;
  };
  const std::vector<OptimizerKind> optimizers = grid_optimizers(workload);
  const std::vector<Precision> weights = grid_weights_dtypes(workload), adapters = grid_adapter_dtypes(workload);
  LightestJob lightest;
  lightest.job.weights_dtype = narrowest_of(weights);
  lightest.job.adapter_dtype = narrowest_of(adapters);
  lightest.job.optimizer =
      lightest_optimizer(cfg, with_adapter_dtype(with_weights_dtype(workload, lightest.job.weights_dtype),
                                                 lightest.job.adapter_dtype));
  // No clipping where the list has it: clipping's temporaries only add to the optimizer phase, and
  // only an unclipped step can have the optimizer inside backward.
  const std::vector<double> norms = grid_max_grad_norms(workload);
  lightest.job.max_grad_norm = *std::min_element(norms.begin(), norms.end());
  // The padding whose longest padded micro-batch is the shortest (the same samples in each).
  const std::vector<PaddingChoice> paddings = grid_paddings(workload);
  const auto activation_length = [&](const PaddingChoice& padding) {
    GridJob job = lightest.job;
    job.padding = padding;
    return plan_options_for(options, job).activation_length();
  };
  lightest.job.padding = paddings.front();
  for (const PaddingChoice& padding : paddings) {
    if (activation_length(padding) < activation_length(lightest.job.padding)) lightest.job.padding = padding;
  }
  // The precision: the one whose smallest split (micro-batch 1, checkpointed) the plan finds lightest.
  lightest.job.precision = workload.precisions.front();
  int64_t least = -1;
  for (const Precision precision : workload.precisions) {
    GridJob job = lightest.job;
    job.precision = precision;
    SplitConfig smallest;
    smallest.precision = precision;
    smallest.micro_batch = 1;
    smallest.accum_steps = std::max<int64_t>(options.batch, 1);
    smallest.activation_checkpointing = Checkpointing::kBlocks;
    smallest.chunked_loss = workload.loss.chunked;
    smallest.world_size = options.world_size;
    int64_t peak = 0;
    try {
      peak = plan_memory(cfg, plan_options_for(options, job), smallest).peak_bytes;
    } catch (const UserError&) {
      continue;  // a precision the plan refuses here (fp16 on the CPU) is no lighter
    }
    if (least < 0 || peak < least) {
      least = peak;
      lightest.job.precision = precision;
    }
  }
  const auto add = [&lightest](const std::string& joiner, const std::string& words) {
    lightest.which += (lightest.which.empty() ? "" : joiner) + words;
  };
  if (optimizers.size() > 1)
    add("", to_string(lightest.job.optimizer) + " (the smallest state of --optimizer " + join_optimizers(optimizers) + ")");
  if (weights.size() > 1) {
    add(" on ", to_string(lightest.job.weights_dtype) + " weights (the narrowest of --weights-dtype " +
                    join_precisions(weights) + ")");
  }
  if (adapters.size() > 1) {
    add(" and ", to_string(lightest.job.adapter_dtype) + " adapters (the narrowest of --adapter-dtype " +
                     join_precisions(adapters) + ")");
  }
  if (workload.precisions.size() > 1) {
    add(" under ", to_string(lightest.job.precision) + " (of --precision " + join_precisions(workload.precisions) +
                       ", the lightest in the plan)");
  }
  // Every norm above 0 needs the same memory: words only for the list's 0.
  if (norms.size() > 1 && lightest.job.max_grad_norm == 0) add(" and ", "no clipping (of --max-grad-norm " + join_norms(norms) + ")");
  if (paddings.size() > 1) {
    add(" and ", "--padding " + padding_name(lightest.job.padding) + " (of --padding " + join_paddings(paddings) +
                     ", the shortest longest micro-batch)");
  }
  return lightest;
}

std::vector<FitChange> changes_to_fit(const ModelConfig& cfg, const PlanOptions& options, const WorkloadOptions& lists,
                                      const LightestJob& lightest, int64_t usable_bytes) {
  return changes_to_fit(cfg, plan_options_for(options, lightest.job), job_workload(lists, lightest.job), usable_bytes,
                        &lists);
}

std::string fit_advice(const ModelConfig& cfg, const PlanOptions& options, const WorkloadOptions& workload,
                       int64_t usable_bytes, const std::vector<SplitConfig>& tried) {
  if (usable_bytes <= 0) return "";
  // Each job of the sweep's lists (precision, optimizer, weights and adapter dtypes) is a job of
  // its own (a sweep of fp32 and bf16 tried bf16 already: it is no change to name). Splits of any
  // of them not tried, with the sweep options that would try them: "2×4 ckpt (--micro-batches 2
  // --activation-checkpointing blocks)".
  const auto tried_any = [&](const std::function<bool(const SplitConfig&)>& same) {
    return std::any_of(tried.begin(), tried.end(), same);
  };
  bool fits_some = false;
  std::string untried;
  for (const JobLargest& job : largest_fitting_per_job(cfg, options, workload, usable_bytes)) {
    fits_some = fits_some || any_fits(job.largest);
    for (const LargestSplit& l : job.largest) {
      if (l.split.micro_batch == 0 || was_tried(l.split, tried)) continue;
      std::string flags;
      if (!tried_any([&](const SplitConfig& t) { return t.micro_batch == l.split.micro_batch; }))
        flags += "--micro-batches " + std::to_string(l.split.micro_batch);
      if (!tried_any([&](const SplitConfig& t) { return t.activation_checkpointing == l.split.activation_checkpointing; })) {
        flags += std::string(flags.empty() ? "" : " ") + "--activation-checkpointing " +
                 to_string(l.split.activation_checkpointing);
      }
      // --knobs adds the optimizer inside backward at accumulation 1 (to an unclipped job): the
      // micro-batch brings it. Without the knob, the option, and with a list that clips, no clipping.
      if (l.split.optimizer_in_backward && !workload.grid.knobs &&
          !tried_any([&](const SplitConfig& t) { return t.optimizer_in_backward; })) {
        flags += std::string(flags.empty() ? "" : " ") + "--optimizer-in-backward" +
                 (grid_clips(workload) ? " --max-grad-norm 0" : "");
      }
      // As the sweep names its splits: the label (the optimizer unless adamw, the weights dtype
      // unless fp32), then the precision, the clipping and the padding where the lists hold several.
      const std::string label =
          l.split.label() + (workload.precisions.size() > 1 ? " " + to_string(job.job.precision) : "") +
          (grid_max_grad_norms(workload).size() > 1 ? " " + clipping_word(job.job.max_grad_norm) : "") +
          (grid_packings(workload).size() > 1 ? " " + packing_word(job.job.packing) : "") +
          (grid_groupings(workload).size() > 1 ? " " + grouping_word(job.job.group_by_length) : "") +
          (grid_paddings(workload).size() > 1 ? " " + padding_word(job.job.padding) : "");
      untried += (untried.empty() ? "" : " or ") + label + (flags.empty() ? "" : " (" + flags + ")");
    }
  }
  if (fits_some) {
    if (untried.empty()) return "";
    return "The plan fits " + untried + " in " + format_bytes(usable_bytes) + ", which this sweep did not run.";
  }
  // Several jobs: the changes to the lightest (a dtype or optimizer the sweep ran is no change to
  // name, and the others need more memory than it).
  const LightestJob lightest = lightest_job(cfg, options, workload);
  const std::vector<FitChange> changes = changes_to_fit(cfg, options, workload, lightest, usable_bytes);
  std::string fitting;
  size_t combined = 1;
  for (const FitChange& c : changes) {
    if (!c.fits()) continue;
    fitting += (fitting.empty() ? "" : ", or ") + c.options + " (" + fitting_words(c.largest) + ")";
    combined = c.combined;
  }
  if (fitting.empty()) {
    return "Nothing the plan tries fits in " + format_bytes(usable_bytes) +
           (lightest.which.empty() ? "" : ", even with " + lightest.which) +
           ", not even every change it knows together: a shorter --seq-len, a smaller model or more memory is needed.";
  }
  return "The plan fits it in " + format_bytes(usable_bytes) + " with " +
         (lightest.which.empty() ? "" : lightest.which + " and ") +
         (combined == 1 ? std::string("one change: ") : text::number_word(combined) + " changes together: ") + fitting +
         " (`accumbench plan` with the same options, --memory-limit and --headroom 0% shows each).";
}

}  // namespace accumbench
