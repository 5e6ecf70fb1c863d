"""The command line that step_bench.py and hf_real_step.py share (accumbench calibrate-framework
builds one command for either): the shape, the splits, the timing and the device. No torch here,
so that hf_real_step.py --probe runs without it."""


def add_step_options(p, required=True):
    """--export, --seq-len, --batch (required unless `required` is False), --micro-batches, --warmup,
    --steps, --threads, --device, --precision (the autocast dtype)."""
    p.add_argument("--export", required=required, help="an accumbench export directory (its index.json gives the shape)")
    p.add_argument("--seq-len", type=int, required=required)
    p.add_argument("--batch", type=int, required=required)
    p.add_argument("--micro-batches", default="1", help="comma-separated micro-batch sizes, one split each")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--steps", type=int, default=2, help="timed steps per split (their median is printed)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32", help="autocast dtype")
