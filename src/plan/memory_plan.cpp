// The analytic memory plan (plan.hpp). Every line is a tensor that the real step allocates, with
// the shape formula read off the model code (src/models/gpt2.cpp, llama.cpp, model.cpp), the
// training step (src/engine/trainer.cpp, adamw.cpp) and the tensors autograd saves for backward
// (PyTorch tools/autograd/derivatives.yaml: linear/addmm and mm save their input and weight,
// layer_norm its input, mean and rstd, gelu/silu their input, softmax and log_softmax their
// output, mul both operands, masked_fill its mask, bmm both operands). Symbols: b micro-batch,
// T sequence length, d model width, a = H·hd attention width, kv = Hkv·hd, f = d_ff, V vocabulary,
// L blocks, P parameters, c bytes of the compute dtype (4 in fp32, 2 under bf16/fp16 autocast).
#include "accumbench/plan.hpp"

#include <algorithm>
#include <ostream>
#include <sstream>

#include "accumbench/chunked_loss.hpp"
#include "accumbench/error.hpp"
#include "accumbench/optimizer_state.hpp"
#include "plan/block_tensors.hpp"
#include "plan/plan_builder.hpp"
#include "plan/quantized_base.hpp"

namespace accumbench {

std::string to_string(AttentionKind kind) { return kind == AttentionKind::kFlash ? "flash" : "explicit"; }

AttentionKind attention_kind_from_string(const std::string& text) {
  if (text == "explicit") return AttentionKind::kExplicit;
  if (text == "flash") return AttentionKind::kFlash;
  throw UserError("unknown --attention \"" + text + "\"; use explicit (LibTorch 1.x, CPU) or flash (LibTorch 2.x, CUDA)");
}

std::string to_string(PlanFramework framework) { return framework == PlanFramework::kHfTrl ? "hf-trl" : "plain"; }

std::string to_string(TrlLoss loss) { return loss == TrlLoss::kChunkedNll ? "chunked_nll" : "nll"; }

TrlLoss trl_loss_from_string(const std::string& text) {
  if (text == "nll") return TrlLoss::kNll;
  if (text == "chunked_nll") return TrlLoss::kChunkedNll;
  throw UserError("unknown --trl-loss \"" + text + "\"; use chunked_nll (TRL's default since v1.7.0) or nll (TRL before 1.7, or SFTConfig(loss_type=\"nll\"))");
}

PlanFramework plan_framework_from_string(const std::string& text) {
  if (text == "plain") return PlanFramework::kPlain;
  if (text == "hf-trl") return PlanFramework::kHfTrl;
  throw UserError("unknown --framework \"" + text + "\"; use plain (accumbench's loop) or hf-trl (HF Trainer + TRL's SFTTrainer)");
}

const char* plan_phase_name(PlanPhase phase) {
  switch (phase) {
    case PlanPhase::kForward: return "forward";
    case PlanPhase::kBackward: return "backward";
    case PlanPhase::kOptimizer: return "optimizer";
  }
  return "?";
}

PlanElementBytes plan_element_bytes(const PlanOptions& options, const SplitConfig& split) {
  PlanElementBytes e;
  e.w = options.lora.quantized() ? compute_bytes(Precision::kFp32) : compute_bytes(options.weights_dtype);
  e.c = split.precision != Precision::kFp32 ? compute_bytes(split.precision) : e.w;
  return e;
}

int64_t total_bytes(const std::vector<PlanLine>& lines) {
  int64_t total = 0;
  for (const auto& line : lines) total += line.bytes;
  return total;
}

namespace {

using namespace plan_detail;

void check_split(const ModelConfig& m, const PlanOptions& o, const SplitConfig& s) {
  if (s.precision == Precision::kFp16 && o.cpu) throw UserError("fp16 needs a CUDA device; plan bf16 or fp32 for the CPU");
  if (s.optimizer_in_backward && s.accum_steps != 1) {
    throw UserError("optimizer-in-backward needs accumulation steps = 1; plan micro-batch = batch");
  }
  if (s.micro_batch <= 0 || o.seq_len <= 0) throw UserError("micro-batch and sequence length must be positive");
  if (o.framework == PlanFramework::kHfTrl && s.chunked_loss) {
    throw UserError("--framework hf-trl plans TRL's own loss (--trl-loss), not accumbench's --chunked-loss; drop --chunked-loss "
                    "(TRL's chunked loss is --trl-loss chunked_nll) or plan with --framework plain");
  }
  check_sequence_length(m, o.seq_len);
  // The largest terms in doubles first: the plan's int64 byte counts must not overflow, and a
  // split this large fits no device anyway.
  const double b = static_cast<double>(s.micro_batch), T = static_cast<double>(o.seq_len);
  const double largest = std::max({static_cast<double>(m.n_layers * m.n_heads) * b * T * T * 4.0,
                                    static_cast<double>(m.vocab_size) * b * T * 16.0,
                                    static_cast<double>(m.n_layers) * b * T * static_cast<double>(m.d_model + m.d_ff) * 32.0});
  if (largest > 1.0e18) {
    throw UserError("split " + s.label() + " of " + m.name + " at T=" + std::to_string(o.seq_len) +
                    " needs more than an exabyte of activations; pick a smaller micro-batch or sequence length");
  }
}


}  // namespace

namespace plan_detail {

void PlanBuilder::resident_tensors() {
  const Table resident{&plan.resident};
  if (quant) {
    quantized_resident(m, o, resident);
  } else if (w == kFp32) {
    resident.add("weights", "P·4", P * kFp32, "fp32 parameters (autocast keeps fp32 masters, casts per op)");
  } else {
    resident.add("weights", "P·w", P * w, "stored in --weights-dtype (" + to_string(o.weights_dtype) + ")");
  }
  const std::string n_t = lora ? "N_lora·4" : (w == kFp32 ? "P·4" : "P·w");
  if (lora) {
    resident.add("LoRA adapters A, B", n_t, trained * kFp32,
                 "fp32, " + std::to_string(trained) + " trainable parameters; the base is frozen");
  }
  optimizer_state_lines(o.optimizer, trained_tensor_numels(m, o.lora), t, n_t, o.cpu, resident, &plan.evictable_bytes);
  if (o.cpu) {
    const int64_t B = o.batch;
    resident.add("token batches (inputs, targets)", "2·n·B·T·8", 2 * o.token_batches * B * o.seq_len * kInt64,
                 "the runner's n distinct host batches; on the CPU they are the device memory");
  }
  if (m.arch == Architecture::kLlama) {
    // q is the projection's output, in autocast's dtype or else the weights'; Qwen3's q/k norms
    // multiply it by their weight, which promotes it to the weights' dtype (fp32 under autocast).
    const int64_t q_bytes = m.qk_norm || !autocast ? w : c;
    resident.add("rotary cos, sin", "2·T·hd·c", 2 * T * m.head_dim * q_bytes, "RotaryCache keeps them in q's dtype");
  }
  if (split.precision == Precision::kFp16) {
    resident.add("loss scale", "0", 0, "a host double in the Trainer (GradScaler state), no device bytes");
  }
}

void PlanBuilder::gradients() {
  const Table grads{&plan.gradients};
  grads.add(lora ? "adapter gradients" : "gradients", lora ? "N_lora·4" : (w == kFp32 ? "P·4" : "P·w"), trained * t,
            split.optimizer_in_backward ? "freed one by one as each parameter steps in backward"
                                        : ".grad of what trains, alive from the first backward to zero_grad");
}

void PlanBuilder::saved_tensors() {
  const Table saved{&plan.saved};
  if (!o.cpu)
    saved.add("micro-batch tokens on the device", "2·b·T·8", 2 * N * kInt64,
              "inputs for the embedding, targets for the loss");
  if (m.arch == Architecture::kGpt2 && !o.packed_documents) saved.add("positions", "T·8", T * kInt64, "wpe's embedding saves its indices");
  packed_rows_saved(m, o, b, dtypes(), saved);  // --packing bfd: the layout every block shares
  block_lines_begin = plan.saved.size();
  if (checkpointing) {
    saved.add("block input x (checkpoint)", "L·b·T·d·" + rs(), L * N * d * w,
              "checkpointing keeps only each block's input");
  } else {
    // LoRA: the embedding is frozen, so block 0 saves nothing before its first adapter.
    Dtypes dt = dtypes();
    dt.frozen_prefix = frozen_prefix_of(m, o, checkpointing);
    if (m.arch == Architecture::kGpt2) gpt2_block_saved(m, o, b, dt, saved);
    else llama_block_saved(m, o, b, dt, saved);
  }
  if (quant && !checkpointing) {
    Dtypes dt = dtypes();
    dt.frozen_prefix = frozen_prefix_of(m, o, checkpointing);
    int8_saved_inputs(m, o, N, L, dt, saved);
  }
  if (block_weights_cast() && !checkpointing) {
    // A frozen weight's cast is not cached (autocast caches only leaves that require grad), and
    // a linear saves it only for its input's gradient: block 0's frozen prefix saves none.
    const int64_t unsaved = frozen_prefix_weight_numel(m, frozen_prefix_of(m, o, checkpointing));
    saved.add("block linear weights cast to c", unsaved > 0 ? "(L·(linear weights) − block 0's frozen prefix)·c" : "L·(linear weights)·c",
              (L * linear_weight_numel_per_block(m) - unsaved) * c,
              "autocast casts each weight; each linear's backward saves its cast weight");
  }
  if (autocast && lora && !checkpointing) {
    saved.add("adapter weights cast to c", "N_lora·c", trained * c, "autocast's cast cache of every A and B, saved by their linears");
  }
  block_lines_end = plan.saved.size();
  if (weights_cast() && full_head()) {
    saved.add("head weight cast to c", "V·d·c", V * d * c, "the head linear saves its cast weight");
  }
  final_norm_saved();
}

void PlanBuilder::final_norm_saved() {
  const Table saved{&plan.saved};
  // LayerNorm keeps its input as it is; RMSNorm keeps its fp32 copy (the input itself in fp32).
  const int64_t final_norm_input = m.arch == Architecture::kGpt2 ? w : kFp32;
  saved.add("final norm input", final_norm_input == kFp32 ? "b·T·d·4" : "b·T·d·w", N * d * final_norm_input,
            "the last block's output, saved by the final norm");
  if (m.arch == Architecture::kGpt2) {
    saved.add("ln_f mean, rstd", "2·b·T·4", 2 * N * kFp32, "saved by layer_norm's backward");
    if (full_head() && !lora) {  // a frozen head (LoRA) needs no input for its input's gradient
      saved.add(autocast ? "ln_f output, cast to c" : "ln_f output", "b·T·d·c", N * d * c,
                "the head linear saves its input");
    }
  } else {
    if (o.libtorch_major < 2) {
      saved.add("final RMSNorm x²", "b·T·d·4", N * d * kFp32, "LibTorch 1.x's mean backward keeps its input");
    }
    if (lora) {  // a frozen norm weight: weight · normed keeps no normed
      saved.add("final RMSNorm rsqrt", "b·T·4", N * kFp32, "rsqrt saves its output");
    } else {
      saved.add("final RMSNorm rsqrt, normed", w == kFp32 ? "b·T·(d+1)·4" : "b·T·4 + b·T·d·w", N * kFp32 + N * d * w,
                "rsqrt and weight · normed save them (normed cast back to the residual's dtype, as HF)");
    }
    if (full_head() && !lora) {  // a frozen head (LoRA) needs no input for its input's gradient
      saved.add(autocast ? "final RMSNorm output, cast to c" : "final RMSNorm output", "b·T·d·c", N * d * c,
                "the head linear saves its input");
    }
  }
}

void PlanBuilder::loss_head() {
  const Table saved{&plan.saved};
  const Table fwd{&plan.forward_peak};
  const Table bwd{&plan.backward_peak};
  if (trl_chunked) {
    trl_chunked_head();
  } else if (chunked) {
    // src/engine/chunked_loss.cpp: the head's gradients are computed in the forward and kept
    // until backward scales them; per chunk of r tokens the logits exist in fp32 only. The
    // matmuls run in c (autocast's dtype, else the weights'); a frozen head (LoRA) gets no
    // weight gradient.
    saved.add("chunked loss: grad of the hidden states", "b·T·d·4", N * d * kFp32,
              "computed chunk by chunk in the forward, scaled in backward");
    if (!lora)
      saved.add("chunked loss: grad of the head weight", "V·d·4", V * d * kFp32, "accumulated over the chunks in fp32");
    const int64_t r = loss_chunk_tokens(N, o.loss_chunk_tokens);
    const std::string chunk = "r·V·4 (r=" + std::to_string(r) + ")";
    fwd.add("final hidden states", "b·T·d·" + rs(), N * d * w, "the head's input (the final norm's output), alive during the chunk loop");
    if (weights_cast()) {
      fwd.add("hidden states and head weight cast to c", "(b·T+V)·d·c", (N + V) * d * c,
              "the chunk matmuls' operands");
    }
    fwd.add("one chunk's logits, fp32", chunk, r * V * kFp32, "become softmax − one-hot in place");
    // The larger of log_softmax's output next to the logits and the gradient's cast to c plus
    // the weight gradient's per-chunk product in c, which the CPU's TensorIterator casts to fp32
    // in a temporary before adding it (CUDA casts in the kernel). fp32, and fp16 (whose range
    // could overflow), add the product in place in fp32: no product temporary; nor does a
    // frozen head, which has no weight gradient.
    const bool fp16 = (autocast ? split.precision : o.weights_dtype) == Precision::kFp16;
    const int64_t product = lora || fp16 ? 0 : V * d * c + (o.cpu ? V * d * kFp32 : 0);
    const int64_t gradient_temporaries = c == kFp32 ? 0 : r * V * c + product;
    if (gradient_temporaries > r * V * kFp32) {
      fwd.add(product > 0 ? "chunk gradient cast, weight product" : "chunk gradient cast",
              product == 0 ? "r·V·c" : o.cpu ? "r·V·c + V·d·(c+4)" : "r·V·c + V·d·c", gradient_temporaries,
              product == 0 ? "the chunk's softmax − one-hot in c, for the hidden states' gradient"
              : o.cpu      ? "in c, and the product cast to fp32 to be added (CPU)"
                           : "in c; the product is added to fp32");
    } else {
      fwd.add("chunk log_softmax output", "r·V·4", r * V * kFp32, "next to the chunk's logits");
    }
    // Backward returns the scaled gradients in the dtypes of the hidden states and the head
    // weight: new tensors unless those are fp32, next to the fp32 ones they come from.
    if (w != kFp32) {
      bwd.add("grad of the hidden states, in the residual's dtype", "b·T·d·w", N * d * w, "returned by the chunked head's backward");
      if (!lora) bwd.add("grad of the head weight, in the weights' dtype", "V·d·w", V * d * w, "returned next to the fp32 one");
    }
  } else {
    saved.add("log_softmax output", "b·T·V·4", N * V * kFp32,
              "cross-entropy's log_softmax saves it; nll_loss reads it");
    fwd.add("logits", "b·T·V·c", N * V * c, "the head's output; freed when the forward ends (not saved)");
    if (c != kFp32)
      fwd.add("logits fp32 copy", "b·T·V·4", N * V * kFp32, "Trainer::accumulate runs cross-entropy in fp32");
    bwd.add("nll_loss gradient", "b·T·V·4", N * V * kFp32, "grad of the log-probabilities, (b·T, V)");
    bwd.add("log_softmax gradient", "b·T·V·4", N * V * kFp32, "grad of the logits, alive with its input");
    if (o.framework == PlanFramework::kHfTrl) trl_metrics();
  }
}

void PlanBuilder::trl_metrics() {
  const Table t{&plan.framework_forward_peak};
  const int64_t rows = b * (T - 1);
  t.add("logits kept in the outputs, fp32", "b·T·V·4", N * V * kFp32,
        autocast ? "accelerate's convert_to_fp32 copy, alive until compute_loss returns"
                 : "the model's outputs, alive until compute_loss returns");
  if (b > 1)
    t.add("shifted logits reshaped (a copy)", "b·(T−1)·V·4", rows * V * kFp32, "entropy_from_logits: logits[:, :-1].reshape(-1, V)");
  const int64_t chunk = std::min<int64_t>(128, rows);
  t.add("entropy chunk: log_softmax, exp, product", "3·min(128, b·(T−1))·V·4", 3 * chunk * V * kFp32,
        "per 128 rows, under no_grad");
}

PlanBuilder::TrlChunks PlanBuilder::trl_chunks() const {
  TrlChunks k;
  k.rows = b * (T - 1);  // HF's labels: hidden[:, :-1] predicts labels[:, 1:]
  k.count = (k.rows + kTrlChunkTokens - 1) / kTrlChunkTokens;
  k.full = std::min(kTrlChunkTokens, k.rows);
  k.last = k.rows - kTrlChunkTokens * (k.count - 1);
  // One chunk: logits = h.float() @ w.float().t(), log_softmax, its exp and exp · log_softmax.
  // Under autocast the matmul runs in c on casts of h and w (a weight view is no leaf: not
  // cached); log_softmax runs in fp32 on CUDA (autocast's fp32 list) but stays in c on the CPU
  // (LibTorch 1.13), where nll_loss makes an fp32 copy of it. Without autocast and 16-bit weights
  // .float() copies h and w to fp32.
  k.logits_bytes = autocast ? c : kFp32;
  k.softmax_bytes = autocast && o.cpu ? c : kFp32;
  k.nll_copy_bytes = k.softmax_bytes == kFp32 ? 0 : kFp32;
  k.cast_bytes = autocast ? c : (w == kFp32 ? 0 : kFp32);
  return k;
}

void PlanBuilder::trl_chunked_head() {
  const TrlChunks k = trl_chunks();
  const Table saved{&plan.saved};
  const std::string hd = "·d·" + rs();  // the final norm's output is in the weights' dtype
  saved.add("TRL chunk inputs: gathered hidden", "b·(T−1)" + hd, k.rows * d * w,
            "hidden[:, :-1].reshape(-1, d)[order]: the valid rows first; each checkpointed chunk keeps its slice");
  saved.add("TRL chunk targets, gather order", "2·b·(T−1)·8", 2 * k.rows * kInt64,
            "labels[order] for the chunks, order for the gather's backward");
  // The forward: last_hidden_state stays in the outputs; at the gather the shifted copy is there
  // too, then each chunk's tensors, which die with it (checkpointed: nothing saved).
  const Table fwd{&plan.forward_peak};
  fwd.add("last_hidden_state (in the outputs)", "b·T" + hd, N * d * w, "the patched forward's outputs keep them");
  const int64_t chunk_moment = k.full * V * std::max(k.logits_bytes + 3 * k.softmax_bytes,
                                                     k.logits_bytes + k.softmax_bytes + k.nll_copy_bytes);
  if (chunk_moment >= k.rows * d * w) {
    fwd.add("chunk: logits, log_softmax, exp, product", k.per_row() + " (r=" + std::to_string(k.full) + ")", chunk_moment,
            "_chunk's loss and entropy, nothing saved (checkpointed)");
  } else {
    fwd.add("shifted hidden states (a copy)", "b·(T−1)" + hd, k.rows * d * w, "reshape of a strided slice");
  }
  trl_chunked_backward(k);
}

// Backward reruns each chunk, the last (shortest) first, with nothing else of the head's; the
// rerun keeps what its backward reads (log_softmax's output, nll_loss's fp32 copy, the casts of h
// and w). Every later chunk runs with the earlier chunks' gradient sums in autograd's input
// buffers: the hidden states' (all n rows: each chunk's slice backward makes a full-size one)
// and, when the head trains, the weight's. nll's and log_softmax's backward make (r, V)
// gradients, the matmul's backward the chunk's hidden and weight gradients; the buffers add the
// new ones out of place (measured on LibTorch 1.13's CPU: old sum, new gradient and their sum
// alive at once). The highest moment's lines go into the backward's table.
void PlanBuilder::trl_chunked_backward(const TrlChunks& k) {
  const bool head_trains = !lora;
  const int64_t weight_grad = head_trains ? V * d * t : 0;
  const std::string weight_formula = head_trains ? " + V·d·t" : "";
  const std::string hd = "·d·" + rs();
  const int64_t hidden_sum = k.rows * d * w;
  auto rows_label = [](int64_t rows) { return " (r=" + std::to_string(rows) + ")"; };
  auto recompute = [&](int64_t rows, const std::string& name) {
    return PlanLine{name,
                    k.per_row() + (k.nll_copy_bytes ? " + r·V·4" : "") + (k.cast_bytes ? " + (V+r)·d·casts" : "") + rows_label(rows),
                    rows * V * (k.logits_bytes + 3 * k.softmax_bytes + k.nll_copy_bytes) + (V + rows) * d * k.cast_bytes,
                    "logits, log_softmax, exp, product (and casts), rerun by the checkpoint; what backward reads stays"};
  };
  std::vector<std::vector<PlanLine>> moments;
  moments.push_back({recompute(k.last, "recompute of the last chunk")});
  moments.push_back({{"first chunk's log_softmax gradient, fp32", "r·V·4" + rows_label(k.last), k.last * V * kFp32,
                      "the logits' gradient, before the matmul's backward lets it go"},
                     {"its hidden and weight gradients", "r·d·4" + weight_formula, k.last * d * kFp32 + weight_grad,
                      "the chunk matmul's backward"}});
  if (k.count > 1) {
    const PlanLine sums{"earlier chunks' gradient sums", "b·(T−1)" + hd + weight_formula, hidden_sum + weight_grad,
                        "autograd's input buffers of the gather and the head weight"};
    moments.push_back({recompute(k.full, "recompute of a full chunk"), sums});
    moments.push_back({{"chunk: log_softmax gradient, fp32", "r·V·4" + rows_label(k.full), k.full * V * kFp32, "the logits' gradient"},
                       {"chunk: hidden and weight gradients", "r·d·4" + weight_formula, k.full * d * kFp32 + weight_grad,
                        "the chunk matmul's backward"},
                       sums});
    if (head_trains) {
      moments.push_back({{"chunk: hidden gradient", "r·d·4", k.full * d * kFp32, "waiting for its slice's backward"},
                         {"weight gradient: old sum, new, sum", "3·V·d·t", 3 * weight_grad,
                          "AccumulateGrad's input buffer adds out of place"},
                         {"earlier chunks' hidden gradient sum", "b·(T−1)" + hd, hidden_sum, "the gather's input buffer"}});
    }
    moments.push_back({{"hidden gradient: old sum, new, sum", "3·b·(T−1)" + hd, 3 * hidden_sum,
                        "the gather's input buffer adds a chunk's full-size slice gradient out of place"},
                       {"earlier chunks' weight gradient sum", head_trains ? "V·d·t" : "0", weight_grad,
                        "AccumulateGrad's input buffer"}});
  }
  const std::vector<PlanLine>* best = &moments.front();
  for (const auto& lines : moments)
    if (total_bytes(lines) > total_bytes(*best)) best = &lines;
  plan.backward_peak = *best;
}

void PlanBuilder::optimizer_temporaries() {
  const Table opt{&plan.optimizer_peak};
  int64_t largest = largest_parameter_numel(m);
  if (lora) {  // the largest adapter matrix: A (r, in) or B (out, r)
    largest = 0;
    for (const BlockLinear& l : lora_targets(m, o.lora.targets)) largest = std::max({largest, o.lora.rank * l.in, o.lora.rank * l.out});
  }
  switch (o.optimizer) {
    case OptimizerKind::kAdamW:
      opt.add("AdamW sqrt(exp_avg_sq), denom", lora ? "2·max(adapter numel)·4" : "2·max(numel)·t", 2 * largest * t,
              "exp_avg_sq.sqrt() / bias correction: two temporaries of the largest trained parameter");
      break;
    case OptimizerKind::kAdamW8bit:
    case OptimizerKind::kPagedAdamW8bit:
      opt.add("8-bit step: fp32 moments of one pass", t == kFp32 ? "12·min(max numel, 2^20)" : "16·min(max numel, 2^20)",
              largest_step_temporaries(o.optimizer, trained_tensor_numels(m, o.lora), t),
              "both moments dequantised to fp32 and the codes, denominator or new codes beside them "
              "(src/engine/adamw8bit.cpp), per pass of at most 2^20 elements");
      break;
    case OptimizerKind::kSgd: break;  // updates in place: no temporaries
  }
}

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
    forward = std::max(forward, resident_bytes + grads_in_micro_step + saved_bytes - N * V * kFp32 + cast_cache + N * V * c);
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
    forward = std::max(forward, resident_bytes + grads_in_micro_step + saved_through_blocks + dequant_bytes);
    // The MLP's output projection: its dequantised weight (and the scratch that made it), then
    // next to the weight the (b·T, d) result its product makes.
    const int64_t down = std::max(dequantized_linear_bytes(o, d, m.d_ff, c), d * m.d_ff * c + N * d * c);
    if (!checkpointing) {
      // (The int8 linears' inputs kept as themselves are among those locals: counted once.)
      Dtypes dt = dtypes();
      if (L == 1) dt.frozen_prefix = frozen_prefix_of(m, o, checkpointing);
      const int64_t kept = int8_kept_locals(m, o, N, dt, /*block0=*/L == 1);
      // The base runs before its adapter (adapted_linear.cpp): what the output projection's
      // adapter saves of its input does not exist yet.
      const LastBlock last = last_block();
      const int64_t not_yet = last.input_group_bytes(mlp_out_input_line(m), /*with_input=*/false);
      forward = std::max(forward, resident_bytes + grads_in_micro_step + saved_through_blocks - not_yet + down + last.end_locals - kept);
    } else {
      // Checkpointed, the last block's MLP (run without grad) holds its locals and activations
      // when its output projection dequantises its weight.
      forward = std::max(forward, resident_bytes + grads_in_micro_step + saved_through_blocks + mlp_before_out_projection + down);
    }
  }
  return forward;
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
    // states' gradient (backward_peak). Accumulating into an untied head's .grad, AccumulateGrad
    // has added the forward's head gradient into it and let it go by then.
    const int64_t head_added = accumulating && !m.tied_embeddings && !lora ? V * d * kFp32 : 0;
    const int64_t before_norm = resident_bytes + grads_in_micro_step + saved_bytes + total_bytes(plan.backward_peak) - head_added;
    // (At pow's backward the hidden states' gradient, saved in fp32 and returned in the residual's
    // dtype, is gone.)
    backward_head = std::max({backward_head, before_norm + norm_backward,
                              before_norm - N * d * kFp32 - (w != kFp32 ? N * d * w : 0) + rms_pow});
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
  // The head linear's weight gradient being made (V·d in the trained dtype, before
  // AccumulateGrad adds it or autograd buffers it), next to the logits' gradient (counted as
  // the log_softmax output it replaces: that one is released by its backward) while the head's
  // other saved tensors are still there. Under autocast its matmul's result in c and the
  // logits' gradient cast to c exist too, but measured they do not add to the peak: left out,
  // pending a closer look (the fp32 copies they replace are not modelled here either). (None
  // with LoRA, whose head is frozen, nor with the chunked loss, whose head gradients are made
  // in the forward.)
  int64_t backward_head_weight = 0;
  if (!lora && full_head()) {
    const int64_t head = V * d;
    // The head's matmul backward makes its input's gradient (b·T·d·c) with the weight's.
    backward_head_weight = resident_bytes + grads_in_micro_step + saved_bytes + head * t + N * d * c;
    // Under autocast with the weights in another dtype the weight's gradient is made in c and
    // cast to the weights' dtype by the cast's own backward node, after the head's matmul node
    // has let the logits' gradient go: measured (SGD with optimizer-in-backward, qwen2 L1 V1272,
    // plan_properties seed 1 case 130) the b·T·V·4 is not there then.
    if (weights_cast()) backward_head_weight -= N * V * kFp32;
    if (split.optimizer_in_backward && !m.tied_embeddings) {
      // The untied head steps as soon as its gradient is accumulated: the head's node has
      // finished, so the logits' gradient is gone too (log_softmax's output with it), as are
      // what the head linear saved (its input, and its weight's cast under autocast), and
      // AdamW's two temporaries of the head's size join its gradient.
      const int64_t head_saved = N * d * c + (weights_cast() ? head * c : 0);
      backward_head_weight = std::max(backward_head_weight, resident_bytes + saved_bytes - N * V * kFp32 -
                                                                head_saved + head * t + step_temporaries(head));
    }
  }
  return std::max(backward_head, backward_head_weight);
}

