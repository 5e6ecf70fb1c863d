// The sweep: every micro-batch × accumulation split (× precision, × memory knobs) of one
// effective batch, measured on one device. What is measured is a WorkloadOptions (options.hpp,
// shared with verify and plan); how it is measured is here. Defaults live in these structs and
// nowhere else; the CLI's help prints them.
//
//   SweepOptions options;                 // gpt2-mini, T=128, batch 8, every divisor
//   options.workload.micro_batches = {1, 4, 16};
//   SweepResult result = run_sweep(options, [](const SweepResult& partial) { save(partial); });
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "accumbench/model_config.hpp"
#include "accumbench/options.hpp"
#include "accumbench/plan.hpp"
#include "accumbench/result.hpp"

namespace accumbench {

struct SweepOptions {
  WorkloadOptions workload = workload_defaults(Command::kSweep);
  int warmup = 2;                          // steps per split alone, untimed (at least one is run)
  int steps = 5;                           // interleaved rounds every split is timed in
  // Seconds of rounds (from the first) after which the undecided stop being measured; until then
  // only the fastest and the splits not yet decided against it go on (decision.hpp). 0: exactly
  // `steps` rounds.
  double time_budget_seconds = 20;
  double tie_tolerance = 0.03;             // equivalent when the ratio's interval is within 1 ± this
  double confidence = 0.95;                // of all the sweep's intervals together
  // Splits whose planned peak (src/plan) exceeds the memory limit are skipped and recorded as
  // predicted-oom; true runs them anyway.
  bool try_predicted_oom = false;
  // Non-empty: after its timed steps each split runs one more step under PyTorch's Kineto
  // profiler, saved as <dir>/<split>.trace.json; device_busy_fraction then comes from the GPU's
  // kernel time in it (CUDA, LibTorch 2.x).
  std::string profile_dir;
  double peak_tflops = kNotMeasured;       // overrides the device peak table
  // A Python training loop's host time per micro-step, added to every split before deciding:
  // milliseconds, or "auto" (calibrate-framework's cache for this device and precision, else none).
  std::string framework_overhead = "auto";
  // Where the caller saves the result (--json, or the --resume file), for the words of a sweep
  // stopped before its end; empty: nowhere, so nothing can be resumed.
  std::string json_path;
};

// This process's data-parallel rank (RANK, set by torchrun), 0 with one process. The CLI prints
// and writes files on rank 0 only. Throws UserError for a malformed launch environment.
int process_rank();

// Called after every finished split with the result so far (the CLI saves files and prints
// progress there: measurement never prints).
using SweepCallback = std::function<void(const SweepResult& partial)>;

// Called before each step so the CLI can show progress on a TTY.
struct SweepProgress {
  int split_index = 0;
  int split_count = 0;
  int step_index = 0;      // warm-up steps of the split alone
  int step_count = 0;
  int64_t round = -1;      // >= 0 once the interleaved rounds run
  int live_splits = 0;     // splits in the current round
  double budget_seconds = 0;
  double elapsed_seconds = 0;
};
using ProgressCallback = std::function<void(const SweepProgress& progress)>;

// The plan's options for `workload` on `device_is_cuda`: attention kind from the LibTorch
// version and device (explicit softmax on 1.x or the CPU, flash on CUDA 2.x).
// `token_batches`: every host batch the run keeps (planned_token_batches for a sweep's).
PlanOptions sweep_plan_options(const WorkloadOptions& workload, bool device_is_cuda, int token_batches);
// The host batches a sweep of `workload` keeps: each packing's distinct steps (distinct_steps_of).
int planned_token_batches(const WorkloadOptions& workload);
// The host memory this process may use: /proc/meminfo's MemAvailable over the ranks torchrun
// started on this machine (LOCAL_WORLD_SIZE); 0 when it cannot be read.
int64_t available_host_bytes_per_process();
// --distinct-steps: the runs of `result` (kept ones too) timed on fewer steps than their packing
// cycles through, named with their counts, and the --steps that times each on every step; "".
// `steps_cache` (optional) keeps each packing's count between calls: an epoch reads the file.
std::string distinct_steps_rounds_note(const SweepResult& result, const WorkloadOptions& workload,
                                      std::map<Packing, int>* steps_cache = nullptr);
// Grouped runs (--group-by-length, alone or in a list; a resumed file's kept runs too) on a
// lengths or token file whose samples differ in length, one of them timed on fewer steps than a
// pass over the file takes (the steps it cycles through, or its rounds): grouping sorts up to 50
// steps of samples at a time, the megabatch of the longest first, so the first grouped steps hold
// the longest samples. With both orders the per-token comparison leans toward grouping; alone, the
// grouped times are those of long samples. The note says so and names --distinct-steps epoch with
// the --steps it takes. "" otherwise (synthetic lengths draw only the steps' own samples).
// `steps_cache` as above.
std::string grouping_steps_note(const SweepResult& result, const WorkloadOptions& workload,
                                std::map<Packing, int>* steps_cache = nullptr);
// --distinct-steps asks for more steps than the sweep may keep: an epoch past kMaxDistinctSteps, or
// batches above half of `available_host_bytes` (0: not known, not checked). UserError naming a count that fits.
void require_distinct_steps_fit(const WorkloadOptions& workload, int64_t available_host_bytes);

// What `accumbench plan` plans for. The plan is arithmetic, so --device cuda needs no GPU here:
// without one attached it plans for PyTorch 2.x on CUDA (flash attention, 2.x autograd), the
// usual training setup, and `attached` is false (no device memory to read, no probes to run).
struct PlanTarget {
  PlanOptions options;
  bool cuda = false;
  bool attached = true;
};
// The host token batches it counts are the sweep's (planned_token_batches).
PlanTarget plan_target(const WorkloadOptions& workload);
// Whether a GPU is attached, so that --device auto runs on CUDA.
bool cuda_attached();

// Runs the sweep. Splits whose key is in `resume.runs` (status ok) are copied, not re-measured.
SweepResult run_sweep(const SweepOptions& options, const SweepCallback& on_split = nullptr,
                      const SweepResult* resume = nullptr, const ProgressCallback& on_step = nullptr);

// Every option as (name, value), for the report's context block.
std::vector<std::pair<std::string, std::string>> describe_options(const SweepOptions& options);

namespace compat {
class ProcessGroup;
}
// Data parallel: throws UserError on every rank when one was started with another subcommand
// (`command`) or other options (the first difference named), before any collective (src/compat's
// store exchange).
void require_same_options_on_every_rank(compat::ProcessGroup& group, const std::string& command,
                                        const std::vector<std::pair<std::string, std::string>>& options);

// The content of the files a workload reads (config.json, token file, lengths file), which ranks
// given the same paths on different machines may still not share.
std::vector<std::pair<std::string, std::string>> file_fingerprints(const WorkloadOptions& w);

// Whether a signal asked to stop (interrupt.hpp), on this rank or, with a group, on any rank: an
// all-reduce over `group` on `device` ("cpu", "cuda:N"), so every rank must call it at the same
// points. Sweep and verify ask between splits (and the sweep between rounds).
bool stop_requested_on_any_rank(compat::ProcessGroup* group, const std::string& device);
// What stopped it, for the report: this process's signal ("SIGINT"), or "another rank's signal".
std::string stop_cause();

// Data parallel over Gloo (the CPU's backend) cannot all-reduce bf16 tensors (PyTorch issue
// 111131: "Invalid scalar type"), and a full fine-tune of bf16 weights has bf16 gradients: throws
// UserError on every rank alike, before they join. `device`: "cpu" or "cuda:N".
void require_reducible_gradients(const WorkloadOptions& workload, const std::string& device, int world_size);

// Throws UserError when the weights and AdamW moments of `workload`'s model alone exceed the
// memory of `device` ("cpu" or "cuda:N"): refused before anything is built.
void require_model_fits_device(const WorkloadOptions& workload, const ModelConfig& cfg, const std::string& device);

// A sentence when bf16 runs on an AVX-512 CPU (the weights or a precision of the grid), whose
// oneDNN matmul scratch the plan does not count; empty otherwise or on CUDA.
std::string cpu_bf16_scratch_note(const WorkloadOptions& workload, bool cuda);

// The machine's load now (/proc/loadavg): the 1-minute average, or the threads runnable at this
// moment where more; 0 where it cannot be read (SweepContext::load_average).
double load_average();

// The CPU time the whole machine has spent busy (user, system, interrupts and a hypervisor's steal,
// /proc/stat) and this process's own (getrusage), in seconds since boot and since it began; NaN
// where they cannot be read. Two readings bracket a stretch of the sweep: the busy time that is
// not its own is other processes' (SweepContext::other_cpu_seconds).
struct CpuTimes {
  double machine_busy_seconds = std::numeric_limits<double>::quiet_NaN();
  double own_seconds = std::numeric_limits<double>::quiet_NaN();
};
CpuTimes cpu_times();

// Date, host, device name and memory, driver, LibTorch version, build type, git commit.
SweepContext describe_environment(const std::string& device_name);

// `accumbench --version`'s line: "accumbench 0.1.0 (commit 0123456789ab, Release build, LibTorch
// 1.13.1, CPU only)" (", CUDA" when LibTorch was built with it).
std::string build_description();

// Sets LibTorch's intra-op threads: `threads`, or default_threads() (options.hpp) when 0. Returns the
// number in use.
int configure_threads(int threads);

// ---- calibrate-framework ----
// A Python training loop's host time per micro-step, measured: the engine's sweep and the PyTorch
// reference (bench/reference/step_bench.py, plain and --framework hf-trl; "hf": a real transformers
// model's step, bench/reference/hf_real_step.py, where transformers is installed) time the same
// splits of the same shape on this device; each side's step time is fitted as a line over the accumulation
// steps n (t = a·n + c: the tokens per step are the same in every split), and a_reference − a_engine
// is what the framework adds to every micro-step. Written to the cache that
// `sweep --framework-overhead auto` reads (src/sweep/framework_overhead.hpp).
struct FrameworkCalibrationOptions {
  SweepOptions sweep;                                    // the shape, device, precision and splits
  std::string python = "/usr/bin/python3";               // a Python that imports torch
  std::string reference_dir;                             // the folder of step_bench.py
  std::vector<std::string> frameworks = {"plain", "hf-trl"};  // on CUDA "hf" joins when transformers imports
  int reference_steps = 3;                               // timed steps per split (median), after one warm-up
};

struct FrameworkCalibrationSide {
  std::string name;                  // "accumbench", "plain", "hf-trl", "hf"
  std::vector<int64_t> micro_batches;
  std::vector<double> step_seconds;  // per split, parallel to micro_batches
  double seconds_per_micro_step = 0; // the fitted slope a
  std::string torch;                 // the reference's PyTorch version (its header line); "" for the engine
  // Each split's timed steps, parallel to micro_batches (empty where the side gave its medians alone).
  std::vector<std::vector<double>> step_samples;
  // A reference's time per micro-step against the engine's, 95 % bootstrap interval (the splits'
  // steps resampled on both sides, each median refitted); NaN without the steps to resample.
  double overhead_low = std::numeric_limits<double>::quiet_NaN();
  double overhead_high = std::numeric_limits<double>::quiet_NaN();
};

struct FrameworkCalibration {
  int64_t batch = 0;
  FrameworkCalibrationSide engine;
  std::vector<FrameworkCalibrationSide> references;  // one per framework
  std::string cache_path;
  std::string device_name;
  std::string precision;
  // What was trained, as the cache keys it: "LoRA on all-linear, checkpointed" (framework_overhead.hpp).
  std::string job;
  // The Python's packages (hf_real_step.py --probe): "torch 2.11.0, transformers 5.17.0, peft …,
  // trl not installed, …"; empty when the probe could not run.
  std::string packages;
  std::vector<std::string> notes;  // what the calibration changed about the workload, in words
};

// Both sides run the same job: full fine-tuning or LoRA (its rank, targets and dropout), the
// weights' storage dtype, checkpointing of every block or none. Throws UserError for what the
// reference does not run (a quantised base, the chunked loss, variable lengths, packing or real
// tokens, --knobs, the optimizer inside backward, CUDA graphs, several precisions), fewer than two
// splits, or a Python that cannot run the reference. Another optimizer than AdamW is replaced by
// AdamW on the engine's side (it runs once per step, outside the time per micro-step; a note says so).
FrameworkCalibration calibrate_framework(const FrameworkCalibrationOptions& options);

}  // namespace accumbench
