// `accumbench verify`: from identical weights and data, one optimizer step with the whole batch
// and one with each split; the gradients and the updated weights must agree within a tolerance
// stated per precision.
//
//   VerifyOptions o;  o.model.preset = "gpt2-tiny";  o.batch = 8;  o.lengths = "variable";
//   VerifyResult r = run_verify(o);
//   print_verify(r, std::cout);      // exit code 1 when !r.all_pass
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "accumbench/engine.hpp"
#include "accumbench/sweep.hpp"

namespace accumbench {

struct VerifyOptions {
  ModelOptions model{"gpt2-tiny", "", 0};
  int64_t seq_len = 64;
  int64_t batch = 8;
  std::vector<int64_t> micro_batches;  // empty: every divisor of batch
  std::string device = "auto";
  std::string precision = "fp32";
  std::string lengths = "variable";
  std::string loss_normalization = "token";
  bool optimizer_in_backward = false;     // also check 1×B with the optimizer inside backward
  bool activation_checkpointing = false;  // run the splits with checkpointed blocks
  bool cuda_graphs = false;               // also run every split from CUDA graphs (CUDA only)
  bool chunked_loss = false;              // also run every split with the chunked cross-entropy
  int64_t loss_chunk_tokens = 0;          // tokens per chunk of it; 0: at least 1024, at most 16 chunks
  OptimizerOptions optimizer;
  int threads = 0;
};

// Tolerances on the relative L2 error of the gradient, per precision, and the justification.
// fp32: summation order differs between splits, so errors are a few float32 ulps of the
// accumulated sums: 1e-5 leaves a 10× margin over what we measure. bf16/fp16 autocast rounds every
// activation to 8 (bf16) or 11 (fp16) mantissa bits, and a different micro-batch changes which
// kernel tiles and reductions are used: 3e-2.
double gradient_tolerance(Precision precision);
// Relative L2 error of the weight update (w_after − w_before) against the whole batch's update.
// AdamW's first update is lr·g/(|g|+eps), whose slope at g ≈ 0 is lr/eps: a gradient element
// that is zero up to rounding can flip sign and move by 2·lr, so the update is checked in L2
// (a few flipped elements stay small) and not element by element. fp32: 1e-3, against measured
// rounding-level errors up to 1.3e-4 (the chunked loss on gpt2-mini, variable lengths: it scales
// the head's gradients by 1/tokens after its matmuls, the plain head before them) and 0.45–0.65
// for a real error (mean-of-means on variable lengths). bf16/fp16: 1e-1.
double update_tolerance(Precision precision);

struct VerifySplit {
  SplitConfig config;
  double loss = 0;
  double max_abs_grad_diff = 0;
  double rel_l2_grad_error = 0;
  double max_weight_diff = 0;       // reported, not judged (see update_tolerance)
  double rel_l2_update_error = 0;
  bool pass = false;
};

struct VerifyResult {
  std::string model;
  int64_t parameters = 0;
  int64_t seq_len = 0;
  int64_t batch = 0;
  int64_t tokens = 0;             // non-ignored targets in the step
  std::string precision;
  std::string lengths;
  std::string loss_normalization;
  int world_size = 1;             // data-parallel ranks that ran the splits
  double reference_loss = 0;      // loss of the whole batch in one micro-batch
  double gradient_tolerance = 0;
  double update_tolerance = 0;
  std::vector<VerifySplit> splits;
  bool all_pass = true;
};

VerifyResult run_verify(const VerifyOptions& options);
void print_verify(const VerifyResult& result, std::ostream& out);

}  // namespace accumbench
