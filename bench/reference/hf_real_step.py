#!/usr/bin/env python3
"""Times a real Hugging Face training step (transformers' own model, PEFT's LoRA when asked) per
split, where those packages are installed: the most faithful reference accumbench can be held to.

    hf_real_step.py --probe                       # one JSON line: the versions of torch, transformers,
                                                  # peft, trl, accelerate (null: not importable)
    hf_real_step.py --export DIR --seq-len 1024 --batch 16 --micro-batches 1,4,16 --device cuda \
                    --precision bf16 [--lora-rank 16 --lora-alpha 32] [--gradient-checkpointing]

The shape comes from an accumbench export's index.json "model" (`accumbench verify --export DIR`,
or the shape alone: `accumbench models --index qwen3-1.7b > DIR/index.json`): GPT2Config for GPT-2, Qwen3Config (q/k norm), Qwen2Config (q/k/v biases), else
LlamaConfig (MistralConfig's math is Llama's without sliding windows at these lengths), built with
AutoModelForCausalLM.from_config, randomly initialised (time and memory do not depend on the
values), SDPA attention on CUDA and eager on the CPU. One step, as Trainer.training_step and
_inner_training_loop run it: per micro-batch the model's own forward with labels and
num_items_in_batch (transformers' ForCausalLMLoss: the fp32 logits, the summed loss / the step's
targets), under autocast when --precision is bf16/fp16, and loss.backward(); then
clip_grad_norm_(1.0), AdamW (fused on CUDA) over what requires grad, zero_grad(set_to_none=True).
With --lora-rank, peft.get_peft_model with LoraConfig(target_modules="all-linear", task_type
CAUSAL_LM); without it, the index's lora when it has one (rank, alpha = scaling × rank, dropout, its
block linears as PEFT's target_modules: what calibrate-framework writes for a LoRA job); --weights-dtype stores the base in bf16/fp16 (the adapters stay fp32, PEFT's
autocast_adapter_dtype); --gradient-checkpointing as TRL sets it (use_reentrant False, input
gradients enabled under PEFT). When trl is importable its version is reported; the step itself is
the Trainer's loop above, not SFTTrainer (which needs a dataset and a tokenizer) — hf_trl.py models
what SFTTrainer adds around it.

Prints a header line and one JSON line per split (mb, ga, step_s, steps, peak_bytes) in
step_bench.py's format: bench/side_by_side.py, bench/plan_vs_reference.py and
`accumbench calibrate-framework --frameworks hf` read them. Exit 77 (ctest's skip) when transformers
(or, with --lora-rank, peft) cannot be imported.

Written without transformers on the CPU machine (Debian has no package of it): its first runs are
on the GPU machine (bench/run_h200.sh, stage hf-real).
"""

import argparse
import contextlib
import importlib
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from step_options import add_step_options  # noqa: E402

SKIP = 77
PACKAGES = ("torch", "transformers", "peft", "trl", "accelerate")
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def probe():
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = getattr(importlib.import_module(name), "__version__", "unknown")
        except Exception:  # noqa: BLE001 - a broken install is as good as none here
            versions[name] = None
    return versions


def hf_config(transformers, m):
    """transformers' config for accumbench's model dict (index.json "model")."""
    if m["arch"] == "gpt2":
        return transformers.GPT2Config(vocab_size=m["vocab_size"], n_positions=m["max_seq_len"], n_embd=m["d_model"],
                                       n_layer=m["n_layers"], n_head=m["n_heads"], n_inner=m["d_ff"],
                                       layer_norm_epsilon=m["norm_eps"], tie_word_embeddings=m["tied_embeddings"],
                                       activation_function=m.get("activation", "gelu_new"),
                                       resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
    common = dict(vocab_size=m["vocab_size"], hidden_size=m["d_model"], intermediate_size=m["d_ff"],
                  num_hidden_layers=m["n_layers"], num_attention_heads=m["n_heads"],
                  num_key_value_heads=m["n_kv_heads"], head_dim=m["head_dim"], rms_norm_eps=m["norm_eps"],
                  rope_theta=m["rope_theta"], max_position_embeddings=m["max_seq_len"],
                  tie_word_embeddings=m["tied_embeddings"], hidden_act=m.get("activation", "silu"),
                  attention_dropout=0.0, use_cache=False)
    # attention_bias: q/k/v and o biased (Llama, Qwen3); Qwen2 biases q/k/v alone.
    attention_bias = m.get("o_bias", False)
    if m["qk_norm"]:
        return transformers.Qwen3Config(**common, attention_bias=attention_bias)
    if m["qkv_bias"] and not attention_bias:
        return transformers.Qwen2Config(**common)
    return transformers.LlamaConfig(**common, attention_bias=attention_bias, mlp_bias=m.get("mlp_bias", False))


# accumbench's block linear names (index.json lora.linears) -> PEFT target_modules entries, which
# match the end of a module's path (GPT-2's two c_proj told apart by their parent); every block
# linear of the family named is PEFT's "all-linear".
HF_TARGETS = {"gpt2": {"c_attn": "c_attn", "attn_c_proj": "attn.c_proj", "c_fc": "c_fc", "mlp_c_proj": "mlp.c_proj"},
              "llama": {n: n + "_proj" for n in ("q", "k", "v", "o", "gate", "up", "down")}}


def peft_lora(args, index):
    """LoraConfig's arguments: --lora-rank on every block linear, else the index's adapters, else None."""
    if args.lora_rank > 0:
        return dict(r=args.lora_rank, lora_alpha=args.lora_alpha or 2 * args.lora_rank, lora_dropout=0.0,
                    target_modules="all-linear")
    lora = index.get("lora")
    if lora is None:
        return None
    names = HF_TARGETS[index["model"]["arch"]]
    linears = lora["linears"]
    targets = "all-linear" if set(linears) == set(names) else [names[n] for n in linears]
    return dict(r=lora["rank"], lora_alpha=lora["scaling"] * lora["rank"], lora_dropout=lora["dropout"],
                target_modules=targets)


def build(args, model_cfg, lora, torch, transformers):
    config = hf_config(transformers, model_cfg)
    attention = "sdpa" if args.device.startswith("cuda") else "eager"
    # Built on the GPU directly where PyTorch >= 2.0 takes the device as a context (a 1.7B model's
    # random init on the host would take most of a device call's minutes).
    on_device = torch.device(args.device) if hasattr(torch.device, "__enter__") else contextlib.nullcontext()
    with on_device:
        try:
            model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=attention)
        except TypeError:  # an older from_config without the keyword
            config._attn_implementation = attention
            model = transformers.AutoModelForCausalLM.from_config(config)
    if args.weights_dtype != "fp32":
        model = model.to(getattr(torch, DTYPES[args.weights_dtype]))
    model = model.to(args.device)
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if lora is not None:
        peft = importlib.import_module("peft")
        if args.gradient_checkpointing:
            model.enable_input_require_grads()
        model = peft.get_peft_model(model, peft.LoraConfig(task_type="CAUSAL_LM", **lora))
    model.train()
    return model


