// The memory plan's phase peaks (plan_builder.hpp): each phase's highest moment from the tables
// that memory_plan.cpp and the block files (block_moments.cpp, checkpointed_block.cpp) filled,
// the forward's (with a quantised base's dequantised weight), the backward's head, its blocks and
// its end (the embedding's gradient, the first block), and the optimizer step's. Symbols as in
// memory_plan.cpp.
#include <algorithm>

#include "plan/block_tensors.hpp"
#include "plan/plan_builder.hpp"
#include "plan/quantized_base.hpp"

namespace accumbench::plan_detail {

PlanBuilder::PhaseTotals PlanBuilder::phase_totals() const {
  const int64_t resident_bytes = total_bytes(plan.resident);
  const int64_t grad_bytes = total_bytes(plan.gradients);
  const int64_t saved_bytes = total_bytes(plan.saved);
  int64_t block_saved_bytes = 0;
  for (size_t i = block_lines_begin; i < block_lines_end; ++i) block_saved_bytes += plan.saved[i].bytes;
  // With accumulation the gradients of the earlier micro-steps are alive during the later
  // micro-steps' forward and backward; at accumulation 1 they grow during the backward.
  const int64_t grads_in_micro_step = accumulating ? grad_bytes : 0;
  int64_t saved_before_blocks = 0;
  for (size_t i = 0; i < block_lines_begin; ++i) saved_before_blocks += plan.saved[i].bytes;
  return {resident_bytes, grad_bytes, saved_bytes, block_saved_bytes, grads_in_micro_step, saved_before_blocks};
}

// The forward's peak: the loss head, a block's forward without grad, TRL's metrics, the head's
// matmul inside a checkpointed autocast region, the last block's moments with grad, QLoRA's.
int64_t PlanBuilder::forward_peak(const PhaseTotals& s) const {
  const auto [resident_bytes, grad_bytes, saved_bytes, block_saved_bytes, grads_in_micro_step, saved_before_blocks] = s;
  int64_t forward =
      std::max(resident_bytes + grads_in_micro_step + saved_bytes + total_bytes(plan.forward_peak),
               plan.block_forward_peak.empty() ? int64_t{0}
               : resident_bytes + grads_in_micro_step + saved_before_blocks + (checkpointing ? block_saved_bytes : 0) +
                     total_bytes(plan.block_forward_peak));
  if (!plan.framework_forward_peak.empty()) {
    forward = std::max(forward, resident_bytes + grads_in_micro_step + saved_bytes + total_bytes(plan.framework_forward_peak));
  }
  const int64_t cast_cache = forward_cast_cache() ? L * linear_weight_numel_per_block(m) * c : adapter_cast_cache(L);
  if (cast_cache > 0 && full_head()) {
    // Checkpointed under autocast: the head's matmul runs inside the forward's autocast region,
    // whose cache still holds every block's weight casts, or with LoRA every adapter's
    // (block_forward); the fp32 copy of the logits comes after the region has closed
    // (Trainer::accumulate), without them. (The saved log_softmax output is not made yet: N·V·4 less.)
    // The final norm's output is a temporary of that call: besides what the head saves (its cast
    // to c; a frozen head saves nothing, and its cast is a temporary too) (measured: seed 2026
    // case 143, the fp32 output next to the logits being made).
    const int64_t head_input = (lora || w != c ? N * d * w : 0) + (lora && w != c ? N * d * c : 0);
    forward = std::max(forward, resident_bytes + grads_in_micro_step + saved_bytes - N * V * kFp32 + cast_cache + N * V * c +
                                    head_input);
  }
  if (!plan.last_block_forward_peak.empty()) {
    forward = std::max(forward, resident_bytes + grads_in_micro_step + saved_before_blocks + total_bytes(plan.last_block_forward_peak));
  }
  return quant_forward_peak(s, forward);
}

// QLoRA: the forward's moments with one weight dequantised (above what forward_peak found).
int64_t PlanBuilder::quant_forward_peak(const PhaseTotals& s, int64_t forward) const {
  const auto [resident_bytes, grad_bytes, saved_bytes, block_saved_bytes, grads_in_micro_step, saved_before_blocks] = s;
  if (!quant) return forward;
  {
    // The last block's forward with its largest weight dequantised, before the head has run
    // (the saved lines up to the blocks' end).
    // Without checkpointing the block's forward locals that nothing saves are alive too when
    // its MLP output projection dequantises its weight (its input, when no adapter saves it):
    // a second moment, with that weight.
    int64_t saved_through_blocks = 0;
    for (size_t i = 0; i < block_lines_end; ++i) saved_through_blocks += plan.saved[i].bytes;
    // Unless checkpointed, where the input projections' moments are measured
    // (quant_first_projection) they replace that bound, which counts every line of the last block
    // though they run first; the other weights' moments are the output projections' (the MLP's
    // input projections, as wide as its output projection, run before their activations' lines).
    const int64_t first_projection = quant_first_projection(), output_projection = quant_output_projection();
    if (first_projection > 0 && output_projection > 0) {
      forward = std::max(forward, resident_bytes + grads_in_micro_step + saved_before_blocks + first_projection);
    } else {
      forward = std::max(forward, resident_bytes + grads_in_micro_step + saved_through_blocks + dequant_bytes);
    }
    // The MLP's output projection: its dequantised weight (and the scratch that made it), then
    // next to the weight the (b·T, d) result its product makes.
    const int64_t down = std::max(dequantized_linear_bytes(o, d, m.d_ff, c), d * m.d_ff * c + N * d * c);
    if (!checkpointing) {
      // (The int8 linears' inputs kept as themselves are among those locals: counted once.)
      Dtypes dt = dtypes();
      if (L == 1) dt.frozen_prefix = frozen_prefix_of(m, o, checkpointing);
      const int64_t kept = int8_kept_locals(m, o, N, dt, /*block0=*/L == 1);
      // The base runs before its adapter (adapted_linear.cpp): what the output projection's
      // adapter saves of its input does not exist yet, nor A's output that B saves, nor under
      // autocast the casts of A and B (measured: seed 3 case 138, the down adapter's b·T·r·c,
      // r·f·c and d·r·c not yet made).
      const LastBlock last = last_block();
      const bool adapted = mlp_out_adapted();
      const int64_t adapter_not_yet =
          adapted ? adapter_a_output_bytes(o, dt, N) + (adapter_casts() ? adapter_cast_bytes(o, c, m.d_ff, d) : 0) : 0;
      const int64_t not_yet = last.input_group_bytes(mlp_out_input_line(m), /*with_input=*/false) + adapter_not_yet;
      forward = std::max(forward, resident_bytes + grads_in_micro_step + saved_through_blocks - not_yet + down + last.end_locals - kept);
    } else {
      // Checkpointed, the last block's MLP (run without grad) holds its locals and activations
      // when its output projection dequantises its weight.
      forward = std::max(forward, resident_bytes + grads_in_micro_step + saved_through_blocks + mlp_before_out_projection + down);
      // And its input projections, the block's first linears, which save nothing there: their
      // input, the first norm's output, next to each weight (input_projections_dequant; measured:
      // GPT-2 d 128, 4 heads, f 32, c_attn's b·T·3a output beside its dequantised 3a·d weight).
      forward = std::max(forward, resident_bytes + grads_in_micro_step + saved_through_blocks + N * d * w +
                                      input_projections_dequant(/*a_outputs_kept=*/false));
    }
    // The attention's output projection, where the attention is wide: its dequantised weight next
    // to the attention's locals and what the block has saved up to its input (quant_output_projection).
    if (output_projection > 0) {
      const int64_t before = checkpointing ? saved_through_blocks : saved_before_blocks;
      forward = std::max(forward, resident_bytes + grads_in_micro_step + before + output_projection);
    }
  }
  return forward;
}

// What the blocks below the last have saved, with grad (quant_first_projection,
// quant_output_projection): the blocks' lines less the last block's, its int8 kept inputs and,
// under autocast, the casts of its adapters from linear group `first_not_run` on.
int64_t PlanBuilder::blocks_below_last(const LastBlock& last, int first_not_run) const {
  Dtypes dt = dtypes();
  if (L == 1) dt.frozen_prefix = frozen_prefix_of(m, o, checkpointing);
  int64_t bytes = 0;
  for (size_t i = block_lines_begin; i < block_lines_end; ++i) bytes += plan.saved[i].bytes;
  bytes -= total_bytes(last.lines) + int8_block_inputs(m, o, N, dt, /*block0=*/L == 1);
  if (adapter_casts() && lora)
    for (const BlockLinear& l : lora_targets(m, o.lora.targets))
      if (linear_group(l.name) >= first_not_run) bytes -= adapter_cast_bytes(o, c, l.in, l.out);
  return bytes;
}

// With grad (not checkpointed) on a quantised base, the last block's input projections
// dequantise their weights first thing (GPT-2's c_attn; Llama's q, k, v in turn, each next to
// the outputs and A outputs of those before it): next to the blocks below, what the block has
// saved by then (its input, the first norm's statistics), the norm's output (which their adapters
// save) and, where nothing saves it, the block's input; the weight with its scratch, or next to the
// b·T·out output its product makes (measured: GPT-2 d 128, 4 heads, f 32 and Qwen3 d 128, 16
// heads of 32, f 64, nf4 and int8). Only where the attention's moments were measured
// (attention_output_moments_apply: fp32, no dropout); 0 elsewhere. The bytes above the lines
// saved before the blocks.
int64_t PlanBuilder::quant_first_projection() const {
  if (!quant || checkpointing || !attention_output_moments_apply()) return 0;
  const LastBlock last = last_block();
  const int64_t from_input = last.bytes_from(attention_input_line(m), /*with_it=*/true);
  if (from_input < 0) return 0;  // no adapter on them saves their input
  const int64_t before_input = total_bytes(last.lines) - from_input;
  const int64_t input = last.line_bytes(attention_input_line(m));
  const int64_t block_input = last.line_bytes(kBlockInputLine) > 0 ? 0 : N * d * w;
  Dtypes dt = dtypes();
  if (L == 1) dt.frozen_prefix = frozen_prefix_of(m, o, checkpointing);
  const int64_t int8 = int8_kept_at(m, o, N, dt, /*groups_run=*/1, /*block0=*/L == 1);
  return blocks_below_last(last, 0) + before_input + input + block_input + int8 +
         input_projections_dequant(/*a_outputs_kept=*/true);
}

// The attention's input projections (GPT-2's c_attn; Llama's q, k, v in turn) dequantising their
// weights: each weight with its scratch, or next to the b·T·out output its product makes, beside
// the outputs of those before it (and, with grad, their A outputs, which each B saves); the
// highest.
int64_t PlanBuilder::input_projections_dequant(bool a_outputs_kept) const {
  int64_t made = 0, highest = 0;
  for (const BlockLinear& l : block_linears(m)) {
    if (linear_group(l.name) != 0) continue;
    const int64_t weight = std::max(dequantized_linear_bytes(o, l.out, l.in, c), l.out * l.in * c + N * l.out * c);
    highest = std::max(highest, made + weight);
    made += N * l.out * c;
    if (a_outputs_kept && adapted_count(m, o, {l.name.c_str()}) > 0) made += adapter_a_output_bytes(o, dtypes(), N);
  }
  return highest;
}

// QLoRA with the explicit attention: the last block's output projection (o_proj, attn_c_proj)
// dequantises its a·d weight in the forward as soon as the attention has returned, before the
// block has saved anything after its input (the attention output copy) or run its adapter: the
// weight with its scratch, or next to the (b·T, d) result its product makes, on top of the
// block's locals (Llama's normed and rotated q, k, v, GPT-2's c_attn output; unless checkpointed,
// block 0's input when nothing saves it) and that input. With grad, the block's lines up to the
// input, the A outputs of the input projections' adapters and an int8 base's kept inputs are
// there too, and every block below; checkpointed (run without grad) the block saves nothing.
// Measured: Qwen3 d 128, 16 heads of 32 and 64, f 64, nf4 and int8, with and without
// checkpointing (the rotated q next to o_proj's dequantised weight). The bytes above the lines
// saved before the blocks (checkpointed: through the blocks' inputs); 0 where it does not apply.
int64_t PlanBuilder::quant_output_projection() const {
  if (!quant || o.attention != AttentionKind::kExplicit) return 0;
  const int64_t a = m.n_heads * m.head_dim;
  const int64_t weight = std::max(dequantized_linear_bytes(o, d, a, c), d * a * c + N * d * c);
  if (checkpointing) {
    std::vector<PlanLine> locals;
    attention_locals(Table{&locals});
    const int64_t casts = m.arch == Architecture::kGpt2 ? adapter_cast_cache(L - 1, {"c_attn"})
                                                        : adapter_cast_cache(L - 1, {"q", "k", "v"});
    return casts + total_bytes(locals) + N * a * c + weight;
  }
  const LastBlock last = last_block();
  const ForwardMoment* attention = nullptr;
  for (const ForwardMoment& moment : last.moments)
    if (moment.kind == ForwardMoment::kAttention) attention = &moment;
  if (attention == nullptr) return 0;
  // The block's lines before its output projection's input (its adapter's lines of it come later).
  int64_t before_input = 0;
  bool found = false;
  for (const PlanLine& line : last.lines) {
    if (line.name.rfind(kAttentionOutputCopy, 0) == 0) found = true;
    if (!found) before_input += line.bytes;
  }
  if (!found) return 0;
  Dtypes dt = dtypes();
  if (L == 1) dt.frozen_prefix = frozen_prefix_of(m, o, checkpointing);
  const int64_t a_outputs = last.a_outputs_line >= last.lines.size() ? 0 : last.a_outputs[0];
  const int64_t int8 = int8_kept_at(m, o, N, dt, /*groups_run=*/2, /*block0=*/L == 1);
  // The block's input in 16-bit weights' dtype (Llama family), as in last_block_forward.
  const int64_t input = m.arch != Architecture::kGpt2 && w != kFp32 && last.line_bytes(kBlockInputLine) > 0 ? N * d * w : 0;
  return blocks_below_last(last, 1) + before_input + a_outputs + int8 + attention->locals_bytes + input + N * a * c + weight;
}

// The backward's first moments: the loss head's gradients (the chunked head's final norm, an
// untied head stepping inside backward) and the head's weight gradient being made.
int64_t PlanBuilder::backward_head_peak(const PhaseTotals& s) const {
  const auto [resident_bytes, grad_bytes, saved_bytes, block_saved_bytes, grads_in_micro_step, saved_before_blocks] = s;
  int64_t backward_head = resident_bytes + grads_in_micro_step + saved_bytes + total_bytes(plan.backward_peak);
  // The final norm's backward: the hidden states' gradient, and the norm's own. RMSNorm (weight ·
  // normed, normed = x · rsqrt): the gradient of normed and the product g · normed for the
  // weight's, fp32; GPT-2's layer_norm: the input's gradient. Then the norm's weight (and bias)
  // gradient.
  const bool gpt2 = m.arch == Architecture::kGpt2;
  const int64_t norm_backward = (gpt2 ? N * d * w : 2 * N * d * kFp32) + (lora ? 0 : (gpt2 ? 2 * d : d) * t);
  // RMSNorm's backward peaks later, in pow's (x² from x, src/models/llama.cpp): the incoming
  // gradient and normed's are gone, and so are what the norm saved but x (LibTorch 1.x's x², the
  // rsqrt, a trained weight's normed); alive are x's gradient from x · rsqrt, mean's expanded
  // gradient and pow_backward's grad · (2 · x.pow(1)): x.pow(1), its double and the product, five
  // b·T·d·4 (measured, plan_properties seed 3 case 874: MulBackward0, MeanBackward1, PowBackward0).
  const int64_t rms_pow = gpt2 ? 0
                               : 5 * N * d * kFp32 - (o.libtorch_major < 2 ? N * d * kFp32 : 0) - N * kFp32 -
                                     (lora ? 0 : N * d * w - d * t);
  if (chunked) {
    // The chunked head's backward only scales what the forward made, so the final norm's
    // backward can be the higher moment: every saved tensor is still there with the hidden
    // states' gradient (backward_peak). In 16-bit weights the node returns copies in their dtypes
    // and its fp32 sums go as it returns (src/engine/chunked_loss.cpp; measured, seed 2026 case
    // 316 with --all); in fp32 the sums are what it returns. Accumulating into an untied head's
    // .grad, AccumulateGrad has added the returned head gradient into it and let it go by then;
    // with the optimizer inside backward it has stepped and been freed (seed 3 case 970).
    const int64_t fp32_sums_gone = w != kFp32 ? N * d * kFp32 + (lora ? 0 : V * d * kFp32) : 0;
    const int64_t head_added =
        (accumulating || split.optimizer_in_backward) && !m.tied_embeddings && !lora ? V * d * w : 0;
    const int64_t before_norm =
        resident_bytes + grads_in_micro_step + saved_bytes + total_bytes(plan.backward_peak) - fp32_sums_gone - head_added;
    // (At pow's backward the hidden states' gradient, as returned, is gone.)
    backward_head = std::max({backward_head, before_norm + norm_backward, before_norm - N * d * w + rms_pow});
    // With the optimizer inside backward an untied head steps as soon as backward hands its
    // gradient (made in the forward) to AccumulateGrad: the step's temporaries of the head's
    // size join every saved tensor of the micro-step (a tied head waits for the embedding).
    if (split.optimizer_in_backward && !m.tied_embeddings && !lora)
      backward_head = std::max(backward_head, resident_bytes + saved_bytes + total_bytes(plan.backward_peak) + step_temporaries(V * d));
  }
  if (full_head()) {
    // After the full head's backward: it has released what it saved (log_softmax's output, its
    // input, its weight's cast; final_norm_saved and loss_head) and left its weight's gradient;
    // the hidden states' gradient comes back in the residual's dtype.
    const int64_t head_saved = N * V * kFp32 + (lora ? 0 : N * d * c) + (weights_cast() ? V * d * c : 0);
    const int64_t after_head =
        resident_bytes + grads_in_micro_step + saved_bytes - head_saved + (head_gradient_in_backward() ? V * d * t : 0);
    backward_head = std::max({backward_head, after_head + N * d * w + norm_backward, after_head + rms_pow});
  }
  return std::max(backward_head, head_weight_gradient_peak(s));
}

// The head linear's weight gradient being made (V·d in the trained dtype, before
// AccumulateGrad adds it or autograd buffers it), next to the logits' gradient (counted as
// the log_softmax output it replaces: that one is released by its backward) while the head's
// other saved tensors are still there. Under autocast its matmul's result in c and the
// logits' gradient cast to c exist too, but measured they do not add to the peak: left out,
// pending a closer look (the fp32 copies they replace are not modelled here either). (None
// with LoRA, whose head is frozen, nor with the chunked loss, whose head gradients are made
// in the forward.)
int64_t PlanBuilder::head_weight_gradient_peak(const PhaseTotals& s) const {
  const auto [resident_bytes, grad_bytes, saved_bytes, block_saved_bytes, grads_in_micro_step, saved_before_blocks] = s;
  if (lora || !full_head()) return 0;
  const int64_t head = V * d;
  // The head's matmul backward makes its input's gradient (b·T·d·c) with the weight's.
  int64_t backward_head_weight = resident_bytes + grads_in_micro_step + saved_bytes + head * t + N * d * c;
  // Under autocast with the weights in another dtype the weight's gradient is made in c and
  // cast to the weights' dtype by the cast's own backward node, after the head's matmul node
  // has let the logits' gradient go: measured (SGD with optimizer-in-backward, qwen2 L1 V1272,
  // plan_properties seed 1 case 130) the b·T·V·4 is not there then.
  if (weights_cast()) backward_head_weight -= N * V * kFp32;
  if (split.optimizer_in_backward && !m.tied_embeddings) {
    // The untied head steps as soon as its gradient is accumulated: the head's node has
    // finished, so the logits' gradient is gone too (log_softmax's output with it), as are
    // what the head linear saved (its input, and its weight's cast under autocast), and
    // AdamW's two temporaries of the head's size join its gradient. The hidden states' gradient
    // (cast back to the final norm's output dtype under autocast) waits for the norm's backward
    // (measured: seed 2026 case 467, ToCopyBackward0's b·T·d·4 next to the step's temporaries).
    const int64_t head_saved = N * d * c + (weights_cast() ? head * c : 0);
    backward_head_weight = std::max(backward_head_weight, resident_bytes + saved_bytes - N * V * kFp32 - head_saved +
                                                              N * d * w + head * t + step_temporaries(head));
  }
  return backward_head_weight;
}

// The gradient the token embedding's lookup was handed, beside its own at the end of backward:
// untied, the embedding output's (b·T·d in the residual's dtype), alive while the lookup makes its
// dense gradient; tied, gone by the sum. GPT-2's position embedding runs its backward after the
// token embedding's: its share (summed over the batch: T·d) waits, and without accumulation its
// gradient is not made yet; untied, its own backward, making that gradient once the token
// embedding's incoming one is gone, can be the later peak. Measured: seed 3 cases 601, 535, seed 1
// case 98, seed 2026 case 957 (untied), seed 2026 cases 125, 432, seed 3 case 300 and seed 1 case
// 804 (GPT-2, tied), seed 1 cases 400, 972 (tied).
int64_t PlanBuilder::embedding_lookup_input() const {
  const bool gpt2 = m.arch == Architecture::kGpt2;
  const int64_t position_grad = !accumulating && !split.optimizer_in_backward ? m.max_seq_len * d * t : 0;
  const int64_t incoming = N * d * w, position_share = T * d * w;
  return !gpt2               ? (m.tied_embeddings ? 0 : incoming)
         : m.tied_embeddings ? position_share - position_grad
                             : position_share + std::max<int64_t>(incoming - position_grad, 0);
}

// Without accumulation the first block's backward can peak higher than the last one's: by then
// the gradients of the L−1 blocks above it exist (AccumulateGrad made them as their backward ran),
// while of what the L blocks saved only its own is left (checkpointed: its input). The blocks save
// alike, so every moment of the last block (`backward_block`) recurs in block 0 shifted by
// (L−1)·(one block's gradients − what one block saved); the blocks in between lie on the line
// between the two ends. With LoRA the gradients are the block's adapters' (its frozen block 0
// saves less than the others unless checkpointed, and without checkpointing a block's activations
// outweigh its adapters: left out). (Not with accumulation, whose gradients are all alive from the
// start, nor with the optimizer inside backward, which frees each gradient once its parameter has
// stepped.) Measured: plan_properties seed 1 cases 94 (a full fine-tune) and 665 (checkpointed
// LoRA). 0 where it does not apply.
int64_t PlanBuilder::first_block_backward_peak(const PhaseTotals& s, int64_t backward_block) const {
  if (accumulating || split.optimizer_in_backward || L == 1 || (lora && !checkpointing)) return 0;
  ModelConfig one = m, two = m;
  one.n_layers = 1;
  two.n_layers = 2;
  const int64_t block_gradients = lora ? trained * t / L : (parameter_count(two) - parameter_count(one)) * t;
  const int64_t one_block_saved = s.block_saved_bytes / L;
  return backward_block + (L - 1) * (block_gradients - one_block_saved);
}

// The backward's last moments: the token embedding's gradients, and without accumulation the first
// block's backward (`backward_block` is the last block's moment).
int64_t PlanBuilder::backward_end_peak(const PhaseTotals& s, int64_t backward_block) const {
  const auto [resident_bytes, grad_bytes, saved_bytes, block_saved_bytes, grads_in_micro_step, saved_before_blocks] = s;
  // The end of backward, at the token embedding. Tied: its two gradients (the head's, waiting in
  // autograd's input buffer, and the lookup's dense one) and their sum are alive at once;
  // untied: the lookup's dense gradient, added into .grad when one exists; beside them, the
  // gradient the lookup was handed (embedding_lookup_input). Every other gradient is alive by then
  // (none with optimizer-in-backward, which frees them as it goes and steps the embedding last,
  // with AdamW's temporaries).
  const int64_t embedding_grad = lora ? 0 : V * d * t;  // LoRA: the embedding is frozen
  const int64_t lookup_input = embedding_lookup_input();
  int64_t backward_tail = 0;
  if (lora) {
    // A frozen base ends backward with the adapters' gradients and nothing at the embedding; data
    // parallel, with each bucket's flat copy of them too (below: no bucket waits on the embedding).
    backward_tail = resident_bytes + (split.optimizer_in_backward ? total_bytes(plan.optimizer_peak) : grad_bytes);
    if (o.world_size > 1) backward_tail = resident_bytes + 2 * grad_bytes;
  } else if (split.optimizer_in_backward) {
    // Tied, the head's gradient (waiting in autograd's input buffer), the lookup's and their
    // sum exist at once before the sum steps; then the step's temporaries join the sum alone.
    backward_tail = resident_bytes + std::max((m.tied_embeddings ? 3 : 1) * embedding_grad + lookup_input,
                                              embedding_grad + total_bytes(plan.optimizer_peak));
  } else {
    const int64_t in_flight = (m.tied_embeddings ? 3 : 1) * embedding_grad + lookup_input;
    const int64_t others = accumulating ? grad_bytes : grad_bytes - embedding_grad;
    backward_tail = resident_bytes + others + in_flight;
    if (o.world_size > 1) {
      // Data parallel (src/engine/gradient_reducer.cpp): each 25 MiB bucket, filled in reverse
      // parameter order, all-reduces a flat copy of its gradients from the moment its last one
      // is done. At the embedding's backward every bucket but the embedding's own has started;
      // once it has too, all the copies are alive until the all-reduce is waited for.
      // The last bucket starts from the post-accumulate hook of the last gradient done, whose
      // incoming gradient AccumulateGrad still holds then when it was added into an existing .grad
      // (accumulating; a first micro-step's is stolen): GPT-2's position table (wpe, done after the
      // tied wte), else the token embedding. Measured on two Gloo ranks at 1×4: gpt2-tiny T=32
      // 65,536 bytes above the plan without it, llama-tiny T=8 131,072.
      const int64_t bucket_limit = int64_t{25} << 20;
      const int64_t last_bucket = std::min(grad_bytes, std::max(embedding_grad, bucket_limit));
      const int64_t last_incoming = !accumulating                  ? 0
                                    : m.arch == Architecture::kGpt2 ? m.max_seq_len * d * t
                                                                    : embedding_grad;
      backward_tail =
          std::max(backward_tail + grad_bytes - last_bucket, resident_bytes + 2 * grad_bytes + last_incoming);
    }
  }
  return std::max(backward_tail, first_block_backward_peak(s, backward_block));
}

// Under autocast block 0's first adapted linears take an input that needs no gradient (the frozen
// prefix), so no linear saves their A's cast weight: autocast's cache holds it only until the
// forward ends, and every backward moment comes after (measured: seed 3 case 138, q's, k's and
// v's r·d·c gone by the backward).
int64_t PlanBuilder::unsaved_adapter_casts() const {
  if (!adapter_casts() || !lora || checkpointing) return 0;
  const int first_group = static_cast<int>(frozen_prefix_of(m, o, checkpointing)) - 1;
  int64_t bytes = 0;
  for (const BlockLinear& l : lora_targets(m, o.lora.targets))
    if (linear_group(l.name) == first_group) bytes += o.lora.rank * l.in * c;
  return bytes;
}

void PlanBuilder::phase_peaks() {
  const PhaseTotals s = phase_totals();
  const auto [resident_bytes, grad_bytes, saved_bytes, block_saved_bytes, grads_in_micro_step, saved_before_blocks] = s;
  plan.phase_peak_bytes[static_cast<int>(PlanPhase::kForward)] = forward_peak(s);
  // A tied head's weight gradient, when accumulating: it waits in autograd's input buffer for
  // the token embedding's backward, which runs last, so it is alive through every block's
  // backward (without accumulation the block backward's table counts it as a new gradient).
  // The chunked loss's head gradient (made in the forward, scaled in place in backward) waits
  // there the same way.
  // What the step saved before the blocks (the micro-batch's tokens, GPT-2's positions, packed
  // rows' mask and rotary tables) is alive through every block's backward, as in the forward's
  // block moment: the step holds the tokens, every block's context the packed layout, and the
  // embedding's backward, which runs last, its indices (measured: --packing bfd with
  // checkpointing, b·T·(8 + 2·hd·4 + T) under on llama-tiny before this term).
  const int64_t tied_head_gradient = accumulating && m.tied_embeddings && !lora ? V * d * t : 0;
  const int64_t backward_block = resident_bytes + grads_in_micro_step + saved_before_blocks + block_saved_bytes +
                                 total_bytes(plan.block_backward_peak) + tied_head_gradient;
  plan.phase_peak_bytes[static_cast<int>(PlanPhase::kBackward)] =
      std::max({backward_head_peak(s), backward_block, backward_end_peak(s, backward_block)}) - unsaved_adapter_casts();
  // Clipping's norms are freed before the optimizer's temporaries are made: the larger counts.
  plan.phase_peak_bytes[static_cast<int>(PlanPhase::kOptimizer)] =
      split.optimizer_in_backward
          ? resident_bytes
          : resident_bytes + grad_bytes + std::max(total_bytes(plan.optimizer_peak), total_bytes(plan.clip_peak));
  if (split.cuda_graphs) {
    // The graphs' private pool keeps the micro-step's high-water mark of activations and
    // temporaries reserved for good, so it is still there during the optimizer step.
    const int64_t pool = std::max(plan.phase_peak_bytes[static_cast<int>(PlanPhase::kForward)],
                                  plan.phase_peak_bytes[static_cast<int>(PlanPhase::kBackward)]) -
                         resident_bytes - grad_bytes;
    plan.phase_peak_bytes[static_cast<int>(PlanPhase::kOptimizer)] += std::max<int64_t>(0, pool);
  }
  settle_peak(plan);
}

void settle_peak(MemoryPlan& plan) {
  plan.peak_bytes = 0;
  for (int p = 0; p < kPlanPhaseCount; ++p) {
    if (plan.phase_peak_bytes[p] > plan.peak_bytes) {
      plan.peak_bytes = plan.phase_peak_bytes[p];
      plan.peak_phase = static_cast<PlanPhase>(p);
    }
  }
}

}  // namespace accumbench::plan_detail
