// Trainer settings in (src/report/trainer_config.cpp): TRL and axolotl YAML read as accumbench
// options, with the trainers' own defaults, refusals of what is not modelled, the keys not
// understood listed, command-line overrides, and the round trip from --emit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "accumbench/error.hpp"
#include "accumbench/model_config.hpp"
#include "accumbench/report.hpp"
#include "accumbench/trainer_config.hpp"

namespace ab = accumbench;

namespace {

using Lines = std::vector<std::string>;

const auto kNothingGiven = [](const std::string&) { return false; };

ab::WorkloadOptions read(const std::string& yaml, ab::ConfigFormat format = ab::ConfigFormat::kTrl, int world = 1,
                         const std::function<bool(const std::string&)>& given = kNothingGiven) {
  ab::WorkloadOptions w;  // accumbench's own defaults: fp32, T=128, batch 8, no checkpointing
  ab::apply_trainer_config(ab::parse_trainer_config(yaml, format, world, "sft.yaml"), w, given);
  return w;
}

std::string error_of(const std::string& yaml, ab::ConfigFormat format = ab::ConfigFormat::kTrl) {
  try {
    read(yaml, format);
  } catch (const ab::UserError& error) {
    return error.what();
  }
  return "(no error)";
}

std::string joined(const Lines& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

}  // namespace

// A file that sets nothing is SFTConfig's and TrainingArguments' defaults: max_length 1024,
// per_device_train_batch_size 8 x gradient_accumulation_steps 1, bf16 (SFTConfig: bf16 = not
// fp16), gradient_checkpointing true, no packing, padding to the longest sample.
TEST(TrainerConfig, AnEmptyTrlFileIsTrlsDefaults) {
  const ab::WorkloadOptions w = read("");
  EXPECT_EQ(w.seq_len, 1024);
  EXPECT_EQ(w.batch, 8);
  EXPECT_EQ(w.precisions, std::vector<ab::Precision>{ab::Precision::kBf16});
  EXPECT_EQ(w.grid.checkpointing, ab::Checkpointing::kBlocks);
  EXPECT_EQ(w.data.packing, ab::Packing::kNone);
  EXPECT_EQ(w.data.padding, ab::Padding::kLongest);
  EXPECT_FALSE(w.lora.enabled());
  const ab::TrainerConfig c = ab::parse_trainer_config("", ab::ConfigFormat::kTrl, 1, "sft.yaml");
  EXPECT_EQ(ab::trainer_config_notes(c, kNothingGiven, read("")),
            (Lines{"read sft.yaml as --seq-len 1024 --batch 8 (per_device_train_batch_size x "
                   "gradient_accumulation_steps: 8 per device x 1 accumulation steps x 1 process) --precision bf16 "
                   "--activation-checkpointing blocks --packing none --padding longest --tf32 off --lr 2e-05 "
                   "--weight-decay 0 --max-grad-norm 1",
                   "sft.yaml leaves out max_length, per_device_train_batch_size, bf16, gradient_checkpointing, "
                   "pad_to_multiple_of, tf32, learning_rate, weight_decay, max_grad_norm: TRL's defaults stand",
                   "sft.yaml: leaves out optim, whose default in transformers is adamw_torch_fused from PyTorch 2.8 "
                   "(accumbench's adamw, what runs here) and adamw_torch before it (on CUDA --optimizer adamw-foreach: "
                   "a copy of what trains during the step); sweep --optimizer adamw,adamw-foreach measures both"}));
  // Said only when neither the file nor the command line names the optimizer.
  const auto optimizer_given = [](const std::string& option) { return option == "--optimizer"; };
  EXPECT_EQ(ab::trainer_config_notes(c, optimizer_given, read("")).size(), 2u);
  const ab::TrainerConfig named = ab::parse_trainer_config("optim: adamw_torch_fused\n", ab::ConfigFormat::kTrl, 1, "sft.yaml");
  for (const std::string& note : ab::trainer_config_notes(named, kNothingGiven, read("")))
    EXPECT_EQ(note.find("leaves out optim"), std::string::npos) << note;
  // axolotl's bf16 stands for the precision and the weights' dtype: named once.
  const ab::TrainerConfig axolotl = ab::parse_trainer_config("base_model: gpt2-tiny\n", ab::ConfigFormat::kAxolotl, 1, "ax.yml");
  ab::WorkloadOptions from_axolotl;
  ab::apply_trainer_config(axolotl, from_axolotl, kNothingGiven);
  EXPECT_EQ(ab::trainer_config_notes(axolotl, kNothingGiven, from_axolotl)[1],
            "ax.yml leaves out sequence_len, micro_batch_size, bf16, gradient_checkpointing, pad_to_sequence_len, "
            "tf32, weight_decay, max_grad_norm: axolotl's defaults stand");
  // The trainers' optimizer defaults, not accumbench's (lr 1e-4, weight decay 0.01): TRL's SFTConfig
  // learning_rate 2e-5, TrainingArguments' and axolotl's weight_decay 0; axolotl requires
  // learning_rate, and without it accumbench's stands, said.
  EXPECT_NEAR(read("").optimizer.lr, 2e-5, 1e-15);
  EXPECT_EQ(read("").optimizer.weight_decay, 0.0);
  EXPECT_EQ(from_axolotl.optimizer.weight_decay, 0.0);
  EXPECT_EQ(from_axolotl.optimizer.lr, ab::OptimizerOptions{}.lr);
  const Lines axolotl_notes = ab::trainer_config_notes(axolotl, kNothingGiven, from_axolotl);
  EXPECT_NE(std::find(axolotl_notes.begin(), axolotl_notes.end(),
                      "ax.yml: leaves out learning_rate, which axolotl requires; accumbench's --lr 0.0001 stands (it "
                      "changes verify's update, not a step's time)"),
            axolotl_notes.end())
      << joined(axolotl_notes);
  const auto lr_given = [](const std::string& option) { return option == "--lr"; };
  for (const std::string& note : ab::trainer_config_notes(axolotl, lr_given, from_axolotl))
    EXPECT_EQ(note.find("learning_rate"), std::string::npos) << note;
}

// transformers 5's train_sampling_strategy: group_by_length is --group-by-length; sequential is
// said (accumbench shuffles); random is the default; anything else is refused.
TEST(TrainerConfig, TrainSamplingStrategy) {
  EXPECT_TRUE(read("train_sampling_strategy: group_by_length\n").data.group_by_length);
  EXPECT_FALSE(read("train_sampling_strategy: random\n").data.group_by_length);
  EXPECT_FALSE(read("train_sampling_strategy: sequential\n").data.group_by_length);
  const std::string yaml = "train_sampling_strategy: sequential\n";
  const ab::TrainerConfig c = ab::parse_trainer_config(yaml, ab::ConfigFormat::kTrl, 1, "sft.yaml");
  const Lines notes = ab::trainer_config_notes(c, kNothingGiven, read(yaml));
  EXPECT_NE(std::find(notes.begin(), notes.end(),
                      "sft.yaml: train_sampling_strategy: sequential visits the samples in the dataset's order; "
                      "accumbench visits them in a seeded random order (random), which groups other samples into each "
                      "micro-batch when lengths differ"),
            notes.end())
      << joined(notes);
  // The two keys, one per transformers version, must agree.
  EXPECT_TRUE(read("group_by_length: true\ntrain_sampling_strategy: group_by_length\n").data.group_by_length);
  EXPECT_FALSE(read("group_by_length: false\ntrain_sampling_strategy: random\n").data.group_by_length);
  EXPECT_EQ(error_of("group_by_length: true\ntrain_sampling_strategy: sequential\n"),
            "sft.yaml sets group_by_length: true (transformers 4) and train_sampling_strategy: sequential (transformers "
            "5), which disagree; keep the key your transformers reads");
  EXPECT_EQ(error_of("train_sampling_strategy: length\n"),
            "sft.yaml: train_sampling_strategy is \"length\", not random, sequential or group_by_length; fix the key "
            "in the file");
}

// Every key accumbench maps, with 2 processes: the effective batch is 4 x 4 x 2 = 32.
TEST(TrainerConfig, TrlKeysMapToOptions) {
  const ab::WorkloadOptions w = read(R"(
model_name_or_path: gpt2-tiny
max_length: 512
per_device_train_batch_size: 4
gradient_accumulation_steps: 4
fp16: true
gradient_checkpointing: false
packing: true
packing_strategy: wrapped
group_by_length: true
dtype: bfloat16
use_peft: true
lora_r: 8
lora_alpha: 16
lora_dropout: 0.1
lora_target_modules: [c_attn, attn.c_proj]
learning_rate: 2.0e-5
weight_decay: 0.1
loss_type: chunked_nll
output_dir: out
)",
                                     ab::ConfigFormat::kTrl, 2);
  EXPECT_EQ(w.model.preset, "gpt2-tiny");
  EXPECT_EQ(w.model.hf_config, "");
  EXPECT_EQ(w.seq_len, 512);
  EXPECT_EQ(w.batch, 32);
  EXPECT_EQ(w.precisions, std::vector<ab::Precision>{ab::Precision::kFp16});  // bf16 = not fp16
  EXPECT_EQ(w.grid.checkpointing, ab::Checkpointing::kNone);
  EXPECT_EQ(w.data.packing, ab::Packing::kWrapped);
  EXPECT_TRUE(w.data.group_by_length);
  EXPECT_EQ(w.weights_dtype, ab::Precision::kBf16);
  EXPECT_EQ(w.lora.rank, 8);
  EXPECT_DOUBLE_EQ(w.lora.alpha, 16);
  EXPECT_NEAR(w.lora.dropout, 0.1, 1e-12);
  EXPECT_EQ(w.lora.targets, "c_attn,attn_c_proj");  // PEFT's attn.c_proj is accumbench's attn_c_proj
  EXPECT_NEAR(w.optimizer.lr, 2e-5, 1e-12);
  EXPECT_NEAR(w.optimizer.weight_decay, 0.1, 1e-12);
  EXPECT_TRUE(w.loss.chunked);  // TRL's chunked_nll: the chunked cross-entropy
  EXPECT_EQ(w.trl_loss, "chunked_nll");  // and TRL's own, which plan models
  EXPECT_FALSE(w.trl_loss_by_default);
}

// loss_type left out is TRL's default since 1.7.0, chunked_nll: plan plans it (--framework hf-trl);
// a sweep keeps accumbench's plain head (only a stated chunked_nll adds the chunked splits).
// nll is kept as nll; an axolotl config states no TRL loss.
TEST(TrainerConfig, LossTypeIsTrlsOwnAndDefaultsToChunkedNll) {
  ab::WorkloadOptions w = read("model_name_or_path: gpt2-tiny\n");
  EXPECT_EQ(w.trl_loss, "chunked_nll");
  EXPECT_TRUE(w.trl_loss_by_default);
  EXPECT_FALSE(w.loss.chunked);
  w = read("model_name_or_path: gpt2-tiny\nloss_type: nll\n");
  EXPECT_EQ(w.trl_loss, "nll");
  EXPECT_FALSE(w.trl_loss_by_default);
  EXPECT_FALSE(w.loss.chunked);
  w = read("base_model: gpt2-tiny\nsequence_len: 64\nmicro_batch_size: 2\ngradient_accumulation_steps: 2\n",
           ab::ConfigFormat::kAxolotl);
  EXPECT_EQ(w.trl_loss, "");
}

// use_peft without the LoRA keys: ModelConfig's r 16, alpha 32, dropout 0.05, and PEFT's default
// targets for the model type (GPT-2: c_attn; the Llama family: q_proj, v_proj).
TEST(TrainerConfig, PeftDefaultsFollowTheModel) {
  ab::WorkloadOptions w = read("model_name_or_path: gpt2-tiny\nuse_peft: true\n");
  EXPECT_EQ(w.lora.rank, 16);
  EXPECT_DOUBLE_EQ(w.lora.alpha, 32);
  EXPECT_NEAR(w.lora.dropout, 0.05, 1e-12);
  EXPECT_EQ(w.lora.targets, "c_attn");
  w = read("model_name_or_path: qwen2.5-0.5b\nuse_peft: true\n");
  EXPECT_EQ(w.lora.targets, "q_proj,v_proj");
}

