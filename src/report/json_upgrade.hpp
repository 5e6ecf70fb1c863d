// Older result files read as the current version (json.cpp): each upgrade fills in what the
// version after it added, with the value those files implied (the chunked loss off, every
// parameter trainable, every sample padded to T, ...). Private to src/report.
#pragma once

#include <nlohmann/json.hpp>

namespace accumbench {

// Upgrades `root` in place from its json_schema_version (2 or later) to kJsonSchemaVersion; a
// version it does not know is left for the reader to refuse.
void upgrade_to_current_version(nlohmann::ordered_json& root);

// What a file writes as null because nothing was measured, read back as the sweep holds it: a split
// never timed (oom, predicted-oom, an error; or no steps and no summary) has 0 for its rates, peaks
// and phases, and a run without a memory limit fits (true). A schema-19 file of the builds that
// wrote it before its last fields (steps' session, the context's load) reads them as not recorded.
void read_unmeasured_back(nlohmann::ordered_json& root);

// What a split never timed did not measure (null in the file, read back as 0): its rates, its
// peaks (but a peak an out-of-memory split reached), and each phase of these.
inline constexpr const char* kUnmeasuredRates[] = {"tokens_per_step",    "tokens_per_second", "computed_tokens_per_second",
                                                   "padding_fraction",   "samples_per_second", "achieved_tflops",
                                                   "hardware_tflops"};
inline constexpr const char* kUnmeasuredPeaks[] = {"peak_allocated_bytes", "peak_reserved_bytes"};
inline constexpr const char* kUnmeasuredPhases[] = {"phase_median_seconds", "device_median_seconds"};

}  // namespace accumbench
