// The memory plan on shapes nobody tuned it to (issue 11): a seeded generator of small model
// shapes and training setups, each case measured with the counting allocator (measure_step_peak,
// the sweep's own measurement: one step after a warmup step, counted from before the model was
// built) and compared with plan_memory per phase and for the peak.
//
//   accumbench_plan_properties                       # the CI set: 60 cases of seed 1, the bar below
//   accumbench_plan_properties --cases 500 --seed 7 --summary   # bench/plan_accuracy.sh
//   accumbench_plan_properties --seed 1 --case 17    # one case again, with its config and command
//   accumbench_plan_properties --all ...             # also the families open_gap() leaves out
//   accumbench_plan_properties --seed 1 --case 17 --live   # what is alive at each measured peak
//   accumbench_plan_properties --all --cases 1000 --predict-only   # the plan's numbers only, to diff
//
// The bar (issue 11): on the step's peak, |predicted − measured| ≤ 3 % of the measured peak and
// never an under-prediction beyond 2 %. Per phase (forward, backward, optimizer) the same bar,
// in bytes of the step's measured peak: a phase may be far below the peak, and an error there
// only matters by how much it could move the peak. A failing case prints its config.json (also
// written next to the binary's working directory as plan-case-SEED-I.json) and the `accumbench
// plan` and `accumbench sweep` commands that reproduce it.
//
// bf16 matmuls run LibTorch's own GEMM, as on every AVX2 CPU: on AVX-512 CPUs LibTorch 1.13 would
// hand them to oneDNN, whose per-call scratch the plan does not model (--onednn measures it).
//
// The shapes are tiny (width ≤ 128, ≤ 3 blocks, ≤ 256 tokens per micro-batch, vocabulary ≤ 2048),
// so one case takes well under a second on one CPU thread.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "accumbench/cpu_runtime.hpp"
#include "accumbench/error.hpp"
#include "accumbench/model_config.hpp"
#include "accumbench/plan.hpp"
#include "accumbench/report.hpp"
#include "accumbench/trace.hpp"

namespace ab = accumbench;

namespace {

// The bar, of the measured peak: |error| at most max_error, never more than max_under below.
// --within P holds a case to |error| <= P % both ways (a case whose term made it exact).
struct Bar {
  double max_error = 0.03;
  double max_under = 0.02;
};
Bar bar;

// --adapter-dtype bf16: every case is LoRA with bf16 adapters (redrawn until it is one that
// adapter_dtype_problem accepts); the default set draws PEFT's fp32 adapters.
ab::Precision adapter_dtype = ab::Precision::kFp32;

// --partial-targets: every case LoRA on some of a block's linears only (PEFT's default q,v among
// them), where block 0 saves only what the adapters' gradients need (the frozen prefix).
bool partial_targets = false;

// Deterministic draws on every standard library (std::uniform_int_distribution is not).
struct Draw {
  std::mt19937_64 rng;
  Draw(uint64_t seed, uint64_t index) {
    std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(index),
                      0x1bu};
    rng.seed(seq);
  }
  int64_t in(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1)); }
  bool chance(int percent) { return in(1, 100) <= percent; }
  template <class T>
  T pick(std::initializer_list<T> values) {
    return *(values.begin() + in(0, static_cast<int64_t>(values.size()) - 1));
  }
};

struct Case {
  uint64_t seed = 0;
  int index = 0;
  std::string family;   // gpt2, llama, qwen2, qwen3, mistral
  std::string config_json;
  ab::ModelConfig cfg;
  ab::PlanOptions options;
  ab::SplitConfig split;
};

std::string precision_name(ab::Precision p) { return ab::to_string(p); }

