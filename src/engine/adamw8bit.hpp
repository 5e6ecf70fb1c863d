// bitsandbytes' 8-bit blockwise AdamW (Dettmers, Lewis, Shleifer & Zettlemoyer, "8-bit Optimizers
// via Block-wise Quantization", ICLR 2022) emulated with LibTorch operations: the moments are kept
// as uint8 codes into the dynamic quantisation map with one float absmax per block of 256; each
// step dequantises them to fp32, updates in fp32, and quantises them again. The memory held is
// bitsandbytes' to the byte; the time is not (its fused CUDA kernel does all of it in one pass).
//
//   AdamW8bit opt(params, options);   // adamw8bit or paged-adamw8bit (same maths), paged-adamw32bit
//                                     // (fp32 moments for every tensor: bitsandbytes' optim_bits=32)
//   opt.step();
#pragma once

#include <torch/torch.h>

#include <vector>

#include "engine/optimizer.hpp"

namespace accumbench {

namespace blockwise {
// bitsandbytes.functional.create_dynamic_map(signed, max_exponent_bits=7, total_bits=8): 256
// sorted float32 values in [-1, 1] (signed) or [0, 1], denser near zero.
at::Tensor dynamic_map(bool is_signed);
// The 255 midpoints between neighbouring values of `map` (what nearest rounding compares with).
at::Tensor map_midpoints(const at::Tensor& map);
// The largest negative value of a signed map (0 for an unsigned one).
double largest_negative(const at::Tensor& map);
// Quantises `x` (k,) fp32 in blocks of 256 (the last may be shorter): absmax (ceil(k/256),) gets
// each block's max |x|, codes (k,) uint8 the index of the map value nearest to x / absmax (the
// map given by its midpoints), where with a signed map (largest_negative < 0) a negative x never
// gets a non-negative value (bitsandbytes' sign correction of the first moment). Overwrites x
// with x / absmax. A block of zeros gets absmax 0.
void quantize(at::Tensor& x, const at::Tensor& midpoints, double largest_negative, const at::Tensor& codes,
              const at::Tensor& absmax);
// map[codes] · absmax of each code's block: (k,) fp32.
at::Tensor dequantize(const at::Tensor& codes, const at::Tensor& absmax, const at::Tensor& map);
}  // namespace blockwise

class AdamW8bit : public Optimizer {
 public:
  AdamW8bit(std::vector<at::Tensor> params, OptimizerOptions options);
  void step_one(size_t index) override;
  void reset() override;
  int64_t state_bytes() const override;

 private:
  struct State {
    bool quantized = false;
    at::Tensor state1, state2;  // uint8 codes (n,), or fp32 moments (n,) below kMin8bitSize
    at::Tensor absmax1, absmax2;  // (ceil(n/256),) fp32; undefined for fp32 moments
    int64_t step = 0;
  };
  // `decayed`: the parameter is in the Trainer's decayed group (Optimizer::set_decays).
  void step_chunk(State& s, const at::Tensor& param, const at::Tensor& grad, int64_t begin, int64_t length,
                  bool decayed) const;

  OptimizerOptions options_;
  std::vector<State> state_;
  at::Tensor map1_, map2_, midpoints1_, midpoints2_;  // signed (first moment), unsigned (second)
  double largest_negative1_ = 0;
};

}  // namespace accumbench
