// The plan to hand over (src/report/plan_report.cpp): --headroom, the largest split of the batch
// that fits, and the split table as Markdown, JSON and HTML from one column table.
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <sstream>

#include "accumbench/error.hpp"
#include "accumbench/plan_report.hpp"
#include "accumbench/report.hpp"
#include "accumbench/units.hpp"

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
    ab::PlanReport r{ab::plan_splits(cfg, options, workload), workload, {}, "cpu (test)", limit, headroom, {}, {}, ""};
    r.largest = ab::largest_fitting_per_job(cfg, options, workload, r.usable_bytes());
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
  ASSERT_EQ(none.largest.size(), 1u);  // one job: no lists
  EXPECT_EQ(none.largest[0].flags, "");
  EXPECT_EQ(none.largest[0].largest[0].split.micro_batch, 0);
  // Checkpointing still fits a split there (2×4 ckpt: it keeps one block's input per block).
  EXPECT_EQ(ab::largest_lines(none),
            std::vector<std::string>{"largest split of 8 that fits in " + ab::format_bytes(plans[0].peak_bytes - 1) +
                                     ": none; with checkpointing: " + none.largest[0].largest[1].split.label()});
  EXPECT_EQ(none.largest[0].largest[1].split.label(), "2×4 ckpt");
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
                   "limit " + ab::format_bytes(limit) + " less headroom 0 B (what the plan does not count): " +
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
  EXPECT_EQ(md[9], "Every split also: bf16=false fp16=false max_length=64 packing=false loss_type=nll");
  EXPECT_EQ(md[11].rfind("largest split of 8 that fits in " + ab::format_bytes(limit) + ": 4×2; with checkpointing: ", 0),
            0u);
  // Without a limit: no spare or fits column, no largest line.
  const std::vector<std::string> free = lines_of(ab::plan_markdown(t.report(0, 0)));
  EXPECT_EQ(free[2], "| split | forward | backward | optimizer | peak | held by | per_device_train_batch_size | "
                     "gradient_accumulation_steps | gradient_checkpointing |");
  EXPECT_NE(free[0].find("no memory limit"), std::string::npos);
}

// What plan noted on stderr: the JSON's notes (an empty array without any), a list between the
// context line and the Markdown table, a card under the HTML page's header.
TEST(PlanReport, NotesInEveryFile) {
  const Tiny t;
  ab::PlanReport r = t.report(0, 0);
  EXPECT_EQ(nlohmann::json::parse(ab::plan_json(r))["notes"], nlohmann::json::array());
  EXPECT_EQ(lines_of(ab::plan_markdown(r))[2].rfind("| split |", 0), 0u);
  EXPECT_EQ(ab::plan_html(r).find("id=\"notes\""), std::string::npos);
  r.notes = {"--group-by-length changes nothing here", "a <b> | c"};
  EXPECT_EQ(nlohmann::json::parse(ab::plan_json(r))["notes"],
            (nlohmann::json{"--group-by-length changes nothing here", "a <b> | c"}));
  const std::vector<std::string> md = lines_of(ab::plan_markdown(r));
  ASSERT_GE(md.size(), 7u);
  EXPECT_EQ(md[2], "Notes:");
  EXPECT_EQ(md[4], "- --group-by-length changes nothing here");
  EXPECT_EQ(md[5], "- a &lt;b&gt; \\| c");
  EXPECT_EQ(md[7].rfind("| split |", 0), 0u) << md[7];
  EXPECT_NE(ab::plan_html(r).find("<section class=\"card notes\" id=\"notes\"><h2>Notes</h2><ul><li>--group-by-length "
                                  "changes nothing here</li><li>a &lt;b&gt; | c</li></ul></section>"),
            std::string::npos);
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
  EXPECT_EQ(j["context"]["token_batches"], 2);  // the sweep's two steps (--distinct-steps), on the CPU
  ASSERT_EQ(j["splits"].size(), r.plans.size());
  for (size_t i = 0; i < r.plans.size(); ++i) {
    const nlohmann::json& s = j["splits"][i];
    EXPECT_EQ(s["split"], r.plans[i].split.label());
    EXPECT_EQ(s["peak_bytes"], r.plans[i].peak_bytes);
    EXPECT_EQ(s["spare_bytes"], r.usable_bytes() - r.plans[i].peak_bytes);
    EXPECT_EQ(s["fits"], r.plans[i].peak_bytes <= r.usable_bytes());
    EXPECT_EQ(s["trainer_settings"]["per_device_train_batch_size"], r.plans[i].split.micro_batch);
    EXPECT_EQ(s["backward_bytes"], r.plans[i].phase_peak_bytes[1]);
  }
  EXPECT_EQ(j["largest_fitting"][0]["split"], "8×1");  // 64 MiB holds every split of gpt2-tiny
  const nlohmann::json free = nlohmann::json::parse(ab::plan_json(t.report(0, 0)));
  EXPECT_TRUE(free["context"]["memory_limit_bytes"].is_null());
  EXPECT_TRUE(free["splits"][0]["fits"].is_null());
  EXPECT_TRUE(free["largest_fitting"].empty());
  EXPECT_EQ(free["context"]["activation_seq_len"], 64);  // synthetic data: T
  EXPECT_TRUE(free["context"]["memory_judged_on"].is_null());
}

// --optimizer-in-backward plans every split so: the largest that fits is judged as the table
// planned it (it named 8×1 and 8×1 ckpt, splits the table did not hold).
TEST(PlanReport, TheLargestUnderOptimizerInBackwardIsAnOibSplit) {
  Tiny t;
  t.workload.grid.optimizer_in_backward = true;
  const ab::PlanReport r = t.report(64 * (int64_t{1} << 20), 0);
  ASSERT_EQ(r.plans.size(), 1u);
  EXPECT_EQ(r.plans[0].split.label(), "8\u00d71 oib");
  ASSERT_FALSE(r.largest.empty());
  ASSERT_FALSE(r.largest[0].largest.empty());
  EXPECT_EQ(r.largest[0].largest[0].split.label(), "8\u00d71 oib");
  EXPECT_EQ(r.largest[0].largest[0].peak_bytes, r.plans[0].peak_bytes);
}