// One Hugging Face config.json (what --hf-config reads, so the repro command runs the very shape).
std::string config_json_of(Draw& d, const std::string& family, int64_t seq_len) {
  std::ostringstream j;
  const int64_t layers = d.in(1, 3);
  const int64_t vocab = d.in(64, 2048);
  const int64_t positions = seq_len + d.in(0, 3) * d.in(1, 64);  // positions ≥ T, often above
  j << "{\n";
  if (family == "gpt2") {
    const int64_t heads = d.pick<int64_t>({1, 2, 3, 4, 6});
    const int64_t head_dim = d.pick<int64_t>({8, 12, 16, 20});
    const int64_t width = heads * head_dim;
    j << "  \"model_type\": \"gpt2\",\n  \"n_layer\": " << layers << ",\n  \"n_embd\": " << width
      << ",\n  \"n_head\": " << heads << ",\n  \"n_positions\": " << positions << ",\n  \"vocab_size\": " << vocab;
    if (d.chance(50)) j << ",\n  \"n_inner\": " << 8 * d.in(width / 8 + 1, width / 2 + 1);
    if (d.chance(30)) j << ",\n  \"tie_word_embeddings\": false";
  } else {
    int64_t heads = d.pick<int64_t>({1, 2, 4, 6, 8});
    int64_t kv = heads;
    if (family != "llama" || d.chance(50)) {  // grouped-query attention: a divisor of the heads
      std::vector<int64_t> divisors;
      for (int64_t k = 1; k <= heads; ++k)
        if (heads % k == 0) divisors.push_back(k);
      kv = divisors[static_cast<size_t>(d.in(0, static_cast<int64_t>(divisors.size()) - 1))];
    }
    const int64_t head_dim = d.pick<int64_t>({8, 12, 16, 24, 32});
    // Half the shapes have H·hd = width; the others a width of their own (Qwen3, Mistral-Nemo).
    const bool own_width = family == "qwen3" || d.chance(50);
    const int64_t width = own_width ? 8 * d.in(4, 16) : heads * head_dim;
    const int64_t d_ff = 8 * d.in(width / 8, width / 2);
    j << "  \"model_type\": \"" << family << "\",\n  \"num_hidden_layers\": " << layers
      << ",\n  \"hidden_size\": " << width << ",\n  \"intermediate_size\": " << d_ff
      << ",\n  \"num_attention_heads\": " << heads << ",\n  \"num_key_value_heads\": " << kv
      << ",\n  \"max_position_embeddings\": " << positions << ",\n  \"vocab_size\": " << vocab;
    if (own_width || family == "qwen3") j << ",\n  \"head_dim\": " << head_dim;
    j << ",\n  \"tie_word_embeddings\": " << (d.chance(50) ? "true" : "false");
  }
  j << "\n}\n";
  return j.str();
}

// The families of cases the plan does not meet the bar on yet (measured with --all, see
// bench/plan_accuracy-2026-12-01.md), each with the gap as far as it is known. The CI set draws
// around them; --all draws them too. Empty: the case is inside the bar's scope. (Closed on
// 2026-12-01: checkpointing, an int8 base, the chunked loss with the optimizer inside backward,
// bf16 weights with accumulation.)
std::string open_gap(const Case& c) {
  const bool bf16_anywhere = c.split.precision != ab::Precision::kFp32 || c.options.weights_dtype != ab::Precision::kFp32;
  if (c.split.chunked_loss && bf16_anywhere)
    return "chunked loss with bf16 compute or weights: on AVX-512 CPUs LibTorch 1.13's oneDNN bf16 matmuls of the "
           "transposed chunk gradient allocate fp32 workspaces the plan does not model (-17.0 % .. +5.7 % of seed 2026 "
           "there, bench/plan_accuracy-2026-12-01.md; a CPU artifact: CUDA's bf16 GEMMs do not); on AVX2 within the bar "
           "(-0.30 % .. +0.39 %, bench/plan_accuracy-2026-12-02-avx2-own.md), as on AVX-512 with them off (this tool's "
           "default; --onednn turns them on)";
  return "";
}

