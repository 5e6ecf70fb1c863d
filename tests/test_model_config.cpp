// Model shapes: preset counts against published counts, the closed form against hand sums,
// validation and Hugging Face config.json import (real files under tests/data/hf).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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

// Qwen3's model cards give rounded totals: Qwen3-0.6B "0.6B" and "0.44B" non-embedding,
// Qwen3-1.7B "1.7B" and "1.4B". Qwen counts non-embedding as the total minus the (tied) token
// embedding V·d. A rounded figure only says the count lies within half a unit of its last digit
// (0.6B: [0.55B, 0.65B); 0.44B: [0.435B, 0.445B)), so that is the tolerance; the exact counts are
// the closed form's, which the module matches (tests/test_models.cpp).
TEST(Preset, Qwen3CountsMatchTheModelCardsWithinTheirRounding) {
  struct Card {
    const char* name;
    double total, total_half_unit, non_embedding, non_embedding_half_unit;
    int64_t exact;
  };
  const Card cards[] = {
      {"qwen3-0.6b", 0.6e9, 0.05e9, 0.44e9, 0.005e9, 596'049'920},
      {"qwen3-1.7b", 1.7e9, 0.05e9, 1.4e9, 0.05e9, 1'720'574'976},
  };
  for (const Card& card : cards) {
    SCOPED_TRACE(card.name);
    const ModelConfig& cfg = find_preset(card.name);
    const int64_t total = parameter_count(cfg);
    const int64_t non_embedding = total - cfg.vocab_size * cfg.d_model;
    EXPECT_LT(std::abs(static_cast<double>(total) - card.total), card.total_half_unit) << total;
    EXPECT_LT(std::abs(static_cast<double>(non_embedding) - card.non_embedding), card.non_embedding_half_unit)
        << non_embedding;
    EXPECT_EQ(total, card.exact);
    EXPECT_EQ(cfg.published_parameters, card.name == std::string("qwen3-0.6b") ? "0.6B" : "1.7B");
  }
}

TEST(Preset, Qwen3HyperparametersMatchConfigJson) {
  for (const char* name : {"qwen3-0.6b", "qwen3-1.7b"}) {
    SCOPED_TRACE(name);
    const ModelConfig& cfg = find_preset(name);
    EXPECT_EQ(cfg.arch, Architecture::kLlama);
    EXPECT_TRUE(cfg.qk_norm);
    EXPECT_FALSE(cfg.qkv_bias);
    EXPECT_TRUE(cfg.tied_embeddings);
    EXPECT_EQ(std::vector<int64_t>({cfg.vocab_size, cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim,
                                    cfg.max_seq_len}),
              std::vector<int64_t>({151936, 28, 16, 8, 128, 40960}));
    EXPECT_DOUBLE_EQ(cfg.rope_theta, 1e6);
    EXPECT_DOUBLE_EQ(cfg.norm_eps, 1e-6);
  }
  EXPECT_EQ(find_preset("qwen3-0.6b").d_model, 1024);
  EXPECT_EQ(find_preset("qwen3-0.6b").d_ff, 3072);
  EXPECT_EQ(find_preset("qwen3-1.7b").d_model, 2048);
  EXPECT_EQ(find_preset("qwen3-1.7b").d_ff, 6144);
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

  // llama-tiny with Qwen3's attention: head_dim 32 ≠ 64 / 4, q/k norms, tied.
  const ModelConfig& qt = find_preset("qwen3-tiny");
  EXPECT_EQ(qt.arch, Architecture::kLlama);
  EXPECT_EQ(std::vector<int64_t>({qt.vocab_size, qt.d_model, qt.n_layers, qt.n_heads, qt.n_kv_heads,
                                  qt.head_dim, qt.max_seq_len, qt.d_ff}),
            std::vector<int64_t>({512, 64, 2, 4, 2, 32, 256, 176}));
  EXPECT_TRUE(qt.qk_norm);
  EXPECT_FALSE(qt.qkv_bias);
  EXPECT_TRUE(qt.tied_embeddings);

  for (const ModelConfig* cfg : {&gt, &gm, &lt, &lm, &qt})
    EXPECT_TRUE(cfg->published_parameters.empty());
  // A published preset names the Hub ids it was written from (a Hub id not in the cache suggests
  // the preset by them); a test size none.
  for (const ModelConfig& cfg : presets()) {
    SCOPED_TRACE(cfg.name);
    EXPECT_EQ(cfg.hub_ids.empty(), cfg.published_parameters.empty());
  }
  for (const ModelConfig* cfg : {&gt, &gm, &lt, &lm}) EXPECT_FALSE(cfg->qk_norm);
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
  EXPECT_EQ(names.size(), 15u);
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

TEST(ModelConfig, QkNormAddsTwoHeadDimWeightsPerLayer) {
  ModelConfig cfg = find_preset("llama-mini");
  const int64_t without = parameter_count(cfg);
  cfg.qk_norm = true;
  // q_norm and k_norm: one weight of head_dim 32 each, shared by the heads, per layer.
  EXPECT_EQ(parameter_count(cfg) - without, 4 * 2 * 32);
}

TEST(ModelConfig, Qwen3TinyCountIsTheSumOfItsTensors) {
  // wte 512·64 (tied) + 2 × (norms 2·64 + q 64·128 + k,v 2·64·64 + q/k norms 2·32 + o 128·64
  // + gate/up/down 3·64·176) + norm 64
  const int64_t block = 128 + 64 * 128 + 2 * 64 * 64 + 2 * 32 + 128 * 64 + 3 * 64 * 176;
  EXPECT_EQ(parameter_count(find_preset("qwen3-tiny")), 512 * 64 + 2 * block + 64);
  EXPECT_EQ(parameter_count(find_preset("qwen3-tiny")), 149'952);
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
       "vocab_size 1099511627776, above the 134217728"},
      {"llama-tiny", [](ModelConfig& c) { c.n_layers = 1000000; }, "n_layers 1000000, above the 4096"},
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
  EXPECT_EQ(a.qk_norm, b.qk_norm);
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

TEST(HfConfig, Qwen3MatchesPresetWithQkNorm) {
  // Qwen/Qwen3-0.6B's config.json: head_dim 128 given explicitly (16 · 128 ≠ 1024).
  const ModelConfig cfg = load_hf_config(kHfDir + "qwen3.json");
  expect_same_shape(cfg, find_preset("qwen3-0.6b"));
  EXPECT_TRUE(cfg.qk_norm);
  EXPECT_FALSE(cfg.qkv_bias);
  EXPECT_EQ(parameter_count(cfg), 596'049'920);
}

TEST(HfConfig, Qwen3DefaultsFollowQwen3Config) {
  // Qwen3Config: head_dim defaults to 128 (not hidden / heads), untied, eps 1e-6, 32 KV heads;
  // q/k norms always, q/k/v bias never.
  const ModelConfig q = parse_hf_config(
      R"({"model_type":"qwen3","vocab_size":512,"hidden_size":64,"intermediate_size":176,)"
      R"("num_hidden_layers":2,"num_attention_heads":32,"max_position_embeddings":256})",
      "inline");
  EXPECT_EQ(q.head_dim, 128);
  EXPECT_EQ(q.n_kv_heads, 32);
  EXPECT_FALSE(q.tied_embeddings);
  EXPECT_DOUBLE_EQ(q.norm_eps, 1e-6);
  EXPECT_TRUE(q.qk_norm);
  EXPECT_FALSE(q.qkv_bias);
  // The other Llama-family types keep their attention as it was.
  for (const char* type : {"llama", "qwen2", "mistral"}) {
    const ModelConfig other = parse_hf_config(
        std::string(R"({"model_type":")") + type +
            R"(","vocab_size":512,"hidden_size":64,"intermediate_size":176,"num_hidden_layers":2,)"
            R"("num_attention_heads":4,"num_key_value_heads":4,"max_position_embeddings":256})",
        type);
    EXPECT_FALSE(other.qk_norm) << type;
    EXPECT_EQ(other.head_dim, 16) << type;
  }
  // head_dim null: Llama's config reads it as hidden / heads; Qwen3's keeps the null, from which
  // transformers builds no model (4: Linear(None); 5: the config refuses it), so neither does this.
  const std::string qwen3_null =
      R"({"model_type":"qwen3","vocab_size":512,"hidden_size":64,"intermediate_size":176,)"
      R"("num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":4,"head_dim":null,"max_position_embeddings":256})";
  try {
    parse_hf_config(qwen3_null, "q.json");
    ADD_FAILURE() << "a Qwen3 head_dim of null was read";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              "config \"q.json\": field \"head_dim\" is null, which transformers' Qwen3 cannot build a model from (it "
              "takes the value as given, where Llama's config reads null as hidden_size / num_attention_heads); give "
              "the head size, or leave the field out for Qwen3's default of 128");
  }
}

// The checkpoint's dtype: transformers 4.56 and 5 read dtype, and torch_dtype only without it.
TEST(HfConfig, DtypeWinsOverTorchDtype) {
  const std::string llama =
      R"({"model_type":"llama","vocab_size":512,"hidden_size":64,"intermediate_size":176,"num_hidden_layers":2,)"
      R"("num_attention_heads":4,"num_key_value_heads":4,"max_position_embeddings":256)";
  EXPECT_EQ(parse_hf_config(llama + R"(,"torch_dtype":"bfloat16"})", "l").stored_dtype, "bfloat16");
  EXPECT_EQ(parse_hf_config(llama + R"(,"torch_dtype":"bfloat16","dtype":"float32"})", "l").stored_dtype, "");
  EXPECT_EQ(parse_hf_config(llama + R"(,"torch_dtype":"float32","dtype":"float16"})", "l").stored_dtype, "float16");
  // A required field given as null is named so, not as missing.
  try {
    parse_hf_config(R"({"model_type":"llama","vocab_size":null,"hidden_size":64,"intermediate_size":176,)"
                    R"("num_hidden_layers":2,"num_attention_heads":4})",
                    "l");
    ADD_FAILURE() << "a null vocab_size was read";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("required field \"vocab_size\" is null"), std::string::npos) << e.what();
  }
}

