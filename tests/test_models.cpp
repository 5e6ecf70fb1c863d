// Models: module parameter counts equal the closed form, causality, HF-imported shapes build.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "accumbench/models.hpp"
#include "accumbench/model_config.hpp"

namespace ab = accumbench;

namespace {

int64_t module_params(const std::string& preset) {
  return ab::count_parameters(*ab::build_model(ab::find_preset(preset), /*seed=*/0));
}

}  // namespace

TEST(Models, SmallPresetModulesMatchClosedForm) {
  for (const char* name : {"gpt2-tiny", "gpt2-mini", "llama-tiny", "llama-mini"}) {
    EXPECT_EQ(module_params(name), ab::parameter_count(ab::find_preset(name))) << name;
  }
}

TEST(Models, PublishedPresetModulesMatchPublishedCounts) {
  // Builds the real shapes (random weights on the CPU): the modules, not just the formula.
  EXPECT_EQ(module_params("gpt2-124m"), 124439808);
  EXPECT_EQ(module_params("smollm2-135m"), 134515008);
  EXPECT_EQ(module_params("qwen2.5-0.5b"), 494032768);
}

TEST(Models, HfConfigsBuildTheirShapes) {
  for (const char* file : {"gpt2.json", "qwen2.json"}) {
    const ab::ModelConfig cfg = ab::load_hf_config(std::string(ACCUMBENCH_TEST_DATA) + "/hf/" + file);
    ab::LanguageModel model = ab::build_model(cfg, 0);
    EXPECT_EQ(ab::count_parameters(*model), ab::parameter_count(cfg)) << file;
  }
}

TEST(Models, SameSeedSameWeights) {
  auto a = ab::build_model(ab::find_preset("llama-tiny"), 7)->parameters();
  auto b = ab::build_model(ab::find_preset("llama-tiny"), 7)->parameters();
  auto c = ab::build_model(ab::find_preset("llama-tiny"), 8)->parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i]));
  EXPECT_FALSE(torch::equal(a[0], c[0]));  // token embeddings
}

class Causality : public ::testing::TestWithParam<const char*> {};

// Changing tokens after position t leaves the logits at positions <= t unchanged.
TEST_P(Causality, FutureTokensDoNotChangePastLogits) {
  const ab::ModelConfig cfg = ab::find_preset(GetParam());
  ab::LanguageModel model = ab::build_model(cfg, 0);
  model->eval();
  torch::NoGradGuard no_grad;
  torch::manual_seed(1);
  const int64_t seq = 32, t = 17;
  at::Tensor tokens = torch::randint(cfg.vocab_size, {2, seq}, torch::kLong);
  at::Tensor changed = tokens.clone();
  changed.narrow(1, t + 1, seq - t - 1).copy_(torch::randint(cfg.vocab_size, {2, seq - t - 1}, torch::kLong));
  at::Tensor a = model->forward(tokens);
  at::Tensor b = model->forward(changed);
  EXPECT_EQ(a.sizes(), (std::vector<int64_t>{2, seq, cfg.vocab_size}));
  // Exactly equal in fp32 up to kernel rounding: 1e-5 absolute on logits of magnitude ~1.
  EXPECT_LT((a.narrow(1, 0, t + 1) - b.narrow(1, 0, t + 1)).abs().max().item<double>(), 1e-5);
  // ...and the future did change (the test can fail).
  EXPECT_GT((a.narrow(1, t + 1, seq - t - 1) - b.narrow(1, t + 1, seq - t - 1)).abs().max().item<double>(), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(BothFamilies, Causality, ::testing::Values("gpt2-tiny", "llama-tiny", "llama-mini"));
