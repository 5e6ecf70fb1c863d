#include "sweep/framework_overhead.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "accumbench/error.hpp"
#include "accumbench/sweep.hpp"
#include "accumbench/units.hpp"

namespace accumbench {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

// A Python loop's host time per micro-step is milliseconds; a minute is far beyond any.
constexpr double kMaxFrameworkSeconds = 60.0;

// The entry's fields in the order the cache writes them (seq_len, a whole number read with its
// fallback to the shape, last): one table for reading, checking and writing. A field without a
// fallback is one calibrate-framework always wrote; the others read their fallback when missing
// (entries written before LoRA could be calibrated are "full fine-tuning", before the model or the
// weights' dtype were recorded "" and "fp32").
struct EntryField {
  const char* key;
  std::string FrameworkCacheEntry::*text = nullptr;  // a string field, or
  double FrameworkCacheEntry::*number = nullptr;     // a number field
  std::optional<std::string> text_fallback;          // none, with number_fallback none: required
  std::optional<double> number_fallback;
};

const std::vector<EntryField>& entry_fields() {
  using E = FrameworkCacheEntry;
  static const std::vector<EntryField> fields = {
      {"device_name", &E::device_name, nullptr, std::nullopt, std::nullopt},
      {"precision", &E::precision, nullptr, std::nullopt, std::nullopt},
      {"framework", &E::framework, nullptr, std::nullopt, std::nullopt},
      {"model", &E::model, nullptr, "", std::nullopt},
      {"weights_dtype", &E::weights_dtype, nullptr, "fp32", std::nullopt},
      {"job", &E::job, nullptr, "full fine-tuning", std::nullopt},
      {"seconds_per_micro_step", nullptr, &E::seconds_per_micro_step, std::nullopt, std::nullopt},
      {"engine_seconds_per_micro_step", nullptr, &E::engine_seconds_per_micro_step, std::nullopt, 0.0},
      {"reference_seconds_per_micro_step", nullptr, &E::reference_seconds_per_micro_step, std::nullopt, 0.0},
      {"date", &E::date, nullptr, "", std::nullopt},
      {"torch", &E::torch, nullptr, "", std::nullopt},
      {"shape", &E::shape, nullptr, "", std::nullopt},
      {"conditions", &E::conditions, nullptr, "", std::nullopt},
  };
  return fields;
}

// Every field is of the type calibrate-framework writes and the ones it always writes are there: an
// entry of another kind is said by its field's name, not in nlohmann's words.
FrameworkCacheEntry entry_from(const Json& j) {
  if (!j.is_object()) throw std::invalid_argument("an entry is " + std::string(j.type_name()) + ", not an object");
  FrameworkCacheEntry e;
  for (const EntryField& field : entry_fields()) {
    const std::string key = field.key;
    if (!j.contains(key)) {
      if (field.text != nullptr && field.text_fallback) {
        e.*field.text = *field.text_fallback;
      } else if (field.number != nullptr && field.number_fallback) {
        e.*field.number = *field.number_fallback;
      } else {
        throw std::invalid_argument("an entry has no \"" + key + "\"");
      }
      continue;
    }
    const Json& value = j.at(key);
    const bool text = field.text != nullptr;
    if (text ? !value.is_string() : !value.is_number()) {
      throw std::invalid_argument("an entry's \"" + key + "\" is " + text::shortened(value.dump(), 40) + ", not a " +
                                  (text ? "string" : "number"));
    }
    if (text) {
      e.*field.text = value.get<std::string>();
    } else {
      e.*field.number = value.get<double>();
    }
  }
  // Entries written before T was a field name it in their shape ("gpt2-124m, T=256, ..."); a
  // shape without one is an unknown T (0).
  if (j.contains("seq_len") && !j.at("seq_len").is_null()) {
    const Json& t = j.at("seq_len");
    // is_number_integer holds for unsigned values too; one past int64 would wrap to negative.
    const bool whole = t.is_number_integer() && !(t.is_number_unsigned() && t.get<uint64_t>() > INT64_MAX);
    if (!whole || t.get<int64_t>() < 0) throw std::invalid_argument("seq_len " + t.dump() + " is not a whole number of tokens");
    e.seq_len = t.get<int64_t>();
  } else if (const size_t at = e.shape.find(", T="); at != std::string::npos) {
    e.seq_len = std::max<int64_t>(0, std::atoll(e.shape.c_str() + at + 4));
  }
  // calibrate-framework writes a difference of two fits, below zero when it is noise; beyond a
  // minute either way it is no host time per micro-step, and would decide every split alone.
  if (!(std::abs(e.seconds_per_micro_step) <= kMaxFrameworkSeconds)) {
    throw std::invalid_argument("seconds_per_micro_step " + text::format_exact(e.seconds_per_micro_step) +
                                " is outside -60 to 60 s");
  }
  return e;
}

Json json_of(const FrameworkCacheEntry& e) {
  Json j = Json::object();
  for (const EntryField& field : entry_fields()) {
    if (field.text != nullptr) {
      j[field.key] = e.*field.text;
    } else {
      j[field.key] = e.*field.number;
    }
  }
  j["seq_len"] = e.seq_len;
  return j;
}

}  // namespace