TEST(HfConfig, Qwen3SmallUntiedShapeFromItsDirectory) {
  // tests/data/hf/qwen3_untied/config.json: head_dim 24 ≠ 96 / 6, untied head (the plan's
  // second Qwen3 shape in tests/test_memory.cpp).
  const ModelConfig cfg = load_hf_config(kHfDir + "qwen3_untied");
  EXPECT_EQ(cfg.name, kHfDir + "qwen3_untied/config.json");
  EXPECT_EQ(std::vector<int64_t>({cfg.vocab_size, cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.n_kv_heads,
                                  cfg.head_dim, cfg.max_seq_len, cfg.d_ff}),
            std::vector<int64_t>({1024, 96, 3, 6, 2, 24, 512, 256}));
  EXPECT_TRUE(cfg.qk_norm);
  EXPECT_FALSE(cfg.tied_embeddings);
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

// attention_bias puts a bias on q/k/v and o (LlamaAttention, Qwen3Attention), Llama's mlp_bias on
// gate, up and down (LlamaMLP); the parameters are transformers' count (helper-90 saw them refused).
TEST(HfConfig, AttentionAndMlpBiasesAreBuilt) {
  const std::string shape = R"("vocab_size":512,"hidden_size":64,"intermediate_size":176,"num_hidden_layers":2,)"
                            R"("num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":256)";
  const ModelConfig plain = parse_hf_config(R"({"model_type":"llama",)" + shape + "}", "l");
  const ModelConfig attention = parse_hf_config(R"({"model_type":"llama","attention_bias":true,)" + shape + "}", "l");
  EXPECT_TRUE(attention.qkv_bias);
  EXPECT_TRUE(attention.o_bias);
  EXPECT_FALSE(attention.mlp_bias);
  // Per layer: q (64) + k, v (2 heads of 16: 32 each) + o (64).
  EXPECT_EQ(parameter_count(attention) - parameter_count(plain), 2 * (64 + 32 + 32 + 64));
  const ModelConfig mlp = parse_hf_config(R"({"model_type":"llama","mlp_bias":true,)" + shape + "}", "l");
  EXPECT_FALSE(mlp.qkv_bias);
  EXPECT_TRUE(mlp.mlp_bias);
  EXPECT_EQ(parameter_count(mlp) - parameter_count(plain), 2 * (176 + 176 + 64));  // gate, up, down
  const ModelConfig qwen3 = parse_hf_config(R"({"model_type":"qwen3","attention_bias":true,"head_dim":16,)" + shape + "}", "q");
  EXPECT_TRUE(qwen3.qkv_bias && qwen3.o_bias && qwen3.qk_norm);
  EXPECT_FALSE(qwen3.mlp_bias);  // Qwen3MLP has none
  // Qwen2 keeps its q/k/v bias alone; Mistral has no attention_bias.
  const ModelConfig qwen2 = parse_hf_config(R"({"model_type":"qwen2","attention_bias":true,)" + shape + "}", "q2");
  EXPECT_TRUE(qwen2.qkv_bias);
  EXPECT_FALSE(qwen2.o_bias);
  EXPECT_FALSE(parse_hf_config(R"({"model_type":"mistral","attention_bias":true,"mlp_bias":true,)" + shape + "}", "m").o_bias);
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
  // GPT2Config's attribute_map: the common names set the same fields (helper-90 was refused).
  const ModelConfig g_common =
      parse_hf_config(R"({"model_type":"gpt2","vocab_size":512,"hidden_size":64,"num_hidden_layers":2,)"
                      R"("num_attention_heads":4,"max_position_embeddings":256})",
                      "inline");
  expect_same_shape(g_common, find_preset("gpt2-tiny"));
  EXPECT_EQ(g_common.max_seq_len, 256);
  try {
    parse_hf_config(R"({"model_type":"gpt2","vocab_size":512,"n_embd":64,"hidden_size":128,"n_layer":2,)"
                    R"("n_head":4,"n_positions":256})",
                    "inline");
    ADD_FAILURE() << "n_embd and hidden_size differing were accepted";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(),
                 "config \"inline\": fields \"n_embd\" (64) and \"hidden_size\" (128), which GPT2Config maps to it, "
                 "differ; keep one of them");
  }

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

  // max_position_embeddings is no shape of a RoPE model: absent (the first Llama uploads, which
  // named it max_sequence_length), each class's default, as transformers loads the file.
  const auto positions = [](const std::string& type) {
    return parse_hf_config(R"({"model_type":")" + type +
                               R"(","vocab_size":512,"hidden_size":64,"intermediate_size":176,)"
                               R"("num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":4,)"
                               R"("max_sequence_length":256})",
                           type)
        .max_seq_len;
  };
  EXPECT_EQ(positions("llama"), 2048);
  EXPECT_EQ(positions("mistral"), 131072);
  EXPECT_EQ(positions("qwen2"), 32768);
  EXPECT_EQ(positions("qwen3"), 32768);
}