// target_modules as PEFT matches them against the transformers module paths: a list entry the end
// of a path, a string (or TRL's one-name list, which its ModelConfig unwraps) a pattern over the
// whole path. What PEFT would refuse, or adapt where accumbench cannot, is refused by name.
TEST(TrainerConfig, TargetModulesMatchAsPeftMatchesThem) {
  const std::string llama = "model_name_or_path: llama-tiny\nuse_peft: true\nlora_target_modules: ";
  EXPECT_EQ(read(llama + "[q_proj, v_proj]\n").lora.targets, "q,v");
  EXPECT_EQ(read(llama + "[self_attn.q_proj, mlp.down_proj]\n").lora.targets, "q,down");
  EXPECT_EQ(read(llama + "'.*\\.q_proj'\n").lora.targets, "q");
  EXPECT_EQ(read(llama + "'.*(q|v)_proj'\n").lora.targets, "q,v");
  EXPECT_EQ(read(llama + "'\\A.*\\.q_proj\\Z'\n").lora.targets, "q");  // Python's \A and \Z
  EXPECT_EQ(read(llama + "ALL-LINEAR\n").lora.targets, "all-linear");
  EXPECT_EQ(read(llama + "[all-linear]\n").lora.targets, "all-linear");  // TRL's one-name list: the string
  EXPECT_EQ(read("model_name_or_path: gpt2-tiny\nuse_peft: true\nlora_target_modules: [c_proj, c_attn]\n").lora.targets,
            "c_attn,attn_c_proj,mlp_c_proj");

  // TRL: [q_proj] reaches PEFT as the pattern "q_proj", which matches no whole path.
  EXPECT_EQ(error_of(llama + "[q_proj]\n"),
            "sft.yaml: lora_target_modules [q_proj] reaches PEFT as one string (TRL's ModelConfig unwraps a one-name "
            "list) and is the pattern \"q_proj\", which matches no module's whole path in llama-tiny (PEFT matches a "
            "pattern against the whole path, as model.layers.0.self_attn.q_proj); write a pattern such as "
            "'.*\\.q_proj'");
  // axolotl passes a list as a list.
  EXPECT_EQ(read("base_model: llama-tiny\nadapter: lora\nlora_r: 4\nlora_alpha: 8\nlora_target_modules: [q_proj]\n",
                 ab::ConfigFormat::kAxolotl)
                .lora.targets,
            "q");
  // ... but one name written as a string reaches PEFT as that string, a whole-path pattern, as
  // TRL's (_build_peft_lora_config wraps it in a list only under lora_target_linear, joined with the
  // linears; helper-89).
  const std::string ax_head = "base_model: llama-tiny\nadapter: lora\nlora_r: 4\nlora_alpha: 8\n";
  const std::string axolotl = ax_head + "lora_target_modules: q_proj\n";
  EXPECT_EQ(error_of(axolotl, ab::ConfigFormat::kAxolotl),
            "sft.yaml: lora_target_modules reaches PEFT as the string it is (axolotl makes it a list only beside "
            "lora_target_linear: true) and is the pattern \"q_proj\", which matches no module's whole path in "
            "llama-tiny (PEFT matches a pattern against the whole path, as model.layers.0.self_attn.q_proj); write a "
            "pattern such as '.*\\.q_proj', or a list: [q_proj]");
  // Names joined by | make a list of them; a real pattern has none to offer (PEFT's list matches
  // names, not patterns: helper-91 saw '[.*]' offered).
  EXPECT_NE(error_of(ax_head + "lora_target_modules: q_proj|v_proj\n", ab::ConfigFormat::kAxolotl).find(", or a list: [q_proj, v_proj]"),
            std::string::npos);
  const std::string pattern = error_of(ax_head + "lora_target_modules: '.*_projection'\n", ab::ConfigFormat::kAxolotl);
  EXPECT_NE(pattern.find("matches no module's whole path"), std::string::npos) << pattern;
  EXPECT_EQ(pattern.find("or a list"), std::string::npos) << pattern;
  EXPECT_EQ(read("base_model: llama-tiny\nadapter: lora\nlora_r: 4\nlora_alpha: 8\nlora_target_modules: '.*\\.q_proj'\n",
                 ab::ConfigFormat::kAxolotl)
                .lora.targets,
            "q");
  EXPECT_EQ(read(axolotl + "lora_target_linear: true\n", ab::ConfigFormat::kAxolotl).lora.targets, "all-linear");
  // Empty: PEFT gets no module (helper-91: the refusal named --lora-targets, not the key).
  EXPECT_EQ(error_of(ax_head + "lora_target_modules: ''\n", ab::ConfigFormat::kAxolotl),
            "sft.yaml: lora_target_modules is empty, which gives PEFT no module to adapt (it stops); name the modules, "
            "or use lora_target_linear: true");
  EXPECT_EQ(read(ax_head + "lora_target_modules: []\nlora_target_linear: true\n", ab::ConfigFormat::kAxolotl).lora.targets,
            "all-linear");
  EXPECT_EQ(error_of(llama + "[q, v]\n"),
            "sft.yaml: lora_target_modules names \"q\", which matches no module of llama-tiny (PEFT compares each name "
            "with the end of a module's path, as model.layers.0.self_attn.q_proj); use q_proj, k_proj, v_proj, "
            "o_proj, gate_proj, up_proj or down_proj");
  EXPECT_NE(error_of(llama + "[all-linear, q_proj]\n").find("all-linear alone, not in a list, is PEFT's shorthand"),
            std::string::npos);
  // axolotl's string all-linear reaches PEFT as its shorthand; in a list it is a module name (its
  // own key for every linear is lora_target_linear).
  const std::string ax_lora = "base_model: llama-tiny\nadapter: lora\nlora_r: 4\nlora_alpha: 8\n";
  EXPECT_EQ(read(ax_lora + "lora_target_modules: all-linear\n", ab::ConfigFormat::kAxolotl).lora.targets, "all-linear");
  EXPECT_EQ(error_of(ax_lora + "lora_target_modules: [all-linear]\n", ab::ConfigFormat::kAxolotl),
            "sft.yaml: lora_target_modules names \"all-linear\", which matches no module of llama-tiny (PEFT compares "
            "each name with the end of a module's path, as model.layers.0.self_attn.q_proj); use q_proj, k_proj, "
            "v_proj, o_proj, gate_proj, up_proj or down_proj (in a list all-linear is no shorthand; "
            "lora_target_linear: true puts adapters on every linear layer)");
  EXPECT_EQ(error_of(llama + "[embed_tokens, q_proj]\n"),
            "sft.yaml: lora_target_modules matches model.embed_tokens (the token embedding), which PEFT can adapt but "
            "accumbench puts no adapter on; name only the block linears, as q_proj, k_proj, v_proj, o_proj, "
            "gate_proj, up_proj or down_proj");
  EXPECT_NE(error_of(llama + "[lm_head, q_proj]\n").find("matches lm_head (the LM head), which PEFT can adapt"),
            std::string::npos);
  EXPECT_NE(error_of(llama + "[mlp, q_proj]\n").find("(not a linear layer), which PEFT cannot put a LoRA adapter on"),
            std::string::npos);
  EXPECT_NE(error_of(llama + "'.*_proj|.*layernorm'\n").find("input_layernorm (an RMS norm)"), std::string::npos);
  EXPECT_NE(error_of(llama + "'model\\.layers\\.0\\..*'\n").find("(not a linear layer)"), std::string::npos);
  EXPECT_EQ(error_of(llama + "'model\\.layers\\.0\\.self_attn\\.q_proj'\n"),
            "sft.yaml: lora_target_modules puts an adapter on q in some layers only (layer 0 and layer 1 differ); accumbench puts the same adapters in "
            "every layer: match every layer's, as q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj or down_proj");
  EXPECT_NE(error_of(llama + "'(?<=self_attn\\.)q_proj'\n").find("cannot read as a regular expression"),
            std::string::npos);
  // The command line's --lora-targets wins, and the note says so.
  const auto targets_given = [](const std::string& option) { return option == "--lora-targets"; };
  ab::WorkloadOptions w;
  w.lora.targets = "mlp";
  const ab::TrainerConfig c = ab::parse_trainer_config(llama + "[q_proj]\n", ab::ConfigFormat::kTrl, 1, "sft.yaml");
  ab::apply_trainer_config(c, w, targets_given);
  EXPECT_EQ(w.lora.targets, "mlp");
  EXPECT_NE(joined(ab::trainer_config_notes(c, targets_given, w)).find("overrides sft.yaml's --lora-targets"),
            std::string::npos);
}

// rsLoRA (PEFT's use_rslora) scales the adapters by alpha / sqrt(r), the update's size only: read from
// either trainer's key as --lora-rslora (16 / sqrt(16) = 4, where alpha / r is 1), left false when
// the file turns it off; a key beside no adapters is listed as unused.
TEST(TrainerConfig, RsLoraIsTheScaleOverTheRootOfTheRank) {
  const ab::WorkloadOptions trl = read("model_name_or_path: llama-tiny\nuse_peft: true\nlora_r: 16\nlora_alpha: 16\nuse_rslora: true\n");
  EXPECT_TRUE(trl.lora.rslora);
  EXPECT_DOUBLE_EQ(ab::lora_scaling(trl.lora), 4.0);
  EXPECT_FALSE(read("model_name_or_path: llama-tiny\nuse_peft: true\nlora_r: 16\nuse_rslora: false\n").lora.rslora);
  const ab::WorkloadOptions axolotl =
      read("base_model: llama-tiny\nadapter: lora\nlora_r: 16\nlora_alpha: 16\npeft_use_rslora: true\nlora_target_linear: true\n",
           ab::ConfigFormat::kAxolotl);
  EXPECT_TRUE(axolotl.lora.rslora);
  EXPECT_DOUBLE_EQ(ab::lora_scaling(axolotl.lora), 4.0);
  ab::LoraOptions plain = trl.lora;
  plain.rslora = false;
  EXPECT_DOUBLE_EQ(ab::lora_scaling(plain), 1.0);
  const ab::TrainerConfig unused =
      ab::parse_trainer_config("model_name_or_path: llama-tiny\nuse_rslora: true\n", ab::ConfigFormat::kTrl, 1, "sft.yaml");
  EXPECT_NE(std::find(unused.unused.begin(), unused.unused.end(), "use_rslora (no use_peft)"), unused.unused.end());
}

// lora_alpha: 0 is PEFT's scale of 0 (alpha / r), not accumbench's "twice the rank": refused in both
// formats rather than run as another alpha.
TEST(TrainerConfig, AZeroLoraAlphaIsRefused) {
  const std::string expected =
      "sft.yaml sets lora_alpha: 0, which PEFT takes as a scale of 0 (the adapters would train to no effect); set "
      "lora_alpha to the alpha you train with, or give --lora-alpha (accumbench's --lora-alpha 0 stands for twice "
      "the rank, so it cannot mean this)";
  EXPECT_EQ(error_of("model_name_or_path: llama-tiny\nuse_peft: true\nlora_r: 8\nlora_alpha: 0\n"), expected);
  EXPECT_EQ(error_of("base_model: llama-tiny\nadapter: lora\nlora_r: 8\nlora_alpha: 0\nlora_target_linear: true\n",
                     ab::ConfigFormat::kAxolotl),
            expected);
  EXPECT_EQ(read("model_name_or_path: llama-tiny\nuse_peft: true\nlora_r: 8\nlora_alpha: 4\n").lora.alpha, 4.0);
  // The command line's --lora-alpha replaces it, and its --lora-rank 0 drops the adapters with it.
  ab::WorkloadOptions given;
  given.lora.alpha = 16;
  ab::apply_trainer_config(
      ab::parse_trainer_config("model_name_or_path: llama-tiny\nuse_peft: true\nlora_r: 8\nlora_alpha: 0\n",
                               ab::ConfigFormat::kTrl, 1, "sft.yaml"),
      given, [](const std::string& option) { return option == "--lora-alpha"; });
  EXPECT_EQ(given.lora.alpha, 16.0);
  ab::WorkloadOptions full;
  ab::apply_trainer_config(
      ab::parse_trainer_config("model_name_or_path: llama-tiny\nuse_peft: true\nlora_r: 8\nlora_alpha: 0\n",
                               ab::ConfigFormat::kTrl, 1, "sft.yaml"),
      full, [](const std::string& option) { return option == "--lora-rank"; });
  EXPECT_FALSE(full.lora.enabled());
}

// axolotl's targets: lora_target_modules joined by lora_target_linear's find_all_linear_names,
// which finds GPT-2's Conv1D projections only as a quantised base's layers; no target at all, and
// adapters on some layers or with exclusions, are refused.
TEST(TrainerConfig, AxolotlTargetsAsItsLoaderBuildsThem) {
  const std::string lora = "adapter: lora\nlora_r: 4\nlora_alpha: 8\n";
  const auto axolotl = ab::ConfigFormat::kAxolotl;
  EXPECT_EQ(read("base_model: llama-tiny\n" + lora + "lora_target_linear: true\n", axolotl).lora.targets, "all-linear");
  EXPECT_EQ(read("base_model: llama-tiny\n" + lora + "lora_target_linear: true\nlora_target_modules: [q_proj]\n", axolotl)
                .lora.targets,
            "all-linear");
  EXPECT_NE(error_of("base_model: llama-tiny\n" + lora + "lora_target_linear: true\nlora_target_modules: [lm_head]\n", axolotl)
                .find("matches lm_head (the LM head)"),
            std::string::npos);
  EXPECT_EQ(error_of("base_model: gpt2-tiny\n" + lora + "lora_target_linear: true\n", axolotl),
            "sft.yaml sets lora_target_linear: true, but axolotl's find_all_linear_names finds no linear layer in GPT-2 "
            "(its projections are transformers' Conv1D, not nn.Linear, unless a quantised base replaced them), so PEFT "
            "gets no target module and stops; list them instead: lora_target_modules: [c_attn, c_proj, c_fc]");
  EXPECT_EQ(read("base_model: gpt2-tiny\n" + lora + "lora_target_linear: true\nlora_target_modules: [c_attn]\n", axolotl)
                .lora.targets,
            "c_attn");
  EXPECT_EQ(read("base_model: gpt2-tiny\nadapter: qlora\nload_in_4bit: true\nlora_r: 4\nlora_alpha: 8\n"
                 "lora_target_linear: true\n",
                 axolotl)
                .lora.targets,
            "all-linear");
  EXPECT_EQ(error_of("base_model: llama-tiny\n" + lora, axolotl),
            "sft.yaml sets adapter: lora without lora_target_modules or lora_target_linear, so axolotl passes PEFT no "
            "target module and PEFT stops; add lora_target_linear: true or list lora_target_modules");
  EXPECT_NE(error_of("base_model: llama-tiny\n" + lora + "lora_target_linear: true\npeft_layers_to_transform: [0]\n", axolotl)
                .find("puts adapters on some layers only"),
            std::string::npos);
  EXPECT_NE(error_of("base_model: llama-tiny\n" + lora + "lora_target_linear: true\nlora_exclude_modules: [down_proj]\n", axolotl)
                .find("leaves modules out of the adapters' targets"),
            std::string::npos);
}

// pad_to_multiple_of equal to max_length is --padding max (what --emit trl writes for it).
TEST(TrainerConfig, PadToMultipleOf) {
  EXPECT_EQ(read("max_length: 64\npad_to_multiple_of: 64\n").data.padding, ab::Padding::kMax);
  const ab::WorkloadOptions w = read("max_length: 64\npad_to_multiple_of: 8\n");
  EXPECT_EQ(w.data.padding, ab::Padding::kMultiple);
  EXPECT_EQ(w.data.pad_multiple, 8);
}

