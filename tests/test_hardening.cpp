// Bad input ends in one sentence, never a crash, a hang or runaway resources: the validation
// pass over every option, sizes that keep the plan's arithmetic in int64, messages that do not
// echo huge values, files that are not files, and the smaller holes (Markdown escaping,
// repeated micro-batches, compare of two different configurations).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "accumbench/error.hpp"
#include "accumbench/model_config.hpp"
#include "accumbench/options.hpp"
#include "accumbench/plan.hpp"
#include "accumbench/report.hpp"
#include "accumbench/result.hpp"
#include "accumbench/units.hpp"

namespace ab = accumbench;

namespace {

std::string user_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const ab::UserError& e) {
    return e.what();
  }
  return "(no UserError)";
}

ab::WorkloadOptions defaults() { return ab::workload_defaults(ab::Command::kSweep); }

}  // namespace

TEST(Validation, EveryNumericOptionIsFiniteAndInRange) {
  const double nan = std::nan("");
  const std::vector<std::pair<std::function<void(ab::WorkloadOptions&)>, std::string>> cases = {
      {[&](ab::WorkloadOptions& w) { w.optimizer.lr = nan; }, "--lr must be a finite number"},
      {[](ab::WorkloadOptions& w) { w.optimizer.lr = INFINITY; }, "--lr must be"},
      {[](ab::WorkloadOptions& w) { w.optimizer.beta1 = 1.0; }, "--beta1 must be in [0, 1)"},
      {[&](ab::WorkloadOptions& w) { w.optimizer.beta2 = nan; }, "--beta2 must be in [0, 1)"},
      {[](ab::WorkloadOptions& w) { w.optimizer.eps = 0; }, "--adam-eps must be a positive number"},
      {[](ab::WorkloadOptions& w) { w.optimizer.weight_decay = -0.1; }, "--weight-decay must be"},
      {[](ab::WorkloadOptions& w) { w.threads = 1000000; }, "--threads 1000000 is above the limit"},
      {[](ab::WorkloadOptions& w) { w.batch = int64_t{1} << 21; }, "--batch 2097152 is above the limit of 1048576"},
      {[](ab::WorkloadOptions& w) { w.seq_len = int64_t{1} << 21; }, "--seq-len 2097152 is above the limit"},
      {[](ab::WorkloadOptions& w) { w.batch = 1 << 19; w.seq_len = 1 << 19; }, "tokens per step"},
      {[](ab::WorkloadOptions& w) { w.world_size = 1 << 20; }, "--world-size"},
  };
  for (const auto& [mutate, expected] : cases) {
    ab::WorkloadOptions w = defaults();
    mutate(w);
    EXPECT_NE(user_error([&] { ab::validate_workload(w); }).find(expected), std::string::npos) << expected;
  }
  EXPECT_NO_THROW(ab::validate_workload(defaults()));
}

TEST(Validation, DivisorsOfAHugeBatchAreQuick) {
  EXPECT_EQ(ab::divisors(12), (std::vector<int64_t>{1, 2, 3, 4, 6, 12}));
  EXPECT_EQ(ab::divisors(36), (std::vector<int64_t>{1, 2, 3, 4, 6, 9, 12, 18, 36}));
  EXPECT_EQ(ab::divisors(1), (std::vector<int64_t>{1}));
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int64_t> d = ab::divisors(99999999977);  // a prime: √n ≈ 316,228 tries
  EXPECT_EQ(d, (std::vector<int64_t>{1, 99999999977}));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
}

TEST(Validation, RepeatedMicroBatchesAreMeasuredOnce) {
  ab::WorkloadOptions w = defaults();
  w.micro_batches = {2, 8, 2, 8};
  std::vector<std::string> labels;
  for (const ab::SplitConfig& s : ab::split_grid(w, 1)) labels.push_back(s.label());
  EXPECT_EQ(labels, (std::vector<std::string>{"2\u00d74", "8\u00d71"}));
}

