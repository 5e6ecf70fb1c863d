// Trainer settings out (src/report/trainer_settings.cpp): each split as TRL's SFTConfig / the
// Trainer's arguments, axolotl's keys and accumbench's flags, line by line.
#include <gtest/gtest.h>

#include <algorithm>

#include "accumbench/error.hpp"
#include "accumbench/model_config.hpp"
#include "accumbench/report.hpp"
#include "accumbench/trainer_config.hpp"

namespace ab = accumbench;

namespace {

ab::SplitConfig split(int64_t micro, int64_t accum) {
  ab::SplitConfig s;
  s.micro_batch = micro;
  s.accum_steps = accum;
  return s;
}

// The trainers' clipping (max_grad_norm 1), so that the formats add no comment about it; a run
// that does not clip is PlainSplitInEveryFormat's last case.
ab::WorkloadOptions workload() {
  ab::WorkloadOptions w;
  w.seq_len = 1024;
  w.batch = 16;
  w.optimizer.max_grad_norm = ab::kTrainerMaxGradNorm;
  return w;
}

// LoRA r8 on llama-tiny at T=64, bf16 weights under bf16 autocast (TRL's and axolotl's QLoRA jobs).
ab::WorkloadOptions bf16_lora_workload() {
  ab::WorkloadOptions w = workload();
  w.model.preset = "llama-tiny";
  w.seq_len = 64;
  w.precisions = {ab::Precision::kBf16};
  w.weights_dtype = ab::Precision::kBf16;
  w.lora.rank = 8;
  return w;
}

using Lines = std::vector<std::string>;

}  // namespace

// Full fine-tuning, one process, fp32, no checkpointing: bf16 and gradient_checkpointing are
// written out as false, since SFTConfig turns both on when they are not given.
TEST(TrainerSettings, PlainSplitInEveryFormat) {
  const ab::TrainerSettings s = ab::trainer_settings(split(4, 4), workload(), {});
  EXPECT_EQ(ab::settings_lines(s, ab::SettingsFormat::kTrl),
            (Lines{"# TRL SFTConfig, for trl sft --config FILE.yaml (one process; each key is also a --KEY flag)",
                   "per_device_train_batch_size: 4", "gradient_accumulation_steps: 4", "gradient_checkpointing: false",
                   "bf16: false", "fp16: false", "max_length: 1024", "packing: false", "loss_type: nll"}));
  EXPECT_EQ(ab::settings_lines(s, ab::SettingsFormat::kAxolotl),
            (Lines{"# axolotl (one process)", "micro_batch_size: 4", "gradient_accumulation_steps: 4",
                   "sequence_len: 1024", "gradient_checkpointing: false", "bf16: false", "fp16: false",
                   "sample_packing: false"}));
  EXPECT_EQ(ab::settings_lines(s, ab::SettingsFormat::kArgs),
            (Lines{"# accumbench (one process): the split's flags; keep the model and data options of this run",
                   "--batch 16 --micro-batches 4 --seq-len 1024 --precision fp32 --activation-checkpointing none --max-grad-norm 1"}));
  EXPECT_EQ(ab::settings_summary(s),
            "Trainer settings (one process): per_device_train_batch_size=4 gradient_accumulation_steps=4 "
            "gradient_checkpointing=false bf16=false fp16=false max_length=1024 packing=false loss_type=nll");
  // A learning rate or weight decay someone chose (neither accumbench's default nor the trainer's)
  // is said in the trainers' formats and carried by accumbench's flags; plan's settings have none.
  ab::WorkloadOptions chosen = workload();
  chosen.optimizer.lr = 3e-4;
  chosen.optimizer.weight_decay = 0.1;
  const ab::TrainerSettings c = ab::trainer_settings(split(4, 4), chosen, {});
  EXPECT_EQ(ab::settings_lines(c, ab::SettingsFormat::kTrl).back(),
            "# this run's learning_rate 0.0003 (TRL's default: 2e-05) and weight_decay 0.1 (TRL's default: 0) change "
            "the update, not the time");
  EXPECT_EQ(ab::settings_lines(c, ab::SettingsFormat::kAxolotl).back(),
            "# this run's learning_rate 0.0003 (axolotl requires the key) and weight_decay 0.1 (axolotl's default: 0) "
            "change the update, not the time");
  EXPECT_EQ(ab::settings_lines(c, ab::SettingsFormat::kArgs).back(),
            "--batch 16 --micro-batches 4 --seq-len 1024 --precision fp32 --activation-checkpointing none --lr 0.0003 "
            "--weight-decay 0.1 --max-grad-norm 1");
  chosen.optimizer.lr = 2e-5;  // TRL's own
  chosen.optimizer.weight_decay = 0;
  EXPECT_EQ(ab::settings_lines(ab::trainer_settings(split(4, 4), chosen, {}), ab::SettingsFormat::kTrl).back(),
            "loss_type: nll");
  EXPECT_EQ(ab::settings_lines(ab::trainer_settings(split(4, 4), chosen, {}), ab::SettingsFormat::kArgs).back(),
            "--batch 16 --micro-batches 4 --seq-len 1024 --precision fp32 --activation-checkpointing none --lr 2e-05 "
            "--weight-decay 0 --max-grad-norm 1");
  // Clipping: accumbench's flags carry any norm; the trainers' formats name one other than their 1.
  chosen.optimizer.max_grad_norm = 1;
  EXPECT_EQ(ab::settings_lines(ab::trainer_settings(split(4, 4), chosen, {}), ab::SettingsFormat::kTrl).back(),
            "loss_type: nll");
  EXPECT_EQ(ab::settings_lines(ab::trainer_settings(split(4, 4), chosen, {}), ab::SettingsFormat::kArgs).back(),
            "--batch 16 --micro-batches 4 --seq-len 1024 --precision fp32 --activation-checkpointing none --lr 2e-05 "
            "--weight-decay 0 --max-grad-norm 1");
  chosen.optimizer.max_grad_norm = 0.3;
  chosen.optimizer.weight_decay = 0.1;
  chosen.optimizer.lr = 3e-4;
  // A norm other than the trainers' 1 is a key (a pass over the gradients each step: read back by
  // --trl-config, it plans and measures the same job); the learning rate and decay stay a comment.
  for (const ab::SettingsFormat format : {ab::SettingsFormat::kTrl, ab::SettingsFormat::kAxolotl}) {
    const Lines lines = ab::settings_lines(ab::trainer_settings(split(4, 4), chosen, {}), format);
    ASSERT_GE(lines.size(), 2u);
    EXPECT_EQ(lines[lines.size() - 2], "max_grad_norm: 0.3");
    EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                            [](const std::string& l) { return l.find("max_grad_norm") != std::string::npos; }),
              1);
  }
  EXPECT_EQ(ab::settings_lines(ab::trainer_settings(split(4, 4), chosen, {}), ab::SettingsFormat::kTrl).back(),
            "# this run's learning_rate 0.0003 (TRL's default: 2e-05) and weight_decay 0.1 (TRL's default: 0) change "
            "the update, not the time");
  EXPECT_EQ(ab::settings_lines(ab::trainer_settings(split(4, 4), chosen, {}), ab::SettingsFormat::kAxolotl).back(),
            "# this run's learning_rate 0.0003 (axolotl requires the key) and weight_decay 0.1 (axolotl's default: 0) "
            "change the update, not the time");
  // AdamW's betas and epsilon: said where not the Trainer's (accumbench's are the same), carried by args.
  chosen.optimizer.max_grad_norm = 1;
  chosen.optimizer.weight_decay = 0;
  chosen.optimizer.lr = 2e-5;
  chosen.optimizer.beta2 = 0.95;
  chosen.optimizer.eps = 1e-6;
  EXPECT_EQ(ab::settings_lines(ab::trainer_settings(split(4, 4), chosen, {}), ab::SettingsFormat::kTrl).back(),
            "# this run's adam_beta2 0.95 (TRL's default: 0.999) and adam_epsilon 1e-06 (TRL's default: 1e-08) change "
            "the update, not the time");
  EXPECT_EQ(ab::settings_lines(ab::trainer_settings(split(4, 4), chosen, {}), ab::SettingsFormat::kArgs).back(),
            "--batch 16 --micro-batches 4 --seq-len 1024 --precision fp32 --activation-checkpointing none --lr 2e-05 "
            "--weight-decay 0 --beta2 0.95 --adam-eps 1e-06 --max-grad-norm 1");
}