// Keys that change memory or time but are not modelled stop the run with one sentence naming the
// key; the same keys switched off pass.
TEST(TrainerConfig, RefusesWhatIsNotModelled) {
  EXPECT_EQ(error_of("bnb_4bit_quant_type: fp4\nload_in_4bit: true\n"),
            "sft.yaml sets bnb_4bit_quant_type: fp4, which picks bitsandbytes' fp4 codes and accumbench does not model; "
            "use nf4, or remove the key");
  for (const std::string yaml :
       {"optim: adamw_bnb_32bit", "optim: adafactor", "use_liger_kernel: true",
        "attn_implementation: flex_attention", "attn_implementation: eager", "deepspeed: ds.json",
        "fsdp: full_shard auto_wrap", "torch_compile: true", "torch_compile_mode: reduce-overhead",
        "torch_compile_backend: inductor", "label_smoothing_factor: 0.1", "accelerate_config: zero2",
        "activation_offloading: true", "use_dora: true", "padding_free: true", "loss_type: dft"}) {
    const std::string key = yaml.substr(0, yaml.find(':'));
    EXPECT_NE(error_of(yaml + "\n").find("sets " + key), std::string::npos) << yaml << ": " << error_of(yaml + "\n");
  }
  EXPECT_EQ(error_of("bf16: true\nfp16: true\n"), "sft.yaml sets both bf16 and fp16; keep the one the training uses");
  // axolotl's resolve_dtype turns fp16 off under bf16: a bf16 job, with bf16 weights, said in a remark.
  const ab::WorkloadOptions both = read("bf16: true\nfp16: true\n", ab::ConfigFormat::kAxolotl);
  EXPECT_EQ(both.precisions, std::vector<ab::Precision>{ab::Precision::kBf16});
  EXPECT_EQ(both.weights_dtype, ab::Precision::kBf16);
  const ab::TrainerConfig both_config =
      ab::parse_trainer_config("bf16: true\nfp16: true\n", ab::ConfigFormat::kAxolotl, 1, "ax.yml");
  EXPECT_EQ(std::count_if(both_config.remarks.begin(), both_config.remarks.end(),
                          [](const ab::TrainerConfig::Remark& r) { return r.text.rfind("sets both bf16: true and fp16: true", 0) == 0; }),
            1);
  EXPECT_EQ(error_of("per_device_train_batch_size: four\n"),
            "sft.yaml: per_device_train_batch_size is \"four\", not a positive whole number; fix the key in the file");
  EXPECT_NE(error_of("max_length: [1\n").find("sft.yaml is not YAML"), std::string::npos);
  // A NUL in the file is shown escaped: the sentence and its fix are not cut short at it.
  const std::string nul("model_name_or_path: \"a\\\0b\"\n", 27);
  EXPECT_EQ(error_of(nul), "sft.yaml is not YAML (line 1: unknown escape character: \\x00); pass the file trl sft "
                           "--config reads");
  // Switched off, or the AdamW accumbench runs: accepted.
  EXPECT_EQ(error_of("load_in_4bit: false\nuse_liger_kernel: false\noptim: adamw_torch_fused\nfsdp: \"\"\n"),
            "(no error)");
  EXPECT_EQ(error_of("packing: true\npadding_free: true\n"), "(no error)");  // bfd packing is padding-free
  // What axolotl's own examples set that changes the model, its head or its kernels (read as plain
  // SFT, or not understood, before), and GRPO's reward functions in a TRL file.
  for (const std::string yaml :
       {"gptq: true", "reward_model: true", "process_reward_model: true", "use_eaft: true",
        "flash_attn_cross_entropy: true", "flash_optimum: true", "tiled_mlp: true", "lora_target_parameters: [w1]",
        "processor_type: AutoProcessor", "quantize_moe_experts: true", "use_scattermoe: true", "use_kernels: true",
        "fused_attn_kernel: true", "flash_attn_fuse_mlp: true", "flash_attn_rms_norm: true", "max_packed_sequence_len: 2048", "dp_shard_size: 2",
        "model_type: AutoModelForSequenceClassification", "model_type: MambaLMHeadModel"}) {
    const std::string key = yaml.substr(0, yaml.find(':'));
    const std::string error = error_of(yaml + "\n", ab::ConfigFormat::kAxolotl);
    EXPECT_NE(error.find("sets " + key), std::string::npos) << yaml << ": " << error;
  }
  EXPECT_EQ(error_of("model_type: LlamaForCausalLM\ngptq: false\nreward_model: false\n", ab::ConfigFormat::kAxolotl),
            "(no error)");
  // axolotl keys that change memory or time, read as not understood before (helper-118).
  for (const std::string yaml :
       {"batch_flattening: true", "chunked_cross_entropy: true", "lora_rank_pattern: {q_proj: 8}", "layer_offloading: true",
        "qat: {weight_dtype: int8}", "fp32_norms: true", "selective_checkpointing: true",
        "selective_checkpointing: {save: [sdpa]}", "resize_token_embeddings_to_32x: true",
        "batch_flattening: auto\nmicro_batch_size: 2\nattn_implementation: flash_attention_2"}) {
    const std::string key = yaml.substr(0, yaml.find(':'));
    const std::string error = error_of(yaml + "\n", ab::ConfigFormat::kAxolotl);
    EXPECT_NE(error.find("sets " + key), std::string::npos) << yaml << ": " << error;
  }
  EXPECT_EQ(error_of("chunked_cross_entropy: true\n", ab::ConfigFormat::kAxolotl),
            "sft.yaml sets chunked_cross_entropy: true, which computes the loss over the whole logits one fp32 chunk at "
            "a time, compiled (accumbench's --chunked-loss never holds the logits, which is not the same memory) and "
            "accumbench does not model; remove the key to measure without it");
  // Off, empty, or an auto that stays off (one sample per micro-batch, packing, no varlen kernel).
  EXPECT_EQ(error_of("batch_flattening: false\nchunked_cross_entropy: false\nlora_rank_pattern: {}\n"
                     "layer_offloading: false\nfp32_norms: false\nselective_checkpointing: false\n"
                     "resize_token_embeddings_to_32x: false\nqat:\n",
                     ab::ConfigFormat::kAxolotl),
            "(no error)");
  for (const std::string yaml : {"batch_flattening: auto\nmicro_batch_size: 1\nattn_implementation: flash_attention_2",
                                 "batch_flattening: auto\nmicro_batch_size: 4\nattn_implementation: sdpa",
                                 "batch_flattening: auto\nmicro_batch_size: 4\nsample_packing: true\nattn_implementation: "
                                 "flash_attention_2"})
    EXPECT_EQ(error_of(yaml + "\n", ab::ConfigFormat::kAxolotl), "(no error)") << yaml;
  EXPECT_NE(error_of("reward_funcs: [accuracy_reward]\n").find("sets reward_funcs"), std::string::npos);
  // Every such key of a file in one sentence: removing one does not reveal the next.
  EXPECT_EQ(error_of("torch_compile: true\nuse_dora: true\nfsdp: [full_shard]\n"),
            "sft.yaml sets torch_compile: true, which compiles the model; fsdp, which shards the training state with "
            "FSDP; and use_dora: true, which trains DoRA adapters; accumbench models none of them: remove the keys to "
            "measure without them");
  // One sentence for an optimizer accumbench does not run, naming the nearest for an 8-bit one.
  EXPECT_EQ(error_of("optimizer: adamw_torch_8bit\n", ab::ConfigFormat::kAxolotl),
            "sft.yaml sets optimizer: adamw_torch_8bit, an optimizer accumbench does not run; the nearest is "
            "adamw_8bit (bitsandbytes'); use adamw_torch, adamw_torch_fused, adamw_8bit (adamw_bnb_8bit), "
            "paged_adamw_8bit, paged_adamw_32bit or sgd, or remove the key");
  // PyYAML (TRL's and axolotl's reader) takes YAML 1.1's digit separators; a quoted string is text.
  EXPECT_EQ(read("sequence_len: 500_000\n", ab::ConfigFormat::kAxolotl).seq_len, 500000);
  EXPECT_EQ(read("max_length: 1_024\n").seq_len, 1024);
  EXPECT_EQ(error_of("max_length: \"1_024\"\n"),
            "sft.yaml: max_length is \"1_024\", not a positive whole number; fix the key in the file");
}

// TRL hands an explicit null on as None (TrlParser.set_defaults_with_config makes it the argparse
// default): gradient_checkpointing null is off, not SFTConfig's true; a null where the run would
// stop on None is refused; a boolean whose default is false or None reads null as left out.
TEST(TrainerConfig, ATrlNullIsNoneNotTheDefault) {
  const ab::TrainerConfig c = ab::parse_trainer_config("gradient_checkpointing: null\n", ab::ConfigFormat::kTrl, 1, "sft.yaml");
  ab::WorkloadOptions w;
  ab::apply_trainer_config(c, w, kNothingGiven);
  EXPECT_EQ(w.grid.checkpointing, ab::Checkpointing::kNone);
  EXPECT_EQ(std::count_if(c.remarks.begin(), c.remarks.end(), [](const ab::TrainerConfig::Remark& r) {
              return r.text.rfind("sets gradient_checkpointing to null", 0) == 0;
            }), 1);
  EXPECT_EQ(read("gradient_checkpointing:\n").grid.checkpointing, ab::Checkpointing::kNone);
  EXPECT_EQ(read("").grid.checkpointing, ab::Checkpointing::kBlocks);
  // axolotl treats a null as unset: its default, off, either way.
  EXPECT_EQ(read("gradient_checkpointing: null\n", ab::ConfigFormat::kAxolotl).grid.checkpointing, ab::Checkpointing::kNone);
  EXPECT_EQ(error_of("seed: null\n"), "sft.yaml sets seed to null, which TRL passes on as None (not as its default), "
                                      "and the training stops on it; give a value or leave the key out");
  EXPECT_EQ(error_of("per_device_train_batch_size:\nlearning_rate: null\nnum_processes: null\n"),
            "sft.yaml sets per_device_train_batch_size, learning_rate and num_processes to null, which TRL passes on as "
            "None (not as their defaults), and the training stops on it; give each a value or leave the keys out");
  for (const char* key : {"gradient_accumulation_steps", "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon"})
    EXPECT_NE(error_of(std::string(key) + ": null\n").find("sets " + std::string(key) + " to null"), std::string::npos) << key;
  // The LoRA keys only under use_peft (ModelConfig keeps a None it does not use).
  EXPECT_NE(error_of("use_peft: true\nlora_r: null\n").find("sets lora_r to null"), std::string::npos);
  EXPECT_NE(error_of("use_peft: true\nlora_alpha: null\nlora_dropout: null\n").find("sets lora_alpha and lora_dropout"),
            std::string::npos);
  EXPECT_EQ(error_of("lora_r: null\n"), "(no error)");
  // Defaults of false or None (bf16's None is `not fp16`): a null is left out.
  const ab::WorkloadOptions off = read("fp16: null\nbf16: null\npacking: null\nuse_peft: null\ngroup_by_length: null\n"
                                       "completion_only_loss: null\n");
  EXPECT_EQ(off.precisions, std::vector<ab::Precision>{ab::Precision::kBf16});
  EXPECT_EQ(off.data.packing, ab::Packing::kNone);
  EXPECT_FALSE(off.lora.enabled());
}

// optim: adamw_torch is torch.optim.AdamW with its own default kernels: foreach on CUDA
// (--optimizer adamw-foreach), one tensor at a time on the CPU (accumbench's adamw there). The
// device is the workload's: --device, use_cpu, or auto where a GPU is attached or not; the command
// line's --optimizer wins. The notes say which it became.
TEST(TrainerConfig, AdamwTorchFollowsTheDevice) {
  const ab::TrainerConfig c = ab::parse_trainer_config("optim: adamw_torch\nmodel_name_or_path: gpt2-tiny\n",
                                                       ab::ConfigFormat::kTrl, 1, "sft.yaml");
  EXPECT_EQ(c.torch_default_adamw, "optim");
  struct Case { std::string device; bool gpu_attached; ab::OptimizerKind kind; };
  for (const Case& k : std::vector<Case>{{"auto", false, ab::OptimizerKind::kAdamW},
                                         {"auto", true, ab::OptimizerKind::kAdamWForeach},
                                         {"cpu", true, ab::OptimizerKind::kAdamW},
                                         {"cuda", false, ab::OptimizerKind::kAdamWForeach},
                                         {"cuda:1", false, ab::OptimizerKind::kAdamWForeach}}) {
    ab::WorkloadOptions w;
    w.device = k.device;
    ab::apply_trainer_config(c, w, kNothingGiven, k.gpu_attached);
    EXPECT_EQ(w.optimizer.kind, k.kind) << k.device << (k.gpu_attached ? " with a GPU" : "");
    const Lines notes = ab::trainer_config_notes(c, kNothingGiven, w);
    EXPECT_NE(notes.front().find(" --optimizer " + ab::to_string(k.kind) + " (optim)"), std::string::npos) << notes.front();
    const bool cpu_note = std::any_of(notes.begin(), notes.end(), [](const std::string& n) {
      return n.find("adamw_torch steps one tensor at a time on the CPU") != std::string::npos;
    });
    EXPECT_EQ(cpu_note, k.kind == ab::OptimizerKind::kAdamW) << k.device;
  }
  // use_cpu: the file's own device.
  ab::WorkloadOptions w;
  ab::apply_trainer_config(ab::parse_trainer_config("optim: adamw_torch\nuse_cpu: true\n", ab::ConfigFormat::kTrl, 1, "sft.yaml"),
                           w, kNothingGiven, /*auto_is_cuda=*/true);
  EXPECT_EQ(w.optimizer.kind, ab::OptimizerKind::kAdamW);
  // The command line's --optimizer stands, and the notes name it overridden.
  const auto optimizer_given = [](const std::string& option) { return option == "--optimizer"; };
  w = ab::WorkloadOptions{};
  w.device = "cuda";
  w.optimizer.kind = ab::OptimizerKind::kSgd;
  ab::apply_trainer_config(c, w, optimizer_given, false);
  EXPECT_EQ(w.optimizer.kind, ab::OptimizerKind::kSgd);
  const Lines notes = ab::trainer_config_notes(c, optimizer_given, w);
  EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const std::string& n) {
    return n.find("the command line overrides sft.yaml's --optimizer") != std::string::npos;
  }));
  // axolotl's key is "optimizer".
  const ab::TrainerConfig axolotl = ab::parse_trainer_config("optimizer: adamw_torch\nbase_model: gpt2-tiny\n",
                                                             ab::ConfigFormat::kAxolotl, 1, "a.yml");
  EXPECT_EQ(axolotl.torch_default_adamw, "optimizer");
}

