// The plan's builder (src/plan, private): the symbols of one split's formulas and the tables
// plan_memory fills step by step. memory_plan.cpp defines the steps of the step's own tensors
// (resident, gradients, saved, the loss head, the optimizer); block_moments.cpp the moments
// inside a block (its last forward with grad, its backward's candidates, QLoRA's dequantised
// weight), block_backward.cpp the backward's later candidates (the softmax, the input
// projections, the post-attention norm); checkpointed_block.cpp a checkpointed block's (its
// forward without grad, its recompute); phase_peaks.cpp the peaks per phase from all of them.
//
//   PlanBuilder builder(model, options, split);
//   builder.resident_tensors();  // ... in plan_memory's order
//   MemoryPlan plan = std::move(builder.plan);
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "accumbench/optimizer_state.hpp"
#include "accumbench/plan.hpp"
#include "plan/block_tensors.hpp"

namespace accumbench::plan_detail {

// The symbols of the formulas for one split, and the plan's tables filled step by step. Each step
// adds the lines of one part of the step's memory; phase_peaks() adds them up per phase.
struct PlanBuilder {
  const ModelConfig& m;
  const PlanOptions& o;
  const SplitConfig& split;
  MemoryPlan plan;
  int64_t P, b, T, N, d, V, L, c;
  int64_t w;        // bytes per weight in the storage dtype (--weights-dtype)
  int64_t trained;  // parameters with gradients and AdamW moments: all, or the adapters' (LoRA)
  int64_t t;        // bytes per trained parameter (and per gradient and moment)
  int64_t ad;       // bytes per LoRA adapter element (--adapter-dtype; 4 without LoRA)
  bool autocast, checkpointing, accumulating, chunked, lora;
  bool trl_chunked;  // --framework hf-trl --trl-loss chunked_nll: TRL's chunked head replaces ours
  bool quant;  // QLoRA: the block linears quantised, everything else fp32 (quantized_base.hpp)
  size_t block_lines_begin = 0, block_lines_end = 0;  // the blocks' lines in plan.saved

  PlanBuilder(const ModelConfig& model, const PlanOptions& options, const SplitConfig& s)
      : m(model), o(options), split(s) {
    plan.split = s;
    plan.model = model;
    plan.options = options;
    P = parameter_count(m);
    b = split.micro_batch;
    T = o.activation_length();  // with real data: the longest padded micro-batch
    N = b * T;
    d = m.d_model;
    V = m.vocab_size;
    L = m.n_layers;
    autocast = split.precision != Precision::kFp32;
    quant = o.lora.quantized();
    const PlanElementBytes e = plan_element_bytes(o, split);  // (plan.hpp says why)
    w = e.w;
    c = e.c;
    checkpointing = split.activation_checkpointing == Checkpointing::kBlocks;
    // CUDA graphs keep every gradient allocated from the start (the captured backward adds into
    // them), as accumulation does from the second micro-step on.
    accumulating = split.accum_steps > 1 || split.cuda_graphs;
    chunked = split.chunked_loss;
    trl_chunked = o.trl_chunked();
    lora = o.lora.enabled();
    trained = lora ? lora_parameter_count(m, o.lora) : P;
    ad = lora ? compute_bytes(o.lora.adapter_dtype) : kFp32;
    t = lora ? ad : w;  // adapters in --adapter-dtype (PEFT's fp32 by default); a full fine-tune trains in the weights' dtype
  }

  // The head linear runs on the whole micro-batch (the plain loss): its input and cast weight are
  // saved, the (b·T, V) logits made. Not with either chunked loss.
  bool full_head() const { return !chunked && !trl_chunked; }
  // The head's (and final norm's) weight gradients are new tensors in the last block's backward:
  // not with LoRA (frozen), accumulation (added into .grad) or an untied head stepping inside
  // backward (stepped and freed); a tied head's waits in the embedding's input buffer.
  bool head_gradient_in_backward() const {
    return !accumulating && !lora && !(split.optimizer_in_backward && !m.tied_embeddings);
  }
  // A scalar tensor of `element` bytes on the planned device: the CUDA caching allocator gives it
  // its smallest block.
  int64_t scalar_bytes(int64_t element) const { return o.cpu ? element : kCudaSmallestBlock; }
  // Weights cast to c by autocast exist only when they are stored in another dtype.
  bool weights_cast() const { return autocast && w != c; }
  // Autocast's casts of the block linears' weights: none when they are quantised (each is
  // dequantised in c directly, dequant_transient).
  bool block_weights_cast() const { return weights_cast() && !quant; }
  Dtypes dtypes() const {
    Dtypes dt{c, w, autocast};
    dt.a = ad;
    return dt;
  }
  // Autocast casts the adapters' weights and inputs (fp32 adapters under autocast; not bf16 ones).
  bool adapter_casts() const { return dtypes().adapter_casts(); }
  // The formula of what trains, by element: the adapters (N_lora, in --adapter-dtype) or the
  // parameters (P, in the weights' dtype).
  std::string trained_symbol() const {
    return lora ? (ad == kFp32 ? "N_lora·4" : "N_lora·2") : (w == kFp32 ? "P·4" : "P·w");
  }
  // The residual stream's formula symbol: it is in the weights' dtype.
  std::string rs() const { return w == kFp32 ? "4" : "w"; }