// bf16 with checkpointing over 2 ranks, LoRA on Qwen-style names, real lengths padded to a
// multiple of 8 and grouped by length.
TEST(TrainerSettings, LoraPaddingAndRanks) {
  ab::SplitConfig sp = split(2, 4);
  sp.precision = ab::Precision::kBf16;
  sp.activation_checkpointing = ab::Checkpointing::kBlocks;
  sp.world_size = 2;
  ab::WorkloadOptions w = workload();
  w.lora.rank = 16;
  w.lora.alpha = 32;
  w.lora.dropout = 0.05;
  w.lora.targets = "attention";
  w.data.lengths = ab::LengthMode::kVariable;
  ab::set_padding(w.data, "multiple:8");
  w.data.group_by_length = true;
  const std::vector<std::string> targets = ab::peft_target_modules(ab::find_preset("qwen2.5-0.5b"), w.lora);
  EXPECT_EQ(targets, (Lines{"q_proj", "k_proj", "v_proj", "o_proj"}));
  const ab::TrainerSettings s = ab::trainer_settings(sp, w, targets);
  EXPECT_EQ(ab::settings_lines(s, ab::SettingsFormat::kTrl),
            (Lines{"# TRL SFTConfig, for trl sft --config FILE.yaml (per rank, 2 ranks; each key is also a --KEY flag)",
                   "per_device_train_batch_size: 2", "gradient_accumulation_steps: 4", "gradient_checkpointing: true",
                   "bf16: true", "# bf16 needs an Ampere or newer GPU (compute capability 8.0+); on a T4 or V100 write fp16: true instead, and measure it with --precision fp16 on that card", "fp16: false", "max_length: 1024", "packing: false", "num_processes: 2", "pad_to_multiple_of: 8",
                   "train_sampling_strategy: group_by_length",
                   "# with transformers 4 write group_by_length: true instead (trl sft stops on a key its "
                   "transformers lacks)",
                   "loss_type: nll", "use_peft: true", "lora_r: 16", "lora_alpha: 32",
                   "lora_dropout: 0.05", "lora_target_modules: [q_proj, k_proj, v_proj, o_proj]"}));
  EXPECT_EQ(ab::settings_lines(s, ab::SettingsFormat::kAxolotl),
            (Lines{"# axolotl (per rank, 2 ranks)", "micro_batch_size: 2", "gradient_accumulation_steps: 4",
                   "sequence_len: 1024", "gradient_checkpointing: true", "gradient_checkpointing_kwargs:",
                   "  use_reentrant: false", "bf16: true", "fp16: false",
                   "# axolotl's bf16: true also loads the weights in bf16; these were measured in fp32 "
                   "(--weights-dtype bf16 measures axolotl's job)",
                   "sample_packing: false", "pad_to_multiple_of: 8", "group_by_length: true",
                   "adapter: lora", "lora_r: 16", "lora_alpha: 32", "lora_dropout: 0.05",
                   "lora_target_modules: [q_proj, k_proj, v_proj, o_proj]", "lora_mlp_kernel: false",
                   "lora_qkv_kernel: false", "lora_o_kernel: false"}));
  EXPECT_EQ(ab::settings_lines(s, ab::SettingsFormat::kArgs)[1],
            "--batch 16 --micro-batches 2 --seq-len 1024 --precision bf16 --activation-checkpointing blocks "
            "--lora-rank 16 --lora-alpha 32 --lora-targets attention --lora-dropout 0.05 --padding multiple:8 "
            "--group-by-length --max-grad-norm 1");
}

// Numbers are written as the shortest text that reads back to the same double: six significant
// digits would emit another dropout and alpha than were measured.
TEST(TrainerSettings, NumbersKeepEveryDigit) {
  ab::WorkloadOptions w = workload();
  w.lora.rank = 8;
  w.lora.alpha = 16.5;
  w.lora.dropout = 0.123456789;
  const ab::TrainerSettings s = ab::trainer_settings(split(2, 8), w, {"c_attn"});
  for (const ab::SettingsFormat format : {ab::SettingsFormat::kTrl, ab::SettingsFormat::kAxolotl}) {
    const Lines lines = ab::settings_lines(s, format);
    EXPECT_NE(std::find(lines.begin(), lines.end(), "lora_dropout: 0.123456789"), lines.end());
    EXPECT_NE(std::find(lines.begin(), lines.end(), "lora_alpha: 16.5"), lines.end());
  }
  EXPECT_NE(ab::settings_lines(s, ab::SettingsFormat::kArgs)[1].find("--lora-dropout 0.123456789 "), std::string::npos);
}

