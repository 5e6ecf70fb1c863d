// One transformer block's tensors saved for backward, as the plan's table lines (src/plan,
// private). Shared by plan_memory's saved-tensor table and its recompute of one block.
//
//   Table t{&plan.saved};
//   size_t released = gpt2_block_saved(model, options, /*b=*/8, Dtypes{/*c=*/2, /*w=*/4, /*autocast=*/true}, t);
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "accumbench/plan.hpp"

namespace accumbench::plan_detail {

inline constexpr int64_t kFp32 = 4;
inline constexpr int64_t kInt64 = 8;
inline constexpr int64_t kBool = 1;

// Adds lines to one table; `count` repeats a tensor (per block: L).
struct Table {
  std::vector<PlanLine>* lines;
  void add(const std::string& name, const std::string& formula, int64_t bytes, const std::string& why) const {
    lines->push_back(PlanLine{name, formula, bytes, why});
  }
};

// The element sizes a block's tensors come in: c the activations' (autocast's dtype, or the
// weights' without autocast), w the weights' and the residual stream's (--weights-dtype: the
// embedding's output is in it, and adding a lower-precision block output keeps it).
struct Dtypes {
  int64_t c = 4;
  int64_t w = 4;
  bool autocast = false;  // casts happen (per linear input, per weight when w != c)
  // The first block's input does not require grad (a frozen embedding, no checkpointing), so what
  // its first norm would save for the input's gradient is not saved there.
  bool frozen_first_input = false;
};

// Elements of the matrices one block runs through at::linear (autocast casts and caches them).
int64_t linear_weight_numel_per_block(const ModelConfig& m);
// Elements of the largest parameter (AdamW's temporaries are its size).
int64_t largest_parameter_numel(const ModelConfig& m);

// One block's tensors saved for backward (without checkpointing), in forward order, for b
// sequences in the dtypes `dt`. Returns the index (in t) of the first line that a
// block's backward has already released when it reaches the attention softmax's backward
// (explicit attention): bmm(probabilities, v)'s v and everything after it; the table's end with
// flash attention.
size_t gpt2_block_saved(const ModelConfig& m, const PlanOptions& o, int64_t b, const Dtypes& dt, const Table& t);
size_t llama_block_saved(const ModelConfig& m, const PlanOptions& o, int64_t b, const Dtypes& dt, const Table& t);

// --packing bfd: what one micro-step over packed rows builds once and every block's backward
// keeps (compat::document_layout, the models' final_hidden): GPT-2's per-token positions, Llama's
// rotary tables gathered at them, the explicit attention's block-diagonal mask. Nothing unpacked.
void packed_rows_saved(const ModelConfig& m, const PlanOptions& o, int64_t b, const Dtypes& dt, const Table& t);

}  // namespace accumbench::plan_detail

// ---- the optimizer's terms (src/plan/optimizer_terms.cpp) ----
namespace accumbench::plan_detail {

// Elements of every tensor that trains (has a gradient and optimizer state), one entry per
// tensor: the model's parameters, or with LoRA every adapter's A and B.
std::vector<int64_t> trained_tensor_numels(const ModelConfig& m, const LoraOptions& lora);
// The resident lines of `kind`'s state over those tensors (t bytes per trained element, n_t its
// symbol); *evictable_bytes gets the paged part (paged-adamw8bit on CUDA; 0 otherwise).
void optimizer_state_lines(OptimizerKind kind, const std::vector<int64_t>& numels, int64_t t, const std::string& n_t,
                           bool cpu, const Table& resident, int64_t* evictable_bytes);
// The largest temporaries of one tensor's step (optimizer_step_temporary_bytes over the tensors).
int64_t largest_step_temporaries(OptimizerKind kind, const std::vector<int64_t>& numels, int64_t t);

}  // namespace accumbench::plan_detail
