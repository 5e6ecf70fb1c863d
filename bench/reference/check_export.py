#!/usr/bin/python3
"""Recomputes the step that `accumbench verify --export DIR` wrote, with the PyTorch reference
models (models.py), and compares the loss and the gradients with accumbench's.

    /usr/bin/python3 bench/reference/check_export.py DIR            # exit 0: same loss and gradients
    /usr/bin/python3 bench/reference/check_export.py DIR --rope interleaved   # a wrong reference: exit 1
    /usr/bin/python3 bench/reference/check_export.py DIR --framework hf-trl   # + HF Trainer/TRL's step
    /usr/bin/python3 bench/reference/check_export.py DIR --activation silu    # a wrong activation: exit 1
    /usr/bin/python3 bench/reference/check_export.py DIR --rope-scaling none  # rope scaling dropped: exit 1

Tolerances (fp32): loss relative 1e-6; gradients relative L2 1e-5 over every trainable tensor
together (as `accumbench verify` judges its splits), the worst single tensor printed too. Both
sides run the same kernels in a different order, so the errors are float32 rounding (~1e-7).
bf16/fp16 autocast over fp32 weights is judged at 1e-3 (loss) and 5e-3 (gradients): the same
kernels, and tight enough that a wrong RoPE, rope scaling or activation fails, which verify's 3e-2
between splits would not catch; 16-bit weights (which round differently on the two sides) and the
hf-trl step keep verify's 3e-2.

--framework hf-trl also runs the step as HF's Trainer and TRL's SFTTrainer run it (hf_trl.py: per
micro-batch the no_grad entropy and token accuracy from the logits, the loss over num_items_in_batch,
the host syncs, GPT-2's gelu_new op by op as transformers computes it), in micro-batches of
--micro-batch sequences, and asserts that it changes nothing in
the math: the loss within 1e-6 relative of the plain reference's and the gradients (after the last
backward, before the Trainer's clipping) within 1e-6 relative L2; the metrics finite, the entropy in
[0, log V] and equal to an unchunked float64 computation within 1e-5, the accuracy in [0, 1]. Its
loss and gradients are then compared with accumbench's as above. --wrong-ga-divide also divides the
loss by the accumulation steps (the old gradient-accumulation bug) to show that the check fails.
--trl-loss chunked_nll runs TRL's chunked loss instead (hf_trl.chunked_nll, on accumbench's targets as
TRL's shift_labels): the same loss and gradient bars against plain, its metrics from the chunk sums
equal to a float64 computation on the full logits (entropy within 1e-5, 1e-3 under bf16; accuracy
exactly), and a known case (valid rows gathered across chunk boundaries, both label paths) equal to
the unchunked loss.

The format is docs/EXPORT.md. Runs on Debian's python3-torch (1.13, CPU) and on PyTorch 2.x.
Exit codes: 0 pass, 1 mismatch, 2 unusable export, 77 PyTorch missing (ctest's skip code).
"""

import argparse
import json
import math
import os
import sys

SKIP = 77
try:
    import torch
except ImportError:
    print(f"SKIP: {sys.executable} cannot import torch; install python3-torch (scripts/install-deps.sh)")
    sys.exit(SKIP)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_trl  # noqa: E402
from models import ROPE_CONVENTIONS, CausalLM  # noqa: E402
from step_options import lora_modules  # noqa: E402

DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
          "float16": torch.float16, "int64": torch.int64, "bool": torch.bool}
AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}
LOSS_TOLERANCE = {"fp32": 1e-6}
GRADIENT_TOLERANCE = {"fp32": 1e-5}
LOW_PRECISION_TOLERANCE = 3e-2  # accumbench's verify tolerance for bf16/fp16
# Autocast over fp32 weights, the plain step: the engine and the reference run the same kernels in
# the same order (0 apart on the CPU), and verify's 3e-2 would let a wrong RoPE (1.2e-2), a dropped
# rope scaling or a wrong activation (2.2e-2) pass. 16-bit weights round differently on the two
# sides (7e-3 measured, each as close to float64 as the other), and the hf-trl step sums its
# micro-batches in another order: those keep verify's bar.
AUTOCAST_SAME_KERNELS_TOLERANCE = (1e-3, 5e-3)  # loss, gradients
# hf-trl against plain: the same kernels, only the accumulation over micro-batches differs (fp32)
FRAMEWORK_TOLERANCE = {"fp32": 1e-6}
ENTROPY_TOLERANCE = 1e-5  # chunked fp32 entropy against float64, relative (fp32 log_softmax rounding)
# chunked_nll's entropy under bf16 autocast, relative: its log_softmax and exp round to bf16 (unit
# roundoff 2^-8 = 3.9e-3), row errors reach 1.6e-2 and the mean over a micro-batch's targets was
# 4.5e-5 and 2.7e-3 on two sets of rows of the same llama-tiny logits. Which rows count is
# checked at fp32's bar (ENTROPY_TOLERANCE) by the fp32 cases.
LOW_PRECISION_ENTROPY_TOLERANCE = 1e-2