// "architectures" names the checkpoint's class: a causal LM's (any ...ForCausalLM, GPT-2's
// GPT2LMHeadModel) is what accumbench measures; a sequence classifier's or a bare model's head and
// loss are another step, refused with the fix. Absent, null or empty: the causal LM.
TEST(HfConfig, ArchitecturesMustNameACausalLanguageModel) {
  const auto with = [](const std::string& type, const std::string& architectures) {
    const std::string shape =
        type == "gpt2" ? R"("vocab_size":512,"n_embd":64,"n_layer":2,"n_head":4,"n_positions":256)"
                       : R"("vocab_size":512,"hidden_size":64,"intermediate_size":176,"num_hidden_layers":2,)"
                         R"("num_attention_heads":4,"num_key_value_heads":4,"max_position_embeddings":256)";
    return R"({"model_type":")" + type + R"(",)" + shape + architectures + "}";
  };
  const int64_t llama = parameter_count(parse_hf_config(with("llama", ""), "cfg.json"));
  for (const char* causal : {R"(,"architectures":["LlamaForCausalLM"])", R"(,"architectures":["LLaMAForCausalLM"])",
                             R"(,"architectures":null)", R"(,"architectures":[])",
                             R"(,"architectures":["LlamaModel","LlamaForCausalLM"])"}) {
    SCOPED_TRACE(causal);
    EXPECT_EQ(parameter_count(parse_hf_config(with("llama", causal), "cfg.json")), llama);
  }
  EXPECT_NO_THROW(parse_hf_config(with("gpt2", R"(,"architectures":["GPT2LMHeadModel"])"), "cfg.json"));
  EXPECT_EQ(user_error([&] {
              parse_hf_config(with("llama", R"(,"architectures":["LlamaForSequenceClassification"])"), "cfg.json");
            }),
            "config \"cfg.json\": field \"architectures\" names LlamaForSequenceClassification, not a causal language "
            "model (...ForCausalLM), whose head and loss are not the language-model step accumbench measures; remove "
            "\"architectures\" to benchmark the causal language model of the same shape, or give a ...ForCausalLM "
            "config");
  EXPECT_CONTAINS(user_error([&] { parse_hf_config(with("mistral", R"(,"architectures":["MistralModel"])"), "cfg.json"); }),
                  "names MistralModel, not a causal language model");
  EXPECT_CONTAINS(user_error([&] { parse_hf_config(with("gpt2", R"(,"architectures":["GPT2DoubleHeadsModel"])"), "cfg.json"); }),
                  "names GPT2DoubleHeadsModel");
  EXPECT_CONTAINS(user_error([&] { parse_hf_config(with("llama", R"(,"architectures":"LlamaForCausalLM")"), "cfg.json"); }),
                  "\"architectures\" is \"LlamaForCausalLM\" but must be a list of class names");
}

// num_key_value_heads left out takes each class's default (LlamaConfig: the head count,
// MistralConfig 8, Qwen2Config and Qwen3Config 32); null means the head count in all of them.
// It was the head count for every type: a Mistral file without it got 16 KV heads, not 8.
TEST(HfConfig, KeyValueHeadsDefaultAsEachConfigClass) {
  const auto parsed = [](const std::string& type, int heads, const std::string& kv) {
    return parse_hf_config(R"({"model_type":")" + type +
                               R"(","vocab_size":512,"hidden_size":128,"intermediate_size":176,"num_hidden_layers":2,)"
                               R"("num_attention_heads":)" +
                               std::to_string(heads) + kv + R"(,"max_position_embeddings":256})",
                           type);
  };
  EXPECT_EQ(parsed("llama", 16, "").n_kv_heads, 16);
  EXPECT_EQ(parsed("mistral", 16, "").n_kv_heads, 8);
  EXPECT_EQ(parsed("mistral", 16, R"(,"num_key_value_heads":null)").n_kv_heads, 16);
  EXPECT_EQ(parsed("qwen2", 32, "").n_kv_heads, 32);
  EXPECT_EQ(parsed("qwen2", 64, R"(,"num_key_value_heads":null)").n_kv_heads, 64);
  EXPECT_EQ(parsed("qwen2", 16, R"(,"num_key_value_heads":2)").n_kv_heads, 2);
  try {
    parsed("qwen2", 16, "");
    FAIL() << "transformers' default of 32 KV heads cannot serve 16 heads";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              "config \"qwen2\": field \"num_key_value_heads\" is missing, and transformers' default for qwen2, 32, "
              "does not divide \"num_attention_heads\" (16); give num_key_value_heads in the file (the model's own "
              "config.json always does)");
  }
}

