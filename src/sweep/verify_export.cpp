// write_reference_step (verify_export.hpp); the format is docs/EXPORT.md.
#include "sweep/verify_export.hpp"

#include <torch/torch.h>

#include <filesystem>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "accumbench/error.hpp"
#include "accumbench/lengths.hpp"
#include "accumbench/units.hpp"

namespace accumbench {
namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

// The raw bytes are the host's; the format promises little-endian, so a big-endian host fails
// at compile time rather than writing files nobody can read back.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the export format is little-endian");

std::string dtype_name(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kBFloat16: return "bfloat16";
    case at::kHalf: return "float16";
    case at::kLong: return "int64";
    case at::kBool: return "bool";
    default: break;
  }
  TORCH_CHECK(false, "no export name for dtype ", type);
}

class ExportWriter {
 public:
  explicit ExportWriter(fs::path root) : root_(std::move(root)) {}

  // Writes `tensor` (any device, any layout) to `relative` and returns its index entry.
  Json tensor(const std::string& relative, const at::Tensor& tensor) const {
    const at::Tensor host = tensor.detach().to(at::kCPU).contiguous();
    const fs::path path = root_ / relative;
    std::error_code error;
    fs::create_directories(path.parent_path(), error);
    errno = 0;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(static_cast<const char*>(host.data_ptr()), static_cast<std::streamsize>(host.nbytes()));
    out.close();  // a full disk shows at the flush
    if (!out) fail(path, errno);
    return Json{{"file", relative}, {"dtype", dtype_name(host.scalar_type())}, {"shape", host.sizes().vec()}};
  }

  void text(const std::string& relative, const std::string& content) const {
    const fs::path path = root_ / relative;
    std::error_code error;
    fs::create_directories(path.parent_path(), error);
    errno = 0;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
    out.close();
    if (!out) fail(path, errno);
  }

 private:
  // `error`: errno after the failed write or flush (0: not known), named in the sentence (helper-104:
  // a full disk read "give a directory you can write to").
  [[noreturn]] static void fail(const fs::path& path, int error) {
    throw UserError("cannot write " + text::quoted(path.string()) + " for verify --export" +
                    (error != 0 ? " (" + std::string(std::strerror(error)) + ")" : std::string()) +
                    "; give a directory you can write to, with room for the export");
  }
  fs::path root_;
};

// The rope scaling as the reference reads it (bench/reference/models.py, Rotary); null for plain RoPE.
Json rope_scaling_json(const RopeScaling& r) {
  if (r.type == RopeType::kDefault) return nullptr;
  return Json{{"rope_type", to_string(r.type)},
              {"factor", r.factor},
              {"original_max_position_embeddings", r.original_max_positions},
              {"low_freq_factor", r.low_freq_factor},
              {"high_freq_factor", r.high_freq_factor},
              {"beta_fast", r.beta_fast},
              {"beta_slow", r.beta_slow},
              {"attention_factor", r.attention_factor},
              {"truncate", r.truncate}};
}

Json model_json(const ModelConfig& m) {
  return Json{{"rope_scaling", rope_scaling_json(m.rope_scaling)},{"name", m.name},           {"arch", to_string(m.arch)},   {"vocab_size", m.vocab_size},
              {"d_model", m.d_model},     {"n_layers", m.n_layers},      {"n_heads", m.n_heads},
              {"n_kv_heads", m.n_kv_heads}, {"head_dim", m.head_dim},    {"d_ff", m.d_ff},
              {"max_seq_len", m.max_seq_len}, {"rope_theta", m.rope_theta}, {"norm_eps", m.norm_eps},
              {"tied_embeddings", m.tied_embeddings}, {"qkv_bias", m.qkv_bias}, {"o_bias", m.o_bias}, {"mlp_bias", m.mlp_bias}, {"qk_norm", m.qk_norm},
              {"activation", to_string(m.activation)}};
}

// `linears`: the block linears with adapters, by accumbench's names (q, gate; c_attn, mlp_c_proj),
// so that a reader without the weights (step_bench.py, hf_real_step.py) adapts the same ones.
Json lora_json(const ModelConfig& m, const WorkloadOptions& w) {
  if (!w.lora.enabled()) return nullptr;
  std::vector<std::string> linears;
  for (const BlockLinear& l : lora_targets(m, w.lora.targets)) linears.push_back(l.name);
  return Json{{"rank", w.lora.rank},
              {"scaling", lora_scaling(w.lora)},
              {"dropout", w.lora.dropout},
              {"targets", w.lora.targets},
              {"linears", linears},
              {"adapter_dtype", to_string(w.lora.adapter_dtype)},
              {"b_init", "normal(0, 0.02), as verify draws it"}};
}

// inputs/targets as the engine sees them, plus what a Hugging Face model would be given: the
// attention mask (1 on a sequence's real positions; padding sits at the end of each row).
Json batch_json(const ExportWriter& writer, const TokenBatch& batch) {
  const int64_t rows = batch.inputs.size(0), seq = batch.inputs.size(1);
  at::Tensor lengths = torch::tensor(batch.sequence_tokens, torch::kLong).view({rows, 1});  // (B, 1)
  at::Tensor mask = torch::arange(seq, torch::kLong).view({1, seq}).lt(lengths).to(torch::kLong);  // (B, T)
  Json out{{"sequences", rows},
           {"seq_len", seq},
           {"sequence_tokens", batch.sequence_tokens},
           {"sequence_targets", batch.sequence_targets},
           {"target_tokens", batch.token_count},
           {"ignore_index", kIgnoreIndex},
           {"inputs", writer.tensor("batch/inputs.bin", batch.inputs)},
           {"targets", writer.tensor("batch/targets.bin", batch.targets)},
           {"attention_mask", writer.tensor("batch/attention_mask.bin", mask)}};
  if (!batch.sample_rows.empty()) out["sample_rows"] = batch.sample_rows;
  return out;
}