// Real data padded per micro-batch: the plan's activations are the longest padded micro-batch's,
// not T's, and every output says so (the JSON's seq_len stays T).
TEST(PlanReport, RealDataNamesTheActivationsLength) {
  Tiny t;
  t.options.activation_seq_len = 48;
  t.options.worst_micro_batch = "the one holding sample 10 of skewed.txt (40 positions), padded to 48 (--padding multiple:16)";
  const ab::PlanReport r = t.report(0, 0);
  const nlohmann::json j = nlohmann::json::parse(ab::plan_json(r));
  EXPECT_EQ(j["context"]["seq_len"], 64);
  EXPECT_EQ(j["context"]["activation_seq_len"], 48);
  EXPECT_EQ(j["context"]["memory_judged_on"], t.options.worst_micro_batch);
  EXPECT_NE(ab::plan_markdown(r).find("gpt2-tiny, T=64 (activations at 48 positions, the longest padded micro-batch: "
                                      "the one holding sample 10 of skewed.txt"),
            std::string::npos)
      << ab::plan_markdown(r);
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

namespace {

// Tiny's options with one change applied, as changes_to_fit makes it, and the largest splits
// largest_fitting_splits finds with it: what each change's line must say.
std::string largest_words_with(const Tiny& t, void (*edit)(ab::PlanOptions&, ab::WorkloadOptions&), int64_t usable) {
  ab::PlanOptions options = t.options;
  ab::WorkloadOptions workload = t.workload;
  edit(options, workload);
  std::string words;
  for (const ab::LargestSplit& l : ab::largest_fitting_splits(t.cfg, options, workload, usable))
    words += std::string(words.empty() ? "" : "; ") + (l.knobs.empty() ? "" : l.knobs + ": ") +
             (l.split.micro_batch > 0 ? l.split.shape_label() : std::string("none"));
  return words;
}

}  // namespace

namespace {

// A change as the test makes it, by hand, on Tiny's options.
struct HandChange {
  std::string words;
  void (*edit)(ab::PlanOptions&, ab::WorkloadOptions&);
  bool in_backward = false;  // the optimizer inside backward: a split's knob, 8×1 only
};

const std::vector<HandChange>& hand_changes() {
  static const std::vector<HandChange> changes = {
      {"--chunked-loss", [](ab::PlanOptions&, ab::WorkloadOptions& w) { w.loss.chunked = true; }},
      {"--optimizer-in-backward", [](ab::PlanOptions&, ab::WorkloadOptions&) {}, true},
      {"--precision bf16", [](ab::PlanOptions&, ab::WorkloadOptions& w) { w.precisions = {ab::Precision::kBf16}; }},
      {"--optimizer adamw8bit", [](ab::PlanOptions& o, ab::WorkloadOptions&) { o.optimizer = ab::OptimizerKind::kAdamW8bit; }},
      {"--weights-dtype bf16", [](ab::PlanOptions& o, ab::WorkloadOptions&) { o.weights_dtype = ab::Precision::kBf16; }},
      {"--lora-rank 16", [](ab::PlanOptions& o, ab::WorkloadOptions&) { o.lora.rank = 16; }},
      {"--lora-rank 16 --base-quant nf4",
       [](ab::PlanOptions& o, ab::WorkloadOptions&) {
         o.lora.rank = 16;
         o.lora.base_quant = ab::BaseQuant::kNf4;
       }},
  };
  return changes;
}

// The smallest peak of any split of Tiny's batch with these changes made, over the knobs
// changes_to_fit tries: with and without checkpointing; only with the chunked loss when a change
// asks for it.
int64_t smallest_peak(const Tiny& t, const std::vector<size_t>& picked) {
  ab::PlanOptions options = t.options;
  ab::WorkloadOptions workload = t.workload;
  bool in_backward = false;
  for (size_t i : picked) {
    hand_changes()[i].edit(options, workload);
    in_backward = in_backward || hand_changes()[i].in_backward;
  }
  int64_t smallest = INT64_MAX;
  for (int64_t m : {1, 2, 4, 8}) {
    if (in_backward && m != 8) continue;
    for (ab::Checkpointing c : {ab::Checkpointing::kNone, ab::Checkpointing::kBlocks}) {
      ab::SplitConfig split;
      split.micro_batch = m;
      split.accum_steps = 8 / m;
      split.precision = workload.precisions.front();
      split.activation_checkpointing = c;
      split.chunked_loss = workload.loss.chunked;
      split.optimizer_in_backward = in_backward;
      smallest = std::min(smallest, ab::plan_memory(t.cfg, options, split).peak_bytes);
    }
  }
  return smallest;
}

}  // namespace

// When no change alone fits, the fewest that fit together: every pair (here) whose smallest split
// fits, in the order of the changes, and no combination that makes one change twice (LoRA r16 and
// the 4-bit base that brings it).
TEST(PlanReport, ChangesToFitTogether) {
  const Tiny t;
  const size_t n = hand_changes().size();
  int64_t alone = INT64_MAX;
  for (size_t i = 0; i < n; ++i) alone = std::min(alone, smallest_peak(t, {i}));
  const int64_t usable = alone - 1;  // no change alone fits
  std::vector<std::string> pairs;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j)
      if (!(i == 5 && j == 6) && smallest_peak(t, {i, j}) <= usable)
        pairs.push_back(hand_changes()[i].words + " " + hand_changes()[j].words);
  ASSERT_FALSE(pairs.empty()) << "some pair of changes fits gpt2-tiny where none alone does";

  ab::PlanReport r = t.report(usable, 0);
  r.changes = ab::changes_to_fit(t.cfg, t.options, t.workload, r.usable_bytes());
  ASSERT_EQ(r.changes.size(), n + pairs.size());
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(r.changes[i].options, hand_changes()[i].words);
    EXPECT_FALSE(r.changes[i].fits()) << r.changes[i].options;
    EXPECT_EQ(r.changes[i].combined, 1u);
  }
  for (size_t k = 0; k < pairs.size(); ++k) {
    EXPECT_EQ(r.changes[n + k].options, pairs[k]);
    EXPECT_EQ(r.changes[n + k].combined, 2u);
    EXPECT_TRUE(r.changes[n + k].fits());
  }
  for (const ab::FitChange& c : r.changes)
    EXPECT_EQ(c.options.find("--lora-rank 16 --lora-rank 16"), std::string::npos) << "LoRA made twice: " << c.options;

  const std::vector<std::string> lines = ab::changes_lines(r);
  ASSERT_EQ(lines.size(), 1 + n + 1 + pairs.size());
  EXPECT_EQ(lines[n + 1], "none alone; with two of them together (each combination that fits):");
  size_t width = 0;
  for (const std::string& p : pairs) width = std::max(width, p.size());
  std::string words;
  for (const ab::LargestSplit& l : r.changes[n].largest)
    words += std::string(words.empty() ? "" : "; ") + (l.knobs.empty() ? "" : l.knobs + ": ") +
             (l.split.micro_batch > 0 ? l.split.label() : std::string("none"));
  EXPECT_EQ(lines[n + 2], "  " + pairs[0] + std::string(width - pairs[0].size() + 2, ' ') + words);
  EXPECT_EQ(lines.back().find("nothing tried fits"), std::string::npos);

  const nlohmann::json j = nlohmann::json::parse(ab::plan_json(r));
  EXPECT_EQ(j["changes_to_fit"][0]["changes"], 1);
  EXPECT_EQ(j["changes_to_fit"][n]["changes"], 2);
  EXPECT_EQ(j["changes_to_fit"][n]["options"], pairs[0]);
  const std::string md = ab::plan_markdown(r);
  const size_t heading = md.find("none alone; with two of them together (each combination that fits):");
  ASSERT_NE(heading, std::string::npos);
  EXPECT_GT(md.find("- `" + pairs[0] + "`: "), heading);
  EXPECT_EQ(md.find("all of them together"), std::string::npos);
  EXPECT_EQ(md.find("nothing tried fits"), std::string::npos);
  const std::string page = ab::plan_html(r);
  EXPECT_NE(page.find("<p class=\"note\">none alone; with two of them together"), std::string::npos);
  EXPECT_NE(page.find("<li><code>" + pairs[0] + "</code>: "), std::string::npos);
}

