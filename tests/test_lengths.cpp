// Real-data lengths without LibTorch: lengths files (text and JSONL) and their bad rows, document
// lengths, padding counts with a hand-computed answer, transformers' length grouping on a
// hand-computed case, wrapped packing's capacity and completeness, bfd packing's capacity,
// completeness and best-fit-decreasing order on hand-computed cases, the worst micro-batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include "accumbench/error.hpp"
#include "accumbench/lengths.hpp"

namespace ab = accumbench;

namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + std::to_string(::getpid()) + "-" + name;  // one file per process
  std::ofstream(path) << text;
  return path;
}

std::string error_of(const std::string& path, int64_t seq_len = 16) {
  try {
    ab::read_lengths_file(path, seq_len);
  } catch (const ab::UserError& error) {
    return error.what();
  }
  return "";
}

ab::DataSource padding(const std::string& text) {
  ab::DataSource data;
  ab::set_padding(data, text);
  return data;
}

std::vector<int64_t> one_to(int64_t n) {
  std::vector<int64_t> out(static_cast<size_t>(n));
  std::iota(out.begin(), out.end(), int64_t{1});
  return out;
}

}  // namespace

TEST(LengthsFile, TextLinesAreLengthsCutToT) {
  const ab::SampleLengths got = ab::read_lengths_file(write_temp("text.txt", "3\n 20 \n16\n17\n"), 16);
  EXPECT_EQ(got.lengths, (std::vector<int64_t>{3, 16, 16, 16}));
  EXPECT_EQ(got.truncated, 2);  // 20 and 17 are above T = 16; 16 is not
}

// A file parsed once is kept for the process (start-up reads it in several places), keyed by its
// bytes: the same path rewritten with other lengths of the same size reads the new ones at once,
// and the same bytes at another T are cut to that T.
TEST(LengthsFile, AParsedFileIsReadAgainWhenItsBytesChange) {
  const std::string path = write_temp("rewritten.txt", "12\n5\n");
  EXPECT_EQ(ab::read_lengths_file(path, 16).lengths, (std::vector<int64_t>{12, 5}));
  EXPECT_EQ(ab::read_lengths_file(path, 16).lengths, (std::vector<int64_t>{12, 5}));
  EXPECT_EQ(ab::read_lengths_file(path, 8).lengths, (std::vector<int64_t>{8, 5}));
  std::ofstream(path) << "21\n9\n";  // the same size
  EXPECT_EQ(ab::read_lengths_file(path, 16).lengths, (std::vector<int64_t>{16, 9}));
  EXPECT_EQ(ab::read_lengths_file(path, 16).truncated, 1);
  std::ofstream(path) << "x\n";  // an error is not kept either: the file read again says it
  EXPECT_NE(error_of(path).find("line 1"), std::string::npos) << error_of(path);
}

TEST(LengthsFile, AByteOrderMarkIsNotPartOfTheFirstLine) {
  EXPECT_EQ(ab::read_lengths_file(write_temp("bom.txt", "\xEF\xBB\xBF" "12\r\n5\r\n"), 16).lengths,
            (std::vector<int64_t>{12, 5}));
  EXPECT_EQ(ab::read_lengths_file(write_temp("bom.jsonl", "\xEF\xBB\xBF{\"length\": 7}\n"), 16).lengths,
            (std::vector<int64_t>{7}));
}

TEST(LengthsFile, JsonlRowsGiveInputIdsOrLength) {
  const ab::SampleLengths got = ab::read_lengths_file(
      write_temp("rows.jsonl", "{\"input_ids\": [5, 6, 7]}\n{\"length\": 9, \"text\": \"x\"}\n{\"input_ids\": [1]}\n"), 16);
  EXPECT_EQ(got.lengths, (std::vector<int64_t>{3, 9, 1}));
  EXPECT_EQ(got.truncated, 0);
  // A whole length written as a float is that length; a length beside ids must be their count
  // (helper-93: 1e1 was "not a whole number", and 12 beside 3 ids silently read as 3).
  EXPECT_EQ(ab::read_lengths_file(write_temp("floats.jsonl", "{\"length\": 1e1}\n{\"length\": 4.0}\n"
                                                             "{\"length\": 3, \"input_ids\": [1, 2, 3]}\n"),
                                  16)
                .lengths,
            (std::vector<int64_t>{10, 4, 3}));
  EXPECT_EQ(error_of(write_temp("half.jsonl", "{\"length\": 2.5}\n")),
            "lengths file \"" + ::testing::TempDir() + std::to_string(::getpid()) +
                "-half.jsonl\" line 1: length 2.5 is not a whole number; give each row's length as a whole count of tokens");
  EXPECT_NE(error_of(write_temp("disagree.jsonl", "{\"length\": 12, \"input_ids\": [1, 2, 3]}\n"))
                .find("line 1: length 12 disagrees with its 3 input_ids; drop the length column or make it the ids' count"),
            std::string::npos);
}

