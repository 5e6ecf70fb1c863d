#!/usr/bin/python3
"""Recomputes the step that `accumbench verify --export DIR` wrote, with the PyTorch reference
models (models.py), and compares the loss and the gradients with accumbench's.

    /usr/bin/python3 bench/reference/check_export.py DIR            # exit 0: same loss and gradients
    /usr/bin/python3 bench/reference/check_export.py DIR --rope interleaved   # a wrong reference: exit 1

Tolerances (fp32): loss relative 1e-6; gradients relative L2 1e-5 over every trainable tensor
together (as `accumbench verify` judges its splits), the worst single tensor printed too. Both
sides run the same kernels in a different order, so the errors are float32 rounding (~1e-7).
bf16/fp16 exports are recomputed under autocast and judged at verify's 3e-2.

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
from models import ROPE_CONVENTIONS, CausalLM  # noqa: E402

DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
          "float16": torch.float16, "int64": torch.int64, "bool": torch.bool}
AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}
LOSS_TOLERANCE = {"fp32": 1e-6}
GRADIENT_TOLERANCE = {"fp32": 1e-5}
LOW_PRECISION_TOLERANCE = 3e-2  # accumbench's verify tolerance for bf16/fp16


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
    if index.get("format") != "accumbench-reference-step" or index.get("version") != 1:
        raise ExportError(f"{index_path} is not an accumbench reference step of version 1")
    if index.get("byte_order") != "little" or sys.byteorder != "little":
        raise ExportError("the export and this host must both be little-endian")
    return index


def build_reference(index, root, rope):
    """The reference model with the export's weights, adapters where the export has them."""
    model = CausalLM(index["model"], rope=rope)
    names = [p["name"] for p in index["parameters"]]
    lora = index["lora"]
    if lora is not None:
        paths = {n[: -len(".lora_A")] for n in names if n.endswith(".lora_A")}
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


def compare(index, root, loss, grads):
    """Prints one line per check; returns True when every check passes."""
    precision = index["precision"]
    loss_tol = LOSS_TOLERANCE.get(precision, LOW_PRECISION_TOLERANCE)
    grad_tol = GRADIENT_TOLERANCE.get(precision, LOW_PRECISION_TOLERANCE)
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


def describe(index):
    m, b = index["model"], index["batch"]
    words = [f"{m['name']} ({m['arch']}", f"{m['n_layers']} layers", f"d {m['d_model']}",
             f"heads {m['n_heads']}/{m['n_kv_heads']}", f"head_dim {m['head_dim']}"]
    words += [w for w, on in (("q/k/v bias", m["qkv_bias"]), ("q/k norm", m["qk_norm"]),
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
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    try:
        index = load_export(args.export_dir)
        print(f"reference ({torch.__version__}, rope {args.rope}): {describe(index)}")
        loss, grads = reference_step(index, args.export_dir, args.rope)
        ok = compare(index, args.export_dir, loss, grads)
    except ExportError as e:
        print(f"check_export: {e}", file=sys.stderr)
        return 2
    print("PASS: accumbench computes the reference's loss and gradients" if ok
          else "FAIL: accumbench and the reference differ")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
