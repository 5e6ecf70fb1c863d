// Internal: a frozen block linear's weight stored as bitsandbytes stores it under QLoRA, and the
// linear that runs on it. Each forward and each backward dequantises the weight into a transient
// tensor in the compute dtype, uses it for one matrix product and frees it: bitsandbytes'
// MatMul4Bit (autograd/_functions.py) does the same with dequantize_4bit (forward, for more than
// a few rows, through backends/cuda/ops.py _dequant_linear_fallback; backward: grad_A =
// grad_output · dequantize_4bit(B)). There is no weight gradient; the input's flows through the
// dequantised weight.
//
//   QuantizedWeight q = quantize_weight(linear->weight, BaseQuant::kNf4, /*double_quant=*/true);
//   at::Tensor w = dequantize_weight(q, at::kBFloat16);              // (out, in)
//   at::Tensor y = quantized_linear(x, q, bias, at::kBFloat16);       // (..., in) -> (..., out)
//
// Our dequantisation is built from LibTorch operations (chunk by chunk, so that its scratch stays
// small), not bitsandbytes' fused kernels: its memory is modelled, its time only approximate.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>

#include "accumbench/options.hpp"

namespace accumbench {

struct QuantizedWeight {
  BaseQuant kind = BaseQuant::kNone;
  bool double_quant = false;
  int64_t out = 0, in = 0;
  at::Tensor codes;   // nf4: (ceil(n/2),) uint8, two codes a byte, the first in the high nibble; int8: (out, in) int8
  at::Tensor absmax;  // nf4: (ceil(n/64),) fp32, or uint8 with double quant; int8: SCB, (out,) fp32
  at::Tensor code;    // nf4: the 16 NF4 values (fp32), as every QuantState holds them
  // Double quant: the nested QuantState (fp32 absmax per 256 absmax values, the dynamic map) and
  // the offset subtracted before it (fp32 scalar).
  at::Tensor nested_absmax, nested_code, offset;

  void to(c10::Device device);
  int64_t bytes() const;  // what is stored, for the tests against quantized_weight_bytes
};

// Quantises an (out, in) floating-point weight (any dtype; computed in fp32 as bitsandbytes does).
QuantizedWeight quantize_weight(const at::Tensor& weight, BaseQuant kind, bool double_quant);
// The (out, in) weight in `dtype`.
at::Tensor dequantize_weight(const QuantizedWeight& q, at::ScalarType dtype);
// x · dequant(W)ᵀ + bias, in `dtype` (x and bias are cast to it). Saves nothing of x for nf4
// (MatMul4Bit keeps only the packed weight); int8 keeps x, as MatMul8bitLt keeps its A.
at::Tensor quantized_linear(const at::Tensor& x, const QuantizedWeight& q, const at::Tensor& bias, at::ScalarType dtype);

// bitsandbytes' signed 8-bit dynamic map (functional.py create_dynamic_map(True, 7, 8)), the
// code of double quant's nested quantisation: 256 sorted fp32 values.
at::Tensor dynamic_map();

}  // namespace accumbench