// The backward's last moments: the token embedding's gradients, and without accumulation the first
// block's backward (`backward_block` is the last block's moment).
int64_t PlanBuilder::backward_end_peak(const PhaseTotals& s, int64_t backward_block) const {
  const auto [resident_bytes, grad_bytes, saved_bytes, block_saved_bytes, grads_in_micro_step, saved_before_blocks] = s;
  // The end of backward, at the token embedding. Tied: its two gradients (the head's, waiting in
  // autograd's input buffer, and the lookup's dense one) and their sum are alive at once;
  // untied: the lookup's dense gradient, added into .grad when one exists. Every other gradient
  // is alive by then (none with optimizer-in-backward, which frees them as it goes and steps
  // the embedding last, with AdamW's temporaries).
  const int64_t embedding_grad = lora ? 0 : V * d * t;  // LoRA: the embedding is frozen
  int64_t backward_tail = 0;
  if (lora) {
    // A frozen base ends backward with the adapters' gradients and nothing at the embedding.
    backward_tail = resident_bytes + (split.optimizer_in_backward ? total_bytes(plan.optimizer_peak) : grad_bytes);
  } else if (split.optimizer_in_backward) {
    // Tied, the head's gradient (waiting in autograd's input buffer), the lookup's and their
    // sum exist at once before the sum steps; then the step's temporaries join the sum alone.
    backward_tail = resident_bytes + std::max((m.tied_embeddings ? 3 : 1) * embedding_grad,
                                              embedding_grad + total_bytes(plan.optimizer_peak));
  } else {
    const int64_t in_flight = (m.tied_embeddings ? 3 : 1) * embedding_grad;
    const int64_t others = accumulating ? grad_bytes : grad_bytes - embedding_grad;
    backward_tail = resident_bytes + others + in_flight;
    if (o.world_size > 1) {
      // Data parallel (src/engine/gradient_reducer.cpp): each 25 MiB bucket, filled in reverse
      // parameter order, all-reduces a flat copy of its gradients from the moment its last one
      // is done. At the embedding's backward every bucket but the embedding's own has started;
      // once it has too, all the copies are alive until the all-reduce is waited for.
      const int64_t bucket_limit = int64_t{25} << 20;
      const int64_t last_bucket = std::min(grad_bytes, std::max(embedding_grad, bucket_limit));
      backward_tail = std::max(backward_tail + grad_bytes - last_bucket, resident_bytes + 2 * grad_bytes);
    }
  }
  // Without accumulation the first block's backward can peak higher than the last one's: by
  // then the gradients of the L−1 blocks above it exist (AccumulateGrad made them as their
  // backward ran), while of what the L blocks saved only its own is left (checkpointed: its
  // input). The blocks save alike, so every moment of the last block recurs in block 0 shifted
  // by (L−1)·(one block's gradients − what one block saved); the blocks in between lie on the
  // line between the two ends. With LoRA the gradients are the block's adapters' (its frozen
  // block 0 saves less than the others unless checkpointed, and without checkpointing a block's
  // activations outweigh its adapters: left out). (Not with accumulation, whose gradients are all
  // alive from the start, nor with the optimizer inside backward, which frees each gradient once
  // its parameter has stepped.) Measured: plan_properties seed 1 cases 94 (a full fine-tune) and
  // 665 (checkpointed LoRA).
  int64_t backward_first_block = 0;
  if (!accumulating && !split.optimizer_in_backward && L > 1 && (!lora || checkpointing)) {
    ModelConfig one = m, two = m;
    one.n_layers = 1;
    two.n_layers = 2;
    const int64_t block_gradients = lora ? trained * t / L : (parameter_count(two) - parameter_count(one)) * t;
    const int64_t one_block_saved = block_saved_bytes / L;
    backward_first_block = backward_block + (L - 1) * (block_gradients - one_block_saved);
  }
  return std::max(backward_tail, backward_first_block);
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
  const int64_t tied_head_gradient = accumulating && m.tied_embeddings && !lora ? V * d * t : 0;
  const int64_t backward_block = resident_bytes + grads_in_micro_step + block_saved_bytes +
                                 total_bytes(plan.block_backward_peak) + tied_head_gradient;
  plan.phase_peak_bytes[static_cast<int>(PlanPhase::kBackward)] =
      std::max({backward_head_peak(s), backward_block, backward_end_peak(s, backward_block)});
  plan.phase_peak_bytes[static_cast<int>(PlanPhase::kOptimizer)] =
      split.optimizer_in_backward ? resident_bytes : resident_bytes + grad_bytes + total_bytes(plan.optimizer_peak);
  if (split.cuda_graphs) {
    // The graphs' private pool keeps the micro-step's high-water mark of activations and
    // temporaries reserved for good, so it is still there during the optimizer step.
    const int64_t pool = std::max(plan.phase_peak_bytes[static_cast<int>(PlanPhase::kForward)],
                                  plan.phase_peak_bytes[static_cast<int>(PlanPhase::kBackward)]) -
                         resident_bytes - grad_bytes;
    plan.phase_peak_bytes[static_cast<int>(PlanPhase::kOptimizer)] += std::max<int64_t>(0, pool);
  }
  plan.peak_bytes = 0;
  for (int p = 0; p < kPlanPhaseCount; ++p) {
    if (plan.phase_peak_bytes[p] > plan.peak_bytes) {
      plan.peak_bytes = plan.phase_peak_bytes[p];
      plan.peak_phase = static_cast<PlanPhase>(p);
    }
  }
}

}  // namespace plan_detail

