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
  for (const char* name : {"gpt2-tiny", "gpt2-mini", "llama-tiny", "llama-mini", "qwen3-tiny"}) {
    EXPECT_EQ(module_params(name), ab::parameter_count(ab::find_preset(name))) << name;
  }
}

TEST(Models, PublishedPresetModulesMatchPublishedCounts) {
  // Builds the real shapes (random weights on the CPU): the modules, not just the formula.
  EXPECT_EQ(module_params("gpt2-124m"), 124439808);
  EXPECT_EQ(module_params("smollm2-135m"), 134515008);
  EXPECT_EQ(module_params("qwen2.5-0.5b"), 494032768);
  // Qwen3: q_norm and k_norm (head_dim each, per layer) are registered, and the closed form
  // counts them.
  EXPECT_EQ(module_params("qwen3-0.6b"), ab::parameter_count(ab::find_preset("qwen3-0.6b")));
  EXPECT_EQ(module_params("qwen3-0.6b"), 596049920);
  EXPECT_EQ(module_params("qwen3-1.7b"), ab::parameter_count(ab::find_preset("qwen3-1.7b")));
}

// The q/k norms are HF's Qwen3RMSNorm over each head's hd: the weight (head_dim, ones at the
// start) is shared by the heads, and scaling one head's rows of q_proj or k_proj changes nothing
// downstream (the norm divides it out per head), which a norm over all H·hd channels, or none
// (llama-tiny), would not.
TEST(Models, Qwen3QkNormsNormalizeEachHead) {
  const ab::ModelConfig cfg = ab::find_preset("qwen3-tiny");
  int norms = 0;
  for (const auto& p : ab::build_model(cfg, 0)->named_parameters()) {
    if (p.key().find("q_norm.weight") == std::string::npos && p.key().find("k_norm.weight") == std::string::npos)
      continue;
    ++norms;
    EXPECT_EQ(p.value().sizes(), (std::vector<int64_t>{cfg.head_dim})) << p.key();
    EXPECT_TRUE(torch::equal(p.value(), torch::ones({cfg.head_dim}))) << p.key();
  }
  EXPECT_EQ(norms, 2 * cfg.n_layers);

  torch::NoGradGuard no_grad;
  torch::manual_seed(3);
  const at::Tensor tokens = torch::randint(cfg.vocab_size, {2, 16}, torch::kLong);
  for (const char* name : {"qwen3-tiny", "llama-tiny"}) {
    const ab::ModelConfig c = ab::find_preset(name);
    ab::LanguageModel model = ab::build_model(c, 0);
    model->eval();
    const at::Tensor before = model->forward(tokens);
    for (auto& p : model->named_parameters()) {
      const bool q = p.key().find("q_proj.weight") != std::string::npos;
      const bool k = p.key().find("k_proj.weight") != std::string::npos;
      if (q) p.value().narrow(0, 1 * c.head_dim, c.head_dim).mul_(10.0);  // query head 1
      if (k) p.value().narrow(0, 0, c.head_dim).mul_(4.0);                 // key head 0
    }
    const double change = (model->forward(tokens) - before).abs().max().item<double>();
    if (c.qk_norm) {
      EXPECT_LT(change, 1e-4) << name;  // fp32 rounding of logits of magnitude ~1
    } else {
      EXPECT_GT(change, 1e-3) << name;  // the test can fail
      EXPECT_FALSE(c.qk_norm);
    }
  }
}

TEST(Models, HfConfigsBuildTheirShapes) {
  // The biased ones: attention_bias and mlp_bias (Llama), attention_bias (Qwen3).
  for (const char* file : {"hf/gpt2.json", "hf/qwen2.json", "hf/qwen3_untied", "../reference/llama-tiny-biases.json",
                           "../reference/qwen3-tiny-attention-bias.json"}) {
    const ab::ModelConfig cfg = ab::load_hf_config(std::string(ACCUMBENCH_TEST_DATA) + "/" + file);
    ab::LanguageModel model = ab::build_model(cfg, 0);
    EXPECT_EQ(ab::count_parameters(*model), ab::parameter_count(cfg)) << file;
  }
}

