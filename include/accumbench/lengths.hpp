// Sample lengths of real data, without LibTorch (the plan reads them too): lengths files, the
// order a Trainer's sampler visits samples in, per-micro-batch padding, wrapped and bfd packing.
//
//   SampleLengths file = read_lengths_file("lengths.txt", /*seq_len=*/512);  // file.truncated: > T
//   std::vector<int64_t> order = length_grouped_order(file.lengths, /*batch_size=*/64, /*seed=*/0);
//   PaddingCount pad = count_padding(ordered, /*micro_batch=*/4, data, /*seq_len=*/512);
//   double f = pad.fraction();   // pad positions / computed positions
//   std::vector<PackedRow> rows = pack_bfd(file.lengths, /*seq_len=*/512);  // rows[i].samples
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "accumbench/options.hpp"

namespace accumbench {

// The labels of a sample that count toward the loss, when its row masks some (TRL's `labels`
// column, -100 where a label does not count, or its `completion_mask` / `assistant_masks`
// columns): half-open ranges [begin, end) of label positions in [0, n), ascending and disjoint.
// Label j is what position j - 1 predicts (the model shifts the labels within a row), so label 0
// trains nothing in a row of its own, and the last position predicts nothing.
using LabelSpans = std::vector<std::pair<int64_t, int64_t>>;
// The targets a sample of `length` positions trains under `kept`: its kept labels in [1, length).
int64_t kept_targets(const LabelSpans& kept, int64_t length);
// Its kept labels in [0, length): what it trains inside wrapped rows, where the previous
// sample's last position predicts its label 0.
int64_t kept_labels_in(const LabelSpans& kept, int64_t length);

struct SampleLengths {
  std::vector<int64_t> lengths;  // positions (tokens) per sample, each in [1, T]; n - 1 targets
  int64_t truncated = 0;         // samples longer than T, cut to T
  // Per sample, the labels that count (cut to T with the sample) when some row masks labels;
  // empty when none does (every sample's labels 1..n-1 count).
  std::vector<LabelSpans> kept_labels;
  // The columns that masked labels, as "completion_mask", "labels" or "completion_mask and
  // assistant_masks"; "" when none did.
  std::string masked_by;
  // Rows with a completion_mask that --completion-only-loss false left unapplied.
  int64_t unapplied_completion_masks = 0;
  std::vector<bool> cut;          // per sample: longer than T, cut to it
  int64_t nothing_counts = 0;     // rows whose masks keep no label at all, before any cut
  int64_t padded_rows = 0;        // JSONL rows whose attention_mask holds a zero (read as unpadded)
};

// A text file with one length per line, or JSONL whose rows have an `input_ids` array or a
// `length` integer (what datasets' to_json writes); a leading UTF-8 byte-order mark and CRLF line
// ends are read as plain text. Lengths above seq_len are cut to it. A JSONL row may also say which
// labels count, as TRL builds them (sft_trainer.py's build_labels): a `labels` array (-100 where a
// label does not count) is taken as it is; otherwise a label counts where every applicable mask
// is 1: `assistant_masks` always, `completion_mask` when `completion_only_loss` (TRL's default
// for prompt-completion data, the rows that carry one). Each array has one entry per token. Throws
// UserError naming the line for a bad row (a blank line too), and for a missing or empty file or a
// directory. A pipe works (`--lengths <(python lengths.py)`): read once, kept (read_file_bytes).
SampleLengths read_lengths_file(const std::string& path, int64_t seq_len, bool completion_only_loss = true);

// The sentence for rows whose masks keep no label at all: "no row of NAME has a label that counts
// (completion_mask masks every one), so there is nothing to train; check the masks". `name` as
// the caller names the source; `masked_by` as SampleLengths::masked_by.
std::string nothing_counts_problem(const std::string& name, const std::string& masked_by);

// The lines read_lengths_file reads, as it reads them (line i: sample i's row); UserError when
// the file cannot be read.
std::vector<std::string> lengths_file_lines(const std::string& path);

// The documents of a token stream: each ends after an `eos_id` (the last may end without one).
// A document of n tokens (its eos id included) is a sample of n positions and n - 1 targets, as a
// tokenized dataset row is to transformers, cut to seq_len; documents of one token train nothing
// and are left out.
// `starts` (optional) receives where each kept document begins.
SampleLengths document_lengths(const std::vector<int64_t>& tokens, int64_t eos_id, int64_t seq_len,
                               std::vector<int64_t>* starts = nullptr);

// A token file of little-endian uint16 or uint32 ids: of a regular file only its first `max_ids`
// ids are read (a pretraining shard of many gigabytes costs the windows a sweep takes), a pipe is
// read once, whole (read_file_bytes). The constructor throws UserError when the width is not 2 or 4
// or the file is missing, empty, not a whole number of ids, or shorter than its size said while it
// was read; ids are decoded one at a time, so a large file is never widened to int64 as a whole.
class TokenFile {
 public:
  TokenFile(const std::string& path, int token_bytes, int64_t max_ids = std::numeric_limits<int64_t>::max());
  int64_t size() const { return static_cast<int64_t>(size_) / width_; }  // every id of the file
  // The id at index i (below max_ids); throws UserError naming the position when it is >= vocab_size.
  int64_t id(int64_t i, int64_t vocab_size) const;

