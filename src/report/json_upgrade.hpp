// Older result files read as the current version (json.cpp): each upgrade fills in what the
// version after it added, with the value those files implied (the chunked loss off, every
// parameter trainable, every sample padded to T, ...). Private to src/report.
#pragma once

#include <nlohmann/json.hpp>

namespace accumbench {

// Upgrades `root` in place from its json_schema_version (2 or later) to kJsonSchemaVersion; a
// version it does not know is left for the reader to refuse.
void upgrade_to_current_version(nlohmann::ordered_json& root);

}  // namespace accumbench
