// Test helper (tests/test_lora.cpp, tests/test_qlora.cpp): the plan's peak against the counting
// allocator's for one split of a preset at T=64 on the CPU, the LibTorch 1.13 case (explicit
// attention). Prints one line tagged `tag` and returns (predicted − measured) / measured.
#pragma once

#include <cstdint>
#include <iostream>
#include <string>

#include <ATen/Context.h>

#include "accumbench/model_config.hpp"
#include "accumbench/plan.hpp"

namespace accumbench_test {

// LibTorch 1.13 hands bf16 matmuls to oneDNN on AVX-512 CPUs, and each oneDNN matmul allocates a
// scratch buffer for its call that the plan does not model (README, Known limits; sweep and plan
// print a note on such CPUs). The plan's terms were read off the GEMM every CPU runs with oneDNN
// off, so these checks measure that one, as accumbench_plan_properties does (on an AMX CPU the
// scratch is 20–31 KB at 1x2 here, -3.1 %).
class OneDnnOff {
 public:
  OneDnnOff() : was_(at::globalContext().userEnabledMkldnn()) { at::globalContext().setUserEnabledMkldnn(false); }
  ~OneDnnOff() { at::globalContext().setUserEnabledMkldnn(was_); }
  OneDnnOff(const OneDnnOff&) = delete;
  OneDnnOff& operator=(const OneDnnOff&) = delete;

 private:
  bool was_;
};

inline double lora_plan_error(const std::string& tag, const accumbench::ModelConfig& cfg, accumbench::Precision precision,
                              accumbench::Precision weights, const accumbench::LoraOptions& lora, int64_t micro,
                              int64_t accum, bool checkpointing, bool optimizer_in_backward = false,
                              accumbench::OptimizerKind optimizer = accumbench::OptimizerKind::kAdamW) {
  namespace ab = accumbench;
  const std::string& preset = cfg.name;
  ab::PlanOptions o;
  o.optimizer = optimizer;
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
  s.optimizer_in_backward = optimizer_in_backward;
  const int64_t predicted = ab::plan_memory(cfg, o, s).peak_bytes;
  const OneDnnOff gemm;
  const int64_t measured = ab::measure_step_peak(cfg, o, s, "cpu");
  const double error = static_cast<double>(predicted - measured) / static_cast<double>(measured);
  std::cout << "[ " << tag << " ] " << preset << " " << ab::to_string(precision) << " weights " << ab::to_string(weights)
            << " r" << lora.rank;
  if (lora.quantized()) std::cout << " " << ab::to_string(lora.base_quant) << (lora.double_quant ? "+dq" : "");
  std::cout << " " << micro << "x" << accum << (checkpointing ? " ckpt" : "") << (optimizer_in_backward ? " oib" : "")
            << " " << ab::to_string(optimizer) << " predicted " << predicted
            << " measured " << measured << " error " << 100 * error << " %\n";
  return error;
}

inline double lora_plan_error(const std::string& tag, const char* preset, accumbench::Precision precision,
                              accumbench::Precision weights, const accumbench::LoraOptions& lora, int64_t micro,
                              int64_t accum, bool checkpointing) {
  return lora_plan_error(tag, accumbench::find_preset(preset), precision, weights, lora, micro, accum, checkpointing);
}

}  // namespace accumbench_test