// QLoRA and the optimizers accumbench runs are read (issue 19): TRL's load_in_4bit is nf4 (its
// ModelConfig's default quant type), use_bnb_nested_quant double quant; load_in_8bit int8; optim
// names map to --optimizer. axolotl's adapter: qlora with load_in_4bit is nf4 with double quant
// (its loader's fixed BitsAndBytesConfig).
TEST(TrainerConfig, QuantisedBaseAndOptimizersAreRead) {
  ab::WorkloadOptions w = read("use_peft: true\nlora_r: 8\nload_in_4bit: true\n");
  EXPECT_EQ(w.lora.base_quant, ab::BaseQuant::kNf4);
  EXPECT_FALSE(w.lora.double_quant);
  w = read("use_peft: true\nlora_r: 8\nload_in_4bit: true\nbnb_4bit_quant_type: nf4\nuse_bnb_nested_quant: true\n");
  EXPECT_EQ(w.lora.base_quant, ab::BaseQuant::kNf4);
  EXPECT_TRUE(w.lora.double_quant);
  EXPECT_EQ(read("use_peft: true\nlora_r: 8\nload_in_8bit: true\n").lora.base_quant, ab::BaseQuant::kInt8);
  EXPECT_EQ(read("optim: adamw_torch_fused\n").optimizer.kind, ab::OptimizerKind::kAdamW);
  EXPECT_EQ(read("optim: adamw_8bit\n").optimizer.kind, ab::OptimizerKind::kAdamW8bit);
  EXPECT_EQ(read("optim: adamw_bnb_8bit\n").optimizer.kind, ab::OptimizerKind::kAdamW8bit);
  EXPECT_EQ(read("optim: paged_adamw_8bit\n").optimizer.kind, ab::OptimizerKind::kPagedAdamW8bit);
  EXPECT_EQ(read("optim: paged_adamw_32bit\n").optimizer.kind, ab::OptimizerKind::kPagedAdamW32bit);
  EXPECT_EQ(read("optimizer: paged_adamw_32bit\n", ab::ConfigFormat::kAxolotl).optimizer.kind,
            ab::OptimizerKind::kPagedAdamW32bit);  // ten of axolotl's examples
  EXPECT_EQ(read("optim: sgd\n").optimizer.kind, ab::OptimizerKind::kSgd);
  // Without load_in_4bit the bitsandbytes keys are listed as unused.
  const ab::TrainerConfig c = ab::parse_trainer_config("use_bnb_nested_quant: true\n", ab::ConfigFormat::kTrl, 1, "sft.yaml");
  EXPECT_EQ(c.unused, (Lines{"use_bnb_nested_quant (no load_in_4bit)"}));

  w = read("adapter: qlora\nload_in_4bit: true\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\noptimizer: paged_adamw_8bit\n",
           ab::ConfigFormat::kAxolotl);
  EXPECT_EQ(w.lora.base_quant, ab::BaseQuant::kNf4);
  EXPECT_TRUE(w.lora.double_quant);
  EXPECT_EQ(w.optimizer.kind, ab::OptimizerKind::kPagedAdamW8bit);
  EXPECT_EQ(error_of("adapter: qlora\nlora_r: 8\nlora_alpha: 16\n", ab::ConfigFormat::kAxolotl),
            "sft.yaml sets adapter: qlora without load_in_4bit: true; add it, as axolotl needs");
  // resolve_dtype: load_in_8bit without a 16-bit key loads float16 weights, trained without
  // autocast (read as fp32 weights before); bf16: auto or true is bf16.
  const std::string lora8 = "adapter: lora\nload_in_8bit: true\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\n";
  const std::string refused =
      "sft.yaml sets load_in_8bit without bf16 or fp16, so axolotl loads the model in float16 and trains it "
      "without autocast, which accumbench does not model; set bf16: true (or fp16: true), or give --precision";
  EXPECT_EQ(error_of(lora8 + "bf16: false\n", ab::ConfigFormat::kAxolotl), refused);
  EXPECT_EQ(error_of(lora8 + "bf16: false\nfloat16: true\n", ab::ConfigFormat::kAxolotl), refused);  // the same job
  // The command line's precision replaces what is refused (read first, so other errors come first).
  ab::WorkloadOptions overridden;
  ab::apply_trainer_config(ab::parse_trainer_config(lora8 + "bf16: false\n", ab::ConfigFormat::kAxolotl, 1, "sft.yaml"),
                           overridden, [](const std::string& option) { return option == "--precision"; });
  EXPECT_EQ(overridden.lora.base_quant, ab::BaseQuant::kInt8);
  EXPECT_NE(error_of(lora8 + "bf16: false\nload_in_4bit: true\n", ab::ConfigFormat::kAxolotl).find("load_in_4bit"),
            std::string::npos);
  EXPECT_EQ(read(lora8, ab::ConfigFormat::kAxolotl).lora.base_quant, ab::BaseQuant::kInt8);
  EXPECT_EQ(read(lora8 + "bf16: false\nfp16: true\n", ab::ConfigFormat::kAxolotl).weights_dtype, ab::Precision::kFp16);

  // axolotl's bnb_config_kwargs update its loader's 4-bit config: double quantisation off, fp4
  // refused; the dtypes change nothing measured; an argument not known is listed.
  const std::string qlora = "adapter: qlora\nload_in_4bit: true\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\n";
  const ab::TrainerConfig kwargs = ab::parse_trainer_config(
      qlora + "bnb_config_kwargs:\n  bnb_4bit_use_double_quant: false\n  bnb_4bit_quant_storage: uint8\n"
              "  llm_int8_threshold: 6.0\n  bnb_4bit_quant_type: nf4\n  my_arg: 1\n",
      ab::ConfigFormat::kAxolotl, 1, "qlora.yml");
  w = ab::WorkloadOptions{};
  ab::apply_trainer_config(kwargs, w, kNothingGiven);
  EXPECT_EQ(w.lora.base_quant, ab::BaseQuant::kNf4);
  EXPECT_FALSE(w.lora.double_quant);
  EXPECT_EQ(kwargs.unused, (Lines{"bnb_config_kwargs.bnb_4bit_quant_storage", "bnb_config_kwargs.llm_int8_threshold (8-bit only)"}));
  EXPECT_EQ(kwargs.unknown, Lines{"bnb_config_kwargs.my_arg"});
  EXPECT_EQ(error_of(qlora + "bnb_config_kwargs:\n  bnb_4bit_quant_type: fp4\n", ab::ConfigFormat::kAxolotl),
            "sft.yaml: bnb_config_kwargs.bnb_4bit_quant_type is \"fp4\", which picks bitsandbytes' fp4 codes and "
            "accumbench does not model it; use nf4, or remove the key");
  EXPECT_EQ(error_of(qlora + "bnb_config_kwargs:\n  bnb_4bit_quant_type: int4\n", ab::ConfigFormat::kAxolotl),
            "sft.yaml: bnb_config_kwargs.bnb_4bit_quant_type is \"int4\", not nf4 or fp4 (bitsandbytes' two 4-bit "
            "codes; accumbench models nf4); fix the key in the file");
  EXPECT_EQ(error_of("load_in_4bit: true\nbnb_4bit_quant_type: int4\n"),
            "sft.yaml: bnb_4bit_quant_type is \"int4\", not nf4 or fp4 (bitsandbytes' two 4-bit codes; accumbench "
            "models nf4); fix the key in the file");
  EXPECT_EQ(error_of("dtype: float64\n"),
            "sft.yaml: dtype is \"float64\", not one of ModelConfig's choices that accumbench models: float32, bfloat16 "
            "or float16; fix the key in the file");
  EXPECT_EQ(error_of(qlora + "bnb_config_kwargs: [1]\n", ab::ConfigFormat::kAxolotl),
            "sft.yaml: bnb_config_kwargs is \"[1]\", not a mapping of BitsAndBytesConfig arguments; fix the key in the "
            "file");
  const ab::TrainerConfig lora = ab::parse_trainer_config(
      "adapter: lora\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\nbnb_config_kwargs:\n  bnb_4bit_use_double_quant: false\n",
      ab::ConfigFormat::kAxolotl, 1, "lora.yml");
  EXPECT_EQ(lora.unused, Lines{"bnb_config_kwargs (4-bit only; no load_in_4bit)"});
}

// axolotl refuses a file without two of micro_batch_size, gradient_accumulation_steps and
// batch_size (check_batch_size_fields): said, with the split read, unless --batch replaces it.
TEST(TrainerConfig, AnAxolotlFileWithoutItsBatchSplitIsSaid) {
  const auto remark_of = [](const std::string& yaml) {
    const ab::TrainerConfig c = ab::parse_trainer_config("base_model: llama-tiny\n" + yaml, ab::ConfigFormat::kAxolotl, 1, "ax.yml");
    for (const ab::TrainerConfig::Remark& r : c.remarks) {
      if (r.text.find("check_batch_size_fields") != std::string::npos) return r.text;
    }
    return std::string("(none)");
  };
  EXPECT_EQ(remark_of(""),
            "sets none of micro_batch_size, gradient_accumulation_steps and batch_size, and axolotl refuses a file "
            "without two of them (check_batch_size_fields); read here as 1 per device x 1 accumulation step, the split "
            "to add to the file");
  EXPECT_EQ(remark_of("micro_batch_size: 4\n"),
            "sets one of micro_batch_size, gradient_accumulation_steps and batch_size, and axolotl refuses a file "
            "without two of them (check_batch_size_fields); read here as 4 per device x 1 accumulation step, the split "
            "to add to the file");
  EXPECT_EQ(remark_of("micro_batch_size: 4\ngradient_accumulation_steps: 2\n"), "(none)");
  EXPECT_EQ(remark_of("micro_batch_size: 2\nbatch_size: 8\n"), "(none)");
  // Its schema types lora_alpha as an int: 16.0 passes, 12.5 is refused there and here.
  const std::string lora = "base_model: llama-tiny\nadapter: lora\nlora_r: 8\nlora_target_linear: true\n";
  EXPECT_EQ(read(lora + "lora_alpha: 16.0\n", ab::ConfigFormat::kAxolotl).lora.alpha, 16.0);
  EXPECT_EQ(error_of(lora + "lora_alpha: 12.5\n", ab::ConfigFormat::kAxolotl),
            "sft.yaml: lora_alpha is 12.5, which axolotl's schema refuses (an integer); write a whole number");
  const ab::TrainerConfig c = ab::parse_trainer_config("base_model: llama-tiny\n", ab::ConfigFormat::kAxolotl, 1, "ax.yml");
  ab::WorkloadOptions w;
  const auto batch_given = [](const std::string& option) { return option == "--batch"; };
  ab::apply_trainer_config(c, w, batch_given);
  for (const std::string& note : ab::trainer_config_notes(c, batch_given, w))
    EXPECT_EQ(note.find("check_batch_size_fields"), std::string::npos) << note;
}

// A key a letter or two from a known one is a misspelling: trl sft stops on it (a key none of its
// parsers knows goes to accelerate launch), so a TRL file is refused with the key it meant; axolotl
// ignores it, and so its default stands here as there, noted with the key it meant.
TEST(TrainerConfig, AMisspeltKeyIsNamedWithTheKeyItMeant) {
  EXPECT_EQ(error_of("per_device_train_batch_sise: 4\n"),
            "sft.yaml sets per_device_train_batch_sise, which is no key of TRL, transformers or accelerate (trl sft "
            "stops on it): did you mean per_device_train_batch_size? fix the key in the file");
  EXPECT_EQ(error_of("lora_rr: 8\n"),
            "sft.yaml sets lora_rr, which is no key of TRL, transformers or accelerate (trl sft stops on it): did you "
            "mean lora_r? fix the key in the file");
  EXPECT_EQ(read("per_device_train_batch_size: 4\nseed: 3\nnum_machines: 1\nmixed_precision: bf16\n").batch, 4);  // known
  // Three letters: one edit from fp16 (helper-91: fp1 was ignored, and the plan ran bf16).
  EXPECT_EQ(error_of("fp1: true\n"),
            "sft.yaml sets fp1, which is no key of TRL, transformers or accelerate (trl sft stops on it): did you mean "
            "fp16? fix the key in the file");
  const ab::TrainerConfig axolotl =
      ab::parse_trainer_config("micro_batch_sise: 4\n", ab::ConfigFormat::kAxolotl, 1, "ax.yaml");
  EXPECT_EQ(axolotl.unknown, Lines{"micro_batch_sise (did you mean micro_batch_size? axolotl ignores it too)"});
}

// YAML merge keys are applied as PyYAML's safe_load applies them for both trainers: the merged
// mapping's keys, an earlier merged mapping over a later, the file's own keys over both.
// yaml-cpp left `<<` a key, and the batch split at TRL's defaults (8 x 1, helper-89).
TEST(TrainerConfig, YamlMergeKeysAreApplied) {
  const std::string anchored = "base: &b\n  per_device_train_batch_size: 3\n  gradient_accumulation_steps: 4\n";
  ab::WorkloadOptions w = read(anchored + "<<: *b\n");
  EXPECT_EQ(w.batch, 12);
  w = read(anchored + "<<: *b\nper_device_train_batch_size: 1\n");  // the file's own key wins
  EXPECT_EQ(w.batch, 4);
  w = read(anchored + "other: &o\n  per_device_train_batch_size: 5\n  max_length: 32\n<<: [*o, *b]\n");
  EXPECT_EQ(w.batch, 20);  // the first merged mapping's 5 over the second's 3, times its 4 steps
  EXPECT_EQ(w.seq_len, 32);
  const ab::WorkloadOptions ax = read("base: &b\n  micro_batch_size: 2\n  gradient_accumulation_steps: 3\n<<: *b\n",
                                      ab::ConfigFormat::kAxolotl);
  EXPECT_EQ(ax.batch, 6);
  // Two merge keys in one mapping: PyYAML applies both in their order, the last's keys winning
  // (flatten_mapping), where a list's first wins.
  w = read("a: &a\n  per_device_train_batch_size: 5\nb: &b\n  per_device_train_batch_size: 3\n"
           "  gradient_accumulation_steps: 2\n<<: *a\n<<: *b\n");
  EXPECT_EQ(w.batch, 6);
  EXPECT_EQ(error_of("<<: 3\n"),
            "sft.yaml: the merge key << on line 1 takes a mapping (<<: *name of an anchored mapping) or a list of them; "
            "fix it in the file");
}

