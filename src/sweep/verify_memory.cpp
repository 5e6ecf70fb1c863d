// verify's own memory (verify.hpp): predicted before anything is allocated, so that a workload the
// machine cannot hold is refused with a sentence instead of the kernel's out-of-memory killer (a
// verify of qwen2.5-0.5b at T=32, batch 2 was killed after 77 s on a 24 GiB machine: about 20 GiB of
// fp64 copies on top of the step). No LibTorch: plan arithmetic and parameter counts.
#include <algorithm>

#include "accumbench/error.hpp"
#include "accumbench/model_config.hpp"
#include "accumbench/units.hpp"
#include "accumbench/verify.hpp"
#include "plan/block_tensors.hpp"

namespace accumbench {

VerifyMemory verify_memory(const ModelConfig& model, PlanOptions plan, const WorkloadOptions& w, int world_size) {
  VerifyMemory m;
  // The reference: the whole batch in one micro-step, plain loss head, in every process alone.
  plan.batch = w.batch;
  SplitConfig reference;
  reference.micro_batch = w.batch;
  reference.accum_steps = 1;
  reference.precision = w.precisions.empty() ? Precision::kFp32 : w.precisions.front();
  m.step_bytes = plan_memory(model, plan, reference).peak_bytes;
  // The splits run on a rank's share (with the all-reduce buckets above one process).
  plan.batch = sequences_per_rank(w.batch, world_size);
  plan.world_size = world_size;
  for (const SplitConfig& split : split_grid(w, world_size)) {
    m.step_bytes = std::max(m.step_bytes, plan_memory(model, plan, split).peak_bytes);
  }
  const int64_t base = parameter_count(model);
  const int64_t adapters = lora_parameter_count(model, w.lora);
  const int64_t all = base + adapters;
  const int64_t trainable = w.lora.enabled() ? adapters : all;
  // run_verify's `initial`: every parameter cloned, the base in its storage dtype, adapters fp32.
  m.initial_copy_bytes = base * compute_bytes(w.weights_dtype) + adapters * 4;
  // clone_to_cpu_double: the initial weights; the reference's gradients (of what trains) and
  // weights; one split's, alive while compared; and compare()'s temporaries for the largest
  // tensor (the difference, its square, the reference's update).
  m.snapshot_bytes = 8 * (3 * all + 2 * trainable) + 3 * 8 * plan_detail::largest_parameter_numel(model);
  return m;
}

void require_verify_fits(const VerifyMemory& m, const std::string& model, bool cuda, int64_t device_bytes,
                         int64_t host_available_bytes) {
  const std::string fix =
      "; verify a smaller model with the same options (what it checks does not depend on the model's size)";
  if (cuda && device_bytes > 0 && m.step_bytes + m.initial_copy_bytes > device_bytes) {
    throw UserError("verify of " + model + " needs about " + format_bytes(m.step_bytes + m.initial_copy_bytes) +
                    " of device memory (the whole batch in one micro-step " + format_bytes(m.step_bytes) +
                    ", a copy of the initial weights " + format_bytes(m.initial_copy_bytes) + "), more than the " +
                    format_bytes(device_bytes) + " of the device" + fix);
  }
  const int64_t host = m.host_bytes(cuda);
  if (host_available_bytes > 0 && host > host_available_bytes) {
    throw UserError("verify of " + model + " needs about " + format_bytes(host) + " of host memory (fp64 copies of the " +
                    "weights and gradients it compares " + format_bytes(m.snapshot_bytes) +
                    (cuda ? std::string() : ", the whole batch in one micro-step " + format_bytes(m.step_bytes) +
                                                 ", a copy of the initial weights " +
                                                 format_bytes(m.initial_copy_bytes)) +
                    "), more than the " + format_bytes(host_available_bytes) + " available" + fix);
  }
}

}  // namespace accumbench