// transformers 5 saves the RoPE base inside rope_parameters; 4 at the top as rope_theta.
TEST(HfConfig, RopeThetaIsReadWhereEitherVersionSavesIt) {
  const std::string head = R"({"model_type":"llama","vocab_size":512,"hidden_size":64,"intermediate_size":176,)"
                           R"("num_hidden_layers":2,"num_attention_heads":4,"max_position_embeddings":256)";
  EXPECT_DOUBLE_EQ(parse_hf_config(head + R"(,"rope_theta":1e6})", "v4").rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(
      parse_hf_config(head + R"(,"rope_parameters":{"rope_type":"linear","rope_theta":500000.0,"factor":8.0}})", "v5")
          .rope_theta,
      500000.0);
  EXPECT_DOUBLE_EQ(
      parse_hf_config(head + R"(,"rope_parameters":{"full_attention":{"rope_theta":2e5},"sliding_attention":{"rope_theta":2e5}}})",
                      "per type")
          .rope_theta,
      2e5);
  EXPECT_DOUBLE_EQ(parse_hf_config(head + R"(,"rope_parameters":{"rope_type":"default"}})", "none").rope_theta, 10000.0);
  EXPECT_THROW(parse_hf_config(head + R"(,"rope_parameters":{"rope_theta":-1}})", "bad"), UserError);
  EXPECT_THROW(parse_hf_config(head + R"(,"rope_parameters":7})", "bad"), UserError);
  // Both, agreeing: read; disagreeing: refused, since each version of transformers reads its own.
  EXPECT_DOUBLE_EQ(parse_hf_config(head + R"(,"rope_theta":5e5,"rope_parameters":{"rope_theta":500000}})", "both")
                       .rope_theta,
                   5e5);
  try {
    parse_hf_config(head + R"(,"rope_theta":1e4,"rope_parameters":{"rope_theta":1e6}})", "c.json");
    ADD_FAILURE() << "two RoPE bases were read";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(),
                 "config \"c.json\": field \"rope_theta\" (10000.0) differs from \"rope_parameters.rope_theta\" (1000000.0): "
                 "transformers 4 rotates with the first, 5 with the second; make the two agree (the RoPE base the "
                 "model was trained with), or remove one");
  }
}

// A file with rope_scaling and rope_parameters (edited for one version of transformers, read by
// the other) is read when both state the same scaling, and refused when they differ.
TEST(HfConfig, RopeScalingAndRopeParametersMustAgree) {
  const std::string head = R"({"model_type":"llama","vocab_size":512,"hidden_size":64,"intermediate_size":176,)"
                           R"("num_hidden_layers":2,"num_attention_heads":4,"max_position_embeddings":256)";
  const auto parse = [&](const std::string& fields) { return parse_hf_config(head + fields + "}", "c.json"); };
  // The same scaling ("type" is the older name of "rope_type"; rope_parameters keeps the base too).
  const ModelConfig same = parse(R"(,"rope_scaling":{"type":"linear","factor":4.0},)"
                                 R"("rope_parameters":{"rope_type":"linear","factor":4.0,"rope_theta":1e6})");
  EXPECT_EQ(same.rope_scaling.type, RopeType::kLinear);
  EXPECT_DOUBLE_EQ(same.rope_theta, 1e6);
  // rope_parameters holding the base alone states no scaling; both saying "default" agree.
  EXPECT_EQ(parse(R"(,"rope_scaling":{"type":"linear","factor":2.0},"rope_parameters":{"rope_theta":1e6})")
                .rope_scaling.type,
            RopeType::kLinear);
  EXPECT_EQ(parse(R"(,"rope_scaling":{"rope_type":"default"},"rope_parameters":{"rope_type":"default"})")
                .rope_scaling.type,
            RopeType::kDefault);
  try {
    parse(R"(,"rope_scaling":{"type":"linear","factor":2.0},"rope_parameters":{"rope_type":"linear","factor":4.0})");
    ADD_FAILURE() << "two scalings were read";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(),
                 "config \"c.json\": fields \"rope_scaling\" ({\"factor\":2.0,\"rope_type\":\"linear\"}) and "
                 "\"rope_parameters\" ({\"factor\":4.0,\"rope_type\":\"linear\"}) state different rotary scalings: "
                 "transformers 4 reads the first, 5 the second; make the two agree (the scaling the model was trained "
                 "with), or remove one");
  }
  // rope_parameters saying "default" (no scaling) against a scaling in rope_scaling: two models.
  EXPECT_THROW(parse(R"(,"rope_scaling":{"type":"linear","factor":2.0},"rope_parameters":{"rope_type":"default","rope_theta":1e4})"),
               UserError);
  // A null rope_scaling states nothing (transformers' default), and a base only at the top is read.
  const ModelConfig yarn = parse(R"(,"rope_parameters":{"rope_type":"yarn","factor":4.0},"rope_scaling":null,"rope_theta":2e4)");
  EXPECT_EQ(yarn.rope_scaling.type, RopeType::kYarn);
  EXPECT_DOUBLE_EQ(yarn.rope_theta, 2e4);
}

