// One block's saved tensors for the analytic memory plan (block_tensors.hpp). Each line is a
// tensor that the real step allocates, with the shape formula read off the model code
// (src/models/gpt2.cpp, llama.cpp) and the tensors autograd saves for backward (PyTorch
// tools/autograd/derivatives.yaml). Symbols as in memory_plan.cpp.
#include "plan/block_tensors.hpp"

#include <algorithm>

namespace accumbench::plan_detail {

namespace {

// The block linears that keep their input for backward: every one in a full fine-tune (for its
// weight gradient); with LoRA only the adapted ones, whose A saves it. PyTorch saves an operand
// only for a gradient that is needed, and a frozen base weight needs none.
std::vector<std::string> saving_linears(const ModelConfig& m, const PlanOptions& o) {
  std::vector<std::string> names;
  for (const BlockLinear& l : o.lora.enabled() ? lora_targets(m, o.lora.targets) : block_linears(m)) names.push_back(l.name);
  return names;
}

int count_of(const std::vector<std::string>& saving, std::initializer_list<const char*> names) {
  int n = 0;
  for (const char* name : names) n += std::find(saving.begin(), saving.end(), name) != saving.end() ? 1 : 0;
  return n;
}

// The blocks a line counts: all L, or L − 1 when block 0 runs the line's op on tensors that do
// not require grad (Dtypes::frozen_prefix reaches `from`), so autograd saves nothing there.
struct Blocks {
  int64_t n;
  std::string s;
  Blocks(const Dtypes& dt, FrozenPrefix from, int64_t L)
      : n(dt.frozen_prefix >= from ? L - 1 : L), s(dt.frozen_prefix >= from ? "(L−1)" : "L") {}
  Blocks(bool block0_saves, int64_t L) : n(block0_saves ? L : L - 1), s(block0_saves ? "L" : "(L−1)") {}
};

// Block 0 under adapters on some of the attention's input projections (frozen prefix kInput,
// LoRA without checkpointing): which of q, k and v take a gradient there, and so which of the
// attention's operands autograd keeps (bmm keeps an operand only for the other's gradient;
// softmax and masked_fill keep theirs only where the scores take one). Every block saves all of
// them in a full fine-tune, with every one of q, k, v adapted, or with more than block 0 frozen
// (then `att` leaves block 0 out of all). A lone block (L = 1) leaves them out too, and is still
// planned over in some drawn cases (README, Known limits: plan_properties --partial-targets).
struct AttentionGrads {
  Blocks q, k, v, scores;
  AttentionGrads(const Dtypes& dt, const std::vector<std::string>& saving, const Blocks& att, int64_t L)
      : q(takes(dt, saving, "q", att, L)), k(takes(dt, saving, "k", att, L)), v(takes(dt, saving, "v", att, L)),
        scores(q.n >= k.n ? q : k) {}

