// Grid points: the split label and key, the rules that relate batch, micro-batch, accumulation
// and world size, and the one grid builder that sweep, plan and verify share. The label and key
// strings are part of the JSON/CSV format and of --resume, so changing one is a format change:
// bump kJsonSchemaVersion.
#include <algorithm>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "accumbench/error.hpp"
#include "accumbench/result.hpp"
#include "accumbench/units.hpp"

namespace accumbench {

std::string SplitConfig::shape_label() const {
  // U+00D7 MULTIPLICATION SIGN, UTF-8 encoded: "8×8" reads as micro-batch × accumulation steps.
  std::string text = std::to_string(micro_batch) + "\xC3\x97" + std::to_string(accum_steps);
  if (activation_checkpointing == Checkpointing::kBlocks) text += " ckpt";
  if (optimizer_in_backward) text += " oib";
  if (chunked_loss) text += " chunked-ce";
  if (cuda_graphs) text += " graphs";
  return text;
}

std::string SplitConfig::label() const {
  std::string text = shape_label();
  if (optimizer != OptimizerKind::kAdamW) text += " " + to_string(optimizer);
  if (weights_dtype != Precision::kFp32) text += " " + to_string(weights_dtype) + "-weights";
  if (adapter_dtype != Precision::kFp32) text += " " + to_string(adapter_dtype) + "-adapters";
  return text;
}

std::string run_label(const RunResult& run, const std::vector<RunResult>& runs) {
  const auto differ = [&](auto field) {
    return std::any_of(runs.begin(), runs.end(), [&](const RunResult& other) { return other.config.*field != run.config.*field; });
  };
  std::string label = run.config.label();
  if (differ(&SplitConfig::precision)) label += " " + to_string(run.config.precision);
  if (differ(&SplitConfig::max_grad_norm)) label += " " + clipping_word(run.config.max_grad_norm);
  if (differ(&SplitConfig::packing)) label += " " + packing_word(run.config.packing);
  if (differ(&SplitConfig::group_by_length)) label += " " + grouping_word(run.config.group_by_length);
  if (differ(&SplitConfig::padding)) label += " " + padding_word(run.config.padding);
  return label;
}

std::string SplitConfig::key() const {
  return label() + "/" + to_string(precision) + (world_size > 1 ? "/world" + std::to_string(world_size) : "") +
         (max_grad_norm > 0 ? "/" + clipping_word(max_grad_norm) : "") +
         (padding.per_micro_batch() ? "/" + padding_word(padding) : "") +
         (packing != Packing::kNone ? "/" + packing_word(packing) : "") + (group_by_length ? "/grouped" : "");
}

std::vector<int64_t> divisors(int64_t n) {
  // Pairs (d, n/d) with d ≤ √n: O(√n) even for a huge --batch.
  std::vector<int64_t> small, large;
  for (int64_t d = 1; d <= n / d; ++d) {
    if (n % d != 0) continue;
    small.push_back(d);
    if (d != n / d) large.push_back(n / d);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

int64_t sequences_per_rank(int64_t batch, int world_size) {
  if (world_size < 1 || batch % world_size != 0) {
    const std::string w = std::to_string(world_size);
    throw UserError("--batch " + std::to_string(batch) + " does not split evenly over " + w +
                    " data-parallel ranks (WORLD_SIZE=" + w + " / --world-size " + w +
                    "); pick a batch divisible by the world size");
  }
  return batch / world_size;
}

int64_t accumulation_steps(int64_t batch, int64_t micro_batch, int world_size) {
  if (micro_batch <= 0) throw UserError("micro-batch must be positive, got " + std::to_string(micro_batch) + "; give sequences per micro-step, 1 or more");
  if (batch <= 0) throw UserError("--batch must be positive, got " + std::to_string(batch) + "; give the effective batch in sequences, e.g. --batch 64");
  if (world_size > 1) {
    const int64_t per_rank = sequences_per_rank(batch, world_size);
    if (per_rank % micro_batch != 0) {
      throw UserError("micro-batch " + std::to_string(micro_batch) + " does not divide the " + std::to_string(per_rank) +
                      " sequences per rank (--batch " + std::to_string(batch) + " over " + std::to_string(world_size) +
                      " ranks); pick micro-batches that divide " + std::to_string(per_rank));
    }
    return per_rank / micro_batch;
  }
  if (batch % micro_batch != 0) {
    throw UserError("batch " + std::to_string(batch) + " is not divisible by micro-batch " +
                    std::to_string(micro_batch) + "; pick micro-batches that divide the batch");
  }
  return batch / micro_batch;
}

void require_one_rank_for_optimizer_in_backward(int world_size) {
  if (world_size <= 1) return;
  throw UserError("--optimizer-in-backward cannot be combined with data parallel (each parameter would step before its gradient is summed over the ranks); drop the option or run one process");
}

void require_no_clipping_in_backward(double max_grad_norm) {
  if (max_grad_norm <= 0) return;
  throw UserError("--optimizer-in-backward cannot be combined with --max-grad-norm " + text::format_number(max_grad_norm) +
                  " (each parameter would step inside backward, before the global gradient norm it is clipped by is "
                  "known); use --max-grad-norm 0 or drop --optimizer-in-backward");
}

std::vector<SplitConfig> knob_variants(const SplitConfig& split, bool knobs, bool clips) {
  std::vector<SplitConfig> points = {split};
  if (!knobs) return points;
  SplitConfig checkpointed = split;
  checkpointed.activation_checkpointing = Checkpointing::kBlocks;
  points.push_back(checkpointed);
  // Optimizer-in-backward needs the whole batch in one backward, one rank (it would step before
  // the gradients are summed over the ranks), and no clipping (before the global norm is known).
  if (split.accum_steps == 1 && split.world_size == 1 && !clips) {
    SplitConfig in_backward = split;
    in_backward.optimizer_in_backward = true;
    points.push_back(in_backward);
    in_backward.activation_checkpointing = Checkpointing::kBlocks;
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

namespace {

// `points`, each followed by its CUDA-graph replay when `graphs` (not optimizer-in-backward,
// whose in-backward optimizer step cannot be frozen in a graph).
void append_with_graphs(const std::vector<SplitConfig>& points, bool graphs, std::vector<SplitConfig>& grid) {
  for (const SplitConfig& point : points) {
    grid.push_back(point);
    if (graphs && !point.optimizer_in_backward) {
      SplitConfig graphed = point;
      graphed.cuda_graphs = true;
      grid.push_back(graphed);
    }
  }
}

std::string join(const std::vector<int64_t>& values) {
  std::string text;
  for (int64_t v : values) text += (text.empty() ? "" : ",") + std::to_string(v);
  return text;
}

bool contains(const std::vector<SplitConfig>& grid, const SplitConfig& point) {
  return std::any_of(grid.begin(), grid.end(), [&](const SplitConfig& p) { return p.key() == point.key(); });
}

}  // namespace

std::vector<SplitConfig> split_grid(const WorkloadOptions& w, int world_size) {
  const int64_t rank_batch = sequences_per_rank(w.batch, world_size);
  std::vector<int64_t> micro_batches = w.micro_batches.empty() ? divisors(rank_batch) : w.micro_batches;
  // A micro-batch given twice is measured once, where it first appears.
  std::vector<int64_t> unique;
  for (int64_t micro : micro_batches) {
    if (std::find(unique.begin(), unique.end(), micro) == unique.end()) unique.push_back(micro);
  }
  micro_batches = unique;
  const bool in_backward = w.grid.optimizer_in_backward;
  if (in_backward) {
    require_one_rank_for_optimizer_in_backward(world_size);
    for (double norm : grid_max_grad_norms(w)) require_no_clipping_in_backward(norm);
    // The optimizer inside backward steps each parameter as its gradient is complete, so a split
    // that accumulates cannot use it: those splits are left out (optimizer_in_backward_note says
    // which), and a list with none left is refused.
    if (std::find(micro_batches.begin(), micro_batches.end(), rank_batch) == micro_batches.end()) {
      throw UserError("--optimizer-in-backward needs accumulation 1, but no micro-batch of --micro-batches " +
                      join(micro_batches) + " is the whole batch of " + std::to_string(rank_batch) +
                      "; add " + std::to_string(rank_batch) + " to --micro-batches or drop --optimizer-in-backward");
    }
    micro_batches = {rank_batch};
  }
  std::vector<SplitConfig> grid;
  // The jobs in grid_jobs' order, the dtypes outermost: the rounds time the grid in its order, a
  // change of dtype between two steps casts the model, and one of any rebuilds the optimizer's
  // state (SplitMeasurement::trainer_for).
  for (const GridJob& job : grid_jobs(w)) {
    SplitConfig split;
    split.weights_dtype = job.weights_dtype;
    split.adapter_dtype = job.adapter_dtype;
    split.optimizer = job.optimizer;
    split.precision = job.precision;
    split.max_grad_norm = job.max_grad_norm;
    split.padding = job.padding;
    split.packing = job.packing;
    split.group_by_length = job.group_by_length;
    split.world_size = world_size;
    split.activation_checkpointing = w.grid.checkpointing;
    for (int64_t micro : micro_batches) {
      split.micro_batch = micro;
      split.accum_steps = accumulation_steps(w.batch, micro, world_size);
      std::vector<SplitConfig> points;
      for (SplitConfig point : knob_variants(split, w.grid.knobs, job.max_grad_norm > 0)) {
        // A plain knob fixes that knob for every point: the grid's variants of it collapse.
        if (in_backward) point.optimizer_in_backward = true;
        if (!contains(points, point)) points.push_back(point);
      }
      std::vector<SplitConfig> with_graphs;
      append_with_graphs(loss_variants(points, w.loss.chunked), w.grid.cuda_graphs, with_graphs);
      for (const SplitConfig& point : with_graphs) {
        if (!contains(grid, point)) grid.push_back(point);
      }
    }
  }
  return grid;
}

bool GridJob::operator==(const GridJob& other) const {
  return weights_dtype == other.weights_dtype && adapter_dtype == other.adapter_dtype && optimizer == other.optimizer &&
         precision == other.precision && max_grad_norm == other.max_grad_norm && padding == other.padding &&
         packing == other.packing && group_by_length == other.group_by_length;
}

std::vector<GridJob> grid_jobs(const WorkloadOptions& w) {
  std::vector<GridJob> jobs;
  for (Precision weights : grid_weights_dtypes(w)) {
    for (Precision adapters : grid_adapter_dtypes(w)) {
      for (OptimizerKind optimizer : grid_optimizers(w)) {
        for (Precision precision : w.precisions) {
          for (double norm : grid_max_grad_norms(w)) {
            for (const StepRows& rows : grid_step_rows(w)) {
              for (const PaddingChoice& padding : grid_paddings(w)) {
                const GridJob job{weights, adapters, optimizer, precision, norm, padding, rows.packing, rows.grouped};
                if (std::find(jobs.begin(), jobs.end(), job) == jobs.end()) jobs.push_back(job);  // a precision given twice
              }
            }
          }
        }
      }
    }
  }
  return jobs;
}

GridJob job_of(const SplitConfig& split) {
  return {split.weights_dtype, split.adapter_dtype, split.optimizer, split.precision, split.max_grad_norm, split.padding,
          split.packing, split.group_by_length};
}

WorkloadOptions job_workload(WorkloadOptions w, const GridJob& job) {
  w = with_adapter_dtype(with_weights_dtype(std::move(w), job.weights_dtype), job.adapter_dtype);
  w.optimizer.kind = job.optimizer;
  w.grid.other_optimizers.clear();
  w.precisions = {job.precision};
  return with_step_rows(with_padding(with_max_grad_norm(std::move(w), job.max_grad_norm), job.padding),
                        {job.packing, job.group_by_length});
}

std::string job_flags(const GridJob& job, const WorkloadOptions& w) {
  std::string flags;
  const auto add = [&flags](const std::string& option, const std::string& value) {
    flags += (flags.empty() ? "" : " ") + option + " " + value;
  };
  if (grid_weights_dtypes(w).size() > 1) add("--weights-dtype", to_string(job.weights_dtype));
  if (grid_adapter_dtypes(w).size() > 1) add("--adapter-dtype", to_string(job.adapter_dtype));
  if (grid_optimizers(w).size() > 1) add("--optimizer", to_string(job.optimizer));
  if (w.precisions.size() > 1) add("--precision", to_string(job.precision));
  if (grid_max_grad_norms(w).size() > 1) add("--max-grad-norm", text::format_number(job.max_grad_norm));
  if (grid_packings(w).size() > 1) add("--packing", to_string(job.packing));
  if (grid_groupings(w).size() > 1) add("--group-by-length", job.group_by_length ? "true" : "false");
  if (grid_paddings(w).size() > 1) add("--padding", padding_name(job.padding));
  return flags;
}

std::string optimizer_in_backward_note(const WorkloadOptions& w, int world_size) {
  const int64_t rank_batch = sequences_per_rank(w.batch, world_size);
  const std::vector<int64_t> micro_batches = w.micro_batches.empty() ? divisors(rank_batch) : w.micro_batches;
  // The knob's oib point exists only beside accumulation 1: without such a split nothing is left out.
  const bool accumulation_one =
      std::find(micro_batches.begin(), micro_batches.end(), rank_batch) != micro_batches.end();
  // The norms that clip, and whether a job without clipping keeps the optimizer inside backward.
  const std::vector<double> norms = grid_max_grad_norms(w);
  std::vector<double> clipping;
  std::copy_if(norms.begin(), norms.end(), std::back_inserter(clipping), [](double norm) { return norm > 0; });
  const bool some_unclipped = clipping.size() < norms.size();
  if (w.grid.knobs && !w.grid.optimizer_in_backward && (world_size > 1 || !clipping.empty()) && accumulation_one) {
    const std::string clipped_why = " (each parameter would step before the global gradient norm it is clipped by is known)";
    if (world_size <= 1 && some_unclipped) {
      return "--knobs leaves the optimizer inside backward out of the splits clipped at --max-grad-norm " +
             join_norms(clipping) + clipped_why + "; the --max-grad-norm 0 splits have it";
    }
    const std::string why =
        world_size > 1 ? "with " + std::to_string(world_size) +
                             " data-parallel ranks (each parameter would step before its gradient is summed over the ranks)"
                       : "with --max-grad-norm " + join_norms(clipping) + clipped_why;
    return "--knobs leaves the optimizer inside backward out " + why + ": it adds " +
           (w.grid.checkpointing == Checkpointing::kBlocks ? "nothing here, every split being checkpointed already"
                                                           : "the checkpointed splits only");
  }
  if (!w.grid.optimizer_in_backward || world_size > 1) return "";  // data parallel: refused by split_grid
  // None without accumulation: split_grid refuses the options, and the error says it all.
  if (!accumulation_one) return "";
  std::vector<std::string> left_out;
  for (int64_t micro : micro_batches) {
    if (micro == rank_batch || rank_batch % micro != 0) continue;
    const std::string label = std::to_string(micro) + "\xC3\x97" + std::to_string(rank_batch / micro);
    if (std::find(left_out.begin(), left_out.end(), label) == left_out.end()) left_out.push_back(label);
  }
  if (left_out.empty()) return "";
  std::string text;
  for (const std::string& label : left_out) text += (text.empty() ? "" : ", ") + label;
  const bool one = left_out.size() == 1;
  return "--optimizer-in-backward needs accumulation 1 (each parameter steps inside backward): of the splits of " +
         std::to_string(rank_batch) + " only " + std::to_string(rank_batch) + "\xC3\x97" + "1 is kept; " +
         text + (one ? " accumulates and is" : " accumulate and are") + " left out (drop the option to compare them)";
}

}  // namespace accumbench
