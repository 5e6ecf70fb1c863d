// The plan's printers (report.hpp): the per-tensor table of one split, the split summary, the
// calibrated peaks. The plan itself (src/plan) only computes.
#include <algorithm>
#include <ostream>

#include "accumbench/report.hpp"
#include "accumbench/units.hpp"
#include "report/format.hpp"

namespace accumbench {

namespace {
// Pads to a width in characters, not bytes: the formulas and labels hold "·" and "×" (UTF-8).
std::string pad(const std::string& s, size_t width, bool right_align = false) {
  return text::pad(s, width, right_align ? text::Align::kRight : text::Align::kLeft);
}

void print_table(const std::string& title, const std::vector<PlanLine>& lines, std::ostream& out) {
  if (lines.empty()) return;
  out << title << "\n";
  for (const auto& line : lines) {
    // A name as wide as its column gets a line of its own, so the formula never runs into it.
    std::string name = line.name;
    if (text::display_width(name) >= 42) {
      out << "  " << name << "\n";
      name.clear();
    }
    out << "  " << pad(name, 42) << pad(line.formula, 22) << pad(format_bytes(line.bytes), 11, true) << "  "
        << line.why << "\n";
  }
  out << "  " << pad("total", 64) << pad(format_bytes(total_bytes(lines)), 11, true) << "\n";
}
}  // namespace

void print_plan(const MemoryPlan& plan, std::ostream& out) {
  const ModelConfig& m = plan.model;
  out << "memory plan: " << m.name << ", T=" << plan.options.seq_len << ", split " << plan.split.shape_label() << ", "
      << to_string(plan.split.precision) << ", attention " << to_string(plan.options.attention);
  if (plan.options.optimizer != OptimizerKind::kAdamW) out << ", optimizer " << to_string(plan.options.optimizer);
  // One padding of a --padding list (its longest micro-batch, where per micro-batch, below).
  if (plan.options.rows_by_packing.size() > 1) out << ", --packing " << to_string(plan.split.packing);
  if (plan.options.worst_by_padding.size() > 1) out << ", --padding " << padding_name(plan.split.padding);
  if (plan.options.framework != PlanFramework::kPlain)
    out << ", framework " << to_string(plan.options.framework) << " (TRL loss_type " << to_string(plan.options.trl_loss) << ")";
  out << "\n";
  const PlanElementBytes e = plan_element_bytes(plan.options, plan.split);  // the formulas' c and w
  out << "  P=" << parameter_count(m) << " L=" << m.n_layers << " d=" << m.d_model << " H=" << m.n_heads
      << " Hkv=" << m.n_kv_heads << " hd=" << m.head_dim << " f=" << m.d_ff << " V=" << m.vocab_size
      << " b=" << plan.split.micro_batch << " c=" << e.c << " w=" << e.w << "\n";
  if (plan.options.lora.enabled() && plan.options.lora.adapter_dtype != Precision::kFp32) {
    out << "  adapters in " << to_string(plan.options.lora.adapter_dtype)
        << " (--adapter-dtype): A, B, their gradients and optimizer state\n";
  }
  if (plan.options.lora.quantized()) {
    const LoraOptions& lora = plan.options.lora;
    out << "  base quantised " << text::base_quant_words(to_string(lora.base_quant), lora.double_quant, lora.kbit_upcast)
        << " (bitsandbytes' storage); a sweep's time of it is approximate: dequantised by LibTorch ops, not bitsandbytes' kernels\n";
  }
  if (plan.first_micro_batch_length > 0) {
    // plan_memory's grouped step: the tables are the later micro-batches', the first's peaks apart.
    out << "  --group-by-length: the tables below are a step's later micro-batches, at most T="
        << plan.options.activation_seq_len << " positions, with every gradient alive; its first micro-batch, the step's "
        << "longest samples (at most " << plan.first_micro_batch_length << " positions), runs before any gradient exists: "
        << "forward " << format_bytes(plan.first_micro_batch_forward_bytes) << ", backward "
        << format_bytes(plan.first_micro_batch_backward_bytes) << " (in the peaks per phase)\n";
  } else if (!plan.options.worst_micro_batch.empty()) {
    out << "  activations for the longest micro-batch of the data, " << plan.options.worst_micro_batch
        << ": T=" << plan.options.activation_seq_len << " in the formulas below, except the host token batches\n";
  }
  print_table("resident (whole step)", plan.resident, out);
  print_table("gradients", plan.gradients, out);
  print_table("saved for backward (one micro-step)", plan.saved, out);
  const bool trl_chunked = plan.options.trl_chunked();
  print_table(trl_chunked ? "forward peak: TRL's chunked loss (--trl-loss chunked_nll)" : "forward peak: loss head", plan.forward_peak, out);
  print_table("forward peak candidate: " + plan.block_forward_what, plan.block_forward_peak, out);
  print_table("forward peak candidate: " + plan.last_block_forward_what, plan.last_block_forward_peak, out);
  print_table("forward peak candidate: TRL's metrics on the kept logits (--framework hf-trl)", plan.framework_forward_peak, out);
  print_table(trl_chunked ? "backward peak: TRL's chunks (recomputed, then their gradients)" : "backward peak: first node (loss head)",
              plan.backward_peak, out);
  print_table("backward peak candidate: the last block's backward", plan.block_backward_peak, out);
  print_table("optimizer peak: temporaries", plan.optimizer_peak, out);
  print_table("optimizer peak candidate: gradient clipping (--max-grad-norm), before the step", plan.clip_peak, out);
  if (!plan.dequant_peak.empty()) {
    print_table("QLoRA: one weight dequantised, on top of the last block's forward (and in its backward, above)",
                plan.dequant_peak, out);
  }
  out << "predicted peak per phase:";
  for (int p = 0; p < kPlanPhaseCount; ++p) {
    out << " " << plan_phase_name(static_cast<PlanPhase>(p)) << " " << format_bytes(plan.phase_peak_bytes[p]) << ";";
  }
  out << " peak " << format_bytes(plan.peak_bytes) << " in " << plan_phase_name(plan.peak_phase) << "\n";
  if (plan.evictable_bytes > 0) {
    out << "paged optimizer state: " << format_bytes(plan.evictable_bytes)
        << " of it may be evicted to host memory; peak with it evicted " << format_bytes(plan.peak_bytes - plan.evictable_bytes)
        << " (slower steps while it pages back)\n";
  }
}

std::string plan_label(const MemoryPlan& plan, const std::vector<MemoryPlan>& plans) {
  const GridJob job = job_of(plan.split);
  const bool one_job =
      std::all_of(plans.begin(), plans.end(), [&](const MemoryPlan& p) { return job_of(p.split) == job; });
  if (one_job) return plan.split.shape_label();
  const bool one_precision = std::all_of(plans.begin(), plans.end(),
                                         [&](const MemoryPlan& p) { return p.split.precision == plan.split.precision; });
  const bool one_norm = std::all_of(plans.begin(), plans.end(),
                                    [&](const MemoryPlan& p) { return p.split.max_grad_norm == plan.split.max_grad_norm; });
  const bool one_padding = std::all_of(plans.begin(), plans.end(),
                                       [&](const MemoryPlan& p) { return p.split.padding == plan.split.padding; });
  const bool one_packing = std::all_of(plans.begin(), plans.end(),
                                       [&](const MemoryPlan& p) { return p.split.packing == plan.split.packing; });
  return plan.split.label() + (one_precision ? "" : " " + to_string(plan.split.precision)) +
         (one_norm ? "" : " " + clipping_word(plan.split.max_grad_norm)) +
         (one_packing ? "" : " " + packing_word(plan.split.packing)) +
         (one_padding ? "" : " " + padding_word(plan.split.padding));
}

namespace {
SettingKeys later_keys(const MemoryPlan& plan, const WorkloadOptions& workload,
                       const std::vector<std::string>& target_modules) {
  SettingKeys keys = trl_settings(trainer_settings(plan, workload, target_modules));
  keys.erase(keys.begin(), keys.begin() + std::min<size_t>(3, keys.size()));
  return keys;
}
}  // namespace

SettingKeys shared_trainer_keys(const std::vector<MemoryPlan>& plans, const WorkloadOptions& workload,
                                const std::vector<std::string>& target_modules) {
  if (plans.empty()) return {};
  SettingKeys shared = later_keys(plans.front(), workload, target_modules);
  for (const MemoryPlan& plan : plans) {
    const SettingKeys keys = later_keys(plan, workload, target_modules);
    shared.erase(std::remove_if(shared.begin(), shared.end(),
                                [&](const auto& key) { return std::find(keys.begin(), keys.end(), key) == keys.end(); }),
                 shared.end());
  }
  return shared;
}

SettingKeys own_trainer_keys(const MemoryPlan& plan, const SettingKeys& shared, const WorkloadOptions& workload,
                             const std::vector<std::string>& target_modules) {
  SettingKeys own = later_keys(plan, workload, target_modules);
  own.erase(std::remove_if(own.begin(), own.end(),
                           [&](const auto& key) { return std::find(shared.begin(), shared.end(), key) != shared.end(); }),
            own.end());
  return own;
}

void print_calibrated(const std::vector<MemoryPlan>& plans, const std::vector<Calibration>& calibrations,
                      std::ostream& out) {
  size_t label_width = 15;  // wider only when a label needs it ("2×1 ckpt oib chunked-ce")
  for (const auto& plan : plans) label_width = std::max(label_width, text::display_width(plan_label(plan, plans)));
  for (size_t i = 0; i < plans.size() && i < calibrations.size(); ++i) {
    out << "  " << pad(plan_label(plans[i], plans), label_width) << " analytic " << pad(format_bytes(plans[i].peak_bytes), 11, true)
        << "  calibrated " << pad(format_bytes(calibrations[i].predict(plans[i])), 11, true) << "\n";
  }
}

void print_split_summary(const std::vector<MemoryPlan>& plans, int64_t memory_bytes, std::ostream& out,
                         const WorkloadOptions* workload, const std::vector<std::string>& target_modules) {
  size_t label_width = 16;  // wider only when a label needs it ("64×1 ckpt oib chunked-ce")
  for (const auto& plan : plans) label_width = std::max(label_width, text::display_width(plan_label(plan, plans)) + 1);
  const bool fits = memory_bytes > 0;
  // The byte columns: 12 wide, wider where a value needs it ("15436.93 TiB" at 2^28 tokens), so that
  // two values never run together.
  size_t bytes_width = 12, spare_width = 11;
  for (const auto& plan : plans) {
    for (int p = 0; p < kPlanPhaseCount; ++p)
      bytes_width = std::max(bytes_width, text::display_width(format_bytes(plan.phase_peak_bytes[p])) + 1);
    bytes_width = std::max(bytes_width, text::display_width(format_bytes(plan.peak_bytes)) + 1);
    if (fits) spare_width = std::max(spare_width, text::display_width(format_bytes(memory_bytes - plan.peak_bytes)) + 1);
  }
  // paged-adamw8bit / paged-adamw32bit on CUDA: the peak with the paged state evicted, and whether that fits.
  const bool paged = std::any_of(plans.begin(), plans.end(), [](const MemoryPlan& p) { return p.evictable_bytes > 0; });
  out << pad("split", label_width) << pad("forward", bytes_width, true) << pad("backward", bytes_width, true)
      << pad("optimizer", bytes_width, true) << pad("peak", bytes_width, true) << "  " << pad("held by", 10)
      << (fits ? pad("spare", spare_width, true) + "  " : std::string())
      << (paged ? pad("peak paged out", 16) : std::string()) << (fits && paged ? pad("fits paged", 12) : std::string())
      << (fits ? pad("fits in " + format_bytes(memory_bytes), workload != nullptr ? 18 : 0) : std::string())
      << (workload != nullptr ? std::string("Trainer settings per rank") : std::string()) << "\n";
  const SettingKeys shared = workload != nullptr ? shared_trainer_keys(plans, *workload, target_modules) : SettingKeys{};
  for (const auto& plan : plans) {
    out << pad(plan_label(plan, plans), label_width);
    for (int p = 0; p < kPlanPhaseCount; ++p) out << pad(format_bytes(plan.phase_peak_bytes[p]), bytes_width, true);
    out << pad(format_bytes(plan.peak_bytes), bytes_width, true) << "  " << pad(plan_phase_name(plan.peak_phase), 10);
    // spare: what is left of the memory at the peak (negative: what is missing).
    if (fits) out << pad(format_bytes(memory_bytes - plan.peak_bytes), spare_width, true) << "  ";
    if (paged) out << pad(format_bytes(plan.peak_bytes - plan.evictable_bytes), 16);
    if (fits && paged) out << pad(plan.peak_bytes - plan.evictable_bytes <= memory_bytes ? "yes" : "no", 12);
    if (fits) out << pad(plan.peak_bytes <= memory_bytes ? "yes" : "no", workload != nullptr ? 18 : 0);
    if (workload != nullptr) {
      // The keys that differ between splits; those every split shares follow the table.
      SettingKeys keys = trl_settings(trainer_settings(plan, *workload, target_modules));
      keys.resize(std::min<size_t>(3, keys.size()));
      const SettingKeys own = own_trainer_keys(plan, shared, *workload, target_modules);
      keys.insert(keys.end(), own.begin(), own.end());
      for (size_t k = 0; k < keys.size(); ++k) out << (k ? " " : "") << keys[k].first << "=" << keys[k].second;
      if (plan.split.optimizer_in_backward) out << " (oib: no Trainer setting)";
    }
    out << "\n";
  }
  if (workload == nullptr || plans.empty()) return;
  out << "every split also:";
  for (const auto& [key, value] : shared) out << " " << key << "=" << value;
  out << " (--emit trl, axolotl or args prints a split's settings ready to paste)\n";
}

}  // namespace accumbench