// bfd packing is TRL's packing (padding-free) and axolotl's sample packing; --padding max on
// real lengths is pad_to_multiple_of T and axolotl's pad_to_sequence_len (false for --padding
// longest, which axolotl would otherwise pad to a multiple of 64); fixed lengths need no
// padding key at all. all-linear is PEFT's "all-linear" and axolotl's lora_target_linear.
TEST(TrainerSettings, PackingAndPaddingMaps) {
  ab::WorkloadOptions w = workload();
  w.data.lengths = ab::LengthMode::kVariable;
  w.data.packing = ab::Packing::kBfd;
  w.lora.rank = 8;
  ab::TrainerSettings s = ab::trainer_settings(split(1, 16), w, {"all-linear"});
  const Lines trl = ab::settings_lines(s, ab::SettingsFormat::kTrl);
  EXPECT_EQ(Lines(trl.begin() + 7, trl.end()),
            (Lines{"packing: true", "packing_strategy: bfd", "padding_free: true",
                   "# measured with every packed row padded to max_length (--padding max); TRL's bfd packing pads "
                   "nothing, which accumbench measures with --padding longest",
                   "attn_implementation: flash_attention_2", "# flash_attention_2 needs an Ampere or newer GPU; without it, pack with packing_strategy: wrapped (accumbench's --packing wrapped) instead of bfd's padding-free rows", "loss_type: nll", "use_peft: true", "lora_r: 8",
                   "lora_alpha: 16", "lora_dropout: 0", "lora_target_modules: [all-linear]"}));
  // Packed samples stay apart under flash attention only; axolotl pads packed rows to T unless told.
  const Lines axolotl = ab::settings_lines(s, ab::SettingsFormat::kAxolotl);
  EXPECT_EQ(Lines(axolotl.begin() + 7, axolotl.end()),
            (Lines{"sample_packing: true", "attn_implementation: flash_attention_2", "pad_to_sequence_len: true",
                   "adapter: lora", "lora_r: 8", "lora_alpha: 16", "lora_dropout: 0", "lora_target_linear: true",
                   "lora_mlp_kernel: false", "lora_qkv_kernel: false", "lora_o_kernel: false"}));
  w.data.padding = ab::Padding::kLongest;
  const Lines longest = ab::settings_lines(ab::trainer_settings(split(1, 16), w, {"all-linear"}), ab::SettingsFormat::kAxolotl);
  EXPECT_EQ(longest.at(9), "pad_to_sequence_len: false");
  // Packed rows padded to a multiple of N: no axolotl key pads them so, which a comment says (TRL's
  // file says it under padding_free).
  ab::set_padding(w.data, "multiple:16");
  const Lines multiple = ab::settings_lines(ab::trainer_settings(split(1, 16), w, {"all-linear"}), ab::SettingsFormat::kAxolotl);
  EXPECT_EQ(Lines(multiple.begin() + 9, multiple.begin() + 11),
            (Lines{"pad_to_sequence_len: false",
                   "# measured with every packed row padded to a multiple of 16 (--padding multiple:16); axolotl's "
                   "sample_packing pads to the longest row (pad_to_sequence_len: false) or to sequence_len (true, also "
                   "when unset), which accumbench measures with --padding longest or max"}));
  w.data.padding = ab::Padding::kLongest;
  // Padded per micro-batch, the packed rows are what TRL's padding-free rows compute: no comment.
  const Lines trl_longest = ab::settings_lines(ab::trainer_settings(split(1, 16), w, {"all-linear"}), ab::SettingsFormat::kTrl);
  EXPECT_EQ(trl_longest.at(9), "padding_free: true");
  EXPECT_EQ(trl_longest.at(10), "attn_implementation: flash_attention_2");
  w.data.padding = ab::Padding::kMax;
  w.data.packing = ab::Packing::kNone;
  w.lora.rank = 0;
  s = ab::trainer_settings(split(1, 16), w, {});
  EXPECT_EQ(*(ab::settings_lines(s, ab::SettingsFormat::kTrl).end() - 2), "pad_to_multiple_of: 1024");
  EXPECT_EQ(ab::settings_lines(s, ab::SettingsFormat::kAxolotl).back(), "pad_to_sequence_len: true");
  // --padding longest: axolotl pads to a multiple of 64 unless pad_to_sequence_len is false.
  w.data.padding = ab::Padding::kLongest;
  s = ab::trainer_settings(split(1, 16), w, {});
  EXPECT_EQ(ab::settings_lines(s, ab::SettingsFormat::kAxolotl).back(), "pad_to_sequence_len: false");
  w.data.padding = ab::Padding::kMax;
  w.data.lengths = ab::LengthMode::kFixed;
  s = ab::trainer_settings(split(1, 16), w, {});
  EXPECT_EQ(ab::settings_lines(s, ab::SettingsFormat::kTrl).back(), "loss_type: nll");
  EXPECT_EQ(*(ab::settings_lines(s, ab::SettingsFormat::kTrl).end() - 2), "packing: false");
  EXPECT_EQ(ab::settings_lines(s, ab::SettingsFormat::kAxolotl).back(), "sample_packing: false");
}

// axolotl pads a batch to pad_to_multiple_of (64 unset) × ceil(T / it) under pad_to_sequence_len,
// and each batch to a multiple of 64 when unset: where T is no multiple of 64 the emitted keys keep
// a batch at T (core/builders/causal.py).
TEST(TrainerSettings, AxolotlPaddingKeysKeepABatchAtT) {
  ab::WorkloadOptions w = workload();
  w.seq_len = 100;
  w.data.lengths = ab::LengthMode::kVariable;
  const auto axolotl = [&] {
    return ab::settings_lines(ab::trainer_settings(split(1, 16), w, {}), ab::SettingsFormat::kAxolotl);
  };
  Lines lines = axolotl();  // --padding max
  EXPECT_EQ(Lines(lines.end() - 2, lines.end()), (Lines{"pad_to_sequence_len: true", "pad_to_multiple_of: 100"}));
  w.data.lengths = ab::LengthMode::kFixed;  // samples of T: unset would pad them to 128
  EXPECT_EQ(axolotl().back(), "pad_to_multiple_of: 100");
  w.seq_len = 128;
  EXPECT_EQ(axolotl().back(), "sample_packing: false");  // 128 is a multiple of 64: nothing to add
}