class ExportError(Exception):
    pass


def read_tensor(root, entry):
    """A tensor from its index entry: raw little-endian bytes of `dtype` in `shape`."""
    path = os.path.join(root, entry["file"])
    with open(path, "rb") as f:
        data = bytearray(f.read())
    dtype = DTYPES[entry["dtype"]]
    count = math.prod(entry["shape"])
    if len(data) != count * torch.empty((), dtype=dtype).element_size():
        raise ExportError(f"{path} holds {len(data)} bytes, not {entry['shape']} of {entry['dtype']}")
    if count == 0:
        return torch.empty(entry["shape"], dtype=dtype)
    return torch.frombuffer(data, dtype=dtype).reshape(entry["shape"]).clone()


def load_export(root):
    index_path = os.path.join(root, "index.json")
    try:
        with open(index_path) as f:
            index = json.load(f)
    except OSError as e:
        raise ExportError(f"cannot read {index_path} ({e.strerror}); run `accumbench verify --export {root}` first")
    if index.get("format") != "accumbench-reference-step" or index.get("version") not in (1, 2):
        raise ExportError(f"{index_path} is not an accumbench reference step of version 1 or 2")
    if index.get("byte_order") != "little" or sys.byteorder != "little":
        raise ExportError("the export and this host must both be little-endian")
    return index


def build_reference(index, root, rope, hf_ops=False):
    """The reference model with the export's weights, adapters where the export has them; hf_ops:
    the activation computed as transformers computes it (models.py, Activations)."""
    model = CausalLM(index["model"], rope=rope, hf_ops=hf_ops)
    names = [p["name"] for p in index["parameters"]]
    lora = index["lora"]
    if lora is not None:
        paths = lora_modules(index)
        # What a shape-only index (calibrate-framework's) adapts must be what the weights say.
        shape_only = lora_modules({k: v for k, v in index.items() if k != "parameters"})
        if shape_only != paths:
            raise ExportError(f"lora.linears {lora.get('linears')} names other modules than the exported adapters: "
                              f"{sorted(shape_only ^ paths)[:5]}")
        model.add_lora(lora["rank"], lora["scaling"], lora["dropout"], paths)
    state = {p["name"]: read_tensor(root, p["weight"]) for p in index["parameters"]}
    own = dict(model.named_parameters())
    if set(own) != set(state):
        raise ExportError(f"parameters differ: only in the export {sorted(set(state) - set(own))[:5]}, "
                          f"only in the reference {sorted(set(own) - set(state))[:5]}")
    with torch.no_grad():
        for name, p in own.items():
            if p.shape != state[name].shape:
                raise ExportError(f"{name}: export shape {list(state[name].shape)}, reference {list(p.shape)}")
            p.data = state[name].to(p.device)  # also takes the export's dtype (bf16 weights)
    return model


def reference_step(index, root, rope="rotate_half"):
    """Loss and gradients {name: tensor} of the reference from the export's weights and batch."""
    batch = index["batch"]
    if index["lora"] is not None and index["lora"]["dropout"] > 0:
        raise ExportError("the export has LoRA dropout > 0, whose masks come from accumbench's generator; "
                          "export with --lora-dropout 0 to compare")
    model = build_reference(index, root, rope)
    model.train()
    inputs = read_tensor(root, batch["inputs"])
    targets = read_tensor(root, batch["targets"])
    mask = read_tensor(root, batch["attention_mask"])
    precision = index["precision"]
    if precision in AUTOCAST:
        with torch.autocast("cpu", dtype=AUTOCAST[precision]):
            summed = model.summed_loss(inputs, targets, mask)
    else:
        summed = model.summed_loss(inputs, targets, mask)
    loss = summed / batch["target_tokens"]
    loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.requires_grad}
    return loss.item(), grads


def hf_trl_step(index, root, micro_batch, rope="rotate_half", wrong_ga_divide=False, loss_type="nll"):
    """The export's step run by hf_trl.optimizer_step in micro-batches of `micro_batch` sequences,
    without the optimizer -> (loss, {name: gradient} after the last backward, metrics, model)."""
    batch = index["batch"]
    if index["lora"] is not None and index["lora"]["dropout"] > 0:
        raise ExportError("the export has LoRA dropout > 0; export with --lora-dropout 0 to compare")
    sequences = batch["sequences"]
    if micro_batch < 1 or sequences % micro_batch != 0:
        raise ExportError(f"--micro-batch {micro_batch} does not divide the export's {sequences} sequences; "
                          f"pick a divisor of {sequences}")
    model = build_reference(index, root, rope, hf_ops=True)
    inputs = read_tensor(root, batch["inputs"])
    targets = read_tensor(root, batch["targets"])
    mask = read_tensor(root, batch["attention_mask"]).long()
    micro = [(inputs[i:i + micro_batch], mask[i:i + micro_batch], targets[i:i + micro_batch])
             for i in range(0, sequences, micro_batch)]
    grads = {}

    def keep_gradients(m):  # before the Trainer's clipping scales them
        grads.update({n: p.grad.clone() for n, p in m.named_parameters() if p.requires_grad})

    tr_loss, metrics = hf_trl.optimizer_step(model, None, micro, AUTOCAST.get(index["precision"]),
                                             apply_mask=True, wrong_divide=wrong_ga_divide,
                                             before_clip=keep_gradients, loss_type=loss_type)
    return tr_loss.item(), grads, metrics, (model, micro)


