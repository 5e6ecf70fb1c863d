// Results are data (docs/ARCHITECTURE.md, google/benchmark): the sweep fills these plain structs, statistics
// and the recommendation are computed from them, and reporters only print them. No LibTorch here.
//
//   SweepResult result = run_sweep(options);          // src/sweep/runner.cpp
//   ConsoleReporter().report(result, std::cout);     // src/report/
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "accumbench/options.hpp"

namespace accumbench {

// 2: data parallel (world size, allreduce phase); 3: chunked_loss; 4: LoRA (trainable parameters,
// transformers' 6N FLOPs, hardware TFLOP/s with checkpointing's recompute); 5: real data (padding
// fraction, computed tokens per second, positions per step); 6: decisions (rounds, winsorized means
// with intervals, the decision and its comparisons, time models); 7: the framework overhead the
// decisions added (context.framework_seconds_per_micro_step, framework_source); 8: interruption by a
// signal; 9: interruption.saved_while_running and interruption.error (a file left unfinished says so).
// 10: the optimizer in every run's split (a list sweeps each); 11: the weights' and adapters' dtypes in
// every run's split; 12: a step's positions and computed positions count every rank's (data
// parallel; they were rank 0's); 13: the clipping norm in every run's split (--max-grad-norm's list
// sweeps each); 14: the padding in every run's split (--padding's list sweeps each); 15: the sweep's
// notes (what its options left idle, what the model's config means at its T, the device's caveats),
// which only stderr had; 16: the packing in every run's split (--packing's list sweeps each); 17:
// the grouping in every run's split (--group-by-length's list sweeps each); 18: each step's
// data_step of data_steps (the decisions' strata); 19: never-measured values null, each step's
// session, the context's load; 20: the context's other_cpu_seconds over other_cpu_span_seconds (the
// CPU time other processes took while the sweep ran). Older files are upgraded
// as they are read (src/report/json_upgrade.cpp).
inline constexpr int kJsonSchemaVersion = 20;

// Phases of one optimizer step. kOther is the step's wall time minus the timed phases.
// kAllReduce (data parallel: the gradients' all-reduce before the optimizer step) is numbered
// last so that the older phases keep their indices; reporters show it in timeline order.
enum class Phase : int { kData = 0, kH2D, kForward, kBackward, kOptimizer, kOther, kAllReduce };
inline constexpr int kPhaseCount = 7;
// "data", "h2d", "forward", "backward", "optimizer", "other", "allreduce"
const char* phase_name(Phase phase);

// Every fact about a phase in one place: its names, the words the recommendation uses, its colour
// in the charts. phase_table() lists them in timeline order (data, h2d, forward, backward,
// allreduce, optimizer, other), the order every report shows them in.
struct PhaseInfo {
  Phase phase;
  const char* name;    // "forward": JSON keys, CSV "<name>_seconds", HTML headers
  const char* abbrev;  // "fwd": the console's "fwd ms"
  const char* words;   // "in forward": "mostly in forward" in the recommendation
  const char* colour;  // the charts' colour, "#4e79a7"
  bool data_parallel_only;  // allreduce: shown only where a run is data parallel
};
const std::array<PhaseInfo, kPhaseCount>& phase_table();
const PhaseInfo& phase_info(Phase phase);

using PhaseSeconds = std::array<double, kPhaseCount>;

inline constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();

// One phase of one micro-step (the optimizer phase has micro_step == -1), from one recorded
// optimizer step. Times are relative to the start of that step. Feeds the memory timeline and
// the Chrome trace.
struct PhaseSpan {
  int micro_step = 0;
  Phase phase = Phase::kData;
  double start_seconds = 0;
  double duration_seconds = 0;
  int64_t bytes_at_start = 0;  // allocated bytes at the phase boundary
  int64_t bytes_at_end = 0;
  int64_t peak_bytes = 0;      // peak allocated bytes inside the phase
};

// An interval with its point estimate (NaN when not measured).
struct Estimate {
  double value = kNotMeasured;
  double low = kNotMeasured;
  double high = kNotMeasured;
};

// One timed optimizer step.
struct StepSample {
  double step_seconds = 0;             // wall time, steady_clock, after the step's synchronize
  PhaseSeconds host_seconds{};         // host wall time per phase, summed over micro-steps
  PhaseSeconds device_seconds{};       // CUDA event time per phase; NaN on CPU
  double loss = 0;                     // token-weighted mean loss of the whole step
  int64_t tokens = 0;                  // non-ignored target tokens in the step
  int64_t positions = 0;               // non-pad positions computed in the step, every rank's
  int64_t computed_positions = 0;      // positions computed in the step, padding included, every rank's
  int64_t peak_allocated_bytes = 0;    // peak during this step
  bool skipped = false;                // fp16: step skipped because gradients overflowed
  int64_t round = -1;                  // the interleaved round it was timed in; -1: its own block
  // Which of the run's data_steps distinct batches it trained on (the steps cycle through them):
  // the decisions' strata. -1 and 0: not recorded (files before schema 18).
  int64_t data_step = -1;
  int64_t data_steps = 0;
  // The sweep that timed it (RunResult::session, the wall clock at its start): a split a --resume
  // times again keeps the file's steps beside its own, each pairing with the others of its sweep's
  // round. 0: its run's session (files before schema 19).
  int64_t session = 0;
};

// Where the peak bytes went (at the moment of the peak).
struct MemoryBreakdown {
  int64_t parameters_bytes = 0;
  int64_t gradients_bytes = 0;
  int64_t optimizer_state_bytes = 0;
  int64_t activations_bytes = 0;  // the rest of the live bytes
  int64_t slack_bytes = 0;        // reserved − allocated (CUDA caching allocator); 0 on CPU
};

// One point of the sweep grid: a micro-batch × accumulation split plus the memory knobs.
struct SplitConfig {
  int64_t micro_batch = 1;
  int64_t accum_steps = 1;
  Precision precision = Precision::kFp32;
  bool optimizer_in_backward = false;
  Checkpointing activation_checkpointing = Checkpointing::kNone;
  bool cuda_graphs = false;
  bool chunked_loss = false;  // cross-entropy over chunks of tokens, no (b·T, V) logits
  int world_size = 1;  // data-parallel ranks (WORLD_SIZE); micro × accum × world = the batch
  // The optimizer that steps (sweep's --optimizer list is a grid dimension): each split builds its
  // state afresh, so its memory is its own optimizer's.
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  // What the weights are stored in (sweep's --weights-dtype list is a grid dimension): the one
  // model is cast between splits of different dtypes, and the optimizer's state built afresh.
  Precision weights_dtype = Precision::kFp32;
  // What LoRA's adapters are stored in (sweep's --adapter-dtype list, the same way; fp32 without LoRA).
  Precision adapter_dtype = Precision::kFp32;
  // The global norm the step's gradients are clipped to before the optimizer (--max-grad-norm's
  // list is a grid dimension); 0: not clipped. A setting of the step, as the precision is: the label
  // leaves it out, run_label and the reports' clip column name it where the splits differ in it.
  double max_grad_norm = 0;
  // How each micro-batch is padded (--padding's list is a grid dimension): a setting of the step,
  // as the clipping is; every padding computes the same update from the same samples, so the
  // recommendation chooses among them. run_label and the reports' padding column name it where the
  // splits differ in it.
  PaddingChoice padding;
  // How samples are laid out in rows (--packing's list is a grid dimension): each packing makes its
  // own rows of the same samples, so a step of packed rows trains on more samples than one of
  // unpacked rows; the decision compares such splits per real token. run_label and the reports'
  // packed column name it where the splits differ in it.
  Packing packing = Packing::kNone;
  // Whether the sampler groups samples by length (--group-by-length's list is a grid dimension, as
  // the packing is): grouped steps hold other samples than random ones, so splits that differ in it
  // are compared per real token too. run_label and the reports' grouped column name it where the
  // splits differ in it.
  bool group_by_length = false;
  StepRows rows() const { return {packing, group_by_length}; }

