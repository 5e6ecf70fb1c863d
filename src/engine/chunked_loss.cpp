// The chunked cross-entropy: Σ cross-entropy of linear(hidden, weight) without the (N, V) logits.
//
// The plain loss head keeps, per micro-batch, the logits in the compute dtype, their fp32 copy,
// log_softmax's fp32 output (saved for backward) and in backward two more fp32 (N, V) gradients:
// at V = 50k–150k that is 10–30× the hidden states, the largest activation of a small model.
// Here, as Liger-Kernel's fused linear cross-entropy does, the forward walks over chunks of
// loss_chunk_tokens() tokens (include/accumbench/chunked_loss.hpp) and for each computes the
// logits, the loss and at once the gradients of the loss with respect to the chunk's hidden
// states and the head weight (softmax − one-hot, two matmuls); backward only scales them by the
// incoming gradient (the 1/tokens divisor, the fp16 loss scale). No extra FLOPs: the head's two
// backward matmuls move into the forward. Every operation is free of host synchronization, so
// CUDA graphs capture it. Given the count of targets that are not ignored (known on the host, so
// still no sync), the chunks run over those rows alone, gathered by a stable sort of the mask, as
// TRL's chunked_nll gathers them (trl/trainer/sft_trainer.py, _chunked_cross_entropy_loss: the
// valid rows first, then whole chunks over them only): padding and masked labels cost no product.
#include <torch/torch.h>

#include "accumbench/chunked_loss.hpp"
#include "accumbench/data.hpp"
#include "engine/micro_step.hpp"