// When no split fits: each change not in effect, one at a time, with the largest splits it would
// fit (the same as planning with the option given); none when a split fits; all of them together
// and what is left to try when no single one does.
TEST(PlanReport, ChangesToFit) {
  const Tiny t;
  ab::SplitConfig smallest;
  smallest.micro_batch = 1;
  smallest.accum_steps = 8;
  smallest.activation_checkpointing = ab::Checkpointing::kBlocks;
  const int64_t below = ab::plan_memory(t.cfg, t.options, smallest).peak_bytes - 1;  // not even 1×8 ckpt fits
  ab::PlanReport r = t.report(below, 0);
  r.changes = ab::changes_to_fit(t.cfg, t.options, t.workload, r.usable_bytes());
  std::vector<std::string> options;
  for (const ab::FitChange& c : r.changes) options.push_back(c.options);
  ASSERT_EQ(options, (std::vector<std::string>{"--chunked-loss", "--optimizer-in-backward", "--precision bf16", "--optimizer adamw8bit",
                                               "--weights-dtype bf16", "--lora-rank 16", "--lora-rank 16 --base-quant nf4"}));
  const std::vector<std::string> lines = ab::changes_lines(r);
  ASSERT_EQ(lines.size(), 8u);
  EXPECT_EQ(lines[0], "no split fits in " + ab::format_bytes(below) +
                          "; the largest that would with one change (the plan with each option added):");
  const auto line = [](const std::string& option, const std::string& words) {
    return "  " + option + std::string(33 - option.size(), ' ') + words;  // the widest option, then two spaces
  };
  // The optimizer inside backward: accumulation 1 only, 8×1.
  const auto in_backward = [&](ab::Checkpointing c) {
    ab::SplitConfig s;
    s.micro_batch = 8;
    s.accum_steps = 1;
    s.activation_checkpointing = c;
    s.optimizer_in_backward = true;
    return ab::plan_memory(t.cfg, t.options, s).peak_bytes <= below ? s.label() : std::string("none");
  };
  EXPECT_EQ(lines[2], line("--optimizer-in-backward", in_backward(ab::Checkpointing::kNone) +
                                                          "; with checkpointing: " + in_backward(ab::Checkpointing::kBlocks)));
  EXPECT_EQ(lines[4], line("--optimizer adamw8bit",
                           largest_words_with(t, [](ab::PlanOptions& o, ab::WorkloadOptions&) { o.optimizer = ab::OptimizerKind::kAdamW8bit; }, below)));
  EXPECT_EQ(lines[6], line("--lora-rank 16", largest_words_with(t, [](ab::PlanOptions& o, ab::WorkloadOptions&) { o.lora.rank = 16; }, below)));
  EXPECT_EQ(lines[7], line("--lora-rank 16 --base-quant nf4", largest_words_with(t, [](ab::PlanOptions& o, ab::WorkloadOptions&) {
                             o.lora.rank = 16;
                             o.lora.base_quant = ab::BaseQuant::kNf4;
                           }, below)));
  EXPECT_TRUE(r.changes[5].fits()) << "LoRA r16 fits gpt2-tiny's 1×8 ckpt in what the full fine-tune's lacks";
  // The chunked loss as a change: its own knobs, plain and checkpointed.
  EXPECT_EQ(r.changes[0].largest.size(), 2u);
  EXPECT_TRUE(r.changes[0].largest[1].split.chunked_loss || r.changes[0].largest[1].split.micro_batch == 0);
  const nlohmann::json j = nlohmann::json::parse(ab::plan_json(r));
  EXPECT_EQ(j["changes_to_fit"].size(), 7u);
  EXPECT_EQ(j["changes_to_fit"][5]["options"], "--lora-rank 16");
  EXPECT_NE(ab::plan_markdown(r).find("- `--lora-rank 16`: "), std::string::npos);
  EXPECT_NE(ab::plan_html(r).find("<li><code>--lora-rank 16</code>: "), std::string::npos);

  // The closing sentence only after all of them together failed, not after a last change that fails
  // while an earlier one fits.
  ab::PlanReport some = r;
  some.changes.back().largest = {ab::LargestSplit{"", {}, 0}};
  some.changes.back().largest[0].split.micro_batch = 0;
  const std::string md = ab::plan_markdown(some);
  EXPECT_EQ(md.find("nothing tried fits"), std::string::npos);
  EXPECT_EQ(md.find("--lora-rank 16 --base-quant nf4"), md.rfind("--lora-rank 16 --base-quant nf4")) << "the last change once";
  EXPECT_EQ(ab::plan_html(some).find("nothing tried fits"), std::string::npos);

  // Something fits: no changes.
  const int64_t roomy = ab::plan_memory(t.cfg, t.options, smallest).peak_bytes;
  EXPECT_TRUE(ab::changes_to_fit(t.cfg, t.options, t.workload, roomy).empty());
  // Nothing fits even with every change at once: they are tried together, and the lines say what is left.
  ab::PlanReport none = t.report(1024, 0);
  none.changes = ab::changes_to_fit(t.cfg, t.options, t.workload, none.usable_bytes());
  ASSERT_EQ(none.changes.size(), 8u);
  EXPECT_TRUE(none.changes.back().together());
  EXPECT_EQ(none.changes.back().options,
            "--chunked-loss --optimizer-in-backward --precision bf16 --optimizer adamw8bit --weights-dtype bf16 --lora-rank 16 "
            "--base-quant nf4");
  EXPECT_NE(ab::plan_markdown(none).find("nothing tried fits"), std::string::npos);
  EXPECT_NE(ab::plan_html(none).find("nothing tried fits"), std::string::npos);
  const std::vector<std::string> none_lines = ab::changes_lines(none);
  ASSERT_EQ(none_lines.size(), 10u);
  EXPECT_EQ(none_lines[8], "none alone or in any combination; all of them together (" + none.changes.back().options +
                              "): none; with checkpointing: none");
  EXPECT_EQ(none_lines[9], "nothing tried fits: a shorter --seq-len, a smaller model or more memory is needed (more "
                           "data-parallel ranks do not help: each holds the whole model and at least one sequence)");
  // A change already in effect is not offered: LoRA with 16-bit weights leaves the chunked loss,
  // bf16 autocast and the 4-bit base.
  ab::PlanOptions lora = t.options;
  lora.lora.rank = 8;
  lora.weights_dtype = ab::Precision::kBf16;
  options.clear();
  for (const ab::FitChange& c : ab::changes_to_fit(t.cfg, lora, t.workload, 1024)) options.push_back(c.options);
  EXPECT_EQ(options, (std::vector<std::string>{"--chunked-loss", "--precision bf16", "--base-quant nf4",
                                               "--chunked-loss --precision bf16 --base-quant nf4"}));
  // TRL's step: its own chunked loss, not accumbench's head.
  ab::PlanOptions trl = lora;
  trl.framework = ab::PlanFramework::kHfTrl;
  trl.trl_loss = ab::TrlLoss::kNll;
  const std::vector<ab::FitChange> trl_changes = ab::changes_to_fit(t.cfg, trl, t.workload, 1024);
  ASSERT_FALSE(trl_changes.empty());
  EXPECT_EQ(trl_changes.front().options, "--trl-loss chunked_nll");
}

