// One block's saved tensors for the analytic memory plan (block_tensors.hpp). Each line is a
// tensor that the real step allocates, with the shape formula read off the model code
// (src/models/gpt2.cpp, llama.cpp) and the tensors autograd saves for backward (PyTorch
// tools/autograd/derivatives.yaml). Symbols as in memory_plan.cpp.
#include "plan/block_tensors.hpp"

#include <algorithm>

namespace accumbench::plan_detail {

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
size_t gpt2_block_saved(const ModelConfig& m, const PlanOptions& o, int64_t b, int64_t c, const Table& t) {
  const int64_t T = o.seq_len, d = m.d_model, a = m.n_heads * m.head_dim, f = m.d_ff, H = m.n_heads, L = m.n_layers;
  const int64_t N = b * T;
  const bool cast = c != kFp32;
  size_t released_before_softmax = 0;  // set below with explicit attention
  t.add("block input x", "L·b·T·d·4", L * N * d * kFp32, "fp32 residual stream, saved by ln_1");
  t.add("ln_1 mean, rstd", "L·2·b·T·4", L * 2 * N * kFp32, "saved by layer_norm's backward");
  t.add(cast ? "ln_1 output, cast to c" : "ln_1 output", "L·b·T·d·c", L * N * d * c,
        cast ? "autocast casts the linear's input; the cast is what c_attn saves" : "saved by c_attn (linear)");
  if (o.attention == AttentionKind::kExplicit) {
    t.add("q, k copies", "L·2·b·T·a·c", L * 2 * N * a * c,
          "matmul folds the transposed head views into bmm operands (a copy), bmm saves both");
    t.add("attention probabilities", "L·b·H·T·T·c", L * b * H * T * T * c, "softmax saves its output (b, H, T, T)");
    t.add("causal mask", "L·T·T·1", L * T * T * kBool, "masked_fill saves the (T, T) bool mask");
    released_before_softmax = t.lines->size();
    t.add("v copy", "L·b·T·a·c", L * N * a * c, "bmm(probabilities, v) saves v's contiguous copy");
    t.add("attention output copy", "L·b·T·a·c", L * N * a * c,
          "transpose + reshape copies (b, H, T, hd) to (b, T, a); attn_c_proj saves it");
  } else {
    t.add("qkv projection output", "L·b·T·3a·c", L * N * 3 * a * c, "scaled_dot_product_attention saves q, k, v (views of it)");
    t.add("attention output", "L·b·T·a·c", L * N * a * c, "saved by the flash kernel and, as a view, by attn_c_proj");
    t.add("attention logsumexp", "L·b·H·T·4", L * b * H * T * kFp32, "flash saves the row logsumexp instead of (T, T) probabilities");
  }
  t.add("residual h after attention", "L·b·T·d·4", L * N * d * kFp32, "x + attn_c_proj(y) in fp32, saved by ln_2");
  t.add("ln_2 mean, rstd", "L·2·b·T·4", L * 2 * N * kFp32, "saved by layer_norm's backward");
  t.add(cast ? "ln_2 output, cast to c" : "ln_2 output", "L·b·T·d·c", L * N * d * c, "saved by c_fc (linear)");
  t.add("c_fc output", "L·b·T·f·c", L * N * f * c, "gelu saves its input");
  t.add("gelu output", "L·b·T·f·c", L * N * f * c, "mlp_c_proj (linear) saves its input");
  return o.attention == AttentionKind::kExplicit ? released_before_softmax : t.lines->size();
}

// One block's tensors saved for backward (without checkpointing), Llama family; returns as
// gpt2_block_saved does.
size_t llama_block_saved(const ModelConfig& m, const PlanOptions& o, int64_t b, int64_t c, const Table& t) {
  const int64_t T = o.seq_len, d = m.d_model, a = m.n_heads * m.head_dim, kv = m.n_kv_heads * m.head_dim;
  const int64_t f = m.d_ff, H = m.n_heads, L = m.n_layers;
  const int64_t N = b * T;
  const bool cast = c != kFp32;
  const bool gqa = m.n_kv_heads != m.n_heads;
  size_t released_before_softmax = 0;  // set below with explicit attention
  t.add("block input x", "L·b·T·d·4", L * N * d * kFp32, "fp32 residual stream, saved by RMSNorm's pow and mul");
  if (o.libtorch_major < 2) {
    t.add("input RMSNorm x²", "L·b·T·d·4", L * N * d * kFp32, "LibTorch 1.x's mean backward keeps its input x.pow(2)");
  }
  t.add("input RMSNorm rsqrt", "L·b·T·4", L * N * kFp32, "rsqrt saves its output, (b, T, 1)");
  t.add("input RMSNorm normed", "L·b·T·d·4", L * N * d * kFp32, "weight · normed saves normed (fp32, as HF)");
  if (cast) {
    t.add("RMSNorm output, 3 casts to c", "L·3·b·T·d·c", L * 3 * N * d * c,
          "autocast casts the input of q_proj, k_proj and v_proj separately; each linear saves its cast");
  } else {
    t.add("input RMSNorm output", "L·b·T·d·4", L * N * d * kFp32, "saved by q_proj, k_proj, v_proj (one tensor)");
  }
  if (m.qk_norm) {
    // Qwen3's q_norm and k_norm (llama.cpp: RmsNorm on the (b, T, n, hd) views of q_proj's and
    // k_proj's outputs, before RoPE): the tensors of the block's RMSNorms, over a + kv channels.
    const int64_t Hkv = m.n_kv_heads;
    t.add("q/k RMSNorm fp32 inputs", "L·b·T·(a+kv)·4", L * N * (a + kv) * kFp32,
          cast ? "x.to(fp32) copies q_proj's and k_proj's outputs; pow and mul save the copies"
               : "q_proj's and k_proj's outputs themselves (to(fp32) is a no-op); pow and mul save them");
    if (o.libtorch_major < 2) {
      t.add("q/k RMSNorm x²", "L·b·T·(a+kv)·4", L * N * (a + kv) * kFp32, "LibTorch 1.x's mean backward keeps its input");
    }
    t.add("q/k RMSNorm rsqrt", "L·b·T·(H+Hkv)·4", L * N * (H + Hkv) * kFp32, "rsqrt saves its output, one per head");
    t.add("q/k RMSNorm normed, in c", "L·b·T·(a+kv)·c", L * N * (a + kv) * c,
          cast ? "weight · normed.to(c) saves the cast (its fp32 weight makes q, k fp32 again)"
               : "weight · normed saves normed");
  }
  // RoPE saves nothing: cos and sin do not require grad, so q·cos and rotate_half(q)·sin keep
  // no operand, and the projections are freed once the rotated q, k exist (Qwen3: once normed).
  if (o.attention == AttentionKind::kExplicit) {
    t.add("rotated q copy", "L·b·T·a·c", L * N * a * c, "matmul folds q into a bmm operand (a copy), bmm saves it");
    t.add(gqa ? "k repeated to H heads" : "rotated k copy", "L·b·T·a·c", L * N * a * c,
          gqa ? "repeat_interleave (b, Hkv, T, hd) -> (b, H, T, hd); bmm saves it" : "bmm operand copy, saved");
    t.add("attention probabilities", "L·b·H·T·T·c", L * b * H * T * T * c, "softmax saves its output (b, H, T, T)");
    t.add("causal mask", "L·T·T·1", L * T * T * kBool, "masked_fill saves the (T, T) bool mask");
    released_before_softmax = t.lines->size();
    t.add(gqa ? "v repeated to H heads" : "v copy", "L·b·T·a·c", L * N * a * c, "bmm(probabilities, v) saves it");
    t.add("attention output copy", "L·b·T·a·c", L * N * a * c,
          "transpose + reshape copies (b, H, T, hd) to (b, T, a); o_proj saves it");
  } else {
    t.add("rotated q, k", "L·b·T·(a+kv)·c", L * N * (a + kv) * c, "scaled_dot_product_attention saves q, k");
    t.add("v projection", "L·b·T·kv·c", L * N * kv * c, "scaled_dot_product_attention saves v");
    t.add("attention output", "L·b·T·a·c", L * N * a * c, "saved by the flash kernel and, as a view, by o_proj");
    t.add("attention logsumexp", "L·b·H·T·4", L * b * H * T * kFp32, "flash saves the row logsumexp");
  }
  t.add("residual h after attention", "L·b·T·d·4", L * N * d * kFp32, "x + o_proj(y) in fp32, saved by RMSNorm");
  if (o.libtorch_major < 2) {
    t.add("post-attention RMSNorm h²", "L·b·T·d·4", L * N * d * kFp32, "LibTorch 1.x's mean backward keeps its input");
  }
  t.add("post-attention RMSNorm rsqrt", "L·b·T·4", L * N * kFp32, "rsqrt saves its output");
  t.add("post-attention RMSNorm normed", "L·b·T·d·4", L * N * d * kFp32, "weight · normed saves normed");
  if (cast) {
    t.add("RMSNorm output, 2 casts to c", "L·2·b·T·d·c", L * 2 * N * d * c, "gate_proj and up_proj each save their own cast");
  } else {
    t.add("post-attention RMSNorm output", "L·b·T·d·4", L * N * d * kFp32, "saved by gate_proj and up_proj (one tensor)");
  }
  t.add("gate projection", "L·b·T·f·c", L * N * f * c, "silu saves its input");
  t.add("silu(gate), up projection", "L·2·b·T·f·c", L * 2 * N * f * c, "silu(g)·u saves both operands");
  t.add("silu(gate)·up", "L·b·T·f·c", L * N * f * c, "down_proj (linear) saves its input");
  return o.attention == AttentionKind::kExplicit ? released_before_softmax : t.lines->size();
}

}  // namespace accumbench::plan_detail