std::string framework_cache_path() { return (fs::path(cache_directory()) / "framework-overhead.json").string(); }

std::vector<FrameworkCacheEntry> read_framework_cache(const std::string& path) {
  const auto not_the_cache = [&](const std::string& why) {
    return UserError("the framework-overhead cache " + text::quoted(path) + " is not what calibrate-framework writes (" +
                     text::shortened(why, 200) + "); delete it and run accumbench calibrate-framework again");
  };
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw not_the_cache("it is a directory");
  std::ifstream in(path);
  if (!in) return {};
  std::vector<FrameworkCacheEntry> entries;
  try {
    const Json j = Json::parse(in);
    if (!j.is_object() || !j.contains("entries") || !j.at("entries").is_array()) {
      throw std::invalid_argument("it holds a JSON " + std::string(j.type_name()) +
                                  (j.is_object() ? " without a list of \"entries\"" : ", not an object with \"entries\""));
    }
    for (const Json& e : j.at("entries")) entries.push_back(entry_from(e));
  } catch (const Json::parse_error& error) {
    throw not_the_cache(text::json_error_text(error.what()));  // where the text stops being JSON
  } catch (const std::exception& error) {
    throw not_the_cache(error.what());
  }
  return entries;
}

void write_framework_cache(const std::string& path, const std::vector<FrameworkCacheEntry>& entries) {
  std::vector<FrameworkCacheEntry> all = read_framework_cache(path);
  for (const FrameworkCacheEntry& e : entries) {
    all.erase(std::remove_if(all.begin(), all.end(),
                             [&](const FrameworkCacheEntry& old) {
                               return old.device_name == e.device_name && old.precision == e.precision &&
                                      old.model == e.model && old.weights_dtype == e.weights_dtype &&
                                      old.framework == e.framework && old.job == e.job && old.seq_len == e.seq_len &&
                                      old.conditions == e.conditions;
                             }),
              all.end());
    all.push_back(e);
  }
  Json list = Json::array();
  for (const FrameworkCacheEntry& e : all) list.push_back(json_of(e));
  std::error_code ec;
  if (fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path(), ec);
  // Written beside it, then renamed over it: a write stopped halfway (a signal, a full disk) leaves
  // the old file whole, whose damage every sweep with auto, the default, would stop on.
  const std::string partial = path + ".partial-" + std::to_string(::getpid());
  {
    std::ofstream out(partial);
    out << Json{{"entries", list}}.dump(2) << "\n";
    out.close();
    if (!out || (fs::rename(partial, path, ec), ec)) {
      fs::remove(partial, ec);
      throw UserError("cannot write the framework-overhead cache " + text::quoted(path) +
                      "; set ACCUMBENCH_CACHE_DIR to a folder you can write to");
    }
  }
}

std::string framework_job(const WorkloadOptions& workload, const ModelConfig& cfg) {
  std::string job = "full fine-tuning";
  if (workload.lora.enabled()) {
    const std::vector<BlockLinear> targets = lora_targets(cfg, workload.lora.targets);
    std::string names;
    for (const BlockLinear& l : targets) names += (names.empty() ? "" : ",") + l.name;
    job = "LoRA on " + (targets.size() == block_linears(cfg).size() ? std::string("all-linear") : names);
  }
  return job + (workload.grid.checkpointing == Checkpointing::kBlocks ? ", checkpointed" : "");
}