  // "8×8", "64×1 oib", "1×64 ckpt chunked-ce", "4×2 adamw8bit", "4×2 bf16-weights": micro × accum
  // plus the knobs that are on, then the optimizer unless it is adamw, then the weights' dtype and
  // the adapters' unless fp32 ("bf16-weights bf16-adapters"; the world size is the same for a
  // whole sweep and is printed once, in the header).
  std::string label() const;
  // The label without the optimizer and the dtypes: where one of each is named once for every
  // split (a plan, its header; the plan's changes, their --optimizer and --weights-dtype).
  std::string shape_label() const;
  // Stable identity for --resume: label (optimizer and weights dtype included) plus precision (and the world size when
  // above 1, the clipping norm when clipped, the padding unless max, the packing unless none:
  // "4×2/fp32/clip1/pad-longest/pack-bfd/grouped"; grouped only when grouped).
  std::string key() const;
};

// The rules between batch, micro-batch, accumulation and world size (src/types/split.cpp).
// Divisors of n in increasing order (the default splits).
std::vector<int64_t> divisors(int64_t n);
// Sequences each of `world_size` data-parallel ranks holds per step. Throws UserError unless
// world_size (>= 1) divides the batch. The one check of that rule (sweep, verify, plan, shard).
int64_t sequences_per_rank(int64_t batch, int world_size);
// Validates a split: micro_batch divides the sequences each of `world_size` data-parallel ranks
// holds. Returns the accumulation steps.
int64_t accumulation_steps(int64_t batch, int64_t micro_batch, int world_size = 1);
// Throws UserError for optimizer-in-backward with more than one rank: each parameter would step
// before its gradient is summed over the ranks.
void require_one_rank_for_optimizer_in_backward(int world_size);
// Throws UserError for optimizer-in-backward with gradient clipping (max_grad_norm > 0): each
// parameter would step before the global norm it is clipped by is known.
void require_no_clipping_in_backward(double max_grad_norm);

// The grid points of one split: itself, and with `knobs` also activation checkpointing, and at
// accumulation 1 in one process without gradient clipping (`clips`) optimizer-in-backward alone
// and with checkpointing (the lowest-memory point).
std::vector<SplitConfig> knob_variants(const SplitConfig& split, bool knobs, bool clips = false);
// `points`, followed with `chunked` by each of them again with the chunked cross-entropy.
std::vector<SplitConfig> loss_variants(std::vector<SplitConfig> points, bool chunked);

// One job of a workload's lists: a weights dtype, an adapter dtype, an optimizer, a precision and a
// clipping norm. Each changes the update or the memory a split needs, so what fits, and which split
// is best, is a question per job; a sweep of several lists measures the splits of each, and the plan
// plans them.
struct GridJob {
  Precision weights_dtype = Precision::kFp32;
  Precision adapter_dtype = Precision::kFp32;
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  Precision precision = Precision::kFp32;
  double max_grad_norm = 0;
  PaddingChoice padding;
  Packing packing = Packing::kNone;
  bool group_by_length = false;
  bool operator==(const GridJob& other) const;
};
// The jobs in split_grid's order: the weights' dtypes outermost, then the adapters', the
// optimizers, the precisions, the clipping norms, the packings, the groupings, the paddings (each
// list in the order given).
std::vector<GridJob> grid_jobs(const WorkloadOptions& workload);
GridJob job_of(const SplitConfig& split);
// The workload with this job's one of each list.
WorkloadOptions job_workload(WorkloadOptions workload, const GridJob& job);
// The options that tell the job from the others of the workload, as typed, in grid_jobs' order:
// "--weights-dtype bf16 --optimizer adamw8bit" (only the lists of more than one); "" with one job.
std::string job_flags(const GridJob& job, const WorkloadOptions& workload);

// The one grid builder, for sweep, plan and verify: per weights dtype (grid_weights_dtypes), per
// adapter dtype (grid_adapter_dtypes), per optimizer (grid_optimizers), per precision, per micro-batch (default:
// every divisor of a rank's share of the batch), the split with the grid's checkpointing, its
// knob variants (grid.knobs), each again with the chunked loss (loss.chunked), each followed by
// its CUDA-graph replay (grid.cuda_graphs); a point the grid makes twice is kept once. With
// grid.optimizer_in_backward every point has the optimizer inside backward, so only the split
// without accumulation (the whole of a rank's share in one micro-step) is kept.
// Throws UserError when a micro-batch does not divide a rank's share, or the world size the batch,
// or when --optimizer-in-backward leaves no split (the micro-batches miss the whole batch).
std::vector<SplitConfig> split_grid(const WorkloadOptions& workload, int world_size);
// With grid.optimizer_in_backward, the sentence naming the splits split_grid left out because they
// accumulate; with grid.knobs over data-parallel ranks, the one saying the optimizer-in-backward
// variants are left out ("" when nothing was): the CLI prints it as a note.
std::string optimizer_in_backward_note(const WorkloadOptions& workload, int world_size);

enum class RunStatus { kOk, kOutOfMemory, kPredictedOutOfMemory, kError };
const char* run_status_name(RunStatus status);  // "ok", "oom", "predicted-oom", "error"
RunStatus run_status_from_name(const std::string& name);  // throws UserError on unknown names

// Summary statistics of a series (statistics.hpp computes them).
struct Summary {
  double median = kNotMeasured;
  double min = kNotMeasured;
  double mean = kNotMeasured;
  double stddev = kNotMeasured;
  double cv = kNotMeasured;          // stddev / mean
  double ci_low = kNotMeasured;      // bootstrap interval of the median
  double ci_high = kNotMeasured;
  int64_t count = 0;
};

struct RunResult {
  SplitConfig config;
  RunStatus status = RunStatus::kOk;
  std::string error;                 // the error message when status != kOk

