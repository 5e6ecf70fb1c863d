// `accumbench verify`'s output (report.hpp): what was compared, the tolerances, one line per
// split and the verdict.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "accumbench/model_config.hpp"
#include "accumbench/report.hpp"
#include "report/format.hpp"

namespace accumbench {

namespace {

// "variable lengths", or "lengths from chat.txt, padding longest, grouped by length".
// `value` with `digits` significant digits, in printf's %g: 1.308, 0.0765, 5e-301.
std::string general(double value, int digits) {
  std::ostringstream out;
  out << std::setprecision(digits) << value;
  return out.str();
}

// LoRA's scaling, alpha / rank (alpha 0: twice the rank, PEFT's common choice here), and the most
// a job usually uses (alpha up to 4× the rank, rsLoRA's alpha/sqrt(r) at small ranks): above 32 a
// FAIL is more likely the scale's rounding than a fault.
double lora_scale(const LoraOptions& lora) { return (lora.alpha > 0 ? lora.alpha : 2.0 * lora.rank) / lora.rank; }
constexpr double kUsualLoraScale = 32;

std::string data_words(const VerifyResult& r) {
  std::string words = r.lengths == LengthMode::kFile ? "lengths from " + r.data.lengths_file : to_string(r.lengths) + " lengths";
  // As the sweep's context line counts them: "(16 samples, 1 cut to T=32)".
  if (r.lengths == LengthMode::kFile && r.samples > 0) {
    words += " (" + std::to_string(r.samples) + (r.samples == 1 ? " sample, " : " samples, ") +
             (r.samples_cut < 0 ? std::string("none cut: wrapped rows run on")
                                : std::to_string(r.samples_cut) + " cut to T=" + std::to_string(r.seq_len)) +
             ")";
  }
  if (r.data.padding != Padding::kMax) words += ", padding " + padding_name(r.data);
  if (r.data.group_by_length) words += ", grouped by length";
  if (r.data.packing != Packing::kNone) words += ", packing " + to_string(r.data.packing);
  return words;
}

}  // namespace

void print_verify(const VerifyResult& r, std::ostream& out) {
  out << "verify " << r.model << " (" << text::format_count(r.parameters) << " parameters), T=" << r.seq_len << ", batch " << r.batch
      << ", " << r.tokens << " target tokens, " << data_words(r) << ", " << to_string(r.precision)
      << ", loss normalization " << to_string(r.loss_normalization);
  if (r.world_size > 1) out << ", data parallel over " << r.world_size << " ranks (splits per rank)";
  if (r.weights_dtype != Precision::kFp32) out << ", " << to_string(r.weights_dtype) << " weights";
  // A job of --adapter-dtype fp32,bf16 is told apart in its first line too.
  if (r.lora.enabled() && r.lora.adapter_dtype != Precision::kFp32) out << ", " << to_string(r.lora.adapter_dtype) << " adapters";
  if (r.optimizer != OptimizerKind::kAdamW) out << ", optimizer " << to_string(r.optimizer);
  // One job of the lists: its own values of each, the defaults (no clipping, max padding) included.
  if (!r.job.empty()) out << "; job " << r.job;
  if (r.steps > 1) out << "; step " << r.step + 1 << " of " << r.steps;
  out << "\n";
  if (!r.label_masking.empty()) {
    out << "labels, over " << r.data.lengths_file << ": " << r.label_masking << "; this step trains " << r.tokens
        << (r.loss_normalization == LossNormalization::kToken ? " targets, every split's loss divisor\n" : " targets\n");
  }
  // A later step of --distinct-steps has the first's model lines above it (the same job).
  if (r.lora.enabled() && r.step == 0) {
    out << "LoRA rank " << r.lora.rank << " on " << r.lora.targets
        << (r.lora.rslora ? ", rsLoRA (scaled by alpha / sqrt(rank) = " + general(lora_scaling(r.lora), 4) + ")"
                          : "")
        << (r.lora.adapter_dtype != Precision::kFp32 ? ", adapters in " + to_string(r.lora.adapter_dtype) : "") << ", "
        << text::trainable_line(r.trainable_parameters, r.parameters)
        << "; B drawn from N(0, 0.02) instead of zero, so that gradients reach A too\n";
    if (r.dropout_off > 0) {
      out << "LoRA dropout " << r.dropout_off << " is off here: dropout draws random masks per micro-step, so no two "
          << "splits share them; the splits are compared without it (sweep and plan keep it)\n";
    }
    if (r.lora.quantized()) {
      out << "base quantised " << text::base_quant_words(to_string(r.lora.base_quant), r.lora.double_quant, r.lora.kbit_upcast)
          << ": every split runs on the same quantised weights (time approximate: LibTorch ops, not bitsandbytes' kernels)\n";
    }
  }
  if (r.lengths == LengthMode::kFixed && r.step == 0) {
    out << "every sequence has T tokens (--lengths fixed, as sweep and plan): any loss normalization gives the same "
        << "update here; --lengths variable or a lengths file checks the token-weighted normalization\n";
  } else if (r.equal_sequences && r.lengths != LengthMode::kFixed) {
    out << "every sequence of this step holds the same number of target tokens ("
        // Masked labels first: with them the counts are equal by what the masks keep, however
        // full the rows (helper-112: "every packed row is as full" of rows filled 16, 16, 9, 15).
        << (!r.label_masking.empty() && r.data.packing == Packing::kNone ? "its samples count as many labels each"
            : !r.label_masking.empty()            ? "its rows count as many labels each, by what the masks keep"
            : r.data.packing == Packing::kWrapped ? "--packing wrapped fills every row"
            : r.data.packing == Packing::kBfd     ? "every packed row is as full"
                                                  : "its samples are equally long")
        << "): any loss normalization gives the same update here; lengths that differ within the step check the "
        << "token-weighted normalization\n";
  }
  out << "reference: 1 micro-batch of " << r.batch << ", token-normalized, loss " << std::fixed << std::setprecision(6)
      << r.reference_loss << "\n";
  if (r.max_grad_norm > 0 && std::isfinite(r.reference_grad_norm)) {
    const bool scaled = r.reference_grad_norm > r.max_grad_norm;
    out << "clipping at " << text::format_number(r.max_grad_norm) << " (--max-grad-norm): the reference's gradient norm is "
        << general(r.reference_grad_norm, 4);
    // The splits' own norms, the clip's measurement, against it (VerifySplit::rel_grad_norm_error).
    double worst = -1;
    for (const VerifySplit& split : r.splits) {
      if (std::isfinite(split.rel_grad_norm_error)) worst = std::max(worst, split.rel_grad_norm_error);
    }
    if (worst == 0) out << " (each split's own: the same)";
    if (worst > 0) out << " (each split's own: within " << general(worst, 3) << " of it)";
    if (!scaled) {
      out << ", under it: nothing is scaled\n";
    } else {
      out << ", so every split's gradient is scaled by "
          << general(r.max_grad_norm / (r.reference_grad_norm + 1e-6), 3) << " before the step";
      // AdamW's first update is lr·g/(|g| + eps): a common factor hardly moves it while |g| >> eps.
      if (r.optimizer != OptimizerKind::kSgd)
        out << " (AdamW's first update, lr·g/(|g| + eps), hardly depends on a common scale unless it brings the "
               "gradients near eps; --optimizer sgd shows the clipping)";
      out << "\n";
    }
  }
  if (!r.export_dir.empty()) {
    out << "exported the reference step to " << r.export_dir << " (weights, batch, loss, gradients: docs/EXPORT.md)\n";
  }
  const Precision judged = verify_compute_precision(r.precision, r.weights_dtype, r.lora);
  out << std::defaultfloat << "tolerance"
      << (judged == r.precision ? ""
          : r.lora.enabled() && r.lora.adapter_dtype == judged
              ? " (" + to_string(judged) + " adapters: their products and gradients are in " + to_string(judged) + ")"
              : " (" + to_string(r.weights_dtype) + " weights: the step computes in " + to_string(judged) + ")")
      << ": relative L2 error of the gradient <= " << r.gradient_tolerance
      << ", of the weight update <= " << r.update_tolerance << "\n\n";
  size_t label_width = 14;  // wider only when a label needs it ("8×1 ckpt graphs")
  for (const auto& s : r.splits) label_width = std::max(label_width, s.config.label().size() + 1);
  out << text::pad("split", label_width) << std::right << std::setw(12) << "loss" << std::setw(14) << "max |dgrad|"
      << std::setw(14) << "rel L2 grad" << std::setw(14) << "max |dw|" << std::setw(16) << "rel L2 update"
      << "  result\n";
  bool uncompared = false;
  for (const auto& s : r.splits) {
    out << text::pad(s.config.label(), label_width) << std::right << std::fixed << std::setprecision(6)
        << std::setw(12) << s.loss << std::scientific << std::setprecision(2);
    if (s.gradients_compared) {
      out << std::setw(14) << s.max_abs_grad_diff << std::setw(14) << s.rel_l2_grad_error;
    } else {
      out << std::setw(14) << "-" << std::setw(14) << "-";  // freed inside backward: nothing to compare
      uncompared = true;
    }
    out << std::setw(14) << s.max_weight_diff << std::setw(16) << s.rel_l2_update_error << "  "
        << (s.pass ? "PASS" : "FAIL") << "\n";
  }
  out << std::defaultfloat << "\n";
  if (uncompared) {
    out << "oib: the optimizer inside backward frees each gradient once its parameter stepped, so those splits are "
           "judged on their loss and their update\n";
  }
  const Interruption& stop = r.interruption;
  if (!stop.signal.empty()) {
    std::string names;
    for (const std::string& label : stop.splits_not_run) names += (names.empty() ? "" : ", ") + label;
    out << "Interrupted by " << stop.signal << ": " << stop.splits_not_run.size()
        << (stop.splits_not_run.size() == 1 ? " split" : " splits") << " not verified (" << names
        << "); run verify again to check " << (stop.splits_not_run.size() == 1 ? "it" : "them") << "\n";
  }
  if (r.all_pass && !stop.signal.empty()) {
    out << (r.splits.empty() ? "no split verified" : "PASS so far: every split above computes the same update as the whole batch")
        << "\n";
  } else {
    out << (r.all_pass ? "PASS: every split computes the same update as the whole batch"
                       : "FAIL: some splits compute a different update than the whole batch")
        << "\n";
  }
  // Mean-of-means splits within the bar that still weight tokens apart (bf16's bar hides a skew
  // that fp32's shows): failed by their counts, said with the largest skew.
  std::string hidden;
  double hidden_skew = 0;
  int hidden_count = 0;
  for (const auto& s : r.splits) {
    if (s.normalization_skew <= 0 || !s.within_tolerance) continue;
    hidden += (hidden.empty() ? "" : ", ") + s.config.label();
    hidden_skew = std::max(hidden_skew, s.normalization_skew);
    ++hidden_count;
  }
  if (!hidden.empty()) {
    out << hidden << (hidden_count == 1 ? " fails within the tolerance: its" : " fail within the tolerance: their")
        << " micro-batches hold different numbers of targets, so "
        << "mean-of-means weights their tokens up to " << text::format_percent(hidden_skew, 1)
        << " apart from the whole batch's, a different update that this precision's rounding hides";
    // What made the step compute in 16 bits: autocast, else the weights, else the adapters.
    if (judged != Precision::kFp32) {
      out << "; "
          << (r.precision != Precision::kFp32       ? "--precision fp32"
              : r.weights_dtype != Precision::kFp32 ? "--weights-dtype fp32"
                                                    : "--adapter-dtype fp32")
          << " measures it";
    }
    out << "\n";
  }
  // Mean-of-means splits with a micro-batch of no target: its loss counts as 0 in the average, which
  // alone pulls the split's loss down (PyTorch's mean over no target is NaN, and a run trains on it).
  std::string empty;
  int empty_count = 0;
  for (const auto& s : r.splits) {
    if (s.micro_batches_without_target <= 0) continue;
    empty += (empty.empty() ? "" : ", ") + s.config.label();
    ++empty_count;
  }
  if (!empty.empty()) {
    out << empty << (empty_count == 1 ? " has" : " have")
        << " micro-batches without a target (samples of one token, or labels all masked): mean-of-means counts each "
           "one's loss as 0 in its average, which pulls the loss down (in PyTorch the mean over no target is NaN, and so "
           "would the step's gradients be)\n";
  }
  // Every split verified runs the whole batch in one micro-step, as the reference does (one
  // process): nothing was accumulated, so a PASS says nothing of the normalization.
  const bool none_accumulates =
      r.world_size == 1 && !r.splits.empty() &&
      std::all_of(r.splits.begin(), r.splits.end(), [](const VerifySplit& s) { return s.config.accum_steps == 1; });
  if (none_accumulates) {
    // What would accumulate: a larger batch, the optimizer outside backward, or smaller micro-batches.
    const bool oib = std::all_of(r.splits.begin(), r.splits.end(),
                                 [](const VerifySplit& s) { return s.config.optimizer_in_backward; });
    out << "every split verified computes the whole batch in one micro-step, as the reference does: nothing is "
        << "accumulated, so the loss normalization is not checked; "
        << (r.batch == 1 ? std::string("give --batch 2 or more")
            : oib        ? std::string("the optimizer inside backward runs without accumulation, so verify without "
                                       "--optimizer-in-backward")
                         : "give --micro-batches below " + std::to_string(r.batch))
        << " to check accumulation\n";
  }
  // Why, where the run says: a whole batch without a finite loss has nothing to be matched; a
  // mean of micro-batch means is the known bug; a token-normalized split that fails is not.
  if (!r.all_pass && !std::isfinite(r.reference_loss)) {
    out << "the whole batch's loss is " << r.reference_loss << ", not a finite number: the step diverges, so no split "
        << "can match it; check what scales it (--lr, --lora-alpha, the weights' dtype)\n";
  } else if (!r.all_pass && r.loss_normalization == LossNormalization::kMeanOfMeans) {
    out << "a loss averaged per micro-batch (mean-of-means) is the accumulation bug transformers fixed in 2024 "
           "(num_items_in_batch, PRs 34191 and 34198); README, \"verify\", says which frameworks normalize how\n";
  } else if (!r.all_pass && r.lora.enabled() && lora_scale(r.lora) > kUsualLoraScale) {
    // A scale far above the usual (alpha = 1 to 4 times the rank) makes the adapters dominate the
    // logits; rounding then grows with it (scale 125 gave fp32 errors of 1.5e-5, 32 passed).
    out << "token normalization gives every split the whole batch's update up to rounding, but a LoRA scale of "
        << general(lora_scale(r.lora), 4) << " (--lora-alpha " << general(r.lora.alpha > 0 ? r.lora.alpha : 2.0 * r.lora.rank, 6)
        << " / rank " << r.lora.rank << ") makes the adapters' products dominate the step and its rounding grow past the "
        << "tolerance; verify at the alpha you train with (usually 1 to 4 times the rank)\n";
  } else if (!r.all_pass) {
    out << "token normalization gives every split the whole batch's update up to rounding, so a split past the "
           "tolerance is a fault in this step or a device that rounds more than the tolerance allows; please report "
           "it with this output\n";
  }
}

}  // namespace accumbench
