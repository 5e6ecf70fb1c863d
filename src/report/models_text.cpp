// `accumbench models` (report.hpp): the presets with their shapes and parameter counts.
#include <iomanip>
#include <ostream>

#include "accumbench/report.hpp"

namespace accumbench {

void print_models(const std::vector<ModelConfig>& models, std::ostream& out) {
  out << std::left << std::setw(15) << "preset" << std::setw(7) << "family" << std::right << std::setw(7) << "layers"
      << std::setw(8) << "d_model" << std::setw(7) << "heads" << std::setw(9) << "kv_heads" << std::setw(7) << "d_ff"
      << std::setw(8) << "vocab" << std::setw(9) << "max_T" << std::setw(15) << "parameters" << "  published\n";
  for (const auto& m : models) {
    out << std::left << std::setw(15) << m.name << std::setw(7) << to_string(m.arch) << std::right << std::setw(7)
        << m.n_layers << std::setw(8) << m.d_model << std::setw(7) << m.n_heads << std::setw(9) << m.n_kv_heads
        << std::setw(7) << m.d_ff << std::setw(8) << m.vocab_size << std::setw(9) << m.max_seq_len << std::setw(15)
        << parameter_count(m) << "  " << (m.published_parameters.empty() ? "(test size)" : m.published_parameters)
        << "\n";
  }
}

}  // namespace accumbench