// A key not understood is listed, not dropped silently; known keys without effect are listed
// apart.
TEST(TrainerConfig, ListsUnknownAndUnusedKeys) {
  const ab::TrainerConfig c = ab::parse_trainer_config("max_length: 64\nlogging_steps: 5\nmy_own_key: 3\n",
                                                       ab::ConfigFormat::kTrl, 1, "sft.yaml");
  EXPECT_EQ(c.unknown, Lines{"my_own_key"});
  EXPECT_EQ(c.unused, Lines{"logging_steps"});
  const Lines notes = ab::trainer_config_notes(c, kNothingGiven, ab::WorkloadOptions{});
  ASSERT_GE(notes.size(), 2u);
  EXPECT_EQ(notes[notes.size() - 2], "sft.yaml: not used (no effect on the step accumbench measures): logging_steps");
  EXPECT_EQ(notes.back(),
            "sft.yaml: not understood, ignored: my_own_key (if one of them changes memory or time, the results do "
            "not show it)");
  // The Trainer's gradient clipping is --max-grad-norm, not an unused key: the file's value, 1
  // (TrainingArguments' default) when left out. The Trainer clips only above 0, and TRL hands a null
  // on as None; axolotl passes the key on whenever it is not None (067b021), so its 0 turns clipping
  // off and its null leaves the 1, said (it read 0 as axolotl 0.9 did, clipping at 1).
  struct Clip {
    std::string text;
    double trl, axolotl;
  };
  for (const Clip& c : std::vector<Clip>{{"max_grad_norm: 0.3\n", 0.3, 0.3},
                                         {"max_grad_norm: 0\n", 0, 0},
                                         {"max_grad_norm: null\n", 0, 1},
                                         {"max_grad_norm: -1\n", 0, 0},
                                         {"seed: 1\n", 1, 1}}) {
    for (const auto format : {ab::ConfigFormat::kTrl, ab::ConfigFormat::kAxolotl}) {
      const ab::TrainerConfig config = ab::parse_trainer_config(c.text, format, 1, "f.yaml");
      EXPECT_TRUE(config.unused.empty()) << c.text;
      ab::WorkloadOptions w;
      ab::apply_trainer_config(config, w, kNothingGiven);
      EXPECT_EQ(w.optimizer.max_grad_norm, format == ab::ConfigFormat::kTrl ? c.trl : c.axolotl) << c.text;
    }
  }
  const ab::TrainerConfig null = ab::parse_trainer_config("max_grad_norm: null\n", ab::ConfigFormat::kAxolotl, 1, "ax.yml");
  const std::string said =
      "sets max_grad_norm to null, which axolotl does not pass on (it sets the key only when it is not null), so the "
      "Trainer's default clips at 1: --max-grad-norm 1; max_grad_norm: 0 (or --max-grad-norm 0) measures without "
      "clipping";
  EXPECT_EQ(std::count_if(null.remarks.begin(), null.remarks.end(),
                          [&](const ab::TrainerConfig::Remark& r) { return r.text == said; }),
            1);
  const ab::TrainerConfig zero = ab::parse_trainer_config("max_grad_norm: 0\n", ab::ConfigFormat::kAxolotl, 1, "ax.yml");
  EXPECT_TRUE(std::none_of(zero.remarks.begin(), zero.remarks.end(), [](const ab::TrainerConfig::Remark& r) {
    return r.text.find("max_grad_norm") != std::string::npos;
  }));
  EXPECT_THROW(ab::parse_trainer_config("max_grad_norm: .nan\n", ab::ConfigFormat::kTrl, 1, "f.yaml"), ab::UserError);
}

// A reentrant checkpoint keeps each block's recomputed output through its backward, which the
// engine's non-reentrant one lets go: axolotl's default (normalize_config) and an explicit
// use_reentrant: true are said; TRL's default (false, as transformers 5's) and false are not.
TEST(TrainerConfig, AReentrantCheckpointIsSaid) {
  const auto reentrant_remarks = [](const std::string& yaml, ab::ConfigFormat format) {
    const ab::TrainerConfig config = ab::parse_trainer_config(yaml, format, 1, "f.yaml");
    return std::count_if(config.remarks.begin(), config.remarks.end(), [](const ab::TrainerConfig::Remark& r) {
      return r.text.rfind("checkpoints with use_reentrant: true", 0) == 0;
    });
  };
  const auto axolotl = ab::ConfigFormat::kAxolotl, trl = ab::ConfigFormat::kTrl;
  EXPECT_EQ(reentrant_remarks("gradient_checkpointing: true\n", axolotl), 1);
  EXPECT_EQ(reentrant_remarks("gradient_checkpointing: false\n", axolotl), 0);
  EXPECT_EQ(reentrant_remarks("gradient_checkpointing: true\ngradient_checkpointing_kwargs: {use_reentrant: false}\n", axolotl), 0);
  EXPECT_EQ(reentrant_remarks("gradient_checkpointing: true\n", trl), 0);
  EXPECT_EQ(reentrant_remarks("gradient_checkpointing_kwargs:\n  use_reentrant: true\n", trl), 1);  // checkpointing: TRL's default
  EXPECT_EQ(reentrant_remarks("gradient_checkpointing: false\ngradient_checkpointing_kwargs: {use_reentrant: true}\n", trl), 0);
  EXPECT_THROW(ab::parse_trainer_config("gradient_checkpointing_kwargs: true\n", trl, 1, "f.yaml"), ab::UserError);
  // TrainingArguments reads a TRL string that starts with "{" as JSON (_VALID_DICT_FIELDS), with
  // "true"/"false" strings as booleans (_convert_str_dict); axolotl's schema takes a mapping only.
  EXPECT_EQ(reentrant_remarks("gradient_checkpointing_kwargs: '{\"use_reentrant\": true}'\n", trl), 1);
  EXPECT_EQ(reentrant_remarks("gradient_checkpointing_kwargs: '{\"use_reentrant\": \"True\"}'\n", trl), 1);
  EXPECT_EQ(reentrant_remarks("gradient_checkpointing_kwargs: '{\"use_reentrant\": false}'\n", trl), 0);
  EXPECT_EQ(reentrant_remarks("gradient_checkpointing_kwargs: '{}'\n", trl), 0);
  EXPECT_EQ(error_of("gradient_checkpointing_kwargs: '{use_reentrant: true}'\n"),
            "sft.yaml: gradient_checkpointing_kwargs is \"{use_reentrant: true}\", not a mapping, as {use_reentrant: "
            "false}, or its JSON text, as '{\"use_reentrant\": false}'; fix the key in the file");
  EXPECT_EQ(error_of("gradient_checkpointing_kwargs: '{\"use_reentrant\": 2}'\n"),
            "sft.yaml: gradient_checkpointing_kwargs.use_reentrant is not true or false; fix the key in the file");
  EXPECT_EQ(error_of("gradient_checkpointing: true\ngradient_checkpointing_kwargs: '{\"use_reentrant\": true}'\n", axolotl),
            "sft.yaml: gradient_checkpointing_kwargs is \"{\"use_reentrant\": true}\", not a mapping, as "
            "{use_reentrant: false}; fix the key in the file");
  // A list or mapping where a word belongs is shown in YAML's flow style, on one line.
  EXPECT_EQ(error_of("packing_strategy: {a: 1}\npacking: true\n"),
            "sft.yaml: packing_strategy is \"{a: 1}\", not a single value; fix the key in the file");
}

// TRL's completion_only_loss: false lets a lengths file's completion_mask go unapplied; null and
// true are TRL's default (the mask applies). assistant_only_loss: true is a remark: the rows say
// which labels count. Neither is an unused key.
TEST(TrainerConfig, CompletionAndAssistantOnlyLoss) {
  EXPECT_FALSE(read("completion_only_loss: false\n").data.completion_only_loss);
  EXPECT_TRUE(read("completion_only_loss: true\n").data.completion_only_loss);
  EXPECT_TRUE(read("completion_only_loss: null\n").data.completion_only_loss);
  EXPECT_TRUE(read("seed: 1\n").data.completion_only_loss);
  const ab::TrainerConfig c = ab::parse_trainer_config("completion_only_loss: false\nassistant_only_loss: true\n",
                                                       ab::ConfigFormat::kTrl, 1, "sft.yaml");
  EXPECT_TRUE(c.unused.empty());
  const auto assistant_remarks = [](const ab::TrainerConfig& config) {
    return std::count_if(config.remarks.begin(), config.remarks.end(), [](const ab::TrainerConfig::Remark& r) {
      return r.text.rfind("sets assistant_only_loss: true, so TRL trains only the assistant tokens", 0) == 0;
    });
  };
  EXPECT_EQ(assistant_remarks(c), 1);
  EXPECT_EQ(assistant_remarks(ab::parse_trainer_config("assistant_only_loss: false\n", ab::ConfigFormat::kTrl, 1, "sft.yaml")), 0);
  EXPECT_NE(error_of("completion_only_loss: sometimes\n").find("completion_only_loss"), std::string::npos);
  // axolotl's train_on_inputs: true labels the prompts too: a completion_mask is left out.
  EXPECT_FALSE(read("train_on_inputs: true\n", ab::ConfigFormat::kAxolotl).data.completion_only_loss);
  EXPECT_TRUE(read("train_on_inputs: false\n", ab::ConfigFormat::kAxolotl).data.completion_only_loss);
  // The command line wins.
  EXPECT_TRUE(read("completion_only_loss: false\n", ab::ConfigFormat::kTrl, 1,
                   [](const std::string& option) { return option == "--completion-only-loss"; })
                  .data.completion_only_loss);
}

// An option given on the command line wins over the file; --model also blocks the file's model
// (either model option names the model).
TEST(TrainerConfig, TheCommandLineOverridesTheFile) {
  const auto given = [](const std::string& option) { return option == "--seq-len" || option == "--model"; };
  ab::WorkloadOptions w;
  w.seq_len = 32;
  w.model.preset = "gpt2-tiny";
  const ab::TrainerConfig c = ab::parse_trainer_config(
      "model_name_or_path: some-org/some-model\nmax_length: 2048\nper_device_train_batch_size: 2\n",
      ab::ConfigFormat::kTrl, 1, "sft.yaml");
  ab::apply_trainer_config(c, w, given);
  EXPECT_EQ(w.seq_len, 32);
  EXPECT_EQ(w.model.preset, "gpt2-tiny");
  EXPECT_EQ(w.model.hf_config, "");
  EXPECT_EQ(w.batch, 2);
  const Lines notes = ab::trainer_config_notes(c, given, w);
  EXPECT_NE(std::find(notes.begin(), notes.end(), "the command line overrides sft.yaml's --hf-config --seq-len"),
            notes.end());
  // A default the file leaves out is the trainer's, not the file's.
  const auto lr_given = [](const std::string& option) { return option == "--lr" || option == "--seq-len"; };
  const Lines lr_notes = ab::trainer_config_notes(c, lr_given, w);
  EXPECT_NE(std::find(lr_notes.begin(), lr_notes.end(), "the command line overrides sft.yaml's --seq-len and TRL's default --lr"),
            lr_notes.end())
      << joined(lr_notes);
  // Every digit of a value is kept.
  EXPECT_EQ(read("learning_rate: 0.000123456789\n").optimizer.lr, 0.000123456789);
}

// --lora-rank 0 on the command line is full fine-tuning: the file's adapter settings (alpha,
// targets, dropout, the base's quantisation) have nothing left to shape and are dropped with the
// rank, named in the note; another --base-quant drops the file's NF4 double quantisation.
TEST(TrainerConfig, TurningLoraOffOnTheCommandLineDropsTheFilesAdapterSettings) {
  const std::string qlora =
      "use_peft: true\nlora_r: 8\nlora_alpha: 16\nlora_dropout: 0.1\n"
      "load_in_4bit: true\nbnb_4bit_quant_type: nf4\nuse_bnb_nested_quant: true\n";
  const ab::TrainerConfig c = ab::parse_trainer_config(qlora, ab::ConfigFormat::kTrl, 1, "sft.yaml");
  const auto rank_given = [](const std::string& option) { return option == "--lora-rank"; };
  ab::WorkloadOptions full;  // the command line's --lora-rank 0
  ab::apply_trainer_config(c, full, rank_given);
  EXPECT_FALSE(full.lora.enabled());
  EXPECT_EQ(full.lora.base_quant, ab::BaseQuant::kNone);
  EXPECT_FALSE(full.lora.double_quant);
  EXPECT_EQ(full.lora.dropout, 0.0);
  EXPECT_NO_THROW(ab::validate_workload(full));
  const Lines notes = ab::trainer_config_notes(c, rank_given, full);
  EXPECT_NE(std::find(notes.begin(), notes.end(),
                      "the command line overrides sft.yaml's --lora-rank, and with it drops --lora-alpha --lora-dropout "
                      "--base-quant --double-quant --kbit-prep (nothing left to shape)"),
            notes.end())
      << joined(notes);
  EXPECT_EQ(notes[0].find("--lora-targets"), std::string::npos) << notes[0];  // no PEFT default targets

  // Another rank keeps the file's adapters; --base-quant int8 drops only the double quantisation.
  ab::WorkloadOptions rank32;
  rank32.lora.rank = 32;
  ab::apply_trainer_config(c, rank32, rank_given);
  EXPECT_EQ(rank32.lora.alpha, 16.0);
  EXPECT_TRUE(rank32.lora.double_quant);
  ab::WorkloadOptions int8;
  int8.lora.base_quant = ab::BaseQuant::kInt8;
  ab::apply_trainer_config(c, int8, [](const std::string& option) { return option == "--base-quant"; });
  EXPECT_EQ(int8.lora.rank, 8);
  EXPECT_EQ(int8.lora.base_quant, ab::BaseQuant::kInt8);
  EXPECT_FALSE(int8.lora.double_quant);
  EXPECT_NO_THROW(ab::validate_workload(int8));
}