// rope_scaling (transformers 4) or rope_parameters (5): each type's keys and defaults as
// modeling_rope_utils.py reads them; a type accumbench does not compute, a missing required key and
// partial_rotary_factor are refused; dynamic scaling is refused beyond its original positions.
TEST(HfConfig, RopeScalingIsReadAsTransformersComputesIt) {
  const std::string head = R"({"model_type":"llama","vocab_size":512,"hidden_size":64,"intermediate_size":176,)"
                           R"("num_hidden_layers":2,"num_attention_heads":4,"max_position_embeddings":256)";
  auto scaling = [&](const std::string& fields) { return parse_hf_config(head + fields + "}", "c.json").rope_scaling; };
  EXPECT_EQ(scaling("").type, RopeType::kDefault);
  EXPECT_EQ(scaling(R"(,"rope_scaling":null)").type, RopeType::kDefault);
  const RopeScaling linear = scaling(R"(,"rope_scaling":{"type":"linear","factor":4.0})");
  EXPECT_EQ(linear.type, RopeType::kLinear);
  EXPECT_DOUBLE_EQ(linear.factor, 4.0);
  const RopeScaling llama3 = scaling(
      R"(,"rope_scaling":{"rope_type":"llama3","factor":32.0,"low_freq_factor":1.0,"high_freq_factor":4.0,)"
      R"("original_max_position_embeddings":8192})");
  EXPECT_EQ(llama3.type, RopeType::kLlama3);
  EXPECT_EQ(llama3.original_max_positions, 8192);
  EXPECT_DOUBLE_EQ(llama3.high_freq_factor, 4.0);
  // The Llama 3.2 preset carries the same scaling as its config.json.
  EXPECT_EQ(find_preset("llama-3.2-1b").rope_scaling.type, RopeType::kLlama3);
  EXPECT_DOUBLE_EQ(find_preset("llama-3.2-1b").rope_scaling.factor, 32.0);
  // YaRN: the attention factor 0.1·ln(factor) + 1 unless given (or from mscale / mscale_all_dim);
  // the original length defaults to max_position_embeddings; rope_parameters (transformers 5).
  const RopeScaling yarn = scaling(R"(,"rope_parameters":{"rope_type":"yarn","rope_theta":1e6,"factor":4.0})");
  EXPECT_EQ(yarn.type, RopeType::kYarn);
  EXPECT_EQ(yarn.original_max_positions, 256);
  EXPECT_DOUBLE_EQ(yarn.attention_factor, 0.1 * std::log(4.0) + 1.0);
  EXPECT_DOUBLE_EQ(yarn.beta_fast, 32.0);
  EXPECT_TRUE(yarn.truncate);
  EXPECT_DOUBLE_EQ(scaling(R"(,"rope_scaling":{"type":"yarn","factor":4.0,"attention_factor":1.5,"truncate":false})")
                       .attention_factor,
                   1.5);
  EXPECT_DOUBLE_EQ(scaling(R"(,"rope_scaling":{"type":"yarn","factor":4.0,"mscale":1.0,"mscale_all_dim":0.5})")
                       .attention_factor,
                   (0.1 * std::log(4.0) + 1.0) / (0.05 * std::log(4.0) + 1.0));
  EXPECT_EQ(scaling(R"(,"rope_scaling":{"rope_type":"default"})").type, RopeType::kDefault);

  auto error_of = [&](const std::string& fields) {
    try {
      parse_hf_config(head + fields + "}", "c.json");
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(error_of(R"(,"rope_scaling":{"type":"longrope","short_factor":[1],"long_factor":[1],"factor":2.0})"),
            "config \"c.json\": field \"rope_scaling.rope_type\" is \"longrope\", a rotary scaling accumbench does "
            "not compute (its frequencies would differ from transformers'); use a model with default, linear, dynamic, "
            "llama3 or yarn rope scaling, or remove the field to benchmark the same shapes with plain RoPE");
  EXPECT_NE(error_of(R"(,"rope_scaling":{"rope_type":"llama3","factor":8.0})").find("rope_scaling.low_freq_factor"),
            std::string::npos);
  EXPECT_NE(error_of(R"(,"rope_scaling":{"type":"linear"})").find("\"rope_scaling.factor\" is missing"),
            std::string::npos);
  EXPECT_NE(error_of(R"(,"partial_rotary_factor":0.5)").find("rotates only part of each head"), std::string::npos);
  EXPECT_EQ(error_of(R"(,"partial_rotary_factor":1.0)"), "(no error)");

  // An unsupported type is named before its keys are checked; a partial rotation inside
  // rope_parameters is refused as at the top.
  EXPECT_NE(error_of(R"(,"rope_scaling":{"type":"longrope","short_factor":[1],"long_factor":[1]})").find("\"longrope\""),
            std::string::npos);
  EXPECT_NE(error_of(R"(,"rope_parameters":{"rope_type":"yarn","factor":4.0,"partial_rotary_factor":0.5})")
                .find("rotates only part of each head"),
            std::string::npos);
  // Dynamic NTK starts from max_position_embeddings, whatever its own original length says.
  EXPECT_NO_THROW(check_sequence_length(
      parse_hf_config(head + R"(,"rope_scaling":{"type":"dynamic","factor":2.0,"original_max_position_embeddings":16}})",
                      "d.json"),
      256));
  const ModelConfig dynamic =
      parse_hf_config(head + R"(,"rope_scaling":{"type":"dynamic","factor":2.0}})", "dynamic.json");
  EXPECT_NO_THROW(check_sequence_length(dynamic, 256));
  EXPECT_THROW(check_sequence_length(dynamic, 257), UserError);

  // transformers 5 reads a top-level original_max_position_embeddings first (Phi-3's and
  // DeepSeek's files keep it there); one that disagrees with the scaling's own is refused.
  EXPECT_EQ(scaling(R"(,"original_max_position_embeddings":64,"rope_scaling":{"type":"yarn","factor":4.0})")
                .original_max_positions,
            64);
  EXPECT_EQ(scaling(R"(,"original_max_position_embeddings":64,"rope_scaling":{"rope_type":"llama3","factor":4.0,)"
                    R"("low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":64})")
                .original_max_positions,
            64);
  EXPECT_EQ(error_of(R"(,"original_max_position_embeddings":64,"rope_scaling":{"type":"yarn","factor":4.0,)"
                     R"("original_max_position_embeddings":32})"),
            "config \"c.json\": field \"original_max_position_embeddings\" (64) differs from "
            "\"rope_scaling.original_max_position_embeddings\" (32): transformers 5 computes the rotary frequencies "
            "with the first, transformers 4 with the second; make the two agree (the length the model was pretrained "
            "at)");
  // Parameters per layer type: the same for every type is the one rope; different ones are refused
  // (these models build one rotary embedding for all layers).
  EXPECT_EQ(scaling(R"(,"rope_parameters":{"full_attention":{"rope_type":"linear","factor":2.0},)"
                    R"("sliding_attention":{"rope_type":"linear","factor":2.0}})")
                .factor,
            2.0);
  EXPECT_EQ(error_of(R"(,"rope_parameters":{"full_attention":{"rope_type":"linear","factor":2.0},)"
                     R"("sliding_attention":{"rope_type":"default"}})"),
            "config \"c.json\": field \"rope_parameters.sliding_attention\" differs from "
            "\"rope_parameters.full_attention\", but these models rotate every layer with one rotary embedding; give "
            "one set of rope parameters (the full attention's) for every layer type");
}

// Dropout is named for the note (GPT2Config's three default to 0.1; the Llama family's
// attention_dropout to 0); GPT-2's attention options other than its own are refused.
TEST(HfConfig, DropoutIsNotedAndGpt2sOtherAttentionRefused) {
  const std::string gpt2 = R"({"model_type":"gpt2","vocab_size":64,"n_embd":32,"n_layer":1,"n_head":2,"n_positions":32)";
  EXPECT_EQ(parse_hf_config(gpt2 + "}", "g.json").dropout,
            "embd_pdrop 0.1 (the default), attn_pdrop 0.1 (the default), resid_pdrop 0.1 (the default)");
  const ModelConfig some = parse_hf_config(gpt2 + R"(,"embd_pdrop":0.0,"attn_pdrop":0.2,"resid_pdrop":0})", "g.json");
  EXPECT_EQ(some.dropout, "attn_pdrop 0.2");
  EXPECT_EQ(dropout_note(some).rfind("g.json sets attn_pdrop 0.2: transformers trains with dropout on, accumbench "
                                     "without",
                                     0),
            0u);
  EXPECT_EQ(dropout_note(parse_hf_config(gpt2 + R"(,"embd_pdrop":0,"attn_pdrop":0,"resid_pdrop":0})", "g.json")), "");
  EXPECT_EQ(dropout_note(find_preset("gpt2-tiny")), "");
  const std::string llama = R"({"model_type":"llama","vocab_size":64,"hidden_size":32,"intermediate_size":64,)"
                            R"("num_hidden_layers":1,"num_attention_heads":2,"max_position_embeddings":32)";
  EXPECT_EQ(parse_hf_config(llama + "}", "l.json").dropout, "");
  EXPECT_EQ(parse_hf_config(llama + R"(,"attention_dropout":0.1})", "l.json").dropout, "attention_dropout 0.1");
  EXPECT_THROW(parse_hf_config(llama + R"(,"attention_dropout":1.5})", "l.json"), UserError);
  // One token has nothing to predict: every gradient is 0, and a verify over zeros would pass.
  std::string one_token = llama;
  one_token.replace(one_token.find("\"vocab_size\":64"), 15, "\"vocab_size\":1");
  EXPECT_NE(user_error([&] { parse_hf_config(one_token + "}", "l.json"); }).find("vocab_size 1"), std::string::npos);
  for (const char* field : {R"("scale_attn_weights":false)", R"("scale_attn_by_inverse_layer_idx":true)",
                            R"("reorder_and_upcast_attn":true)", R"("add_cross_attention":true)"}) {
    EXPECT_THROW(parse_hf_config(gpt2 + "," + field + "}", "g.json"), UserError) << field;
  }
  EXPECT_NO_THROW(parse_hf_config(
      gpt2 + R"(,"scale_attn_weights":true,"reorder_and_upcast_attn":false,"add_cross_attention":false})", "g.json"));
}

// Only GPT-2's learned position table ends at its positions; a RoPE model runs past
// max_position_embeddings, as in transformers (Qwen2.5 with YaRN), with a note.
TEST(HfConfig, RotaryModelsRunPastTheirPositionsWithANote) {
  const ModelConfig llama = parse_hf_config(
      R"({"model_type":"qwen2","vocab_size":512,"hidden_size":64,"intermediate_size":176,"num_hidden_layers":2,)"
      R"("num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":32,)"
      R"("rope_scaling":{"type":"yarn","factor":4.0,"original_max_position_embeddings":32}})",
      "yarn.json");
  EXPECT_NO_THROW(check_sequence_length(llama, 128));
  EXPECT_EQ(context_length_note(llama, 32), "");
  EXPECT_EQ(context_length_note(llama, 128).rfind("--seq-len 128 is beyond yarn.json's max_position_embeddings 32: ", 0),
            0u);
  const ModelConfig& gpt2 = find_preset("gpt2-tiny");
  EXPECT_EQ(context_length_note(gpt2, 512), "");
  try {
    check_sequence_length(gpt2, 257);
    FAIL() << "GPT-2 has a learned table of 256 positions";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--seq-len 257 exceeds gpt2-tiny's 256 positions, the rows of its learned position table; use a "
              "shorter sequence");
  }
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
      {"bad_activation.json",
       {"\"activation_function\" is \"relu\", an activation accumbench does not compute", "gelu_new, gelu_pytorch_tanh"}},
      {"does_not_exist.json", {"--hf-config", "does not exist"}},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.file);
    const std::string path = kHfDir + k.file;
    const std::string msg = user_error([&] { load_hf_config(path); });
    EXPECT_CONTAINS(msg, "\"" + path + "\"");
    for (const char* e : k.expected) EXPECT_CONTAINS(msg, e);
  }
  const std::string dir = user_error([] { load_hf_config(kHfDir); });
  EXPECT_CONTAINS(dir, "config directory \"" + kHfDir + "\" has no config.json");
}

