// A Python training loop's host time per micro-step, which accumbench's C++ loop does not pay:
// given with --framework-overhead MS, or measured by `accumbench calibrate-framework` and kept in
// a small cache file that `--framework-overhead auto` (the default) reads.
//
//   const FrameworkOverhead o = resolve_framework_overhead("auto", "NVIDIA H200", key);
//   // o.seconds_per_micro_step: 0 and o.source "" when nothing is calibrated for that device
//
// The cache (JSON, one entry per device name, precision, model, weights dtype, framework and job):
//   {"entries": [{"device_name": "NVIDIA H200", "precision": "bf16", "framework": "hf-trl",
//                 "model": "llama, 28 layers, d_model 2048, 16 heads (8 kv), d_ff 6144, vocab 151936, q/k norm",
//                 "weights_dtype": "bf16", "job": "LoRA on all-linear, checkpointed",
//                 "seconds_per_micro_step": 0.0123, "engine_seconds_per_micro_step": ...,
//                 "reference_seconds_per_micro_step": ..., "date": "...", "torch": "2.11.0", "shape": "..."}]}
// It lives in $ACCUMBENCH_CACHE_DIR, else $XDG_CACHE_HOME/accumbench, else ~/.cache/accumbench.
#pragma once

#include <string>
#include <vector>

#include "accumbench/model_config.hpp"
#include "accumbench/options.hpp"

namespace accumbench {

struct FrameworkCacheEntry {
  std::string device_name;
  std::string precision;          // "fp32" | "bf16" | "fp16"
  std::string framework;          // "plain" | "hf-trl" (step_bench.py --framework) | "hf" (hf_real_step.py)
  // The model's shape (framework_model): a Python loop's host time grows with its modules, so a
  // tiny model's is not a 28-layer one's. "" in entries written before the cache recorded it.
  std::string model;
  std::string weights_dtype = "fp32";
  // What was trained (framework_job): "full fine-tuning" or "LoRA on all-linear", ", checkpointed"
  // when every block was. A Python loop's host time per micro-step grows with its modules (PEFT adds a
  // Python forward per adapted linear) and with checkpointing (every block's forward runs twice).
  std::string job = "full fine-tuning";
  double seconds_per_micro_step = 0;            // reference − engine, what a sweep adds
  double engine_seconds_per_micro_step = 0;     // each side's slope over the accumulation steps
  double reference_seconds_per_micro_step = 0;
  std::string date;               // ISO 8601, UTC
  std::string torch;              // the reference's PyTorch version
  std::string shape;              // "gpt2-124m, T=256, batch 8, micro-batches 1,2,4,8"
  // The sequence length it ran at (on a GPU a longer step hides more of the host time); 0 when
  // unknown (an entry whose shape names no T).
  int64_t seq_len = 0;
  // What else the two sides' times follow (framework_conditions): "1 thread", ", LoRA dropout 0.05",
  // ", TRL loss nll"; "" in entries written before it was recorded.
  std::string conditions;
};

std::string framework_cache_path();
// Missing file: no entries. A file that is not such JSON: UserError naming it.
std::vector<FrameworkCacheEntry> read_framework_cache(const std::string& path);
// Replaces the entries with the same device name, precision, model, weights dtype, framework, job,
// T and conditions; creates the folder, and writes a file beside it that it renames over the old,
// so that a stopped write leaves the old file whole.
void write_framework_cache(const std::string& path, const std::vector<FrameworkCacheEntry>& entries);

// The job words of a workload's cache entry: "full fine-tuning" or "LoRA on <the adapted block
// linears>" ("all-linear", or accumbench's names: "LoRA on q,v"; any rank, any base storage), with
// ", checkpointed" when every split checkpoints its blocks. PEFT runs a Python forward per adapted
// linear, so the linears are part of the job.
std::string framework_job(const WorkloadOptions& workload, const ModelConfig& cfg);

// The conditions of a workload's cache entry besides its job: the CPU threads both sides ran on
// (--threads, else default_threads()), LoRA's dropout when not 0 (a Python forward per adapter),
// and TRL's loss_type when not its default chunked_nll: "2 threads", "1 thread, LoRA dropout 0.05".
std::string framework_conditions(const WorkloadOptions& workload);

// The model words of a cache entry: its family, sizes and extra modules, which a Python loop's
// time follows ("llama, 2 layers, d_model 64, 4 heads (2 kv), d_ff 176, vocab 512, q/k norm"); not
// its name, which for a config.json is the path it was read from.
std::string framework_model(const ModelConfig& cfg);

// What a cache entry is looked up by, besides the device.
struct FrameworkKey {
  Precision precision = Precision::kFp32;
  Precision weights_dtype = Precision::kFp32;
  std::string model;  // framework_model
  std::string job;    // framework_job
  int64_t seq_len = 0;  // T; 0: any
  std::string conditions;  // framework_conditions; "" : any
};

struct FrameworkOverhead {
  double seconds_per_micro_step = 0;
  bool added = false;  // given, or read from a calibration of this model (0 s when it measured ≤ 0)
  // "" (engine only), "--framework-overhead", "calibrated <date>, <framework>, <job>", or, from
  // another job's entry, "calibrated <date>, <framework>, on <job>; none for <this job>", or, with
  // 0 s, why the device's entries for other models or weights are not used.
  std::string source;
};

// `spec`: "auto" or milliseconds per micro-step (≥ 0). auto: the cache's entry for this device
// name, precision, model, weights dtype and job, hf before hf-trl before plain (the most faithful
// first); when none has this job, the same model's closest other job (the same adapters, then the
// same checkpointing), and the source says whose time it is. Among a job's entries of one framework
// the closest T (by ratio) is taken; the source names a T other than the key's. Another precision's, model's or
// weights dtype's entry is not used: 0 s, and the source says what is calibrated and which
// calibration would serve. A negative calibration counts as 0, and the source says so. Bad spec:
// UserError.
FrameworkOverhead resolve_framework_overhead(const std::string& spec, const std::string& device_name,
                                             const FrameworkKey& key);

// The one time a sweep adds to every micro-step: resolve_framework_overhead for each precision and
// weights dtype of `workload` and, under --knobs, each job its splits run (with and without
// checkpointing). With auto, when those differ (another time, or none for some), none is added, and
// the source says so: one precision's host time is not another's; when they agree but come from
// different entries, the source names each.
FrameworkOverhead sweep_framework_overhead(const std::string& spec, const std::string& device_name,
                                           const WorkloadOptions& workload, const ModelConfig& cfg);

// The sentence a recommendation ends with.
std::string framework_sentence(double seconds_per_micro_step, const std::string& source);

}  // namespace accumbench