TEST(Validation, ModelSizesStayPlannable) {
  ab::ModelConfig m = ab::find_preset("llama-tiny");
  m.vocab_size = int64_t{1} << 40;
  EXPECT_NE(user_error([&] { ab::validate(m); }).find("above the 134217728"), std::string::npos);
  // An exabyte split is refused rather than overflowing the plan's byte counts.
  ab::PlanOptions o;
  o.seq_len = 131072;
  o.batch = 65536;
  ab::SplitConfig s;
  s.micro_batch = 65536;  // 16 layers · 32 heads · 65536 · 131072² · 4 bytes of probabilities: 2.3 EB
  const ab::ModelConfig big = ab::find_preset("llama-3.2-1b");
  EXPECT_NE(user_error([&] { ab::plan_memory(big, o, s); }).find("more than an exabyte"), std::string::npos);
}

TEST(Validation, ConfigNumbersBeyondADoubleAreAUserError) {
  const std::string msg = user_error([] {
    ab::parse_hf_config(R"({"model_type": "llama", "vocab_size": 1e999})", "big.json");
  });
  EXPECT_EQ(msg, "config \"big.json\" holds a number too large for a double (number overflow parsing '1e999'); fix the "
                 "file or download config.json again");
}

TEST(Messages, LongValuesAreCutShort) {
  const std::string huge(500000, 'x');
  const std::string msg = user_error([&] { ab::find_preset(huge); });
  EXPECT_LT(msg.size(), 400u);
  EXPECT_NE(msg.find("\u2026 (500000 bytes)"), std::string::npos);
  EXPECT_EQ(ab::text::quoted("short"), "\"short\"");
  EXPECT_EQ(ab::text::shortened("\u00d7\u00d7\u00d7", 2), "\u00d7\u00d7\u2026 (6 bytes)");  // never cuts a character
}

// A value with control bytes keeps the message on one line (helper-95: --model $'gpt2-tiny\n' broke
// it in two): quoted values, and anything main prints, escape them.
TEST(Messages, ControlBytesAreEscaped) {
  EXPECT_EQ(ab::text::quoted("gpt2-tiny\n\t\r\x1b[31m\x7f"), "\"gpt2-tiny\\n\\t\\r\\x1b[31m\\x7f\"");
  EXPECT_EQ(ab::text::escaped_controls("caf\u00e9 \u00d7"), "caf\u00e9 \u00d7");  // UTF-8 stays as it is
  EXPECT_EQ(user_error([] { ab::find_preset("gpt2-tiny\n"); }).find('\n'), std::string::npos);
}

TEST(Messages, DirectoriesAndMissingFilesAreNamed) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  EXPECT_NE(user_error([&] { ab::require_readable_file(dir, "--tokens"); }).find("is a directory"), std::string::npos);
  EXPECT_NE(user_error([&] { ab::load_sweep_result(dir); }).find("is a directory"), std::string::npos);
  EXPECT_NE(user_error([] { ab::require_readable_file("/no/such/file", "--tokens"); }).find("does not exist"),
            std::string::npos);
  EXPECT_NE(user_error([] { ab::require_readable_file("/dev/null", "--tokens"); }).find("not a regular file"),
            std::string::npos);
}

namespace {

ab::SweepResult one_run(const std::string& model, int64_t seq_len) {
  ab::SweepResult r;
  r.context.model = model;
  r.context.seq_len = seq_len;
  r.context.batch = 8;
  r.context.parameters = 1000;
  r.context.options = {{"lr", "0.0001"}};
  ab::RunResult run;
  run.config.micro_batch = 8;
  run.config.accum_steps = 1;
  run.step_seconds.median = 0.5;
  run.peak_allocated_bytes = 1 << 20;
  r.runs.push_back(run);
  r.recommendation.best_index = 0;
  r.recommendation.reason = "only <one> & it";
  return r;
}

}  // namespace