// The config's activation is the one computed: gelu_new and gelu_pytorch_tanh are one function
// (bit for bit here, one fused op), exact GELU differs from it by ~1e-3 at most per activation and
// SiLU by far more; the weights (same seed) are the same in all four.
TEST(Models, TheConfigsActivationIsComputed) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(5);
  for (const char* name : {"gpt2-tiny", "llama-tiny"}) {
    SCOPED_TRACE(name);
    const at::Tensor tokens = torch::randint(ab::find_preset(name).vocab_size, {2, 16}, torch::kLong);
    auto logits = [&](ab::Activation activation) {
      ab::ModelConfig cfg = ab::find_preset(name);
      cfg.activation = activation;
      ab::LanguageModel model = ab::build_model(cfg, 0);
      model->eval();
      return model->forward(tokens);
    };
    const at::Tensor gelu_new = logits(ab::Activation::kGeluNew);
    EXPECT_TRUE(torch::equal(gelu_new, logits(ab::Activation::kGeluTanh)));
    const double exact = (logits(ab::Activation::kGelu) - gelu_new).abs().max().item<double>();
    const double silu = (logits(ab::Activation::kSilu) - gelu_new).abs().max().item<double>();
    EXPECT_GT(exact, 0.0);
    EXPECT_GT(silu, 10 * exact);
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

INSTANTIATE_TEST_SUITE_P(BothFamilies, Causality, ::testing::Values("gpt2-tiny", "llama-tiny", "llama-mini", "qwen3-tiny"));

class PackedDocuments : public ::testing::TestWithParam<const char*> {};

// --packing bfd: a row of T = 16 holding documents of 5 and 7 positions and a padded tail of 4.
// Changing the first document leaves the second's logits as they were (attention restarts), and
// the second's logits equal those of the same tokens alone in a row of their own (positions
// restart: learned for GPT-2, rotary for Llama). The second row, unpacked, is unaffected.
TEST_P(PackedDocuments, ChangingOneDocumentLeavesTheOthersLogits) {
  const ab::ModelConfig cfg = ab::find_preset(GetParam());
  ab::LanguageModel model = ab::build_model(cfg, 0);
  model->eval();
  torch::NoGradGuard no_grad;
  torch::manual_seed(2);
  const int64_t seq = 16;
  const ab::RowDocuments documents = {{5, 7}, {16}};
  at::Tensor tokens = torch::randint(cfg.vocab_size, {2, seq}, torch::kLong);
  at::Tensor changed = tokens.clone();
  changed.narrow(1, 0, 5).copy_(torch::randint(cfg.vocab_size, {2, 5}, torch::kLong));  // document 1 of row 0
  changed[1].copy_(tokens[1]);
  const at::Tensor a = model->forward(tokens, documents);
  const at::Tensor b = model->forward(changed, documents);
  ASSERT_EQ(a.sizes(), (std::vector<int64_t>{2, seq, cfg.vocab_size}));
  auto second = [](const at::Tensor& logits) { return logits[0].narrow(0, 5, 7); };  // (7, V)
  // The same operations on the same values: 1e-6 absolute on logits of magnitude ~1.
  EXPECT_LT((second(a) - second(b)).abs().max().item<double>(), 1e-6);
  EXPECT_LT((a[1] - b[1]).abs().max().item<double>(), 1e-6);
  // The changed document did change (the test can fail).
  EXPECT_GT((a[0].narrow(0, 0, 5) - b[0].narrow(0, 0, 5)).abs().max().item<double>(), 1e-3);
  // Positions restart: the second document alone, at positions 0..6 of its own row. Other
  // matmul shapes round differently: 1e-5.
  const at::Tensor alone = model->forward(tokens[0].narrow(0, 5, 7).unsqueeze(0));  // (1, 7, V)
  EXPECT_LT((second(a) - alone[0]).abs().max().item<double>(), 1e-5);
  // Unpacked, the row is one sequence: the same tokens give other logits (the line above can fail).
  const at::Tensor unpacked = model->forward(tokens);
  EXPECT_GT((second(unpacked) - alone[0]).abs().max().item<double>(), 1e-3);
}

// Activation checkpointing recomputes each block with the packed layout: the same gradients.
TEST_P(PackedDocuments, CheckpointingRecomputesWithTheSameLayout) {
  const ab::ModelConfig cfg = ab::find_preset(GetParam());
  torch::manual_seed(4);
  const at::Tensor tokens = torch::randint(cfg.vocab_size, {2, 16}, torch::kLong);
  const ab::RowDocuments documents = {{3, 9, 4}, {10}};
  std::vector<at::Tensor> grads[2];
  for (int checkpointed = 0; checkpointed < 2; ++checkpointed) {
    ab::LanguageModel model = ab::build_model(cfg, 0);
    model->set_activation_checkpointing(checkpointed == 1);
    model->forward(tokens, documents).pow(2).mean().backward();
    for (const auto& p : model->parameters()) grads[checkpointed].push_back(p.grad().clone());
  }
  for (size_t i = 0; i < grads[0].size(); ++i) {
    EXPECT_LT((grads[0][i] - grads[1][i]).abs().max().item<double>(), 1e-6) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(BothFamilies, PackedDocuments, ::testing::Values("gpt2-tiny", "llama-tiny", "qwen3-tiny"));