TEST(HfConfig, BadValuesNameTheField) {
  const std::string llama_head =
      R"({"model_type":"llama","vocab_size":512,"intermediate_size":176,)"
      R"("num_hidden_layers":2,"max_position_embeddings":256,)";
  const std::string qwen3_head =
      R"({"model_type":"qwen3","vocab_size":512,"intermediate_size":176,)"
      R"("num_hidden_layers":2,"max_position_embeddings":256,"num_key_value_heads":4,)";
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
       {"\"hidden_size\" is null"}},
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
      {llama_head + R"("hidden_size":60,"num_attention_heads":4})", {"head_dim 15 is odd"}},
      {qwen3_head +
           R"("hidden_size":64,"num_attention_heads":4,"head_dim":0})",
       {"\"head_dim\" is 0"}},
      {qwen3_head +
           R"("hidden_size":64,"num_attention_heads":4,"head_dim":33})",
       {"head_dim 33 is odd"}},
      {qwen3_head +
           R"("hidden_size":64,"num_attention_heads":4,"num_key_value_heads":3,"head_dim":16})",
       {"\"num_key_value_heads\" (3) does not divide"}},
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

TEST(HfConfig, ActivationFollowsTheConfigAndTransformersDefaults) {
  const std::string gpt2 = R"({"model_type":"gpt2","vocab_size":512,"n_embd":64,"n_layer":2,"n_head":4,"n_positions":256)";
  EXPECT_EQ(parse_hf_config(gpt2 + "}", "g").activation, Activation::kGeluNew);  // GPT2Config's default
  EXPECT_EQ(find_preset("gpt2-124m").activation, Activation::kGeluNew);           // openai-community/gpt2
  EXPECT_EQ(parse_hf_config(gpt2 + R"(,"activation_function":"gelu_pytorch_tanh"})", "g").activation,
            Activation::kGeluTanh);
  EXPECT_EQ(parse_hf_config(gpt2 + R"(,"activation_function":"gelu"})", "g").activation, Activation::kGelu);
  const std::string llama =
      R"({"model_type":"llama","vocab_size":512,"hidden_size":64,"intermediate_size":176,)"
      R"("num_hidden_layers":2,"num_attention_heads":4,"max_position_embeddings":256)";
  EXPECT_EQ(parse_hf_config(llama + "}", "l").activation, Activation::kSilu);
  EXPECT_EQ(parse_hf_config(llama + R"(,"hidden_act":"swish"})", "l").activation, Activation::kSilu);
  EXPECT_EQ(parse_hf_config(llama + R"(,"hidden_act":"gelu"})", "l").activation, Activation::kGelu);
  EXPECT_EQ(load_hf_config(kHfDir + "mistral.json").activation, Activation::kSilu);
  for (const ModelConfig& p : presets())
    EXPECT_EQ(p.activation, p.arch == Architecture::kGpt2 ? Activation::kGeluNew : Activation::kSilu) << p.name;
  const std::string msg = user_error([&] { parse_hf_config(llama + R"(,"hidden_act":"quick_gelu"})", "cfg.json"); });
  EXPECT_CONTAINS(msg, "config \"cfg.json\": field \"hidden_act\" is \"quick_gelu\", an activation accumbench does not compute");
  EXPECT_CONTAINS(msg, "use gelu_new, gelu_pytorch_tanh, gelu or silu");
  EXPECT_CONTAINS(user_error([&] { parse_hf_config(llama + R"(,"hidden_act":3})", "cfg.json"); }), "must be a string");
  EXPECT_EQ(to_string(Activation::kGeluNew), "gelu_new");
  EXPECT_EQ(to_string(Activation::kGeluTanh), "gelu_pytorch_tanh");
}

