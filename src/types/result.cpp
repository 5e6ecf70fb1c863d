// The phase table and the run statuses (result.hpp). These names are part of the JSON/CSV format,
// so changing one is a format change: bump kJsonSchemaVersion.
#include "accumbench/result.hpp"

#include "accumbench/error.hpp"

namespace accumbench {

const std::array<PhaseInfo, kPhaseCount>& phase_table() {
  // Colours: Tableau 10 (Tableau Software, 2016), distinct and colour-blind-aware on white.
  static const std::array<PhaseInfo, kPhaseCount> kTable = {{
      {Phase::kData, "data", "data", "in data loading", "#b07aa1", false},
      {Phase::kH2D, "h2d", "h2d", "in host-to-device copies", "#edc948", false},
      {Phase::kForward, "forward", "fwd", "in forward", "#4e79a7", false},
      {Phase::kBackward, "backward", "bwd", "in backward", "#f28e2b", false},
      {Phase::kAllReduce, "allreduce", "allreduce", "in the gradient all-reduce", "#76b7b2", true},
      {Phase::kOptimizer, "optimizer", "opt", "in the optimizer step", "#59a14f", false},
      {Phase::kOther, "other", "other", "outside the timed phases", "#bab0ac", false},
  }};
  return kTable;
}

const PhaseInfo& phase_info(Phase phase) {
  for (const PhaseInfo& info : phase_table()) {
    if (info.phase == phase) return info;
  }
  return phase_table().back();  // unreachable for valid enum values
}

const char* phase_name(Phase phase) { return phase_info(phase).name; }

namespace {

// Defined once, read both ways.
constexpr std::array<std::pair<RunStatus, const char*>, 4> kRunStatusNames = {{
    {RunStatus::kOk, "ok"},
    {RunStatus::kOutOfMemory, "oom"},
    {RunStatus::kPredictedOutOfMemory, "predicted-oom"},
    {RunStatus::kError, "error"},
}};

}  // namespace

const char* run_status_name(RunStatus status) {
  for (const auto& [value, name] : kRunStatusNames) {
    if (value == status) return name;
  }
  return "unknown";
}

RunStatus run_status_from_name(const std::string& name) {
  for (const auto& [value, known] : kRunStatusNames) {
    if (name == known) return value;
  }
  throw UserError("unknown run status '" + name +
                  "'; expected one of ok, oom, predicted-oom, error");
}

const char* to_string(DecisionKind kind) {
  switch (kind) {
    case DecisionKind::kNone: return "none";
    case DecisionKind::kOnly: return "only";
    case DecisionKind::kFastest: return "fastest";
    case DecisionKind::kTie: return "tie";
    case DecisionKind::kUndecided: return "undecided";
  }
  return "none";
}

const char* to_string(Verdict verdict) {
  switch (verdict) {
    case Verdict::kSlower: return "slower";
    case Verdict::kFaster: return "faster";
    case Verdict::kEquivalent: return "equivalent";
    case Verdict::kUndecided: return "undecided";
  }
  return "undecided";
}

}  // namespace accumbench
