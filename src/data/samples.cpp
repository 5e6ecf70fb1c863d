// Batches from real-data options (data.hpp, make_batches): the samples of a lengths file or of a
// token file's documents, visited in one seeded order, laid out one per row or packed.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "accumbench/data.hpp"
#include "accumbench/error.hpp"
#include "data/batch.hpp"

namespace accumbench {

namespace {

using Tokens = std::vector<int64_t>;

// Every sample a run may visit: its length and, on demand, its tokens (its inputs; the targets are
// the same shifted by one, the last position predicting nothing).
struct SamplePool {
  std::vector<int64_t> lengths;
  std::optional<SampleSource> source;  // documents: their tokens
  uint64_t seed = 0;
  int64_t vocab_size = 0;

  // The labels of sample `index` that count, or nullptr when no row masks labels.
  const LabelSpans* kept(int64_t index) const {
    if (!source || source->kept_labels.empty()) return nullptr;
    return &source->kept_labels[static_cast<size_t>(index)];
  }
  // The file row of sample `index` (lengths files; samples may have been dropped).
  int64_t row(int64_t index) const {
    return source && !source->rows.empty() ? source->rows[static_cast<size_t>(index)] : index;
  }

  // Its first `limit` tokens at most (wrapped rows take no more than they fill).
  Tokens tokens(int64_t index, int64_t limit = std::numeric_limits<int64_t>::max()) const {
    const int64_t count = std::min(lengths[static_cast<size_t>(index)], limit);
    if (source && !source->token_ids.empty()) {
      const auto first = source->token_ids.begin() + source->starts[static_cast<size_t>(index)];
      return Tokens(first, first + count);
    }
    // Random tokens, seeded per sample so that a sample has the same tokens wherever it lands.
    std::seed_seq seq{seed, static_cast<uint64_t>(index)};
    std::mt19937_64 rng(seq);
    std::uniform_int_distribution<int64_t> token_dist(0, vocab_size - 1);
    Tokens out(static_cast<size_t>(count));
    for (auto& token : out) token = token_dist(rng);
    return out;
  }
};

SamplePool make_pool(const DataSource& data, const DataOptions& options, int64_t samples_per_row) {
  SamplePool pool;
  pool.seed = options.seed;
  pool.vocab_size = options.vocab_size;
  pool.source = read_sample_source(data, options.seq_len, options.vocab_size);
  if (pool.source) {
    pool.lengths = pool.source->lengths;
    return pool;
  }
  // Variable lengths one per row: the samples make_synthetic_batches draws, so that an order
  // (--group-by-length) rearranges the plain order's samples rather than drawing others.
  if (options.lengths == LengthMode::kVariable && samples_per_row == 1) {
    pool.lengths = synthetic_sample_lengths(options);
    return pool;
  }
  // Fixed or variable synthetic lengths, as many samples as the steps take (bfd: rows of T hold
  // up to 1 / min_length_fraction of them).
  const int64_t count = options.batch * std::max(1, options.distinct_batches) * samples_per_row;
  std::mt19937_64 rng(options.seed);
  const int64_t min_len = std::max<int64_t>(
      1, static_cast<int64_t>(std::ceil(options.min_length_fraction * static_cast<double>(options.seq_len))));
  std::uniform_int_distribution<int64_t> length_dist(min_len, options.seq_len);
  pool.lengths.assign(static_cast<size_t>(count), options.seq_len);
  if (options.lengths == LengthMode::kVariable) {
    for (auto& length : pool.lengths) length = length_dist(rng);
  }
  return pool;
}

// Whether each of a sample's `length` labels counts under `kept`.
std::vector<bool> kept_mask(const LabelSpans& kept, int64_t length) {
  std::vector<bool> keep(static_cast<size_t>(length), false);
  for (const auto& [begin, end] : kept) {
    for (int64_t j = begin; j < std::min(end, length); ++j) keep[static_cast<size_t>(j)] = true;
  }
  return keep;
}

// Ignores the targets of a row's positions [first, first + length), a sample's, whose label does
// not count (position first + i predicts the sample's label i + 1; its last position predicts
// nothing already). Returns the targets left.
int64_t keep_labels(at::TensorAccessor<int64_t, 1> targets, const LabelSpans& kept, int64_t first, int64_t length) {
  const std::vector<bool> keep = kept_mask(kept, length);
  int64_t count = 0;
  for (int64_t i = 0; i + 1 < length; ++i) {
    if (keep[static_cast<size_t>(i + 1)]) {
      ++count;
    } else {
      targets[first + i] = kIgnoreIndex;
    }
  }
  return count;
}

// The batch with its step's targets summed from its rows, its host memory pinned when it feeds
// a CUDA device.
TokenBatch finished(TokenBatch batch, bool pin) {
  batch.token_count = std::accumulate(batch.sequence_targets.begin(), batch.sequence_targets.end(), int64_t{0});
  if (pin) {
    batch.inputs = batch.inputs.pin_memory();
    batch.targets = batch.targets.pin_memory();
  }
  return batch;
}

// One sample per row, padded to T (the engine trims each micro-batch to its padding).
std::vector<TokenBatch> one_per_row(const SamplePool& pool, const std::vector<int64_t>& order,
                                    const DataOptions& options) {
  std::vector<TokenBatch> batches;
  const auto n = static_cast<int64_t>(order.size());
  for (int step = 0; step < std::max(1, options.distinct_batches); ++step) {
    at::Tensor windows = torch::zeros({options.batch, options.seq_len + 1}, torch::kLong);  // (B, T + 1)
    auto rows = windows.accessor<int64_t, 2>();
    std::vector<int64_t> lengths, samples;
    for (int64_t b = 0; b < options.batch; ++b) {
      const int64_t index = order[static_cast<size_t>((step * options.batch + b) % n)];  // cycles a short source
      const Tokens tokens = pool.tokens(index);
      for (size_t t = 0; t < tokens.size(); ++t) rows[b][static_cast<int64_t>(t)] = tokens[t];
      lengths.push_back(pool.lengths[static_cast<size_t>(index)]);
      samples.push_back(index);
    }
    TokenBatch batch = make_batch(windows, lengths, RowKind::kSample, false);
    if (pool.source && pool.source->token_ids.empty()) {
      for (int64_t index : samples) batch.sample_rows.push_back(pool.row(index));
    }
    if (pool.kept(0) != nullptr) {
      auto targets = batch.targets.accessor<int64_t, 2>();
      for (int64_t b = 0; b < options.batch; ++b) {
        const int64_t index = samples[static_cast<size_t>(b)];
        batch.sequence_targets[static_cast<size_t>(b)] =
            keep_labels(targets[b], *pool.kept(index), 0, pool.lengths[static_cast<size_t>(index)]);
      }
    }
    batches.push_back(finished(std::move(batch), options.pin_memory));
  }
  return batches;
}

// --packing wrapped: the samples in order, concatenated and cut into rows of T (pack_wrapped), as
// TRL's wrapped packing cuts them; each row a sample of T tokens (its last position predicts
// nothing: the labels are shifted within the row).
std::vector<TokenBatch> wrapped(const SamplePool& pool, const std::vector<int64_t>& order, const DataOptions& options) {
  const int steps = std::max(1, options.distinct_batches);
  const int64_t rows_needed = steps * options.batch;
  const int64_t tokens_needed = rows_needed * options.seq_len;
  std::vector<Tokens> samples;
  std::vector<bool> stream_kept;  // masked labels: whether each label of the concatenated stream counts
  int64_t tokens = 0;
  for (size_t i = 0; tokens < tokens_needed; ++i) {
    const int64_t index = order[i % order.size()];
    samples.push_back(pool.tokens(index, tokens_needed - tokens));  // uncut samples (TRL's wrapped packing)
    tokens += static_cast<int64_t>(samples.back().size());
    if (const LabelSpans* kept = pool.kept(index)) {
      const std::vector<bool> keep = kept_mask(*kept, static_cast<int64_t>(samples.back().size()));
      stream_kept.insert(stream_kept.end(), keep.begin(), keep.end());
    }
  }
  const std::vector<Tokens> rows = pack_wrapped(samples, options.seq_len);
  std::vector<TokenBatch> batches;
  for (int step = 0; step < steps; ++step) {
    at::Tensor windows = torch::empty({options.batch, options.seq_len + 1}, torch::kLong);  // (B, T + 1)
    auto out = windows.accessor<int64_t, 2>();
    for (int64_t b = 0; b < options.batch; ++b) {
      const size_t r = static_cast<size_t>(step * options.batch + b);
      for (int64_t t = 0; t < options.seq_len; ++t) out[b][t] = rows[r][static_cast<size_t>(t)];
      out[b][options.seq_len] = 0;  // past the row: not a target
    }
    TokenBatch batch =
        make_batch(windows, std::vector<int64_t>(options.batch, options.seq_len), RowKind::kSample, false);
    if (!stream_kept.empty()) {
      // TRL packs the labels column with the tokens: position t of row r predicts the stream's
      // label r·T + t + 1, counted or not as its sample's row said.
      auto targets = batch.targets.accessor<int64_t, 2>();
      for (int64_t b = 0; b < options.batch; ++b) {
        const int64_t first = (step * options.batch + b) * options.seq_len;
        int64_t count = 0;
        for (int64_t t = 0; t + 1 < options.seq_len; ++t) {
          if (stream_kept[static_cast<size_t>(first + t + 1)]) {
            ++count;
          } else {
            targets[b][t] = kIgnoreIndex;
          }
        }
        batch.sequence_targets[static_cast<size_t>(b)] = count;
      }
    }
    batches.push_back(finished(std::move(batch), options.pin_memory));
  }
  return batches;
}

// --packing bfd: the whole source packed into bins of T as TRL's pack_dataset does before
// training (pack_bfd, kBfdGroupSamples samples at a time, in source order), the bins then visited
// as a Trainer visits rows: in a seeded random order, or with --group-by-length in transformers'
// length-grouped order of the bins' fills. A row holds its documents back to back, each with its
// own inputs and shifted targets (no target crosses into the next document: TRL masks the label
// where positions restart), then padding.
std::vector<TokenBatch> best_fit_decreasing(const SamplePool& pool, const DataSource& data, const DataOptions& options) {
  const std::vector<PackedRow> bins = pack_bfd_in_groups(pool.lengths, options.seq_len);
  std::vector<int64_t> fills;
  for (const PackedRow& row : bins) fills.push_back(row.length);
  const std::vector<int64_t> order = data.group_by_length
                                         ? length_grouped_order(fills, options.batch / std::max(1, options.world_size),
                                                                options.seed)
                                         : shuffled_order(static_cast<int64_t>(bins.size()), options.seed);
  std::vector<TokenBatch> batches;
  for (int step = 0; step < std::max(1, options.distinct_batches); ++step) {
    TokenBatch batch;
    batch.inputs = torch::zeros({options.batch, options.seq_len}, torch::kLong);                // (B, T)
    batch.targets = torch::full({options.batch, options.seq_len}, kIgnoreIndex, torch::kLong);  // (B, T)
    auto inputs = batch.inputs.accessor<int64_t, 2>();
    auto targets = batch.targets.accessor<int64_t, 2>();
    for (int64_t b = 0; b < options.batch; ++b) {
      const size_t index = static_cast<size_t>((step * options.batch + b) % static_cast<int64_t>(order.size()));
      const PackedRow& row = bins[static_cast<size_t>(order[index])];  // cycles a short source
      std::vector<int64_t> documents;
      int64_t t = 0, trained = 0;
      for (int64_t sample : row.samples) {
        const Tokens tokens = pool.tokens(sample);
        const int64_t length = pool.lengths[static_cast<size_t>(sample)];
        const int64_t first = t;
        for (int64_t i = 0; i < length; ++i, ++t) {
          inputs[b][t] = tokens[static_cast<size_t>(i)];
          targets[b][t] = i + 1 < length ? tokens[static_cast<size_t>(i + 1)] : kIgnoreIndex;
        }
        const LabelSpans* kept = pool.kept(sample);
        trained += kept != nullptr ? keep_labels(targets[b], *kept, first, length) : length - 1;
        documents.push_back(length);
      }
      batch.sequence_tokens.push_back(row.length);
      batch.sequence_targets.push_back(trained);
      batch.documents.push_back(std::move(documents));
    }
    batches.push_back(finished(std::move(batch), options.pin_memory));
  }
  return batches;
}

// A step whose samples are all one token long, or whose labels the rows all mask, has no
// target: its loss would divide by zero.
std::vector<TokenBatch> with_targets(std::vector<TokenBatch> batches, int64_t seq_len, const DataSource& data) {
  for (size_t step = 0; step < batches.size(); ++step) {
    if (batches[step].token_count > 0) continue;
    const std::vector<int64_t>& n = batches[step].sequence_tokens;
    const SampleLengths file = data.lengths == LengthMode::kFile
                                   ? read_lengths_file(data.lengths_file, seq_len, data.completion_only_loss)
                                   : SampleLengths{};
    if (!file.masked_by.empty() && std::any_of(n.begin(), n.end(), [](int64_t length) { return length > 1; })) {
      // Some sample counts a label (else the source was refused where it was read): the seeded draw
      // of this step's rows met none of them.
      const auto rows = static_cast<int64_t>(n.size());
      throw UserError("step " + std::to_string(step + 1) + "'s " + std::to_string(rows) + (rows == 1 ? " row holds" : " rows hold") +
                      " no label that counts (" + file.masked_by + "), which leaves no target: " +
                      std::to_string(file.nothing_counts) + " of the " + std::to_string(file.lengths.size()) +
                      " samples of " + data.lengths_file + " count none (and the cut to T=" + std::to_string(seq_len) +
                      " can leave others without one), and the step drew only such samples; give a source with more "
                      "samples whose labels count within T, a larger --batch, or another --seed");
    }
    throw UserError("step " + std::to_string(step + 1) + "'s samples are all one token long, which leaves no target " +
                    "(a sample of n tokens trains n - 1); " +
                    (seq_len == 1 ? "use --seq-len 2 or more" : "give samples of two tokens or more"));
  }
  return batches;
}

// Full windows stay full windows, whatever would group or pack samples (a note says it does
// nothing); variable lengths without either are make_synthetic_batches' padded samples.
bool plain_synthetic(const DataSource& data) {
  return !rows_are_samples(data) ||
         (data.lengths == LengthMode::kVariable && !data.group_by_length && data.packing == Packing::kNone);
}

// The samples a pool draws per row of a step (bfd: rows of T hold up to 1 / min_length_fraction).
int64_t pool_samples_per_row(const DataSource& data, const DataOptions& options) {
  return data.packing == Packing::kBfd
             ? std::max<int64_t>(1, static_cast<int64_t>(std::floor(1.0 / options.min_length_fraction)))
             : 1;
}

// The batches of make_batches, before with_targets checks them.
std::vector<TokenBatch> build_batches(const DataSource& data, const DataOptions& options) {
  check_shape(options);
  const bool documents = !data.token_file.empty() && data.eos_id >= 0;
  if (!data.token_file.empty() && !documents) return load_token_file(data.token_file, data.token_bytes, options);
  if (plain_synthetic(data)) return make_synthetic_batches(options);
  DataOptions with_lengths = options;
  with_lengths.lengths = data.lengths;
  const int64_t samples_per_row = pool_samples_per_row(data, options);
  const SamplePool pool = make_pool(data, with_lengths, samples_per_row);
  if (data.packing == Packing::kBfd) return best_fit_decreasing(pool, data, options);
  const auto n = static_cast<int64_t>(pool.lengths.size());
  // The Trainer builds LengthGroupedSampler with one rank's step (per-device batch × accumulation),
  // so the grouping is the same for every split.
  const int64_t rank_step = options.batch / std::max(1, options.world_size);  // per-device batch × accumulation
  const std::vector<int64_t> order = data.group_by_length ? length_grouped_order(pool.lengths, rank_step, options.seed)
                                                          : shuffled_order(n, options.seed);
  return data.packing == Packing::kWrapped ? wrapped(pool, order, options) : one_per_row(pool, order, options);
}

}  // namespace

std::vector<TokenBatch> make_batches(const DataSource& data, const DataOptions& options) {
  return with_targets(build_batches(data, options), options.seq_len, data);
}

std::vector<int64_t> variable_sample_lengths(const DataSource& data, const DataOptions& options) {
  if (data.lengths != LengthMode::kVariable || !rows_are_samples(data)) return {};
  DataOptions with_lengths = options;
  with_lengths.lengths = data.lengths;
  if (plain_synthetic(data)) return synthetic_sample_lengths(with_lengths);
  return make_pool(data, with_lengths, pool_samples_per_row(data, options)).lengths;
}

TokenBatch batch_with_lengths(const std::vector<int64_t>& lengths, const DataOptions& options) {
  TORCH_CHECK(static_cast<int64_t>(lengths.size()) == options.batch, "one length per sequence of the batch");
  SamplePool pool;
  pool.lengths = lengths;
  pool.seed = options.seed;
  pool.vocab_size = options.vocab_size;
  std::vector<int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  DataOptions one = options;
  one.distinct_batches = 1;
  return one_per_row(pool, order, one).front();
}

}  // namespace accumbench
