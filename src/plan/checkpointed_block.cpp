// A checkpointed block for the memory plan (plan_builder.hpp): its forward run without grad (also
// LoRA's frozen attention in block 0, before anything requires grad), with autocast's caches of
// the casts, and its recompute inside backward, the block's forward with grad whose moments are
// backward candidates next to the gradients made so far. Symbols as in memory_plan.cpp.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "plan/block_tensors.hpp"
#include "plan/plan_builder.hpp"
#include "plan/quantized_base.hpp"

namespace accumbench::plan_detail {

// Checkpointed (empty otherwise): the recompute's last step, y = h + the MLP's output, before its
// inner backward starts. The block's forward (src/models/gpt2.cpp, llama.cpp) still holds its
// locals then, and the temporaries of its last expression, where nothing saves them
// (block_tensors.cpp's end_locals: GPT-2 the qkv split's views of c_attn's output, Llama the
// rotated q, k and v; under autocast the norms' outputs, which the linears save as casts; with a
// frozen projection its input); and the output projection's result (b·T·d·c) is alive next to the
// sum y it makes, the one moment y exists: CheckpointFunction::backward (src/models/model.cpp)
// keeps only its gradient edge. With an adapter on that projection, the moment before y can be
// higher: its input's fp32 copy, the result, B's output and the scaled delta (autocast's cast of
// the copy is what A saves, among the recomputed block's saved tensors already: counting it here
// too over-predicted checkpointed LoRA under bf16 by b·T·f·c). It wins when the attention is wide
// next to the MLP (H·hd ≥ d, Qwen3).
PlanBuilder::Moment PlanBuilder::recompute_end_moment() const {
  Moment end;
  if (!checkpointing) return end;
  const bool gpt2 = m.arch == Architecture::kGpt2;
  const int64_t f = m.d_ff;
  const int64_t sum = block_output_sum(o, N, d, c, w);  // y and the projection's result it is made from
  // The output projection's moment: y and the result it is made from, or with an adapter on the
  // projection the highest of the adapter's moments (before y exists).
  PlanLine out{"recompute's end: MLP out-proj result and y",
               o.cpu && c != w ? "b·T·d·c + 2·b·T·d·" + rs() : "b·T·d·c + b·T·d·" + rs(), sum,
               "added to h to make y, the recomputed output (dropped before the inner backward)"};
  const auto higher = [&out](const std::string& formula, int64_t bytes, const std::string& why) {
    if (bytes > out.bytes) out = PlanLine{"recompute's end: the adapted out-projection", formula, bytes, why};
  };
  if (mlp_out_adapted()) {
    const AdapterOutputs outputs = adapter_outputs(o, dtypes(), N * d);
    const int64_t copy = c != ad ? N * f * ad : 0;
    if (adapter_casts()) {  // A saves its cast of the copy: the copy is the adapter's local
      higher((copy > 0 ? "b·T·f·4 + " : "") + std::string(outputs.formula) + " (out = d)", copy + outputs.bytes,
             "its input's fp32 copy, " + std::string(outputs.what) + " (A's cast is saved)");
    } else {  // A saves the copy itself, or dropout's output of it (recomputed lines)
      higher(std::string(outputs.formula) + " (out = d)", outputs.bytes, outputs.what);
      if (o.lora.dropout > 0 && copy > 0)
        higher("b·T·f·4 + b·T·d·c", copy + N * d * c,
               "its input's fp32 copy when dropout makes its output and noise (saved), next to the base's result");
    }
  }
  end.add("recompute's end: block forward's locals", gpt2 ? "b·T·3a·c + …" : "b·T·(a+2kv)·c + …", last_block().end_locals,
          gpt2 ? "the qkv views of c_attn's output and what the linears do not save, held until the block returns"
               : "rotated q, k and v (and what the linears do not save), held until it returns");
  end.add(out.name, out.formula, out.bytes, out.why);
  // An int8 base keeps the linears' inputs (int8_saved_inputs, counted above for the recompute);
  // those kept as themselves are the very locals counted here.
  const int64_t kept = quant ? int8_kept_locals(m, o, N, dtypes()) : 0;
  if (kept > 0) end.add("int8's kept inputs are these locals", "−(inputs kept as themselves)", -kept, "counted once, above");
  return end;
}

// An int8 base's kept inputs at a moment of the recompute, which block_backward counts whole
// (int8_saved_inputs for one block): those of the linears not run yet, and those that are the
// block's locals, which the moment counts itself (int8_kept_at).
void PlanBuilder::int8_not_kept_yet(const ForwardMoment& moment, Moment& candidate) const {
  if (!quant) return;
  const int64_t kept = int8_kept_at(m, o, N, dtypes(), moment.groups_run) - int8_block_inputs(m, o, N, dtypes(), false);
  if (kept != 0)
    candidate.add("recompute: int8's inputs not kept yet", "−(later linears' inputs, the block's locals)", kept,
                  "counted whole above; the later linears have not run, and the moment counts its locals itself");
}

// Checkpointed, the recompute is the last block's forward with grad inside its backward; its
// adapters' moments (ForwardMoment::kAdapter: the input, its fp32 copy, the base's output and the
// delta's tensors with A's output, or dropout's moment) come before the block has saved what
// follows them. By then the adapters of the earlier linear groups have made their A outputs
// (which their B saved; the block's line of them comes later) and, under autocast, their A and B
// casts, which the block's lines count for every adapter: those of the adapters still to run are
// not made yet, the moment's own only once its A runs, after dropout (measured: seed 1 case 827,
// at the MLP output projection's dropout three A outputs of b·T·r·c live and its A and B casts
// not made). With 16-bit weights and no autocast the MLP input projection's fp32 delta can top the
// recompute's end; under autocast, dropout's moment at the MLP's output projection (f > d).
PlanBuilder::Moment PlanBuilder::recompute_adapter_moment() const {
  Moment best;
  // In fp32 no copy is made and the recompute's end stays higher.
  if (!checkpointing || !lora || c == kFp32) return best;
  const LastBlock last = last_block();
  const int64_t saved = total_bytes(last.lines);
  // The adapters' casts per linear group, as the recompute's autocast region makes them.
  std::array<int64_t, kLinearGroups> casts{};
  if (adapter_casts())
    for (const BlockLinear& l : lora_targets(m, o.lora.targets))
      casts[static_cast<size_t>(linear_group(l.name))] += adapter_cast_bytes(o, c, l.in, l.out);
  for (const ForwardMoment& moment : last.moments) {
    if (moment.kind != ForwardMoment::kAdapter) continue;
    const int64_t by_then = last.saved_before(moment);
    const AdapterOutputs outputs = adapter_outputs(o, dtypes(), moment.out_elements);
    Moment candidate;
    candidate.add("recompute: not saved yet", "−(the block's lines after the adapter)", by_then - saved,
                  "the recompute has saved the block up to this adapter");
    int8_not_kept_yet(moment, candidate);
    if (const int64_t a_outputs = last.a_outputs_before(moment); a_outputs > 0)
      candidate.add("recompute: earlier adapters' A outputs", autocast || ad == c ? "Σ b·T·r·c" : "Σ b·T·r·4", a_outputs,
                    "each B saved its input as its adapter ran (their line is among those not saved yet)");
    int64_t not_cast = 0;  // the casts of this linear group's adapters and the later groups'
    for (size_t g = static_cast<size_t>(moment.groups_run - 1); g < casts.size(); ++g) not_cast += casts[g];
    candidate.add("recompute: the adapter's input", "b·T·in·c", moment.input_bytes, "a temporary: the adapters save their copies");
    const int64_t own = moment.copy_bytes + moment.outputs_bytes + moment.a_output_bytes + moment.casts_bytes;
    if (moment.dropout_bytes > own) {
      const PlanLine line = dropout_moment_line("recompute: ", moment.dropout_bytes);
      candidate.add(line.name, line.formula, line.bytes, line.why);
    } else {
      if (moment.copy_bytes > 0)
        candidate.add("recompute: its fp32 copy", "b·T·in·4", moment.copy_bytes, "x.to(fp32), an adapter's local (A saves its cast)");
      candidate.add("recompute: " + std::string(outputs.what), outputs.formula, moment.outputs_bytes,
                    "result + B(A(x))·scaling, before the sum is cast back");
      candidate.add("recompute: its A output", autocast || ad == c ? "b·T·r·c" : "b·T·r·4", moment.a_output_bytes, "B's input, which B saves");
      not_cast -= moment.casts_bytes;
    }
    if (not_cast > 0)
      candidate.add("recompute: adapter casts not made yet", "−(this and later adapters' A and B)·c", -not_cast,
                    "counted for the whole block above; the adapters still to run have not cast theirs");
    if (moment.locals_bytes > 0)
      candidate.add("recompute: the block's unsaved locals", "x, qkv, y, h, … as held", moment.locals_bytes,
                    "the block forward's locals that no backward saves");
    if (candidate.bytes > best.bytes) best = candidate;
  }
  return best;
}

// Checkpointed with the explicit attention, the recompute's attention (ForwardMoment::kAttention:
// the masked scores, softmax's fp32 input and output, or bmm(probabilities, v)'s result) runs
// inside backward, next to the incoming gradient and every gradient made so far, before the
// recompute has saved the block's later tensors or cast its later weights (under autocast: the
// output projection's and the MLP's, or with LoRA their adapters). It wins when the attention
// outweighs the block's MLP: many heads over a long sequence at a narrow width.
PlanBuilder::Moment PlanBuilder::recompute_attention_moment() const {
  Moment best;
  if (!checkpointing || o.attention != AttentionKind::kExplicit) return best;
  const bool gpt2 = m.arch == Architecture::kGpt2;
  const LastBlock last = last_block();
  const int64_t saved = total_bytes(last.lines);
  // The weights after the attention's input projections (frozen_prefix_weight_numel: those up to them).
  const int64_t later_weights =
      block_weights_cast() ? (linear_weight_numel_per_block(m) - frozen_prefix_weight_numel(m, FrozenPrefix::kInput)) * c : 0;
  const int64_t later_adapters =
      adapter_cast_cache(1) - (gpt2 ? adapter_cast_cache(0, {"c_attn"}) : adapter_cast_cache(0, {"q", "k", "v"}));
  for (const ForwardMoment& moment : last.moments) {
    if (moment.kind != ForwardMoment::kAttention) continue;
    const int64_t by_then = last.saved_before(moment);
    Moment candidate;
    candidate.add("recompute: not saved yet", "−(the block's lines after the attention)", by_then - saved,
                  "the recompute has saved the block up to its attention");
    int8_not_kept_yet(moment, candidate);
    if (later_weights + later_adapters > 0)
      candidate.add("recompute: not cast yet", later_adapters > 0 ? "−(later adapters' A and B)·c" : "−(output projection and MLP weights)·c",
                    -(later_weights + later_adapters), "the linears after the attention have not run yet");
    candidate.add("recompute: masked scores, attention output, ones(T, T)", "b·H·T·T·c + (b·T·a·c or b·H·T·T·4) + T·T",
                  moment.scores_bytes, "softmax's fp32 input and output next to the masked scores, or bmm(probabilities, v)'s result");
    if (moment.locals_bytes > 0)
      candidate.add("recompute: the block's unsaved locals", "x, qkv, y, h, … as held", moment.locals_bytes,
                    "the block forward's locals that no backward saves");
    if (candidate.bytes > best.bytes) best = candidate;
  }
  return best;
}

// QLoRA, checkpointed with the explicit attention: the recompute's output projection dequantises
// its weight as soon as the recompute's attention has returned, inside backward next to the
// incoming gradient, before the recompute has saved the block's lines from the projection's input
// on or run its adapter (an int8 base has kept the inputs of the linears run). On top: the
// block's locals (Llama's normed and rotated q, k, v; GPT-2's c_attn output), the projection's
// input, the input projections' A outputs, and the weight with its scratch or next to the result
// its product makes (as in the forward: quant_output_projection). It wins at a wide attention
// without accumulation (measured: Qwen3 d 128, 16 heads of 64, nf4, 2×1, the rotated q next to
// o_proj's dequantised weight).
PlanBuilder::Moment PlanBuilder::recompute_output_projection_moment() const {
  Moment mom;
  if (!checkpointing || !quant || o.attention != AttentionKind::kExplicit) return mom;
  const LastBlock last = last_block();
  const ForwardMoment* attention = nullptr;
  for (const ForwardMoment& moment : last.moments)
    if (moment.kind == ForwardMoment::kAttention) attention = &moment;
  if (attention == nullptr) return mom;
  const bool gpt2 = m.arch == Architecture::kGpt2;
  // Without an adapter on the projection nothing saves its input (the copy has no line; an int8
  // base keeps it among its kept inputs): the block's lines up to bmm(probabilities, v)'s v
  // (measured: Qwen3 d 128, 16 heads of 64, f 64, LoRA on the MLP, nf4, o_proj's dequantised weight).
  const bool adapted = !lora || adapted_count(m, o, {gpt2 ? "attn_c_proj" : "o"}) > 0;
  const std::string v_line = !gpt2 && m.n_kv_heads != m.n_heads ? "v repeated to H heads" : "v copy";
  int64_t before_input = 0;
  bool found = false;
  for (const PlanLine& line : last.lines) {
    if (adapted && line.name.rfind(kAttentionOutputCopy, 0) == 0) found = true;
    if (!found) before_input += line.bytes;
    if (!adapted && line.name == v_line) found = true;
  }
  if (!found) return mom;
  const int64_t a = m.n_heads * m.head_dim;
  mom.add("recompute: not saved yet", "−(the block's lines from the output projection's input on)",
          before_input - total_bytes(last.lines), "the recompute has saved the block up to its attention");
  ForwardMoment projection = *attention;
  projection.groups_run = 2;  // the output projection's base has taken its input
  int8_not_kept_yet(projection, mom);
  const int64_t later_adapters =
      adapter_cast_cache(1) - (gpt2 ? adapter_cast_cache(0, {"c_attn"}) : adapter_cast_cache(0, {"q", "k", "v"}));
  if (later_adapters > 0)
    mom.add("recompute: not cast yet", "−(later adapters' A and B)·c", -later_adapters,
            "the adapters after the attention have not run yet");
  if (last.a_outputs_line < last.lines.size() && last.a_outputs[0] > 0)
    mom.add("recompute: the input projections' A outputs", autocast || ad == c ? "Σ b·T·r·c" : "Σ b·T·r·4", last.a_outputs[0],
            "each B saved its input as its adapter ran (their line is among those not saved yet)");
  if (attention->locals_bytes > 0)
    mom.add("recompute: the block's unsaved locals", "x, qkv, y, h, … as held", attention->locals_bytes,
            "the block forward's locals that no backward saves");
  mom.add("recompute: the output projection's input", "b·T·a·c", N * a * c, "the attention output copy");
  mom.add("recompute: the output projection's dequantised weight", "max(dequant, a·d·c + b·T·d·c)",
          std::max(dequantized_linear_bytes(o, d, a, c), d * a * c + N * d * c),
          "with the scratch that made it, or next to the result its product makes");
  return mom;
}

// The locals held from the attention on: GPT-2's c_attn output (the qkv views), Llama's
// `normed` and the rotated q, k and v (and, unless checkpointed, block 0's input).
void PlanBuilder::attention_locals(const Table& t) const {
  const int64_t a = m.n_heads * m.head_dim, kv = m.n_kv_heads * m.head_dim;
  const int64_t q_bytes = w;  // rotated by the rotary table's dtype, the hidden state's
  if (!checkpointing) t.add(kBlockInputLine, "b·T·d·" + rs(), N * d * w, "the embedding's output, the block's residual");
  if (m.arch == Architecture::kGpt2) {
    t.add("c_attn output", "b·T·3a·c", N * 3 * a * c, "held by the qkv split's views until the block returns");
  } else {
    t.add("input RMSNorm output", "b·T·d·" + rs(), N * d * w, "the block's local `normed`");
    t.add("rotated q, k and v", "b·T·(a+kv)·q + b·T·kv·c", N * (a + kv) * q_bytes + N * kv * c, "the block's locals");
  }
}

// Checkpointed under autocast the forward runs without grad, but autocast still caches its cast
// of every weight that requires grad until the forward's region closes: by the last block's
// attention, every block below and its own q, k, v (c_attn) projections; by its end, all L
// blocks. With LoRA those are the adapters' A and B (adapter_cast_cache); a frozen weight's cast
// is not cached.
bool PlanBuilder::forward_cast_cache() const { return checkpointing && block_weights_cast() && !lora; }

int64_t PlanBuilder::adapter_cast_cache(int64_t blocks, std::initializer_list<const char*> names) const {
  if (!(checkpointing && adapter_casts() && lora)) return 0;
  int64_t per_block = 0, partial = 0;
  for (const BlockLinear& l : lora_targets(m, o.lora.targets)) {
    const int64_t bytes = adapter_cast_bytes(o, c, l.in, l.out);
    per_block += bytes;
    for (const char* name : names)
      if (l.name == name) partial += bytes;
  }
  return blocks * per_block + partial;
}

// The explicit attention run without grad: its locals, the mask and, from
// compat::masked_attention (softmax in fp32, cast back to c), the higher of the softmax's own
// moment (the masked scores, their fp32 copy, its fp32 output) and the product's (the scores, the
// probabilities in c, v's copy and the result); without grad the fp32 output is gone by then.
void PlanBuilder::block_forward_attention(const Table& at) const {
  const int64_t H = m.n_heads, a = m.n_heads * m.head_dim;
  const bool gpt2 = m.arch == Architecture::kGpt2, repeated = !gpt2 && m.n_kv_heads != m.n_heads;
  if (forward_cast_cache())
    at.add("autocast's cache: weight casts so far", "((L−1)·(linear weights) + qkv)·c",
           ((L - 1) * linear_weight_numel_per_block(m) + frozen_prefix_weight_numel(m, FrozenPrefix::kInput)) * c,
           "cached for the whole forward, grad or not");
  const int64_t adapters = gpt2 ? adapter_cast_cache(L - 1, {"c_attn"}) : adapter_cast_cache(L - 1, {"q", "k", "v"});
  if (adapters > 0)
    at.add("autocast's cache: adapter casts so far", "((L−1)·(adapters) + qkv's)·c", adapters,
           "A and B require grad: their casts are cached for the whole forward, grad or not");
  attention_locals(at);
  if (repeated) {
    at.add("k, v repeated to H heads", "b·T·a·q + b·T·a·c", N * a * w + N * a * c,
           "repeat_interleave's outputs, locals of the attention (k rotated in the hidden state's dtype)");
  }
  if (!o.packed_documents)
    at.add("causal mask, and the ones it came from", "2·T·T·1", 2 * T * T * kBool, "built per attention call (ones(T, T).triu(1))");
  const int64_t scores = b * H * T * T;
  // v needs no contiguous copy when it is repeated already, or at micro-batch 1 or with one head,
  // where bmm's operands fold as views (bmm_operands_are_views).
  const bool v_copied = !repeated && !bmm_operands_are_views(b, m.n_heads);
  const int64_t product = (v_copied ? 2 : 1) * N * a * c;
  if (c != kFp32 && scores * (c + 2 * kFp32) > scores * 2 * c + product) {
    at.add("scores, their fp32 copy, softmax's output", "b·H·T·T·(c+8)", scores * (c + 2 * kFp32),
           "the masked scores, and softmax's fp32 input and output");
  } else {
    at.add("scores and probabilities", c == kFp32 ? "2·b·H·T·T·4" : "2·b·H·T·T·c", scores * 2 * c,
           c == kFp32 ? "the masked scores and softmax's output" : "the masked scores and the probabilities cast to c");
    at.add(v_copied ? "v's bmm copy, attention output" : "attention output", v_copied ? "2·b·T·a·c" : "b·T·a·c", product,
           v_copied ? "bmm(probabilities, v): v made contiguous, and its result"
                    : "bmm(probabilities, v)'s result (v is repeated already, or a view: micro-batch 1 or one head)");
  }
}

// A checkpointed block's end, run without grad: the cast cache of every block, the locals, the
// MLP's temporaries and the output projection's moment (its result and the residual sum; with an
// adapter its input's fp32 copy and autocast's cast of it and the delta's two tensors, or with
// LoRA dropout the moment before, dropout's noise and output next to the base's result).
void PlanBuilder::block_forward_end(const Table& end) {
  const int64_t f = m.d_ff;
  const bool gpt2 = m.arch == Architecture::kGpt2;
  if (forward_cast_cache())
    end.add("autocast's cache: every block's weight casts", "L·(linear weights)·c", L * linear_weight_numel_per_block(m) * c,
            "cached for the whole forward, grad or not");
  const char* out_projection = gpt2 ? "mlp_c_proj" : "down";
  const int64_t all_adapters = adapter_cast_cache(L);
  // The output projection's adapter runs after its base: its A's and B's casts come last.
  const int64_t out_adapter = adapter_cast_cache(0, {out_projection});
  mlp_locals(end, all_adapters - out_adapter, "(L·(adapters) − the out-projection's)·c");
  end.add(gpt2 ? "c_fc output, gelu output" : "gate, up, silu(gate), silu(gate)·up", gpt2 ? "2·b·T·f·c" : "4·b·T·f·c",
          (gpt2 ? 2 : 4) * N * f * c, "temporaries of the block's last expression, alive until it returns");
  mlp_before_out_projection = total_bytes(*end.lines);
  // The block's last expression once the adapter (if any) has returned: the result and the sum.
  Moment best;
  best.add("out-projection result, the block's output", "b·T·d·c + b·T·d·" + rs(), N * d * c + N * d * w,
           "h + the projection's result");
  const bool adapted_out = adapted_count(m, o, {out_projection}) > 0;
  if (adapted_out && out_adapter > 0)
    best.add("autocast's cache: the out-projection's A, B casts", "r·(f+d)·c", out_adapter, "its adapter's weights");
  if (o.cpu && c != w)
    best.add("the result cast to the residual's dtype", "b·T·d·" + rs(), N * d * w,
             "the CPU's TensorIterator casts the operand before the add (a temporary)");
  if (adapted_out) {
    // Inside the adapter, after its base: x.to(fp32) (a copy unless c is fp32), which LoRA dropout
    // replaces by its output (the noise a temporary of that statement, no grad); under autocast A's
    // cast of it, A's temporary; then B's output and the scaled delta, and the sum (on the CPU
    // without autocast in fp32, next to the result's fp32 copy: adapter_outputs). The highest
    // moment (measured: seed 2026 case 796, the sum's moment with dropout's output held).
    const int64_t copy = c != ad ? N * f * ad : 0;
    const bool dropout = o.lora.dropout > 0;
    const int64_t held = dropout ? N * f * ad : copy;
    const auto hold = [&](Moment& moment) {
      if (held == 0) return;
      moment.add(dropout ? "the adapter's dropped input" : "the adapter's input copy", "b·T·f·4", held,
                 dropout ? "dropout's fp32 output, until the adapter returns" : "x.to(fp32), until the adapter returns");
    };
    std::vector<Moment> inside(3);
    if (dropout) {
      Moment& drop = inside[0];
      if (copy > 0) drop.add("the adapter's input copy", "b·T·f·4", copy, "x.to(fp32)");
      drop.add(o.cpu ? "the adapter's dropout noise and output" : "the adapter's dropout mask and output",
               o.cpu ? "2·b·T·f·4" : "b·T·f·(4+1)", N * f * ad + N * f * (o.cpu ? ad : kBool),
               o.cpu ? "the scaled Bernoulli noise and x · noise" : "native_dropout's bool mask and its output");
      drop.add("out-projection result", "b·T·d·c", N * d * c, "the base linear's, before the adapter's delta");
    }
    if (adapter_casts()) {
      Moment& a = inside[1];
      hold(a);
      a.add("out-projection result", "b·T·d·c", N * d * c, "the base linear's, before the adapter's delta");
      a.add("autocast's cast of the input for A", "b·T·f·c", N * f * c, "A's temporary (no grad: nothing saves it)");
      if (out_adapter > 0) a.add("autocast's cache: the out-projection's A cast", "r·f·c", o.lora.rank * f * c, "A's weight");
    }
    Moment& sum = inside[2];
    hold(sum);
    const AdapterOutputs outputs = adapter_outputs(o, dtypes(), N * d);
    sum.add(outputs.what, outputs.formula, outputs.bytes, "result + B(A(x))·scaling");
    if (adapter_casts() && out_adapter > 0)
      sum.add("autocast's cache: the out-projection's A, B casts", "r·(f+d)·c", out_adapter, "its adapter's weights");
    for (const Moment& moment : inside)
      if (moment.bytes > best.bytes) best = moment;
  }
  for (const PlanLine& line : best.lines) end.add(line.name, line.formula, line.bytes, line.why);
}

// What a checkpointed block's MLP (run without grad) finds alive: the adapters' cached casts so far
// (`adapter_casts` bytes, `formula`), the locals from the attention on, y, h and the MLP's input.
void PlanBuilder::mlp_locals(const Table& t, int64_t adapter_casts, const std::string& formula) const {
  const int64_t a = m.n_heads * m.head_dim;
  const bool gpt2 = m.arch == Architecture::kGpt2;
  if (adapter_casts > 0)
    t.add("autocast's cache: adapter casts so far", formula, adapter_casts,
          "A and B require grad: their casts are cached for the whole forward, grad or not");
  attention_locals(t);
  // (h in the residual's dtype: x + o_proj(y); RMSNorm's fp32 copy of it is the norm's temporary.
  // Measured: seed 3 case 822, bf16 weights.)
  t.add("attention output y, residual h", "b·T·a·c + b·T·d·" + rs(), N * a * c + N * d * w, "the block's locals");
  t.add(gpt2 ? "ln_2 output" : "post-attention RMSNorm output m", "b·T·d·" + rs(), N * d * w,
        gpt2 ? "the MLP's input, a temporary of the block's last expression" : "the block's local `m`");
}

// A checkpointed block's MLP input projection with an adapter, run without grad (GPT-2's c_fc;
// Llama's gate and up, the later of which finds the other's result alive): the cast caches so
// far, the block's locals, the projection's input and PEFT's fp32 copy of it, and the base's
// output next to the adapter's delta (adapter_outputs). Empty without such an adapter.
void PlanBuilder::block_forward_mlp_input(const Table& in) const {
  const int64_t f = m.d_ff;
  const bool gpt2 = m.arch == Architecture::kGpt2;
  const int adapted = gpt2 ? adapted_count(m, o, {"c_fc"}) : adapted_count(m, o, {"gate", "up"});
  if (adapted == 0) return;
  const int64_t adapters = gpt2 ? adapter_cast_cache(L - 1, {"c_attn", "attn_c_proj", "c_fc"})
                                : adapter_cast_cache(L - 1, {"q", "k", "v", "o", "gate", "up"});
  mlp_locals(in, adapters, "((L−1)·(adapters) + the block's up to its MLP input)·c");
  if (!gpt2) in.add("the other input projection's result", "b·T·f·c", N * f * c, "silu(gate(m)) · up(m): one runs first");
  if (w != ad) in.add("the adapter's input copy", ad == kFp32 ? "b·T·d·4" : "b·T·d·2", N * d * ad, "x.to(the adapter's dtype), until the adapter returns");
  const AdapterOutputs outputs = adapter_outputs(o, dtypes(), N * f);
  in.add(outputs.what, outputs.formula, outputs.bytes, "result + B(A(x))·scaling, before the sum is cast back");
}

void PlanBuilder::block_forward() {
  const bool frozen_attention = !checkpointing && frozen_prefix_of(m, o, checkpointing) >= FrozenPrefix::kAttention;
  if (!frozen_attention && !checkpointing) return;
  std::vector<PlanLine> attention, mlp, mlp_input;
  if (o.attention == AttentionKind::kExplicit) block_forward_attention(Table{&attention});
  if (checkpointing) block_forward_end(Table{&mlp});
  if (checkpointing) block_forward_mlp_input(Table{&mlp_input});
  const bool mlp_wins = total_bytes(mlp) > total_bytes(attention);
  plan.block_forward_peak = mlp_wins ? mlp : attention;
  plan.block_forward_what = !checkpointing ? "block 0's attention, before anything requires grad"
                            : mlp_wins     ? "the last block's MLP, run without grad (checkpointing)"
                                           : "the last block's attention, run without grad (checkpointing)";
  if (total_bytes(mlp_input) > total_bytes(plan.block_forward_peak)) {
    plan.block_forward_peak = mlp_input;
    plan.block_forward_what = "the last block's adapted MLP input projection, run without grad (checkpointing)";
  }
}

}  // namespace accumbench::plan_detail