// Case `index` of `seed`: the shape, T, the split, the precision, the knobs, LoRA, the weights'
// dtype. Redrawn (deterministically) until the options are valid together.
Case draw_case(uint64_t seed, int index, bool all) {
  for (uint64_t attempt = 0;; ++attempt) {
    Draw d(seed, static_cast<uint64_t>(index) * 1000 + attempt);
    Case c;
    c.seed = seed;
    c.index = index;
    c.family = d.pick<const char*>({"gpt2", "llama", "qwen2", "qwen3", "mistral"});
    const int64_t T = d.in(2, 12) * 8;
    c.config_json = config_json_of(d, c.family, T);
    c.cfg = ab::parse_hf_config(c.config_json, "plan-case-" + std::to_string(seed) + "-" + std::to_string(index) + ".json");
    c.cfg.name = "plan-case-" + std::to_string(seed) + "-" + std::to_string(index) + ".json";
    ab::SplitConfig& s = c.split;
    s.micro_batch = d.in(1, 4);
    s.accum_steps = d.pick<int64_t>({1, 1, 2, 3});
    if (s.micro_batch * T > 256) s.micro_batch = std::max<int64_t>(1, 256 / T);
    s.precision = d.chance(50) ? ab::Precision::kBf16 : ab::Precision::kFp32;
    s.activation_checkpointing = d.chance(40) ? ab::Checkpointing::kBlocks : ab::Checkpointing::kNone;
    s.optimizer_in_backward = s.accum_steps == 1 && d.chance(30);
    s.chunked_loss = d.chance(30);
    ab::PlanOptions& o = c.options;
    o.seq_len = T;
    o.batch = s.micro_batch * s.accum_steps;
    o.attention = ab::AttentionKind::kExplicit;  // LibTorch 1.13 on the CPU
    o.cpu = true;
    o.libtorch_major = 1;
    if (s.chunked_loss && d.chance(50)) o.loss_chunk_tokens = d.pick<int64_t>({16, 32, 64});
    if (d.chance(30)) {
      o.lora.rank = d.pick<int64_t>({2, 4, 8});
      o.lora.targets = d.pick<const char*>({"all-linear", "all-linear", "attention", "mlp"});
      if (d.chance(30)) o.lora.dropout = 0.1;
    }
    if (partial_targets) {
      if (!o.lora.enabled()) continue;
      o.lora.targets = std::string(c.family) == "gpt2"
                           ? d.pick<const char*>({"c_attn", "attn_c_proj", "c_fc", "mlp_c_proj", "attn_c_proj,mlp_c_proj"})
                           : d.pick<const char*>({"q,v", "q,v", "v", "k", "q", "k,v", "o", "v,o", "gate", "down", "up,down"});
    }
    o.weights_dtype = d.chance(30) ? ab::Precision::kBf16 : ab::Precision::kFp32;
    // QLoRA (--base-quant), only with LoRA; drawn last so that every earlier draw stays as it was.
    if (o.lora.enabled() && d.chance(40)) {
      o.lora.base_quant = d.pick<ab::BaseQuant>({ab::BaseQuant::kNf4, ab::BaseQuant::kNf4, ab::BaseQuant::kInt8});
      o.lora.double_quant = o.lora.base_quant == ab::BaseQuant::kNf4 && d.chance(50);
    }
    // Drawn last, so the cases drawn before --optimizer existed keep their other draws.
    o.optimizer = d.pick<ab::OptimizerKind>({ab::OptimizerKind::kAdamW, ab::OptimizerKind::kAdamWForeach,
                                             ab::OptimizerKind::kAdamW8bit, ab::OptimizerKind::kPagedAdamW8bit,
                                             ab::OptimizerKind::kPagedAdamW32bit, ab::OptimizerKind::kSgd});
    if (adapter_dtype != ab::Precision::kFp32) {
      if (!o.lora.enabled()) continue;
      o.lora.adapter_dtype = adapter_dtype;
    }
    try {
      ab::validate(c.cfg);
      ab::check_sequence_length(c.cfg, T);
      if (o.lora.enabled()) ab::validate_lora(c.cfg, o.lora);
      (void)ab::plan_memory(c.cfg, o, s);
    } catch (const ab::UserError&) {
      continue;  // e.g. a LoRA rank above a narrow projection: draw again
    }
    if (!all && !open_gap(c).empty()) continue;  // outside the CI set's scope (open_gap)
    return c;
  }
}

