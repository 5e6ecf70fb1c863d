// Test helper (tests/test_lora.cpp, tests/test_qlora.cpp): the plan's peak against the counting
// allocator's for one split of a preset at T=64 on the CPU, the LibTorch 1.13 case (explicit
// attention). Prints one line tagged `tag` and returns (predicted − measured) / measured.
#pragma once

#include <cstdint>
#include <iostream>
#include <string>

#include "accumbench/model_config.hpp"
#include "accumbench/plan.hpp"

namespace accumbench_test {

inline double lora_plan_error(const std::string& tag, const char* preset, accumbench::Precision precision,
                              accumbench::Precision weights, const accumbench::LoraOptions& lora, int64_t micro,
                              int64_t accum, bool checkpointing) {
  namespace ab = accumbench;
  const ab::ModelConfig cfg = ab::find_preset(preset);
  ab::PlanOptions o;
  o.seq_len = 64;
  o.batch = micro * accum;
  o.attention = ab::AttentionKind::kExplicit;
  o.cpu = true;
  o.weights_dtype = weights;
  o.lora = lora;
  ab::SplitConfig s;
  s.micro_batch = micro;
  s.accum_steps = accum;
  s.precision = precision;
  s.activation_checkpointing = checkpointing ? ab::Checkpointing::kBlocks : ab::Checkpointing::kNone;
  const int64_t predicted = ab::plan_memory(cfg, o, s).peak_bytes;
  const int64_t measured = ab::measure_step_peak(cfg, o, s, "cpu");
  const double error = static_cast<double>(predicted - measured) / static_cast<double>(measured);
  std::cout << "[ " << tag << " ] " << preset << " " << ab::to_string(precision) << " weights " << ab::to_string(weights)
            << " r" << lora.rank;
  if (lora.quantized()) std::cout << " " << ab::to_string(lora.base_quant) << (lora.double_quant ? "+dq" : "");
  std::cout << " " << micro << "x" << accum << (checkpointing ? " ckpt" : "") << " predicted " << predicted
            << " measured " << measured << " error " << 100 * error << " %\n";
  return error;
}

}  // namespace accumbench_test