TEST(HfConfig, SlidingWindowIsReadAndNotedOnlyWhereItMasks) {
  // mistralai/Mistral-7B-v0.1 sets 4096; MistralConfig defaults to 4096; null turns it off.
  const ModelConfig mistral = load_hf_config(kHfDir + "mistral.json");
  EXPECT_EQ(mistral.sliding_window, 4096);
  const std::string shape =
      R"("vocab_size":512,"hidden_size":64,"intermediate_size":176,"num_hidden_layers":2,)"
      R"("num_attention_heads":4,"num_key_value_heads":4,"max_position_embeddings":8192)";
  EXPECT_EQ(parse_hf_config(R"({"model_type":"mistral",)" + shape + "}", "m").sliding_window, 4096);
  EXPECT_EQ(parse_hf_config(R"({"model_type":"mistral","sliding_window":null,)" + shape + "}", "m").sliding_window, 0);
  // Qwen2/Qwen3 only with use_sliding_window (false in their configs); Llama has none.
  EXPECT_EQ(parse_hf_config(R"({"model_type":"qwen2","sliding_window":32768,)" + shape + "}", "q").sliding_window, 0);
  // With use_sliding_window, Qwen2Config/Qwen3Config put the window on layers max_window_layers
  // and up (default 28), or where layer_types says "sliding_attention".
  const auto qwen = [&](const std::string& fields) {
    return parse_hf_config(R"({"model_type":"qwen2","use_sliding_window":true,"sliding_window":1024,)" + fields + shape + "}", "q");
  };
  EXPECT_EQ(qwen(R"("max_window_layers":1,)").sliding_window, 1024);
  EXPECT_EQ(qwen(R"("max_window_layers":1,)").sliding_window_layers, 1);
  EXPECT_EQ(qwen(R"("max_window_layers":0,)").sliding_window_layers, 2);
  EXPECT_EQ(qwen("").sliding_window, 0);  // 2 layers, all below the default 28: no layer masks
  EXPECT_EQ(qwen(R"("max_window_layers":2,)").sliding_window, 0);
  EXPECT_EQ(qwen(R"("layer_types":["sliding_attention","full_attention"],)").sliding_window_layers, 1);
  EXPECT_EQ(qwen(R"("layer_types":["full_attention","full_attention"],)").sliding_window, 0);
  EXPECT_EQ(mistral.sliding_window_layers, mistral.n_layers);
  const auto refused = [&](const std::string& fields, const std::string& message) {
    try {
      qwen(fields);
      ADD_FAILURE() << fields << " was accepted";
    } catch (const UserError& e) {
      EXPECT_CONTAINS(std::string(e.what()), message);
    }
  };
  refused(R"("max_window_layers":-1,)", R"(field "max_window_layers" is -1 but must be an integer of at least 0)");
  refused(R"("layer_types":["full_attention"],)", R"(field "layer_types" is ["full_attention"] but must be 2 strings)");
  refused(R"("layer_types":["full_attention","chunked"],)", R"(each "full_attention" or "sliding_attention")");
  EXPECT_EQ(parse_hf_config(R"({"model_type":"llama","sliding_window":16,)" + shape + "}", "l").sliding_window, 0);

  EXPECT_EQ(sliding_window_note(mistral, 4096), "");
  EXPECT_EQ(sliding_window_note(find_preset("llama-mini"), 512), "");
  const std::string note = sliding_window_note(mistral, 8192);
  EXPECT_CONTAINS(note, "sets sliding_window 4096, shorter than --seq-len 8192: accumbench attends to every earlier position");
  EXPECT_CONTAINS(note, "time and memory here are full causal attention's");
  // Where only some layers mask, the note says how many.
  EXPECT_CONTAINS(sliding_window_note(qwen(R"("max_window_layers":1,)"), 2048),
                  "sets sliding_window 1024 on 1 of its 2 layers, shorter than --seq-len 2048: accumbench");
}

// ---------------------------------------------------------------------------------------------
// --hf-config DIR and Hub ids from the local cache (a fake cache in a temporary directory)

namespace fs = std::filesystem;

// Sets one environment variable for the scope, restoring its previous state.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value == nullptr)
      unsetenv(name);
    else
      setenv(name, value, /*overwrite=*/1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// A Hub cache laid out as huggingface_hub writes it: models--ORG--NAME/{refs/main, blobs/,
// snapshots/<rev>/config.json -> ../../blobs/<hash>}.
class HubCache : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "accumbench_hub_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    cache_ = pattern;
  }
  void TearDown() override { fs::remove_all(cache_); }

  fs::path repo(const std::string& org, const std::string& name) const {
    return cache_ / ("models--" + org + "--" + name);
  }
  // A snapshot whose config.json is a link into blobs/, holding a Qwen3 shape of `layers` layers.
  void add_snapshot(const fs::path& repo_dir, const std::string& rev, int layers) const {
    fs::create_directories(repo_dir / "blobs");
    fs::create_directories(repo_dir / "snapshots" / rev);
    std::ofstream(repo_dir / "blobs" / ("blob-" + rev))
        << R"({"model_type":"qwen3","vocab_size":512,"hidden_size":64,"intermediate_size":176,)"
        << R"("num_hidden_layers":)" << layers
        << R"(,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,)"
        << R"("max_position_embeddings":256,"tie_word_embeddings":true})";
    fs::create_symlink(fs::path("..") / ".." / "blobs" / ("blob-" + rev), repo_dir / "snapshots" / rev / "config.json");
  }
  void set_ref(const fs::path& repo_dir, const std::string& rev) const {
    fs::create_directories(repo_dir / "refs");
    std::ofstream(repo_dir / "refs" / "main") << rev;  // huggingface_hub writes no newline
  }

  fs::path cache_;
};

TEST_F(HubCache, CacheDirectoryFollowsHuggingfaceHub) {
  ScopedEnv hub("HF_HUB_CACHE", "/x/hub-cache");
  ScopedEnv home_hf("HF_HOME", "/x/hf-home");
  ScopedEnv home("HOME", "/x/home");
  EXPECT_EQ(hf_hub_cache_dir(), "/x/hub-cache");
  {
    ScopedEnv no_hub("HF_HUB_CACHE", nullptr);
    EXPECT_EQ(hf_hub_cache_dir(), "/x/hf-home/hub");
    ScopedEnv no_home_hf("HF_HOME", nullptr);
    EXPECT_EQ(hf_hub_cache_dir(), "/x/home/.cache/huggingface/hub");
  }
}

TEST_F(HubCache, IdResolvesThroughRefsMain) {
  ScopedEnv hub("HF_HUB_CACHE", cache_.c_str());
  const fs::path r = repo("test-org", "Qwen3-Small");
  add_snapshot(r, "1111aaaa", 2);
  add_snapshot(r, "2222bbbb", 3);  // refs/main points here
  set_ref(r, "2222bbbb");
  EXPECT_EQ(resolve_hf_config_path("test-org/Qwen3-Small"), (r / "snapshots" / "2222bbbb" / "config.json").string());
  const ModelConfig cfg = load_hf_config("test-org/Qwen3-Small");
  EXPECT_EQ(cfg.name, "test-org/Qwen3-Small");  // the id, not the snapshot path
  EXPECT_EQ(cfg.n_layers, 3);
  EXPECT_TRUE(cfg.qk_norm);
  // qwen3-tiny's shape with a third block.
  const int64_t tiny = parameter_count(find_preset("qwen3-tiny"));
  EXPECT_EQ(parameter_count(cfg) - tiny, (tiny - 512 * 64 - 64) / 2);
}

