// accumbench: parses the command line and calls the library; nothing else (STYLE.md).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "accumbench/cpu_runtime.hpp"
#include "accumbench/error.hpp"
#include "accumbench/model_config.hpp"
#include "accumbench/plan.hpp"
#include "accumbench/report.hpp"
#include "accumbench/statistics.hpp"
#include "accumbench/sweep.hpp"
#include "accumbench/verify.hpp"

namespace ab = accumbench;

namespace {

bool stdout_is_tty() { return isatty(STDOUT_FILENO) != 0 && std::getenv("NO_COLOR") == nullptr; }
bool stderr_is_tty() { return isatty(STDERR_FILENO) != 0; }

struct OutputFiles {
  std::string json, csv, markdown, html, trace;

  void add_to(CLI::App* command) {
    command->add_option("--json", json, "write the results as JSON (rewritten after every split)");
    command->add_option("--csv", csv, "write one CSV line per split");
    command->add_option("--markdown", markdown, "write a Markdown table (only the columns that vary)");
    command->add_option("--html", html, "write a self-contained HTML report with charts");
    command->add_option("--trace", trace, "write a Chrome/Perfetto trace (one process per split)");
  }
  void write(const ab::SweepResult& result) const {
    if (!json.empty()) ab::write_file_atomically(json, ab::to_json(result));
    write_with(ab::CsvReporter(), csv, result);
    write_with(ab::MarkdownReporter(), markdown, result);
    write_with(ab::HtmlReporter(), html, result);
    write_with(ab::ChromeTraceReporter(), trace, result);
  }

