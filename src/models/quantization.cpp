// QLoRA's storage, shape side (model_config.hpp): the bytes bitsandbytes keeps for a quantised
// frozen weight and the dequantisation's transient, for the plan and the tests. No LibTorch.
//
// Sources (bitsandbytes-foundation/bitsandbytes at 95f9af3, Aug 2026):
// - bitsandbytes/functional.py quantize_4bit: blocksize 64 by default, absmax per block (fp32);
//   with compress_statistics (transformers' bnb_4bit_use_double_quant) offset = absmax.mean()
//   and quantize_blockwise(absmax - offset, blocksize=256) with the signed dynamic map, whose
//   QuantState keeps `code.to(device, copy=True)`: a 256-value fp32 copy per weight.
// - get_4bit_type("nf4"): the 16 values below (create_normal_map(0.9677083, True)), a new
//   16-element fp32 tensor per quantize_4bit call (QuantState.code).
// - backends/default/ops.py quantize_4bit: codes packed two per byte, the first element in the
//   high nibble ((q[::2] << 4) | q[1::2]), the tail padded to an even count: ceil(n/2) bytes.
// - int8_vectorwise_quant: the int8 weight and row_stats = max |row|, fp32 per row (SCB).
#include <algorithm>

#include "accumbench/model_config.hpp"

namespace accumbench {

const float kNf4Values[16] = {-1.0f,
                              -0.6961928009986877f,
                              -0.5250730514526367f,
                              -0.39491748809814453f,
                              -0.28444138169288635f,
                              -0.18477343022823334f,
                              -0.09105003625154495f,
                              0.0f,
                              0.07958029955625534f,
                              0.16093020141124725f,
                              0.24611230194568634f,
                              0.33791524171829224f,
                              0.44070982933044434f,
                              0.5626170039176941f,
                              0.7229568362236023f,
                              1.0f};

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

QuantizedWeightBytes quantized_weight_bytes(int64_t out, int64_t in, const LoraOptions& lora) {
  QuantizedWeightBytes bytes;
  const int64_t n = out * in;
  if (lora.base_quant == BaseQuant::kInt8) {
    bytes.codes = n;        // CB, int8
    bytes.absmax = out * 4;  // SCB, fp32 per row
    return bytes;
  }
  if (lora.base_quant != BaseQuant::kNf4) return bytes;
  const int64_t blocks = ceil_div(n, kNf4Block);
  bytes.codes = ceil_div(n, 2);
  bytes.code_table = 16 * 4;
  if (lora.double_quant) {
    bytes.absmax = blocks;  // uint8 codes of absmax − offset
    bytes.nested = ceil_div(blocks, kNestedBlock) * 4 + 4 + 256 * 4;
  } else {
    bytes.absmax = blocks * 4;
  }
  return bytes;
}

int64_t quantized_base_bytes(const ModelConfig& cfg, const LoraOptions& lora) {
  int64_t per_block = 0;
  for (const BlockLinear& l : block_linears(cfg)) per_block += quantized_weight_bytes(l.out, l.in, lora).total();
  return cfg.n_layers * per_block;
}

int64_t block_linear_weight_numel(const ModelConfig& cfg) {
  int64_t per_block = 0;
  for (const BlockLinear& l : block_linears(cfg)) per_block += l.in * l.out;
  return cfg.n_layers * per_block;
}

int64_t dequant_chunk_codes(int64_t numel) {
  // At least 1024 codes (2048 weights) per chunk and at most 16 chunks per weight, so that a large
  // weight takes few kernel launches and a small one little scratch.
  const int64_t codes = ceil_div(numel, 2);
  const int64_t chunk = std::max<int64_t>(1024, ceil_div(codes, 16));
  return std::min(ceil_div(chunk, 32) * 32, ceil_div(codes, 32) * 32);
}

int64_t dequantized_weight_bytes(int64_t out, int64_t in, int64_t compute_bytes, const LoraOptions& lora) {
  const int64_t n = out * in;
  if (lora.base_quant == BaseQuant::kInt8) {
    // CB.to(dtype) then .mul_(SCB/127) in place: the weight, and the (out,) scale's product.
    return n * compute_bytes + out * 4;
  }
  if (lora.base_quant != BaseQuant::kNf4) return 0;
  const int64_t blocks = ceil_div(n, kNf4Block);
  // dequantize_nf4 (quantized_linear.cpp), in order; the highest of its three moments:
  // code_pairs makes the (256, 2) fp32 table from 256 int64 bytes, their quotient and remainder
  // (int64) and two index_selects (fp32), all alive at its stack, before anything else exists.
  const int64_t pairs = 256 * 2 * 4;
  const int64_t table = 3 * 256 * 8 + 2 * 256 * 4 + pairs;
  // Double quant's absmax in fp32, next to repeat_interleave's int64 index and its fp32 result
  // (256 per nested block), with the table.
  const int64_t nested = lora.double_quant ? pairs + blocks * 4 + ceil_div(blocks, kNestedBlock) * kNestedBlock * (8 + 4) : 0;
  // Per chunk: the codes as int32 indices (4 per code) and the looked-up pairs (2 fp32 per code),
  // next to the weight, the table and, with double quant, the absmax in fp32.
  const int64_t chunks =
      n * compute_bytes + dequant_chunk_codes(n) * (4 + 8) + pairs + (lora.double_quant ? blocks * 4 : 0);
  return std::max({table, nested, chunks});
}

}  // namespace accumbench