def micro_step(model, inputs, mask, num_items, autocast, torch):
    """Trainer.compute_loss + training_step on one micro-batch: the model's own loss."""
    kwargs = dict(input_ids=inputs, attention_mask=mask, labels=inputs, num_items_in_batch=num_items)
    if autocast is None:
        out = model(**kwargs)
    else:
        with torch.autocast(inputs.device.type, dtype=autocast):
            out = model(**kwargs)
    out.loss.backward()
    return out.loss.detach()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--probe", action="store_true", help="print the packages' versions and exit")
    add_step_options(p, required=False)
    p.add_argument("--attention", default=None, help="accepted for step_bench.py's command line; sdpa on CUDA, eager on the CPU")
    p.add_argument("--lora-rank", type=int, default=0, help="PEFT LoRA of this rank on every block linear "
                   "(default: the index's lora, when it has one: its rank, scaling, dropout and linears)")
    p.add_argument("--lora-alpha", type=float, default=0)
    a = p.parse_args()
    versions = probe()
    if a.probe:
        print(json.dumps(versions))
        return 0
    if a.export is None or a.seq_len is None or a.batch is None:
        p.error("--export, --seq-len and --batch are required (or --probe)")
    with open(os.path.join(a.export, "index.json")) as f:
        index = json.load(f)
    model_cfg = index["model"]
    lora = peft_lora(a, index)
    if versions["transformers"] is None or (lora is not None and versions["peft"] is None):
        missing = "transformers" if versions["transformers"] is None else "peft"
        print(f"SKIP: {sys.executable} cannot import {missing}; the real Hugging Face step needs it")
        return SKIP
    import torch
    import transformers
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = build(a, model_cfg, lora, torch, transformers)
    device = torch.device(a.device)
    trained = [q for q in model.parameters() if q.requires_grad]
    fused = dict(fused=True) if device.type == "cuda" else {}
    optimizer = torch.optim.AdamW(trained, lr=1e-4, **fused)
    autocast = None if a.precision == "fp32" else getattr(torch, DTYPES[a.precision])
    data = torch.randint(0, model_cfg["vocab_size"], (a.batch, a.seq_len), device=device)
    mask = torch.ones_like(data)
    print(json.dumps(dict(impl="hf-transformers", model=model_cfg["name"], device=str(device), precision=a.precision,
                          weights_dtype=a.weights_dtype, lora=lora,
                          gradient_checkpointing=a.gradient_checkpointing, trained_parameters=sum(q.numel() for q in trained),
                          **versions)), flush=True)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for mb in (int(x) for x in a.micro_batches.split(",")):
        parts = [(data[i:i + mb], mask[i:i + mb]) for i in range(0, a.batch, mb)]
        num_items = torch.tensor(a.batch * (a.seq_len - 1), device=device)  # the shifted labels of the step

        def run():
            for inputs, m in parts:
                micro_step(model, inputs, m, num_items, autocast, torch)
            torch.nn.utils.clip_grad_norm_(trained, 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        for _ in range(a.warmup):
            run()
        times = []
        for _ in range(a.steps):
            sync()
            start = time.perf_counter()
            run()
            sync()
            times.append(time.perf_counter() - start)
        peak = None
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            run()
            peak = torch.cuda.max_memory_allocated(device)
        print(json.dumps(dict(mb=mb, ga=a.batch // mb, step_s=statistics.median(times), steps=a.steps, times=times,
                              peak_bytes=peak, peak_gib=None if peak is None else round(peak / 2**30, 3))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
