// HtmlReporter and ChromeTraceReporter on a hand-built sweep: 1×4 and 2×2 measured, 4×1 out of
// memory. Set ACCUMBENCH_HTML_SAMPLE=/path/report.html to also write the page for a browser
// (tests/html_report_test.sh screenshots such a page).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "accumbench/report.hpp"
#include "accumbench/result.hpp"
// The SVG writer is private to the library; this target has no src/ include path.
#include "report/html/charts.hpp"
#include "report/html/svg.hpp"

namespace accumbench {
namespace {

using nlohmann::json;

constexpr int64_t kMiB = 1024 * 1024;

// One optimizer step of `accum` micro-steps: data, h2d, forward, backward per micro-step, then the
// optimizer. Activations grow by `activation_bytes` in forward and are freed in backward; the
// gradients (`grad_bytes`) appear in the first backward and stay to the optimizer.
std::vector<PhaseSpan> make_timeline(int accum, double micro_seconds, int64_t base_bytes,
                                     int64_t activation_bytes, int64_t grad_bytes) {
  std::vector<PhaseSpan> spans;
  double t = 0;
  int64_t live = base_bytes;
  const double fractions[4] = {0.05, 0.05, 0.3, 0.6};  // data, h2d, forward, backward
  for (int k = 0; k < accum; ++k) {
    for (int ph = 0; ph < 4; ++ph) {
      PhaseSpan s;
      s.micro_step = k;
      s.phase = static_cast<Phase>(ph);
      s.start_seconds = t;
      s.duration_seconds = micro_seconds * fractions[ph];
      s.bytes_at_start = live;
      if (s.phase == Phase::kForward) {
        s.peak_bytes = live + activation_bytes;
        live += activation_bytes;
      } else if (s.phase == Phase::kBackward) {
        s.peak_bytes = live + (k == 0 ? grad_bytes : 0) + activation_bytes / 4;
        live = live - activation_bytes + (k == 0 ? grad_bytes : 0);
      } else {
        s.peak_bytes = live;
      }
      s.bytes_at_end = live;
      spans.push_back(s);
      t += s.duration_seconds;
    }
  }
  PhaseSpan opt;
  opt.micro_step = -1;
  opt.phase = Phase::kOptimizer;
  opt.start_seconds = t;
  opt.duration_seconds = micro_seconds * 0.4;
  opt.bytes_at_start = live;
  opt.peak_bytes = live + grad_bytes / 2;
  opt.bytes_at_end = live - grad_bytes;
  spans.push_back(opt);
  return spans;
}

RunResult make_run(int64_t micro, int64_t accum, double median, int64_t peak) {
  RunResult r;
  r.config.micro_batch = micro;
  r.config.accum_steps = accum;
  for (double factor : {0.97, 1.0, 1.08}) {
    StepSample s;
    s.step_seconds = median * factor;
    s.tokens = 4 * 64;
    s.peak_allocated_bytes = peak;
    r.steps.push_back(s);
  }
  r.step_seconds.median = median;
  r.step_seconds.min = median * 0.97;
  r.step_seconds.mean = median * 1.0166;
  r.step_seconds.stddev = median * 0.0458;
  r.step_seconds.cv = 0.045;
  r.step_seconds.ci_low = median * 0.97;
  r.step_seconds.ci_high = median * 1.08;
  r.step_seconds.count = 3;
  const double micro_seconds = median * 0.8 / static_cast<double>(accum);
  r.phase_median_seconds = {micro_seconds * 0.05 * accum, micro_seconds * 0.05 * accum,
                            micro_seconds * 0.3 * accum,  micro_seconds * 0.6 * accum,
                            micro_seconds * 0.4,          median * 0.02};
  r.tokens_per_step = 256;
  r.tokens_per_second = 256 / median;
  r.samples_per_second = 4 / median;
  r.achieved_tflops = 1.2e6 * 256 / median / 1e12;
  r.mfu = kNotMeasured;
  r.peak_allocated_bytes = peak;
  r.peak_reserved_bytes = peak;
  r.peak_breakdown.parameters_bytes = 4 * kMiB;
  r.peak_breakdown.gradients_bytes = 4 * kMiB;
  r.peak_breakdown.optimizer_state_bytes = 8 * kMiB;
  r.peak_breakdown.activations_bytes = peak - 16 * kMiB;
  r.predicted_peak_bytes = peak + peak / 20;
  r.timeline = make_timeline(static_cast<int>(accum), micro_seconds, 16 * kMiB,
                             (peak - 20 * kMiB) / 1, 4 * kMiB);
  return r;
}

SweepResult make_sweep(const std::string& model = "gpt2-tiny") {
  SweepResult result;
  SweepContext& c = result.context;
  c.date = "2025-01-02T03:04:05Z";
  c.host = "bench-host-7";
  c.device = "cpu";
  c.device_name = "AMD EPYC 7B13";
  c.device_memory_bytes = 0;
  c.libtorch_version = "1.13.1";
  c.build_type = "Release";
  c.git_commit = "0123456789ab";
  c.threads = 2;
  c.model = model;
  c.parameters = 1234567;
  c.seq_len = 64;
  c.batch = 4;
  c.flops_per_token = 1.2e6;
  c.memory_limit_bytes = 64 * kMiB;
  c.options = {
      {"model", model}, {"seq-len", "64"}, {"batch", "4"}, {"warmup", "1"}, {"steps", "3"}};

  result.runs.push_back(make_run(1, 4, 0.0412, 24 * kMiB));
  result.runs.push_back(make_run(2, 2, 0.0305, 33 * kMiB));
  RunResult oom;
  oom.config.micro_batch = 4;
  oom.config.accum_steps = 1;
  oom.status = RunStatus::kOutOfMemory;
  oom.error = "out of memory: tried to allocate 48.0 MiB over the 64.0 MiB limit";
  oom.fits = false;
  oom.predicted_peak_bytes = 71 * kMiB;
  result.runs.push_back(oom);

  result.recommendation.best_index = 1;
  result.recommendation.tied_indices = {1};
  result.recommendation.reason =
      "2×2 is fastest: 30.5 ms per step, 26 % faster than 1×4; 4×1 ran out of memory.";
  return result;
}

std::string render_html(const SweepResult& result) {
  std::ostringstream out;
  HtmlReporter().report(result, out);
  return out.str();
}

json render_trace(const SweepResult& result) {
  std::ostringstream out;
  ChromeTraceReporter().report(result, out);
  return json::parse(out.str());
}

std::size_t count(const std::string& haystack, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t pos = haystack.find(needle); pos != std::string::npos;
       pos = haystack.find(needle, pos + 1))
    ++n;
  return n;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The element carrying `id`, from its opening tag to the next chart (or the end).
std::string chart_element(const std::string& html, const std::string& id) {
  const std::size_t at = html.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  const std::size_t open = html.rfind('<', at);
  const std::size_t end = html.find("</figure>", at);
  return html.substr(open, end == std::string::npos ? std::string::npos : end - open);
}

std::string embedded_json(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"accumbench-data\">";
  const std::size_t begin = html.find(open);
  if (begin == std::string::npos) return "";
  const std::size_t start = begin + open.size();
  return html.substr(start, html.find("</script>", start) - start);
}

TEST(HtmlReport, HasEveryChartSplitRecommendationAndContextField) {
  const SweepResult result = make_sweep();
  const std::string html = render_html(result);
  if (const char* sample = std::getenv("ACCUMBENCH_HTML_SAMPLE")) {
    std::ofstream(sample) << html;
  }

  for (const char* id : {"chart-step-time", "chart-throughput", "chart-memory", "chart-timeline"}) {
    const std::string element = chart_element(html, id);
    ASSERT_FALSE(element.empty()) << id;
    EXPECT_NE(element.find("class=\"chart\""), std::string::npos) << id;
    EXPECT_NE(element.find("<svg"), std::string::npos) << id;
    EXPECT_NE(element.find("viewBox=\"0 0 960 "), std::string::npos) << id;
  }
  // Every split in the bar charts and the table.
  for (const char* label : {"1×4", "2×2", "4×1"}) {
    EXPECT_GE(count(chart_element(html, "chart-step-time"), label), 1u) << label;
    EXPECT_GE(count(chart_element(html, "chart-memory"), label), 1u) << label;
    EXPECT_NE(html.find(std::string("<td>") + label), std::string::npos) << label;
  }
  EXPECT_NE(html.find("<div class=\"rec-label\">2×2</div>"), std::string::npos);
  EXPECT_NE(
      html.find("2×2 is fastest: 30.5 ms per step, 26 % faster than 1×4; 4×1 ran out of memory."),
      std::string::npos);
  EXPECT_NE(
      html.find("<title>accumbench — gpt2-tiny · seq len 64 · batch 4 · fp32 · AMD EPYC 7B13</title>"),
      std::string::npos);
  // The recommended split in the Trainer's words, after the reason.
  EXPECT_NE(html.find("<p class=\"rec-settings\">Trainer settings (one process): per_device_train_batch_size=2 "
                      "gradient_accumulation_steps=2 gradient_checkpointing=false bf16=false fp16=false max_length=64 "
                      "packing=false loss_type=nll</p>"),
            std::string::npos);
  for (const char* field :
       {"<dt>host</dt><dd>bench-host-7</dd>", "<dt>libtorch_version</dt><dd>1.13.1</dd>",
        "<dt>git_commit</dt><dd>0123456789ab</dd>", "<dt>device_name</dt><dd>AMD EPYC 7B13</dd>",
        "<dt>date</dt><dd>2025-01-02T03:04:05Z</dd>", "<dt>seq_len</dt><dd>64</dd>",
        "<dt>parameters</dt><dd>1,234,567</dd>", "<dt>threads</dt><dd>2</dd>",
        "<dt>memory_limit_bytes</dt><dd>67,108,864 B (64.0 MiB)</dd>",
        "<dt>peak_tflops</dt><dd>unknown (no MFU)</dd>", "<dt>warmup</dt><dd>1</dd>",
        "<dt>steps</dt><dd>3</dd>"}) {
    EXPECT_NE(html.find(field), std::string::npos) << field;
  }
  EXPECT_NE(html.find("@media print"), std::string::npos);
  EXPECT_NE(html.find("<div class=\"table-wrap\">"), std::string::npos);
}

// The table's phase columns are the medians every other report shows ("other" too: it was the
// step's median less the other phases' medians, 4.938 ms here where the steps' own other is
// 0.824 ms); the chart draws the medians' shares of their sum up to the step's median.
TEST(HtmlReport, PhaseColumnsAreTheMediansOfEveryReport) {
  const SweepResult result = make_sweep();
  std::ostringstream html;
  HtmlReporter().report(result, html);
  EXPECT_NE(html.str().find(">0.8240<"), std::string::npos);
  EXPECT_EQ(html.str().find(">4.938<"), std::string::npos);
  const RunResult& run = result.runs[0];
  const html::StepBar bar = html::step_bar(run);
  double drawn = 0, medians = 0;
  for (int ph = 0; ph < kPhaseCount; ++ph) {
    drawn += bar.segments[ph];
    medians += bar.medians[ph];
    if (std::isfinite(run.phase_median_seconds[ph])) EXPECT_DOUBLE_EQ(bar.medians[ph], run.phase_median_seconds[ph]);
  }
  EXPECT_NEAR(drawn, run.step_seconds.median, 1e-12);
  EXPECT_NEAR(bar.segments[static_cast<int>(Phase::kOther)] / drawn,
              run.phase_median_seconds[static_cast<int>(Phase::kOther)] / medians, 1e-12);
  // The table's mean is the decisions' winsorized one, and the note says so (the probe found two
  // means in the JSON and the table naming neither).
  EXPECT_NE(html.str().find("The mean is the one the decisions and the recommendation use, winsorized: each split's "
                            "slowest twentieth of steps counts as the step just below them"),
            std::string::npos);
}

// An emulated 8-bit optimizer says so in the HTML's context, as the console and Markdown do.
// The headline's count of timed steps is per split only when every split has it (the rounds keep
// the contenders longer).
TEST(HtmlReport, TimedStepsCountIsNamedForTheRecommendedSplitWhenTheyDiffer) {
  SweepResult result = make_sweep();
  const std::string same = render_html(result);
  result.runs[0].step_seconds.count = 7;
  const std::string differ = render_html(result);
  EXPECT_EQ(same.find("timed steps of "), std::string::npos);
  EXPECT_NE(differ.find("timed steps of "), std::string::npos);
}

// Runs clipped and padded several ways: the title names each list (the table's columns say which
// run is which); one value of each, nothing.
TEST(HtmlReport, TheTitleNamesTheClippingAndPaddingLists) {
  SweepResult result = make_sweep();
  EXPECT_NE(render_html(result).find("<title>accumbench — gpt2-tiny · seq len 64 · batch 4 · fp32 · AMD EPYC"),
            std::string::npos);
  result.runs[0].config.max_grad_norm = 1;
  result.runs[1].config.padding = {Padding::kLongest, 0};
  EXPECT_NE(render_html(result).find(
                "<title>accumbench — gpt2-tiny · seq len 64 · batch 4 · fp32 · clip 1/off · padding max/longest · AMD EPYC"),
            std::string::npos);
}

// Runs packed several ways (--packing's list): the headline's "vs slowest split" and the step-time
// chart's "+N%" compare time per real token, as the decision does (1×4 packed trains four times the
// tokens of 2×2 in 1.35 times its time), and say so; the title names the packings.
TEST(HtmlReport, PackingsAreComparedPerRealToken) {
  SweepResult result = make_sweep();
  result.runs[0].config.packing = Packing::kBfd;
  result.runs[0].tokens_per_step = 4 * 256;
  result.recommendation.best_index = 0;
  const std::string html = render_html(result);
  // (0.0305 / 256) / (0.0412 / 1024) = 2.96
  EXPECT_NE(html.find("vs slowest split, per real token</div><div class=\"v\">2.96\u00d7 faster"), std::string::npos);
  EXPECT_NE(html.find("Median step time per split, stacked by phase (the % above each: per real token against the fastest, "
                      "as the packings and orders are compared)"),
            std::string::npos);
  EXPECT_NE(html.find(" \u00b7 packing bfd/none \u00b7 "), std::string::npos);
  EXPECT_NE(html.find("; samples/s counts rows, and a packed row holds several samples"), std::string::npos);
  result.runs[0].config.packing = Packing::kNone;
  result.recommendation.best_index = 1;
  const std::string one = render_html(result);
  EXPECT_EQ(one.find("per real token"), std::string::npos);
  EXPECT_NE(one.find("vs slowest split</div>"), std::string::npos);
}

// With --framework-overhead the headline ratio adds the framework's time per micro-step, as the
// console's "vs fastest" and the decision do, and says so (helper-99: it gave the engine's alone).
TEST(HtmlReport, TheHeadlineRatioWeighsTheFrameworksTime) {
  SweepResult result = make_sweep();
  const auto ratio = [](const std::string& html, const std::string& key) {
    const std::string head = key + "</div><div class=\"v\">";
    const size_t at = html.find(head);
    return at == std::string::npos ? std::string("none") : html.substr(at + head.size(), html.find(' ', at + head.size()) - at - head.size());
  };
  const std::string engine = ratio(render_html(result), "vs slowest split");
  ASSERT_NE(engine, "none");
  // Every split of make_sweep takes the batch in another number of micro-steps: a large cost per
  // micro-step moves the ratio.
  result.context.framework_seconds_per_micro_step = 0.5;
  const std::string html = render_html(result);
  const std::string framework = ratio(html, "vs slowest split, with the framework&#39;s host time");
  EXPECT_NE(framework, "none");
  EXPECT_NE(framework, engine);
  EXPECT_EQ(html.find("vs slowest split</div>"), std::string::npos);
}

// The step chart's "fastest" and "+N%" are the table's "vs fastest": over the split the rounds
// decided fastest, though another's median is lower (helper-106: the chart called that one fastest
// and the recommended split "+11%").
TEST(HtmlReport, TheStepChartComparesWithTheDecidedFastest) {
  SweepResult result = make_sweep();  // 1×4 at 41.2 ms, 2×2 at 30.5 ms
  result.recommendation.best_index = 0;
  result.recommendation.decision.kind = DecisionKind::kFastest;
  result.recommendation.decision.fastest = 0;
  const std::string html = render_html(result);
  const size_t chart = html.find("id=\"chart-step-time\"");
  ASSERT_NE(chart, std::string::npos);
  const std::string section = html.substr(chart, html.find("id=\"chart-throughput\"") - chart);
  EXPECT_NE(section.find(">fastest<"), std::string::npos);
  // 30.5 / 41.2 − 1 = −26 %: the split with the lower median reads below the decided fastest.
  EXPECT_NE(section.find(">\u221226%<"), std::string::npos) << section.substr(0, 4000);
  EXPECT_EQ(section.find(">+35%<"), std::string::npos);
  EXPECT_NE(section.find("(the % above each: against the fastest, as the table&#39;s vs fastest)"), std::string::npos);
}

// A split whose steps differ in size is drawn at its mean: the step chart's title says so (helper-99:
// "Median" over bars that were means).
TEST(HtmlReport, TheStepChartSaysWhereItDrawsMeans) {
  SweepResult result = make_sweep();
  EXPECT_NE(render_html(result).find("Median step time per split, stacked by phase"), std::string::npos);
  result.runs[0].steps[1].computed_positions = result.runs[0].steps[0].computed_positions + 64;
  EXPECT_NE(render_html(result).find(
                "Median step time per split (the mean for a split whose steps differ in size), stacked by phase"),
            std::string::npos);
}

// The sweep's notes in a card of their own under the recommendation, escaped; a sweep that noted
// nothing has no such card.
TEST(HtmlReport, TheSweepsNotesUnderTheRecommendation) {
  SweepResult result = make_sweep();
  EXPECT_EQ(render_html(result).find("id=\"notes\""), std::string::npos);
  result.notes = {"--group-by-length changes nothing here", "a <b> & \"c\""};
  const std::string html = render_html(result);
  EXPECT_NE(html.find("<section class=\"card notes\" id=\"notes\"><h2>Notes</h2><ul><li>--group-by-length changes "
                      "nothing here</li><li>a &lt;b&gt; &amp; &quot;c&quot;</li></ul></section>"),
            std::string::npos);
  EXPECT_LT(html.find("id=\"recommendation\""), html.find("id=\"notes\""));
  EXPECT_LT(html.find("id=\"notes\""), html.find("id=\"chart-step-time\""));
}

TEST(HtmlReport, AnEmulatedOptimizerIsMarkedApproximate) {
  SweepResult result = make_sweep();
  std::ostringstream plain;
  HtmlReporter().report(result, plain);
  EXPECT_EQ(plain.str().find("optimizer_time"), std::string::npos);
  result.context.options.emplace_back("optimizer", "adamw8bit");
  for (RunResult& run : result.runs) run.config.optimizer = OptimizerKind::kAdamW8bit;
  std::ostringstream emulated;
  HtmlReporter().report(result, emulated);
  EXPECT_NE(emulated.str().find("approximate: adamw8bit is emulated by LibTorch ops"), std::string::npos);
  EXPECT_NE(emulated.str().find("<title>accumbench — gpt2-tiny · seq len 64 · batch 4 · fp32 · adamw8bit · AMD EPYC"),
            std::string::npos);
  // A sweep of several optimizers: each emulated one among its runs is marked (a --resume keeps
  // runs of optimizers its own list no longer names), and the title names them.
  result.context.options.back().second = "adamw,sgd";
  result.runs[0].config.optimizer = OptimizerKind::kAdamW;
  result.runs[1].config.optimizer = OptimizerKind::kPagedAdamW8bit;
  result.runs[2].config.optimizer = OptimizerKind::kSgd;
  result.runs.push_back(result.runs[0]);
  result.runs.back().config.optimizer = OptimizerKind::kAdamW8bit;
  std::ostringstream several;
  HtmlReporter().report(result, several);
  EXPECT_NE(several.str().find("approximate: paged-adamw8bit is emulated"), std::string::npos);
  EXPECT_NE(several.str().find("approximate: adamw8bit is emulated"), std::string::npos);
  EXPECT_EQ(several.str().find("approximate: sgd"), std::string::npos);
  EXPECT_NE(several.str().find(" · fp32 · adamw/paged-adamw8bit/sgd/adamw8bit · AMD EPYC"), std::string::npos);
  EXPECT_EQ(several.str().find(" · adamw/sgd · "), std::string::npos);
}

TEST(HtmlReport, FailedRunIsALabelledGapInEveryBarChart) {
  const std::string html = render_html(make_sweep());
  for (const char* id : {"chart-step-time", "chart-throughput", "chart-memory"}) {
    const std::string chart = chart_element(html, id);
    EXPECT_NE(chart.find("<g class=\"gap\"><title>4×1: oom — out of memory: tried to allocate"),
              std::string::npos)
        << id;
    EXPECT_NE(chart.find(">OOM</text>"), std::string::npos) << id;
  }
  // The table keeps the failed run with its error.
  EXPECT_NE(html.find("<td class=\"text status-bad\">oom</td>"), std::string::npos);
  EXPECT_NE(html.find("out of memory: tried to allocate 48.0 MiB over the 64.0 MiB limit</td>"),
            std::string::npos);
}

// "Not measured" reads one way in the page: the failed run's tokens/s, steps and statistics are
// "—" as every other missing number, never the console's "-"; a throughput tooltip names its unit
// once.
TEST(HtmlReport, NotMeasuredIsOneDashAndTooltipsNameTheirUnitOnce) {
  const std::string html = render_html(make_sweep());
  const std::string table = html.substr(html.find("<table"));
  EXPECT_EQ(table.find("<td class=\"num\">-</td>"), std::string::npos);
  EXPECT_EQ(table.find(">-</td>"), std::string::npos);
  const std::string chart = chart_element(html, "chart-throughput");
  EXPECT_EQ(chart.find("tokens per second (k)</title>"), std::string::npos) << chart.substr(0, 2000);
  EXPECT_NE(chart.find(" tokens per second</title>"), std::string::npos);
}

TEST(HtmlReport, MemoryChartDrawsLimitAndPredictions) {
  const std::string chart = chart_element(render_html(make_sweep()), "chart-memory");
  EXPECT_EQ(count(chart, "class=\"limit-line\""), 1u);
  EXPECT_NE(chart.find(">limit 64.0 MiB</text>"), std::string::npos);
  // All three runs carry a prediction, the OOM one included.
  EXPECT_EQ(count(chart, "<g class=\"predicted\">"), 3u);
  EXPECT_NE(chart.find("4×1: predicted peak 71.0 MiB"), std::string::npos);
}

TEST(HtmlReport, TimelineShowsEachPickedRunOnceWithEveryPhase) {
  const SweepResult result = make_sweep();
  const std::string chart = chart_element(render_html(result), "chart-timeline");
  // Recommended 2×2 is also the largest micro-batch that ran (4×1 ran out of memory); 1×4 is the
  // smallest, and no smaller one was listed.
  EXPECT_NE(chart.find("recommended, largest micro-batch that ran"), std::string::npos);
  EXPECT_NE(chart.find("smallest micro-batch · "), std::string::npos);
  EXPECT_EQ(chart.find("smallest micro-batch that ran"), std::string::npos);
  EXPECT_EQ(count(chart, "class=\"boundary-line\""), 2u);
  EXPECT_EQ(count(chart, "<g class=\"span\">"),
            result.runs[0].timeline.size() + result.runs[1].timeline.size());
}

std::vector<std::string> tick_labels(const std::string& chart) {
  std::vector<std::string> ticks;
  const std::string marker = "class=\"tick\">";
  for (std::size_t pos = chart.find(marker); pos != std::string::npos;
       pos = chart.find(marker, pos + 1)) {
    const std::size_t start = pos + marker.size();
    ticks.push_back(chart.substr(start, chart.find('<', start) - start));
  }
  return ticks;
}

TEST(HtmlReport, AxisTicksAreRoundNumbersInTheChartUnit) {
  SweepResult result = make_sweep();
  // Slowest whisker 0.924 s · 1.08 = 998 ms, plus 12 % headroom → 1118 ms → steps of 250 ms.
  result.runs[0] = make_run(1, 4, 0.924, 24 * kMiB);
  result.runs[1] = make_run(2, 2, 0.624, 33 * kMiB);
  const std::string html = render_html(result);
  EXPECT_EQ(tick_labels(chart_element(html, "chart-step-time")),
            (std::vector<std::string>{"0", "250", "500", "750", "1000", "1250"}));
  EXPECT_NE(chart_element(html, "chart-step-time").find(">step time (ms)</text>"),
            std::string::npos);
  // Limit 64 MiB above every bar: scale to 64 · 1.1 = 70.4 MiB → steps of 20 MiB.
  EXPECT_EQ(tick_labels(chart_element(html, "chart-memory")),
            (std::vector<std::string>{"0", "20", "40", "60", "80"}));
  EXPECT_NE(chart_element(html, "chart-memory").find(">peak memory (MiB)</text>"),
            std::string::npos);

  // Fractional steps keep exactly the decimals they need: 1.0 s · 1.08 · 1.12 = 1.21 s → 0.25 s.
  result.runs[0] = make_run(1, 4, 1.0, 24 * kMiB);
  EXPECT_EQ(tick_labels(chart_element(render_html(result), "chart-step-time")),
            (std::vector<std::string>{"0.00", "0.25", "0.50", "0.75", "1.00", "1.25"}));
  // 1.2 s · 1.08 · 1.12 = 1.45 s → 0.5 s.
  result.runs[0] = make_run(1, 4, 1.2, 24 * kMiB);
  EXPECT_EQ(tick_labels(chart_element(render_html(result), "chart-step-time")),
            (std::vector<std::string>{"0.0", "0.5", "1.0", "1.5"}));
}

TEST(HtmlReport, MfuPanelOnlyWhenMeasured) {
  SweepResult result = make_sweep();
  EXPECT_EQ(chart_element(render_html(result), "chart-throughput").find("Model FLOPs utilization"),
            std::string::npos);
  result.context.peak_tflops = 10;
  result.runs[0].mfu = 0.123;
  result.runs[1].mfu = 0.171;
  const std::string chart = chart_element(render_html(result), "chart-throughput");
  EXPECT_NE(chart.find("Model FLOPs utilization"), std::string::npos);
  EXPECT_NE(chart.find(">17.1%</text>"), std::string::npos);
}

TEST(HtmlReport, HostileNamesCannotEscapeTheirContext) {
  const std::string hostile = "</script><script>alert(1)</script><!-- 'x\" & y";
  SweepResult result = make_sweep(hostile);
  result.context.host = hostile;
  result.runs[2].error = hostile;
  const std::string html = render_html(result);

  // Exactly one script element (the JSON data) and nothing that closes or comments it early.
  EXPECT_EQ(count(lower(html), "</script"), 1u);
  EXPECT_EQ(count(lower(html), "<script"), 1u);
  EXPECT_EQ(count(html, "<!--"), 0u);
  EXPECT_EQ(html.find("alert(1)</"), std::string::npos);
  EXPECT_NE(
      html.find("&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;!-- &#39;x&quot; &amp; y"),
      std::string::npos);

  // The embedded JSON is still the sweep and reads back to the original names.
  const std::string data = embedded_json(html);
  EXPECT_EQ(data.find('<'), std::string::npos);
  EXPECT_EQ(data.find('>'), std::string::npos);
  EXPECT_EQ(data.find('&'), std::string::npos);
  EXPECT_NE(data.find("\\u003c/script\\u003e"), std::string::npos);
  const SweepResult again = sweep_result_from_json(data, "embedded");
  EXPECT_EQ(again.context.model, hostile);
  EXPECT_EQ(again.context.host, hostile);
  EXPECT_EQ(again.runs.at(2).error, hostile);
}

TEST(HtmlReport, NoNetworkReferencesBesidesTheSvgNamespace) {
  const std::string html = render_html(make_sweep());
  const std::string svg_ns = "http://www.w3.org/2000/svg";
  EXPECT_EQ(count(html, "http://"), count(html, svg_ns));
  EXPECT_EQ(count(html, "https://"), 0u);
  EXPECT_EQ(count(html, "<svg"), 4u);
  EXPECT_EQ(count(html, svg_ns), 4u);
  EXPECT_EQ(count(html, " src="), 0u);
  EXPECT_EQ(count(html, "<link"), 0u);
  EXPECT_EQ(count(html, "url(http"), 0u);
}

TEST(HtmlReport, NoRunsStillRendersEveryChart) {
  SweepResult result;
  result.context.model = "empty";
  const std::string html = render_html(result);
  for (const char* id : {"chart-step-time", "chart-throughput", "chart-memory", "chart-timeline"}) {
    EXPECT_FALSE(chart_element(html, id).empty()) << id;
  }
  EXPECT_NE(html.find("No split completed"), std::string::npos);
}

TEST(HtmlReport, EmbedsTheWholeStylesheetVerbatim) {
  // report.css is compiled in at build time (cmake/embed_text.cmake): the page must carry the file
  // byte for byte, quotes and the @media blocks included.
  std::ifstream file(std::string(ACCUMBENCH_TEST_DATA) + "/../../src/report/html/report.css",
                     std::ios::binary);
  ASSERT_TRUE(file) << "report.css not found";
  const std::string css((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  ASSERT_GT(css.size(), 1000u);
  const std::string html = render_html(make_sweep());
  EXPECT_EQ(count(html, "<style>\n" + css + "</style>\n</head>"), 1u);
  EXPECT_EQ(count(html, "<style"), 1u);
}

TEST(HtmlSvgWriter, EscapesTextAndAttributeValues) {
  html::Svg svg("a<b & \"c\"");
  svg.text(1.5, 2, "x</text><script>", {{"class", "v\" onload=\"y"}});
  svg.open_group({{"class", "bar"}}, "t<i>'");
  svg.rect(0, 10, -3, 4.25, "#fff", {{"rx", "2"}});
  svg.close_group();
  svg.path("M0 0 L1 1", {{"fill", "none"}});
  EXPECT_EQ(svg.finish(960, 80.5),
            "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 960 80.5\" role=\"img\" "
            "aria-label=\"a&lt;b &amp; &quot;c&quot;\" font-size=\"12\">"
            "<text x=\"1.5\" y=\"2\" class=\"v&quot; onload=&quot;y\">x&lt;/text&gt;&lt;script&gt;"
            "</text><g class=\"bar\"><title>t&lt;i&gt;&#39;</title>"
            "<rect x=\"0\" y=\"10\" width=\"0\" height=\"4.25\" fill=\"#fff\" rx=\"2\"/></g>"
            "<path d=\"M0 0 L1 1\" fill=\"none\"/></svg>");
}

TEST(HtmlSvgWriter, CoordinatesHaveAtMostTwoDecimals) {
  EXPECT_EQ(html::num(960), "960");
  EXPECT_EQ(html::num(1.1), "1.1");
  EXPECT_EQ(html::num(2.346), "2.35");
  EXPECT_EQ(html::num(-12.5), "-12.5");
  EXPECT_EQ(html::num(-0.001), "0");  // not "-0"
}

// ---------------------------------------------------------------------------------------------
// Chrome trace

struct TraceSlice {
  std::string name;
  int64_t start_ns;
  int64_t end_ns;
};

// Whole nanoseconds, as the reporter writes them (three decimals of a microsecond).
int64_t ns(double us) { return static_cast<int64_t>(std::llround(us * 1e3)); }

std::map<std::pair<int, int>, std::vector<TraceSlice>> slices_by_thread(const json& trace) {
  std::map<std::pair<int, int>, std::vector<TraceSlice>> threads;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const double ts = e.at("ts").get<double>();
    const double dur = e.at("dur").get<double>();
    threads[{e.at("pid").get<int>(), e.at("tid").get<int>()}].push_back(
        {e.at("name").get<std::string>(), ns(ts), ns(ts + dur)});
  }
  return threads;
}

void expect_nested(const json& trace) {
  for (const auto& [thread, slices] : slices_by_thread(trace)) {
    for (std::size_t i = 0; i < slices.size(); ++i) {
      for (std::size_t j = i + 1; j < slices.size(); ++j) {
        const TraceSlice& a = slices[i];
        const TraceSlice& b = slices[j];
        const bool disjoint = a.end_ns <= b.start_ns || b.end_ns <= a.start_ns;
        const bool a_in_b = b.start_ns <= a.start_ns && a.end_ns <= b.end_ns;
        const bool b_in_a = a.start_ns <= b.start_ns && b.end_ns <= a.end_ns;
        EXPECT_TRUE(disjoint || a_in_b || b_in_a)
            << "pid " << thread.first << ": '" << a.name << "' [" << a.start_ns << ", " << a.end_ns
            << ") and '" << b.name << "' [" << b.start_ns << ", " << b.end_ns << ") overlap";
      }
    }
  }
}

TEST(ChromeTrace, IsTraceEventFormatWithCompleteSlices) {
  const json trace = render_trace(make_sweep());
  EXPECT_EQ(trace.at("displayTimeUnit"), "ms");
  ASSERT_TRUE(trace.at("traceEvents").is_array());
  int slices = 0;
  for (const json& e : trace.at("traceEvents")) {
    ASSERT_TRUE(e.contains("ph")) << e.dump();
    if (e.at("ph") != "X") continue;
    ++slices;
    for (const char* key : {"ts", "dur", "pid", "tid", "name"})
      EXPECT_TRUE(e.contains(key)) << key << " in " << e.dump();
    EXPECT_GE(e.at("dur").get<double>(), 0);
    EXPECT_EQ(e.at("tid"), 1);
  }
  // 1×4: step + 4 micro-steps + 17 phases; 2×2: step + 2 micro-steps + 9 phases; 4×1 (OOM): none.
  EXPECT_EQ(slices, (1 + 4 + 17) + (1 + 2 + 9));
}

TEST(ChromeTrace, OneNamedProcessPerRun) {
  const json trace = render_trace(make_sweep());
  std::map<int, std::string> names;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "process_name")
      names[e.at("pid")] = e.at("args").at("name");
  }
  EXPECT_EQ(names, (std::map<int, std::string>{{1, "1×4"}, {2, "2×2"}, {3, "4×1 (oom)"}}));
}

// A split stopped before its first timed step has only its warm-up's timeline: named so, not as
// the last timed step.
TEST(ChromeTrace, AnUntimedSplitsStepIsItsWarmUp) {
  SweepResult result = make_sweep();
  result.runs[1].steps.clear();
  std::map<int, std::string> threads;
  const json trace = render_trace(result);
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name" && e.at("args").at("name").get<std::string>().find("step") !=
                                                                    std::string::npos)
      threads[e.at("pid")] = e.at("args").at("name");
  }
  EXPECT_EQ(threads[1], "last timed optimizer step");
  EXPECT_EQ(threads[2], "warm-up step (no timed step)");
}