 private:
  static void write_with(const ab::Reporter& reporter, const std::string& path, const ab::SweepResult& result) {
    if (path.empty()) return;
    std::ostringstream out;
    reporter.report(result, out);
    ab::write_file_atomically(path, out.str());
  }
};

// Options shared by sweep, verify and plan: which model (and, where values matter, the seed of
// its random weights and tokens; plan's memory does not depend on them).
void add_model_options(CLI::App* command, ab::ModelOptions& model, bool seed = true) {
  command->add_option("--model", model.preset, "model preset (see `accumbench models`)")->capture_default_str();
  command->add_option("--hf-config", model.hf_config,
                      "Hugging Face config.json (model_type gpt2, llama, qwen2, mistral); overrides --model");
  if (seed) command->add_option("--seed", model.seed, "seed of the random weights and tokens")->capture_default_str();
}

void add_optimizer_options(CLI::App* command, ab::OptimizerOptions& o) {
  command->add_option("--lr", o.lr, "AdamW learning rate")->capture_default_str();
  command->add_option("--beta1", o.beta1, "AdamW beta1")->capture_default_str();
  command->add_option("--beta2", o.beta2, "AdamW beta2")->capture_default_str();
  command->add_option("--adam-eps", o.eps, "AdamW epsilon")->capture_default_str();
  command->add_option("--weight-decay", o.weight_decay, "AdamW decoupled weight decay")->capture_default_str();
}

void print_models(std::ostream& out) {
  out << std::left << std::setw(15) << "preset" << std::setw(7) << "family" << std::right << std::setw(7) << "layers"
      << std::setw(8) << "d_model" << std::setw(7) << "heads" << std::setw(9) << "kv_heads" << std::setw(7) << "d_ff"
      << std::setw(8) << "vocab" << std::setw(9) << "max_T" << std::setw(15) << "parameters" << "  published\n";
  for (const auto& m : ab::presets()) {
    out << std::left << std::setw(15) << m.name << std::setw(7) << ab::to_string(m.arch) << std::right << std::setw(7)
        << m.n_layers << std::setw(8) << m.d_model << std::setw(7) << m.n_heads << std::setw(9) << m.n_kv_heads
        << std::setw(7) << m.d_ff << std::setw(8) << m.vocab_size << std::setw(9) << m.max_seq_len << std::setw(15)
        << ab::parameter_count(m) << "  " << (m.published_parameters.empty() ? "(test size)" : m.published_parameters)
        << "\n";
  }
}

void print_progress(const ab::SweepProgress& p) {
  const double done = p.split_index + static_cast<double>(p.step_index) / std::max(1, p.step_count);
  const double remaining = done > 0 ? p.elapsed_seconds * (p.split_count - done) / done : 0;
  std::cerr << "\r\033[K" << "split " << p.split_index + 1 << "/" << p.split_count << ", step " << p.step_index + 1
            << "/" << p.step_count << ", " << std::fixed << std::setprecision(0) << p.elapsed_seconds
            << " s elapsed, ~" << remaining << " s left" << std::defaultfloat << std::flush;
}

int run_plan(const ab::SweepOptions& options, const std::string& precision, const std::string& attention,
             const std::string& memory_text, int64_t micro_batch, bool calibrate, int world_size) {
  const ab::ModelConfig cfg = ab::resolve_model(options.model);
  const ab::PlanTarget target = ab::plan_target(options, ab::DataOptions{}.distinct_batches);
  ab::PlanOptions plan_options = target.options;
  if (calibrate && !target.attached) {
    throw ab::UserError("--calibrate measures two probes on --device " + options.device +
                        ", which is not attached here; drop --calibrate or run the plan on the machine with the GPU");
  }
  if (calibrate && world_size > 1) {
    throw ab::UserError("--calibrate measures probes in one process, which cannot calibrate a --world-size " +
                        std::to_string(world_size) + " plan; drop one of the two options");
  }
  plan_options.batch = ab::sequences_per_rank(options.batch, world_size);  // one rank's share
  plan_options.world_size = world_size;
  if (attention != "auto") plan_options.attention = ab::attention_kind_from_string(attention);
  int64_t memory_bytes = 0;
  if (!memory_text.empty()) {
    memory_bytes = ab::parse_bytes(memory_text);
  } else if (target.cuda && target.attached) {
    memory_bytes = ab::describe_environment(options.device).device_memory_bytes;
  }
  if (!target.attached) {
    std::cout << "planning for " << options.device << ", which is not attached here: PyTorch 2.x on CUDA assumed"
              << (attention == "auto" ? " (flash attention)" : "")
              << (memory_text.empty() ? "; pass --memory to see which splits fit" : "") << "\n\n";
  }
  const std::vector<ab::MemoryPlan> plans =
      ab::plan_splits(cfg, plan_options, precision, options.knobs, options.chunked_loss);
  const ab::MemoryPlan* shown = nullptr;
  for (const auto& p : plans) {
    // The table shown: no knobs, and the chunked loss head when it was asked for.
    const bool plain = !p.split.optimizer_in_backward && p.split.activation_checkpointing == "none" &&
                       p.split.chunked_loss == options.chunked_loss;
    if (!plain) continue;
    if (micro_batch > 0 ? p.split.micro_batch == micro_batch : (memory_bytes == 0 || p.peak_bytes <= memory_bytes)) shown = &p;
  }
  if (micro_batch > 0 && shown == nullptr) {
    throw ab::UserError("--micro-batch " + std::to_string(micro_batch) + " does not divide " +
                        (world_size > 1 ? "the " + std::to_string(plan_options.batch) + " sequences per rank"
                                        : "--batch " + std::to_string(options.batch)) +
                        "; pick a divisor");
  }
  if (shown == nullptr) shown = &plans.front();
  ab::print_plan(*shown, std::cout);
  std::cout << "\nsplits of batch " << options.batch;
  if (world_size > 1) std::cout << " over " << world_size << " data-parallel ranks, " << plan_options.batch << " per rank";
  std::cout << " (" << precision << ", attention " << ab::to_string(plan_options.attention) << "):\n";
  ab::print_split_summary(plans, memory_bytes, std::cout);
  if (memory_bytes > 0) {
    std::cout << "largest micro-batch that fits in " << ab::format_bytes(memory_bytes) << " (with accumulation): "
              << ab::largest_micro_batch(cfg, plan_options, precision, false, memory_bytes) << ", with checkpointing: "
              << ab::largest_micro_batch(cfg, plan_options, precision, true, memory_bytes);
    if (options.chunked_loss) {
      std::cout << ", with the chunked loss: "
                << ab::largest_micro_batch(cfg, plan_options, precision, false, memory_bytes, true)
                << ", with both: " << ab::largest_micro_batch(cfg, plan_options, precision, true, memory_bytes, true);
    }
    std::cout << "\n";
  }
  if (calibrate) {
    std::cout << "\ncalibrated (probes at micro-batches 1 and 2 on " << options.device << "):\n";
    std::vector<ab::Calibration> calibrations;
    for (const auto& p : plans) calibrations.push_back(ab::calibrate(cfg, plan_options, p.split, options.device, 1, 2));
    ab::print_calibrated(plans, calibrations, std::cout);
  }
  return 0;
}

int run(int argc, char** argv) {
  CLI::App app{
      "accumbench: which micro-batch x gradient-accumulation split of your effective batch is fastest,\n"
      "which fit in memory, and why, measured on this device with LibTorch."};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every subcommand");

  // ---- sweep ----
  ab::SweepOptions sweep;
  OutputFiles sweep_files;
  std::string memory_limit, resume_path;
  CLI::App* sweep_cmd = app.add_subcommand("sweep", "measure every micro-batch x accumulation split of one batch");
  add_model_options(sweep_cmd, sweep.model);
  sweep_cmd->add_option("--seq-len", sweep.seq_len, "sequence length T")->capture_default_str();
  sweep_cmd->add_option("--batch", sweep.batch, "effective batch per optimizer step, in sequences")->capture_default_str();
  sweep_cmd->add_option("--micro-batches", sweep.micro_batches, "micro-batch sizes to try (default: every divisor of --batch)")
      ->delimiter(',');
  sweep_cmd->add_option("--device", sweep.device, "auto, cpu, cuda or cuda:N")->capture_default_str();
  sweep_cmd->add_option("--precision", sweep.precisions, "fp32, bf16 (autocast) or fp16 (autocast + loss scaling, CUDA); a list sweeps each")
      ->delimiter(',')->capture_default_str();
  sweep_cmd->add_option("--lengths", sweep.lengths, "fixed, or variable (uniform in [T/4, T], padded)")->capture_default_str();
  sweep_cmd->add_option("--loss-normalization", sweep.loss_normalization, "token (correct) or mean-of-means (the bug)")
      ->capture_default_str();
  sweep_cmd->add_option("--warmup", sweep.warmup, "steps per split before timing (discarded)")->capture_default_str();
  sweep_cmd->add_option("--steps", sweep.steps, "timed steps per split")->capture_default_str();
  sweep_cmd->add_option("--time-budget", sweep.time_budget_seconds, "seconds of timed steps per split (at least --steps)")
      ->capture_default_str();
  sweep_cmd->add_option("--memory-limit", memory_limit, "cap usable memory, e.g. 16GiB (CUDA: allocator fraction; CPU: counting allocator)");
  sweep_cmd->add_flag("--try-predicted-oom", sweep.try_predicted_oom,
                      "run splits that the memory plan predicts will not fit under --memory-limit");
  sweep_cmd->add_flag("--knobs", sweep.knobs, "also sweep activation checkpointing and optimizer-in-backward (at accumulation 1)");
  sweep_cmd->add_flag("--chunked-loss", sweep.chunked_loss,
                      "also run every split with the chunked cross-entropy (no (b*T, V) logits; the head's gradients are "
                      "computed in the forward)");
  sweep_cmd->add_option("--loss-chunk-tokens", sweep.loss_chunk_tokens,
                        "tokens per chunk of the chunked loss (0: at least 1024, at most 16 chunks per micro-batch)")
      ->capture_default_str();
  sweep_cmd->add_flag("--cuda-graphs", sweep.cuda_graphs,
                      "also run every split replayed from CUDA graphs (forward and backward captured once per split; CUDA only)");
  sweep_cmd->add_option("--profile", sweep.profile_dir,
                        "directory: one more step per split under PyTorch's Kineto profiler, saved as <split>.trace.json "
                        "(CUDA, LibTorch 2.x); device busy then comes from the GPU's kernel time");
  sweep_cmd->add_option("--peak-tflops", sweep.peak_tflops, "device peak TFLOP/s for MFU (default: built-in table; none on CPU)");
  sweep_cmd->add_option("--tokens", sweep.token_file, "token file (uint16 or uint32 ids) instead of synthetic tokens");
  sweep_cmd->add_option("--token-bytes", sweep.token_bytes, "bytes per token id in --tokens: 2 or 4")->capture_default_str();
  sweep_cmd->add_option("--threads", sweep.threads, "CPU threads (0: every hardware thread)")->capture_default_str();
  sweep_cmd->add_option("--resume", resume_path, "skip splits already measured in this JSON file (and keep writing it)");
  add_optimizer_options(sweep_cmd, sweep.optimizer);
  sweep_files.add_to(sweep_cmd);

  // ---- verify ----
  ab::VerifyOptions verify;
  CLI::App* verify_cmd = app.add_subcommand("verify", "prove that every split computes the same update as the whole batch");
  add_model_options(verify_cmd, verify.model);
  verify_cmd->add_option("--seq-len", verify.seq_len, "sequence length T")->capture_default_str();
  verify_cmd->add_option("--batch", verify.batch, "effective batch, in sequences")->capture_default_str();
  verify_cmd->add_option("--micro-batches", verify.micro_batches, "micro-batch sizes (default: every divisor of --batch)")
      ->delimiter(',');
  verify_cmd->add_option("--device", verify.device, "auto, cpu, cuda or cuda:N")->capture_default_str();
  verify_cmd->add_option("--precision", verify.precision, "fp32, bf16 or fp16")->capture_default_str();
  verify_cmd->add_option("--lengths", verify.lengths, "fixed or variable")->capture_default_str();
  verify_cmd->add_option("--loss-normalization", verify.loss_normalization, "token or mean-of-means")->capture_default_str();
  verify_cmd->add_flag("--optimizer-in-backward", verify.optimizer_in_backward, "also check 1 x batch with AdamW inside backward");
  verify_cmd->add_flag("--activation-checkpointing", verify.activation_checkpointing, "run the splits with checkpointed blocks");
  verify_cmd->add_flag("--chunked-loss", verify.chunked_loss,
                       "also check every split with the chunked cross-entropy (against the plain loss's reference)");
  verify_cmd->add_option("--loss-chunk-tokens", verify.loss_chunk_tokens,
                         "tokens per chunk of the chunked loss (0: at least 1024, at most 16 chunks per micro-batch)")
      ->capture_default_str();
  verify_cmd->add_flag("--cuda-graphs", verify.cuda_graphs, "also check every split replayed from CUDA graphs (CUDA only)");
  verify_cmd->add_option("--threads", verify.threads, "CPU threads (0: every hardware thread)")->capture_default_str();
  add_optimizer_options(verify_cmd, verify.optimizer);

  // ---- plan ----
  ab::SweepOptions plan;  // model, T, batch, device, precision: the sweep's defaults
  plan.seq_len = 1024;
  plan.batch = 64;
  plan.model.preset = "gpt2-124m";
  std::string plan_precision = "fp32", plan_attention = "auto", plan_memory;
  int64_t plan_micro_batch = 0;
  bool plan_calibrate = false;
  CLI::App* plan_cmd = app.add_subcommand("plan", "predict peak memory per split without running anything (src/plan)");
  add_model_options(plan_cmd, plan.model, /*seed=*/false);
  plan_cmd->add_option("--seq-len", plan.seq_len, "sequence length T")->capture_default_str();
  plan_cmd->add_option("--batch", plan.batch, "effective batch per optimizer step, in sequences")->capture_default_str();
  plan_cmd->add_option("--micro-batch", plan_micro_batch,
                       "split whose table is printed (default: the largest divisor of --batch that fits)");
  plan_cmd->add_option("--precision", plan_precision, "fp32, bf16 or fp16 (autocast)")->capture_default_str();
  plan_cmd->add_option("--attention", plan_attention,
                       "explicit (LibTorch 1.x / CPU) or flash (LibTorch 2.x on CUDA); auto picks from this build and --device")
      ->capture_default_str();
  plan_cmd->add_option("--device", plan.device, "auto, cpu, cuda or cuda:N (attention kind, memory, calibration)")
      ->capture_default_str();
  plan_cmd->add_option("--memory", plan_memory, "device memory to fit in, e.g. 16GiB (default: the CUDA device's own; none on the CPU)");
  plan_cmd->add_flag("--knobs", plan.knobs, "also plan activation checkpointing and optimizer-in-backward (at accumulation 1)");
  plan_cmd->add_flag("--chunked-loss", plan.chunked_loss,
                     "also plan every split with the chunked cross-entropy; the table shown is the chunked one");
  plan_cmd->add_option("--loss-chunk-tokens", plan.loss_chunk_tokens,
                       "tokens per chunk of the chunked loss (0: at least 1024, at most 16 chunks per micro-batch)")
      ->capture_default_str();
  int plan_world_size = 1;
  plan_cmd->add_option("--world-size", plan_world_size,
                       "data-parallel ranks: plan one rank's share of --batch, with the all-reduce buckets")
      ->capture_default_str();
  plan_cmd->add_flag("--calibrate", plan_calibrate,
                     "also measure two short probes (micro-batches 1 and 2) on --device and print calibrated peaks");

  // ---- report / compare / models ----
  std::string report_input;
  OutputFiles report_files;
  CLI::App* report_cmd = app.add_subcommand("report", "render a saved sweep JSON again (console, or files)");
  report_cmd->add_option("results", report_input, "a JSON file written by `accumbench sweep --json`")->required();
  report_files.add_to(report_cmd);

  std::string compare_a, compare_b;
  CLI::App* compare_cmd = app.add_subcommand("compare", "compare two sweep JSON files split by split");
  compare_cmd->add_option("a", compare_a, "baseline JSON")->required();
  compare_cmd->add_option("b", compare_b, "other JSON")->required();

  CLI::App* models_cmd = app.add_subcommand("models", "list the model presets");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) return app.exit(error);  // --help
    if (app.get_subcommands().empty()) {
      std::string names;
      for (const CLI::App* sub : app.get_subcommands({})) names += (names.empty() ? "" : ", ") + sub->get_name();
      std::cerr << "accumbench: error: "
                << (argc > 1 ? "unknown subcommand or option \"" + std::string(argv[1]) + "\"" : std::string("no subcommand given"))
                << "; use one of " << names << " (see `accumbench --help`)\n";
      return ab::kUserErrorExitCode;
    }
    std::cerr << "accumbench: error: " << error.what() << "; see `accumbench "
              << (app.get_subcommands().empty() ? "" : app.get_subcommands().front()->get_name() + " ") << "--help`\n";
    return ab::kUserErrorExitCode;
  }

  if (*models_cmd) {
    print_models(std::cout);
    return 0;
  }
  if (*compare_cmd) {
    const ab::SweepResult a = ab::load_sweep_result(compare_a);  // in order: errors name the first bad file
    const ab::SweepResult b = ab::load_sweep_result(compare_b);
    ab::print_comparison(a, b, std::cout);
    return 0;
  }
  if (*report_cmd) {
    const ab::SweepResult result = ab::load_sweep_result(report_input);
    const bool any_file = !report_files.json.empty() || !report_files.csv.empty() || !report_files.markdown.empty() ||
                          !report_files.html.empty() || !report_files.trace.empty();
    report_files.write(result);
    if (!any_file) ab::ConsoleReporter({stdout_is_tty()}).report(result, std::cout);
    return 0;
  }
  if (*plan_cmd) {
    return run_plan(plan, plan_precision, plan_attention, plan_memory, plan_micro_batch, plan_calibrate, plan_world_size);
  }
  // Data parallel (torchrun): every rank measures, rank 0 alone prints and writes files.
  const bool primary = ab::process_rank() == 0;
  if (*verify_cmd) {
    const ab::VerifyResult result = ab::run_verify(verify);
    if (primary) ab::print_verify(result, std::cout);
    return result.all_pass ? 0 : 1;
  }
  // sweep
  if (!memory_limit.empty()) sweep.memory_limit_bytes = ab::parse_bytes(memory_limit);
  ab::SweepResult resume;
  const bool resuming = !resume_path.empty();
  if (resuming) {
    resume = ab::load_sweep_result(resume_path);
    if (sweep_files.json.empty()) sweep_files.json = resume_path;
  }
  const bool progress = primary && stderr_is_tty();
  const ab::SweepResult result = ab::run_sweep(
      sweep,
      [&](const ab::SweepResult& partial) {
        if (primary) sweep_files.write(partial);
      },
      resuming ? &resume : nullptr,
      progress ? ab::ProgressCallback(print_progress) : ab::ProgressCallback());
  if (progress) std::cerr << "\r\033[K" << std::flush;
  if (primary) ab::ConsoleReporter({stdout_is_tty()}).report(result, std::cout);
  // Every split failed: the table says why; the exit code lets scripts notice.
  return result.recommendation.best_index >= 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Only the commands that run training steps; the others never start a parallel region.
  if (argc > 1 && (std::string(argv[1]) == "sweep" || std::string(argv[1]) == "verify" ||
                   std::string(argv[1]) == "plan")) {
    ab::use_passive_openmp_wait(argv);
  }
  try {
    return run(argc, argv);
  } catch (const ab::UserError& error) {
    std::cerr << "accumbench: error: " << error.what() << "\n";
    return ab::kUserErrorExitCode;
  } catch (const std::exception& error) {
    std::cerr << "accumbench: internal error: " << error.what() << "\n";
    return 1;
  }
}