  std::vector<StepSample> steps;     // timed steps only (warmup discarded)
  Summary step_seconds;              // over steps[].step_seconds
  PhaseSeconds phase_median_seconds{};   // median over steps of host_seconds per phase
  PhaseSeconds device_median_seconds{};  // median over steps of device_seconds (NaN on CPU)
  double device_busy_fraction = kNotMeasured;  // sum of device phase time / step time (CUDA)

  double tokens_per_step = 0;        // mean real (non-pad) positions per optimizer step, every rank's
  double tokens_per_second = 0;      // tokens_per_step / median step: real tokens per second
  // Positions computed per second, padding included (× world size), and the share of them that
  // was padding: Σ (computed − non-pad) / Σ computed over the timed steps.
  double computed_tokens_per_second = 0;
  double padding_fraction = 0;
  double samples_per_second = 0;
  double achieved_tflops = 0;        // flops_per_token · tokens / median step / 1e12 (model FLOPs)
  double hardware_tflops = 0;        // also counting checkpointing's recomputed forward
  double mfu = kNotMeasured;         // achieved / peak; NaN when the device has no peak (CPU)

  int64_t peak_allocated_bytes = 0;  // max over timed steps
  int64_t peak_reserved_bytes = 0;   // CUDA caching allocator; == allocated on CPU
  MemoryBreakdown peak_breakdown;
  int64_t predicted_peak_bytes = -1; // from the plan; -1 when not predicted
  bool fits = true;                  // measured (or predicted) peak within the memory limit