std::string framework_conditions(const WorkloadOptions& workload) {
  const int threads = workload.threads > 0 ? workload.threads : default_threads();
  std::string words = std::to_string(threads) + (threads == 1 ? " thread" : " threads");
  if (workload.lora.enabled() && workload.lora.dropout > 0) words += ", LoRA dropout " + text::format_number(workload.lora.dropout);
  if (workload.trl_loss == "nll") words += ", TRL loss nll";
  return words;
}

std::string framework_model(const ModelConfig& cfg) {
  return to_string(cfg.arch) + ", " + std::to_string(cfg.n_layers) + " layers, d_model " + std::to_string(cfg.d_model) +
         ", " + std::to_string(cfg.n_heads) + " heads (" + std::to_string(cfg.n_kv_heads) + " kv), d_ff " +
         std::to_string(cfg.d_ff) + ", vocab " + std::to_string(cfg.vocab_size) +
         (cfg.head_dim > 0 && cfg.head_dim * cfg.n_heads != cfg.d_model ? ", head_dim " + std::to_string(cfg.head_dim) : "") +
         (cfg.tied_embeddings ? "" : ", untied head") + (cfg.qkv_bias ? ", q/k/v bias" : "") +
         (cfg.o_bias ? ", o bias" : "") + (cfg.mlp_bias ? ", MLP bias" : "") +
         (cfg.qk_norm ? ", q/k norm" : "") +
         (cfg.sliding_window > 0 ? ", window " + std::to_string(cfg.sliding_window) : "");
}

namespace {

// "gpt2, 2 layers, ... with bf16 weights", or what an entry from before models were recorded is.
std::string model_words(const std::string& model, const std::string& weights_dtype) {
  return (model.empty() ? std::string("a model not recorded (an older calibration)") : model) +
         (weights_dtype == "fp32" ? "" : " with " + weights_dtype + " weights");
}

}  // namespace

