// Internal: `verify --export DIR` writes verify's reference step (the whole batch in one
// micro-step) so that a PyTorch reference (bench/reference/) can recompute it from the same
// weights and batch. The format is documented in docs/EXPORT.md.
//
//   ReferenceStep step{model_config, workload, batch, named_initial_weights, gradients, loss};
//   write_reference_step("ref", step);   // ref/index.json, ref/weights/*.bin, ref/grads/*.bin, ...
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "accumbench/data.hpp"
#include "accumbench/model_config.hpp"
#include "accumbench/options.hpp"

namespace accumbench {

struct ReferenceStep {
  ModelConfig model;
  WorkloadOptions workload;       // precision, weights dtype, LoRA, data options, seed
  Precision precision = Precision::kFp32;
  TokenBatch batch;               // the whole step, on the host
  std::vector<std::pair<std::string, at::Tensor>> weights;  // by parameter name, before the step
  std::vector<at::Tensor> gradients;  // parallel to `weights`; undefined for frozen parameters
  double loss = 0;                // token-normalized: summed cross-entropy / target tokens
  double grad_norm = 0;           // with --max-grad-norm: the gradients' global L2 norm before clipping
  // Parallel to `weights`: each after the reference's optimizer step (undefined for frozen ones),
  // and whether the weight decay acted on it (the Trainer's decayed group; weight_decay_flags).
  std::vector<at::Tensor> updated;
  std::vector<bool> decays;
};

// Creates `dir` when missing; throws UserError when it cannot (verify calls it before any step,
// so that a wrong path fails in a second, not after the reference step of a large model).
void create_export_directory(const std::string& dir);

// Writes `step` under `dir` (created when missing): every tensor as raw little-endian bytes in
// its own file, then index.json last, so an index that exists describes complete files. Throws
// UserError when the directory or a file cannot be written.
void write_reference_step(const std::string& dir, const ReferenceStep& step);

// Writes `dir`/index.json with the model's shape, its LoRA adapters (rank, scaling, dropout, the
// adapted block linears) and the weights' dtype, no tensors: what bench/reference/step_bench.py and
// hf_real_step.py read to time the same job (calibrate-framework).
void write_model_index(const std::string& dir, const ModelConfig& model, const WorkloadOptions& workload);

}  // namespace accumbench
