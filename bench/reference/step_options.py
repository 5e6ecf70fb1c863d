"""The command line that step_bench.py and hf_real_step.py share (accumbench calibrate-framework
builds one command for either): the shape, the splits, the timing, the device and the job's
storage and checkpointing (the LoRA adapters come from the export's index.json). No torch here, so
that hf_real_step.py --probe runs without it."""


def add_step_options(p, required=True):
    """--export, --seq-len, --batch (required unless `required` is False), --micro-batches, --warmup,
    --steps, --threads, --device, --precision (the autocast dtype), --weights-dtype,
    --gradient-checkpointing."""
    p.add_argument("--export", required=required, help="an accumbench export directory (its index.json gives the shape)")
    p.add_argument("--seq-len", type=int, required=required)
    p.add_argument("--batch", type=int, required=required)
    p.add_argument("--micro-batches", default="1", help="comma-separated micro-batch sizes, one split each")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--steps", type=int, default=2, help="timed steps per split (their median is printed)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32", help="autocast dtype")
    p.add_argument("--weights-dtype", choices=("fp32", "bf16", "fp16"), default="fp32",
                   help="the dtype the (base) weights are stored in; LoRA adapters stay fp32")
    p.add_argument("--gradient-checkpointing", action="store_true",
                   help="every block checkpointed (torch.utils.checkpoint, non-reentrant): its forward runs again in backward")


def lora_modules(index):
    """The module names (models.py's: 'h0.c_attn', 'layers3.q_proj') that carry an adapter: from the
    export's parameters, or, in a shape-only index (accumbench calibrate-framework), from its
    lora.linears (accumbench's block linear names, the same in every block)."""
    lora = index.get("lora")
    if lora is None:
        return None
    if index.get("parameters"):
        return {p["name"][: -len(".lora_A")] for p in index["parameters"] if p["name"].endswith(".lora_A")}
    gpt2 = index["model"]["arch"] == "gpt2"
    prefix, suffix = ("h", "") if gpt2 else ("layers", "_proj")
    return {f"{prefix}{i}.{name}{suffix}" for i in range(index["model"]["n_layers"]) for name in lora["linears"]}
