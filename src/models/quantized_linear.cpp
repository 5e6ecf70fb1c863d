// QuantizedWeight and the quantised linear (quantized_linear.hpp). The formats follow
// bitsandbytes' reference kernels (backends/default/ops.py at 95f9af3): quantize_4bit,
// _dequantize_4bit_compute, quantize_blockwise, _dequantize_blockwise_compute,
// int8_vectorwise_quant; the byte counts are in src/models/quantization.cpp.
#include "models/quantized_linear.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "accumbench/model_config.hpp"

namespace accumbench {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blockwise absmax quantisation of a flat fp32 tensor to the nearest value of a sorted `code`:
// absmax per block (zero padding leaves a short tail block's absmax as bitsandbytes computes it),
// x · (1/absmax) clamped to [-1, 1], the index of the nearest code value (bucketize against the
// midpoints, as the reference kernels). Returns (indices (padded length), absmax (blocks,)).
std::pair<at::Tensor, at::Tensor> quantize_blocks(const at::Tensor& flat, const at::Tensor& code, int64_t block) {
  const int64_t n = flat.numel();
  const int64_t blocks = ceil_div(n, block);
  at::Tensor padded = at::zeros({blocks * block}, flat.options().dtype(at::kFloat));
  padded.narrow(0, 0, n).copy_(flat);
  at::Tensor grouped = padded.view({blocks, block});
  at::Tensor absmax = std::get<0>(grouped.abs().max(/*dim=*/1));
  at::Tensor scaled = at::clamp(grouped * (1.0 / absmax.clamp_min(1e-38)).unsqueeze(1), -1, 1).reshape(-1);
  const int64_t k = code.numel();
  at::Tensor bounds = (code.narrow(0, 0, k - 1) + code.narrow(0, 1, k - 1)) / 2;
  return {at::bucketize(scaled, bounds), absmax};
}

// The (256, 2) table from a code byte to its two values (high nibble first).
at::Tensor code_pairs(const at::Tensor& code) {
  const at::Tensor byte = at::arange(256, code.options().dtype(at::kLong));
  return at::stack({code.index_select(0, at::floor_divide(byte, 16)), code.index_select(0, at::remainder(byte, 16))}, 1);
}

// Double quant's absmax in fp32: dynamic_map[q] · nested_absmax[i / 256] + offset.
at::Tensor nested_absmax_values(const QuantizedWeight& q) {
  const int64_t blocks = q.absmax.numel();
  at::Tensor values = q.nested_code.index_select(0, q.absmax.to(at::kInt));
  values.mul_(q.nested_absmax.repeat_interleave(kNestedBlock).narrow(0, 0, blocks)).add_(q.offset);
  return values;
}

at::Tensor dequantize_nf4(const QuantizedWeight& q, at::ScalarType dtype) {
  const int64_t n = q.out * q.in;
  const at::Tensor pairs = code_pairs(q.code);
  const at::Tensor absmax = q.double_quant ? nested_absmax_values(q) : q.absmax;
  at::Tensor weight = at::empty({q.out, q.in}, q.code.options().dtype(dtype));
  at::Tensor flat = weight.view({-1});
  const int64_t codes = q.codes.numel();
  const int64_t chunk = dequant_chunk_codes(n);  // a multiple of 32: chunks start on a 64-block
  for (int64_t start = 0; start < codes; start += chunk) {
    const int64_t length = std::min(chunk, codes - start);
    at::Tensor values = pairs.index_select(0, q.codes.narrow(0, start, length).to(at::kInt)).view({-1});
    const int64_t first_block = 2 * start / kNf4Block, full = 2 * length / kNf4Block, tail = 2 * length % kNf4Block;
    if (full > 0) {
      values.narrow(0, 0, full * kNf4Block).view({full, kNf4Block}).mul_(absmax.narrow(0, first_block, full).unsqueeze(1));
    }
    if (tail > 0) values.narrow(0, full * kNf4Block, tail).mul_(absmax.narrow(0, first_block + full, 1));
    const int64_t count = std::min(2 * length, n - 2 * start);
    flat.narrow(0, 2 * start, count).copy_(values.narrow(0, 0, count));
  }
  return weight;
}

// The linear on a quantised weight: dequantise, multiply, free; again in backward.
struct QuantizedLinearFunction : public torch::autograd::Function<QuantizedLinearFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& bias,
                            const QuantizedWeight* q, int64_t dtype_code) {
    const auto dtype = static_cast<at::ScalarType>(dtype_code);
    ctx->saved_data["weight"] = reinterpret_cast<int64_t>(q);
    ctx->saved_data["dtype"] = dtype_code;
    // LLM.int8 keeps its input (MatMul8bitLt: ctx.tensors = (CAt, subA, A); on the CPU
    // MatMul8bitFp: ctx.A = A); MatMul4Bit keeps none of it.
    if (q->kind == BaseQuant::kInt8) ctx->save_for_backward({x});
    return at::linear(x, dequantize_weight(*q, dtype), bias.numel() > 0 ? bias : at::Tensor());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto* q = reinterpret_cast<const QuantizedWeight*>(ctx->saved_data["weight"].toInt());
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    at::Tensor grad_input = at::matmul(grad_outputs[0].to(dtype), dequantize_weight(*q, dtype));
    return {grad_input, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor dynamic_map() {
  // create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8): for i in 0..6, the
  // 2^i + 1 boundaries linspace(0.1, 1) in fp32, their midpoints scaled by ±10^(i−6); then 0 and
  // 1; sorted (no additional items: 2^(7−7) − 1 = 0).
  std::vector<at::Tensor> parts;
  for (int64_t i = 0; i < 7; ++i) {
    const at::Tensor boundaries = at::linspace(0.1, 1.0, (int64_t{1} << i) + 1, at::TensorOptions().dtype(at::kFloat));
    const int64_t k = boundaries.numel();
    const at::Tensor means = (boundaries.narrow(0, 0, k - 1) + boundaries.narrow(0, 1, k - 1)) / 2.0;
    const double scale = std::pow(10.0, static_cast<double>(i - 6));
    parts.push_back(means * scale);
    parts.push_back(means * -scale);
  }
  parts.push_back(at::tensor({0.0f, 1.0f}));
  return std::get<0>(at::sort(at::cat(parts)));
}

void QuantizedWeight::to(c10::Device device) {
  for (at::Tensor* t : {&codes, &absmax, &code, &nested_absmax, &nested_code, &offset}) {
    if (t->defined()) *t = t->to(device);
  }
}

int64_t QuantizedWeight::bytes() const {
  int64_t total = 0;
  for (const at::Tensor* t : {&codes, &absmax, &code, &nested_absmax, &nested_code, &offset}) {
    if (t->defined()) total += t->numel() * static_cast<int64_t>(t->element_size());
  }
  return total;
}

QuantizedWeight quantize_weight(const at::Tensor& weight, BaseQuant kind, bool double_quant) {
  torch::NoGradGuard no_grad;
  TORCH_CHECK(weight.dim() == 2, "quantize_weight takes an (out, in) weight");
  QuantizedWeight q;
  q.kind = kind;
  q.double_quant = double_quant;
  q.out = weight.size(0);
  q.in = weight.size(1);
  const at::Tensor w = weight.detach().to(at::kFloat);
  if (kind == BaseQuant::kInt8) {
    // Int8Params._quantize casts the weight to fp16 first, then int8_vectorwise_quant without
    // outliers (threshold 0): row_stats = max |row|, round(W·127/row), in fp32 from the fp16 values.
    const at::Tensor w16 = weight.detach().to(at::kHalf).to(at::kFloat);
    q.absmax = std::get<0>(w16.abs().max(/*dim=*/1));
    q.codes = at::round(w16 * (127.0 / q.absmax.clamp_min(1e-38)).unsqueeze(1)).to(at::kChar);
    return q;
  }
  TORCH_CHECK(kind == BaseQuant::kNf4, "quantize_weight: nothing to quantise to");
  q.code = at::from_blob(const_cast<float*>(kNf4Values), {16}, at::TensorOptions().dtype(at::kFloat)).clone().to(w.device());
  auto [indices, absmax] = quantize_blocks(w.reshape(-1), q.code, kNf4Block);
  const int64_t n = w.numel();
  // Codes past n (the zero padding) sit at 0.0's index, 7, as bitsandbytes pads an odd count with
  // a zero before packing; only ceil(n/2) bytes are kept.
  at::Tensor padded = indices.narrow(0, 0, 2 * ceil_div(n, 2)).clone();
  if (n % 2 == 1) padded[n] = 7;
  q.codes = at::bitwise_or(padded.slice(0, 0, c10::nullopt, 2) * 16, padded.slice(0, 1, c10::nullopt, 2)).to(at::kByte);
  if (!double_quant) {
    q.absmax = absmax;
    return q;
  }
  // quantize_4bit(compress_statistics=True): offset = absmax.mean(), then quantize_blockwise
  // (absmax − offset, blocksize=256) with the dynamic map.
  q.offset = absmax.mean();
  q.nested_code = dynamic_map().to(w.device());
  auto [nested_indices, nested_absmax] = quantize_blocks(absmax - q.offset, q.nested_code, kNestedBlock);
  q.absmax = nested_indices.narrow(0, 0, absmax.numel()).to(at::kByte);
  q.nested_absmax = nested_absmax;
  return q;
}

at::Tensor dequantize_weight(const QuantizedWeight& q, at::ScalarType dtype) {
  if (q.kind == BaseQuant::kInt8) {
    // MatMul8bitFp / MatMul8bitLt's backward: CB.to(dtype).mul_(SCB.unsqueeze(1) · (1/127)).
    return q.codes.to(dtype).mul_(q.absmax.unsqueeze(1).mul(1.0 / 127.0));
  }
  return dequantize_nf4(q, dtype);
}

at::Tensor quantized_linear(const at::Tensor& x, const QuantizedWeight& q, const at::Tensor& bias, at::ScalarType dtype) {
  // Linear4bit.forward casts its input (and bias) to the compute dtype first.
  // No bias: an empty one, as Function::apply takes no undefined tensor on LibTorch 1.13.
  const at::Tensor bias_c = bias.defined() ? bias.to(dtype) : at::empty({0}, x.options().dtype(dtype));
  return QuantizedLinearFunction::apply(x.to(dtype), bias_c, &q, static_cast<int64_t>(dtype));
}

}  // namespace accumbench
