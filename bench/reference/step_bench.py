#!/usr/bin/python3
"""Times the PyTorch reference's training step (models.py) per split, as accumbench's sweep does.

    step_bench.py --export DIR --seq-len 256 --batch 8 --micro-batches 1,8 [--warmup 1 --steps 2]
    step_bench.py --export DIR --seq-len 1024 --batch 64 --micro-batches 1,64 --device cuda \
                  --precision bf16 --attention sdpa          (PyTorch 2.x on a GPU)
    step_bench.py ... --framework hf-trl                    (the step as HF Trainer + TRL SFT run it)

The model's shape comes from an export (`accumbench verify --export DIR`, its index.json), with its
LoRA adapters when it has them (the base frozen, AdamW over the adapters); the weights are drawn
here (time and memory do not depend on their values). One step: micro-batches of
fixed-length random tokens (--weights-dtype: the base stored in bf16/fp16; --gradient-checkpointing:
every block checkpointed, as the Trainer's gradient_checkpointing), the token-normalized loss (summed cross-entropy / the step's targets),
backward per micro-batch, then torch.optim.AdamW (PyTorch's defaults, lr 1e-4; fused on CUDA) and
zero_grad(set_to_none=True). Prints one JSON line per split: the median step time, and the peak of
allocated CPU bytes: the bytes alive before the measured step (weights, gradients, AdamW state,
summed over their storages) plus the highest running sum of the profiler's memory events
(torch.profiler, profile_memory=True: every allocation and free) during it; on CUDA the caching
allocator's own peak (torch.cuda.max_memory_allocated) over the measured step. Not the resident
set: that one includes the allocator's cached and fragmented pages.

--framework plain (the default) is the step above. --framework hf-trl runs the same math the way
Hugging Face's Trainer runs it under TRL's SFTTrainer (hf_trl.py, which cites
the lines: trl v1.9.0 = v1.6.0 here, transformers v4.5x trainer.py, accelerate's prepare_model):
  - every micro-batch, under no_grad, TRL's metrics from the logits: the entropy of the predicted
    distribution (entropy_from_logits: a copy of the shifted logits when the micro-batch has several
    sequences, then log_softmax/exp in blocks of 128 rows) and the token accuracy (argmax over V),
    each ended by .item(); the logits stay alive until compute_loss returns, i.e. until backward;
  - under bf16/fp16 autocast, accelerate's convert_outputs_to_fp32: the logits kept for the metrics
    are a new fp32 copy;
  - the Trainer's host syncs: attention_mask.sum().item() (TRL's num_tokens), isnan/isinf on each
    micro-batch's loss (logging_nan_inf_filter), and the loss divided by num_items_in_batch held as a
    device tensor, summed from the labels of the step's micro-batches;
  - the batch on the host (pinned on CUDA) moved to the device each step, as accelerate's loader does;
  - gradient clipping at max_grad_norm (--max-grad-norm, Trainer's default 1.0; 0 turns it off)
    before AdamW (accumbench's --max-grad-norm, which a TRL or axolotl config sets to the same 1.0;
    once per step, so calibrate-framework's time per micro-step leaves it out on both sides).
The list above is --trl-loss nll (TRL before v1.7.0). --trl-loss chunked_nll, the default here as in
TRL since v1.7.0, replaces the logits and their metrics by TRL's
chunked loss on HF's labels (the inputs; hidden[:, :-1] predicts labels[:, 1:]): a copy of the shifted
hidden states, gathered with the valid targets first, then per chunk of 256 rows, checkpointed, the
fp32 logits, log_softmax, NLL, argmax and entropy (hf_trl.chunked_nll). Not modelled: Liger, packing,
fp16's GradScaler; host bookkeeping (metric lists, callbacks, flos) is left out (hf_trl.py).
check_export.py --framework hf-trl shows that the loss and gradients stay plain's.
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_trl  # noqa: E402
from models import ATTENTIONS, CausalLM  # noqa: E402
from step_options import add_step_options, lora_modules  # noqa: E402

FRAMEWORKS = ("plain", "hf-trl")

AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}


def live_bytes(tensors):
    seen, total = set(), 0
    for t in tensors:
        if t is None:
            continue
        storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()  # 2.x / 1.13
        key = storage.data_ptr()
        if key not in seen:
            seen.add(key)
            total += storage.nbytes()
    return total


def step(model, optimizer, batches, tokens, autocast=None):
    for inputs, targets in batches:
        if autocast is None:
            loss = model.summed_loss(inputs, targets)
        else:  # the loss itself runs on fp32 logits (summed_loss upcasts, as transformers)
            with torch.autocast(inputs.device.type, dtype=autocast):
                loss = model.summed_loss(inputs, targets)
        (loss / tokens).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def profiled_peak_delta(fn):
    """The highest running sum of the allocator's events while fn runs (bytes): the profiler's raw
    "[memory]" records (one per CPU allocation and free, in order), not the per-op sums of
    prof.events(), which count a child op's bytes again in its parent."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    records = [e for e in prof.profiler.kineto_results.events()
               if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU]
    start = (lambda e: e.start_ns()) if hasattr(records[0], "start_ns") else (lambda e: e.start_us())
    records.sort(key=start)  # stable: records of the same microsecond keep their order
    running = peak = 0
    for e in records:
        running += e.nbytes()
        peak = max(peak, running)
    return peak


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_step_options(p)
    p.add_argument("--attention", choices=ATTENTIONS, default="eager")
    p.add_argument("--framework", choices=FRAMEWORKS, default="plain",
                   help="plain: the math alone; hf-trl: also what HF Trainer + TRL SFTTrainer do per step")
    p.add_argument("--trl-loss", choices=hf_trl.LOSS_TYPES, default=None,
                   help="hf-trl only: TRL's SFTConfig.loss_type (default chunked_nll, TRL's since v1.7.0: the head "
                        "and the loss in checkpointed chunks of 256 tokens; nll: TRL before 1.7, the full logits)")
    p.add_argument("--max-grad-norm", type=float, default=None,
                   help=f"hf-trl only: gradient clipping before AdamW (default {hf_trl.MAX_GRAD_NORM:g}, "
                        "Trainer's; 0: none)")
    p.add_argument("--optimizer", choices=("adamw", "adamw-foreach"), default="adamw",
                   help="adamw: torch.optim.AdamW(fused=True) on CUDA, the for-loop on the CPU (accumbench's adamw); "
                        "adamw-foreach: foreach=True (AdamW's default on CUDA)")
    a = p.parse_args()
    if a.framework == "plain" and a.max_grad_norm is not None:
        p.error("--max-grad-norm applies to --framework hf-trl only; plain does not clip, as accumbench's default")
    if a.framework == "plain" and a.trl_loss is not None:
        p.error("--trl-loss applies to --framework hf-trl only; add --framework hf-trl")
    if a.trl_loss is None:
        a.trl_loss = "chunked_nll"
    if a.max_grad_norm is None:
        a.max_grad_norm = hf_trl.MAX_GRAD_NORM
    torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    autocast = AUTOCAST.get(a.precision)
    with open(os.path.join(a.export, "index.json")) as f:
        index = json.load(f)
    cfg = index["model"]
    torch.manual_seed(0)
    model = CausalLM(cfg, attention=a.attention, hf_ops=a.framework == "hf-trl")
    lora, paths = index.get("lora"), lora_modules(index)
    if lora is not None:  # the export's adapters (same paths, rank, scaling, dropout); the base frozen
        model.add_lora(lora["rank"], lora["scaling"], lora["dropout"], paths)
    if a.weights_dtype != "fp32":  # the base (every parameter without LoRA) stored so
        dtype = AUTOCAST[a.weights_dtype]
        for name, parameter in model.named_parameters():
            if ".lora_" not in name:
                parameter.data = parameter.data.to(dtype)
    # --adapter-dtype bf16 (the index's lora.adapter_dtype): TRL 1.x casts a quantised model's
    # trainable parameters so after get_peft_model (trl/trainer/sft_trainer.py at f2cd577).
    adapter_dtype = (lora or {}).get("adapter_dtype", "fp32")
    if adapter_dtype != "fp32":
        for name, parameter in model.named_parameters():
            if ".lora_" in name:
                parameter.data = parameter.data.to(AUTOCAST[adapter_dtype])
    model.checkpointing = a.gradient_checkpointing
    model = model.to(device)
    model.train()
    # accumbench's --optimizer adamw steps AdamW with the fused kernel on CUDA (PyTorch 2.x), the
    # for-loop on the CPU; adamw-foreach with torch's foreach kernels on any device. Over what trains
    # (the Trainer's optimizer takes the parameters that require grad).
    if a.optimizer == "adamw-foreach":
        kernel = dict(foreach=True)
    else:
        kernel = dict(fused=True) if device.type == "cuda" else dict(foreach=False)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4, **kernel)
    data = torch.randint(0, cfg["vocab_size"], (a.batch, a.seq_len + 1), device=device)
    inputs, targets = data[:, :-1].contiguous(), data[:, 1:].contiguous()
    tokens = targets.numel()
    header = dict(impl="pytorch-reference", torch=torch.__version__, model=cfg["name"], threads=a.threads,
                  device=str(device), precision=a.precision, attention=a.attention, framework=a.framework,
                  weights_dtype=a.weights_dtype, optimizer=a.optimizer, gradient_checkpointing=a.gradient_checkpointing,
                  lora=None if lora is None else dict(rank=lora["rank"], adapters=len(paths), adapter_dtype=adapter_dtype))
    if a.framework == "hf-trl":
        header["max_grad_norm"] = a.max_grad_norm
        header["trl_loss"] = a.trl_loss
    print(json.dumps(header))
    for mb in (int(x) for x in a.micro_batches.split(",")):
        if a.framework == "plain":
            batches = [(inputs[i:i + mb], targets[i:i + mb]) for i in range(0, a.batch, mb)]
            run = lambda: step(model, optimizer, batches, tokens, autocast)  # noqa: E731
        else:  # the loader's batches on the host, with the collator's all-ones attention mask
            host = lambda t: t.cpu().pin_memory() if device.type == "cuda" else t.cpu()  # noqa: E731
            batches = [(host(inputs[i:i + mb]), host(torch.ones_like(inputs[i:i + mb])), host(targets[i:i + mb]))
                       for i in range(0, a.batch, mb)]
            # chunked_nll on HF's labels (the inputs, shifted inside), as an SFT dataset's collator gives them
            run = lambda: hf_trl.optimizer_step(model, optimizer, batches, autocast, a.max_grad_norm,  # noqa: E731
                                                loss_type=a.trl_loss, hf_labels=True)
        for _ in range(a.warmup):
            run()
        times = []
        for _ in range(a.steps):
            sync(device)
            start = time.perf_counter()
            run()
            sync(device)
            times.append(time.perf_counter() - start)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            run()
            peak = torch.cuda.max_memory_allocated(device)
        else:
            state = [v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v)]
            before = live_bytes(list(model.parameters()) + state)  # gradients are None between steps
            peak = before + profiled_peak_delta(run)
        print(json.dumps(dict(mb=mb, ga=a.batch // mb, step_s=statistics.median(times), steps=a.steps, times=times,
                              peak_bytes=peak, peak_gib=round(peak / 2**30, 3))), flush=True)


if __name__ == "__main__":
    main()
