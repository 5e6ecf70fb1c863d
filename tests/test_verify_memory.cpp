// verify's own memory (src/sweep/verify_memory.cpp): the prediction, and the sentence that
// replaces the out-of-memory killer.
#include <gtest/gtest.h>

#include "accumbench/error.hpp"
#include "accumbench/model_config.hpp"
#include "accumbench/verify.hpp"

#include <nlohmann/json.hpp>

#include <limits>

#include "accumbench/report.hpp"

namespace ab = accumbench;

namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

// verify on the CPU with LibTorch 1.x, as sweep_plan_options gives it there.
ab::PlanOptions cpu_plan(int64_t seq_len) {
  ab::PlanOptions o;
  o.seq_len = seq_len;
  o.cpu = true;
  o.token_batches = 1;
  o.libtorch_major = 1;
  return o;
}

ab::WorkloadOptions workload(const std::string& model, int64_t seq_len, int64_t batch) {
  ab::WorkloadOptions w = ab::workload_defaults(ab::Command::kVerify);
  w.data.lengths = ab::LengthMode::kVariable;  // unequal lengths: the normalization shows
  w.model.preset = model;
  w.seq_len = seq_len;
  w.batch = batch;
  return w;
}

}  // namespace

// The fp64 copies: initial weights, the reference's gradients and weights, one split's, and three
// temporaries of the largest tensor (GPT-2's token embedding, 50257 x 768).
TEST(VerifyMemory, SnapshotsOfGpt2) {
  const ab::ModelConfig& m = ab::find_preset("gpt2-124m");
  const ab::VerifyMemory v = ab::verify_memory(m, cpu_plan(32), workload("gpt2-124m", 32, 2), 1);
  const int64_t p = ab::parameter_count(m);
  EXPECT_EQ(v.snapshot_bytes, 8 * 5 * p + 3 * 8 * int64_t{50257} * 768);
  EXPECT_EQ(v.initial_copy_bytes, 4 * p);
  // The step of the whole batch of 2 at T=32: weights, AdamW's two moments, gradients (4 x P x 4
  // bytes) and little else.
  EXPECT_GT(v.step_bytes, 16 * p);
  EXPECT_LT(v.step_bytes, 16 * p + kGiB / 2);
  // `/usr/bin/time -v accumbench verify --model gpt2-124m --seq-len 32 --batch 2 --device cpu
  // --threads 2` on 2026-11-30 (this machine, LibTorch 1.13): maximum resident set 9007212 KiB,
  // 8.59 GiB, which also holds LibTorch's and OpenBLAS's own buffers; predicted 8855895040 bytes,
  // 8.25 GiB (-4 %). The prediction must not be above it by more than 5 % nor below it by more
  // than 10 %.
  const double measured = 9007212.0 * 1024;
  const double predicted = static_cast<double>(v.host_bytes(/*cuda=*/false));
  EXPECT_GT(predicted, 0.90 * measured) << predicted / kGiB << " GiB";
  EXPECT_LT(predicted, 1.05 * measured) << predicted / kGiB << " GiB";
}

// With LoRA the gradients are the adapters' only, and the frozen base is copied in its dtype.
TEST(VerifyMemory, LoraCopiesLess) {
  const ab::ModelConfig& m = ab::find_preset("qwen2.5-0.5b");
  ab::WorkloadOptions w = workload("qwen2.5-0.5b", 32, 2);
  w.lora.rank = 8;
  w.weights_dtype = ab::Precision::kBf16;
  const ab::VerifyMemory v = ab::verify_memory(m, cpu_plan(32), w, 1);
  const int64_t base = ab::parameter_count(m), adapters = ab::lora_parameter_count(m, w.lora);
  EXPECT_EQ(v.initial_copy_bytes, 2 * base + 4 * adapters);
  EXPECT_EQ(v.snapshot_bytes, 8 * (3 * (base + adapters) + 2 * adapters) + 3 * 8 * int64_t{151936} * 896);
}