// The words a case is grouped by in the summary.
std::vector<std::string> knobs_of(const Case& c) {
  std::vector<std::string> k;
  if (c.split.activation_checkpointing == ab::Checkpointing::kBlocks) k.push_back("checkpointing");
  if (c.split.optimizer_in_backward) k.push_back("optimizer-in-backward");
  if (c.split.chunked_loss) k.push_back("chunked-loss");
  if (c.options.lora.enabled()) k.push_back(c.options.lora.dropout > 0 ? "lora+dropout" : "lora");
  if (c.options.lora.quantized()) k.push_back("base-" + ab::to_string(c.options.lora.base_quant));
  if (c.options.weights_dtype != ab::Precision::kFp32) k.push_back("weights-bf16");
  if (c.options.optimizer != ab::OptimizerKind::kAdamW) k.push_back("optimizer " + ab::to_string(c.options.optimizer));
  if (c.split.accum_steps > 1) k.push_back("accumulation");
  if (k.empty()) k.push_back("plain");
  return k;
}

std::string describe(const Case& c) {
  const ab::ModelConfig& m = c.cfg;
  std::ostringstream out;
  out << c.family << " L" << m.n_layers << " d" << m.d_model << " H" << m.n_heads << "/" << m.n_kv_heads << " hd"
      << m.head_dim << " f" << m.d_ff << " V" << m.vocab_size << (m.tied_embeddings ? " tied" : " untied") << " T"
      << c.options.seq_len << " " << c.split.micro_batch << "x" << c.split.accum_steps << " "
      << precision_name(c.split.precision) << " w" << precision_name(c.options.weights_dtype);
  for (const std::string& k : knobs_of(c))
    if (k != "accumulation" && k != "plain" && k != "weights-bf16") out << " " << k;
  if (c.options.lora.enabled()) out << "(r" << c.options.lora.rank << "," << c.options.lora.targets << ")";
  if (c.options.lora.quantized()) out << " " << ab::to_string(c.options.lora.base_quant) << (c.options.lora.double_quant ? "+dq" : "");
  if (c.options.lora.enabled() && c.options.lora.adapter_dtype != ab::Precision::kFp32)
    out << " adapters-" << ab::to_string(c.options.lora.adapter_dtype);
  if (c.options.loss_chunk_tokens > 0) out << " chunk" << c.options.loss_chunk_tokens;
  return out.str();
}

// The flags that select this case on `accumbench plan` and `accumbench sweep`.
std::string cli_flags(const Case& c, const std::string& config_path) {
  std::ostringstream f;
  f << "--hf-config " << config_path << " --device cpu --seq-len " << c.options.seq_len << " --batch "
    << c.options.batch << " --micro-batches " << c.split.micro_batch << " --precision "
    << precision_name(c.split.precision);
  if (c.options.weights_dtype != ab::Precision::kFp32) f << " --weights-dtype " << precision_name(c.options.weights_dtype);
  if (c.options.lora.enabled()) {
    f << " --lora-rank " << c.options.lora.rank << " --lora-targets " << c.options.lora.targets;
    if (c.options.lora.dropout > 0) f << " --lora-dropout " << c.options.lora.dropout;
    if (c.options.lora.adapter_dtype != ab::Precision::kFp32) f << " --adapter-dtype " << ab::to_string(c.options.lora.adapter_dtype);
  }
  if (c.options.lora.quantized()) {
    f << " --base-quant " << ab::to_string(c.options.lora.base_quant) << (c.options.lora.double_quant ? " --double-quant" : "");
    // --base-quant turns checkpointing on unless it is given (apply_base_quant_defaults).
    if (c.split.activation_checkpointing != ab::Checkpointing::kBlocks) f << " --activation-checkpointing none";
  }
  if (c.split.activation_checkpointing == ab::Checkpointing::kBlocks) f << " --activation-checkpointing";
  if (c.split.optimizer_in_backward) f << " --optimizer-in-backward";
  if (c.split.chunked_loss) f << " --chunked-loss";
  if (c.options.loss_chunk_tokens > 0) f << " --loss-chunk-tokens " << c.options.loss_chunk_tokens;
  if (c.options.optimizer != ab::OptimizerKind::kAdamW) f << " --optimizer " << ab::to_string(c.options.optimizer);
  return f.str();
}

