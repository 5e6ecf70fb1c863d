// The measured side of the plan: one real optimizer step through the Trainer, traced by the same
// StepTracer and memory probe as the sweep, and the calibration through two such probes.
#include <torch/torch.h>

#include <algorithm>

#include "accumbench/data.hpp"
#include "accumbench/engine.hpp"
#include "accumbench/models.hpp"
#include "accumbench/plan.hpp"
#include "accumbench/trace.hpp"

namespace accumbench {

int64_t measure_step_peak(const ModelConfig& cfg, const PlanOptions& options, const SplitConfig& split,
                          const std::string& device_name, std::vector<PhaseSpan>* timeline) {
  const c10::Device device = resolve_device(device_name);
  MemoryProbe memory(device);
  memory.empty_cache();
  // Everything from here on is the step's: weights, moments, token batches, activations.
  const int64_t baseline_bytes = memory.allocated_bytes();
  int64_t peak_bytes = 0;
  {
    TrainOptions train_options;
    train_options.precision = split.precision;
    train_options.optimizer.kind = options.optimizer;
    train_options.optimizer.max_grad_norm = options.max_grad_norm;
    LanguageModel model = build_model(cfg, /*seed=*/0);
    configure_training(*model, options.weights_dtype, options.lora);
    Trainer trainer(model, device, train_options);
    DataOptions data_options =
        data_options_for(cfg.vocab_size, options.seq_len, split.micro_batch * split.accum_steps, device.is_cuda());
    data_options.distinct_batches = options.token_batches;
    const StepBatches data(make_synthetic_batches(data_options));
    const StepOptions step_options = step_options_for(split, LossNormalization::kToken, options.loss_chunk_tokens);
    StepTracer tracer(device, &memory);
    // The first step is a warmup (lazy caches, the rotary table), as in the sweep.
    for (int i = 0; i < 2; ++i) {
      // Live-block snapshots (CountingCpuAllocator::track_live_blocks) are of the measured step.
      if (i == 1 && !device.is_cuda()) CountingCpuAllocator::install().reset_live_snapshots();
      tracer.start_step();
      trainer.step(data.batch(i), step_options, &tracer);
      tracer.finish_step();
    }
    for (const auto& span : tracer.timeline()) peak_bytes = std::max(peak_bytes, span.peak_bytes);
    if (timeline != nullptr) {
      *timeline = tracer.timeline();
      for (auto& span : *timeline) {
        span.bytes_at_start -= baseline_bytes;
        span.bytes_at_end -= baseline_bytes;
        span.peak_bytes -= baseline_bytes;
      }
    }
  }
  memory.empty_cache();
  return peak_bytes - baseline_bytes;
}

Calibration calibrate(const ModelConfig& cfg, const PlanOptions& options, const SplitConfig& split,
                      const std::string& device, int64_t micro_batch_a, int64_t micro_batch_b) {
  // Each probe keeps the split's pattern: accumulation (gradients alive in the later
  // micro-steps) or not, and the same knobs; two micro-steps stand for any accumulation.
  auto probe = [&](int64_t micro, int64_t* predicted) {
    SplitConfig s = split;
    s.micro_batch = micro;
    s.accum_steps = split.accum_steps > 1 ? 2 : 1;
    PlanOptions o = options;
    o.batch = s.micro_batch * s.accum_steps;
    // The probe's step runs full rows of synthetic tokens: its prediction must be of full rows
    // too, or the fit would take the real data's shorter (padded, packed) rows for the plan's
    // error (a lengths file at --padding longest was calibrated to 3.2x its measured peak). The
    // correction then applies to the plan of the real rows.
    o.activation_seq_len = 0;
    o.worst_micro_batch.clear();
    o.packed_documents = false;
    o.grouped_lengths.clear();  // full rows in any order
    *predicted = plan_memory(cfg, o, s).peak_bytes;
    return measure_step_peak(cfg, o, s, device);
  };
  int64_t predicted_a = 0, predicted_b = 0;
  const int64_t measured_a = probe(micro_batch_a, &predicted_a);
  const int64_t measured_b = probe(micro_batch_b, &predicted_b);
  return fit_calibration(micro_batch_a, measured_a, predicted_a, micro_batch_b, measured_b, predicted_b);
}

}  // namespace accumbench