def relative_gradient_error(ref, other):
    """Relative L2 error of `other` against `ref` over every tensor together, and the worst tensor."""
    diff_sq = ref_sq = 0.0
    worst = (0.0, "")
    for name, r in ref.items():
        r, o = r.double(), other[name].double()
        d, n = (o - r).pow(2).sum().item(), r.pow(2).sum().item()
        diff_sq, ref_sq = diff_sq + d, ref_sq + n
        worst = max(worst, (math.sqrt(d / n) if n > 0 else math.sqrt(d), name))
    return (math.sqrt(diff_sq / ref_sq) if ref_sq > 0 else math.sqrt(diff_sq)), worst


def judged_precision(index):
    """What the step's matmuls run in, as accumbench verify judges it (verify_compute_precision):
    autocast's precision, else the stored weights' (bf16 weights compute in bf16 without autocast)."""
    precision = index["precision"]
    return precision if precision != "fp32" else index.get("weights_dtype", "fp32")


def known_metrics_problems(vocab_size):
    """hf_trl.sft_metrics on logits whose answers are known (a tiny model's accuracy is ~0, which
    would not catch a wrong mask or shift): uniform logits have entropy log V; logits that put the
    maximum on the target at 3 of the 5 counted positions (of 6, one -100; the last position is
    left out by the shift) have accuracy 3/5."""
    problems = []
    vocab_size = max(vocab_size, 8)  # the known answers use token ids up to 6 (a model may have fewer)
    targets = torch.tensor([[1, 2, 3, -100, 4, 5, 6]])  # (1, 7)
    entropy, _ = hf_trl.sft_metrics(torch.zeros(1, 7, vocab_size), targets)
    if not abs(entropy - math.log(vocab_size)) <= 1e-6 * math.log(vocab_size):
        problems.append(f"uniform logits: entropy {entropy}, not log V = {math.log(vocab_size)}")
    logits = torch.zeros(1, 7, vocab_size)
    for t in (0, 1, 4, 6):  # hits at counted positions 0, 1, 4; position 6 is cut by the shift
        logits[0, t, targets[0, t]] = 5.0
    logits[0, 2, targets[0, 2] + 1] = 5.0  # a miss; position 5's all-zero row picks token 0: a miss
    _, accuracy = hf_trl.sft_metrics(logits, targets)
    if not abs(accuracy - 3 / 5) <= 1e-7:
        problems.append(f"known logits: accuracy {accuracy}, not 3/5")
    return problems


def known_chunked_problems(vocab_size):
    """hf_trl.chunked_nll against the unchunked loss on a case whose answers are known: 37 rows in
    chunks of 8 (the valid ones gathered across chunk boundaries, 9 rows -100 spread among them), both
    label paths; the loss and the gradients of the hidden states and the weight within 1e-6 relative,
    and zero hidden states (uniform logits) give the entropy log V per valid row."""
    problems = []
    gen = torch.Generator().manual_seed(7)
    hidden = torch.randn(1, 38, 16, generator=gen, dtype=torch.float64)
    weight = torch.randn(vocab_size, 16, generator=gen, dtype=torch.float64)
    labels = torch.randint(0, vocab_size, (1, 38), generator=gen)
    labels[0, 3:38:4] = -100  # 9 of the 37 shifted targets (positions 1..37) do not count
    targets = labels[:, 1:].contiguous()  # what hidden[:, :-1] predicts
    for path in ("labels", "shift_labels"):
        h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
        if path == "labels":  # the shift inside
            loss, _, _, valid = hf_trl.chunked_nll(h, w, labels=labels, chunk_tokens=8)
        else:  # already aligned: the first 37 positions against the shifted labels
            loss, _, _, valid = hf_trl.chunked_nll(h[:, :-1], w, shift_labels=targets, chunk_tokens=8)
        got = (loss,) + torch.autograd.grad(loss, (h, w))
        h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
        exact = torch.nn.functional.cross_entropy(h[0, :-1] @ w.t(), targets[0], ignore_index=-100)
        want = (exact,) + torch.autograd.grad(exact, (h, w))
        for what, g, e in zip(("loss", "hidden gradient", "weight gradient"), got, want):
            err = ((g - e).norm() / e.norm()).item()
            if not err <= 1e-6:
                problems.append(f"chunked_nll ({path}): {what} differs from the unchunked loss by {err:.2e} relative")
        if int(valid) != 28:
            problems.append(f"chunked_nll ({path}): {int(valid)} valid targets counted, not 28")
    _, _, entropy_sum, valid = hf_trl.chunked_nll(torch.zeros(1, 38, 16), torch.randn(vocab_size, 16, generator=gen),
                                                   labels=labels, chunk_tokens=8)
    entropy = (entropy_sum / valid).item()
    if not abs(entropy - math.log(vocab_size)) <= 1e-6 * math.log(vocab_size):
        problems.append(f"chunked_nll, uniform logits: entropy {entropy}, not log V = {math.log(vocab_size)}")
    return problems