FrameworkOverhead resolve_framework_overhead(const std::string& spec, const std::string& device_name,
                                             const FrameworkKey& key) {
  FrameworkOverhead o;
  if (spec != "auto") {
    double ms = std::nan("");
    // Decimal only: strtod also reads hexadecimal ("0x10" as 16). strtod, not stod: a value below
    // the smallest normal double (5e-324) is still a value, which stod throws on.
    const bool decimal = !spec.empty() && spec.find_first_not_of("0123456789.eE+-") == std::string::npos;
    if (decimal) {
      char* end = nullptr;
      const double parsed = std::strtod(spec.c_str(), &end) + 0.0;  // + 0.0: "-0" is 0
      if (end == spec.c_str() + spec.size()) ms = parsed;
    }
    if (!(ms >= 0 && ms <= kMaxFrameworkSeconds * 1000.0)) {
      throw UserError("--framework-overhead takes milliseconds per micro-step from 0 to 60000 (e.g. 12.5) or auto, not " +
                      text::quoted(spec));
    }
    // Below a nanosecond no clock tells it from none (1e-300 printed as "1e-303 s of host time").
    o.seconds_per_micro_step = ms < 1e-6 ? 0.0 : ms / 1000.0;
    o.source = "--framework-overhead";
    o.added = true;
    return o;
  }
  // auto is the default: a cache that cannot be read leaves the sweep to the engine's time, said, rather
  // than stopping a sweep that never asked for it (helper-104; --framework-overhead auto given or
  // not, calibrate-framework still refuses the file when it would write it).
  std::vector<FrameworkCacheEntry> entries;
  try {
    entries = read_framework_cache(framework_cache_path());
  } catch (const UserError& error) {
    o.source = std::string(error.what()) + "; engine only until then";
    return o;
  }
  const std::string precision = to_string(key.precision);
  const std::string weights = to_string(key.weights_dtype);
  // How close an entry's job is to this one: the same job; LoRA on other linears, checkpointed
  // alike; the same adapters (LoRA or full) with the other checkpointing; the same checkpointing
  // with the other adapters; neither. ("LoRA" alone: an entry from before the linears were keyed.)
  const auto lora = [](const std::string& job) { return job.rfind("LoRA", 0) == 0; };
  const auto checkpointed = [](const std::string& job) { return job.find(", checkpointed") != std::string::npos; };
  const auto distance = [&](const std::string& job) {
    if (job == key.job) return 0;
    if (lora(job) == lora(key.job)) return checkpointed(job) == checkpointed(key.job) ? 1 : 2;
    return checkpointed(job) == checkpointed(key.job) ? 3 : 4;
  };
  // How far an entry's T is from the key's, as a ratio (on a GPU a longer step hides more of the
  // host time); an entry of unknown T last.
  const auto t_distance = [&](const FrameworkCacheEntry& e) {
    if (key.seq_len <= 0) return 0.0;
    if (e.seq_len <= 0) return std::numeric_limits<double>::infinity();
    return std::abs(std::log(static_cast<double>(e.seq_len) / static_cast<double>(key.seq_len)));
  };
  // Of two entries, the one to use: the closer T; at the same distance (T=32 and T=128 for 64),
  // the newer calibration, then the smaller T, whatever the file's order.
  const auto before = [&](const FrameworkCacheEntry& a, const FrameworkCacheEntry& b) {
    // The same conditions (threads, dropout, TRL's loss) before any other.
    const bool ca = a.conditions == key.conditions, cb = b.conditions == key.conditions;
    if (ca != cb) return ca;
    const double da = t_distance(a), db = t_distance(b);
    if (da != db && !(std::abs(da - db) <= 1e-9)) return da < db;  // two unknown Ts (inf) tie too
    if (a.date != b.date) return a.date > b.date;
    return a.seq_len < b.seq_len;
  };
  // The closest job's entries first; within each, the most faithful first: the real transformers
  // step (hf), then the HF+TRL reference, then plain; within those, the closest T.
  for (int closeness = 0; closeness <= 4; ++closeness) {
    for (const char* framework : {"hf", "hf-trl", "plain"}) {
      const FrameworkCacheEntry* best = nullptr;
      for (const FrameworkCacheEntry& e : entries) {
        if (e.device_name != device_name || e.precision != precision || e.model != key.model ||
            e.weights_dtype != weights || e.framework != framework || distance(e.job) != closeness) {
          continue;
        }
        if (best == nullptr || before(e, *best)) best = &e;
      }
      if (best != nullptr) {
        const FrameworkCacheEntry& e = *best;
        o.seconds_per_micro_step = std::max(0.0, e.seconds_per_micro_step);
        o.source = "calibrated " + e.date + ", " + e.framework + ", " +
                   (closeness == 0 ? e.job : "on " + e.job + "; none for " + key.job);
        if (key.seq_len > 0 && e.seq_len != key.seq_len) {
          o.source += "; at " + (e.seq_len > 0 ? "T=" + std::to_string(e.seq_len) : std::string("a T not recorded")) +
                      ", not this T=" + std::to_string(key.seq_len) + ": calibrate-framework with this model and --seq-len " +
                      std::to_string(key.seq_len) + " measures it";
        }
        // (An entry from before the conditions were recorded is taken as it is.)
        if (!key.conditions.empty() && !e.conditions.empty() && e.conditions != key.conditions) {
          o.source += "; with " + e.conditions + ", not this sweep's " + key.conditions +
                      ": calibrate-framework with the same options measures it";
        }
        if (e.seconds_per_micro_step < 0) {
          o.source += "; it measured -" + text::format_duration(-e.seconds_per_micro_step) +
                      " per micro-step, noise, counted as 0";
        }
        o.added = true;
        return o;
      }
    }
  }
  // Another model's host time is not this one's (it grows with the modules a Python loop calls),
  // nor another precision's or weights dtype's: none is added, and the source says what the device
  // has and which calibration would serve.
  std::vector<std::string> precisions, models, weights_of_model;
  const auto add = [](std::vector<std::string>& list, const std::string& words) {
    if (std::find(list.begin(), list.end(), words) == list.end()) list.push_back(words);
  };
  for (const FrameworkCacheEntry& e : entries) {
    if (e.device_name != device_name) continue;
    add(precisions, e.precision);
    if (e.precision != precision) continue;
    add(models, model_words(e.model, e.weights_dtype));
    if (e.model == key.model) add(weights_of_model, e.weights_dtype);
  }
  const auto listed = [](const std::vector<std::string>& list) {
    std::string words = list.front();
    if (list.size() > 1) words += " and " + std::to_string(list.size() - 1) + (list.size() == 2 ? " other" : " others");
    return words;
  };
  if (precisions.empty()) return o;
  if (models.empty()) {
    std::string in;
    for (const std::string& p : precisions) in += (in.empty() ? "" : ", ") + p;
    o.source = "none calibrated in " + precision + "; this device's calibrations are in " + in +
               ": run accumbench calibrate-framework with --precision " + precision;
  } else if (!weights_of_model.empty()) {
    std::string with;
    for (const std::string& w : weights_of_model) with += (with.empty() ? "" : ", ") + w;
    o.source = "none calibrated for " + model_words(key.model, weights) + "; this device's " + precision +
               " calibrations of this model are with " + with + " weights: run accumbench calibrate-framework with " +
               "--weights-dtype " + weights;
  } else {
    o.source = "none calibrated for " + model_words(key.model, weights) + "; this device's " + precision +
               " calibrations are for " + listed(models) + ": run accumbench calibrate-framework with this model";
  }
  return o;
}