TEST(ChromeTrace, SlicesNestPerThread) { expect_nested(render_trace(make_sweep())); }

TEST(ChromeTrace, SlicesCarryTheMeasuredTimes) {
  const SweepResult result = make_sweep();
  const json trace = render_trace(result);
  const auto threads = slices_by_thread(trace);
  const std::vector<TraceSlice>& run2 = threads.at({2, 1});  // 2×2
  const PhaseSpan& forward = result.runs[1].timeline[2];     // micro-step 0, forward
  const PhaseSpan& opt = result.runs[1].timeline.back();
  ASSERT_EQ(forward.phase, Phase::kForward);
  const auto find = [&](const std::string& name, int64_t start_ns) {
    for (const TraceSlice& s : run2) {
      if (s.name == name && s.start_ns == start_ns) return s;
    }
    return TraceSlice{"missing", -1, -1};
  };
  const TraceSlice f = find("forward", std::llround(forward.start_seconds * 1e9));
  EXPECT_EQ(f.end_ns - f.start_ns, std::llround(forward.duration_seconds * 1e9));
  // The step spans the recorded step: the last sample's wall time (0.0305 · 1.08 s).
  const TraceSlice step = find("optimizer step", 0);
  EXPECT_EQ(step.end_ns, 32940000);
  const TraceSlice micro = find("micro-step 1/2", 0);
  EXPECT_EQ(micro.end_ns, std::llround(result.runs[1].timeline[4].start_seconds * 1e9));
  const TraceSlice o = find("optimizer", std::llround(opt.start_seconds * 1e9));
  EXPECT_EQ(o.end_ns, std::llround((opt.start_seconds + opt.duration_seconds) * 1e9));
}