  // ---- resident for the whole step ----
  void resident_tensors();

  // ---- gradients ----
  void gradients();

  // ---- saved for backward by one micro-step ----
  void saved_tensors();
  void final_norm_saved();  // the final norm's saved tensors and the head's input (saved_tensors)

  // The loss head's tensors: saved, and the transients at the forward's and backward's peaks.
  // The most rows a micro-batch's chunked head gathers (PlanOptions::most_counted_targets).
  int64_t most_counted_rows() const;
  void loss_head();

  // --framework hf-trl (bench/reference/hf_trl.py, which cites each behaviour): compute_loss keeps
  // the model's outputs until it returns, before backward; under autocast accelerate's
  // convert_to_fp32 has replaced the logits by an fp32 copy (the c-byte ones are gone), without it
  // they are fp32 already. SFTTrainer's metrics then run on them under no_grad:
  // entropy_from_logits reshapes logits[:, :-1] to (b·(T−1), V) (a copy when b > 1: the slice is
  // not contiguous) and per 128 rows holds log_softmax, its exp and their product.
  void trl_metrics();

  // --trl-loss chunked_nll (bench/reference/hf_trl.py chunked_nll, after TRL's
  // _chunked_cross_entropy_loss): the patched forward keeps last_hidden_state in its outputs; the
  // shifted hidden states (b·(T−1) rows, a copy) are gathered with the valid targets first (a
  // second copy, which the chunks keep as their checkpointed input until backward); per chunk of
  // 256 rows, under non-reentrant checkpointing (nothing saved), the logits, log_softmax, its exp
  // and their product for the entropy. Backward reruns each chunk (the last, shortest, first),
  // keeping log_softmax's output, then makes the logits' gradient and the chunk's hidden and
  // weight gradients; from the second chunk on, autograd's buffers hold the sums of the earlier
  // chunks' hidden and weight gradients.
  void trl_chunked_head();
  // TRL's chunks for this split: b·(T−1) rows in chunks of 256, the last one shorter, and the
  // bytes per element of a chunk's tensors (trl_chunks() says which dtype where).
  struct TrlChunks {
    int64_t rows = 0, count = 0, full = 0, last = 0;
    int64_t logits_bytes = 0, softmax_bytes = 0, nll_copy_bytes = 0, cast_bytes = 0;
    std::string per_row() const {
      return "r·V·(" + std::to_string(logits_bytes) + "+3·" + std::to_string(softmax_bytes) + ")";
    }
  };
  TrlChunks trl_chunks() const;
  void trl_chunked_backward(const TrlChunks& chunks);

  void optimizer_temporaries();
  // --max-grad-norm: clip_grad_norm_'s norms before the optimizer steps (plan.clip_peak).
  void clipping_temporaries();

  // What one parameter's step allocates beyond its gradient (optimizer-in-backward's moments).
  int64_t step_temporaries(int64_t numel) const { return optimizer_step_temporary_bytes(o.optimizer, numel, t); }