// The sentence a sweep that memory stopped ends with: splits the plan fits that the sweep did not
// run, with the options that would run them; else the changes that fit; else that nothing tried
// does; nothing when the plan fits only splits the sweep ran (the two disagree there).
TEST(PlanReport, FitAdvice) {
  const Tiny t;
  const auto split = [](int64_t m, ab::Checkpointing c) {
    ab::SplitConfig s;
    s.micro_batch = m;
    s.accum_steps = 8 / m;
    s.activation_checkpointing = c;
    return s;
  };
  const int64_t just_one = ab::plan_memory(t.cfg, t.options, split(1, ab::Checkpointing::kNone)).peak_bytes;
  const std::vector<ab::LargestSplit> largest = ab::largest_fitting_splits(t.cfg, t.options, t.workload, just_one);
  ASSERT_EQ(largest.size(), 2u);
  ASSERT_EQ(largest[0].split.micro_batch, 1) << "1×8 fits its own peak, 2×4 does not";
  ASSERT_GT(largest[1].split.micro_batch, 1) << "checkpointing fits a larger micro-batch in it";
  std::vector<ab::SplitConfig> swept;  // --micro-batches 2,4,8, no checkpointing
  for (int64_t m : {2, 4, 8}) swept.push_back(split(m, ab::Checkpointing::kNone));
  EXPECT_EQ(ab::fit_advice(t.cfg, t.options, t.workload, just_one, swept),
            "The plan fits 1\u00d78 (--micro-batches 1) or " + largest[1].split.label() +
                " (--activation-checkpointing blocks) in " + ab::format_bytes(just_one) + ", which this sweep did not run.");
  // Every split swept, with and without checkpointing: the plan has nothing to add.
  for (int64_t m : {1, 2, 4, 8}) swept.push_back(split(m, ab::Checkpointing::kBlocks));
  swept.push_back(split(1, ab::Checkpointing::kNone));
  EXPECT_EQ(ab::fit_advice(t.cfg, t.options, t.workload, just_one, swept), "");
  EXPECT_EQ(ab::fit_advice(t.cfg, t.options, t.workload, 0, swept), "") << "no memory known";

  // Nothing fits as given: the changes that do, each with its splits.
  const int64_t below = ab::plan_memory(t.cfg, t.options, split(1, ab::Checkpointing::kBlocks)).peak_bytes - 1;
  const std::vector<ab::FitChange> changes = ab::changes_to_fit(t.cfg, t.options, t.workload, below);
  const std::string advice = ab::fit_advice(t.cfg, t.options, t.workload, below, swept);
  EXPECT_EQ(advice.rfind("The plan fits it in " + ab::format_bytes(below) + " with one change: ", 0), 0u) << advice;
  for (const ab::FitChange& c : changes) {
    EXPECT_EQ(advice.find(c.options + " (") != std::string::npos, c.fits()) << c.options << " in: " << advice;
  }
  EXPECT_NE(advice.find(", or --lora-rank 16 (1\u00d78"), std::string::npos) << advice;
  const std::string pointer = " (`accumbench plan` with the same options, --memory-limit and --headroom 0% shows each).";
  ASSERT_GT(advice.size(), pointer.size());
  EXPECT_EQ(advice.substr(advice.size() - pointer.size()), pointer);
  EXPECT_EQ(ab::fit_advice(t.cfg, t.options, t.workload, 1024, swept),
            "Nothing the plan tries fits in 1.0 KiB, not even every change it knows together: a shorter --seq-len, a "
            "smaller model or more memory is needed.");

  // A sweep of two precisions measures each as a job of its own. Where only the second fits
  // (the smallest peak of one precision, below every split of the other), its splits are what
  // the plan names, with their precision; the first's changes are not (before: "with one change:
  // ..." for the first precision alone). Every split tried: the plan has nothing to add.
  const auto min_peak = [&](ab::Precision p) {
    int64_t least = std::numeric_limits<int64_t>::max();
    for (int64_t m : {1, 2, 4, 8}) {
      for (ab::Checkpointing c : {ab::Checkpointing::kNone, ab::Checkpointing::kBlocks}) {
        ab::SplitConfig s = split(m, c);
        s.precision = p;
        least = std::min(least, ab::plan_memory(t.cfg, t.options, s).peak_bytes);
      }
    }
    return least;
  };
  const bool fp32_smaller = min_peak(ab::Precision::kFp32) < min_peak(ab::Precision::kBf16);
  const ab::Precision fitting = fp32_smaller ? ab::Precision::kFp32 : ab::Precision::kBf16;
  const ab::Precision other = fp32_smaller ? ab::Precision::kBf16 : ab::Precision::kFp32;
  ab::WorkloadOptions both = t.workload;
  both.precisions = {other, fitting};
  const int64_t only_one = min_peak(fitting);
  ASSERT_LT(only_one, min_peak(other));
  std::vector<ab::SplitConfig> first_only;
  for (int64_t m : {1, 2, 4, 8}) {
    for (ab::Checkpointing c : {ab::Checkpointing::kNone, ab::Checkpointing::kBlocks}) {
      ab::SplitConfig s = split(m, c);
      s.precision = other;
      first_only.push_back(s);
    }
  }
  const std::string names_second = ab::fit_advice(t.cfg, t.options, both, only_one, first_only);
  EXPECT_EQ(names_second.rfind("The plan fits 1\u00d78", 0), 0u) << names_second;
  EXPECT_NE(names_second.find(" " + ab::to_string(fitting) + " in " + ab::format_bytes(only_one) + ", which this sweep did not run."),
            std::string::npos) << names_second;
  EXPECT_EQ(names_second.find("change"), std::string::npos) << names_second;
  std::vector<ab::SplitConfig> every = first_only;
  for (ab::SplitConfig s : first_only) {
    s.precision = fitting;
    every.push_back(s);
  }
  EXPECT_EQ(ab::fit_advice(t.cfg, t.options, both, only_one, every), "");
}