  std::vector<PhaseSpan> timeline;   // phases of the last timed step

  // Decisions (decision.hpp): step times are winsorized on their seconds per real token;
  // clip_seconds is that bound for a step of the run's mean positions (winsorizing_bound of the
  // timed steps, written by finalize_run). Runs pair by round only within one session (one sweep
  // process).
  double clip_seconds = kNotMeasured;
  int64_t session = 0;               // 0: not timed in interleaved rounds
  Estimate mean_seconds;             // winsorized mean step time with its confidence interval
};

// The sweep that timed `step` of `run`: its own stamp, else its run's.
inline int64_t session_of(const RunResult& run, const StepSample& step) {
  return step.session != 0 ? step.session : run.session;
}

// What the rounds decided (decision.hpp). kFastest: every other candidate is slower beyond doubt;
// kTie: the rest are slower or equivalent within the tolerance, and some are equivalent (the least
// memory wins); kUndecided: some candidates could still be faster or slower when the rounds ended.
enum class DecisionKind { kNone, kOnly, kFastest, kTie, kUndecided };
const char* to_string(DecisionKind kind);  // "none" | "only" | "fastest" | "tie" | "undecided"
enum class Verdict { kSlower, kFaster, kEquivalent, kUndecided };
const char* to_string(Verdict verdict);    // "slower" | "faster" | "equivalent" | "undecided"

// One candidate against the fastest: the ratio of their winsorized mean step times.
struct Comparison {
  int index = -1;                    // the candidate (SweepResult::runs)
  Estimate ratio;                    // mean(index) / mean(fastest)
  int64_t paired_rounds = 0;         // rounds both ran in; 0: compared through the two means
  Verdict verdict = Verdict::kUndecided;
};

struct Decision {
  DecisionKind kind = DecisionKind::kNone;
  double confidence = 0.95;          // of all intervals of the sweep together
  double tie_tolerance = 0.03;
  int fastest = -1;                  // no other candidate ahead of it by the paired estimate
  int runner_up = -1;                // the candidate with the smallest ratio to the fastest
  std::vector<Comparison> comparisons;  // every other candidate, smallest ratio first
  int64_t rounds = 0;                // interleaved rounds in this sweep
  bool budget_spent = false;         // --time-budget ended the rounds with something undecided
  bool interrupted = false;          // a signal ended the rounds (interrupt.hpp) with something undecided
};

struct Recommendation {
  int best_index = -1;               // index into SweepResult::runs; -1 when no run succeeded
  std::vector<int> tied_indices;     // the fastest and the candidates equivalent to it
  std::string reason;                // one or two sentences from the measurements
  Decision decision;
};

// Everything needed to reproduce and interpret the run (google/benchmark's "context").
struct SweepContext {
  int json_schema_version = kJsonSchemaVersion;
  std::string date;                  // ISO 8601, UTC
  std::string host;
  std::string device;                // "cpu" or "cuda:0"
  std::string device_name;           // "NVIDIA H200", or the CPU model name
  int64_t device_memory_bytes = 0;
  std::string driver;                // CUDA driver/runtime versions; empty on CPU
  std::string libtorch_version;
  std::string build_type;
  std::string git_commit;
  int threads = 0;
  int world_size = 1;                // data-parallel ranks; every number is rank 0's
  std::string distributed_backend;   // "gloo" or "nccl"; empty with one process

