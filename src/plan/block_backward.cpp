// The later moments of the last block's backward for the memory plan (plan_builder.hpp), after
// the MLP's output projection (block_moments.cpp): the explicit attention's softmax, the MLP's
// input projections, the post-attention RMSNorm, the attention's input projections. Each is a
// candidate that peak_candidates weighs against the others. Symbols as in memory_plan.cpp.
#include <algorithm>
#include <string>

#include "plan/block_tensors.hpp"
#include "plan/plan_builder.hpp"
#include "plan/quantized_base.hpp"

namespace accumbench::plan_detail {

// The explicit attention's softmax backward (its gradients in fp32: compat::masked_attention's
// softmax runs in fp32), after the block's MLP, output projection and bmm(probabilities, v) have
// released what they saved and made the block's later gradients (none left with the optimizer
// inside backward: each has stepped and been freed). Empty with flash attention, or when the last
// block is a frozen block 0's attention (LoRA, one block).
PlanBuilder::Moment PlanBuilder::softmax_moment(int64_t released_before_softmax) const {
  const bool gpt2 = m.arch == Architecture::kGpt2;
  const int64_t a = m.n_heads * m.head_dim, f = m.d_ff;
  Moment softmax;
  const bool attention_backward = !(L == 1 && frozen_prefix_of(m, o, checkpointing) >= FrozenPrefix::kAttention);
  if (o.attention != AttentionKind::kExplicit || !attention_backward) return softmax;
  // GPT-2 at micro-batch 1: the v that bmm(probabilities, v) saved is a view of c_attn's output,
  // whose storage the q and k that the scores' bmm saved still hold.
  const int64_t v_kept = gpt2 && bmm_operands_are_views(b, m.n_heads) ? N * a * c : 0;
  // An int8 base's kept inputs of the output projection and the MLP go with their nodes too (the
  // last block is block 0 with its frozen prefix when it is the only one, unless checkpointed).
  Dtypes dt = dtypes();
  const bool block0 = L == 1 && !checkpointing;
  if (block0) dt.frozen_prefix = frozen_prefix_of(m, o, checkpointing);
  const int64_t int8_inputs = quant ? int8_inputs_after_attention(m, o, N, dt, block0) : 0;
  // LoRA: the adapters on the attention's input projections still hold their A outputs (saved by
  // their B, whose nodes come later), though that line comes after v's (measured: seed 2026 case
  // 891, q's, k's and v's b·T·r·4 at the softmax's backward).
  const int64_t a_outputs_kept = input_projection_a_outputs(dt);
  const int64_t released = released_before_softmax - v_kept - a_outputs_kept + int8_inputs +
                           (block_weights_cast() ? (a * d + (gpt2 ? 2 : 3) * d * f) * c : 0);
  const int64_t grads = split.optimizer_in_backward
                            ? 0
                            : (gpt2 ? 2 * d * f + f + d + 2 * d + a * d + d : 3 * d * f + d + a * d) * new_gradient_bytes();
  softmax.add("released before the softmax's backward", "−(one block from v on)", -released,
              int8_inputs > 0 ? "the MLP, output projection and bmm(probabilities, v) are done, with the inputs int8 kept for them"
                              : "the MLP, output projection and bmm(probabilities, v) are done");
  if (grads > 0) softmax.add("the block's MLP and projection gradients", "(MLP, norm, proj.)·4", grads, "made on the way");
  // LoRA: the adapters after the attention (its output projection's, the MLP's) have made their
  // gradients (without accumulation new tensors; measured: seed 2026 case 614).
  const int64_t adapter_grads = adapter_gradients_after_attention();
  if (adapter_grads > 0)
    softmax.add("the adapters' gradients after the attention", "Σ (in + out)·r·4", adapter_grads, "made on the way");
  // A lone block 0 whose input needs no gradient (LoRA's frozen embedding, no adapter before the
  // attention): the residual's gradient went with the output projection's node, as nothing waits
  // to add it to the input's (measured: seed 3 case 323).
  if (block0 && dt.frozen_prefix >= FrozenPrefix::kInput)
    softmax.add("released: the residual's gradient", "−b·T·d·" + rs(), -N * d * w, "block 0's input takes none");
  softmax.add("gradient of v", "b·T·a·c", N * a * c, "waits in the qkv split's backward for q's and k's");
  if (checkpointing)
    softmax.add("the residual's gradient after the MLP", "b·T·d·" + rs(), checkpointed_residual_sum(),
                "a sum, next to the incoming gradient that CheckpointFunction::backward holds");
  softmax.add("softmax backward: grads of probs, scores", "2·b·H·T·T·4", 2 * b * m.n_heads * T * T * kFp32,
              "softmax's backward holds its input gradient and output gradient at once, in fp32");
  return softmax;
}

// Weight gradients at a full fine-tune's input projections: without accumulation every one made
// so far; with it, or stepping inside backward, the one being made, a new tensor until
// AccumulateGrad adds it (or with its step's temporaries).
std::string PlanBuilder::one_at_a_time() const {
  return accumulating ? "a new tensor until AccumulateGrad adds it into .grad" : "with its step's temporaries, inside backward";
}

// The MLP's input projections' backward (a full fine-tune; empty with LoRA). By then the MLP's
// activations are released (Llama: gate's output, silu(gate), up's output and their product;
// GPT-2: c_fc's and gelu's outputs), with the output projection's cast weight and, Llama,
// up_proj's (it runs first: autograd takes the latest node first) cast weight and cast input. On
// top: the gradient of gate's (c_fc's) output, its input's gradient next to up's (Llama: both wait
// in autograd's input buffer for the sum), and the MLP weights' gradients. It wins when d·f
// outweighs b·T·f: small micro-batches of wide MLPs.
PlanBuilder::Moment PlanBuilder::mlp_input_moment() const {
  Moment mlp_input;
  if (lora) return mlp_input;
  const bool gpt2 = m.arch == Architecture::kGpt2;
  const int64_t f = m.d_ff;
  const bool one_gradient = accumulating || split.optimizer_in_backward;
  const int64_t input_weight = d * f + (gpt2 ? f : 0);
  int64_t weight_grads = ((gpt2 ? 2 : 3) * d * f + (gpt2 ? f + d : 0)) * t;
  if (accumulating) weight_grads = input_weight * t;
  if (split.optimizer_in_backward) weight_grads = input_weight * t + step_temporaries(d * f);
  const int64_t released = (gpt2 ? 2 : 4) * N * f * c + (block_weights_cast() ? (gpt2 ? 1 : 2) * d * f * c : 0) +
                           (!gpt2 && autocast && w != c ? N * d * c : 0);
  mlp_input.add("released before the MLP input projections' backward", gpt2 ? "−2·b·T·f·c (+ d·f·c)" : "−4·b·T·f·c (+ …)",
                -released,
                gpt2 ? "c_fc's and gelu's outputs (and the output projection's cast weight)"
                     : "gate's and up's outputs, silu(gate), their product (and down's and up's casts)");
  mlp_input.add("gradient of the input projection's output", "b·T·f·c", N * f * c, gpt2 ? "c_fc's" : "gate's, from silu's backward");
  mlp_input.add(gpt2 ? "c_fc's input gradient" : "gate's and up's input gradients", gpt2 ? "b·T·d·c" : "2·b·T·d·c",
                (gpt2 ? 1 : 2) * N * d * c, gpt2 ? "made by c_fc's backward" : "both exist until autograd's input buffer sums them");
  if (!block_weights_cast()) {
    mlp_input.add(one_gradient ? "the input projection's weight gradient" : "the MLP's weight gradients",
                  one_gradient ? "(d·f + bias)·t" : "(MLP weights)·t", weight_grads,
                  one_gradient ? one_at_a_time() : "made by the MLP's three backward nodes");
    return mlp_input;
  }
  // Under autocast over weights in another dtype, gate's (c_fc's) node makes its weight's gradient
  // in c next to what it saved (its cast input and weight) and its output's gradient; the cast's
  // node then makes it in t once those are gone, and with the optimizer inside backward it steps
  // in t (the one in c gone too). The highest of those moments (measured: seed 3 case 842, the
  // bf16 gradient being cast to fp32 after gate's node released its casts).
  const int64_t later = one_gradient ? 0 : weight_grads - input_weight * t;  // up's and down's (c_proj's), in t
  const int64_t in_c = input_weight * c, in_t = input_weight * t;
  const int64_t node_done = N * f * c + N * d * c + d * f * c;
  const int64_t making = later + in_c, casting = later + in_c + in_t - node_done;
  const int64_t stepping = split.optimizer_in_backward ? in_t + step_temporaries(d * f) - node_done : 0;
  if (later > 0) mlp_input.add("the MLP's later weight gradients", "(up, down weights)·t", later, "made by their backward nodes");
  if (making >= std::max(casting, stepping)) {
    mlp_input.add("the input projection's weight gradient in c", "(d·f + bias)·c", in_c, "made by its node in autocast's dtype");
  } else if (casting >= stepping) {
    mlp_input.add("released: the input projection's saved casts, its output's gradient", "−b·T·(f + d)·c − d·f·c", -node_done,
                  "its node has finished when the cast's node runs");
    mlp_input.add("its weight gradient in c and cast to t", "(d·f + bias)·(c + t)", in_c + in_t,
                  accumulating ? "the cast's backward makes it in t, until AccumulateGrad adds it into .grad"
                               : "the cast's backward makes it in the weights' dtype");
  } else {
    mlp_input.add("released: the input projection's saved casts, its output's gradient", "−b·T·(f + d)·c − d·f·c", -node_done,
                  "its node and the cast's have finished");
    mlp_input.add("its weight gradient and step temporaries", "(d·f + bias)·t + step(d·f)", in_t + step_temporaries(d * f),
                  "it steps inside backward");
  }
  return mlp_input;
}

// The post-attention RMSNorm's backward (Llama family, a full fine-tune), right after the MLP's:
// like the final norm's, it peaks in pow's backward (five b·T·d·4: x's gradient from x · rsqrt,
// mean's expanded gradient, x.pow(1), its double and the product; phase_peaks.cpp's rms_pow). By
// then the MLP and the norm have released what they saved but h (pow's input): every line of the
// block after h, and the MLP weights' casts; the MLP's and the norm's weight gradients are made
// (accumulating, added into .grad; with the optimizer inside backward, stepped and freed). The
// residual's gradient from above waits for the sum. Measured: seed 2026 case 241 (block 0 of a
// checkpointed bf16 Mistral, with every later block's gradients: MulBackward0, MeanBackward1,
// PowBackward0).
PlanBuilder::Moment PlanBuilder::post_attention_norm_moment() const {
  Moment norm;
  if (lora || m.arch == Architecture::kGpt2) return norm;  // (LoRA's never topped the others: 3000 drawn cases)
  const LastBlock last = last_block();
  int64_t after_h = 0;
  bool found = false;
  for (const PlanLine& line : last.lines) {
    if (found) after_h += line.bytes;
    if (line.name == kResidualLine) found = true;
  }
  if (!found) return norm;
  const int64_t f = m.d_ff;
  const int64_t weight_grads = accumulating || split.optimizer_in_backward ? 0 : (3 * d * f + d) * t;
  norm.add("released: the MLP and the norm's saved tensors but h", "−(the block's lines after h)",
           -(after_h + (block_weights_cast() ? 3 * d * f * c : 0)),
           "every MLP node and the norm's mul, rsqrt and mean have run (and the MLP weights' casts)");
  if (weight_grads > 0)
    norm.add("the MLP's and the norm's weight gradients", "(3·d·f + d)·t", weight_grads, "made by their backward nodes");
  norm.add("post-attention RMSNorm backward, in pow's", "5·b·T·d·4", 5 * N * d * kFp32,
           "x's gradient from x · rsqrt, mean's expanded gradient, x.pow(1), its double and the product");
  return norm;
}

// The attention's input projections' backward (a full fine-tune; empty with LoRA), the block's
// last linear work. By then everything the block saved is released but what its first norm and
// the projections' input keep (the lines up to that input), with the weight casts but the
// projections' own; on top: the block's weight gradients (as for the MLP's), the input's
// gradients from the projections (Llama: q, k and v each make one; they wait in autograd's input
// buffer to be summed), and checkpointed the residual's gradient sum. Wide blocks at small b·T:
// every weight gradient of the block is alive here.
PlanBuilder::Moment PlanBuilder::attention_input_moment() const {
  Moment attention_input;
  if (lora) return attention_input;
  const bool gpt2 = m.arch == Architecture::kGpt2;
  const int64_t a = m.n_heads * m.head_dim, kv = m.n_kv_heads * m.head_dim;
  // What the block keeps then: its lines up to the projections' input.
  const LastBlock last = last_block();
  const std::string input_line = attention_input_line(m);
  int64_t kept = 0, total = 0;
  bool found = false;
  for (const PlanLine& line : last.lines) {
    total += line.bytes;
    if (!found) kept += line.bytes;
    if (line.name.rfind(input_line, 0) == 0) found = true;
  }
  if (!found) return attention_input;
  const int64_t qkv_weights = gpt2 ? d * 3 * a + 3 * a : d * (a + 2 * kv);
  ModelConfig one = m, two = m;
  one.n_layers = 1;
  two.n_layers = 2;
  const int64_t block_parameters = parameter_count(two) - parameter_count(one) - (gpt2 ? 2 * d : d);  // not its first norm yet
  const int64_t largest = gpt2 ? qkv_weights : d * a;  // the projection whose backward runs
  int64_t grads = block_parameters * t;
  if (accumulating) grads = largest * t;
  if (split.optimizer_in_backward) grads = largest * t + step_temporaries(largest);
  const bool one_gradient = accumulating || split.optimizer_in_backward;
  attention_input.add("released: the block but its first norm and the projections' input", "−(one block after it)",
                      -(total - kept + (block_weights_cast() ? (linear_weight_numel_per_block(m) - qkv_weights) * c : 0)),
                      "every later backward node of the block is done (and its weight casts)");
  attention_input.add(one_gradient ? "the input projection's weight gradient" : "the block's weight gradients",
                      one_gradient ? (gpt2 ? "(d·3a + 3a)·t" : "d·a·t") : "(block parameters − norm)·t", grads,
                      one_gradient ? one_at_a_time() : "every linear's, the output projection's and the norms' after the first");
  attention_input.add(gpt2 ? "c_attn's input gradient" : "q's, k's and v's input gradients", gpt2 ? "b·T·d·c" : "3·b·T·d·c",
                      (gpt2 ? 1 : 3) * N * d * c, gpt2 ? "made by c_attn's backward" : "they wait in autograd's input buffer to be summed");
  // GPT-2: c_attn's backward takes the gradient of its whole output, which the split of q, k and
  // v into heads (SplitBackward0) concatenates (measured: a 3a-wide c_attn over a thin MLP).
  // Inside backward the weight steps once the node is done and the concatenation freed: the
  // higher of the node's moment and the step's.
  if (gpt2) {
    const int64_t cat = N * 3 * a * c;
    const int64_t over_step = split.optimizer_in_backward ? std::max<int64_t>(0, cat - step_temporaries(largest)) : cat;
    if (over_step > 0)
      attention_input.add("gradient of c_attn's output", "b·T·3a·c", over_step, "SplitBackward0's concatenation");
  }
  if (checkpointing)
    attention_input.add("the residual's gradient after the MLP", "b·T·d·" + rs(), checkpointed_residual_sum(),
                        "a sum, next to the incoming gradient that CheckpointFunction::backward holds");
  return attention_input;
}

// The attention's output projection and bmm(probabilities, v) as moments of their own. They decide
// the peak when the attention is wider than the MLP (H·hd several times d, a thin MLP, a small
// vocabulary) or hd > T/2; measured exact (to the few hundred bytes of index tensors and loss
// scalars) in fp32 with the explicit attention, full fine-tuning, LoRA, nf4 and int8, with and
// without checkpointing, accumulation and the optimizer inside backward. Not added where that was
// not measured: flash attention, autocast or 16-bit weights' casts, adapter dropout, and a lone
// block 0 whose attention runs no backward.
bool PlanBuilder::attention_output_moments_apply() const {
  return o.attention == AttentionKind::kExplicit && !block_weights_cast() && !autocast && o.lora.dropout == 0 &&
         !(L == 1 && frozen_prefix_of(m, o, checkpointing) >= FrozenPrefix::kAttention);
}

// LoRA without accumulation: the gradients of the adapters from the output projection on, new
// tensors by the time the attention's backward runs.
// The A outputs of the attention's input projections' adapters (GPT-2's c_attn; q, k, v), which
// their B nodes, later in backward, still hold.
int64_t PlanBuilder::input_projection_a_outputs(const Dtypes& dt) const {
  const bool gpt2 = m.arch == Architecture::kGpt2;
  return adapter_a_output_bytes(o, dt, N) * (gpt2 ? adapted_count(m, o, {"c_attn"}) : adapted_count(m, o, {"q", "k", "v"}));
}

int64_t PlanBuilder::adapter_gradients_after_attention() const {
  int64_t bytes = 0;
  if (lora && !accumulating && !split.optimizer_in_backward)
    for (const BlockLinear& l : lora_targets(m, o.lora.targets))
      if (linear_group(l.name) > 0) bytes += (l.in + l.out) * o.lora.rank * ad;
  return bytes;
}

// The output projection's node (o_proj, GPT-2's attn_c_proj) having made its input's gradient and
// its weight's, before it releases its saved input: the block after the attention is done. Its
// weight's gradient is counted whatever the split (a new tensor under accumulation; not stepped
// yet inside backward). LoRA: the adapter's nodes run first (A's input gradient in fp32), then the
// frozen base's (its input gradient; a quantised base next to its dequantised weight), then
// autograd's out-of-place sum of the two. The output's gradient, the residual's after the MLP,
// waits for the base's node, also in a lone block 0 whose input takes none (measured: Qwen3 d 128,
// 16 heads, one block, b·T·d·4 next to o_proj's dequantised weight).
PlanBuilder::Moment PlanBuilder::attention_projection_moment() const {
  Moment mom;
  if (!attention_output_moments_apply()) return mom;
  const bool gpt2 = m.arch == Architecture::kGpt2;
  const int64_t a = m.n_heads * m.head_dim, f = m.d_ff;
  const LastBlock last = last_block();
  const bool adapted = !lora || adapted_count(m, o, {gpt2 ? "attn_c_proj" : "o"}) > 0;
  const int64_t after = last.bytes_from(kAttentionOutputCopy, false);
  if (adapted && after < 0) return mom;
  const bool int8 = o.lora.base_quant == BaseQuant::kInt8;
  if (checkpointing)
    mom.add("the residual's gradient after the MLP", "b·T·d·" + rs(), checkpointed_residual_sum(),
            "a sum, next to the incoming gradient that CheckpointFunction::backward holds");
  if (!lora) {
    mom.add("released: the block after the attention", "−(residual, norm, MLP)", -after,
            "the MLP's and the post-attention norm's nodes are done");
    const int64_t later = split.optimizer_in_backward
                              ? 0
                              : (gpt2 ? 2 * d * f + f + d + 2 * d : 3 * d * f + d) * new_gradient_bytes();
    if (later > 0) mom.add("the MLP's and the norm's weight gradients", "(MLP, norm)·t", later, "made on the way");
    mom.add("the output projection's weight gradient", "(a·d + bias)·t", (a * d + (gpt2 ? d : 0)) * t,
            one_at_a_time());
    mom.add("the output projection's input gradient", "b·T·a·c", N * a * c, "its node has not released its input yet");
    // Inside backward the weight then steps, its node done (the copy it saved released), with the
    // optimizer's temporaries (AdamW's two a·d; SGD none).
    const int64_t copy = last.line_bytes(kAttentionOutputCopy);
    if (split.optimizer_in_backward && step_temporaries(a * d) > copy) {
      mom.add("released: the attention output copy", "−b·T·a·c", -copy, "the projection's node is done");
      mom.add("the output projection's optimizer step temporaries", full_precision_adamw(o.optimizer) ? "2·a·d·t" : "step(a·d)",
              step_temporaries(a * d), "it steps inside backward");
    }
    return mom;
  }
  const int64_t a_outputs_kept = input_projection_a_outputs(dtypes());
  if (!adapted) return frozen_projection_moment(mom, a_outputs_kept);
  // An int8 base keeps the copy (the tensor the adapter's A saved) until its own node has run, and
  // the MLP's nodes have released the inputs it kept for them (int8_inputs_after_attention: the
  // output projection's own is none when its adapter keeps the same tensor).
  const bool block0 = L == 1 && !checkpointing;
  Dtypes dt = dtypes();
  if (block0) dt.frozen_prefix = frozen_prefix_of(m, o, checkpointing);
  const int64_t int8_released = int8 ? int8_inputs_after_attention(m, o, N, dt, block0) : 0;
  if (int8) {
    mom.add("released: the block after the attention", "−(MLP, norm) − the MLP's int8 kept inputs",
            -(after - a_outputs_kept + int8_released),
            "the input projections' adapters keep their A outputs; the int8 base keeps the copy");
  } else {
    mom.add("released: the block after the attention, and the copy the adapter's A saved", "−(MLP, norm) − b·T·a·c",
            -(after - a_outputs_kept + last.line_bytes(kAttentionOutputCopy)),
            "the input projections' adapters keep their A outputs");
  }
  if (const int64_t grads = adapter_gradients_after_attention())
    mom.add("the adapters' gradients from the output projection on", "Σ (in + out)·r·t", grads, "made on the way");
  mom.add("the adapter A's input gradient", "b·T·a·t", N * a * ad, "made by A's node, in the adapter's dtype");
  int64_t base_node = 2 * N * a * c;  // the base's input gradient and the sum
  if (quant) base_node = std::max(base_node, std::max(dequantized_linear_bytes(o, d, a, c), a * d * c + N * a * c));
  mom.add(quant ? "the base's node (dequantised weight, input gradient) or the sum" : "the base's input gradient and the sum",
          quant ? "max(dequant, a·d·c + b·T·a·c, 2·b·T·a·c)" : "2·b·T·a·c", base_node,
          "the frozen base's backward, then autograd adds it to A's");
  return mom;
}

// The output projection without an adapter (LoRA on other linears): its frozen base's node alone,
// which saved no input (an int8 base keeps the copy, MatMul8bitLt's input, until it has run). It
// makes the input's gradient b·T·a·c, a quantised base next to its dequantised weight (with the
// scratch that made it, or with the product); nothing is summed. The block after the attention
// is released by then, the MLP's int8 kept inputs too, and the adapters' gradients from the MLP on
// are made. With a thin MLP the dequantised a·d weight tops the block's other moments (measured:
// Qwen3 d 128, 16 heads of 32 and 64, f 64, targets the MLP or q, v, nf4 and int8, checkpointed,
// exact to the loss scalars; nf4 without checkpointing moves toward the measurement). Not an int8
// base without checkpointing: there it came out above the measurement by about the copy.
PlanBuilder::Moment PlanBuilder::frozen_projection_moment(Moment mom, int64_t a_outputs_kept) const {
  const bool gpt2 = m.arch == Architecture::kGpt2;
  const bool gqa = m.n_kv_heads != m.n_heads;
  const int64_t a = m.n_heads * m.head_dim;
  const LastBlock last = last_block();
  // No copy line (nothing saved it): the block's lines after bmm(probabilities, v)'s v.
  const int64_t after = last.bytes_from(!gpt2 && gqa ? "v repeated to H heads" : "v copy", false);
  if (after < 0) return Moment{};
  const bool int8 = o.lora.base_quant == BaseQuant::kInt8;
  if (int8 && !checkpointing) return Moment{};  // over by about the copy where measured: not added
  const int64_t int8_released = int8 ? int8_inputs_after_attention(m, o, N, dtypes(), false) - N * a * c : 0;
  mom.add(int8 ? "released: the block after the attention, the MLP's int8 kept inputs" : "released: the block after the attention",
          int8 ? "−(MLP, norm) − the MLP's int8 kept inputs" : "−(MLP, norm)", -(after - a_outputs_kept + int8_released),
          int8 ? "the input projections' adapters keep their A outputs; the int8 base keeps the copy"
               : "the input projections' adapters keep their A outputs; the frozen projection saved no copy");
  if (const int64_t grads = adapter_gradients_after_attention())
    mom.add("the adapters' gradients after the attention", "Σ (in + out)·r·4", grads, "made on the way");
  const int64_t node = quant ? std::max(dequantized_linear_bytes(o, d, a, c), a * d * c + N * a * c) : N * a * c;
  mom.add(quant ? "the frozen base's node: dequantised weight, input gradient" : "the frozen projection's input gradient",
          quant ? "max(dequant, a·d·c + b·T·a·c)" : "b·T·a·c", node, "no adapter: nothing to add it to");
  return mom;
}

// bmm(probabilities, v)'s node with both its gradients made (v's and the probabilities'), the
// output copy and everything after it released. It beats the softmax's moment when hd > T/2.
PlanBuilder::Moment PlanBuilder::attention_output_bmm_moment() const {
  Moment mom;
  if (!attention_output_moments_apply()) return mom;
  const bool gpt2 = m.arch == Architecture::kGpt2;
  const int64_t a = m.n_heads * m.head_dim, f = m.d_ff;
  const int64_t from = last_block().bytes_from(kAttentionOutputCopy, true);
  if (from < 0) return mom;
  const int64_t a_outputs_kept = lora ? input_projection_a_outputs(dtypes()) : 0;
  // An int8 base's kept inputs from the output projection on went with their nodes.
  const bool block0 = L == 1 && !checkpointing;
  Dtypes dt = dtypes();
  if (block0) dt.frozen_prefix = frozen_prefix_of(m, o, checkpointing);
  const int64_t int8_released = quant ? int8_inputs_after_attention(m, o, N, dt, block0) : 0;
  mom.add("released: the block from the attention's output copy on",
          int8_released > 0 ? "−(copy, projection, MLP, int8's kept inputs)" : "−(copy, projection, MLP)",
          -(from - a_outputs_kept + int8_released), "the output projection's, the norm's and the MLP's nodes are done");
  if (!lora) {
    const int64_t grads = split.optimizer_in_backward
                              ? 0
                              : (gpt2 ? 2 * d * f + f + d + 2 * d + a * d + d : 3 * d * f + d + a * d) * new_gradient_bytes();
    if (grads > 0) mom.add("the block's MLP and projection gradients", "(MLP, norm, proj.)·t", grads, "made on the way");
  } else {
    if (const int64_t grads = adapter_gradients_after_attention())
      mom.add("the adapters' gradients after the attention", "Σ (in + out)·r·4", grads, "made on the way");
    if (block0 && dt.frozen_prefix >= FrozenPrefix::kInput)
      mom.add("released: the residual's gradient", "−b·T·d·" + rs(), -N * d * w, "block 0's input takes none");
  }
  if (!bmm_operands_are_views(b, m.n_heads))
    mom.add("the attention output's gradient, contiguous", "b·T·a·c", N * a * c, "the view's backward copies it");
  mom.add("gradient of v", "b·T·a·c", N * a * c, "made by bmm(probabilities, v)'s backward");
  mom.add("gradient of the probabilities", "b·H·T·T·c", b * m.n_heads * T * T * c, "made by the same node");
  if (checkpointing)
    mom.add("the residual's gradient after the MLP", "b·T·d·" + rs(), checkpointed_residual_sum(),
            "a sum, next to the incoming gradient that CheckpointFunction::backward holds");
  return mom;
}

// GPT-2's c_attn on a quantised base: its frozen base's node, the block's last linear work. The
// adapter's nodes have run (A's input gradient made, in fp32; every adapter's A output released
// by its B), and the base takes the gradient of its whole output, SplitBackward0's concatenation,
// next to its dequantised weight (with the scratch that made it, or with the input gradient its
// product makes). By then the block has released everything it saved after ln_1's output, which
// an int8 base still keeps (the same tensor the adapter's A saved: fp32, no dropout) and nf4's
// does not. The weight is 3a·d, three times the output projection's, so at micro-batch 1 it tops
// that projection's moment (measured: GPT-2 d 128, 4 heads, f 32, nf4 and int8, checkpointed).
// Not where the input projections take no gradient (a lone block 0 with a frozen input).
PlanBuilder::Moment PlanBuilder::attention_input_base_moment() const {
  Moment mom;
  if (!quant || m.arch != Architecture::kGpt2 || !attention_output_moments_apply() || adapted_count(m, o, {"c_attn"}) == 0)
    return mom;
  const bool block0 = L == 1 && !checkpointing;
  Dtypes dt = dtypes();
  if (block0) dt.frozen_prefix = frozen_prefix_of(m, o, checkpointing);
  if (block0 && dt.frozen_prefix >= FrozenPrefix::kInput) return mom;
  const int64_t a = m.n_heads * m.head_dim;
  const LastBlock last = last_block();
  const bool int8 = o.lora.base_quant == BaseQuant::kInt8;
  const int64_t after = last.bytes_from(attention_input_line(m), /*with_it=*/int8 ? false : true);
  if (after < 0) return mom;
  if (checkpointing)
    mom.add("the residual's gradient after the MLP", "b·T·d·" + rs(), checkpointed_residual_sum(),
            "a sum, next to the incoming gradient that CheckpointFunction::backward holds");
  const int64_t int8_released = int8 ? int8_inputs_after_attention(m, o, N, dt, block0) : 0;
  mom.add(int8 ? "released: the block after ln_1's output" : "released: the block from ln_1's output on",
          int8 ? "−(attention, MLP, A outputs, the later int8 kept inputs)" : "−(ln_1 output, attention, MLP, A outputs)",
          -(after + int8_released),
          int8 ? "every later node of the block is done; the int8 base keeps its input" : "every later node of the block is done");
  if (lora && !accumulating && !split.optimizer_in_backward) {
    int64_t grads = 0;
    for (const BlockLinear& l : lora_targets(m, o.lora.targets)) grads += (l.in + l.out) * o.lora.rank * ad;
    mom.add("the block's adapter gradients", "Σ (in + out)·r·t", grads, "made on the way, c_attn's own too");
  }
  mom.add("the adapter A's input gradient", "b·T·d·t", N * d * ad, "made by A's node, in the adapter's dtype");
  const int64_t cat = N * 3 * a * c;
  const int64_t node = cat + std::max(dequantized_linear_bytes(o, 3 * a, d, c), 3 * a * d * c + N * d * c);
  mom.add("c_attn's base node: its output's gradient, dequantised weight", "b·T·3a·c + max(dequant, 3a·d·c + b·T·d·c)",
          std::max(node, 2 * N * d * c), "SplitBackward0's concatenation, then autograd adds its input gradient to A's");
  return mom;
}

}  // namespace accumbench::plan_detail