// A plan of lists (--optimizer adamw,adamw8bit --weights-dtype fp32,bf16): every split of every
// job, each planned to the byte as a plan of that job alone plans it, and named with its job; the
// largest splits per job, as that job alone finds them; the Trainer keys of a job (optim, dtype) on
// its rows, not among those every split shares; JSON naming each split's job.
TEST(PlanReport, ListsPlanEachJobAsItsOwnPlan) {
  Tiny t;
  t.workload.grid.other_optimizers = {ab::OptimizerKind::kAdamW8bit};
  t.workload.grid.other_weights_dtypes = {ab::Precision::kBf16};
  const std::vector<ab::MemoryPlan> plans = ab::plan_splits(t.cfg, t.options, t.workload);
  const std::vector<ab::GridJob> jobs = ab::grid_jobs(t.workload);
  ASSERT_EQ(jobs.size(), 4u);
  ASSERT_EQ(plans.size(), 16u);
  size_t i = 0;
  for (const ab::GridJob& job : jobs) {
    ab::PlanOptions alone = t.options;  // as `plan --optimizer X --weights-dtype Y` plans it
    alone.optimizer = job.optimizer;
    alone.weights_dtype = job.weights_dtype;
    for (const ab::MemoryPlan& single : ab::plan_splits(t.cfg, alone, ab::job_workload(t.workload, job))) {
      ASSERT_LT(i, plans.size());
      EXPECT_EQ(plans[i].split.key(), single.split.key());
      EXPECT_EQ(plans[i].peak_bytes, single.peak_bytes) << single.split.key();
      EXPECT_EQ(plans[i].phase_peak_bytes, single.phase_peak_bytes) << single.split.key();
      ++i;
    }
  }
  EXPECT_LT(plans[4].phase_peak_bytes[2], plans[0].phase_peak_bytes[2]) << "8-bit state below AdamW's moments";
  EXPECT_LT(plans[8].peak_bytes, plans[0].peak_bytes) << "bf16 weights below fp32";
  EXPECT_EQ(ab::plan_label(plans[0], plans), "1\u00d78");
  EXPECT_EQ(ab::plan_label(plans[4], plans), "1\u00d78 adamw8bit");
  EXPECT_EQ(ab::plan_label(plans[8], plans), "1\u00d78 bf16-weights");
  EXPECT_EQ(ab::plan_label(plans[15], plans), "8\u00d71 adamw8bit bf16-weights");

  const int64_t limit = plans[2].peak_bytes;  // 4×2 of adamw on fp32 weights just fits
  const ab::PlanReport r = t.report(limit, 0);
  ASSERT_EQ(r.largest.size(), jobs.size());
  std::vector<std::string> expected = {"largest split of 8 that fits in " + ab::format_bytes(limit) + ", for each job of the lists:"};
  for (size_t j = 0; j < jobs.size(); ++j) {
    ab::PlanOptions alone = t.options;
    alone.optimizer = jobs[j].optimizer;
    alone.weights_dtype = jobs[j].weights_dtype;
    const std::vector<ab::LargestSplit> own =
        ab::largest_fitting_splits(t.cfg, alone, ab::job_workload(t.workload, jobs[j]), limit);
    ASSERT_EQ(r.largest[j].largest.size(), own.size());
    for (size_t k = 0; k < own.size(); ++k) {
      EXPECT_EQ(r.largest[j].largest[k].split.micro_batch, own[k].split.micro_batch);
      EXPECT_EQ(r.largest[j].largest[k].split.optimizer, jobs[j].optimizer);
      EXPECT_EQ(r.largest[j].largest[k].split.weights_dtype, jobs[j].weights_dtype);
    }
    const std::string flags = ab::job_flags(jobs[j], t.workload);
    expected.push_back("  " + flags + std::string(std::string("--weights-dtype fp32 --optimizer adamw8bit").size() - flags.size() + 2, ' ') +
                       ab::largest_words(own));
  }
  EXPECT_EQ(ab::largest_lines(r), expected);
  EXPECT_EQ(r.largest[0].largest[0].split.label(), "4\u00d72");
  EXPECT_EQ(expected[4].rfind("  --weights-dtype bf16 --optimizer adamw8bit  ", 0), 0u);

  const std::vector<std::string> md = lines_of(ab::plan_markdown(r));
  EXPECT_EQ(md[2], "| split | forward | backward | optimizer | peak | held by | spare | fits | "
                   "per_device_train_batch_size | gradient_accumulation_steps | gradient_checkpointing | other Trainer settings |");
  EXPECT_EQ(md[4].substr(0, 8), "| 1\u00d78 |");
  const auto ends_with = [](const std::string& line, const std::string& end) {
    return line.size() >= end.size() && line.compare(line.size() - end.size(), end.size(), end) == 0;
  };
  EXPECT_TRUE(ends_with(md[4], "| 1 | 8 | false |  |")) << md[4];
  EXPECT_TRUE(ends_with(md[8], "| 1 | 8 | false | optim=adamw_8bit |")) << md[8];
  EXPECT_TRUE(ends_with(md[19], "| 8 | 1 | false | optim=adamw_8bit dtype=bfloat16 |")) << md[19];
  EXPECT_EQ(md[21], "Every split also: bf16=false fp16=false max_length=64 packing=false loss_type=nll");

  const nlohmann::json j = nlohmann::json::parse(ab::plan_json(r));
  EXPECT_EQ(j["splits"][4]["split"], "1\u00d78 adamw8bit");
  EXPECT_EQ(j["splits"][4]["optimizer"], "adamw8bit");
  EXPECT_EQ(j["splits"][4]["weights_dtype"], "fp32");
  EXPECT_EQ(j["splits"][8]["weights_dtype"], "bf16");
  EXPECT_EQ(j["splits"][8]["trainer_settings"]["dtype"], "bfloat16");
  EXPECT_EQ(j["largest_fitting"].size(), 8u);  // two knobs per job
  EXPECT_EQ(j["largest_fitting"][2]["optimizer"], "adamw8bit");
  EXPECT_EQ(j["largest_fitting"][2]["split"], r.largest[1].largest[0].split.micro_batch > 0
                                                  ? nlohmann::json(r.largest[1].largest[0].split.shape_label())
                                                  : nlohmann::json(nullptr));
  EXPECT_TRUE(j["changes_to"].is_null());
}