struct Outcome {
  int64_t predicted = 0, measured = 0;
  std::array<int64_t, ab::kPlanPhaseCount> predicted_phase{}, measured_phase{};
  double error = 0;                                   // (predicted − measured) / measured, the peak
  std::array<double, ab::kPlanPhaseCount> phase_error{};  // per phase, of the measured step peak
  bool pass = true;
  std::string why;
};

Outcome run_case(const Case& c) {
  Outcome r;
  const ab::MemoryPlan plan = ab::plan_memory(c.cfg, c.options, c.split);
  std::vector<ab::PhaseSpan> timeline;
  r.measured = ab::measure_step_peak(c.cfg, c.options, c.split, "cpu", &timeline);
  r.predicted = plan.peak_bytes;
  r.predicted_phase = plan.phase_peak_bytes;
  for (const ab::PhaseSpan& span : timeline) {
    int p = -1;
    if (span.phase == ab::Phase::kForward) p = static_cast<int>(ab::PlanPhase::kForward);
    if (span.phase == ab::Phase::kBackward) p = static_cast<int>(ab::PlanPhase::kBackward);
    if (span.phase == ab::Phase::kOptimizer) p = static_cast<int>(ab::PlanPhase::kOptimizer);
    if (p >= 0) r.measured_phase[p] = std::max(r.measured_phase[p], span.peak_bytes);
  }
  const double peak = static_cast<double>(r.measured);
  r.error = static_cast<double>(r.predicted - r.measured) / peak;
  std::ostringstream why;
  if (std::abs(r.error) > bar.max_error || r.error < -bar.max_under) {
    why << "peak error " << std::fixed << std::setprecision(2) << 100 * r.error << " %";
  }
  for (int p = 0; p < ab::kPlanPhaseCount; ++p) {
    // With the optimizer inside backward there is no optimizer phase to measure.
    if (r.measured_phase[p] == 0) continue;
    r.phase_error[p] = static_cast<double>(r.predicted_phase[p] - r.measured_phase[p]) / peak;
    if (std::abs(r.phase_error[p]) > bar.max_error || r.phase_error[p] < -bar.max_under) {
      why << (why.tellp() > 0 ? "; " : "") << ab::plan_phase_name(static_cast<ab::PlanPhase>(p)) << " error "
          << std::fixed << std::setprecision(2) << 100 * r.phase_error[p] << " % of the peak";
    }
  }
  r.why = why.str();
  r.pass = r.why.empty();
  return r;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

struct Group {
  std::vector<double> errors;  // signed, of the peak
};

void print_row(const std::string& name, const std::vector<double>& e) {
  std::vector<double> abs_e;
  for (double x : e) abs_e.push_back(std::abs(x));
  const double lo = *std::min_element(e.begin(), e.end()), hi = *std::max_element(e.begin(), e.end());
  std::printf("| %-22s | %5zu | %+7.2f %% | %+7.2f %% | %6.2f %% | %6.2f %% |\n", name.c_str(), e.size(), 100 * lo,
              100 * hi, 100 * percentile(abs_e, 0.95), 100 * *std::max_element(abs_e.begin(), abs_e.end()));
}

void print_summary(const std::vector<Case>& cases, const std::vector<Outcome>& outcomes) {
  std::map<std::string, Group> by_knob, by_precision, by_family, by_gap;
  Group all;
  std::vector<double> phase_abs[ab::kPlanPhaseCount];
  for (size_t i = 0; i < cases.size(); ++i) {
    const double e = outcomes[i].error;
    all.errors.push_back(e);
    for (const std::string& k : knobs_of(cases[i])) by_knob[k].errors.push_back(e);
    by_precision[precision_name(cases[i].split.precision) + " compute, " +
                 precision_name(cases[i].options.weights_dtype) + " weights"]
        .errors.push_back(e);
    by_family[cases[i].family].errors.push_back(e);
    const std::string gap = open_gap(cases[i]);
    by_gap[gap.empty() ? "(in the CI's scope)" : gap.substr(0, gap.find(':'))].errors.push_back(e);
    for (int p = 0; p < ab::kPlanPhaseCount; ++p)
      if (outcomes[i].measured_phase[p] > 0) phase_abs[p].push_back(outcomes[i].phase_error[p]);
  }
  auto table = [](const std::string& title, const std::map<std::string, Group>& groups) {
    std::printf("\n%s\n\n| %-22s | cases | min error | max error | p95 |e| | max |e| |\n|---|---:|---:|---:|---:|---:|\n",
                title.c_str(), "group");
    for (const auto& [name, g] : groups) print_row(name, g.errors);
  };
  std::printf("\nError of the predicted peak, (predicted − measured) / measured, %zu cases\n\n", all.errors.size());
  std::printf("| %-22s | cases | min error | max error | p95 |e| | max |e| |\n|---|---:|---:|---:|---:|---:|\n", "group");
  print_row("all", all.errors);
  table("By knob (a case counts in each of its knobs)", by_knob);
  table("By precision", by_precision);
  table("By family", by_family);
  if (by_gap.size() > 1) table("By open gap (open_gap(): the first that applies)", by_gap);
  std::printf("\nPer phase, (predicted − measured phase peak) / measured step peak\n\n| %-22s | cases | min error | max error | p95 |e| | max |e| |\n|---|---:|---:|---:|---:|---:|\n", "phase");
  for (int p = 0; p < ab::kPlanPhaseCount; ++p)
    if (!phase_abs[p].empty()) print_row(ab::plan_phase_name(static_cast<ab::PlanPhase>(p)), phase_abs[p]);
  std::vector<size_t> order(cases.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return std::abs(outcomes[a].error) > std::abs(outcomes[b].error); });
  std::printf("\nThe ten largest errors of the peak\n\n| case | error | shape and setup |\n|---|---:|---|\n");
  for (size_t k = 0; k < std::min<size_t>(10, order.size()); ++k) {
    const size_t i = order[k];
    std::printf("| %llu/%d | %+.2f %% | %s |\n", static_cast<unsigned long long>(cases[i].seed), cases[i].index,
                100 * outcomes[i].error, describe(cases[i]).c_str());
  }
}