TEST(ChromeTrace, MemoryCountersAtEveryPhaseBoundary) {
  const SweepResult result = make_sweep();
  const json trace = render_trace(result);
  std::map<int, std::vector<std::pair<int64_t, int64_t>>> memory;  // pid → (ns, bytes)
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "C" || e.at("name") != "memory") continue;
    memory[e.at("pid")].push_back(
        {ns(e.at("ts").get<double>()), e.at("args").at("allocated_bytes").get<int64_t>()});
  }
  ASSERT_EQ(memory.size(), 2u);  // the OOM run has no timeline
  for (int run = 0; run < 2; ++run) {
    const auto& timeline = result.runs[static_cast<std::size_t>(run)].timeline;
    const auto& counters = memory.at(run + 1);
    ASSERT_EQ(counters.size(), 2 * timeline.size());
    EXPECT_EQ(counters.front(), (std::pair<int64_t, int64_t>{0, timeline.front().bytes_at_start}));
    EXPECT_EQ(counters.back().second, timeline.back().bytes_at_end);
  }
}

TEST(ChromeTrace, NoisyOverlappingSpansStillNest) {
  SweepResult result = make_sweep();
  // Each phase claims to start 1 µs before the previous one ended, and one has a NaN duration.
  for (RunResult& run : result.runs) {
    for (std::size_t i = 1; i < run.timeline.size(); ++i) run.timeline[i].start_seconds -= 1e-6;
  }
  result.runs[0].timeline[3].duration_seconds = kNotMeasured;
  result.runs[0].steps.clear();
  expect_nested(render_trace(result));
}