// compare of a sweep and its --resume continuation: B's splits hold A's steps (each step records
// the sweep that timed it), said in a note; two sweeps run apart say nothing (helper-99).
TEST(Compare, SaysWhenOneFileHoldsTheOthersSteps) {
  const auto with_steps = [](std::initializer_list<int64_t> sessions) {
    ab::SweepResult r = one_run("gpt2-mini", 64);
    r.runs[0].session = *sessions.begin();
    for (const int64_t session : sessions) {
      ab::StepSample step;
      step.step_seconds = 0.5;
      step.session = session;
      r.runs[0].steps.push_back(step);
    }
    return r;
  };
  const auto compared = [](const ab::SweepResult& x, const ab::SweepResult& y) {
    std::ostringstream out;
    ab::print_comparison(x, y, out);
    return out.str();
  };
  const std::string resumed = compared(with_steps({100, 100}), with_steps({100, 100, 200, 200}));
  EXPECT_NE(resumed.find("note: B holds 2 of its 4 timed steps from A's sweep (a --resume continues its file), so the "
                         "two are not independent measurements"),
            std::string::npos)
      << resumed;
  // The other way round, the continuation is A (helper-101: it named the original).
  const std::string reversed = compared(with_steps({100, 100, 200, 200}), with_steps({100, 100}));
  EXPECT_NE(reversed.find("note: A holds 2 of its 4 timed steps from B's sweep"), std::string::npos) << reversed;
  EXPECT_EQ(compared(with_steps({100, 100}), with_steps({300, 300})).find("timed steps from"), std::string::npos);
  EXPECT_NE(compared(with_steps({100}), with_steps({100})).find("note: A and B hold the same sweep's timed steps"),
            std::string::npos);
}

// A JSON parser's message in a sentence: no nlohmann tag, no raw byte of a binary file.
TEST(JsonErrorText, DropsTheTagAndEscapesBytes) {
  EXPECT_EQ(ab::text::json_error_text("[json.exception.parse_error.101] parse error at line 1, column 1: "
                                      "invalid literal; last read: '\x7f\xff'"),
            "parse error at line 1, column 1: invalid literal; last read: '\\x7f\\xff'");
  EXPECT_EQ(ab::text::json_error_text("plain words"), "plain words");
}