MemoryPlan plan_memory(const ModelConfig& m, const PlanOptions& o, const SplitConfig& split) {
  check_split(m, o, split);
  PlanBuilder builder(m, o, split);
  builder.resident_tensors();
  builder.gradients();
  builder.saved_tensors();
  builder.loss_head();
  builder.block_forward();
  builder.last_block_forward();
  builder.optimizer_temporaries();
  builder.block_backward();
  builder.dequant_transients();
  builder.phase_peaks();
  return std::move(builder.plan);
}

int64_t largest_micro_batch(const ModelConfig& cfg, const PlanOptions& options, Precision precision,
                            Checkpointing checkpointing, int64_t memory_bytes, bool chunked_loss) {
  auto fits = [&](int64_t b) {
    SplitConfig split;
    split.micro_batch = b;
    split.accum_steps = 2;
    split.precision = precision;
    split.activation_checkpointing = checkpointing;
    split.chunked_loss = chunked_loss;
    return plan_memory(cfg, options, split).peak_bytes <= memory_bytes;
  };
  if (!fits(1)) return 0;
  int64_t lo = 1, hi = 2;
  while (fits(hi) && hi < (int64_t{1} << 40)) {
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {  // fits(lo) && !fits(hi)
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

std::vector<MemoryPlan> plan_splits(const ModelConfig& cfg, const PlanOptions& options,
                                    const WorkloadOptions& workload) {
  std::vector<MemoryPlan> plans;
  for (const SplitConfig& split : split_grid(workload, options.world_size)) {
    plans.push_back(plan_memory(cfg, options, split));
  }
  return plans;
}

Calibration fit_calibration(int64_t micro_batch_a, int64_t measured_a, int64_t predicted_a, int64_t micro_batch_b,
                            int64_t measured_b, int64_t predicted_b) {
  if (micro_batch_a == micro_batch_b) throw UserError("the two calibration probes need different micro-batches");
  Calibration c;
  c.micro_batch_a = micro_batch_a;
  c.micro_batch_b = micro_batch_b;
  c.measured_a = measured_a;
  c.measured_b = measured_b;
  c.predicted_a = predicted_a;
  c.predicted_b = predicted_b;
  const double error_a = static_cast<double>(measured_a - predicted_a);
  const double error_b = static_cast<double>(measured_b - predicted_b);
  c.slope_bytes = (error_b - error_a) / static_cast<double>(micro_batch_b - micro_batch_a);
  c.intercept_bytes = error_a - c.slope_bytes * static_cast<double>(micro_batch_a);
  return c;
}

int64_t Calibration::predict(const MemoryPlan& plan) const {
  const double error = intercept_bytes + slope_bytes * static_cast<double>(plan.split.micro_batch);
  return plan.peak_bytes + static_cast<int64_t>(error >= 0 ? error + 0.5 : error - 0.5);
}

}  // namespace accumbench
