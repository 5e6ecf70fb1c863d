// The plan to hand over (src/report/plan_report.cpp): --headroom, the largest split of the batch
// that fits, and the split table as Markdown, JSON and HTML from one column table.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>

#include "accumbench/error.hpp"
#include "accumbench/plan_report.hpp"
#include "accumbench/report.hpp"

namespace ab = accumbench;

namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

// gpt2-tiny, T=64, batch 8, fp32, explicit attention on the CPU: the plan's arithmetic, no device.
struct Tiny {
  ab::ModelConfig cfg = ab::find_preset("gpt2-tiny");
  ab::PlanOptions options;
  ab::WorkloadOptions workload;
  Tiny() {
    options.seq_len = 64;
    options.batch = 8;
    workload.model.preset = "gpt2-tiny";
    workload.seq_len = 64;
    workload.batch = 8;
  }
  ab::PlanReport report(int64_t limit, int64_t headroom) const {
    ab::PlanReport r{ab::plan_splits(cfg, options, workload), workload, {}, "cpu (test)", limit, headroom, {}};
    r.largest = ab::largest_fitting_splits(cfg, options, workload, r.usable_bytes());
    return r;
  }
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

// A size needs its unit; a percentage is of the limit; a headroom that leaves nothing is refused.
TEST(PlanReport, Headroom) {
  EXPECT_EQ(ab::headroom_bytes("5%", 100 * kGiB), 5 * kGiB);
  EXPECT_EQ(ab::headroom_bytes("0%", 24 * kGiB), 0);
  EXPECT_EQ(ab::headroom_bytes("1GiB", 24 * kGiB), kGiB);
  EXPECT_EQ(ab::headroom_bytes("500MB", 24 * kGiB), 500000000);
  EXPECT_EQ(ab::headroom_bytes(ab::kDefaultHeadroom, 24 * kGiB), 1288490189);  // 5 % of 24 GiB, rounded
  for (const std::string bad : {"5", "abc%", "100%", "-1%", "5 parsecs"}) {
    EXPECT_THROW(ab::headroom_bytes(bad, 24 * kGiB), ab::UserError) << bad;
  }
  try {
    ab::headroom_bytes("30GiB", 24 * kGiB);
    ADD_FAILURE() << "a headroom above the limit passed";
  } catch (const ab::UserError& error) {
    EXPECT_EQ(std::string(error.what()),
              "--headroom 30GiB leaves nothing of the 24.00 GiB memory limit; give a smaller headroom");
  }
}

// The largest split that fits is a split of the batch (its micro-batch divides 8), the largest
// whose peak is under the usable memory: between the peaks of 2×4 and 4×2, that is 2×4, even
// where largest_micro_batch (any size) says 3.
TEST(PlanReport, LargestSplitDividesTheBatch) {
  const Tiny t;
  const std::vector<ab::MemoryPlan> plans = ab::plan_splits(t.cfg, t.options, t.workload);
  ASSERT_EQ(plans.size(), 4u);  // 1×8, 2×4, 4×2, 8×1
  const int64_t between = (plans[1].peak_bytes + plans[2].peak_bytes) / 2;
  const std::vector<ab::LargestSplit> largest = ab::largest_fitting_splits(t.cfg, t.options, t.workload, between);
  ASSERT_EQ(largest.size(), 2u);  // plain, with checkpointing
  EXPECT_EQ(largest[0].split.label(), "2×4");
  EXPECT_EQ(largest[0].peak_bytes, plans[1].peak_bytes);
  EXPECT_EQ(largest[1].knobs, "with checkpointing");
  EXPECT_EQ(8 % largest[1].split.micro_batch, 0);
  EXPECT_GE(largest[1].split.micro_batch, 2);  // checkpointing never needs more memory here
  const int64_t any_size =
      ab::largest_micro_batch(t.cfg, t.options, ab::Precision::kFp32, ab::Checkpointing::kNone, between);
  EXPECT_GE(any_size, 2);
  EXPECT_LT(any_size, 4);
  // Nothing fits in less than the smallest peak: "none".
  ab::PlanReport none = t.report(plans[0].peak_bytes - 1, 0);
  EXPECT_EQ(none.largest[0].split.micro_batch, 0);
  // Checkpointing still fits a split there (2×4 ckpt: it keeps one block's input per block).
  EXPECT_EQ(ab::largest_line(none), "largest split of 8 that fits in " + ab::format_bytes(plans[0].peak_bytes - 1) +
                                         ": none; with checkpointing: " + none.largest[1].split.label());
  EXPECT_EQ(none.largest[1].split.label(), "2×4 ckpt");
}

// Markdown: the context and the memory line, then one row per split with the columns of
// plan_columns() (spare and fits only under a limit), the shared settings, the largest split and
// the legend.
TEST(PlanReport, MarkdownLines) {
  const Tiny t;
  const std::vector<ab::MemoryPlan> plans = ab::plan_splits(t.cfg, t.options, t.workload);
  const int64_t limit = plans[2].peak_bytes + 1024;  // 4×2 fits with 1 KiB to spare
  const std::vector<std::string> md = lines_of(ab::plan_markdown(t.report(limit, 0)));
  ASSERT_GE(md.size(), 12u);
  EXPECT_EQ(md[0], "**accumbench plan:** gpt2-tiny, T=64, batch 8, fp32, attention explicit, device cpu (test); memory "
                   "limit " + ab::format_bytes(limit) + " less headroom 0 B (CUDA context, fragmentation): " +
                       ab::format_bytes(limit) + " for the splits");
  EXPECT_EQ(md[2], "| split | forward | backward | optimizer | peak | held by | spare | fits | "
                   "per_device_train_batch_size | gradient_accumulation_steps | gradient_checkpointing |");
  EXPECT_EQ(md[3], "| --- | ---: | ---: | ---: | ---: | --- | ---: | --- | ---: | ---: | --- |");
  const ab::MemoryPlan& p = plans[2];
  EXPECT_EQ(md[6], "| 4×2 | " + ab::format_bytes(p.phase_peak_bytes[0]) + " | " + ab::format_bytes(p.phase_peak_bytes[1]) +
                       " | " + ab::format_bytes(p.phase_peak_bytes[2]) + " | " + ab::format_bytes(p.peak_bytes) + " | " +
                       ab::plan_phase_name(p.peak_phase) + " | 1.0 KiB | yes | 4 | 2 | false |");
  EXPECT_NE(md[7].find("| 8×1 |"), std::string::npos);
  EXPECT_NE(md[7].find(" | no | 8 | 1 | false |"), std::string::npos);
  EXPECT_EQ(md[9], "Every split also: bf16=false fp16=false max_length=64 packing=false");
  EXPECT_EQ(md[11].rfind("largest split of 8 that fits in " + ab::format_bytes(limit) + ": 4×2; with checkpointing: ", 0),
            0u);
  // Without a limit: no spare or fits column, no largest line.
  const std::vector<std::string> free = lines_of(ab::plan_markdown(t.report(0, 0)));
  EXPECT_EQ(free[2], "| split | forward | backward | optimizer | peak | held by | per_device_train_batch_size | "
                     "gradient_accumulation_steps | gradient_checkpointing |");
  EXPECT_NE(free[0].find("no memory limit"), std::string::npos);
}

// JSON: the same splits with numbers; spare = usable − peak; null where there is no limit.
TEST(PlanReport, JsonFields) {
  const Tiny t;
  const int64_t limit = 64 * (int64_t{1} << 20);
  const ab::PlanReport r = t.report(limit, ab::headroom_bytes("5%", limit));
  const nlohmann::json j = nlohmann::json::parse(ab::plan_json(r));
  EXPECT_EQ(j["kind"], "accumbench plan");
  EXPECT_EQ(j["context"]["model"], "gpt2-tiny");
  EXPECT_EQ(j["context"]["batch"], 8);
  EXPECT_EQ(j["context"]["memory_limit_bytes"], limit);
  EXPECT_EQ(j["context"]["headroom_bytes"], limit / 20);
  EXPECT_EQ(j["context"]["usable_bytes"], limit - limit / 20);
  ASSERT_EQ(j["splits"].size(), r.plans.size());
  for (size_t i = 0; i < r.plans.size(); ++i) {
    const nlohmann::json& s = j["splits"][i];
    EXPECT_EQ(s["split"], r.plans[i].split.label());
    EXPECT_EQ(s["peak_bytes"], r.plans[i].peak_bytes);
    EXPECT_EQ(s["spare_bytes"], r.usable_bytes() - r.plans[i].peak_bytes);
    EXPECT_EQ(s["fits"], r.plans[i].peak_bytes <= r.usable_bytes());
    EXPECT_EQ(s["trainer_settings"]["per_device_train_batch_size"], std::to_string(r.plans[i].split.micro_batch));
    EXPECT_EQ(s["backward_bytes"], r.plans[i].phase_peak_bytes[1]);
  }
  EXPECT_EQ(j["largest_fitting"][0]["split"], "8×1");  // 64 MiB holds every split of gpt2-tiny
  const nlohmann::json free = nlohmann::json::parse(ab::plan_json(t.report(0, 0)));
  EXPECT_TRUE(free["context"]["memory_limit_bytes"].is_null());
  EXPECT_TRUE(free["splits"][0]["fits"].is_null());
  EXPECT_TRUE(free["largest_fitting"].empty());
}

// HTML: a self-contained page with the table (a split that does not fit marked) and the JSON
// embedded, equal to plan_json.
TEST(PlanReport, HtmlPage) {
  const Tiny t;
  const std::vector<ab::MemoryPlan> plans = ab::plan_splits(t.cfg, t.options, t.workload);
  const ab::PlanReport r = t.report(plans[1].peak_bytes, 0);
  const std::string page = ab::plan_html(r);
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(page.find("<table id=\"plan-table\">"), std::string::npos);
  EXPECT_NE(page.find("<th>spare</th>"), std::string::npos);
  EXPECT_NE(page.find("<tr class=\"status-bad\"><td class=\"text\">4×2</td>"), std::string::npos);
  EXPECT_NE(page.find("<tr><td class=\"text\">2×4</td>"), std::string::npos);
  const std::string open = "<script type=\"application/json\" id=\"accumbench-plan\">";
  const size_t begin = page.find(open) + open.size();
  const std::string data = page.substr(begin, page.find("</script>", begin) - begin);
  EXPECT_EQ(nlohmann::json::parse(data), nlohmann::json::parse(ab::plan_json(r)));
  EXPECT_EQ(page.find("<script>"), std::string::npos);  // no code, data only
}