TEST(Markdown, EscapesHtmlFromPathsAndMessages) {
  std::ostringstream out;
  ab::MarkdownReporter().report(one_run("<script>x</script>", 64), out);
  EXPECT_EQ(out.str().find("<script>"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("&lt;script&gt;x&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(out.str().find("only &lt;one&gt; &amp; it"), std::string::npos);
}

TEST(Compare, WarnsWhenTheConfigurationsDiffer) {
  std::ostringstream same, different;
  ab::print_comparison(one_run("gpt2-mini", 64), one_run("gpt2-mini", 64), same);
  EXPECT_EQ(same.str().find("warning"), std::string::npos);
  ab::SweepResult b = one_run("gpt2-mini", 128);
  b.context.options = {{"lr", "0.001"}};
  ab::print_comparison(one_run("gpt2-mini", 64), b, different);
  EXPECT_NE(different.str().find("warning: the two sweeps measured different configurations: seq_len (64 vs 128), "
                                 "lr (0.0001 vs 0.001)"),
            std::string::npos)
      << different.str();
  // How long they measured and how they decided is not what they measured: a note, not the warning.
  ab::SweepResult longer = one_run("gpt2-mini", 64);
  longer.context.options.push_back({"steps", "30"});
  longer.context.options.push_back({"time_budget_seconds", "60"});
  longer.context.options.push_back({"memory_limit_bytes", "5242880"});
  ab::SweepResult shorter = one_run("gpt2-mini", 64);
  shorter.context.options.push_back({"steps", "5"});
  shorter.context.options.push_back({"time_budget_seconds", "0"});
  shorter.context.options.push_back({"memory_limit_bytes", "0"});
  std::ostringstream budgets;
  ab::print_comparison(shorter, longer, budgets);
  EXPECT_EQ(budgets.str().find("different configurations"), std::string::npos) << budgets.str();
  EXPECT_NE(budgets.str().find("note: the two sweeps differ in how long they measured or how they decided, not in what "
                               "they measured: steps (5 vs 30), time_budget_seconds (0 vs 60), --memory-limit (none vs "
                               "5.0 MiB)"),
            std::string::npos)
      << budgets.str();
  // The warm-up changes what a timed step finds (--resume refuses another): what they measured.
  ab::SweepResult warmed = one_run("gpt2-mini", 64);
  warmed.context.options.push_back({"warmup", "3"});
  ab::SweepResult cold = one_run("gpt2-mini", 64);
  cold.context.options.push_back({"warmup", "1"});
  std::ostringstream warmups;
  ab::print_comparison(cold, warmed, warmups);
  EXPECT_NE(warmups.str().find("warning: the two sweeps measured different configurations: warmup (1 vs 3)"),
            std::string::npos)
      << warmups.str();
  // An option recorded only when set (--base-quant, --kbit-prep) is its default where left out.
  std::ostringstream quantised;
  ab::SweepResult q = one_run("gpt2-mini", 64);
  q.context.options.push_back({"base_quant", "nf4"});
  q.context.options.push_back({"kbit_prep", "none"});
  ab::print_comparison(one_run("gpt2-mini", 64), q, quantised);
  EXPECT_NE(quantised.str().find("base_quant (none vs nf4)"), std::string::npos) << quantised.str();
  EXPECT_NE(quantised.str().find("kbit_prep (peft vs none)"), std::string::npos) << quantised.str();
  // A grid dimension's list in another order measures the same splits; another list does not.
  // compare of two sweeps that differ in one recorded option, A's value then B's.
  const auto compared = [](const std::string& option, const std::string& in_a, const std::string& in_b) {
    ab::SweepResult x = one_run("gpt2-mini", 64), y = one_run("gpt2-mini", 64);
    x.context.options.push_back({option, in_a});
    y.context.options.push_back({option, in_b});
    std::ostringstream out;
    ab::print_comparison(x, y, out);
    return out.str();
  };
  const std::string reordered = compared("weights_dtype", "fp32,bf16", "bf16,fp32");
  EXPECT_EQ(reordered.find("warning"), std::string::npos) << reordered;
  const std::string packings = compared("packing", "none,bfd", "bfd,none");
  EXPECT_EQ(packings.find("warning"), std::string::npos) << packings;
  const std::string other = compared("weights_dtype", "fp32,bf16", "bf16");
  EXPECT_NE(other.find("weights_dtype (fp32,bf16 vs bf16)"), std::string::npos) << other;
  EXPECT_EQ(other.find("note: no split"), std::string::npos) << other;  // the runs pair up
  // "all divisors" of batch 8 is the list 1,2,4,8 in any order; 1,2,4 is not.
  const std::string divisors_same = compared("micro_batches", "all divisors", "8,4,2,1");
  EXPECT_EQ(divisors_same.find("warning"), std::string::npos) << divisors_same;
  const std::string divisors_other = compared("micro_batches", "all divisors", "1,2,4");
  EXPECT_EQ(divisors_other.find("warning"), std::string::npos) << divisors_other;  // no row measured otherwise
  EXPECT_NE(divisors_other.find("note: the two sweeps measured other micro-batches (all divisors of 8: 1,2,4,8 vs 1,2,4): each "
                                "split is compared where both measured it"),
            std::string::npos)
      << divisors_other;
  // Two CPU sweeps: TF32 acts on nothing there; other threads or OpenMP wait policies change every
  // step's time, and a note says so (on CUDA neither is said).
  const std::string tf32 = compared("tf32", "on", "off");
  EXPECT_EQ(tf32.find("tf32"), std::string::npos) << tf32;
  ab::SweepResult one_thread = one_run("gpt2-mini", 64), two_threads = one_run("gpt2-mini", 64);
  one_thread.context.threads = 1;
  two_threads.context.threads = 2;
  one_thread.context.options.push_back({"OMP_WAIT_POLICY", "PASSIVE"});
  two_threads.context.options.push_back({"OMP_WAIT_POLICY", "ACTIVE"});
  std::ostringstream cpus;
  ab::print_comparison(one_thread, two_threads, cpus);
  EXPECT_NE(cpus.str().find("note: the two sweeps ran with other CPU settings: threads (1 vs 2), OMP_WAIT_POLICY "
                            "(PASSIVE vs ACTIVE); every step's time depends on them, so the ratios measure them too"),
            std::string::npos)
      << cpus.str();
  one_thread.context.device = two_threads.context.device = "cuda:0";
  std::ostringstream gpus;
  ab::print_comparison(one_thread, two_threads, gpus);
  EXPECT_EQ(gpus.str().find("CPU settings"), std::string::npos) << gpus.str();
  // The Python loop's overhead per micro-step changes the decision, not the steps: a note.
  ab::SweepResult overhead = one_run("gpt2-mini", 64);
  overhead.context.framework_seconds_per_micro_step = 0.005;
  std::ostringstream framework;
  ab::print_comparison(one_run("gpt2-mini", 64), overhead, framework);
  EXPECT_NE(framework.str().find("not in what they measured: framework overhead (0 ms vs 5.00 ms per micro-step)"),
            std::string::npos)
      << framework.str();
  // Two batches: no split pairs, and the note says why rather than naming precisions.
  std::ostringstream batches;
  ab::SweepResult sixteen = one_run("gpt2-mini", 64);
  sixteen.context.batch = 16;
  sixteen.runs[0].config.accum_steps = 2;
  ab::print_comparison(one_run("gpt2-mini", 64), sixteen, batches);
  EXPECT_NE(batches.str().find("note: no split was measured in both: their batches differ (8 vs 16)"), std::string::npos)
      << batches.str();
  // Sweeps of two weights dtypes apart: no row pairs up, and the note says how to compare them.
  std::ostringstream apart;
  ab::SweepResult bf16 = one_run("gpt2-mini", 64);
  for (ab::RunResult& run : bf16.runs) run.config.weights_dtype = ab::Precision::kBf16;
  ab::print_comparison(one_run("gpt2-mini", 64), bf16, apart);
  EXPECT_NE(apart.str().find("note: no split was measured in both (a split is named by its shape, precision, optimizer, "
                             "dtypes, clipping, packing, grouping and padding); to compare them, sweep them "
                             "together (--precision, --optimizer, --weights-dtype, --adapter-dtype, --max-grad-norm, "
                             "--packing, --group-by-length and --padding take lists)"),
            std::string::npos)
      << apart.str();

  // An interrupted sweep is named, with the splits it never began.
  std::ostringstream stopped;
  ab::SweepResult a = one_run("gpt2-mini", 64);
  a.interruption = ab::Interruption{"SIGINT", {"2\u00d71"}};
  ab::print_comparison(a, one_run("gpt2-mini", 64), stopped);
  EXPECT_NE(stopped.str().find("\nwarning: A was interrupted by SIGINT (1 split not begun); its splits may have fewer "
                               "timed steps than --steps, and --resume finishes it\n"),
            std::string::npos)
      << stopped.str();
  EXPECT_EQ(stopped.str().find("warning: B"), std::string::npos);

  // So are a file saved mid-run and left (kill -9) and one a data-parallel peer's death ended.
  std::ostringstream unfinished;
  ab::SweepResult left = one_run("gpt2-mini", 64);
  left.interruption.saved_while_running = true;
  ab::SweepResult ended = one_run("gpt2-mini", 64);
  ended.interruption.error = "an all-reduce with the other ranks failed";
  ab::print_comparison(left, ended, unfinished);
  EXPECT_NE(unfinished.str().find("\nwarning: A was saved while its sweep ran, which did not reach its end; its "
                                  "splits may have fewer timed steps than --steps, and --resume finishes it\n"
                                  "warning: B was stopped by an error; its splits may"),
            std::string::npos)
      << unfinished.str();
}
