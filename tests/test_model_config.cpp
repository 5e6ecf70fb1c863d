// Model shapes: preset counts against published counts, the closed form against hand sums,
// validation and Hugging Face config.json import (real files under tests/data/hf).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "accumbench/error.hpp"
#include "accumbench/model_config.hpp"

namespace accumbench {
namespace {

const std::string kHfDir = std::string(ACCUMBENCH_TEST_DATA) + "/hf/";

// The message of the UserError that `f` throws; records a failure when it throws nothing.
template <typename F>
std::string user_error(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a UserError";
  return "";
}

#define EXPECT_CONTAINS(haystack, needle)                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << "\"" << (haystack) << "\" does not contain \"" << (needle) << "\""

// ---------------------------------------------------------------------------------------------
// Presets

struct Published {
  const char* name;
  int64_t parameters;
};

// Published counts (HF num_parameters() of the checkpoints named in model_config.cpp).
TEST(Preset, ParameterCountEqualsPublishedCount) {
  const Published expected[] = {
      {"gpt2-124m", 124'439'808},    {"gpt2-350m", 354'823'168},      {"gpt2-774m", 774'030'080},
      {"gpt2-1.5b", 1'557'611'200},  {"smollm2-135m", 134'515'008},   {"smollm2-360m", 361'821'120},
      {"qwen2.5-0.5b", 494'032'768}, {"llama-3.2-1b", 1'235'814'400},
  };
  for (const Published& p : expected) {
    SCOPED_TRACE(p.name);
    const ModelConfig& cfg = find_preset(p.name);
    EXPECT_EQ(parameter_count(cfg), p.parameters);
    EXPECT_FALSE(cfg.published_parameters.empty());
  }
}

TEST(Preset, SmallPresetsHaveTheChosenShapes) {
  const ModelConfig& gt = find_preset("gpt2-tiny");
  EXPECT_EQ(gt.arch, Architecture::kGpt2);
  EXPECT_EQ(std::vector<int64_t>({gt.vocab_size, gt.d_model, gt.n_layers, gt.n_heads, gt.n_kv_heads,
                                  gt.head_dim, gt.max_seq_len, gt.d_ff}),
            std::vector<int64_t>({512, 64, 2, 4, 4, 16, 256, 256}));
  EXPECT_TRUE(gt.tied_embeddings);

  const ModelConfig& gm = find_preset("gpt2-mini");
  EXPECT_EQ(std::vector<int64_t>({gm.vocab_size, gm.d_model, gm.n_layers, gm.n_heads, gm.n_kv_heads,
                                  gm.head_dim, gm.max_seq_len, gm.d_ff}),
            std::vector<int64_t>({4096, 128, 4, 4, 4, 32, 512, 512}));

  const ModelConfig& lt = find_preset("llama-tiny");
  EXPECT_EQ(lt.arch, Architecture::kLlama);
  EXPECT_EQ(std::vector<int64_t>({lt.vocab_size, lt.d_model, lt.n_layers, lt.n_heads, lt.n_kv_heads,
                                  lt.head_dim, lt.max_seq_len, lt.d_ff}),
            std::vector<int64_t>({512, 64, 2, 4, 2, 16, 256, 176}));
  EXPECT_FALSE(lt.tied_embeddings);
  EXPECT_DOUBLE_EQ(lt.rope_theta, 10000.0);

  const ModelConfig& lm = find_preset("llama-mini");
  EXPECT_EQ(std::vector<int64_t>({lm.vocab_size, lm.d_model, lm.n_layers, lm.n_heads, lm.n_kv_heads,
                                  lm.head_dim, lm.max_seq_len, lm.d_ff}),
            std::vector<int64_t>({4096, 128, 4, 4, 2, 32, 512, 352}));
  EXPECT_TRUE(lm.tied_embeddings);

  for (const ModelConfig* cfg : {&gt, &gm, &lt, &lm})
    EXPECT_TRUE(cfg->published_parameters.empty());
}

TEST(Preset, PublishedHyperparametersMatchConfigJson) {
  const ModelConfig& qwen = find_preset("qwen2.5-0.5b");
  EXPECT_TRUE(qwen.qkv_bias);
  EXPECT_DOUBLE_EQ(qwen.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(qwen.norm_eps, 1e-6);
  EXPECT_EQ(qwen.max_seq_len, 32768);
  const ModelConfig& llama = find_preset("llama-3.2-1b");
  EXPECT_EQ(llama.head_dim, 64);
  EXPECT_DOUBLE_EQ(llama.rope_theta, 500000.0);
  EXPECT_EQ(llama.max_seq_len, 131072);
  const ModelConfig& smol = find_preset("smollm2-135m");
  EXPECT_DOUBLE_EQ(smol.rope_theta, 100000.0);
  EXPECT_EQ(smol.max_seq_len, 8192);
  EXPECT_FALSE(smol.qkv_bias);
}

TEST(Preset, AllValidateAndNamesAreUnique) {
  std::set<std::string> names;
  for (const ModelConfig& cfg : presets()) {
    SCOPED_TRACE(cfg.name);
    EXPECT_NO_THROW(validate(cfg));
    EXPECT_TRUE(names.insert(cfg.name).second);
    EXPECT_EQ(&find_preset(cfg.name), &cfg);
  }
  EXPECT_EQ(names.size(), 12u);
}

TEST(Preset, UnknownNameListsPresets) {
  const std::string msg = user_error([] { find_preset("gpt2-125m"); });
  EXPECT_EQ(msg.rfind("unknown model preset \"gpt2-125m\"; run \"accumbench models\" to list "
                      "presets (gpt2-124m, gpt2-350m, ",
                      0),
            0u)
      << msg;
  for (const ModelConfig& cfg : presets()) EXPECT_CONTAINS(msg, cfg.name);
}

// ---------------------------------------------------------------------------------------------
// Closed form and validation

TEST(ModelConfig, Gpt2TinyCountIsTheSumOfItsTensors) {
  // wte 512·64 + wpe 256·64 + 2 blocks × (ln 2·2·64 + c_attn 64·192+192 + c_proj 64·64+64
  // + c_fc 64·256+256 + mlp c_proj 256·64+64) + ln_f 2·64
  const int64_t block =
      256 + (64 * 192 + 192) + (64 * 64 + 64) + (64 * 256 + 256) + (256 * 64 + 64);
  EXPECT_EQ(parameter_count(find_preset("gpt2-tiny")), 512 * 64 + 256 * 64 + 2 * block + 128);
  EXPECT_EQ(parameter_count(find_preset("gpt2-tiny")), 149'248);
  EXPECT_EQ(parameter_count(find_preset("gpt2-mini")), 1'383'168);
}

TEST(ModelConfig, LlamaTinyCountIncludesUntiedHead) {
  // wte 512·64 + lm_head 512·64 + 2 × (norms 2·64 + q 64·64 + k,v 2·64·32 + o 64·64
  // + gate/up/down 3·64·176) + norm 64
  const int64_t block = 128 + 64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 176;
  EXPECT_EQ(parameter_count(find_preset("llama-tiny")), 2 * 512 * 64 + 2 * block + 64);
  EXPECT_EQ(parameter_count(find_preset("llama-tiny")), 158'016);
  EXPECT_EQ(parameter_count(find_preset("llama-mini")), 1'262'720);

  ModelConfig tied = find_preset("llama-tiny");
  tied.tied_embeddings = true;
  EXPECT_EQ(parameter_count(find_preset("llama-tiny")) - parameter_count(tied), 512 * 64);
}

TEST(ModelConfig, QkvBiasAddsOneBiasPerProjectionOutput) {
  ModelConfig cfg = find_preset("llama-mini");
  const int64_t without = parameter_count(cfg);
  cfg.qkv_bias = true;
  // q: 4·32, k and v: 2·32 each, per layer; o_proj stays bias-free.
  EXPECT_EQ(parameter_count(cfg) - without, 4 * (4 * 32 + 2 * 2 * 32));
}

TEST(ModelConfig, ExplicitHeadDimSizesAttentionNotTheResidual) {
  ModelConfig cfg = find_preset("llama-mini");
  const int64_t base = parameter_count(cfg);
  cfg.head_dim = 48;  // n_heads·head_dim = 192 ≠ d_model 128
  EXPECT_NO_THROW(validate(cfg));
  // q and o grow by 128·(192−128) each, k and v by 128·(96−64) each, per layer.
  EXPECT_EQ(parameter_count(cfg) - base, 4 * (2 * 128 * 64 + 2 * 128 * 32));
}

TEST(ModelConfig, NonEmbeddingCountDropsOnlyPositionEmbeddings) {
  const ModelConfig& gpt2 = find_preset("gpt2-124m");
  EXPECT_EQ(non_embedding_parameter_count(gpt2), 124'439'808 - 1024 * 768);
  const ModelConfig& llama = find_preset("llama-3.2-1b");
  EXPECT_EQ(non_embedding_parameter_count(llama), parameter_count(llama));
}

TEST(ModelConfig, ArchitectureNames) {
  EXPECT_EQ(to_string(Architecture::kGpt2), "gpt2");
  EXPECT_EQ(to_string(Architecture::kLlama), "llama");
}

TEST(ModelConfig, ValidateNamesTheBadField) {
  struct Case {
    const char* preset;
    void (*mutate)(ModelConfig&);
    const char* field;
  };
  const Case cases[] = {
      {"gpt2-tiny", [](ModelConfig& c) { c.vocab_size = 0; }, "vocab_size is 0"},
      {"gpt2-tiny", [](ModelConfig& c) { c.d_model = -64; }, "d_model is -64"},
      {"gpt2-tiny", [](ModelConfig& c) { c.n_layers = 0; }, "n_layers is 0"},
      {"gpt2-tiny", [](ModelConfig& c) { c.d_ff = 0; }, "d_ff is 0"},
      {"gpt2-tiny", [](ModelConfig& c) { c.max_seq_len = 0; }, "max_seq_len is 0"},
      {"gpt2-tiny", [](ModelConfig& c) { c.norm_eps = 0.0; }, "norm_eps is 0"},
      {"gpt2-tiny", [](ModelConfig& c) { c.n_heads = c.n_kv_heads = 5; },
       "n_heads 5 does not divide d_model 64"},
      {"gpt2-tiny", [](ModelConfig& c) { c.head_dim = 32; },
       "head_dim 32 is not d_model / n_heads"},
      {"gpt2-tiny", [](ModelConfig& c) { c.n_kv_heads = 2; },
       "n_kv_heads 2 differs from n_heads 4"},
      {"llama-tiny", [](ModelConfig& c) { c.n_kv_heads = 3; },
       "n_kv_heads 3 does not divide n_heads 4"},
      {"llama-tiny", [](ModelConfig& c) { c.n_kv_heads = 0; }, "n_kv_heads is 0"},
      {"llama-tiny", [](ModelConfig& c) { c.head_dim = 15; }, "head_dim 15 is odd"},
      {"llama-tiny", [](ModelConfig& c) { c.rope_theta = -1.0; }, "rope_theta is -1"},
      {"llama-tiny",
       [](ModelConfig& c) {
         c.vocab_size = int64_t{1} << 40;
         c.d_model = int64_t{1} << 30;
       },
       "64-bit"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.field);
    ModelConfig cfg = find_preset(k.preset);
    k.mutate(cfg);
    const std::string msg = user_error([&] { validate(cfg); });
    EXPECT_CONTAINS(msg, std::string("model \"") + k.preset + "\"");
    EXPECT_CONTAINS(msg, k.field);
  }
}

// ---------------------------------------------------------------------------------------------
// Hugging Face config.json import

void expect_same_shape(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.arch, b.arch);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.d_model, b.d_model);
  EXPECT_EQ(a.n_layers, b.n_layers);
  EXPECT_EQ(a.n_heads, b.n_heads);
  EXPECT_EQ(a.n_kv_heads, b.n_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.d_ff, b.d_ff);
  EXPECT_EQ(a.max_seq_len, b.max_seq_len);
  EXPECT_DOUBLE_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.tied_embeddings, b.tied_embeddings);
  EXPECT_EQ(a.qkv_bias, b.qkv_bias);
  if (a.arch == Architecture::kLlama) EXPECT_DOUBLE_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(parameter_count(a), parameter_count(b));
}

TEST(HfConfig, Gpt2MatchesPreset) {
  const ModelConfig cfg = load_hf_config(kHfDir + "gpt2.json");
  EXPECT_EQ(cfg.name, kHfDir + "gpt2.json");
  expect_same_shape(cfg, find_preset("gpt2-124m"));
  EXPECT_EQ(parameter_count(cfg), 124'439'808);
}

TEST(HfConfig, Qwen2MatchesPresetWithQkvBias) {
  const ModelConfig cfg = load_hf_config(kHfDir + "qwen2.json");
  expect_same_shape(cfg, find_preset("qwen2.5-0.5b"));
  EXPECT_TRUE(cfg.qkv_bias);
  EXPECT_EQ(parameter_count(cfg), 494'032'768);
}

TEST(HfConfig, LlamaMatchesPreset) {
  const ModelConfig cfg = load_hf_config(kHfDir + "llama.json");
  expect_same_shape(cfg, find_preset("llama-3.2-1b"));
  EXPECT_EQ(parameter_count(cfg), 1'235'814'400);
}

TEST(HfConfig, MistralIsUntiedWithoutBias) {
  // mistralai/Mistral-7B-v0.1, "7.24B" on its model card.
  const ModelConfig cfg = load_hf_config(kHfDir + "mistral.json");
  EXPECT_EQ(cfg.arch, Architecture::kLlama);
  EXPECT_FALSE(cfg.tied_embeddings);
  EXPECT_FALSE(cfg.qkv_bias);
  EXPECT_EQ(cfg.n_kv_heads, 8);
  EXPECT_EQ(cfg.head_dim, 128);
  EXPECT_EQ(parameter_count(cfg), 7'241'732'096);
}

TEST(HfConfig, DefaultsFollowTransformers) {
  // gpt2: n_inner absent or null → 4·n_embd, n_ctx when n_positions is absent, tied by default.
  const ModelConfig g =
      parse_hf_config(R"({"model_type":"gpt2","vocab_size":512,"n_embd":64,"n_layer":2,"n_head":4,)"
                      R"("n_ctx":256,"n_inner":null})",
                      "inline");
  EXPECT_EQ(g.name, "inline");
  EXPECT_EQ(g.d_ff, 256);
  EXPECT_EQ(g.max_seq_len, 256);
  EXPECT_TRUE(g.tied_embeddings);
  EXPECT_DOUBLE_EQ(g.norm_eps, 1e-5);
  expect_same_shape(g, find_preset("gpt2-tiny"));

  const ModelConfig g_inner =
      parse_hf_config(R"({"model_type":"gpt2","vocab_size":512,"n_embd":64,"n_layer":2,"n_head":4,)"
                      R"("n_positions":256,"n_inner":100})",
                      "inline");
  EXPECT_EQ(g_inner.d_ff, 100);

  // llama: KV heads default to heads, head_dim to hidden/heads, rope_theta to 10000, untied.
  const ModelConfig l = parse_hf_config(
      R"({"model_type":"llama","vocab_size":512,"hidden_size":64,"intermediate_size":176,)"
      R"("num_hidden_layers":2,"num_attention_heads":4,"max_position_embeddings":256})",
      "inline");
  EXPECT_EQ(l.n_kv_heads, 4);
  EXPECT_EQ(l.head_dim, 16);
  EXPECT_DOUBLE_EQ(l.rope_theta, 10000.0);
  EXPECT_FALSE(l.tied_embeddings);
  EXPECT_FALSE(l.qkv_bias);
}

TEST(HfConfig, ExplicitHeadDimMayDifferFromHiddenOverHeads) {
  // mistralai/Mistral-Nemo-Base-2407: 32 heads × head_dim 128 ≠ hidden 5120; "12.2B" params.
  const ModelConfig cfg = parse_hf_config(
      R"({"model_type":"mistral","vocab_size":131072,"hidden_size":5120,)"
      R"("intermediate_size":14336,"num_hidden_layers":40,"num_attention_heads":32,)"
      R"("num_key_value_heads":8,"head_dim":128,"max_position_embeddings":1024000,)"
      R"("rope_theta":1000000.0,"rms_norm_eps":1e-05,"tie_word_embeddings":false})",
      "nemo");
  EXPECT_EQ(cfg.head_dim, 128);
  EXPECT_EQ(parameter_count(cfg), 12'247'782'400);
}

TEST(HfConfig, BadFixturesNameFileAndProblem) {
  struct Case {
    const char* file;
    std::vector<const char*> expected;
  };
  const Case cases[] = {
      {"bad_syntax.json", {"is not valid JSON", "line 5"}},
      {"bad_model_type.json", {"model_type \"bert\" is not supported", "gpt2, llama, qwen2"}},
      {"bad_missing_field.json", {"\"num_hidden_layers\" is missing"}},
      {"bad_type.json", {"\"hidden_size\" is \"2048\"", "positive integer"}},
      {"bad_heads.json", {"\"num_key_value_heads\" (5) does not divide", "(32)"}},
      {"does_not_exist.json", {"cannot read config", "No such file"}},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.file);
    const std::string path = kHfDir + k.file;
    const std::string msg = user_error([&] { load_hf_config(path); });
    EXPECT_CONTAINS(msg, "\"" + path + "\"");
    for (const char* e : k.expected) EXPECT_CONTAINS(msg, e);
  }
  const std::string dir = user_error([] { load_hf_config(kHfDir); });
  EXPECT_CONTAINS(dir, "is a directory");
}

TEST(HfConfig, BadValuesNameTheField) {
  const std::string llama_head =
      R"({"model_type":"llama","vocab_size":512,"intermediate_size":176,)"
      R"("num_hidden_layers":2,"max_position_embeddings":256,)";
  struct Case {
    std::string json;
    std::vector<const char*> expected;
  };
  const Case cases[] = {
      {"[1, 2]", {"holds a JSON array instead of an object"}},
      {"", {"is not valid JSON"}},
      {R"({"vocab_size":512})", {"\"model_type\" is missing"}},
      {R"({"model_type":7})", {"\"model_type\" is 7 but must be a string"}},
      {llama_head + R"("hidden_size":0,"num_attention_heads":4})", {"\"hidden_size\" is 0"}},
      {llama_head + R"("hidden_size":-64,"num_attention_heads":4})", {"\"hidden_size\" is -64"}},
      {llama_head + R"("hidden_size":64.0,"num_attention_heads":4})", {"\"hidden_size\" is 64.0"}},
      {llama_head + R"("hidden_size":null,"num_attention_heads":4})",
       {"\"hidden_size\" is missing"}},
      {llama_head + R"("hidden_size":18446744073709551615,"num_attention_heads":4})",
       {"\"hidden_size\"", "below 2^63"}},
      {llama_head + R"("hidden_size":64,"num_attention_heads":5})",
       {"\"num_attention_heads\" (5) does not divide \"hidden_size\" (64)"}},
      {llama_head + R"("hidden_size":64,"num_attention_heads":4,"tie_word_embeddings":"yes"})",
       {"\"tie_word_embeddings\" is \"yes\" but must be true or false"}},
      {llama_head + R"("hidden_size":64,"num_attention_heads":4,"rope_theta":0})",
       {"\"rope_theta\" is 0 but must be a positive number"}},
      {llama_head + R"("hidden_size":64,"num_attention_heads":4,"rms_norm_eps":"1e-5"})",
       {"\"rms_norm_eps\""}},
      {llama_head + R"("hidden_size":64,"num_attention_heads":4,"attention_bias":true})",
       {"\"attention_bias\" is true"}},
      {llama_head + R"("hidden_size":64,"num_attention_heads":4,"mlp_bias":true})",
       {"\"mlp_bias\" is true"}},
      {llama_head + R"("hidden_size":60,"num_attention_heads":4})", {"head_dim 15 is odd"}},
      {R"({"model_type":"gpt2","vocab_size":512,"n_embd":64,"n_layer":2,"n_head":5,"n_positions":256})",
       {"\"n_head\" (5) does not divide \"n_embd\" (64)"}},
      {R"({"model_type":"gpt2","vocab_size":512,"n_embd":64,"n_layer":2,"n_head":4})",
       {"\"n_positions\" is missing"}},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.json);
    const std::string msg = user_error([&] { parse_hf_config(k.json, "cfg.json"); });
    EXPECT_CONTAINS(msg, "\"cfg.json\"");
    for (const char* e : k.expected) EXPECT_CONTAINS(msg, e);
  }
}

TEST(HfConfig, Qwen2AlwaysHasQkvBiasAndMistralNever) {
  const std::string shape =
      R"("vocab_size":512,"hidden_size":64,"intermediate_size":176,"num_hidden_layers":2,)"
      R"("num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":256})";
  EXPECT_TRUE(parse_hf_config(R"({"model_type":"qwen2",)" + shape, "q").qkv_bias);
  EXPECT_FALSE(parse_hf_config(R"({"model_type":"mistral",)" + shape, "m").qkv_bias);
  EXPECT_FALSE(parse_hf_config(R"({"model_type":"llama",)" + shape, "l").qkv_bias);
}

}  // namespace
}  // namespace accumbench
