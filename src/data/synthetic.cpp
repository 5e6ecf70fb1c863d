#include <torch/torch.h>

#include <cmath>
#include <numeric>
#include <random>

#include "accumbench/data.hpp"
#include "accumbench/error.hpp"
#include "accumbench/lengths.hpp"
#include "accumbench/units.hpp"
#include "data/batch.hpp"

namespace accumbench {

DataOptions data_options_for(int64_t vocab_size, int64_t seq_len, int64_t batch, bool cuda) {
  DataOptions options;
  options.vocab_size = vocab_size;
  options.seq_len = seq_len;
  options.batch = batch;
  options.pin_memory = cuda;
  return options;
}

TokenBatch shard(const TokenBatch& step, int rank, int world_size, int64_t micro_batch) {
  const int64_t per_rank = sequences_per_rank(step.sequences(), world_size);
  TORCH_CHECK(rank >= 0 && rank < world_size, "rank ", rank, " outside world size ", world_size);
  if (micro_batch <= 0) micro_batch = per_rank;
  TORCH_CHECK(per_rank % micro_batch == 0, "micro-batch ", micro_batch, " does not divide the rank's ", per_rank,
              " sequences");
  const int64_t accum = per_rank / micro_batch;
  // Micro-batch k of this rank is the step's per-device batch k·W + rank: accelerate's
  // BatchSamplerShard hands a Trainer's per-device batches to the processes in turn.
  std::vector<int64_t> rows;
  for (int64_t k = 0; k < accum; ++k) {
    const int64_t first = (k * world_size + rank) * micro_batch;
    for (int64_t i = 0; i < micro_batch; ++i) rows.push_back(first + i);
  }
  TokenBatch out;
  if (accum == 1) {  // one block of rows: views, no copy
    out.inputs = step.inputs.narrow(0, rows.front(), per_rank);
    out.targets = step.targets.narrow(0, rows.front(), per_rank);
  } else {
    const at::Tensor index = torch::tensor(rows, torch::kLong);
    out.inputs = step.inputs.index_select(0, index);
    out.targets = step.targets.index_select(0, index);
    if (step.inputs.is_pinned()) {
      out.inputs = out.inputs.pin_memory();
      out.targets = out.targets.pin_memory();
    }
  }
  for (int64_t row : rows) {
    out.sequence_tokens.push_back(step.sequence_tokens[static_cast<size_t>(row)]);
    out.sequence_targets.push_back(step.sequence_targets[static_cast<size_t>(row)]);
    if (!step.documents.empty()) out.documents.push_back(step.documents[static_cast<size_t>(row)]);
  }
  out.token_count = out.targets_in(0, per_rank);
  out.global_token_count = step.step_tokens();
  out.step_sequence_tokens = step.sequence_tokens;
  return out;
}

StepBatches StepBatches::dealt(int rank, int world_size, int64_t micro_batch) const {
  std::vector<TokenBatch> shares;
  for (const TokenBatch& step : batches_) shares.push_back(shard(step, rank, world_size, micro_batch));
  return StepBatches(std::move(shares));
}

int64_t TokenBatch::targets_in(int64_t first, int64_t count) const {
  TORCH_CHECK(first >= 0 && count >= 0 && first + count <= sequences(), "sequence range out of bounds");
  return std::accumulate(sequence_targets.begin() + first, sequence_targets.begin() + first + count, int64_t{0});
}

TokenBatch make_batch(const at::Tensor& windows, const std::vector<int64_t>& lengths, RowKind kind, bool pin) {
  const int64_t seq_len = windows.size(1) - 1;
  const int64_t untrained = kind == RowKind::kSample ? 1 : 0;  // a sample's last position predicts nothing
  TokenBatch batch;
  batch.inputs = windows.narrow(1, 0, seq_len).clone();
  batch.targets = windows.narrow(1, 1, seq_len).clone();
  auto inputs = batch.inputs.accessor<int64_t, 2>();
  auto targets = batch.targets.accessor<int64_t, 2>();
  for (int64_t b = 0; b < windows.size(0); ++b) {
    const int64_t length = lengths[static_cast<size_t>(b)];
    for (int64_t t = length; t < seq_len; ++t) inputs[b][t] = 0;  // pad token; its logits are computed and ignored
    for (int64_t t = length - untrained; t < seq_len; ++t) targets[b][t] = kIgnoreIndex;
    batch.sequence_tokens.push_back(length);
    batch.sequence_targets.push_back(length - untrained);
  }
  batch.token_count = std::accumulate(batch.sequence_targets.begin(), batch.sequence_targets.end(), int64_t{0});
  if (pin) {
    batch.inputs = batch.inputs.pin_memory();
    batch.targets = batch.targets.pin_memory();
  }
  return batch;
}

void check_shape(const DataOptions& o) {
  if (o.vocab_size <= 0) throw UserError("vocabulary size must be positive");
  if (o.seq_len <= 0) throw UserError("--seq-len must be positive, got " + std::to_string(o.seq_len) + "; give the tokens per sequence, e.g. --seq-len 1024");
  if (o.batch <= 0) throw UserError("--batch must be positive, got " + std::to_string(o.batch) + "; give the effective batch in sequences, e.g. --batch 64");
}

namespace {

// The draws of synthetic batches, in make_synthetic_batches' order: per batch its windows' tokens,
// then (variable lengths) its samples' lengths, from one generator; synthetic_sample_lengths
// replays them without the tensors.
struct SyntheticDraws {
  explicit SyntheticDraws(const DataOptions& options)
      : rng(options.seed),
        length(std::max<int64_t>(1, static_cast<int64_t>(std::ceil(options.min_length_fraction *
                                                                   static_cast<double>(options.seq_len)))),
               options.seq_len),
        token(0, options.vocab_size - 1),
        window_tokens(options.batch * (options.seq_len + 1)) {}
  std::mt19937_64 rng;
  std::uniform_int_distribution<int64_t> length;
  std::uniform_int_distribution<int64_t> token;
  int64_t window_tokens;  // one batch's windows: batch × (T + 1)
};

}  // namespace

std::vector<int64_t> synthetic_sample_lengths(const DataOptions& options) {
  check_shape(options);
  SyntheticDraws draw(options);
  std::vector<int64_t> lengths;
  for (int i = 0; i < std::max(1, options.distinct_batches); ++i) {
    for (int64_t j = 0; j < draw.window_tokens; ++j) draw.token(draw.rng);
    for (int64_t j = 0; j < options.batch; ++j) {
      lengths.push_back(options.lengths == LengthMode::kVariable ? draw.length(draw.rng) : options.seq_len);
    }
  }
  return lengths;
}

std::vector<TokenBatch> make_synthetic_batches(const DataOptions& options) {
  check_shape(options);
  std::vector<TokenBatch> batches;
  SyntheticDraws draw(options);
  for (int i = 0; i < std::max(1, options.distinct_batches); ++i) {
    at::Tensor windows = torch::empty({options.batch, options.seq_len + 1}, torch::kLong);
    int64_t* data = windows.data_ptr<int64_t>();
    for (int64_t j = 0; j < draw.window_tokens; ++j) data[j] = draw.token(draw.rng);
    std::vector<int64_t> lengths(options.batch, options.seq_len);
    const bool variable = options.lengths == LengthMode::kVariable;
    if (variable) {
      for (auto& len : lengths) len = draw.length(draw.rng);
    }
    // Variable lengths are padded samples; fixed ones a pretraining loader's full windows.
    batches.push_back(make_batch(windows, lengths, variable ? RowKind::kSample : RowKind::kWindow, options.pin_memory));
  }
  return batches;
}

StepBatches::StepBatches(std::vector<TokenBatch> batches) : batches_(std::move(batches)) {
  TORCH_CHECK(!batches_.empty(), "StepBatches needs at least one batch");
}

const TokenBatch& StepBatches::batch(int64_t step) const {
  return batches_[static_cast<size_t>(step) % batches_.size()];
}

std::vector<TokenBatch> load_token_file(const std::string& path, int token_bytes,
                                        const DataOptions& options) {
  check_shape(options);
  const int64_t window = options.seq_len + 1;
  const int64_t windows_per_batch = options.batch;
  // The ids of the batches taken, no more (a shard of gigabytes is not read whole).
  const TokenFile file(path, token_bytes, std::max(1, options.distinct_batches) * window * windows_per_batch);
  const int64_t count = file.size();
  const int64_t batches = count / (window * windows_per_batch);
  if (batches == 0) throw UserError(too_few_tokens_problem(path, count, options.seq_len, windows_per_batch));
  std::vector<TokenBatch> out;
  const int64_t used = std::min<int64_t>(batches, std::max(1, options.distinct_batches));
  for (int64_t b = 0; b < used; ++b) {
    at::Tensor windows = torch::empty({windows_per_batch, window}, torch::kLong);
    int64_t* data = windows.data_ptr<int64_t>();
    for (int64_t j = 0; j < windows.numel(); ++j) data[j] = file.id(b * windows.numel() + j, options.vocab_size);
    out.push_back(make_batch(windows, std::vector<int64_t>(windows_per_batch, options.seq_len), RowKind::kWindow,
                             options.pin_memory));
  }
  return out;
}

}  // namespace accumbench
