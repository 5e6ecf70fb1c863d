// Names of the result enums and the split label. These strings are part of the JSON/CSV format
// (run_status_name, phase_name) and of --resume (SplitConfig::key), so changing one is a format
// change: bump kJsonSchemaVersion.
#include "accumbench/result.hpp"

#include <array>
#include <string>
#include <utility>

#include "accumbench/error.hpp"

namespace accumbench {

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::kData: return "data";
    case Phase::kH2D: return "h2d";
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
    case Phase::kOptimizer: return "optimizer";
    case Phase::kOther: return "other";
    case Phase::kAllReduce: return "allreduce";
  }
  return "unknown";  // unreachable for valid enum values; keeps -Wreturn-type quiet
}

std::string SplitConfig::label() const {
  // U+00D7 MULTIPLICATION SIGN, UTF-8 encoded: "8×8" reads as micro-batch × accumulation steps.
  std::string text = std::to_string(micro_batch) + "\xC3\x97" + std::to_string(accum_steps);
  if (activation_checkpointing == "blocks") text += " ckpt";
  if (optimizer_in_backward) text += " oib";
  if (chunked_loss) text += " chunked-ce";
  if (cuda_graphs) text += " graphs";
  return text;
}

std::vector<SplitConfig> knob_variants(const SplitConfig& split, bool knobs) {
  std::vector<SplitConfig> points = {split};
  if (!knobs) return points;
  SplitConfig checkpointed = split;
  checkpointed.activation_checkpointing = "blocks";
  points.push_back(checkpointed);
  // Optimizer-in-backward needs the whole batch in one backward, and one rank (it would step
  // before the gradients are summed over the ranks).
  if (split.accum_steps == 1 && split.world_size == 1) {
    SplitConfig in_backward = split;
    in_backward.optimizer_in_backward = true;
    points.push_back(in_backward);
    in_backward.activation_checkpointing = "blocks";
    points.push_back(in_backward);
  }
  return points;
}

std::vector<SplitConfig> loss_variants(std::vector<SplitConfig> points, bool chunked) {
  if (!chunked) return points;
  const size_t plain = points.size();
  for (size_t i = 0; i < plain; ++i) {
    SplitConfig with_chunks = points[i];
    with_chunks.chunked_loss = true;
    points.push_back(with_chunks);
  }
  return points;
}

std::string SplitConfig::key() const {
  return label() + "/" + precision + (world_size > 1 ? "/world" + std::to_string(world_size) : "");
}

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

}  // namespace accumbench
