// QLoRA's terms of the memory plan (src/plan, private): the quantised frozen base as stored, the
// parameters PEFT upcasts to fp32, the one weight dequantised at a time, and what LLM.int8 keeps
// for backward. Kept apart from the block tables (block_tensors.hpp) so that each term reads on
// its own; memory_plan.cpp adds them when PlanOptions::lora.quantized().
//
//   quantized_resident(model, options, Table{&plan.resident});
//   int64_t transient = dequant_transient(model, options, /*c=*/2, Table{&plan.dequant_peak});
#pragma once

#include <cstdint>

#include "plan/block_tensors.hpp"

namespace accumbench::plan_detail {

// The resident weights of a quantised base: the block linears as bitsandbytes stores them, and
// every other parameter in fp32 (prepare_model_for_kbit_training's upcast).
void quantized_resident(const ModelConfig& m, const PlanOptions& o, const Table& t);

// One block linear (out × in) dequantised into c-byte elements with its scratch, as
// dequant_transient counts it (on the CPU with int8's fp32 temporaries for a 16-bit c).
int64_t dequantized_linear_bytes(const PlanOptions& o, int64_t out, int64_t in, int64_t c);

// The largest block linear dequantised into c-byte elements, with its scratch: alive in every
// forward and backward of that linear (src/models/quantized_linear.cpp). Returns its bytes.
int64_t dequant_transient(const ModelConfig& m, const PlanOptions& o, int64_t c, const Table& t);

// LLM.int8 keeps each linear's input for backward (MatMul8bitLt's A): under autocast each linear's
// own cast (b·T·in·c); without it the input itself, extra only where no adapter of its group keeps
// it already. For `layers` blocks of N = b·T rows. Nothing for nf4.
void int8_saved_inputs(const ModelConfig& m, const PlanOptions& o, int64_t N, int64_t layers, const Dtypes& dt,
                       const Table& t);
// One block's int8 kept inputs (`block0`: block 0's, without what its frozen prefix,
// dt.frozen_prefix, keeps none of).
int64_t int8_block_inputs(const ModelConfig& m, const PlanOptions& o, int64_t N, const Dtypes& dt, bool block0);
// Of one block's int8 kept inputs, the bytes that are the block forward's own locals (the input
// tensor itself, no cast, where the block holds it anyway): a moment inside the block counts them
// among its locals already.
int64_t int8_kept_locals(const ModelConfig& m, const PlanOptions& o, int64_t N, const Dtypes& dt, bool block0 = false);
// What a forward moment of the block (ForwardMoment::groups_run: the linear groups whose base has
// run by then) has of the block's int8 kept inputs beyond its own locals: the kept inputs of the
// groups run, less int8_kept_locals' share of them.
int64_t int8_kept_at(const ModelConfig& m, const PlanOptions& o, int64_t N, const Dtypes& dt, int groups_run,
                     bool block0 = false);

// Of one block's int8 kept inputs, those of the linears after the attention's product (its output
// projection and the MLP's): released by the time the block's backward reaches the softmax's.
// Of those, the MLP output projection's (when no adapter keeps the same tensor): released by its node.
int64_t int8_mlp_out_input(const ModelConfig& m, const PlanOptions& o, int64_t N, const Dtypes& dt);
int64_t int8_inputs_after_attention(const ModelConfig& m, const PlanOptions& o, int64_t N, const Dtypes& dt,
                                    bool block0 = false);

}  // namespace accumbench::plan_detail