  std::string model;                 // preset name or config path
  int64_t parameters = 0;
  int64_t trainable_parameters = 0;  // with gradients and optimizer state (the adapters' with LoRA)
  int64_t seq_len = 0;
  int64_t batch = 0;                 // effective batch in sequences
  double flops_per_token = 0;        // model FLOPs: 6N (LoRA: 4N + 6N_lora) + 12·L·a·T (sweep/flops)
  double transformers_flops_per_token = kNotMeasured;  // 6 · N without embeddings: transformers' total_flos
  double peak_tflops = kNotMeasured; // device peak used for MFU; NaN when unknown
  int64_t memory_limit_bytes = 0;    // 0 when unlimited
  // --framework-overhead as resolved: what the decisions added to every micro-step, and where it
  // came from ("" : nothing, the engine alone; src/sweep/framework_overhead.hpp).
  double framework_seconds_per_micro_step = 0;
  std::string framework_source;
  // The machine's load while the sweep ran: the highest read at its saves (the 1-minute average, or
  // the threads runnable at that moment where more; load_average()), and its CPU cores
  // (busy_machine_note). 0: not read (files before schema 19, other systems).
  double load_average = 0;
  int cpu_cores = 0;
  // The CPU time other processes used while the sweep ran (the machine's busy time, a hypervisor's
  // steal included, less the sweep's own; cpu_times()), over how many seconds of it, from before its
  // first split to its last save. Direct where the load is not: a burst between two saves counts,
  // and the sweep's own threads do not. 0 over 0: not read (files before schema 20, other systems).
  double other_cpu_seconds = 0;
  double other_cpu_span_seconds = 0;

