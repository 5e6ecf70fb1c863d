// Older result files read as the current version (json_upgrade.hpp).
#include "report/json_upgrade.hpp"

#include <exception>
#include <string>

#include "accumbench/result.hpp"
#include "accumbench/units.hpp"

namespace accumbench {

namespace {

using Json = nlohmann::ordered_json;

// ordered_json keeps an object's members in a vector: adding one may move the others, so a value
// copied from a member into a new one is copied first (`Json(a["x"])`), never read through a
// reference while the new member is inserted.

// Version 2 (before the chunked loss) lacks only chunked_loss in each run's split, which was
// then always off: a v2 file reads as v3, so --resume, report and compare keep working on it.
void upgrade_from_version_2(Json& root) {
  root["json_schema_version"] = 3;
  if (root.contains("context") && root["context"].is_object()) root["context"]["json_schema_version"] = 3;
  if (!root.contains("runs") || !root["runs"].is_array()) return;  // decode names the problem
  for (Json& run : root["runs"]) {
    if (!run.is_object() || !run.contains("config") || !run["config"].is_object()) continue;
    if (!run["config"].contains("chunked_loss")) run["config"]["chunked_loss"] = false;
  }
}

// Version 3 (before LoRA) trained every parameter and had no recompute FLOPs: a v3 file reads as
// v4 with trainable = all parameters, hardware TFLOP/s = model TFLOP/s, and transformers' 6N
// figure unknown (null).
void upgrade_from_version_3(Json& root) {
  root["json_schema_version"] = 4;
  if (root.contains("context") && root["context"].is_object()) {
    Json& context = root["context"];
    context["json_schema_version"] = 4;
    if (!context.contains("trainable_parameters") && context.contains("parameters")) {
      context["trainable_parameters"] = Json(context["parameters"]);
    }
    if (!context.contains("transformers_flops_per_token")) context["transformers_flops_per_token"] = nullptr;
  }
  if (!root.contains("runs") || !root["runs"].is_array()) return;
  for (Json& run : root["runs"]) {
    if (run.is_object() && !run.contains("hardware_tflops") && run.contains("achieved_tflops")) {
      run["hardware_tflops"] = Json(run["achieved_tflops"]);
    }
  }
}

// Version 4 (before real data) padded every sample to T and had no padding counts: a v4 file
// reads as v5 with the padding it computed unknown (0: the counts were not kept) and computed
// tokens per second equal to the real ones, as in a run without padding.
void upgrade_from_version_4(Json& root) {
  root["json_schema_version"] = 5;
  if (root.contains("context") && root["context"].is_object()) root["context"]["json_schema_version"] = 5;
  if (!root.contains("runs") || !root["runs"].is_array()) return;
  for (Json& run : root["runs"]) {
    if (!run.is_object()) continue;
    if (!run.contains("padding_fraction")) run["padding_fraction"] = 0.0;
    if (!run.contains("computed_tokens_per_second") && run.contains("tokens_per_second")) {
      run["computed_tokens_per_second"] = Json(run["tokens_per_second"]);
    }
    if (!run.contains("steps") || !run["steps"].is_array()) continue;
    for (Json& step : run["steps"]) {
      if (!step.is_object()) continue;
      if (!step.contains("positions") && step.contains("tokens")) step["positions"] = Json(step["tokens"]);
      if (!step.contains("computed_positions") && step.contains("tokens")) step["computed_positions"] = Json(step["tokens"]);
    }
  }
}

// Version 5 (before decisions) timed each split alone: its steps read as unpaired (round −1), its
// mean step time as the plain mean it recorded, with no interval, and the recommendation as it was written
// (decision "none": the file does not say how it was decided).
void upgrade_from_version_5(Json& root) {
  root["json_schema_version"] = 6;
  if (root.contains("context") && root["context"].is_object()) root["context"]["json_schema_version"] = 6;
  if (!root.contains("time_models")) root["time_models"] = Json::array();
  if (root.contains("recommendation") && root["recommendation"].is_object() &&
      !root["recommendation"].contains("decision")) {
    root["recommendation"]["decision"] = {{"kind", "none"},     {"confidence", 0.95}, {"tie_tolerance", 0.02},
                                          {"fastest", -1},      {"runner_up", -1},    {"comparisons", Json::array()},
                                          {"rounds", 0},        {"budget_spent", false}};
  }
  if (!root.contains("runs") || !root["runs"].is_array()) return;
  for (Json& run : root["runs"]) {
    if (!run.is_object()) continue;
    if (!run.contains("clip_seconds")) run["clip_seconds"] = nullptr;
    if (!run.contains("session")) run["session"] = 0;
    if (!run.contains("mean_seconds")) {
      const bool has_mean = run.contains("step_seconds") && run["step_seconds"].is_object() &&
                            run["step_seconds"].contains("mean");
      run["mean_seconds"] = {{"value", has_mean ? run["step_seconds"]["mean"] : Json(nullptr)},
                             {"low", nullptr},
                             {"high", nullptr}};
    }
    if (!run.contains("steps") || !run["steps"].is_array()) continue;
    for (Json& step : run["steps"]) {
      if (step.is_object() && !step.contains("round")) step["round"] = -1;
    }
  }
}

// Version 6 decided on the engine's times alone.
void upgrade_from_version_6(Json& root) {
  root["json_schema_version"] = 7;
  if (!root.contains("context") || !root["context"].is_object()) return;
  Json& context = root["context"];
  context["json_schema_version"] = 7;
  if (!context.contains("framework_seconds_per_micro_step")) context["framework_seconds_per_micro_step"] = 0.0;
  if (!context.contains("framework_source")) context["framework_source"] = "";
}

// Version 7 had no interruption: its sweeps ran to their end, or were killed and saved nothing
// about it.
void upgrade_from_version_7(Json& root) {
  root["json_schema_version"] = 8;
  if (root.contains("context") && root["context"].is_object()) root["context"]["json_schema_version"] = 8;
  if (!root.contains("interruption")) root["interruption"] = {{"signal", ""}, {"splits_not_run", Json::array()}};
  if (root.contains("recommendation") && root["recommendation"].is_object() &&
      root["recommendation"].contains("decision") && root["recommendation"]["decision"].is_object() &&
      !root["recommendation"]["decision"].contains("interrupted")) {
    root["recommendation"]["decision"]["interrupted"] = false;
  }
}

// Version 8 marked no save as unfinished: a file left by a killed sweep read as a whole one. Such a
// file cannot be told apart now; an older file reads as its content says, a sweep that ended.
void upgrade_from_version_8(Json& root) {
  root["json_schema_version"] = 9;
  if (root.contains("context") && root["context"].is_object()) root["context"]["json_schema_version"] = 9;
  if (root.contains("interruption") && root["interruption"].is_object()) {
    Json& interruption = root["interruption"];
    if (!interruption.contains("saved_while_running")) interruption["saved_while_running"] = false;
    if (!interruption.contains("error")) interruption["error"] = "";
  }
}

// A sweep option that became a split field: the file moves to `version` + 1, and each run's split
// reads the value the context's options name (`fallback` in files from before the option).
void option_into_every_split(Json& root, int64_t version, const char* option_name, const std::string& fallback) {
  root["json_schema_version"] = version + 1;
  std::string value = fallback;
  if (root.contains("context") && root["context"].is_object()) {
    Json& context = root["context"];
    context["json_schema_version"] = version + 1;
    if (context.contains("options") && context["options"].is_array()) {
      for (const Json& option : context["options"]) {
        if (option.is_array() && option.size() == 2 && option[0] == option_name && option[1].is_string())
          value = option[1].get<std::string>();
      }
    }
  }
  if (!root.contains("runs") || !root["runs"].is_array()) return;
  for (Json& run : root["runs"]) {
    if (!run.is_object() || !run.contains("config") || !run["config"].is_object()) continue;
    if (!run["config"].contains(option_name)) run["config"][option_name] = value;
  }
}

// Version 11 counted a data-parallel step's positions on rank 0 alone (its reports multiplied them by
// the world size): each step reads as every rank's, rank 0's times the world size, so that its
// computed/s and padding fraction read as they were reported.
void upgrade_from_version_11(Json& root) {
  root["json_schema_version"] = 12;
  if (root.contains("context") && root["context"].is_object()) root["context"]["json_schema_version"] = 12;
  if (!root.contains("runs") || !root["runs"].is_array()) return;
  for (Json& run : root["runs"]) {
    if (!run.is_object() || !run.contains("config") || !run["config"].is_object()) continue;
    const Json& world = run["config"]["world_size"];
    const int64_t ranks = world.is_number_integer() ? world.get<int64_t>() : 1;
    if (ranks <= 1 || !run.contains("steps") || !run["steps"].is_array()) continue;
    for (Json& step : run["steps"]) {
      if (!step.is_object()) continue;
      for (const char* key : {"positions", "computed_positions"}) {
        if (step.contains(key) && step[key].is_number_integer()) step[key] = step[key].get<int64_t>() * ranks;
      }
    }
  }
}

// Version 12 clipped every split at one norm, named in the context's options only when above 0
// (a string, format_number's exact digits): every run's split reads it as a number.
void upgrade_from_version_12(Json& root) {
  root["json_schema_version"] = 13;
  double norm = 0;
  if (root.contains("context") && root["context"].is_object()) {
    Json& context = root["context"];
    context["json_schema_version"] = 13;
    if (context.contains("options") && context["options"].is_array()) {
      for (const Json& option : context["options"]) {
        if (!option.is_array() || option.size() != 2 || option[0] != "max_grad_norm" || !option[1].is_string()) continue;
        try {
          norm = text::number_from_text(option[1].get<std::string>());
        } catch (const std::exception&) {
          norm = 0;  // not a number: validation of the options names it
        }
      }
    }
  }
  if (!root.contains("runs") || !root["runs"].is_array()) return;
  for (Json& run : root["runs"]) {
    if (!run.is_object() || !run.contains("config") || !run["config"].is_object()) continue;
    if (!run["config"].contains("max_grad_norm")) run["config"]["max_grad_norm"] = norm;
  }
}

}  // namespace

void upgrade_to_current_version(Json& root) {
  // The version is read again before each step: a step that adds a top-level key (time_models,
  // interruption) moves ordered_json's members, and a reference held across it would dangle (a
  // version-5 file read as version "51.27" and was refused).
  const auto version_is = [&root](int64_t version) {
    const Json& v = root["json_schema_version"];
    return v.is_number_integer() && v.get<int64_t>() == version;
  };
  if (version_is(2)) upgrade_from_version_2(root);
  if (version_is(3)) upgrade_from_version_3(root);
  if (version_is(4)) upgrade_from_version_4(root);
  if (version_is(5)) upgrade_from_version_5(root);
  if (version_is(6)) upgrade_from_version_6(root);
  if (version_is(7)) upgrade_from_version_7(root);
  if (version_is(8)) upgrade_from_version_8(root);
  // Version 9 swept one optimizer, version 10 one weights and one adapter dtype, each named in
  // the context's options: every run's split reads with it, so that --resume, report and compare key it as today.
  if (version_is(9)) option_into_every_split(root, 9, "optimizer", "adamw");
  if (version_is(10)) {
    option_into_every_split(root, 10, "weights_dtype", "fp32");
    option_into_every_split(root, 10, "adapter_dtype", "fp32");  // recorded only when bf16
  }
  if (version_is(11)) upgrade_from_version_11(root);
  if (version_is(12)) upgrade_from_version_12(root);
  // Version 13 padded every split one way, named in the context's options ("max" before --padding
  // existed, where a file lacks it).
  if (version_is(13)) option_into_every_split(root, 13, "padding", "max");
  // Version 14 printed its notes on stderr only: none were kept.
  if (version_is(14)) {
    root["json_schema_version"] = 15;
    if (root.contains("context") && root["context"].is_object()) root["context"]["json_schema_version"] = 15;
    if (!root.contains("notes")) root["notes"] = Json::array();
  }
  // Version 15 packed every split one way, named in the context's options.
  if (version_is(15)) option_into_every_split(root, 15, "packing", "none");
  // Version 16 grouped every split one way, the context's group_by_length ("true" or "false"; the
  // split's field is a boolean).
  if (version_is(16)) {
    option_into_every_split(root, 16, "group_by_length", "false");
    if (root.contains("runs") && root["runs"].is_array()) {
      for (Json& run : root["runs"]) {
        if (!run.is_object() || !run.contains("config") || !run["config"].is_object()) continue;
        Json& grouped = run["config"]["group_by_length"];
        if (grouped.is_string()) grouped = grouped.get<std::string>() == "true";
      }
    }
  }
  // Version 17 did not record which distinct batch a step trained on: its rounds are not stratified.
  if (version_is(17)) {
    root["json_schema_version"] = 18;
    if (root.contains("context") && root["context"].is_object()) root["context"]["json_schema_version"] = 18;
    if (root.contains("runs") && root["runs"].is_array()) {
      for (Json& run : root["runs"]) {
        if (!run.is_object() || !run.contains("steps") || !run["steps"].is_array()) continue;
        for (Json& step : run["steps"]) {
          if (!step.is_object()) continue;
          if (!step.contains("data_step")) step["data_step"] = -1;
          if (!step.contains("data_steps")) step["data_steps"] = 0;
        }
      }
    }
  }
  // Version 18 rounded tokens_per_step to a whole number (an integer reads as the mean it stood
  // for), wrote a split never timed with zeros where 19 writes null, and fits: true without a
  // limit (read back below); its runs' steps were all of the run's own session.
  if (version_is(18)) {
    root["json_schema_version"] = 19;  // the context's load reads as not recorded (read_unmeasured_back)
    if (root.contains("context") && root["context"].is_object()) root["context"]["json_schema_version"] = 19;
    if (root.contains("runs") && root["runs"].is_array()) {
      for (Json& run : root["runs"]) {
        if (!run.is_object() || !run.contains("steps") || !run["steps"].is_array()) continue;
        const Json session = run.contains("session") ? Json(run["session"]) : Json(0);
        for (Json& step : run["steps"]) {
          if (step.is_object() && !step.contains("session")) step["session"] = session;
        }
      }
    }
  }
  // Version 19 did not read the CPU time other processes took: not read (0 over 0).
  if (version_is(19)) {
    root["json_schema_version"] = 20;
    if (root.contains("context") && root["context"].is_object()) {
      Json& context = root["context"];
      context["json_schema_version"] = 20;
      if (!context.contains("other_cpu_seconds")) context["other_cpu_seconds"] = 0.0;
      if (!context.contains("other_cpu_span_seconds")) context["other_cpu_span_seconds"] = 0.0;
    }
  }
}

void read_unmeasured_back(Json& root) {
  // Schema 19 grew while it was written (files of the builds between): what the first of them
  // lacked reads as not recorded.
  if (root.contains("context") && root["context"].is_object()) {
    Json& context = root["context"];
    if (!context.contains("load_average")) context["load_average"] = 0.0;
    if (!context.contains("cpu_cores")) context["cpu_cores"] = 0;
  }
  if (!root.contains("runs") || !root["runs"].is_array()) return;
  for (Json& run : root["runs"]) {
    if (!run.is_object()) continue;
    if (run.contains("steps") && run["steps"].is_array()) {
      for (Json& step : run["steps"]) {
        if (step.is_object() && !step.contains("session")) step["session"] = 0;  // its run's
      }
    }
    if (run.contains("fits") && run["fits"].is_null()) run["fits"] = true;
    const bool ok = run.contains("status") && run["status"] == "ok";
    const bool timed = run.contains("steps") && run["steps"].is_array() && !run["steps"].empty();
    const bool summarized = run.contains("step_seconds") && run["step_seconds"].is_object() &&
                            run["step_seconds"].contains("count") && run["step_seconds"]["count"].is_number() &&
                            run["step_seconds"]["count"].get<double>() > 0;
    if (ok && (timed || summarized)) continue;
    // A split that ran but was never timed (a sweep stopped in its warm-up) reads its rates and
    // phases back as not measured (null: NaN), as finalize_run leaves them: the tables show "-", not
    // "0 tokens/s" (helper-106); its counts per step are 0. A failed split's measured columns show
    // "-" by its status.
    for (const char* key : kUnmeasuredRates) {
      const bool count = std::string(key) == "tokens_per_step" || std::string(key) == "padding_fraction";
      if (run.contains(key) && run[key].is_null() && (!ok || count)) run[key] = 0.0;
    }
    for (const char* key : kUnmeasuredPeaks) {
      if (run.contains(key) && run[key].is_null()) run[key] = 0;
    }
    for (const char* key : kUnmeasuredPhases) {
      if (ok || !run.contains(key) || !run[key].is_object()) continue;
      for (auto& [phase, seconds] : run[key].items()) {
        (void)phase;
        if (seconds.is_null()) seconds = 0.0;
      }
    }
  }
}

}  // namespace accumbench