def exact_metrics_problems(model, micro, metrics, loss_type, autocast=None):
    """The first micro-batch's (with a target) entropy and accuracy against a float64 softmax of its full logits. "nll"
    (entropy_from_logits): the chunked entropy in blocks of 128 and of 16 rows; "chunked_nll": the
    metrics from the chunk sums, over every counted target (accumbench's targets as shift_labels), the
    logits made under the run's autocast."""
    problems = []
    # The first micro-batch with a target (one of one-token samples has none: its metrics are 0).
    first = next((k for k, (_, _, t) in enumerate(micro) if bool((t != -100).any())), None)
    if first is None:
        return problems
    inputs, mask, targets = micro[first]
    with torch.no_grad(), torch.autocast("cpu", dtype=autocast or torch.bfloat16, enabled=autocast is not None):
        logits = model.logits(inputs, mask).float()
        if loss_type == "nll":
            logits = logits[:, :-1, :]
            logp = torch.log_softmax(logits.double(), dim=-1)
            exact = -(logp.exp() * logp).sum(-1)
            for rows in (hf_trl.ENTROPY_CHUNK_ROWS, 16):
                err = ((hf_trl.chunked_entropy(logits, rows).double() - exact).abs() / exact.abs().clamp_min(1e-12)).max().item()
                if not err <= ENTROPY_TOLERANCE:
                    problems.append(f"chunked entropy (blocks of {rows} rows) differs from float64 by {err:.2e} relative")
            return problems
        logp = torch.log_softmax(logits.double(), dim=-1)
        counted = targets != -100
        entropy = (-(logp.exp() * logp).sum(-1))[counted].mean().item()
        accuracy = (logits.argmax(-1) == targets)[counted].double().mean().item()
    got_entropy, got_accuracy, _ = metrics[first]
    # Under the CPU's bf16 autocast log_softmax and exp stay in bf16 (PyTorch 1.13), so the entropy
    # carries bf16 rounding (LOW_PRECISION_ENTROPY_TOLERANCE).
    tolerance = ENTROPY_TOLERANCE if autocast is None else LOW_PRECISION_ENTROPY_TOLERANCE
    if not abs(got_entropy - entropy) <= tolerance * entropy:
        problems.append(f"chunked_nll entropy {got_entropy} differs from float64's {entropy}")
    if not abs(got_accuracy - accuracy) <= 1e-7:
        problems.append(f"chunked_nll accuracy {got_accuracy} differs from the full logits' {accuracy}")
    return problems


def compare_frameworks(index, plain, hf, vocab_size, loss_type="nll"):
    """hf-trl against plain (the same math) and its metrics' plausibility; True when all pass."""
    (p_loss, p_grads), (h_loss, h_grads, metrics, (model, micro)) = plain, hf
    tol = FRAMEWORK_TOLERANCE.get(judged_precision(index), LOW_PRECISION_TOLERANCE)
    loss_err = abs(h_loss - p_loss) / max(abs(p_loss), 1e-30)
    grad_err, worst = relative_gradient_error(p_grads, h_grads)
    loss_ok, grad_ok = loss_err <= tol, math.isfinite(grad_err) and grad_err <= tol
    print(f"hf-trl ({loss_type}) vs plain: {len(micro)} micro-batch(es) of {micro[0][0].shape[0]}, loss {h_loss:.9f} vs "
          f"{p_loss:.9f}, relative error {loss_err:.2e} (tolerance {tol:.0e}) {'PASS' if loss_ok else 'FAIL'}")
    print(f"hf-trl ({loss_type}) vs plain: gradients relative L2 error {grad_err:.2e} (tolerance {tol:.0e}), worst tensor "
          f"{worst[1]} {worst[0]:.2e} {'PASS' if grad_ok else 'FAIL'}")
    autocast = AUTOCAST.get(index["precision"])
    problems = hf_trl.plausible_metrics(metrics, vocab_size,
                                        1e-6 if autocast is None else LOW_PRECISION_ENTROPY_TOLERANCE)
    problems += exact_metrics_problems(model, micro, metrics, loss_type, AUTOCAST.get(index["precision"]))
    problems += known_metrics_problems(vocab_size) if loss_type == "nll" else known_chunked_problems(vocab_size)
    summary = ", ".join(f"entropy {e:.4f} accuracy {a:.4f} tokens {t}" for e, a, t in metrics)
    print(f"hf-trl metrics (log V = {math.log(vocab_size):.4f}): {summary} "
          f"{'PASS' if not problems else 'FAIL: ' + '; '.join(problems)}")
    return loss_ok and grad_ok and not problems