 private:
  static Blocks takes(const Dtypes& dt, const std::vector<std::string>& saving, const char* name, const Blocks& att,
                      int64_t L) {
    if (dt.frozen_prefix != FrozenPrefix::kInput) return att;
    return Blocks(count_of(saving, {name}) > 0, L);
  }
};

// bmm_operands_are_views: the saved q, k, v that are block locals (GPT-2: views of c_attn's
// output; Llama: the rotated q and k where already in c, v without GQA) are then the saved
// "copies", counted once there.
bool bmm_saves_views(int64_t b, int64_t heads, const Blocks& att) { return bmm_operands_are_views(b, heads) && att.n > 0; }

// The rotated q's and k's bytes per element: the rotary tables are in the hidden state's dtype (the
// weights'), which wins the product with q in autocast's.
int64_t rotated_qk_bytes(const Dtypes& dt) { return dt.w; }

// The input of the linears `names` (width `in`), as they save it: one tensor that they share
// (fp32), or one cast copy each (autocast casts per use). With LoRA dropout each adapter keeps its
// dropped copy (in the adapter's dtype; under autocast its cast) and the dropout's noise (x · noise
// saves it, in the copy's dtype; on CUDA native_dropout's bool mask).
// `input_bytes`: the element size of the input itself (what is kept without autocast). `locals`:
// the bytes of the block forward's locals alive here that nothing saves (ForwardMoment). Returns
// whether the input tensor itself is saved (else it is a temporary, or a local of the block).
// `with_grad`: the blocks in which the input requires grad (dropout saves its noise only there).
bool linear_input(const ModelConfig& m, const Table& t, const std::string& what, std::initializer_list<const char*> names,
                  const std::vector<std::string>& saving, int64_t L, int64_t N, int64_t in, const std::string& width,
                  const Dtypes& dt, int64_t input_bytes, const PlanOptions& o, int64_t locals, const Blocks& with_grad) {
  const int64_t n = count_of(saving, names);
  if (n == 0) return false;  // LoRA without an adapter here: the frozen linears keep nothing
  const bool dropout = o.lora.enabled() && o.lora.dropout > 0;
  // Autocast copies an input that is not in its dtype already; PEFT's fp32 adapters always copy
  // theirs (to fp32, then autocast back to c); bf16 ones copy it only when it is not bf16 already.
  const bool cast = dt.autocast && (o.lora.enabled() ? dt.adapter_casts() : input_bytes != dt.c);
  const int64_t a = dt.a;
  const std::string a_symbol = a == kFp32 ? "4" : "a";
  const int64_t c = dt.c;
  const std::string count = std::to_string(n);
  bool saved_itself = false;
  if (dropout) {
    t.add(what + ", dropped, per adapter", "L·" + count + "·b·T·" + width + "·" + (cast ? "c" : a_symbol), L * n * N * in * (cast ? c : a),
          cast ? "each adapter's dropout output cast to c, saved by its A" : "each adapter's dropout output, saved by its A");
    // The CPU's dropout multiplies by a scaled Bernoulli noise tensor (fp32) and saves it; on CUDA
    // at::dropout is native_dropout (ATen Dropout.cpp is_fused_kernel_acceptable), whose backward
    // keeps a bool mask instead.
    const int64_t mask = o.cpu ? a : kBool;
    t.add(what + (o.cpu ? ", dropout noise" : ", dropout mask"),
          with_grad.s + "·" + count + "·b·T·" + width + (o.cpu ? "·" + a_symbol : "·1"), with_grad.n * n * N * in * mask,
          with_grad.n < L ? "dropout saves its noise (CPU, fp32) or mask (CUDA, bool) where the input requires grad (not in block 0)"
          : o.cpu         ? "dropout multiplies by a scaled Bernoulli noise tensor and saves it (CPU)"
                          : "native_dropout saves its bool mask (CUDA)");
  } else if (o.lora.enabled() && !cast && input_bytes != a) {
    t.add(what + ", " + (a == kFp32 ? "fp32" : "bf16") + " copy per adapter", "L·" + count + "·b·T·" + width + "·" + a_symbol,
          L * n * N * in * a, "PEFT casts each adapter's input to the adapter's dtype; its A saves the copy");
  } else if (cast) {
    t.add(what + ", " + count + (n > 1 ? " casts" : " cast") + " to c", "L·" + count + "·b·T·" + width + "·c", L * n * N * in * c,
          "autocast casts the input per linear; each saves its cast (LoRA: each adapter's A)");
  } else {
    t.add(what, "L·b·T·" + width + (input_bytes == kFp32 ? "·4" : "·2"), L * N * in * input_bytes,
          "saved by the linears that read it (one tensor)");
    saved_itself = true;
  }
  if (t.moments != nullptr && o.lora.enabled() && input_bytes != a) {
    int64_t out = 0;  // the widest adapted linear reading this input
    for (const BlockLinear& l : block_linears(m))
      if (count_of(saving, {l.name.c_str()}) > 0 && std::find(names.begin(), names.end(), l.name) != names.end())
        out = std::max(out, l.out);
    ForwardMoment moment;
    moment.groups_run = linear_group(*names.begin()) + 1;
    moment.lines_end = t.lines->size();
    moment.input_bytes = N * in * input_bytes;
    // The fp32 copy next to the outputs: under autocast A saves its cast instead, and the copy (or
    // with dropout the dropped copy) is the adapter's local; without autocast A saves the copy (a
    // line above), except with dropout, which makes the saved output next to the copy and the
    // base's result, then lets the copy go (under autocast that output is an fp32 local too, and
    // A's cast of it, a line above, comes later).
    moment.copy_bytes = cast ? N * in * a : 0;
    if (dropout) moment.dropout_bytes = N * in * a + N * out * c + (cast ? N * in * (a - c) : 0);
    moment.outputs_bytes = adapter_outputs(o, dt, N * out).bytes;
    moment.a_output_bytes = adapter_a_output_bytes(o, dt, N);  // B saves it
    moment.casts_bytes = dt.adapter_casts() ? adapter_cast_bytes(o, c, in, out) : 0;
    moment.out_elements = N * out;
    moment.locals_bytes = locals;
    t.moments->push_back(moment);
  }
  return saved_itself;
}

// The explicit attention's moment at its last product (ForwardMoment::kAttention):
// compat::masked_attention's bmm(probabilities, v) makes its (b, H, T, hd) output while the
// masked scores (a local), the probabilities and v's bmm operand (saved, lines_end counts them)
// are alive, and causal_attention's at::ones (T, T) that the mask came from (a temporary of the
// call's argument).
void attention_moment(const Table& t, size_t lines_end, int64_t scores, int64_t locals) {
  if (t.moments == nullptr) return;
  ForwardMoment moment;
  moment.kind = ForwardMoment::kAttention;
  moment.groups_run = 1;  // the attention's input projections
  moment.lines_end = lines_end;
  moment.scores_bytes = scores;
  moment.locals_bytes = locals;
  t.moments->push_back(moment);
}

// compat::masked_attention's softmax runs in fp32 and is cast back to c for bmm(probabilities, v)
// (HF's softmax(..., dtype=torch.float32).to(query.dtype)). Adds what stays until the softmax's
// backward (its fp32 output, the causal mask) and returns the index from which the block's
// backward has released its lines by then; then, with a 16-bit c, the cast that bmm saves. Also
// the softmax's own forward moment with a 16-bit c: the masked scores, their fp32 copy (softmax's
// input) and its output, before the cast and v's copy exist; `held`: the attention's own locals
// alive by then that no line before it counts (GQA's repeated k and v).
// `scores`: the blocks whose scores take a gradient (softmax and masked_fill keep theirs); `values`:
// those whose v does (bmm(probabilities, v) keeps the probabilities for it); fp32, the two are one
// tensor, kept where either keeps it (`either`).
size_t attention_probabilities(const PlanOptions& o, const Blocks& scores, const Blocks& values, const Blocks& either,
                               int64_t b, int64_t H, int64_t T, int64_t c, const Table& t, int64_t locals, int64_t held) {
  const int64_t probabilities = b * H * T * T;
  const Blocks& kept = c != kFp32 ? scores : either;
  t.add("attention probabilities, fp32", kept.s + "·b·H·T·T·4", kept.n * probabilities * kFp32,
        c != kFp32 || scores.n == either.n ? "softmax (in fp32) saves its output (b, H, T, T)"
                                           : "softmax (in fp32) saves its output (b, H, T, T); in block 0 bmm(probabilities, v) does");
  const int64_t mask = o.packed_documents ? 0 : T * T * kBool;
  if (!o.packed_documents) {  // packed rows share one mask (packed_rows_saved)
    t.add("causal mask", scores.s + "·T·T·1", scores.n * mask, "masked_fill saves the (T, T) bool mask");
  }
  const size_t released = t.lines->size();
  if (c != kFp32) {
    attention_moment(t, released, probabilities * (c + kFp32) + mask + held, locals);
    t.add("attention probabilities cast to c", values.s + "·b·H·T·T·c", values.n * probabilities * c,
          "bmm(probabilities, v) saves its operand, softmax's output cast back");
  }
  return released;
}

// The same where the scores and v take a gradient in the same blocks (GPT-2's one c_attn).
size_t attention_probabilities(const PlanOptions& o, const Blocks& att, int64_t b, int64_t H, int64_t T, int64_t c,
                               const Table& t, int64_t locals, int64_t held) {
  return attention_probabilities(o, att, att, att, b, H, T, c, t, locals, held);
}

// --framework hf-trl, activation gelu_new: transformers computes it op by op (activations.py
// NewGELUActivation, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))), and autograd saves the tanh,
// 1 + tanh and 0.5·x beside x (pow's input), where the fused op saves x alone. On the CPU all are in
// x's dtype. Under CUDA autocast pow runs in fp32 (an autocast fp32 op), so x is saved as an fp32
// copy and the sum with it promotes the rest to fp32, 0.5·x excepted: 4 + 4 + 4 + c bytes for the
// fused op's c. (Measured on the CPU against bench/reference/hf_trl.py: tests/reference/plan_memory.sh.)
void hf_activation_saved(const ModelConfig& m, const PlanOptions& o, const Blocks& blocks, int64_t N, const Dtypes& dt,
                         const Table& t) {
  if (!hf_activation_op_by_op(m, o)) return;
  const bool fp32_pow = hf_activation_pow_in_fp32(o, dt.autocast);
  t.add("gelu_new op by op: tanh, 1 + tanh, 0.5·x", blocks.s + (fp32_pow ? "·b·T·f·12" : "·3·b·T·f·c"),
        blocks.n * N * m.d_ff * (fp32_pow ? 3 * kFp32 : 3 * dt.c),
        fp32_pow ? "transformers' NewGELUActivation; autocast runs pow in fp32, so x's fp32 copy, the tanh and "
                   "1 + tanh are fp32"
                 : "transformers' NewGELUActivation saves them besides x");
}

// The block's last expression (ForwardMoment::kEnd).
void end_moment(const Table& t, int64_t result, int64_t locals) {
  if (t.moments == nullptr) return;
  ForwardMoment moment;
  moment.kind = ForwardMoment::kEnd;
  moment.groups_run = kLinearGroups;
  moment.lines_end = t.lines->size();
  moment.result_bytes = result;
  moment.locals_bytes = locals;
  t.moments->push_back(moment);
}

// Each adapter's r-wide A(x), saved by B's linear: in autocast's dtype, else in the adapters'.
void adapter_intermediates(const ModelConfig& m, const PlanOptions& o, int64_t N, const Dtypes& dt, const Table& t) {
  if (!o.lora.enabled()) return;
  const int64_t adapters = static_cast<int64_t>(lora_targets(m, o.lora.targets).size());
  t.add(kAdapterOutputsLine, dt.autocast || dt.a == dt.c ? "L·n·b·T·r·c" : "L·n·b·T·r·4", m.n_layers * adapters * adapter_a_output_bytes(o, dt, N),
        std::to_string(adapters) + " adapters per block; each B saves its r-wide input");
}

}  // namespace

AdapterOutputs adapter_outputs(const PlanOptions& o, const Dtypes& dt, int64_t rows_out) {
  if (dt.autocast || dt.c == dt.a)
    return {3 * rows_out * dt.c, "3·b·T·out·c", "the base linear's output, B's output, the scaled delta"};
  if (o.cpu)
    return {rows_out * (dt.c + 3 * kFp32), "b·T·out·(c + 12)",
            "the base linear's output (c), the fp32 delta, the result's fp32 copy and the sum (the CPU's mixed-dtype add)"};
  return {rows_out * (2 * dt.c + 2 * kFp32), "b·T·out·(2c + 8)",
          "the base linear's output, the fp32 delta and sum, and the sum cast back to c"};
}

int64_t adapter_a_output_bytes(const PlanOptions& o, const Dtypes& dt, int64_t rows) {
  return rows * o.lora.rank * (dt.autocast ? dt.c : dt.a);
}

int64_t block_output_sum(const PlanOptions& o, int64_t N, int64_t d, int64_t c, int64_t residual) {
  return N * d * c + N * d * residual + (o.cpu && c != residual ? N * d * residual : 0);
}

int linear_group(const std::string& name) {
  if (name == "c_attn" || name == "q" || name == "k" || name == "v") return 0;
  if (name == "attn_c_proj" || name == "o") return 1;
  if (name == "c_fc" || name == "gate" || name == "up") return 2;
  return 3;  // mlp_c_proj, down
}

int adapted_count(const ModelConfig& m, const PlanOptions& o, std::initializer_list<const char*> names) {
  return o.lora.enabled() ? count_of(saving_linears(m, o), names) : 0;
}

FrozenPrefix frozen_prefix_of(const ModelConfig& m, const PlanOptions& o, bool checkpointing) {
  if (!o.lora.enabled() || checkpointing) return FrozenPrefix::kNone;
  const std::vector<std::string> adapted = saving_linears(m, o);
  const bool gpt2 = m.arch == Architecture::kGpt2;
  if (gpt2 ? count_of(adapted, {"c_attn"}) > 0 : count_of(adapted, {"q", "k", "v"}) > 0) return FrozenPrefix::kInput;
  if (count_of(adapted, {gpt2 ? "attn_c_proj" : "o"}) > 0) return FrozenPrefix::kAttention;
  if (gpt2 ? count_of(adapted, {"c_fc"}) > 0 : count_of(adapted, {"gate", "up"}) > 0) return FrozenPrefix::kToMlp;
  return FrozenPrefix::kToMlpOut;
}

int64_t frozen_prefix_weight_numel(const ModelConfig& m, FrozenPrefix prefix) {
  const int64_t d = m.d_model, a = m.n_heads * m.head_dim, kv = m.n_kv_heads * m.head_dim;
  const bool gpt2 = m.arch == Architecture::kGpt2;
  int64_t numel = 0;
  if (prefix >= FrozenPrefix::kInput) numel += gpt2 ? d * 3 * a : d * (a + 2 * kv);  // c_attn / q, k, v
  if (prefix >= FrozenPrefix::kAttention) numel += a * d;                            // attn_c_proj / o
  if (prefix >= FrozenPrefix::kToMlp) numel += gpt2 ? d * m.d_ff : 2 * d * m.d_ff;   // c_fc / gate, up
  if (prefix >= FrozenPrefix::kToMlpOut) numel += m.d_ff * d;                       // mlp_c_proj / down
  return numel;
}

// The parameters whose weights are cast to the compute dtype under autocast: every matrix that
// goes through at::linear (block projections and the head). Embedding lookups, norms and biases
// are not linear weights (biases are cast and cached too, but only until the autocast region
// ends, and no backward saves them).
int64_t linear_weight_numel_per_block(const ModelConfig& m) {
  const int64_t d = m.d_model, a = m.n_heads * m.head_dim, kv = m.n_kv_heads * m.head_dim;
  if (m.arch == Architecture::kGpt2) return d * 3 * a + a * d + d * m.d_ff + m.d_ff * d;
  return d * a + 2 * d * kv + a * d + 3 * d * m.d_ff;
}

int64_t largest_parameter_numel(const ModelConfig& m) {
  const int64_t d = m.d_model;
  int64_t largest = m.vocab_size * d;  // token embedding (and an untied head of the same size)
  if (m.arch == Architecture::kGpt2) {
    largest = std::max({largest, m.max_seq_len * d, d * 3 * m.n_heads * m.head_dim, d * m.d_ff});
  } else {
    largest = std::max({largest, d * m.n_heads * m.head_dim, d * m.d_ff});
  }
  return largest;
}

// One block's tensors saved for backward (without checkpointing), GPT-2, in forward order.
// Returns the index (in t) of the first line that a block's backward has already released when
// it reaches the attention softmax's backward (explicit attention): bmm(probabilities, v)'s
// v and everything after it; the table's end with flash attention.
size_t gpt2_block_saved(const ModelConfig& m, const PlanOptions& o, int64_t b, const Dtypes& dt, const Table& t) {
  const int64_t c = dt.c, w = dt.w;
  const int64_t T = o.activation_length(), d = m.d_model, a = m.n_heads * m.head_dim, f = m.d_ff, H = m.n_heads, L = m.n_layers;
  const int64_t N = b * T;
  size_t released_before_softmax = 0;  // set below with explicit attention
  const Blocks x{dt, FrozenPrefix::kInput, L}, att{dt, FrozenPrefix::kAttention, L}, res{dt, FrozenPrefix::kToMlp, L};
  const Blocks mlp{dt, FrozenPrefix::kToMlpOut, L};
  t.add(kBlockInputLine, x.s + (w == kFp32 ? "·b·T·d·4" : "·b·T·d·w"), x.n * N * d * w,
        "the residual stream (weights' dtype), saved by ln_1");
  t.add("ln_1 mean, rstd", x.s + "·2·b·T·4", x.n * 2 * N * kFp32, "saved by layer_norm's backward");
  const std::vector<std::string> saving = saving_linears(m, o);
  // The block forward's locals that nothing saves, alive until it returns (ForwardMoment): the
  // block input when block 0's is not saved, the qkv views' c_attn output, y, h.
  int64_t locals = x.n == 0 ? N * d * w : 0;
  linear_input(m, t, kAttentionInputLine[0], {"c_attn"}, saving, L, N, d, "d", dt, w, o, locals, x);
  if (o.attention == AttentionKind::kExplicit || att.n == 0) locals += N * 3 * a * c;
  if (o.attention == AttentionKind::kExplicit) {
    t.add("q, k copies", att.s + "·2·b·T·a·c", att.n * 2 * N * a * c,
          "matmul folds the transposed head views into bmm operands (a copy), bmm saves both");
    const bool saved_as_views = bmm_saves_views(b, m.n_heads, att);  // views of c_attn's output, the local above
    if (saved_as_views) locals -= 2 * N * a * c;
    released_before_softmax = attention_probabilities(o, att, b, H, T, c, t, locals, /*held=*/0);
    t.add("v copy", att.s + "·b·T·a·c", att.n * N * a * c, "bmm(probabilities, v) saves v's contiguous copy");
    if (saved_as_views) locals -= N * a * c;
    attention_moment(t, t.lines->size(), b * H * T * T * c + N * a * c + (o.packed_documents ? 0 : T * T * kBool), locals);
    if (!linear_input(m, t, "attention output copy (transpose + reshape)", {"attn_c_proj"}, saving, L, N, a, "a", dt, c, o, locals, att))
      locals += N * a * c;  // y
  } else {
    if (att.n == 0) locals += N * a * c;  // y, saved by the flash kernel only with grad
    t.add("qkv projection output", att.s + "·b·T·3a·c", att.n * N * 3 * a * c, "scaled_dot_product_attention saves q, k, v (views of it)");
    t.add("attention output", att.s + "·b·T·a·c", att.n * N * a * c, "saved by the flash kernel and, as a view, by attn_c_proj");
    t.add("attention logsumexp", att.s + "·b·H·T·4", att.n * b * H * T * kFp32, "flash saves the row logsumexp instead of (T, T) probabilities");
  }
  t.add(kResidualLine, res.s + (w == kFp32 ? "·b·T·d·4" : "·b·T·d·w"), res.n * N * d * w,
        "x + attn_c_proj(y) in the residual's dtype, saved by ln_2");
  t.add("ln_2 mean, rstd", res.s + "·2·b·T·4", res.n * 2 * N * kFp32, "saved by layer_norm's backward");
  if (res.n == 0) locals += N * d * w;  // h
  // ln_2(h) is a temporary of the block's last full expression, alive until the block returns.
  if (!linear_input(m, t, "ln_2 output", {"c_fc"}, saving, L, N, d, "d", dt, w, o, locals, res)) locals += N * d * w;
  // Block 0 under LoRA on mlp_c_proj alone: gelu's input needs no gradient, and c_fc's output is a
  // temporary of the block's last expression.
  t.add("c_fc output", mlp.s + "·b·T·f·c", mlp.n * N * f * c, "gelu saves its input");
  if (mlp.n == 0) locals += N * f * c;
  hf_activation_saved(m, o, mlp, N, dt, t);
  const bool gelu_saved = linear_input(m, t, kMlpOutInputLine[0], {"mlp_c_proj"}, saving, L, N, f, "f", dt, c, o, locals, mlp);
  if (t.end_locals != nullptr) *t.end_locals = locals + (gelu_saved ? 0 : N * f * c);
  const size_t released = o.attention == AttentionKind::kExplicit ? released_before_softmax : t.lines->size();
  adapter_intermediates(m, o, N, dt, t);
  // h + mlp_c_proj(…); on the CPU a projection result in c is cast to h's dtype first (a temporary).
  // With an adapter on the projection, inside it: the base's result, the scaled delta and their
  // sum (adapted_linear.cpp; B's output is gone with the delta's statement).
  const int64_t sum = block_output_sum(o, N, d, c, w);
  end_moment(t, o.lora.enabled() && count_of(saving, {"mlp_c_proj"}) > 0 ? std::max(sum, 3 * N * d * c) : sum,
             locals + (gelu_saved ? 0 : N * f * c));
  return released;
}

namespace {

// Qwen3's q_norm and k_norm (llama.cpp: RmsNorm on the (b, T, n, hd) views of q_proj's and
// k_proj's outputs, before RoPE): the tensors of the block's RMSNorms, over a + kv channels.
void llama_qk_norm_saved(const ModelConfig& m, const PlanOptions& o, int64_t N, const Dtypes& dt, const Blocks& att,
                         const AttentionGrads& grads, const Table& t) {
  const int64_t a = m.n_heads * m.head_dim, kv = m.n_kv_heads * m.head_dim, H = m.n_heads, Hkv = m.n_kv_heads;
  const bool cast = dt.autocast;
  // q's and k's parts alike, or each in the blocks where it takes a gradient (block 0's adapters).
  const auto lines = [&](const std::string& q_width, const std::string& k_width, int64_t q_n, int64_t k_n, int64_t bytes) {
    if (grads.q.n == grads.k.n) {
      return std::pair<std::string, int64_t>{grads.q.s + "·b·T·(" + q_width + "+" + k_width + ")·4",
                                             grads.q.n * N * (q_n + k_n) * bytes};
    }
    return std::pair<std::string, int64_t>{grads.q.s + "·b·T·" + q_width + "·4 + " + grads.k.s + "·b·T·" + k_width + "·4",
                                           (grads.q.n * q_n + grads.k.n * k_n) * N * bytes};
  };
  const auto inputs = lines("a", "kv", a, kv, kFp32);
  t.add("q/k RMSNorm fp32 inputs", inputs.first, inputs.second,
        cast ? "x.to(fp32) copies q_proj's and k_proj's outputs; pow and mul save the copies"
             : "q_proj's and k_proj's outputs themselves (to(fp32) is a no-op); pow and mul save them");
  if (o.libtorch_major < 2) t.add("q/k RMSNorm x²", inputs.first, inputs.second, "LibTorch 1.x's mean backward keeps its input");
  const auto rsqrt = lines("H", "Hkv", H, Hkv, kFp32);
  t.add("q/k RMSNorm rsqrt", rsqrt.first, rsqrt.second, "rsqrt saves its output, one per head");
  if (!o.lora.enabled()) {  // weight · normed saves normed only for the weight's gradient
    t.add("q/k RMSNorm normed, in c", att.s + "·b·T·(a+kv)·c", att.n * N * (a + kv) * dt.c,
          cast ? "weight · normed.to(c) saves the cast (its fp32 weight makes q, k fp32 again)"
               : "weight · normed saves normed");
  }
}

// The Llama block's attention after RoPE, explicit (the bmm operands, the probabilities, the
// output's copy that o_proj reads) or flash (what scaled_dot_product_attention saves). Adds the
// block forward's unsaved locals to `locals`; returns the line from which the block's backward
// has released its lines at the softmax's backward (explicit; 0 with flash, unused there).
size_t llama_attention_saved(const ModelConfig& m, const PlanOptions& o, int64_t b, const Dtypes& dt, const Blocks& att,
                             const std::vector<std::string>& saving, const Table& t, int64_t& locals) {
  const int64_t c = dt.c, T = o.activation_length(), N = b * T, L = m.n_layers, H = m.n_heads;
  const int64_t a = m.n_heads * m.head_dim, kv = m.n_kv_heads * m.head_dim;
  if (o.attention != AttentionKind::kExplicit) {
    if (att.n == 0) locals += N * a * c;  // y, saved by the flash kernel only with grad
    t.add("rotated q, k", att.s + "·b·T·(a+kv)·c", att.n * N * (a + kv) * c, "scaled_dot_product_attention saves q, k");
    t.add("v projection", att.s + "·b·T·kv·c", att.n * N * kv * c, "scaled_dot_product_attention saves v");
    t.add("attention output", att.s + "·b·T·a·c", att.n * N * a * c, "saved by the flash kernel and, as a view, by o_proj");
    t.add("attention logsumexp", att.s + "·b·H·T·4", att.n * b * H * T * kFp32, "flash saves the row logsumexp");
    return 0;
  }
  const bool gqa = m.n_kv_heads != m.n_heads;
  // bmm keeps each operand for the other's gradient: q for k's, k for q's, v for the scores'.
  const AttentionGrads grads(dt, saving, att, L);
  t.add("rotated q copy", grads.k.s + "·b·T·a·c", grads.k.n * N * a * c,
        grads.k.n == att.n ? "matmul folds q into a bmm operand (a copy), bmm saves it"
                           : "matmul folds q into a bmm operand (a copy), bmm saves it for k's gradient (none in block 0)");
  t.add(gqa ? "k repeated to H heads" : "rotated k copy", grads.q.s + "·b·T·a·c", grads.q.n * N * a * c,
        gqa ? "repeat_interleave (b, Hkv, T, hd) -> (b, H, T, hd); bmm saves it" : "bmm operand copy, saved");
  const bool saved_as_views = bmm_saves_views(b, m.n_heads, att);  // the rotated q (k, v) locals themselves
  if (saved_as_views && rotated_qk_bytes(dt) == c) locals -= N * (a + (gqa ? 0 : kv)) * c;
  // GQA: compat::masked_attention repeats k and v first, locals until it returns. k repeated in
  // the rotated dtype when that is not c (Qwen3's fp32 q/k norm, or no autocast): bmm saves its
  // cast (the line above), the repeat is held besides; v repeated is bmm's operand (the line
  // below), alive already at the softmax.
  const int64_t keys_held = gqa && rotated_qk_bytes(dt) != c ? N * a * rotated_qk_bytes(dt) : 0;
  const int64_t values_held = gqa ? N * a * c : 0;
  const size_t released_before_softmax =
      attention_probabilities(o, grads.scores, grads.v, att, b, H, T, c, t, locals, keys_held + values_held);
  t.add(gqa ? "v repeated to H heads" : "v copy", grads.scores.s + "·b·T·a·c", grads.scores.n * N * a * c,
        "bmm(probabilities, v) saves it");
  if (saved_as_views && !gqa) locals -= N * kv * c;
  attention_moment(t, t.lines->size(),
                   b * H * T * T * c + N * a * c + (o.packed_documents ? 0 : T * T * kBool) + keys_held, locals);
  if (!linear_input(m, t, "attention output copy (transpose + reshape)", {"o"}, saving, L, N, a, "a", dt, c, o, locals, att))
    locals += N * a * c;  // y
  return released_before_softmax;
}

}  // namespace

// One block's tensors saved for backward (without checkpointing), Llama family; returns as
// gpt2_block_saved does.
size_t llama_block_saved(const ModelConfig& m, const PlanOptions& o, int64_t b, const Dtypes& dt, const Table& t) {
  const int64_t c = dt.c, w = dt.w;
  const int64_t T = o.activation_length(), d = m.d_model, a = m.n_heads * m.head_dim, kv = m.n_kv_heads * m.head_dim;
  const int64_t f = m.d_ff, L = m.n_layers;
  const int64_t N = b * T;
  const Blocks x{dt, FrozenPrefix::kInput, L}, att{dt, FrozenPrefix::kAttention, L}, res{dt, FrozenPrefix::kToMlp, L};
  const Blocks mlp{dt, FrozenPrefix::kToMlpOut, L};
  t.add(kBlockInputLine, x.s + "·b·T·d·4", x.n * N * d * kFp32, "fp32 residual stream, saved by RMSNorm's pow and mul");
  if (o.libtorch_major < 2) {
    t.add("input RMSNorm x²", x.s + "·b·T·d·4", x.n * N * d * kFp32, "LibTorch 1.x's mean backward keeps its input x.pow(2)");
  }
  t.add("input RMSNorm rsqrt", x.s + "·b·T·4", x.n * N * kFp32, "rsqrt saves its output, (b, T, 1)");
  const bool frozen = o.lora.enabled();  // weight · normed saves normed only for the weight's gradient
  if (!frozen) {
    t.add("input RMSNorm normed", w == kFp32 ? "L·b·T·d·4" : "L·b·T·d·w", L * N * d * w,
          "weight · normed saves normed, cast back to the residual's dtype (as HF)");
  }
  const std::vector<std::string> saving = saving_linears(m, o);
  // The block forward's locals that nothing saves, alive until it returns (ForwardMoment): the
  // block input when block 0's is not saved, normed, the rotated q, k and v, y, h and m.
  int64_t locals = x.n == 0 ? N * d * w : 0;
  if (!linear_input(m, t, kAttentionInputLine[1], {"q", "k", "v"}, saving, L, N, d, "d", dt, w, o, locals, x)) locals += N * d * w;
  if (o.attention == AttentionKind::kExplicit || att.n == 0) {
    locals += N * (a + kv) * rotated_qk_bytes(dt) + N * kv * c;
  } else if (rotated_qk_bytes(dt) != c) {
    locals += N * (a + kv) * rotated_qk_bytes(dt);  // flash saves autocast's casts; the rotated q, k stay besides
  }
  if (m.qk_norm) llama_qk_norm_saved(m, o, N, dt, att, AttentionGrads(dt, saving, att, L), t);
  // RoPE saves nothing: cos and sin do not require grad, so q·cos and rotate_half(q)·sin keep
  // no operand, and the projections are freed once the rotated q, k exist (Qwen3: once normed).
  const size_t released_before_softmax = llama_attention_saved(m, o, b, dt, att, saving, t, locals);
  t.add(kResidualLine, res.s + "·b·T·d·4", res.n * N * d * kFp32, "x + o_proj(y) in fp32, saved by RMSNorm");
  if (o.libtorch_major < 2) {
    t.add("post-attention RMSNorm h²", res.s + "·b·T·d·4", res.n * N * d * kFp32, "LibTorch 1.x's mean backward keeps its input");
  }
  t.add("post-attention RMSNorm rsqrt", res.s + "·b·T·4", res.n * N * kFp32, "rsqrt saves its output");
  if (!frozen) {
    t.add("post-attention RMSNorm normed", w == kFp32 ? "L·b·T·d·4" : "L·b·T·d·w", L * N * d * w,
          "weight · normed saves normed");
  }
  // h, in the residual's dtype: RMSNorm saves its fp32 copy (the line above), which is h itself
  // only when h is fp32 and requires grad.
  if (res.n == 0 || w != kFp32) locals += N * d * w;
  if (!linear_input(m, t, "post-attention RMSNorm output", {"gate", "up"}, saving, L, N, d, "d", dt, w, o, locals, res))
    locals += N * d * w;  // m
  const std::string act = to_string(m.activation);
  // Block 0 under LoRA on down_proj alone: nothing before its adapter needs a gradient, and the
  // gate and up projections and the activation are temporaries of the block's last expression.
  // Under adapters on one of gate and up (not both), block 0's product keeps an operand only for
  // the other's gradient: act(gate) for up's, up for gate's; the activation its input for gate's.
  const bool one_of_gate_up = dt.frozen_prefix == FrozenPrefix::kToMlp && L > 1 && count_of(saving, {"gate", "up"}) == 1;
  const Blocks gate = one_of_gate_up ? Blocks(count_of(saving, {"gate"}) > 0, L) : mlp;
  const Blocks up = one_of_gate_up ? Blocks(count_of(saving, {"up"}) > 0, L) : mlp;
  t.add("gate projection", gate.s + "·b·T·f·c", gate.n * N * f * c, act + " saves its input");
  hf_activation_saved(m, o, gate, N, dt, t);
  if (gate.n == up.n) {
    t.add(act + "(gate), up projection", up.s + "·2·b·T·f·c", up.n * 2 * N * f * c, act + "(g)·u saves both operands");
  } else {
    t.add(act + "(gate), up projection", up.s + "·b·T·f·c + " + gate.s + "·b·T·f·c", (up.n + gate.n) * N * f * c,
          act + "(g)·u saves both operands; in block 0 only the one the other's gradient needs");
  }
  if (mlp.n == 0) locals += 3 * N * f * c;
  const bool product_saved = linear_input(m, t, kMlpOutInputLine[1], {"down"}, saving, L, N, f, "f", dt, c, o, locals, mlp);
  if (t.end_locals != nullptr) *t.end_locals = locals + (product_saved ? 0 : N * f * c);
  const size_t released = o.attention == AttentionKind::kExplicit ? released_before_softmax : t.lines->size();
  adapter_intermediates(m, o, N, dt, t);
  // h + down_proj(…), in the residual's dtype (fp32, or 16-bit weights' without autocast); on
  // the CPU a result in another dtype is cast to it first (TensorIterator's temporary). With an
  // adapter on down_proj, inside it: the base's result, the scaled delta
  // and their sum (adapted_linear.cpp; B's output is gone with the delta's statement).
  const int64_t sum = block_output_sum(o, N, d, c, w);
  end_moment(t, o.lora.enabled() && count_of(saving, {"down"}) > 0 ? std::max(sum, 3 * N * d * c) : sum,
             locals + (product_saved ? 0 : N * f * c));
  return released;
}

void packed_rows_saved(const ModelConfig& m, const PlanOptions& o, int64_t b, const Dtypes& dt, bool checkpointing,
                       const Table& t) {
  if (!o.packed_documents) return;
  const int64_t T = o.activation_length();
  if (m.arch == Architecture::kGpt2) {
    t.add("positions, per token", "b·T·8", b * T * kInt64, "wpe's embedding saves its (b, T) indices: they restart per document");
  } else {
    if (checkpointing) {
      t.add("positions, per token", "b·T·8", b * T * kInt64,
            "every checkpointed block's context keeps the (b, T) positions to rebuild its rotary tables");
    }
    t.add("rotary cos, sin at each position", "2·b·T·hd·" + std::string(dt.w == dt.c ? "c" : "w"), 2 * b * T * m.head_dim * dt.w,
          "gathered once per forward; every block's q·cos, k·sin saves the same two (b, 1, T, hd) tensors");
  }
  if (o.attention == AttentionKind::kExplicit) {
    t.add("block-diagonal causal mask", "b·T·T·1", b * T * T * kBool,
          "built once per forward (compat::document_layout); every block's masked_fill saves the same (b, 1, T, T) mask");
  }
}

}  // namespace accumbench::plan_detail
