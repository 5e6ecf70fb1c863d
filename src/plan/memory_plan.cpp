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
#include <map>
#include <numeric>
#include <ostream>
#include <sstream>

#include "accumbench/chunked_loss.hpp"
#include "accumbench/error.hpp"
#include "accumbench/lengths.hpp"
#include "accumbench/optimizer_state.hpp"
#include "accumbench/units.hpp"
#include "plan/block_tensors.hpp"
#include "plan/plan_builder.hpp"
#include "plan/quantized_base.hpp"

namespace accumbench {

std::string to_string(AttentionKind kind) { return kind == AttentionKind::kFlash ? "flash" : "explicit"; }

AttentionKind attention_kind_from_string(const std::string& text) {
  if (text == "explicit") return AttentionKind::kExplicit;
  if (text == "flash") return AttentionKind::kFlash;
  throw UserError("unknown --attention " + text::quoted(text, 60) + "; use explicit (LibTorch 1.x, CPU) or flash (LibTorch 2.x, CUDA)");
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
  throw UserError("unknown --framework " + text::quoted(text, 60) + "; use plain (accumbench's loop) or hf-trl (HF Trainer + TRL's SFTTrainer)");
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
  e.w = options.lora.quantized() && options.lora.kbit_upcast ? compute_bytes(Precision::kFp32)
                                                              : compute_bytes(options.weights_dtype);
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
  if (s.precision == Precision::kFp16 && o.cpu) throw UserError("fp16 needs a CUDA device; use bf16 or fp32 on the CPU");
  // As the trainer refuses it (require_weights_dtype_runs_on): a plan for the CPU of a step it cannot run.
  if (const std::string problem = weights_dtype_device_problem(o.weights_dtype, !o.cpu, /*planning=*/true);
      !problem.empty()) {
    throw UserError(problem);
  }
  if (s.optimizer_in_backward && s.accum_steps != 1) {
    throw UserError("optimizer-in-backward needs accumulation steps = 1; plan micro-batch = batch");
  }
  if (s.optimizer_in_backward) require_no_clipping_in_backward(o.max_grad_norm);
  if (s.micro_batch <= 0 || o.seq_len <= 0) throw UserError("micro-batch and sequence length must be positive");
  if (o.framework == PlanFramework::kHfTrl && s.chunked_loss) {
    throw UserError("--framework hf-trl plans TRL's own loss (--trl-loss), not accumbench's --chunked-loss; drop --chunked-loss "
                    "(TRL's chunked loss is --trl-loss chunked_nll) or plan with --framework plain");
  }
  check_sequence_length(m, o.seq_len);
  if (const std::string problem = adapter_dtype_problem(o.lora, s.precision, o.weights_dtype); !problem.empty())
    throw UserError(problem);
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
  const std::string n_t = trained_symbol();
  if (lora) {
    resident.add("LoRA adapters A, B", n_t, trained * ad,
                 (ad == kFp32 ? std::string("fp32, ") : to_string(o.lora.adapter_dtype) + " (--adapter-dtype), ") +
                     std::to_string(trained) + " trainable parameters; the base is frozen");
  }
  optimizer_state_lines(o.optimizer, trained_tensor_numels(m, o.lora), t, n_t, o.cpu, resident, &plan.evictable_bytes);
  if (o.cpu) {
    const int64_t B = o.batch;
    const int64_t W = o.world_size;
    if (W > 1) {
      resident.add("token batches (inputs, targets)", "2·n·W·B·T·8", 2 * o.token_batches * W * B * o.seq_len * kInt64,
                   "the runner's n = " + std::to_string(o.token_batches) +
                       " distinct host batches (--distinct-steps, of every packing), every rank's sequences in each; on "
                       "the CPU they are the device memory");
    } else {
      resident.add("token batches (inputs, targets)", "2·n·B·T·8", 2 * o.token_batches * B * o.seq_len * kInt64,
                   "the runner's n = " + std::to_string(o.token_batches) +
                       " distinct host batches (--distinct-steps, of every packing); on the CPU they are the device memory");
    }
    if (o.dealt_batches > 0) {
      resident.add("dealt shares (inputs, targets)", "2·" + std::to_string(o.dealt_batches) + "·B·T·8",
                   2 * o.dealt_batches * B * o.seq_len * kInt64,
                   "this rank's share of each batch, copied in its micro-batches' order by every split of the sweep "
                   "with several micro-batches per rank, kept for the rounds");
    }
  }
  if (m.arch == Architecture::kLlama) {
    resident.add("rotary cos, sin", "2·T·hd·" + std::string(w == c ? "c" : "w"), 2 * T * m.head_dim * w,
                 "RotaryCache keeps them in the hidden state's dtype");
  }
  if (split.precision == Precision::kFp16) {
    resident.add("loss scale", "0", 0, "a host double in the Trainer (GradScaler state), no device bytes");
  }
}

void PlanBuilder::gradients() {
  const Table grads{&plan.gradients};
  grads.add(lora ? "adapter gradients" : "gradients", trained_symbol(), trained * t,
            split.optimizer_in_backward ? "freed one by one as each parameter steps in backward"
                                        : ".grad of what trains, alive from the first backward to zero_grad");
}

void PlanBuilder::saved_tensors() {
  const Table saved{&plan.saved};
  if (!o.cpu)
    saved.add("micro-batch tokens on the device", "2·b·T·8", 2 * N * kInt64,
              "inputs for the embedding, targets for the loss");
  // On the CPU a micro-batch padded to its own longest (T below --seq-len) is a contiguous copy of
  // its columns of the host batch (Trainer::micro_steps), alive through its forward and
  // backward; padded to --seq-len it is a view. Measured: 16 bytes per position above the plan at
  // 8×1 and 2×4 of --lengths variable --padding longest before this line (helper-79, 2026-12-06).
  if (o.cpu && T < o.seq_len)
    saved.add("micro-batch tokens (a copy)", "2·b·T·8", 2 * N * kInt64,
              "inputs and targets cut to the micro-batch's padded length: a copy of the host batch's columns");
  if (m.arch == Architecture::kGpt2 && !o.packed_documents) saved.add("positions", "T·8", T * kInt64, "wpe's embedding saves its indices");
  packed_rows_saved(m, o, b, dtypes(), checkpointing, saved);  // --packing bfd: the layout every block shares
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
  if (adapter_casts() && lora && !checkpointing) {
    saved.add("adapter weights cast to c", "N_lora·c", trained * c,
              "autocast's cast cache of every A and B, saved by their linears (block 0's first A's: until the forward ends)");
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

int64_t PlanBuilder::most_counted_rows() const {
  const std::vector<int64_t>& most = o.most_counted_targets;
  if (most.empty()) return std::max<int64_t>(1, b * (T - 1));
  // A source of m samples, m < b, repeats within a micro-batch: each of them b / m times, and
  // the b % m that count the most once more.
  const auto m = static_cast<int64_t>(most.size());
  const int64_t repeats = (b / m) * most.back() + (b % m > 0 ? most[static_cast<size_t>(b % m - 1)] : 0);
  return std::max<int64_t>(1, repeats);
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
    // Gathered, a chunk holds at most the micro-batch's counted rows.
    // CUDA graphs walk every row (one fixed shape).
    const bool gathered = o.counted_rows_gathered && !split.cuda_graphs;
    const int64_t r = gathered ? std::min(loss_chunk_tokens(N, o.loss_chunk_tokens), most_counted_rows())
                               : loss_chunk_tokens(N, o.loss_chunk_tokens);
    const std::string chunk = "r·V·4 (r=" + std::to_string(r) + ")";
    fwd.add("final hidden states", "b·T·d·" + rs(), N * d * w, "the head's input (the final norm's output), alive during the chunk loop");
    if (weights_cast()) {
      fwd.add("hidden states and head weight cast to c", "(b·T+V)·d·c", (N + V) * d * c,
              "the chunk matmuls' operands");
    }
    fwd.add("one chunk's logits, fp32", chunk, r * V * kFp32, "become softmax − one-hot in place");
    if (gathered) {
      // Samples leave rows whose target does not count: the chunks walk the others, gathered
      // (index_select copies) in the order of a stable sort of the mask; the hidden states'
      // gradient of a chunk is cast to fp32 before index_copy_ writes it into its rows.
      fwd.add("counted rows' order", "b·T·8", N * kInt64, "a stable sort of the target mask, the counted rows first");
      const int64_t cast = c == kFp32 ? 0 : r * d * kFp32;
      fwd.add("one chunk's gathered rows", c == kFp32 ? "r·(d·c+8)" : "r·(d·c+8) + r·d·4", r * (d * c + kInt64) + cast,
              c == kFp32 ? "its hidden states and targets, copied by index_select"
                         : "its hidden states and targets, copied by index_select; its gradient cast to fp32");
    }
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
  const std::vector<int64_t> trained = trained_tensor_numels(m, o.lora);
  const int64_t largest = *std::max_element(trained.begin(), trained.end());
  const std::string n_max = lora ? "max(adapter numel)" : "max(numel)";
  const auto one_tensor_at_a_time = [&] {
    opt.add("AdamW sqrt(exp_avg_sq), denom", "2·" + n_max + "·t", 2 * largest * t,
            "exp_avg_sq.sqrt() / bias correction: two temporaries of the largest trained parameter");
  };
  // Inside backward each parameter steps alone, one tensor at a time whichever kernel step() uses
  // (src/engine/adamw.cpp): these are then the temporaries of its gradient hook.
  switch (o.optimizer) {
    case OptimizerKind::kAdamW:
      if (split.optimizer_in_backward || o.cpu || o.libtorch_major < 2) {
        one_tensor_at_a_time();
      } else {
        opt.add("AdamW fused kernel", "0", 0, "at::_fused_adamw_ updates every tensor in place (CUDA, PyTorch 2.x)");
      }
      break;
    case OptimizerKind::kAdamWForeach:
      if (split.optimizer_in_backward) {
        one_tensor_at_a_time();
      } else {
        const int64_t total = std::accumulate(trained.begin(), trained.end(), int64_t{0});
        const int copies = o.libtorch_major < 2 ? 2 : 1;
        opt.add(copies == 2 ? "AdamW foreach sqrt(exp_avg_sq) list, denom list" : "AdamW foreach sqrt(exp_avg_sq) list",
                std::string(copies == 2 ? "2·" : "") + trained_symbol(), copies * total * t,
                copies == 2 ? "_foreach_sqrt of every second moment, then _foreach_add(…, eps) out of place (PyTorch 1.x)"
                            : "_foreach_sqrt of every second moment at once, divided and shifted in place (PyTorch 2.x)");
      }
      break;
    case OptimizerKind::kAdamW8bit:
    case OptimizerKind::kPagedAdamW8bit:
    case OptimizerKind::kPagedAdamW32bit: {
      // bitsandbytes' emulation (src/engine/adamw8bit.cpp) steps in passes of at most 2^20 elements.
      const bool codes = eight_bit_optimizer(o.optimizer);
      const int64_t per_element = (codes ? 12 : 4) + (t == kFp32 ? 0 : 4);
      opt.add(codes ? "8-bit step: fp32 moments of one pass" : "32-bit step: denominator of one pass",
              std::to_string(per_element) + "·min(max numel, 2^20)", largest_step_temporaries(o.optimizer, trained, t),
              codes ? "both moments dequantised to fp32 and the codes, denominator or new codes beside them, per pass"
                    : "sqrt(state2) + eps beside the fp32 moments (with 2-byte weights also the gradient's or the "
                      "weight's fp32 copy), per pass");
      break;
    }
    case OptimizerKind::kSgd: break;  // updates in place: no temporaries
  }
  // --max-grad-norm: clip_grad_norm_ returns the total norm, which the step keeps (the Trainer
  // for its grad_norm log, the engine in StepOutcome) while the optimizer steps.
  if (o.clips_gradients() && !split.optimizer_in_backward) {
    opt.add("gradient norm (clip_grad_norm_'s result)", o.cpu ? "t" : "512", scalar_bytes(t),
            "the total norm, kept through the step for the report (the Trainer logs it as grad_norm)");
  }
}

void PlanBuilder::clipping_temporaries() {
  if (!o.clips_gradients()) return;
  const Table clip{&plan.clip_peak};
  const auto n = static_cast<int64_t>(trained_tensor_numels(m, o.lora).size());
  // Scalars in the gradients' dtype (scalar_bytes).
  const int64_t scalar = scalar_bytes(t);
  const std::string each = o.cpu ? "t" : "512";
  clip.add("clip_grad_norm_: a norm per gradient", "n·" + each, n * scalar,
           "_foreach_norm of each trained tensor's gradient (n = " + std::to_string(n) +
               (lora ? ": A and B of every adapted linear" : "") + "), kept until the total is known");
  clip.add("the norms stacked", o.cpu ? "n·t" : "⌈n·t/512⌉·512", o.cpu ? n * t : round_up(n * t, kCudaSmallestBlock),
           "torch.stack(norms), the input of the total norm");
  clip.add("the total norm", each, scalar,
           "the norm of the stacked norms; the coefficient (one scalar, made in place) comes after the stack is "
           "freed, and the gradients are scaled in place");
}

}  // namespace plan_detail

namespace {

MemoryPlan build_plan(const ModelConfig& m, const PlanOptions& o, const SplitConfig& split) {
  PlanBuilder builder(m, o, split);
  builder.resident_tensors();
  builder.gradients();
  builder.saved_tensors();
  builder.loss_head();
  builder.block_forward();
  builder.last_block_forward();
  builder.optimizer_temporaries();
  builder.clipping_temporaries();
  builder.block_backward();
  builder.dequant_transients();
  builder.phase_peaks();
  return std::move(builder.plan);
}

// Over a grouped epoch (PlannedRows::grouped_lengths), the longest padded micro-batch of b that
// comes first in its step, and the longest of those after it. The steps are full: where the
// samples do not fill the last one, it goes on from the start of the order, as the sweep's steps
// do (one_per_row wraps; helper-83 saw 2×6 of a 16-sample file at --batch 12 measure 16 % above a
// plan that ended the epoch with a short step, and run out of memory under a limit it said fit).
// A real run's short last step is the first part of that step.
struct GroupedMicroBatches {
  int64_t first = 0, later = 0;
};

GroupedMicroBatches grouped_micro_batches(const PlanOptions& o, int64_t b) {
  GroupedMicroBatches g;
  const std::vector<int64_t>& lengths = o.grouped_lengths;
  const auto n = static_cast<int64_t>(lengths.size());
  const int64_t step = o.grouped_step;
  for (int64_t start = 0; start < n; start += step) {
    for (int64_t at = 0; at < step; at += b) {
      int64_t longest = 0;
      for (int64_t i = at; i < std::min(step, at + b); ++i) {
        longest = std::max(longest, lengths[static_cast<size_t>((start + i) % n)]);
      }
      const int64_t padded = padded_length(o.padding.padding, o.padding.multiple, longest, o.seq_len);
      int64_t& slot = at == 0 ? g.first : g.later;
      slot = std::max(slot, padded);
    }
  }
  return g;
}

}  // namespace

MemoryPlan plan_memory(const ModelConfig& m, const PlanOptions& o, const SplitConfig& split) {
  check_split(m, o, split);
  if (o.grouped_lengths.empty() || o.grouped_step <= 0 || o.world_size > 1 || split.accum_steps <= 1 ||
      split.cuda_graphs || !o.padding.per_micro_batch()) {
    return build_plan(m, o, split);
  }
  // A grouped step's micro-batches, each where it falls: the later ones with every gradient alive,
  // at their own longest; the first, the step's longest samples, as a split without accumulation
  // runs its one micro-step (the gradients made during its backward). Measured before: 1×8 of a
  // skewed file planned up to 17 % above its peak with the longest sample and the gradients at once.
  const GroupedMicroBatches g = grouped_micro_batches(o, split.micro_batch);
  if (g.later <= 0 || g.later >= o.activation_length()) return build_plan(m, o, split);
  PlanOptions later = o;
  later.activation_seq_len = g.later;
  MemoryPlan plan = build_plan(m, later, split);
  PlanOptions first_options = o;
  first_options.activation_seq_len = g.first;
  SplitConfig first_split = split;
  first_split.accum_steps = 1;
  const MemoryPlan first = build_plan(m, first_options, first_split);
  plan.first_micro_batch_length = g.first;
  plan.first_micro_batch_forward_bytes = first.phase_peak_bytes[static_cast<int>(PlanPhase::kForward)];
  plan.first_micro_batch_backward_bytes = first.phase_peak_bytes[static_cast<int>(PlanPhase::kBackward)];
  for (const PlanPhase phase : {PlanPhase::kForward, PlanPhase::kBackward}) {
    int64_t& bytes = plan.phase_peak_bytes[static_cast<int>(phase)];
    bytes = std::max(bytes, first.phase_peak_bytes[static_cast<int>(phase)]);
  }
  plan_detail::settle_peak(plan);
  return plan;
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

void count_dealt_shares(PlanOptions& options, const WorkloadOptions& workload) {
  options.dealt_batches = 0;
  if (!options.cpu || options.world_size <= 1) return;
  // Each such split copies every step of its own packing (with --distinct-steps epoch, each packing
  // its own count: counted once per packing, an epoch reads the file).
  std::map<Packing, int> steps;
  for (const Packing packing : grid_packings(workload)) {
    steps[packing] = distinct_steps_of(with_packing(workload, packing).data, workload.seq_len, workload.batch);
  }
  for (const SplitConfig& split : split_grid(workload, options.world_size)) {
    if (split.accum_steps > 1) options.dealt_batches += steps[split.packing];
  }
}

PlanOptions plan_options_for(PlanOptions options, const GridJob& job) {
  options.optimizer = job.optimizer;
  options.weights_dtype = job.weights_dtype;
  options.lora.adapter_dtype = job.adapter_dtype;
  options.max_grad_norm = job.max_grad_norm;
  options.padding = job.padding;
  options.packing = job.packing;
  for (const PlanOptions::PackedRows& packed : options.rows_by_packing) {
    if (packed.packing == job.packing) static_cast<PlannedRows&>(options) = packed.rows;
  }
  for (const PlanOptions::PaddedWorst& worst : options.worst_by_padding) {
    if (worst.padding != job.padding) continue;
    options.activation_seq_len = worst.activation_seq_len;
    options.worst_micro_batch = worst.worst_micro_batch;
  }
  if (!job.group_by_length) options.grouped_lengths.clear();  // a random order: any micro-batch may be the longest
  return options;
}

PlanOptions plan_options_for(const PlanOptions& options, const SplitConfig& split) {
  return plan_options_for(options, job_of(split));
}

std::vector<MemoryPlan> plan_splits(const ModelConfig& cfg, const PlanOptions& options,
                                    const WorkloadOptions& workload) {
  std::vector<MemoryPlan> plans;
  for (const SplitConfig& split : split_grid(workload, options.world_size)) {
    plans.push_back(plan_memory(cfg, plan_options_for(options, split), split));
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