def compare(index, root, loss, grads, same_kernels=True):
    """Prints one line per check; returns True when every check passes. `same_kernels`: the
    reference ran the plain step (not hf-trl's micro-batches)."""
    precision = judged_precision(index)
    loss_tol = LOSS_TOLERANCE.get(precision, LOW_PRECISION_TOLERANCE)
    grad_tol = GRADIENT_TOLERANCE.get(precision, LOW_PRECISION_TOLERANCE)
    if precision != "fp32" and index.get("weights_dtype", "fp32") == "fp32" and same_kernels:
        loss_tol, grad_tol = AUTOCAST_SAME_KERNELS_TOLERANCE
    theirs = index["loss"]["value"]
    loss_err = abs(loss - theirs) / max(abs(theirs), 1e-30)
    diff_sq = ref_sq = 0.0
    worst = (0.0, "")
    trainable = [p for p in index["parameters"] if p["grad"] is not None]
    if {p["name"] for p in trainable} != set(grads):
        raise ExportError("the export's trainable parameters differ from the reference's")
    for p in trainable:
        ours = read_tensor(root, p["grad"]).double()
        ref = grads[p["name"]].double()
        d, r = (ours - ref).pow(2).sum().item(), ref.pow(2).sum().item()
        diff_sq, ref_sq = diff_sq + d, ref_sq + r
        worst = max(worst, (math.sqrt(d / r) if r > 0 else math.sqrt(d), p["name"]))
    grad_err = math.sqrt(diff_sq / ref_sq) if ref_sq > 0 else math.sqrt(diff_sq)
    loss_ok = loss_err <= loss_tol
    grad_ok = math.isfinite(grad_err) and grad_err <= grad_tol
    print(f"loss: accumbench {theirs:.9f}, reference {loss:.9f}, relative error {loss_err:.2e} "
          f"(tolerance {loss_tol:.0e}) {'PASS' if loss_ok else 'FAIL'}")
    print(f"gradients: {len(trainable)} tensors, relative L2 error {grad_err:.2e} (tolerance {grad_tol:.0e}), "
          f"worst tensor {worst[1]} {worst[0]:.2e} {'PASS' if grad_ok else 'FAIL'}")
    return loss_ok and grad_ok


def check_clipping(index, grads, norm_type=2.0):
    """Prints one line when the export clipped (--max-grad-norm): accumbench's gradient norm before
    clipping against torch.nn.utils.clip_grad_norm_ on the reference's own gradients (copies), within
    the gradients' tolerance (the norm is a function of them). norm_type other than 2 is wrong and
    exists to show that the check fails. Returns True when it passes or there is nothing to check."""
    clipping = index.get("clipping")
    if not clipping:
        return True
    copies = [torch.zeros_like(g).requires_grad_() for g in grads.values()]
    for c, g in zip(copies, grads.values()):
        c.grad = g.detach().clone()
    theirs = float(torch.nn.utils.clip_grad_norm_(copies, clipping["max_grad_norm"], norm_type=norm_type))
    ours = clipping["grad_norm"]
    tol = GRADIENT_TOLERANCE.get(judged_precision(index), LOW_PRECISION_TOLERANCE)
    err = abs(ours - theirs) / max(abs(theirs), 1e-30)
    ok = math.isfinite(err) and err <= tol
    print(f"clipping at {clipping['max_grad_norm']:g}: accumbench's gradient norm {ours:.6g}, "
          f"torch.nn.utils.clip_grad_norm_'s {theirs:.6g}, relative error {err:.2e} (tolerance {tol:.0e}) "
          f"{'PASS' if ok else 'FAIL'}")
    return ok


# transformers' Trainer.get_decay_parameter_names (trainer_pt_utils.get_parameter_names with these
# patterns and nn.LayerNorm as the forbidden layer type): the parameters the weight decay acts on.
NO_DECAY_PATTERNS = [r"bias", r"layernorm", r"rmsnorm", r"(?:^|\.)norm(?:$|\.)", r"_norm(?:$|\.)"]