// The JSON's Trainer settings typed as the YAML they are written for reads them: numbers, booleans,
// a list of modules, a one-module pattern as its text.
TEST(PlanReport, JsonTrainerSettingsAreTyped) {
  Tiny t;
  t.workload.lora.rank = 4;
  t.workload.lora.dropout = 0.05;
  t.workload.lora.targets = "c_attn";
  t.options.lora = t.workload.lora;
  ab::PlanReport r = t.report(0, 0);
  r.target_modules = ab::peft_target_modules(t.cfg, t.workload.lora);
  nlohmann::json settings = nlohmann::json::parse(ab::plan_json(r))["splits"][0]["trainer_settings"];
  EXPECT_EQ(settings["per_device_train_batch_size"], 1);
  EXPECT_TRUE(settings["per_device_train_batch_size"].is_number_integer());
  EXPECT_EQ(settings["gradient_checkpointing"], false);
  EXPECT_EQ(settings["use_peft"], true);
  EXPECT_EQ(settings["lora_r"], 4);
  EXPECT_DOUBLE_EQ(settings["lora_dropout"].get<double>(), 0.05);
  EXPECT_EQ(settings["lora_target_modules"], ".*\\.c_attn");  // TRL's one-module pattern, unquoted
  EXPECT_EQ(settings["loss_type"], "nll");
  r.target_modules = {"c_attn", "c_proj"};
  settings = nlohmann::json::parse(ab::plan_json(r))["splits"][0]["trainer_settings"];
  EXPECT_EQ(settings["lora_target_modules"], nlohmann::json::array({"c_attn", "c_proj"}));
}

