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
#include "plan/quantized_base.hpp"

namespace accumbench {

std::string to_string(AttentionKind kind) { return kind == AttentionKind::kFlash ? "flash" : "explicit"; }

AttentionKind attention_kind_from_string(const std::string& text) {
  if (text == "explicit") return AttentionKind::kExplicit;
  if (text == "flash") return AttentionKind::kFlash;
  throw UserError("unknown --attention \"" + text + "\"; use explicit (LibTorch 1.x, CPU) or flash (LibTorch 2.x, CUDA)");
}

std::string to_string(PlanFramework framework) { return framework == PlanFramework::kHfTrl ? "hf-trl" : "plain"; }

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
    throw UserError("--framework hf-trl plans TRL's loss_type \"nll\" on the full logits, which the chunked loss never makes; "
                    "drop --chunked-loss (TRL's chunked_nll is not modelled) or plan with --framework plain");
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
  bool autocast, checkpointing, accumulating, chunked, lora;
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
    // QLoRA: prepare_model_for_kbit_training leaves every parameter that is not quantised in
    // fp32, so the residual stream and the activations without autocast are fp32.
    w = quant ? kFp32 : compute_bytes(o.weights_dtype);
    // Activations come in autocast's dtype, or without autocast in the weights' (bf16 weights
    // compute in bf16).
    c = autocast ? compute_bytes(split.precision) : w;
    checkpointing = split.activation_checkpointing == Checkpointing::kBlocks;
    // CUDA graphs keep every gradient allocated from the start (the captured backward adds into
    // them), as accumulation does from the second micro-step on.
    accumulating = split.accum_steps > 1 || split.cuda_graphs;
    chunked = split.chunked_loss;
    lora = o.lora.enabled();
    trained = lora ? lora_parameter_count(m, o.lora) : P;
    t = lora ? kFp32 : w;  // adapters are fp32 (PEFT's default); a full fine-tune trains in the weights' dtype
  }

  // Weights cast to c by autocast exist only when they are stored in another dtype.
  bool weights_cast() const { return autocast && w != c; }
  // Autocast's casts of the block linears' weights: none when they are quantised (each is
  // dequantised in c directly, dequant_transient).
  bool block_weights_cast() const { return weights_cast() && !quant; }
  Dtypes dtypes() const { return Dtypes{c, w, autocast}; }
  // The residual stream's formula symbol: it is in the weights' dtype.
  std::string rs() const { return w == kFp32 ? "4" : "w"; }

  // ---- resident for the whole step ----
  void resident_tensors() {
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

  // ---- gradients ----
  void gradients() {
    const Table grads{&plan.gradients};
    grads.add(lora ? "adapter gradients" : "gradients", lora ? "N_lora·4" : (w == kFp32 ? "P·4" : "P·w"), trained * t,
              split.optimizer_in_backward ? "freed one by one as each parameter steps in backward"
                                          : ".grad of what trains, alive from the first backward to zero_grad");
  }

  // ---- saved for backward by one micro-step ----
  void saved_tensors() {
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
    if (weights_cast() && !chunked) {
      saved.add("head weight cast to c", "V·d·c", V * d * c, "the head linear saves its cast weight");
    }
    // LayerNorm keeps its input as it is; RMSNorm keeps its fp32 copy (the input itself in fp32).
    const int64_t final_norm_input = m.arch == Architecture::kGpt2 ? w : kFp32;
    saved.add("final norm input", final_norm_input == kFp32 ? "b·T·d·4" : "b·T·d·w", N * d * final_norm_input,
              "the last block's output, saved by the final norm");
    if (m.arch == Architecture::kGpt2) {
      saved.add("ln_f mean, rstd", "2·b·T·4", 2 * N * kFp32, "saved by layer_norm's backward");
      if (!chunked && !lora) {  // a frozen head (LoRA) needs no input for its input's gradient
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
        saved.add("final RMSNorm rsqrt, normed", "b·T·(d+1)·4", N * (d + 1) * kFp32,
                  "rsqrt and weight · normed save them");
      }
      if (!chunked && !lora) {  // a frozen head (LoRA) needs no input for its input's gradient
        saved.add(autocast ? "final RMSNorm output, cast to c" : "final RMSNorm output", "b·T·d·c", N * d * c,
                  "the head linear saves its input");
      }
    }
  }

  // The loss head's tensors: saved, and the transients at the forward's and backward's peaks.
  void loss_head() {
    const Table saved{&plan.saved};
    const Table fwd{&plan.forward_peak};
    const Table bwd{&plan.backward_peak};
    if (chunked) {
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

  // --framework hf-trl (bench/reference/hf_trl.py, which cites each behaviour): compute_loss keeps
  // the model's outputs until it returns, before backward; under autocast accelerate's
  // convert_to_fp32 has replaced the logits by an fp32 copy (the c-byte ones are gone), without it
  // they are fp32 already. SFTTrainer's metrics then run on them under no_grad:
  // entropy_from_logits reshapes logits[:, :-1] to (b·(T−1), V) (a copy when b > 1: the slice is
  // not contiguous) and per 128 rows holds log_softmax, its exp and their product.
  void trl_metrics() {
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

  void optimizer_temporaries() {
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
  };
  LastBlock last_block() const {
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
    return last;
  }

  // One block's saved tensors (what a recompute saves again), and those that the block's own
  // backward has released by the time it reaches the attention softmax's backward.
  std::pair<int64_t, int64_t> one_block_saved_and_released() const {
    const LastBlock last = last_block();
    int64_t one_block = 0;
    int64_t released_before_softmax = 0;
    for (size_t i = 0; i < last.lines.size(); ++i) {
      one_block += last.lines[i].bytes;
      if (i >= last.released_from) released_before_softmax += last.lines[i].bytes;
    }
    return {one_block, released_before_softmax};
  }

  // The last block's backward: the head is done (its saved tensors are freed, its gradient
  // exists), the block's own saved tensors are still there (recomputed, with checkpointing).
  void block_backward() {
    const Table blk{&plan.block_backward_peak};
    const auto [one_block, released_before_softmax] = one_block_saved_and_released();
    // LoRA: the head and norms are frozen. With the optimizer inside backward an untied head and
    // the final norm have stepped and freed theirs by now (a tied head's waits for the embedding).
    if (!accumulating && !lora && !(split.optimizer_in_backward && !m.tied_embeddings)) {
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
    }
    blk.add("gradient of the residual stream", "b·T·d·" + rs(), N * d * w, "flows into the block from above");
    candidates_begin = plan.block_backward_peak.size();
    peak_candidates(blk, released_before_softmax);
  }

  // The candidates for the block backward's peak: the MLP output projection's own backward (see
  // below); the MLP activation's backward, by which time the output projection has released its
  // input (and cast weight) and made its weight gradient; the attention softmax's (explicit
  // attention), by which time the MLP, the attention's output projection and
  // bmm(probabilities, v) have released what they saved, and made their weight gradients; and
  // with checkpointing the recompute's last step (see below).
  void peak_candidates(const Table& blk, int64_t released_before_softmax) {
    const int64_t H = m.n_heads, f = m.d_ff;
    const bool gpt2 = m.arch == Architecture::kGpt2;
    const int64_t a = m.n_heads * m.head_dim;
    // Accumulation adds into existing gradients; a frozen base makes none (the adapters' are small).
    const int64_t new_gradient = accumulating || lora ? 0 : t;
    // The output projection's saved input, released by its backward: none when it is a frozen
    // linear without an adapter (LoRA), which needs no input for its input's gradient.
    const bool out_saves_input = !lora || adapted_count(m, o, {gpt2 ? "mlp_c_proj" : "down"}) > 0;
    const int64_t mlp_released = (out_saves_input ? N * f * c : 0) + (block_weights_cast() ? d * f * c : 0);
    const int64_t mlp_grads = (f * d + (gpt2 ? d : 0)) * new_gradient;
    // GPT-2: gelu's backward holds its incoming gradient and the one it makes. Llama: the
    // SwiGLU product silu(g)·u comes first, and its backward holds its incoming gradient (down's
    // input gradient) and makes two (of silu(g) and of u): three b·T·f tensors at once (measured
    // with the counting allocator's live blocks at the peak, tests/plan_properties.cpp).
    const int64_t mlp_pair = (gpt2 ? 2 : 3) * N * f * c;
    // The softmax's backward runs unless the last block is a frozen block 0's attention (LoRA, one block).
    const bool attention_backward = !(L == 1 && frozen_prefix_of(m, o, checkpointing) >= FrozenPrefix::kAttention);
    const int64_t softmax_pair = o.attention == AttentionKind::kExplicit && attention_backward ? 2 * b * H * T * T * c : 0;
    const int64_t softmax_released =
        released_before_softmax + (block_weights_cast() ? (a * d + (gpt2 ? 2 : 3) * d * f) * c : 0);
    const int64_t softmax_grads = (gpt2 ? 2 * d * f + f + d + 2 * d + a * d + d : 3 * d * f + d + a * d) * new_gradient;
    // Checkpointed, the block's incoming gradient stays alive through the inner backward
    // (CheckpointFunction::backward holds grad_outputs), so by the softmax's backward the
    // residual's gradient after the MLP (its sum with the post-attention norm's input gradient,
    // a new tensor: the incoming one is shared by the sum's two operands) is a second one.
    const int64_t residual_sum = checkpointing ? N * d * w : 0;
    if (checkpointing) {
      // The recompute's output: CheckpointFunction::backward (src/models/model.cpp) holds the
      // recomputed block's output y in a local until its inner backward returns, in the
      // residual stream's dtype; the inner backward then runs as a plain block's backward below.
      blk.add("recomputed block output y", "b·T·d·" + rs(), N * d * w,
              "held by CheckpointFunction::backward through the inner backward");
    }
    // A third moment: the output projection's own backward, before it has released anything. It
    // makes its input's gradient and its weight's, which with accumulation is a new tensor until
    // AccumulateGrad has added it into .grad (without accumulation it is counted above as kept).
    // Higher than the activation's backward when the projection's weight outweighs b·T rows.
    const int64_t projection_gradient = lora ? 0 : (f * d + (gpt2 ? d : 0)) * t;
    // With the optimizer inside backward that weight steps there and then, with AdamW's two
    // temporaries of its size (src/engine/adamw.cpp), while the block's activations are alive.
    const int64_t projection_step = split.optimizer_in_backward && !lora ? step_temporaries(f * d) : 0;
    // With an adapter on it (LoRA), the projection's input gradient comes twice, from the base
    // linear and from A: both exist until autograd's input buffer adds the second into the first.
    const bool adapted_out = adapted_count(m, o, {gpt2 ? "mlp_c_proj" : "down"}) > 0;
    // With checkpointing, a fourth: the recompute's last step, h + the MLP's output, before its
    // inner backward starts. The block's forward (src/models/gpt2.cpp, llama.cpp) still holds
    // its locals then, and the temporaries of its last expression, where nothing saves them
    // (block_tensors.cpp's end_locals: GPT-2 the qkv split's views of c_attn's output, Llama the
    // rotated q, k and v; under autocast the norms' outputs, which the linears save as casts;
    // with a frozen projection its input); and the output projection's result (b·T·d·c) is
    // alive next to the sum it makes (counted as y). With an adapter on that projection, the
    // moment before: its input's fp32 copy and autocast's cast, the result, B's output and the
    // scaled delta. It wins when the attention is wide next to the MLP (H·hd ≥ d, Qwen3).
    int64_t end_locals = 0, out = 0;
    if (checkpointing) {
      end_locals = last_block().end_locals;
      out = N * d * c;
      if (adapted_count(m, o, {gpt2 ? "mlp_c_proj" : "down"}) > 0) {
        const int64_t copies = (c != kFp32 ? N * f * kFp32 : 0) + (autocast ? N * f * c : 0);
        out = std::max(out, copies + 3 * N * d * c - N * d * w);  // y is not made yet
      }
      // On the CPU, TensorIterator casts an operand in another dtype before the add: the
      // projection's result in c becomes a temporary in the residual's dtype next to the sum.
      if (o.cpu && c != w && out == N * d * c) out += N * d * w;
    }
    // A fifth: the MLP's input projections' backward (a full fine-tune). By then the MLP's
    // activations are released (Llama: gate's output, silu(gate), up's output and their product;
    // GPT-2: c_fc's and gelu's outputs), with the output projection's cast weight and, Llama,
    // up_proj's (it runs first: autograd takes the latest node first) cast weight and cast input.
    // On top: the gradient of gate's (c_fc's) output, its input's gradient next to up's (Llama:
    // both wait in autograd's input buffer for the sum), and the MLP weights' gradients, all new
    // without accumulation (with it, or stepping inside backward, one at a time until
    // AccumulateGrad adds it or the step frees it). It wins when d·f outweighs b·T·f: small
    // micro-batches of wide MLPs.
    int64_t mlp_input_side = 0;
    if (!lora) {
      const int64_t input_weight = d * f + (gpt2 ? f : 0);
      int64_t weight_grads = ((gpt2 ? 2 : 3) * d * f + (gpt2 ? f + d : 0)) * t;
      if (accumulating) weight_grads = input_weight * t;
      if (split.optimizer_in_backward) weight_grads = input_weight * t + step_temporaries(d * f);
      const int64_t released = (gpt2 ? 2 : 4) * N * f * c + (block_weights_cast() ? (gpt2 ? 1 : 2) * d * f * c : 0) +
                               (!gpt2 && autocast && w != c ? N * d * c : 0);
      mlp_input_side = N * f * c + (gpt2 ? 1 : 2) * N * d * c + weight_grads - released;
    }
    // A sixth: the attention's input projections' backward (a full fine-tune), the block's last
    // linear work. By then everything the block saved is released but what its first norm and
    // the projections' input keep (the lines up to that input), with the weight casts but the
    // projections' own; on top: the block's weight gradients (as for the fifth), the input's
    // gradients from the projections (Llama: q, k and v each make one; they wait in autograd's
    // input buffer to be summed), and checkpointed the residual's gradient sum (as for the
    // softmax). Wide blocks at small b·T: every weight gradient of the block is alive here.
    int64_t attention_input_side = 0, attention_released = 0, attention_grads = 0;
    if (!lora) {
      const LastBlock last = last_block();
      const std::string input_line = gpt2 ? "ln_1 output" : "input RMSNorm output";
      int64_t kept = 0, total = 0;
      bool found = false;
      for (const PlanLine& line : last.lines) {
        total += line.bytes;
        if (!found) kept += line.bytes;
        if (line.name.rfind(input_line, 0) == 0) found = true;
      }
      if (found) {
        const int64_t kv = m.n_kv_heads * m.head_dim;
        const int64_t qkv_weights = gpt2 ? d * 3 * a + 3 * a : d * (a + 2 * kv);
        ModelConfig one = m, two = m;
        one.n_layers = 1;
        two.n_layers = 2;
        const int64_t block_parameters = parameter_count(two) - parameter_count(one) - (gpt2 ? 2 * d : d);  // not its first norm yet
        attention_grads = block_parameters * t;
        const int64_t largest = gpt2 ? qkv_weights : d * a;  // the projection whose backward runs
        if (accumulating) attention_grads = largest * t;
        if (split.optimizer_in_backward) attention_grads = largest * t + step_temporaries(largest);
        attention_released = total - kept + (block_weights_cast() ? (linear_weight_numel_per_block(m) - qkv_weights) * c : 0);
        attention_input_side = attention_grads + (gpt2 ? 1 : 3) * N * d * c + residual_sum - attention_released;
      }
    }
    // The highest of the moments is the block backward's peak; its lines go into the table.
    struct Moment {
      int64_t bytes = 0;
      std::vector<PlanLine> lines;
      void add(const std::string& name, const std::string& formula, int64_t n, const std::string& why) {
        lines.push_back(PlanLine{name, formula, n, why});
        bytes += n;
      }
    };
    std::vector<Moment> moments;
    {
      Moment activation;  // the MLP activation's backward
      activation.add("released before the activation's backward", "−b·T·f·c (+ d·f·c)", -mlp_released,
                     "the output projection's saved input (and cast weight)");
      if (mlp_grads > 0) activation.add("the output projection's gradient", "(f·d + bias)·4", mlp_grads, "made on the way");
      activation.add("MLP backward: grads of act. out, in", gpt2 ? "2·b·T·f·c" : "3·b·T·f·c", mlp_pair,
                     gpt2 ? "gelu's backward holds its input gradient and output gradient at once"
                          : "silu(g)·u's backward holds its input gradient and makes those of silu(g) and u");
      moments.push_back(activation);
    }
    {
      Moment projection;  // the MLP output projection's own backward
      if (adapted_out) {
        projection.add("MLP out-proj backward: two input gradients", "2·b·T·f·c", 2 * N * f * c,
                       "the base linear's, and the adapter's that autograd's input buffer adds into it");
      } else {
        projection.add("MLP out-proj backward: input gradient", "b·T·f·c", N * f * c,
                       "the MLP's output projection makes the gradient of its b·T·f input");
      }
      if (projection_gradient > 0)
        projection.add("MLP out-proj backward: weight gradient", "(f·d + bias)·t", projection_gradient,
                       accumulating ? "a new tensor until AccumulateGrad adds it into .grad" : "the first block gradient made");
      moments.push_back(projection);
    }
    if (projection_step > 0) {
      // Inside backward the weight steps once its gradient is accumulated: the projection's node
      // has finished and released what it saved; its input's gradient waits for the activation's.
      Moment step;
      step.add("released: the MLP out-proj's saved input (and cast weight)", "−b·T·f·c (+ d·f·c)", -mlp_released,
               "its backward node has finished");
      step.add("MLP out-proj input gradient", "b·T·f·c", N * f * c, "waits for the activation's backward");
      step.add("MLP out-proj weight gradient", "(f·d + bias)·t", projection_gradient, "about to step");
      step.add("MLP out-proj optimizer step temporaries", o.optimizer == OptimizerKind::kAdamW ? "2·f·d·t" : "step(f·d)",
               projection_step, "the optimizer's temporaries for that weight, as it steps inside backward");
      moments.push_back(step);
    }
    if (softmax_pair > 0) {
      Moment softmax;  // the explicit attention's softmax backward
      softmax.add("released before the softmax's backward", "−(one block from v on)", -softmax_released,
                  "the MLP, output projection and bmm(probabilities, v) are done");
      if (softmax_grads > 0) softmax.add("the block's MLP and projection gradients", "(MLP, norm, proj.)·4", softmax_grads, "made on the way");
      softmax.add("gradient of v", "b·T·a·c", N * a * c, "waits in the qkv split's backward for q's and k's");
      if (residual_sum > 0)
        softmax.add("the residual's gradient after the MLP", "b·T·d·" + rs(), residual_sum,
                    "a sum, next to the incoming gradient that CheckpointFunction::backward holds");
      softmax.add("softmax backward: grads of probs, scores", "2·b·H·T·T·c", softmax_pair,
                  "softmax's backward holds its input gradient and output gradient at once");
      moments.push_back(softmax);
    }
    const std::string one_at_a_time = accumulating ? "a new tensor until AccumulateGrad adds it into .grad"
                                                   : "with its step's temporaries, inside backward";
    if (!lora) {
      Moment mlp_input;  // the MLP's input projections' backward
      const int64_t released = (gpt2 ? 2 : 4) * N * f * c + (block_weights_cast() ? (gpt2 ? 1 : 2) * d * f * c : 0) +
                               (!gpt2 && autocast && w != c ? N * d * c : 0);
      mlp_input.add("released before the MLP input projections' backward", gpt2 ? "−2·b·T·f·c (+ d·f·c)" : "−4·b·T·f·c (+ …)",
                    -released,
                    gpt2 ? "c_fc's and gelu's outputs (and the output projection's cast weight)"
                         : "gate's and up's outputs, silu(gate), their product (and down's and up's casts)");
      mlp_input.add("gradient of the input projection's output", "b·T·f·c", N * f * c, gpt2 ? "c_fc's" : "gate's, from silu's backward");
      mlp_input.add(gpt2 ? "c_fc's input gradient" : "gate's and up's input gradients", gpt2 ? "b·T·d·c" : "2·b·T·d·c",
                    (gpt2 ? 1 : 2) * N * d * c, gpt2 ? "made by c_fc's backward" : "both exist until autograd's input buffer sums them");
      const bool one = accumulating || split.optimizer_in_backward;
      mlp_input.add(one ? "the input projection's weight gradient" : "the MLP's weight gradients",
                    one ? "(d·f + bias)·t" : "(MLP weights)·t", mlp_input_side - mlp_input.bytes,
                    one ? one_at_a_time : "made by the MLP's three backward nodes");
      moments.push_back(mlp_input);
    }
    if (attention_input_side != 0 || attention_released != 0) {
      Moment attention_input;  // the attention's input projections' backward
      attention_input.add("released: the block but its first norm and the projections' input", "−(one block after it)",
                          -attention_released, "every later backward node of the block is done (and its weight casts)");
      const bool one = accumulating || split.optimizer_in_backward;
      attention_input.add(one ? "the input projection's weight gradient" : "the block's weight gradients",
                          one ? (gpt2 ? "(d·3a + 3a)·t" : "d·a·t") : "(block parameters − norm)·t", attention_grads,
                          one ? one_at_a_time : "every linear's, the output projection's and the norms' after the first");
      attention_input.add(gpt2 ? "c_attn's input gradient" : "q's, k's and v's input gradients", gpt2 ? "b·T·d·c" : "3·b·T·d·c",
                          (gpt2 ? 1 : 3) * N * d * c, gpt2 ? "made by c_attn's backward" : "they wait in autograd's input buffer to be summed");
      if (residual_sum > 0)
        attention_input.add("the residual's gradient after the MLP", "b·T·d·" + rs(), residual_sum,
                            "a sum, next to the incoming gradient that CheckpointFunction::backward holds");
      moments.push_back(attention_input);
    }
    if (checkpointing) {
      Moment end;  // the recompute's last step
      end.add("recompute's end: block forward's locals", gpt2 ? "b·T·3a·c + …" : "b·T·(a+2kv)·c + …", end_locals,
              gpt2 ? "the qkv views of c_attn's output and what the linears do not save, held until the block returns"
                   : "rotated q, k and v (and what the linears do not save), held until it returns");
      end.add(out > N * d * c ? "recompute's end: the adapted out-projection" : "recompute's end: MLP out-proj result",
              out > N * d * c ? "b·T·f·(4+c) + 3·b·T·d·c − b·T·d·w" : "b·T·d·c", out,
              out > N * d * c ? "its input's fp32 copy and cast, result, B's output, scaled delta (before y)" : "added to h to make y");
      // An int8 base keeps the linears' inputs (int8_saved_inputs, counted above for the
      // recompute); those kept as themselves are the very locals counted here.
      const int64_t kept = quant ? int8_inputs_kept_as_themselves(m, o, N, dtypes()) : 0;
      if (kept > 0)
        end.add("int8's kept inputs are these locals", "−(inputs kept as themselves)", -kept, "counted once, above");
      moments.push_back(end);
    }
    const Moment* best = &moments.front();
    for (const Moment& moment : moments)
      if (moment.bytes > best->bytes) best = &moment;
    for (const PlanLine& line : best->lines) blk.add(line.name, line.formula, line.bytes, line.why);
  }

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
  void block_forward() {
    const bool frozen_attention =
        !checkpointing && frozen_prefix_of(m, o, checkpointing) >= FrozenPrefix::kAttention;
    if (!frozen_attention && !checkpointing) return;
    const int64_t H = m.n_heads, a = m.n_heads * m.head_dim, kv = m.n_kv_heads * m.head_dim, f = m.d_ff;
    const bool gpt2 = m.arch == Architecture::kGpt2;
    const int64_t q_bytes = m.qk_norm || !autocast ? w : c;  // rotated by the rotary table's dtype
    std::vector<PlanLine> attention, mlp;
    const Table at{&attention}, end{&mlp};
    // The locals held from the attention on: GPT-2's c_attn output (the qkv views), Llama's
    // `normed` and the rotated q, k and v.
    auto attention_locals = [&](const Table& t) {
      if (!checkpointing) t.add("block input x", "b·T·d·" + rs(), N * d * w, "the embedding's output, the block's residual");
      if (gpt2) {
        t.add("c_attn output", "b·T·3a·c", N * 3 * a * c, "held by the qkv split's views until the block returns");
      } else {
        t.add("input RMSNorm output", "b·T·d·" + rs(), N * d * w, "the block's local `normed`");
        t.add("rotated q, k and v", "b·T·(a+kv)·q + b·T·kv·c", N * (a + kv) * q_bytes + N * kv * c, "the block's locals");
      }
    };
    // Checkpointed under autocast the forward runs without grad, but autocast still caches its
    // cast of every weight that requires grad until the forward's region closes: by the last
    // block's attention, every block below and its own q, k, v (c_attn) projections; by its end,
    // all L blocks. (LoRA: only the adapters' small casts, left out.)
    const int64_t per_block = linear_weight_numel_per_block(m);
    const bool cast_cache = checkpointing && block_weights_cast() && !lora;  // a frozen weight's cast is not cached
    const int64_t qkv_weights = gpt2 ? d * 3 * a : d * (a + 2 * kv);
    if (o.attention == AttentionKind::kExplicit) {
      if (cast_cache)
        at.add("autocast's cache: weight casts so far", "((L−1)·(linear weights) + qkv)·c", ((L - 1) * per_block + qkv_weights) * c,
               "cached for the whole forward, grad or not");
      attention_locals(at);
      if (!gpt2 && m.n_kv_heads != m.n_heads) {
        at.add("k, v repeated to H heads", "2·b·T·a·" + std::string(m.qk_norm || !autocast ? "q" : "c"),
               N * a * q_bytes + N * a * c, "repeat_interleave's outputs, locals of the attention");
      }
      if (!o.packed_documents)
        at.add("causal mask, and the ones it came from", "2·T·T·1", 2 * T * T * kBool, "built per attention call (ones(T, T).triu(1))");
      at.add("scores and probabilities", "2·b·H·T·T·c", 2 * b * H * T * T * c, "the masked scores and softmax's output");
      at.add(!gpt2 && m.n_kv_heads != m.n_heads ? "attention output" : "v's bmm copy, attention output",
             !gpt2 && m.n_kv_heads != m.n_heads ? "b·T·a·c" : "2·b·T·a·c",
             (!gpt2 && m.n_kv_heads != m.n_heads ? 1 : 2) * N * a * c,
             "bmm(probabilities, v): v made contiguous (the repeated v is already), and its result");
    }
    if (checkpointing) {
      if (cast_cache)
        end.add("autocast's cache: every block's weight casts", "L·(linear weights)·c", L * per_block * c,
                "cached for the whole forward, grad or not");
      attention_locals(end);
      end.add("attention output y, residual h", gpt2 ? "b·T·a·c + b·T·d·w" : "b·T·a·c + b·T·d·4",
              N * a * c + N * d * (gpt2 ? w : kFp32), "the block's locals");
      end.add(gpt2 ? "ln_2 output" : "post-attention RMSNorm output m", "b·T·d·" + rs(), N * d * w,
              gpt2 ? "a temporary of the block's last expression" : "the block's local `m`");
      end.add(gpt2 ? "c_fc output, gelu output" : "gate, up, silu(gate), silu(gate)·up", gpt2 ? "2·b·T·f·c" : "4·b·T·f·c",
              (gpt2 ? 2 : 4) * N * f * c, "temporaries of the block's last expression, alive until it returns");
      mlp_before_out_projection = total_bytes(mlp);
      // The output projection: its result and the residual sum it makes; with an adapter there
      // instead its input's fp32 copy (and autocast's cast of it) and the delta's two tensors.
      const bool adapted_out = adapted_count(m, o, {gpt2 ? "mlp_c_proj" : "down"}) > 0;
      const int64_t copy = adapted_out && c != kFp32 ? N * f * kFp32 : 0;
      const int64_t cast = adapted_out && autocast ? N * f * c : 0;
      // With LoRA dropout, a moment before: dropout's noise and its output (fp32), next to the
      // base projection's result, before A runs.
      const int64_t dropped = adapted_out && o.lora.dropout > 0 ? 2 * N * f * kFp32 : 0;
      if (adapted_out && dropped > 2 * N * d * c && copy + dropped + N * d * c > N * d * w) {
        if (copy > 0) end.add("the adapter's input copy", "b·T·f·4", copy, "x.to(fp32)");
        end.add("the adapter's dropout noise and output", "2·b·T·f·4", dropped, "the scaled Bernoulli noise and x · noise");
        end.add("out-projection result", "b·T·d·c", N * d * c, "the base linear's, before the adapter's delta");
      } else if (adapted_out && copy + cast + 2 * N * d * c > N * d * w) {
        if (copy + cast > 0)
          end.add("the adapter's input copies", autocast ? "b·T·f·(4+c)" : "b·T·f·4", copy + cast,
                  "x.to(fp32) and autocast's cast of it for A");
        end.add("out-projection result, B's output, the scaled delta", "3·b·T·d·c", 3 * N * d * c,
                "result + B(A(x))·scaling");
      } else {
        end.add("out-projection result, the block's output", "b·T·d·c + b·T·d·" + rs(), N * d * c + N * d * w,
                "h + the projection's result");
        if (o.cpu && c != w)
          end.add("the result cast to the residual's dtype", "b·T·d·" + rs(), N * d * w,
                  "the CPU's TensorIterator casts the operand before the add (a temporary)");
      }
    }
    const bool mlp_wins = total_bytes(mlp) > total_bytes(attention);
    plan.block_forward_peak = mlp_wins ? mlp : attention;
    plan.block_forward_what = !checkpointing ? "block 0's attention, before anything requires grad"
                              : mlp_wins     ? "the last block's MLP, run without grad (checkpointing)"
                                             : "the last block's attention, run without grad (checkpointing)";
  }


  // The last block's forward moments with grad (block_tensors.hpp ForwardMoment), each on top of
  // the blocks below and the last block's saved tensors up to it: the explicit attention's
  // softmax, next to the masked scores; with LoRA and inputs in c, each adapter's fp32 copy of
  // its input (adapted_linear.cpp, as PEFT's x.to(lora_A.dtype)). With a small vocabulary (or
  // the chunked loss's small logits) one of them can top the loss head's.
  void last_block_forward() {
    if (checkpointing) return;  // the checkpointed forward runs without grad: block_forward()
    const LastBlock last = last_block();
    const std::vector<PlanLine>& lines = last.lines;
    const int64_t last_block_bytes = total_bytes(lines);
    int64_t blocks_below = 0;
    for (size_t i = block_lines_begin; i < block_lines_end; ++i) blocks_below += plan.saved[i].bytes;
    blocks_below -= last_block_bytes;
    int64_t best = 0, saved_to_it = 0;
    const ForwardMoment* at = nullptr;
    for (const ForwardMoment& moment : last.moments) {
      int64_t saved = 0;
      for (size_t i = 0; i < moment.lines_end; ++i) saved += lines[i].bytes;
      const int64_t total = saved + moment.transient() + moment.locals_bytes;
      if (total > best) best = total, at = &moment, saved_to_it = saved;
    }
    if (at == nullptr) return;
    const Table f{&plan.last_block_forward_peak};
    const std::string what = at->lines_end > 0 ? lines[at->lines_end - 1].name : "its start";
    f.add("the blocks below the last, saved", "(saved blocks) − one block", blocks_below,
          "with the cast weights the whole step's blocks save");
    f.add("the last block's saved tensors so far", "one block up to " + what, saved_to_it, "forward order");
    if (at->kind == ForwardMoment::kEnd) {
      plan.last_block_forward_what = "the end of the last block";
      f.add("MLP out-projection result, the block's output", "b·T·d·c + b·T·d·(w or 4)", at->result_bytes,
            "h + the projection's result");
    } else if (at->kind == ForwardMoment::kAttention) {
      plan.last_block_forward_what = "the last block's attention output";
      f.add("masked scores, attention output, ones(T, T)", "b·H·T·T·c + b·T·a·c + T·T", at->scores_bytes,
            "the scores are a local of the attention next to softmax's saved output when bmm(probabilities, v) makes "
            "its result; the mask's ones are a temporary of the call");
    } else {
      plan.last_block_forward_what = "the last block's LoRA adapter with the largest fp32 input copy";
      f.add("the adapters' input", "b·T·in·c", at->input_bytes, "a temporary: the adapters save their casts of it");
      f.add("its fp32 copy", "b·T·in·4", at->copy_bytes, "x.to(fp32) in the adapter's forward, until it returns");
      f.add("the base linear's output, B's output, the scaled delta", "3·b·T·out·c", 3 * at->output_bytes,
            "result + B(A(x))·scaling: all three exist before the sum");
    }
    if (at->locals_bytes > 0)
      f.add("the block's unsaved locals", "x, qkv, y, h, … as held", at->locals_bytes,
            "the block forward's locals that no backward saves, alive until it returns");
  }

  // QLoRA: one block weight dequantised at a time. In a block's backward it is alive while a
  // frozen linear makes its input's gradient: at most the MLP output projection's moment, its
  // b·T·f input gradient next to the weight, on top of what the block keeps. That moment is a
  // peak when it exceeds the one peak_candidates chose (its lines from candidates_begin on).
  size_t candidates_begin = 0;
  int64_t dequant_bytes = 0;
  // Checkpointed: the last block's MLP forward (without grad) up to its output projection's input.
  int64_t mlp_before_out_projection = 0;
  void dequant_transients() {
    if (!quant) return;
    dequant_bytes = dequant_transient(m, o, c, Table{&plan.dequant_peak});
    int64_t chosen = 0;
    for (size_t i = candidates_begin; i < plan.block_backward_peak.size(); ++i) chosen += plan.block_backward_peak[i].bytes;
    const int64_t extra = N * m.d_ff * c + dequant_bytes - chosen;
    if (extra > 0) {
      Table{&plan.block_backward_peak}.add("QLoRA: frozen linear's backward instead", "b·T·f·c + dequant − above", extra,
                                           "its input gradient next to the dequantised weight beats the moment above");
    }
  }

  // ---- peaks per phase ----
  void phase_peaks() {
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
    plan.phase_peak_bytes[static_cast<int>(PlanPhase::kForward)] =
        std::max(resident_bytes + grads_in_micro_step + saved_bytes + total_bytes(plan.forward_peak),
                 plan.block_forward_peak.empty() ? int64_t{0}
                 : resident_bytes + grads_in_micro_step + saved_before_blocks + (checkpointing ? block_saved_bytes : 0) +
                       total_bytes(plan.block_forward_peak));
    if (!plan.framework_forward_peak.empty()) {
      int64_t& forward = plan.phase_peak_bytes[static_cast<int>(PlanPhase::kForward)];
      forward = std::max(forward, resident_bytes + grads_in_micro_step + saved_bytes + total_bytes(plan.framework_forward_peak));
    }
    if (checkpointing && block_weights_cast() && !lora && !chunked) {
      // Checkpointed under autocast: the head's matmul runs inside the forward's autocast region,
      // whose cache still holds every block's weight casts (block_forward); the fp32 copy of the
      // logits comes after the region has closed (Trainer::accumulate), without them.
      int64_t& forward = plan.phase_peak_bytes[static_cast<int>(PlanPhase::kForward)];
      // (The saved log_softmax output is not made yet: N·V·4 less.)
      forward = std::max(forward, resident_bytes + grads_in_micro_step + saved_bytes - N * V * kFp32 +
                                      L * linear_weight_numel_per_block(m) * c + N * V * c);
    }
    if (!plan.last_block_forward_peak.empty()) {
      int64_t& forward = plan.phase_peak_bytes[static_cast<int>(PlanPhase::kForward)];
      forward = std::max(forward, resident_bytes + grads_in_micro_step + saved_before_blocks + total_bytes(plan.last_block_forward_peak));
    }
    if (quant) {
      // The last block's forward with its largest weight dequantised, before the head has run
      // (the saved lines up to the blocks' end).
      // Without checkpointing the block's forward locals that nothing saves are alive too when
      // its MLP output projection dequantises its weight (its input, when no adapter saves it):
      // a second moment, with that weight.
      int64_t saved_through_blocks = 0;
      for (size_t i = 0; i < block_lines_end; ++i) saved_through_blocks += plan.saved[i].bytes;
      int64_t& forward = plan.phase_peak_bytes[static_cast<int>(PlanPhase::kForward)];
      forward = std::max(forward, resident_bytes + grads_in_micro_step + saved_through_blocks + dequant_bytes);
      int64_t down = dequantized_weight_bytes(d, m.d_ff, c, o.lora);  // the MLP's output projection
      if (o.cpu && o.lora.base_quant == BaseQuant::kInt8 && c != kFp32) down += 2 * d * m.d_ff * kFp32;  // dequant_transient
      if (!checkpointing) {
        // (The int8 linears' inputs kept as themselves are among those locals: counted once.)
        Dtypes dt = dtypes();
        if (L == 1) dt.frozen_prefix = frozen_prefix_of(m, o, checkpointing);
        const int64_t kept = int8_inputs_kept_as_themselves(m, o, N, dt, /*block0=*/L == 1);
        // The base runs before its adapter (adapted_linear.cpp): what the output projection's
        // adapter saves of its input does not exist yet.
        const LastBlock last = last_block();
        const std::string down_input = m.arch == Architecture::kGpt2 ? "gelu output" : "silu(gate)·up";
        int64_t not_yet = 0;
        for (const PlanLine& line : last.lines)
          if (line.name.rfind(down_input, 0) == 0 && line.name != down_input) not_yet += line.bytes;
        forward = std::max(forward, resident_bytes + grads_in_micro_step + saved_through_blocks - not_yet + down + last.end_locals - kept);
      } else {
        // Checkpointed, the last block's MLP (run without grad) holds its locals and activations
        // when its output projection dequantises its weight.
        forward = std::max(forward, resident_bytes + grads_in_micro_step + saved_through_blocks + mlp_before_out_projection + down);
      }
    }
    int64_t backward_head = resident_bytes + grads_in_micro_step + saved_bytes + total_bytes(plan.backward_peak);
    if (chunked) {
      // The chunked head's backward only scales what the forward made, so the final norm's
      // backward can be the higher moment: every saved tensor is still there with the hidden
      // states' gradient, and the norm makes its own. RMSNorm (weight · normed, normed = x ·
      // rsqrt): the gradient of normed and the product g · normed for the weight's, fp32; GPT-2's
      // layer_norm: the input's gradient. Then the norm's weight (and bias) gradient.
      const bool gpt2 = m.arch == Architecture::kGpt2;
      // Accumulating into an untied head's .grad, AccumulateGrad has added the forward's head
      // gradient into it and let it go by then.
      const int64_t norm_weights = lora ? 0 : (gpt2 ? 2 * d : d) * t;
      const int64_t head_added = accumulating && !m.tied_embeddings && !lora ? V * d * kFp32 : 0;
      backward_head = std::max(backward_head, resident_bytes + grads_in_micro_step + saved_bytes + total_bytes(plan.backward_peak) -
                                                  head_added + (gpt2 ? N * d * w : 2 * N * d * kFp32) + norm_weights);
      // With the optimizer inside backward an untied head steps as soon as backward hands its
      // gradient (made in the forward) to AccumulateGrad: the step's temporaries of the head's
      // size join every saved tensor of the micro-step (a tied head waits for the embedding).
      if (split.optimizer_in_backward && !m.tied_embeddings && !lora)
        backward_head = std::max(backward_head, resident_bytes + saved_bytes + total_bytes(plan.backward_peak) + step_temporaries(V * d));
    }
    // A tied head's weight gradient, when accumulating: it waits in autograd's input buffer for
    // the token embedding's backward, which runs last, so it is alive through every block's
    // backward (without accumulation the block backward's table counts it as a new gradient).
    // The chunked loss's head gradient (made in the forward, scaled in place in backward) waits
    // there the same way.
    const int64_t tied_head_gradient = accumulating && m.tied_embeddings && !lora ? V * d * t : 0;
    const int64_t backward_block = resident_bytes + grads_in_micro_step + block_saved_bytes +
                                   total_bytes(plan.block_backward_peak) + tied_head_gradient;
    // The head linear's weight gradient being made (V·d in the trained dtype, before
    // AccumulateGrad adds it or autograd buffers it), next to the logits' gradient (counted as
    // the log_softmax output it replaces: that one is released by its backward) while the head's
    // other saved tensors are still there. Under autocast its matmul's result in c and the
    // logits' gradient cast to c exist too, but measured they do not add to the peak: left out,
    // pending a closer look (the fp32 copies they replace are not modelled here either). (None
    // with LoRA, whose head is frozen, nor with the chunked loss, whose head gradients are made
    // in the forward.)
    int64_t backward_head_weight = 0;
    if (!lora && !chunked) {
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
    // Checkpointed without accumulation, the first block's recompute can peak higher than the
    // last one's: by then the gradients of the L−1 blocks above it exist (AccumulateGrad made
    // them as each recompute's inner backward ran), while only its own checkpointed input is
    // left of the L. The blocks in between lie on the line between the two ends. (Not with the
    // optimizer inside backward, which frees each gradient once its parameter has stepped.)
    int64_t backward_first_block = 0;
    if (checkpointing && !accumulating && !lora && !split.optimizer_in_backward && L > 1) {
      ModelConfig one = m, two = m;
      one.n_layers = 1;
      two.n_layers = 2;
      const int64_t block_parameters = parameter_count(two) - parameter_count(one);
      backward_first_block = backward_block + (L - 1) * (block_parameters * t - N * d * w);
    }
    plan.phase_peak_bytes[static_cast<int>(PlanPhase::kBackward)] =
        std::max({backward_head, backward_block, backward_tail, backward_first_block, backward_head_weight});
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
};

}  // namespace

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