// Knobs with no trainer setting are said, never dropped: oib, chunked-ce, CUDA graphs. The dtype to
// load the weights in is a key: TRL's ModelConfig dtype, axolotl's bfloat16 (16-bit weights without
// autocast; its bf16: true would turn autocast on too).
TEST(TrainerSettings, KnobsWithoutATrainerSettingAreNamed) {
  ab::SplitConfig sp = split(16, 1);
  sp.optimizer_in_backward = true;
  sp.chunked_loss = true;
  sp.weights_dtype = ab::Precision::kBf16;  // the split's dtype is the one emitted
  ab::WorkloadOptions w = workload();
  w.weights_dtype = ab::Precision::kBf16;
  w.optimizer.max_grad_norm = 0;  // the optimizer inside backward cannot clip
  const ab::TrainerSettings s = ab::trainer_settings(sp, w, {});
  const Lines trl = ab::settings_lines(s, ab::SettingsFormat::kTrl);
  EXPECT_EQ(Lines(trl.end() - 4, trl.end()),
            (Lines{"dtype: bfloat16", "# optimizer-in-backward (oib) has no Trainer or axolotl setting",
                   "# the chunked cross-entropy (chunked-ce) is TRL's loss_type: chunked_nll and has no axolotl "
                   "setting; use_liger_kernel's fused linear cross-entropy also never holds the whole logits",
                   "# this run did not clip the gradients; TRL clips at max_grad_norm 1 unless the file sets another "
                   "(0: none): a pass over the gradients in every step, which --max-grad-norm 1 measures"}));
  const Lines axolotl = ab::settings_lines(s, ab::SettingsFormat::kAxolotl);
  EXPECT_NE(std::find(axolotl.begin(), axolotl.end(), "bfloat16: true"), axolotl.end());
  EXPECT_NE(std::find(axolotl.begin(), axolotl.end(), "bf16: false"), axolotl.end());
  EXPECT_EQ(ab::settings_lines(s, ab::SettingsFormat::kArgs)[1],
            "--batch 16 --micro-batches 16 --seq-len 1024 --precision fp32 --activation-checkpointing none "
            "--optimizer-in-backward --chunked-loss --weights-dtype bf16");
  EXPECT_NE(ab::settings_summary(s).find("; optimizer-in-backward (oib) has no Trainer or axolotl setting; the "
                                         "chunked"),
            std::string::npos);
}

// PEFT's lora_alpha is an int in TRL's ModelConfig and axolotl's schema: a fractional alpha is said.
TEST(TrainerSettings, AFractionalLoraAlphaIsSaid) {
  ab::WorkloadOptions w = workload();
  w.lora.rank = 8;
  w.lora.alpha = 12.5;
  const Lines trl = ab::settings_lines(ab::trainer_settings(split(4, 4), w, {"all-linear"}), ab::SettingsFormat::kTrl);
  EXPECT_EQ(trl.back(), "# lora_alpha 12.5 is no whole number, which TRL's ModelConfig and axolotl's schema refuse "
                        "(an int); alpha scales the update, not its time or memory");
  w.lora.alpha = 16;
  const Lines whole = ab::settings_lines(ab::trainer_settings(split(4, 4), w, {"all-linear"}), ab::SettingsFormat::kTrl);
  EXPECT_EQ(whole.back(), "lora_target_modules: [all-linear]");
}

// GPT-2's names: c_attn and c_fc as they are; its two c_proj together are "c_proj" (PEFT matches
// the end of the module path), one of them alone is qualified.
TEST(TrainerSettings, Gpt2TargetModules) {
  using ab::Architecture;
  EXPECT_EQ(ab::peft_target_modules(Architecture::kGpt2, {"c_attn", "attn_c_proj", "c_fc", "mlp_c_proj"}, false),
            (Lines{"c_attn", "c_fc", "c_proj"}));
  EXPECT_EQ(ab::peft_target_modules(Architecture::kGpt2, {"c_attn", "attn_c_proj"}, false),
            (Lines{"c_attn", "attn.c_proj"}));
  EXPECT_EQ(ab::peft_target_modules(Architecture::kLlama, {"gate", "up", "down"}, false),
            (Lines{"gate_proj", "up_proj", "down_proj"}));
  ab::LoraOptions lora;
  lora.rank = 4;
  lora.targets = "mlp";
  EXPECT_EQ(ab::peft_target_modules(ab::find_preset("gpt2-tiny"), lora), (Lines{"c_fc", "mlp.c_proj"}));
}

// A saved sweep's context block gives the same settings back.
TEST(TrainerSettings, ReadBackFromASweepsContext) {
  ab::SweepResult result;
  result.context.seq_len = 256;
  result.context.batch = 8;
  ab::WorkloadOptions w = workload();
  w.model.preset = "gpt2-tiny";
  w.lora.rank = 4;
  w.lora.targets = "c_fc";
  w.data.packing = ab::Packing::kWrapped;
  w.data.group_by_length = true;
  result.context.options = ab::describe_workload(w);
  ab::RunResult run;
  run.config = split(2, 4);
  const ab::TrainerSettings s = ab::trainer_settings(result, run);
  EXPECT_EQ(s.max_length, 256);
  EXPECT_EQ(s.batch, 8);
  EXPECT_EQ(s.lora_r, 4);
  EXPECT_EQ(s.target_modules, (Lines{"c_fc"}));
  EXPECT_EQ(s.packing, ab::Packing::kWrapped);
  EXPECT_TRUE(s.group_by_length);
  EXPECT_EQ(ab::settings_lines(s, ab::SettingsFormat::kAxolotl)[8], "# packing wrapped (documents cut at T) has no axolotl key");
}