// Two precisions: the label names the precision (the other lists are single), the context both.
TEST(PlanReport, ListsOfPrecisionsNameEachSplitsPrecision) {
  Tiny t;
  t.workload.precisions = {ab::Precision::kFp32, ab::Precision::kBf16};
  const ab::PlanReport r = t.report(0, 0);
  ASSERT_EQ(r.plans.size(), 8u);
  EXPECT_EQ(ab::plan_label(r.plans[0], r.plans), "1\u00d78 fp32");
  EXPECT_EQ(ab::plan_label(r.plans[7], r.plans), "8\u00d71 bf16");
  const nlohmann::json j = nlohmann::json::parse(ab::plan_json(r));
  EXPECT_EQ(j["context"]["precision"], "fp32,bf16");
  EXPECT_EQ(j["splits"][7]["precision"], "bf16");
  EXPECT_EQ(j["splits"][7]["trainer_settings"]["bf16"], true);
  // bf16= differs between the splits: a row's own key, not one every split shares.
  EXPECT_EQ(lines_of(ab::plan_markdown(r))[4].substr(0, 13), "| 1\u00d78 fp32 |");
  EXPECT_NE(ab::plan_markdown(r).find("Every split also: fp16=false max_length=64 packing=false loss_type=nll\n"), std::string::npos);
}

// The job a plan or a sweep names its changes for when nothing fits: the narrowest weights, the
// optimizer of the smallest state, the precision whose smallest split the plan finds lightest;
// and the words that say how it was picked. One job: no words.
TEST(PlanReport, LightestJobOfTheLists) {
  Tiny t;
  EXPECT_EQ(ab::lightest_job(t.cfg, t.options, t.workload).which, "");
  t.workload.grid.other_optimizers = {ab::OptimizerKind::kSgd};
  t.workload.grid.other_weights_dtypes = {ab::Precision::kBf16};
  t.workload.precisions = {ab::Precision::kFp32, ab::Precision::kBf16};
  const ab::LightestJob lightest = ab::lightest_job(t.cfg, t.options, t.workload);
  EXPECT_EQ(lightest.job.optimizer, ab::OptimizerKind::kSgd);
  EXPECT_EQ(lightest.job.weights_dtype, ab::Precision::kBf16);
  const auto smallest_peak = [&](ab::Precision precision) {
    ab::GridJob job = lightest.job;
    job.precision = precision;
    ab::SplitConfig s;
    s.micro_batch = 1;
    s.accum_steps = 8;
    s.precision = precision;
    s.activation_checkpointing = ab::Checkpointing::kBlocks;
    return ab::plan_memory(t.cfg, ab::plan_options_for(t.options, job), s).peak_bytes;
  };
  const ab::Precision expected = smallest_peak(ab::Precision::kBf16) < smallest_peak(ab::Precision::kFp32)
                                     ? ab::Precision::kBf16 : ab::Precision::kFp32;
  EXPECT_EQ(lightest.job.precision, expected);
  EXPECT_EQ(lightest.which, "sgd (the smallest state of --optimizer adamw,sgd) on bf16 weights (the narrowest of "
                            "--weights-dtype fp32,bf16) under " + ab::to_string(expected) +
                                " (of --precision fp32,bf16, the lightest in the plan)");
}

// When nothing fits, the changes are to the lightest job, and none of them is to a value the lists
// hold already (that job is planned beside it): with --precision fp32,bf16 and --optimizer
// adamw,adamw8bit no "--precision bf16" or "--optimizer adamw8bit" line; two optimizer changes are
// never made together; at equal state the fused adamw is lighter than adamw-foreach.
TEST(PlanReport, ChangesToTheLightestJobLeaveOutTheListsValues) {
  Tiny t;
  t.workload.precisions = {ab::Precision::kFp32, ab::Precision::kBf16};
  t.workload.grid.other_optimizers = {ab::OptimizerKind::kAdamW8bit};
  const ab::LightestJob lightest = ab::lightest_job(t.cfg, t.options, t.workload);
  const std::vector<ab::FitChange> changes = ab::changes_to_fit(t.cfg, t.options, t.workload, lightest, 1024);
  ASSERT_FALSE(changes.empty());
  std::vector<std::string> options;
  for (const ab::FitChange& c : changes) options.push_back(c.options);
  for (const std::string& listed : {std::string("--precision bf16"), std::string("--optimizer adamw8bit")}) {
    for (const std::string& o : options) EXPECT_EQ(o.find(listed), std::string::npos) << o;
  }
  EXPECT_NE(std::find(options.begin(), options.end(), "--weights-dtype bf16"), options.end());
  // Without the lists the same job would name them (when fp32 is the lightest precision).
  if (lightest.job.precision == ab::Precision::kFp32) {
    const std::vector<ab::FitChange> alone = ab::changes_to_fit(t.cfg, ab::plan_options_for(t.options, lightest.job),
                                                                ab::job_workload(t.workload, lightest.job), 1024);
    EXPECT_TRUE(std::any_of(alone.begin(), alone.end(), [](const ab::FitChange& c) { return c.options == "--precision bf16"; }));
  }

  Tiny foreach;
  foreach.options.optimizer = ab::OptimizerKind::kAdamWForeach;
  foreach.workload.optimizer.kind = ab::OptimizerKind::kAdamWForeach;
  const std::vector<ab::FitChange> single = ab::changes_to_fit(foreach.cfg, foreach.options, foreach.workload, 1024);
  ASSERT_FALSE(single.empty());
  for (const ab::FitChange& c : single) {
    const size_t first = c.options.find("--optimizer ");  // not --optimizer-in-backward
    EXPECT_TRUE(first == std::string::npos || c.options.find("--optimizer ", first + 1) == std::string::npos) << c.options;
  }
  foreach.workload.grid.other_optimizers = {ab::OptimizerKind::kAdamW};
  EXPECT_EQ(ab::lightest_optimizer(foreach.cfg, foreach.workload), ab::OptimizerKind::kAdamW);
}