def trainer_decay_names(module, prefix=""):
    """The names of `module`'s parameters in the Trainer's decayed group, written from transformers'
    rule: every parameter of a child that is no nn.LayerNorm and whose lower-cased name matches no
    pattern of NO_DECAY_PATTERNS, recursively, and the module's own parameters likewise."""
    import re
    patterns = [re.compile(p) for p in NO_DECAY_PATTERNS]
    names = []
    for name, child in module.named_children():
        if isinstance(child, torch.nn.LayerNorm):
            continue
        names += [n for n in trainer_decay_names(child, f"{prefix}{name}.")
                  if not any(p.search(n.lower()) for p in patterns)]
    names += [f"{prefix}{k}" for k in module._parameters
              if module._parameters[k] is not None and not any(p.search(f"{prefix}{k}".lower()) for p in patterns)]
    return names


# The update check: the weights after one optimizer step from the export's weights and (unclipped)
# gradients, clipped as torch.nn.utils.clip_grad_norm_ clips, against accumbench's. fp32 weights: the
# reference steps float64 copies (the exact update of those numbers), and accumbench's float32
# weights carry the rounding of w − Δw, a few units of w's last place each: the bar is 1e-5 of
# the update, or 4 units of float32's roundoff of ‖w‖ where that is larger (an SGD step of a
# clipped gradient moves w by less than its rounding). 16-bit weights or adapters: torch steps them in
# their own dtype, as accumbench does, and verify's bar between splits holds (0.25).
UPDATE_TOLERANCE = 1e-5
FLOAT32_ROUNDOFF = 2.0 ** -24
LOW_PRECISION_UPDATE_TOLERANCE = 0.25


def check_update(index, root, wrong_decay=False):
    """Prints the update check (version 2 exports): the Trainer's decay groups, written from
    transformers' rule over the reference model's modules, against the export's per-parameter flags;
    then the step of torch.optim's AdamW (or SGD) over those groups against accumbench's updated
    weights. 8-bit AdamW's first step is fp32 AdamW's (its moments start at zero and are quantised
    after the update), but for the decay's order, which differs by lr·wd of the update. wrong_decay:
    decay every parameter (the grouping before transformers') to show that the check fails. Returns
    True when it passes or the export has no update (version 1)."""
    if index.get("version", 1) < 2:
        return True
    opt = index["optimizer"]
    model = build_reference(index, root, "rotate_half")
    decayed = set(trainer_decay_names(model))
    trainable = [p for p in index["parameters"] if p["grad"] is not None]
    flags_ok = all(p["weight_decay"] == (p["name"] in decayed) for p in trainable)
    kept = sorted(p["name"] for p in trainable if p["name"] not in decayed)
    left_out = f"({', '.join(kept[:4])}{', ...' if len(kept) > 4 else ''})" if kept else "(no bias or norm trains)"
    print(f"weight decay groups: {len(trainable) - len(kept)} decayed, {len(kept)} not {left_out}, as transformers' "
          f"Trainer groups them {'PASS' if flags_ok else 'FAIL'}")
    if wrong_decay:
        decayed = {p["name"] for p in trainable}
    # The exact update, in float64, where everything that trains is float32; 16-bit weights or
    # adapters (--adapter-dtype bf16) step in their dtype, as accumbench steps them.
    exact = all(p["weight"]["dtype"] == "float32" for p in trainable)
    params = {p["name"]: (read_tensor(root, p["weight"]).double() if exact else read_tensor(root, p["weight"]))
              .requires_grad_() for p in trainable}
    for p in trainable:
        grad = read_tensor(root, p["grad"])
        params[p["name"]].grad = grad.double() if exact else grad
    if index.get("clipping"):
        torch.nn.utils.clip_grad_norm_(list(params.values()), index["clipping"]["max_grad_norm"])
    groups = [{"params": [params[n] for n in params if n in decayed], "weight_decay": opt["weight_decay"]},
              {"params": [params[n] for n in params if n not in decayed], "weight_decay": 0.0}]
    groups = [g for g in groups if g["params"]]
    kind = opt["kind"]
    if kind == "sgd":
        optimizer = torch.optim.SGD(groups, lr=opt["lr"])
    else:  # adamw, adamw-foreach and the 8-bit/paged ones (their first step is AdamW's)
        optimizer = torch.optim.AdamW(groups, lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"],
                                      foreach=kind == "adamw-foreach")
    before = {n: t.detach().clone() for n, t in params.items()}
    optimizer.step()
    diff_sq = ref_sq = w_sq = 0.0
    for p in trainable:
        ours = read_tensor(root, p["updated"]).double() - before[p["name"]].double()
        theirs = params[p["name"]].detach().double() - before[p["name"]].double()
        diff_sq += (ours - theirs).pow(2).sum().item()
        ref_sq += theirs.pow(2).sum().item()
        w_sq += before[p["name"]].double().pow(2).sum().item()
    err = math.sqrt(diff_sq / ref_sq) if ref_sq > 0 else math.sqrt(diff_sq)
    if exact:
        rounding = 4 * FLOAT32_ROUNDOFF * math.sqrt(w_sq / ref_sq) if ref_sq > 0 else math.inf
        tol = max(UPDATE_TOLERANCE, rounding)
        if kind not in ("adamw", "adamw-foreach", "sgd"):
            tol = max(tol, 10 * opt["lr"] * opt["weight_decay"])  # the decay's order (bitsandbytes decays after)
    else:
        tol = LOW_PRECISION_UPDATE_TOLERANCE
    ok = math.isfinite(err) and err <= tol
    print(f"update: torch.optim.{'SGD' if kind == 'sgd' else 'AdamW'} over the Trainer's groups "
          f"(lr {opt['lr']:g}, weight decay {opt['weight_decay']:g}{', clipped' if index.get('clipping') else ''}), "
          f"relative L2 error of the update {err:.2e} (tolerance {tol:.1e}) {'PASS' if ok else 'FAIL'}")
    return flags_ok and ok