// A sweep of both orders (--group-by-length false,true): each split's settings group as its own
// order does, and --emit args names the order of an ungrouped split too (the context's list holds
// both, so leaving it out would not say which; nor would it override a trainer config that groups).
TEST(TrainerSettings, TheSplitsGrouping) {
  ab::SweepResult result;
  result.context.seq_len = 128;
  result.context.batch = 8;
  ab::WorkloadOptions w = workload();
  w.data.lengths = ab::LengthMode::kVariable;
  w.data.padding = ab::Padding::kLongest;
  w.data.other_groupings = {true};
  result.context.options = ab::describe_workload(w);
  ab::RunResult run;
  run.config = split(2, 4);
  ab::TrainerSettings s = ab::trainer_settings(result, run);
  EXPECT_FALSE(s.group_by_length);
  EXPECT_TRUE(s.grouping_listed);
  EXPECT_NE(ab::settings_lines(s, ab::SettingsFormat::kArgs).back().find(" --padding longest --group-by-length false"),
            std::string::npos)
      << ab::settings_lines(s, ab::SettingsFormat::kArgs).back();
  // The YAML files say the random order too: pasted into a config that groups, they would not.
  const Lines random = ab::settings_lines(s, ab::SettingsFormat::kTrl);
  // One key, transformers 5's: trl sft stops on a key its transformers lacks.
  EXPECT_EQ(std::find(random.begin(), random.end(), "group_by_length: false"), random.end());
  EXPECT_NE(std::find(random.begin(), random.end(), "train_sampling_strategy: random"), random.end());
  EXPECT_NE(std::find(random.begin(), random.end(),
                      "# with transformers 4 write group_by_length: false instead (trl sft stops on a key its "
                      "transformers lacks)"),
            random.end());
  const Lines axolotl = ab::settings_lines(s, ab::SettingsFormat::kAxolotl);
  EXPECT_NE(std::find(axolotl.begin(), axolotl.end(), "group_by_length: false"), axolotl.end());
  run.config.group_by_length = true;
  s = ab::trainer_settings(result, run);
  EXPECT_TRUE(s.group_by_length);
  const Lines trl = ab::settings_lines(s, ab::SettingsFormat::kTrl);
  EXPECT_EQ(std::find(trl.begin(), trl.end(), "group_by_length: true"), trl.end());
  EXPECT_NE(std::find(trl.begin(), trl.end(), "train_sampling_strategy: group_by_length"), trl.end());
  const std::string args = ab::settings_lines(s, ab::SettingsFormat::kArgs).back();
  EXPECT_NE(args.find(" --group-by-length"), std::string::npos) << args;
  EXPECT_EQ(args.find(" --group-by-length false"), std::string::npos) << args;
  // One order, random: still named wherever samples are ordered, so that the flags override a
  // trainer config that groups; full windows have no order to name.
  w.data.other_groupings.clear();
  result.context.options = ab::describe_workload(w);
  run.config.group_by_length = false;
  EXPECT_NE(ab::settings_lines(ab::trainer_settings(result, run), ab::SettingsFormat::kArgs).back().find(
                " --group-by-length false"),
            std::string::npos);
  w.data.lengths = ab::LengthMode::kFixed;
  result.context.options = ab::describe_workload(w);
  EXPECT_EQ(ab::settings_lines(ab::trainer_settings(result, run), ab::SettingsFormat::kArgs).back().find(
                "--group-by-length"),
            std::string::npos);
}

// A sweep of several weights dtypes: each split's settings load the model in its own dtype (the
// context's list names them all).
TEST(TrainerSettings, TheSplitsWeightsDtype) {
  ab::SweepResult result;
  result.context.seq_len = 128;
  result.context.batch = 8;
  ab::WorkloadOptions w = workload();
  w.grid.other_weights_dtypes = {ab::Precision::kBf16};
  result.context.options = ab::describe_workload(w);
  ab::RunResult run;
  run.config = split(2, 4);
  run.config.weights_dtype = ab::Precision::kBf16;
  const Lines bf16 = ab::settings_lines(ab::trainer_settings(result, run), ab::SettingsFormat::kTrl);
  EXPECT_NE(std::find(bf16.begin(), bf16.end(), "dtype: bfloat16"), bf16.end());
  EXPECT_EQ(ab::settings_lines(ab::trainer_settings(result, run), ab::SettingsFormat::kArgs)[1],
            "--batch 8 --micro-batches 2 --seq-len 128 --precision fp32 --activation-checkpointing none "
            "--weights-dtype bf16 --max-grad-norm 1");  // the saved sweep's clipping, read back
  run.config.weights_dtype = ab::Precision::kFp32;
  const Lines fp32 = ab::settings_lines(ab::trainer_settings(result, run), ab::SettingsFormat::kTrl);
  EXPECT_EQ(std::find(fp32.begin(), fp32.end(), "dtype: bfloat16"), fp32.end());
}

// TF32 as the sweep ran it: a split's tf32: true only where it acted, fp32 matmuls on the device
// the sweep resolved (its context's, not the options' "auto"), and not when --tf32 off was measured.
TEST(TrainerSettings, Tf32WhereAnFp32CudaSplitRanWithIt) {
  struct Case { std::string device; ab::Precision precision; bool tf32; bool written; };
  for (const Case& c : std::vector<Case>{{"cuda:0", ab::Precision::kFp32, true, true},
                                         {"cuda:0", ab::Precision::kBf16, true, false},
                                         {"cuda:0", ab::Precision::kFp32, false, false},
                                         {"cpu", ab::Precision::kFp32, true, false}}) {
    ab::SweepResult result;
    result.context.seq_len = 64;
    result.context.batch = 8;
    result.context.device = c.device;
    ab::WorkloadOptions w = workload();  // device "auto"
    w.tf32 = c.tf32;
    result.context.options = ab::describe_workload(w);
    ab::RunResult run;
    run.config = split(2, 4);
    run.config.precision = c.precision;
    const ab::TrainerSettings s = ab::trainer_settings(result, run);
    const auto keys = ab::trl_settings(s);
    const bool trl = std::find(keys.begin(), keys.end(), std::make_pair(std::string("tf32"), std::string("true"))) != keys.end();
    const Lines axolotl = ab::settings_lines(s, ab::SettingsFormat::kAxolotl);
    const bool yml = std::find(axolotl.begin(), axolotl.end(), "tf32: true") != axolotl.end();
    EXPECT_EQ(trl, c.written) << c.device << " " << ab::to_string(c.precision) << " tf32 " << c.tf32;
    EXPECT_EQ(yml, c.written) << c.device << " " << ab::to_string(c.precision) << " tf32 " << c.tf32;
    // axolotl's default is TF32 on ("auto" on any GPU since Ampere): an fp32 CUDA split measured
    // without it says so.
    const bool off = std::find(axolotl.begin(), axolotl.end(), "tf32: false") != axolotl.end();
    EXPECT_EQ(off, c.device == "cuda:0" && c.precision == ab::Precision::kFp32 && !c.tf32) << c.device;
  }
}