// A clipping job (--max-grad-norm) cannot step inside backward: the change is offered with the
// clipping given up, in its words, and plans what the same change plans for an unclipped job.
TEST(PlanReport, ChangesToFitGiveUpClippingForTheOptimizerInsideBackward) {
  const Tiny plain;
  Tiny clipping;
  clipping.options.max_grad_norm = 1;
  clipping.workload.optimizer.max_grad_norm = 1;
  const int64_t usable = smallest_peak(plain, {0}) - 1;  // not even the chunked loss fits
  const std::vector<ab::FitChange> without = ab::changes_to_fit(plain.cfg, plain.options, plain.workload, usable);
  const std::vector<ab::FitChange> with = ab::changes_to_fit(clipping.cfg, clipping.options, clipping.workload, usable);
  ASSERT_GE(without.size(), 2u);
  ASSERT_EQ(with.size(), without.size());
  EXPECT_EQ(without[1].options, "--optimizer-in-backward");
  EXPECT_EQ(with[1].options, "--optimizer-in-backward --max-grad-norm 0");
  ASSERT_EQ(with[1].largest.size(), without[1].largest.size());
  for (size_t i = 0; i < with[1].largest.size(); ++i) {
    EXPECT_EQ(with[1].largest[i].split.label(), without[1].largest[i].split.label());
    EXPECT_EQ(with[1].largest[i].peak_bytes, without[1].largest[i].peak_bytes);
  }
  // --max-grad-norm 0,1: the lightest job is the unclipped one, but the option would refuse the
  // list's 1, so the change still gives the clipping up in so many words; and the words that pick
  // the lightest job say it is the unclipped one.
  Tiny listed = plain;
  listed.workload.grid.other_max_grad_norms = {1};
  const ab::LightestJob lightest = ab::lightest_job(listed.cfg, listed.options, listed.workload);
  EXPECT_EQ(lightest.job.max_grad_norm, 0);
  EXPECT_EQ(lightest.which, "no clipping (of --max-grad-norm 0,1)");
  const std::vector<ab::FitChange> from_list = ab::changes_to_fit(listed.cfg, listed.options, listed.workload, lightest, usable);
  ASSERT_EQ(from_list.size(), without.size());
  EXPECT_EQ(from_list[1].options, "--optimizer-in-backward --max-grad-norm 0");
  EXPECT_EQ(from_list[1].largest[0].peak_bytes, without[1].largest[0].peak_bytes);
}

// Under fp16 autocast a full fine-tune is not offered fp16 weights, which the Trainer's GradScaler
// refuses to unscale (helper-102); with LoRA it is, the adapters training in fp32.
TEST(PlanReport, Fp16WeightsAreOfferedOnlyWhereTheTrainerRunsThem) {
  Tiny full;
  full.options.cpu = false;  // fp16 is planned for CUDA
  full.workload.precisions = {ab::Precision::kFp16};
  const int64_t usable = smallest_peak(full, {0}) / 4;
  for (const ab::FitChange& change : ab::changes_to_fit(full.cfg, full.options, full.workload, usable)) {
    EXPECT_EQ(change.options.find("--weights-dtype fp16"), std::string::npos) << change.options;
  }
  Tiny lora = full;
  lora.options.lora.rank = lora.workload.lora.rank = 4;
  const std::vector<ab::FitChange> changes = ab::changes_to_fit(lora.cfg, lora.options, lora.workload, usable);
  EXPECT_TRUE(std::any_of(changes.begin(), changes.end(),
                          [](const ab::FitChange& c) { return c.options == "--weights-dtype fp16"; }));
}

// --knobs plans the optimizer-inside-backward splits already: the change is not offered again
// (helper-94), as a list's value is not.
TEST(PlanReport, KnobsTakeTheOptimizerInsideBackwardOffTheChanges) {
  Tiny knobs;
  knobs.workload.grid.knobs = true;
  const int64_t usable = smallest_peak(knobs, {0}) - 1;
  const std::vector<ab::FitChange> changes = ab::changes_to_fit(knobs.cfg, knobs.options, knobs.workload, usable);
  ASSERT_GE(changes.size(), 2u);
  for (const ab::FitChange& change : changes) {
    EXPECT_EQ(change.options.find("--optimizer-in-backward"), std::string::npos) << change.options;
  }
  Tiny plain;
  EXPECT_EQ(ab::changes_to_fit(plain.cfg, plain.options, plain.workload, usable)[1].options, "--optimizer-in-backward");
}

// The byte columns widen where a value needs it: at the largest shape the options take
// (batch × T = 2^28) qwen3-1.7b's peaks run to five-digit TiB, which ran into the next column
// ("14926.06 TiB15436.93 TiB"). Every value keeps a space before it.
TEST(PlanReport, ByteColumnsWidenForTheLargestShapes) {
  const ab::ModelConfig cfg = ab::find_preset("qwen3-1.7b");
  ab::PlanOptions options;
  options.seq_len = 1 << 20;
  options.batch = 256;
  ab::WorkloadOptions workload;
  workload.model.preset = "qwen3-1.7b";
  workload.seq_len = options.seq_len;
  workload.batch = options.batch;
  std::ostringstream out;
  ab::print_split_summary(ab::plan_splits(cfg, options, workload), 8 * kGiB, out, &workload, {});
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_GE(lines.size(), 3u);
  bool five_digits = false;
  for (const std::string& line : lines) {
    five_digits = five_digits || line.find("5436.93 TiB") != std::string::npos;
    for (const char* unit : {"TiB", "GiB", "MiB"}) {
      for (size_t at = line.find(unit); at != std::string::npos; at = line.find(unit, at + 1)) {
        const size_t after = at + 3;
        EXPECT_TRUE(after >= line.size() || line[after] == ' ') << line;
      }
    }
  }
  EXPECT_TRUE(five_digits) << out.str();
}