TEST(ChromeTrace, InterleavedMicroStepsFallBackToPhasesUnderTheStep) {
  SweepResult result = make_sweep();
  std::swap(result.runs[1].timeline[3].micro_step, result.runs[1].timeline[4].micro_step);
  const json trace = render_trace(result);
  expect_nested(trace);
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("pid") == 2) EXPECT_NE(e.at("cat"), "micro_step");
  }
}

// A precision sweep: two runs of one label (2×2 fp32 and 2×2 bf16) are told apart in every place
// a report names a split — the HTML table's precision column, the recommended split, the charts'
// bars, the trace's processes and the Markdown recommendation (they read label() alone before).
TEST(HtmlReport, PrecisionSweepsNameEachRunsPrecision) {
  SweepResult result = make_sweep();
  result.runs.pop_back();  // the oom 4×1
  result.runs.push_back(result.runs[1]);
  result.runs.back().config.precision = Precision::kBf16;
  result.recommendation.best_index = 2;
  result.recommendation.tied_indices = {1, 2};
  const std::string html = render_html(result);
  EXPECT_NE(html.find("<div class=\"rec-label\">2×2 bf16</div>"), std::string::npos);
  EXPECT_NE(html.find("Equivalent to the fastest within ±3 %: 2×2 fp32"), std::string::npos);
  EXPECT_NE(html.find(">precision</th>"), std::string::npos);
  EXPECT_GE(count(chart_element(html, "chart-step-time"), "2×2 bf16"), 1u);
  EXPECT_GE(count(chart_element(html, "chart-step-time"), "2×2 fp32"), 1u);

  const json trace = render_trace(result);
  std::map<int, std::string> names;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "process_name") names[e.at("pid")] = e.at("args").at("name");
  }
  EXPECT_EQ(names, (std::map<int, std::string>{{1, "1×4 fp32"}, {2, "2×2 fp32"}, {3, "2×2 bf16"}}));

  std::ostringstream markdown;
  MarkdownReporter().report(result, markdown);
  EXPECT_NE(markdown.str().find("**Recommendation:** 2×2 bf16 — "), std::string::npos) << markdown.str();

  // One precision: the labels alone, as before.
  EXPECT_EQ(render_html(make_sweep()).find(">precision</th>"), std::string::npos);
}

// The table's "mean" is the one the recommendation quotes, the decision's (winsorized) mean, not the
// steps' plain mean (the CSV's step_seconds_mean), which a stalled step moves: seen 6 % apart on a
// busy machine, the same word for two numbers on one page.
TEST(HtmlReport, TheMeanColumnIsTheDecisionsMean) {
  SweepResult result = make_sweep();
  result.runs[1].mean_seconds = Estimate{0.0312345, 0.0301, 0.0323};  // 2×2; its plain mean is 31.01 ms
  const std::string html = render_html(result);
  EXPECT_NE(html.find("<th class=\"text\">status</th><th>mean</th><th>median</th>"), std::string::npos);
  EXPECT_NE(html.find("<tr class=\"recommended\"><td>2×2<span class=\"badge\">best</span></td>"
                      "<td class=\"text status-ok\">ok</td><td>31.23</td><td>30.50</td>"),
            std::string::npos)
      << html.substr(html.find("<table"), 2000);
  EXPECT_EQ(html.find("<td>31.01</td>"), std::string::npos);
}

}  // namespace
}  // namespace accumbench