void print_failure(const Case& c, const Outcome& r) {
  const std::string path = "plan-case-" + std::to_string(c.seed) + "-" + std::to_string(c.index) + ".json";
  std::ofstream(path) << c.config_json;
  std::cout << "FAIL case " << c.seed << "/" << c.index << ": " << r.why << "\n  " << describe(c)
            << "\n  predicted per phase (forward, backward, optimizer): " << r.predicted_phase[0] << ", "
            << r.predicted_phase[1] << ", " << r.predicted_phase[2] << "; measured " << r.measured_phase[0] << ", "
            << r.measured_phase[1] << ", " << r.measured_phase[2] << "\n  config.json (written to " << path << "):\n"
            << c.config_json << "  reproduce:\n    accumbench plan " << cli_flags(c, path)
            << "\n    accumbench sweep " << cli_flags(c, path) << " --threads 1 --warmup 1 --steps 1"
            << "\n    accumbench_plan_properties --seed " << c.seed << " --case " << c.index
            << (open_gap(c).empty() ? "" : " --all")
            << "\n  (measured with oneDNN's bf16 matmuls off unless --onednn; the sweep keeps them, on AVX-512 CPUs a "
               "scratch per bf16 matmul more)\n";
  if (!open_gap(c).empty()) std::cout << "  known gap, " << open_gap(c) << "\n";
}

