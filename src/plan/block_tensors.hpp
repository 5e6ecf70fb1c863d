// One transformer block's tensors saved for backward, as the plan's table lines (src/plan,
// private). Shared by plan_memory's saved-tensor table and its recompute of one block.
//
//   Table t{&plan.saved};
//   size_t released = gpt2_block_saved(model, options, /*b=*/8, Dtypes{/*c=*/2, /*w=*/4, /*autocast=*/true}, t);
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "accumbench/plan.hpp"

namespace accumbench::plan_detail {

inline constexpr int64_t kFp32 = 4;
inline constexpr int64_t kInt64 = 8;
inline constexpr int64_t kBool = 1;
// The CUDA caching allocator's smallest block: a scalar tensor takes this much on the device.
inline constexpr int64_t kCudaSmallestBlock = 512;
inline constexpr int64_t round_up(int64_t bytes, int64_t block) { return (bytes + block - 1) / block * block; }

// A block's linears in groups that read one input, in forward order: the attention's input
// projections, its output projection, the MLP's input projections, its output projection.
inline constexpr int kLinearGroups = 4;

// A moment of a block's forward (with grad) that can top the loss head's: `lines_end` is the
// table's size once the block's lines saved by then are in; on top of them come `transient`
// bytes and the block forward's locals held until it returns (src/models/gpt2.cpp, llama.cpp)
// that no backward saves.
//  - kAdapter, LoRA with the input not in fp32 (autocast's c, or bf16 weights): PEFT's
//    x.to(fp32) makes a copy that lives until the adapter returns, next to the input itself
//    (saved only as the adapters' casts), the base linear's output and the delta's tensors
//    (adapter_outputs): transient = input + copy + outputs. LoRA dropout's output replaces the
//    copy (adapted_linear.cpp reassigns it), so the copy exists only while dropout makes its
//    output and noise (a saved line), next to the base's output: transient = input + the higher
//    of that moment (dropout_bytes) and the outputs. Without autocast the output is the saved
//    line; under autocast it is an fp32 local, and A's cast of it (a line) is not made yet.
//  - kAttention, explicit attention: softmax's output is saved, the masked scores it came from
//    are a local of the attention (src/compat/compat.cpp masked_attention): transient = scores.
//  - kEnd, the block's last expression: the MLP's output projection's result next to the sum
//    it makes with h, every line of the block saved.
// `groups_run`: the block's linear groups (kLinearGroups) whose base linear has run by then, the
// adapter's own included (the base runs first): an int8 base has kept their inputs.
struct ForwardMoment {
  enum Kind { kAdapter, kAttention, kEnd } kind = kAdapter;
  int groups_run = 0;
  size_t lines_end = 0;
  int64_t input_bytes = 0, copy_bytes = 0, outputs_bytes = 0;  // kAdapter's parts
  int64_t a_output_bytes = 0;                                   // kAdapter's: its A's output, beside its outputs
  int64_t casts_bytes = 0;                                      // kAdapter's: under autocast its A and B cast to c
  int64_t dropout_bytes = 0;                                    // kAdapter's: dropout's moment (before A runs)
  int64_t out_elements = 0;                                     // kAdapter's b·T·out elements
  int64_t scores_bytes = 0;                                     // kAttention's
  int64_t result_bytes = 0;                                     // kEnd's: result and sum
  int64_t locals_bytes = 0;
  int64_t transient() const {
    return input_bytes + std::max(copy_bytes + outputs_bytes + a_output_bytes, dropout_bytes) + scores_bytes + result_bytes;
  }
};

// Adds lines to one table; `count` repeats a tensor (per block: L). `moments`, when set, collects
// the block forward's moments (ForwardMoment).
struct Table {
  std::vector<PlanLine>* lines;
  std::vector<ForwardMoment>* moments = nullptr;
  // When set, the block functions store the bytes of the block forward's locals and last
  // expression's temporaries that nothing saves, alive when the block's output is made.
  int64_t* end_locals = nullptr;
  void add(const std::string& name, const std::string& formula, int64_t bytes, const std::string& why) const {
    lines->push_back(PlanLine{name, formula, bytes, why});
  }
};

// The part of block 0 that saves nothing for backward, in forward order (Dtypes::frozen_prefix).
enum class FrozenPrefix {
  kNone,       // a full fine-tune, or a checkpointed block (its input is made to require grad)
  kInput,      // adapters on the attention's input projections: the first norm saves nothing
  kAttention,  // the first adapter is on the attention's output projection: the attention too
  kToMlp,      // adapters only in the MLP: the attention, the residual add and the second norm too
  kToMlpOut,   // adapters only on the MLP's output projection: its input projections and activation too
};

// The names of the block tables' lines for a linear group's input (linear_input's `what`): each
// of that input's lines starts with it. Other plan terms find those lines by it.
inline constexpr const char* kAttentionInputLine[] = {"ln_1 output", "input RMSNorm output"};  // [gpt2, llama]
inline constexpr const char* kMlpOutInputLine[] = {"gelu output", "silu(gate)·up"};            // [gpt2, llama]
inline constexpr const char* kBlockInputLine = "block input x";  // the block's input (LayerNorm's, or RMSNorm's fp32 copy)
inline constexpr const char* kAdapterOutputsLine = "LoRA A outputs";  // what each adapter's B saves
inline constexpr const char* kResidualLine = "residual h after attention";  // x + the attention's output
inline constexpr const char* kAttentionOutputCopy = "attention output copy (transpose + reshape)";  // the output projection's input
inline const char* attention_input_line(const ModelConfig& m) { return kAttentionInputLine[m.arch == Architecture::kGpt2 ? 0 : 1]; }
// --framework hf-trl runs gelu_new as transformers does, op by op (hf_activation_saved).
inline bool hf_activation_op_by_op(const ModelConfig& m, const PlanOptions& o) {
  return o.framework == PlanFramework::kHfTrl && m.activation == Activation::kGeluNew;
}
// Its pow is an autocast fp32 op on CUDA (not on the CPU): x's fp32 copy and what follows it are fp32.
inline bool hf_activation_pow_in_fp32(const PlanOptions& o, bool autocast) { return !o.cpu && autocast; }
inline const char* mlp_out_input_line(const ModelConfig& m) { return kMlpOutInputLine[m.arch == Architecture::kGpt2 ? 0 : 1]; }

// How many of one block's linears `names` carry an adapter (0 without LoRA).
int adapted_count(const ModelConfig& m, const PlanOptions& o, std::initializer_list<const char*> names);
// The linear group (kLinearGroups, from 0) of a block linear, by its name.
int linear_group(const std::string& name);

// A block's last sum, h + the MLP's output projection: the result (in c), the sum in the residual's
// dtype and, on the CPU, TensorIterator's cast of a result in another dtype (a temporary).
int64_t block_output_sum(const PlanOptions& o, int64_t N, int64_t d, int64_t c, int64_t residual);

// At micro-batch 1 matmul folds (1, H, T, hd) into bmm's batch as a view, not a copy: bmm saves
// its operands themselves (checked in PyTorch 1.13, fp32 and bf16 autocast; tests/plan_properties.cpp
// --live). GPT-2's q, k, v are then views of c_attn's output, one storage. With one head the
// transposed (b, 1, T, hd) view is as good as contiguous (a dimension of size 1 has no stride
// that matters): the same.
inline bool bmm_operands_are_views(int64_t b, int64_t heads) { return b == 1 || heads == 1; }

// The frozen prefix of block 0 for LoRA without checkpointing, from the adapters' targets.
FrozenPrefix frozen_prefix_of(const ModelConfig& m, const PlanOptions& o, bool checkpointing);

// The element sizes a block's tensors come in: c the activations' (autocast's dtype, or the
// weights' without autocast), w the weights' and the residual stream's (--weights-dtype: the
// embedding's output is in it, and adding a lower-precision block output keeps it).
struct Dtypes {
  int64_t c = 4;
  int64_t w = 4;
  bool autocast = false;  // casts happen (per linear input, per weight when w != c)
  // The LoRA adapters' element size (--adapter-dtype: fp32, or bf16), and whether autocast casts
  // their weights and inputs (it does when they are not in its dtype). bf16 adapters are planned
  // only where the activations are bf16 (adapter_dtype_problem), so that there they run as the
  // fp32 adapters of an fp32 step do: no casts, A's output and every gradient in c.
  int64_t a = 4;
  bool adapter_casts() const { return autocast && a != c; }
  // How much of the first block runs before anything in it requires grad (LoRA without
  // checkpointing: the frozen embedding's output needs no gradient). Autograd records nothing for
  // an op none of whose operands requires grad, so that part of block 0 saves nothing.
  FrozenPrefix frozen_prefix = FrozenPrefix::kNone;
};

// An adapted linear's output moment (src/models/adapted_linear.cpp, as PEFT's
// `result + lora_B(lora_A(x)) * scaling`, cast back to result's dtype) for `rows_out` = b·T·out
// elements. Under autocast, or all in fp32, A and B run in c: B's output, the scaled delta and
// the result, then the sum in their place, three tensors in c. With 16-bit weights and no
// autocast the fp32 adapter makes an fp32 delta: the result (c), the delta, their fp32 sum and,
// on the CPU, TensorIterator's fp32 copy of the result (on CUDA the cast back to c instead).
struct AdapterOutputs {
  int64_t bytes;
  const char* formula;
  const char* what;
};
AdapterOutputs adapter_outputs(const PlanOptions& o, const Dtypes& dt, int64_t rows_out);
// One adapter's A output for `rows` = b·T rows, r wide, the input its B saves: in autocast's dtype,
// else in the adapter's (b·T·r·c or b·T·r·a).
int64_t adapter_a_output_bytes(const PlanOptions& o, const Dtypes& dt, int64_t rows);
// One adapter's weights as autocast casts them to c: A (r × in) and B (out × r).
inline int64_t adapter_cast_bytes(const PlanOptions& o, int64_t c, int64_t in, int64_t out) { return o.lora.rank * (in + out) * c; }

// Elements of block 0's base weights whose linears get an input that does not require grad in
// the frozen prefix: their autocast cast (not cached for a frozen weight) is not saved.
int64_t frozen_prefix_weight_numel(const ModelConfig& m, FrozenPrefix prefix);
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
// rotary tables gathered at them (and, checkpointed, the positions every block's context keeps to
// rebuild them), the explicit attention's block-diagonal mask. Nothing unpacked.
void packed_rows_saved(const ModelConfig& m, const PlanOptions& o, int64_t b, const Dtypes& dt, bool checkpointing,
                       const Table& t);

}  // namespace accumbench::plan_detail

// ---- the optimizer's terms (src/plan/optimizer_terms.cpp) ----
namespace accumbench::plan_detail {

// Elements of every tensor that trains (has a gradient and optimizer state), one entry per
// tensor: the model's parameters, or with LoRA every adapter's A and B.
std::vector<int64_t> trained_tensor_numels(const ModelConfig& m, const LoraOptions& lora);
// The resident lines of `kind`'s state over those tensors (t bytes per trained element, n_t its
// symbol); *evictable_bytes gets the paged part (the paged optimizers on CUDA; 0 otherwise).
void optimizer_state_lines(OptimizerKind kind, const std::vector<int64_t>& numels, int64_t t, const std::string& n_t,
                           bool cpu, const Table& resident, int64_t* evictable_bytes);
// The largest temporaries of one tensor's step (optimizer_step_temporary_bytes over the tensors).
int64_t largest_step_temporaries(OptimizerKind kind, const std::vector<int64_t>& numels, int64_t t);

}  // namespace accumbench::plan_detail
