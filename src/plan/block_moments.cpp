// The moments inside a block for the memory plan (plan_builder.hpp): the last block's forward with
// grad, its backward's candidates from the MLP's output projection on (the later ones:
// block_backward.cpp), QLoRA's dequantised weight next to them (a checkpointed block's forward
// without grad and its recompute: checkpointed_block.cpp). Symbols as in memory_plan.cpp.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "plan/block_tensors.hpp"
#include "plan/plan_builder.hpp"
#include "plan/quantized_base.hpp"

namespace accumbench::plan_detail {

PlanBuilder::LastBlock PlanBuilder::last_block() const {
  LastBlock last;
  ModelConfig single = m;
  single.n_layers = 1;
  Table one{&last.lines};
  one.moments = &last.moments;
  one.end_locals = &last.end_locals;
  Dtypes dt = dtypes();
  if (L == 1) dt.frozen_prefix = frozen_prefix_of(m, o, checkpointing);
  last.released_from = m.arch == Architecture::kGpt2 ? gpt2_block_saved(single, o, b, dt, one)
                                                     : llama_block_saved(single, o, b, dt, one);
  if (lora) {
    for (size_t i = 0; i < last.lines.size(); ++i)
      if (last.lines[i].name == kAdapterOutputsLine) last.a_outputs_line = i;
    for (const BlockLinear& l : lora_targets(m, o.lora.targets))
      last.a_outputs[static_cast<size_t>(linear_group(l.name))] += adapter_a_output_bytes(o, dtypes(), N);
  }
  return last;
}

std::pair<int64_t, int64_t> PlanBuilder::one_block_saved_and_released() const {
  const LastBlock last = last_block();
  int64_t one_block = 0;
  int64_t released_before_softmax = 0;
  for (size_t i = 0; i < last.lines.size(); ++i) {
    one_block += last.lines[i].bytes;
    if (i >= last.released_from) released_before_softmax += last.lines[i].bytes;
  }
  return {one_block, released_before_softmax};
}

void PlanBuilder::block_backward() {
  const Table blk{&plan.block_backward_peak};
  const auto [one_block, released_before_softmax] = one_block_saved_and_released();
  // LoRA: the head and norms are frozen. With the optimizer inside backward an untied head and
  // the final norm have stepped and freed theirs by now (a tied head's waits for the embedding).
  if (head_gradient_in_backward()) {
    blk.add("head and final-norm gradients", "(V·d + norm)·t",
            (V * d + (m.arch == Architecture::kGpt2 ? 2 * d : d)) * t, "the first gradients backward produces");
  }
  if (checkpointing) {
    // The checkpointed input is already counted where the recompute saves it as it is (GPT-2's
    // LayerNorm, an fp32 RMSNorm input); a bf16 RMSNorm input is saved as a new fp32 copy.
    const int64_t counted_input = m.arch == Architecture::kGpt2 || w == kFp32 ? N * d * w : 0;
    blk.add("recomputed block's saved tensors", "(one block of the table above)", one_block - counted_input,
            "backward reruns the block's forward with grad enabled (its input is already counted)");
    if (quant) int8_saved_inputs(m, o, N, 1, dtypes(), blk);  // the recompute keeps them again
    if (block_weights_cast()) {
      blk.add("recomputed block's weights cast to c", "(linear weights)·c", linear_weight_numel_per_block(m) * c,
              "the recompute's autocast region caches and saves them again");
    }
    if (const int64_t adapters = adapter_cast_cache(1); adapters > 0) {
      blk.add("recomputed block's adapter casts", "(one block's A and B)·c", adapters,
              "the recompute's autocast region caches them again; its linears save them");
    }
  }
  if (!residual_gradient_stops_at_mlp())
    blk.add("gradient of the residual stream", "b·T·d·" + rs(), N * d * w, "flows into the block from above");
  candidates_begin = plan.block_backward_peak.size();
  peak_candidates(blk, released_before_softmax);
}

// Accumulation adds into existing gradients; a frozen base makes none (the adapters' are small).
int64_t PlanBuilder::new_gradient_bytes() const { return accumulating || lora ? 0 : t; }

// The output projection's saved input (and cast weight), released by its backward: the lines of
// its input as saved (the input itself or its cast; with an adapter its fp32 copy, or LoRA
// dropout's output and noise: measured, seed 3 case 65), none when it is a frozen linear without
// an adapter (LoRA), which needs none for its input's gradient.
int64_t PlanBuilder::mlp_out_released() const {
  const int64_t input = last_block().input_group_bytes(mlp_out_input_line(m), /*with_input=*/true);
  // An int8 base keeps the input too (counted apart, int8_saved_inputs) unless the adapter keeps it.
  return input + (quant ? int8_mlp_out_input(m, o, N, dtypes()) : 0) + (block_weights_cast() ? d * m.d_ff * c : 0);
}

bool PlanBuilder::mlp_out_adapted() const {
  return adapted_count(m, o, {m.arch == Architecture::kGpt2 ? "mlp_c_proj" : "down"}) > 0;
}

// The gradient of the MLP output projection's result reaches the projection's node (with an
// adapter, the base's node) as a new tensor in c when something cast it: under autocast over
// weights in another dtype, the residual add's backward casts the residual's gradient to c; without
// autocast in 16-bit weights, an adapter's sum is in fp32 and the sum's backward casts the base's
// share back to c. It waits for that node (measured: seed 2026 --all cases 94, 132, 266, 677, an
// N·d·c block from the engine next to the projection's or the adapter's gradients).
int64_t PlanBuilder::mlp_output_gradient_cast() const {
  return c != w || (mlp_out_adapted() && !autocast && c != ad) ? N * d * c : 0;
}

// A lone block 0 whose attention is frozen whole (LoRA on the MLP alone, one block, not
// checkpointed): nothing before the MLP needs a gradient, so the block's last add hands the
// residual's gradient to the MLP's output alone, and it is gone once that output's has been made
// (measured: seed 3 --all case 932, no b·T·d·4 gradient next to the adapter's).
bool PlanBuilder::residual_gradient_stops_at_mlp() const {
  return L == 1 && frozen_prefix_of(m, o, checkpointing) >= FrozenPrefix::kToMlp;
}

// The MLP output's gradient as the output projection's node receives it, where it is not the
// residual's gradient counted for the whole block: its cast (mlp_output_gradient_cast), or, when
// the residual takes none (residual_gradient_stops_at_mlp), that gradient itself.
int64_t PlanBuilder::mlp_output_gradient() const {
  if (const int64_t cast = mlp_output_gradient_cast(); cast > 0) return cast;
  return residual_gradient_stops_at_mlp() ? N * d * w : 0;
}

// Checkpointed, the block's incoming gradient stays alive through the inner backward
// (CheckpointFunction::backward holds grad_outputs), so later in the block the residual's
// gradient after the MLP (its sum with the post-attention norm's input gradient, a new tensor:
// the incoming one is shared by the sum's two operands) is a second one.
int64_t PlanBuilder::checkpointed_residual_sum() const { return checkpointing ? N * d * w : 0; }

// GPT-2: gelu's backward holds its incoming gradient and the one it makes (three with
// transformers' gelu_new op by op). Llama: the SwiGLU product silu(g)·u comes first, and its
// backward holds its incoming gradient (down's input gradient) and makes two (of silu(g) and of u): three b·T·f tensors at once (measured with the
// counting allocator's live blocks at the peak, tests/plan_properties.cpp).
PlanBuilder::Moment PlanBuilder::mlp_activation_moment() const {
  const bool gpt2 = m.arch == Architecture::kGpt2;
  const int64_t f = m.d_ff;
  // (With the optimizer inside backward the projection's weight has stepped and freed it.)
  const int64_t mlp_grads = split.optimizer_in_backward ? 0 : (f * d + (gpt2 ? d : 0)) * new_gradient_bytes();
  Moment activation;
  activation.add("released before the activation's backward", "−b·T·f·c (+ d·f·c)", -mlp_out_released(),
                 "the output projection's saved input (and cast weight)");
  if (mlp_grads > 0) activation.add("the output projection's gradient", "(f·d + bias)·t", mlp_grads, "made on the way");
  if (gpt2 && hf_activation_op_by_op(m, o)) {
    // transformers' gelu_new op by op (hf_activation_saved): its last product 0.5·x · (1 + tanh)
    // holds its incoming gradient and makes two; under CUDA autocast the product and 1 + tanh are
    // fp32 (the incoming gradient is the output projection's, cast to fp32), 0.5·x is in c.
    const bool fp32_pow = hf_activation_pow_in_fp32(o, autocast);
    activation.add("MLP backward: 0.5·x·(1 + tanh)'s grads", fp32_pow ? "b·T·f·(8 + c)" : "3·b·T·f·c",
                   N * f * (fp32_pow ? 2 * kFp32 + c : 3 * c),
                   "gelu_new op by op: the product's backward holds its incoming gradient and makes those of both factors");
  } else {
    const std::string act = to_string(m.activation);
    activation.add("MLP backward: grads of act. out, in", gpt2 ? "2·b·T·f·c" : "3·b·T·f·c", (gpt2 ? 2 : 3) * N * f * c,
                   gpt2 ? act + "'s backward holds its input gradient and output gradient at once"
                        : act + "(g)·u's backward holds its input gradient and makes those of " + act + "(g) and u");
  }
  return activation;
}

// The MLP output projection's adapter's own tensors around A's backward node, relative to the
// saved table (measured: seed 3 case 138, seed 3 --all case 932, seed 2026 --all case 94). By A's
// node B's has run: it released A's output that it saved and, under autocast, its cast weight;
// without accumulation B's gradient is .grad (fp32). During A's node its incoming gradient and
// its weight's gradient (in A's dtype) exist. After it A's cast weight is gone and, without
// accumulation, A's gradient stays as .grad in fp32 (with accumulation, or stepping inside
// backward, AccumulateGrad adds each into .grad as soon as it is made).
PlanBuilder::AdapterOwn PlanBuilder::mlp_out_adapter_own() const {
  const int64_t r = o.lora.rank, f = m.d_ff;
  const int64_t a = autocast ? c : ad;  // A's linear runs in autocast's dtype, else in the adapter's
  const int64_t a_output = adapter_a_output_bytes(o, dtypes(), N);  // and its incoming gradient's size
  const bool grads_stay = !accumulating && !split.optimizer_in_backward;
  const bool casts = adapter_casts();
  AdapterOwn own;
  own.before_a = -(a_output + (casts ? d * r * c : 0)) + (grads_stay ? d * r * ad : 0);
  own.during_a = a_output + r * f * a;
  own.after_a = -(casts ? r * f * c : 0) + (grads_stay ? r * f * ad : 0);
  return own;
}

// The MLP output projection's backward with an adapter on it, node by node: adapted_linear.cpp's
// forward read backwards. Autograd takes the later node first, so the adapter's nodes run before
// the base's. A's backward makes the input's gradient in the adapter's dtype (c under autocast,
// else fp32) and releases what A saved of the input; under autocast the cast to c goes back to
// fp32; dropout's backward makes a new gradient and releases its noise (mask on CUDA); x.to(fp32),
// a copy when the input is not fp32, goes back to the input's dtype. Then the base makes its
// gradient (an int8 base releases the input it kept once it has), and autograd's input buffer adds
// the two out of place (LibTorch 1.13's InputBuffer makes old + new): both and the sum at once.
// Until the base's node has run, its share of the output's gradient (mlp_output_gradient) waits;
// the adapter's own tensors change around A's node (mlp_out_adapter_own). Each step's gradients
// next to what the block saved, less what earlier nodes released; the highest. (A quantised
// base's step with its dequantised weight: dequant_transients.)
PlanBuilder::AdaptedBackward PlanBuilder::mlp_out_adapter_backward() const {
  const LastBlock last = last_block();
  const std::string input = mlp_out_input_line(m);
  const int64_t E = N * m.d_ff;
  const bool dropout = o.lora.dropout > 0;
  const int64_t noise = last.line_bytes(input + ", dropout noise") + last.line_bytes(input + ", dropout mask");
  // The input itself is the group's line when the adapter takes it as it is; an int8 base keeps
  // that same tensor (quantized_base.cpp) until its own node has run, or a cast copy of its own.
  const bool int8 = o.lora.base_quant == BaseQuant::kInt8;
  const int64_t itself = last.line_bytes(input);
  const int64_t saved_by_a = last.input_group_bytes(input, /*with_input=*/true) - noise - (int8 ? itself : 0);
  const int64_t kept_by_base = int8 ? (itself > 0 ? itself : int8_mlp_out_input(m, o, N, dtypes())) : 0;
  const int64_t a = autocast ? c : ad;  // A's linear runs in autocast's dtype, else in the adapter's
  const int64_t base_share = mlp_output_gradient();
  std::string held = base_share == 0 ? "" : mlp_output_gradient_cast() > 0 ? "b·T·d·c + " : "b·T·d·" + rs() + " + ";
  const AdapterOwn own = mlp_out_adapter_own();

  AdaptedBackward r;
  r.peak.bytes = std::numeric_limits<int64_t>::min();
  int64_t alive = base_share + own.before_a;  // the gradients alive, less what has been released
  auto at = [&](const char* what, const std::string& formula, const char* why) {
    if (alive > r.peak.bytes) r.peak = PlanLine{what, held + formula, alive, why};
  };
  alive += E * a + own.during_a;
  at("the adapter's input gradient", a == c ? "b·T·f·c + A's" : "b·T·f·4 + A's",
     "A's backward makes it, and its weight's, from its incoming gradient, next to everything the block saved");
  alive += own.after_a - saved_by_a - own.during_a;
  if (adapter_casts()) {
    alive += E * ad;
    at("autocast's cast of the adapter's input gradient", "b·T·f·(c + 4) − A's saved input",
       "back to fp32 next to A's gradient in c; A has released its input");
    alive -= E * a;
  }
  if (dropout) {
    alive += E * ad;
    at("dropout's backward", ad == kFp32 ? "b·T·f·8 − A's saved input" : "b·T·f·2a − A's saved input",
       "its gradient, in the adapter's dtype, next to the one it comes from; A has released the dropped input");
    alive -= E * ad + noise;
  }
  if (c != ad) {
    alive += E * c;
    at("the adapter's input gradient cast back to the input's dtype", "b·T·f·(4 + c) − the adapter's saved lines",
       "x.to(fp32)'s backward, next to the fp32 gradient");
    alive -= E * ad;
  }
  r.before_base = alive;
  alive += E * c;
  at("two input gradients", "2·b·T·f·c − the adapter's saved lines", "the adapter's, and the base linear's made next to it");
  alive -= kept_by_base + base_share;
  held.clear();
  alive += E * c;
  at("two input gradients and their sum", "3·b·T·f·c − the input's lines",
     "autograd's input buffer adds the base's gradient to the adapter's out of place");
  return r;
}

// The output projection's own backward, before it has released anything. It makes its input's
// gradient (with an adapter on it, the adapter's nodes and the base's: mlp_out_adapter_backward)
// and its weight's, which with accumulation is a new tensor until AccumulateGrad has added it into
// .grad. Higher than the activation's backward when the projection's weight outweighs b·T rows.
PlanBuilder::Moment PlanBuilder::mlp_projection_moment() const {
  const bool gpt2 = m.arch == Architecture::kGpt2;
  const int64_t f = m.d_ff;
  const int64_t projection_gradient = lora ? 0 : (f * d + (gpt2 ? d : 0)) * t;
  Moment projection;
  if (projection_gradient > 0 && block_weights_cast()) {
    // Under autocast over weights in another dtype the projection's node makes the weight's
    // gradient in c; the cast's own node then makes it in t, after the projection's node has
    // released its saved input and cast weight (measured: seed 2026 case 143, ToCopyBackward0's
    // d·f·4 next to MmBackward0's two gradients in bf16). The higher of the two moments.
    // Its incoming gradient, cast to c, goes with its node too (measured: seed 2026 --all case 132).
    const int64_t in_c = (f * d + (gpt2 ? d : 0)) * c;
    const int64_t incoming = mlp_output_gradient();
    const int64_t released = mlp_out_released() + incoming;
    if (incoming > 0)
      projection.add("the MLP output's gradient in c", "b·T·d·c", incoming, "the residual add's backward casts it for the node");
    projection.add("MLP out-proj backward: input gradient", "b·T·f·c", N * f * c,
                   "the MLP's output projection makes the gradient of its b·T·f input");
    projection.add("MLP out-proj backward: weight gradient in c", "(f·d + bias)·c", in_c, "made in autocast's dtype");
    if (projection_gradient > released) {
      projection.add(incoming > 0 ? "released: the MLP out-proj's saved input, cast weight, incoming gradient"
                                  : "released: the MLP out-proj's saved input and cast weight",
                     incoming > 0 ? "−b·T·f·c − d·f·c − b·T·d·c" : "−b·T·f·c − d·f·c", -released,
                     "its node has finished when the cast's node runs");
      projection.add("MLP out-proj backward: weight gradient cast to t", "(f·d + bias)·t", projection_gradient,
                     "the cast's backward makes it in the weights' dtype");
    }
    return projection;
  }
  if (mlp_out_adapted()) {
    const PlanLine step = mlp_out_adapter_backward().peak;
    projection.add("MLP out-proj backward: " + step.name, step.formula, step.bytes, step.why);
  } else {
    if (const int64_t incoming = mlp_output_gradient(); incoming > 0) {
      const bool cast = mlp_output_gradient_cast() > 0;
      projection.add(cast ? "the MLP output's gradient in c" : "the MLP output's gradient", cast ? "b·T·d·c" : "b·T·d·" + rs(),
                     incoming, cast ? "the residual add's backward casts it for the node" : "the residual's, which takes no other");
    }
    projection.add("MLP out-proj backward: input gradient", "b·T·f·c", N * f * c,
                   "the MLP's output projection makes the gradient of its b·T·f input");
  }
  if (projection_gradient > 0)
    projection.add("MLP out-proj backward: weight gradient", "(f·d + bias)·t", projection_gradient,
                   accumulating ? "a new tensor until AccumulateGrad adds it into .grad" : "the first block gradient made");
  return projection;
}

// With the optimizer inside backward the output projection's weight steps once its gradient is
// accumulated, with the optimizer's temporaries of its size (src/engine/adamw.cpp): its node has
// finished and released what it saved; its input's gradient waits for the activation's. Empty
// otherwise.
PlanBuilder::Moment PlanBuilder::mlp_projection_step_moment() const {
  const bool gpt2 = m.arch == Architecture::kGpt2;
  const int64_t f = m.d_ff;
  Moment step;
  const int64_t temporaries = split.optimizer_in_backward && !lora ? step_temporaries(f * d) : 0;
  if (temporaries == 0) return step;  // (SGD steps in place: no moment of its own)
  step.add("released: the MLP out-proj's saved input (and cast weight)", "−b·T·f·c (+ d·f·c)", -mlp_out_released(),
           "its backward node has finished");
  step.add("MLP out-proj input gradient", "b·T·f·c", N * f * c, "waits for the activation's backward");
  step.add("MLP out-proj weight gradient", "(f·d + bias)·t", (f * d + (gpt2 ? d : 0)) * t, "about to step");
  step.add("MLP out-proj optimizer step temporaries", full_precision_adamw(o.optimizer) ? "2·f·d·t" : "step(f·d)",
           temporaries, "the optimizer's temporaries for that weight, as it steps inside backward");
  return step;
}

// LoRA dropout's moment in an adapter's forward (ForwardMoment::dropout_bytes) as a line: the
// input's fp32 copy while dropout makes its output and noise, next to the base's result; under
// autocast that output is an fp32 local as well, and A's cast of it (a saved line) not made yet.
PlanLine PlanBuilder::dropout_moment_line(const std::string& prefix, int64_t bytes) const {
  if (!adapter_casts())
    return {prefix + "its fp32 copy and the base's output", "b·T·in·4 + b·T·out·c", bytes,
            "x.to(fp32) while dropout makes its output and noise (saved), after the base linear"};
  return {prefix + "its fp32 copy, dropout's output, the base's output", "2·b·T·in·4 + b·T·out·c − b·T·in·c", bytes,
          "x.to(fp32) while dropout makes its fp32 output and noise (saved), after the base linear; A's cast of the "
          "output (saved) comes later"};
}

void PlanBuilder::peak_candidates(const Table& blk, int64_t released_before_softmax) {
  // Checkpointed, the inner backward runs as a plain block's backward (the recomputed output y is
  // gone by then: recompute_end_moment).
  // The highest of the moments is the block backward's peak; its lines go into the table.
  std::vector<Moment> moments = {mlp_activation_moment(),   mlp_projection_moment(),
                                 mlp_projection_step_moment(), softmax_moment(released_before_softmax),
                                 mlp_input_moment(),        post_attention_norm_moment(), attention_input_moment(),
                                 recompute_end_moment(),    recompute_adapter_moment(),
                                 recompute_attention_moment(), attention_projection_moment(),
                                 attention_output_bmm_moment(), attention_input_base_moment(),
                                 recompute_output_projection_moment()};
  const Moment* best = &moments.front();
  for (const Moment& moment : moments)
    if (!moment.lines.empty() && moment.bytes > best->bytes) best = &moment;
  for (const PlanLine& line : best->lines) blk.add(line.name, line.formula, line.bytes, line.why);
}

void PlanBuilder::last_block_forward() {
  if (checkpointing) return;  // the checkpointed forward runs without grad: block_forward()
  const LastBlock last = last_block();
  const std::vector<PlanLine>& lines = last.lines;
  const int64_t last_block_bytes = total_bytes(lines);
  // An int8 base's kept inputs (a line of their own) count by the linears run (int8_kept_at).
  Dtypes dt = dtypes();
  if (L == 1) dt.frozen_prefix = frozen_prefix_of(m, o, checkpointing);
  const int64_t int8_last = quant ? int8_block_inputs(m, o, N, dt, /*block0=*/L == 1) : 0;
  int64_t blocks_below = 0;
  for (size_t i = block_lines_begin; i < block_lines_end; ++i) blocks_below += plan.saved[i].bytes;
  blocks_below -= last_block_bytes + int8_last;
  // The block's input in 16-bit weights' dtype (Llama family): RMSNorm saves an fp32 copy, and
  // the input itself, the previous block's output, stays alive until the block returns.
  const int64_t input = m.arch != Architecture::kGpt2 && w != kFp32 && last.line_bytes(kBlockInputLine) > 0 ? N * d * w : 0;
  int64_t best = 0, saved_to_it = 0, a_outputs_to_it = 0, int8_to_it = 0;
  const ForwardMoment* at = nullptr;
  for (const ForwardMoment& moment : last.moments) {
    const int64_t saved = last.saved_before(moment), a_outputs = last.a_outputs_before(moment);
    const int64_t int8 = quant ? int8_kept_at(m, o, N, dt, moment.groups_run, /*block0=*/L == 1) : 0;
    const int64_t total = saved + a_outputs + int8 + moment.transient() + moment.locals_bytes + input;
    if (total > best) best = total, at = &moment, saved_to_it = saved, a_outputs_to_it = a_outputs, int8_to_it = int8;
  }
  if (at == nullptr) return;
  const Table f{&plan.last_block_forward_peak};
  const std::string what = at->lines_end > 0 ? lines[at->lines_end - 1].name : "its start";
  f.add("the blocks below the last, saved", "(saved blocks) − one block", blocks_below,
        "with the cast weights the whole step's blocks save");
  f.add("the last block's saved tensors so far", "one block up to " + what, saved_to_it, "forward order");
  if (a_outputs_to_it != 0)
    f.add("the earlier adapters' A outputs", autocast || ad == c ? "Σ b·T·r·c" : "Σ b·T·r·4", a_outputs_to_it,
          "each B saved its input as its adapter ran (their line comes later in the table)");
  if (int8_to_it != 0)
    f.add("int8 base: the last block's kept inputs so far", "Σ b·T·in·c of the linears run, less its locals", int8_to_it,
          "MatMul8bitLt's kept inputs of the linears that have run; those that are the block's own locals count there");
  last_block_forward_moment(*at, f);
  if (input > 0)
    f.add("the block's input", "b·T·d·w", input, "the previous block's output in the weights' dtype (RMSNorm saves its fp32 copy)");
}

// The lines of the last block's forward moment that last_block_forward chose, past what the block
// has saved by then: the block's end, the attention's last product or an adapter's tensors.
void PlanBuilder::last_block_forward_moment(const ForwardMoment& moment, const Table& f) {
  if (moment.kind == ForwardMoment::kEnd) {
    plan.last_block_forward_what = "the end of the last block";
    f.add("MLP out-projection result, the block's output", "b·T·d·c + b·T·d·(w or 4)", moment.result_bytes,
          "h + the projection's result");
  } else if (moment.kind == ForwardMoment::kAttention) {
    plan.last_block_forward_what = "the last block's attention output";
    f.add("masked scores, attention output, ones(T, T)", "b·H·T·T·c + (b·T·a·c or b·H·T·T·4) + T·T", moment.scores_bytes,
          "the scores are a local of the attention next to softmax's saved output when bmm(probabilities, v) makes "
          "its result (or, with 16-bit activations, when softmax makes its output from an fp32 copy of them); the "
          "mask's ones are a temporary of the call");
  } else {
    plan.last_block_forward_what = "the last block's LoRA adapter with the largest fp32 input copy";
    f.add("the adapters' input", "b·T·in·c", moment.input_bytes, "a temporary: the adapters save their casts of it");
    if (moment.dropout_bytes > moment.copy_bytes + moment.outputs_bytes + moment.a_output_bytes) {
      const PlanLine line = dropout_moment_line("", moment.dropout_bytes);
      f.add(line.name, line.formula, line.bytes, line.why);
    } else {
      if (moment.copy_bytes > 0)
        f.add("its fp32 copy", "b·T·in·4", moment.copy_bytes, "x.to(fp32) in the adapter's forward, until it returns");
      const AdapterOutputs outputs = adapter_outputs(o, dtypes(), moment.out_elements);
      f.add(outputs.what, outputs.formula, moment.outputs_bytes, "result + B(A(x))·scaling, before the sum is cast back");
      f.add("its A output", autocast || ad == c ? "b·T·r·c" : "b·T·r·4", moment.a_output_bytes, "B's input, which B saves");
    }
  }
  if (moment.locals_bytes > 0)
    f.add("the block's unsaved locals", "x, qkv, y, h, … as held", moment.locals_bytes,
          "the block forward's locals that no backward saves, alive until it returns");
}

void PlanBuilder::dequant_transients() {
  if (!quant) return;
  dequant_bytes = dequant_transient(m, o, c, Table{&plan.dequant_peak});
  int64_t chosen = 0;
  for (size_t i = candidates_begin; i < plan.block_backward_peak.size(); ++i) chosen += plan.block_backward_peak[i].bytes;
  // The MLP's output projection's backward: with an adapter on it, the adapter's nodes come first
  // and leave their input gradient, having released what they saved of the input
  // (mlp_out_adapter_backward). Then the base makes its input gradient next to its dequantised weight.
  const bool adapted = mlp_out_adapted();
  // Without an adapter the base's node starts with the output's gradient it receives (measured:
  // seed 2026 case 793, its cast to c next to the dequantised weight).
  const int64_t before_base = adapted ? mlp_out_adapter_backward().before_base : mlp_output_gradient();
  // Its dequantised weight with the scratch that made it, then (the scratch freed) next to the
  // weight the gradient or result its product makes (measured: seed 3 case 740's fp32 temporaries).
  const int64_t weight = d * m.d_ff * c, scratch = dequantized_linear_bytes(o, d, m.d_ff, c);
  const int64_t backward = before_base + std::max(scratch, weight + N * m.d_ff * c);
  // Checkpointed, the recompute's MLP output projection dequantises its weight in the forward, next
  // to the block's locals at its end (recompute_end_moment) and the result it makes, before y; its
  // base runs before its adapter, whose copies of the input do not exist yet.
  int64_t recompute = 0;
  if (checkpointing) {
    const LastBlock last = last_block();
    const int64_t not_yet = last.input_group_bytes(mlp_out_input_line(m), /*with_input=*/false);
    recompute = last.end_locals - int8_kept_locals(m, o, N, dtypes()) + std::max(scratch, weight + N * d * c) - not_yet;
  }
  const int64_t extra = std::max(backward, recompute) - chosen;
  if (extra <= 0) return;
  const Table blk{&plan.block_backward_peak};
  if (recompute > backward) {
    blk.add("QLoRA: the recompute's MLP out-projection instead", "locals + max(dequant, d·f·c + b·T·d·c) − above", extra,
            "the recompute's output projection makes its result next to its dequantised weight and the block's locals");
  } else {
    blk.add("QLoRA: frozen linear's backward instead",
            adapted ? "b·T·f·c − the adapter's saved lines + max(dequant, d·f·c + b·T·f·c) − above"
                    : "max(dequant, d·f·c + b·T·f·c) − above",
            extra,
            adapted ? "the MLP out-projection's two input gradients next to its dequantised weight beat the moment above"
                    : "its input gradient next to the dequantised weight beats the moment above");
  }
}

}  // namespace accumbench::plan_detail
