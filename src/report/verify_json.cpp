// `accumbench verify --json FILE` (report.hpp): the verdicts of print_verify for a script or a CI
// job to read, one entry per job (and per step of --distinct-steps), every split's errors beside
// the tolerances they were judged by.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "accumbench/report.hpp"
#include "accumbench/verify.hpp"

namespace accumbench {

namespace {

using Json = nlohmann::json;

// A number, or null where it is not one (a diverged step's loss, no clipping's norm): JSON has no NaN.
Json finite_or_null(double value) { return std::isfinite(value) ? Json(value) : Json(nullptr); }

// What a PASS proves about the loss normalization: only a step whose sequences hold different
// numbers of targets, accumulated over micro-batches (or ranks), tells token-weighting apart.
bool normalization_checked(const VerifyResult& r) {
  if (r.lengths == LengthMode::kFixed || r.equal_sequences) return false;
  return r.world_size > 1 ||
         std::any_of(r.splits.begin(), r.splits.end(), [](const VerifySplit& s) { return s.config.accum_steps > 1; });
}

Json split_entry(const VerifySplit& s) {
  Json e;
  e["split"] = s.config.label();
  e["micro_batch"] = s.config.micro_batch;
  e["accum_steps"] = s.config.accum_steps;
  e["activation_checkpointing"] = to_string(s.config.activation_checkpointing);
  e["optimizer_in_backward"] = s.config.optimizer_in_backward;
  e["chunked_loss"] = s.config.chunked_loss;
  e["loss"] = finite_or_null(s.loss);
  // The optimizer inside backward frees each gradient as its parameter steps: nothing to compare.
  e["max_abs_grad_diff"] = s.gradients_compared ? finite_or_null(s.max_abs_grad_diff) : Json(nullptr);
  e["rel_l2_grad_error"] = s.gradients_compared ? finite_or_null(s.rel_l2_grad_error) : Json(nullptr);
  e["max_weight_diff"] = finite_or_null(s.max_weight_diff);
  e["rel_l2_update_error"] = finite_or_null(s.rel_l2_update_error);
  e["grad_norm"] = finite_or_null(s.grad_norm);  // the clip's measurement; null without clipping
  e["rel_grad_norm_error"] = finite_or_null(s.rel_grad_norm_error);
  e["normalization_skew"] = s.normalization_skew;
  e["micro_batches_without_target"] = s.micro_batches_without_target;
  e["within_tolerance"] = s.within_tolerance;
  e["pass"] = s.pass;
  return e;
}

Json job_entry(const VerifyResult& r) {
  Json e;
  e["job"] = r.job.empty() ? Json(nullptr) : Json(r.job);
  e["step"] = r.step + 1;  // 1-based, as the console's "step 2 of 3"
  e["steps"] = r.steps;
  e["model"] = r.model;
  e["parameters"] = r.parameters;
  e["trainable_parameters"] = r.trainable_parameters;
  e["seq_len"] = r.seq_len;
  e["batch"] = r.batch;
  e["world_size"] = r.world_size;
  e["target_tokens"] = r.tokens;
  e["lengths"] = to_string(r.lengths);
  e["lengths_file"] = r.lengths == LengthMode::kFile ? Json(r.data.lengths_file) : Json(nullptr);
  e["samples"] = r.lengths == LengthMode::kFile ? Json(r.samples) : Json(nullptr);
  e["samples_cut"] = r.lengths == LengthMode::kFile && r.samples_cut >= 0 ? Json(r.samples_cut) : Json(nullptr);
  e["padding"] = padding_name(r.data);
  e["packing"] = to_string(r.data.packing);
  e["group_by_length"] = r.data.group_by_length;
  e["precision"] = to_string(r.precision);
  e["weights_dtype"] = to_string(r.weights_dtype);
  e["optimizer"] = to_string(r.optimizer);
  e["loss_normalization"] = to_string(r.loss_normalization);
  if (r.lora.enabled()) {
    Json lora;
    lora["rank"] = r.lora.rank;
    lora["alpha"] = r.lora.alpha > 0 ? r.lora.alpha : 2.0 * static_cast<double>(r.lora.rank);
    lora["rslora"] = r.lora.rslora;
    lora["targets"] = r.lora.targets;
    lora["adapter_dtype"] = to_string(r.lora.adapter_dtype);
    lora["base_quant"] = to_string(r.lora.base_quant);
    lora["dropout_turned_off"] = r.dropout_off;  // --lora-dropout as given; verify compares without it
    e["lora"] = lora;
  } else {
    e["lora"] = nullptr;
  }
  e["max_grad_norm"] = r.max_grad_norm;
  e["reference_grad_norm"] = finite_or_null(r.reference_grad_norm);
  e["reference_loss"] = finite_or_null(r.reference_loss);
  e["judged_in"] = to_string(verify_compute_precision(r.precision, r.weights_dtype, r.lora));
  e["gradient_tolerance"] = r.gradient_tolerance;
  e["update_tolerance"] = r.update_tolerance;
  e["normalization_checked"] = normalization_checked(r);
  e["export_dir"] = r.export_dir.empty() ? Json(nullptr) : Json(r.export_dir);
  Json splits = Json::array();
  for (const VerifySplit& s : r.splits) splits.push_back(split_entry(s));
  e["splits"] = splits;
  e["interrupted_by"] = r.interruption.signal.empty() ? Json(nullptr) : Json(r.interruption.signal);
  e["splits_not_verified"] = r.interruption.splits_not_run;
  e["all_pass"] = r.all_pass;
  return e;
}

}  // namespace

std::string verify_json(const WorkloadOptions& workload, const std::vector<VerifyResult>& results, bool finished,
                        const std::string& error) {
  Json out;
  out["kind"] = "accumbench verify";
  Json options = Json::object();
  for (const auto& [name, value] : describe_workload(workload)) options[name] = value;
  out["options"] = options;
  // "pass" only when every job of a finished run passed, with a split verified; "fail" when any
  // split failed; else "incomplete" (a signal, or a file written while later jobs still run).
  const bool any_fail = std::any_of(results.begin(), results.end(), [](const VerifyResult& r) { return !r.all_pass; });
  const bool stopped =
      std::any_of(results.begin(), results.end(), [](const VerifyResult& r) { return !r.interruption.signal.empty(); });
  const bool any_split =
      std::any_of(results.begin(), results.end(), [](const VerifyResult& r) { return !r.splits.empty(); });
  out["verdict"] = any_fail ? "fail" : (finished && !stopped && any_split && error.empty()) ? "pass" : "incomplete";
  out["error"] = error.empty() ? Json(nullptr) : Json(error);  // helper-101: a peer gone left no trace
  Json jobs = Json::array();
  for (const VerifyResult& r : results) jobs.push_back(job_entry(r));
  out["jobs"] = jobs;
  return out.dump(2) + "\n";
}

}  // namespace accumbench
