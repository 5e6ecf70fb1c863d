// ChromeTraceReporter: the recorded optimizer step of every run in the Trace Event Format
// (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU), which
// Perfetto and chrome://tracing open.
//
//   pid = run index + 1, named after the split ("2×2", "4×1 (oom)")
//   tid 1: "optimizer step" ⊃ "micro-step k/K" ⊃ data, h2d, forward, backward; optimizer phase
//          directly under the step
//   counters "memory" {allocated_bytes} at every phase boundary and
//            "memory peak in phase" {peak_bytes} for the span of each phase
//
// Viewers nest slices by containment only, so times are rounded to whole nanoseconds first and
// every parent is computed from its rounded children: a parent then always contains its children
// exactly, and siblings never overlap, whatever the floating-point noise in the measurements.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "accumbench/report.hpp"
#include "accumbench/result.hpp"

namespace accumbench {
namespace {

using nlohmann::json;

constexpr int kStepThread = 1;

int64_t to_ns(double seconds) {
  return std::isfinite(seconds) ? static_cast<int64_t>(std::llround(seconds * 1e9)) : 0;
}

// Trace timestamps are microseconds; three decimals keep nanosecond resolution.
double to_us(int64_t ns) { return static_cast<double>(ns) / 1e3; }

struct Slice {
  std::string name;
  std::string category;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  json args = json::object();
};

json complete_event(const Slice& s, int pid) {
  return {{"ph", "X"},
          {"name", s.name},
          {"cat", s.category},
          {"pid", pid},
          {"tid", kStepThread},
          {"ts", to_us(s.start_ns)},
          {"dur", to_us(s.end_ns - s.start_ns)},
          {"args", s.args}};
}

json counter_event(const std::string& name, int pid, int64_t ns, const char* key, int64_t value) {
  return {{"ph", "C"},          {"name", name},    {"pid", pid},
          {"tid", kStepThread}, {"ts", to_us(ns)}, {"args", {{key, value}}}};
}

json metadata_event(const char* name, int pid, int tid, json args) {
  return {{"ph", "M"},  {"name", name}, {"pid", pid},
          {"tid", tid}, {"ts", 0},      {"args", std::move(args)}};
}

struct PhaseSlice {
  PhaseSpan span;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// Phases in start order with [start, end) in whole nanoseconds; a phase that the next one starts
// inside (clock noise) is cut at the next start so siblings stay disjoint.
std::vector<PhaseSlice> phase_slices(const std::vector<PhaseSpan>& timeline) {
  std::vector<PhaseSlice> phases;
  for (const PhaseSpan& span : timeline) {
    PhaseSlice p;
    p.span = span;
    p.start_ns = std::max<int64_t>(0, to_ns(span.start_seconds));
    p.end_ns =
        std::max(p.start_ns, to_ns(span.start_seconds + std::max(0.0, span.duration_seconds)));
    phases.push_back(p);
  }
  std::stable_sort(phases.begin(), phases.end(), [](const PhaseSlice& a, const PhaseSlice& b) {
    return a.start_ns < b.start_ns;
  });
  for (std::size_t i = 0; i + 1 < phases.size(); ++i) {
    phases[i].end_ns = std::min(phases[i].end_ns, phases[i + 1].start_ns);
  }
  return phases;
}

// The window [first start, last end) of each micro-step, in time order. Empty when the windows
// would overlap each other or an optimizer phase (phases interleaved): the phases then sit directly
// under the step rather than under a wrong parent.
std::vector<Slice> micro_step_slices(const std::vector<PhaseSlice>& phases, int64_t accum_steps) {
  std::map<int, Slice> by_micro_step;
  for (const PhaseSlice& p : phases) {
    if (p.span.micro_step < 0) continue;
    auto [it, inserted] = by_micro_step.try_emplace(p.span.micro_step);
    Slice& s = it->second;
    if (inserted) {
      s.name =
          "micro-step " + std::to_string(p.span.micro_step + 1) + "/" + std::to_string(accum_steps);
      s.category = "micro_step";
      s.start_ns = p.start_ns;
      s.end_ns = p.end_ns;
      s.args = {{"micro_step", p.span.micro_step}};
    }
    s.start_ns = std::min(s.start_ns, p.start_ns);
    s.end_ns = std::max(s.end_ns, p.end_ns);
  }
  std::vector<Slice> slices;
  for (auto& entry : by_micro_step) slices.push_back(std::move(entry.second));
  std::sort(slices.begin(), slices.end(),
            [](const Slice& a, const Slice& b) { return a.start_ns < b.start_ns; });
  for (std::size_t i = 0; i + 1 < slices.size(); ++i) {
    if (slices[i].end_ns > slices[i + 1].start_ns) return {};
  }
  for (const PhaseSlice& p : phases) {
    if (p.span.micro_step >= 0) continue;
    for (const Slice& s : slices) {
      if (p.start_ns < s.end_ns && s.start_ns < p.end_ns) return {};
    }
  }
  return slices;
}

void append_run(const RunResult& run, const std::string& label, int pid, int sort_index, std::vector<json>& events) {
  std::string process = label;
  if (run.status != RunStatus::kOk)
    process += std::string(" (") + run_status_name(run.status) + ")";
  events.push_back(metadata_event("process_name", pid, 0, {{"name", process}}));
  events.push_back(metadata_event("process_sort_index", pid, 0, {{"sort_index", sort_index}}));
  if (!run.error.empty())
    events.push_back(metadata_event("process_labels", pid, 0, {{"labels", run.error}}));
  if (run.timeline.empty()) return;
  events.push_back(
      metadata_event("thread_name", pid, kStepThread,
                     {{"name", run.steps.empty() ? "warm-up step (no timed step)" : "last timed optimizer step"}}));

  const std::vector<PhaseSlice> phases = phase_slices(run.timeline);
  const std::vector<Slice> micro_steps = micro_step_slices(phases, run.config.accum_steps);

  Slice step;
  step.name = "optimizer step";
  step.category = "step";
  step.start_ns = 0;
  step.end_ns = run.steps.empty() ? 0 : to_ns(run.steps.back().step_seconds);
  int64_t peak = 0;
  for (const PhaseSlice& p : phases) {
    step.end_ns = std::max(step.end_ns, p.end_ns);
    peak = std::max(peak, p.span.peak_bytes);
  }
  step.args = {{"split", label},
               {"micro_batch", run.config.micro_batch},
               {"accum_steps", run.config.accum_steps},
               {"precision", to_string(run.config.precision)},
               {"peak_bytes", peak}};
  if (std::isfinite(run.step_seconds.median))
    step.args["median_step_seconds"] = run.step_seconds.median;
  // Parents first: viewers that meet two slices with the same start nest the later one inside.
  events.push_back(complete_event(step, pid));
  for (const Slice& s : micro_steps) events.push_back(complete_event(s, pid));

  for (const PhaseSlice& p : phases) {
    Slice s;
    s.name = phase_name(p.span.phase);
    s.category = "phase";
    s.start_ns = p.start_ns;
    s.end_ns = p.end_ns;
    s.args = {{"micro_step", p.span.micro_step},
              {"bytes_at_start", p.span.bytes_at_start},
              {"bytes_at_end", p.span.bytes_at_end},
              {"peak_bytes", p.span.peak_bytes}};
    events.push_back(complete_event(s, pid));
  }
  for (const PhaseSlice& p : phases) {
    events.push_back(
        counter_event("memory", pid, p.start_ns, "allocated_bytes", p.span.bytes_at_start));
    events.push_back(
        counter_event("memory peak in phase", pid, p.start_ns, "peak_bytes", p.span.peak_bytes));
    events.push_back(
        counter_event("memory", pid, p.end_ns, "allocated_bytes", p.span.bytes_at_end));
  }
}

}  // namespace

void ChromeTraceReporter::report(const SweepResult& result, std::ostream& out) const {
  std::vector<json> events;
  for (std::size_t i = 0; i < result.runs.size(); ++i) {
    append_run(result.runs[i], run_label(result.runs[i], result.runs), static_cast<int>(i) + 1, static_cast<int>(i),
               events);
  }
  const SweepContext& c = result.context;
  const json other = {{"generator", "accumbench"},
                      {"model", c.model},
                      {"seq_len", c.seq_len},
                      {"batch", c.batch},
                      {"device", c.device},
                      {"device_name", c.device_name},
                      {"host", c.host},
                      {"date", c.date},
                      {"git_commit", c.git_commit}};
  // One event per line: the file stays greppable and diffable.
  out << "{\"traceEvents\":[\n";
  for (std::size_t i = 0; i < events.size(); ++i) {
    out << events[i].dump(-1, ' ', false, json::error_handler_t::replace)
        << (i + 1 < events.size() ? ",\n" : "\n");
  }
  out << "],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":"
      << other.dump(-1, ' ', false, json::error_handler_t::replace) << "}\n";
}

}  // namespace accumbench