def trl_labels(row, completion_only_loss):
    """Which labels of one tokenized row count, as TRL's SFTTrainer builds them (build_labels in
    trl/trainer/sft_trainer.py): a labels column as it is (-100: does not count); otherwise a label
    counts where every applicable mask is 1 (assistant_masks always, completion_mask under
    completion_only_loss); with neither, every label counts."""
    n = len(row["input_ids"]) if isinstance(row.get("input_ids"), list) else int(row["length"])
    if "labels" in row:
        return [label != -100 for label in row["labels"]]
    masks = [row["assistant_masks"]] if "assistant_masks" in row else []
    if completion_only_loss and "completion_mask" in row:
        masks.append(row["completion_mask"])
    return [all(bool(m[j]) for m in masks) for j in range(n)]


def trl_targets(rule, sample_rows, inputs, seq_len, ignore_masks=False, root="."):
    """The targets a Hugging Face model trains on for rows that hold the lengths file's rows
    `sample_rows`, cut to T as TRL truncates (keep_start): position t predicts inputs[t + 1] where
    label t + 1 counts (the model shifts the labels within the row), nothing past the sample.
    None when the export names no row per sequence. ignore_masks counts every label (wrong: shows
    that the check fails)."""
    if sample_rows is None or not rule.get("rows_file"):
        return None
    # Each batch row's line of the file, as accumbench read it (newlines only: a JSON string may
    # hold U+2028, which str.splitlines would also split at).
    with open(os.path.join(root, rule["rows_file"]), encoding="utf-8") as f:
        lines = f.read().split("\n")
    expected = torch.full_like(inputs, -100)
    for b in range(len(sample_rows)):
        row = json.loads(lines[b])
        kept = [True] * len(trl_labels(row, False)) if ignore_masks else trl_labels(row, rule["completion_only_loss"])
        kept = kept[:seq_len]
        for t in range(len(kept) - 1):
            if kept[t + 1]:
                expected[b, t] = inputs[b, t + 1]
    return expected


def check_targets(index, root, ignore_label_masks=False):
    """Prints one line: are accumbench's targets those transformers would train on? A sample (each
    row's targets one fewer than its positions) must carry HF's labels: input_ids where attended,
    shifted by one within the row (ForCausalLMLoss), so its last position predicts nothing. A full
    window (a pretraining loader's T + 1 tokens) must carry every next token, the last the window's
    own T+1-th (not in the inputs). Returns True when they do."""
    b = index["batch"]
    inputs = read_tensor(root, b["inputs"]).long()
    targets = read_tensor(root, b["targets"]).long()
    mask = read_tensor(root, b["attention_mask"]).long()
    positions, counted = b["sequence_tokens"], b.get("sequence_targets")
    if counted is None:  # an export older than the field
        print("targets: not checked (the export predates batch.sequence_targets)")
        return True
    label_rule = index.get("labels") or {}
    if label_rule.get("masked_by"):
        expected = trl_targets(label_rule, b.get("sample_rows"), inputs, b["seq_len"], ignore_label_masks, root)
        ok = expected is not None and torch.equal(expected, targets)
        what = (f"samples with labels masked by {label_rule['masked_by']}: TRL's labels rebuilt from the rows of "
                f"{label_rule['lengths_file']}, shifted within each row")
    elif all(t == n - 1 for t, n in zip(counted, positions)):
        labels = inputs.masked_fill(mask == 0, -100)
        expected = torch.full_like(labels, -100)
        expected[:, :-1] = labels[:, 1:]
        ok = torch.equal(expected, targets)
        what = "samples: transformers' labels (input_ids where attended, shifted within each row)"
    elif all(t == n for t, n in zip(counted, positions)):
        ok = torch.equal(targets[:, :-1], inputs[:, 1:]) and bool((targets[:, -1] != -100).all())
        what = "full windows: every position's next token"
    else:  # --export refuses bfd's packed rows: nothing else counts otherwise
        ok = False
        what = "rows that are neither samples (n - 1 targets) nor full windows (n)"
    ok = ok and int((targets != -100).sum()) == b["target_tokens"] == sum(counted)
    print(f"targets: {what}, {b['target_tokens']} counted {'PASS' if ok else 'FAIL'}")
    return ok