// adamw-foreach measured on the CPU: adamw_torch runs the foreach kernels on CUDA only, so the
// emitted file says the CPU would step one tensor at a time; on CUDA nothing to say.
TEST(TrainerSettings, ForeachOnTheCpuIsNoted) {
  for (const std::string device : {"cpu", "cuda"}) {
    ab::WorkloadOptions w = workload();
    w.device = device;
    ab::SplitConfig sp = split(2, 4);
    sp.optimizer = ab::OptimizerKind::kAdamWForeach;
    const Lines lines = ab::settings_lines(ab::trainer_settings(sp, w, {}), ab::SettingsFormat::kTrl);
    const bool noted = std::any_of(lines.begin(), lines.end(), [](const std::string& line) {
      return line.rfind("# adamw-foreach ran torch's foreach kernels here", 0) == 0;
    });
    EXPECT_EQ(noted, device == "cpu") << device;
  }
}

TEST(TrainerSettings, EmitNamesItsChoices) {
  EXPECT_EQ(ab::settings_format_from_string("axolotl"), ab::SettingsFormat::kAxolotl);
  try {
    ab::settings_format_from_string("deepspeed");
    FAIL();
  } catch (const ab::UserError& e) {
    EXPECT_EQ(std::string(e.what()), "unknown --emit \"deepspeed\"; use trl, axolotl or args");
  }
}

// --optimizer in transformers' OptimizerNames (training_args.py): written only when it is not
// the fused AdamW (transformers' default from PyTorch 2.8; adamw-foreach is adamw_torch), in
// TRL's, axolotl's and accumbench's words: the split's own (a sweep of several optimizers emits
// the recommended split's), read back from a saved file's split.
TEST(TrainerSettings, OptimizerAsOptim) {
  ab::WorkloadOptions w = workload();
  EXPECT_EQ(ab::hf_optim_name(ab::OptimizerKind::kAdamW), "adamw_torch_fused");
  for (const auto& [kind, name] : std::vector<std::pair<ab::OptimizerKind, std::string>>{
           {ab::OptimizerKind::kAdamWForeach, "adamw_torch"},
           {ab::OptimizerKind::kAdamW8bit, "adamw_8bit"},
           {ab::OptimizerKind::kPagedAdamW8bit, "paged_adamw_8bit"},
           {ab::OptimizerKind::kSgd, "sgd"}}) {
    w.optimizer.kind = ab::OptimizerKind::kAdamW;
    w.grid.other_optimizers = {ab::OptimizerKind::kSgd, kind};
    ab::SweepResult result;
    result.context.seq_len = 64;
    result.context.batch = 8;
    result.context.options = ab::describe_workload(w);  // "optimizer": the sweep's list
    ab::RunResult run;
    run.config = split(2, 4);
    run.config.optimizer = kind;
    const ab::TrainerSettings s = ab::trainer_settings(result, run);
    EXPECT_EQ(s.optimizer, kind);
    const auto keys = ab::trl_settings(s);
    EXPECT_NE(std::find(keys.begin(), keys.end(), std::make_pair(std::string("optim"), name)), keys.end()) << name;
    const Lines axolotl = ab::settings_lines(s, ab::SettingsFormat::kAxolotl);
    EXPECT_NE(std::find(axolotl.begin(), axolotl.end(), "optimizer: " + name), axolotl.end()) << name;
    EXPECT_NE(ab::settings_lines(s, ab::SettingsFormat::kArgs)[1].find("--optimizer " + ab::to_string(kind)),
              std::string::npos);
  }
  w.optimizer.kind = ab::OptimizerKind::kAdamW8bit;  // the workload's first optimizer is not the split's
  const auto keys = ab::trl_settings(ab::trainer_settings(split(2, 4), w, {}));
  for (const auto& [key, value] : keys) EXPECT_NE(key, "optim");
}

// A quantised base's settings read back the same: axolotl's qlora loader double-quantises unless
// bnb_config_kwargs turns it off, so that key is written; --kbit-prep none is one of the split's
// flags; a split measured with PEFT's fp32 upcast says that the trainers keep the weights' dtype.
TEST(TrainerSettings, QuantisedBasesReadBackTheSame) {
  ab::WorkloadOptions w = bf16_lora_workload();
  w.lora.base_quant = ab::BaseQuant::kNf4;
  w.lora.kbit_upcast = false;
  ab::SplitConfig s = split(2, 8);
  s.precision = ab::Precision::kBf16;
  s.weights_dtype = ab::Precision::kBf16;
  const ab::TrainerSettings settings = ab::trainer_settings(s, w, {"all-linear"});
  const Lines axolotl = ab::settings_lines(settings, ab::SettingsFormat::kAxolotl);
  std::string yaml = "base_model: llama-tiny\n";
  for (const std::string& line : axolotl) yaml += line + "\n";
  ab::WorkloadOptions back;
  ab::apply_trainer_config(ab::parse_trainer_config(yaml, ab::ConfigFormat::kAxolotl, 1, "emitted.yml"), back,
                           [](const std::string&) { return false; });
  EXPECT_EQ(back.lora.base_quant, ab::BaseQuant::kNf4);
  EXPECT_FALSE(back.lora.double_quant) << yaml;
  EXPECT_FALSE(back.lora.kbit_upcast);
  EXPECT_NE(ab::settings_lines(settings, ab::SettingsFormat::kArgs).back().find("--base-quant nf4 --kbit-prep none"),
            std::string::npos);
  w.lora.kbit_upcast = true;
  const Lines peft = ab::settings_lines(ab::trainer_settings(s, w, {"all-linear"}), ab::SettingsFormat::kTrl);
  ASSERT_GE(peft.size(), 2u);
  EXPECT_EQ(peft[peft.size() - 2],
            "# measured with PEFT's prepare_model_for_kbit_training (the other parameters in fp32); TRL 1.x and axolotl "
            "keep them in the weights' dtype, which --kbit-prep none measures");
  EXPECT_EQ(peft.back(), "# TRL 1.x casts a quantised model's adapters to bf16: this split has fp32 adapters "
                         "(--adapter-dtype bf16 is TRL's)");
}