  // The last block as a table of its own (block_tensors.hpp, one block of the model): its saved
  // lines, the index from which its backward has released them before the softmax's, its forward
  // moments and the locals held at its end. With one block and LoRA it is block 0, whose frozen
  // prefix saves nothing (none with checkpointing: frozen_prefix_of).
  struct LastBlock {
    std::vector<PlanLine> lines;
    size_t released_from = 0;
    std::vector<ForwardMoment> moments;
    int64_t end_locals = 0;
    // The bytes of the lines from the one named `name` on (with it when `with_it`); -1 when the
    // block has no such line.
    int64_t bytes_from(const std::string& name, bool with_it) const {
      int64_t bytes = 0;
      bool found = false;
      for (const PlanLine& line : lines) {
        if (!found && line.name == name) {
          found = true;
          if (!with_it) continue;
        }
        if (found) bytes += line.bytes;
      }
      return found ? bytes : -1;
    }
    // The bytes of the lines named `name`.
    int64_t line_bytes(const std::string& name) const {
      int64_t bytes = 0;
      for (const PlanLine& line : lines)
        if (line.name == name) bytes += line.bytes;
      return bytes;
    }
    // What the block has saved by a forward moment (its lines before moment.lines_end).
    int64_t saved_before(const ForwardMoment& moment) const {
      int64_t bytes = 0;
      for (size_t i = 0; i < moment.lines_end; ++i) bytes += lines[i].bytes;
      return bytes;
    }
    // The adapters' A outputs per linear group, which each B saves as its adapter runs, and the
    // index of their line (near the block table's end). By a forward moment before that line:
    // those of the groups that have run before the moment's own (measured: seed 1 case 416, q's,
    // k's, v's, o's, gate's and up's b·T·r·4 at the down adapter's moment).
    std::array<int64_t, kLinearGroups> a_outputs{};
    size_t a_outputs_line = std::numeric_limits<size_t>::max();
    int64_t a_outputs_before(const ForwardMoment& moment) const {
      if (a_outputs_line < moment.lines_end) return 0;  // counted among the lines
      const int groups = moment.kind == ForwardMoment::kAdapter ? moment.groups_run - 1 : moment.groups_run;
      int64_t bytes = 0;
      for (int g = 0; g < groups; ++g) bytes += a_outputs[static_cast<size_t>(g)];
      return bytes;
    }
    // The lines of one linear group's input (each starts with `input`, block_tensors.hpp): what
    // the group's adapters saved of it, and the input's own line when `with_input`.
    int64_t input_group_bytes(const std::string& input, bool with_input) const {
      int64_t bytes = 0;
      for (const PlanLine& line : lines)
        if (line.name.rfind(input, 0) == 0 && (with_input || line.name != input)) bytes += line.bytes;
      return bytes;
    }
  };
  LastBlock last_block() const;

  // One block's saved tensors (what a recompute saves again), and those that the block's own
  // backward has released by the time it reaches the attention softmax's backward.
  std::pair<int64_t, int64_t> one_block_saved_and_released() const;

  // The last block's backward: the head is done (its saved tensors are freed, its gradient
  // exists), the block's own saved tensors are still there (recomputed, with checkpointing).
  void block_backward();

  // The moments of the last block's backward, each a list of lines; the highest one's go into
  // `blk`: the MLP activation's backward (the output projection has released its input and cast
  // weight and made its weight gradient); the output projection's own backward (and, inside
  // backward, its step); the explicit attention softmax's; the MLP's and the attention's input
  // projections' (a full fine-tune's weight gradients); with checkpointing the recompute's end.
  void peak_candidates(const Table& blk, int64_t released_before_softmax);
  // One moment of the block's backward: its lines, and their sum (releases are negative lines).
  struct Moment {
    int64_t bytes = 0;
    std::vector<PlanLine> lines;
    void add(const std::string& name, const std::string& formula, int64_t n, const std::string& why) {
      lines.push_back(PlanLine{name, formula, n, why});
      bytes += n;
    }
  };
  // The candidates peak_candidates chooses from (block_moments.cpp says when each applies; an
  // empty one does not).
  Moment mlp_activation_moment() const;
  Moment mlp_projection_moment() const;
  // The MLP output projection's adapted backward, node by node (block_moments.cpp): its highest
  // step relative to everything the block saved, and what is alive of it when the base's node
  // starts (its dequantised weight's moment, dequant_transients).
  struct AdaptedBackward {
    PlanLine peak;
    int64_t before_base = 0;
  };
  AdaptedBackward mlp_out_adapter_backward() const;
  // The adapter's own tensors (A's output, casts, weight gradients) around A's backward node,
  // relative to the saved table: by its start, during it, and after it on top of the start.
  struct AdapterOwn {
    int64_t before_a = 0, during_a = 0, after_a = 0;
  };
  AdapterOwn mlp_out_adapter_own() const;
  Moment mlp_projection_step_moment() const;
  Moment softmax_moment(int64_t released_before_softmax) const;
  Moment mlp_input_moment() const;
  Moment post_attention_norm_moment() const;
  Moment attention_input_moment() const;
  Moment attention_projection_moment() const;
  Moment frozen_projection_moment(Moment mom, int64_t a_outputs_kept) const;
  Moment attention_output_bmm_moment() const;
  Moment attention_input_base_moment() const;
  bool attention_output_moments_apply() const;
  int64_t adapter_gradients_after_attention() const;
  int64_t input_projection_a_outputs(const Dtypes& dt) const;
  Moment recompute_end_moment() const;
  Moment recompute_adapter_moment() const;
  PlanLine dropout_moment_line(const std::string& prefix, int64_t bytes) const;
  Moment recompute_attention_moment() const;
  Moment recompute_output_projection_moment() const;
  void int8_not_kept_yet(const ForwardMoment& moment, Moment& candidate) const;
  int64_t new_gradient_bytes() const;
  int64_t mlp_out_released() const;
  bool mlp_out_adapted() const;  // the MLP's output projection (mlp_c_proj, down) has an adapter
  int64_t mlp_output_gradient_cast() const;
  bool residual_gradient_stops_at_mlp() const;
  int64_t mlp_output_gradient() const;
  int64_t checkpointed_residual_sum() const;
  std::string one_at_a_time() const;