namespace accumbench {
namespace {

struct ChunkSums {
  at::Tensor loss;         // () fp32: Σ over the non-ignored targets
  at::Tensor grad_hidden;  // (N, C) fp32: ∂loss/∂hidden (undefined unless asked for)
  at::Tensor grad_weight;  // (V, C) fp32: ∂loss/∂weight (undefined unless asked for: a frozen head, LoRA)
};

// hidden (N, C), weight (V, C), targets (N) int64 with kIgnoreIndex for padding. The matmuls run
// in `compute` (the autocast dtype, as autocast would run the head's linear; fp16's weight
// product in fp32); softmax, loss and the accumulated weight gradient in fp32, as the plain
// path's fp32 cross-entropy does.
// `counted` in [0, N): the chunks walk the rows whose target counts, gathered (their order: a
// stable sort of the mask, the counted first); else every row, as views.
ChunkSums chunked_sums(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets,
                       int64_t chunk_rows, at::ScalarType compute, bool hidden_gradient, bool weight_gradient,
                       int64_t counted) {
  const bool with_gradients = hidden_gradient || weight_gradient;
  const int64_t tokens = hidden.size(0);
  const bool gathered = counted >= 0 && counted < tokens;
  const at::Tensor hidden_c = hidden.to(compute);  // (N, C)
  const at::Tensor weight_c = weight.to(compute);  // (V, C)
  at::Tensor order;  // (N) int64, the counted rows first
  if (gathered) {
    order = std::get<1>(targets.ne(kIgnoreIndex).to(at::kByte).sort(/*stable=*/true, /*dim=*/0, /*descending=*/true));
  }
  ChunkSums sums;
  sums.loss = at::zeros({}, hidden.options().dtype(at::kFloat));
  if (hidden_gradient) {
    const at::TensorOptions fp32 = hidden.options().dtype(at::kFloat);
    // Gathered, the uncounted rows' gradient is zero and never written.
    sums.grad_hidden = gathered ? at::zeros({tokens, hidden.size(1)}, fp32) : at::empty({tokens, hidden.size(1)}, fp32);
  }
  if (weight_gradient) sums.grad_weight = at::zeros(weight.sizes(), weight.options().dtype(at::kFloat));
  const int64_t rows_walked = gathered ? counted : tokens;
  for (int64_t start = 0; start < rows_walked; start += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, rows_walked - start);
    const at::Tensor index = gathered ? order.narrow(0, start, rows) : at::Tensor();  // (r)
    const auto chunk = [&](const at::Tensor& x) { return gathered ? x.index_select(0, index) : x.narrow(0, start, rows); };
    const at::Tensor h = chunk(hidden_c);  // (r, C)
    const at::Tensor t = chunk(targets);   // (r)
    const at::Tensor valid = t.ne(kIgnoreIndex);            // (r) bool
    const at::Tensor safe_targets = t.masked_fill(valid.logical_not(), 0).unsqueeze(1);  // (r, 1)
    // The plain head's own arithmetic, row for row: log_softmax of the fp32 logits, the loss
    // read from it, and the gradient exp(log_softmax) − one-hot that log_softmax's backward
    // computes from it.
    at::Tensor logits = at::mm(h, weight_c.t()).to(at::kFloat);  // (r, V); the product in c dies here
    at::Tensor log_probs = at::log_softmax(logits, /*dim=*/1);     // (r, V)
    logits.reset();
    const at::Tensor valid_f = valid.to(at::kFloat).unsqueeze(1);  // (r, 1)
    sums.loss.sub_((log_probs.gather(1, safe_targets) * valid_f).sum());
    if (!with_gradients) continue;
    // ∂Σloss/∂logits = softmax − one-hot(target) on valid rows, 0 on padding; in place.
    at::Tensor grad_logits = log_probs.exp_();
    grad_logits.scatter_add_(1, safe_targets, valid_f.neg());
    grad_logits.mul_(valid_f);
    const at::Tensor grad_c = grad_logits.to(compute);  // (r, V)
    if (hidden_gradient) {
      if (gathered) {
        sums.grad_hidden.index_copy_(0, index, at::mm(grad_c, weight_c).to(at::kFloat));  // (r, C) into their rows
      } else {
        sums.grad_hidden.narrow(0, start, rows).copy_(at::mm(grad_c, weight_c));  // (r, C)
      }
    }
    if (!weight_gradient) continue;
    if (compute == at::kFloat) {
      sums.grad_weight.addmm_(grad_c.t(), h);  // (V, C)
    } else if (compute == at::kHalf) {
      // fp16's largest value is 65504: summed over a chunk's rows without the 1/tokens and loss
      // scale that the plain head's backward applies first, the product could overflow, and
      // the loss scaler would skip every step. In fp32, added in place.
      sums.grad_weight.addmm_(grad_logits.t(), chunk(hidden).to(at::kFloat));
    } else {
      sums.grad_weight.add_(at::mm(grad_c.t(), h));  // accumulated over the chunks in fp32
    }
  }
  return sums;
}

struct ChunkedCrossEntropy : public torch::autograd::Function<ChunkedCrossEntropy> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& hidden, const at::Tensor& weight,
                            const at::Tensor& targets, int64_t chunk_rows, int64_t compute_code, int64_t counted) {
    const auto compute = static_cast<at::ScalarType>(compute_code);
    const at::Tensor flat = hidden.reshape({-1, hidden.size(-1)});  // (N, C)
    ChunkSums sums = chunked_sums(flat, weight, targets.reshape({-1}), chunk_rows, compute, hidden.requires_grad(),
                                  weight.requires_grad(), counted);
    // saved_data, not save_for_backward: these are results, and backward takes them out so
    // they die with the head's backward instead of with the graph. An undefined one (what
    // does not require grad) is stored as undefined and returned so.
    ctx->saved_data["grad_hidden"] = sums.grad_hidden.defined() ? sums.grad_hidden.view(hidden.sizes()) : at::Tensor();
    ctx->saved_data["grad_weight"] = sums.grad_weight;
    ctx->saved_data["hidden_dtype"] = static_cast<int64_t>(hidden.scalar_type());
    ctx->saved_data["weight_dtype"] = static_cast<int64_t>(weight.scalar_type());
    return sums.loss;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const at::Tensor& scale = grad_outputs[0];  // () the divisor and loss scale of the root
    TORCH_CHECK(ctx->saved_data.count("grad_hidden") == 1,
                "the chunked cross-entropy's backward ran twice (its gradients are consumed by the first)");
    auto take = [&](const char* key) {
      const c10::IValue& value = ctx->saved_data[key];
      return value.isTensor() ? value.toTensor() : at::Tensor();
    };
    at::Tensor grad_hidden = take("grad_hidden");
    at::Tensor grad_weight = take("grad_weight");
    const auto hidden_dtype = static_cast<at::ScalarType>(ctx->saved_data["hidden_dtype"].toInt());
    const auto weight_dtype = static_cast<at::ScalarType>(ctx->saved_data["weight_dtype"].toInt());
    ctx->saved_data.erase("grad_hidden");
    ctx->saved_data.erase("grad_weight");
    auto scaled = [&](at::Tensor& g, at::ScalarType dtype) { return g.defined() ? g.mul_(scale).to(dtype) : at::Tensor(); };
    return {scaled(grad_hidden, hidden_dtype), scaled(grad_weight, weight_dtype), at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

at::Tensor chunked_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets,
                                 std::optional<at::ScalarType> autocast, int64_t chunk_tokens, int64_t counted) {
  // The matmuls run where the plain head's linear runs: in autocast's dtype, else in the weights'
  // (bf16 weights: no fp32 copy of a V×C head).
  const at::ScalarType compute = autocast.value_or(weight.scalar_type());
  const int64_t chunk_rows = loss_chunk_tokens(targets.numel(), chunk_tokens);
  if (torch::GradMode::is_enabled() && (hidden.requires_grad() || weight.requires_grad())) {
    return ChunkedCrossEntropy::apply(hidden, weight, targets, chunk_rows, static_cast<int64_t>(compute), counted);
  }
  const at::Tensor flat = hidden.reshape({-1, hidden.size(-1)});
  return chunked_sums(flat, weight, targets.reshape({-1}), chunk_rows, compute, false, false, counted).loss;
}

}  // namespace accumbench
