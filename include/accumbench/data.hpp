// Token batches for one optimizer step: synthetic and seeded, fixed length or variable lengths
// padded to T with ignored targets, so a step's token count varies as in real padded data.
//
//   DataOptions o{/*vocab_size=*/512, /*seq_len=*/64, /*batch=*/8, LengthMode::kVariable};
//   StepBatches data(make_synthetic_batches(o));
//   const TokenBatch& b = data.batch(/*step=*/0);   // inputs/targets (8, 64) int64 on the host
//   int64_t n = b.token_count;                      // non-ignored targets in the whole step
//   std::vector<TokenBatch> steps = make_batches(workload.data, o);  // real data: lengths file,
//                                                   // documents, length grouping, wrapped or bfd packing
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "accumbench/lengths.hpp"
#include "accumbench/result.hpp"  // LengthMode, sequences_per_rank

namespace accumbench {

// Targets at padded positions; PyTorch's cross_entropy default ignore_index.
inline constexpr int64_t kIgnoreIndex = -100;


struct DataOptions {
  int64_t vocab_size = 0;
  int64_t seq_len = 0;
  int64_t batch = 0;                     // sequences per optimizer step, every rank's together
  // Data parallel: the ranks the step's sequences are sharded over. transformers' length grouping
  // works on one rank's step (per-device batch × accumulation), not the whole batch.
  int world_size = 1;
  LengthMode lengths = LengthMode::kFixed;
  double min_length_fraction = 0.25;     // variable lengths are uniform in [ceil(f·T), T]
  uint64_t seed = 0;
  int distinct_batches = kDistinctBatchesByDefault;  // steps cycle through this many different batches
  bool pin_memory = false;               // page-locked host memory for async copies to CUDA
};

// Two conventions, as the data comes. Windows (fixed synthetic lengths, a token file without
// --eos-id: a pretraining loader's rows, whatever would group or pack them) take T + 1 tokens
// for T positions and T targets. Samples (--lengths variable or a file, a token file's
// documents, however grouped or packed) are what transformers trains on: a sample of n tokens is n positions and n - 1 targets, the last position predicting
// nothing (the model shifts the labels within a row; TRL's padding-free rows mask each document's
// first label), so a packed row of documents has one target fewer than positions per document.
// A lengths file's rows may mask labels (lengths.hpp, LabelSpans): a position whose next label
// does not count gets the ignore index, and the sample trains fewer targets.
struct TokenBatch {
  at::Tensor inputs;   // (B, T) int64
  at::Tensor targets;  // (B, T) int64, kIgnoreIndex where padded and where a sample ends
  // Real (non-pad) positions per sequence (host copy): padding sits at the end of a row, so a
  // micro-batch needs only its longest sequence's positions.
  std::vector<int64_t> sequence_tokens;
  // Non-ignored targets per sequence: its positions for a window, one fewer per sample it holds.
  std::vector<int64_t> sequence_targets;
  int64_t token_count = 0;               // sum of sequence_targets
  // --packing bfd: per row, the lengths of the documents it holds, in order (attention and
  // positions restart at each; models.hpp's RowDocuments). Empty: one sample per row.
  std::vector<std::vector<int64_t>> documents;
  // One sample per row from a lengths file: the file row (0-based) each row holds, so that a
  // reader can rebuild its labels from the file (verify --export, check_export.py). Empty otherwise.
  std::vector<int64_t> sample_rows;
  // Data parallel: non-ignored targets of the whole optimizer step over every rank, the loss
  // divisor of token normalization. -1: this batch is the whole step (one process).
  int64_t global_token_count = -1;
  // Data parallel: sequence_tokens (positions) of the whole step, every rank's in the step's order
  // (its micro-batches are consecutive blocks of it); empty when this batch is the whole step.
  std::vector<int64_t> step_sequence_tokens;

  int64_t sequences() const { return static_cast<int64_t>(sequence_tokens.size()); }
  // Targets of the whole step: the loss divisor and the tokens a step trains on.
  int64_t step_tokens() const { return global_token_count >= 0 ? global_token_count : token_count; }
  // Non-ignored targets in sequences [first, first + count).
  int64_t targets_in(int64_t first, int64_t count) const;
};

// The shape every run's batches share: the model's vocabulary, T, sequences per step, and pinned
// host memory when they feed a CUDA device. Callers set lengths, seed, distinct_batches.
DataOptions data_options_for(int64_t vocab_size, int64_t seq_len, int64_t batch, bool cuda);

// Rank `rank`'s share of a step's sequences as accelerate deals a Trainer's per-device batches of
// `micro_batch` out to the processes in turn: its micro-batch k is the step's per-device batch
// k·world_size + rank (rows from (k·world_size + rank)·micro_batch on). One micro-batch per rank
// (or micro_batch 0: the whole share) is the contiguous block DistributedSampler gives, as views;
// more are copied. global_token_count is set to the whole step's targets. Throws UserError unless
// world_size divides the step's sequences.
TokenBatch shard(const TokenBatch& step, int rank, int world_size, int64_t micro_batch = 0);

// Seeded random tokens; `distinct_batches` different steps.
std::vector<TokenBatch> make_synthetic_batches(const DataOptions& options);
// The sample lengths of make_synthetic_batches(options), every batch's in turn (T each unless
// --lengths variable), drawn as it draws them but without the tokens' tensors: what a plan of
// variable lengths sizes activations by.
std::vector<int64_t> synthetic_sample_lengths(const DataOptions& options);

// The batches a run cycles through, one per optimizer step.
class StepBatches {
 public:
  explicit StepBatches(std::vector<TokenBatch> batches);
  const TokenBatch& batch(int64_t step) const;
  size_t size() const { return batches_.size(); }
  // Data parallel: every batch's share for `rank`, dealt in micro-batches of `micro_batch` (shard).
  StepBatches dealt(int rank, int world_size, int64_t micro_batch) const;

 private:
  std::vector<TokenBatch> batches_;
};

// The batches of a run from real-data options: samples of the source (random tokens for a
// lengths file, the documents' own tokens), visited in a seeded random order or transformers'
// length-grouped order (group batch: `options.batch`, the whole step's samples), each step the
// next `options.batch` samples or, with wrapped packing, the next rows of T cut from them, or
// with bfd packing the next bins of T (the source packed as TRL packs a dataset). The
// same options give the same batches, so every split trains on the same samples. Full windows
// (rows_are_samples false) and plain variable lengths come from make_synthetic_batches /
// load_token_file. Throws UserError for a step without a target (its samples one token each).
std::vector<TokenBatch> make_batches(const DataSource& data, const DataOptions& options);

// --lengths variable: the lengths of the samples make_batches(data, options) lays out, every one
// the steps hold (make_synthetic_batches' padded samples, or the pool a grouped or packed order
// draws from); empty for other lengths.
std::vector<int64_t> variable_sample_lengths(const DataSource& data, const DataOptions& options);

// A batch of (B, T) from explicit sample lengths with seeded random tokens (tests, examples):
// samples of n tokens, n - 1 targets each.
TokenBatch batch_with_lengths(const std::vector<int64_t>& lengths, const DataOptions& options);

// Reads a token file: little-endian uint16 (nanoGPT's .bin) or uint32 token ids, and cuts it into
// batches of (batch, seq_len + 1) windows. Throws UserError when the file is missing, empty, has a
// size that is not a multiple of the token width, holds ids >= vocab_size, or is too short.
std::vector<TokenBatch> load_token_file(const std::string& path, int token_bytes,
                                        const DataOptions& options);

}  // namespace accumbench