TEST(LengthsFile, BadRowsNameTheirLine) {
  EXPECT_NE(error_of(write_temp("empty.txt", "")).find("is empty"), std::string::npos);
  EXPECT_NE(error_of(write_temp("blank.txt", "4\n\n5\n")).find("line 2 is empty"), std::string::npos);
  EXPECT_NE(error_of(write_temp("word.txt", "4\nfour\n")).find("line 2 holds \"four\", which is not a number"),
            std::string::npos);
  EXPECT_NE(error_of(write_temp("neg.txt", "4\n5\n-3\n")).find("line 3 holds the length -3"), std::string::npos);
  EXPECT_NE(error_of(write_temp("zero.jsonl", "{\"input_ids\": []}\n")).find("line 1 holds the length 0"),
            std::string::npos);
  EXPECT_NE(error_of(write_temp("field.jsonl", "{\"length\": 3}\n{\"text\": \"hi\"}\n"))
                .find("line 2 has neither an input_ids array nor a length integer"),
            std::string::npos);
  EXPECT_NE(error_of(write_temp("broken.jsonl", "{\"length\": \n")).find("line 1 is not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("/nonexistent/lengths.txt").find("fixed or variable"), std::string::npos);
  EXPECT_NE(error_of(::testing::TempDir()).find("is a directory"), std::string::npos);
}

// Numbers past int64 are lengths past any T (cut to it), not "not a number" or a wrapped -1; a
// token file given to --lengths is named as such; blank lines at the end end the file.
TEST(LengthsFile, HugeLengthsAreCutBinaryIsNamedTrailingBlanksEnd) {
  const ab::SampleLengths huge = ab::read_lengths_file(
      write_temp("huge.txt", "99999999999999999999\n{\"length\": 18446744073709551615}\n5\n"), 16);
  EXPECT_EQ(huge.lengths, (std::vector<int64_t>{16, 16, 5}));
  EXPECT_EQ(huge.truncated, 2);
  EXPECT_EQ(error_of(write_temp("minus.txt", "4\n-99999999999999999999\n")),
            "lengths file \"" + ::testing::TempDir() + std::to_string(::getpid()) +
                "-minus.txt\" line 2 holds a negative length; sample lengths must be positive");
  EXPECT_NE(error_of(write_temp("tokens.u16", std::string("\x05\x00\x0a\x00", 4)))
                .find("line 1 holds binary bytes, not text; a token file goes to `sweep --tokens`"),
            std::string::npos);
  EXPECT_EQ(ab::read_lengths_file(write_temp("trailing.txt", "4\n5\n\n \r\n"), 16).lengths,
            (std::vector<int64_t>{4, 5}));
}

// A source with fewer sequences than a step repeats some within it: said, and counted as the
// batches lay it out (samples; bfd's rows; wrapped's tokens against batch × T).
TEST(ShortSource, SaysWhenAStepRepeatsSamples) {
  ab::SampleSource source;
  source.lengths = {5, 10, 20};
  ab::DataSource data;
  EXPECT_EQ(ab::repeated_samples_words(source, data, 8, 32), "fewer than the step's 8 sequences: each step repeats some");
  EXPECT_EQ(ab::repeated_samples_words(source, data, 3, 32), "");
  data.packing = ab::Packing::kBfd;  // 20 + 10 in one row of 32, 5 in a second: two rows
  EXPECT_EQ(ab::repeated_samples_words(source, data, 3, 32),
            "packed into 2 rows, fewer than the step's 3 sequences: each step repeats some");
  EXPECT_EQ(ab::repeated_samples_words(source, data, 2, 32), "");
  data.packing = ab::Packing::kWrapped;  // 35 tokens; one row of 32 takes 32, two 64
  EXPECT_EQ(ab::repeated_samples_words(source, data, 1, 32), "");
  EXPECT_EQ(ab::repeated_samples_words(source, data, 2, 32),
            "35 tokens, fewer than the step's 2 sequences of T=32 take: each step repeats some");
  source.lengths = {32};  // exactly one row
  EXPECT_EQ(ab::repeated_samples_words(source, data, 1, 32), "");
}

// TRL's pad_to_multiple_of rounds past max_length; accumbench runs no row past T, so says so.
TEST(Padding, MultiplePastTIsAProblemWithItsFix) {
  EXPECT_EQ(ab::padding_past_seq_len_problem(padding("multiple:8"), 32, 32), "");
  EXPECT_EQ(ab::padding_past_seq_len_problem(padding("multiple:24"), 24, 32), "");
  EXPECT_EQ(ab::padding_past_seq_len_problem(padding("longest"), 31, 32), "");
  EXPECT_EQ(ab::padding_past_seq_len_problem(padding("multiple:24"), 25, 32),
            "--padding multiple:24 pads a micro-batch whose longest sample has 25 positions to 48, past --seq-len 32 "
            "(TRL's and axolotl's pad_to_multiple_of do not stop at max_length), and accumbench runs no row longer than "
            "--seq-len; "
            "pick an N that divides 32, or a --seq-len that is a multiple of 24");
  ab::DataSource bfd = padding("multiple:24");
  bfd.packing = ab::Packing::kBfd;  // rows fill up to T whatever the samples
  EXPECT_NE(ab::padding_past_seq_len_problem(bfd, 5, 32).find("longest packed row has 32 positions to 48"),
            std::string::npos);
  EXPECT_NE(ab::padding_past_seq_len_problem(padding("multiple:4096"), 5, 32).find("to 4096, past --seq-len 32"),
            std::string::npos);
  EXPECT_THROW(padding("multiple:99999999999999999999"), ab::UserError);
}

// A pipe gives its bytes once; the plan, the context block and the batches each read the source,
// so the second read must see what the first did (it saw an empty file before read_file_bytes).
TEST(LengthsFile, APipeIsReadOnceAndKept) {
  const std::string path = ::testing::TempDir() + std::to_string(::getpid()) + "-lengths.fifo";
  std::remove(path.c_str());
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  std::thread writer([&path] { std::ofstream(path) << "5\n40\n7\n"; });  // blocks until the first open
  const ab::SampleLengths first = ab::read_lengths_file(path, 16);
  writer.join();
  // Were the FIFO opened again, this writer would meet that reader and hand it other lengths;
  // kept bytes never open it, and the writer stops once the second read has returned.
  std::atomic<bool> read_twice{false};
  std::thread other([&] {
    while (!read_twice) {
      const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);  // fails (ENXIO) while nobody reads
      if (fd >= 0) {
        ASSERT_EQ(::write(fd, "1\n", 2), 2);
        ::close(fd);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  const ab::SampleLengths second = ab::read_lengths_file(path, 16);
  read_twice = true;
  other.join();
  EXPECT_EQ(first.lengths, (std::vector<int64_t>{5, 16, 7}));
  EXPECT_EQ(second.lengths, first.lengths);
  EXPECT_EQ(second.truncated, 1);
  std::remove(path.c_str());
}

TEST(DocumentLengths, SplitAfterEachEosCutToT) {
  // eos = 0: documents [5 6 0] [7 0] [0] [8 9 9 9 9 9] -> 3, 2, (one token: none), 6 positions
  // (a document's tokens, the eos id included, as a tokenized row; n - 1 targets each), cut to 4.
  std::vector<int64_t> starts;
  const ab::SampleLengths got = ab::document_lengths({5, 6, 0, 7, 0, 0, 8, 9, 9, 9, 9, 9}, 0, 4, &starts);
  EXPECT_EQ(got.lengths, (std::vector<int64_t>{3, 2, 4}));
  EXPECT_EQ(got.truncated, 1);
  EXPECT_EQ(starts, (std::vector<int64_t>{0, 3, 6}));
}

// Lengths 1..16 in order at micro-batch 4, T = 16, longest padding: the micro-batches
// {1,2,3,4} {5,6,7,8} {9,10,11,12} {13,14,15,16} are padded to 4, 8, 12, 16, so
// computed = 4·(4 + 8 + 12 + 16) = 160 positions, real = 1 + … + 16 = 136, pad = 24:
// 24 / 160 = 0.15 exactly. With max padding every row is 16: 256 computed, 120 pad, 0.46875.
// multiple:8 pads to 8, 8, 16, 16: 192 computed, 56 pad, 0.291666….
TEST(Padding, LengthsOneToSixteenAtMicroBatchFour) {
  const std::vector<int64_t> lengths = one_to(16);
  const ab::PaddingCount longest = ab::count_padding(lengths, 4, padding("longest"), 16);
  EXPECT_EQ(longest.real_positions, 136);
  EXPECT_EQ(longest.computed_positions, 160);
  EXPECT_DOUBLE_EQ(longest.fraction(), 0.15);
  EXPECT_DOUBLE_EQ(ab::count_padding(lengths, 4, padding("max"), 16).fraction(), 120.0 / 256.0);
  EXPECT_DOUBLE_EQ(ab::count_padding(lengths, 4, padding("multiple:8"), 16).fraction(), 56.0 / 192.0);
  EXPECT_DOUBLE_EQ(ab::count_padding(lengths, 1, padding("longest"), 16).fraction(), 0.0);
}

TEST(Padding, MultipleNeedsAPositiveN) {
  EXPECT_THROW(padding("multiple:0"), ab::UserError);
  EXPECT_THROW(padding("multiple:"), ab::UserError);
  EXPECT_THROW(padding("multiple:x"), ab::UserError);
  EXPECT_THROW(padding("ragged"), ab::UserError);
  EXPECT_EQ(ab::padding_name(padding("multiple:64")), "multiple:64");
  EXPECT_EQ(ab::padded_length(padding("multiple:64"), 65, 100), 100);  // never above T
}

// transformers' rule on a hand-computed case: 8 samples, batch 2 -> mega_batch_mult =
// max(1, min(8 // (2·4), 50)) = 1, megabatches of 2 consecutive samples of the permutation,
// each sorted longest first, then the longest sample swapped to position 0.
TEST(GroupByLength, FollowsTransformersRule) {
  const std::vector<int64_t> lengths = {5, 1, 7, 3, 8, 2, 6, 4};
  const std::vector<int64_t> perm = ab::shuffled_order(8, 3);
  std::vector<int64_t> want = perm;
  for (size_t i = 0; i < 8; i += 2) {
    if (lengths[static_cast<size_t>(want[i + 1])] > lengths[static_cast<size_t>(want[i])]) std::swap(want[i], want[i + 1]);
  }
  const size_t longest = static_cast<size_t>(std::find(want.begin(), want.end(), 4) - want.begin());  // length 8
  std::swap(want[0], want[longest]);
  EXPECT_EQ(ab::length_grouped_order(lengths, 2, 3), want);
  EXPECT_EQ(ab::length_grouped_order(lengths, 2, 3)[0], 4);
}

TEST(GroupByLength, OneMegabatchIsSortedLongestFirst) {
  // 8 samples, batch 8: 8 // 32 = 0 -> mult 1, one megabatch of all 8, sorted longest first.
  const std::vector<int64_t> lengths = {5, 1, 7, 3, 8, 2, 6, 4};
  const std::vector<int64_t> order = ab::length_grouped_order(lengths, 8, 0);
  std::vector<int64_t> got;
  for (int64_t i : order) got.push_back(lengths[static_cast<size_t>(i)]);
  EXPECT_EQ(got, (std::vector<int64_t>{8, 7, 6, 5, 4, 3, 2, 1}));
}

TEST(Packing, WrappedRowsHoldEveryTokenOnceAndNeverExceedT) {
  std::vector<std::vector<int64_t>> samples;
  int64_t next = 0;
  for (int64_t length : {3, 17, 1, 8, 16, 5, 30}) {
    samples.emplace_back();
    for (int64_t i = 0; i < length; ++i) samples.back().push_back(next++);  // every token distinct
  }
  const auto rows = ab::pack_wrapped(samples, 16);
  std::map<int64_t, int> seen;
  for (size_t r = 0; r < rows.size(); ++r) {
    EXPECT_LE(rows[r].size(), 16u);
    if (r + 1 < rows.size()) EXPECT_EQ(rows[r].size(), 16u);  // only the last row may be short
    for (int64_t token : rows[r]) ++seen[token];
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), next);  // 80 tokens: every one …
  for (const auto& [token, count] : seen) EXPECT_EQ(count, 1) << token;  // … exactly once
  EXPECT_EQ(rows.size(), 5u);  // 80 / 16
}

// Every sample lands in exactly one bin, whole; no bin holds more than T; a bin's length is the
// sum of its samples'. 500 seeded lengths in [1, 64], T = 64.
TEST(Packing, BfdBinsHoldEverySampleOnceAndNeverExceedT) {
  std::vector<int64_t> lengths;
  uint64_t state = 12345;
  for (int i = 0; i < 500; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;  // Knuth's MMIX LCG
    lengths.push_back(1 + static_cast<int64_t>((state >> 33) % 64));
  }
  const std::vector<ab::PackedRow> bins = ab::pack_bfd(lengths, 64);
  std::vector<int> seen(lengths.size(), 0);
  int64_t packed = 0;
  for (const ab::PackedRow& bin : bins) {
    int64_t sum = 0;
    for (int64_t sample : bin.samples) {
      ++seen[static_cast<size_t>(sample)];
      sum += lengths[static_cast<size_t>(sample)];
    }
    EXPECT_EQ(bin.length, sum);
    EXPECT_LE(bin.length, 64);
    packed += sum;
  }
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1) << "sample " << i;
  EXPECT_EQ(packed, std::accumulate(lengths.begin(), lengths.end(), int64_t{0}));
  // Best fit leaves little room: fewer than 3 % more bins than the positions strictly need.
  const int64_t lower_bound = (packed + 63) / 64;
  EXPECT_LE(static_cast<double>(bins.size()), 1.03 * static_cast<double>(lower_bound));
}

// T = 10, lengths {9, 4, 7, 1, 4, 1}, longest first: 9 opens A (1 left), 7 opens B (3 left), 4
// opens C (6 left), the second 4 goes to C (2 left), 1 to A (the least room that holds it, 1:
// full), the last 1 to C (2 left), not to B (3 left) where first-fit would put it.
TEST(Packing, BfdPutsEachSampleWhereTheLeastRoomRemains) {
  const std::vector<ab::PackedRow> bins = ab::pack_bfd({9, 4, 7, 1, 4, 1}, 10);
  ASSERT_EQ(bins.size(), 3u);
  EXPECT_EQ(bins[0].samples, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(bins[1].samples, (std::vector<int64_t>{2}));
  EXPECT_EQ(bins[2].samples, (std::vector<int64_t>{1, 4, 5}));
  EXPECT_EQ(bins[0].length, 10);
  EXPECT_EQ(bins[1].length, 7);
  EXPECT_EQ(bins[2].length, 9);
}

// T = 10, lengths {5, 8, 3, 6, 2, 4, 1}: 8 -> A (2 left), 6 -> B (4), 5 -> C (5), 4 -> B (full),
// 3 -> C (2 left): A and C both have 2 left when 2 comes; TRL takes the bin that reached that
// room first (a FIFO per room), A. Then 1 -> C. A length above T counts as T.
TEST(Packing, BfdTiesGoToTheBinThatReachedTheRoomFirst) {
  const std::vector<ab::PackedRow> bins = ab::pack_bfd({5, 8, 3, 6, 2, 4, 1}, 10);
  ASSERT_EQ(bins.size(), 3u);
  EXPECT_EQ(bins[0].samples, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(bins[1].samples, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(bins[2].samples, (std::vector<int64_t>{0, 2, 6}));
  const std::vector<ab::PackedRow> cut = ab::pack_bfd({25, 3}, 10);
  ASSERT_EQ(cut.size(), 2u);
  EXPECT_EQ(cut[0].length, 10);
  EXPECT_EQ(cut[1].samples, (std::vector<int64_t>{1}));
}

TEST(WorstMicroBatch, IsTheOneWithTheLongestSample) {
  const std::vector<int64_t> lengths = {5, 1, 300, 3};
  const ab::WorstMicroBatch worst = ab::worst_micro_batch(lengths, padding("multiple:64"), 512);
  EXPECT_EQ(worst.sample, 2);
  EXPECT_EQ(worst.length, 300);
  EXPECT_EQ(worst.padded_length, 320);
  EXPECT_EQ(ab::worst_micro_batch(lengths, padding("max"), 512).padded_length, 512);
}

// Label masks as TRL builds labels (sft_trainer.py's build_labels), on tests/data/lengths: a
// prompt-completion file (completion_mask 0 over a prompt of p tokens, 1 over a completion of c)
// trains c targets per sample, labels p..p+c-1 (the label at position 0 of a sample is never a
// target); off, every label counts.
TEST(LabelMasks, CompletionMaskKeepsTheCompletionsLabels) {
  const std::string path = std::string(ACCUMBENCH_TEST_DATA) + "/lengths/prompt_completion.jsonl";
  const ab::SampleLengths on = ab::read_lengths_file(path, 64);
  const std::vector<std::pair<int64_t, int64_t>> prompt_completion = {
      {12, 9}, {3, 14}, {20, 6}, {7, 2}, {35, 8}, {15, 15}, {5, 25}, {26, 11}, {9, 4}, {18, 3}, {4, 7}, {30, 5}};
  ASSERT_EQ(on.kept_labels.size(), prompt_completion.size());
  for (size_t i = 0; i < prompt_completion.size(); ++i) {
    const auto [p, c] = prompt_completion[i];
    EXPECT_EQ(on.lengths[i], p + c) << i;
    EXPECT_EQ(on.kept_labels[i], (ab::LabelSpans{{p, p + c}})) << i;
    EXPECT_EQ(ab::kept_targets(on.kept_labels[i], on.lengths[i]), c) << i;
  }
  EXPECT_EQ(on.masked_by, "completion_mask");
  EXPECT_EQ(on.unapplied_completion_masks, 0);
  const ab::SampleLengths off = ab::read_lengths_file(path, 64, /*completion_only_loss=*/false);
  EXPECT_TRUE(off.kept_labels.empty());
  EXPECT_EQ(off.masked_by, "");
  EXPECT_EQ(off.unapplied_completion_masks, 12);
}

// Cut to T = 32 (TRL's keep_start): 35 + 8 keeps no counted label, 30 + 5 keeps labels 30 and 31
// (31 predicted by position 30; position 31, the last, predicts nothing). Without packing the
// sample left with none is dropped, as TRL's filter after truncation drops it; packed, it stays.
TEST(LabelMasks, TheCutToTAndTrlsDropOfSamplesWithNothingToTrain) {
  const std::string path = std::string(ACCUMBENCH_TEST_DATA) + "/lengths/prompt_completion.jsonl";
  const ab::SampleLengths cut = ab::read_lengths_file(path, 32);
  EXPECT_EQ(cut.kept_labels[4], ab::LabelSpans{});
  EXPECT_EQ(cut.kept_labels[11], (ab::LabelSpans{{30, 32}}));
  EXPECT_EQ(ab::kept_targets(cut.kept_labels[11], 32), 2);
  EXPECT_EQ(cut.kept_labels[7], (ab::LabelSpans{{26, 32}}));  // 26 + 11 cut to 32
  ab::DataSource data;
  ab::set_lengths(data, path);
  const std::optional<ab::SampleSource> unpacked = ab::read_sample_source(data, 32, 5000);
  ASSERT_TRUE(unpacked);
  EXPECT_EQ(unpacked->dropped, 1);
  EXPECT_EQ(unpacked->lengths.size(), 11u);
  EXPECT_EQ(unpacked->rows, (std::vector<int64_t>{0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11}));
  // 9 + 14 + 6 + 2 + 15 + 25 + 6 + 4 + 3 + 7 + 2 of the samples' 20 + 16 + 25 + 8 + 29 + 29 + 31 + 12 + 20 + 10 + 31.
  EXPECT_EQ(unpacked->masking,
            "completion_mask keeps 93 of 231 targets (40.3 %); 1 sample left out with no label that counts within "
            "T=32 (as TRL 1.9+ drops them when it does not pack)");
  data.packing = ab::Packing::kBfd;
  const std::optional<ab::SampleSource> packed = ab::read_sample_source(data, 32, 5000);
  EXPECT_EQ(packed->dropped, 0);
  EXPECT_EQ(packed->lengths.size(), 12u);
  EXPECT_TRUE(packed->rows.empty());
}

// Conversations: assistant_masks over two turns; a labels column taken as it is (its masks
// ignored); both masks where a row has both (each label must pass both); a row without any
// keeps every label.
TEST(LabelMasks, AssistantMasksLabelsAndBoth) {
  const ab::SampleLengths got =
      ab::read_lengths_file(std::string(ACCUMBENCH_TEST_DATA) + "/lengths/chat_masks.jsonl", 64);
  ASSERT_EQ(got.kept_labels.size(), 8u);
  EXPECT_EQ(got.kept_labels[0], (ab::LabelSpans{{6, 11}, {15, 22}}));
  EXPECT_EQ(ab::kept_targets(got.kept_labels[0], got.lengths[0]), 12);
  EXPECT_EQ(got.kept_labels[1], (ab::LabelSpans{{3, 12}}));
  EXPECT_EQ(got.kept_labels[2], (ab::LabelSpans{{10, 13}, {18, 20}, {24, 30}}));
  EXPECT_EQ(got.kept_labels[4], (ab::LabelSpans{{5, 11}, {14, 18}}));  // its labels column
  EXPECT_EQ(got.kept_labels[5], (ab::LabelSpans{{7, 14}}));            // assistant [4, 14) and completion [7, 14)
  EXPECT_EQ(got.kept_labels[6], (ab::LabelSpans{{0, 9}}));             // no mask: every label
  EXPECT_EQ(ab::kept_targets(got.kept_labels[6], 9), 8);
  EXPECT_EQ(got.masked_by, "labels, completion_mask and assistant_masks");
  // Off, the both-masks row keeps its assistant_masks alone.
  const ab::SampleLengths off =
      ab::read_lengths_file(std::string(ACCUMBENCH_TEST_DATA) + "/lengths/chat_masks.jsonl", 64, false);
  EXPECT_EQ(off.kept_labels[5], (ab::LabelSpans{{4, 14}}));
  EXPECT_EQ(off.masked_by, "labels and assistant_masks");
  EXPECT_EQ(off.unapplied_completion_masks, 1);
}

// Whether a completion_mask decides the labels (the Trainer settings then say
// completion_only_loss: true): in a file that has one applied, not under
// --completion-only-loss false, not for a file without one, a synthetic source or a refused file.
TEST(LabelMasks, CompletionMaskCountsOnlyWhereOneApplies) {
  const auto file = [](const std::string& name, bool completion_only_loss) {
    ab::DataSource data;
    ab::set_lengths(data, std::string(ACCUMBENCH_TEST_DATA) + "/lengths/" + name);
    data.completion_only_loss = completion_only_loss;
    return data;
  };
  EXPECT_TRUE(ab::completion_mask_counts(file("prompt_completion.jsonl", true), 32));
  EXPECT_TRUE(ab::completion_mask_counts(file("chat_masks.jsonl", true), 64));  // one row has one
  EXPECT_FALSE(ab::completion_mask_counts(file("prompt_completion.jsonl", false), 32));
  EXPECT_FALSE(ab::completion_mask_counts(file("chat_masks.jsonl", false), 64));
  EXPECT_FALSE(ab::completion_mask_counts(file("skewed.txt", true), 64));
  EXPECT_FALSE(ab::completion_mask_counts(file("no_such_file.jsonl", true), 64));
  ab::DataSource variable;
  ab::set_lengths(variable, "variable");
  EXPECT_FALSE(ab::completion_mask_counts(variable, 64));
  EXPECT_TRUE(ab::completion_mask_counts(std::string("labels, completion_mask and assistant_masks")));
  EXPECT_FALSE(ab::completion_mask_counts(std::string("labels and assistant_masks")));
}

TEST(LabelMasks, BadColumnsNameTheirLineAndTheFix) {
  EXPECT_NE(error_of(write_temp("short_mask.jsonl", "{\"input_ids\": [1, 2, 3], \"completion_mask\": [0, 1]}\n"))
                .find("line 1: completion_mask has 2 entries for 3 tokens; give one per token"),
            std::string::npos);
  EXPECT_NE(error_of(write_temp("mask_two.jsonl", "{\"length\": 2}\n{\"input_ids\": [1, 2], \"assistant_masks\": [0, 2]}\n"))
                .find("line 2: assistant_masks entry 1 is 2; a mask holds 0 or 1 per token"),
            std::string::npos);
  EXPECT_NE(error_of(write_temp("labels_neg.jsonl", "{\"input_ids\": [1, 2], \"labels\": [-100, -5]}\n"))
                .find("line 1: labels entry 1 is -5; give a token id, or -100 where the label does not count"),
            std::string::npos);
  EXPECT_NE(error_of(write_temp("mask_str.jsonl", "{\"input_ids\": [1, 2], \"completion_mask\": \"01\"}\n"))
                .find("line 1: completion_mask is not an array; give one entry per token"),
            std::string::npos);
  // true/false masks (datasets writes bools for some columns) read as 1/0.
  const ab::SampleLengths bools = ab::read_lengths_file(
      write_temp("bools.jsonl", "{\"input_ids\": [1, 2, 3, 4], \"assistant_masks\": [false, true, true, false]}\n"), 16);
  EXPECT_EQ(bools.kept_labels[0], (ab::LabelSpans{{1, 3}}));
}

// What a probe broke: an entry nested 100,000 deep is named by kind (dump() would recurse past
// the stack), a label past int64 is refused (not wrapped round to -100), input_ids hold token ids,
// a file whose masks count nothing says so, and a completion_mask that --completion-only-loss
// false leaves unread is not checked (TRL does not read it either).
TEST(LabelMasks, ProbedEdges) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(error_of(write_temp("deep.jsonl", "{\"input_ids\": [1, 2, 3], \"completion_mask\": [0, " + deep + ", 1]}\n"))
                .find("line 1: completion_mask entry 1 is an array; a mask holds 0 or 1 per token"),
            std::string::npos);
  EXPECT_NE(error_of(write_temp("wrap.jsonl", "{\"input_ids\": [1, 2], \"labels\": [-100, 18446744073709551516]}\n"))
                .find("labels entry 1 is 18446744073709551516; give a token id"),
            std::string::npos);
  EXPECT_NE(error_of(write_temp("ids.jsonl", "{\"input_ids\": [[1, 2], [3]]}\n"))
                .find("line 1: input_ids entry 0 is an array, not a token id"),
            std::string::npos);
  ab::DataSource data;
  ab::set_lengths(data, write_temp("zero.jsonl", "{\"input_ids\": [1, 2, 3], \"completion_mask\": [0, 0, 0]}\n"));
  try {
    ab::read_sample_source(data, 16, 512);
    ADD_FAILURE() << "a file whose masks count nothing was taken";
  } catch (const ab::UserError& error) {
    EXPECT_NE(std::string(error.what()).find("has a label that counts (completion_mask masks every one), so there is "
                                             "nothing to train; check the masks"),
              std::string::npos)
        << error.what();
  }
  const std::string unread = write_temp("unread.jsonl", "{\"input_ids\": [1, 2, 3], \"completion_mask\": \"x\"}\n");
  EXPECT_EQ(ab::read_lengths_file(unread, 16, /*completion_only_loss=*/false).unapplied_completion_masks, 1);
}

// An attention_mask is not read (TRL's collator builds its own, of ones, and trains every
// input_id): a row saved padded keeps its length, padding included, and is counted for the note.
TEST(LabelMasks, AnAttentionMaskIsCountedNotApplied) {
  const std::string path = write_temp("padded.jsonl",
                                      "{\"input_ids\": [5, 6, 7, 8, 0, 0], \"attention_mask\": [1, 1, 1, 1, 0, 0]}\n"
                                      "{\"input_ids\": [5, 6, 7], \"attention_mask\": [1, 1, 1]}\n"
                                      "{\"input_ids\": [5, 6], \"attention_mask\": [true, false, true]}\n");
  const ab::SampleLengths padded = ab::read_lengths_file(path, 16);
  EXPECT_EQ(padded.lengths, (std::vector<int64_t>{6, 3, 2}));
  EXPECT_EQ(padded.padded_rows, 2);
  ab::WorkloadOptions w;
  w.seq_len = 16;
  ab::set_lengths(w.data, path);
  EXPECT_NE(ab::padded_rows_note(w).find("2 rows of " + path + " hold attention_mask zeros (padding saved with the "
                                         "rows): TRL's collator builds its own attention_mask, of ones, and trains "
                                         "every input_id"),
            std::string::npos)
      << ab::padded_rows_note(w);
  ab::set_lengths(w.data, write_temp("unpadded.jsonl", "{\"input_ids\": [5, 6], \"attention_mask\": [1, 1]}\n"));
  EXPECT_EQ(ab::padded_rows_note(w), "");
}

// TRL cuts no sample before wrapped packing: a 40-token sample stays 40 long at T = 16, and no
// sample reads as cut.
TEST(LabelMasks, WrappedPackingCutsNoSample) {
  ab::DataSource data;
  ab::set_lengths(data, write_temp("long.txt", "40\n5\n"));
  data.packing = ab::Packing::kWrapped;
  const std::optional<ab::SampleSource> wrapped = ab::read_sample_source(data, 16, 512);
  EXPECT_EQ(wrapped->lengths, (std::vector<int64_t>{40, 5}));
  EXPECT_EQ(wrapped->description.find("none cut (wrapped rows run on)") != std::string::npos, true) << wrapped->description;
  data.packing = ab::Packing::kNone;
  EXPECT_EQ(ab::read_sample_source(data, 16, 512)->lengths, (std::vector<int64_t>{16, 5}));
}