// --adapter-dtype bf16: TRL's QLoRA writes no key for it (TRL casts them itself) and reads back as
// bf16; axolotl's peft_autocast_adapter_dtype: false over bf16 weights; the args keep the flag.
TEST(TrainerSettings, Bf16AdaptersReadBackTheSame) {
  ab::WorkloadOptions w = bf16_lora_workload();
  w.lora.adapter_dtype = ab::Precision::kBf16;
  ab::SplitConfig s = split(2, 8);
  s.precision = ab::Precision::kBf16;
  s.weights_dtype = ab::Precision::kBf16;
  s.adapter_dtype = ab::Precision::kBf16;  // the split's dtypes are the ones emitted
  const auto read_back = [&](ab::ConfigFormat format, const std::string& header, const Lines& lines) {
    std::string yaml = header;
    for (const std::string& line : lines) yaml += line + "\n";
    ab::WorkloadOptions back;
    ab::apply_trainer_config(ab::parse_trainer_config(yaml, format, 1, "emitted.yml"), back,
                             [](const std::string&) { return false; });
    return back;
  };
  const ab::TrainerSettings lora = ab::trainer_settings(s, w, {"all-linear"});
  const Lines axolotl = ab::settings_lines(lora, ab::SettingsFormat::kAxolotl);
  EXPECT_NE(std::find(axolotl.begin(), axolotl.end(), "peft_autocast_adapter_dtype: false"), axolotl.end());
  EXPECT_EQ(read_back(ab::ConfigFormat::kAxolotl, "base_model: llama-tiny\n", axolotl).lora.adapter_dtype, ab::Precision::kBf16);
  const Lines trl = ab::settings_lines(lora, ab::SettingsFormat::kTrl);
  EXPECT_EQ(trl.back(), "# bf16 adapters over an unquantised base have no TRL key (TRL keeps PEFT's fp32)");
  EXPECT_NE(ab::settings_lines(lora, ab::SettingsFormat::kArgs).back().find(" --adapter-dtype bf16"), std::string::npos);

  w.lora.base_quant = ab::BaseQuant::kNf4;
  w.lora.kbit_upcast = false;
  const ab::TrainerSettings qlora = ab::trainer_settings(s, w, {"all-linear"});
  const Lines trl_qlora = ab::settings_lines(qlora, ab::SettingsFormat::kTrl);
  const ab::WorkloadOptions back = read_back(ab::ConfigFormat::kTrl, "model_name_or_path: llama-tiny\n", trl_qlora);
  EXPECT_EQ(back.lora.adapter_dtype, ab::Precision::kBf16);
  EXPECT_FALSE(back.lora.kbit_upcast);
  EXPECT_EQ(trl_qlora.back().rfind("# the quantised base's time is approximate", 0), 0u);  // no note on the adapters
  const Lines axolotl_qlora = ab::settings_lines(qlora, ab::SettingsFormat::kAxolotl);
  EXPECT_EQ(axolotl_qlora.back(), "# bf16 adapters have no axolotl key here: peft_autocast_adapter_dtype: false keeps "
                                  "them in the base's dtype only over bf16 weights (over a quantised base PEFT keeps fp32)");
}

// A run whose prompts' labels counted (--completion-only-loss false) says so in every format:
// TRL's completion_only_loss: false, axolotl's train_on_inputs: true, the flag; and a sweep's
// saved options read it back.
TEST(TrainerSettings, CompletionOnlyLossOff) {
  ab::WorkloadOptions w = workload();
  w.data.completion_only_loss = false;
  const ab::TrainerSettings s = ab::trainer_settings(split(4, 4), w, {});
  const auto has = [](const Lines& lines, const std::string& line) {
    return std::find(lines.begin(), lines.end(), line) != lines.end();
  };
  EXPECT_TRUE(has(ab::settings_lines(s, ab::SettingsFormat::kTrl), "completion_only_loss: false"));
  EXPECT_TRUE(has(ab::settings_lines(s, ab::SettingsFormat::kAxolotl), "train_on_inputs: true"));
  EXPECT_NE(ab::settings_lines(s, ab::SettingsFormat::kArgs).back().find(" --completion-only-loss false"),
            std::string::npos);
  const ab::TrainerSettings on = ab::trainer_settings(split(4, 4), workload(), {});
  EXPECT_FALSE(has(ab::settings_lines(on, ab::SettingsFormat::kTrl), "completion_only_loss: false"));
  EXPECT_FALSE(has(ab::settings_lines(on, ab::SettingsFormat::kAxolotl), "train_on_inputs: true"));
  ab::SweepContext context;
  context.options = ab::describe_workload(w);
  EXPECT_FALSE(ab::settings_workload(context).data.completion_only_loss);
  context.options = ab::describe_workload(workload());
  EXPECT_TRUE(ab::settings_workload(context).data.completion_only_loss);
}

