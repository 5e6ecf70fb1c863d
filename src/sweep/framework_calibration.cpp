// calibrate-framework (accumbench/sweep.hpp): the engine's sweep and the Python reference's step
// times on the same splits, a line through each over the accumulation steps, and the difference of
// the slopes written to the framework-overhead cache.
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include <algorithm>
#include <cstdio>
#include <random>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <utility>

#include "accumbench/error.hpp"
#include "accumbench/interrupt.hpp"
#include "accumbench/model_config.hpp"
#include "accumbench/statistics.hpp"
#include "accumbench/sweep.hpp"
#include "accumbench/units.hpp"
#include "sweep/framework_overhead.hpp"
#include "sweep/verify_export.hpp"

namespace accumbench {

namespace fs = std::filesystem;

namespace {

// Single quotes for the shell, with any single quote inside closed, escaped and reopened.
std::string shell_quoted(const std::string& value) {
  std::string out = "'";
  for (char c : value) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Least squares t = a·n + c over the splits (n: each split's accumulation steps); the slope a.
double slope(const std::vector<int64_t>& micro_batches, const std::vector<double>& seconds, int64_t batch) {
  const size_t k = micro_batches.size();
  double sn = 0, st = 0, snn = 0, snt = 0;
  for (size_t i = 0; i < k; ++i) {
    const double n = static_cast<double>(batch / micro_batches[i]);
    sn += n;
    st += seconds[i];
    snn += n * n;
    snt += n * seconds[i];
  }
  const double kd = static_cast<double>(k);
  const double denominator = kd * snn - sn * sn;
  return denominator != 0 ? (kd * snt - sn * st) / denominator : 0.0;
}

// The reference's time per micro-step against the engine's, as a 95 % bootstrap interval: each
// split's steps resampled on both sides, its median and the slopes refitted (2,000 times, a fixed
// seed, so the same steps give the same interval). Left NaN where a side gave no steps.
void bootstrap_overhead(FrameworkCalibrationSide& reference, const FrameworkCalibrationSide& engine, int64_t batch) {
  const auto resampled = [batch](const FrameworkCalibrationSide& side, std::mt19937_64& rng) {
    std::vector<double> medians;
    for (const std::vector<double>& steps : side.step_samples) {
      std::uniform_int_distribution<size_t> pick(0, steps.size() - 1);
      std::vector<double> drawn(steps.size());
      for (double& d : drawn) d = steps[pick(rng)];
      medians.push_back(median(std::move(drawn)));
    }
    return slope(side.micro_batches, medians, batch);
  };
  const auto complete = [](const FrameworkCalibrationSide& side) {
    return side.step_samples.size() == side.micro_batches.size() &&
           std::none_of(side.step_samples.begin(), side.step_samples.end(), [](const auto& s) { return s.empty(); });
  };
  if (!complete(reference) || !complete(engine)) return;
  constexpr int kDraws = 2000;
  std::mt19937_64 rng(20261207);
  std::vector<double> differences;
  differences.reserve(kDraws);
  for (int i = 0; i < kDraws; ++i) differences.push_back(resampled(reference, rng) - resampled(engine, rng));
  std::sort(differences.begin(), differences.end());
  reference.overhead_low = differences[static_cast<size_t>(0.025 * kDraws)];
  reference.overhead_high = differences[static_cast<size_t>(0.975 * kDraws) - 1];
}

// The side's slope over its medians: the time per micro-step.
void fit_line(FrameworkCalibrationSide& side, int64_t batch) {
  side.seconds_per_micro_step = slope(side.micro_batches, side.step_seconds, batch);
}

struct ProcessOutput {
  int status = 0;
  std::string text;
};

// `command` through sh, its stdout and stderr read; in a process group of its own, which a stop
// signal (interrupt.hpp) ends at once: the reference is stopped, not left to run to its end after
// accumbench is gone (helper-92), and Interrupted is thrown.
ProcessOutput run_command(const std::string& command) {
  ProcessOutput out;
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) throw UserError("cannot start " + text::quoted(command) + " (no pipe); check --python");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[1]);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);  // its own group: one kill stops sh and the Python under it
  std::string shell_command = command;
  char* argv[] = {const_cast<char*>("sh"), const_cast<char*>("-c"), shell_command.data(), nullptr};
  pid_t child = 0;
  const int spawned = posix_spawn(&child, "/bin/sh", &actions, &attributes, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(pipe_fds[1]);
  if (spawned != 0) {
    close(pipe_fds[0]);
    throw UserError("cannot start " + text::quoted(command) + "; check --python");
  }
  char buffer[4096];
  bool stopped = false;
  for (;;) {
    if (stop_requested()) {
      kill(-child, SIGTERM);
      stopped = true;
      break;
    }
    pollfd readable{pipe_fds[0], POLLIN, 0};
    const int ready = poll(&readable, 1, 200);  // a stop is seen within 0.2 s
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t n = read(pipe_fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.text.append(buffer, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (stopped) {
    throw Interrupted("stopped by " + signal_name(stop_signal()) + " while the PyTorch reference ran (stopped too)");
  }
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  return out;
}

std::string last_line(const std::string& text) {
  std::string line, last;
  std::istringstream in(text);
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

// The script that times `framework` ("hf": transformers' own model, hf_real_step.py; else
// step_bench.py) in --reference-dir; UserError when it is not there. A path the system cannot even
// look up (a name too long, a loop of links) is said as a missing one, with the system's reason.
fs::path reference_script(const FrameworkCalibrationOptions& o, const std::string& framework) {
  const fs::path script = fs::path(o.reference_dir) / (framework == "hf" ? "hf_real_step.py" : "step_bench.py");
  std::error_code looked_up;
  if (!fs::exists(script, looked_up)) {
    throw UserError("no " + text::quoted(text::shortened(script.string(), 200)) +
                    (looked_up ? " (" + looked_up.message() + ")" : "") +
                    ": pass --reference-dir, the folder of accumbench's bench/reference");
  }
  return script;
}

FrameworkCalibrationSide run_reference(const FrameworkCalibrationOptions& o, const std::string& framework,
                                       const std::string& export_dir, const std::string& device, int threads) {
  const WorkloadOptions& w = o.sweep.workload;
  // "hf": transformers' own model (hf_real_step.py, the same command line); else step_bench.py.
  // Both read the LoRA adapters from the index (write_model_index).
  const bool real = framework == "hf";
  const fs::path script = reference_script(o, framework);
  std::string splits;
  for (int64_t m : w.micro_batches) splits += (splits.empty() ? "" : ",") + std::to_string(m);
  // OpenBLAS's own pool as the engine's (configure_threads): torch.set_num_threads leaves it at every core.
  std::string command = "OPENBLAS_NUM_THREADS=" + std::to_string(threads) + " " + shell_quoted(o.python) + " " +
                        shell_quoted(script.string()) + " --export " +
                        shell_quoted(export_dir) + " --seq-len " + std::to_string(w.seq_len) + " --batch " +
                        std::to_string(w.batch) + " --micro-batches " + splits + " --warmup 1 --steps " +
                        std::to_string(o.reference_steps) + " --threads " + std::to_string(threads) +
                        " --device " + device + " --precision " + to_string(w.precisions.front()) +
                        " --attention " + (device.rfind("cuda", 0) == 0 ? "sdpa" : "eager") +
                        " --weights-dtype " + to_string(w.weights_dtype);
  if (w.grid.checkpointing == Checkpointing::kBlocks) command += " --gradient-checkpointing";
  if (framework != "plain" && !real) command += " --framework " + framework;
  // A --trl-config's loss_type (chunked_nll when it leaves it out): TRL's step with that loss.
  if (framework == "hf-trl" && !w.trl_loss.empty()) command += " --trl-loss " + w.trl_loss;
  const ProcessOutput out = run_command(command);  // (hf without transformers is refused before: probe_packages)
  FrameworkCalibrationSide side;
  side.name = framework;
  std::istringstream lines(out.text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line.front() != '{') continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("torch") && j["torch"].is_string()) side.torch = j["torch"].get<std::string>();
    if (!j.is_object() || !j.contains("mb") || !j.contains("step_s")) continue;
    side.micro_batches.push_back(j["mb"].get<int64_t>());
    side.step_seconds.push_back(j["step_s"].get<double>());
    std::vector<double> steps;  // each timed step, where the script gives them
    if (j.contains("times") && j["times"].is_array()) {
      for (const auto& t : j["times"]) {
        if (t.is_number()) steps.push_back(t.get<double>());
      }
    }
    side.step_samples.push_back(std::move(steps));
  }
  if (out.status != 0 || side.micro_batches.size() != w.micro_batches.size()) {
    const std::string said = last_line(out.text);
    throw UserError("the PyTorch reference (" + framework + ") did not run: " + text::quoted(command, 200) +
                    " exited with " + std::to_string(out.status) +
                    (said.empty() ? " and printed nothing" : " (" + text::shortened(said, 200) + ")") +
                    (out.status == 0 ? ", and gave " + std::to_string(side.micro_batches.size()) + " of the " +
                                           std::to_string(w.micro_batches.size()) + " splits' timings"
                                     : std::string()) +
                    "; install python3-torch (scripts/install-deps.sh) or pass --python with a Python that imports torch");
  }
  return side;
}

// The cache's folder can be written (created if missing): a probe file, removed at once.
void require_writable_cache(const std::string& path) {
  std::error_code ec;
  const fs::path folder = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
  fs::create_directories(folder, ec);
  const fs::path probe = folder / (".accumbench-write-probe-" + std::to_string(::getpid()));
  std::ofstream out(probe);
  const bool written = static_cast<bool>(out << "");
  out.close();
  fs::remove(probe, ec);
  if (!written || !fs::is_directory(folder)) {
    throw UserError("cannot write the framework-overhead cache in " + text::quoted(folder.string()) +
                    ", where the calibration would be kept; set ACCUMBENCH_CACHE_DIR to a folder you can write to");
  }
}

// The reference's Python imports torch, checked before the engine's sweep (the package probe below
// says nothing when it cannot run).
void require_python_with_torch(const std::string& python) {
  const ProcessOutput out = run_command(shell_quoted(python) + " -c 'import torch'");
  if (out.status != 0) {
    // Its last line says why (ModuleNotFoundError ...); a program that prints nothing, its exit status.
    const std::string said = last_line(out.text);
    throw UserError("--python " + text::quoted(python) + " cannot import torch (" +
                    (said.empty() ? "it exited with status " + std::to_string(out.status) + " and printed nothing"
                                  : text::shortened(said, 160)) +
                    "); install python3-torch (scripts/install-deps.sh) or pass --python with a Python that imports torch");
  }
}

// The Python's packages as hf_real_step.py --probe sees them, in words; and whether transformers
// imports. Empty when the probe does not run (an old checkout, a Python without torch).
std::pair<std::string, bool> probe_packages(const FrameworkCalibrationOptions& o) {
  const fs::path script = fs::path(o.reference_dir) / "hf_real_step.py";
  std::error_code looked_up;
  if (!fs::exists(script, looked_up)) return {"", false};
  const ProcessOutput out = run_command(shell_quoted(o.python) + " " + shell_quoted(script.string()) + " --probe");
  // ordered: the probe's own order (torch first)
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(last_line(out.text), nullptr, /*allow_exceptions=*/false);
  if (out.status != 0 || !j.is_object()) return {"", false};
  std::string words;
  bool transformers = false;
  for (const auto& [name, version] : j.items()) {
    words += (words.empty() ? "" : ", ") + name + " " + (version.is_string() ? version.get<std::string>() : "not installed");
    if (name == "transformers") transformers = version.is_string();
  }
  return {words, transformers};
}

// What the reference's step cannot run, refused before anything is measured; the notes say what
// was changed instead.
void refuse_what_the_reference_lacks(WorkloadOptions& w, std::vector<std::string>& notes) {
  const auto refuse = [](const std::string& what, const std::string& fix) {
    throw UserError("calibrate-framework times the PyTorch reference's step, which has no " + what + "; " + fix +
                    ": the host time per micro-step it measures is the Python loop's, and the sweep adds it to " +
                    "your job as it is");
  };
  if (w.lora.quantized()) refuse("quantised base (bitsandbytes)", "add --base-quant none");
  if (w.loss.chunked) refuse("chunked cross-entropy", "drop --chunked-loss");
  if (w.data.lengths != LengthMode::kFixed || !w.data.token_file.empty() || w.data.packing != Packing::kNone ||
      !w.data.other_packings.empty()) {
    refuse("lengths other than T (it draws fixed-length random tokens)", "drop --lengths and --packing");
  }
  // A --padding or --group-by-length list compares layouts of samples shorter than T.
  if (data_paddings(w.data).size() > 1 || data_groupings(w.data).size() > 1) {
    refuse("samples to pad or order (it draws fixed-length random tokens)",
           "give one --padding and one --group-by-length, or none");
  }
  if (w.data.distinct_steps_given()) {
    refuse("steps of data to cycle through (it draws fixed-length random tokens, every step alike)",
           "drop --distinct-steps");
  }
  if (w.grid.knobs || w.grid.optimizer_in_backward || w.grid.cuda_graphs) {
    refuse("memory knobs or CUDA graphs", "drop --knobs, --optimizer-in-backward and --cuda-graphs");
  }
  std::vector<OptimizerKind> others = grid_optimizers(w);
  others.erase(std::remove(others.begin(), others.end(), OptimizerKind::kAdamW), others.end());
  if (!others.empty()) {
    notes.push_back("both sides step torch.optim.AdamW, not " + join_optimizers(others) +
                    ": the optimizer runs once per step, outside the time per micro-step");
    w.optimizer.kind = OptimizerKind::kAdamW;
    w.grid.other_optimizers.clear();
  }
}

}  // namespace

FrameworkCalibration calibrate_framework(const FrameworkCalibrationOptions& options) {
  FrameworkCalibrationOptions o = options;
  WorkloadOptions& w = o.sweep.workload;
  FrameworkCalibration result;
  refuse_what_the_reference_lacks(w, result.notes);
  if (w.precisions.size() != 1) {
    throw UserError("calibrate-framework measures one precision at a time; give --precision one value");
  }
  if (grid_weights_dtypes(w).size() != 1) {
    throw UserError("calibrate-framework measures one weights dtype at a time; give --weights-dtype one value");
  }
  if (grid_adapter_dtypes(w).size() != 1) {
    throw UserError("calibrate-framework measures one adapter dtype at a time; give --adapter-dtype one value");
  }
  if (grid_max_grad_norms(w).size() != 1) {
    throw UserError("calibrate-framework measures one --max-grad-norm at a time (clipping runs once per step, outside "
                    "the time per micro-step); give one value");
  }
  if (w.micro_batches.empty()) {
    for (int64_t m = 1; m <= w.batch; ++m) {
      if (w.batch % m == 0) w.micro_batches.push_back(m);
    }
  }
  if (w.micro_batches.size() < 2) {
    // A batch of 1 has one split: only a larger batch gives a second.
    throw UserError("calibrate-framework needs two splits or more to fit a time per micro-step; " +
                    (w.batch < 2 ? std::string("--batch 1 has one split only: give --batch 2 or more")
                                 : "give --micro-batches with two different values at least (e.g. 1," + std::to_string(w.batch) + ")"));
  }
  if (o.reference_steps < 1) throw UserError("--steps must be at least 1, got " + std::to_string(o.reference_steps) + "; give the timed steps per split on each side");
  // Before the Python probes (about 20 s), in calibrate-framework's own words (the sweep's named
  // --warmup and --time-budget, which calibrate-framework has not).
  if (o.reference_steps > 1000) {
    throw UserError("--steps " + std::to_string(o.reference_steps) + " is more than calibrate-framework needs (at most "
                    "1000 timed steps per split on each side; the default is " + std::to_string(FrameworkCalibrationOptions{}.reference_steps) + ")");
  }
  // A mode given twice is timed once, as every list option's repeats are.
  std::vector<std::string> frameworks;
  std::vector<std::string> repeated;
  const auto holds = [](const std::vector<std::string>& list, const std::string& name) {
    return std::find(list.begin(), list.end(), name) != list.end();
  };
  for (const std::string& framework : o.frameworks) {
    if (!holds(frameworks, framework)) {
      frameworks.push_back(framework);
    } else if (!holds(repeated, framework)) {
      repeated.push_back(framework);
    }
  }
  for (const std::string& framework : repeated) {
    result.notes.push_back("--frameworks lists " + framework + " more than once; the repeats are dropped");
  }
  o.frameworks = frameworks;
  // The reference's scripts, before the engine is measured: a --reference-dir without them would
  // throw the engine's measurement away.
  for (const std::string& framework : o.frameworks) (void)reference_script(o, framework);
  const ModelConfig cfg = resolve_model(w.model);
  // The cache, before anything is measured: a file it cannot read or a folder it cannot write
  // would throw the whole measurement away at the end.
  const std::string cache_path = framework_cache_path();
  (void)read_framework_cache(cache_path);
  require_writable_cache(cache_path);
  // The Python's packages, before anything is measured. On a GPU, where transformers imports, a
  // real transformers step joins the references (the decisions prefer it: framework_overhead.cpp).
  const auto [packages, has_transformers] = probe_packages(o);
  if (packages.empty()) require_python_with_torch(o.python);
  const bool wants_real = std::find(o.frameworks.begin(), o.frameworks.end(), "hf") != o.frameworks.end();
  if (wants_real && !has_transformers) {
    throw UserError("--frameworks hf times transformers' own model, which " + o.python +
                    " cannot import; install transformers (and peft) for that Python or drop hf from --frameworks");
  }
  if (!wants_real && has_transformers && w.device.rfind("cuda", 0) == 0) o.frameworks.push_back("hf");

  // The engine: every split for exactly --steps rounds, the engine alone (no overhead added).
  o.sweep.time_budget_seconds = 0;
  o.sweep.framework_overhead = "0";
  const SweepResult sweep = run_sweep(o.sweep);
  if (stop_requested()) {
    throw Interrupted("stopped by " + signal_name(stop_signal()) + " while the engine's splits were timed");
  }
  result.batch = w.batch;
  result.device_name = sweep.context.device_name;
  result.precision = to_string(w.precisions.front());
  result.job = framework_job(w, cfg);
  result.engine.name = "accumbench";
  for (const RunResult& run : sweep.runs) {
    if (run.status != RunStatus::kOk) {
      throw UserError("the engine's split " + run.config.label() + " failed (" + text::shortened(run.error, 200) +
                      "); calibrate on a shape that fits: a smaller --seq-len or --batch");
    }
    result.engine.micro_batches.push_back(run.config.micro_batch);
    result.engine.step_seconds.push_back(run.step_seconds.median);
    std::vector<double> steps;
    for (const StepSample& step : run.steps) steps.push_back(step.step_seconds);
    result.engine.step_samples.push_back(std::move(steps));
  }
  fit_line(result.engine, w.batch);

  // The reference: the same job from an index.json without tensors (the shape, the adapters, the
  // weights' dtype).
  const fs::path export_dir = fs::temp_directory_path() / ("accumbench-calibrate-" + std::to_string(::getpid()));
  write_model_index(export_dir.string(), cfg, w);
  result.packages = packages;
  const int threads = w.threads > 0 ? w.threads : default_threads();
  try {
    for (const std::string& framework : o.frameworks) {
      FrameworkCalibrationSide side = run_reference(o, framework, export_dir.string(), sweep.context.device, threads);
      fit_line(side, w.batch);
      bootstrap_overhead(side, result.engine, w.batch);
      result.references.push_back(std::move(side));
    }
  } catch (...) {
    std::error_code ec;
    fs::remove_all(export_dir, ec);
    throw;
  }
  std::error_code ec;
  fs::remove_all(export_dir, ec);

  std::vector<FrameworkCacheEntry> entries;
  std::string splits;
  for (int64_t m : w.micro_batches) splits += (splits.empty() ? "" : ",") + std::to_string(m);
  for (const FrameworkCalibrationSide& side : result.references) {
    FrameworkCacheEntry e;
    e.device_name = result.device_name;
    e.precision = result.precision;
    e.framework = side.name;
    e.model = framework_model(cfg);
    e.weights_dtype = to_string(grid_weights_dtypes(w).front());
    e.job = result.job;
    e.conditions = framework_conditions(w);
    e.seconds_per_micro_step = side.seconds_per_micro_step - result.engine.seconds_per_micro_step;
    e.engine_seconds_per_micro_step = result.engine.seconds_per_micro_step;
    e.reference_seconds_per_micro_step = side.seconds_per_micro_step;
    e.date = sweep.context.date;
    e.torch = side.torch;
    e.seq_len = w.seq_len;
    e.shape = cfg.name + ", T=" + std::to_string(w.seq_len) + ", batch " + std::to_string(w.batch) +
              ", micro-batches " + splits;
    if (w.lora.enabled()) e.shape += ", LoRA r" + std::to_string(w.lora.rank) + " on " + w.lora.targets;
    if (w.weights_dtype != Precision::kFp32) e.shape += ", " + to_string(w.weights_dtype) + " weights";
    if (side.name == "hf-trl") e.shape += ", TRL loss_type " + (w.trl_loss.empty() ? std::string("chunked_nll") : w.trl_loss);
    entries.push_back(e);
  }
  result.cache_path = cache_path;
  write_framework_cache(result.cache_path, entries);
  return result;
}

}  // namespace accumbench