 private:
  std::string path_;
  int width_;
  std::shared_ptr<const std::string> bytes_;  // the ids read
  std::size_t size_ = 0;                      // the file's bytes
};

// The sentence for a token file of `count` ids that holds fewer than one step's windows of T + 1
// (the sweep's loader and the plan refuse it alike).
std::string too_few_tokens_problem(const std::string& path, int64_t count, int64_t seq_len, int64_t batch);
// plan --tokens without --eos-id, checked as the sweep's loader would read it: at least one step's
// windows (batch × (T + 1) ids) and every id of the `steps` steps it reads within the vocabulary
// (at most the first 64 MiB: a pretraining shard is gigabytes). Pipes are the sweep's to read, once.
void check_token_windows(const DataSource& data, int64_t seq_len, int64_t batch, int64_t vocab_size, int64_t steps);

// Every id of a token file (TokenFile's errors).
std::vector<int64_t> read_token_ids(const std::string& path, int token_bytes, int64_t vocab_size);

// The samples of a real-data source: a lengths file, or the documents of a token file.
struct SampleSource {
  std::vector<int64_t> lengths;    // every sample, in source order, each cut to T
  int64_t truncated = 0;           // how many were longer than T
  std::vector<LabelSpans> kept_labels;  // per sample when the rows mask labels (SampleLengths)
  std::string masked_by;                // the columns that did, "" when none
  int64_t nothing_counts = 0;           // samples whose masks keep no label at all, before any cut
  // Samples left out with no label that counts within T (their masks keep none, or not before
  // the cut): TRL drops them before training when it does not pack; it keeps them when it packs.
  int64_t dropped = 0;
  // With samples dropped, the file row (0-based) each kept sample comes from; empty otherwise
  // (sample i is row i).
  std::vector<int64_t> rows;
  std::vector<int64_t> starts;     // documents: where each begins in token_ids
  std::vector<int64_t> token_ids;  // documents: the whole token file
  std::string description;         // "lengths.txt: 1000 samples, 3 cut to T=512"
  // The targets the samples train against those they would without masks, e.g. "completion_mask
  // keeps 1,234 of 5,678 targets (21.7 %)"; "" when no row masks a label.
  std::string masking;
};
// nullopt unless `data` names a lengths file or documents (--tokens with --eos-id).
std::optional<SampleSource> read_sample_source(const DataSource& data, int64_t seq_len, int64_t vocab_size);

// When a source gives fewer sequences than one step takes (`batch`, every rank's together), the
// batches repeat its samples within a step (a Trainer's epoch would end there): the words that say
// so, as "3 samples, fewer than the step's 8 sequences: each step repeats some", or "" when the
// source fills a step. bfd counts its packed rows; wrapped, its tokens against the step's rows of T.
std::string repeated_samples_words(const SampleSource& source, const DataSource& data, int64_t batch, int64_t seq_len);
// The same as a note for the CLI (reads the source again): "" without real data or when it fills a step.
std::string short_source_note(const WorkloadOptions& w);

// The rows one pass over the source makes: its samples (one per row), bfd's packed rows, or with
// wrapped packing its tokens' rows of T (at least one).
int64_t rows_in_source(const SampleSource& source, const DataSource& data, int64_t seq_len);
// The steps one pass over `data` takes at `batch` sequences a step: its rows over the batch,
// rounded up (the last step runs on into the first rows, as the batches cycle), or for a token file
// cut into full windows its whole steps of batch × (T + 1) tokens. 0 for synthetic data.
int64_t epoch_steps(const DataSource& data, int64_t seq_len, int64_t batch);
// The same from a source already read: its rows over the batch, rounded up (at least one).
int64_t epoch_steps(const SampleSource& source, const DataSource& data, int64_t seq_len, int64_t batch);
// The distinct steps --distinct-steps asks of `data`: its count, epoch_steps with epoch (a token
// file's windows at most as many as it holds), kDistinctBatchesByDefault where it is not given;
// not limited (require_distinct_steps_fit refuses past kMaxDistinctSteps).
int64_t requested_distinct_steps(const DataSource& data, int64_t seq_len, int64_t batch);
// The distinct steps a run of `data` cycles through: requested_distinct_steps within [1, kMaxDistinctSteps].
int distinct_steps_of(const DataSource& data, int64_t seq_len, int64_t batch);

// --distinct-steps N past one pass over a lengths or token file (epoch_steps): the note that names
// each packing's pass and says that the steps after it run over the same rows again (a token
// file's windows stop there); "" otherwise.
std::string distinct_steps_past_epoch_note(const WorkloadOptions& w);

// JSONL rows saved padded (an attention_mask with a zero): TRL's collator ignores the column and
// trains every input_id, as accumbench does, so the note says the padding counts as tokens and how
// to measure without it; "" for other data or rows without zeros.
std::string padded_rows_note(const WorkloadOptions& w);
// --completion-only-loss false without a completion_mask for it to leave unapplied (no lengths
// file, or none of its rows has one): the note that it changes nothing, or "" (reads the file; a
// file the run will refuse gives "").
std::string idle_completion_only_loss_note(const WorkloadOptions& w);
// "" or, for a sweep under --loss-normalization mean-of-means on samples (whose micro-batches may
// hold different numbers of targets), the note that its splits train different updates.
std::string mean_of_means_note(const WorkloadOptions& w);
// Whether a lengths file's completion_mask decides which of its labels count (DataSource::
// completion_mask_applied): a file with such rows under --completion-only-loss true. False for any
// other source, and for a file the run refuses (it says why itself).
bool completion_mask_counts(const DataSource& data, int64_t seq_len);
// The same, from SampleLengths::masked_by ("completion_mask", "completion_mask and assistant_masks").
bool completion_mask_counts(const std::string& masked_by);

// The order a seeded random sampler visits n samples in (a permutation of 0..n-1).
std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed);
// transformers' LengthGroupedSampler (see lengths.cpp for the rule and its source).
// `batch_size`: the samples of one optimizer step on one rank (per-device batch × accumulation).
std::vector<int64_t> length_grouped_order(const std::vector<int64_t>& lengths, int64_t batch_size, uint64_t seed);