TEST_F(HubCache, OnlySnapshotWithoutRefIsUsed) {
  ScopedEnv hub("HF_HUB_CACHE", cache_.c_str());
  add_snapshot(repo("test-org", "m"), "cafe", 2);
  EXPECT_EQ(load_hf_config("test-org/m").n_layers, 2);
}

// The Hub's oldest models have no organisation: "gpt2" is cached as models--gpt2.
TEST_F(HubCache, IdWithoutAnOrganisation) {
  ScopedEnv hub("HF_HUB_CACHE", cache_.c_str());
  add_snapshot(cache_ / "models--small-qwen", "cafe", 3);
  EXPECT_EQ(load_hf_config("small-qwen").n_layers, 3);
  EXPECT_EQ(load_hf_config("small-qwen").name, "small-qwen");
  const std::string missing = user_error([] { load_hf_config("gpt2"); });
  EXPECT_CONTAINS(missing, (cache_ / "models--gpt2").string());
  EXPECT_CONTAINS(missing, "or give --model gpt2-124m, the preset written from its config.json");
  EXPECT_CONTAINS(user_error([] { load_hf_config("distilgpt2"); }), "or a preset's name: accumbench models");
}

TEST_F(HubCache, HfHomeIsUsedWithoutHubCache) {
  ScopedEnv no_hub("HF_HUB_CACHE", nullptr);
  ScopedEnv home_hf("HF_HOME", cache_.c_str());
  add_snapshot(cache_ / "hub" / "models--test-org--m", "cafe", 2);
  EXPECT_EQ(load_hf_config("test-org/m").n_layers, 2);
}

TEST_F(HubCache, RefusesWhatItCannotResolve) {
  ScopedEnv hub("HF_HUB_CACHE", cache_.c_str());
  // Not cached: where it looked, which variable chose that, and what to do.
  const std::string missing = user_error([] { load_hf_config("Qwen/Qwen3-1.7B"); });
  EXPECT_CONTAINS(missing, "\"Qwen/Qwen3-1.7B\"");
  EXPECT_CONTAINS(missing, "not in the local Hugging Face cache");
  EXPECT_CONTAINS(missing, (cache_ / "models--Qwen--Qwen3-1.7B").string());
  EXPECT_CONTAINS(missing, "$HF_HUB_CACHE");
  // A model a preset was written from is named with it (helper-102); another id is not.
  EXPECT_CONTAINS(missing, "or give --model qwen3-1.7b, the preset written from its config.json");
  EXPECT_EQ(user_error([] { load_hf_config("test-org/unknown"); }).find("--model "), std::string::npos);
  EXPECT_CONTAINS(missing, "huggingface-cli download Qwen/Qwen3-1.7B config.json");

  // Several snapshots and no refs/main: no guess.
  add_snapshot(repo("test-org", "two"), "aaaa", 2);
  add_snapshot(repo("test-org", "two"), "bbbb", 3);
  const std::string several = user_error([] { load_hf_config("test-org/two"); });
  EXPECT_CONTAINS(several, "has 2 snapshots");
  EXPECT_CONTAINS(several, "no refs/main");

  // refs/main naming a snapshot that is not there.
  add_snapshot(repo("test-org", "stale"), "aaaa", 2);
  set_ref(repo("test-org", "stale"), "ffff");
  EXPECT_CONTAINS(user_error([] { load_hf_config("test-org/stale"); }), "names revision \"ffff\"");

  // A snapshot without config.json (only the weights were downloaded).
  fs::create_directories(repo("test-org", "weights-only") / "snapshots" / "aaaa");
  EXPECT_CONTAINS(user_error([] { load_hf_config("test-org/weights-only"); }), "has no");

  // A missing file that looks like a path is reported as a file, not looked up in the cache.
  const std::string file = user_error([] { load_hf_config("some-dir/config.json"); });
  EXPECT_CONTAINS(file, "--hf-config \"some-dir/config.json\" does not exist");
}

TEST_F(HubCache, DirectoryMeansItsConfigJson) {
  ScopedEnv hub("HF_HUB_CACHE", cache_.c_str());
  add_snapshot(repo("test-org", "m"), "cafe", 2);
  const fs::path snapshot = repo("test-org", "m") / "snapshots" / "cafe";
  const ModelConfig cfg = load_hf_config(snapshot.string());
  EXPECT_EQ(cfg.name, (snapshot / "config.json").string());
  EXPECT_EQ(cfg.n_layers, 2);
}


// A checkpoint saved quantised (unsloth's and TheBloke's "-bnb-4bit", "-GPTQ" uploads) carries its
// quantization_config; it loads so and trains only under adapters, so the run must quantise the
// same way, and kernels accumbench does not run (GPTQ, AWQ, fp4) are refused.
TEST(HfConfig, ACheckpointStoredQuantisedNeedsItsOwnBaseQuant) {
  const std::string head = R"({"model_type":"llama","vocab_size":512,"hidden_size":64,"intermediate_size":176,)"
                           R"("num_hidden_layers":2,"num_attention_heads":4,"max_position_embeddings":256)";
  const ModelConfig nf4 = parse_hf_config(
      head + R"(,"quantization_config":{"quant_method":"bitsandbytes","load_in_4bit":true,"load_in_8bit":false,)"
             R"("bnb_4bit_quant_type":"nf4","bnb_4bit_use_double_quant":true}})",
      "bnb.json");
  EXPECT_EQ(nf4.stored_quantised, "bitsandbytes nf4 with double quant");
  LoraOptions lora;
  auto error_of = [&](const ModelConfig& m) {
    try {
      validate_lora(m, lora);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(error_of(nf4),
            "bnb.json is a checkpoint stored quantised (bitsandbytes nf4 with double quant), which loads so and trains "
            "only under LoRA adapters; add --lora-rank R --base-quant nf4 --double-quant to measure it as it loads");
  lora.rank = 8;
  lora.base_quant = BaseQuant::kNf4;
  EXPECT_NE(error_of(nf4), "(no error)");  // without the double quantisation
  lora.double_quant = true;
  EXPECT_EQ(error_of(nf4), "(no error)");
  const ModelConfig int8 =
      parse_hf_config(head + R"(,"quantization_config":{"load_in_8bit":true}})", "int8.json");
  EXPECT_EQ(int8.stored_quantised, "bitsandbytes int8");
  const ModelConfig gptq = parse_hf_config(head + R"(,"quantization_config":{"quant_method":"gptq","bits":4}})", "g.json");
  EXPECT_EQ(error_of(gptq),
            "g.json is a checkpoint stored quantised (gptq), whose storage and kernels accumbench does not model; give "
            "the config.json of the unquantised model (with --base-quant nf4 or int8 for a bitsandbytes base)");
  EXPECT_EQ(parse_hf_config(head + R"(,"quantization_config":null})", "n.json").stored_quantised, "");
  EXPECT_EQ(parse_hf_config(head + "}", "plain.json").stored_quantised, "");
}

}  // namespace
}  // namespace accumbench