// A lengths file whose completion_mask counted: TRL's completion_only_loss: true (its null would
// leave the mask of rows tokenized outside TRL unapplied); nothing for axolotl, whose prepared rows
// carry their labels; nothing when --completion-only-loss false let the prompts count. A sweep file
// says which columns masked (labels_masked_by), and its settings read that back.
TEST(TrainerSettings, CompletionMaskAppliedWritesCompletionOnlyLossTrue) {
  const auto has = [](const Lines& lines, const std::string& line) {
    return std::find(lines.begin(), lines.end(), line) != lines.end();
  };
  ab::WorkloadOptions w = workload();
  w.data.completion_mask_applied = true;
  const ab::TrainerSettings s = ab::trainer_settings(split(4, 4), w, {});
  EXPECT_TRUE(has(ab::settings_lines(s, ab::SettingsFormat::kTrl), "completion_only_loss: true"));
  EXPECT_FALSE(has(ab::settings_lines(s, ab::SettingsFormat::kAxolotl), "train_on_inputs: true"));
  EXPECT_EQ(ab::settings_lines(s, ab::SettingsFormat::kArgs).back().find("completion"), std::string::npos);
  w.data.completion_only_loss = false;
  const Lines off = ab::settings_lines(ab::trainer_settings(split(4, 4), w, {}), ab::SettingsFormat::kTrl);
  EXPECT_TRUE(has(off, "completion_only_loss: false"));
  EXPECT_FALSE(has(off, "completion_only_loss: true"));
  EXPECT_FALSE(has(ab::settings_lines(ab::trainer_settings(split(4, 4), workload(), {}), ab::SettingsFormat::kTrl),
                   "completion_only_loss: true"));
  ab::SweepContext context;
  context.options = ab::describe_workload(workload());
  EXPECT_FALSE(ab::settings_workload(context).data.completion_mask_applied);
  context.options.push_back({"labels_masked_by", "completion_mask and assistant_masks"});
  EXPECT_TRUE(ab::settings_workload(context).data.completion_mask_applied);
  context.options.back().second = "labels and assistant_masks";
  EXPECT_FALSE(ab::settings_workload(context).data.completion_mask_applied);
  // A file from before labels_masked_by: its samples' words name the columns that masked.
  context.options = ab::describe_workload(workload());
  context.options.push_back({"samples", "pc.jsonl: 11 samples, 2 cut to T=32, completion_mask keeps 93 of 231 targets (40.3 %)"});
  EXPECT_TRUE(ab::settings_workload(context).data.completion_mask_applied);
  context.options.back().second =
      "chat.jsonl: 8 samples, 0 cut to T=64, labels, completion_mask and assistant_masks keep 60 of 120 targets (50.0 %)";
  EXPECT_TRUE(ab::settings_workload(context).data.completion_mask_applied);
  context.options.back().second = "completion_mask_rows.jsonl: 8 samples, 0 cut to T=64, labels keeps 60 of 120 targets (50.0 %)";
  EXPECT_FALSE(ab::settings_workload(context).data.completion_mask_applied);  // the name is no column
  context.options.back().second = "rows.txt: 8 samples, 0 cut to T=64";
  EXPECT_FALSE(ab::settings_workload(context).data.completion_mask_applied);
}

// adamw on CUDA is the fused kernel, transformers' default only from PyTorch 2.8: named in the file
// to paste, so that an older PyTorch does not run the foreach kernels (a copy of what trains during
// the step) instead. On the CPU either default steps in place: nothing.
TEST(TrainerSettings, FusedAdamWIsNamedOnCuda) {
  for (const std::string device : {"cpu", "cuda"}) {
    ab::WorkloadOptions w = workload();
    w.device = device;
    const Lines trl = ab::settings_lines(ab::trainer_settings(split(2, 4), w, {}), ab::SettingsFormat::kTrl);
    const auto fused = std::find(trl.begin(), trl.end(), "optim: adamw_torch_fused");
    EXPECT_EQ(fused != trl.end(), device == "cuda") << device;
    if (fused != trl.end()) EXPECT_EQ(*(fused - 1), "loss_type: nll");
  }
}

// A full fine-tune of fp16 weights under fp16 autocast: the Trainer's GradScaler refuses to unscale
// fp16 gradients, so the job does not run there; every format says so. Adapters (fp32 by default)
// and bf16 train, and say nothing.
TEST(TrainerSettings, Fp16WeightsUnderFp16SayTheTrainerCannotRunThem) {
  const std::string said =
      "the Trainer cannot run this split: fp16: true steps through torch's GradScaler, which refuses to unscale the "
      "fp16 gradients of fp16 weights (\"Attempting to unscale FP16 gradients\"); its fp16 jobs keep fp32 weights "
      "(--weights-dtype fp32) or train adapters (--lora-rank)";
  ab::SplitConfig sp = split(2, 4);
  sp.precision = ab::Precision::kFp16;
  sp.weights_dtype = ab::Precision::kFp16;
  ab::WorkloadOptions w = workload();
  w.device = "cuda";
  w.weights_dtype = ab::Precision::kFp16;
  const ab::TrainerSettings full = ab::trainer_settings(sp, w, {});
  EXPECT_NE(ab::settings_summary(full).find("; " + said), std::string::npos) << ab::settings_summary(full);
  for (const auto format : {ab::SettingsFormat::kTrl, ab::SettingsFormat::kAxolotl}) {
    const Lines lines = ab::settings_lines(full, format);
    EXPECT_NE(std::find(lines.begin(), lines.end(), "# " + said), lines.end());
  }
  w.lora.rank = 8;
  EXPECT_EQ(ab::settings_summary(ab::trainer_settings(sp, w, {"all-linear"})).find("cannot run"), std::string::npos);
  w.lora.rank = 0;
  sp.precision = ab::Precision::kBf16;
  sp.weights_dtype = ab::Precision::kBf16;
  w.weights_dtype = ab::Precision::kBf16;
  EXPECT_EQ(ab::settings_summary(ab::trainer_settings(sp, w, {})).find("cannot run"), std::string::npos);
}

// A lengths file's samples longer than T are cut to T, as TRL truncates to max_length; axolotl drops
// them unless told (excess_length_strategy), so its settings say truncate for real samples, also read
// back from a sweep's context (which names the file); synthetic lengths never pass T: nothing.
TEST(TrainerSettings, AxolotlTruncatesRealSamplesAsMeasured) {
  const auto has_truncate = [](const ab::TrainerSettings& s) {
    const Lines lines = ab::settings_lines(s, ab::SettingsFormat::kAxolotl);
    const auto at = std::find(lines.begin(), lines.end(), "excess_length_strategy: truncate");
    return at != lines.end() && *(at - 1) == "sequence_len: " + std::to_string(s.max_length);
  };
  ab::WorkloadOptions w = workload();
  w.data.lengths = ab::LengthMode::kVariable;
  EXPECT_FALSE(has_truncate(ab::trainer_settings(split(2, 4), w, {})));
  w.data.lengths = ab::LengthMode::kFile;
  w.data.lengths_file = "chat_lengths.txt";
  EXPECT_TRUE(has_truncate(ab::trainer_settings(split(2, 4), w, {})));
  w.data.packing = ab::Packing::kWrapped;  // wrapped rows cut every document at T anyway: no axolotl key
  EXPECT_FALSE(has_truncate(ab::trainer_settings(split(2, 4), w, {})));
  w.data.packing = ab::Packing::kBfd;
  EXPECT_TRUE(has_truncate(ab::trainer_settings(split(2, 4), w, {})));

  ab::SweepResult result;
  result.context.seq_len = 256;
  result.context.batch = 8;
  result.context.options = ab::describe_workload(w);
  ab::RunResult run;
  run.config = split(2, 4);
  EXPECT_TRUE(has_truncate(ab::trainer_settings(result, run)));
}
