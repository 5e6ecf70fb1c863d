// The tracer's own cost: the same training steps with the phase tracer on and off, interleaved
// (A B A B ...) so drift affects both alike; prints the ratio of median step times. A benchmark,
// not a test: the goal (< 1 %) is read off its output, never asserted on a noisy machine.
//
//   build/tracer_overhead [--model gpt2-mini] [--seq-len 128] [--batch 8] [--micro-batch 1]
//                         [--steps 20] [--device auto]
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <chrono>
#include <iomanip>
#include <iostream>

#include "accumbench/cpu_runtime.hpp"
#include "accumbench/error.hpp"
#include "accumbench/statistics.hpp"
#include "accumbench/sweep.hpp"
#include "accumbench/trace.hpp"
#include "compat/compat.hpp"

namespace ab = accumbench;

int main(int argc, char** argv) {
  ab::use_passive_openmp_wait(argv);
  ab::ModelOptions model;
  int64_t seq_len = 128, batch = 8, micro_batch = 1;
  int steps = 20;
  std::string device_name = "auto", precision = "fp32";
  CLI::App app{"tracer overhead: traced vs untraced training steps"};
  app.add_option("--model", model.preset)->capture_default_str();
  app.add_option("--seq-len", seq_len)->capture_default_str();
  app.add_option("--batch", batch)->capture_default_str();
  app.add_option("--micro-batch", micro_batch, "small micro-batches have the most phases per second")->capture_default_str();
  app.add_option("--steps", steps, "steps of each kind")->capture_default_str();
  app.add_option("--device", device_name)->capture_default_str();
  app.add_option("--precision", precision)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    ab::configure_threads(0);
    const c10::Device device = ab::resolve_device(device_name);
    ab::MemoryProbe memory(device);
    const ab::ModelConfig cfg = ab::resolve_model(model);
    const ab::StepBatches data(ab::make_synthetic_batches(ab::data_options_for(cfg.vocab_size, seq_len, batch, device.is_cuda())));
    ab::TrainOptions train;
    train.precision = ab::precision_from_string(precision);
    ab::Trainer trainer(ab::build_model(cfg, 0), device, train);
    ab::StepOptions step;
    step.micro_batch = micro_batch;
    ab::StepTracer tracer(device, &memory);

    auto untraced = [&](int i) {
      if (device.is_cuda()) ab::compat::cuda_synchronize(device.index());
      const auto start = std::chrono::steady_clock::now();
      trainer.step(data.batch(i), step, nullptr);
      if (device.is_cuda()) ab::compat::cuda_synchronize(device.index());
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    auto traced = [&](int i) {
      tracer.start_step();
      trainer.step(data.batch(i), step, &tracer);
      return tracer.finish_step().step_seconds;
    };
    for (int i = 0; i < 2; ++i) {  // warmup both paths
      untraced(i);
      traced(i);
    }
    std::vector<double> off, on;
    for (int i = 0; i < steps; ++i) {
      off.push_back(untraced(i));
      on.push_back(traced(i));
    }
    const double ratio = ab::median(on) / ab::median(off);
    std::cout << std::fixed << std::setprecision(5) << cfg.name << ", T=" << seq_len << ", " << micro_batch << "×"
              << batch / micro_batch << ", " << device.str() << ", " << steps << " steps each\n"
              << "untraced median step " << ab::median(off) << " s (cv " << std::setprecision(3) << ab::cv(off) << ")\n"
              << std::setprecision(5) << "traced   median step " << ab::median(on) << " s (cv " << std::setprecision(3)
              << ab::cv(on) << ")\n"
              << "ratio traced/untraced " << std::setprecision(4) << ratio << " (goal < 1.01)\n";
  } catch (const ab::UserError& error) {
    std::cerr << "tracer_overhead: error: " << error.what() << "\n";
    return ab::kUserErrorExitCode;
  }
  return 0;
}