  // Every option as given (name, value), in CLI order, so a report is self-describing.
  std::vector<std::pair<std::string, std::string>> options;
};

// One line through a sweep's step times (statistics.hpp, fit_time_models): for the splits that
// share precision and knobs, step = accumulation × fixed + per_token × computed positions +
// optimizer, fitted by least squares. Two free values for many splits, so the residuals say how
// well "a fixed cost per micro-step" explains the ranking.
struct TimeModelResidual {
  int index = -1;                    // SweepResult::runs
  double measured_seconds = 0;       // mean step time
  double fitted_seconds = 0;
};
// Beyond this worst relative residual the line explains nothing: the report says so, and the
// recommendation does not blame the slowest split's loss on its fixed cost.
inline constexpr double kLooseTimeModel = 0.20;

struct TimeModel {
  Precision precision = Precision::kFp32;
  std::string knobs;                 // the group's knobs as in its split labels ("", "ckpt", ...; "clip1": clipped)
  double fixed_seconds = kNotMeasured;      // per micro-step, whatever its size
  double seconds_per_token = kNotMeasured;  // per computed position (padding included)
  double optimizer_seconds = kNotMeasured;  // median optimizer phase
  std::vector<TimeModelResidual> residuals;
  double max_relative_residual = kNotMeasured;  // max |measured − fitted| / measured
};

// What a result holds of its sweep when not all of it: stopped by a signal (Ctrl-C, SIGTERM;
// interrupt.hpp), ended by an error (a data-parallel rank gone), or saved while the sweep ran (the
// --json written after each split and every few seconds of rounds, runner.cpp: a file left so is
// from a sweep killed before its end, or still running). The runs hold what was measured, the
// splits never begun are named, and --resume measures what is missing. All empty: the whole sweep.
struct Interruption {
  std::string signal;                      // "SIGINT", "SIGTERM", ...; empty: no signal stopped it
  std::vector<std::string> splits_not_run; // labels of the grid's splits that were never begun
  bool saved_while_running = false;        // a save before the sweep's end, which a later one replaces
  std::string error;                       // the error that ended the sweep early; empty: none

  bool whole() const { return signal.empty() && !saved_while_running && error.empty(); }
};

// A run's name in every report: its label, its precision when `runs` (the sweep's) hold several,
// its clipping and its padding when they differ in them ("8×8 bf16 clip1", "8×8 no-clip",
// "2×4 pad-longest"; the label names every other dimension of the grid that varies).
std::string run_label(const RunResult& run, const std::vector<RunResult>& runs);

struct SweepResult {
  SweepContext context;
  std::vector<RunResult> runs;
  Recommendation recommendation;
  std::vector<TimeModel> time_models;
  Interruption interruption;
  // What the sweep noted on stderr before its table, one sentence each: options that changed
  // nothing, what the model's config means at this T, a caveat of the device, a padding that TRL
  // would choose otherwise. Kept so that `report`, Markdown and HTML say them too; a note derived
  // from the runs (report.hpp's diverged_loss_note) is not stored, every reader derives it.
  // A --resume words them again for its own command line and every run it holds, kept ones
  // included: none of the file's is carried over.
  std::vector<std::string> notes;
};

}  // namespace accumbench