// The round trip: what --emit trl (and --emit axolotl) prints for a split, read back, is the same
// workload, and prints the same settings again.
TEST(TrainerConfig, EmitReadBackIsTheSameWorkload) {
  struct Case {
    const char* name;
    ab::WorkloadOptions w;
    ab::SplitConfig split;
  };
  std::vector<Case> cases;
  {
    Case c{"plain fp32", {}, {}};
    c.w.model.preset = "gpt2-tiny";
    c.w.seq_len = 64;
    c.w.batch = 16;
    // The trainers clip at 1 unless told: a run that did not clip is said in a comment, and reads
    // back as clipping (TrainerSettings.PlainSplitInEveryFormat).
    c.w.optimizer.max_grad_norm = ab::kTrainerMaxGradNorm;
    c.split.micro_batch = 4;
    c.split.accum_steps = 4;
    cases.push_back(c);
  }
  {
    Case c = cases.front();
    c.name = "bf16, checkpointing, LoRA on the attention, bfd packing, grouped";
    c.split.precision = ab::Precision::kBf16;
    c.split.activation_checkpointing = ab::Checkpointing::kBlocks;
    c.w.precisions = {ab::Precision::kBf16};
    c.w.grid.checkpointing = ab::Checkpointing::kBlocks;
    c.w.lora.rank = 4;
    c.w.lora.alpha = 8;
    c.w.lora.dropout = 0.05;
    c.w.lora.targets = "attention";
    c.w.data.packing = ab::Packing::kBfd;
    c.w.data.group_by_length = true;
    cases.push_back(c);
  }
  {
    Case c = cases.front();
    c.name = "fp16, variable lengths padded to a multiple of 16";
    c.split.precision = ab::Precision::kFp16;
    c.w.precisions = {ab::Precision::kFp16};
    c.w.data.lengths = ab::LengthMode::kVariable;
    c.w.data.padding = ab::Padding::kMultiple;
    c.w.data.pad_multiple = 16;
    cases.push_back(c);
  }
  {
    // One module: TRL would turn [mlp.c_proj] into the pattern "mlp.c_proj", which matches no
    // whole path, so the emitted key is a pattern that does.
    Case c = cases.front();
    c.name = "LoRA on one module";
    c.w.lora.rank = 4;
    c.w.lora.alpha = 8;
    c.w.lora.targets = "mlp_c_proj";
    cases.push_back(c);
  }
  {
    // rsLoRA: use_rslora (TRL), peft_use_rslora (axolotl), read back as --lora-rslora.
    Case c = cases.front();
    c.name = "rank-stabilized LoRA";
    c.w.lora.rank = 16;
    c.w.lora.alpha = 16;
    c.w.lora.rslora = true;
    cases.push_back(c);
  }
  {
    // On CUDA: an fp32 split measured with TF32 writes tf32: true (the Trainer's default is off);
    // torch's default AdamW kernels are optim adamw_torch, which reads back as foreach there.
    Case c = cases.front();
    c.name = "fp32 on CUDA with TF32, foreach AdamW";
    c.w.device = "cuda";
    c.w.optimizer.kind = ab::OptimizerKind::kAdamWForeach;
    c.split.optimizer = ab::OptimizerKind::kAdamWForeach;  // the split's optimizer is what is emitted
    cases.push_back(c);
  }
  for (const Case& c : cases) {
    const ab::ModelConfig model = ab::resolve_model(c.w.model);
    const ab::TrainerSettings out = ab::trainer_settings(c.split, c.w, ab::peft_target_modules(model, c.w.lora));
    const std::string yaml = joined(ab::settings_lines(out, ab::SettingsFormat::kTrl));
    ab::WorkloadOptions back;
    back.data.lengths = c.w.data.lengths;  // the data's lengths are no Trainer setting
    back.model = c.w.model;                // --emit leaves the model to the user's own config
    back.device = c.w.device;              // and the device
    ab::apply_trainer_config(ab::parse_trainer_config(yaml, ab::ConfigFormat::kTrl, 1, "emitted.yaml"), back,
                             [](const std::string& option) { return option == "--model"; });
    SCOPED_TRACE(std::string(c.name) + "\n" + yaml);
    EXPECT_EQ(back.seq_len, c.w.seq_len);
    EXPECT_EQ(back.batch, c.w.batch);
    EXPECT_EQ(back.precisions, c.w.precisions);
    EXPECT_EQ(back.optimizer.kind, c.w.optimizer.kind);
    EXPECT_EQ(back.optimizer.max_grad_norm, c.w.optimizer.max_grad_norm);
    // TF32 acts on fp32 matmuls on CUDA only: elsewhere the file leaves it out (read as off).
    if (c.w.device == "cuda" && c.split.precision == ab::Precision::kFp32) EXPECT_TRUE(back.tf32);
    else EXPECT_FALSE(back.tf32);
    EXPECT_EQ(back.grid.checkpointing, c.w.grid.checkpointing);
    EXPECT_EQ(back.data.packing, c.w.data.packing);
    EXPECT_EQ(back.data.group_by_length, c.w.data.group_by_length);
    EXPECT_EQ(back.lora.rank, c.w.lora.rank);
    if (c.w.lora.enabled()) {
      EXPECT_DOUBLE_EQ(back.lora.alpha, c.w.lora.alpha);
      EXPECT_EQ(back.lora.rslora, c.w.lora.rslora);
      EXPECT_DOUBLE_EQ(ab::lora_scaling(back.lora), ab::lora_scaling(c.w.lora));
      EXPECT_NEAR(back.lora.dropout, c.w.lora.dropout, 1e-12);
      // The same adapters: the names differ ("attention" vs PEFT's), the layers do not.
      EXPECT_EQ(ab::lora_parameter_count(model, back.lora), ab::lora_parameter_count(model, c.w.lora));
    }
    if (c.w.data.lengths != ab::LengthMode::kFixed) {
      EXPECT_EQ(back.data.padding, c.w.data.padding);
      EXPECT_EQ(back.data.pad_multiple, c.w.data.pad_multiple);
    }
    // And the settings it prints again are the same lines, but for the comment a bfd split padded
    // to T gets: TRL's bfd rows are padding-free, which the file reads back as.
    const ab::TrainerSettings again = ab::trainer_settings(c.split, back, ab::peft_target_modules(model, back.lora));
    std::string expected = yaml;
    const std::string padded_rows = "# measured with every packed row padded to max_length";
    if (const size_t at = expected.find(padded_rows); at != std::string::npos) {
      expected.erase(at, expected.find('\n', at) + 1 - at);
    }
    EXPECT_EQ(joined(ab::settings_lines(again, ab::SettingsFormat::kTrl)), expected);

    // axolotl: the same, from its keys.
    const std::string axolotl = joined(ab::settings_lines(out, ab::SettingsFormat::kAxolotl));
    ab::WorkloadOptions from_axolotl;
    from_axolotl.model = c.w.model;
    from_axolotl.device = c.w.device;
    from_axolotl.data.lengths = c.w.data.lengths;
    const ab::TrainerConfig axolotl_config = ab::parse_trainer_config(axolotl, ab::ConfigFormat::kAxolotl, 1, "emitted.yml");
    ab::apply_trainer_config(axolotl_config, from_axolotl, [](const std::string& option) { return option == "--model"; });
    // Checkpointed, it says use_reentrant: false, what was measured (axolotl's default is reentrant).
    for (const ab::TrainerConfig::Remark& r : axolotl_config.remarks)
      EXPECT_EQ(r.text.find("use_reentrant: true"), std::string::npos) << r.text;
    SCOPED_TRACE(axolotl);
    EXPECT_EQ(from_axolotl.seq_len, c.w.seq_len);
    EXPECT_EQ(from_axolotl.batch, c.w.batch);
    EXPECT_EQ(from_axolotl.precisions, c.w.precisions);
    EXPECT_EQ(from_axolotl.grid.checkpointing, c.w.grid.checkpointing);
    EXPECT_EQ(from_axolotl.data.packing, c.w.data.packing);
    EXPECT_EQ(from_axolotl.lora.rank, c.w.lora.rank);
    EXPECT_EQ(from_axolotl.lora.rslora, c.w.lora.rslora);
    EXPECT_EQ(from_axolotl.optimizer.kind, c.w.optimizer.kind);
    // TF32 acts on fp32 CUDA matmuls only; elsewhere axolotl's "auto" reads as on, to no effect.
    if (c.w.device == "cuda" && c.split.precision == ab::Precision::kFp32) EXPECT_EQ(from_axolotl.tf32, back.tf32);
  }
}

// The emitted file names the model (a preset's Hub id), and --trl-config / --axolotl-config read
// that id back as the preset, without the Hugging Face cache: the same job, the same lines.
TEST(TrainerConfig, TheEmittedModelReadsBackAsThePreset) {
  ab::WorkloadOptions w;
  w.model.preset = "qwen2.5-0.5b";
  w.seq_len = 1024;
  w.batch = 16;
  w.precisions = {ab::Precision::kBf16};
  w.grid.checkpointing = ab::Checkpointing::kBlocks;
  w.optimizer.max_grad_norm = ab::kTrainerMaxGradNorm;
  ab::SplitConfig split;
  split.micro_batch = 4;
  split.accum_steps = 4;
  split.precision = ab::Precision::kBf16;
  split.activation_checkpointing = ab::Checkpointing::kBlocks;
  const ab::TrainerSettings out = ab::trainer_settings(split, w, {});
  const Lines trl = ab::settings_lines(out, ab::SettingsFormat::kTrl);
  const Lines axolotl = ab::settings_lines(out, ab::SettingsFormat::kAxolotl);
  EXPECT_EQ(trl.at(1), "model_name_or_path: Qwen/Qwen2.5-0.5B");
  EXPECT_EQ(axolotl.at(1), "base_model: Qwen/Qwen2.5-0.5B");
  ::setenv("HF_HUB_CACHE", "/nonexistent/accumbench-test-cache", 1);  // no cache to read the id from
  for (const auto& [format, lines] : {std::make_pair(ab::ConfigFormat::kTrl, trl), std::make_pair(ab::ConfigFormat::kAxolotl, axolotl)}) {
    ab::WorkloadOptions back;  // accumbench's defaults: gpt2-mini, fp32, T=128
    ab::apply_trainer_config(ab::parse_trainer_config(joined(lines), format, 1, "emitted.yaml"), back, kNothingGiven);
    SCOPED_TRACE(joined(lines));
    EXPECT_EQ(back.model.preset, "qwen2.5-0.5b");
    EXPECT_EQ(back.model.hf_config, "");
    EXPECT_EQ(back.seq_len, w.seq_len);
    EXPECT_EQ(back.batch, w.batch);
    EXPECT_EQ(back.precisions, w.precisions);
    EXPECT_EQ(back.grid.checkpointing, w.grid.checkpointing);
    EXPECT_EQ(back.optimizer.max_grad_norm, w.optimizer.max_grad_norm);
    EXPECT_EQ(ab::settings_lines(ab::trainer_settings(split, back, {}), format == ab::ConfigFormat::kTrl
                                                                         ? ab::SettingsFormat::kTrl
                                                                         : ab::SettingsFormat::kAxolotl),
              lines);
  }
  ::unsetenv("HF_HUB_CACHE");
  // The Hub's other spellings of a preset's model: its Instruct variant, another case.
  EXPECT_EQ(read("model_name_or_path: Qwen/Qwen2.5-0.5B-Instruct\n").model.preset, "qwen2.5-0.5b");
  EXPECT_EQ(read("base_model: openai-community/gpt2\n", ab::ConfigFormat::kAxolotl).model.preset, "gpt2-124m");
  // What names the model otherwise: --hf-config's Hub id, its directory; accumbench's own small
  // presets name none (no key); a config file of another name is said in a comment.
  ab::ModelOptions m;
  m.preset = "gpt2-tiny";
  EXPECT_EQ(ab::trainer_model_name(m), "");
  m.hf_config = "some-org/some-model";
  EXPECT_EQ(ab::trainer_model_name(m), "some-org/some-model");
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "accumbench-model-name-test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << "{}";
  std::ofstream(dir / "shape.json") << "{}";
  m.hf_config = (dir / "config.json").string();
  EXPECT_EQ(ab::trainer_model_name(m), dir.string());
  m.hf_config = dir.string();
  EXPECT_EQ(ab::trainer_model_name(m), dir.string());
  ab::WorkloadOptions plain = w;
  plain.model.preset = "gpt2-tiny";
  for (const std::string& line : ab::settings_lines(ab::trainer_settings(split, plain, {}), ab::SettingsFormat::kTrl))
    EXPECT_EQ(line.find("model_name_or_path"), std::string::npos) << line;
  plain.model.hf_config = (dir / "shape.json").string();
  EXPECT_EQ(ab::settings_lines(ab::trainer_settings(split, plain, {}), ab::SettingsFormat::kAxolotl).at(1),
            "# base_model: " + (dir / "shape.json").string() +
                " is a config file, not a model directory or Hub id: write the model it describes");
  std::filesystem::remove_all(dir);
}

// What TRL and axolotl refuse or read otherwise is refused: a repeated key (PyYAML keeps the last
// value, yaml-cpp the first: a batch of 2 was read where TRL trains 8), 4-bit and 8-bit together.
// axolotl's bf16 loads the weights in bf16 (resolve_dtype); its bfloat16 alone, without autocast.
TEST(TrainerConfig, RepeatsConflictsAndAxolotlsWeightDtype) {
  try {
    (void)ab::parse_trainer_config("per_device_train_batch_size: 1\ngradient_accumulation_steps: 2\n"
                                   "per_device_train_batch_size: 4\n",
                                   ab::ConfigFormat::kTrl, 1, "dup.yaml");
    FAIL() << "a repeated key was read";
  } catch (const ab::UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              "dup.yaml sets per_device_train_batch_size twice (again on line 3); TRL and axolotl would take the last "
              "value, accumbench takes none: keep one");
  }
  try {
    (void)ab::parse_trainer_config("use_peft: true\nload_in_4bit: true\nload_in_8bit: true\n", ab::ConfigFormat::kTrl, 1,
                                   "both.yaml");
    FAIL() << "4-bit and 8-bit together were read";
  } catch (const ab::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("both.yaml sets both load_in_4bit and load_in_8bit"), std::string::npos);
  }
  EXPECT_EQ(read("bf16: true\n", ab::ConfigFormat::kAxolotl).weights_dtype, ab::Precision::kBf16);
  EXPECT_EQ(read("bf16: false\n", ab::ConfigFormat::kAxolotl).weights_dtype, ab::Precision::kFp32);
  const ab::WorkloadOptions plain = read("bf16: false\nbfloat16: true\n", ab::ConfigFormat::kAxolotl);
  EXPECT_EQ(plain.weights_dtype, ab::Precision::kBf16);
  EXPECT_EQ(plain.precisions, std::vector<ab::Precision>{ab::Precision::kFp32});
}