int usage() {
  std::cerr << "usage: accumbench_plan_properties [--seed S] [--cases N] [--case I] [--summary] [--all] [--live] [--predict-only] [--within PCT] [--onednn] [--adapter-dtype bf16] [--partial-targets]\n"
               "  --adapter-dtype bf16: every case LoRA with bf16 adapters (TRL's QLoRA), where they are planned\n"
               "  --partial-targets: every case LoRA on some linears only (q,v, v, down, ...)\n"
               "  --within PCT: hold each case to |error| <= PCT % (peak and phases) instead of the bar\n"
               "  --predict-only: the plan's peak and phase peaks per case, nothing measured (diff them across a refactoring)\n"
               "  --live (with --case): the blocks alive at each measured phase's peak, with the shapes their sizes match\n"
               "  --onednn: keep LibTorch's oneDNN bf16 matmuls on AVX-512 CPUs (their per-call scratch is not planned); off by default\n";
  return 2;
}

// --live: the blocks alive at each measured phase's peak (the counting allocator's snapshots), in
// allocation order, each with the shapes of the case its size matches, next to the plan's peaks.
std::string shapes_of(const Case& c, int64_t bytes) {
  const ab::ModelConfig& m = c.cfg;
  const int64_t b = c.split.micro_batch, T = c.options.seq_len, N = b * T, d = m.d_model, f = m.d_ff, V = m.vocab_size;
  const int64_t a = m.n_heads * m.head_dim, kv = m.n_kv_heads * m.head_dim, H = m.n_heads, r = c.options.lora.rank;
  const std::vector<std::pair<std::string, int64_t>> dims = {
      {"N·d", N * d}, {"N·f", N * f}, {"N·a", N * a}, {"N·kv", N * kv}, {"N·(a+kv)", N * (a + kv)}, {"N·3a", N * 3 * a},
      {"N·V", N * V}, {"V·d", V * d}, {"d·f", d * f}, {"d·a", d * a}, {"d·kv", d * kv}, {"b·H·T·T", b * H * T * T},
      {"T·T", T * T}, {"b·T·T", b * T * T}, {"N", N}, {"N·H", N * H}, {"N·r", N * r}, {"r·d", r * d}, {"r·f", r * f},
      {"r·a", r * a}, {"r·kv", r * kv}, {"V", V}, {"d", d}, {"f", f}, {"T·hd", T * m.head_dim},
      {"N·(H+Hkv)", N * (H + m.n_kv_heads)}, {"P", ab::parameter_count(m)}};
  std::string out;
  for (const auto& [name, n] : dims)
    for (int64_t e : {1, 2, 4, 8})
      if (n > 0 && n * e == bytes) out += (out.empty() ? "" : " | ") + name + "·" + std::to_string(e);
  return out;
}