def describe(index):
    m, b = index["model"], index["batch"]
    words = [f"{m['name']} ({m['arch']}", f"{m['n_layers']} layers", f"d {m['d_model']}",
             f"heads {m['n_heads']}/{m['n_kv_heads']}", f"head_dim {m['head_dim']}",
             m.get("activation", "default activation")]
    if m.get("rope_scaling"):
        words.append(f"rope {m['rope_scaling']['rope_type']} x{m['rope_scaling']['factor']:g}")
    words += [w for w, on in (("q/k/v bias", m["qkv_bias"]), ("o bias", m.get("o_bias", False)),
                              ("MLP bias", m.get("mlp_bias", False)), ("q/k norm", m["qk_norm"]),
                              ("untied head", not m["tied_embeddings"])) if on]
    lengths = "fixed lengths" if min(b["sequence_tokens"]) == b["seq_len"] else \
        f"lengths {min(b['sequence_tokens'])}..{max(b['sequence_tokens'])} (padded)"
    lora = "" if index["lora"] is None else f", LoRA rank {index['lora']['rank']} scaling {index['lora']['scaling']:g}"
    return (", ".join(words) + f"), batch {b['sequences']}x{b['seq_len']}, {lengths}, {b['target_tokens']} targets, "
            f"{index['precision']}{lora}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("export_dir")
    parser.add_argument("--rope", choices=ROPE_CONVENTIONS, default="rotate_half",
                        help="the reference's RoPE convention; 'interleaved' is wrong for HF models and "
                             "exists to show that the check fails")
    parser.add_argument("--activation", choices=("gelu_new", "gelu_pytorch_tanh", "gelu", "silu"), default=None,
                        help="compute this MLP activation instead of the export's (a different one shows that "
                             "the check fails)")
    parser.add_argument("--rope-scaling", choices=("export", "none"), default="export",
                        help="none: plain RoPE whatever the export's rope scaling (shows that the check fails)")
    parser.add_argument("--clip-norm-type", type=float, default=2.0,
                        help="the norm clip_grad_norm_ takes; anything but 2 is wrong and exists to show that "
                             "the clipping check fails")
    parser.add_argument("--ignore-label-masks", action="store_true",
                        help="rebuild the labels of a masked lengths file as if every label counted (wrong: shows "
                             "that the targets check fails)")
    parser.add_argument("--wrong-decay", action="store_true",
                        help="decay every parameter in the update check (wrong: shows that the check fails)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--framework", choices=("plain", "hf-trl"), default="plain",
                        help="hf-trl: also the step as HF Trainer + TRL SFTTrainer run it, checked against plain")
    parser.add_argument("--micro-batch", type=int, default=2, help="hf-trl: sequences per micro-batch")
    parser.add_argument("--trl-loss", choices=hf_trl.LOSS_TYPES, default=None,
                        help="hf-trl: TRL's loss_type (default chunked_nll, TRL's since v1.7.0; nll: before 1.7)")
    parser.add_argument("--wrong-ga-divide", action="store_true",
                        help="hf-trl: also divide the loss by the accumulation steps (wrong: shows the check fails)")
    args = parser.parse_args()
    if args.framework == "plain" and (args.wrong_ga_divide or args.trl_loss is not None):
        parser.error("--wrong-ga-divide and --trl-loss need --framework hf-trl")
    args.trl_loss = args.trl_loss or "chunked_nll"
    torch.set_num_threads(args.threads)
    try:
        index = load_export(args.export_dir)
        if args.activation is not None:
            index["model"]["activation"] = args.activation
        if args.rope_scaling == "none":
            index["model"]["rope_scaling"] = None
        print(f"reference ({torch.__version__}, rope {args.rope}, framework {args.framework}): {describe(index)}")
        ok = check_targets(index, args.export_dir, args.ignore_label_masks)
        loss, grads = reference_step(index, args.export_dir, args.rope)
        if args.framework == "hf-trl":
            hf = hf_trl_step(index, args.export_dir, args.micro_batch, args.rope, args.wrong_ga_divide, args.trl_loss)
            ok = compare_frameworks(index, (loss, grads), hf, index["model"]["vocab_size"], args.trl_loss)
            loss, grads = hf[0], hf[1]  # accumbench is compared with the hf-trl step below
        ok = compare(index, args.export_dir, loss, grads, args.framework == "plain") and ok
        ok = check_clipping(index, grads, args.clip_norm_type) and ok
        ok = check_update(index, args.export_dir, args.wrong_decay) and ok
    except ExportError as e:
        print(f"check_export: {e}", file=sys.stderr)
        return 2
    print("PASS: accumbench computes the reference's loss, gradients and update" if ok
          else "FAIL: accumbench and the reference differ")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