FrameworkOverhead sweep_framework_overhead(const std::string& spec, const std::string& device_name,
                                           const WorkloadOptions& workload, const ModelConfig& cfg) {
  std::vector<std::string> jobs = {framework_job(workload, cfg)};
  if (workload.grid.knobs && workload.grid.checkpointing != Checkpointing::kBlocks) jobs.push_back(jobs.front() + ", checkpointed");
  const std::vector<Precision> weights = grid_weights_dtypes(workload);
  const std::string model = framework_model(cfg);
  const FrameworkOverhead first = resolve_framework_overhead(
      spec, device_name,
      {workload.precisions.front(), weights.front(), model, jobs.front(), workload.seq_len, framework_conditions(workload)});
  if (spec != "auto") return first;
  // Each job's time and where it came from, named by what tells the jobs apart.
  std::string each, sources;
  bool differ = false, several = false;
  for (Precision precision : workload.precisions) {
    for (Precision weights_dtype : weights) {
      for (const std::string& job : jobs) {
        const FrameworkOverhead o = resolve_framework_overhead(
            spec, device_name, {precision, weights_dtype, model, job, workload.seq_len, framework_conditions(workload)});
        differ = differ || o.seconds_per_micro_step != first.seconds_per_micro_step || o.added != first.added;
        several = several || o.source != first.source;
        const std::string name = to_string(precision) +
                                 (weights.size() > 1 ? " on " + to_string(weights_dtype) + " weights" : std::string()) +
                                 (jobs.size() > 1 ? " " + job : std::string());
        each += (each.empty() ? "" : ", ") + name + " " +
                (o.added ? text::format_duration(o.seconds_per_micro_step) : std::string("none"));
        sources += (sources.empty() ? "" : "; ") + name + ": " + o.source;
      }
    }
  }
  if (!differ) {
    // One time for every job, but not from one entry (a job that falls back to another's): each
    // job's source, so that no borrowed time goes unsaid.
    if (!several) return first;
    FrameworkOverhead each_source = first;
    each_source.source = sources;
    return each_source;
  }
  FrameworkOverhead none;
  none.source = "the calibrated times differ across this sweep's jobs: " + each +
                "; one time is added to a whole sweep, so none is: sweep them apart, or give --framework-overhead MS";
  return none;
}

std::string framework_sentence(double seconds_per_micro_step, const std::string& source) {
  if (source.empty()) {
    return "Engine only: a Python training loop adds host time per micro-step (not calibrated on this machine).";
  }
  if (!(seconds_per_micro_step > 0)) return "Engine only: no framework host time added (" + source + ").";
  return "Weighed with " + text::format_duration(seconds_per_micro_step) +
         " of framework host time added to every micro-step (" + source +
         "); the step times shown are the engine's.";
}

}  // namespace accumbench