// axolotl: its keys and defaults (sequence_len 512, micro_batch_size 1, bf16 auto, no
// checkpointing, padding to a multiple of 64); flash_attention is listed as not used (the
// attention follows the device), optimizers accumbench does not run are refused.
// axolotl's batch_size without gradient_accumulation_steps: floored to whole micro-batches, as
// normalize_config does (batch_size // micro_batch_size), with a remark; below one micro-batch it
// would be 0 accumulation steps: refused.
TEST(TrainerConfig, AxolotlFloorsItsBatchSize) {
  const ab::TrainerConfig c = ab::parse_trainer_config("base_model: gpt2-tiny\nmicro_batch_size: 4\nbatch_size: 10\n",
                                                       ab::ConfigFormat::kAxolotl, 1, "a.yml");
  ab::WorkloadOptions w;
  ab::apply_trainer_config(c, w, kNothingGiven);
  EXPECT_EQ(w.batch, 8);
  const Lines notes = ab::trainer_config_notes(c, kNothingGiven, w);
  EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const std::string& n) {
    return n == "a.yml: batch_size 10 is not a multiple of micro_batch_size 4: axolotl floors it to 2 accumulation "
                "steps, an effective batch of 8 per device, which is what is measured";
  })) << joined(notes);
  // --batch on the command line: the remark is about a run that is not the one measured.
  const auto batch_given = [](const std::string& option) { return option == "--batch"; };
  const Lines overridden = ab::trainer_config_notes(c, batch_given, w);
  EXPECT_TRUE(std::none_of(overridden.begin(), overridden.end(), [](const std::string& n) {
    return n.find("floors it") != std::string::npos;
  }));
  EXPECT_EQ(error_of("micro_batch_size: 4\nbatch_size: 3\n", ab::ConfigFormat::kAxolotl),
            "sft.yaml: batch_size 3 is below micro_batch_size 4, which axolotl floors to 0 accumulation steps; raise "
            "batch_size or give gradient_accumulation_steps instead");
}

TEST(TrainerConfig, AxolotlKeys) {
  ab::WorkloadOptions w = read("", ab::ConfigFormat::kAxolotl);
  EXPECT_EQ(w.seq_len, 512);
  EXPECT_EQ(w.batch, 1);
  EXPECT_EQ(w.precisions, std::vector<ab::Precision>{ab::Precision::kBf16});
  EXPECT_EQ(w.grid.checkpointing, ab::Checkpointing::kNone);
  EXPECT_EQ(w.data.padding, ab::Padding::kMultiple);
  EXPECT_EQ(w.data.pad_multiple, 64);

  const std::string yaml = R"(
base_model: qwen2.5-0.5b
sequence_len: 1024
micro_batch_size: 2
gradient_accumulation_steps: 8
bf16: auto
tf32: false
gradient_checkpointing: true
sample_packing: true
flash_attention: true
adapter: lora
lora_r: 32
lora_alpha: 16
lora_dropout: 0.05
lora_target_linear: true
optimizer: adamw_torch_fused
datasets:
  - path: tatsu-lab/alpaca
    type: alpaca
)";
  w = read(yaml, ab::ConfigFormat::kAxolotl, 4);
  EXPECT_EQ(w.weights_dtype, ab::Precision::kBf16);  // resolve_dtype: bf16 loads the model in bfloat16
  EXPECT_EQ(w.model.preset, "qwen2.5-0.5b");
  EXPECT_EQ(w.seq_len, 1024);
  EXPECT_EQ(w.batch, 2 * 8 * 4);
  EXPECT_EQ(w.precisions, std::vector<ab::Precision>{ab::Precision::kBf16});
  EXPECT_EQ(w.grid.checkpointing, ab::Checkpointing::kBlocks);
  EXPECT_EQ(w.data.packing, ab::Packing::kBfd);
  EXPECT_EQ(w.lora.rank, 32);
  EXPECT_EQ(w.lora.targets, "all-linear");
  const ab::TrainerConfig c = ab::parse_trainer_config(yaml, ab::ConfigFormat::kAxolotl, 4, "qlora.yml");
  EXPECT_EQ(c.unused, (Lines{"flash_attention (accumbench's attention follows the device)", "datasets"}));
  EXPECT_FALSE(w.tf32);  // tf32: false
  EXPECT_TRUE(c.unknown.empty());

  // batch_size alone: gradient_accumulation_steps = batch_size / micro_batch_size.
  EXPECT_EQ(read("micro_batch_size: 2\nbatch_size: 16\n", ab::ConfigFormat::kAxolotl).batch, 16);
  // Both: axolotl refuses the file (check_gas_bsz), and so does accumbench.
  EXPECT_NE(error_of("micro_batch_size: 2\nbatch_size: 16\ngradient_accumulation_steps: 8\n", ab::ConfigFormat::kAxolotl)
                .find("sets both gradient_accumulation_steps and batch_size"),
            std::string::npos);
  EXPECT_NE(error_of("optimizer: lion_8bit\n", ab::ConfigFormat::kAxolotl).find("sets optimizer: lion_8bit"),
            std::string::npos);
  EXPECT_NE(error_of("gradient_checkpointing: offload\n", ab::ConfigFormat::kAxolotl).find("offloads"),
            std::string::npos);
  EXPECT_NE(error_of("liger_fused_linear_cross_entropy: true\n", ab::ConfigFormat::kAxolotl).find("Liger"),
            std::string::npos);
  // Preference / RL training, FP8 matmuls and the older name of context parallelism: refused.
  for (const std::string yaml : {"rl: dpo", "rl: grpo", "fp8: true", "sequence_parallel_degree: 2"}) {
    const std::string key = yaml.substr(0, yaml.find(':'));
    EXPECT_NE(error_of(yaml + "\n", ab::ConfigFormat::kAxolotl).find("sets " + key), std::string::npos) << yaml;
  }
  EXPECT_EQ(error_of("seed: 0\n", ab::ConfigFormat::kAxolotl), "(no error)");  // 0 is a seed like any other
  EXPECT_EQ(read("seed: 0\n").model.seed, 0u);
}

// axolotl's collator pads past sequence_len where it is no multiple of pad_to_multiple_of (64
// unset): pad_to_sequence_len then pads every batch to the next multiple, which accumbench does not
// run (refused with the fix); with the multiple set to T it is T; unset, each batch rounds up.
TEST(TrainerConfig, AxolotlPaddingPastSequenceLenIsRefused) {
  EXPECT_EQ(error_of("sequence_len: 100\npad_to_sequence_len: true\n", ab::ConfigFormat::kAxolotl),
            "sft.yaml: pad_to_sequence_len pads every batch to 128 (sequence_len 100 rounded up to a multiple of "
            "pad_to_multiple_of 64, its default), and accumbench runs no row longer than --seq-len; set sequence_len "
            "to 128, or pad_to_multiple_of to 100");
  EXPECT_NE(error_of("sequence_len: 100\nsample_packing: true\n", ab::ConfigFormat::kAxolotl).find("pads every batch to 128"),
            std::string::npos);
  const ab::WorkloadOptions w =
      read("sequence_len: 100\npad_to_sequence_len: true\npad_to_multiple_of: 100\n", ab::ConfigFormat::kAxolotl);
  EXPECT_EQ(w.data.padding, ab::Padding::kMax);
  EXPECT_EQ(w.seq_len, 100);
  const ab::WorkloadOptions unset = read("sequence_len: 32\n", ab::ConfigFormat::kAxolotl);
  EXPECT_EQ(unset.data.padding, ab::Padding::kMultiple);  // 64 > 32: refused where the samples are known
  EXPECT_EQ(unset.data.pad_multiple, 64);
}

