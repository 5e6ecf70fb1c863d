// bitsandbytes' 8-bit blockwise AdamW, term by term from its sources (bitsandbytes-foundation/
// bitsandbytes, commit 95f9af3): the maps from functional.py create_dynamic_map, the state's
// layout from optim/optimizer.py Optimizer2State.init_state, the update from csrc/kernels.cu
// kOptimizerStatic8bit2StateBlockwise (ADAM) and kOptimizer32bit2State for small tensors.
#include "engine/adamw8bit.hpp"

#include <algorithm>
#include <cmath>

#include "accumbench/optimizer_state.hpp"

namespace accumbench {

namespace blockwise {

at::Tensor dynamic_map(bool is_signed) {
  // create_dynamic_map with max_exponent_bits = 7, total_bits = 8: for exponent i = 0..6, the
  // midpoints of linspace(0.1, 1, 2^i + 1) (unsigned: 2^(i+1) + 1) scaled by 10^(i−6), mirrored
  // when signed; then 0 and 1. No "additional items" at 7 exponent bits (2^(7−7) − 1 = 0). The
  // same float32 operations as the Python, so the same values.
  std::vector<at::Tensor> parts;
  for (int i = 0; i < 7; ++i) {
    const int64_t items = is_signed ? (int64_t{1} << i) + 1 : (int64_t{1} << (i + 1)) + 1;
    const at::Tensor boundaries = torch::linspace(0.1, 1.0, items, torch::kFloat);
    const at::Tensor means = (boundaries.slice(0, 0, items - 1) + boundaries.slice(0, 1, items)) / 2.0;
    const at::Tensor scaled = means * std::pow(10.0, i - 6);
    parts.push_back(scaled);
    if (is_signed) parts.push_back(-scaled);
  }
  parts.push_back(torch::zeros({1}, torch::kFloat));
  parts.push_back(torch::ones({1}, torch::kFloat));
  const at::Tensor map = std::get<0>(torch::cat(parts).sort());
  TORCH_CHECK(map.numel() == 256, "the dynamic map has 256 values");
  return map;
}

at::Tensor map_midpoints(const at::Tensor& map) { return (map.slice(0, 0, 255) + map.slice(0, 1, 256)) * 0.5; }

double largest_negative(const at::Tensor& map) {
  const at::Tensor negative = map.masked_select(map.lt(0));
  return negative.numel() > 0 ? negative.max().item<double>() : 0.0;
}

void quantize(at::Tensor& x, const at::Tensor& midpoints, double largest_negative, const at::Tensor& codes,
              const at::Tensor& absmax) {
  const int64_t k = x.numel();
  const int64_t full = k / kQuantBlock, rest = k % kQuantBlock;
  // Each block's max |x| from its max and min (no k-sized |x| temporary).
  if (full > 0) {
    const auto [low, high] = at::aminmax(x.narrow(0, 0, full * kQuantBlock).view({full, kQuantBlock}), 1);
    absmax.narrow(0, 0, full).copy_(at::maximum(high, low.neg()));
  }
  if (rest > 0) absmax.narrow(0, full, 1).copy_(x.narrow(0, full * kQuantBlock, rest).abs().max().view({1}));
  // A block of zeros has absmax 0; dividing it by 1 keeps its zeros (the kernel would divide 0 by 0).
  const at::Tensor divisor = absmax.masked_fill(absmax.eq(0), 1.0);
  if (full > 0) x.narrow(0, 0, full * kQuantBlock).view({full, kQuantBlock}).div_(divisor.narrow(0, 0, full).unsqueeze(1));
  if (rest > 0) x.narrow(0, full * kQuantBlock, rest).div_(divisor.narrow(0, full, 1));
  if (largest_negative < 0) {
    // The kernel moves a code whose value's sign differs from x's one step toward x's sign: a
    // negative x nearest to 0 gets the largest negative value instead. Clamping such x to that
    // value gives the same code.
    at::Tensor move = x.gt(largest_negative);
    move.logical_and_(x.lt(0));
    x.masked_fill_(move, largest_negative);
  }
  // Nearest value; a tie goes to the lower one, as quantize_2D's "x > midpoint" does.
  codes.copy_(at::bucketize(x, midpoints, /*out_int32=*/true, /*right=*/false));
}

at::Tensor dequantize(const at::Tensor& codes, const at::Tensor& absmax, const at::Tensor& map) {
  at::Tensor values = map.index_select(0, codes.to(at::kInt));  // (k,) fp32
  const int64_t k = values.numel();
  const int64_t full = k / kQuantBlock, rest = k % kQuantBlock;
  if (full > 0) values.narrow(0, 0, full * kQuantBlock).view({full, kQuantBlock}).mul_(absmax.narrow(0, 0, full).unsqueeze(1));
  if (rest > 0) values.narrow(0, full * kQuantBlock, rest).mul_(absmax.narrow(0, full, 1));
  return values;
}

}  // namespace blockwise

AdamW8bit::AdamW8bit(std::vector<at::Tensor> params, OptimizerOptions options)
    : Optimizer(std::move(params)), options_(options) {
  torch::NoGradGuard no_grad;
  const at::TensorOptions device = params_.empty() ? at::TensorOptions() : params_.front().options();
  // Optimizer8bit.fill_qmap: "dynamic" (signed) for state1, "udynamic" for state2.
  if (eight_bit_optimizer(options_.kind)) {  // optim_bits=32 fills no quantisation maps
    map1_ = blockwise::dynamic_map(/*is_signed=*/true).to(device.device());
    map2_ = blockwise::dynamic_map(/*is_signed=*/false).to(device.device());
    midpoints1_ = blockwise::map_midpoints(map1_);
    midpoints2_ = blockwise::map_midpoints(map2_);
    largest_negative1_ = blockwise::largest_negative(map1_);
  }
  for (const auto& p : params_) {
    State s;
    const int64_t n = p.numel();
    s.quantized = eight_bit_state(options_.kind, n);
    const at::TensorOptions on = p.options();
    if (s.quantized) {
      s.state1 = torch::zeros({n}, on.dtype(at::kByte));
      s.state2 = torch::zeros({n}, on.dtype(at::kByte));
      s.absmax1 = torch::zeros({quant_blocks(n)}, on.dtype(at::kFloat));
      s.absmax2 = torch::zeros({quant_blocks(n)}, on.dtype(at::kFloat));
    } else {
      s.state1 = torch::zeros({n}, on.dtype(at::kFloat));
      s.state2 = torch::zeros({n}, on.dtype(at::kFloat));
    }
    state_.push_back(std::move(s));
  }
}

void AdamW8bit::step_one(size_t index) {
  torch::NoGradGuard no_grad;
  const at::Tensor& param = params_[index];
  const at::Tensor& grad = param.grad();
  if (!grad.defined()) return;
  TORCH_CHECK(param.is_contiguous() && grad.is_contiguous(), "8-bit AdamW steps contiguous tensors");
  State& s = state_[index];
  ++s.step;
  const int64_t n = param.numel();
  for (int64_t begin = 0; begin < n; begin += kStepChunk)
    step_chunk(s, param, grad, begin, std::min(kStepChunk, n - begin), decays(index));
}

// One pass over elements [begin, begin + length) (begin a multiple of the block). The order of
// allocations is what optimizer_step_temporary_bytes counts.
void AdamW8bit::step_chunk(State& s, const at::Tensor& param, const at::Tensor& grad, int64_t begin,
                           int64_t length, bool decayed) const {
  const OptimizerOptions& o = options_;
  const int64_t first_block = begin / kQuantBlock, blocks = quant_blocks(length);
  at::Tensor p = param.view({-1}).narrow(0, begin, length);
  at::Tensor g = grad.view({-1}).narrow(0, begin, length);
  if (g.scalar_type() != at::kFloat) g = g.to(at::kFloat);
  at::Tensor m, v;
  if (s.quantized) {
    m = blockwise::dequantize(s.state1.narrow(0, begin, length), s.absmax1.narrow(0, first_block, blocks), map1_);
  } else {
    m = s.state1.narrow(0, begin, length);
  }
  m.mul_(o.beta1).add_(g, 1.0 - o.beta1);
  if (s.quantized) {
    v = blockwise::dequantize(s.state2.narrow(0, begin, length), s.absmax2.narrow(0, first_block, blocks), map2_);
  } else {
    v = s.state2.narrow(0, begin, length);
  }
  v.mul_(o.beta2).addcmul_(g, g, 1.0 - o.beta2);
  g.reset();
  // kernels.cu: correction1 = 1 − β1^t, correction2 = sqrt(1 − β2^t),
  // step_size = −lr·correction2/correction1, p += step_size · s1 / (sqrt(s2) + correction2·eps),
  // then p ·= 1 − lr·wd (decoupled decay after the Adam update, unlike torch.optim's before).
  const double correction1 = 1.0 - std::pow(o.beta1, static_cast<double>(s.step));
  const double correction2 = std::sqrt(1.0 - std::pow(o.beta2, static_cast<double>(s.step)));
  const double step_size = -o.lr * correction2 / correction1;
  {
    at::Tensor denom = v.sqrt();
    denom.add_(correction2 * o.eps);
    at::Tensor p32 = p.scalar_type() == at::kFloat ? p : p.to(at::kFloat);
    p32.addcdiv_(m, denom, step_size);
    denom.reset();
    // The kernels hold p in its own dtype (p_vals of type T): a 16-bit weight is rounded after the
    // update and again after the decay, which multiplies in fp32 what was rounded.
    if (!p32.is_same(p)) {
      p.copy_(p32);
      p32.reset();
    }
    if (o.weight_decay > 0 && decayed) p.mul_(1.0 - o.lr * o.weight_decay);
  }
  if (s.quantized) {
    blockwise::quantize(m, midpoints1_, largest_negative1_, s.state1.narrow(0, begin, length), s.absmax1.narrow(0, first_block, blocks));
    blockwise::quantize(v, midpoints2_, /*largest_negative=*/0.0, s.state2.narrow(0, begin, length), s.absmax2.narrow(0, first_block, blocks));
  }
}

void AdamW8bit::reset() {
  torch::NoGradGuard no_grad;
  for (State& s : state_) {
    s.state1.zero_();
    s.state2.zero_();
    if (s.absmax1.defined()) s.absmax1.zero_();
    if (s.absmax2.defined()) s.absmax2.zero_();
    s.step = 0;
  }
}

int64_t AdamW8bit::state_bytes() const {
  int64_t total = 0;
  for (const at::Tensor* map : {&map1_, &map2_, &midpoints1_, &midpoints2_})
    if (map->defined()) total += map->nbytes();
  for (const State& s : state_) {
    total += s.state1.nbytes() + s.state2.nbytes();
    if (s.absmax1.defined()) total += s.absmax1.nbytes() + s.absmax2.nbytes();
  }
  return total;
}

}  // namespace accumbench