// Positions computed for consecutive micro-batches of `micro_batch` samples, each padded by
// data.padding, against the samples' own positions.
struct PaddingCount {
  int64_t real_positions = 0;
  int64_t computed_positions = 0;
  double fraction() const;  // pad / computed; 0 when nothing was computed
};
PaddingCount count_padding(const std::vector<int64_t>& lengths, int64_t micro_batch, const DataSource& data,
                           int64_t seq_len);
PaddingCount count_padding(const std::vector<int64_t>& lengths, int64_t micro_batch, Padding padding,
                           int64_t pad_multiple, int64_t seq_len);

// The micro-batch with the most positions anywhere in `lengths` under data.padding: the one that
// holds the longest sample, in whatever order (sampling and grouping only decide its neighbours).
struct WorstMicroBatch {
  int64_t sample = -1;         // index of the longest sample in `lengths`
  int64_t length = 0;          // its positions
  int64_t padded_length = 0;   // what its micro-batch is padded to: the plan's sequence length
};
WorstMicroBatch worst_micro_batch(const std::vector<int64_t>& lengths, const DataSource& data, int64_t seq_len);

// --packing wrapped: the samples' tokens concatenated and cut into rows of seq_len (the last row
// may be shorter), as pretraining loaders do; attention crosses the documents inside a row.
std::vector<std::vector<int64_t>> pack_wrapped(const std::vector<std::vector<int64_t>>& samples, int64_t seq_len);

// --packing bfd: one bin of capacity seq_len per row, filled best-fit-decreasing as TRL's
// pack_dataset(strategy="bfd") does (the rule and its source are in lengths.cpp). Each sample
// stays whole: a row holds documents, and attention and positions restart at each of them.
struct PackedRow {
  std::vector<int64_t> samples;  // indices into `lengths`, in the order they were placed
  int64_t length = 0;            // positions used, <= seq_len; the rest of the row is padding
};
// Bins in the order they were opened. A length above seq_len counts as seq_len (TRL truncates).
std::vector<PackedRow> pack_bfd(const std::vector<int64_t>& lengths, int64_t seq_len);
// Samples TRL's pack_dataset packs together: datasets' map(batched=True) hands it 1000 rows at a
// time (its default batch_size), and no bin takes samples from two such groups.
inline constexpr int64_t kBfdGroupSamples = 1000;
// The rows TRL's pack_dataset makes of a whole source: pack_bfd of each kBfdGroupSamples in source
// order, the rows of each group after the last group's, their samples indices into `lengths`.
std::vector<PackedRow> pack_bfd_in_groups(const std::vector<int64_t>& lengths, int64_t seq_len);

}  // namespace accumbench