  // A block's forward that saves nothing, on top of what is saved before it (phase_peaks).
  //  - LoRA without checkpointing and no adapter before the attention's output projection: block
  //    0's attention runs on tensors that require no grad; its (T, T) scores and probabilities
  //    exist for a moment (src/compat/compat.cpp masked_attention: the masked scores are a local
  //    next to softmax's output) when nothing of the micro-step is saved but what comes before
  //    the blocks. With a small vocabulary that moment is the forward's peak.
  //  - Checkpointing: every block's forward runs without grad (CheckpointFunction::forward), so
  //    the same moment comes in the last block with every checkpointed input kept, and a second
  //    one at the end of its MLP, where the block's locals (src/models/gpt2.cpp, llama.cpp) and
  //    the temporaries of its last full expression are all alive.
  void block_forward();
  void block_forward_attention(const Table& at) const;  // block_forward's attention moment
  void block_forward_end(const Table& end);             // a checkpointed block's end (sets mlp_before_out_projection)
  void block_forward_mlp_input(const Table& in) const;  // a checkpointed block's adapted MLP input projection
  void attention_locals(const Table& t) const;          // the block's locals from the attention on
  void mlp_locals(const Table& t, int64_t adapter_casts, const std::string& formula) const;  // … up to the MLP
  bool forward_cast_cache() const;                      // autocast caches the block weights' casts
  // Checkpointed LoRA under autocast: the bytes of the adapters' cached casts (A and B are fp32
  // leaves that require grad) for `blocks` whole blocks and, of the next, the adapters on `names`.
  int64_t adapter_cast_cache(int64_t blocks, std::initializer_list<const char*> names = {}) const;

  // The last block's forward moments with grad (block_tensors.hpp ForwardMoment), each on top of
  // the blocks below and the last block's saved tensors up to it: the explicit attention's
  // softmax, next to the masked scores; with LoRA and inputs in c, each adapter's fp32 copy of
  // its input (adapted_linear.cpp, as PEFT's x.to(lora_A.dtype)). With a small vocabulary (or
  // the chunked loss's small logits) one of them can top the loss head's.
  void last_block_forward();
  void last_block_forward_moment(const ForwardMoment& moment, const Table& f);

  // QLoRA: one block weight dequantised at a time. In a block's backward it is alive while a
  // frozen linear makes its input's gradient: at most the MLP output projection's moment, its
  // b·T·f input gradient next to the weight, on top of what the block keeps. That moment is a
  // peak when it exceeds the one peak_candidates chose (its lines from candidates_begin on).
  size_t candidates_begin = 0;
  int64_t dequant_bytes = 0;
  // Checkpointed: the last block's MLP forward (without grad) up to its output projection's input.
  int64_t mlp_before_out_projection = 0;
  void dequant_transients();

  // ---- peaks per phase (phase_peaks.cpp) ----
  // The sums every phase's moments start from.
  struct PhaseTotals {
    int64_t resident_bytes, grad_bytes, saved_bytes;
    int64_t block_saved_bytes;    // the blocks' saved lines, all L
    int64_t grads_in_micro_step;  // the gradients alive during a micro-step (with accumulation)
    int64_t saved_before_blocks;  // the saved lines before the blocks'
  };
  PhaseTotals phase_totals() const;
  int64_t forward_peak(const PhaseTotals& s) const;
  int64_t quant_forward_peak(const PhaseTotals& s, int64_t forward) const;
  int64_t quant_output_projection() const;
  int64_t quant_first_projection() const;
  int64_t input_projections_dequant(bool a_outputs_kept) const;
  int64_t blocks_below_last(const LastBlock& last, int first_not_run) const;
  int64_t backward_head_peak(const PhaseTotals& s) const;
  int64_t head_weight_gradient_peak(const PhaseTotals& s) const;
  int64_t embedding_lookup_input() const;
  int64_t first_block_backward_peak(const PhaseTotals& s, int64_t backward_block) const;
  int64_t backward_end_peak(const PhaseTotals& s, int64_t backward_block) const;
  int64_t unsaved_adapter_casts() const;
  void phase_peaks();
};

// The plan's peak and the phase that holds it, from its phase peaks.
void settle_peak(MemoryPlan& plan);

}  // namespace accumbench::plan_detail