// The case: qwen2.5-0.5b at T=32, batch 2 on a 24 GiB machine (about 21.5 GiB available)
// is refused in one sentence, with the sizes; on a device, the device's part is judged apart.
TEST(VerifyMemory, RefusesWhatTheMachineCannotHold) {
  const ab::ModelConfig& m = ab::find_preset("qwen2.5-0.5b");
  const ab::VerifyMemory v = ab::verify_memory(m, cpu_plan(32), workload("qwen2.5-0.5b", 32, 2), 1);
  EXPECT_GT(v.host_bytes(false), 30 * kGiB);
  try {
    ab::require_verify_fits(v, "qwen2.5-0.5b", false, 0, 21 * kGiB);
    ADD_FAILURE() << "not refused";
  } catch (const ab::UserError& error) {
    const std::string text = error.what();
    EXPECT_EQ(text.rfind("verify of qwen2.5-0.5b needs about ", 0), 0u) << text;
    EXPECT_NE(text.find("of host memory (fp64 copies of the weights and gradients it compares "), std::string::npos);
    EXPECT_NE(text.find("more than the 21.00 GiB available; verify a smaller model"), std::string::npos) << text;
  }
  EXPECT_NO_THROW(ab::require_verify_fits(v, "qwen2.5-0.5b", false, 0, 64 * kGiB));
  EXPECT_NO_THROW(ab::require_verify_fits(v, "qwen2.5-0.5b", false, 0, 0));  // unknown: not judged
  // On CUDA the host holds only the fp64 copies; the device holds the step and the copy.
  EXPECT_NO_THROW(ab::require_verify_fits(v, "qwen2.5-0.5b", true, 24 * kGiB, v.snapshot_bytes + 1));
  EXPECT_THROW(ab::require_verify_fits(v, "qwen2.5-0.5b", true, v.step_bytes, 64 * kGiB), ab::UserError);
}

// verify --json (src/report/verify_json.cpp): what no number is stays null (JSON has no NaN), an
// optimizer-in-backward split's gradients were not compared, and the verdict says what the run
// proved: fail beats everything, a signal or a file written while jobs still run is incomplete.
TEST(VerifyJson, NullsAndVerdicts) {
  const ab::WorkloadOptions w = workload("gpt2-tiny", 32, 4);
  ab::VerifyResult r;
  r.model = "gpt2-tiny";
  r.lengths = ab::LengthMode::kVariable;
  r.reference_loss = std::numeric_limits<double>::quiet_NaN();
  ab::VerifySplit oib;
  oib.config.micro_batch = 4;
  oib.config.optimizer_in_backward = true;
  oib.gradients_compared = false;
  oib.loss = 6.5;
  oib.pass = true;
  r.splits.push_back(oib);
  const nlohmann::json one = nlohmann::json::parse(ab::verify_json(w, {r}, true));
  const nlohmann::json& job = one["jobs"][0];
  EXPECT_EQ(one["verdict"], "pass");
  EXPECT_TRUE(job["reference_loss"].is_null());
  EXPECT_TRUE(job["reference_grad_norm"].is_null());
  EXPECT_TRUE(job["splits"][0]["rel_l2_grad_error"].is_null());
  EXPECT_EQ(job["splits"][0]["split"], "4×1 oib");
  EXPECT_EQ(job["splits"][0]["loss"], 6.5);
  // One micro-step of the whole batch accumulates nothing: the normalization went unchecked.
  EXPECT_EQ(job["normalization_checked"], false);
  EXPECT_EQ(nlohmann::json::parse(ab::verify_json(w, {r}, false))["verdict"], "incomplete");
  ab::VerifyResult stopped = r;
  stopped.interruption.signal = "SIGINT";
  stopped.interruption.splits_not_run = {"1×4"};
  const nlohmann::json cut = nlohmann::json::parse(ab::verify_json(w, {stopped}, true));
  EXPECT_EQ(cut["verdict"], "incomplete");
  EXPECT_EQ(cut["jobs"][0]["interrupted_by"], "SIGINT");
  EXPECT_EQ(cut["jobs"][0]["splits_not_verified"], nlohmann::json::array({"1×4"}));
  ab::VerifyResult failed = r;
  failed.all_pass = false;
  EXPECT_EQ(nlohmann::json::parse(ab::verify_json(w, {stopped, failed}, false))["verdict"], "fail");
  EXPECT_EQ(nlohmann::json::parse(ab::verify_json(w, {}, true))["verdict"], "incomplete");
  // An error that ended the run (a data-parallel peer gone) is said, and nothing passes with it.
  EXPECT_TRUE(one["error"].is_null());
  const nlohmann::json lost = nlohmann::json::parse(ab::verify_json(w, {r}, true, "rank 1 is gone"));
  EXPECT_EQ(lost["error"], "rank 1 is gone");
  EXPECT_EQ(lost["verdict"], "incomplete");
}