void print_live(const Case& c, const ab::MemoryPlan& plan) {
  const auto snapshots = ab::CountingCpuAllocator::install().live_snapshots();
  const std::pair<ab::Phase, ab::PlanPhase> phases[] = {{ab::Phase::kForward, ab::PlanPhase::kForward},
                                                         {ab::Phase::kBackward, ab::PlanPhase::kBackward},
                                                         {ab::Phase::kOptimizer, ab::PlanPhase::kOptimizer}};
  for (const auto& [phase, plan_phase] : phases) {
    const auto& snapshot = snapshots[static_cast<size_t>(phase)];
    int64_t sum = 0;
    for (const auto& block : snapshot.blocks) sum += block.bytes;
    std::printf("\nlive at the measured %s peak: %lld bytes in %zu blocks (plan: %lld)\n", ab::phase_name(phase),
                static_cast<long long>(sum), snapshot.blocks.size(),
                static_cast<long long>(plan.phase_peak_bytes[static_cast<int>(plan_phase)]));
    for (const auto& block : snapshot.blocks)
      std::printf("  #%-8lld %10lld  %-40s %s\n", static_cast<long long>(block.order), static_cast<long long>(block.bytes),
                  shapes_of(c, block.bytes).c_str(), block.site.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  ab::use_passive_openmp_wait(argv);
  uint64_t seed = 1;
  int cases = 60, only = -1;
  bool summary = false, all = false, live = false, predict_only = false, onednn = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (arg == "--seed") seed = std::strtoull(value().c_str(), nullptr, 10);
    else if (arg == "--cases") cases = std::atoi(value().c_str());
    else if (arg == "--case") only = std::atoi(value().c_str());
    else if (arg == "--summary") summary = true;
    else if (arg == "--all") all = true;
    else if (arg == "--live") live = true;
    else if (arg == "--predict-only") predict_only = true;
    else if (arg == "--onednn") onednn = true;
    else if (arg == "--adapter-dtype") adapter_dtype = ab::adapter_dtype_from_string(value());
    else if (arg == "--partial-targets") partial_targets = true;
    else if (arg == "--within") bar.max_error = bar.max_under = std::atof(value().c_str()) / 100;
    else return usage();
  }
  // LibTorch 1.13 runs bf16 matmuls through oneDNN on AVX-512 CPUs (mkldnn_bf16_device_check),
  // and each oneDNN matmul allocates a scratch buffer for its call, sized by its blocking: a CPU
  // artifact the plan does not model (seed 1 case 94: 66 KB at the backward peak, -2.7 %). Off by
  // default, so that every CPU measures the GEMM AVX2 CPUs always run, the one the plan's terms
  // were read off; --onednn keeps LibTorch's choice (the sweep's, on this CPU).
  if (!onednn) at::globalContext().setUserEnabledMkldnn(false);
  at::set_num_threads(1);  // tiny shapes: one thread is as fast, and the CI machine is shared
  std::vector<Case> drawn;
  std::vector<Outcome> outcomes;
  int failures = 0;
  for (int i = (only >= 0 ? only : 0); i < (only >= 0 ? only + 1 : cases); ++i) {
    const Case c = draw_case(seed, i, all);
    if (predict_only) {  // no measurement: the plan's numbers only, to diff a change that must not move them
      const ab::MemoryPlan plan = ab::plan_memory(c.cfg, c.options, c.split);
      std::ostringstream table;  // every line of the plan, labels included, as one hash
      ab::print_plan(plan, table);
      std::printf("case %3d  predicted %lld  phases %lld %lld %lld  table %016zx  %s\n", i,
                  static_cast<long long>(plan.peak_bytes), static_cast<long long>(plan.phase_peak_bytes[0]),
                  static_cast<long long>(plan.phase_peak_bytes[1]), static_cast<long long>(plan.phase_peak_bytes[2]),
                  std::hash<std::string>{}(table.str()), describe(c).c_str());
      continue;
    }
    if (only >= 0) ab::print_plan(ab::plan_memory(c.cfg, c.options, c.split), std::cout);  // one case: its table
    if (live) ab::CountingCpuAllocator::install().track_live_blocks(true);
    const Outcome r = run_case(c);
    if (live) {
      ab::CountingCpuAllocator::install().track_live_blocks(false);
      print_live(c, ab::plan_memory(c.cfg, c.options, c.split));
    }
    std::printf("case %3d  %+6.2f %%  fwd %+6.2f  bwd %+6.2f  opt %+6.2f  predicted %9lld measured %9lld  %s\n", i,
                100 * r.error, 100 * r.phase_error[0], 100 * r.phase_error[1], 100 * r.phase_error[2],
                static_cast<long long>(r.predicted), static_cast<long long>(r.measured), describe(c).c_str());
    std::fflush(stdout);
    if (!r.pass) {
      ++failures;
      print_failure(c, r);
    }
    drawn.push_back(c);
    outcomes.push_back(r);
  }
  if (predict_only) return 0;
  if (summary) print_summary(drawn, outcomes);
  std::printf("\n%d of %zu cases within the bar (|error| <= %g %%, under-prediction <= %g %%, peak and each phase)\n",
              static_cast<int>(drawn.size()) - failures, drawn.size(), 100 * bar.max_error, 100 * bar.max_under);
  return failures == 0 ? 0 : 1;
}
