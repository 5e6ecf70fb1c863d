// The sweep: every micro-batch × accumulation split (× memory knobs) of one effective batch,
// measured on one device. Defaults live in SweepOptions and nowhere else; the CLI's help prints
// them from this struct.
//
//   SweepOptions options;                 // gpt2-mini, T=128, batch 8, every divisor
//   options.micro_batches = {1, 4, 16};
//   SweepResult result = run_sweep(options, [](const SweepResult& partial) { save(partial); });
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "accumbench/engine.hpp"
#include "accumbench/model_config.hpp"
#include "accumbench/plan.hpp"
#include "accumbench/result.hpp"

namespace accumbench {

// What model to build: a preset name or a Hugging Face config.json (which wins when given).
struct ModelOptions {
  std::string preset = "gpt2-mini";
  std::string hf_config;
  uint64_t seed = 0;
};
ModelConfig resolve_model(const ModelOptions& options);

struct SweepOptions {
  ModelOptions model;
  int64_t seq_len = 128;
  int64_t batch = 8;                       // effective batch, in sequences
  std::vector<int64_t> micro_batches;      // empty: every divisor of batch
  std::string device = "auto";
  std::vector<std::string> precisions = {"fp32"};
  std::string lengths = "fixed";           // fixed | variable
  std::string loss_normalization = "token";
  OptimizerOptions optimizer;
  int warmup = 2;                          // steps per split, discarded
  int steps = 5;                           // timed steps per split
  double time_budget_seconds = 0;          // > 0: time steps until the budget, at least `steps`
  int64_t memory_limit_bytes = 0;          // 0: the device's own memory
  bool knobs = false;                      // add checkpointing and optimizer-in-backward points
  // Splits whose planned peak (src/plan) exceeds memory_limit_bytes are skipped and recorded as
  // predicted-oom; true runs them anyway.
  bool try_predicted_oom = false;
  bool cuda_graphs = false;                // also replay every split from CUDA graphs
  bool chunked_loss = false;               // also run every split with the chunked cross-entropy
  int64_t loss_chunk_tokens = 0;           // tokens per chunk of it; 0: at least 1024, at most 16 chunks
  // Non-empty: after its timed steps each split runs one more step under PyTorch's Kineto
  // profiler, saved as <dir>/<split>.trace.json; device_busy_fraction then comes from the GPU's
  // kernel time in it (CUDA, LibTorch 2.x).
  std::string profile_dir;
  double peak_tflops = kNotMeasured;       // overrides the device peak table
  std::string token_file;                  // real tokens instead of synthetic ones
  int token_bytes = 2;
  int threads = 0;                         // 0: every hardware thread
};

// The grid: one SplitConfig per micro-batch × precision (× knobs, × chunked loss, × CUDA graphs). With data
// parallel each of `world_size` ranks holds batch / world_size sequences, split into micro-batch
// × accumulation steps (no optimizer-in-backward). Throws UserError when a micro-batch does not
// divide a rank's share, or the world size the batch.
std::vector<SplitConfig> sweep_grid(const SweepOptions& options, int world_size = 1);

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
  int step_index = 0;      // includes warmup steps
  int step_count = 0;
  double elapsed_seconds = 0;
};
using ProgressCallback = std::function<void(const SweepProgress& progress)>;

// The plan's options for this sweep on `device_is_cuda`: attention kind from the LibTorch
// version and device (explicit softmax on 1.x or the CPU, flash on CUDA 2.x).
PlanOptions sweep_plan_options(const SweepOptions& options, bool device_is_cuda, int token_batches);

// What `accumbench plan` plans for. The plan is arithmetic, so --device cuda needs no GPU here:
// without one attached it plans for PyTorch 2.x on CUDA (flash attention, 2.x autograd), the
// usual training setup, and `attached` is false (no device memory to read, no probes to run).
struct PlanTarget {
  PlanOptions options;
  bool cuda = false;
  bool attached = true;
};
PlanTarget plan_target(const SweepOptions& options, int token_batches);

// Runs the sweep. Splits whose key is in `resume.runs` (status ok) are copied, not re-measured.
SweepResult run_sweep(const SweepOptions& options, const SweepCallback& on_split = nullptr,
                      const SweepResult* resume = nullptr, const ProgressCallback& on_step = nullptr);

// Every option as (name, value), for the report's context block.
std::vector<std::pair<std::string, std::string>> describe_options(const SweepOptions& options);

// Date, host, device name and memory, driver, LibTorch version, build type, git commit.
SweepContext describe_environment(const std::string& device_name);

// Sets LibTorch's intra-op threads: `threads`, or every hardware thread when 0 (LibTorch 1.13
// defaults to one). Returns the number in use.
int configure_threads(int threads);

}  // namespace accumbench
