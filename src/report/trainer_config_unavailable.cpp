// Built instead of trainer_config.cpp where yaml-cpp is missing (the GPU machine, which has no
// Debian -dev packages): --trl-config and --axolotl-config refuse with a sentence.
#include "accumbench/error.hpp"
#include "accumbench/trainer_config.hpp"

namespace accumbench {

namespace {

[[noreturn]] void unavailable() {
  throw UserError("this build of accumbench reads no YAML (it was configured without yaml-cpp); install "
                  "libyaml-cpp-dev and build again, or pass the settings as options (--emit args prints them)");
}

}  // namespace

TrainerConfig parse_trainer_config(const std::string&, ConfigFormat, int, const std::string&) { unavailable(); }
TrainerConfig read_trainer_config(const std::string&, ConfigFormat, int) { unavailable(); }
void apply_trainer_config(const TrainerConfig&, WorkloadOptions&, const std::function<bool(const std::string&)>&, bool) {
  unavailable();
}
std::vector<std::string> trainer_config_notes(const TrainerConfig&, const std::function<bool(const std::string&)>&,
                                              const WorkloadOptions&) {
  unavailable();
}

}  // namespace accumbench