// A lengths file's rows: how their labels were read and, in rows_file, each batch row's line of
// the file as it was read (a pipe or a file edited later could not be read again), so that a
// reader rebuilds each row's labels from the file's own text (check_export.py); null for other data.
Json labels_json(const ExportWriter& writer, const WorkloadOptions& w, const TokenBatch& batch) {
  if (w.data.lengths != LengthMode::kFile) return nullptr;
  const SampleLengths file = read_lengths_file(w.data.lengths_file, w.seq_len, w.data.completion_only_loss);
  Json out{{"lengths_file", w.data.lengths_file},
           {"completion_only_loss", w.data.completion_only_loss},
           {"masked_by", file.masked_by},
           {"rows_file", nullptr}};
  if (!batch.sample_rows.empty()) {
    const std::vector<std::string> lines = lengths_file_lines(w.data.lengths_file);
    std::string rows;
    for (const int64_t row : batch.sample_rows) rows += lines.at(static_cast<size_t>(row)) + "\n";
    writer.text("batch/sample_rows.jsonl", rows);
    out["rows_file"] = "batch/sample_rows.jsonl";
  }
  return out;
}

}  // namespace

void create_export_directory(const std::string& dir) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error || !fs::is_directory(dir)) {
    const std::string why = error ? error.message() : "not a directory";
    throw UserError("verify --export cannot create the directory " + text::quoted(dir) + " (" + why +
                    "); give a path you can write to");
  }
}

void write_reference_step(const std::string& dir, const ReferenceStep& step) {
  create_export_directory(dir);
  // An earlier export's index goes first: files rewritten under it would read as that export, and a
  // write that fails half-way would leave a complete-looking index over other weights (helper-104).
  std::error_code removed;
  fs::remove(fs::path(dir) / "index.json", removed);
  if (removed) {
    throw UserError("verify --export cannot replace the earlier export in " + text::quoted(dir) + " (" +
                    removed.message() + "); give a directory you can write to");
  }
  const ExportWriter writer{fs::path(dir)};
  Json parameters = Json::array();
  for (size_t i = 0; i < step.weights.size(); ++i) {
    const auto& [name, weight] = step.weights[i];
    Json entry{{"name", name}, {"trainable", step.gradients[i].defined()}};
    entry["weight"] = writer.tensor("weights/" + name + ".bin", weight);
    // The gradient in the parameter's own dtype (the snapshot holds an exact fp64 copy).
    entry["grad"] = step.gradients[i].defined()
                        ? writer.tensor("grads/" + name + ".bin", step.gradients[i].to(weight.scalar_type()))
                        : Json(nullptr);
    // The weight after the optimizer step, and whether its group decays (version 2).
    const bool trains = step.gradients[i].defined() && i < step.updated.size() && step.updated[i].defined();
    entry["updated"] = trains ? writer.tensor("updated/" + name + ".bin", step.updated[i].to(weight.scalar_type()))
                              : Json(nullptr);
    entry["weight_decay"] = trains && i < step.decays.size() ? Json(static_cast<bool>(step.decays[i])) : Json(nullptr);
    parameters.push_back(std::move(entry));
  }
  Json index{{"format", "accumbench-reference-step"},
             {"version", 2},
             {"byte_order", "little"},
             {"model", model_json(step.model)},
             {"lora", lora_json(step.model, step.workload)},
             {"precision", to_string(step.precision)},
             {"weights_dtype", to_string(step.workload.weights_dtype)},
             {"seed", step.workload.model.seed},
             {"loss", Json{{"value", step.loss},
                           {"normalization", "token: summed cross-entropy over the non-ignored targets / target_tokens"}}},
             {"batch", batch_json(writer, step.batch)},
             {"labels", labels_json(writer, step.workload, step.batch)},
             {"parameters", std::move(parameters)},
             {"optimizer", Json{{"kind", to_string(step.workload.optimizer.kind)},
                                {"lr", step.workload.optimizer.lr},
                                {"beta1", step.workload.optimizer.beta1},
                                {"beta2", step.workload.optimizer.beta2},
                                {"eps", step.workload.optimizer.eps},
                                {"weight_decay", step.workload.optimizer.weight_decay}}}};
  // --max-grad-norm: the norm the gradients above had before the optimizer step clipped them
  // (they are exported unclipped, as the reference computes them).
  index["clipping"] = step.workload.optimizer.clips()
                          ? Json{{"max_grad_norm", step.workload.optimizer.max_grad_norm}, {"grad_norm", step.grad_norm}}
                          : Json(nullptr);
  writer.text("index.json", index.dump(1) + "\n");  // last: a complete index means complete files
}

std::string model_index_json(const ModelConfig& model) { return Json{{"model", model_json(model)}}.dump(2) + "\n"; }

void write_model_index(const std::string& dir, const ModelConfig& model, const WorkloadOptions& workload) {
  create_export_directory(dir);
  const fs::path path = fs::path(dir) / "index.json";
  std::ofstream out(path);
  Json index{{"model", model_json(model)}};
  if (workload.lora.enabled()) {
    index["lora"] = lora_json(model, workload);
    index["lora"].erase("b_init");  // no weights: the reader draws its own (PEFT's B = 0)
  }
  index["weights_dtype"] = to_string(workload.weights_dtype);
  out << index.dump(2) << "\n";
  if (!out) throw UserError("cannot write " + text::quoted(path.string()) + "; give a directory you can write to");
}

}  // namespace accumbench