// What the trainers do with a file beyond its keys (found running TRL's, the alignment handbook's
// and axolotl's own example configs): the attention kernel they name, the processes accelerate
// launches, keys only an older TRL reads (whose loss was the full nll), axolotl's LoRA over a base
// that load_in_4bit does not quantise without adapter: qlora, its fused LoRA kernels, and the
// padding sample packing implies.
TEST(TrainerConfig, WhatTheTrainersDoBeyondTheirKeys) {
  // Memory-efficient attention is what accumbench runs on CUDA; eager's scores are refused.
  for (const std::string impl : {"sdpa", "flash_attention_2", "kernels-community/flash-attn3"}) {
    const ab::TrainerConfig c =
        ab::parse_trainer_config("attn_implementation: " + impl + "\n", ab::ConfigFormat::kTrl, 1, "sft.yaml");
    EXPECT_EQ(c.unused, Lines{"attn_implementation (accumbench's attention follows the device)"}) << impl;
  }
  EXPECT_EQ(error_of("attn_implementation: eager\n"),
            "sft.yaml sets attn_implementation: eager, which runs eager attention and its (b, H, T, T) scores and "
            "accumbench does not model; remove the key to measure memory-efficient attention (sdpa, transformers' "
            "default), or see eager attention's memory with plan --attention explicit");
  // num_processes is the job's process count: it must be the one planned.
  EXPECT_EQ(read("num_processes: 4\nper_device_train_batch_size: 2\n", ab::ConfigFormat::kTrl, 4).batch, 8);
  EXPECT_EQ(error_of("num_processes: 4\n"),
            "sft.yaml sets num_processes: 4 (accelerate launch's processes), but this command plans 1 process; plan "
            "it with plan --world-size 4, or sweep it under torchrun --nproc-per-node 4");

  // bfd packing without a flash kernel: TRL's padding-free rows attend across documents. (The
  // files below name their optim: one left out is a remark of its own, tested above.)
  const ab::TrainerConfig packed_sdpa =
      ab::parse_trainer_config("packing: true\noptim: sgd\n", ab::ConfigFormat::kTrl, 1, "sft.yaml");
  ASSERT_EQ(packed_sdpa.remarks.size(), 1u);
  EXPECT_EQ(packed_sdpa.remarks[0].text.rfind("packs with bfd under transformers' default sdpa attention, where TRL's "
                                              "padding-free rows attend across documents",
                                              0),
            0u);
  EXPECT_TRUE(ab::parse_trainer_config("packing: true\nattn_implementation: flash_attention_2\noptim: sgd\n",
                                       ab::ConfigFormat::kTrl, 1, "sft.yaml")
                  .remarks.empty());
  EXPECT_TRUE(ab::parse_trainer_config("packing: true\npacking_strategy: wrapped\noptim: sgd\n", ab::ConfigFormat::kTrl, 1,
                                       "sft.yaml")
                  .remarks.empty());
  // A key only TRL before 1.7 reads: that TRL's loss (nll), said in a remark; max_seq_length
  // overrides max_length as TRL 0.19 read it; "ffd" is TRL 0.19's name for bfd.
  const ab::TrainerConfig old_trl = ab::parse_trainer_config(
      "max_seq_length: 2048\nmax_length: 128\ntorch_dtype: bfloat16\npacking: true\npacking_strategy: ffd\noptim: sgd\n",
      ab::ConfigFormat::kTrl, 1, "zephyr.yaml");
  ab::WorkloadOptions w;
  ab::apply_trainer_config(old_trl, w, kNothingGiven);
  EXPECT_EQ(w.seq_len, 2048);
  EXPECT_EQ(w.trl_loss, "nll");
  EXPECT_EQ(w.data.packing, ab::Packing::kBfd);
  EXPECT_EQ(w.weights_dtype, ab::Precision::kBf16);
  ASSERT_EQ(old_trl.remarks.size(), 2u);  // and bfd without a flash kernel
  EXPECT_EQ(old_trl.remarks[0].text,
            std::string{"sets max_seq_length, which only TRL before 1.7.0 reads: planned with that TRL's loss, nll over the "
                  "whole logits (loss_type chunked_nll is TRL's default since 1.7.0; set loss_type to choose)"});
  EXPECT_EQ(read("max_length: 128\n").trl_loss, "chunked_nll");
  EXPECT_EQ(read("torch_dtype: float32\nloss_type: chunked_nll\n").trl_loss, "chunked_nll");  // said: kept
  // TRL 1.x's QLoRA keeps the non-quantised parameters in the file's dtype (--kbit-prep none) and
  // casts its adapters to bf16 (--adapter-dtype bf16; under fp16 said, and kept fp32); a file for an
  // older TRL, which still prepared the model, keeps PEFT's.
  const ab::TrainerConfig trl_qlora = ab::parse_trainer_config(
      "use_peft: true\nload_in_4bit: true\ndtype: bfloat16\noptim: sgd\n", ab::ConfigFormat::kTrl, 1, "sft.yaml");
  w = ab::WorkloadOptions{};
  ab::apply_trainer_config(trl_qlora, w, kNothingGiven);
  EXPECT_FALSE(w.lora.kbit_upcast);
  EXPECT_EQ(w.weights_dtype, ab::Precision::kBf16);
  EXPECT_EQ(w.lora.adapter_dtype, ab::Precision::kBf16);
  EXPECT_TRUE(trl_qlora.remarks.empty());
  EXPECT_NO_THROW(ab::validate_workload(w));
  const ab::TrainerConfig trl_qlora_fp16 = ab::parse_trainer_config(
      "use_peft: true\nload_in_8bit: true\ndtype: float16\nfp16: true\n", ab::ConfigFormat::kTrl, 1, "sft.yaml");
  w = ab::WorkloadOptions{};
  ab::apply_trainer_config(trl_qlora_fp16, w, kNothingGiven);
  EXPECT_EQ(w.lora.adapter_dtype, ab::Precision::kFp32);
  const auto adapter_note = [](const Lines& notes) {
    for (const std::string& note : notes)
      if (note.rfind("sft.yaml: TRL 1.x's SFTTrainer casts the adapters", 0) == 0) return note;
    return std::string();
  };
  EXPECT_NE(adapter_note(ab::trainer_config_notes(trl_qlora_fp16, kNothingGiven, w))
                .find("which accumbench plans under bf16 autocast only (here fp16): they are kept in fp32"),
            std::string::npos);
  // The dtype follows the precision the command line gives: bf16 over the fp16 file's, fp16 over
  // the bf16 file's (fp32 adapters then, with the note, as the fp16 file reads).
  const auto precision_given = [](const std::string& option) { return option == "--precision"; };
  w = ab::WorkloadOptions{};
  w.precisions = {ab::Precision::kBf16};
  ab::apply_trainer_config(trl_qlora_fp16, w, precision_given);
  EXPECT_EQ(w.lora.adapter_dtype, ab::Precision::kBf16);
  EXPECT_EQ(adapter_note(ab::trainer_config_notes(trl_qlora_fp16, precision_given, w)), "");
  EXPECT_NE(ab::trainer_config_notes(trl_qlora_fp16, precision_given, w).front().find(" --adapter-dtype bf16"),
            std::string::npos);
  w = ab::WorkloadOptions{};
  w.precisions = {ab::Precision::kFp16};
  ab::apply_trainer_config(trl_qlora, w, precision_given);
  EXPECT_EQ(w.lora.adapter_dtype, ab::Precision::kFp32);
  EXPECT_NE(adapter_note(ab::trainer_config_notes(trl_qlora, precision_given, w)).find("(here fp16)"), std::string::npos);
  EXPECT_EQ(read("use_peft: true\nload_in_4bit: true\n").lora.adapter_dtype, ab::Precision::kBf16);  // bf16 by default
  EXPECT_EQ(read("use_peft: true\ndtype: bfloat16\n").lora.adapter_dtype, ab::Precision::kFp32);     // no quantised base
  // --base-quant none on the command line: no quantised model, so TRL's cast goes with it.
  w = ab::WorkloadOptions{};
  const auto base_quant_given = [](const std::string& option) { return option == "--base-quant"; };
  ab::apply_trainer_config(trl_qlora, w, base_quant_given);
  EXPECT_EQ(w.lora.adapter_dtype, ab::Precision::kFp32);
  EXPECT_TRUE(read("use_peft: true\nload_in_4bit: true\ntorch_dtype: bfloat16\n").lora.kbit_upcast);
  EXPECT_TRUE(read("use_peft: true\nload_in_4bit: true\ndtype: float16\n").lora.kbit_upcast);  // under bf16

  // axolotl: peft_autocast_adapter_dtype: false keeps the adapters in a 16-bit base's dtype; over a
  // quantised base (or fp32 weights) PEFT keeps them fp32, and over fp16 weights they could not train.
  const std::string axolotl_lora = "base_model: llama-tiny\nadapter: lora\nlora_r: 8\nlora_alpha: 16\n"
                                   "lora_target_linear: true\npeft_autocast_adapter_dtype: false\n";
  const auto axolotl = [](const std::string& yaml) { return read(yaml, ab::ConfigFormat::kAxolotl).lora.adapter_dtype; };
  EXPECT_EQ(axolotl(axolotl_lora + "bf16: true\n"), ab::Precision::kBf16);
  EXPECT_EQ(axolotl(axolotl_lora + "bf16: true\nload_in_8bit: true\n"), ab::Precision::kFp32);
  EXPECT_EQ(axolotl(axolotl_lora + "bf16: false\n"), ab::Precision::kFp32);
  EXPECT_EQ(axolotl(axolotl_lora.substr(0, axolotl_lora.find("peft_")) + "bf16: true\n"), ab::Precision::kFp32);
  // ... and what the command line changes: fp32 weights or a quantised base keep PEFT's fp32.
  for (const char* option : {"--weights-dtype", "--base-quant"}) {
    ab::WorkloadOptions changed;
    if (std::string(option) == "--base-quant") changed.lora.base_quant = ab::BaseQuant::kNf4;
    const auto given = [option](const std::string& o) { return o == option; };
    ab::apply_trainer_config(ab::parse_trainer_config(axolotl_lora + "bf16: true\n", ab::ConfigFormat::kAxolotl, 1, "ax.yml"),
                             changed, given);
    EXPECT_EQ(changed.lora.adapter_dtype, ab::Precision::kFp32) << option;
  }
  EXPECT_NE(error_of(axolotl_lora + "bf16: false\nfp16: true\n", ab::ConfigFormat::kAxolotl)
                .find("sets peft_autocast_adapter_dtype: false, which keeps the adapters in the fp16 weights' dtype"),
            std::string::npos);

  // axolotl: adapter: lora with load_in_4bit is an unquantised base, cast to fp32.
  const std::string lora =
      "base_model: llama-tiny\nadapter: lora\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\nbf16: true\n"
      "learning_rate: 0.0002\nmicro_batch_size: 2\ngradient_accumulation_steps: 2\n";
  const ab::TrainerConfig lora4 =
      ab::parse_trainer_config(lora + "load_in_4bit: true\n", ab::ConfigFormat::kAxolotl, 1, "ax.yml");
  w = ab::WorkloadOptions{};
  ab::apply_trainer_config(lora4, w, kNothingGiven);
  EXPECT_EQ(w.lora.base_quant, ab::BaseQuant::kNone);
  EXPECT_EQ(w.weights_dtype, ab::Precision::kFp32);
  EXPECT_EQ(w.precisions, std::vector<ab::Precision>{ab::Precision::kBf16});
  ASSERT_EQ(lora4.remarks.size(), 2u);
  EXPECT_EQ(lora4.remarks[0].text.rfind("sets load_in_4bit with adapter: lora, for which axolotl builds no 4-bit config", 0),
            0u);
  // A remark about what the command line replaces is left out (--base-quant nf4 over this file
  // plans a quantised base, which the remark would deny).
  const auto given_base_quant = [](const std::string& option) { return option == "--base-quant"; };
  const Lines overridden = ab::trainer_config_notes(lora4, given_base_quant, w);
  EXPECT_TRUE(std::none_of(overridden.begin(), overridden.end(),
                           [](const std::string& n) { return n.find("builds no 4-bit config") != std::string::npos; }))
      << joined(overridden);
  const Lines kept = ab::trainer_config_notes(lora4, kNothingGiven, w);
  EXPECT_TRUE(std::any_of(kept.begin(), kept.end(),
                          [](const std::string& n) { return n.find("builds no 4-bit config") != std::string::npos; }));
  // Its fused LoRA kernels go on unless the file sets them (or over an 8-bit base).
  EXPECT_EQ(lora4.remarks[1].text.rfind("leaves the lora_*_kernel keys unset, so axolotl turns on its fused LoRA kernels", 0),
            0u);
  const std::string kernels_off = "lora_mlp_kernel: false\nlora_qkv_kernel: false\nlora_o_kernel: false\n";
  EXPECT_TRUE(ab::parse_trainer_config(lora + kernels_off, ab::ConfigFormat::kAxolotl, 1, "ax.yml").remarks.empty());
  EXPECT_EQ(ab::parse_trainer_config(lora + "lora_mlp_kernel: true\n", ab::ConfigFormat::kAxolotl, 1, "ax.yml")
                .remarks.at(0)
                .text.rfind("turns on its fused LoRA kernels", 0),
            0u);
  // Over an 8-bit base: no kernels, and the embeddings go back to 16 bits after the fp32 cast
  // (--kbit-prep none), as over axolotl's 4-bit one.
  const ab::TrainerConfig lora8 =
      ab::parse_trainer_config(lora + "load_in_8bit: true\n", ab::ConfigFormat::kAxolotl, 1, "ax.yml");
  EXPECT_TRUE(lora8.remarks.empty());
  w = ab::WorkloadOptions{};
  ab::apply_trainer_config(lora8, w, kNothingGiven);
  EXPECT_EQ(w.lora.base_quant, ab::BaseQuant::kInt8);
  EXPECT_FALSE(w.lora.kbit_upcast);
  EXPECT_FALSE(read("base_model: llama-tiny\nadapter: qlora\nload_in_4bit: true\nlora_r: 8\nlora_alpha: 16\n"
                    "lora_target_linear: true\n",
                    ab::ConfigFormat::kAxolotl)
                   .lora.kbit_upcast);
  // Sample packing pads to sequence_len unless the file says otherwise (hint_sample_packing_padding).
  EXPECT_EQ(read("sample_packing: true\n", ab::ConfigFormat::kAxolotl).data.padding, ab::Padding::kMax);
  EXPECT_EQ(read("sample_packing: true\npad_to_sequence_len: false\n", ab::ConfigFormat::kAxolotl).data.padding,
            ab::Padding::kLongest);
  // The canonical attention key beside a legacy flag is refused, as axolotl does; LISA and ReLoRA
  // train otherwise.
  EXPECT_EQ(error_of("attn_implementation: flash_attention_2\nflash_attention: true\n", ab::ConfigFormat::kAxolotl),
            "sft.yaml sets attn_implementation beside the legacy flash_attention, which axolotl refuses; keep only "
            "attn_implementation");
  EXPECT_EQ(error_of("attn_implementation: flash_attention_2\n", ab::ConfigFormat::kAxolotl), "(no error)");
  EXPECT_NE(error_of("lisa_n_layers: 4\n", ab::ConfigFormat::kAxolotl).find("LISA"), std::string::npos);
  EXPECT_NE(error_of("relora: true\n", ab::ConfigFormat::kAxolotl).find("ReLoRA"), std::string::npos);
  // TF32 matmuls only with tf32: true, in both trainers (PyTorch's default is off); a sweep on
  // CUDA follows (--tf32), its own default being on, as the PyTorch anchor runs.
  EXPECT_FALSE(read("").tf32);
  EXPECT_TRUE(read("tf32: true\n").tf32);
  EXPECT_FALSE(read("tf32: false\n").tf32);
  EXPECT_TRUE(read("tf32: true\n", ab::ConfigFormat::kAxolotl).tf32);
  // axolotl's default, "auto", is TF32 wherever the GPU has it (Ampere and later; check_tf32).
  EXPECT_TRUE(read("", ab::ConfigFormat::kAxolotl).tf32);
  EXPECT_TRUE(read("tf32: auto\n", ab::ConfigFormat::kAxolotl).tf32);
  EXPECT_FALSE(read("tf32: false\n", ab::ConfigFormat::kAxolotl).tf32);
  // An explicit null stays None there, which its builder reads as off (helper-91); bf16: null skips
  // auto and trains in fp32.
  EXPECT_FALSE(read("tf32: null\n", ab::ConfigFormat::kAxolotl).tf32);
  EXPECT_EQ(error_of("tf32: maybe\n", ab::ConfigFormat::kAxolotl),
            "sft.yaml: tf32 is \"maybe\", not true, false or auto; fix the key in the file");
  EXPECT_EQ(read("bf16: null\n", ab::ConfigFormat::kAxolotl).precisions, std::vector<ab::Precision>{ab::Precision::kFp32});
  EXPECT_EQ(read("", ab::ConfigFormat::kAxolotl).precisions, std::vector<ab::Precision>{ab::Precision::kBf16});
  // axolotl's bf16 takes auto as well (helper-96: the refusal said "true or false"); TRL's does not.
  EXPECT_EQ(error_of("bf16: maybe\n", ab::ConfigFormat::kAxolotl),
            "sft.yaml: bf16 is \"maybe\", not true, false or auto; fix the key in the file");
  EXPECT_EQ(error_of("bf16: [true]\n", ab::ConfigFormat::kAxolotl),
            "sft.yaml: bf16 is \"[true]\", not true, false or auto; fix the key in the file");
  EXPECT_EQ(error_of("bf16: maybe\n"), "sft.yaml: bf16 is \"maybe\", not true or false; fix the key in the file");
  EXPECT_EQ(error_of("tf32: auto\n"), "sft.yaml: tf32 is \"auto\", not true or false; fix the key in the file");
  EXPECT_TRUE(ab::WorkloadOptions{}.tf32);
}

// axolotl drops a sample longer than sequence_len unless excess_length_strategy says truncate (its
// handle_long_seq_in_dataset at 067b021); accumbench cuts real samples to T, so beside a lengths file
// or a token file's documents the notes say which axolotl would do; nothing for synthetic lengths,
// wrapped rows or truncate. Another value is refused as axolotl's schema refuses it.
TEST(TrainerConfig, AxolotlsExcessLengthStrategyBesideRealSamples) {
  const auto notes = [](const std::string& yaml, ab::LengthMode lengths, ab::Packing packing = ab::Packing::kNone) {
    const ab::TrainerConfig c = ab::parse_trainer_config(yaml, ab::ConfigFormat::kAxolotl, 1, "ax.yml");
    ab::WorkloadOptions w;
    ab::apply_trainer_config(c, w, kNothingGiven);
    w.data.lengths = lengths;
    w.data.packing = packing;
    std::string said;
    for (const std::string& note : ab::trainer_config_notes(c, kNothingGiven, w))
      if (note.find("sequence_len") != std::string::npos && note.find("excess_length_strategy") != std::string::npos)
        said += note;
    return said;
  };
  const std::string base = "sequence_len: 64\nmicro_batch_size: 2\ngradient_accumulation_steps: 2\n";
  EXPECT_EQ(notes(base, ab::LengthMode::kFile),
            "ax.yml: leaves out excess_length_strategy, so axolotl drops a sample longer than sequence_len, which "
            "accumbench cuts to T instead (the context line counts those it cut); excess_length_strategy: truncate "
            "trains what is measured");
  EXPECT_NE(notes(base + "excess_length_strategy: raise\n", ab::LengthMode::kFile)
                .find("sets excess_length_strategy: raise, which stops on a sample longer than sequence_len"),
            std::string::npos);
  EXPECT_NE(notes(base + "excess_length_strategy: drop\n", ab::LengthMode::kFile)
                .find("sets excess_length_strategy: drop, which drops a sample"),
            std::string::npos);
  EXPECT_EQ(notes(base + "excess_length_strategy: truncate\n", ab::LengthMode::kFile), "");
  EXPECT_EQ(notes(base, ab::LengthMode::kVariable), "");
  EXPECT_EQ(notes(base, ab::LengthMode::kFile, ab::Packing::kWrapped), "");
  // A --packing list whose first is wrapped still has jobs that cut samples to T: said, in any order.
  const auto listed = [&](const std::string& yaml, ab::Packing first, ab::Packing other) {
    const ab::TrainerConfig c = ab::parse_trainer_config(yaml, ab::ConfigFormat::kAxolotl, 1, "ax.yml");
    ab::WorkloadOptions w;
    ab::apply_trainer_config(c, w, kNothingGiven);
    w.data.lengths = ab::LengthMode::kFile;
    w.data.packing = first;
    w.data.other_packings = {other};
    std::string said;
    for (const std::string& note : ab::trainer_config_notes(c, kNothingGiven, w))
      if (note.find("excess_length_strategy") != std::string::npos) said += note;
    return said;
  };
  EXPECT_EQ(listed(base, ab::Packing::kWrapped, ab::Packing::kNone), notes(base, ab::LengthMode::kFile));
  EXPECT_EQ(listed(base, ab::Packing::kNone, ab::Packing::kWrapped), notes(base, ab::LengthMode::kFile));
  EXPECT_NE(error_of(base + "excess_length_strategy: cut\n", ab::ConfigFormat::kAxolotl)
                .find("excess_length_strategy is \"cut\", not drop, truncate or raise"),
            std::string::npos)
      << error_of(base + "excess_length_strategy: cut\n", ab::ConfigFormat::kAxolotl);
}
